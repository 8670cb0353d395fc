package bridge

import (
	"fmt"
	"maps"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"google.golang.org/grpc/codes"
	"google.golang.org/protobuf/testing/protocmp"
	"google.golang.org/protobuf/types/known/durationpb"

	bridgev1 "github.com/agentd/agentd/gen/go/agentd/bridge/v1"
	"github.com/agentd/agentd/internal/config"
	"github.com/agentd/agentd/internal/mcptest"
	"github.com/agentd/agentd/internal/testwait"
)

// list lists every server of a session.
func list(t *testing.T, client bridgev1.BridgeServiceClient, session string) []*bridgev1.ServerTools {
	t.Helper()
	res, err := client.ListTools(t.Context(), &bridgev1.ListToolsRequest{SessionId: session})
	if err != nil {
		t.Fatalf("ListTools: %v", err)
	}
	return res.GetServers()
}

func closeSession(t *testing.T, client bridgev1.BridgeServiceClient, session string) {
	t.Helper()
	if _, err := client.CloseSession(t.Context(), &bridgev1.CloseSessionRequest{SessionId: session}); err != nil {
		t.Fatalf("CloseSession: %v", err)
	}
}

// pidSpec is a command spec for the Tools fake that records its pids.
func pidSpec(t *testing.T, name, pidFile string, extra map[string]string) *bridgev1.ServerSpec {
	t.Helper()
	env := map[string]string{mcptest.PidFileEnv: pidFile}
	maps.Copy(env, extra)
	return commandSpec(t, name, mcptest.Tools, env)
}

// R-L3, R-C1: a warm cache answers ListTools without starting anything; a
// process starts only when a tool is called.
func TestCacheSparesConnections(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	pids := filepath.Join(t.TempDir(), "pids")
	spec := pidSpec(t, "tools", pids, nil)

	a, _ := open(t, t.Context(), f.client, spec)
	if got := list(t, f.client, a); got[0].GetCacheHit() || len(got[0].GetTools()) == 0 {
		t.Fatalf("first ListTools: cache_hit=%v, %d tools", got[0].GetCacheHit(), len(got[0].GetTools()))
	}
	closeSession(t, f.client, a)
	if n := len(mcptest.Pids(t, pids)); n != 1 {
		t.Fatalf("%d processes after the first listing, want 1", n)
	}

	// Renaming the server keeps its entry: the display name is not in the key.
	renamed := pidSpec(t, "renamed", pids, nil)
	b, _ := open(t, t.Context(), f.client, renamed)
	got := list(t, f.client, b)
	if !got[0].GetCacheHit() || got[0].GetServerName() != "renamed" {
		t.Errorf("second ListTools: %v, want a cache hit under the new name", got[0])
	}
	if n := len(mcptest.Pids(t, pids)); n != 1 {
		t.Errorf("R-L3 a warm cache started %d processes, want none", n-1)
	}
	call(t, f.client, b, "renamed", "echo", `{"text":"x"}`)
	if n := len(mcptest.Pids(t, pids)); n != 2 {
		t.Errorf("a tool call started %d processes, want 1", n-1)
	}
	closeSession(t, f.client, b)
	stats, err := f.svc.Admin().GetCacheStats(t.Context(), &bridgev1.GetCacheStatsRequest{})
	if err != nil {
		t.Fatal(err)
	}
	if stats.GetSize() != 1 || stats.GetHits() != 1 || stats.GetMisses() != 1 {
		t.Errorf("R-C4 stats = %v, want size 1, 1 hit, 1 miss", stats)
	}
	if s := stats.GetSettings(); !s.GetEnabled() || s.GetTtl().AsDuration() != 300*time.Second || s.GetMaxEntries() != 100 {
		t.Errorf("R-C1 default settings = %v", s)
	}
}

