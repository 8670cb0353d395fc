package server

import (
	"cmp"
	"slices"

	"go.opentelemetry.io/otel/trace"

	statev1 "github.com/agentd/agentd/gen/go/agentd/state/v1"
	agentdv1 "github.com/agentd/agentd/gen/go/agentd/v1"

	"context"
	"fmt"
	"time"

	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/agentd/agentd/internal/fault"
	"github.com/agentd/agentd/internal/quota"
	"github.com/agentd/agentd/internal/store"
)

// A call of a tool turn may wait for its client: for its approval (a
// gated call), for its result (a function tool's call), or, refused by its
// MCP server, for a person's authorization of that server or for the
// input the server asked for. The client answers the first two on the
// stream, between calls; the last two were asked while the call ran
// (ask.go) and, nobody answering, deferred to a resume. Whatever a call
// waits for, it is a wait: when nobody answers, the generation pauses,
// its paused checkpoint holds each wait as its call's state, the paused
// event lists them, and the resume answers them (resume.go). What
// differs between the kinds is data: the wait's request, and the state
// it takes in the checkpoint.

// waitKind is what a call waits for.
type waitKind int

const (
	waitsForApproval waitKind = iota + 1
	waitsForResult
	waitsForAuthorization
	waitsForInput
)

// wait is what one call waits for from the client.
type wait struct {
	kind waitKind
	// id names the request the answer names: the approval request's id,
	// the function call's id (its result names the call), or the
	// authorization request's id. An input wait's requests have ids of
	// their own.
	id       string
	approval *agentdv1.ApprovalRequest // waitsForApproval
	input    *statev1.InputWait        // waitsForInput
	asked    time.Time                 // waitsForResult: when the client was asked
	// span is a function call's execute_tool span while the client runs
	// it; counted, that this run counted the approval request in
	// agentd.approvals.pending. The turn settles both when the wait ends.
	span    trace.Span
	counted bool
}

// onStream reports whether the client answers w on the stream, between
// calls; otherwise only a resume does.
func (w *wait) onStream() bool {
	return w.kind == waitsForApproval || w.kind == waitsForResult
}

// state is w as a paused checkpoint holds it, as call c's state.
func (w *wait) state(c *agentdv1.ToolCall) *statev1.CallState {
	switch w.kind {
	case waitsForApproval:
		return &statev1.CallState{State: &statev1.CallState_Approval{Approval: w.approval}}
	case waitsForAuthorization:
		return &statev1.CallState{State: &statev1.CallState_Authorization{Authorization: &statev1.AuthorizationWait{ToolCallId: c.GetId(), RequestId: w.id}}}
	case waitsForInput:
		return &statev1.CallState{State: &statev1.CallState_Input{Input: w.input}}
	}
	return &statev1.CallState{State: &statev1.CallState_FunctionCall{FunctionCall: &agentdv1.FunctionCall{CallId: c.GetId(), Name: c.GetName(), Arguments: c.GetArguments()}}}
}

// waitOf is the wait a paused call's state holds, asked now; nil for a
// call with a result.
func waitOf(st *statev1.CallState) *wait {
	switch s := st.GetState().(type) {
	case *statev1.CallState_Approval:
		return &wait{kind: waitsForApproval, id: s.Approval.GetId(), approval: s.Approval}
	case *statev1.CallState_FunctionCall:
		return &wait{kind: waitsForResult, id: s.FunctionCall.GetCallId(), asked: time.Now()}
	case *statev1.CallState_Authorization:
		return &wait{kind: waitsForAuthorization, id: s.Authorization.GetRequestId()}
	case *statev1.CallState_Input:
		return &wait{kind: waitsForInput, input: s.Input}
	}
	return nil
}

// asked is what a paused turn waits for, kind by kind, in call order: what
// its paused event lists and its resume must answer. The authorizations'
// requests are sealed in the checkpoint: their ids only.
type asked struct {
	approvals      []*agentdv1.ApprovalRequest
	functions      []*agentdv1.FunctionCall
	authorizations []string
	inputs         []*agentdv1.InputRequest
}

// askedOf is what the paused turn t waits for.
func askedOf(t *statev1.PausedTurn) asked {
	var a asked
	for _, pa := range t.GetAuthorizations() {
		a.authorizations = append(a.authorizations, pa.GetRequestId())
	}
	if l := t.GetLimit(); l != nil {
		a.approvals = append(a.approvals, l)
	}
	for _, st := range t.GetStates() {
		switch s := st.GetState().(type) {
		case *statev1.CallState_Approval:
			a.approvals = append(a.approvals, s.Approval)
		case *statev1.CallState_FunctionCall:
			a.functions = append(a.functions, s.FunctionCall)
		case *statev1.CallState_Input:
			for _, in := range s.Input.GetInputs() {
				a.inputs = append(a.inputs, in.GetRequest())
			}
		}
	}
	return a
}

// Why a client answers nothing, in words that follow "the client".
const (
	whyNotAttached = "is not attached (the generation runs detached, or another replica adopted it)"
	whyGone        = "has gone away"
	whyEnded       = "half-closed the stream or went away"
)

// whyTimedOut: the client let the answer timeout pass.
func whyTimedOut(d time.Duration) string { return fmt.Sprintf("did not answer within %s", d) }

