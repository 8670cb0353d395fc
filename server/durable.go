package server

import (
	"context"
	"errors"

	agentdv1 "github.com/agentd/agentd/gen/go/agentd/v1"
	"github.com/agentd/agentd/internal/fault"
	"github.com/agentd/agentd/internal/record"
	"github.com/agentd/agentd/internal/store"
)

// openJournal records a new generation, or takes the record of a resumed
// one, and starts its journal (record.Journal). A store that cannot
// record it fails it.
func (s *Service) openJournal(ctx context.Context, g *generation) (*record.Journal, error) {
	agent, err := record.SealAgent(s.sealer, g.tenant, g.id, g.plan.agent)
	if err != nil {
		return nil, err
	}
	g.agent = agent
	if g.resume == nil {
		return record.Create(ctx, s.journalOptions(g), g.snapshot(nil))
	}
	return record.Resume(ctx, s.journalOptions(g), g.snapshot(nil))
}

// journalOptions are the options of g's journal: its lease is this
// replica's, and losing it stops g.
func (s *Service) journalOptions(g *generation) record.Options {
	return record.Options{
		Store: s.generations, Tenant: g.tenant, ID: g.id, Owner: s.replica, TTL: s.cfg.LeaseTTL,
		Stop: func(err error) { g.link.cancel(err) },
		Warn: func(msg string, err error) { s.log.Warn(msg, "generation", g.id, "err", err) },
		Live: &s.live,
	}
}

// result is what the generation's record keeps of its end.
func (g *generation) result(final *agentdv1.Message, err error) []byte {
	return record.EncodeResult(final, g.total, err)
}

// emitLast sends the generation's last event, paused or completed, once
// its record says so (X-G3): a client that has seen it finds the record
// paused (a resume can take it at once) or completed.
func (g *generation) emitLast(ctx context.Context, ev *agentdv1.GenerateResponse) error {
	if g.journal == nil {
		return g.link.out.emit(ctx, ev)
	}
	g.emitMu.Lock()
	defer g.emitMu.Unlock()
	if ctx.Err() != nil {
		return context.Cause(ctx)
	}
	g.journal.Record(ev)
	if ev.GetPaused() != nil {
		g.journal.Settle(ctx, store.Paused, nil)
	} else {
		g.journal.Settle(ctx, store.Completed, g.result(g.final, nil))
	}
	// The generation has ended as its record says, whether or not its
	// client still takes the event (it may have gone, or agentd be
	// stopping, meanwhile): its run ends without an error.
	_ = g.link.out.emit(ctx, ev)
	return nil
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
}

// outcome is how this replica's run of the generation ended, after run
// returned err: the state its record settles in, and the outcome of
// agentd.generations.ended (X-O1).
func (g *generation) outcome(ctx context.Context, err error) (store.State, string) {
	switch {
	case err == nil && g.pausedNow:
		return store.Paused, outcomePaused
	case err == nil:
		return store.Completed, outcomeCompleted
	case fault.KindOf(err) == fault.Conflict && g.journal != nil && g.journal.Lost():
		// Its lease went to another replica, which runs it now.
		return store.Running, outcomeReleased
	case g.s.stopping.Load() && (errors.Is(err, errStopping) || errors.Is(context.Cause(ctx), errStopping) || g.link.gone() != nil):
		// agentd stops under it: another replica adopts it.
		return store.Running, outcomeReleased
	case g.resume != nil && !g.resume.progressed:
		// A resume that failed within its paused turn leaves the pause to
		// resume again (failed): the record stays paused too.
		return store.Paused, outcomePaused
	case errors.Is(err, errClientCancelled) || g.link.gone() != nil || fault.KindOf(err) == fault.Canceled:
		return store.Cancelled, outcomeCancelled
	default:
		return store.Failed, outcomeFailed
	}
}
