package server

import (
	agentdv1 "github.com/agentd/agentd/gen/go/agentd/v1"

	"context"
	"time"

	"github.com/agentd/agentd/internal/fault"
	"github.com/agentd/agentd/internal/record"
	"github.com/agentd/agentd/internal/store"
	"github.com/agentd/agentd/internal/toolerror"
)

// adoptBatch bounds how many generations one round of the adopter takes.
const adoptBatch = 8

// adoptedUnknown is the result of a call that was running when the
// replica running its generation died: it may or may not have run, and it
// is not run again.
var adoptedUnknown = toolerror.JSON("the agentd replica running this call stopped while it ran; it may or may not have run, and it is not run again")

// StartAdopter starts the background adopter: every
// generation.adopt_interval it takes over the running generations whose
// owners died (the store saw their liveness end, or their leases lapsed)
// or released them (they stopped), and continues them. When both hold
// their liveness in the store (store.Generations.Attend, as agentd's
// replicas do), a replica that dies is adopted at the next round, within
// an adopt interval rather than a lease. Close stops it. A no-op without
// a durable record.
func (s *Service) StartAdopter() {
	if s.generations == nil {
		return
	}
	every := s.cfg.AdoptInterval
	if every <= 0 {
		every = 2 * time.Second
	}
	s.goBackground(func() {
		t := time.NewTicker(every)
		defer t.Stop()
		for {
			s.adoptDue()
			select {
			case <-s.bg.Done():
				return
			case <-t.C:
			case <-s.adoptNow:
			}
		}
	})
	if s.threads != nil {
		s.startInterrupter()
		s.startThreadSweeper()
	}
}

// adoptDue adopts what is due now.
func (s *Service) adoptDue() {
	for !s.stopping.Load() {
		ctx, cancel := context.WithTimeout(s.bg, store.Timeout)
		now := time.Now()
		recs, err := s.generations.Adopt(ctx, s.replica, now, now.Add(s.cfg.LeaseTTL), adoptBatch)
		cancel()
		if err != nil {
			if s.bg.Err() == nil {
				s.log.Warn("looking for generations to adopt", "err", err)
			}
			return
		}
		for _, rec := range recs {
			s.startAdopted(rec)
		}
		if len(recs) < adoptBatch {
			return
		}
	}
}

// adoptOne adopts tenant's generation id for a client attaching to it,
// if its owner's lease has lapsed: it reports whether this replica now
// runs it.
func (s *Service) adoptOne(ctx context.Context, tenant, id string) bool {
	if s.stopping.Load() {
		return false
	}
	now := time.Now()
	rec, err := s.generations.Acquire(ctx, tenant, id, s.replica, now, now.Add(s.cfg.LeaseTTL))
	if err != nil {
		// Another replica took it first, or it is gone: the attached
		// stream reads on. Anything else is the store's failure.
		if k := fault.KindOf(err); k != fault.Conflict && k != fault.NotFound && ctx.Err() == nil {
			s.log.WarnContext(ctx, "adopting a generation for an attached client", "generation", id, "tenant", tenant, "err", err)
		}
		return false
	}
	if rec.State == store.Paused {
		// Paused meanwhile: a resume's to take, not an adopter's. A
		// release that fails leaves the lease to lapse.
		if err := s.generations.Release(ctx, tenant, id, rec.Lease.Epoch, time.Now()); err != nil {
			s.log.WarnContext(ctx, "releasing a paused generation acquired for an attached client", "generation", id, "tenant", tenant, "err", err)
		}
		return false
	}
	s.startAdopted(rec)
	return true
}

// startAdopted continues a generation this replica has just acquired the
// lease of, in the background. One that cannot be continued (its
// checkpoint unreadable, its agent not stored whole) fails.
func (s *Service) startAdopted(rec store.Generation) {
	g, err := s.adoptedGeneration(rec)
	if g == nil {
		g = &generation{s: s, id: rec.ID, tenant: rec.Tenant, release: func() {}, total: &agentdv1.Usage{}, answered: &answerSet{}, ran: runStats{began: time.Now()}}
	}
	ctx, cancel := s.clientless(g)
	j := record.Adopted(s.journalOptions(g), rec)
	g.journal = j
	s.log.Info("generation adopted", "generation", g.id, "tenant", g.tenant, "epoch", rec.Lease.Epoch, "after_sequence", rec.LastSeq)
	switch {
	case err != nil:
		j.Settle(ctx, store.Failed, g.result(nil, err))
		g.logEnd(ctx, err)
		cancel(nil)
		return
	case g.resume != nil:
		// Its resume died within the paused turn: it is paused again, and
		// the claim on its paused checkpoint says what may have run.
		s.restorePending(ctx, g)
		j.Settle(ctx, store.Paused, nil)
		g.pausedNow = true
		g.logEnd(ctx, nil)
		cancel(nil)
		return
	}
	// What the dead replica waited for is asked again, if it still is.
	g.clearPaused()
	if !s.goRun(g, ctx, cancel) {
		j.Settle(ctx, store.Running, nil) // stopping: hand it on
	}
}

// restorePending puts back the pending requests of the pause that g,
// whose resume died, is paused again at: its dead resume may have
// replaced them.
func (s *Service) restorePending(ctx context.Context, g *generation) {
	sctx, cancel := context.WithTimeout(ctx, store.Timeout)
	defer cancel()
	_, cp, err := record.LoadPaused(sctx, s.checkpoints, g.tenant, g.id)
	if err != nil {
		return // nothing to resume, or nothing this agentd reads: nothing to list
	}
	g.resume.checkpoint = cp
	g.restorePaused()
}

