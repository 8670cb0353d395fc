package server

import (
	statev1 "github.com/agentd/agentd/gen/go/agentd/state/v1"
	agentdv1 "github.com/agentd/agentd/gen/go/agentd/v1"

	"context"
	"time"

	"github.com/agentd/agentd/internal/fault"
	"github.com/agentd/agentd/internal/record"
	"github.com/agentd/agentd/internal/store"
)

// openJournal records a new generation, or takes the record of a resumed
// one, and starts its journal (record.Journal). A store that cannot
// record it fails it.
func (s *Service) openJournal(ctx context.Context, g *generation) (*record.Journal, error) {
	if g.resume == nil {
		j, _, err := s.createJournal(ctx, g)
		return j, err
	}
	if err := s.sealAgent(g); err != nil {
		return nil, err
	}
	return record.Resume(ctx, s.journalOptions(g), g.snapshot(nil))
}

// createJournal records a new generation and starts its journal; on a
// thread, created says whether it holds the thread or was queued (no
// journal then).
func (s *Service) createJournal(ctx context.Context, g *generation) (_ *record.Journal, created store.Created, _ error) {
	if err := s.sealAgent(g); err != nil {
		return nil, created, err
	}
	cp := g.snapshot(nil)
	if g.thread != nil {
		// It may wait in the thread's queue: whoever takes it then starts
		// it without a client.
		cp.Detached = true
	}
	o := s.journalOptions(g)
	o.Origin.TraceID = traceID(ctx)
	return record.Create(ctx, o, cp)
}

func (s *Service) sealAgent(g *generation) error {
	agent, err := record.SealAgent(s.sealer, g.tenant, g.id, g.plan.agent)
	g.agent = agent
	return err
}

// journalOptions are the options of g's journal: its lease is this
// replica's, and losing it stops g.
func (s *Service) journalOptions(g *generation) record.Options {
	o := record.Options{
		Store: s.generations, Tenant: g.tenant, ID: g.id, Owner: s.replica, TTL: s.cfg.LeaseTTL,
		Stop:   func(err error) { g.link.cancel(err) },
		Warn:   func(msg string, err error) { s.log.Warn(msg, "generation", g.id, "err", err) },
		Live:   &s.live,
		Origin: g.recordOrigin(),
	}
	if g.thread != nil {
		o.Thread = &store.ThreadStart{ID: g.thread.id, Multitask: g.thread.multitask, MaxItems: int64(g.thread.maxItems.N)}
		if g.thread.onFailure == agentdv1.OnFailure_ON_FAILURE_KEEP_INPUT && g.resume == nil {
			// Kept by the store for a pause that runs out: no replica
			// ends that one to say what the thread keeps.
			o.Thread.KeepInput = record.ThreadItems(s.sealer, g.tenant, g.id, g.messages[g.thread.base:], time.Now())
		}
		o.ThreadAppend = g.threadAppend
	}
	return o
}

// recordOrigin is what g's record keeps of its start.
func (g *generation) recordOrigin() store.Origin {
	o := store.Origin{StartedBy: g.startedBy, EndUser: g.endUser}
	if g.plan != nil {
		o.Provider, o.Model = g.plan.agent.GetProvider(), g.plan.agent.GetModel()
	}
	return o
}

// conversation is the part of a checkpoint, paused or running, that says
// where the generation is: its conversation, usage, tool turns and what
// else it counts against its limits, the turn it is in, and the answers
// it has had.
func (g *generation) conversation(turn *statev1.PausedTurn) *statev1.Checkpoint {
	cp := &statev1.Checkpoint{
		Version:      record.Version,
		GenerationId: g.id,
		Provider:     g.plan.agent.GetProvider(),
		Model:        g.plan.agent.GetModel(),
		Messages:     g.messages,
		Added:        g.added,
		Usage:        g.total,
		ToolTurns:    int32(g.toolTurns),
		Turn:         turn,
		Answered:     g.answered.list(),
		StepUps:      g.stepUps.list(),
		EndUser:      g.endUser,
	}
	if t := g.thread; t != nil {
		cp.ThreadId, cp.ThreadBase, cp.OnFailure = t.id, t.base, t.onFailure
	}
	g.saveLimits(cp)
	// The start's span context, for the later runs' links.
	record.SetOrigin(cp, g.origin)
	return cp
}

// snapshot is the generation's running checkpoint: its conversation
// and, inside a tool turn, the turn (its calls, and the results of those
// that finished), with its agent. The journal stores what of it is new.
func (g *generation) snapshot(turn *statev1.PausedTurn) *statev1.Checkpoint {
	cp := g.conversation(turn)
	g.agent.Put(cp)
	cp.Detached = g.detached
	cp.Resuming = g.resume != nil && !g.resume.progressed
	return cp
}

// checkpoint queues the generation's checkpoint, covering every event
// numbered so far, for its record; a no-op without one.
func (g *generation) checkpoint(turn *statev1.PausedTurn) {
	if g.journal == nil {
		return
	}
	g.emitMu.Lock()
	defer g.emitMu.Unlock()
	g.journal.Checkpoint(g.snapshot(turn))
}

// finalCheckpoint queues the checkpoint whose conversation ends with the
// final answer, for the record's end alone (record.Journal.Final).
func (g *generation) finalCheckpoint() {
	if g.journal == nil {
		return
	}
	g.emitMu.Lock()
	defer g.emitMu.Unlock()
	g.journal.Final(g.snapshot(nil))
}

// emitLast sends the generation's last event, paused or completed, once
// its record says so: a client that has seen it finds the record
// paused (a resume can take it at once) or completed.
func (g *generation) emitLast(ctx context.Context, ev *agentdv1.GenerateResponse) error {
	return g.emitRecorded(ctx, ev, func() {
		if ev.GetPaused() != nil {
			g.journal.Settle(ctx, store.Paused, nil)
		} else {
			g.journal.Settle(ctx, store.Completed, g.result(g.final, nil))
		}
	})
}

// settleJournal ends the generation's record after run returned err.
func (g *generation) settleJournal(ctx context.Context, err error) {
	j := g.journal
	if j == nil {
		return
	}
	if err != nil && fault.KindOf(err) == fault.Conflict && j.Lost() {
		j.Abandon()
		return
	}
	state, _ := g.outcome(ctx, err)
	j.Settle(ctx, state, g.result(g.final, err))
	if g.thread != nil && state.Finished() {
		g.s.wakeAdopter() // the next start queued on its thread may run here
	}
}

// StartSweeper starts ending, until Close, the paused generations whose
// pause expired (generation.pause_ttl) and removing the generations that
// finished more than generation.retention ago, with their event logs
// (record.Sweeper). A no-op without a durable record.
func (s *Service) StartSweeper() {
	if s.generations == nil {
		return
	}
	sw := record.StartSweeper(s.generations, s.cfg.Retention, s.cfg.PauseTTL, s.log)
	if !s.goBackground(func() {
		<-s.bg.Done()
		sw.Stop()
	}) {
		sw.Stop()
	}
}
