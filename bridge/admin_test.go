package bridge

import (
	"context"
	"log/slog"
	"net"
	"slices"
	"strings"
	"testing"

	"github.com/agentd/agentd/internal/logtest"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"
	"google.golang.org/grpc/test/bufconn"

	bridgev1 "github.com/agentd/agentd/gen/go/agentd/bridge/v1"
	"github.com/agentd/agentd/internal/auth"
	"github.com/agentd/agentd/internal/config"
)

// X-I5: behind internal/auth's interceptors, as agentd serves it, a
// caller with tenant_admin reaches its own tenant's cache entries alone:
// its stats count them, its clear drops them, its invalidation of another
// tenant's entry finds nothing; an admin sees every tenant's. What is not
// tenant-scoped needs admin (or observer) all the same. Every write leaves
// an audit line with the principal and its tenant.
func TestTenantAdmin(t *testing.T) {
	t.Parallel()
	f, logs, fill := loggedFixture(t)
	fill("acme", refSpec("tools", "tools"))
	fill("acme", refSpec("tools", "tools")) // a hit
	fill("acme", refSpec("demo", "demo"))
	fill("globex", refSpec("tools", "tools"))

	authn, err := auth.New(config.Config{Auth: config.Auth{APIKeys: []config.APIKey{
		{Name: "acme-ops", SHA256: auth.HashKey("sk-acme-ops"), Tenant: "acme", Roles: []string{auth.RoleTenantAdmin}},
		{Name: "ops", SHA256: auth.HashKey("sk-ops"), Tenant: "ops", Roles: []string{auth.RoleAdmin}},
	}}}, slog.New(slog.DiscardHandler))
	if err != nil {
		t.Fatal(err)
	}
	admin := serveAdmin(t, f, authn)
	as := func(key string) context.Context {
		return metadata.AppendToOutgoingContext(t.Context(), "authorization", "Bearer "+key)
	}
	stats := func(key string) [3]int64 {
		t.Helper()
		s, err := admin.GetCacheStats(as(key), &bridgev1.GetCacheStatsRequest{})
		if err != nil {
			t.Fatalf("GetCacheStats: %v", err)
		}
		if !s.GetSettings().GetEnabled() || s.GetSettings().GetMaxEntries() != 100 {
			t.Errorf("GetCacheStats settings %v, want the cache's", s.GetSettings())
		}
		return [3]int64{s.GetSize(), s.GetHits(), s.GetMisses()}
	}
	want := func(name string, got, want [3]int64) {
		t.Helper()
		if got != want {
			t.Errorf("X-I5 %s: size, hits, misses = %v, want %v", name, got, want)
		}
	}
	want("a tenant_admin's stats count its tenant's entries alone", stats("sk-acme-ops"), [3]int64{2, 1, 2})
	want("an admin's stats count every tenant's", stats("sk-ops"), [3]int64{3, 1, 3})

	invalidate := func(key, tenant string) bool {
		t.Helper()
		res, err := admin.InvalidateCache(as(key), &bridgev1.InvalidateCacheRequest{Server: refSpec("tools", "tools"), Tenant: tenant})
		if err != nil {
			t.Fatalf("InvalidateCache: %v", err)
		}
		return res.GetRemoved()
	}
	if invalidate("sk-acme-ops", "globex") {
		t.Error("X-I5 a tenant_admin invalidated another tenant's entry")
	}
	want("another tenant's entry after a tenant_admin invalidated it", stats("sk-ops"), [3]int64{3, 1, 3})
	if !invalidate("sk-acme-ops", "") {
		t.Error("X-I5 a tenant_admin naming no tenant did not invalidate its own tenant's entry")
	}
	if _, err := admin.ClearCache(as("sk-acme-ops"), &bridgev1.ClearCacheRequest{}); err != nil {
		t.Fatal(err)
	}
	want("a tenant_admin's stats after its clear", stats("sk-acme-ops"), [3]int64{0, 0, 0})
	want("an admin's stats after a tenant_admin's clear", stats("sk-ops"), [3]int64{1, 1, 3})
	if !invalidate("sk-ops", "globex") {
		t.Error("an admin could not invalidate globex's entry")
	}

	off := false
	for _, tc := range []struct {
		name string
		call func(context.Context) error
		need string
	}{
		{"ConfigureCache", func(ctx context.Context) error {
			_, err := admin.ConfigureCache(ctx, &bridgev1.ConfigureCacheRequest{Enabled: &off})
			return err
		}, `"admin"`},
		{"ResetCache", func(ctx context.Context) error {
			_, err := admin.ResetCache(ctx, &bridgev1.ResetCacheRequest{})
			return err
		}, `"admin"`},
		{"GetPoolStats", func(ctx context.Context) error {
			_, err := admin.GetPoolStats(ctx, &bridgev1.GetPoolStatsRequest{})
			return err
		}, `"observer"`},
	} {
		if st := status.Convert(tc.call(as("sk-acme-ops"))); st.Code() != codes.PermissionDenied || !strings.Contains(st.Message(), tc.need) {
			t.Errorf("X-I5 a tenant_admin's %s: %v; want PermissionDenied naming %s", tc.name, st.Err(), tc.need)
		}
	}
	if s, _ := admin.GetCacheStats(as("sk-ops"), &bridgev1.GetCacheStatsRequest{}); !s.GetSettings().GetEnabled() {
		t.Error("a tenant_admin's refused ConfigureCache changed the settings")
	}

	log := logs.String()
	for _, line := range [][]string{
		{`msg="admin change"`, "audit=true principal=acme-ops tenant=acme method=InvalidateCache", "entry_tenant=globex removed=false"},
		{`msg="admin change"`, "audit=true principal=acme-ops tenant=acme method=InvalidateCache", "entry_tenant=acme removed=true"},
		{`msg="admin change"`, "audit=true principal=acme-ops tenant=acme method=ClearCache scope=tenant entries=1"},
		{`msg="admin change"`, "audit=true principal=ops tenant=ops method=InvalidateCache", "entry_tenant=globex removed=true"},
	} {
		if !slices.ContainsFunc(strings.Split(log, "\n"), func(l string) bool {
			return !slices.ContainsFunc(line, func(w string) bool { return !strings.Contains(l, w) })
		}) {
			t.Errorf("X-I9 no log line has all of %q:\n%s", line, log)
		}
	}
}

