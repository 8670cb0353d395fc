package bridge

import (
	"fmt"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"google.golang.org/grpc/codes"
	"google.golang.org/protobuf/types/known/durationpb"

	bridgev1 "github.com/agentd/agentd/gen/go/agentd/bridge/v1"
	"github.com/agentd/agentd/internal/config"
	"github.com/agentd/agentd/internal/mcptest"
	"github.com/agentd/agentd/internal/testwait"
)

// openAs opens a session of tenant's, as agentd does for one of its
// generations, and returns its id.
func openAs(t *testing.T, client bridgev1.BridgeServiceClient, tenant string, specs ...*bridgev1.ServerSpec) string {
	t.Helper()
	return openedBy(t, client, &bridgev1.OpenSessionRequest{Servers: specs, GenerationId: t.Name(), Tenant: tenant}).GetSessionId()
}

// openErrAs is openErr for a session of tenant's.
func (f *fixture) openErrAs(t *testing.T, tenant string, specs ...*bridgev1.ServerSpec) error {
	t.Helper()
	stream, err := f.client.OpenSession(t.Context(), &bridgev1.OpenSessionRequest{Servers: specs, Tenant: tenant})
	if err == nil {
		_, err = stream.Recv()
	}
	return err
}

// withTenants gives the service the tenants' settings as agentd does: the
// whole configuration's ForTenant, over the fixture's bridge settings.
func withTenants(tenants map[string]config.Tenant) func(*Options) {
	return func(o *Options) {
		cfg := config.Default()
		cfg.Bridge = o.Config
		cfg.Tenants = tenants
		o.Tenants = cfg.ForTenant
	}
}

// poolsOf lists the pools of server name (a registered server, or
// "command: <base>").
func poolsOf(t *testing.T, f *fixture, name string) []*bridgev1.PoolStats {
	t.Helper()
	res, err := f.svc.Admin().GetPoolStats(t.Context(), &bridgev1.GetPoolStatsRequest{})
	if err != nil {
		t.Fatal(err)
	}
	var out []*bridgev1.PoolStats
	for _, p := range res.GetPools() {
		if p.GetServerName() == name {
			out = append(out, p)
		}
	}
	return out
}

func tenantsOf(pools []*bridgev1.PoolStats) []string {
	var out []string
	for _, p := range pools {
		out = append(out, p.GetTenant())
	}
	return out
}

