package app_test

import (
	"context"
	"log/slog"
	"strings"
	"testing"

	"google.golang.org/grpc/codes"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/grpc/metadata"
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
	cfg := config.Default()
	cfg.StateDir = t.TempDir()
	cfg.Bridge.Pool.Warm = 0
	cfg.Auth.APIKeys = []config.APIKey{
		{Name: "app", SHA256: auth.HashKey("sk-app-secret"), Tenant: "acme", Roles: []string{auth.RoleGenerate}},
		{Name: "watch", SHA256: auth.HashKey("sk-watch-secret"), Tenant: "acme", Roles: []string{auth.RoleObserver}},
		{Name: "ops", SHA256: auth.HashKey("sk-ops-secret"), Tenant: "acme", Roles: []string{auth.RoleAdmin}},
	}
	var logs apptest.Logs
	conn, _ := apptest.Serve(t, app.Options{Config: cfg, Logger: slog.New(slog.NewTextHandler(&logs, nil))})
	agent := agentdv1.NewAgentServiceClient(conn)
	admin := bridgev1.NewBridgeAdminServiceClient(conn)
	as := func(key string) context.Context {
		if key == "" {
			return t.Context()
		}
		return metadata.AppendToOutgoingContext(t.Context(), "authorization", "Bearer "+key)
	}
	preview := func(ctx context.Context) error {
		_, err := agent.Preview(ctx, &agentdv1.PreviewRequest{
			Agent:    &agentdv1.Agent{Provider: "mock"},
			Messages: []*agentdv1.Message{{Role: agentdv1.Role_ROLE_USER, Parts: []*agentdv1.Part{{Kind: &agentdv1.Part_Text{Text: "hi"}}}}},
		})
		return err
	}
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
		{"X-I2 Preview with an unknown key", func() error { return preview(as("sk-guess")) }, codes.Unauthenticated, "authentication required"},
		{"X-I2 Preview with generate", func() error { return preview(as("sk-app-secret")) }, codes.OK, ""},
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