// TestOpenWithCachedTools: a session opened with list_cached_tools brings
// the tool lists in its SessionOpened when the cache holds every server's,
// each a hit counted once, exactly what ListTools answers, with the cache
// entry's revision (a list whose revision the request names as known comes
// back unchanged, without its tools); with a server
// not cached, the cache off for the session, or without the flag, it
// brings none and counts nothing, and ListTools lists as before. Nothing
// connects to a server for them.
func TestOpenWithCachedTools(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	pids := filepath.Join(t.TempDir(), "pids")
	cached, other := pidSpec(t, "tools", pids, nil), pidSpec(t, "more", pids, map[string]string{"OTHER": "1"})
	off := false
	opened := func(req *bridgev1.OpenSessionRequest) *bridgev1.SessionOpened {
		t.Helper()
		return openedBy(t, f.client, req)
	}
	stats := func() *bridgev1.GetCacheStatsResponse {
		t.Helper()
		s, err := f.svc.Admin().GetCacheStats(t.Context(), &bridgev1.GetCacheStatsRequest{})
		if err != nil {
			t.Fatal(err)
		}
		return s
	}
	if o := opened(&bridgev1.OpenSessionRequest{Servers: []*bridgev1.ServerSpec{cached}, ListCachedTools: true}); o.GetTools() != nil {
		t.Errorf("a session opened on a cold cache brought tools: %v", o.GetTools())
	}
	first, _ := open(t, t.Context(), f.client, cached)
	listed := list(t, f.client, first) // fills the cache: one miss
	closeSession(t, f.client, first)
	spawned := len(mcptest.Pids(t, pids))
	before := stats()

	o := opened(&bridgev1.OpenSessionRequest{Servers: []*bridgev1.ServerSpec{cached}, ListCachedTools: true})
	got := o.GetTools().GetServers()
	again := list(t, f.client, o.GetSessionId())
	if diff := cmp.Diff(again, got, protocmp.Transform()); diff != "" || len(got) != 1 || !got[0].GetCacheHit() {
		t.Errorf("the tools the session brought, against ListTools's (-ListTools +brought):\n%s", diff)
	}
	if diff := cmp.Diff(listed[0].GetTools(), got[0].GetTools(), protocmp.Transform()); diff != "" {
		t.Errorf("the tools the session brought, against the first listing (-listed +brought):\n%s", diff)
	}
	if s := stats(); s.GetHits() != before.GetHits()+2 || s.GetMisses() != before.GetMisses() {
		t.Errorf("R-C4 after an open that brought the tools and a ListTools: %d hits, %d misses; want %d, %d",
			s.GetHits(), s.GetMisses(), before.GetHits()+2, before.GetMisses())
	}

	// The list has a revision; a session that names it as known gets the
	// list unchanged, without its tools, still a hit; one that names
	// another gets the tools.
	rev := listed[0].GetRevision()
	if rev == 0 || got[0].GetRevision() != rev || got[0].GetUnchanged() {
		t.Errorf("revisions: listed %d, brought %d (unchanged %t); want the same, not zero, not unchanged", rev, got[0].GetRevision(), got[0].GetUnchanged())
	}
	before = stats()
	o = opened(&bridgev1.OpenSessionRequest{Servers: []*bridgev1.ServerSpec{cached}, ListCachedTools: true, KnownRevisions: []uint64{rev}})
	want := &bridgev1.ServerTools{ServerName: got[0].GetServerName(), CacheHit: true, Revision: rev, Unchanged: true}
	if diff := cmp.Diff([]*bridgev1.ServerTools{want}, o.GetTools().GetServers(), protocmp.Transform()); diff != "" {
		t.Errorf("a session naming the cached list's revision as known (-want +got):\n%s", diff)
	}
	o = opened(&bridgev1.OpenSessionRequest{Servers: []*bridgev1.ServerSpec{cached}, ListCachedTools: true, KnownRevisions: []uint64{rev + 1}})
	if diff := cmp.Diff(got, o.GetTools().GetServers(), protocmp.Transform()); diff != "" {
		t.Errorf("a session naming another revision as known (-want +got):\n%s", diff)
	}
	if s := stats(); s.GetHits() != before.GetHits()+2 || s.GetMisses() != before.GetMisses() {
		t.Errorf("R-C4 two opens that brought the list, one unchanged: %d hits, %d misses; want %d, %d",
			s.GetHits(), s.GetMisses(), before.GetHits()+2, before.GetMisses())
	}

	before = stats()
	for _, tc := range []struct {
		name string
		req  *bridgev1.OpenSessionRequest
	}{
		{"a server not cached", &bridgev1.OpenSessionRequest{Servers: []*bridgev1.ServerSpec{cached, other}, ListCachedTools: true}},
		{"the cache off for the session", &bridgev1.OpenSessionRequest{Servers: []*bridgev1.ServerSpec{cached}, Cache: &off, ListCachedTools: true}},
		{"no list_cached_tools", &bridgev1.OpenSessionRequest{Servers: []*bridgev1.ServerSpec{cached}}},
	} {
		if o := opened(tc.req); o.GetTools() != nil {
			t.Errorf("%s: the session brought tools %v, want none", tc.name, o.GetTools())
		}
	}
	if s := stats(); s.GetHits() != before.GetHits() || s.GetMisses() != before.GetMisses() {
		t.Errorf("opens that brought no tools counted %d hits and %d misses, want none", s.GetHits()-before.GetHits(), s.GetMisses()-before.GetMisses())
	}
	if n := len(mcptest.Pids(t, pids)); n != spawned {
		t.Errorf("opening sessions started %d processes, want none", n-spawned)
	}
}

