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

	"google.golang.org/protobuf/proto"

	"github.com/agentd/agentd/internal/fault"
	"github.com/agentd/agentd/internal/record"
	"github.com/agentd/agentd/internal/store"
	"github.com/agentd/agentd/internal/toolerror"
)

// unknownOutcome is the result of an approved call whose resume died
// while it may have been running: it is not run a second time.
var unknownOutcome = toolerror.JSON("agentd stopped while resuming this call, which may have run; it is not run again")

// resumeGeneration validates a resume of the caller's and claims the
// paused generation for it (resumeIn).
func (s *Service) resumeGeneration(ctx context.Context, r *agentdv1.ResumeGeneration) (*generation, error) {
	if err := checkResumeRequest(r); err != nil {
		return nil, err
	}
	name, tenant, err := s.tenant(ctx)
	if err != nil {
		return nil, err
	}
	return s.resumeIn(ctx, name, tenant, r, principalName(ctx))
}

// resumeIn validates a resume of tenant's, by the principal by, and claims
// the paused generation for it: nothing runs before every check passed,
// and of two resumes of one pause, only one gets it. It loads the paused
// generation, checks that it may be resumed and that the resume, with
// the decisions recorded for it, answers it, records the resume's own
// answers as decisions, admits it within the tenant's concurrency limit,
// then claims it.
func (s *Service) resumeIn(ctx context.Context, name string, tenant *Tenant, r *agentdv1.ResumeGeneration, by string) (*generation, error) {
	sctx, cancel := context.WithTimeout(ctx, store.Timeout)
	defer cancel()
	rec, cp, err := record.LoadPaused(sctx, s.checkpoints, name, r.GetGenerationId())
	if err != nil {
		return nil, s.notPaused(sctx, name, r.GetGenerationId(), err)
	}
	interrupted, err := record.Interrupted(rec, cp, s.cfg.ResumeStaleAfter)
	if err != nil {
		return nil, err
	}
	answers, err := s.withDecisions(sctx, name, r, cp, by)
	if err != nil {
		return nil, err
	}
	r = answers.resume
	agent := r.GetAgent()
	if agent == nil {
		if agent, err = s.storedAgent(sctx, name, r.GetGenerationId()); err != nil {
			return nil, err
		}
	}
	p, err := s.checkResume(r, agent, tenant, cp)
	if err != nil {
		return nil, err
	}
	if err := s.recordAnswers(sctx, name, r.GetGenerationId(), answers.fresh); err != nil {
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
		Authorized:     ids(r.GetAuthorizationResponses(), (*agentdv1.AuthorizationResponse).GetRequestId),
		AnsweredInputs: ids(r.GetInputResponses(), (*agentdv1.InputResponse).GetRequestId),
		MayHaveRun:     slices.Sorted(maps.Keys(interrupted)),
	}, s.cfg.ResumeStaleAfter)
	if err != nil {
		release()
		return nil, err
	}
	g := s.continued(name, cp)
	g.release, g.plan = release, p
	g.startedBy = by // for a record it must create: one paused before agentd kept them
	g.resume = &resumption{
		checkpoint:  cp,
		claim:       claim,
		decisions:   r.GetApprovalDecisions(),
		results:     r.GetFunctionResults(),
		interrupted: interrupted,

		authorizations: r.GetAuthorizationResponses(),
		inputs:         r.GetInputResponses(),
		decided:        answers.decided,
		// An earlier resume, since gone, may have spent the codes.
		interruptedAuth: len(cp.GetClaim().GetAuthorized()) > 0,
	}
	return g, nil
}

// notPaused is err, LoadPaused's, unless that found no paused generation
// id of tenant and the record of generations says why: it has ended, or
// it runs. A resume then fails FailedPrecondition saying so, rather than
// NotFound, which stays for another tenant's generation and for an id
// nobody made: the record is the tenant's alone.
func (s *Service) notPaused(ctx context.Context, tenant, id string, err error) error {
	if fault.KindOf(err) != fault.NotFound || s.generations == nil {
		return err
	}
	rec, gerr := s.generations.Get(ctx, tenant, id)
	if gerr != nil {
		return err
	}
	info := map[string]string{"generation_id": id, "state": string(rec.State)}
	switch rec.State {
	case store.Completed, store.Failed, store.Cancelled:
		why := ""
		if r, _ := record.DecodeResult(rec.Result); r.Error != "" {
			why = ": " + r.Error
		}
		return fault.New(fault.FailedPrecondition, "the generation %q has ended, %s%s; only a paused generation can be resumed (GetGeneration returns its result)", id, rec.State, why).
			WithInfo("GENERATION_FINISHED", info)
	case store.Running, store.Waiting:
		return fault.New(fault.FailedPrecondition, "the generation %q is %s, not paused; only a paused generation can be resumed (attach to follow it)", id, rec.State).
			WithInfo("GENERATION_RUNNING", info)
	}
	// Paused, with no checkpoint to resume: it expired, and the sweeper
	// has yet to cancel it.
	return fault.New(fault.FailedPrecondition, "the pause of the generation %q expired (generation.pause_ttl) before a resume", id).
		WithInfo("GENERATION_PAUSE_EXPIRED", info)
}

