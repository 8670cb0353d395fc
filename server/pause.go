package server

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"time"

	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/timestamppb"

	statev1 "github.com/agentd/agentd/gen/go/agentd/state/v1"
	agentdv1 "github.com/agentd/agentd/gen/go/agentd/v1"
	"github.com/agentd/agentd/internal/fault"
	"github.com/agentd/agentd/internal/quota"
	"github.com/agentd/agentd/internal/record"
	"github.com/agentd/agentd/internal/toolerror"
)

// unknownOutcome is the result of an approved call whose resume died
// while it may have been running: it is not run a second time.
var unknownOutcome = toolerror.JSON("agentd stopped while resuming this call, which may have run; it is not run again")

// resumption is what a resumed generation continues from.
type resumption struct {
	checkpoint *statev1.Checkpoint
	// claim holds the paused checkpoint for this resume: every later write
	// of it is fenced by the claim. Nil for an adopted generation whose
	// resume died.
	claim     *record.Claim
	decisions []*agentdv1.ApprovalDecision
	results   []*agentdv1.FunctionResult
	// interrupted holds the approval requests that an earlier resume,
	// since gone, had approved: they may have run.
	interrupted map[string]bool
	// authorizations are the resume's answers to the authorizations the
	// paused turn waits for (X-M2); interruptedAuth, that an earlier
	// resume, since gone, had brought answers too.
	authorizations  []*agentdv1.AuthorizationResponse
	interruptedAuth bool
	inputs          []*agentdv1.InputResponse // answers to a 2026-07-28 server's input requests (X-M4)
	started         bool                      // an approved call was started
	progressed      bool                      // the paused turn is done and the generation went on
}

// pause stores the generation with its paused turn, ends the stream with
// a paused event, and lets the bridge session close (R-A6).
func (g *generation) pause(ctx context.Context, turn *statev1.PausedTurn, why *errPause) error {
	store := g.s.checkpoints
	approvals, functions := pendingRequests(turn)
	authorizations := g.deferredRequests()
	inputs := pendingInputs(turn)
	waiting := len(approvals) + len(functions) + len(authorizations) + len(inputs)
	if store == nil {
		return fault.New(fault.FailedPrecondition,
			"the generation waits for %d answers (approval decisions or function results) and the client %s; this agentd has no state store, so it cannot pause the generation",
			waiting, why.why).WithInfo("ANSWERS_MISSING", nil)
	}
	now := time.Now()
	expires := now.Add(g.s.cfg.PauseTTL)
	cp := g.conversation(turn)
	cp.PausedAt, cp.ExpiresAt = timestamppb.New(now), timestamppb.New(expires)
	data, err := proto.Marshal(cp)
	if err != nil {
		return fault.Wrap(fault.Internal, err, "encoding the checkpoint")
	}
	if ctx.Err() != nil { // cancelled by the client meanwhile: nothing to resume
		return context.Cause(ctx)
	}
	sctx, cancel := record.Context(ctx)
	defer cancel()
	var fence int64
	if g.resume != nil {
		// A resumed generation that pauses again writes over its own claim
		// only: if another resume took it over, this one stops here. Its
		// record holds a place among the paused already.
		g.resume.claim.Stop()
		fence = g.resume.claim.Fence()
	}
	save := func() error { return store.Save(sctx, g.tenant, g.id, data, expires, fence) }
	if limit := g.plan.tenant.Limits.Paused; fence == 0 && limit.N > 0 {
		if err := g.saveWithin(sctx, limit, waiting, why, save); err != nil {
			return err
		}
	} else if err := save(); err != nil {
		return err
	}
	if g.resume != nil {
		g.resume.claim.Let()
	}
	g.pausedNow = true
	g.s.log.InfoContext(ctx, "generation paused", "generation", g.id, "tenant", g.tenant,
		"pending_approvals", len(approvals), "pending_functions", len(functions), "pending_authorizations", len(authorizations), "pending_inputs", len(inputs), "why", "the client "+why.why)
	return g.emitLast(ctx, &agentdv1.GenerateResponse{Event: &agentdv1.GenerateResponse_Paused{Paused: &agentdv1.GenerationPaused{
		GenerationId:          g.id,
		ApprovalRequests:      approvals,
		FunctionCalls:         functions,
		ExpiresAt:             timestamppb.New(expires),
		AuthorizationRequests: authorizations,
		InputRequests:         inputs,
	}}})
}

