package server_test

import (
	"context"
	"errors"
	"log/slog"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/testing/protocmp"

	agentdv1 "github.com/agentd/agentd/gen/go/agentd/v1"
	"github.com/agentd/agentd/internal/auth"
	"github.com/agentd/agentd/internal/config"
	"github.com/agentd/agentd/internal/fault"
	"github.com/agentd/agentd/internal/oauthtokens"
	"github.com/agentd/agentd/internal/store"
	"github.com/agentd/agentd/server"
)

// fakeUsage is a store.Usage whose answer is usage's.
type fakeUsage struct {
	usage func(tenant string, since, now time.Time) (store.TenantUsage, error)
}

func (f fakeUsage) Usage(_ context.Context, tenant string, since, now time.Time) (store.TenantUsage, error) {
	return f.usage(tenant, since, now)
}

// usageByTenant answers each tenant's usage as its name's length in
// every count, so that a row shows whose records it read, and checks the
// minute counted.
func usageByTenant(t *testing.T) fakeUsage {
	return fakeUsage{func(tenant string, since, now time.Time) (store.TenantUsage, error) {
		if now.Sub(since) != time.Minute {
			t.Errorf("Usage counts from %v before now; want a minute", now.Sub(since))
		}
		n := int64(len(tenant))
		return store.TenantUsage{Running: n, Queued: n + 1, Paused: n + 2, CreatedSince: n + 3, Threads: n + 4, LargestThread: n + 5}, nil
	}}
}

func usageOf(tenant string) *agentdv1.TenantUsage {
	n := int32(len(tenant))
	return &agentdv1.TenantUsage{RunningGenerations: n, QueuedGenerations: n + 1, PausedGenerations: n + 2, GenerationsLastMinute: n + 3, Threads: n + 4, LargestThreadItems: n + 5}
}

func overview(name, usage string, l *agentdv1.TenantLimits) *agentdv1.TenantOverview {
	return &agentdv1.TenantOverview{Name: name, Limits: l, Usage: usageOf(usage)}
}

// X-I6: ListTenants returns each configured tenant, by name, with its
// effective limits (its own where it sets them, the global ones
// elsewhere) and its usage from the store; without tenants configured,
// "default" with the global limits and the caller's own tenant's usage.
// An observer or admin sees every tenant; a tenant_admin its own alone,
// as "default" when tenants.default's settings serve it.
func TestListTenants(t *testing.T) {
	t.Parallel()
	global := config.Limits{MaxConcurrentGenerations: 10, GenerationsPerMinute: 60, MaxThreadItems: 500}
	configured := config.Config{Limits: global, Tenants: map[string]config.Tenant{
		"acme":    {Limits: &config.Limits{MaxConcurrentGenerations: 2, MaxThreads: 7}},
		"default": {Limits: &config.Limits{MaxPausedGenerations: 3}},
		"globex":  {},
	}}
	globalLimits := &agentdv1.TenantLimits{MaxConcurrentGenerations: 10, GenerationsPerMinute: 60, MaxThreadItems: 500}
	acme := &agentdv1.TenantLimits{MaxConcurrentGenerations: 2, GenerationsPerMinute: 60, MaxThreads: 7, MaxThreadItems: 500}
	dflt := &agentdv1.TenantLimits{MaxConcurrentGenerations: 10, MaxPausedGenerations: 3, GenerationsPerMinute: 60, MaxThreadItems: 500}
	everyTenant := []*agentdv1.TenantOverview{overview("acme", "acme", acme), overview("default", "default", dflt), overview("globex", "globex", globalLimits)}
	tests := []struct {
		name   string
		cfg    config.Config
		caller *auth.Principal
		want   []*agentdv1.TenantOverview
	}{
		{"an observer, every tenant", configured, &auth.Principal{Name: "watch", Tenant: "ops", Roles: []string{auth.RoleObserver}}, everyTenant},
		{"an admin, every tenant", configured, &auth.Principal{Name: "root", Tenant: "ops", Roles: []string{auth.RoleAdmin}}, everyTenant},
		{"no authentication, every tenant", configured, nil, everyTenant},
		{"a tenant_admin, its own", configured, &auth.Principal{Name: "acme-ops", Tenant: "acme", Roles: []string{auth.RoleTenantAdmin}},
			[]*agentdv1.TenantOverview{overview("acme", "acme", acme)}},
		{"a tenant_admin served as default", configured, &auth.Principal{Name: "ini-ops", Tenant: "initech", Roles: []string{auth.RoleTenantAdmin}},
			[]*agentdv1.TenantOverview{overview("default", "initech", dflt)}},
		{"no tenants configured", config.Config{Limits: global}, &auth.Principal{Name: "root", Tenant: "ops", Roles: []string{auth.RoleAdmin}},
			[]*agentdv1.TenantOverview{overview("default", "ops", globalLimits)}},
		{"no tenants nor authentication", config.Config{Limits: global}, nil,
			[]*agentdv1.TenantOverview{overview("default", "", globalLimits)}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			adm := server.NewAdmin(oauthtokens.NewMemory(), slog.New(slog.DiscardHandler), server.AdminOptions{Config: &tt.cfg, Usage: usageByTenant(t)})
			res, err := serveAdminService(t, adm, calledBy(tt.caller)).ListTenants(t.Context(), &agentdv1.ListTenantsRequest{})
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(tt.want, res.GetTenants(), protocmp.Transform()); diff != "" {
				t.Errorf("X-I6 ListTenants (-want +got):\n%s", diff)
			}
		})
	}
}

// ListTenants without a store is FAILED_PRECONDITION, as the other reads
// of records are; a store that fails makes it fail as the store says.
func TestListTenantsWithoutStore(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		usage store.Usage
		want  codes.Code
	}{
		{nil, codes.FailedPrecondition},
		{fakeUsage{func(string, time.Time, time.Time) (store.TenantUsage, error) {
			return store.TenantUsage{}, fault.Wrap(fault.Unavailable, errors.New("down"), "store")
		}}, codes.Unavailable},
	} {
		adm := server.NewAdmin(oauthtokens.NewMemory(), nil, server.AdminOptions{Usage: tc.usage})
		_, err := serveAdminService(t, adm).ListTenants(t.Context(), &agentdv1.ListTenantsRequest{})
		if status.Code(err) != tc.want {
			t.Errorf("ListTenants = %v; want %v", err, tc.want)
		}
	}
}
