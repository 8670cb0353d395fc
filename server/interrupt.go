package server

import (
	"context"
	"time"

	agentdv1 "github.com/agentd/agentd/gen/go/agentd/v1"
	"github.com/agentd/agentd/internal/fault"
	"github.com/agentd/agentd/internal/store"
	"github.com/agentd/agentd/internal/toolerror"
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
func (s *Service) startInterrupter() { s.every(interruptEvery, s.interruptDue) }

// every runs f every d, on a goroutine of the Service's, until Close.
func (s *Service) every(d time.Duration, f func()) {
	s.goBackground(func() {
		t := time.NewTicker(d)
		defer t.Stop()
		for {
			select {
			case <-s.bg.Done():
				return
			case <-t.C:
			}
			f()
		}
	})
}

// interruptDue cancels what is interrupted now.
func (s *Service) interruptDue() {
	ctx, cancel := context.WithTimeout(s.bg, store.Timeout)
	defer cancel()
	due, err := s.threads.Interrupted(ctx, s.replica, adoptBatch)
	if err != nil {
		if s.bg.Err() == nil {
			s.log.Warn("looking for interrupted generations", "err", err)
		}
		return
	}
	for _, in := range due {
		g := s.decidingHere(in.Tenant, in.ID)
		switch {
		case g != nil && in.Owner == s.replica && in.Cancel:
			g.cancelBy(in.Reason)
		case g != nil && in.Owner == s.replica:
			g.interrupt()
		case in.State == store.Paused:
			s.cancelPaused(in) // taken only if nobody holds it (a lapsed lease included)
		}
	}
}

// interrupt stops g at its next safe point: before its next model turn,
// before the tool calls of a model turn that has just ended run, or, in a
// tool turn that waits for answers, once its running calls end (the calls
// that wait get a result saying they did not run). What it completed stays
// on its thread; nothing running is cut short.
func (g *generation) interrupt() {
	if g.thread == nil || g.thread.interrupted.Swap(true) {
		return
	}
	g.s.log.Info("generation interrupted by a newer start on its thread", "generation", g.id, "tenant", g.tenant, "thread", g.thread.id)
	close(g.thread.stop)
}

// interrupts is closed once g is interrupted; nil (never) without a
// thread.
func (g *generation) interrupts() <-chan struct{} {
	if g.thread == nil {
		return nil
	}
	return g.thread.stop
}

// safePoint ends g with errInterrupted if it was interrupted.
func (g *generation) safePoint() error {
	if g.thread != nil && g.thread.interrupted.Load() {
		return errInterrupted
	}
	return nil
}

// interruptedOutput is the result of a call that waited for an answer
// when its generation was interrupted: it did not run.
var interruptedOutput = toolerror.JSON("not run: a newer message on the conversation's thread interrupted the generation while this call waited for an answer")

// interruptWaits gives each call of r that waits for an answer on the
// stream (an approval, a function result) interruptedOutput: the turn
// ends with its running calls' results, and the generation stops at the
// safe point after it.
func (r *turnRun) interruptWaits() {
	r.mu.Lock()
	var cut []int
	for i, w := range r.waits {
		if w.onStream() {
			delete(r.waits, i)
			r.settle(w, true)
			r.g.answered.add(w.id)
			cut = append(cut, i)
		}
	}
	r.mu.Unlock()
	for _, i := range cut {
		c := r.calls[i]
		r.setResult(i, &agentdv1.ToolResult{ToolCallId: c.GetId(), Name: c.GetName(), Output: interruptedOutput, IsError: true})
	}
	r.g.checkpoint(r.runningState())
}

// cancelPaused ends a paused generation, interrupted or asked to cancel
// (in.Cancel), as its resume would, cancelled: its thread keeps what it
// completed when interrupted, its input alone with on_failure KEEP_INPUT
// when cancelled, and the paused checkpoint goes, so that nothing resumes
// it. A resume that takes it first runs it here or elsewhere, and its
// owner interrupts or cancels it.
// It reports whether it ended it: false when another replica, or a
// resume, holds it.
func (s *Service) cancelPaused(in store.Interruption) bool {
	// Its writes end what they begin, whatever becomes of the round or
	// of agentd meanwhile: a lease taken and left would hold the thread.
	ctx, cancel := store.WriteContext(s.bg)
	defer cancel()
	now := time.Now()
	rec, err := s.generations.Acquire(ctx, in.Tenant, in.ID, s.replica, now, now.Add(s.cfg.LeaseTTL))
	if err != nil {
		return false // another replica, or a resume, took it
	}
	finished := false
	defer func() {
		if !finished {
			if err := s.generations.Release(ctx, in.Tenant, in.ID, rec.Lease.Epoch, time.Now()); err != nil {
				s.log.Warn("releasing a paused generation being cancelled", "generation", in.ID, "tenant", in.Tenant, "err", err)
			}
		}
	}()
	g, _ := s.adoptedGeneration(rec) // what it completed is kept even if it could not run here
	if g == nil || rec.State != store.Paused {
		return false
	}
	cause, ended := errInterrupted, "paused generation interrupted by a newer start on its thread"
	if in.Cancel {
		cause, ended = errCancelled(in.Reason), "paused generation cancelled"
	} else if g.thread != nil {
		g.thread.interrupted.Store(true)
	}
	o := store.Outcome{State: store.Cancelled, Result: g.result(nil, cause), Thread: g.threadAppend(store.Cancelled), Now: time.Now()}
	if _, err := s.generations.Finish(ctx, in.Tenant, in.ID, rec.Lease.Epoch, o); err != nil {
		s.log.Warn("cancelling a paused generation", "generation", in.ID, "tenant", in.Tenant, "err", err)
		return false
	}
	finished = true
	if err := s.checkpoints.Delete(ctx, in.Tenant, in.ID, 0); err != nil {
		s.log.Warn("removing a cancelled paused generation's checkpoint", "generation", in.ID, "tenant", in.Tenant, "err", err)
	}
	s.log.Info(ended, "generation", in.ID, "tenant", in.Tenant, "thread", rec.Thread)
	s.wakeAdopter()
	return true
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
func (s *Service) startThreadSweeper() { s.every(sweepThreadsEvery, s.sweepThreads) }

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
		s.log.Warn("sweeping threads", "threads", n, "err", err)
	case n > 0:
		s.log.Info("threads swept", "threads", n)
	}
}
