package app_test

import (
	"context"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	agentdv1 "github.com/agentd/agentd/gen/go/agentd/v1"
	"github.com/agentd/agentd/internal/app"
	"github.com/agentd/agentd/internal/app/apptest"
	"github.com/agentd/agentd/internal/auth"
	"github.com/agentd/agentd/internal/config"
)

// R-P1, X-I7: a generation for a provider that agentd's configuration
// gives no API key is refused before it starts, FailedPrecondition, naming
// the provider and the variable and setting to set (and, for a configured
// tenant, its own setting): no started event, and no generation recorded.
// Preview says the same. A tenant that set its own key for the provider
// runs; so does the router, until its model routes to the provider.
func TestProviderWithoutKey(t *testing.T) {
	t.Parallel()
	api := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { chatTurns(w, 2) }))
	t.Cleanup(api.Close)
	cfg := demoConfig(t, 0)
	cfg.Providers = map[string]config.Provider{"openai": {BaseURL: api.URL + "/v1", MaxRetries: -1}}
	cfg.Auth.APIKeys = []config.APIKey{
		{Name: "acme-app", SHA256: auth.HashKey("sk-acme-caller"), Tenant: "acme", Roles: []string{auth.RoleGenerate}},
		{Name: "globex-app", SHA256: auth.HashKey("sk-globex-caller"), Tenant: "globex", Roles: []string{auth.RoleGenerate}},
	}
	cfg.Tenants = map[string]config.Tenant{
		"acme":   {Providers: map[string]config.Provider{"openai": {APIKey: "sk-acme-provider"}}},
		"globex": {},
	}
	conn, _ := apptest.Serve(t, app.Options{Config: cfg, Logger: slog.New(slog.DiscardHandler)})
	client := agentdv1.NewAgentServiceClient(conn)
	hi := []*agentdv1.Message{{Role: agentdv1.Role_ROLE_USER, Parts: []*agentdv1.Part{{Kind: &agentdv1.Part_Text{Text: "hi"}}}}}
	// first is the first thing the stream of a start says: its first
	// event, or the error that ends it.
	first := func(ctx context.Context, agent *agentdv1.Agent) (*agentdv1.GenerateResponse, error) {
		stream, err := client.Generate(ctx)
		if err != nil {
			return nil, err
		}
		if err := stream.Send(&agentdv1.GenerateRequest{Kind: &agentdv1.GenerateRequest_Start{Start: &agentdv1.StartGeneration{Agent: agent, Messages: hi}}}); err != nil {
			return nil, err
		}
		return stream.Recv()
	}
	globex := bearer(t.Context(), "sk-globex-caller")
	for _, agent := range []*agentdv1.Agent{
		{Provider: "openai", Model: "gpt-4o-mini"},
		{Provider: "router", Model: "openai/gpt-4o-mini"},
	} {
		ev, err := first(globex, agent)
		st := status.Convert(err)
		if st.Code() != codes.FailedPrecondition || ev.GetStarted() != nil {
			t.Fatalf("%s: first event %v, status %v; want FailedPrecondition before started", agent.GetProvider(), ev, st)
		}
		_, perr := client.Preview(globex, &agentdv1.PreviewRequest{Agent: agent, Messages: hi})
		if pst := status.Convert(perr); pst.Code() != st.Code() || pst.Message() != strings.Replace(st.Message(), "start.", "", 1) {
			t.Errorf("%s: Preview says %v; want what Generate said, %v", agent.GetProvider(), pst, st)
		}
		for _, want := range []string{"agent.provider: openai: no API key is configured", "set OPENAI_API_KEY or providers.openai.api_key", "or under tenants.globex.providers for this tenant alone"} {
			if !strings.Contains(st.Message(), want) {
				t.Errorf("%s: %q does not say %q", agent.GetProvider(), st.Message(), want)
			}
		}
	}
	list, err := client.ListGenerations(globex, &agentdv1.ListGenerationsRequest{})
	if err != nil || len(list.GetGenerations()) != 0 {
		t.Errorf("generations recorded for the refused starts: %v, %v", list.GetGenerations(), err)
	}
	// Another problem with the request makes it invalid, the key's among
	// its problems.
	_, err = first(globex, &agentdv1.Agent{Provider: "openai", Model: "gpt-4o-mini", MaxToolTurns: new(int32(0))})
	if st := status.Convert(err); st.Code() != codes.InvalidArgument || !strings.Contains(st.Message(), "max_tool_turns") || !strings.Contains(st.Message(), "OPENAI_API_KEY") {
		t.Errorf("an invalid request without a key: %v; want InvalidArgument naming both problems", st)
	}
	ev, err := first(bearer(t.Context(), "sk-acme-caller"), &agentdv1.Agent{Provider: "openai", Model: "gpt-4o-mini"})
	if err != nil || ev.GetStarted() == nil {
		t.Errorf("acme, with its own key: %v, %v; want it started", ev, err)
	}
}