// R-C2: a session with cache false neither reads nor writes the cache.
func TestCacheBypass(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	pids := filepath.Join(t.TempDir(), "pids")
	spec := pidSpec(t, "tools", pids, nil)
	off := false
	for range 2 {
		stream, err := f.client.OpenSession(t.Context(), &bridgev1.OpenSessionRequest{Servers: []*bridgev1.ServerSpec{spec}, Cache: &off})
		if err != nil {
			t.Fatal(err)
		}
		first, err := stream.Recv()
		if err != nil {
			t.Fatal(err)
		}
		id := first.GetOpened().GetSessionId()
		if got := list(t, f.client, id); got[0].GetCacheHit() {
			t.Error("a session without the cache got a hit")
		}
		closeSession(t, f.client, id)
	}
	if n := len(mcptest.Pids(t, pids)); n != 2 {
		t.Errorf("%d processes for two uncached listings, want 2", n)
	}
	id, _ := open(t, t.Context(), f.client, spec)
	if got := list(t, f.client, id); got[0].GetCacheHit() {
		t.Error("R-C2 the uncached sessions wrote the cache")
	}
}

// R-C3: different credentials, environments and tenants never share an
// entry.
func TestCacheKeyIsolation(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	pids := filepath.Join(t.TempDir(), "pids")
	listOnce := func(tenant string, spec *bridgev1.ServerSpec) bool {
		id := openAs(t, f.client, tenant, spec)
		defer closeSession(t, f.client, id)
		return list(t, f.client, id)[0].GetCacheHit()
	}
	base := pidSpec(t, "tools", pids, map[string]string{"TOKEN": "secret-a"})
	otherSecret := pidSpec(t, "tools", pids, map[string]string{"TOKEN": "secret-b"})
	restricted := pidSpec(t, "tools", pids, map[string]string{"TOKEN": "secret-a"})
	restricted.AllowedTools = []string{"echo"}
	for _, step := range []struct {
		name    string
		tenant  string
		spec    *bridgev1.ServerSpec
		wantHit bool
	}{
		{"first", "acme", base, false},
		{"same again", "acme", base, true},
		{"another env value", "acme", otherSecret, false},
		{"allowed_tools", "acme", restricted, false},
		{"another tenant", "globex", base, false},
	} {
		if got := listOnce(step.tenant, step.spec); got != step.wantHit {
			t.Errorf("R-C3 %s: cache hit %v, want %v", step.name, got, step.wantHit)
		}
	}
}

