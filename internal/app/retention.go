package app

import (
	"context"
	"log/slog"
	"time"

	"github.com/agentd/agentd/internal/store"
	"github.com/agentd/agentd/server"
)

// How often generations are swept (X-G4): every tenth of the shorter of
// generation.retention and generation.pause_ttl, at most every
// maxSweepEvery and at least every minSweepEvery; the first sweep comes
// firstSweepAfter after the start (or sooner, at the first interval's
// end), so that a replica started after a long stop catches up at once.
const (
	maxSweepEvery   = 10 * time.Minute
	minSweepEvery   = 10 * time.Millisecond
	firstSweepAfter = 10 * time.Second
	sweepTimeout    = time.Minute // one sweep
)

// sweepEvery is the interval between sweeps for a retention and a pause
// TTL.
func sweepEvery(retention, pauseTTL time.Duration) time.Duration {
	return max(min(min(retention, pauseTTL)/10, maxSweepEvery), minSweepEvery)
}

// pauseExpired is the result of a paused generation whose pause expired
// before a resume took it, as the server's records keep results.
var pauseExpired = server.PauseExpiredResult()

// sweepFinished ends, until Close, the paused generations whose pause
// expired before a resume (store.Generations.ExpirePaused: they become
// cancelled, with pauseExpired), then removes the generations that
// finished more than retention ago, with their event logs (X-G4): every
// sweepEvery, on every replica (the store lets several sweep at once). A
// step that fails is logged and tried again at the next interval.
func (a *Agent) sweepFinished(gens store.Generations, retention, pauseTTL time.Duration, log *slog.Logger) {
	ctx, cancel := context.WithCancel(context.Background())
	a.stopSweep = cancel
	a.sweepDone = make(chan struct{})
	every := sweepEvery(retention, pauseTTL)
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
			n, err := within(ctx, func(ctx context.Context) (int, error) {
				return gens.ExpirePaused(ctx, time.Now(), pauseExpired)
			})
			switch {
			case ctx.Err() != nil:
				return
			case err != nil:
				log.Warn("ending paused generations whose pause expired failed; trying again later", "retry_in", every, "error", err)
			case n > 0:
				log.Info("cancelled paused generations whose pause expired", "cancelled", n, "pause_ttl", pauseTTL)
			}
			n, err = within(ctx, func(ctx context.Context) (int, error) {
				return gens.Sweep(ctx, time.Now().Add(-retention))
			})
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

// within runs one step of a sweep, for at most sweepTimeout.
func within(ctx context.Context, step func(context.Context) (int, error)) (int, error) {
	ctx, cancel := context.WithTimeout(ctx, sweepTimeout)
	defer cancel()
	return step(ctx)
}