// saveWithin saves a newly paused generation unless its tenant has as
// many paused as max_paused_generations allows (X-I7): then the generation
// fails instead, ResourceExhausted, with the time until one of the
// tenant's paused generations expires as when to retry (a resume that
// completes may free a place sooner). Counting and saving are one step
// for this agentd.
func (g *generation) saveWithin(ctx context.Context, limit quota.Limit, waiting int, why *errPause, save func() error) error {
	g.s.pauseMu.Lock()
	defer g.s.pauseMu.Unlock()
	n, next, err := g.s.checkpoints.Count(ctx, g.tenant)
	if err != nil {
		return err
	}
	if n < limit.N {
		return save()
	}
	return quota.Exceeded(g.tenant, limit, max(time.Until(next), time.Second), fmt.Sprintf(
		"the generation waits for %d answers (approval decisions or function results) and the client %s, but it cannot pause: %s has %d paused generations, as many as %s allows; resume one, or let one expire",
		waiting, why.why, quota.Who(g.tenant), n, limit.Setting))
}

// settling stops renewing the claim of a resumed generation that is ending
// and reports whether it still holds one to settle (it may have paused
// again, or settled already).
func (g *generation) settling() bool {
	res := g.resume
	if res == nil || res.claim == nil || !res.claim.Held() {
		return false
	}
	res.claim.Stop()
	return true
}

// finished removes the checkpoint of a resumed generation that completed.
// A failure is only logged: the generation did complete, and its record,
// marked progressed, can never be resumed; it expires.
func (g *generation) finished(ctx context.Context) {
	if !g.settling() {
		return
	}
	if err := g.resume.claim.Remove(ctx); err != nil {
		g.s.log.WarnContext(ctx, "removing a resumed generation that completed", "generation", g.id, "err", err)
	}
}

// failed runs when a resumed generation fails. If it had gone past its
// paused turn, it is over: its checkpoint goes (replaying it would repeat
// the calls made since). If an approved call started, the claim stays: a
// later resume, once the claim is stale, reports those calls' outcome as
// unknown rather than run them twice. Otherwise nothing ran, and the
// checkpoint goes back as it was, so the client may resume again. Every
// write is fenced by the claim: a resume that was taken over changes
// nothing.
func (g *generation) failed(ctx context.Context) {
	if !g.settling() {
		return
	}
	res := g.resume
	var err error
	switch {
	case res.progressed:
		err = res.claim.Remove(ctx)
	case res.started:
		return
	default:
		err = res.claim.GiveBack(ctx)
	}
	if err != nil {
		g.s.log.WarnContext(ctx, "releasing a paused generation after a failed resume", "generation", g.id, "err", err)
	}
}

// keepClaim renews the resume's claim while the generation runs, so that
// no other resume takes over a live one; if another did (this one was
// stalled past generation.resume_stale_after), the generation stops.
func (g *generation) keepClaim(ctx context.Context) {
	every := max(g.s.cfg.ResumeStaleAfter/3, 10*time.Millisecond)
	g.resume.claim.Keep(ctx, every, g.link.cancel, func(err error) {
		g.s.log.WarnContext(ctx, "renewing a resume's claim", "generation", g.id, "err", err)
	})
}

// progress records that the resumed generation finished its paused turn
// and goes on: from now on its checkpoint is never resumed again.
func (g *generation) progress(ctx context.Context) error {
	if err := g.resume.claim.Progress(ctx); err != nil {
		return err // nothing ran since the paused turn: failed may give it back
	}
	g.resume.progressed = true
	return nil
}

// resumeGeneration validates a resume and claims the paused generation for
// it: nothing runs before every check passed (R-A7), and of two resumes of
// one pause, only one gets it (R-A8). It loads the paused generation of
// the caller's tenant, checks that it may be resumed and that the resume
// answers it, admits it within the tenant's concurrency limit, then claims
// it.
func (s *Service) resumeGeneration(ctx context.Context, r *agentdv1.ResumeGeneration) (*generation, error) {
	if err := checkResumeRequest(r); err != nil {
		return nil, err
	}
	name, tenant, err := s.tenant(ctx)
	if err != nil {
		return nil, err
	}
	sctx, cancel := context.WithTimeout(ctx, record.Timeout)
	defer cancel()
	rec, cp, err := record.LoadPaused(sctx, s.checkpoints, name, r.GetGenerationId())
	if err != nil {
		return nil, err
	}
	interrupted, err := record.Interrupted(rec, cp, s.cfg.ResumeStaleAfter)
	if err != nil {
		return nil, err
	}
	p, err := s.checkResume(r, tenant, cp)
	if err != nil {
		return nil, err
	}
	// A resumed generation runs: it needs a slot (but no token of the
	// rate), taken before the claim so that a refused resume leaves the
	// pause as it was.
	release, err := s.limiter.Resume(name, tenant.Limits)
	if err != nil {
		return nil, err
	}
	claim, err := record.ClaimPaused(sctx, s.checkpoints, name, rec, cp, &statev1.Claim{
		ApprovalDecisions: r.GetApprovalDecisions(), FunctionResults: r.GetFunctionResults(),
		Authorized:     answerIDs(r.GetAuthorizationResponses()),
		AnsweredInputs: answerIDs(r.GetInputResponses()),
		MayHaveRun:     slices.Sorted(maps.Keys(interrupted)),
	}, s.cfg.ResumeStaleAfter)
	if err != nil {
		release()
		return nil, err
	}
	g := s.continued(name, cp)
	g.release, g.plan = release, p
	g.resume = &resumption{
		checkpoint:  cp,
		claim:       claim,
		decisions:   r.GetApprovalDecisions(),
		results:     r.GetFunctionResults(),
		interrupted: interrupted,

		authorizations: r.GetAuthorizationResponses(),
		inputs:         r.GetInputResponses(),
		// An earlier resume, since gone, may have spent the codes.
		interruptedAuth: len(cp.GetClaim().GetAuthorized()) > 0,
	}
	return g, nil
}