// TestSharedPerTenant: X-I6. A registered server marked shared: true runs
// one process per tenant: every session of a tenant shares it, another
// tenant's sessions never reach it. Marked shared: global, one process
// serves every tenant's sessions, as before tenants. The pool stats say
// whose each pool is.
func TestSharedPerTenant(t *testing.T) {
	t.Parallel()
	f := newFixtureWith(t, registeredTools(t, map[string]config.Shared{"pertenant": config.SharedPerTenant, "global": config.SharedGlobal}))
	if got := tenantsOf(poolsOf(t, f, "pertenant")); len(got) != 0 {
		t.Errorf("X-I6 per-tenant pools before any session: %q, want none", got)
	}
	specs := []*bridgev1.ServerSpec{refSpec("mine", "pertenant"), refSpec("all", "global")}
	a1 := openAs(t, f.client, "acme", specs...)
	a2 := openAs(t, f.client, "acme", specs...)
	b := openAs(t, f.client, "bravo", specs...)
	pid := func(session, server string) int { return callPid(t, f.client, session, server, "pid") }

	if pa1, pa2 := pid(a1, "mine"), pid(a2, "mine"); pa1 != pa2 {
		t.Errorf("X-I6 shared: true ran two processes for one tenant's sessions: %d and %d", pa1, pa2)
	}
	if pa, pb := pid(a1, "mine"), pid(b, "mine"); pa == pb {
		t.Errorf("X-I6 shared: true served tenants acme and bravo from one process, %d", pa)
	}
	if pa, pb := pid(a1, "all"), pid(b, "all"); pa != pb {
		t.Errorf("X-I6 shared: global ran a process per tenant: %d and %d", pa, pb)
	}
	if diff := cmp.Diff([]string{"acme", "bravo"}, tenantsOf(poolsOf(t, f, "pertenant"))); diff != "" {
		t.Errorf("X-I6 tenants of the shared: true pools (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff([]string{""}, tenantsOf(poolsOf(t, f, "global"))); diff != "" {
		t.Errorf("X-I6 tenants of the shared: global pool (-want +got):\n%s", diff)
	}
}

// TestSessionResumable: a session holds nothing of its own when each of
// its servers is a stdio server shared between sessions (shared: true or
// global), and its SessionOpened says so (resumable): agentd may then
// close it while its generation waits for a person and open another for
// the next call, which reaches the same process. A session with a
// process of its own (a registered server that is not shared, a
// request's command) or an HTTP MCP server is not resumable.
func TestSessionResumable(t *testing.T) {
	t.Parallel()
	f := newFixtureWith(t, registeredTools(t, map[string]config.Shared{"pertenant": config.SharedPerTenant, "global": config.SharedGlobal, "own": config.NotShared}))
	opened := func(specs ...*bridgev1.ServerSpec) *bridgev1.SessionOpened {
		t.Helper()
		return openedBy(t, f.client, &bridgev1.OpenSessionRequest{Servers: specs, GenerationId: t.Name(), Tenant: "acme"})
	}
	shared := []*bridgev1.ServerSpec{refSpec("mine", "pertenant"), refSpec("all", "global")}
	for _, tc := range []struct {
		name  string
		specs []*bridgev1.ServerSpec
		want  bool
	}{
		{"no servers", nil, true},
		{"shared servers", shared, true},
		{"and a registered server that is not shared", append(slices.Clip(shared), refSpec("own", "own")), false},
		{"and a request's command", append(slices.Clip(shared), commandSpec(t, "cmd", mcptest.Tools, nil)), false},
		{"and an HTTP server", append(slices.Clip(shared), httpSpec("web", "https://mcp.example.com/mcp", "", roomyTimeout)), false},
	} {
		if got := opened(tc.specs...).GetResumable(); got != tc.want {
			t.Errorf("%s: resumable = %v, want %v", tc.name, got, tc.want)
		}
	}

	first := opened(shared...).GetSessionId()
	pid := callPid(t, f.client, first, "mine", "pid")
	closeSession(t, f.client, first)
	next := opened(shared...).GetSessionId()
	if again := callPid(t, f.client, next, "mine", "pid"); again != pid {
		t.Errorf("the session opened after a resumable one closed reached process %d, want the same process %d", again, pid)
	}
}

// TestNotSharedServesOneSession: X-I6. A registered server that is not
// shared has one pool for every tenant, and that is safe: a warm spare
// has served no session, and a process that served one retires with it,
// so the next session, whoever's, gets another.
func TestNotSharedServesOneSession(t *testing.T) {
	t.Parallel()
	f := newFixtureWith(t, warmTools(t, "files"))
	waitSpare(t, f, "files")
	a := openAs(t, f.client, "acme", refSpec("files", "files"))
	pa := callPid(t, f.client, a, "files", "pid")
	closeSession(t, f.client, a)
	if !mcptest.Gone(pa) {
		t.Errorf("X-I6 acme's process %d runs on after its session", pa)
	}
	waitSpare(t, f, "files")
	b := openAs(t, f.client, "bravo", refSpec("files", "files"))
	if pb := callPid(t, f.client, b, "files", "pid"); pb == pa {
		t.Errorf("X-I6 bravo's session ran on acme's process %d", pa)
	}
	if diff := cmp.Diff([]string{""}, tenantsOf(poolsOf(t, f, "files"))); diff != "" {
		t.Errorf("tenants of the pool (-want +got):\n%s", diff)
	}
}

// TestCommandPoolPerTenant: X-I6. The pools of request commands are per
// tenant: the same command configuration declared by two tenants makes
// two pools, and one tenant's warm spare never serves the other.
func TestCommandPoolPerTenant(t *testing.T) {
	t.Parallel()
	f := newFixtureWith(t, func(c *config.Bridge) { c.Pool.CommandWarm = 1 })
	pids := filepath.Join(t.TempDir(), "pids")
	spec := pidSpec(t, "tools", pids, nil)
	name := "command: " + filepath.Base(f.exe)

	a := openAs(t, f.client, "acme", spec)
	callPid(t, f.client, a, "tools", "pid")
	waitPools(t, f, name, func(s *bridgev1.PoolStats) bool { return s.GetTenant() == "acme" && s.GetWarm() == 1 })
	acmes := mcptest.Pids(t, pids) // acme's process and its pool's spare

	b := openAs(t, f.client, "bravo", spec)
	if pb := callPid(t, f.client, b, "tools", "pid"); slices.Contains(acmes, pb) {
		t.Errorf("X-I6 bravo's session ran on process %d, one of acme's %v", pb, acmes)
	}
	pools := poolsOf(t, f, name)
	if diff := cmp.Diff([]string{"acme", "bravo"}, tenantsOf(pools)); diff != "" {
		t.Errorf("X-I6 tenants of the command pools (-want +got):\n%s", diff)
	}
	if len(pools) == 2 && pools[0].GetKey() != pools[1].GetKey() {
		t.Errorf("one command configuration has two keys: %q and %q", pools[0].GetKey(), pools[1].GetKey())
	}
}

// TestTenantPoolsGo: X-I6. A tenant's pools (of a shared: true server, of
// a command) go, with their processes, once none of the tenant's sessions
// has used them for idle_timeout: tenants that come and go leave nothing
// behind. The pools for every tenant stay.
func TestTenantPoolsGo(t *testing.T) {
	t.Parallel()
	pids := filepath.Join(t.TempDir(), "pids")
	f := newFixtureWith(t, func(c *config.Bridge) {
		exe, env := mcptest.Command(t, mcptest.Tools)
		env[mcptest.PidFileEnv] = pids
		c.Servers["pertenant"] = config.Server{Command: exe, Env: env, Shared: config.SharedPerTenant}
		c.Pool.CommandWarm = 1
		c.Pool.IdleTimeout = 300 * time.Millisecond
	})
	for _, tenant := range []string{"acme", "bravo"} {
		id := openAs(t, f.client, tenant, refSpec("mine", "pertenant"), pidSpec(t, "cmd", pids, nil))
		callPid(t, f.client, id, "mine", "pid")
		callPid(t, f.client, id, "cmd", "pid")
		closeSession(t, f.client, id)
	}
	testwait.Until(t, func() error {
		var left []string
		for _, p := range f.svc.pools.stats() {
			if p.GetTenant() != "" {
				left = append(left, p.GetTenant()+" "+p.GetServerName())
			}
		}
		if len(left) > 0 {
			return fmt.Errorf("X-I6 tenant pools still there after idle_timeout: %q", left)
		}
		return nil
	})
	for _, pid := range mcptest.Pids(t, pids) {
		mcptest.WaitGone(t, pid)
	}
	if len(poolsOf(t, f, "tools")) != 1 {
		t.Error("the pool of a registered server that serves every tenant went")
	}
}

// TestTenantPolicy: X-I7. A session's declarations follow its tenant's
// rules: its own allowed_commands, allowed_env and allow_private_networks
// where it sets them (refusals name tenants.<name>.<setting>), the global
// ones elsewhere (named bridge.<setting>), and only the registered servers
// its servers list allows. A tenant not configured is refused unless
// tenants.default is, whose settings it then gets.
func TestTenantPolicy(t *testing.T) {
	t.Parallel()
	yes, no := true, false
	tenants := map[string]config.Tenant{
		"acme":   {Servers: []string{"tools"}, AllowedEnv: []string{"NODE_OPTIONS"}, AllowPrivateNetworks: &yes},
		"strict": {AllowedCommands: []string{}, Servers: []string{}, AllowPrivateNetworks: &no},
	}
	f := newFixtureOptions(t, nil, withTenants(tenants))
	withDefault := map[string]config.Tenant{"default": {AllowedCommands: []string{"/usr/bin/mcp-other"}}}
	fd := newFixtureOptions(t, nil, withTenants(withDefault))

	command := commandSpec(t, "cmd", mcptest.Tools, nil)
	nodeOptions := commandSpec(t, "cmd", mcptest.Tools, map[string]string{"NODE_OPTIONS": "--no-warnings"})
	path := commandSpec(t, "cmd", mcptest.Tools, map[string]string{"PATH": "/tmp/sk-env"})
	local := &bridgev1.ServerSpec{Name: "local", ReadTimeout: durationpb.New(roomyTimeout),
		Transport: &bridgev1.ServerSpec_Http{Http: &bridgev1.HTTPTarget{Url: "http://127.0.0.1:9/secret-path"}}}

	tests := []struct {
		name   string
		f      *fixture
		tenant string
		spec   *bridgev1.ServerSpec
		code   codes.Code
		says   []string // what the refusal names
	}{
		{"X-I7 a registered server the tenant lists", f, "acme", refSpec("t", "tools"), codes.OK, nil},
		{"X-I7 a registered server the tenant does not list", f, "acme", refSpec("d", "demo"), codes.PermissionDenied, []string{`"demo"`, "tenants.acme.servers"}},
		{"X-I7 no registered server for a tenant that lists none", f, "strict", refSpec("t", "tools"), codes.PermissionDenied, []string{`"tools"`, "tenants.strict.servers"}},
		{"X-I7 the global allowed_commands where the tenant sets none", f, "acme", command, codes.OK, nil},
		{"X-I7 the tenant's own allowed_commands", f, "strict", command, codes.PermissionDenied, []string{"tenants.strict.allowed_commands"}},
		{"X-I7 the tenant's own allowed_env allows", f, "acme", nodeOptions, codes.OK, nil},
		{"X-I7 the tenant's own allowed_env refuses", f, "acme", path, codes.PermissionDenied, []string{"PATH", "tenants.acme.allowed_env"}},
		{"X-I7 the global allowed_env where the tenant sets none", f, "strict", nodeOptions, codes.PermissionDenied, []string{"NODE_OPTIONS", "bridge.allowed_env"}},
		{"X-I7 the tenant's own allow_private_networks allows", f, "acme", local, codes.OK, nil},
		{"X-I7 the tenant's own allow_private_networks refuses", f, "strict", local, codes.PermissionDenied, []string{"tenants.strict.allow_private_networks"}},
		{"X-I7 a tenant not configured, without tenants.default", f, "nobody", refSpec("t", "tools"), codes.PermissionDenied, []string{`"nobody"`, "tenants.default"}},
		{"X-I7 no tenant (no authentication) keeps the global settings", f, "", command, codes.OK, nil},
		{"X-I7 a tenant not configured gets tenants.default's settings", fd, "nobody", command, codes.PermissionDenied, []string{"tenants.default.allowed_commands"}},
		{"X-I7 and tenants.default's registered servers (all)", fd, "nobody", refSpec("d", "demo"), codes.OK, nil},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			err := tc.f.openErrAs(t, tc.tenant, tc.spec)
			if tc.code == codes.OK {
				if err != nil {
					t.Fatalf("OpenSession(%s) = %v, want it open", tc.tenant, err)
				}
				return
			}
			st := wantCode(t, err, tc.code)
			for _, s := range tc.says {
				if !strings.Contains(st.Message(), s) {
					t.Errorf("refusal %q does not name %s", st.Message(), s)
				}
			}
			for _, secret := range []string{"sk-env", "secret-path"} {
				if strings.Contains(st.Message(), secret) {
					t.Errorf("refusal %q contains %q", st.Message(), secret)
				}
			}
		})
	}
}

