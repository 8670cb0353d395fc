package server

import (
	"context"
	"maps"
	"slices"
	"time"

	agentdv1 "github.com/agentd/agentd/gen/go/agentd/v1"
	"github.com/agentd/agentd/internal/auth"
	"github.com/agentd/agentd/internal/config"
	"github.com/agentd/agentd/internal/fault"
	"github.com/agentd/agentd/internal/store"
)

// tenantRow is one tenant ListTenants shows: its name, the tenant whose
// records are its usage, and its effective limits.
type tenantRow struct {
	name, usageOf string
	limits        config.Limits
}

// ListTenants returns each configured tenant, by name, with its effective
// limits and its usage now, as the store that every replica shares has
// it. Without tenants configured there is one, "default", with the global
// limits and the caller's own tenant's usage (the tenant "" without
// authentication). A tenant_admin sees one tenant: its own, or "default"
// with its own usage when its tenant is served with tenants.default's
// settings. FAILED_PRECONDITION when agentd keeps no records.
func (a *Admin) ListTenants(ctx context.Context, _ *agentdv1.ListTenantsRequest) (*agentdv1.ListTenantsResponse, error) {
	if a.o.Usage == nil {
		return nil, fault.GRPC(fault.New(fault.FailedPrecondition, "this agentd keeps no records (it has no state store), so it cannot tell what its tenants use"))
	}
	now := time.Now()
	var out []*agentdv1.TenantOverview
	for _, row := range a.tenantRows(ctx) {
		u, err := a.o.Usage.Usage(ctx, row.usageOf, now.Add(-time.Minute), now)
		if err != nil {
			return nil, fault.GRPC(err)
		}
		out = append(out, &agentdv1.TenantOverview{Name: row.name, Limits: limitsProto(row.limits), Usage: usageProto(u)})
	}
	return &agentdv1.ListTenantsResponse{Tenants: out}, nil
}

// tenantRows are the tenants the caller in ctx sees, by name.
func (a *Admin) tenantRows(ctx context.Context) []tenantRow {
	cfg := a.o.Config
	all, own := readReach(ctx)
	if len(cfg.Tenants) == 0 {
		_, caller := auth.Caller(ctx)
		return []tenantRow{{name: config.DefaultTenant, usageOf: caller, limits: cfg.Limits}}
	}
	if !all {
		ts, ok := cfg.ForTenant(own)
		if !ok {
			return nil
		}
		name := own
		if _, named := cfg.Tenants[own]; !named {
			name = config.DefaultTenant
		}
		return []tenantRow{{name: name, usageOf: own, limits: ts.Limits}}
	}
	var rows []tenantRow
	for _, name := range slices.Sorted(maps.Keys(cfg.Tenants)) {
		ts, _ := cfg.ForTenant(name)
		rows = append(rows, tenantRow{name: name, usageOf: name, limits: ts.Limits})
	}
	return rows
}

func limitsProto(l config.Limits) *agentdv1.TenantLimits {
	return &agentdv1.TenantLimits{
		MaxConcurrentGenerations: int32(l.MaxConcurrentGenerations),
		MaxPausedGenerations:     int32(l.MaxPausedGenerations),
		GenerationsPerMinute:     int32(l.GenerationsPerMinute),
		MaxThreads:               int32(l.MaxThreads),
		MaxThreadItems:           int32(l.MaxThreadItems),
	}
}

func usageProto(u store.TenantUsage) *agentdv1.TenantUsage {
	return &agentdv1.TenantUsage{
		RunningGenerations:    int32(u.Running),
		PausedGenerations:     int32(u.Paused),
		QueuedGenerations:     int32(u.Queued),
		GenerationsLastMinute: int32(u.CreatedSince),
		Threads:               int32(u.Threads),
		LargestThreadItems:    int32(u.LargestThread),
	}
}
