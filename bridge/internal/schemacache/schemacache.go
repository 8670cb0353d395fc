// Package schemacache is the bridge's process-wide cache of MCP tool
// schemas: what a server's tools/list returned (after allowed_tools), so a
// generation with a warm cache connects to nothing until a tool is called.
//
// It is safe for concurrent use. Entries live for a TTL and the cache holds
// at most MaxEntries, evicting the oldest write first (the defaults are
// config.DefaultCache's); expiry uses the monotonic clock. Concurrent misses on
// one key make one fetch. Callers get copies: nothing they do to a result
// changes an entry. Only tool schemas are cached, never results.
//
// # Trade-offs
//
// A cached list can be stale for up to the TTL when a server changes its
// tools without sending notifications/tools/list_changed (which invalidates
// the entry at once); Invalidate and Clear exist for deploy hooks. Keys are
// SHA-256 digests: credentials enter them only through the hash, never raw.
//
// Every entry belongs to the tenant its key was made for: TenantStats and
// ClearTenant see and drop one tenant's entries only, and count its
// lookups apart, for an admin whose reach is one tenant. Entries describes
// the entries for an admin (never their tools), and InvalidateTenant drops
// a tenant's.
//
// The cache records its hits, misses, evictions and entries as
// OpenTelemetry metrics, by tenant, never by key or server.
//
// # Protocol versions
//
// Beside each server's entry the cache remembers the MCP protocol version
// the server negotiated, under the server's key (ServerKey), so the
// bridge offers a server known to be classic the classic handshake at once.
// That memory is the bridge process's own: it is lost when the bridge
// restarts, and Clear, ClearTenant and Reset drop it too (a server
// upgraded to 2026-07-28 is probed again). A 2026-07-28 server's ttlMs bounds its
// entry's life (FetchTTL).
package schemacache

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"math/rand/v2"
	"slices"
	"sync"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/metric"
	"go.opentelemetry.io/otel/metric/noop"
	"google.golang.org/protobuf/proto"

	bridgev1 "github.com/agentd/agentd/gen/go/agentd/bridge/v1"
)

// Settings are the cache's settings.
type Settings struct {
	// Enabled: the cache is read and written (a session may opt out).
	Enabled bool
	// TTL is an entry's lifetime; positive.
	TTL time.Duration
	// MaxEntries bounds the entries held; positive.
	MaxEntries int
}

// Validate reports settings that are not positive.
func (s Settings) Validate() error {
	var errs []error
	if s.TTL <= 0 {
		errs = append(errs, fmt.Errorf("the tool cache's ttl must be a positive duration, got %s", s.TTL))
	}
	if s.MaxEntries <= 0 {
		errs = append(errs, fmt.Errorf("the tool cache's max_entries must be a positive integer, got %d", s.MaxEntries))
	}
	return errors.Join(errs...)
}

// Key identifies a server's tool list: a SHA-256 digest, printable in
// logs because it reveals nothing, and the tenant it belongs to.
type Key struct {
	tenant string
	sum    [sha256.Size]byte
}

func (k Key) String() string { return hex.EncodeToString(k.sum[:8]) }

// KeyParts are what isolates one cache entry from another, and one
// server from another wherever the bridge keeps something per server (its
// protocol version, the pool of its processes: ServerKey). The display
// name of a server is deliberately not among them: renaming a server keeps
// its entry.
type KeyParts struct {
	Tenant        string
	URL           string
	Authorization string
	Headers       map[string]string
	Command       string
	Args          []string
	Env           map[string]string
	Unset         []string
	AllowedTools  []string
}

