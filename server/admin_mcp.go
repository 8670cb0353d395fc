package server

import (
	"context"
	"maps"
	"net/url"
	"path/filepath"
	"slices"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	bridgev1 "github.com/agentd/agentd/gen/go/agentd/bridge/v1"
	agentdv1 "github.com/agentd/agentd/gen/go/agentd/v1"
	"github.com/agentd/agentd/internal/auth"
	"github.com/agentd/agentd/internal/config"
	"github.com/agentd/agentd/internal/fault"
)

// ListMCPServers returns the registered MCP servers, without their
// secrets, the bridge's stdio process pools, its open sessions and its
// tool-schema cache. A tenant_admin sees the servers its tenant may use
// (each naming its tenant alone as one that may), the pools that serve
// its tenant (its own, and those of every tenant of the servers it may
// use), and its tenant's entries and lookups; not the open sessions,
// which are every tenant's. UNAVAILABLE when the bridge cannot be asked.
func (a *Admin) ListMCPServers(ctx context.Context, _ *agentdv1.ListMCPServersRequest) (*agentdv1.ListMCPServersResponse, error) {
	if a.o.Bridge == nil {
		return nil, bridgeUnavailable(nil)
	}
	all, own := readReach(ctx)
	servers := a.registered(all, own)
	pools, err := a.o.Bridge.GetPoolStats(ctx, &bridgev1.GetPoolStatsRequest{})
	if err != nil {
		return nil, bridgeUnavailable(err)
	}
	cache, err := a.schemaCache(ctx, all, own)
	if err != nil {
		return nil, err
	}
	res := &agentdv1.ListMCPServersResponse{Servers: servers, Pools: poolsFor(pools.GetPools(), all, own, servers), Cache: cache}
	if all {
		res.OpenSessions = pools.GetOpenSessions()
	}
	return res, nil
}

// registered describes bridge.servers, by name: every one, or with all
// false those tenant own may use.
func (a *Admin) registered(all bool, own string) []*agentdv1.RegisteredServer {
	cfg := a.o.Config
	allowed := func(string) bool { return true }
	if !all {
		ts, ok := cfg.ForTenant(own)
		allowed = func(name string) bool { return ok && (ts.Servers == nil || slices.Contains(ts.Servers, name)) }
	}
	var out []*agentdv1.RegisteredServer
	for _, name := range slices.Sorted(maps.Keys(cfg.Bridge.Servers)) {
		if !allowed(name) {
			continue
		}
		rs := describeServer(name, cfg.Bridge.Servers[name])
		rs.Tenants = mayUse(cfg, name)
		if !all {
			rs.Tenants = []string{own}
		}
		out = append(out, rs)
	}
	return out
}

// describeServer is s without its secrets: a command by its base name, a
// URL by its origin (neither its user, path nor query), and no env
// values, headers or authorization.
func describeServer(name string, s config.Server) *agentdv1.RegisteredServer {
	rs := &agentdv1.RegisteredServer{Name: name, Shared: s.Shared != config.NotShared, PerTenant: s.Shared == config.SharedPerTenant}
	if s.Command != "" {
		rs.Transport, rs.Target = "stdio", filepath.Base(s.Command)
		return rs
	}
	rs.Transport = "http"
	if u, err := url.Parse(s.URL); err == nil {
		rs.Target = u.Scheme + "://" + u.Host
	}
	return rs
}

// mayUse lists the configured tenants that may use the registered server
// name (tenants.<tenant>.servers), or none when every one may.
func mayUse(cfg *config.Config, name string) []string {
	var may []string
	for _, tenant := range slices.Sorted(maps.Keys(cfg.Tenants)) {
		if s := cfg.Tenants[tenant].Servers; s == nil || slices.Contains(s, name) {
			may = append(may, tenant)
		}
	}
	if len(may) == len(cfg.Tenants) {
		return nil
	}
	return may
}

// poolsFor maps the bridge's pools: every one, or with all false those
// that serve tenant own: its own, and the pools of every tenant of the
// servers it may use.
func poolsFor(pools []*bridgev1.PoolStats, all bool, own string, servers []*agentdv1.RegisteredServer) []*agentdv1.ProcessPool {
	var out []*agentdv1.ProcessPool
	for _, p := range pools {
		mine := p.GetTenant() == own || (p.GetTenant() == "" && slices.ContainsFunc(servers, func(s *agentdv1.RegisteredServer) bool { return s.GetName() == p.GetServerName() }))
		if !all && !mine {
			continue
		}
		out = append(out, &agentdv1.ProcessPool{
			ServerName: p.GetServerName(), Key: p.GetKey(), Tenant: p.GetTenant(),
			Warm: p.GetWarm(), Busy: p.GetBusy(), Starting: p.GetStarting(), MaxProcesses: p.GetMaxProcesses(),
			Spawned: p.GetSpawned(), Retired: p.GetRetired(), Crashed: p.GetCrashed(), Waits: p.GetWaits(), Shared: p.GetShared(),
		})
	}
	return out
}

