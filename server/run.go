package server

import (
	"go.opentelemetry.io/otel/trace"

	statev1 "github.com/agentd/agentd/gen/go/agentd/state/v1"
	agentdv1 "github.com/agentd/agentd/gen/go/agentd/v1"

	"context"

	"github.com/agentd/agentd/internal/bridgeclient"
)

// run drives the generation to its end: completed, failed, or paused
// (stored, with a paused event), from its start, its resume or its
// adoption. Every bridge session it opened is closed once it returns,
// whatever happened: on a goroutine of the Service's, so that the stream
// ends without waiting for the session's processes to stop (sessionLife).
func (g *generation) run(ctx context.Context) (err error) {
	ctx, span := g.startRun(ctx)
	var life *sessionLife
	defer func() { g.endRun(ctx, span, life, err) }()
	if g.resume != nil {
		defer g.resume.claim.Stop()
	}
	if err := g.prepare(ctx); err != nil {
		return err
	}
	g.startDeciding()
	defer g.stopDeciding()
	tools, life, done, err := g.connect(ctx)
	defer life.end()
	if done {
		return err
	}
	if err := g.begin(ctx, tools); err != nil {
		return err
	}
	if done, err := g.continueResume(ctx); done {
		return err
	}
	if done, err := g.continueAdopted(ctx); done {
		return err
	}
	for turn := g.toolTurns + 1; ; turn++ { // model turns continue across a pause
		if err := g.safePoint(); err != nil {
			return err
		}
		if done, err := g.checkLimits(ctx, modelCallLimits, nil); done {
			return err
		}
		r, done, err := g.budgetedTurn(ctx, turn)
		if done {
			return err
		}
		if done, err := g.afterModelTurn(ctx, r); done {
			return err
		}
	}
}

// startRun counts the run and starts its invoke_agent span. A start's
// span is the origin its later runs link to.
func (g *generation) startRun(ctx context.Context) (context.Context, trace.Span) {
	g.s.meters.runStarted(ctx, g.tenant)
	ctx, span := g.s.tracer.Start(ctx, "invoke_agent", g.invokeSpanOptions()...)
	if sc := span.SpanContext(); sc.IsSampled() && g.resume == nil && g.adopted == nil {
		g.origin = sc // a span that is not recorded is no link's target
	}
	return ctx, span
}

// endRun counts how the run ended, after run returned err, and records
// it on the run's span, which ends once life's session has closed: the
// span covers the whole run, its session's close included, although that
// close goes on after the client has the run's last event.
func (g *generation) endRun(ctx context.Context, span trace.Span, life *sessionLife, err error) {
	if g.pausedNow && err == nil {
		g.resumeAfterPause()
	}
	_, outcome := g.outcome(ctx, err)
	g.s.meters.runEnded(ctx, g.tenant, outcome)
	describeRunEnd(span, g, outcome, err)
	life.close(func() { span.End() })
}

// prepare opens the generation's record, keeps its resume's claim, and
// has the resume's authorizations exchanged, before anything connects:
// their tokens go with the servers' first requests.
func (g *generation) prepare(ctx context.Context) error {
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
	if g.resume == nil {
		return nil
	}
	g.keepClaim(ctx)
	if len(g.resume.authorizations) > 0 {
		return g.completeAuthorizations(ctx)
	}
	return nil
}

// connect opens the bridge session of the generation's bridged servers,
// if it has any, and lists their tools. life is the session's, which the
// run ends and closes once it is over; nil without bridged servers. done
// says the run ends here, with err: the session could not open or list,
// or, when a server waits for a person's authorization that was deferred
// to a resume, the generation paused (err nil) before its first model
// turn.
func (g *generation) connect(ctx context.Context) (tools []serverList, life *sessionLife, done bool, err error) {
	bridged := g.plan.bridged()
	if len(bridged) == 0 {
		return nil, nil, false, nil
	}
	life = g.newSessionLife(ctx)
	sess, err := g.s.bridge.OpenSession(life.ctx, g.openRequest(ctx, bridged), life)
	life.sess = sess
	if err == nil {
		g.session = sess
		if tools, err = g.listTools(ctx, sess); err == nil {
			return tools, life, false, nil
		}
	} else if g.deferredWhy() == "" {
		fields := make([]string, len(bridged))
		for i, sp := range bridged {
			fields[i] = sp.field
		}
		return nil, life, true, bridgeclient.RelocateViolations(err, fields)
	}
	if g.deferredWhy() != "" {
		return nil, life, true, g.pauseBeforeTools(ctx)
	}
	return nil, life, true, err
}

