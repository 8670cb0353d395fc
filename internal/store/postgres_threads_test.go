package store

import (
	"testing"
	"time"

	"github.com/agentd/agentd/internal/fault"
	"github.com/agentd/agentd/internal/store/pgtest"
	"github.com/agentd/agentd/internal/testwait"
)

// X-G1: a fork of a thread whose deletion is under way waits for it, and
// then finds no thread: never a fork that counts items it does not have.
func TestPostgresForkAmidDelete(t *testing.T) {
	t.Parallel()
	p := openPostgres(t, pgtest.DSN(t))
	ctx, th := t.Context(), p.Threads()
	now := time.Now()
	if _, err := th.CreateThread(ctx, NewThread{Tenant: "acme", ID: "src", Items: []ThreadItem{{ID: "a"}, {ID: "b"}}, Now: now}); err != nil {
		t.Fatal(err)
	}
	tx, err := p.pool.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer tx.Rollback(ctx)
	// DeleteThread's work, not yet committed.
	if _, err := tx.Exec(ctx, `SELECT 1 FROM threads WHERE tenant = 'acme' AND id = 'src' FOR UPDATE`); err != nil {
		t.Fatal(err)
	}
	if _, _, err := pgDeleteThreads(ctx, tx, []string{"acme"}, []string{"src"}); err != nil {
		t.Fatal(err)
	}

	var forkErr error
	forked := make(chan struct{})
	go func() {
		defer close(forked)
		_, forkErr = th.ForkThread(ctx, "acme", "src", "fork", -1, nil, 0, now)
	}()
	testwait.For(t, "the fork to wait for a lock, or to end", func() bool {
		select {
		case <-forked:
			return true
		default:
		}
		var waiting bool
		err := p.pool.QueryRow(ctx, `SELECT EXISTS (SELECT 1 FROM pg_stat_activity WHERE datname = current_database() AND wait_event_type = 'Lock')`).Scan(&waiting)
		return err == nil && waiting
	})
	select {
	case <-forked:
		t.Fatalf("the fork ended while the deletion was under way: %v", forkErr)
	default:
	}
	if err := tx.Commit(ctx); err != nil {
		t.Fatal(err)
	}
	testwait.Recv(t, forked, "the fork")
	if fault.KindOf(forkErr) != fault.NotFound {
		t.Errorf("the fork, once the deletion committed: %v; want NotFound", forkErr)
	}
	if _, err := th.GetThread(ctx, "acme", "fork"); fault.KindOf(err) != fault.NotFound {
		t.Errorf("GetThread of the fork: %v; want NotFound", err)
	}
}
