package app_test

import (
	"context"
	"crypto/tls"
	"errors"
	"io"
	"log/slog"
	"net"
	"strings"
	"testing"
	"time"

	"github.com/agentd/agentd/internal/logtest"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/grpc/metadata"
	reflectionpb "google.golang.org/grpc/reflection/grpc_reflection_v1"
	"google.golang.org/grpc/status"

	bridgev1 "github.com/agentd/agentd/gen/go/agentd/bridge/v1"
	agentdv1 "github.com/agentd/agentd/gen/go/agentd/v1"
	"github.com/agentd/agentd/internal/app"
	"github.com/agentd/agentd/internal/app/apptest"
	"github.com/agentd/agentd/internal/auth"
	"github.com/agentd/agentd/internal/config"
	"github.com/agentd/agentd/internal/tlsconf/tlstest"
)

// bearer is ctx carrying key as the caller's API key; "" carries none.
func bearer(ctx context.Context, key string) context.Context {
	if key == "" {
		return ctx
	}
	return metadata.AppendToOutgoingContext(ctx, "authorization", "Bearer "+key)
}

// adminKeys are one key per role: app (generate), watch (observer), ops
// (admin), and a tenant_admin for each of two tenants.
var adminKeys = []config.APIKey{
	{Name: "app", SHA256: auth.HashKey("sk-app"), Tenant: "acme", Roles: []string{auth.RoleGenerate}},
	{Name: "watch", SHA256: auth.HashKey("sk-watch"), Tenant: "acme", Roles: []string{auth.RoleObserver}},
	{Name: "ops", SHA256: auth.HashKey("sk-ops"), Tenant: "ops", Roles: []string{auth.RoleAdmin}},
	{Name: "acme-ops", SHA256: auth.HashKey("sk-acme-ops"), Tenant: "acme", Roles: []string{auth.RoleTenantAdmin}},
	{Name: "globex-ops", SHA256: auth.HashKey("sk-globex-ops"), Tenant: "globex", Roles: []string{auth.RoleTenantAdmin}},
}