// continued is tenant's generation as checkpoint cp left it: its
// conversation, usage, tool turns and answers, with nothing to run yet.
func (s *Service) continued(tenant string, cp *statev1.Checkpoint) *generation {
	g := &generation{
		s: s, id: cp.GetGenerationId(), tenant: tenant, release: func() {},
		owners:    make(map[string]*toolOwner),
		answered:  &answerSet{},
		messages:  cp.GetMessages(),
		added:     cp.GetAdded(),
		total:     cp.GetUsage(),
		toolTurns: int(cp.GetToolTurns()),
		ran:       runStats{began: time.Now()},
		origin:    record.Origin(cp),
		endUser:   cp.GetEndUser(),
	}
	if g.total == nil {
		g.total = &agentdv1.Usage{}
	}
	for _, id := range cp.GetAnswered() {
		g.answered.add(id)
	}
	return g
}

// checkResumeRequest requires what a resume must name before anything is
// loaded: the generation, and the agent to run it with.
func checkResumeRequest(r *agentdv1.ResumeGeneration) error {
	var v violations
	if r.GetGenerationId() == "" {
		v.add("resume.generation_id", "is required")
	}
	if r.GetAgent() == nil {
		v.add("resume.agent", "is required: the agent's declarations, with their credentials, as when it started")
	}
	if len(v) > 0 {
		return fault.InvalidRequest(v)
	}
	return nil
}

// checkResume validates the resume against its checkpoint: the agent, on
// the provider and model it paused on, and exactly one answer for every
// request the paused turn waits for. It returns the plan to run.
func (s *Service) checkResume(r *agentdv1.ResumeGeneration, tenant *Tenant, cp *statev1.Checkpoint) (*plan, error) {
	var timeout *durationValue
	if at := r.GetAnswerTimeout(); at != nil {
		timeout = &durationValue{field: "answer_timeout", d: at.AsDuration(), valid: at.CheckValid() == nil}
	}
	p, err := s.newPlan("resume", tenant, r.GetAgent(), cp.GetMessages(), timeout)
	if err != nil {
		return nil, err
	}
	var v violations
	if agent := r.GetAgent(); agent.GetProvider() != cp.GetProvider() || cp.GetModel() != "" && agent.GetModel() != cp.GetModel() {
		v.add("resume.agent", "%s", fmt.Sprintf("the generation paused on %s (%s); it cannot resume on %s (%s)",
			cp.GetProvider(), cp.GetModel(), agent.GetProvider(), agent.GetModel()))
	}
	checkAnswers(&v, cp.GetTurn(), r)
	checkAuthorizationAnswers(&v, cp.GetTurn(), r)
	checkInputAnswers(&v, cp.GetTurn(), r)
	if len(v) > 0 {
		return nil, fault.InvalidRequest(v)
	}
	return p, nil
}

