package server

import (
	statev1 "github.com/agentd/agentd/gen/go/agentd/state/v1"
	agentdv1 "github.com/agentd/agentd/gen/go/agentd/v1"

	"context"
	"errors"
	"fmt"

	"github.com/agentd/agentd/internal/bridgeclient"
	"github.com/agentd/agentd/internal/fault"
)

// run drives the generation to its end: completed, failed, or paused
// (stored, with a paused event). Every bridge session it opened is closed
// once it returns, whatever happened: on a goroutine of the Service's, so
// that the stream ends without waiting for the session's processes to
// stop (sessionLife).
func (g *generation) run(ctx context.Context) (err error) {
	g.s.meters.runStarted(ctx, g.tenant)
	ctx, span := g.s.tracer.Start(ctx, "invoke_agent", g.invokeSpanOptions()...)
	if sc := span.SpanContext(); sc.IsSampled() && g.resume == nil && g.adopted == nil {
		g.origin = sc // a span that is not recorded is no link's target
	}
	defer func() {
		_, outcome := g.outcome(ctx, err)
		g.s.meters.runEnded(ctx, g.tenant, outcome)
		endInvokeSpan(span, g, outcome, err)
	}()
	if g.s.generations != nil && g.journal == nil {
		j, err := g.s.openJournal(ctx, g)
		if err != nil {
			return err
		}
		g.journal = j
	}
	if g.link.out.stream != nil {
		g.link.out.journal = g.journal
	}
	if g.resume != nil {
		g.keepClaim(ctx)
		defer g.resume.claim.Stop()
	}
	if g.resume != nil && len(g.resume.authorizations) > 0 {
		// The person's authorizations first: their tokens go with the
		// servers' first requests.
		if err := g.completeAuthorizations(ctx); err != nil {
			return err
		}
	}
	var serverTools []serverList
	if bridged := g.plan.bridged(); len(bridged) > 0 {
		// The session is closed once the generation is over, after its
		// stream has ended (sessionLife).
		life := g.newSessionLife(ctx)
		sess, err := g.s.bridge.OpenSession(life.ctx, g.openRequest(ctx, bridged), life)
		defer func() { life.end(sess) }()
		if err != nil && g.deferredWhy() != "" {
			return g.pauseBeforeTools(ctx)
		}
		if err != nil {
			fields := make([]string, len(bridged))
			for i, sp := range bridged {
				fields[i] = sp.field
			}
			return bridgeclient.RelocateViolations(err, fields)
		}
		g.session = sess
		if serverTools, err = g.listTools(ctx, sess); err != nil {
			if g.deferredWhy() != "" {
				return g.pauseBeforeTools(ctx)
			}
			return err
		}
	}
	if err := g.offerTools(serverTools); err != nil {
		return err
	}
	if err := g.emit(ctx, &agentdv1.GenerateResponse{Event: &agentdv1.GenerateResponse_Started{Started: &agentdv1.GenerationStarted{
		GenerationId: g.id,
		Servers:      g.plan.placements(agentdv1.Placement_PLACEMENT_UNSPECIFIED),
		Tools:        g.infos,
		Resumed:      g.resume != nil,
		Adopted:      g.adopted != nil,
	}}}); err != nil {
		return err
	}
	if g.resume != nil {
		// The paused turn first: its answers arrived with the resume. A
		// generation paused before its first model turn has none.
		if len(g.resume.checkpoint.GetTurn().GetCalls()) > 0 {
			r, results, err := g.resumeTurn(ctx)
			if done, err := g.endTurn(ctx, r, results, err); done {
				return err
			}
		}
		if err := g.progress(ctx); err != nil {
			return err
		}
		// Past its paused turn, its pause can no longer be resumed: its
		// record must say so (not resuming) before it goes on, or a
		// replica adopting it would pause it again for good.
		g.checkpoint(nil)
		if g.journal != nil {
			if err := g.journal.Await(ctx); err != nil {
				return err
			}
		}
	}
	if g.adopted != nil {
		// A dead replica's generation: from its last checkpoint.
		if done, err := g.continueAdopted(ctx); done {
			return err
		}
		if g.adopted.turn != nil {
			g.checkpoint(nil)
		}
	}
	for turn := g.toolTurns + 1; ; turn++ { // model turns continue across a pause
		r, err := g.modelTurn(ctx, turn)
		if err != nil {
			return err
		}
		if r.paused && len(r.calls) == 0 {
			// The provider ran tools of its own and paused; sending the
			// conversation back lets it continue.
			if err := g.spendToolTurn(); err != nil {
				return err
			}
			g.checkpoint(nil)
			continue
		}
		if len(r.calls) == 0 {
			g.final = r.message
			g.finished(ctx)
			return g.emitLast(ctx, &agentdv1.GenerateResponse{Event: &agentdv1.GenerateResponse_Completed{Completed: &agentdv1.GenerationCompleted{
				GenerationId: g.id,
				Message:      r.message,
				Messages:     g.added,
				Usage:        g.total,
				StopReason:   r.stop,
				ToolTurns:    int32(g.toolTurns),
			}}})
		}
		if err := g.spendToolTurn(); err != nil {
			return err
		}
		// The model's turn is done: its calls are checkpointed before any
		// runs, and each one's result as it comes (finishCall).
		g.checkpoint(&statev1.PausedTurn{Turn: int32(g.toolTurns), Calls: r.calls, States: noStates(len(r.calls))})
		tr, results, err := g.runTools(ctx, g.toolTurns, r.calls)
		if done, err := g.endTurn(ctx, tr, results, err); done {
			return err
		}
		g.checkpoint(nil) // the turn boundary: a model turn comes next
	}
}