// NewKey hashes parts. Maps and the allowed tools are taken in sorted
// order, so equal declarations share an entry.
func NewKey(p KeyParts) Key {
	sorted := func(ss []string) []string { return slices.Sorted(slices.Values(ss)) }
	pairs := func(m map[string]string) [][2]string {
		var out [][2]string
		for _, k := range slices.Sorted(maps.Keys(m)) {
			out = append(out, [2]string{k, m[k]})
		}
		return out
	}
	// Credentials are hashed on their own first, so that even the
	// pre-image of a key holds no raw secret.
	secret := func(s string) string {
		if s == "" {
			return ""
		}
		sum := sha256.Sum256([]byte(s))
		return hex.EncodeToString(sum[:])
	}
	headers := pairs(p.Headers)
	for i := range headers {
		headers[i][1] = secret(headers[i][1])
	}
	env := pairs(p.Env)
	for i := range env {
		env[i][1] = secret(env[i][1])
	}
	data, _ := json.Marshal(struct {
		Tenant, URL, Authorization, Command string
		Headers, Env                        [][2]string
		Args, Unset, AllowedTools           []string
	}{
		Tenant: p.Tenant, URL: p.URL, Authorization: secret(p.Authorization), Command: p.Command,
		Headers: headers, Env: env, Args: p.Args, Unset: sorted(p.Unset), AllowedTools: sorted(p.AllowedTools),
	})
	return Key{tenant: p.Tenant, sum: sha256.Sum256(data)}
}

// Stats counts what the cache (or one tenant's part of it) did since the
// last Clear (or ClearTenant).
type Stats struct {
	Size, Hits, Misses int64
	Settings           Settings
}

type entry struct {
	tools    []*bridgev1.Tool
	expires  time.Time
	written  uint64 // write order, for eviction
	revision uint64 // Listed.Revision
	// server names the server the write fetched from, as its session
	// declared it; writtenAt is the write's time (Entries).
	server    string
	writtenAt time.Time
	changes   int64 // Entry.Revision
}

// listMark is the last list stored under a key, by its digest, and the
// number of different lists stored under it in a row (Entry.Revision):
// it outlives the entry, so that a list fetched again after an expiry
// is known as the same.
type listMark struct {
	sum     [sha256.Size]byte
	changes int64
}

// flight is a fetch in progress that later misses on its key wait for.
type flight struct {
	done     chan struct{}
	tools    []*bridgev1.Tool
	revision uint64 // the entry it stored; 0: none (c.mu guards it)
	err      error
	// stale: the entry was invalidated (or the cache cleared) while the
	// fetch ran, so what it fetched may predate the change and is not
	// stored. c.mu guards it.
	stale bool
}

// Cache is the tool-schema cache.
type Cache struct {
	mu       sync.Mutex
	defaults Settings // what Reset restores
	settings Settings
	entries  map[Key]*entry
	flights  map[Key]*flight
	writes   uint64
	revision uint64 // the last entry's revision; starts at random
	hits     int64
	misses   int64
	// tenants counts each tenant's lookups, which ClearTenant zeroes
	// without touching the others' or the totals above, and holds its
	// measurement options.
	tenants map[string]*lookups
	meters  meters
	// versions are the protocol versions the servers negotiated, by
	// ServerKey.
	versions map[Key]string
	// marks are the lists last stored, by key, at most maxVersions.
	marks map[Key]listMark
}

// maxVersions bounds the remembered protocol versions; past it an
// arbitrary one is forgotten (that server is probed again).
const maxVersions = 10000

// lookups counts one tenant's hits and misses, and holds the options of
// its measurements, made once.
type lookups struct {
	hits, misses int64
	attrs        metric.MeasurementOption
	evicted      [nReasons]metric.AddOption
}

// tenant returns tenant's lookups, made on first use. c.mu is held.
func (c *Cache) tenant(tenant string) *lookups {
	t := c.tenants[tenant]
	if t == nil {
		set := attribute.NewSet(attribute.String("tenant", tenant))
		t = &lookups{attrs: metric.WithAttributeSet(set)}
		for r, name := range reasons {
			t.evicted[r] = metric.WithAttributeSet(attribute.NewSet(attribute.String("tenant", tenant), attribute.String("reason", name)))
		}
		c.tenants[tenant] = t
	}
	return t
}

// count counts a hit or a miss under key. c.mu is held.
func (c *Cache) count(key Key, hit bool) {
	t := c.tenant(key.tenant)
	if hit {
		c.hits++
		t.hits++
		c.meters.hits.Add(context.Background(), 1, t.attrs)
	} else {
		c.misses++
		t.misses++
		c.meters.misses.Add(context.Background(), 1, t.attrs)
	}
}

