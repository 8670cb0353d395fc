package record

import (
	"context"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	agentdv1 "github.com/agentd/agentd/gen/go/agentd/v1"
	"github.com/agentd/agentd/internal/fault"
	"github.com/agentd/agentd/internal/store"
)

// countingGenerations counts a journal's renewals and appends; appends
// fail as unavailable while down is set.
type countingGenerations struct {
	store.Generations
	mu      sync.Mutex
	renews  int
	appends int // attempts, failed ones included
	down    bool
	last    int64
}

func (c *countingGenerations) Renew(context.Context, string, string, int64, time.Time) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.renews++
	return nil
}

func (c *countingGenerations) Append(_ context.Context, _, _ string, _ int64, events []store.Event) (int64, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.appends++
	if c.down {
		return 0, fault.New(fault.Unavailable, "the store is down")
	}
	c.last += int64(len(events))
	return c.last, nil
}

// Read finds no event after a failed append: it did not take.
func (c *countingGenerations) Read(context.Context, string, string, int64, int) ([]store.Event, error) {
	return nil, nil
}

func (c *countingGenerations) counts() (renews, appends int) {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.renews, c.appends
}

func (c *countingGenerations) setDown(down bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.down = down
}

// The keeper holds no goroutine between its writes (a generation waiting
// on its client holds timers, not a stack): it renews
// the lease every third of the ttl, flushes events flushEvery after they
// are recorded, retries a failed write with backoff, and does nothing
// once stopped.
func TestKeeperWorksOnDemand(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		gens := &countingGenerations{}
		j := newJournal(Options{Store: gens, ID: "g", TTL: 3 * time.Second, Stop: func(error) {}, Warn: func(string, error) {}})
		j.started = true
		j.keeper.start(j)
		idle := func(when string) {
			t.Helper()
			synctest.Wait()
			j.keeper.mu.Lock()
			working := j.keeper.working
			j.keeper.mu.Unlock()
			if working {
				t.Fatalf("%s: a worker still runs", when)
			}
		}
		want := func(when string, renews, appends int) {
			t.Helper()
			if r, a := gens.counts(); r != renews || a != appends {
				t.Fatalf("%s: %d renewals and %d appends, want %d and %d", when, r, a, renews, appends)
			}
		}
		idle("started")
		want("started", 0, 0)

		time.Sleep(time.Second)
		idle("after a third of the ttl")
		want("after a third of the ttl", 1, 0)

		j.Record(&agentdv1.GenerateResponse{})
		time.Sleep(flushEvery - time.Millisecond)
		idle("before the flush")
		want("before the flush", 1, 0)
		time.Sleep(time.Millisecond)
		idle("flushed")
		want("flushed", 1, 1)

		gens.setDown(true)
		j.Record(&agentdv1.GenerateResponse{})
		j.poke()
		idle("a failed write")
		want("a failed write", 1, 2)
		j.poke() // a retry is due: no write before it
		idle("poked while a retry is due")
		want("poked while a retry is due", 1, 2)
		gens.setDown(false)
		time.Sleep(retryMin)
		idle("retried")
		want("retried", 1, 3)
		if err := j.AwaitSeq(t.Context(), 2); err != nil {
			t.Fatalf("after the retry: %v", err)
		}

		j.halt()
		time.Sleep(10 * time.Second)
		idle("stopped")
		want("stopped", 1, 3)
	})
}
