package server

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"maps"
	"slices"
	"strings"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/trace"

	agentdv1 "github.com/agentd/agentd/gen/go/agentd/v1"
	"github.com/agentd/agentd/internal/fault"
	"github.com/agentd/agentd/internal/telemetry"
	"github.com/agentd/agentd/internal/toolerror"
)

// declinedOutput is what the model gets for a call the user declined.
var declinedOutput = toolerror.JSON("declined by user")

// policyCouldGate reports whether an approval policy could gate any tool.
// {always: []} gates nothing.
func policyCouldGate(p *agentdv1.ApprovalPolicy) bool {
	switch {
	case p == nil:
		return false
	case p.GetMode() == agentdv1.ApprovalMode_APPROVAL_MODE_ALWAYS:
		return true
	case p.GetMode() == agentdv1.ApprovalMode_APPROVAL_MODE_NEVER:
		return false
	}
	return len(p.GetAlways().GetToolNames()) > 0 || p.GetNever() != nil
}

// policyGates reports whether p gates the tool (R-A1).
func policyGates(p *agentdv1.ApprovalPolicy, tool string) bool {
	switch {
	case p == nil:
		return false
	case p.GetMode() == agentdv1.ApprovalMode_APPROVAL_MODE_ALWAYS:
		return true
	case p.GetMode() == agentdv1.ApprovalMode_APPROVAL_MODE_NEVER:
		return false
	}
	if slices.Contains(p.GetAlways().GetToolNames(), tool) {
		return true
	}
	return p.GetNever() != nil && !slices.Contains(p.GetNever().GetToolNames(), tool)
}

// requiresApprovalServedBy lists the requires_approval names that this
// server may offer: with allowed_tools, those it allows; without, every
// name that is not one of the agent's own tools, since the server's tools
// are unknown until agentd connects to it.
func requiresApprovalServedBy(agent *agentdv1.Agent, decl *agentdv1.MCPServer, agentTools map[string]int) []string {
	var names []string
	for _, name := range agent.GetRequiresApproval() {
		if allowed := decl.GetAllowedTools(); len(allowed) > 0 {
			if slices.Contains(allowed, name) {
				names = append(names, name)
			}
		} else if _, own := agentTools[name]; !own {
			names = append(names, name)
		}
	}
	return names
}

// gated reports whether a call to name waits for approval (R-A1, R-A4):
// requires_approval names it (by the name offered to the model or, for a
// prefixed MCP tool, its server's name for it), or its server's policy
// gates it.
func (g *generation) gated(name string, owner *toolOwner) bool {
	names := g.plan.agent.GetRequiresApproval()
	if slices.Contains(names, name) || slices.Contains(names, owner.toolName(name)) {
		return true
	}
	return owner.origin == agentdv1.ToolOrigin_TOOL_ORIGIN_MCP && policyGates(owner.server.decl.GetRequireApproval(), owner.serverTool)
}

// approvalDigest binds an approval to (server, tool, arguments): the
// arguments are canonicalized, so key order and spacing do not matter.
func approvalDigest(server, tool, arguments string) string {
	canonical := arguments
	// Numbers stay as written (UseNumber): as float64, integers beyond 2^53
	// that differ would digest alike.
	dec := json.NewDecoder(strings.NewReader(arguments))
	dec.UseNumber()
	var v any
	if dec.Decode(&v) == nil && !dec.More() {
		if _, err := dec.Token(); errors.Is(err, io.EOF) {
			if b, err := json.Marshal(v); err == nil {
				canonical = string(b)
			}
		}
	}
	sum := sha256.Sum256([]byte(server + "\x00" + tool + "\x00" + canonical))
	return hex.EncodeToString(sum[:])
}

// askApproval asks the client whether call i may run: an approval request
// whose digest binds the decision to the call's server, tool and arguments.
func (r *turnRun) askApproval(i int, owner *toolOwner) error {
	c := r.calls[i]
	req := &agentdv1.ApprovalRequest{
		Id:         "approval_" + c.GetId(),
		ToolCallId: c.GetId(),
		ServerName: owner.serverName(),
		ToolName:   c.GetName(),
		Arguments:  c.GetArguments(),
		Prompt:     fmt.Sprintf("Allow %s to run?", c.GetName()),
		Digest:     approvalDigest(owner.serverName(), owner.toolName(c.GetName()), c.GetArguments()),
	}
	r.approvals[req.GetId()] = i
	r.requests[req.GetId()] = req
	g := r.g
	r.asked[req.GetId()] = true
	g.s.approvals.asked(r.ctx, g.tenant, owner.serverName(), owner.toolName(c.GetName()))
	g.s.log.InfoContext(r.ctx, "approval requested", "audit", true, "principal", g.caller, "tenant", g.tenant, "generation", g.id,
		"request", req.GetId(), "tool", c.GetName(), "server", req.GetServerName(), "digest", req.GetDigest())
	return r.g.emit(r.ctx, &agentdv1.GenerateResponse{Event: &agentdv1.GenerateResponse_ApprovalRequest{ApprovalRequest: req}})
}