// reason is why an entry was evicted (agentd.schema_cache.evictions).
type reason int

const (
	expired     reason = iota // its TTL passed
	capacity                  // the cache held max_entries, and it was the oldest write
	invalidated               // its server's tools changed (Invalidate)
	cleared                   // an admin cleared the cache or the tenant's part
	nReasons
)

var reasons = [nReasons]string{"expired", "capacity", "invalidated", "cleared"}

// evicted counts n entries of tenant evicted for why. c.mu is held.
func (c *Cache) evicted(tenant string, why reason, n int64) {
	c.meters.evictions.Add(context.Background(), n, c.tenant(tenant).evicted[why])
}

// meters are the cache's instruments.
type meters struct {
	hits, misses, evictions metric.Int64Counter
	reg                     metric.Registration
}

// New returns an empty cache with the given settings, which Reset
// restores. Its metrics come from mp (nil: none); Close stops observing
// its entries.
func New(s Settings, mp metric.MeterProvider) (*Cache, error) {
	if err := s.Validate(); err != nil {
		return nil, err
	}
	if mp == nil {
		mp = noop.NewMeterProvider()
	}
	c := &Cache{defaults: s, settings: s, entries: make(map[Key]*entry), flights: make(map[Key]*flight), tenants: make(map[string]*lookups), versions: make(map[Key]string),
		marks: make(map[Key]listMark), revision: rand.Uint64() >> 1} // room for 2^63 writes before zero comes round
	m := mp.Meter("github.com/agentd/agentd/bridge")
	var errs [5]error
	c.meters.hits, errs[0] = m.Int64Counter("agentd.schema_cache.hits", metric.WithUnit("{lookup}"),
		metric.WithDescription("Tool-schema lookups served from the cache."))
	c.meters.misses, errs[1] = m.Int64Counter("agentd.schema_cache.misses", metric.WithUnit("{lookup}"),
		metric.WithDescription("Tool-schema lookups that had to list the server's tools (or wait for another lookup's listing)."))
	c.meters.evictions, errs[2] = m.Int64Counter("agentd.schema_cache.evictions", metric.WithUnit("{entry}"),
		metric.WithDescription("Tool-schema cache entries dropped, by reason."))
	var entries metric.Int64ObservableUpDownCounter
	entries, errs[3] = m.Int64ObservableUpDownCounter("agentd.schema_cache.entries", metric.WithUnit("{entry}"),
		metric.WithDescription("Tool-schema cache entries held (an expired one until a lookup or a write drops it)."))
	c.meters.reg, errs[4] = m.RegisterCallback(func(_ context.Context, o metric.Observer) error {
		c.mu.Lock()
		defer c.mu.Unlock()
		byTenant := make(map[string]int64)
		for k := range c.entries {
			byTenant[k.tenant]++
		}
		for tenant, n := range byTenant {
			o.ObserveInt64(entries, n, c.tenant(tenant).attrs)
		}
		return nil
	}, entries)
	if err := errors.Join(errs[:]...); err != nil {
		return nil, err
	}
	return c, nil
}

// Close stops observing the cache's entries; the cache still works.
// Idempotent.
func (c *Cache) Close() error { return c.meters.reg.Unregister() }

// Fetch returns the tools cached under key, or calls fetch and caches its
// result. enabled overrides the cache's setting for this call when not
// nil; a disabled call runs fetch and neither reads nor writes the cache.
// hit reports that nothing was fetched. While one fetch for a key runs,
// other callers for that key wait for it; if it fails because its own
// caller gave up, the next waiter fetches in its place.
func (c *Cache) Fetch(ctx context.Context, key Key, enabled *bool, fetch func(context.Context) ([]*bridgev1.Tool, error)) (tools []*bridgev1.Tool, hit bool, err error) {
	return c.FetchTTL(ctx, key, enabled, func(ctx context.Context) ([]*bridgev1.Tool, *time.Duration, error) {
		tools, err := fetch(ctx)
		return tools, nil, err
	})
}

