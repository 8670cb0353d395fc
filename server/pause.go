package server

import (
	statev1 "github.com/agentd/agentd/gen/go/agentd/state/v1"
	agentdv1 "github.com/agentd/agentd/gen/go/agentd/v1"

	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"time"

	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/agentd/agentd/internal/fault"
	"github.com/agentd/agentd/internal/quota"
	"github.com/agentd/agentd/internal/record"
)

// state records where each call stands, for a checkpoint.
func (r *turnRun) state() *statev1.PausedTurn {
	t := &statev1.PausedTurn{Turn: int32(r.turn), Calls: r.calls}
	pendingApproval := make(map[int]*agentdv1.ApprovalRequest)
	for id, i := range r.approvals {
		pendingApproval[i] = r.requests[id]
	}
	t.Authorizations = r.g.pendingAuthorizations()
	r.mu.Lock()
	defer r.mu.Unlock()
	for i, c := range r.calls {
		st := &statev1.CallState{}
		switch {
		case r.results[i] != nil:
			st.State = &statev1.CallState_Result{Result: r.results[i]}
		case pendingApproval[i] != nil:
			st.State = &statev1.CallState_Approval{Approval: pendingApproval[i]}
		case r.authWaits[i] != "":
			st.State = &statev1.CallState_Authorization{Authorization: &statev1.AuthorizationWait{ToolCallId: c.GetId(), RequestId: r.authWaits[i]}}
		case r.inputWaits[i] != nil:
			st.State = &statev1.CallState_Input{Input: r.inputWaits[i]}
		default:
			st.State = &statev1.CallState_FunctionCall{FunctionCall: &agentdv1.FunctionCall{CallId: c.GetId(), Name: c.GetName(), Arguments: c.GetArguments()}}
		}
		t.States = append(t.States, st)
	}
	return t
}

// pendingRequests lists the approval requests and function calls a paused
// turn waits for, in call order.
func pendingRequests(t *statev1.PausedTurn) ([]*agentdv1.ApprovalRequest, []*agentdv1.FunctionCall) {
	var approvals []*agentdv1.ApprovalRequest
	var functions []*agentdv1.FunctionCall
	for _, st := range t.GetStates() {
		switch s := st.GetState().(type) {
		case *statev1.CallState_Approval:
			approvals = append(approvals, s.Approval)
		case *statev1.CallState_FunctionCall:
			functions = append(functions, s.FunctionCall)
		}
	}
	return approvals, functions
}

// pendingInputs lists the input requests a paused turn waits for, in
// call order.
func pendingInputs(t *statev1.PausedTurn) []*agentdv1.InputRequest {
	var out []*agentdv1.InputRequest
	for _, st := range t.GetStates() {
		for _, in := range st.GetInput().GetInputs() {
			out = append(out, in.GetRequest())
		}
	}
	return out
}

// waitAuthorization reports whether call i's failure err is its server's
// refusal for want of an authorization deferred to a resume; the call
// then waits for it, to run again (X-M2).
func (r *turnRun) waitAuthorization(i int, owner *toolOwner, err error) bool {
	d := r.g.deferredFor(owner.serverName())
	if d == nil || fault.KindOf(err) != fault.Unauthenticated || r.ctx.Err() != nil {
		return false
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.authWaits == nil {
		r.authWaits = make(map[int]string)
	}
	r.authWaits[i] = d.request.GetId()
	return true
}

// waitInput reports whether call i's failure err is its server asking
// for deferred input; the call then waits for the resume's answers.
func (r *turnRun) waitInput(i int, err error) bool {
	var ir *errInputRequired
	if !errors.As(err, &ir) || r.ctx.Err() != nil {
		return false
	}
	w := &statev1.InputWait{ToolCallId: ir.callID, RequestState: ir.required.GetRequestState()}
	for _, key := range slices.Sorted(maps.Keys(ir.required.GetRequests())) {
		w.Inputs = append(w.Inputs, &statev1.PendingInput{Key: key, Request: r.g.inputRequest(ir.server, ir.callID, ir.required.GetRequests()[key])})
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.inputWaits == nil {
		r.inputWaits = make(map[int]*statev1.InputWait)
	}
	r.inputWaits[i] = w
	return true
}

// deferralPause is the end of a turn whose calls otherwise ended with
// err: a pause when authorizations or input requests were deferred (and
// nothing else failed it), err otherwise.
func (r *turnRun) deferralPause(err error) error {
	var pause *errPause
	if err != nil && !errors.As(err, &pause) {
		return err
	}
	why := r.g.pauseWhy()
	r.mu.Lock()
	waits := len(r.authWaits) + len(r.inputWaits)
	r.mu.Unlock()
	if why == "" && waits > 0 {
		why = "did not answer the MCP servers' requests" // the bridge deferred them itself
	}
	if why == "" {
		return err
	}
	if err == nil {
		return &errPause{why: why}
	}
	return err
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

// canDefer reports whether an unanswered authorization may pause the
// generation.
func (g *generation) canDefer() bool {
	return g.s.checkpoints != nil && g.s.sealer != nil
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
