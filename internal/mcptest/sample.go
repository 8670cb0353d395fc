package mcptest

//lint:file-ignore SA1019 sampling is deprecated from MCP 2026-07-28 (SEP-2577); the fake samples as servers still do

import (
	"context"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// SampleInput is sample's arguments.
type SampleInput struct {
	// Prompt is the user message's text.
	Prompt string `json:"prompt,omitempty"`
	// MaxTokens is the request's maxTokens.
	MaxTokens int64 `json:"max_tokens,omitempty"`
	// System is the request's system prompt.
	System string `json:"system,omitempty"`
	// Tools: the request offers a tool (CreateMessageWithTools).
	Tools bool `json:"tools,omitempty"`
	// Image: the user message is an image rather than text.
	Image bool `json:"image,omitempty"`
}

// SampleOutput is sample's structured result: the client's answer.
type SampleOutput struct {
	Role       string `json:"role"`
	Text       string `json:"text"`
	Model      string `json:"model"`
	StopReason string `json:"stop_reason,omitempty"`
}

// addSample adds the sample tool to s; stop as for addElicit.
func addSample(s *mcp.Server, stop <-chan struct{}) {
	mcp.AddTool(s, &mcp.Tool{Name: "sample", Description: "Asks the client's model for a completion."},
		func(ctx context.Context, req *mcp.CallToolRequest, in SampleInput) (*mcp.CallToolResult, SampleOutput, error) {
			ctx, cancel := context.WithCancel(ctx)
			defer cancel()
			go func() {
				select {
				case <-stop:
					cancel()
				case <-ctx.Done():
				}
			}()
			var content mcp.Content = &mcp.TextContent{Text: in.Prompt}
			if in.Image {
				content = &mcp.ImageContent{Data: []byte("not really a png"), MIMEType: "image/png"}
			}
			if ip := req.Session.InitializeParams(); ip != nil && ip.ProtocolVersion >= "2026-07-28" {
				// 2026-07-28: the request is an input request in the
				// result, and the answer comes with the call's retry.
				res, ok := req.Params.InputResponses["sample"].(*mcp.CreateMessageWithToolsResult)
				if !ok {
					p := &mcp.CreateMessageWithToolsParams{
						MaxTokens: in.MaxTokens, SystemPrompt: in.System,
						Messages: []*mcp.SamplingMessageV2{{Role: "user", Content: []mcp.Content{content}}},
					}
					if in.Tools {
						p.Tools = []*mcp.Tool{{Name: "lookup", InputSchema: map[string]any{"type": "object"}}}
					}
					return &mcp.CallToolResult{InputRequests: mcp.InputRequestMap{"sample": p}}, SampleOutput{}, nil
				}
				return nil, sampleOutput(res), nil
			}
			if in.Tools {
				res, err := req.Session.CreateMessageWithTools(ctx, &mcp.CreateMessageWithToolsParams{
					MaxTokens: in.MaxTokens, SystemPrompt: in.System,
					Messages: []*mcp.SamplingMessageV2{{Role: "user", Content: []mcp.Content{content}}},
					Tools:    []*mcp.Tool{{Name: "lookup", InputSchema: map[string]any{"type": "object"}}},
				})
				if err != nil {
					return nil, SampleOutput{}, err
				}
				return nil, sampleOutput(res), nil
			}
			res, err := req.Session.CreateMessage(ctx, &mcp.CreateMessageParams{
				MaxTokens: in.MaxTokens, SystemPrompt: in.System,
				Messages: []*mcp.SamplingMessage{{Role: "user", Content: content}},
			})
			if err != nil {
				return nil, SampleOutput{}, err
			}
			out := SampleOutput{Role: string(res.Role), Model: res.Model, StopReason: res.StopReason}
			if t, ok := res.Content.(*mcp.TextContent); ok {
				out.Text = t.Text
			}
			return nil, out, nil
		})
}

// sampleOutput is sample's result of the client's answer.
func sampleOutput(res *mcp.CreateMessageWithToolsResult) SampleOutput {
	out := SampleOutput{Role: string(res.Role), Model: res.Model, StopReason: res.StopReason}
	if len(res.Content) == 1 {
		if t, ok := res.Content[0].(*mcp.TextContent); ok {
			out.Text = t.Text
		}
	}
	return out
}