// checkResumeRequest requires what a resume must name before anything is
// loaded: the generation.
func checkResumeRequest(r *agentdv1.ResumeGeneration) error {
	if r.GetGenerationId() == "" {
		return fault.InvalidRequest([]fault.Violation{{Field: "resume.generation_id", Description: "is required"}})
	}
	return nil
}

// storedAgent is the agent of tenant's paused generation id that its
// record keeps (record.StoredAgent), for a resume that gives none. Where
// it cannot stand for the agent, resume.agent is required, saying why.
func (s *Service) storedAgent(ctx context.Context, tenant, id string) (*agentdv1.Agent, error) {
	if s.generations == nil {
		return nil, agentRequired("this agentd keeps no record of its generations, so it keeps no agent")
	}
	agent, err := record.StoredAgent(ctx, s.generations, s.sealer, tenant, id)
	switch fault.KindOf(err) {
	case fault.FailedPrecondition, fault.NotFound:
		return nil, agentRequired(err.Error())
	}
	return agent, err
}

// agentRequired refuses a resume without an agent, saying why agentd's
// own cannot stand for it.
func agentRequired(why string) error {
	return fault.InvalidRequest([]fault.Violation{{Field: "resume.agent", Description: "is required: " + why +
		"; give the agent again, with its secrets, as when it started (with store.encryption_key_file set, agentd keeps a paused generation's agent sealed, secrets and all, and a resume may leave it out)"}})
}

// checkResume validates the resume, run with agent (its own or the
// stored one), against its checkpoint: the agent, on the provider and
// model it paused on, and exactly one answer for every request the paused
// turn waits for. It returns the plan to run.
func (s *Service) checkResume(r *agentdv1.ResumeGeneration, agent *agentdv1.Agent, tenant *Tenant, cp *statev1.Checkpoint) (*plan, error) {
	var timeout *durationValue
	if at := r.GetAnswerTimeout(); at != nil {
		timeout = &durationValue{field: "answer_timeout", d: at.AsDuration(), valid: at.CheckValid() == nil}
	}
	p, err := s.newPlan("resume", tenant, agent, cp.GetMessages(), timeout)
	if err != nil {
		return nil, err
	}
	var v violations
	if agent.GetProvider() != cp.GetProvider() || cp.GetModel() != "" && agent.GetModel() != cp.GetModel() {
		v.add("resume.agent", "%s", fmt.Sprintf("the generation paused on %s (%s); it cannot resume on %s (%s)",
			cp.GetProvider(), cp.GetModel(), agent.GetProvider(), agent.GetModel()))
	}
	checkAnswers(&v, cp.GetTurn(), r)
	if len(v) > 0 {
		return nil, fault.InvalidRequest(v)
	}
	return p, nil
}

