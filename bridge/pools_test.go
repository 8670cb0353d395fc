package bridge

import (
	"context"
	"errors"
	"log/slog"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	"github.com/agentd/agentd/bridge/internal/mcpconn"
	"github.com/agentd/agentd/bridge/internal/pool"
	"github.com/agentd/agentd/internal/config"
)

// X-H6: a command pool that keeps warm spares goes exactly idle_timeout
// after the last session detached from it, not before; a session that
// attaches meanwhile keeps it, and the wait starts over when that session
// ends. The timing runs in a synctest bubble, on a spare that never
// finishes starting (so the pool is never empty), whatever the machine's
// load.
func TestUnusedCommandPoolTimer(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		cfg := config.Default().Bridge
		cfg.Servers = nil
		cfg.Pool.CommandWarm = 1
		cfg.Pool.IdleTimeout = time.Minute
		starting := func(mcpconn.StdioSpec, string, string) pool.Dialer[*mcpconn.Conn] {
			return func(ctx context.Context, _ time.Duration) (*mcpconn.Conn, error) {
				<-ctx.Done() // until the pool closes
				return nil, ctx.Err()
			}
		}
		ps := newPools(cfg, slog.New(slog.DiscardHandler), starting, nil)
		defer ps.close()
		spec := mcpconn.StdioSpec{Name: "x", Command: "/usr/bin/mcp-x"}
		kept := func() bool {
			ps.mu.Lock()
			defer ps.mu.Unlock()
			return len(ps.byKey) == 1
		}

		e := ps.attach("", "", spec)
		synctest.Wait() // its spare is starting
		ps.detach(e)
		time.Sleep(30 * time.Second)
		e = ps.attach("", "", spec)
		time.Sleep(time.Minute) // past the first detach's idle_timeout
		synctest.Wait()
		if !kept() {
			t.Fatal("X-H6 the pool went while a session used it")
		}
		ps.detach(e)
		time.Sleep(time.Minute - time.Nanosecond)
		synctest.Wait()
		if !kept() {
			t.Fatal("X-H6 the pool went before idle_timeout")
		}
		time.Sleep(time.Nanosecond)
		synctest.Wait()
		if kept() {
			t.Error("X-H6 the pool is still there idle_timeout after its last session")
		}
	})
}

// X-I6: a command's pool is its tenant's and its configuration's own: a
// different command, argument, env value or unset variable, or another
// tenant, gets a pool of its own; the same configuration, whatever the
// order of its env and unset lists and whatever the session calls it,
// shares one. The pool's key (PoolStats.key) names no env value.
func TestCommandPoolIsolation(t *testing.T) {
	t.Parallel()
	cfg := config.Default().Bridge
	cfg.Servers = nil
	never := func(mcpconn.StdioSpec, string, string) pool.Dialer[*mcpconn.Conn] {
		return func(context.Context, time.Duration) (*mcpconn.Conn, error) {
			return nil, errors.New("no process in this test")
		}
	}
	ps := newPools(cfg, slog.New(slog.DiscardHandler), never, nil)
	defer ps.close()
	base := mcpconn.StdioSpec{Name: "x", Command: "/usr/bin/mcp-x", Args: []string{"-v"}, Env: map[string]string{"API_KEY": "sk-secret-1", "B": "2"}, Unset: []string{"C", "D"}}
	e := ps.attach("acme", "", base)
	same := base
	same.Name, same.Unset = "renamed", []string{"D", "C"}
	if ps.attach("acme", "", same) != e {
		t.Error("the same configuration got another pool")
	}
	for name, other := range map[string]struct {
		tenant string
		change func(*mcpconn.StdioSpec)
	}{
		"command":   {"acme", func(s *mcpconn.StdioSpec) { s.Command = "/usr/bin/mcp-y" }},
		"argument":  {"acme", func(s *mcpconn.StdioSpec) { s.Args = []string{"-q"} }},
		"env value": {"acme", func(s *mcpconn.StdioSpec) { s.Env = map[string]string{"API_KEY": "sk-secret-2", "B": "2"} }},
		"unset":     {"acme", func(s *mcpconn.StdioSpec) { s.Unset = []string{"C"} }},
		"tenant":    {"bravo", func(*mcpconn.StdioSpec) {}},
	} {
		spec := base
		other.change(&spec)
		if ps.attach(other.tenant, "", spec) == e {
			t.Errorf("a different %s shared the pool", name)
		}
	}
	for _, s := range ps.stats() {
		if !strings.HasPrefix(s.GetKey(), "command:") || strings.Contains(s.GetKey(), "sk-secret") {
			t.Errorf("pool key %q", s.GetKey())
		}
	}
}