// schemaCache is the cache's settings, counters and entries: every
// tenant's, or with all false own's alone.
func (a *Admin) schemaCache(ctx context.Context, all bool, own string) (*agentdv1.SchemaCache, error) {
	req := &bridgev1.GetCacheStatsRequest{}
	if !all {
		req.Tenant = &own
	}
	stats, err := a.o.Bridge.GetCacheStats(ctx, req)
	if err != nil {
		return nil, bridgeUnavailable(err)
	}
	list, err := a.o.Bridge.ListCacheEntries(ctx, &bridgev1.ListCacheEntriesRequest{})
	if err != nil {
		return nil, bridgeUnavailable(err)
	}
	s := stats.GetSettings()
	cache := &agentdv1.SchemaCache{Enabled: s.GetEnabled(), Ttl: s.GetTtl(), MaxEntries: s.GetMaxEntries(), Hits: stats.GetHits(), Misses: stats.GetMisses()}
	for _, e := range list.GetEntries() {
		if all || e.GetTenant() == own {
			cache.Entries = append(cache.Entries, &agentdv1.SchemaCacheEntry{Key: e.GetKey(), ServerName: e.GetServerName(), Tenant: e.GetTenant(),
				Revision: e.GetRevision(), Tools: e.GetTools(), WrittenAt: e.GetWrittenAt(), ExpiresAt: e.GetExpiresAt()})
		}
	}
	return cache, nil
}

// InvalidateSchemaCache drops the schema cache's entry of a key, or every
// entry of a tenant (the caller's own by default; another's needs admin),
// and says how many. A tenant_admin's key of another tenant's entry is
// not found, as a key of none: removed 0. UNAVAILABLE when the bridge
// cannot be asked.
func (a *Admin) InvalidateSchemaCache(ctx context.Context, req *agentdv1.InvalidateSchemaCacheRequest) (*agentdv1.InvalidateSchemaCacheResponse, error) {
	if a.o.Bridge == nil {
		return nil, bridgeUnavailable(nil)
	}
	if req.GetKey() != "" {
		return a.invalidateKey(ctx, req.GetKey())
	}
	tenant, err := writeTenant(ctx, req.GetTenant(), "invalidating the schema cache")
	if err != nil {
		return nil, err
	}
	res, err := a.o.Bridge.InvalidateCacheEntries(ctx, &bridgev1.InvalidateCacheEntriesRequest{Tenant: tenant})
	if err != nil {
		return nil, bridgeUnavailable(err)
	}
	a.audit(ctx, "InvalidateSchemaCache", "entry_tenant", tenant, "removed", res.GetRemoved())
	return &agentdv1.InvalidateSchemaCacheResponse{Removed: res.GetRemoved()}, nil
}

// invalidateKey drops the entry of key if the caller reaches its tenant:
// an admin (or a caller without authentication) any entry, another its
// own tenant's alone, found among the entries listed.
func (a *Admin) invalidateKey(ctx context.Context, key string) (*agentdv1.InvalidateSchemaCacheResponse, error) {
	var removed int64
	reach, err := a.keyReached(ctx, key)
	if err == nil && reach {
		var res *bridgev1.InvalidateCacheEntriesResponse
		res, err = a.o.Bridge.InvalidateCacheEntries(ctx, &bridgev1.InvalidateCacheEntriesRequest{Key: key})
		removed = res.GetRemoved()
	}
	if err != nil {
		return nil, bridgeUnavailable(err)
	}
	a.audit(ctx, "InvalidateSchemaCache", "key", key, "removed", removed)
	return &agentdv1.InvalidateSchemaCacheResponse{Removed: removed}, nil
}

// keyReached reports whether the caller in ctx may drop the entry of key:
// any with admin or without authentication, otherwise only an entry of
// its own tenant.
func (a *Admin) keyReached(ctx context.Context, key string) (bool, error) {
	p, ok := auth.FromContext(ctx)
	if !ok || p.Has(auth.RoleAdmin) {
		return true, nil
	}
	list, err := a.o.Bridge.ListCacheEntries(ctx, &bridgev1.ListCacheEntriesRequest{})
	if err != nil {
		return false, err
	}
	return slices.ContainsFunc(list.GetEntries(), func(e *bridgev1.CacheEntry) bool { return e.GetKey() == key && e.GetTenant() == p.Tenant }), nil
}

// bridgeUnavailable is the error of a bridge that could not be asked:
// UNAVAILABLE, whatever the bridge said (its own codes are not this
// service's), the cause kept for the log.
func bridgeUnavailable(err error) error {
	msg := "the bridge's admin API cannot be asked"
	if st, ok := status.FromError(err); ok && st.Code() == codes.Unimplemented {
		msg = "the bridge does not serve its admin API where agentd reaches it (a remote bridge with admin.listen, or an older one)"
	}
	if err == nil {
		return fault.GRPC(fault.New(fault.Unavailable, "%s: this agentd has no bridge", msg))
	}
	return fault.GRPC(fault.Hide(fault.Unavailable, err, "%s", msg))
}
