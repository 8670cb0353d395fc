package server

import (
	bridgev1 "github.com/agentd/agentd/gen/go/agentd/bridge/v1"
	agentdv1 "github.com/agentd/agentd/gen/go/agentd/v1"

	"context"
	"errors"
	"fmt"

	"github.com/agentd/agentd/internal/bridgeclient"
)

// Answer answers what the generation's bridged servers ask of agentd
// (bridgeclient.Answerer).
func (g *generation) Answer(ctx context.Context, r *bridgev1.ServerRequest) *bridgev1.AnswerServerRequestRequest {
	switch k := r.GetKind().(type) {
	case *bridgev1.ServerRequest_Authorization:
		v, err := g.authorize(ctx, r.GetServerName(), k.Authorization)
		if err != nil {
			return bridgeclient.Refusal(err)
		}
		return &bridgev1.AnswerServerRequestRequest{Answer: &bridgev1.AnswerServerRequestRequest_Authorization{Authorization: v}}
	case *bridgev1.ServerRequest_Elicitation:
		return g.elicitAnswer(ctx, r)
	case *bridgev1.ServerRequest_Sampling:
		return g.sampleAnswer(ctx, r)
	}
	return nil
}

// toolCallKey holds, in an MCP tool call's context, the call's id: a
// server's request during the call names it.
type toolCallKey struct{}

func withToolCall(ctx context.Context, id string) context.Context {
	return context.WithValue(ctx, toolCallKey{}, id)
}

// awaitRedirect sends req to the attached client and waits for the
// redirect the person came back with; when nobody answers, the error is
// unanswered's, told why.
func (g *generation) awaitRedirect(ctx context.Context, req *agentdv1.AuthorizationRequest, unanswered func(why string) error) (string, error) {
	if g.canDefer() {
		// Losing the client while it waits pauses the generation, as
		// during an approval; the pause keeps it marked waiting.
		if gone := g.link.waiting(true); gone {
			return "", unanswered("has gone away")
		}
	}
	g.link.mail.expect(req.GetId())
	if err := g.emit(ctx, &agentdv1.GenerateResponse{Event: &agentdv1.GenerateResponse_AuthorizationRequest{AuthorizationRequest: req}}); err != nil {
		return "", err
	}
	answer, err := g.link.mail.await(ctx, req.GetId(), g.plan.answerTimeout)
	switch {
	case errors.Is(err, errUnanswered):
		return "", unanswered("half-closed the stream or went away")
	case errors.Is(err, errAnswerTimeout):
		return "", unanswered(fmt.Sprintf("did not answer within %s", g.plan.answerTimeout))
	case err != nil:
		return "", err
	}
	if g.canDefer() && g.link.waiting(false) {
		// The client went away as the answer came: losing it now stops
		// the generation, as it would have outside the wait.
		g.link.cancel(g.link.gone())
	}
	redirect, _ := answer.(string)
	return redirect, nil
}
