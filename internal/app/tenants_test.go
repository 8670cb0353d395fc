package app_test

import (
	"errors"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/agentd/agentd/internal/logtest"

	"google.golang.org/genproto/googleapis/rpc/errdetails"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	agentdv1 "github.com/agentd/agentd/gen/go/agentd/v1"
	"github.com/agentd/agentd/internal/app"
	"github.com/agentd/agentd/internal/app/apptest"
	"github.com/agentd/agentd/internal/auth"
	"github.com/agentd/agentd/internal/config"
)

// X-I7, end to end from the configuration: each tenant's generations use
// its own provider key (tenants.<name>.providers), a tenant that sets
// none the global one; tenants.<name>.servers restricts what it may ref:;
// tenants.<name>.limits holds it, and only it, with RESOURCE_EXHAUSTED,
// RetryInfo and a QuotaFailure. A tenant the configuration does not know
// is PermissionDenied. No provider key reaches the log.
func TestTenantConfiguration(t *testing.T) {
	t.Parallel()
	var mu sync.Mutex
	var keys []string // the Authorization of each provider request
	api := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		keys = append(keys, r.Header.Get("Authorization"))
		mu.Unlock()
		chatTurns(w, 2)
	}))
	t.Cleanup(api.Close)
	cfg := demoConfig(t, 0)
	cfg.Providers = map[string]config.Provider{"openai": {APIKey: "sk-global-provider", BaseURL: api.URL + "/v1", MaxRetries: -1}}
	cfg.Auth.APIKeys = []config.APIKey{
		{Name: "acme-app", SHA256: auth.HashKey("sk-acme-caller"), Tenant: "acme", Roles: []string{auth.RoleGenerate}},
		{Name: "globex-app", SHA256: auth.HashKey("sk-globex-caller"), Tenant: "globex", Roles: []string{auth.RoleGenerate}},
		{Name: "initech-app", SHA256: auth.HashKey("sk-initech-caller"), Tenant: "initech", Roles: []string{auth.RoleGenerate}},
	}
	cfg.Tenants = map[string]config.Tenant{
		"acme":   {Providers: map[string]config.Provider{"openai": {APIKey: "sk-acme-provider"}}, Servers: []string{"demo"}},
		"globex": {Servers: []string{}, Limits: &config.Limits{GenerationsPerMinute: 1}},
	}
	// Load refuses a key of a tenant not configured; a token's tenant
	// claim can still name one, as this key does past Validate.
	if err := cfg.Validate(); err == nil || !strings.Contains(err.Error(), `auth.api_keys[2].tenant: tenant "initech" is not configured`) {
		t.Fatalf("Validate = %v; want the initech key refused", err)
	}
	var logs logtest.Logs
	conn, _ := apptest.Serve(t, app.Options{Config: cfg, Logger: slog.New(slog.NewTextHandler(&logs, nil))})
	client := agentdv1.NewAgentServiceClient(conn)
	generate := func(key string) (*agentdv1.GenerateResponse, error) {
		stream, err := client.Generate(bearer(t.Context(), key))
		if err != nil {
			return nil, err
		}
		err = stream.Send(&agentdv1.GenerateRequest{Kind: &agentdv1.GenerateRequest_Start{Start: &agentdv1.StartGeneration{
			Agent:    &agentdv1.Agent{Provider: "openai", Model: "gpt-4o-mini"},
			Messages: []*agentdv1.Message{{Role: agentdv1.Role_ROLE_USER, Parts: []*agentdv1.Part{{Kind: &agentdv1.Part_Text{Text: "hi"}}}}},
		}}})
		if err != nil {
			return nil, err
		}
		var last *agentdv1.GenerateResponse
		for {
			ev, err := stream.Recv()
			if err != nil {
				if errors.Is(err, io.EOF) {
					return last, nil
				}
				return last, err
			}
			last = ev
		}
	}
	refDemo := func(key string) error {
		_, err := client.Preview(bearer(t.Context(), key), &agentdv1.PreviewRequest{
			Agent:    &agentdv1.Agent{Provider: "openai", Model: "gpt-4o-mini", Mcps: []*agentdv1.MCPServer{{Transport: &agentdv1.MCPServer_Ref{Ref: "demo"}}}},
			Messages: []*agentdv1.Message{{Role: agentdv1.Role_ROLE_USER, Parts: []*agentdv1.Part{{Kind: &agentdv1.Part_Text{Text: "hi"}}}}},
		})
		return err
	}

	for _, tc := range []struct{ caller, key, want string }{
		{"acme", "sk-acme-caller", "Bearer sk-acme-provider"},
		{"globex", "sk-globex-caller", "Bearer sk-global-provider"},
	} {
		mu.Lock()
		keys = nil
		mu.Unlock()
		last, err := generate(tc.key)
		if err != nil || last.GetCompleted() == nil {
			t.Fatalf("%s's generation: %v, last event %v", tc.caller, err, last)
		}
		mu.Lock()
		got := keys
		mu.Unlock()
		if len(got) != 1 || got[0] != tc.want {
			t.Errorf("X-I7 %s's generation reached the provider with %q; want %q", tc.caller, got, tc.want)
		}
	}

	_, err := generate("sk-globex-caller")
	st := status.Convert(err)
	if st.Code() != codes.ResourceExhausted {
		t.Fatalf("X-I7 globex's second generation in a minute of 1: %v; want ResourceExhausted", err)
	}
	var retry *errdetails.RetryInfo
	var quota *errdetails.QuotaFailure
	for _, d := range st.Details() {
		switch d := d.(type) {
		case *errdetails.RetryInfo:
			retry = d
		case *errdetails.QuotaFailure:
			quota = d
		}
	}
	if d := retry.GetRetryDelay().AsDuration(); d <= 0 || d > time.Minute {
		t.Errorf("X-I7 RetryInfo %v; want a delay within the minute", retry)
	}
	if v := quota.GetViolations(); len(v) != 1 || v[0].GetSubject() != "tenant:globex" || v[0].GetDescription() != "tenants.globex.limits.generations_per_minute" {
		t.Errorf("X-I7 QuotaFailure %v; want tenant:globex over tenants.globex.limits.generations_per_minute", quota)
	}
	if last, err := generate("sk-acme-caller"); err != nil || last.GetCompleted() == nil {
		t.Errorf("X-I7 acme held by globex's limit: %v", err)
	}

	if err := refDemo("sk-acme-caller"); err != nil {
		t.Errorf("X-I7 acme's ref to a server its tenants.acme.servers lists: %v", err)
	}
	if st := status.Convert(refDemo("sk-globex-caller")); st.Code() != codes.PermissionDenied || !strings.Contains(st.Message(), "tenants.globex.servers") {
		t.Errorf("X-I7 globex's ref beyond tenants.globex.servers: %v %q; want PermissionDenied naming the setting", st.Code(), st.Message())
	}
	if st := status.Convert(refDemo("sk-initech-caller")); st.Code() != codes.PermissionDenied || !strings.Contains(st.Message(), `"initech"`) {
		t.Errorf("X-I7 a tenant the configuration does not know: %v %q; want PermissionDenied", st.Code(), st.Message())
	}
	for _, secret := range []string{"sk-acme-provider", "sk-global-provider"} {
		if strings.Contains(logs.String(), secret) {
			t.Errorf("the log quotes the provider key %s", secret)
		}
	}
}
