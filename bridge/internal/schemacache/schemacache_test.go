package schemacache

import (
	"context"
	"errors"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/google/go-cmp/cmp"
	"google.golang.org/protobuf/testing/protocmp"

	bridgev1 "github.com/agentd/agentd/gen/go/agentd/bridge/v1"
	"github.com/agentd/agentd/internal/config"
)

// defaults are the settings agentd runs with.
func defaults() Settings {
	d := config.DefaultCache()
	return Settings{Enabled: d.Enabled, TTL: d.TTL, MaxEntries: d.MaxEntries}
}

func newCache(t *testing.T, s Settings) *Cache {
	t.Helper()
	c, err := New(s, nil)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

func tools(names ...string) []*bridgev1.Tool {
	var out []*bridgev1.Tool
	for _, n := range names {
		out = append(out, &bridgev1.Tool{Name: n})
	}
	return out
}

// fetcher returns a fetch function that counts its calls.
func fetcher(calls *atomic.Int32, result []*bridgev1.Tool) func(context.Context) ([]*bridgev1.Tool, error) {
	return func(context.Context) ([]*bridgev1.Tool, error) {
		calls.Add(1)
		return result, nil
	}
}

func key(url string) Key { return NewKey(KeyParts{URL: url}) }

func TestMissThenHit(t *testing.T) {
	t.Parallel()
	c := newCache(t, defaults())
	var calls atomic.Int32
	for i, wantHit := range []bool{false, true, true} {
		got, hit, err := c.Fetch(t.Context(), key("a"), nil, fetcher(&calls, tools("x", "y")))
		if err != nil || hit != wantHit {
			t.Fatalf("fetch %d: hit=%v err=%v, want hit=%v", i, hit, err, wantHit)
		}
		if diff := cmp.Diff(tools("x", "y"), got, protocmp.Transform()); diff != "" {
			t.Errorf("fetch %d (-want +got):\n%s", i, diff)
		}
	}
	if calls.Load() != 1 {
		t.Errorf("fetched %d times, want 1", calls.Load())
	}
	// R-C4: stats.
	if s := c.Stats(); s.Size != 1 || s.Hits != 2 || s.Misses != 1 {
		t.Errorf("stats = %+v, want size 1, 2 hits, 1 miss", s)
	}
}

// R-C1: validation of settings.
func TestSettings(t *testing.T) {
	t.Parallel()
	if _, err := New(Settings{Enabled: true, TTL: 0, MaxEntries: 0}, nil); err == nil || !strings.Contains(err.Error(), "ttl") || !strings.Contains(err.Error(), "max_entries") {
		t.Errorf("New with zero settings: %v", err)
	}
	c := newCache(t, defaults())
	neg := -time.Second
	if _, err := c.Configure(nil, &neg, nil); err == nil {
		t.Error("a negative ttl was accepted")
	}
	zero := 0
	if _, err := c.Configure(nil, nil, &zero); err == nil {
		t.Error("max_entries 0 was accepted")
	}
	ttl, max, off := time.Minute, 5, false
	s, err := c.Configure(&off, &ttl, &max)
	if err != nil || s != (Settings{Enabled: false, TTL: time.Minute, MaxEntries: 5}) {
		t.Errorf("Configure = %+v, %v", s, err)
	}
	// R-C4: reset restores the settings the cache was created with.
	if s := c.Reset(); s != defaults() {
		t.Errorf("Reset = %+v", s)
	}
}

// R-C2: a disabled call neither reads nor writes.
func TestDisabledCallBypasses(t *testing.T) {
	t.Parallel()
	c := newCache(t, defaults())
	var calls atomic.Int32
	if _, _, err := c.Fetch(t.Context(), key("a"), nil, fetcher(&calls, tools("old"))); err != nil {
		t.Fatal(err)
	}
	off := false
	got, hit, err := c.Fetch(t.Context(), key("a"), &off, fetcher(&calls, tools("new")))
	if err != nil || hit || got[0].GetName() != "new" {
		t.Fatalf("disabled fetch: %v %v %v", got, hit, err)
	}
	got, hit, _ = c.Fetch(t.Context(), key("a"), nil, fetcher(&calls, tools("never")))
	if !hit || got[0].GetName() != "old" {
		t.Errorf("the disabled call overwrote the entry: %v hit=%v", got, hit)
	}
	// Disabled for the whole process.
	c2 := newCache(t, Settings{Enabled: false, TTL: time.Minute, MaxEntries: 1})
	for range 2 {
		if _, hit, _ := c2.Fetch(t.Context(), key("a"), nil, fetcher(&calls, tools("x"))); hit {
			t.Error("a disabled cache hit")
		}
	}
	if s := c2.Stats(); s.Size != 0 {
		t.Errorf("a disabled cache stored %d entries", s.Size)
	}
}

// R-C3: keys isolate endpoint, credentials, command, args, env and allowed
// tools; the display name is not part of them; raw secrets never are.
func TestKeys(t *testing.T) {
	t.Parallel()
	base := KeyParts{URL: "https://mcp.example.com/mcp", Authorization: "tok-secret-1", AllowedTools: []string{"b", "a"}}
	same := base
	same.AllowedTools = []string{"a", "b"}
	if NewKey(base) != NewKey(same) {
		t.Error("allowed tools in another order changed the key")
	}
	for name, change := range map[string]func(*KeyParts){
		"credential":    func(p *KeyParts) { p.Authorization = "tok-secret-2" },
		"url":           func(p *KeyParts) { p.URL = "https://mcp.example.com/other" },
		"header":        func(p *KeyParts) { p.Headers = map[string]string{"X-Key": "v"} },
		"allowed tools": func(p *KeyParts) { p.AllowedTools = []string{"a"} },
		"tenant":        func(p *KeyParts) { p.Tenant = "acme" },
		"command":       func(p *KeyParts) { p.Command = "npx" },
		"args":          func(p *KeyParts) { p.Args = []string{"-y"} },
		"env":           func(p *KeyParts) { p.Env = map[string]string{"A": "1"} },
	} {
		other := base
		change(&other)
		if NewKey(other) == NewKey(base) {
			t.Errorf("a different %s gave the same key", name)
		}
	}
	k := NewKey(base)
	if strings.Contains(string(k.sum[:]), "tok-secret-1") || strings.Contains(k.String(), "tok-secret-1") {
		t.Error("the raw secret is in the key")
	}
}

// R-C5: callers get copies.
func TestCopies(t *testing.T) {
	t.Parallel()
	c := newCache(t, defaults())
	fetched := tools("x")
	var calls atomic.Int32
	got, _, _ := c.Fetch(t.Context(), key("a"), nil, fetcher(&calls, fetched))
	got[0].Name = "mutated by the caller"
	fetched[0].Name = "mutated by the fetcher"
	again, _, _ := c.Fetch(t.Context(), key("a"), nil, fetcher(&calls, nil))
	if again[0].GetName() != "x" {
		t.Errorf("entry corrupted: %q", again[0].GetName())
	}
}

// X-H6: an entry is served until exactly its TTL after it was written, then
// fetched again (the clock is a synctest bubble's, so the times are
// exact); beyond MaxEntries the oldest write goes.
func TestExpiryAndEviction(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		c := newCache(t, Settings{Enabled: true, TTL: time.Minute, MaxEntries: 2})
		var calls atomic.Int32
		c.Fetch(t.Context(), key("a"), nil, fetcher(&calls, tools("a")))
		time.Sleep(time.Minute - time.Nanosecond)
		if _, hit, _ := c.Fetch(t.Context(), key("a"), nil, fetcher(&calls, tools("a2"))); !hit {
			t.Error("X-H6 an entry expired before its TTL")
		}
		time.Sleep(time.Nanosecond)
		if got, hit, _ := c.Fetch(t.Context(), key("a"), nil, fetcher(&calls, tools("a2"))); hit || got[0].GetName() != "a2" {
			t.Error("X-H6 an entry was served at its TTL")
		}
		if s := c.Stats(); s.Size != 1 {
			t.Errorf("size after re-fetching a stale entry = %d, want 1", s.Size)
		}
		time.Sleep(time.Second)
		c.Fetch(t.Context(), key("b"), nil, fetcher(&calls, tools("b")))
		c.Fetch(t.Context(), key("c"), nil, fetcher(&calls, tools("c"))) // evicts the oldest write: a
		if s := c.Stats(); s.Size != 2 {
			t.Errorf("size = %d, want 2", s.Size)
		}
		if _, hit, _ := c.Fetch(t.Context(), key("a"), nil, fetcher(&calls, tools("a"))); hit {
			t.Error("the oldest write was not evicted")
		}
	})
}