// checkAnswers requires exactly one answer for every request the paused
// turn waits for, and no other: approval decisions (that match their
// request's digest) and function results, reported together, then the
// authorizations (each a URL the person came back to) and the inputs
// (each with an action, an accepted form matching its schema).
func checkAnswers(v *violations, turn *statev1.PausedTurn, r *agentdv1.ResumeGeneration) {
	a := askedOf(turn)
	approvals := make(map[string]*agentdv1.ApprovalRequest, len(a.approvals))
	for _, req := range a.approvals {
		approvals[req.GetId()] = req
	}
	decisions := r.GetApprovalDecisions()
	matchAnswers(v, answerList{
		list: "approval_decisions", what: "approval request", idField: "request_id",
		pending: ids(a.approvals, (*agentdv1.ApprovalRequest).GetId), answers: ids(decisions, (*agentdv1.ApprovalDecision).GetRequestId),
		check: func(i int, field string, first bool) {
			d, req := decisions[i], approvals[decisions[i].GetRequestId()]
			switch {
			case !first:
			case d.GetDigest() != "" && d.GetDigest() != req.GetDigest():
				v.add(field+".digest", "does not match the approval request")
			case raiseRefusal(req.GetLimit(), d) != "":
				v.add(field+".raise_to", "%s", raiseRefusal(req.GetLimit(), d))
			}
		},
	}, answerList{
		list: "function_results", what: "function call", idField: "call_id",
		pending: ids(a.functions, (*agentdv1.FunctionCall).GetCallId), answers: ids(r.GetFunctionResults(), (*agentdv1.FunctionResult).GetCallId),
	})
	redirects := r.GetAuthorizationResponses()
	matchAnswers(v, answerList{
		list: "authorization_responses", what: "authorization request", idField: "request_id",
		pending: a.authorizations, answers: ids(redirects, (*agentdv1.AuthorizationResponse).GetRequestId),
		check: func(i int, field string, _ bool) {
			if u, err := url.Parse(redirects[i].GetRedirectUrl()); err != nil || !u.IsAbs() {
				v.add(field+".redirect_url", "must be the absolute URL the authorization server redirected the person to")
			}
		},
	})
	requests := make(map[string]*agentdv1.InputRequest, len(a.inputs))
	for _, req := range a.inputs {
		requests[req.GetId()] = req
	}
	inputs := r.GetInputResponses()
	matchAnswers(v, answerList{
		list: "input_responses", what: "input request", idField: "request_id",
		pending: ids(a.inputs, (*agentdv1.InputRequest).GetId), answers: ids(inputs, (*agentdv1.InputResponse).GetRequestId),
		check: func(i int, field string, _ bool) { checkInput(v, field, requests[inputs[i].GetRequestId()], inputs[i]) },
	})
}

// checkInput checks an answer to the input request req (nil when none
// waits): an action, and an accepted form that the request's schema takes.
func checkInput(v *violations, field string, req *agentdv1.InputRequest, a *agentdv1.InputResponse) {
	if a.GetAction() == agentdv1.InputAction_INPUT_ACTION_UNSPECIFIED {
		v.add(field+".action", "is required: ACCEPT, DECLINE or CANCEL")
	}
	if req != nil && a.GetAction() == agentdv1.InputAction_INPUT_ACTION_ACCEPT {
		if _, err := formContent(req.GetRequestedSchema(), a.GetContent()); err != nil {
			v.add(field+".content", "%s", err.Error())
		}
	}
}

// answerList is one of a resume's lists of answers, with the requests of
// its kind that the paused turn waits for.
type answerList struct {
	list    string   // its field in the resume: "approval_decisions"
	what    string   // what its answers answer: "approval request"
	idField string   // its answers' field that names the request: "request_id"
	pending []string // the requests waiting, in order
	answers []string // the requests its answers name, in order
	// check checks what else answer i, at field, must hold; first says it
	// names a waiting request, for the first time.
	check func(i int, field string, first bool)
}

// matchAnswers requires exactly one answer for every request that lists
// wait for, and none for a request that is not waiting; the requests
// left unanswered in all of lists are reported together.
func matchAnswers(v *violations, lists ...answerList) {
	seen := make(map[string]bool)
	for _, l := range lists {
		waiting := make(map[string]bool, len(l.pending))
		for _, id := range l.pending {
			waiting[id] = true
		}
		for i, id := range l.answers {
			field := fmt.Sprintf("resume.%s[%d]", l.list, i)
			first := false
			switch {
			case !waiting[id]:
				v.add(field+"."+l.idField, "%s", fmt.Sprintf("no %s %q is waiting", l.what, id))
			case seen[id]:
				v.add(field+"."+l.idField, "%s", fmt.Sprintf("%q is answered twice", id))
			default:
				first = true
			}
			seen[id] = true
			if l.check != nil {
				l.check(i, field, first)
			}
		}
	}
	var missing []string
	for _, l := range lists {
		for _, id := range l.pending {
			if !seen[id] {
				missing = append(missing, id)
			}
		}
	}
	if len(missing) > 0 {
		v.add("resume", "%s", fmt.Sprintf("missing answers for %s", sentence(missing)))
	}
}

// ids are the ids of xs, each by id.
func ids[T any](xs []T, id func(T) string) []string {
	out := make([]string, len(xs))
	for i, x := range xs {
		out[i] = id(x)
	}
	return out
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
		g.restorePaused()
		return
	default:
		g.restorePaused()
		if err = res.claim.GiveBack(ctx); err == nil {
			g.undecide(ctx, res.refused)
		}
	}
	if err != nil {
		g.s.log.WarnContext(ctx, "releasing a paused generation after a failed resume", "generation", g.id, "err", err)
	}
}