// pauseBeforeTools pauses a generation whose servers' tools could not be
// listed for want of authorizations deferred to a resume (X-M2): it has
// no turn to finish, and continues, once they are answered, by listing
// them again.
func (g *generation) pauseBeforeTools(ctx context.Context) error {
	turn := &statev1.PausedTurn{Turn: int32(g.toolTurns), Authorizations: g.pendingAuthorizations()}
	return g.pause(ctx, turn, &errPause{why: g.deferredWhy()})
}

// noStates is the states of n calls none of which has a result yet.
func noStates(n int) []*statev1.CallState {
	states := make([]*statev1.CallState, n)
	for i := range states {
		states[i] = &statev1.CallState{}
	}
	return states
}

// spendToolTurn counts a tool turn against max_tool_turns.
func (g *generation) spendToolTurn() error {
	if g.toolTurns >= g.plan.maxToolTurns {
		return fault.New(fault.Exhausted,
			"the generation used its %d tool turns (max_tool_turns) and the model still asked for tools; raise max_tool_turns if it needs more",
			g.plan.maxToolTurns).WithInfo("MAX_TOOL_TURNS", map[string]string{"max_tool_turns": fmt.Sprint(g.plan.maxToolTurns)})
	}
	g.toolTurns++
	return nil
}

// endTurn gives a tool turn's results to the conversation, or ends the
// generation: paused (stored) when the turn needs answers the client is
// not giving, failed otherwise. done says the generation ended.
func (g *generation) endTurn(ctx context.Context, r *turnRun, results []*agentdv1.ToolResult, err error) (done bool, _ error) {
	var pause *errPause
	switch {
	case errors.As(err, &pause):
		return true, g.pause(ctx, r.state(), pause)
	case err != nil:
		return true, err
	}
	parts := make([]*agentdv1.Part, len(results))
	for i, res := range results {
		parts[i] = &agentdv1.Part{Kind: &agentdv1.Part_ToolResult{ToolResult: res}}
	}
	g.appendMessage(&agentdv1.Message{Role: agentdv1.Role_ROLE_TOOL, Parts: parts})
	return false, nil
}

// clientless gives a generation that runs without a client (detached, or
// adopted) its context, owned by the Service, and a link to nobody.
func (s *Service) clientless(g *generation) (context.Context, context.CancelCauseFunc) {
	ctx, cancel := context.WithCancelCause(s.bg)
	g.link = newClientlessLink(cancel)
	return ctx, cancel
}

// goRun runs a clientless generation in the background, owned by the
// Service; false if the Service is closing (nothing ran).
func (s *Service) goRun(g *generation, ctx context.Context, cancel context.CancelCauseFunc) bool {
	return s.goBackground(func() {
		s.bgRuns.Add(1)
		defer s.bgRuns.Add(-1)
		defer cancel(nil)
		defer g.release()
		err := g.run(ctx)
		if err != nil {
			g.failed(ctx)
		}
		g.settleJournal(ctx, err)
		g.link.out.close()
		g.logEnd(ctx, err)
	})
}