// R-C4: invalidate one entry; clear drops entries and counters.
func TestInvalidateAndClear(t *testing.T) {
	t.Parallel()
	c := newCache(t, defaults())
	var calls atomic.Int32
	c.Fetch(t.Context(), key("a"), nil, fetcher(&calls, tools("a")))
	c.Fetch(t.Context(), key("b"), nil, fetcher(&calls, tools("b")))
	if !c.Invalidate(key("a")) || c.Invalidate(key("a")) {
		t.Error("Invalidate should report true once")
	}
	if _, hit, _ := c.Fetch(t.Context(), key("b"), nil, fetcher(&calls, nil)); !hit {
		t.Error("invalidating a dropped b too")
	}
	c.Clear()
	if s := c.Stats(); s.Size != 0 || s.Hits != 0 || s.Misses != 0 {
		t.Errorf("stats after Clear = %+v", s)
	}
}

// X-I5: TenantStats and ClearTenant see one tenant's entries and lookups
// alone; ClearTenant leaves the other tenants' entries, their counters and
// the totals as they were.
func TestTenantScope(t *testing.T) {
	t.Parallel()
	c := newCache(t, defaults())
	var calls atomic.Int32
	fetch := func(tenant, url string) {
		t.Helper()
		if _, _, err := c.Fetch(t.Context(), NewKey(KeyParts{Tenant: tenant, URL: url}), nil, fetcher(&calls, tools("x"))); err != nil {
			t.Fatal(err)
		}
	}
	fetch("acme", "a")
	fetch("acme", "a")
	fetch("acme", "b")
	fetch("globex", "a")
	counts := func(s Stats) [3]int64 { return [3]int64{s.Size, s.Hits, s.Misses} }
	for _, tc := range []struct {
		name string
		got  Stats
		want [3]int64
	}{
		{"acme", c.TenantStats("acme"), [3]int64{2, 1, 2}},
		{"globex", c.TenantStats("globex"), [3]int64{1, 0, 1}},
		{"a tenant with nothing", c.TenantStats("initech"), [3]int64{0, 0, 0}},
		{"the whole cache", c.Stats(), [3]int64{3, 1, 3}},
	} {
		if got := counts(tc.got); got != tc.want {
			t.Errorf("X-I5 %s: size, hits, misses = %v, want %v", tc.name, got, tc.want)
		}
		if tc.got.Settings != defaults() {
			t.Errorf("X-I5 %s: settings %+v, want the cache's", tc.name, tc.got.Settings)
		}
	}
	if n := c.ClearTenant("acme"); n != 2 {
		t.Errorf("ClearTenant(acme) dropped %d entries, want 2", n)
	}
	if got := counts(c.TenantStats("acme")); got != [3]int64{} {
		t.Errorf("X-I5 acme after its clear: %v, want nothing", got)
	}
	if got := counts(c.TenantStats("globex")); got != [3]int64{1, 0, 1} {
		t.Errorf("X-I5 globex after acme's clear: %v, want as before", got)
	}
	if got := counts(c.Stats()); got != [3]int64{1, 1, 3} {
		t.Errorf("X-I5 the whole cache after acme's clear: %v, want one entry and the totals as before", got)
	}
	if _, hit, _ := c.Fetch(t.Context(), NewKey(KeyParts{Tenant: "globex", URL: "a"}), nil, fetcher(&calls, nil)); !hit {
		t.Error("X-I5 acme's clear dropped globex's entry")
	}
}

