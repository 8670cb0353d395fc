package app_test

import (
	"context"
	"log/slog"
	"slices"
	"strings"
	"testing"

	"github.com/agentd/agentd/internal/logtest"

	"google.golang.org/grpc/codes"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/grpc/status"

	bridgev1 "github.com/agentd/agentd/gen/go/agentd/bridge/v1"
	agentdv1 "github.com/agentd/agentd/gen/go/agentd/v1"
	"github.com/agentd/agentd/internal/app"
	"github.com/agentd/agentd/internal/app/apptest"
	"github.com/agentd/agentd/internal/auth"
	"github.com/agentd/agentd/internal/config"
)

// X-I2: with API keys configured, agentd serves only callers that send
// one: the AgentService needs generate, the admin API's reads observer and
// its writes admin (PermissionDenied naming the role); health stays open;
// a refused credential never shows in the log.
func TestAPIKeys(t *testing.T) {
	t.Parallel()
	cfg := testConfig(t)
	cfg.Auth.APIKeys = []config.APIKey{
		{Name: "app", SHA256: auth.HashKey("sk-app-secret"), Tenant: "acme", Roles: []string{auth.RoleGenerate}},
		{Name: "watch", SHA256: auth.HashKey("sk-watch-secret"), Tenant: "acme", Roles: []string{auth.RoleObserver}},
		{Name: "ops", SHA256: auth.HashKey("sk-ops-secret"), Tenant: "acme", Roles: []string{auth.RoleAdmin}},
	}
	var logs logtest.Logs
	conn, _ := apptest.Serve(t, app.Options{Config: cfg, Logger: slog.New(slog.NewTextHandler(&logs, nil))})
	agent := agentdv1.NewAgentServiceClient(conn)
	admin := bridgev1.NewBridgeAdminServiceClient(conn)
	as := func(key string) context.Context { return bearer(t.Context(), key) }
	generate := func(ctx context.Context) error {
		stream, err := agent.Generate(ctx)
		if err == nil {
			_, err = stream.Recv()
		}
		return err
	}
	off := false
	for _, tc := range []struct {
		name string
		call func() error
		code codes.Code
		says string
	}{
		{"X-I2 Generate without a key", func() error { return generate(as("")) }, codes.Unauthenticated, "authentication required"},
		{"X-I2 Preview with an unknown key", func() error { return previewAs(t.Context(), conn, "sk-guess") }, codes.Unauthenticated, "authentication required"},
		{"X-I2 Preview with generate", func() error { return previewAs(t.Context(), conn, "sk-app-secret") }, codes.OK, ""},
		{"X-I2 the admin API's reads need observer", func() error {
			_, err := admin.GetCacheStats(as("sk-app-secret"), &bridgev1.GetCacheStatsRequest{})
			return err
		}, codes.PermissionDenied, `"observer"`},
		{"X-I2 an observer reads", func() error {
			_, err := admin.GetPoolStats(as("sk-watch-secret"), &bridgev1.GetPoolStatsRequest{})
			return err
		}, codes.OK, ""},
		{"X-I2 an observer cannot configure the cache", func() error {
			_, err := admin.ConfigureCache(as("sk-watch-secret"), &bridgev1.ConfigureCacheRequest{Enabled: &off})
			return err
		}, codes.PermissionDenied, `"admin"`},
		{"X-I2 an admin reads", func() error {
			_, err := admin.GetCacheStats(as("sk-ops-secret"), &bridgev1.GetCacheStatsRequest{})
			return err
		}, codes.OK, ""},
		{"X-I2 health is open", func() error {
			_, err := healthpb.NewHealthClient(conn).Check(as(""), &healthpb.HealthCheckRequest{})
			return err
		}, codes.OK, ""},
	} {
		err := tc.call()
		if st := status.Convert(err); st.Code() != tc.code || !strings.Contains(st.Message(), tc.says) {
			t.Errorf("%s: %v; want %v saying %q", tc.name, err, tc.code, tc.says)
		}
	}
	if stats, err := admin.GetCacheStats(as("sk-ops-secret"), &bridgev1.GetCacheStatsRequest{}); err != nil || !stats.GetSettings().GetEnabled() {
		t.Errorf("cache settings %v, %v: the observer's refused ConfigureCache changed them", stats.GetSettings(), err)
	}
	for _, secret := range []string{"sk-guess", "sk-app-secret", "sk-watch-secret", "sk-ops-secret"} {
		if strings.Contains(logs.String(), secret) {
			t.Errorf("the log quotes the key %s", secret)
		}
	}
}

