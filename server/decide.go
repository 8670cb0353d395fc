package server

import (
	agentdv1 "github.com/agentd/agentd/gen/go/agentd/v1"

	"cmp"
	"context"
	"fmt"
	"net/url"
	"slices"

	"github.com/agentd/agentd/internal/auth"
	"github.com/agentd/agentd/internal/fault"
	"github.com/agentd/agentd/internal/record"
	"github.com/agentd/agentd/internal/store"
)

// DecideRequests answers pending requests of one of the caller's
// tenant's generations, as whoever may decide: approvals (a digest, when
// given, must match; the reason is kept), authorizations and inputs
// (checked as a resume's are), whether the generation waits on someone
// else's stream or is paused. Every decision is recorded before anything
// else happens, once per request across replicas: a request decided
// already, by this call's caller or anyone, is FAILED_PRECONDITION naming
// who decided it and when, and nothing of the call is recorded. The
// replica running a waiting generation applies the decisions (at once
// when it is this one). A paused one whose every request a decision
// answers, and that needs nothing its record does not keep (a function
// result, an agent's secrets), resumes here, detached, once; otherwise
// the decisions wait for its next resume, which takes them as its
// answers. The response has the decisions recorded and the generation
// as it is after.
func (s *Service) DecideRequests(ctx context.Context, req *agentdv1.DecideRequestsRequest) (*agentdv1.DecideRequestsResponse, error) {
	res, err := s.decideRequests(ctx, req)
	if err != nil {
		return nil, fault.GRPC(err)
	}
	return res, nil
}

func (s *Service) decideRequests(ctx context.Context, req *agentdv1.DecideRequestsRequest) (*agentdv1.DecideRequestsResponse, error) {
	by := principalName(ctx)
	ds, err := checkDecideRequest(req, by)
	if err != nil {
		return nil, err
	}
	tenant, err := s.recordsOf(ctx)
	if err != nil {
		return nil, err
	}
	id := req.GetGenerationId()
	if err := s.recordDecisions(ctx, tenant, id, ds); err != nil {
		s.auditDecisions(ctx, tenant, id, ds, err)
		return nil, err
	}
	s.auditDecisions(ctx, tenant, id, ds, nil)
	if g := s.decidingHere(tenant, id); g != nil {
		for _, d := range ds {
			g.link.mail.deliver(d)
		}
	}
	resumed := s.resumeDecided(ctx, tenant, id, by, false)
	gen, err := s.getGeneration(ctx, &agentdv1.GetGenerationRequest{GenerationId: id})
	if err != nil {
		return nil, err
	}
	if resumed {
		// It runs here now; its record says so with its run's first write.
		gen.State = agentdv1.GenerationState_GENERATION_STATE_RUNNING
	}
	res := &agentdv1.DecideRequestsResponse{Generation: gen}
	for _, d := range ds {
		res.Decisions = append(res.Decisions, d.event())
	}
	return res, nil
}

// checkDecideRequest checks what a DecideRequests must hold before
// anything is read, every problem at once, and returns its answers as
// decisions by by.
func checkDecideRequest(req *agentdv1.DecideRequestsRequest, by string) ([]*decision, error) {
	var v violations
	if req.GetGenerationId() == "" {
		v.add("generation_id", "is required")
	}
	ds := decisionsOf(req.GetApprovalDecisions(), req.GetAuthorizationResponses(), req.GetInputResponses(), by)
	if len(ds) == 0 {
		v.add("approval_decisions", "a decision, authorization response or input response is required")
	}
	seen := make(map[string]bool, len(ds))
	for _, d := range ds {
		d.field = decisionField(req, d)
		field := d.field
		switch {
		case d.requestID == "":
			v.add(field+".request_id", "is required")
		case seen[d.requestID]:
			v.add(field+".request_id", "%s", fmt.Sprintf("%q is answered twice", d.requestID))
		}
		seen[d.requestID] = true
		checkAnswer(&v, field, d)
	}
	if len(v) > 0 {
		return nil, fault.InvalidRequest(v)
	}
	return ds, nil
}

// checkAnswer checks what d's answer holds by itself: a reason within
// bounds, a redirect URL, an input's action.
func checkAnswer(v *violations, field string, d *decision) {
	if err := checkReason(field+".reason", d); err != nil {
		v.add(field+".reason", "must be at most %d characters", maxReasonChars)
	}
	if d.authorization != nil {
		if u, err := url.Parse(d.authorization.GetRedirectUrl()); err != nil || !u.IsAbs() {
			v.add(field+".redirect_url", "must be the absolute URL the authorization server redirected the person to")
		}
	}
	if d.input != nil {
		checkInput(v, field, nil, d.input)
	}
}

