package bridge

import (
	"cmp"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"log/slog"
	"maps"
	"path/filepath"
	"slices"
	"sync"
	"time"

	"github.com/agentd/agentd/bridge/internal/mcpconn"
	"github.com/agentd/agentd/bridge/internal/pool"
	bridgev1 "github.com/agentd/agentd/gen/go/agentd/bridge/v1"
	"github.com/agentd/agentd/internal/config"
)

// pools owns the bridge's stdio process pools: one per registered server,
// made at start-up so their spares are warm before the first request, and
// one per distinct allowed command configuration, made on first use and
// dropped when no session uses it and it holds no process, or, if it keeps
// warm spares (command_warm), once no session has used it for
// idle_timeout.
type pools struct {
	log   *slog.Logger
	cfg   config.Pool
	grace time.Duration
	dial  dialFunc
	drops sync.WaitGroup // pools being closed after idle_timeout unused

	mu     sync.Mutex
	byKey  map[string]*poolEntry
	closed bool
}

type poolEntry struct {
	pool       *pool.Pool[*mcpconn.Conn]
	name, key  string
	refs       int // sessions using it
	registered bool
	unused     *time.Timer // drops an unused command pool that keeps spares
	idleSince  uint64      // counts spells of disuse, so that a stale timer does nothing
}

// dialFunc makes the dialer of a pool's processes from their spec.
type dialFunc func(spec mcpconn.StdioSpec) pool.Dialer[*mcpconn.Conn]

// newPools makes the pools of cfg's registered servers, whose processes
// dial starts (stdioDialer, but in tests of the pools' timing).
func newPools(cfg config.Bridge, log *slog.Logger, dial dialFunc) *pools {
	ps := &pools{log: log, cfg: cfg.Pool, grace: cfg.TerminateGrace, dial: dial, byKey: make(map[string]*poolEntry)}
	for _, name := range slices.Sorted(maps.Keys(cfg.Servers)) {
		reg := cfg.Servers[name]
		pc := ps.poolConfig(ps.cfg.Warm)
		if reg.Warm != nil {
			pc.Warm = *reg.Warm
		}
		if reg.MaxProcesses > 0 {
			pc.MaxProcesses = reg.MaxProcesses
		}
		pc.Shared = reg.Shared
		spec := mcpconn.StdioSpec{Name: name, Command: reg.Command, Args: reg.Args, Env: reg.Env, TerminateGrace: ps.grace}
		key := "ref:" + name
		ps.byKey[key] = &poolEntry{pool: pool.New(name, pc, ps.dial(spec), log), name: name, key: key, registered: true}
	}
	return ps
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

// stdioDialer returns the dialFunc that starts processes logging to log.
// A pool's processes log with the server's registered (or command) name;
// sessions see them under their own names.
func stdioDialer(log *slog.Logger) dialFunc {
	return func(spec mcpconn.StdioSpec) pool.Dialer[*mcpconn.Conn] {
		return func(ctx context.Context, timeout time.Duration) (*mcpconn.Conn, error) {
			return mcpconn.DialStdio(ctx, spec, timeout, mcpconn.Options{Logger: log})
		}
	}
}

// commandKey identifies a command configuration without holding its
// environment's values.
func commandKey(spec mcpconn.StdioSpec) string {
	env := make(map[string]string, len(spec.Env))
	for k, v := range spec.Env {
		sum := sha256.Sum256([]byte(v))
		env[k] = hex.EncodeToString(sum[:])
	}
	data, _ := json.Marshal(struct {
		Command     string
		Args, Unset []string
		Env         map[string]string
	}{spec.Command, spec.Args, slices.Sorted(slices.Values(spec.Unset)), env})
	sum := sha256.Sum256(data)
	return "command:" + hex.EncodeToString(sum[:12])
}

// attach returns the pool of a registered server (ref) or of a command
// configuration, counting one more session that uses it; the session
// detaches when it ends. (A session attaches to a pool; it acquires a
// process from it.)
func (ps *pools) attach(ref string, spec mcpconn.StdioSpec) *poolEntry {
	ps.mu.Lock()
	defer ps.mu.Unlock()
	key := "ref:" + ref
	if ref == "" {
		key = commandKey(spec)
	}
	e := ps.byKey[key]
	if e == nil {
		name := "command: " + filepath.Base(spec.Command)
		spec.Name = name
		e = &poolEntry{pool: pool.New(name, ps.poolConfig(ps.cfg.CommandWarm), ps.dial(spec), ps.log), name: name, key: key}
		ps.byKey[key] = e
	}
	e.refs++
	if e.unused != nil {
		e.unused.Stop()
		e.unused = nil
		e.idleSince++ // a timer that already fired finds it used again
	}
	return e
}

// detach ends a session's use of e; an unused, empty command pool goes.
func (ps *pools) detach(e *poolEntry) {
	ps.mu.Lock()
	e.refs--
	unused := !e.registered && e.refs == 0 && !ps.closed
	drop := unused && e.pool.Idle()
	if drop {
		delete(ps.byKey, e.key)
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

// dropUnused closes a command pool that no session has used for
// idle_timeout, with its warm spares.
func (ps *pools) dropUnused(e *poolEntry, since uint64) {
	ps.mu.Lock()
	defer ps.mu.Unlock()
	if ps.closed || e.refs > 0 || ps.byKey[e.key] != e || e.idleSince != since {
		return // in use again, or a later spell of disuse now counts
	}
	delete(ps.byKey, e.key)
	e.unused = nil
	ps.drops.Go(e.pool.Close)
}

func (ps *pools) stats() []*bridgev1.PoolStats {
	ps.mu.Lock()
	entries := slices.Collect(maps.Values(ps.byKey))
	ps.mu.Unlock()
	slices.SortFunc(entries, func(a, b *poolEntry) int { return cmp.Compare(a.key, b.key) })
	out := make([]*bridgev1.PoolStats, 0, len(entries))
	for _, e := range entries {
		s := e.pool.Stats()
		out = append(out, &bridgev1.PoolStats{
			ServerName: e.name, Key: e.key,
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
}