// X-C6: concurrent misses on one key make one fetch. (In a synctest
// bubble, so that the test knows when every caller waits.)
func TestConcurrentMissesFetchOnce(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		c := newCache(t, defaults())
		var calls atomic.Int32
		release := make(chan struct{})
		slow := func(context.Context) ([]*bridgev1.Tool, error) {
			calls.Add(1)
			<-release
			return tools("x"), nil
		}
		const n = 8
		var wg sync.WaitGroup
		results := make([][]*bridgev1.Tool, n)
		for i := range n {
			wg.Go(func() { results[i], _, _ = c.Fetch(t.Context(), key("a"), nil, slow) })
		}
		synctest.Wait() // every caller is the leader or waits on it
		if s := c.Stats(); s.Misses != n {
			t.Errorf("stats = %+v; want %d misses", s, n)
		}
		close(release)
		wg.Wait()
		if calls.Load() != 1 {
			t.Errorf("%d fetches for concurrent misses, want 1", calls.Load())
		}
		for i, r := range results {
			if len(r) != 1 || r[0].GetName() != "x" {
				t.Errorf("caller %d got %v", i, r)
			}
		}
	})
}

// A waiter whose leader gave up fetches itself instead of failing.
func TestWaiterTakesOverWhenLeaderGivesUp(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		c := newCache(t, defaults())
		leaderCtx, cancelLeader := context.WithCancel(t.Context())
		leaderDone := make(chan error, 1)
		go func() {
			_, _, err := c.Fetch(leaderCtx, key("a"), nil, func(ctx context.Context) ([]*bridgev1.Tool, error) {
				<-ctx.Done()
				return nil, ctx.Err()
			})
			leaderDone <- err
		}()
		synctest.Wait() // the leader fetches
		waiterDone := make(chan []*bridgev1.Tool, 1)
		go func() {
			got, _, err := c.Fetch(t.Context(), key("a"), nil, func(context.Context) ([]*bridgev1.Tool, error) { return tools("mine"), nil })
			if err != nil {
				t.Errorf("waiter: %v", err)
			}
			waiterDone <- got
		}()
		synctest.Wait() // the waiter waits on the leader
		if s := c.Stats(); s.Misses != 2 {
			t.Fatalf("stats = %+v; want the leader's and the waiter's misses", s)
		}
		cancelLeader()
		if err := <-leaderDone; !errors.Is(err, context.Canceled) {
			t.Errorf("leader: %v", err)
		}
		if got := <-waiterDone; len(got) != 1 || got[0].GetName() != "mine" {
			t.Errorf("waiter got %v", got)
		}
	})
}