// serveAdmin serves f's admin service behind authn's interceptors, until
// the test ends, and returns a client of it.
func serveAdmin(t *testing.T, f *fixture, authn *auth.Authenticator) bridgev1.BridgeAdminServiceClient {
	t.Helper()
	srv := grpc.NewServer(grpc.ChainUnaryInterceptor(authn.UnaryInterceptor()))
	f.svc.Admin().Register(srv)
	lis := bufconn.Listen(1 << 16)
	served := make(chan struct{})
	go func() {
		defer close(served)
		_ = srv.Serve(lis)
	}()
	conn, err := grpc.NewClient("passthrough:///admin", grpc.WithTransportCredentials(insecure.NewCredentials()),
		grpc.WithContextDialer(func(ctx context.Context, _ string) (net.Conn, error) { return lis.DialContext(ctx) }))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		conn.Close()
		srv.Stop()
		<-served
	})
	return bridgev1.NewBridgeAdminServiceClient(conn)
}

// loggedFixture is a fixture whose log is the returned Logs, and a fill
// that lists a server's tools in a session of tenant's, writing its cache
// entry (or hitting it).
func loggedFixture(t *testing.T) (*fixture, *logtest.Logs, func(tenant string, spec *bridgev1.ServerSpec)) {
	t.Helper()
	logs := new(logtest.Logs)
	f := newFixtureOptions(t, nil, func(o *Options) { o.Logger = slog.New(slog.NewTextHandler(logs, nil)) })
	return f, logs, func(tenant string, spec *bridgev1.ServerSpec) {
		t.Helper()
		id := openAs(t, f.client, tenant, spec)
		list(t, f.client, id)
		closeSession(t, f.client, id)
	}
}
