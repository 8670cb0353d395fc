package app

import (
	"context"
	"log/slog"
	"time"

	"github.com/agentd/agentd/internal/store"
)

// How often finished generations are swept (X-G4): every tenth of
// generation.retention, at most every maxSweepEvery and at least every
// minSweepEvery; the first sweep comes firstSweepAfter after the start
// (or sooner, at the first interval's end), so that a replica started
// after a long stop catches up at once.
const (
	maxSweepEvery   = 10 * time.Minute
	minSweepEvery   = 10 * time.Millisecond
	firstSweepAfter = 10 * time.Second
	sweepTimeout    = time.Minute // one sweep
)

// sweepEvery is the interval between sweeps for a retention.
func sweepEvery(retention time.Duration) time.Duration {
	return max(min(retention/10, maxSweepEvery), minSweepEvery)
}

// sweepFinished removes, until Close, the generations that finished more
// than retention ago, with their event logs (X-G4): every sweepEvery,
// on every replica (the store lets several sweep at once). A sweep that
// fails is logged and tried again at the next interval.
func (a *Agent) sweepFinished(gens store.Generations, retention time.Duration, log *slog.Logger) {
	ctx, cancel := context.WithCancel(context.Background())
	a.stopSweep = cancel
	a.sweepDone = make(chan struct{})
	every := sweepEvery(retention)
	go func() {
		defer close(a.sweepDone)
		t := time.NewTimer(min(every, firstSweepAfter))
		defer t.Stop()
		for {
			select {
			case <-ctx.Done():
				return
			case <-t.C:
			}
			sctx, scancel := context.WithTimeout(ctx, sweepTimeout)
			n, err := gens.Sweep(sctx, time.Now().Add(-retention))
			scancel()
			switch {
			case ctx.Err() != nil:
				return
			case err != nil:
				log.Warn("sweeping finished generations failed; trying again later", "retention", retention, "retry_in", every, "error", err)
			default:
				log.Debug("swept finished generations", "removed", n, "retention", retention)
			}
			t.Reset(every)
		}
	}()
}