// X-I5: with admin.listen, the admin service is served on a listener of
// its own and no longer beside the AgentService, which is not on the
// admin listener either; on it, the same keys and roles apply: observer
// reads and cannot configure, generate alone reaches nothing, tenant_admin
// sees its own tenant's cache entries alone; health stays open there.
func TestAdminListener(t *testing.T) {
	t.Parallel()
	cfg := demoConfig(t, 0)
	cfg.Admin.Listen = "127.0.0.1:0" // apptest serves it in memory
	cfg.Auth.APIKeys = adminKeys
	var logs logtest.Logs
	conn, adminConn, _ := apptest.ServeWithAdmin(t, app.Options{Config: cfg, Logger: slog.New(slog.NewTextHandler(&logs, nil))})
	agent, agentOnAdmin := agentdv1.NewAgentServiceClient(conn), agentdv1.NewAgentServiceClient(adminConn)
	admin, adminOnMain := bridgev1.NewBridgeAdminServiceClient(adminConn), bridgev1.NewBridgeAdminServiceClient(conn)

	// acme's generation puts the demo server's tool list in the cache,
	// under acme.
	stream, err := agent.Generate(bearer(t.Context(), "sk-app"))
	if err != nil {
		t.Fatal(err)
	}
	if err := stream.Send(&agentdv1.GenerateRequest{Kind: &agentdv1.GenerateRequest_Start{Start: demoStart(t)}}); err != nil {
		t.Fatal(err)
	}
	for {
		if _, err := stream.Recv(); errors.Is(err, io.EOF) {
			break
		} else if err != nil {
			t.Fatalf("acme's generation: %v", err)
		}
	}

	off := false
	size := func(key string) func() error {
		return func() error {
			res, err := admin.GetCacheStats(bearer(t.Context(), key), &bridgev1.GetCacheStatsRequest{})
			if err == nil && res.GetSize() != map[string]int64{"sk-acme-ops": 1, "sk-globex-ops": 0, "sk-watch": 1}[key] {
				t.Errorf("%s sees %d cache entries", key, res.GetSize())
			}
			return err
		}
	}
	for _, tc := range []struct {
		name string
		call func() error
		code codes.Code
		says string
	}{
		{"X-I5 the admin service is not beside the AgentService", func() error {
			_, err := adminOnMain.GetCacheStats(bearer(t.Context(), "sk-ops"), &bridgev1.GetCacheStatsRequest{})
			return err
		}, codes.Unimplemented, ""},
		{"X-I5 the AgentService is not on the admin listener", func() error {
			_, err := agentOnAdmin.Preview(bearer(t.Context(), "sk-app"), &agentdv1.PreviewRequest{Agent: &agentdv1.Agent{Provider: "mock"}})
			return err
		}, codes.Unimplemented, ""},
		{"X-I5 no key on the admin listener", func() error {
			_, err := admin.GetPoolStats(t.Context(), &bridgev1.GetPoolStatsRequest{})
			return err
		}, codes.Unauthenticated, "authentication required"},
		{"X-I5 generate alone cannot read", func() error {
			_, err := admin.GetPoolStats(bearer(t.Context(), "sk-app"), &bridgev1.GetPoolStatsRequest{})
			return err
		}, codes.PermissionDenied, `"observer"`},
		{"X-I5 generate alone cannot clear", func() error {
			_, err := admin.ClearCache(bearer(t.Context(), "sk-app"), &bridgev1.ClearCacheRequest{})
			return err
		}, codes.PermissionDenied, `"admin"`},
		{"X-I5 an observer reads every tenant's entries", size("sk-watch"), codes.OK, ""},
		{"X-I5 an observer cannot configure the cache", func() error {
			_, err := admin.ConfigureCache(bearer(t.Context(), "sk-watch"), &bridgev1.ConfigureCacheRequest{Enabled: &off})
			return err
		}, codes.PermissionDenied, `"admin"`},
		{"X-I5 a tenant_admin sees its tenant's entry", size("sk-acme-ops"), codes.OK, ""},
		{"X-I5 a tenant_admin sees nothing of another tenant's", size("sk-globex-ops"), codes.OK, ""},
		{"X-I5 a tenant_admin cannot configure the cache", func() error {
			_, err := admin.ConfigureCache(bearer(t.Context(), "sk-acme-ops"), &bridgev1.ConfigureCacheRequest{Enabled: &off})
			return err
		}, codes.PermissionDenied, `"admin"`},
		{"X-I5 a tenant_admin cannot read the pools", func() error {
			_, err := admin.GetPoolStats(bearer(t.Context(), "sk-acme-ops"), &bridgev1.GetPoolStatsRequest{})
			return err
		}, codes.PermissionDenied, `"observer"`},
		{"X-I5 a tenant_admin of another tenant clears nothing of acme's", func() error {
			_, err := admin.ClearCache(bearer(t.Context(), "sk-globex-ops"), &bridgev1.ClearCacheRequest{})
			return err
		}, codes.OK, ""},
		{"X-I5 ... so acme's entry is still there", size("sk-acme-ops"), codes.OK, ""},
		{"X-I5 an admin configures the cache", func() error {
			_, err := admin.ConfigureCache(bearer(t.Context(), "sk-ops"), &bridgev1.ConfigureCacheRequest{Enabled: &off})
			return err
		}, codes.OK, ""},
		{"X-I5 health is open on the admin listener", func() error {
			res, err := healthpb.NewHealthClient(adminConn).Check(t.Context(), &healthpb.HealthCheckRequest{Service: bridgev1.BridgeAdminService_ServiceDesc.ServiceName})
			if err == nil && res.GetStatus() != healthpb.HealthCheckResponse_SERVING {
				t.Errorf("the admin service's health: %v", res.GetStatus())
			}
			return err
		}, codes.OK, ""},
		{"X-I5 AdminService is on the admin listener", func() error {
			_, err := agentdv1.NewAdminServiceClient(adminConn).RevokeTokens(bearer(t.Context(), "sk-acme-ops"), &agentdv1.RevokeTokensRequest{})
			return err
		}, codes.OK, ""},
		{"X-I5 AdminService is not beside the AgentService", func() error {
			_, err := agentdv1.NewAdminServiceClient(conn).RevokeTokens(bearer(t.Context(), "sk-ops"), &agentdv1.RevokeTokensRequest{})
			return err
		}, codes.Unimplemented, ""},
		{"X-I5 the main listener's health knows no admin service", func() error {
			_, err := healthpb.NewHealthClient(conn).Check(t.Context(), &healthpb.HealthCheckRequest{Service: bridgev1.BridgeAdminService_ServiceDesc.ServiceName})
			return err
		}, codes.NotFound, ""},
	} {
		err := tc.call()
		if st := status.Convert(err); st.Code() != tc.code || !strings.Contains(st.Message(), tc.says) {
			t.Errorf("%s: %v; want %v saying %q", tc.name, err, tc.code, tc.says)
		}
	}
	log := logs.String()
	for _, want := range []string{
		"audit=true principal=globex-ops tenant=globex method=ClearCache scope=tenant entries=0",
		"audit=true principal=ops tenant=ops method=ConfigureCache",
	} {
		if !strings.Contains(log, want) {
			t.Errorf("X-I9 no audit line says %q:\n%s", want, log)
		}
	}
}