func TestManyGoroutines(t *testing.T) {
	t.Parallel()
	c := newCache(t, Settings{Enabled: true, TTL: time.Minute, MaxEntries: 4})
	var calls atomic.Int32
	var wg sync.WaitGroup
	for g := range 8 {
		wg.Go(func() {
			for i := range 50 {
				k := key(string(rune('a' + (g+i)%6)))
				if _, _, err := c.Fetch(t.Context(), k, nil, fetcher(&calls, tools("x"))); err != nil {
					t.Error(err)
				}
				if i%10 == 0 {
					c.Invalidate(k)
				}
			}
		})
	}
	wg.Wait()
	if s := c.Stats(); s.Size > 4 || s.Hits+s.Misses != 400 {
		t.Errorf("stats = %+v", s)
	}
}

// A tool list fetched while its entry was invalidated (the server said its
// tools changed meanwhile) is not stored: it may be the old list.
func TestInvalidateDuringFetch(t *testing.T) {
	t.Parallel()
	for name, drop := range map[string]func(*Cache, Key){
		"invalidate":       func(c *Cache, k Key) { c.Invalidate(k) },
		"clear":            func(c *Cache, _ Key) { c.Clear() },
		"reset":            func(c *Cache, _ Key) { c.Reset() },
		"clear the tenant": func(c *Cache, _ Key) { c.ClearTenant("t") },
	} {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			c, err := New(defaults(), nil)
			if err != nil {
				t.Fatal(err)
			}
			k := NewKey(KeyParts{Tenant: "t"})
			started, release, done := make(chan struct{}), make(chan struct{}), make(chan struct{})
			go func() {
				defer close(done)
				_, _, _ = c.Fetch(context.Background(), k, nil, func(context.Context) ([]*bridgev1.Tool, error) {
					close(started)
					<-release
					return []*bridgev1.Tool{{Name: "old"}}, nil
				})
			}()
			<-started
			drop(c, k)
			close(release)
			<-done
			tools, hit, err := c.Fetch(context.Background(), k, nil, func(context.Context) ([]*bridgev1.Tool, error) {
				return []*bridgev1.Tool{{Name: "new"}}, nil
			})
			if err != nil || hit || tools[0].GetName() != "new" {
				t.Errorf("Fetch after the drop = %v, hit %v, %v; want the new list, fetched", tools, hit, err)
			}
		})
	}
}

