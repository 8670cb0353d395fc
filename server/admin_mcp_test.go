package server_test

import (
	"context"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/testing/protocmp"
	"google.golang.org/protobuf/types/known/durationpb"
	"google.golang.org/protobuf/types/known/timestamppb"

	bridgev1 "github.com/agentd/agentd/gen/go/agentd/bridge/v1"
	agentdv1 "github.com/agentd/agentd/gen/go/agentd/v1"
	"github.com/agentd/agentd/internal/auth"
	"github.com/agentd/agentd/internal/config"
	"github.com/agentd/agentd/internal/logtest"
	"github.com/agentd/agentd/internal/oauthtokens"
	"github.com/agentd/agentd/server"
)

// fakeBridgeAdmin is a server.BridgeAdmin over a fixed cache and pools; fail,
// when set, is every call's error. It records the requests it gets.
type fakeBridgeAdmin struct {
	pools      []*bridgev1.PoolStats
	entries    []*bridgev1.CacheEntry
	fail       error
	stats      []*bridgev1.GetCacheStatsRequest
	invalidate []*bridgev1.InvalidateCacheEntriesRequest
}

func (f *fakeBridgeAdmin) GetPoolStats(context.Context, *bridgev1.GetPoolStatsRequest, ...grpc.CallOption) (*bridgev1.GetPoolStatsResponse, error) {
	return &bridgev1.GetPoolStatsResponse{Pools: f.pools, OpenSessions: 4}, f.fail
}

func (f *fakeBridgeAdmin) GetCacheStats(_ context.Context, req *bridgev1.GetCacheStatsRequest, _ ...grpc.CallOption) (*bridgev1.GetCacheStatsResponse, error) {
	f.stats = append(f.stats, req)
	hits := int64(10)
	if req.Tenant != nil {
		hits = 3
	}
	return &bridgev1.GetCacheStatsResponse{Size: 3, Hits: hits, Misses: 5,
		Settings: &bridgev1.CacheSettings{Enabled: true, Ttl: durationpb.New(5 * time.Minute), MaxEntries: 100}}, f.fail
}

func (f *fakeBridgeAdmin) ListCacheEntries(context.Context, *bridgev1.ListCacheEntriesRequest, ...grpc.CallOption) (*bridgev1.ListCacheEntriesResponse, error) {
	return &bridgev1.ListCacheEntriesResponse{Entries: f.entries}, f.fail
}

func (f *fakeBridgeAdmin) InvalidateCacheEntries(_ context.Context, req *bridgev1.InvalidateCacheEntriesRequest, _ ...grpc.CallOption) (*bridgev1.InvalidateCacheEntriesResponse, error) {
	f.invalidate = append(f.invalidate, req)
	return &bridgev1.InvalidateCacheEntriesResponse{Removed: 2}, f.fail
}

var written = time.Date(2026, 12, 5, 12, 0, 0, 0, time.UTC)

func newFakeBridgeAdmin() *fakeBridgeAdmin {
	return &fakeBridgeAdmin{
		pools: []*bridgev1.PoolStats{
			{ServerName: "notes", Key: "k1", Tenant: "acme", Warm: 1, Busy: 2, Starting: 1, MaxProcesses: 4, Spawned: 9, Retired: 5, Crashed: 1, Waits: 2, Shared: true},
			{ServerName: "notes", Key: "k1", Tenant: "globex", Warm: 1},
			{ServerName: "search", Key: "k2", Busy: 1},
			{ServerName: "command: tool", Key: "k3", Tenant: "globex"},
		},
		entries: []*bridgev1.CacheEntry{
			{Key: "e1", ServerName: "notes", Tenant: "globex", Revision: 2, Tools: 3, WrittenAt: timestamppb.New(written), ExpiresAt: timestamppb.New(written.Add(5 * time.Minute))},
			{Key: "e2", ServerName: "notes", Tenant: "acme", Revision: 1, Tools: 3, WrittenAt: timestamppb.New(written), ExpiresAt: timestamppb.New(written.Add(5 * time.Minute))},
		},
	}
}

