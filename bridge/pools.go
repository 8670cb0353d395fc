package bridge

import (
	"cmp"
	"context"
	"log/slog"
	"maps"
	"path/filepath"
	"slices"
	"sync"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/propagation"

	"github.com/agentd/agentd/bridge/internal/mcpconn"
	"github.com/agentd/agentd/bridge/internal/pool"
	"github.com/agentd/agentd/bridge/internal/schemacache"
	bridgev1 "github.com/agentd/agentd/gen/go/agentd/bridge/v1"
	"github.com/agentd/agentd/internal/config"
)

// pools owns the bridge's stdio process pools, and keeps what one tenant's
// sessions ran from ever serving another tenant's:
//   - a registered server that is not shared has one pool that serves
//     every tenant, made at start-up so that its spares are warm before
//     the first request: a spare has served no session, so it holds no
//     one's state, and a process that has served a session retires;
//   - a registered server shared globally (shared: global) has one pool,
//     one process serving every tenant's sessions, made at start-up;
//   - a registered server shared per tenant (shared: true) has one pool
//     per tenant, one process serving all of that tenant's sessions;
//   - a request's command has one pool per tenant and distinct command
//     configuration.
//
// The last two are made when a tenant's session first attaches, and
// dropped when no session uses one and it holds no process, or, if it
// keeps one (a warm spare, a shared process between sessions), once no
// session has used it for idle_timeout: they do not pile up as tenants
// and commands come and go.
type pools struct {
	log        *slog.Logger
	cfg        config.Pool
	registered map[string]config.Server // bridge.servers
	grace      time.Duration
	dial       dialFunc
	metrics    *pool.Metrics  // the pools' instruments
	drops      sync.WaitGroup // pools being closed after idle_timeout unused

	mu     sync.Mutex
	byKey  map[poolKey]*poolEntry
	closed bool
}

// poolKey identifies a pool: the registered server whose processes it runs
// (ref), or the command configuration (command, stdioKey's), and the
// tenant it serves ("" for a pool that serves every tenant).
type poolKey struct {
	tenant, ref string
	command     schemacache.Key
}

// String is the pool's key on the admin API (PoolStats.key), which never
// names the tenant: "ref:<name>", or "command:<hash>".
func (k poolKey) String() string {
	if k.ref != "" {
		return "ref:" + k.ref
	}
	return "command:" + k.command.String()
}

type poolEntry struct {
	pool      *pool.Pool[*mcpconn.Conn]
	name      string
	id        poolKey
	refs      int         // sessions using it
	permanent bool        // made at start-up, kept until close
	shared    bool        // one process serves many sessions at once
	unused    *time.Timer // drops an unused pool that keeps a process
	idleSince uint64      // counts spells of disuse, so that a stale timer does nothing
}

// dialFunc makes the dialer of a pool's processes from their spec, the
// tenant the pool serves ("" for every tenant) and serverName, the
// server's name on the pool's metrics (the registered name, or the
// request's name for a command, never the command).
type dialFunc func(spec mcpconn.StdioSpec, tenant, serverName string) pool.Dialer[*mcpconn.Conn]

// newPools makes the pools of cfg's registered servers that serve every
// tenant, whose processes dial starts (stdioDialer, but in tests of the
// pools' timing), and which record to metrics. close closes metrics.
func newPools(cfg config.Bridge, log *slog.Logger, dial dialFunc, metrics *pool.Metrics) *pools {
	ps := &pools{log: log, cfg: cfg.Pool, registered: cfg.Servers, grace: cfg.TerminateGrace, dial: dial, metrics: metrics, byKey: make(map[poolKey]*poolEntry)}
	for _, name := range slices.Sorted(maps.Keys(cfg.Servers)) {
		switch {
		case cfg.Servers[name].URL != "":
			continue // a url server: no process (agentd resolves its refs)
		case cfg.Servers[name].Shared == config.SharedPerTenant:
			continue // made per tenant, on use
		}
		id := poolKey{ref: name}
		pc := ps.registeredConfig(name)
		ps.byKey[id] = &poolEntry{pool: ps.newPool(id, name, name, pc, ps.registeredSpec(name), log), name: name, id: id, permanent: true, shared: pc.Shared}
	}
	return ps
}