// TestServerTTL: X-M8. A 2026-07-28 server's ttlMs bounds its entry's
// life: the entry lives for the shorter of the cache's TTL and the
// server's, and a ttlMs of zero caches nothing. Without a hint the cache's
// TTL alone counts.
func TestServerTTL(t *testing.T) {
	t.Parallel()
	ms := func(d time.Duration) *time.Duration { return &d }
	for _, tc := range []struct {
		name string
		hint *time.Duration
		// lifetime: cached just before it, gone at it.
		lifetime time.Duration
	}{
		{"no hint", nil, time.Minute},
		{"shorter", ms(10 * time.Second), 10 * time.Second},
		{"longer", ms(time.Hour), time.Minute},
		{"zero", ms(0), 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			synctest.Test(t, func(t *testing.T) {
				c := newCache(t, Settings{Enabled: true, TTL: time.Minute, MaxEntries: 10})
				var calls atomic.Int32
				fetch := func(context.Context) ([]*bridgev1.Tool, *time.Duration, error) {
					calls.Add(1)
					return tools("x"), tc.hint, nil
				}
				get := func() bool {
					t.Helper()
					_, hit, err := c.FetchTTL(t.Context(), key("a"), nil, fetch)
					if err != nil {
						t.Fatal(err)
					}
					return hit
				}
				get()
				if tc.lifetime > 0 {
					time.Sleep(tc.lifetime - time.Millisecond)
					if !get() {
						t.Errorf("missed %s after the write, within the entry's life", tc.lifetime-time.Millisecond)
					}
					time.Sleep(time.Millisecond)
				}
				if get() {
					t.Errorf("hit %s after the write; want the entry gone", tc.lifetime)
				}
			})
		})
	}
}

// TestProtocolMemory: X-M8. The cache remembers each server's protocol
// version under its ServerKey (the allowed tools do not count); Clear and
// ClearTenant forget it, so a server upgraded since is probed again.
func TestProtocolMemory(t *testing.T) {
	t.Parallel()
	c := newCache(t, defaults())
	a := ServerKey(KeyParts{Tenant: "acme", URL: "https://a.example/mcp", AllowedTools: []string{"x"}})
	if a != ServerKey(KeyParts{Tenant: "acme", URL: "https://a.example/mcp"}) {
		t.Error("the allowed tools change a server's key")
	}
	b := ServerKey(KeyParts{Tenant: "beta", URL: "https://a.example/mcp"})
	c.RememberProtocol(a, "2025-11-25")
	c.RememberProtocol(b, "2026-07-28")
	if got := [2]string{c.ProtocolVersion(a), c.ProtocolVersion(b)}; got != [2]string{"2025-11-25", "2026-07-28"} {
		t.Errorf("remembered %v", got)
	}
	c.ClearTenant("acme")
	if got := [2]string{c.ProtocolVersion(a), c.ProtocolVersion(b)}; got != [2]string{"", "2026-07-28"} {
		t.Errorf("after ClearTenant(acme): %v", got)
	}
	c.Clear()
	if got := c.ProtocolVersion(b); got != "" {
		t.Errorf("after Clear: %q", got)
	}
}