// pause stores the generation with its paused turn, ends the stream with
// a paused event, and lets the bridge session close.
func (g *generation) pause(ctx context.Context, turn *statev1.PausedTurn, why *errPause) error {
	cps := g.s.checkpoints
	a := askedOf(turn)
	approvals, functions, inputs := a.approvals, a.functions, a.inputs
	authorizations := g.deferredRequests()
	waiting := len(approvals) + len(functions) + len(authorizations) + len(inputs)
	if cps == nil {
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
	sctx, cancel := store.WriteContext(ctx)
	defer cancel()
	var fence int64
	if g.resume != nil {
		// A resumed generation that pauses again writes over its own claim
		// only: if another resume took it over, this one stops here. Its
		// record holds a place among the paused already.
		g.resume.claim.Stop()
		fence = g.resume.claim.Fence()
	}
	save := func() error { return cps.Save(sctx, g.tenant, g.id, data, expires, fence) }
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
	g.setPaused(a, authorizations, expires)
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

// setPaused replaces the generation's pending requests in its record
// with what its pause waits for, a (and the authorizations), until
// expires: recorded with the pause's state, in one write. A request
// asked on the stream keeps the time it was asked.
func (g *generation) setPaused(a asked, authorizations []*agentdv1.AuthorizationRequest, expires time.Time) {
	if g.journal == nil {
		return
	}
	var reqs []*agentdv1.PendingRequest
	add := func(kind agentdv1.PendingRequestKind, set func(*agentdv1.PendingRequest)) {
		r := &agentdv1.PendingRequest{GenerationId: g.id, Kind: kind, State: agentdv1.GenerationState_GENERATION_STATE_PAUSED, ExpiresAt: timestamppb.New(expires)}
		set(r)
		r.RequestedAt = timestamppb.Now()
		if e := g.pending.get(requestIDOf(r)); e != nil {
			r.RequestedAt = e.req.GetRequestedAt()
		}
		reqs = append(reqs, r)
	}
	for _, req := range a.approvals {
		add(agentdv1.PendingRequestKind_PENDING_REQUEST_KIND_APPROVAL, func(r *agentdv1.PendingRequest) { r.Request = &agentdv1.PendingRequest_Approval{Approval: req} })
	}
	for _, req := range a.functions {
		add(agentdv1.PendingRequestKind_PENDING_REQUEST_KIND_FUNCTION_CALL, func(r *agentdv1.PendingRequest) { r.Request = &agentdv1.PendingRequest_FunctionCall{FunctionCall: req} })
	}
	for _, req := range authorizations {
		add(agentdv1.PendingRequestKind_PENDING_REQUEST_KIND_AUTHORIZATION, func(r *agentdv1.PendingRequest) {
			r.Request = &agentdv1.PendingRequest_Authorization{Authorization: req}
		})
	}
	for _, req := range a.inputs {
		add(agentdv1.PendingRequestKind_PENDING_REQUEST_KIND_INPUT, func(r *agentdv1.PendingRequest) { r.Request = &agentdv1.PendingRequest_Input{Input: req} })
	}
	rows := make([]store.PendingRequest, len(reqs))
	for i, r := range reqs {
		rows[i] = newEntry(g.s.sealer, g.tenant, g.id, store.Paused, r, pendingServer(r), g.approvalTool(r.GetApproval())).row
	}
	g.emitMu.Lock()
	defer g.emitMu.Unlock()
	g.journal.SetPending(rows)
}

// pendingServer is the server a pending request concerns; "" for none.
func pendingServer(r *agentdv1.PendingRequest) string {
	return cmp.Or(r.GetApproval().GetServerName(), r.GetAuthorization().GetServerName(), r.GetInput().GetServerName())
}

// approvalTool is the server's name for the tool of approval request
// req, as the generation offers it; "" for none.
func (g *generation) approvalTool(req *agentdv1.ApprovalRequest) string {
	if req == nil || req.GetSampling() != nil {
		return ""
	}
	if owner := g.owners[req.GetToolName()]; owner != nil {
		return owner.toolName(req.GetToolName())
	}
	return req.GetToolName()
}

// saveWithin saves a newly paused generation unless its tenant has as
// many paused as max_paused_generations allows: then the generation
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

// pauseWhy reports why authorizations or input requests were deferred,
// for the pause of the turn; "" if none was.
func (g *generation) pauseWhy() string {
	g.deferred.mu.Lock()
	defer g.deferred.mu.Unlock()
	if len(g.deferred.byName) == 0 && g.deferred.inputs == 0 {
		return ""
	}
	return g.deferred.why
}

// deferredWhy reports why authorizations were deferred; "" if none was.
func (g *generation) deferredWhy() string {
	g.deferred.mu.Lock()
	defer g.deferred.mu.Unlock()
	if len(g.deferred.byName) == 0 {
		return ""
	}
	return g.deferred.why
}

// deferredRequests are the run's deferred authorization requests, in
// request order, as the paused event lists them.
func (g *generation) deferredRequests() []*agentdv1.AuthorizationRequest {
	g.deferred.mu.Lock()
	defer g.deferred.mu.Unlock()
	var out []*agentdv1.AuthorizationRequest
	for _, d := range g.deferred.byName {
		out = append(out, d.request)
	}
	slices.SortFunc(out, func(a, b *agentdv1.AuthorizationRequest) int { return compareRequestIDs(a.GetId(), b.GetId()) })
	return out
}

// compareRequestIDs orders "authorization_<n>" ids by n.
func compareRequestIDs(a, b string) int {
	if len(a) != len(b) {
		return len(a) - len(b)
	}
	switch {
	case a < b:
		return -1
	case a > b:
		return 1
	}
	return 0
}