// checkAnswers requires exactly one answer for every pending request of
// the paused turn, and no other (R-A7).
func checkAnswers(v *violations, turn *statev1.PausedTurn, r *agentdv1.ResumeGeneration) {
	approvals, functions := pendingRequests(turn)
	digests := make(map[string]string, len(approvals))
	for _, a := range approvals {
		digests[a.GetId()] = a.GetDigest()
	}
	pendingFn := make(map[string]bool, len(functions))
	for _, f := range functions {
		pendingFn[f.GetCallId()] = true
	}
	seen := make(map[string]bool)
	for i, d := range r.GetApprovalDecisions() {
		field := fmt.Sprintf("resume.approval_decisions[%d]", i)
		digest, ok := digests[d.GetRequestId()]
		switch {
		case !ok:
			v.add(field+".request_id", "%s", fmt.Sprintf("no approval request %q is waiting", d.GetRequestId()))
		case seen[d.GetRequestId()]:
			v.add(field+".request_id", "%s", fmt.Sprintf("%q is answered twice", d.GetRequestId()))
		case d.GetDigest() != "" && d.GetDigest() != digest:
			v.add(field+".digest", "does not match the approval request")
		}
		seen[d.GetRequestId()] = true
	}
	for i, fr := range r.GetFunctionResults() {
		field := fmt.Sprintf("resume.function_results[%d]", i)
		switch {
		case !pendingFn[fr.GetCallId()]:
			v.add(field+".call_id", "%s", fmt.Sprintf("no function call %q is waiting", fr.GetCallId()))
		case seen[fr.GetCallId()]:
			v.add(field+".call_id", "%s", fmt.Sprintf("%q is answered twice", fr.GetCallId()))
		}
		seen[fr.GetCallId()] = true
	}
	var missing []string
	for _, a := range approvals {
		if !seen[a.GetId()] {
			missing = append(missing, a.GetId())
		}
	}
	for _, f := range functions {
		if !seen[f.GetCallId()] {
			missing = append(missing, f.GetCallId())
		}
	}
	if len(missing) > 0 {
		v.add("resume", "%s", fmt.Sprintf("missing answers for %s", sentence(missing)))
	}
}

// resumeTurn finishes the paused turn with the resume's answers: declined
// calls get {"error":"declined by user"}, approved ones run once, function
// results are taken; then every result of the turn goes to the model
// together, in call order (R-A8, R-A9).
func (g *generation) resumeTurn(ctx context.Context) (*turnRun, []*agentdv1.ToolResult, error) {
	res := g.resume
	t := res.checkpoint.GetTurn()
	r := g.newTurnRun(ctx, int(t.GetTurn()), t.GetCalls())
	var authorized []int // calls that waited for authorizations or input
	answers := make(map[string]*agentdv1.InputResponse, len(res.inputs))
	for _, a := range res.inputs {
		answers[a.GetRequestId()] = a
	}
	for i, st := range t.GetStates() {
		switch s := st.GetState().(type) {
		case *statev1.CallState_Authorization:
			authorized = append(authorized, i)
		case *statev1.CallState_Input:
			authorized = append(authorized, i)
			if r.retries == nil {
				r.retries = make(map[int]*inputRetry)
			}
			r.retries[i] = retryFor(s.Input, answers)
		case *statev1.CallState_Result:
			r.results[i] = s.Result
		case *statev1.CallState_Approval:
			r.approvals[s.Approval.GetId()] = i
			r.requests[s.Approval.GetId()] = s.Approval
		case *statev1.CallState_FunctionCall:
			r.functions[s.FunctionCall.GetCallId()] = time.Now()
		}
	}
	err := func() error {
		for _, d := range res.decisions {
			if res.interrupted[d.GetRequestId()] {
				i := r.approvals[d.GetRequestId()]
				delete(r.approvals, d.GetRequestId())
				delete(r.requests, d.GetRequestId())
				g.answered.add(d.GetRequestId())
				c := r.calls[i]
				r.setResult(i, &agentdv1.ToolResult{ToolCallId: c.GetId(), Name: c.GetName(), Output: unknownOutcome, IsError: true})
				continue
			}
			if err := r.decide(d); err != nil {
				return err
			}
		}
		for _, fr := range res.results {
			if err := r.functionResult(fr); err != nil {
				return err
			}
		}
		// The calls refused for want of the authorizations the resume
		// brought (X-M2), or that asked for the input it brought (X-M4),
		// run now, once.
		for _, i := range authorized {
			c := r.calls[i]
			if res.interrupted[c.GetId()] {
				r.setResult(i, &agentdv1.ToolResult{ToolCallId: c.GetId(), Name: c.GetName(), Output: unknownOutcome, IsError: true})
				continue
			}
			r.started = true
			if err := r.dispatchAuthorized(i); err != nil {
				return err
			}
		}
		// An approved function call now waits for its result, inline.
		return r.awaitAnswers()
	}()
	res.started = r.started
	results, err := r.finish(err)
	return r, results, r.deferralPause(err)
}

// dispatchAuthorized runs call i, which waited for an authorization: an
// MCP call of a tool the agent still offers, as when it first ran.
func (r *turnRun) dispatchAuthorized(i int) error {
	owner := r.g.owners[r.calls[i].GetName()]
	if owner == nil {
		return r.unknownTool(i)
	}
	return r.start(i, owner)
}