// adoptedGeneration rebuilds a generation from its record: its checkpoint,
// and what its log holds after it. A generation whose resume died within
// its paused turn comes back with resume set (and nothing to run).
func (s *Service) adoptedGeneration(rec store.Generation) (*generation, error) {
	cp, err := record.DecodeRunning(rec.Checkpoint, rec.ID)
	if err != nil {
		return nil, err
	}
	ctx, cancel := context.WithTimeout(s.bg, store.Timeout)
	defer cancel()
	prefix, err := s.threadPrefix(ctx, rec)
	if err != nil {
		return nil, err
	}
	if err := record.Restore(ctx, s.generations, rec, cp, prefix); err != nil {
		return nil, err
	}
	if rec.Thread != "" {
		// The record's base is the authority: a queued generation was
		// given its own as it became active.
		cp.ThreadId, cp.ThreadBase = rec.Thread, rec.ThreadBase
	}
	g := s.continued(rec.Tenant, cp)
	g.detached = cp.GetDetached()
	g.agent = record.AgentOf(cp)
	if cp.GetResuming() {
		g.resume = &resumption{}
		return g, nil
	}
	agent, stale, err := record.OpenAgent(s.sealer, rec.Tenant, rec.ID, cp)
	if err != nil {
		return g, fault.Wrap(fault.KindOf(err), err, "this replica cannot continue the generation")
	}
	_, tenant, err := s.tenantNamed(rec.Tenant)
	if err != nil {
		return g, err
	}
	if g.plan, err = s.newPlan("", tenant, agent, g.messages, nil); err != nil {
		return g, err
	}
	if stale {
		// Sealed under a previous key (a rotation): its later checkpoints
		// hold it sealed under the current one.
		if g.agent, err = record.SealAgent(s.sealer, g.tenant, g.id, agent); err != nil {
			return g, err
		}
	}
	since, err := record.ReadSince(ctx, s.generations, rec, cp)
	if err != nil {
		return g, err
	}
	if record.FirstRun(rec) {
		// A start that waited for its thread: this is its first run.
		return g, nil
	}
	// The model turn after a turn boundary may have been asked already.
	g.repeatTurn = cp.GetTurn() == nil
	g.adopted = &adoption{turn: cp.GetTurn(), Since: since}
	return g, nil
}

// threadPrefix reads the thread items that rec's conversation starts
// with; none when it runs on no thread.
func (s *Service) threadPrefix(ctx context.Context, rec store.Generation) ([]*agentdv1.Message, error) {
	if rec.Thread == "" || rec.ThreadBase == 0 || s.threads == nil {
		return nil, nil
	}
	return record.ThreadMessages(ctx, s.threads, s.sealer, rec.Tenant, rec.Thread, rec.ThreadBase)
}

// continueAdopted goes on where an adopted generation's checkpoint left
// it: it withdraws the events of a model turn cut short, if any, then
// finishes the tool turn the generation was in, if any (adoptedTurn). A
// generation that was not adopted, or adopted at a turn boundary with
// nothing to withdraw, goes on at once. done says the generation ended,
// with err.
func (g *generation) continueAdopted(ctx context.Context) (done bool, _ error) {
	ad := g.adopted
	if ad == nil {
		return false, nil
	}
	if ad.WithdrawFrom > 0 {
		if err := g.emit(ctx, &agentdv1.GenerateResponse{Event: &agentdv1.GenerateResponse_TurnWithdrawn{TurnWithdrawn: &agentdv1.TurnWithdrawn{
			Turn:         int32(g.toolTurns + 1),
			FromSequence: ad.WithdrawFrom,
			Reason:       "the agentd replica running this model turn stopped before it ended; discard what it said: the turn is asked again",
		}}}); err != nil {
			return true, err
		}
	}
	if ad.turn == nil {
		return false, nil
	}
	r := g.newTurnRun(ctx, int(ad.turn.GetTurn()), ad.turn.GetCalls())
	results, err := r.finish(r.adoptedTurn(ad))
	if done, err := g.endTurn(ctx, r, results, err); done {
		return true, err
	}
	g.checkpoint(nil)
	return false, nil
}

// adoptedTurn finishes the tool turn an adopted generation was in: calls
// with a result keep it; an MCP call that had started gets
// adoptedUnknown, and is not run again; a function call that had started
// is asked of the client again; the others run now, or ask the client for
// their approval (which, with no client, pauses the generation).
func (r *turnRun) adoptedTurn(ad *adoption) error {
	for i, st := range ad.turn.GetStates() {
		if res := st.GetResult(); res != nil {
			r.results[i] = res
		}
	}
	for i, c := range r.calls {
		if r.results[i] != nil {
			continue
		}
		owner := r.g.owners[c.GetName()]
		var err error
		switch {
		case !ad.Started[c.GetId()]:
			err = r.dispatchCall(i)
		case owner != nil && owner.origin == agentdv1.ToolOrigin_TOOL_ORIGIN_FUNCTION:
			err = r.askFunction(i)
		default: // an MCP call, or a call to a tool no longer offered
			err = r.finishCall(i, &agentdv1.ToolResult{ToolCallId: c.GetId(), Name: c.GetName(), Output: adoptedUnknown, IsError: true}, &agentdv1.ToolCallFinished{
				CallId: c.GetId(), ToolName: c.GetName(), ServerName: owner.serverName(), Origin: originOf(owner),
				IsError: true, Output: adoptedUnknown, Turn: int32(r.turn),
			})
		}
		if err != nil {
			return err
		}
	}
	return r.awaitAnswers()
}

func originOf(o *toolOwner) agentdv1.ToolOrigin {
	if o == nil {
		return agentdv1.ToolOrigin_TOOL_ORIGIN_UNSPECIFIED
	}
	return o.origin
}
