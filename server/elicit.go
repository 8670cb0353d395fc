package server

import (
	"context"
	"errors"
	"fmt"

	"google.golang.org/protobuf/types/known/structpb"

	bridgev1 "github.com/agentd/agentd/gen/go/agentd/bridge/v1"
	agentdv1 "github.com/agentd/agentd/gen/go/agentd/v1"
	"github.com/agentd/agentd/internal/fault"
)

// toolCallKey holds, in an MCP tool call's context, the call's id: a
// server's request during the call names it.
type toolCallKey struct{}

func withToolCall(ctx context.Context, id string) context.Context {
	return context.WithValue(ctx, toolCallKey{}, id)
}

// elicit relays a server's elicitation (X-M4) to the client as an input
// request and returns the client's answer for the server. The agent's
// elicitation policy DENY declines at once. A client that is not there,
// or does not answer in time, cancels the request: on protocol
// 2025-11-25 the server's request lives in its MCP session, which cannot
// outlast a pause.
func (g *generation) elicit(ctx context.Context, server string, e *bridgev1.Elicitation) *bridgev1.ElicitationResult {
	if g.plan.agent.GetElicitation() == agentdv1.ElicitationPolicy_ELICITATION_POLICY_DENY {
		return &bridgev1.ElicitationResult{Action: "decline"}
	}
	cancelled := &bridgev1.ElicitationResult{Action: "cancel"}
	if g.link.clientless {
		return cancelled
	}
	callID, _ := ctx.Value(toolCallKey{}).(string)
	req := &agentdv1.InputRequest{
		Id:              fmt.Sprintf("input_%d", g.s.inputs.Add(1)),
		ServerName:      server,
		ToolCallId:      callID,
		Message:         e.GetMessage(),
		Mode:            agentdv1.InputMode_INPUT_MODE_FORM,
		RequestedSchema: e.GetRequestedSchema(),
	}
	if e.GetMode() == "url" {
		req.Mode, req.Url, req.ElicitationId, req.RequestedSchema = agentdv1.InputMode_INPUT_MODE_URL, e.GetUrl(), e.GetElicitationId(), nil
	}
	g.link.mail.expect(req.GetId())
	if err := g.emit(ctx, &agentdv1.GenerateResponse{Event: &agentdv1.GenerateResponse_InputRequest{InputRequest: req}}); err != nil {
		return cancelled
	}
	answer, err := g.link.mail.await(ctx, req.GetId(), g.plan.answerTimeout)
	if err != nil {
		if !errors.Is(err, errUnanswered) && !errors.Is(err, errAnswerTimeout) {
			return cancelled // the call, or the generation, ended
		}
		g.s.log.InfoContext(ctx, "input request cancelled: the client did not answer", "tenant", g.tenant, "generation", g.id, "server", server, "request", req.GetId(), "why", err)
		return cancelled
	}
	r, _ := answer.(*agentdv1.InputResponse)
	switch r.GetAction() {
	case agentdv1.InputAction_INPUT_ACTION_ACCEPT:
		content := r.GetContent()
		if content == nil {
			content = &structpb.Struct{}
		}
		return &bridgev1.ElicitationResult{Action: "accept", Content: content}
	case agentdv1.InputAction_INPUT_ACTION_DECLINE:
		return &bridgev1.ElicitationResult{Action: "decline"}
	default:
		return cancelled
	}
}

// elicitAnswer is the bridge's answer to an elicitation.
func (g *generation) elicitAnswer(ctx context.Context, r *bridgev1.ServerRequest) *bridgev1.AnswerServerRequestRequest {
	if r.GetElicitation() == nil {
		return refusal(fault.New(fault.Invalid, "an elicitation request without its elicitation"))
	}
	return &bridgev1.AnswerServerRequestRequest{Answer: &bridgev1.AnswerServerRequestRequest_Elicitation{Elicitation: g.elicit(ctx, r.GetServerName(), r.GetElicitation())}}
}
