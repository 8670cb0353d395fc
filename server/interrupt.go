package server

import (
	"context"
	"time"

	"github.com/agentd/agentd/internal/fault"
	"github.com/agentd/agentd/internal/store"
)

// interruptEvery is how often a replica asks the store for the
// generations that a newer start on their thread interrupted: the time
// an interrupt may take to reach a generation running elsewhere.
const interruptEvery = 250 * time.Millisecond

// errInterrupted cancels a generation that a newer start on its thread
// interrupted (multitask INTERRUPT).
var errInterrupted = fault.New(fault.Canceled, "a newer start on the generation's thread interrupted it")

// startInterrupter starts cancelling, until Close, the interrupted
// generations this replica runs, and the interrupted paused ones that
// nobody runs.
func (s *Service) startInterrupter() {
	s.goBackground(func() {
		t := time.NewTicker(interruptEvery)
		defer t.Stop()
		for {
			select {
			case <-s.bg.Done():
				return
			case <-t.C:
			}
			s.interruptDue()
		}
	})
}

// interruptDue cancels what is interrupted now.
func (s *Service) interruptDue() {
	ctx, cancel := context.WithTimeout(s.bg, store.Timeout)
	defer cancel()
	due, err := s.threads.Interrupted(ctx, adoptBatch)
	if err != nil {
		if s.bg.Err() == nil {
			s.log.Warn("looking for interrupted generations", "err", err)
		}
		return
	}
	for _, in := range due {
		switch {
		case in.Owner == s.replica:
			if g := s.decidingHere(in.Tenant, in.ID); g != nil {
				g.interrupt()
			}
		case in.Owner == "" && in.State == store.Paused:
			s.cancelPaused(ctx, in)
		}
	}
}

// interrupt cancels g at its next safe point: what it completed stays
// on its thread.
func (g *generation) interrupt() {
	if g.thread == nil || g.thread.interrupted.Swap(true) {
		return
	}
	g.s.log.Info("generation interrupted by a newer start on its thread", "generation", g.id, "tenant", g.tenant, "thread", g.thread.id)
	g.link.cancel(errInterrupted)
}

// cancelPaused ends an interrupted paused generation as its resume
// would, cancelled: its thread keeps what it completed, and the paused
// checkpoint goes, so that nothing resumes it. A resume that takes it
// first runs it here or elsewhere, and its owner interrupts it.
func (s *Service) cancelPaused(ctx context.Context, in store.Interruption) {
	now := time.Now()
	rec, err := s.generations.Acquire(ctx, in.Tenant, in.ID, s.replica, now, now.Add(s.cfg.LeaseTTL))
	if err != nil {
		return // another replica, or a resume, took it
	}
	g, _ := s.adoptedGeneration(rec) // what it completed is kept even if it could not run here
	if g == nil || rec.State != store.Paused {
		_ = s.generations.Release(ctx, in.Tenant, in.ID, rec.Lease.Epoch, time.Now())
		return
	}
	if g.thread != nil {
		g.thread.interrupted.Store(true)
	}
	o := store.Outcome{State: store.Cancelled, Result: g.result(nil, errInterrupted), Thread: g.threadAppend(store.Cancelled), Now: time.Now()}
	if _, err := s.generations.Finish(ctx, in.Tenant, in.ID, rec.Lease.Epoch, o); err != nil {
		s.log.Warn("cancelling an interrupted paused generation", "generation", in.ID, "tenant", in.Tenant, "err", err)
		return
	}
	if err := s.checkpoints.Delete(ctx, in.Tenant, in.ID, 0); err != nil {
		s.log.Warn("removing an interrupted paused generation's checkpoint", "generation", in.ID, "tenant", in.Tenant, "err", err)
	}
	s.log.Info("paused generation interrupted by a newer start on its thread", "generation", in.ID, "tenant", in.Tenant, "thread", rec.Thread)
	s.wakeAdopter()
}

// wakeAdopter has the adopter look for generations to adopt now: one
// queued on a thread may have become adoptable.
func (s *Service) wakeAdopter() {
	select {
	case s.adoptNow <- struct{}{}:
	default:
	}
}

// startThreadSweeper removes the threads that expired, and those unchanged for
// threads.retention, every sweepThreadsEvery until Close.
func (s *Service) startThreadSweeper() {
	s.goBackground(func() {
		t := time.NewTicker(sweepThreadsEvery)
		defer t.Stop()
		for {
			select {
			case <-s.bg.Done():
				return
			case <-t.C:
			}
			s.sweepThreads()
		}
	})
}

const sweepThreadsEvery = time.Minute

func (s *Service) sweepThreads() {
	ctx, cancel := context.WithTimeout(s.bg, store.Timeout)
	defer cancel()
	now := time.Now()
	var idle time.Time
	if s.threadRetention > 0 {
		idle = now.Add(-s.threadRetention)
	}
	n, err := s.threads.SweepThreads(ctx, now, idle)
	switch {
	case err != nil && s.bg.Err() == nil:
		s.log.Warn("sweeping threads", "err", err)
	case n > 0:
		s.log.Info("threads swept", "threads", n)
	}
}