// X-C6: concurrent sessions missing on one key make one fetch: one process.
func TestCacheConcurrentMisses(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	pids := filepath.Join(t.TempDir(), "pids")
	spec := pidSpec(t, "tools", pids, nil)
	const n = 4
	ids := make([]string, n)
	for i := range n {
		ids[i], _ = open(t, t.Context(), f.client, spec)
	}
	var wg sync.WaitGroup
	for _, id := range ids {
		wg.Go(func() {
			if got := list(t, f.client, id); len(got[0].GetTools()) == 0 {
				t.Error("no tools")
			}
		})
	}
	wg.Wait()
	if got := len(mcptest.Pids(t, pids)); got != 1 {
		t.Errorf("X-C6 %d processes for %d concurrent listings, want 1", got, n)
	}
}

// X-C6: notifications/tools/list_changed drops the entry. X-M8: the
// go-sdk fake speaks 2026-07-28, where the notification comes on the
// subscriptions/listen stream the go-sdk opens for agentd's handler.
func TestToolsChangedInvalidatesCache(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	id, stream := open(t, t.Context(), f.client, refSpec("tools", "tools"))
	list(t, f.client, id)
	call(t, f.client, id, "tools", "add_tool", "")
	ev, err := stream.Recv()
	if err != nil || ev.GetToolsChanged().GetServerName() != "tools" {
		t.Fatalf("event = %v, %v; want tools_changed", ev, err)
	}
	got := list(t, f.client, id)
	if got[0].GetCacheHit() {
		t.Error("the changed list was served from the cache")
	}
	names := map[string]bool{}
	for _, tool := range got[0].GetTools() {
		names[tool.GetName()] = true
	}
	if !names["added"] {
		t.Error("the new tool is not listed")
	}
}

// R-C4: the admin API clears, resets, configures and invalidates.
func TestCacheAdmin(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	admin := f.svc.Admin()
	spec := refSpec("tools", "tools")
	id, _ := open(t, t.Context(), f.client, spec)
	list(t, f.client, id)

	res, err := admin.InvalidateCache(t.Context(), &bridgev1.InvalidateCacheRequest{Server: refSpec("any name", "tools")})
	if err != nil || !res.GetRemoved() {
		t.Fatalf("InvalidateCache = %v, %v; want removed", res, err)
	}
	if res, _ := admin.InvalidateCache(t.Context(), &bridgev1.InvalidateCacheRequest{Server: spec}); res.GetRemoved() {
		t.Error("a second invalidation removed something")
	}
	if _, err := admin.InvalidateCache(t.Context(), &bridgev1.InvalidateCacheRequest{}); err == nil {
		t.Error("InvalidateCache without a server succeeded")
	}

	list(t, f.client, id)
	if _, err := admin.ClearCache(t.Context(), &bridgev1.ClearCacheRequest{}); err != nil {
		t.Fatal(err)
	}
	stats, _ := admin.GetCacheStats(t.Context(), &bridgev1.GetCacheStatsRequest{})
	if stats.GetSize() != 0 || stats.GetHits() != 0 || stats.GetMisses() != 0 {
		t.Errorf("after ClearCache: %v", stats)
	}

	off, max := false, int32(5)
	conf, err := admin.ConfigureCache(t.Context(), &bridgev1.ConfigureCacheRequest{Enabled: &off, Ttl: durationpb.New(time.Minute), MaxEntries: &max})
	if err != nil || conf.GetSettings().GetEnabled() || conf.GetSettings().GetMaxEntries() != 5 {
		t.Fatalf("ConfigureCache = %v, %v", conf, err)
	}
	zero := int32(0)
	_, err = admin.ConfigureCache(t.Context(), &bridgev1.ConfigureCacheRequest{MaxEntries: &zero, Ttl: durationpb.New(-time.Second)})
	if st := wantCode(t, err, codes.InvalidArgument); !strings.Contains(st.Message(), "max_entries") || !strings.Contains(st.Message(), "ttl") {
		t.Errorf("R-C1 invalid settings: %v", st.Message())
	}
	list(t, f.client, id)
	if stats, _ := admin.GetCacheStats(t.Context(), &bridgev1.GetCacheStatsRequest{}); stats.GetSize() != 0 {
		t.Error("a disabled cache stored an entry")
	}
	reset, err := admin.ResetCache(t.Context(), &bridgev1.ResetCacheRequest{})
	if err != nil || !reset.GetSettings().GetEnabled() || reset.GetSettings().GetMaxEntries() != 100 {
		t.Errorf("ResetCache = %v, %v; want the configured settings back", reset, err)
	}
}