// newPool makes the pool id of a server, named name in logs and errors;
// its metrics carry serverName as server: the registered server's name,
// or the one the request that made a command's pool gave it (never its
// command line), and the pool's tenant ("" for a pool that serves every
// tenant).
func (ps *pools) newPool(id poolKey, name, serverName string, pc pool.Config, spec mcpconn.StdioSpec, log *slog.Logger) *pool.Pool[*mcpconn.Conn] {
	pc.Metrics = ps.metrics
	pc.Attributes = attribute.NewSet(attribute.String("server", serverName), attribute.String("tenant", id.tenant))
	return pool.New(name, pc, ps.dial(spec, id.tenant, serverName), log)
}

// registeredConfig is the pool configuration of the registered server
// name.
func (ps *pools) registeredConfig(name string) pool.Config {
	reg := ps.registered[name]
	pc := ps.poolConfig(ps.cfg.Warm)
	if reg.Warm != nil {
		pc.Warm = *reg.Warm
	}
	if reg.MaxProcesses > 0 {
		pc.MaxProcesses = reg.MaxProcesses
	}
	pc.Shared = reg.Shared != config.NotShared
	return pc
}

// registeredSpec is how the registered server name's processes start.
func (ps *pools) registeredSpec(name string) mcpconn.StdioSpec {
	reg := ps.registered[name]
	return mcpconn.StdioSpec{Name: name, Command: reg.Command, Args: reg.Args, Env: reg.Env, TerminateGrace: ps.grace}
}

func (ps *pools) poolConfig(warm int) pool.Config {
	return pool.Config{
		Warm:         warm,
		MaxProcesses: ps.cfg.MaxProcesses,
		IdleTimeout:  ps.cfg.IdleTimeout,
		MaxLifetime:  ps.cfg.MaxLifetime,
		StartTimeout: ps.cfg.StartTimeout,
	}
}

// stdioDialer returns the dialFunc that starts processes logging to log,
// whose requests carry their trace context with prop and are traced
// and timed by tel. A pool's
// processes log with the server's registered (or command) name; sessions
// see them under their own names.
func stdioDialer(log *slog.Logger, prop propagation.TextMapPropagator, tel *mcpconn.Telemetry, cache *schemacache.Cache) dialFunc {
	return func(spec mcpconn.StdioSpec, tenant, serverName string) pool.Dialer[*mcpconn.Conn] {
		// Every process of the pool, warm spares included, offers what
		// the server negotiated before.
		versions := versionMemory{cache, stdioKey(tenant, spec)}
		// While the server's version is unknown, the pool's handshakes
		// (its first process and its warm spares) go one at a time, so
		// that the probe is paid once, and a server that exits on it (as
		// some do on a request they do not know) is started twice, not
		// twice per process.
		learning := make(chan struct{}, 1)
		return func(ctx context.Context, timeout time.Duration) (*mcpconn.Conn, error) {
			if versions.Version() == "" {
				select {
				case learning <- struct{}{}:
					defer func() { <-learning }()
				case <-ctx.Done():
					return nil, ctx.Err()
				}
			}
			return mcpconn.DialStdio(ctx, spec, timeout, mcpconn.Options{Logger: log, Propagator: prop, Telemetry: tel, Tenant: tenant, ServerName: serverName, Versions: versions})
		}
	}
}

// versionMemory remembers a server's protocol version in the schema
// cache, beside its tool list.
type versionMemory struct {
	cache *schemacache.Cache
	key   schemacache.Key
}

func (m versionMemory) Version() string   { return m.cache.ProtocolVersion(m.key) }
func (m versionMemory) Remember(v string) { m.cache.RememberProtocol(m.key, v) }

// stdioKey is the key of tenant's stdio server started as spec says
// (schemacache.ServerKey): it finds the server's pool (tenant "", since
// poolKey holds the tenant apart) and its protocol version.
func stdioKey(tenant string, spec mcpconn.StdioSpec) schemacache.Key {
	return schemacache.ServerKey(schemacache.KeyParts{Tenant: tenant, Command: spec.Command, Args: spec.Args, Env: spec.Env, Unset: spec.Unset})
}

