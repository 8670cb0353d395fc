package bridge

//lint:file-ignore SA1019 sampling is deprecated from MCP 2026-07-28 (SEP-2577); servers still sample

import (
	"context"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	bridgev1 "github.com/agentd/agentd/gen/go/agentd/bridge/v1"
	"github.com/agentd/agentd/internal/fault"
)

// sample asks agentd to answer the sampling/createMessage of the server
// serverName with its model, under the server's policy, and returns the answer for
// the server. The connection has refused a request with tools; sample
// refuses one with content other than text (images, audio), which
// agentd's model is not asked to read. An error answer (the policy
// denies, the person refused, the model failed) fails the server's
// request with agentd's error.
func (s *session) sample(ctx context.Context, serverName string, p *mcp.CreateMessageParams) (*mcp.CreateMessageResult, error) {
	r := &bridgev1.SamplingRequest{SystemPrompt: p.SystemPrompt, MaxTokens: p.MaxTokens}
	for i, m := range p.Messages {
		t, ok := m.Content.(*mcp.TextContent)
		if !ok {
			return nil, fault.New(fault.Invalid, "sampling message %d is not text; agentd samples text only", i)
		}
		r.Messages = append(r.Messages, &bridgev1.SamplingMessage{Role: string(m.Role), Text: t.Text})
	}
	a, err := s.ask(ctx, &bridgev1.ServerRequest{ServerName: serverName, Kind: &bridgev1.ServerRequest_Sampling{Sampling: r}})
	if err != nil {
		return nil, err
	}
	switch k := a.GetAnswer().(type) {
	case *bridgev1.AnswerServerRequestRequest_Sampling:
		return &mcp.CreateMessageResult{
			Role: "assistant", Content: &mcp.TextContent{Text: k.Sampling.GetText()},
			Model: k.Sampling.GetModel(), StopReason: k.Sampling.GetStopReason(),
		}, nil
	case *bridgev1.AnswerServerRequestRequest_Error:
		return nil, answerError(k.Error)
	default:
		return nil, fault.New(fault.Internal, "agentd answered the MCP server %q's sampling request with something else", serverName)
	}
}