// FetchTTL is Fetch for a fetch that may also say how long the server lets
// its list be cached (a 2026-07-28 server's ttlMs; nil: no hint). The
// entry then lives for the shorter of the cache's TTL and the server's:
// the configured TTL is a ceiling the server can only lower, and a hint of
// zero (the protocol's "immediately stale") caches nothing.
func (c *Cache) FetchTTL(ctx context.Context, key Key, enabled *bool, fetch func(context.Context) ([]*bridgev1.Tool, *time.Duration, error)) (tools []*bridgev1.Tool, hit bool, err error) {
	tools, hit, _, err = c.FetchRevision(ctx, key, "", enabled, fetch)
	return tools, hit, err
}

// FetchRevision is FetchTTL that also returns the revision of the entry
// the list is (Listed.Revision): the one it was served from, or the one it was
// stored as; zero when it was not stored (the cache off for the call, a
// zero ttlMs, an invalidation while it was fetched). server names the
// server fetched from, as the session declared it, for Entries.
func (c *Cache) FetchRevision(ctx context.Context, key Key, server string, enabled *bool, fetch func(context.Context) ([]*bridgev1.Tool, *time.Duration, error)) (tools []*bridgev1.Tool, hit bool, revision uint64, err error) {
	c.mu.Lock()
	if !c.enabledFor(enabled) {
		c.mu.Unlock()
		tools, _, err := fetch(ctx)
		return clone(tools), false, 0, err
	}
	o, ok := c.serve(ctx, key)
	if !ok {
		o = c.lead(ctx, key, server, fetch)
	}
	return o.tools, o.hit, o.revision, o.err
}

// enabledFor reports whether a call reads and writes the cache: enabled,
// the call's override, or the cache's setting. c.mu is held.
func (c *Cache) enabledFor(enabled *bool) bool {
	if enabled != nil {
		return *enabled
	}
	return c.settings.Enabled
}

// outcome is what FetchRevision answers.
type outcome struct {
	tools    []*bridgev1.Tool
	hit      bool
	revision uint64
	err      error
}

// serve answers a lookup of key from a fresh entry, or from the fetch
// another caller runs for it, once that is done; it counts the lookup's
// one hit or miss. c.mu is held on entry. False: there is no entry and no
// fetch under way, and c.mu is still held, for the caller to fetch (lead).
func (c *Cache) serve(ctx context.Context, key Key) (outcome, bool) {
	counted := false
	for {
		if e := c.fresh(key); e != nil {
			if !counted {
				c.count(key, true)
			}
			c.mu.Unlock()
			return outcome{tools: clone(e.tools), hit: !counted, revision: e.revision}, true
		}
		if !counted {
			c.count(key, false)
			counted = true
		}
		f, waiting := c.flights[key]
		if !waiting {
			return outcome{}, false
		}
		c.mu.Unlock()
		if o, ok := c.wait(ctx, f); ok {
			return o, true
		}
		c.mu.Lock() // the leader gave up: try again, perhaps as leader
	}
}

// fresh returns key's entry unless it has expired: an expired entry is
// dropped, never served. c.mu is held.
func (c *Cache) fresh(key Key) *entry {
	e, ok := c.entries[key]
	if !ok {
		return nil
	}
	if time.Now().Before(e.expires) {
		return e
	}
	delete(c.entries, key)
	c.evicted(key.tenant, expired, 1)
	return nil
}

// wait waits for another caller's fetch f and answers with what it
// fetched; false if it failed because its own caller gave up, and this
// caller, still waiting, tries again. c.mu is not held.
func (c *Cache) wait(ctx context.Context, f *flight) (outcome, bool) {
	select {
	case <-f.done:
	case <-ctx.Done():
		return outcome{err: ctx.Err()}, true
	}
	leaderGaveUp := errors.Is(f.err, context.Canceled) || errors.Is(f.err, context.DeadlineExceeded)
	if f.err != nil && leaderGaveUp && ctx.Err() == nil {
		return outcome{}, false
	}
	c.mu.Lock()
	revision := f.revision
	c.mu.Unlock()
	return outcome{tools: clone(f.tools), revision: revision, err: f.err}, true
}

