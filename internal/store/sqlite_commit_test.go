package store

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/agentd/agentd/internal/fault"
)

// queued is how many writes wait for the committer.
func (c *committer) queued() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return len(c.queue)
}

// waitQueued waits until n writes wait for the committer.
func waitQueued(t *testing.T, c *committer, n int) {
	t.Helper()
	for c.queued() != n {
		select {
		case <-t.Context().Done():
			t.Fatalf("%d writes queued; want %d", c.queued(), n)
		case <-time.After(time.Millisecond):
		}
	}
}

// TestGroupCommit: writes that wait together share one transaction, and
// each has the outcome it would have had alone: a write that fails (a lost
// lease) gets its error while the others, run again without it, commit;
// a write whose caller gives up while it waits never runs.
func TestGroupCommit(t *testing.T) {
	t.Parallel()
	s := open(t, filepath.Join(t.TempDir(), "agentd.db"))
	gens := s.Generations()
	ctx := t.Context()
	now := time.Now()
	const n = 5
	for i := range n + 1 {
		if _, err := gens.Create(ctx, NewGeneration{Tenant: "acme", ID: fmt.Sprint("g", i), Owner: "r", Expires: now.Add(time.Hour), Now: now}); err != nil {
			t.Fatal(err)
		}
	}
	before := s.commit.commits.Load()

	// The store's one connection is held: the committer waits for it,
	// and every write queues meanwhile.
	conn, err := s.db.Conn(ctx)
	if err != nil {
		t.Fatal(err)
	}
	errs := make([]error, n+2)
	var wg sync.WaitGroup
	checkpoint := func(i int, ctx context.Context, id string, epoch int64) {
		wg.Go(func() {
			_, errs[i] = gens.Checkpoint(ctx, "acme", id, epoch, Checkpoint{State: Running, Data: []byte(fmt.Sprint("cp", i)), Now: now,
				Events: []Event{{Kind: "turn_done", Data: []byte("{}")}}})
		})
	}
	queued := 0
	for i := range n {
		if i == 2 {
			checkpoint(n, ctx, "g1", 7) // an epoch it never had: the lease is lost
			queued++
			waitQueued(t, s.commit, queued)
		}
		checkpoint(i, ctx, fmt.Sprint("g", i), 1)
		queued++
		waitQueued(t, s.commit, queued)
	}
	gaveUp, giveUp := context.WithCancel(ctx)
	returned := make(chan error)
	go func() {
		_, err := gens.Checkpoint(gaveUp, "acme", "g5", 1, Checkpoint{State: Running, Data: []byte("never"), Now: now})
		returned <- err
	}()
	waitQueued(t, s.commit, queued+1)
	giveUp()
	errs[n+1] = <-returned // while the committer still waits
	_ = conn.Close()
	wg.Wait()

	for i := range n {
		if errs[i] != nil {
			t.Errorf("write %d: %v", i, errs[i])
		}
		g, err := gens.Get(ctx, "acme", fmt.Sprint("g", i))
		if err != nil || string(g.Checkpoint) != fmt.Sprint("cp", i) || g.LastSeq != 1 {
			t.Errorf("g%d after its checkpoint: checkpoint %q, last_seq %d, %v", i, g.Checkpoint, g.LastSeq, err)
		}
	}
	if fault.KindOf(errs[n]) != fault.Conflict {
		t.Errorf("the write under a lost lease: %v; want Conflict", errs[n])
	}
	if !errors.Is(errs[n+1], context.Canceled) {
		t.Errorf("the write whose caller gave up: %v; want its context's error", errs[n+1])
	}
	if g, err := gens.Get(ctx, "acme", "g5"); err != nil || g.Version != 1 || g.LastSeq != 0 {
		t.Errorf("the write whose caller gave up took: version %d, last_seq %d, %v", g.Version, g.LastSeq, err)
	}
	if got := s.commit.commits.Load() - before; got != 1 {
		t.Errorf("%d transactions committed the %d writes; want 1", got, n)
	}
}

// TestCommitterClose: closing the store fails the writes that still wait,
// and a write after it fails at once.
func TestCommitterClose(t *testing.T) {
	t.Parallel()
	s, err := OpenSQLite(filepath.Join(t.TempDir(), "agentd.db"), 0)
	if err != nil {
		t.Fatal(err)
	}
	gens := s.Generations()
	ctx := t.Context()
	now := time.Now()
	conn, err := s.db.Conn(ctx)
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() {
		_, err := gens.Create(ctx, NewGeneration{Tenant: "acme", ID: "g", Owner: "r", Expires: now.Add(time.Hour), Now: now})
		done <- err
	}()
	waitQueued(t, s.commit, 1)
	closed := make(chan error, 1)
	go func() { closed <- s.Close() }()
	// The committer waits for the connection the test holds; once it is
	// given back, the write either ran before the close or fails with it.
	_ = conn.Close()
	if err := <-closed; err != nil {
		t.Errorf("Close: %v", err)
	}
	if err := <-done; err != nil && fault.KindOf(err) != fault.Unavailable {
		t.Errorf("a write queued at the close: %v; want success or Unavailable", err)
	}
	if _, err := gens.Create(ctx, NewGeneration{Tenant: "acme", ID: "h", Owner: "r", Expires: now.Add(time.Hour), Now: now}); fault.KindOf(err) != fault.Unavailable {
		t.Errorf("a write after the close: %v; want Unavailable", err)
	}
}