// decisionField is the field of req that holds d's answer.
func decisionField(req *agentdv1.DecideRequestsRequest, d *decision) string {
	switch {
	case d.approval != nil:
		return fmt.Sprintf("approval_decisions[%d]", slices.Index(req.GetApprovalDecisions(), d.approval))
	case d.authorization != nil:
		return fmt.Sprintf("authorization_responses[%d]", slices.Index(req.GetAuthorizationResponses(), d.authorization))
	}
	return fmt.Sprintf("input_responses[%d]", slices.Index(req.GetInputResponses(), d.input))
}

// recordDecisions records ds as decisions of tenant's generation id,
// all or none, after checking each against the request it answers.
func (s *Service) recordDecisions(ctx context.Context, tenant, id string, ds []*decision) error {
	sctx, cancel := context.WithTimeout(ctx, store.Timeout)
	defer cancel()
	rec, err := s.generations.Get(sctx, tenant, id)
	if err != nil {
		return err // another tenant's is not found either
	}
	if rec.State.Finished() {
		if err := s.decidedBefore(sctx, tenant, id, ds); err != nil {
			return err
		}
		return fault.New(fault.FailedPrecondition, "the generation %q has ended, %s; it waits for nothing", id, rec.State).
			WithInfo("GENERATION_FINISHED", map[string]string{"generation_id": id, "state": string(rec.State)})
	}
	reqs, err := pendingRequests(sctx, s.generations, s.sealer, tenant, id)
	if err != nil {
		return err
	}
	pending := make(map[string]*agentdv1.PendingRequest, len(reqs))
	for _, r := range reqs {
		pending[requestIDOf(r)] = r
	}
	if err := s.checkDecisions(sctx, tenant, id, ds, pending); err != nil {
		return err
	}
	wctx, wcancel := store.WriteContext(ctx)
	defer wcancel()
	if err := s.decideAll(wctx, tenant, id, ds); fault.KindOf(err) == fault.NotFound {
		// Answered meanwhile, or no longer waited for.
		return s.notDecidable(sctx, tenant, id, ds)
	} else if err != nil {
		return err
	}
	return nil
}

// checkDecisions checks each of ds against the pending request it
// answers: a decision of a request that was decided is refused naming
// who decided it; one of a request that does not wait, of a function call
// (only the generation's client answers it), of another kind, or that
// its request does not take (another call's digest, an input its schema
// refuses), is invalid.
func (s *Service) checkDecisions(ctx context.Context, tenant, id string, ds []*decision, pending map[string]*agentdv1.PendingRequest) error {
	var v violations
	var unknown []*decision
	for _, d := range ds {
		p := pending[d.requestID]
		if p == nil {
			unknown = append(unknown, d)
			continue
		}
		checkDecision(&v, d, p)
	}
	if len(unknown) > 0 {
		if err := s.decidedBefore(ctx, tenant, id, unknown); err != nil {
			return err
		}
		for _, d := range unknown {
			v.add(d.field+".request_id", "%s", fmt.Sprintf("the generation %q has no pending request %q", id, d.requestID))
		}
	}
	if len(v) > 0 {
		return fault.InvalidRequest(v)
	}
	return nil
}

// checkDecision checks d against p, the request it answers.
func checkDecision(v *violations, d *decision, p *agentdv1.PendingRequest) {
	field := d.field
	switch {
	case p.GetKind() == agentdv1.PendingRequestKind_PENDING_REQUEST_KIND_FUNCTION_CALL:
		v.add(field+".request_id", "%s", fmt.Sprintf("%q is a function call: only the generation's client answers it, with a function_result on its stream or in a resume", d.requestID))
	case p.GetKind() != d.kind:
		v.add(field+".request_id", "%s", fmt.Sprintf("%q is an %s request, not an %s", d.requestID, kindName(p.GetKind()), kindName(d.kind)))
	case d.approval.GetDigest() != "" && d.approval.GetDigest() != p.GetApproval().GetDigest():
		v.add(field+".digest", "does not match the approval request")
	case raiseRefusal(p.GetApproval().GetLimit(), d.approval) != "":
		v.add(field+".raise_to", "%s", raiseRefusal(p.GetApproval().GetLimit(), d.approval))
	case d.input != nil:
		checkInput(v, field, p.GetInput(), d.input)
	}
}

// decidedBefore refuses decisions of requests that do not wait because
// they were decided: naming who decided the first.
func (s *Service) decidedBefore(ctx context.Context, tenant, id string, ds []*decision) error {
	found, err := s.decisionsFor(ctx, tenant, id, ids(ds, func(d *decision) string { return d.requestID }))
	if err != nil {
		return err
	}
	for _, d := range ds {
		if first := found[d.requestID]; first != nil {
			return decidedAlready(id, first)
		}
	}
	return nil
}

