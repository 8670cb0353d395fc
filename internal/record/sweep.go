package record

import (
	"context"
	"log/slog"
	"time"

	"github.com/agentd/agentd/internal/store"
)

// How often generations are swept: every tenth of the shorter of
// generation.retention and generation.pause_ttl, at most every
// maxSweepEvery and at least every minSweepEvery; the first sweep comes
// firstSweepAfter after the start (or sooner, at the first interval's
// end), so that a replica started after a long stop catches up at once.
const (
	maxSweepEvery   = 10 * time.Minute
	minSweepEvery   = 10 * time.Millisecond
	firstSweepAfter = 10 * time.Second
	sweepTimeout    = time.Minute // one step of a sweep
)

// sweepEvery is the interval between sweeps for a retention and a pause
// TTL.
func sweepEvery(retention, pauseTTL time.Duration) time.Duration {
	return max(min(min(retention, pauseTTL)/10, maxSweepEvery), minSweepEvery)
}

// Sweeper ends the paused generations whose pause expired before a
// resume (they become cancelled, with a DEADLINE_EXCEEDED result), then
// removes the generations that finished more than the retention ago, with
// their event logs: at every interval, on every replica (the store lets
// several sweep at once). A step that fails is logged and tried again at
// the next interval.
type Sweeper struct {
	stop context.CancelFunc
	done chan struct{}
}

// StartSweeper starts sweeping gens until Stop.
func StartSweeper(gens store.Generations, retention, pauseTTL time.Duration, log *slog.Logger) *Sweeper {
	ctx, cancel := context.WithCancel(context.Background())
	s := &Sweeper{stop: cancel, done: make(chan struct{})}
	every := sweepEvery(retention, pauseTTL)
	go func() {
		defer close(s.done)
		t := time.NewTimer(min(every, firstSweepAfter))
		defer t.Stop()
		for {
			select {
			case <-ctx.Done():
				return
			case <-t.C:
			}
			if !sweep(ctx, gens, retention, pauseTTL, every, log) {
				return
			}
			t.Reset(every)
		}
	}()
	return s
}

// sweep does one round; false once ctx has ended.
func sweep(ctx context.Context, gens store.Generations, retention, pauseTTL, every time.Duration, log *slog.Logger) bool {
	n, err := within(ctx, func(ctx context.Context) (int, error) {
		return gens.ExpirePaused(ctx, time.Now(), pauseExpired)
	})
	switch {
	case ctx.Err() != nil:
		return false
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
		return false
	case err != nil:
		log.Warn("sweeping finished generations failed; trying again later", "retention", retention, "retry_in", every, "error", err)
	default:
		log.Debug("swept finished generations", "removed", n, "retention", retention)
	}
	return true
}

// Stop stops sweeping and waits for a sweep under way. Idempotent.
func (s *Sweeper) Stop() {
	s.stop()
	<-s.done
}

// within runs one step of a sweep, for at most sweepTimeout.
func within(ctx context.Context, step func(context.Context) (int, error)) (int, error) {
	ctx, cancel := context.WithTimeout(ctx, sweepTimeout)
	defer cancel()
	return step(ctx)
}