// decide applies an approval decision: declined calls get {"error":
// "declined by user"} without running; approved ones run once, on the
// server the approval is bound to (X-A10) — if its tool is no longer
// offered there, they get an error instead, without a call (R-A8).
func (r *turnRun) decide(d *agentdv1.ApprovalDecision) error {
	g := r.g
	i, ok := r.approvals[d.GetRequestId()]
	if !ok && g.answered.has(d.GetRequestId()) {
		// A repeated answer: the call runs at most once. (Pending requests
		// come first: a provider may reuse a call id in a later turn.)
		return nil
	}
	if !ok {
		return fault.InvalidRequest([]fault.Violation{{Field: "approval_decision.request_id", Description: fmt.Sprintf("%q is not a pending approval request", d.GetRequestId())}})
	}
	req := r.requests[d.GetRequestId()]
	if d.GetDigest() != "" && d.GetDigest() != req.GetDigest() {
		return fault.InvalidRequest([]fault.Violation{{Field: "approval_decision.digest", Description: "does not match the approval request"}})
	}
	delete(r.approvals, d.GetRequestId())
	delete(r.requests, d.GetRequestId())
	g.answered.add(d.GetRequestId())
	c := r.calls[i]
	if r.asked[d.GetRequestId()] {
		delete(r.asked, d.GetRequestId())
		g.s.approvals.settled(r.ctx, g.tenant)
	}
	decision := decisionDenied
	if d.GetApproved() {
		decision = decisionApproved
		r.approved++
	} else {
		r.denied++
	}
	tool := c.GetName() // a tool no longer offered: the name it had
	if owner := g.owners[c.GetName()]; owner != nil {
		tool = owner.toolName(c.GetName())
	}
	g.s.approvals.decision(r.ctx, g.tenant, req.GetServerName(), tool, decision)
	if r.wait != nil {
		r.wait.AddEvent("approval decided", trace.WithAttributes(attrApprovalRequestID.String(d.GetRequestId()), attrApprovalDecision.String(decision)))
	}
	g.s.log.Info("approval decided", "audit", true, "principal", g.caller, "tenant", g.tenant, "generation", g.id,
		"request", d.GetRequestId(), "tool", c.GetName(), "server", req.GetServerName(), "digest", req.GetDigest(), "approved", d.GetApproved())
	if !d.GetApproved() {
		r.setResult(i, &agentdv1.ToolResult{ToolCallId: c.GetId(), Name: c.GetName(), Output: declinedOutput, IsError: true})
		g.checkpoint(r.runningState())
		return nil
	}
	owner := g.owners[c.GetName()]
	if owner == nil || approvalDigest(owner.serverName(), owner.toolName(c.GetName()), c.GetArguments()) != req.GetDigest() {
		what := "is no longer offered"
		if req.GetServerName() != "" {
			what = "is no longer offered by its MCP server"
		}
		r.setResult(i, &agentdv1.ToolResult{ToolCallId: c.GetId(), Name: c.GetName(), IsError: true,
			Output: toolerror.JSON(fmt.Sprintf("%s %s", c.GetName(), what))})
		g.checkpoint(r.runningState())
		return nil
	}
	r.started = true
	return r.start(i, owner)
}

// The attributes of the await_approval span (X-O2).
const (
	attrApprovalRequestIDs = attribute.Key("agentd.approval.request_ids")
	attrFunctionCallIDs    = attribute.Key("agentd.function.call_ids")
	attrApprovalRequestID  = attribute.Key("agentd.approval.request_id")
	attrApprovalDecision   = attribute.Key("agentd.approval.decision")
)

// The outcomes of a wait for answers, as its span's
// agentd.approval.decision, beyond decisionApproved and decisionDenied.
const (
	waitMixed     = "mixed"     // some requests approved, some denied
	waitAnswered  = "answered"  // function results only: nothing to decide
	waitPaused    = "paused"    // the client went, half-closed or is not attached
	waitExpired   = "expired"   // the answer timeout ran out: the generation paused
	waitCancelled = "cancelled" // the generation was cancelled, or lost its client
	waitFailed    = "failed"    // an invalid answer, or a call that failed the generation
)

// awaitSpan starts the await_approval span of the turn's wait for its
// client: INTERNAL, under the invoke_agent span, naming the approval
// requests and function calls it waits for.
func (r *turnRun) awaitSpan() trace.Span {
	var attrs []attribute.KeyValue
	if ids := slices.Sorted(maps.Keys(r.approvals)); len(ids) > 0 {
		attrs = append(attrs, attrApprovalRequestIDs.StringSlice(ids))
	}
	if ids := slices.Sorted(maps.Keys(r.functions)); len(ids) > 0 {
		attrs = append(attrs, attrFunctionCallIDs.StringSlice(ids))
	}
	_, span := r.g.s.tracer.Start(r.ctx, "await_approval", trace.WithSpanKind(trace.SpanKindInternal), trace.WithAttributes(attrs...))
	return span
}

// endAwaitSpan ends a wait's span with how it ended, given the approvals
// and denials decided during it: an error only when the wait failed the
// generation; a pause, an expiry and a cancellation are not errors.
func endAwaitSpan(span trace.Span, approved, denied int, err error) {
	var pause *errPause
	outcome := ""
	switch {
	case errors.As(err, &pause) && pause.expired:
		outcome = waitExpired
	case errors.As(err, &pause):
		outcome = waitPaused
	case errors.Is(err, context.Canceled) || fault.KindOf(err) == fault.Canceled:
		outcome = waitCancelled
	case err != nil:
		outcome = waitFailed
		span.SetAttributes(attribute.String("error.type", telemetry.ErrorType(err)))
		span.SetStatus(codes.Error, telemetry.ErrorType(err))
	case approved > 0 && denied > 0:
		outcome = waitMixed
	case approved > 0:
		outcome = decisionApproved
	case denied > 0:
		outcome = decisionDenied
	default:
		outcome = waitAnswered
	}
	span.SetAttributes(attrApprovalDecision.String(outcome))
	span.End()
}
