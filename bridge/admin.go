package bridge

import (
	"context"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/protobuf/types/known/durationpb"
	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/agentd/agentd/bridge/internal/schemacache"
	bridgev1 "github.com/agentd/agentd/gen/go/agentd/bridge/v1"
	"github.com/agentd/agentd/internal/auth"
	"github.com/agentd/agentd/internal/fault"
)

// Admin implements agentd.bridge.v1.BridgeAdminService over a Service's
// schema cache and process pools.
//
// Under authentication (internal/auth's interceptors admit each call by
// its role), a caller that holds only tenant_admin reaches its own
// tenant's cache entries and nothing else: GetCacheStats counts
// them alone, ClearCache drops them alone, and InvalidateCache drops an
// entry of its own tenant (the request's tenant, or its own when the
// request names none); another tenant's entries are invisible to it, as
// if they did not exist (removed is false, nothing is dropped). Without
// authentication, or with observer (reads) or admin (writes), a call
// reaches every tenant's entries. ListCacheEntries and
// InvalidateCacheEntries are scoped alike: a tenant_admin lists and drops
// its own tenant's entries alone.
type Admin struct {
	bridgev1.UnimplementedBridgeAdminServiceServer
	s *Service
}

// Admin returns the service's admin API.
func (s *Service) Admin() *Admin { return &Admin{s: s} }

// Register registers the admin service on registrar.
func (a *Admin) Register(registrar grpc.ServiceRegistrar) {
	bridgev1.RegisterBridgeAdminServiceServer(registrar, a)
}

func settings(s schemacache.Settings) *bridgev1.CacheSettings {
	return &bridgev1.CacheSettings{Enabled: s.Enabled, Ttl: durationpb.New(s.TTL), MaxEntries: int32(s.MaxEntries)}
}

// reach says which tenants' cache entries the caller in ctx reaches: all
// of them when it is not authenticated or holds global, the role that
// reaches every tenant (observer for reads, admin for writes); otherwise
// (tenant_admin, which the interceptor admitted) only its own tenant's.
func reach(ctx context.Context, global string) (all bool, tenant string) {
	p, ok := auth.FromContext(ctx)
	if !ok || p.Has(global) {
		return true, ""
	}
	return false, p.Tenant
}

func (a *Admin) GetCacheStats(ctx context.Context, req *bridgev1.GetCacheStatsRequest) (*bridgev1.GetCacheStatsResponse, error) {
	var st schemacache.Stats
	all, tenant := reach(ctx, auth.RoleObserver)
	switch {
	case !all:
		st = a.s.cache.TenantStats(tenant)
	case req.Tenant != nil:
		st = a.s.cache.TenantStats(req.GetTenant())
	default:
		st = a.s.cache.Stats()
	}
	return &bridgev1.GetCacheStatsResponse{Size: st.Size, Hits: st.Hits, Misses: st.Misses, Settings: settings(st.Settings)}, nil
}

func (a *Admin) ClearCache(ctx context.Context, _ *bridgev1.ClearCacheRequest) (*bridgev1.ClearCacheResponse, error) {
	all, tenant := reach(ctx, auth.RoleAdmin)
	if !all {
		n := a.s.cache.ClearTenant(tenant)
		a.audit(ctx, "ClearCache", "scope", "tenant", "entries", n)
		return &bridgev1.ClearCacheResponse{}, nil
	}
	size := a.s.cache.Stats().Size
	a.s.cache.Clear()
	a.audit(ctx, "ClearCache", "scope", "all", "entries", size)
	return &bridgev1.ClearCacheResponse{}, nil
}

func (a *Admin) ResetCache(ctx context.Context, _ *bridgev1.ResetCacheRequest) (*bridgev1.ResetCacheResponse, error) {
	old := a.s.cache.Stats().Settings
	now := a.s.cache.Reset()
	a.audit(ctx, "ResetCache", "old", old, "new", now)
	return &bridgev1.ResetCacheResponse{Settings: settings(now)}, nil
}

// audit logs an admin write in a line marked audit=true: who made it (the
// principal and its tenant), and what it changed.
func (a *Admin) audit(ctx context.Context, method string, changed ...any) {
	who, tenant := auth.Caller(ctx)
	a.s.log.Info("admin change", append([]any{"audit", true, "principal", who, "tenant", tenant, "method", method}, changed...)...)
}