// attach returns the pool that serves tenant's session with a registered
// server (ref) or a command configuration (spec), counting one more
// session that uses it; the session detaches when it ends. (A session
// attaches to a pool; it acquires a process from it.)
func (ps *pools) attach(tenant, ref string, spec mcpconn.StdioSpec) *poolEntry {
	ps.mu.Lock()
	defer ps.mu.Unlock()
	var id poolKey
	switch {
	case ref == "":
		id = poolKey{tenant: tenant, command: stdioKey("", spec)}
	case ps.registered[ref].Shared == config.SharedPerTenant:
		id = poolKey{tenant: tenant, ref: ref}
	default:
		id = poolKey{ref: ref} // made at start-up
	}
	e := ps.byKey[id]
	if e == nil {
		serverName := spec.Name // the request's name for its command
		name, pc := "command: "+filepath.Base(spec.Command), ps.poolConfig(ps.cfg.CommandWarm)
		if ref != "" {
			serverName, name, pc, spec = ref, ref, ps.registeredConfig(ref), ps.registeredSpec(ref)
		}
		spec.Name = name
		e = &poolEntry{pool: ps.newPool(id, name, serverName, pc, spec, ps.log.With("tenant", tenant)), name: name, id: id, shared: pc.Shared}
		ps.byKey[id] = e
	}
	e.refs++
	if e.unused != nil {
		e.unused.Stop()
		e.unused = nil
		e.idleSince++ // a timer that already fired finds it used again
	}
	return e
}

// detach ends a session's use of e; an unused, empty pool made on use
// goes.
func (ps *pools) detach(e *poolEntry) {
	ps.mu.Lock()
	e.refs--
	unused := !e.permanent && e.refs == 0 && !ps.closed
	drop := unused && e.pool.Idle()
	if drop {
		delete(ps.byKey, e.id)
	} else if unused && ps.cfg.IdleTimeout > 0 {
		e.idleSince++
		since := e.idleSince
		e.unused = time.AfterFunc(ps.cfg.IdleTimeout, func() { ps.dropUnused(e, since) })
	}
	ps.mu.Unlock()
	if drop {
		e.pool.Close()
	}
}

// dropUnused closes a pool made on use that no session has used for
// idle_timeout, with its processes.
func (ps *pools) dropUnused(e *poolEntry, since uint64) {
	ps.mu.Lock()
	defer ps.mu.Unlock()
	if ps.closed || e.refs > 0 || ps.byKey[e.id] != e || e.idleSince != since {
		return // in use again, or a later spell of disuse now counts
	}
	delete(ps.byKey, e.id)
	e.unused = nil
	ps.drops.Go(e.pool.Close)
}

func (ps *pools) stats() []*bridgev1.PoolStats {
	ps.mu.Lock()
	entries := slices.Collect(maps.Values(ps.byKey))
	ps.mu.Unlock()
	slices.SortFunc(entries, func(a, b *poolEntry) int {
		return cmp.Or(cmp.Compare(a.id.String(), b.id.String()), cmp.Compare(a.id.tenant, b.id.tenant))
	})
	out := make([]*bridgev1.PoolStats, 0, len(entries))
	for _, e := range entries {
		s := e.pool.Stats()
		out = append(out, &bridgev1.PoolStats{
			ServerName: e.name, Key: e.id.String(), Tenant: e.id.tenant,
			Warm: int32(s.Warm), Busy: int32(s.Busy), Starting: int32(s.Starting), MaxProcesses: int32(s.MaxProcesses),
			Spawned: s.Spawned, Retired: s.Retired, Crashed: s.Crashed, Waits: s.Waits, Shared: s.Shared,
		})
	}
	return out
}

// close stops every pool and its processes.
func (ps *pools) close() {
	ps.mu.Lock()
	ps.closed = true
	entries := slices.Collect(maps.Values(ps.byKey))
	for _, e := range entries {
		if e.unused != nil {
			e.unused.Stop()
		}
	}
	ps.mu.Unlock()
	var wg sync.WaitGroup
	for _, e := range entries {
		wg.Go(e.pool.Close)
	}
	wg.Wait()
	ps.drops.Wait()
	_ = ps.metrics.Close()
}