// restorePaused puts back in the record the pending requests of the
// pause that a resume which failed within its paused turn goes back to.
func (g *generation) restorePaused() {
	cp := g.resume.checkpoint
	var authorizations []*agentdv1.AuthorizationRequest
	for _, pa := range cp.GetTurn().GetAuthorizations() {
		if d, err := g.s.openAuthorization(g.tenant, g.id, pa); err == nil {
			authorizations = append(authorizations, d.request)
		}
	}
	g.setPaused(askedOf(cp.GetTurn()), authorizations, cp.GetExpiresAt().AsTime())
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

// continueResume finishes a resumed generation's paused turn, if it has
// one to finish (a generation paused before its first model turn has
// none), and records that it went past it: from then on its pause can no
// longer be resumed, and its record says so before it goes on, or a
// replica adopting it would pause it again for good. A generation that was
// not resumed goes on at once. done says the generation ended, with err.
func (g *generation) continueResume(ctx context.Context) (done bool, _ error) {
	if g.resume == nil {
		return false, nil
	}
	if err := g.announceResumed(ctx); err != nil {
		return true, err
	}
	t := g.resume.checkpoint.GetTurn()
	if t.GetLimit() != nil {
		return g.resumeAtLimit(ctx, t)
	}
	if len(t.GetCalls()) > 0 {
		r, results, err := g.resumeTurn(ctx)
		if done, err := g.endTurn(ctx, r, results, err); done {
			return true, err
		}
	}
	if err := g.progress(ctx); err != nil {
		return true, err
	}
	g.clearPaused()
	if err := g.awaitCheckpoint(ctx); err != nil {
		return true, err
	}
	return false, nil
}

// awaitCheckpoint checkpoints the generation at a turn boundary and
// waits until its record has it.
func (g *generation) awaitCheckpoint(ctx context.Context) error {
	g.checkpoint(nil)
	if g.journal != nil {
		return g.journal.Await(ctx)
	}
	return nil
}

// resumeTurn finishes the paused turn with the resume's answers: declined
// calls get {"error":"declined by user"}, approved ones run once, function
// results are taken, and the calls that waited for an authorization or an
// input run again with what the resume brought; then every result of the
// turn goes to the model together, in call order.
func (g *generation) resumeTurn(ctx context.Context) (*turnRun, []*agentdv1.ToolResult, error) {
	res := g.resume
	t := res.checkpoint.GetTurn()
	r := g.newTurnRun(ctx, int(t.GetTurn()), t.GetCalls())
	again := r.restore(t.GetStates(), res.inputs)
	err := r.applyAnswers(res, again)
	res.started = r.started
	results, err := r.finish(err)
	return r, results, r.deferralPause(err)
}

// restore takes up a paused turn's states: the calls' results, and what
// the others wait for on the stream. It returns the calls that waited for
// a resume's answers (an authorization, an input): they run again, those
// that asked for input with the answers.
func (r *turnRun) restore(states []*statev1.CallState, inputs []*agentdv1.InputResponse) (again []int) {
	answers := make(map[string]*agentdv1.InputResponse, len(inputs))
	for _, a := range inputs {
		answers[a.GetRequestId()] = a
	}
	for i, st := range states {
		if res := st.GetResult(); res != nil {
			r.results[i] = res
			continue
		}
		switch w := waitOf(st); {
		case w == nil:
		case w.onStream():
			r.waits[i] = w
		default:
			again = append(again, i)
			if w.kind == waitsForInput {
				if r.retries == nil {
					r.retries = make(map[int]*inputRetry)
				}
				r.retries[i] = retryFor(w.input, answers)
			}
		}
	}
	return again
}

// applyAnswers applies the resume's answers to the restored turn: the
// decisions and results, then the calls in again run, once. What an
// earlier resume, since gone, may have run is not run again: its outcome
// is unknown. An approved function call then waits for its result, on the
// stream.
func (r *turnRun) applyAnswers(res *resumption, again []int) error {
	for _, d := range res.decided {
		if d.approval == nil {
			continue
		}
		if res.interrupted[d.requestID] {
			i, _, ok := r.answered(waitsForApproval, d.requestID, false)
			if ok {
				r.g.answered.add(d.requestID)
				r.mayHaveRun(i)
			}
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
	for _, i := range again {
		if res.interrupted[r.calls[i].GetId()] {
			r.mayHaveRun(i)
			continue
		}
		r.started = true
		if err := r.dispatchAuthorized(i); err != nil {
			return err
		}
	}
	return r.awaitAnswers()
}

// mayHaveRun gives call i, which an earlier resume may have run, the
// result that says so.
func (r *turnRun) mayHaveRun(i int) {
	c := r.calls[i]
	r.setResult(i, &agentdv1.ToolResult{ToolCallId: c.GetId(), Name: c.GetName(), Output: unknownOutcome, IsError: true})
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

// resumeAnswers are a resume's answers with the decisions recorded for
// its paused turn's requests.
type resumeAnswers struct {
	// resume is the resume with a recorded decision for each request it
	// leaves out.
	resume *agentdv1.ResumeGeneration
	// decided are its answers as decisions: those recorded before, and its
	// own.
	decided []*decision
	// fresh are its own, to record.
	fresh []*decision
}

// withDecisions adds to the resume r of tenant's paused generation cp
// the decisions recorded for the requests its paused turn waits for: a
// decision stands for an answer r leaves out, and one r gives must agree
// with it (FAILED_PRECONDITION otherwise, naming who decided first).
// The resume's own answers are decisions by by.
func (s *Service) withDecisions(ctx context.Context, tenant string, r *agentdv1.ResumeGeneration, cp *statev1.Checkpoint, by string) (resumeAnswers, error) {
	given := decisionsOf(r.GetApprovalDecisions(), r.GetAuthorizationResponses(), r.GetInputResponses(), by)
	if s.generations == nil {
		return resumeAnswers{resume: r, decided: given}, nil
	}
	a := askedOf(cp.GetTurn())
	ids := slices.Concat(ids(a.approvals, (*agentdv1.ApprovalRequest).GetId), a.authorizations, ids(a.inputs, (*agentdv1.InputRequest).GetId))
	stored, err := s.decisionsFor(ctx, tenant, cp.GetGenerationId(), ids)
	if err != nil {
		return resumeAnswers{}, err
	}
	out := resumeAnswers{resume: proto.CloneOf(r)}
	for _, d := range given {
		first := stored[d.requestID]
		switch {
		case first == nil:
			out.fresh = append(out.fresh, d)
			out.decided = append(out.decided, d)
			continue
		case !first.same(d):
			return resumeAnswers{}, decidedAlready(cp.GetGenerationId(), first)
		}
		out.decided = append(out.decided, first)
		delete(stored, d.requestID)
	}
	for _, id := range ids {
		if first := stored[id]; first != nil {
			out.decided = append(out.decided, first)
			addAnswer(out.resume, first)
		}
	}
	return out, nil
}

// decisionsFor are the decisions recorded for tenant's generation id's
// requests ids, by request id.
func (s *Service) decisionsFor(ctx context.Context, tenant, id string, ids []string) (map[string]*decision, error) {
	found, err := s.generations.Decisions(ctx, tenant, id, ids)
	if err != nil {
		return nil, err
	}
	out := make(map[string]*decision, len(found))
	for _, sd := range found {
		d, err := decisionFrom(s.sealer, tenant, id, sd)
		if err != nil {
			return nil, err
		}
		out[d.requestID] = d
	}
	return out, nil
}

// addAnswer adds d's answer to the resume r.
func addAnswer(r *agentdv1.ResumeGeneration, d *decision) {
	switch {
	case d.approval != nil:
		r.ApprovalDecisions = append(r.ApprovalDecisions, d.approval)
	case d.authorization != nil:
		r.AuthorizationResponses = append(r.AuthorizationResponses, d.authorization)
	case d.input != nil:
		r.InputResponses = append(r.InputResponses, d.input)
	}
}

// recordAnswers records a resume's own answers, fresh, as decisions of
// tenant's generation id, before it claims the pause: one that another
// decided meanwhile, otherwise, refuses the resume. A pause whose record
// lists no pending requests (one paused by an agentd before it listed
// them) has its answers recorded by its claim alone.
func (s *Service) recordAnswers(ctx context.Context, tenant, id string, fresh []*decision) error {
	if s.generations == nil || len(fresh) == 0 {
		return nil
	}
	if err := s.decideAll(ctx, tenant, id, fresh); fault.KindOf(err) != fault.NotFound {
		return err
	}
	return nil
}

// announceResumed takes the resume's authorizations and inputs, which
// its run uses before its paused turn (they were recorded, and
// approval_decided shows them); its approvals are taken as its turn
// applies them.
func (g *generation) announceResumed(ctx context.Context) error {
	for _, d := range g.resume.decided {
		if d.approval != nil {
			continue
		}
		d.recorded = true
		if _, err := g.takeDecision(ctx, d); err != nil {
			return err
		}
	}
	return nil
}

// clearPaused replaces the pending requests the generation's pause left
// in its record with those it waits for now: past its paused turn, none
// of those.
func (g *generation) clearPaused() {
	if g.journal == nil {
		return
	}
	g.emitMu.Lock()
	defer g.emitMu.Unlock()
	g.journal.SetPending(g.pending.rows())
}