// InvalidateCache drops the entry of one server, named as a session would
// name it: the same declaration and tenant give the same entry. A caller
// that reaches one tenant only drops its own tenant's entry: the request's
// tenant defaults to it, and another tenant's entry is left alone and
// reported as not found (removed false), like an entry that does not exist.
func (a *Admin) InvalidateCache(ctx context.Context, req *bridgev1.InvalidateCacheRequest) (*bridgev1.InvalidateCacheResponse, error) {
	if req.GetServer() == nil {
		return nil, fault.GRPC(fault.InvalidRequest([]fault.Violation{{Field: "server", Description: "is required"}}))
	}
	spec := req.GetServer()
	if spec.GetReadTimeout() == nil {
		// Not part of the key; filled so that validation passes.
		spec = cloneSpec(spec)
		spec.ReadTimeout = durationpb.New(time.Second)
	}
	tenant := req.GetTenant()
	all, own := reach(ctx, auth.RoleAdmin)
	if !all && tenant == "" {
		tenant = own
	}
	// A one-tenant caller's declaration is resolved as its own tenant's,
	// whichever it names: what another tenant may declare is none of its
	// business.
	resolveAs := tenant
	if !all {
		resolveAs = own
	}
	targets, err := a.s.resolve([]*bridgev1.ServerSpec{spec}, resolveAs)
	if err != nil {
		return nil, fault.GRPC(err)
	}
	removed := false
	if all || tenant == own {
		removed = a.s.cache.Invalidate(targets[0].key)
	}
	a.audit(ctx, "InvalidateCache", "server", targets[0].name, "entry_tenant", tenant, "removed", removed)
	return &bridgev1.InvalidateCacheResponse{Removed: removed}, nil
}

func (a *Admin) ConfigureCache(ctx context.Context, req *bridgev1.ConfigureCacheRequest) (*bridgev1.ConfigureCacheResponse, error) {
	var ttl *time.Duration
	if req.GetTtl() != nil {
		d := req.GetTtl().AsDuration()
		ttl = &d
	}
	var maxEntries *int
	if req.MaxEntries != nil {
		n := int(req.GetMaxEntries())
		maxEntries = &n
	}
	old := a.s.cache.Stats().Settings
	s, err := a.s.cache.Configure(req.Enabled, ttl, maxEntries)
	if err != nil {
		return nil, fault.GRPC(fault.Wrap(fault.Invalid, err, ""))
	}
	a.audit(ctx, "ConfigureCache", "old", old, "new", s)
	return &bridgev1.ConfigureCacheResponse{Settings: settings(s)}, nil
}

func (a *Admin) GetPoolStats(context.Context, *bridgev1.GetPoolStatsRequest) (*bridgev1.GetPoolStatsResponse, error) {
	a.s.mu.Lock()
	open := len(a.s.sessions)
	a.s.mu.Unlock()
	return &bridgev1.GetPoolStatsResponse{Pools: a.s.pools.stats(), OpenSessions: int32(open)}, nil
}

// ListCacheEntries describes the cache's entries that the caller reaches.
func (a *Admin) ListCacheEntries(ctx context.Context, _ *bridgev1.ListCacheEntriesRequest) (*bridgev1.ListCacheEntriesResponse, error) {
	all, tenant := reach(ctx, auth.RoleObserver)
	entries := a.s.cache.Entries(all, tenant)
	out := make([]*bridgev1.CacheEntry, len(entries))
	for i, e := range entries {
		out[i] = &bridgev1.CacheEntry{Key: e.Key, ServerName: e.Server, Tenant: e.Tenant, Revision: e.Revision, Tools: int32(e.Tools),
			WrittenAt: timestamppb.New(e.Written), ExpiresAt: timestamppb.New(e.Expires)}
	}
	return &bridgev1.ListCacheEntriesResponse{Entries: out}, nil
}

// InvalidateCacheEntries drops the entry of a key, or every entry of a
// tenant. A caller that reaches one tenant only drops its own tenant's:
// another tenant's key is not found (removed 0), and its request's tenant
// is its own whichever it names.
func (a *Admin) InvalidateCacheEntries(ctx context.Context, req *bridgev1.InvalidateCacheEntriesRequest) (*bridgev1.InvalidateCacheEntriesResponse, error) {
	all, own := reach(ctx, auth.RoleAdmin)
	tenant := req.GetTenant()
	if !all {
		tenant = own
	}
	var n int64
	if key := req.GetKey(); key != "" {
		if a.s.cache.InvalidateKey(key, all, own) {
			n = 1
		}
		a.audit(ctx, "InvalidateCacheEntries", "key", key, "removed", n)
	} else {
		n = int64(a.s.cache.InvalidateTenant(tenant))
		a.audit(ctx, "InvalidateCacheEntries", "entry_tenant", tenant, "removed", n)
	}
	return &bridgev1.InvalidateCacheEntriesResponse{Removed: n}, nil
}
