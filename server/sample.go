package server

import (
	bridgev1 "github.com/agentd/agentd/gen/go/agentd/bridge/v1"
	agentdv1 "github.com/agentd/agentd/gen/go/agentd/v1"

	"cmp"
	"context"
	"fmt"
	"strings"

	"go.opentelemetry.io/otel/attribute"

	"github.com/agentd/agentd/internal/auth"
	"github.com/agentd/agentd/internal/bridgeclient"
	"github.com/agentd/agentd/internal/fault"
	"github.com/agentd/agentd/internal/mcpdecl"
	"github.com/agentd/agentd/providers"
)

// defaultSampleMaxTokens caps a server's samples when its
// Sampling.max_tokens is 0: room for a short answer, which is
// what servers sample for (a summary, a classification), at a bounded
// cost.
const defaultSampleMaxTokens = 1024

// grantedTokens is what a sample may have: what the server asked for,
// at most the server's cap; the cap when it asked for none.
func grantedTokens(decl *agentdv1.MCPServer, asked int64) int {
	limit := int64(cmp.Or(decl.GetSampling().GetMaxTokens(), defaultSampleMaxTokens))
	if asked <= 0 || asked > limit {
		return int(limit)
	}
	return int(asked)
}

// foldSamples adds what the samples used since the last fold to the
// generation's usage: the loop's goroutine calls it, between tool calls
// and model turns, as it owns total.
func (g *generation) foldSamples() {
	if u := g.samples.take(); u != nil {
		addUsage(g.total, u)
		g.ran.modelTurn(u)
	}
}

// sampleAnswer is the bridge's answer to a sampling request.
func (g *generation) sampleAnswer(ctx context.Context, r *bridgev1.ServerRequest) *bridgev1.AnswerServerRequestRequest {
	if r.GetSampling() == nil {
		return bridgeclient.Refusal(fault.New(fault.Invalid, "a sampling request without its request"))
	}
	res, err := g.sample(ctx, r.GetServerName(), r.GetSampling())
	if err != nil {
		return bridgeclient.Refusal(err)
	}
	return &bridgev1.AnswerServerRequestRequest{Answer: &bridgev1.AnswerServerRequestRequest_Sampling{Sampling: res}}
}

// sample answers a server's sampling request under the server's
// policy: DENY refuses it; ASK asks the client first, and refuses it
// unless the client approves in time (a client that is not there, has
// half-closed, or does not answer within answer_timeout refuses it: on
// protocol 2025-11-25 the server's request lives in its MCP session,
// which cannot outlast a pause); ALLOW, and an approved ASK, have the
// agent's provider and model answer, with at most the granted tokens.
// Its error is what the server reads.
func (g *generation) sample(ctx context.Context, server string, r *bridgev1.SamplingRequest) (*bridgev1.SamplingResult, error) {
	sp := g.plan.server(server)
	if sp == nil {
		return nil, fault.New(fault.Internal, "the bridge asked for a sample for %q, which is not an MCP server of the generation", server)
	}
	granted := grantedTokens(sp.decl, r.GetMaxTokens())
	switch mcpdecl.SamplingMode(sp.decl) {
	case agentdv1.SamplingMode_SAMPLING_MODE_ALLOW:
	case agentdv1.SamplingMode_SAMPLING_MODE_ASK:
		if err := g.approveSample(ctx, server, r, granted); err != nil {
			return nil, err
		}
	default:
		return nil, fault.New(fault.Permission, "sampling is not allowed for the MCP server %q (its sampling policy is deny)", server)
	}
	return g.runSample(ctx, server, r, granted)
}

// approveSample asks the client to approve a sample, with an
// ApprovalRequest on the stream, and waits for its decision.
func (g *generation) approveSample(ctx context.Context, server string, r *bridgev1.SamplingRequest, granted int) error {
	var req *agentdv1.ApprovalRequest
	answer, none, err := g.ask(ctx, question{request: func() (string, *agentdv1.GenerateResponse) {
		req = g.sampleApproval(ctx, server, r, granted)
		g.s.log.InfoContext(ctx, "sampling approval requested", "audit", true, "principal", g.caller, "tenant", g.tenant, "generation", g.id,
			"request", req.GetId(), "server", server)
		return req.GetId(), &agentdv1.GenerateResponse{Event: &agentdv1.GenerateResponse_ApprovalRequest{ApprovalRequest: req}}
	}})
	switch {
	case err != nil:
		return err // the call, or the generation, ended
	case none != nil:
		if none.cause != nil {
			g.s.log.InfoContext(ctx, "sampling request refused: the client did not answer", "tenant", g.tenant, "generation", g.id, "server", server, "request", req.GetId(), "why", none.cause)
		}
		return fault.New(fault.FailedPrecondition, "sampling needs a person's approval, which the client did not give in time; the request is refused")
	}
	d := answer.approval
	g.s.log.InfoContext(ctx, "sampling approval decided", "audit", true, "principal", cmp.Or(answer.by, auth.Anonymous), "tenant", g.tenant, "generation", g.id,
		"request", req.GetId(), "server", server, "approved", d.GetApproved())
	if !d.GetApproved() {
		return fault.New(fault.Permission, "the user declined the sampling request")
	}
	return nil
}