// X-I5: `agentd bridge` with admin.listen serves its admin service there,
// over admin.tls, under the configured keys, and no longer beside the
// BridgeService on bridge.listen.
func TestBridgeAdminListener(t *testing.T) {
	t.Parallel()
	ca := tlstest.NewCA(t)
	cfg := testConfig(t)
	cfg.Admin.Listen = "127.0.0.1:0"
	cfg.Admin.TLS = tlsFiles(t, ca.Leaf(t, "127.0.0.1"), nil, time.Now())
	cfg.Auth.APIKeys = adminKeys
	o := app.Options{Config: cfg, Logger: slog.New(slog.DiscardHandler)}
	b, err := app.NewBridge(o)
	if err != nil {
		t.Fatal(err)
	}
	addr, adminAddr, _ := serveTCP2(t, func(ctx context.Context, lis, admin net.Listener) error { return b.ServeWithAdmin(ctx, lis, admin, o) })
	plain := func(addr string) *grpc.ClientConn {
		return dial(t, addr, grpc.WithTransportCredentials(insecure.NewCredentials()))
	}
	stats := func(conn *grpc.ClientConn, key string) error {
		_, err := bridgev1.NewBridgeAdminServiceClient(conn).GetCacheStats(bearer(t.Context(), key), &bridgev1.GetCacheStatsRequest{})
		return err
	}
	overTLS := dialTLS(t, adminAddr, &tls.Config{RootCAs: ca.Pool()})
	for _, tc := range []struct {
		name string
		err  error
		want codes.Code
	}{
		{"X-I5 an observer over admin.tls", stats(overTLS, "sk-watch"), codes.OK},
		{"X-I5 generate alone over admin.tls", stats(overTLS, "sk-app"), codes.PermissionDenied},
		{"X-I5 plaintext to admin.listen", stats(plain(adminAddr), "sk-watch"), codes.Unavailable},
		{"X-I5 the admin service on bridge.listen", stats(plain(addr), "sk-watch"), codes.Unimplemented},
	} {
		if got := status.Code(tc.err); got != tc.want {
			t.Errorf("%s: %v, want %v", tc.name, tc.err, tc.want)
		}
	}
	if _, err := healthpb.NewHealthClient(plain(addr)).Check(t.Context(), &healthpb.HealthCheckRequest{Service: bridgev1.BridgeService_ServiceDesc.ServiceName}); err != nil {
		t.Errorf("the BridgeService's health on bridge.listen: %v", err)
	}
}

// X-I5: reflection: false takes reflection off every listener, the
// AgentService's and admin.listen's; health stays.
func TestReflectionOff(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name       string
		reflection bool
		want       codes.Code
	}{
		{"X-I5 reflection by default", true, codes.OK},
		{"X-I5 reflection off", false, codes.Unimplemented},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			cfg := testConfig(t)
			cfg.Admin.Listen = "127.0.0.1:0"
			cfg.Reflection = tc.reflection
			conn, adminConn, _ := apptest.ServeWithAdmin(t, app.Options{Config: cfg, Logger: slog.New(slog.DiscardHandler)})
			for name, c := range map[string]*grpc.ClientConn{"listen": conn, "admin.listen": adminConn} {
				if got := status.Code(listServices(t.Context(), c)); got != tc.want {
					t.Errorf("reflection on %s: %v, want %v", name, got, tc.want)
				}
				if _, err := healthpb.NewHealthClient(c).Check(t.Context(), &healthpb.HealthCheckRequest{}); err != nil {
					t.Errorf("health on %s: %v", name, err)
				}
			}
		})
	}
}

// listServices asks conn's server reflection for its services.
func listServices(ctx context.Context, conn *grpc.ClientConn) error {
	stream, err := reflectionpb.NewServerReflectionClient(conn).ServerReflectionInfo(ctx)
	if err != nil {
		return err
	}
	// A Send the server already refused is io.EOF: Recv has the status.
	if err := stream.Send(&reflectionpb.ServerReflectionRequest{MessageRequest: &reflectionpb.ServerReflectionRequest_ListServices{}}); err != nil && !errors.Is(err, io.EOF) {
		return err
	}
	_, err = stream.Recv()
	return err
}

// serveTCP2 is startTCP with a second listener, for admin.listen.
func serveTCP2(t *testing.T, serve func(ctx context.Context, lis, admin net.Listener) error) (addr, adminAddr string, stop func()) {
	t.Helper()
	admin, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr, stop = startTCP(t, func(ctx context.Context, lis net.Listener) error { return serve(ctx, lis, admin) })
	return addr, admin.Addr().String(), stop
}
