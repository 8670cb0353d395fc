package schemacache

import (
	"context"
	"testing"
	"testing/synctest"
	"time"

	"github.com/google/go-cmp/cmp"

	bridgev1 "github.com/agentd/agentd/gen/go/agentd/bridge/v1"
)

// Entries describes the fresh entries, a tenant's or all, newest write
// first, by key, server, tenant, revision, size and times; the revision
// grows only when a write stores a list that differs from the key's last,
// across an expiry and an invalidation; InvalidateKey drops an entry by
// its printed key, within the tenant asked for; InvalidateTenant drops a
// tenant's entries and leaves its counters.
func TestEntries(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		c := newCache(t, Settings{Enabled: true, TTL: time.Minute, MaxEntries: 10})
		start := time.Now()
		write := func(tenant, url, server string, names ...string) Key {
			t.Helper()
			k := NewKey(KeyParts{Tenant: tenant, URL: url})
			_, _, _, err := c.FetchRevision(t.Context(), k, server, nil, func(context.Context) ([]*bridgev1.Tool, *time.Duration, error) {
				return tools(names...), nil, nil
			})
			if err != nil {
				t.Fatal(err)
			}
			return k
		}
		a := write("acme", "https://a", "docs", "x", "y")
		time.Sleep(time.Second)
		b := write("acme", "https://b", "search", "z")
		time.Sleep(time.Second)
		g := write("globex", "https://a", "docs", "x")
		entry := func(k Key, server string, revision int64, n int, written time.Time) Entry {
			return Entry{Key: k.String(), Tenant: k.tenant, Server: server, Revision: revision, Tools: n, Written: written, Expires: written.Add(time.Minute)}
		}
		want := []Entry{
			entry(g, "docs", 1, 1, start.Add(2*time.Second)),
			entry(b, "search", 1, 1, start.Add(time.Second)),
			entry(a, "docs", 1, 2, start),
		}
		if diff := cmp.Diff(want, c.Entries(true, "")); diff != "" {
			t.Errorf("Entries(all) (-want +got):\n%s", diff)
		}
		if diff := cmp.Diff(want[1:], c.Entries(false, "acme")); diff != "" {
			t.Errorf("Entries(acme) (-want +got):\n%s", diff)
		}

		// The same list after an expiry keeps its revision; another list
		// after an invalidation makes the next.
		time.Sleep(time.Minute)
		write("acme", "https://a", "docs", "x", "y")
		if !c.Invalidate(a) {
			t.Fatal("Invalidate(a) found no entry")
		}
		write("acme", "https://a", "renamed", "x")
		if got := c.Entries(false, "acme"); len(got) != 1 || got[0].Revision != 2 || got[0].Server != "renamed" || got[0].Tools != 1 {
			t.Errorf("acme's entries after a changed list = %+v; want a's alone, revision 2, by its new name", got)
		}

		if c.InvalidateKey(a.String(), false, "globex") {
			t.Error("InvalidateKey dropped acme's entry for globex")
		}
		if !c.InvalidateKey(a.String(), false, "acme") || c.InvalidateKey(a.String(), true, "") {
			t.Error("InvalidateKey(acme's a) should drop it once")
		}
		write("acme", "https://b", "search", "z")
		write("globex", "https://a", "docs", "x")
		hits := c.TenantStats("acme").Hits
		if n := c.InvalidateTenant("acme"); n != 1 {
			t.Errorf("InvalidateTenant(acme) = %d; want 1", n)
		}
		if got := c.Entries(true, ""); len(got) != 1 || got[0].Tenant != "globex" {
			t.Errorf("entries after acme's invalidation = %+v; want globex's alone", got)
		}
		if s := c.TenantStats("acme"); s.Hits != hits || s.Size != 0 {
			t.Errorf("acme's stats after its invalidation = %+v; want its %d hits kept", s, hits)
		}
	})
}