// A generation belongs to the tenant of the key that started it: another
// tenant's resume of it is NotFound, as for an unknown id; its owner's
// resume works. X-I9: the resume, the approval decision and an admin write
// each leave an audit line naming the key, never the key itself.
func TestTenantsAndAudit(t *testing.T) {
	t.Parallel()
	cfg := demoConfig(t, 0)
	cfg.Auth.APIKeys = []config.APIKey{
		{Name: "acme-app", SHA256: auth.HashKey("sk-acme"), Tenant: "acme", Roles: []string{auth.RoleGenerate}},
		{Name: "globex-app", SHA256: auth.HashKey("sk-globex"), Tenant: "globex", Roles: []string{auth.RoleGenerate}},
		{Name: "ops", SHA256: auth.HashKey("sk-ops"), Tenant: "acme", Roles: []string{auth.RoleAdmin}},
	}
	var logs logtest.Logs
	conn, _ := apptest.Serve(t, app.Options{Config: cfg, Logger: slog.New(slog.NewTextHandler(&logs, nil))})
	agent := agentdv1.NewAgentServiceClient(conn)
	as := func(key string) context.Context { return bearer(t.Context(), key) }
	// run sends first and answers nothing: a gated call pauses the
	// generation once the client half-closes.
	run := func(ctx context.Context, first *agentdv1.GenerateRequest) (*agentdv1.GenerateResponse, error) {
		stream, err := agent.Generate(ctx)
		if err != nil {
			return nil, err
		}
		if err := stream.Send(first); err != nil {
			return nil, err
		}
		for {
			ev, err := stream.Recv()
			if err != nil {
				return nil, err
			}
			switch {
			case ev.GetApprovalRequest() != nil:
				_ = stream.CloseSend()
			case ev.GetPaused() != nil || ev.GetCompleted() != nil:
				return ev, nil
			}
		}
	}
	start := exampleStart(t, "approval-start.json")
	ev, err := run(as("sk-acme"), &agentdv1.GenerateRequest{Kind: &agentdv1.GenerateRequest_Start{Start: start}})
	if err != nil || ev.GetPaused() == nil || len(ev.GetPaused().GetApprovalRequests()) != 1 {
		t.Fatalf("start: %v, %v; want a pause with one approval request", ev, err)
	}
	paused := ev.GetPaused()
	resume := func(id string) *agentdv1.GenerateRequest {
		req := paused.GetApprovalRequests()[0]
		return &agentdv1.GenerateRequest{Kind: &agentdv1.GenerateRequest_Resume{Resume: &agentdv1.ResumeGeneration{
			GenerationId: id, Agent: start.GetAgent(),
			ApprovalDecisions: []*agentdv1.ApprovalDecision{{RequestId: req.GetId(), Approved: true, Digest: req.GetDigest()}},
		}}}
	}
	_, errOther := run(as("sk-globex"), resume(paused.GetGenerationId()))
	const unknown = "gen_00000000000000000000000000000000"
	_, errUnknown := run(as("sk-globex"), resume(unknown))
	other, unknownSt := status.Convert(errOther), status.Convert(errUnknown)
	if other.Code() != codes.NotFound || unknownSt.Code() != codes.NotFound ||
		strings.ReplaceAll(other.Message(), paused.GetGenerationId(), unknown) != unknownSt.Message() {
		t.Errorf("another tenant's resume: %v; an unknown id's: %v; want both NotFound, alike", errOther, errUnknown)
	}
	ev, err = run(as("sk-acme"), resume(paused.GetGenerationId()))
	if err != nil || ev.GetCompleted() == nil {
		t.Fatalf("the owner's resume: %v, %v; want completed", ev, err)
	}
	off := false
	if _, err := bridgev1.NewBridgeAdminServiceClient(conn).ConfigureCache(as("sk-ops"), &bridgev1.ConfigureCacheRequest{Enabled: &off}); err != nil {
		t.Fatal(err)
	}
	log := logs.String()
	id := paused.GetGenerationId()
	for _, want := range [][]string{
		{`msg="generation resumed"`, "audit=true principal=acme-app tenant=acme generation=" + id, "decisions=1"},
		{`msg="approval decided"`, "audit=true principal=acme-app tenant=acme generation=" + id, "tool=echo server=demo", "approved=true"},
		{`msg="admin change"`, "audit=true principal=ops tenant=acme method=ConfigureCache", `old="{Enabled:true`, `new="{Enabled:false`},
	} {
		if !slices.ContainsFunc(strings.Split(log, "\n"), func(line string) bool {
			return !slices.ContainsFunc(want, func(w string) bool { return !strings.Contains(line, w) })
		}) {
			t.Errorf("no log line has all of %q:\n%s", want, log)
		}
	}
	for _, key := range []string{"sk-acme", "sk-globex", "sk-ops"} {
		if strings.Contains(log, key) {
			t.Errorf("the log quotes the key %s", key)
		}
	}
}