// mcpConfig registers a stdio server shared per tenant, a URL server
// whose URL carries a user, a path and a query, and a stdio server shared
// globally; acme may use notes alone, globex every server.
func mcpConfig() *config.Config {
	return &config.Config{
		Bridge: config.Bridge{Servers: map[string]config.Server{
			"notes":  {Command: "/opt/mcp/bin/notes-mcp", Args: []string{"--token", "cnry-arg"}, Env: map[string]string{"NOTES_KEY": "cnry-env"}, Shared: config.SharedPerTenant},
			"search": {URL: "https://user:cnry-pass@search.example.com:8443/v1/cnry-path?key=cnry-query", Headers: map[string]string{"X-Key": "cnry-header"}},
			"clock":  {Command: "clock-mcp", Shared: config.SharedGlobal},
		}},
		Tenants: map[string]config.Tenant{"acme": {Servers: []string{"notes"}}, "globex": {}},
	}
}

// X-I6: ListMCPServers returns the registered servers without a secret
// (a command by its base name, a URL by its scheme, host and port), the
// tenants that may use each (none listed when every one may), the
// bridge's pools, open sessions and schema cache. A tenant_admin sees
// the servers its tenant may use, the pools that serve it and its own
// entries and lookups, not the open sessions.
func TestListMCPServers(t *testing.T) {
	t.Parallel()
	every := &agentdv1.ListMCPServersResponse{
		Servers: []*agentdv1.RegisteredServer{
			{Name: "clock", Transport: "stdio", Target: "clock-mcp", Shared: true, Tenants: []string{"globex"}},
			{Name: "notes", Transport: "stdio", Target: "notes-mcp", Shared: true, PerTenant: true},
			{Name: "search", Transport: "http", Target: "https://search.example.com:8443", Tenants: []string{"globex"}},
		},
		Pools: []*agentdv1.ProcessPool{
			{ServerName: "notes", Key: "k1", Tenant: "acme", Warm: 1, Busy: 2, Starting: 1, MaxProcesses: 4, Spawned: 9, Retired: 5, Crashed: 1, Waits: 2, Shared: true},
			{ServerName: "notes", Key: "k1", Tenant: "globex", Warm: 1},
			{ServerName: "search", Key: "k2", Busy: 1},
			{ServerName: "command: tool", Key: "k3", Tenant: "globex"},
		},
		OpenSessions: 4,
		Cache: &agentdv1.SchemaCache{Enabled: true, Ttl: durationpb.New(5 * time.Minute), MaxEntries: 100, Hits: 10, Misses: 5, Entries: []*agentdv1.SchemaCacheEntry{
			{Key: "e1", ServerName: "notes", Tenant: "globex", Revision: 2, Tools: 3, WrittenAt: timestamppb.New(written), ExpiresAt: timestamppb.New(written.Add(5 * time.Minute))},
			{Key: "e2", ServerName: "notes", Tenant: "acme", Revision: 1, Tools: 3, WrittenAt: timestamppb.New(written), ExpiresAt: timestamppb.New(written.Add(5 * time.Minute))},
		}},
	}
	acmes := &agentdv1.ListMCPServersResponse{
		Servers: []*agentdv1.RegisteredServer{{Name: "notes", Transport: "stdio", Target: "notes-mcp", Shared: true, PerTenant: true, Tenants: []string{"acme"}}},
		Pools:   every.GetPools()[:1],
		Cache: &agentdv1.SchemaCache{Enabled: true, Ttl: durationpb.New(5 * time.Minute), MaxEntries: 100, Hits: 3, Misses: 5,
			Entries: every.GetCache().GetEntries()[1:]},
	}
	globexs := &agentdv1.ListMCPServersResponse{
		Servers: []*agentdv1.RegisteredServer{
			{Name: "clock", Transport: "stdio", Target: "clock-mcp", Shared: true, Tenants: []string{"globex"}},
			{Name: "notes", Transport: "stdio", Target: "notes-mcp", Shared: true, PerTenant: true, Tenants: []string{"globex"}},
			{Name: "search", Transport: "http", Target: "https://search.example.com:8443", Tenants: []string{"globex"}},
		},
		Pools: every.GetPools()[1:],
		Cache: &agentdv1.SchemaCache{Enabled: true, Ttl: durationpb.New(5 * time.Minute), MaxEntries: 100, Hits: 3, Misses: 5,
			Entries: every.GetCache().GetEntries()[:1]},
	}
	for _, tc := range []struct {
		name   string
		caller *auth.Principal
		want   *agentdv1.ListMCPServersResponse
		tenant *string
	}{
		{"an observer", &auth.Principal{Name: "watch", Tenant: "ops", Roles: []string{auth.RoleObserver}}, every, nil},
		{"no authentication", nil, every, nil},
		{"acme's tenant_admin", &auth.Principal{Name: "acme-ops", Tenant: "acme", Roles: []string{auth.RoleTenantAdmin}}, acmes, ptr("acme")},
		{"globex's tenant_admin", &auth.Principal{Name: "globex-ops", Tenant: "globex", Roles: []string{auth.RoleTenantAdmin}}, globexs, ptr("globex")},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			bridge := newFakeBridgeAdmin()
			adm := server.NewAdmin(oauthtokens.NewMemory(), nil, server.AdminOptions{Config: mcpConfig(), Bridge: bridge})
			res, err := serveAdminService(t, adm, calledBy(tc.caller)).ListMCPServers(t.Context(), &agentdv1.ListMCPServersRequest{})
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(tc.want, res, protocmp.Transform()); diff != "" {
				t.Errorf("X-I6 ListMCPServers (-want +got):\n%s", diff)
			}
			if got := serversText(res); strings.Contains(got, "cnry") || strings.Contains(got, "user") {
				t.Errorf("ListMCPServers shows a secret: %s", got)
			}
			if len(bridge.stats) != 1 || (bridge.stats[0].Tenant == nil) != (tc.tenant == nil) || bridge.stats[0].GetTenant() != ptrValue(tc.tenant) {
				t.Errorf("the cache's stats were asked as %v; want tenant %v", bridge.stats, tc.tenant)
			}
		})
	}
}