// lead fetches key's list, for this caller and every one that misses on
// key meanwhile, and stores it (store). c.mu is held on entry and
// released on return.
func (c *Cache) lead(ctx context.Context, key Key, server string, fetch func(context.Context) ([]*bridgev1.Tool, *time.Duration, error)) outcome {
	f := &flight{done: make(chan struct{})}
	c.flights[key] = f
	c.mu.Unlock()

	var hint *time.Duration
	f.tools, hint, f.err = fetch(ctx)
	f.tools = clone(f.tools)
	sum := digest(f.tools)

	c.mu.Lock()
	delete(c.flights, key)
	c.store(key, f, hint, server, sum)
	c.mu.Unlock()
	close(f.done)
	if f.err != nil {
		return outcome{err: f.err}
	}
	return outcome{tools: clone(f.tools), revision: f.revision}
}

// store keeps the list that f fetched from server under key, for the
// shorter of the TTL and the server's hint, unless the fetch failed, the
// cache was turned off or the entry invalidated meanwhile (f.stale), or
// the hint is zero; sum is the list's digest. c.mu is held.
func (c *Cache) store(key Key, f *flight, hint *time.Duration, server string, sum [sha256.Size]byte) {
	ttl := c.settings.TTL
	if hint != nil {
		ttl = min(ttl, *hint)
	}
	if f.err != nil || !c.settings.Enabled || f.stale || ttl <= 0 {
		return
	}
	c.writes++
	c.revision++
	f.revision = c.revision
	now := time.Now()
	c.entries[key] = &entry{tools: f.tools, expires: now.Add(ttl), written: c.writes, revision: c.revision,
		server: server, writtenAt: now, changes: c.mark(key, sum)}
	c.evict()
}

// mark records sum as the list last stored under key and returns the
// key's Entry.Revision: one more than before when the list differs from
// the last. c.mu is held.
func (c *Cache) mark(key Key, sum [sha256.Size]byte) int64 {
	m, ok := c.marks[key]
	if ok && m.sum == sum {
		return m.changes
	}
	if !ok && len(c.marks) >= maxVersions {
		for k := range c.marks {
			delete(c.marks, k)
			break
		}
	}
	c.marks[key] = listMark{sum: sum, changes: m.changes + 1}
	return m.changes + 1
}

// digest identifies a list of tools, in order.
func digest(tools []*bridgev1.Tool) [sha256.Size]byte {
	h := sha256.New()
	for _, t := range tools {
		b, _ := proto.MarshalOptions{Deterministic: true}.Marshal(t)
		fmt.Fprintf(h, "%d:", len(b))
		h.Write(b)
	}
	return [sha256.Size]byte(h.Sum(nil))
}

// Listed is one key's list as Cached answers it.
type Listed struct {
	// Tools is a copy of the entry's list; nil when Known.
	Tools []*bridgev1.Tool
	// Revision names the list the entry stored: each write of an entry
	// gets a revision of its own, unique within the cache's life, and a
	// cache starts its revisions at a random point, so two caches (two
	// bridge processes) are not expected to share one. Equal revisions
	// are the same list, of the same key: a caller that keeps what it
	// made of a list under its revision may use that again when the
	// revision comes back (OpenSessionRequest's known_revisions). Zero is
	// no revision: the list was not stored.
	Revision uint64
	// Known: the caller named Revision as one it holds, so Tools is left
	// out.
	Known bool
}

// Cached returns the tools cached under each of keys, in their order, if
// the cache holds a fresh entry for every one of them, counting a hit for
// each; otherwise it returns false and counts nothing, leaving each key to
// Fetch. It never fetches. enabled overrides the cache's setting as for
// Fetch: off, nothing is cached. Callers get copies, as from Fetch, except
// of the lists whose revision is known[i] (known may be shorter than keys,
// or nil), which they hold already: those are counted as hits and left
// out (Listed.Known).
func (c *Cache) Cached(keys []Key, enabled *bool, known []uint64) ([]Listed, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if !c.enabledFor(enabled) {
		return nil, false
	}
	now := time.Now()
	entries := make([]*entry, len(keys))
	for i, key := range keys {
		e, ok := c.entries[key]
		if !ok || !now.Before(e.expires) {
			return nil, false
		}
		entries[i] = e
	}
	out := make([]Listed, len(keys))
	for i, e := range entries {
		c.count(keys[i], true)
		out[i].Revision = e.revision
		if i < len(known) && known[i] == e.revision {
			out[i].Known = true
			continue
		}
		out[i].Tools = clone(e.tools)
	}
	return out, true
}

