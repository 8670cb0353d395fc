package app_test

import (
	"net/http"
	"testing"

	"connectrpc.com/connect"
	"google.golang.org/protobuf/proto"

	agentdv1 "github.com/agentd/agentd/gen/go/agentd/v1"
	"github.com/agentd/agentd/internal/auth"
	"github.com/agentd/agentd/internal/config"
)

var (
	listTenants = unary[agentdv1.ListTenantsRequest, agentdv1.ListTenantsResponse](agentdv1.AdminService_ListTenants_FullMethodName,
		func(*agentdv1.ListTenantsRequest) (string, string, proto.Message) {
			return http.MethodGet, "/v1/tenants", nil
		})
	listMCPServers = unary[agentdv1.ListMCPServersRequest, agentdv1.ListMCPServersResponse](agentdv1.AdminService_ListMCPServers_FullMethodName,
		func(*agentdv1.ListMCPServersRequest) (string, string, proto.Message) {
			return http.MethodGet, "/v1/mcp-servers", nil
		})
	invalidateSchemaCache = unary[agentdv1.InvalidateSchemaCacheRequest, agentdv1.InvalidateSchemaCacheResponse](agentdv1.AdminService_InvalidateSchemaCache_FullMethodName,
		func(r *agentdv1.InvalidateSchemaCacheRequest) (string, string, proto.Message) {
			return http.MethodPost, "/v1/schema-cache:invalidate", r
		})
)

// The console's pages, over every protocol on agentd's port with its
// embedded bridge: ListTenants shows acme's limits and the generation it
// just ran; ListMCPServers the registered demo server, its pool and the
// cache entry the generation wrote; InvalidateSchemaCache drops that
// entry by its key, once.
func TestAdminPages(t *testing.T) {
	t.Parallel()
	cfg := demoConfig(t, 0)
	cfg.Auth.APIKeys = []config.APIKey{
		{Name: "acme-app", SHA256: auth.HashKey("sk-acme"), Tenant: "acme", Roles: []string{auth.RoleGenerate}},
		{Name: "ops", SHA256: auth.HashKey("sk-ops"), Tenant: "acme", Roles: []string{auth.RoleAdmin}},
	}
	cfg.Tenants = map[string]config.Tenant{"acme": {Limits: &config.Limits{MaxConcurrentGenerations: 3}}}
	s := startWeb(t, cfg)
	generate(t, withCredentials(s.grpc, bearer(t.Context(), "sk-acme")), demoStart(t))

	var key string
	for _, p := range protocols {
		got := listTenants(t, s, p, "sk-ops", nil, &agentdv1.ListTenantsRequest{})
		res, _ := got.res.(*agentdv1.ListTenantsResponse)
		tenants := res.GetTenants()
		if got.code != 0 || len(tenants) != 1 || tenants[0].GetName() != "acme" || tenants[0].GetLimits().GetMaxConcurrentGenerations() != 3 ||
			tenants[0].GetUsage().GetGenerationsLastMinute() != 1 || tenants[0].GetUsage().GetRunningGenerations() != 0 {
			t.Errorf("ListTenants over %s: %v %q, %v; want acme, its limit of 3 and its one generation, ended", p, got.code, got.msg, tenants)
		}

		got = listMCPServers(t, s, p, "sk-ops", nil, &agentdv1.ListMCPServersRequest{})
		mcp, _ := got.res.(*agentdv1.ListMCPServersResponse)
		servers, pools, entries := mcp.GetServers(), mcp.GetPools(), mcp.GetCache().GetEntries()
		if got.code != 0 || len(servers) != 1 || servers[0].GetName() != "demo" || servers[0].GetTransport() != "stdio" ||
			len(pools) != 1 || pools[0].GetServerName() != "demo" || pools[0].GetSpawned() == 0 ||
			len(entries) != 1 || entries[0].GetTenant() != "acme" || entries[0].GetServerName() != "demo" || entries[0].GetRevision() != 1 || entries[0].GetTools() == 0 {
			t.Fatalf("ListMCPServers over %s: %v %q, %v; want demo, its pool and its cache entry", p, got.code, got.msg, mcp)
		}
		key = entries[0].GetKey()
	}
	for i, p := range protocols {
		got := invalidateSchemaCache(t, s, p, "sk-ops", nil, &agentdv1.InvalidateSchemaCacheRequest{Key: key})
		want := int64(0)
		if i == 0 {
			want = 1
		}
		if res, _ := got.res.(*agentdv1.InvalidateSchemaCacheResponse); got.code != 0 || res.GetRemoved() != want {
			t.Errorf("InvalidateSchemaCache over %s: %v %q, %v; want %d removed", p, got.code, got.msg, res, want)
		}
	}
	if got := listMCPServers(t, s, protoJSON, "sk-acme", nil, &agentdv1.ListMCPServersRequest{}); got.code != connect.CodePermissionDenied || got.status != http.StatusForbidden {
		t.Errorf("ListMCPServers with the generate role: %v, HTTP %d; want %v, HTTP 403", got.code, got.status, connect.CodePermissionDenied)
	}
}

// With a remote bridge, ListMCPServers asks that bridge's admin API over
// agentd's connection to it: its pool and the cache entry the generation
// wrote there; UNAVAILABLE (HTTP 503) once the bridge is gone.
func TestAdminPagesRemoteBridge(t *testing.T) {
	t.Parallel()
	addr, stopBridge := serveBridgeAt(t, "127.0.0.1:0")
	cfg := demoConfig(t, 0)
	cfg.Bridge.Address = addr
	cfg.Auth.APIKeys = []config.APIKey{
		{Name: "acme-app", SHA256: auth.HashKey("sk-acme"), Tenant: "acme", Roles: []string{auth.RoleGenerate}},
		{Name: "ops", SHA256: auth.HashKey("sk-ops"), Tenant: "acme", Roles: []string{auth.RoleAdmin}},
	}
	s := startWeb(t, cfg)
	generate(t, withCredentials(s.grpc, bearer(t.Context(), "sk-acme")), demoStart(t))

	got := listMCPServers(t, s, protoJSON, "sk-ops", nil, &agentdv1.ListMCPServersRequest{})
	mcp, _ := got.res.(*agentdv1.ListMCPServersResponse)
	if entries := mcp.GetCache().GetEntries(); got.code != 0 || len(mcp.GetPools()) != 1 || mcp.GetPools()[0].GetSpawned() == 0 ||
		len(entries) != 1 || entries[0].GetTenant() != "acme" || entries[0].GetServerName() != "demo" {
		t.Fatalf("ListMCPServers: %v %q, %v; want the remote bridge's pool and cache entry", got.code, got.msg, mcp)
	}
	stopBridge()
	if got := listMCPServers(t, s, protoJSON, "sk-ops", nil, &agentdv1.ListMCPServersRequest{}); got.code != connect.CodeUnavailable || got.status != http.StatusServiceUnavailable {
		t.Errorf("ListMCPServers without the bridge: %v %q, HTTP %d; want UNAVAILABLE, HTTP 503", got.code, got.msg, got.status)
	}
}