func ptr(s string) *string { return &s }

func ptrValue(s *string) string {
	if s == nil {
		return ""
	}
	return *s
}

func serversText(res *agentdv1.ListMCPServersResponse) string {
	var b strings.Builder
	for _, s := range res.GetServers() {
		b.WriteString(s.String())
	}
	return b.String()
}

// UNAVAILABLE when the bridge cannot be asked, without repeating what
// the bridge said; and without a bridge at all.
func TestMCPServersBridgeDown(t *testing.T) {
	t.Parallel()
	down := newFakeBridgeAdmin()
	down.fail = status.Error(codes.Internal, "cnry-bridge-detail")
	gone := newFakeBridgeAdmin()
	gone.fail = status.Error(codes.Unimplemented, "unknown service")
	for _, b := range []server.BridgeAdmin{down, gone, nil} {
		client := serveAdminService(t, server.NewAdmin(oauthtokens.NewMemory(), nil, server.AdminOptions{Config: mcpConfig(), Bridge: b}))
		_, err := client.ListMCPServers(t.Context(), &agentdv1.ListMCPServersRequest{})
		_, err2 := client.InvalidateSchemaCache(t.Context(), &agentdv1.InvalidateSchemaCacheRequest{})
		for _, err := range []error{err, err2} {
			if status.Code(err) != codes.Unavailable || strings.Contains(err.Error(), "cnry") {
				t.Errorf("with the bridge failing: %v; want UNAVAILABLE, without its detail", err)
			}
		}
	}
}