// X-L6: a registered server's warm spare serves a session's first call:
// the process was spawned and initialized before the session opened.
func TestWarmPool(t *testing.T) {
	t.Parallel()
	pids := filepath.Join(t.TempDir(), "pids")
	f := newFixtureWith(t, func(c *config.Bridge) {
		exe, env := mcptest.Command(t, mcptest.SlowStart)
		env[mcptest.PidFileEnv] = pids
		warm := 1
		c.Servers["slow"] = config.Server{Command: exe, Env: env, Warm: &warm}
	})
	waitPools(t, f, "slow", func(s *bridgev1.PoolStats) bool { return s.GetWarm() == 1 })
	spare := mcptest.Pids(t, pids)[0]

	id, _ := open(t, t.Context(), f.client, refSpec("s", "slow"))
	if got := callPid(t, f.client, id, "s", "pid"); got != spare {
		t.Errorf("X-L6 the first call ran on process %d, not on the warm spare %d", got, spare)
	}
	closeSession(t, f.client, id)
	if !mcptest.Gone(spare) {
		t.Error("the session's process was not retired: it could leak state into the next session")
	}
	waitPools(t, f, "slow", func(s *bridgev1.PoolStats) bool { return s.GetWarm() == 1 && s.GetRetired() == 1 })
}

// A registered server marked shared serves every session from one process.
func TestSharedRegistration(t *testing.T) {
	t.Parallel()
	f := newFixtureWith(t, registeredTools(t, map[string]config.Shared{"shared": config.SharedPerTenant}))
	a, _ := open(t, t.Context(), f.client, refSpec("x", "shared"))
	b, _ := open(t, t.Context(), f.client, refSpec("y", "shared"))
	pa, pb := callPid(t, f.client, a, "x", "pid"), callPid(t, f.client, b, "y", "pid")
	if pa != pb {
		t.Errorf("a shared server ran two processes: %d and %d", pa, pb)
	}
	if n := openSessions(t, f); n != 2 {
		t.Errorf("open_sessions = %d with two sessions open", n)
	}
	closeSession(t, f.client, a)
	if mcptest.Gone(pb) {
		t.Error("closing one session stopped the shared process another uses")
	}
	closeSession(t, f.client, b)
	// A session leaves the count once its stream has ended, which comes
	// after CloseSession has returned.
	testwait.For(t, "open_sessions = 0 after both closed", func() bool { return openSessions(t, f) == 0 })
}

// openSessions is the admin API's count of open bridge sessions.
func openSessions(t *testing.T, f *fixture) int32 {
	t.Helper()
	res, err := f.svc.Admin().GetPoolStats(t.Context(), &bridgev1.GetPoolStatsRequest{})
	if err != nil {
		t.Fatal(err)
	}
	return res.GetOpenSessions()
}

// waitPools waits until a pool of server name meets cond.
func waitPools(t *testing.T, f *fixture, name string, cond func(*bridgev1.PoolStats) bool) {
	t.Helper()
	testwait.Until(t, func() error {
		res, err := f.svc.Admin().GetPoolStats(t.Context(), &bridgev1.GetPoolStatsRequest{})
		if err != nil {
			return err
		}
		for _, s := range res.GetPools() {
			if s.GetServerName() == name && cond(s) {
				return nil
			}
		}
		return fmt.Errorf("pool %q never reached the wanted state: %v", name, res.GetPools())
	})
}

