package server

import (
	statev1 "github.com/agentd/agentd/gen/go/agentd/state/v1"
	agentdv1 "github.com/agentd/agentd/gen/go/agentd/v1"

	"context"
	"fmt"
	"maps"
	"net/url"
	"slices"
	"time"

	"github.com/agentd/agentd/internal/fault"
	"github.com/agentd/agentd/internal/record"
	"github.com/agentd/agentd/internal/toolerror"
)

// unknownOutcome is the result of an approved call whose resume died
// while it may have been running: it is not run a second time.
var unknownOutcome = toolerror.JSON("agentd stopped while resuming this call, which may have run; it is not run again")

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

// checkAuthorizationAnswers requires exactly one answer, a URL, for every
// authorization the paused turn waits for (R-A7).
func checkAuthorizationAnswers(v *violations, turn *statev1.PausedTurn, r *agentdv1.ResumeGeneration) {
	var pending []string
	for _, pa := range turn.GetAuthorizations() {
		pending = append(pending, pa.GetRequestId())
	}
	matchAnswers(v, "authorization_responses", "authorization", pending, r.GetAuthorizationResponses(), func(field string, a *agentdv1.AuthorizationResponse) {
		if u, err := url.Parse(a.GetRedirectUrl()); err != nil || !u.IsAbs() {
			v.add(field+".redirect_url", "must be the absolute URL the authorization server redirected the person to")
		}
	})
}

// checkInputAnswers requires exactly one answer for every input request
// the paused turn waits for (R-A7), with an action, and an accepted form
// that its schema takes.
func checkInputAnswers(v *violations, turn *statev1.PausedTurn, r *agentdv1.ResumeGeneration) {
	requests := make(map[string]*agentdv1.InputRequest)
	var pending []string
	for _, req := range pendingInputs(turn) {
		requests[req.GetId()] = req
		pending = append(pending, req.GetId())
	}
	matchAnswers(v, "input_responses", "input", pending, r.GetInputResponses(), func(field string, a *agentdv1.InputResponse) {
		if a.GetAction() == agentdv1.InputAction_INPUT_ACTION_UNSPECIFIED {
			v.add(field+".action", "is required: ACCEPT, DECLINE or CANCEL")
		}
		if req := requests[a.GetRequestId()]; req != nil && a.GetAction() == agentdv1.InputAction_INPUT_ACTION_ACCEPT {
			if _, err := formContent(req.GetRequestedSchema(), a.GetContent()); err != nil {
				v.add(field+".content", "%s", err.Error())
			}
		}
	})
}

// requestAnswer is an answer that names the request it answers.
type requestAnswer interface{ GetRequestId() string }

// matchAnswers requires exactly one of answers (the resume's list of that
// name) for each pending request id, and none for a request that is not
// waiting (R-A7); check sees every answer, with its field path, for what
// else it must hold.
func matchAnswers[T requestAnswer](v *violations, list, what string, pending []string, answers []T, check func(field string, a T)) {
	waiting := make(map[string]bool, len(pending))
	for _, id := range pending {
		waiting[id] = true
	}
	seen := make(map[string]bool)
	for i, a := range answers {
		field := fmt.Sprintf("resume.%s[%d]", list, i)
		switch id := a.GetRequestId(); {
		case !waiting[id]:
			v.add(field+".request_id", "%s", fmt.Sprintf("no %s request %q is waiting", what, id))
		case seen[id]:
			v.add(field+".request_id", "%s", fmt.Sprintf("%q is answered twice", id))
		}
		seen[a.GetRequestId()] = true
		check(field, a)
	}
	var missing []string
	for _, id := range pending {
		if !seen[id] {
			missing = append(missing, id)
		}
	}
	if len(missing) > 0 {
		v.add("resume", "%s", fmt.Sprintf("missing answers for %s", sentence(missing)))
	}
}

// answerIDs are the request ids of answers, for a claim.
func answerIDs[T requestAnswer](answers []T) []string {
	ids := make([]string, len(answers))
	for i, a := range answers {
		ids[i] = a.GetRequestId()
	}
	return ids
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