// evict drops expired entries, then the oldest writes, down to MaxEntries.
// c.mu is held.
func (c *Cache) evict() {
	now := time.Now()
	for k, e := range c.entries {
		if !now.Before(e.expires) {
			delete(c.entries, k)
			c.evicted(k.tenant, expired, 1)
		}
	}
	for len(c.entries) > c.settings.MaxEntries {
		var oldest Key
		var first uint64
		for k, e := range c.entries {
			if first == 0 || e.written < first {
				oldest, first = k, e.written
			}
		}
		delete(c.entries, oldest)
		c.evicted(oldest.tenant, capacity, 1)
	}
}

// Invalidate drops the entry under key and reports whether one existed.
func (c *Cache) Invalidate(key Key) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.invalidateLocked(key)
}

// invalidateLocked drops key's entry, counting it invalidated, makes a
// fetch of key under way store nothing, and reports whether there was an
// entry. c.mu is held.
func (c *Cache) invalidateLocked(key Key) bool {
	_, ok := c.entries[key]
	if ok {
		delete(c.entries, key)
		c.evicted(key.tenant, invalidated, 1)
	}
	if f := c.flights[key]; f != nil {
		f.stale = true
	}
	return ok
}

// Entry describes one entry for an admin: never its tools, nor anything
// of its key but the digest's printed form.
type Entry struct {
	// Key is the entry's key as it prints (Key.String), which
	// InvalidateKey takes.
	Key    string
	Tenant string
	// Server is the server's name as the session whose fetch wrote the
	// entry declared it.
	Server string
	// Revision counts the different lists stored under the key in a
	// row: 1 for the first, one more for each write whose list differs
	// from the one before (an expiry or an invalidation in between
	// included). Clear, ClearTenant and Reset start it again.
	Revision int64
	// Tools is the number of tools the entry holds.
	Tools            int
	Written, Expires time.Time
}

// Entries describes the entries that have not expired, of tenant alone
// unless all, most recently written first.
func (c *Cache) Entries(all bool, tenant string) []Entry {
	c.mu.Lock()
	defer c.mu.Unlock()
	now := time.Now()
	var out []Entry
	for k, e := range c.entries {
		if (all || k.tenant == tenant) && now.Before(e.expires) {
			out = append(out, Entry{Key: k.String(), Tenant: k.tenant, Server: e.server, Revision: e.changes,
				Tools: len(e.tools), Written: e.writtenAt, Expires: e.expires})
		}
	}
	slices.SortFunc(out, func(a, b Entry) int { return b.Written.Compare(a.Written) })
	return out
}

// InvalidateKey drops the entry whose key prints as key (Entry.Key), if
// it is of tenant or all, and reports whether one was dropped. As
// Invalidate, it makes a fetch of that key under way store nothing.
func (c *Cache) InvalidateKey(key string, all bool, tenant string) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	for k := range c.entries {
		if k.String() == key && (all || k.tenant == tenant) {
			c.invalidateLocked(k)
			return true
		}
	}
	return false
}

// InvalidateTenant drops the entries of tenant, as Invalidate drops one,
// and reports how many. Unlike ClearTenant, it leaves the tenant's
// counters and remembered protocol versions.
func (c *Cache) InvalidateTenant(tenant string) int {
	c.mu.Lock()
	defer c.mu.Unlock()
	n := 0
	for k := range c.entries {
		if k.tenant == tenant {
			c.invalidateLocked(k)
			n++
		}
	}
	for k, f := range c.flights {
		if k.tenant == tenant {
			f.stale = true
		}
	}
	return n
}

// clearLocked drops every entry, counting them cleared. c.mu is held.
func (c *Cache) clearLocked() {
	byTenant := make(map[string]int64)
	for k := range c.entries {
		byTenant[k.tenant]++
	}
	for tenant, n := range byTenant {
		c.evicted(tenant, cleared, n)
	}
	clear(c.entries)
}