// X-S1, security: a request's env may not steer loaders or interpreters
// unless bridge.allowed_env lists the variable.
func TestEnvPolicy(t *testing.T) {
	t.Parallel()
	f := newFixtureWith(t, func(c *config.Bridge) { c.AllowedEnv = []string{"NODE_OPTIONS"} })
	for _, name := range []string{"LD_PRELOAD", "PATH", "pythonpath", "NPM_CONFIG_REGISTRY", "DYLD_INSERT_LIBRARIES", "PYTHONWARNINGS", "BROWSER", "GIT_SSH_COMMAND", "https_proxy", "SSL_CERT_FILE"} {
		spec := commandSpec(t, "tools", mcptest.Tools, map[string]string{name: "/tmp/evil-value"})
		err := f.openErr(t, spec)
		st := wantCode(t, err, codes.PermissionDenied)
		if !strings.Contains(st.Message(), name) || !strings.Contains(st.Message(), "bridge.allowed_env") || strings.Contains(st.Message(), "evil-value") {
			t.Errorf("env %s: %q", name, st.Message())
		}
	}
	allowed := commandSpec(t, "tools", mcptest.Tools, map[string]string{"NODE_OPTIONS": "--no-warnings", "MY_TOKEN": "x"})
	id, _ := open(t, t.Context(), f.client, allowed)
	closeSession(t, f.client, id)
}

// X-S2: url servers on loopback, private, shared (X-H5) or link-local
// addresses are refused unless bridge.allow_private_networks.
func TestPrivateNetworkPolicy(t *testing.T) {
	t.Parallel()
	httpSpec := func(url string) *bridgev1.ServerSpec {
		return &bridgev1.ServerSpec{Name: "remote", ReadTimeout: durationpb.New(roomyTimeout),
			Transport: &bridgev1.ServerSpec_Http{Http: &bridgev1.HTTPTarget{Url: url, Authorization: "tok-secret"}}}
	}
	f := newFixture(t)
	for _, url := range []string{"http://127.0.0.1:9/mcp", "http://localhost:9/key-secret", "http://[::1]:9/mcp", "http://10.1.2.3/mcp", "http://169.254.169.254/latest", "http://192.168.0.10/mcp", "https://100.64.1.2/mcp", "https://[::ffff:100.64.1.2]/mcp"} {
		err := f.openErr(t, httpSpec(url))
		st := wantCode(t, err, codes.PermissionDenied)
		if !strings.Contains(st.Message(), "bridge.allow_private_networks") || strings.Contains(st.Message(), "secret") {
			t.Errorf("%s: %q", url, st.Message())
		}
	}
	allowing := newFixtureWith(t, func(c *config.Bridge) { c.AllowPrivateNetworks = true })
	id, _ := open(t, t.Context(), allowing.client, httpSpec("http://127.0.0.1:9/mcp"))
	closeSession(t, allowing.client, id)
}

// A command pool that keeps warm spares (command_warm) goes, with its
// spares, once no session has used it for idle_timeout: one pool per
// distinct command configuration would otherwise pile up. (When it goes is
// TestUnusedCommandPoolTimer's: here the processes are real, and the test
// waits for the pool to go.)
func TestUnusedCommandPoolGoes(t *testing.T) {
	t.Parallel()
	pids := filepath.Join(t.TempDir(), "pids")
	f := newFixtureWith(t, func(c *config.Bridge) {
		c.Pool.CommandWarm = 1
		c.Pool.IdleTimeout = 300 * time.Millisecond
	})
	spec := commandSpec(t, "tools", mcptest.Tools, map[string]string{mcptest.PidFileEnv: pids})
	id, _ := open(t, t.Context(), f.client, spec)
	call(t, f.client, id, "tools", "echo", `{"text":"hi"}`)
	commandPools := func() (n int) {
		for _, s := range f.svc.pools.stats() {
			if strings.HasPrefix(s.GetKey(), "command:") {
				n++
			}
		}
		return n
	}
	closeSession(t, f.client, id)
	testwait.For(t, "the unused command pool to go", func() bool { return commandPools() == 0 })
	for _, pid := range mcptest.Pids(t, pids) {
		mcptest.WaitGone(t, pid)
	}
}