// TestCached: Cached answers only when every key has a fresh entry,
// counting a hit for each, and otherwise counts nothing and fetches
// nothing; its lists are copies (R-C5), and a disabled cache, or a
// call's override off, has nothing. The clock is a synctest bubble's.
func TestCached(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		c := newCache(t, Settings{Enabled: true, TTL: time.Minute, MaxEntries: 10})
		var calls atomic.Int32
		c.Fetch(t.Context(), key("a"), nil, fetcher(&calls, tools("a1", "a2")))
		c.Fetch(t.Context(), key("b"), nil, fetcher(&calls, tools("b1")))
		before := c.Stats()
		off := false
		for _, tc := range []struct {
			name    string
			keys    []Key
			enabled *bool
			want    [][]string
			hits    int64
		}{
			{"every key cached", []Key{key("b"), key("a")}, nil, [][]string{{"b1"}, {"a1", "a2"}}, 2},
			{"no keys", nil, nil, [][]string{}, 0},
			{"one key not cached", []Key{key("a"), key("c")}, nil, nil, 0},
			{"the call's override off", []Key{key("a")}, &off, nil, 0},
		} {
			lists, ok := c.Cached(tc.keys, tc.enabled, nil)
			var got [][]string
			if ok {
				got = [][]string{}
				for _, l := range lists {
					var names []string
					for _, tool := range l.Tools {
						names = append(names, tool.GetName())
					}
					got = append(got, names)
				}
			}
			if ok != (tc.want != nil) || !cmp.Equal(tc.want, got) {
				t.Errorf("%s: Cached = %v, %v; want %v", tc.name, got, ok, tc.want)
			}
			s := c.Stats()
			if s.Hits-before.Hits != tc.hits || s.Misses != before.Misses {
				t.Errorf("%s: hits +%d, misses +%d; want +%d, +0", tc.name, s.Hits-before.Hits, s.Misses-before.Misses, tc.hits)
			}
			before = s
		}

		lists, _ := c.Cached([]Key{key("a")}, nil, nil)
		lists[0].Tools[0].Name = "mutated by the caller"
		if again, _ := c.Cached([]Key{key("a")}, nil, nil); again[0].Tools[0].GetName() != "a1" {
			t.Errorf("R-C5 an entry changed with the list Cached returned: %q", again[0].Tools[0].GetName())
		}

		time.Sleep(time.Minute)
		if _, ok := c.Cached([]Key{key("a")}, nil, nil); ok {
			t.Error("Cached answered with an entry whose TTL had passed")
		}
		disabled := newCache(t, Settings{Enabled: false, TTL: time.Minute, MaxEntries: 10})
		if _, ok := disabled.Cached([]Key{key("a")}, nil, nil); ok {
			t.Error("a disabled cache answered Cached")
		}
		if calls.Load() != 2 {
			t.Errorf("%d fetches, want 2: Cached fetches nothing", calls.Load())
		}
	})
}

// TestRevisions: every list the cache stores has a revision of its own
// (never zero), which FetchRevision returns with the list whether it
// stored it, served it or waited for it; a list it does not store has
// none. Cached leaves out, counting a hit, a list whose revision the
// caller names as known, and a list written again (after an invalidation)
// has a new revision, so a caller never takes a new list for an old one.
// Two caches start their revisions apart.
func TestRevisions(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) { testRevisions(t) })
}