// sampleApproval is the approval request, with a new id, that asks the
// client whether server may have a sample of at most granted tokens.
func (g *generation) sampleApproval(ctx context.Context, server string, r *bridgev1.SamplingRequest, granted int) *agentdv1.ApprovalRequest {
	callID, _ := ctx.Value(toolCallKey{}).(string)
	approval := &agentdv1.SamplingApproval{ServerName: server, SystemPrompt: r.GetSystemPrompt(),
		MaxTokensRequested: int32(min(r.GetMaxTokens(), 1<<31-1)), MaxTokensGranted: int32(granted)}
	for _, m := range r.GetMessages() {
		approval.Messages = append(approval.Messages, &agentdv1.SamplingMessage{Role: m.GetRole(), Text: m.GetText()})
	}
	return &agentdv1.ApprovalRequest{
		Id:         fmt.Sprintf("%s%d", samplingPrefix, g.s.inputs.Add(1)),
		ToolCallId: callID,
		ServerName: server,
		Prompt:     fmt.Sprintf("Allow %s to ask the model?", server),
		Sampling:   approval,
	}
}

// runSample has the agent's provider and model answer a sample, with the
// agent's provider options, no tools and at most granted tokens, in a
// span of its own ("sampling <server>"); what it used counts in the
// generation's usage.
func (g *generation) runSample(ctx context.Context, server string, r *bridgev1.SamplingRequest, granted int) (_ *bridgev1.SamplingResult, err error) {
	model := g.plan.agent.GetModel()
	ctx, chat := g.startModelCall(ctx, "sampling "+server, model,
		attribute.Int("gen_ai.request.max_tokens", granted),
		attribute.String("agentd.mcp.server", server),
		attribute.String("agentd.model_call", "sampling"))
	req := &providers.Request{Model: model, Instructions: r.GetSystemPrompt(), Options: g.plan.options(), MaxTokens: granted, Sample: true}
	for _, m := range r.GetMessages() {
		role := agentdv1.Role_ROLE_USER
		if m.GetRole() == "assistant" {
			role = agentdv1.Role_ROLE_ASSISTANT
		}
		req.Messages = append(req.Messages, &agentdv1.Message{Role: role, Parts: []*agentdv1.Part{{Kind: &agentdv1.Part_Text{Text: m.GetText()}}}})
	}
	hold, err := g.reserveBudgets(ctx, func() *agentdv1.Usage { return g.estimate(req.Messages, req.Instructions, int64(granted)) }, sampleCall)
	if err != nil {
		chat.end(ctx, nil, err)
		return nil, err
	}
	var usage *agentdv1.Usage
	defer func() {
		chat.end(ctx, usage, err)
		if err != nil && usage != nil {
			g.price(ctx, usage) // billed all the same
		}
		g.settleBudgets(ctx, hold, usage)
	}()
	var text strings.Builder
	stop := agentdv1.StopReason_STOP_REASON_UNSPECIFIED
	if err := chat.stream(ctx, g.plan.provider, req, func(ev providers.Event) error {
		switch ev := ev.(type) {
		case *providers.TextDelta:
			text.WriteString(ev.Text)
		case *providers.Usage:
			usage = ev.Usage
		case *providers.Stop:
			stop = ev.Reason
			chat.response = ev.Response
		}
		return nil
	}); err != nil {
		return nil, err
	}
	if usage != nil {
		g.price(ctx, usage)
		g.samples.add(usage)
	}
	return &bridgev1.SamplingResult{Text: text.String(), Model: cmp.Or(chat.response.Model, model, g.plan.agent.GetProvider()), StopReason: sampleStopReason(stop)}, nil
}

// sampleStopReason is MCP's word for why a sample ended; "" when MCP
// has none for it.
func sampleStopReason(r agentdv1.StopReason) string {
	switch r {
	case agentdv1.StopReason_STOP_REASON_END_TURN:
		return "endTurn"
	case agentdv1.StopReason_STOP_REASON_MAX_TOKENS:
		return "maxTokens"
	case agentdv1.StopReason_STOP_REASON_STOP_SEQUENCE:
		return "stopSequence"
	}
	return ""
}
