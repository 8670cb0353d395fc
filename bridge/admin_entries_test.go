package bridge

import (
	"slices"
	"strings"
	"testing"

	"google.golang.org/protobuf/proto"

	bridgev1 "github.com/agentd/agentd/gen/go/agentd/bridge/v1"
	"github.com/agentd/agentd/internal/auth"
)

// X-I5: GetCacheStats counts the tenant asked for (a tenant_admin its
// own, whichever it names); ListCacheEntries describes the entries a caller reaches (a
// tenant_admin its own tenant's, an observer or admin every tenant's),
// newest first, by key, server name, tenant, revision and tool count;
// InvalidateCacheEntries drops one by its key, or a
// tenant's, a tenant_admin's own alone whatever it names, each drop an
// audit line.
func TestCacheEntries(t *testing.T) {
	t.Parallel()
	f, logs, fill := loggedFixture(t)
	fill("acme", refSpec("tools", "tools"))
	fill("acme", refSpec("demo", "demo"))
	fill("globex", refSpec("tools", "tools"))

	admin := f.svc.Admin()
	as := func(tenant string, roles ...string) *auth.Principal {
		return &auth.Principal{Name: tenant + "-" + roles[0], Tenant: tenant, Roles: roles}
	}
	acmeOps, observer, root := as("acme", auth.RoleTenantAdmin), as("ops", auth.RoleObserver), as("ops", auth.RoleAdmin)
	entries := func(p *auth.Principal) []*bridgev1.CacheEntry {
		t.Helper()
		res, err := admin.ListCacheEntries(auth.NewContext(t.Context(), *p), &bridgev1.ListCacheEntriesRequest{})
		if err != nil {
			t.Fatalf("ListCacheEntries: %v", err)
		}
		return res.GetEntries()
	}
	described := func(es []*bridgev1.CacheEntry) []string {
		var out []string
		for _, e := range es {
			out = append(out, e.GetTenant()+"/"+e.GetServerName())
			if e.GetKey() == "" || e.GetRevision() != 1 || e.GetTools() == 0 || !e.GetExpiresAt().AsTime().After(e.GetWrittenAt().AsTime()) {
				t.Errorf("entry %v: want a key, revision 1, its tools and a life", e)
			}
		}
		return out
	}
	if got := described(entries(acmeOps)); !slices.Equal(got, []string{"acme/demo", "acme/tools"}) {
		t.Errorf("X-I5 a tenant_admin's entries = %v; want its tenant's, newest first", got)
	}
	all := entries(observer)
	if got := described(all); !slices.Equal(got, []string{"globex/tools", "acme/demo", "acme/tools"}) {
		t.Errorf("X-I5 an observer's entries = %v; want every tenant's, newest first", got)
	}

	for _, tc := range []struct {
		p      *auth.Principal
		tenant *string
		want   int64
	}{
		{observer, nil, 3},
		{observer, proto.String("globex"), 1},
		{acmeOps, proto.String("globex"), 2},
	} {
		res, err := admin.GetCacheStats(auth.NewContext(t.Context(), *tc.p), &bridgev1.GetCacheStatsRequest{Tenant: tc.tenant})
		if err != nil || res.GetSize() != tc.want || res.GetMisses() != tc.want {
			t.Errorf("X-I5 GetCacheStats(%s, tenant %v) = %v, %v; want %d entries and misses", tc.p.Name, tc.tenant, res, err, tc.want)
		}
	}

	invalidate := func(p *auth.Principal, req *bridgev1.InvalidateCacheEntriesRequest) int64 {
		t.Helper()
		res, err := admin.InvalidateCacheEntries(auth.NewContext(t.Context(), *p), req)
		if err != nil {
			t.Fatalf("InvalidateCacheEntries: %v", err)
		}
		return res.GetRemoved()
	}
	globex := all[0].GetKey()
	if n := invalidate(acmeOps, &bridgev1.InvalidateCacheEntriesRequest{Key: globex}); n != 0 {
		t.Errorf("X-I5 a tenant_admin dropped another tenant's entry by its key: %d", n)
	}
	if n := invalidate(acmeOps, &bridgev1.InvalidateCacheEntriesRequest{Tenant: "globex"}); n != 2 {
		t.Errorf("X-I5 a tenant_admin naming another tenant dropped %d entries; want its own 2", n)
	}
	if got := described(entries(root)); !slices.Equal(got, []string{"globex/tools"}) {
		t.Errorf("entries after acme's invalidation = %v; want globex's alone", got)
	}
	if n := invalidate(root, &bridgev1.InvalidateCacheEntriesRequest{Key: globex}); n != 1 {
		t.Errorf("an admin's invalidation of globex's key dropped %d", n)
	}
	if got := entries(root); len(got) != 0 {
		t.Errorf("entries left: %v", got)
	}

	log := logs.String()
	for _, want := range []string{
		"principal=acme-tenant_admin tenant=acme method=InvalidateCacheEntries key=" + globex + " removed=0",
		"principal=acme-tenant_admin tenant=acme method=InvalidateCacheEntries entry_tenant=acme removed=2",
		"principal=ops-admin tenant=ops method=InvalidateCacheEntries key=" + globex + " removed=1",
	} {
		if !strings.Contains(log, want) {
			t.Errorf("X-I9 no audit line has %q:\n%s", want, log)
		}
	}
}
