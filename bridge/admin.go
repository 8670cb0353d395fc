package bridge

import (
	"context"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/protobuf/types/known/durationpb"

	"github.com/agentd/agentd/bridge/internal/schemacache"
	bridgev1 "github.com/agentd/agentd/gen/go/agentd/bridge/v1"
	"github.com/agentd/agentd/internal/auth"
	"github.com/agentd/agentd/internal/fault"
)

// Admin implements agentd.bridge.v1.BridgeAdminService over a Service's
// schema cache and process pools.
type Admin struct {
	bridgev1.UnimplementedBridgeAdminServiceServer
	s *Service
}

// Admin returns the service's admin API.
func (s *Service) Admin() *Admin { return &Admin{s: s} }

// Register registers the admin service on srv.
func (a *Admin) Register(srv grpc.ServiceRegistrar) {
	bridgev1.RegisterBridgeAdminServiceServer(srv, a)
}

func settings(s schemacache.Settings) *bridgev1.CacheSettings {
	return &bridgev1.CacheSettings{Enabled: s.Enabled, Ttl: durationpb.New(s.TTL), MaxEntries: int32(s.MaxEntries)}
}

func (a *Admin) GetCacheStats(context.Context, *bridgev1.GetCacheStatsRequest) (*bridgev1.GetCacheStatsResponse, error) {
	st := a.s.cache.Stats()
	return &bridgev1.GetCacheStatsResponse{Size: st.Size, Hits: st.Hits, Misses: st.Misses, Settings: settings(st.Settings)}, nil
}

func (a *Admin) ClearCache(ctx context.Context, _ *bridgev1.ClearCacheRequest) (*bridgev1.ClearCacheResponse, error) {
	size := a.s.cache.Stats().Size
	a.s.cache.Clear()
	a.audit(ctx, "ClearCache", "entries", size)
	return &bridgev1.ClearCacheResponse{}, nil
}

func (a *Admin) ResetCache(ctx context.Context, _ *bridgev1.ResetCacheRequest) (*bridgev1.ResetCacheResponse, error) {
	old := a.s.cache.Stats().Settings
	now := a.s.cache.Reset()
	a.audit(ctx, "ResetCache", "old", old, "new", now)
	return &bridgev1.ResetCacheResponse{Settings: settings(now)}, nil
}

// audit logs an admin write (X-I9): who made it, and what it changed.
func (a *Admin) audit(ctx context.Context, method string, changed ...any) {
	who, tenant := auth.Caller(ctx)
	a.s.log.Info("admin change", append([]any{"audit", true, "principal", who, "tenant", tenant, "method", method}, changed...)...)
}

// InvalidateCache drops the entry of one server, named as a session would
// name it: the same declaration and tenant give the same entry.
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
	targets, err := a.s.resolve([]*bridgev1.ServerSpec{spec}, req.GetTenant())
	if err != nil {
		return nil, fault.GRPC(err)
	}
	removed := a.s.cache.Invalidate(targets[0].key)
	a.audit(ctx, "InvalidateCache", "server", targets[0].name, "removed", removed)
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