// notDecidable is the refusal of decisions whose requests stopped
// waiting between their check and their record.
func (s *Service) notDecidable(ctx context.Context, tenant, id string, ds []*decision) error {
	if err := s.decidedBefore(ctx, tenant, id, ds); err != nil {
		return err
	}
	return fault.New(fault.FailedPrecondition, "the generation %q no longer waits for the requests decided; nothing was changed", id).
		WithInfo("REQUEST_NOT_PENDING", map[string]string{"generation_id": id})
}

// auditDecisions writes the audit line of a DecideRequests: who decided
// what, and whether it was recorded (err nil) or refused.
func (s *Service) auditDecisions(ctx context.Context, tenant, id string, ds []*decision, err error) {
	for _, d := range ds {
		attrs := []any{"audit", true, "principal", cmp.Or(d.by, auth.Anonymous), "tenant", tenant, "generation", id,
			"request", d.requestID, "kind", kindName(d.kind)}
		switch {
		case d.approval != nil:
			attrs = append(attrs, "approved", d.approval.GetApproved(), "reason", d.approval.GetReason())
		case d.input != nil:
			attrs = append(attrs, "action", d.input.GetAction().String())
		}
		if err != nil {
			s.log.InfoContext(ctx, "decision refused", append(attrs, "err", err.Error())...)
			continue
		}
		s.log.InfoContext(ctx, "decision recorded", attrs...)
	}
}

// resumeDecided resumes tenant's paused generation id, detached, on this
// replica, when the decisions recorded answer every request its pause
// waits for and it needs nothing its record does not keep: no function
// result, and its agent whole. The resume's claim makes it once, however
// many try at once. With beforePause, only decisions recorded before the
// generation paused count: one recorded since is a resume's, which runs
// it, or DecideRequests', which resumes it itself. It reports whether
// this call resumed it; otherwise the decisions wait for the next resume.
func (s *Service) resumeDecided(ctx context.Context, tenant, id, by string, beforePause bool) bool {
	if s.checkpoints == nil || !s.allDecided(ctx, tenant, id, beforePause) {
		return false
	}
	name, t, err := s.tenantNamed(tenant)
	if err != nil {
		return false
	}
	g, err := s.resumeIn(ctx, name, t, &agentdv1.ResumeGeneration{GenerationId: id}, by)
	if err != nil {
		s.log.InfoContext(ctx, "a decided generation waits for its resume", "tenant", tenant, "generation", id, "why", err.Error())
		return false
	}
	g.caller = cmp.Or(by, auth.Anonymous)
	gctx, cancel := s.clientless(g)
	if !s.goRun(g, gctx, cancel) {
		g.failed(gctx) // stopping: nothing ran, and the pause is as it was
		cancel(nil)
		g.release()
		return false
	}
	s.log.InfoContext(ctx, "generation resumed", "audit", true, "principal", g.caller, "tenant", tenant, "generation", id,
		"decisions", len(g.resume.decided), "function_results", 0)
	return true
}

// allDecided reports whether tenant's generation id is paused, no resume
// holding it, waiting for decisions alone (no function result), each
// recorded (with beforePause, before it paused).
func (s *Service) allDecided(ctx context.Context, tenant, id string, beforePause bool) bool {
	sctx, cancel := context.WithTimeout(ctx, store.Timeout)
	defer cancel()
	rec, cp, err := record.LoadPaused(sctx, s.checkpoints, tenant, id)
	if err != nil || rec.Claimed {
		return false
	}
	a := askedOf(cp.GetTurn())
	want := slices.Concat(ids(a.approvals, (*agentdv1.ApprovalRequest).GetId), a.authorizations, ids(a.inputs, (*agentdv1.InputRequest).GetId))
	if len(a.functions) > 0 || len(want) == 0 {
		return false
	}
	found, err := s.generations.Decisions(sctx, tenant, id, want)
	if err != nil || len(found) != len(want) {
		return false
	}
	return !beforePause || !slices.ContainsFunc(found, func(d store.Decision) bool { return d.DecidedAt.After(cp.GetPausedAt().AsTime()) })
}

// resumeAfterPause has g, which paused, resumed if decisions recorded
// while it paused answer it: a decision that reached it too late to take
// is not left waiting for a resume nobody asks for. Its slot goes back
// first (release is idempotent), for the resume to take.
func (g *generation) resumeAfterPause() {
	s, tenant, id := g.s, g.tenant, g.id
	if s.generations == nil {
		return
	}
	g.release()
	s.goBackground(func() { s.resumeDecided(s.bg, tenant, id, "", true) })
}
