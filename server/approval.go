package server

import (
	agentdv1 "github.com/agentd/agentd/gen/go/agentd/v1"

	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"slices"
	"strings"

	"go.opentelemetry.io/otel/trace"

	"github.com/agentd/agentd/internal/fault"
	"github.com/agentd/agentd/internal/mcpdecl"
	"github.com/agentd/agentd/internal/toolerror"
)

// declinedOutput is what the model gets for a call the user declined.
var declinedOutput = toolerror.JSON("declined by user")

// gated reports whether a call to name waits for approval:
// requires_approval names it (by the name offered to the model or, for a
// prefixed MCP tool, its server's name for it), or its server's policy
// gates it.
func (g *generation) gated(name string, owner *toolOwner) bool {
	names := g.plan.agent.GetRequiresApproval()
	if slices.Contains(names, name) || slices.Contains(names, owner.toolName(name)) {
		return true
	}
	return owner.origin == agentdv1.ToolOrigin_TOOL_ORIGIN_MCP && mcpdecl.Gates(owner.server.decl.GetRequireApproval(), owner.serverTool)
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
	r.setWait(i, &wait{kind: waitsForApproval, id: req.GetId(), approval: req, counted: true})
	g := r.g
	g.s.approvals.asked(r.ctx, g.tenant, owner.serverName(), owner.toolName(c.GetName()))
	g.s.log.InfoContext(r.ctx, "approval requested", "audit", true, "principal", g.caller, "tenant", g.tenant, "generation", g.id,
		"request", req.GetId(), "tool", c.GetName(), "server", req.GetServerName(), "digest", req.GetDigest())
	return r.g.emit(r.ctx, &agentdv1.GenerateResponse{Event: &agentdv1.GenerateResponse_ApprovalRequest{ApprovalRequest: req}})
}

// decide applies an approval decision: declined calls get {"error":
// "declined by user"} without running; approved ones run once, on the
// server the approval is bound to — if its tool is no longer
// offered there, they get an error instead, without a call.
func (r *turnRun) decide(d *agentdv1.ApprovalDecision) error {
	g := r.g
	i, w, ok := r.waitingFor(waitsForApproval, d.GetRequestId())
	if !ok && g.answered.has(d.GetRequestId()) {
		// A repeated answer: the call runs at most once. (Pending requests
		// come first: a provider may reuse a call id in a later turn.)
		return nil
	}
	if !ok {
		return fault.InvalidRequest([]fault.Violation{{Field: "approval_decision.request_id", Description: fmt.Sprintf("%q is not a pending approval request", d.GetRequestId())}})
	}
	req := w.approval
	if d.GetDigest() != "" && d.GetDigest() != req.GetDigest() {
		return fault.InvalidRequest([]fault.Violation{{Field: "approval_decision.digest", Description: "does not match the approval request"}})
	}
	r.answered(waitsForApproval, d.GetRequestId(), false)
	g.answered.add(d.GetRequestId())
	c := r.calls[i]
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
	if r.waitSpan != nil {
		r.waitSpan.AddEvent("approval decided", trace.WithAttributes(attrApprovalRequestID.String(d.GetRequestId()), attrApprovalDecision.String(decision)))
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