// staleFlights marks every fetch under way stale. c.mu is held.
func (c *Cache) staleFlights() {
	for _, f := range c.flights {
		f.stale = true
	}
}

// Clear drops every entry and zeroes the counters.
func (c *Cache) Clear() {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.clearAllLocked()
}

// clearAllLocked drops every entry and remembered protocol version, marks
// the fetches under way stale, and zeroes the counters. c.mu is held.
func (c *Cache) clearAllLocked() {
	c.clearLocked()
	c.staleFlights()
	c.hits, c.misses = 0, 0
	clear(c.tenants)
	clear(c.versions)
	clear(c.marks)
}

// ClearTenant drops the entries of tenant, and zeroes its counters, and
// reports how many entries it dropped. Other tenants' entries and the
// cache's totals are untouched.
func (c *Cache) ClearTenant(tenant string) int {
	c.mu.Lock()
	defer c.mu.Unlock()
	n := 0
	for k := range c.entries {
		if k.tenant == tenant {
			delete(c.entries, k)
			n++
		}
	}
	if n > 0 {
		c.evicted(tenant, cleared, int64(n))
	}
	for k, f := range c.flights {
		if k.tenant == tenant {
			f.stale = true
		}
	}
	delete(c.tenants, tenant)
	for k := range c.versions {
		if k.tenant == tenant {
			delete(c.versions, k)
		}
	}
	for k := range c.marks {
		if k.tenant == tenant {
			delete(c.marks, k)
		}
	}
	return n
}

// ServerKey is the key of a server rather than of its tool list: its
// entry's parts without the allowed tools, which change the list but not
// the server. The cache remembers the server's protocol version under it,
// and the bridge finds a command's process pool by it.
func ServerKey(p KeyParts) Key {
	p.AllowedTools = nil
	return NewKey(p)
}

// ProtocolVersion is the protocol version the server of key (a ServerKey)
// negotiated last; "" if unknown.
func (c *Cache) ProtocolVersion(key Key) string {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.versions[key]
}

// RememberProtocol records the protocol version the server of key (a
// ServerKey) negotiated.
func (c *Cache) RememberProtocol(key Key, version string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if _, ok := c.versions[key]; !ok && len(c.versions) >= maxVersions {
		for k := range c.versions {
			delete(c.versions, k)
			break
		}
	}
	c.versions[key] = version
}

// Reset clears the cache and restores the settings it was created with.
func (c *Cache) Reset() Settings {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.clearAllLocked()
	c.settings = c.defaults
	return c.settings
}

// Configure changes the settings; nil arguments keep their value. Invalid
// settings are refused and change nothing.
func (c *Cache) Configure(enabled *bool, ttl *time.Duration, maxEntries *int) (Settings, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	s := c.settings
	if enabled != nil {
		s.Enabled = *enabled
	}
	if ttl != nil {
		s.TTL = *ttl
	}
	if maxEntries != nil {
		s.MaxEntries = *maxEntries
	}
	if err := s.Validate(); err != nil {
		return c.settings, err
	}
	c.settings = s
	c.evict()
	return s, nil
}

// Stats reports the cache's size, counters and settings.
func (c *Cache) Stats() Stats {
	c.mu.Lock()
	defer c.mu.Unlock()
	return Stats{Size: int64(len(c.entries)), Hits: c.hits, Misses: c.misses, Settings: c.settings}
}

// TenantStats reports the size and counters of tenant's entries alone,
// and the cache's settings.
func (c *Cache) TenantStats(tenant string) Stats {
	c.mu.Lock()
	defer c.mu.Unlock()
	s := Stats{Settings: c.settings}
	for k := range c.entries {
		if k.tenant == tenant {
			s.Size++
		}
	}
	if t := c.tenants[tenant]; t != nil {
		s.Hits, s.Misses = t.hits, t.misses
	}
	return s
}

func clone(tools []*bridgev1.Tool) []*bridgev1.Tool {
	if tools == nil {
		return nil
	}
	out := make([]*bridgev1.Tool, len(tools))
	for i, t := range tools {
		out[i] = proto.Clone(t).(*bridgev1.Tool)
	}
	return out
}