// begin offers the model its tools and tells the client the generation
// has started: its id, where each server runs, and the tools; then what
// was left out (a tool whose schema is not one).
func (g *generation) begin(ctx context.Context, tools []serverList) error {
	if err := g.offerTools(tools); err != nil {
		return err
	}
	if err := g.emit(ctx, &agentdv1.GenerateResponse{Event: &agentdv1.GenerateResponse_Started{Started: &agentdv1.GenerationStarted{
		GenerationId: g.id,
		Servers:      g.plan.placements(agentdv1.Placement_PLACEMENT_UNSPECIFIED),
		Tools:        g.infos,
		Resumed:      g.resume != nil,
		Adopted:      g.adopted != nil,
		ThreadId:     g.threadID(),
		TraceId:      traceID(ctx),
	}}}); err != nil {
		return err
	}
	for _, w := range g.omitted {
		if err := g.emit(ctx, &agentdv1.GenerateResponse{Event: &agentdv1.GenerateResponse_Warning{Warning: w}}); err != nil {
			return err
		}
	}
	return nil
}

// afterModelTurn goes on from a model turn's reply: the generation completes
// when the model called no tool; otherwise the turn's calls run (a tool
// turn), or, when the provider paused its own turn, the conversation goes
// back to it. done says the generation ended, with err.
func (g *generation) afterModelTurn(ctx context.Context, r *reply) (done bool, err error) {
	g.lastStop = r.stop
	if handled, done, err := g.takeOutput(ctx, r); handled {
		return done, err
	}
	if len(r.calls) == 0 && !r.paused {
		return true, g.complete(ctx, r)
	}
	return g.toolTurn(ctx, r)
}

// toolTurn spends a tool turn on r's calls, once the generation's limits
// allow them, and runs them; a turn the provider paused, without calls,
// spends one too and goes back to the provider. done says the
// generation ended, with err.
func (g *generation) toolTurn(ctx context.Context, r *reply) (done bool, err error) {
	if done, err := g.checkLimits(ctx, toolTurnLimits, r); done {
		return true, err
	}
	g.toolTurns++
	if len(r.calls) == 0 {
		// The provider ran tools of its own and paused; sending the
		// conversation back lets it continue.
		g.checkpoint(nil)
		return false, nil
	}
	if err := g.safePoint(); err != nil {
		return true, err // its calls do not run: the thread keeps none of them
	}
	g.lim.toolCalls += len(r.calls)
	// The model's turn is done: its calls are checkpointed before any
	// runs, and each one's result as it comes (finishCall).
	g.checkpoint(&statev1.PausedTurn{Turn: int32(g.toolTurns), Calls: r.calls, States: noStates(len(r.calls))})
	tr, results, err := g.runTools(ctx, g.toolTurns, r.calls)
	if done, err := g.endTurn(ctx, tr, results, err); done {
		return true, err
	}
	g.checkpoint(nil) // the turn boundary: a model turn comes next
	return false, nil
}

// complete ends the generation with the model's final answer, r, or its
// last turn at a limit (lim.reached).
func (g *generation) complete(ctx context.Context, r *reply) error {
	g.final = r.message
	g.finished(ctx)
	// The final answer joins the record's conversation, whose items the
	// completed event then names rather than carries; they are written
	// with that event, never before it.
	g.finalCheckpoint()
	return g.emitLast(ctx, &agentdv1.GenerateResponse{Event: &agentdv1.GenerateResponse_Completed{Completed: &agentdv1.GenerationCompleted{
		GenerationId: g.id,
		Message:      r.message,
		Messages:     g.added,
		Usage:        g.total,
		StopReason:   r.stop,
		ToolTurns:    int32(g.toolTurns),
		Limit:        g.lim.reached,
		ToolCalls:    int32(g.lim.toolCalls),
		Structured:   g.structured,
	}}})
}

// pauseBeforeTools pauses a generation whose servers' tools could not be
// listed for want of authorizations deferred to a resume: it has
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
