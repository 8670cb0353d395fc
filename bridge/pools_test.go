package bridge

import (
	"context"
	"log/slog"
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