// TestTenantPolicyAtAddress: X-I7. The address dialled is checked against
// the tenant's allow_private_networks too: a tenant that may reach private
// networks reaches a loopback server (the transport that refuses private
// addresses would refuse it at the dial), one that may not is refused.
func TestTenantPolicyAtAddress(t *testing.T) {
	t.Parallel()
	srv := mcptest.NewHTTP(t, mcptest.HTTPOptions{Mode: mcptest.Streamable})
	yes := true
	f := newFixtureOptions(t, nil, withTenants(map[string]config.Tenant{"acme": {AllowPrivateNetworks: &yes}, "bravo": {}}))
	spec := &bridgev1.ServerSpec{Name: "local", ReadTimeout: durationpb.New(roomyTimeout),
		Transport: &bridgev1.ServerSpec_Http{Http: &bridgev1.HTTPTarget{Url: srv.URL}}}
	id := openAs(t, f.client, "acme", spec)
	if res := call(t, f.client, id, "local", "echo", `{"text":"hi"}`); res.GetOutput() != "hi" {
		t.Errorf("X-I7 acme's call to a loopback server = %v", res)
	}
	err := f.openErrAs(t, "bravo", spec)
	if st := wantCode(t, err, codes.PermissionDenied); !strings.Contains(st.Message(), "bridge.allow_private_networks") {
		t.Errorf("X-I7 bravo's refusal %q does not name bridge.allow_private_networks", st.Message())
	}
}