// X-I6: InvalidateSchemaCache drops one entry by key or a tenant's
// entries, the caller's own tenant's by default; a tenant_admin is
// refused another tenant's, and its key of another tenant's entry drops
// nothing; an admin drops any. Each drop is an audit line.
func TestInvalidateSchemaCache(t *testing.T) {
	t.Parallel()
	acmeOps := &auth.Principal{Name: "acme-ops", Tenant: "acme", Roles: []string{auth.RoleTenantAdmin}}
	root := &auth.Principal{Name: "root", Tenant: "ops", Roles: []string{auth.RoleAdmin}}
	tests := []struct {
		name    string
		caller  *auth.Principal
		req     *agentdv1.InvalidateSchemaCacheRequest
		want    codes.Code
		removed int64
		asked   *bridgev1.InvalidateCacheEntriesRequest
		audit   string
	}{
		{"own tenant, by default", acmeOps, &agentdv1.InvalidateSchemaCacheRequest{}, codes.OK, 2,
			&bridgev1.InvalidateCacheEntriesRequest{Tenant: "acme"}, "principal=acme-ops tenant=acme method=InvalidateSchemaCache entry_tenant=acme removed=2"},
		{"another tenant, as tenant_admin", acmeOps, &agentdv1.InvalidateSchemaCacheRequest{Tenant: "globex"}, codes.PermissionDenied, 0, nil, ""},
		{"own entry, by key", acmeOps, &agentdv1.InvalidateSchemaCacheRequest{Key: "e2"}, codes.OK, 2,
			&bridgev1.InvalidateCacheEntriesRequest{Key: "e2"}, "principal=acme-ops tenant=acme method=InvalidateSchemaCache key=e2 removed=2"},
		{"another tenant's key, as tenant_admin", acmeOps, &agentdv1.InvalidateSchemaCacheRequest{Key: "e1"}, codes.OK, 0,
			nil, "principal=acme-ops tenant=acme method=InvalidateSchemaCache key=e1 removed=0"},
		{"another tenant, as admin", root, &agentdv1.InvalidateSchemaCacheRequest{Tenant: "globex"}, codes.OK, 2,
			&bridgev1.InvalidateCacheEntriesRequest{Tenant: "globex"}, "principal=root tenant=ops method=InvalidateSchemaCache entry_tenant=globex removed=2"},
		{"any key, as admin", root, &agentdv1.InvalidateSchemaCacheRequest{Key: "e1"}, codes.OK, 2,
			&bridgev1.InvalidateCacheEntriesRequest{Key: "e1"}, "principal=root tenant=ops method=InvalidateSchemaCache key=e1 removed=2"},
		{"without authentication", nil, &agentdv1.InvalidateSchemaCacheRequest{}, codes.OK, 2,
			&bridgev1.InvalidateCacheEntriesRequest{}, `principal=anonymous tenant="" method=InvalidateSchemaCache entry_tenant="" removed=2`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			bridge := newFakeBridgeAdmin()
			var log logtest.Logs
			adm := server.NewAdmin(oauthtokens.NewMemory(), slog.New(slog.NewTextHandler(&log, nil)), server.AdminOptions{Config: mcpConfig(), Bridge: bridge})
			res, err := serveAdminService(t, adm, calledBy(tt.caller)).InvalidateSchemaCache(t.Context(), tt.req)
			if status.Code(err) != tt.want || res.GetRemoved() != tt.removed {
				t.Fatalf("X-I6 InvalidateSchemaCache = %d, %v; want %d, %v", res.GetRemoved(), err, tt.removed, tt.want)
			}
			var want []*bridgev1.InvalidateCacheEntriesRequest
			if tt.asked != nil {
				want = append(want, tt.asked)
			}
			if diff := cmp.Diff(want, bridge.invalidate, protocmp.Transform()); diff != "" {
				t.Errorf("the bridge was asked (-want +got):\n%s", diff)
			}
			if lines := log.String(); !strings.Contains(lines, tt.audit) || (tt.audit == "") != (lines == "") {
				t.Errorf("the audit lines:\n%s\nwant one with %q", lines, tt.audit)
			}
		})
	}
}