// testRevisions is TestRevisions in a synctest bubble, which says when a
// second caller waits on a fetch in progress.
func testRevisions(t *testing.T) {
	c := newCache(t, Settings{Enabled: true, TTL: time.Minute, MaxEntries: 10})
	fetch := func(names ...string) func(context.Context) ([]*bridgev1.Tool, *time.Duration, error) {
		return func(context.Context) ([]*bridgev1.Tool, *time.Duration, error) { return tools(names...), nil, nil }
	}
	revision := func(k Key, enabled *bool, f func(context.Context) ([]*bridgev1.Tool, *time.Duration, error)) uint64 {
		t.Helper()
		_, _, r, err := c.FetchRevision(t.Context(), k, "", enabled, f)
		if err != nil {
			t.Fatal(err)
		}
		return r
	}
	a := revision(key("a"), nil, fetch("a1"))
	b := revision(key("b"), nil, fetch("b1"))
	if a == 0 || b == 0 || a == b {
		t.Fatalf("revisions of two stored lists: %d and %d; want two, neither zero", a, b)
	}
	if again := revision(key("a"), nil, fetch("changed")); again != a {
		t.Errorf("a hit's revision %d; want the entry's, %d", again, a)
	}
	off := false
	if r := revision(key("c"), &off, fetch("c1")); r != 0 {
		t.Errorf("a list fetched with the cache off has revision %d; want 0", r)
	}
	zero := time.Duration(0)
	if r := revision(key("d"), nil, func(context.Context) ([]*bridgev1.Tool, *time.Duration, error) { return tools("d1"), &zero, nil }); r != 0 {
		t.Errorf("a list the server said not to cache has revision %d; want 0", r)
	}

	// A waiter on the fetch in progress gets the revision it stored.
	release := make(chan struct{})
	started := make(chan struct{})
	var leader, waiter uint64
	var wg sync.WaitGroup
	wg.Go(func() {
		_, _, leader, _ = c.FetchRevision(t.Context(), key("e"), "", nil, func(context.Context) ([]*bridgev1.Tool, *time.Duration, error) {
			close(started)
			<-release
			return tools("e1"), nil, nil
		})
	})
	<-started
	wg.Go(func() { _, _, waiter, _ = c.FetchRevision(t.Context(), key("e"), "", nil, fetch("never")) })
	synctest.Wait() // the second caller waits on the first's fetch
	close(release)
	wg.Wait()
	if leader == 0 || waiter != leader {
		t.Errorf("the fetch's revision %d, its waiter's %d; want one, not zero", leader, waiter)
	}

	before := c.Stats()
	lists, ok := c.Cached([]Key{key("a"), key("b")}, nil, []uint64{a, a})
	if !ok {
		t.Fatal("Cached did not answer")
	}
	want := []Listed{{Revision: a, Known: true}, {Tools: tools("b1"), Revision: b}}
	if diff := cmp.Diff(want, lists, protocmp.Transform()); diff != "" {
		t.Errorf("Cached with a's revision known for both keys (-want +got):\n%s", diff)
	}
	if s := c.Stats(); s.Hits-before.Hits != 2 {
		t.Errorf("hits +%d; want +2: a known list is a hit", s.Hits-before.Hits)
	}
	if lists, _ := c.Cached([]Key{key("a"), key("b")}, nil, []uint64{0}); lists[0].Known || lists[0].Tools == nil || lists[1].Known {
		t.Errorf("Cached with known shorter than keys, naming no revision: %v", lists)
	}

	c.Invalidate(key("a"))
	if r := revision(key("a"), nil, fetch("a2")); r == a || r == 0 {
		t.Errorf("the list written after an invalidation has revision %d; want a new one (the old was %d)", r, a)
	}
	if lists, _ := c.Cached([]Key{key("a")}, nil, []uint64{a}); lists[0].Known || len(lists[0].Tools) != 1 || lists[0].Tools[0].GetName() != "a2" {
		t.Errorf("Cached named the old revision as known after the list changed: %v", lists)
	}

	other := newCache(t, Settings{Enabled: true, TTL: time.Minute, MaxEntries: 10})
	if _, _, r, _ := other.FetchRevision(t.Context(), key("a"), "", nil, fetch("a1")); r == a || r == b {
		t.Errorf("a second cache's first revision %d is one of the first cache's", r)
	}
}
