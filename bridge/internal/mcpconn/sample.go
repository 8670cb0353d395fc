package mcpconn

//lint:file-ignore SA1019 sampling is deprecated from MCP 2026-07-28 (SEP-2577); servers still sample

import (
	"context"
	"fmt"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// samplingCapabilities is what agentd declares of sampling: plain
// sampling, without tools (sampling.tools) or context inclusion. The
// policy of each server is agentd's, which refuses what it denies.
var samplingCapabilities = &mcp.SamplingCapabilities{}

// errSamplingTools is the refusal of a sampling request that offers
// tools: agentd's model answers with text alone.
var errSamplingTools = &jsonrpc.Error{Code: jsonrpc.CodeInvalidParams, Message: "sampling with tools is not supported: this client answers sampling requests with text only"}

// sample is the client's sampling/createMessage handler. The
// handler takes the request with tools (the go-sdk's other handler would
// drop them unseen), so that a request offering tools, or carrying tool
// uses or results, is refused with an error the server can read; the
// rest goes, as its first and only content blocks, to the session it is
// made for, like an elicitation, holding the read timers of the calls it
// may belong to while it waits (for the model, and perhaps for a person
// who approves it). An error returned here reaches the server as a
// JSON-RPC error.
func (c *core) sample(ctx context.Context, req *mcp.CreateMessageWithToolsRequest) (*mcp.CreateMessageWithToolsResult, error) {
	base, err := textSampling(req.Params)
	if err != nil {
		return nil, err
	}
	owner, calls := c.askee(ctx)
	if owner == nil || owner.Sample == nil {
		c.log.Info("mcp server asked for a sample that no session can answer; refused", "calls_in_flight", len(calls))
		return nil, &jsonrpc.Error{Code: jsonrpc.CodeInvalidRequest, Message: "no session of this client can answer the sampling request"}
	}
	sctx, end := askContext(ctx, calls)
	defer end()
	res, err := owner.Sample(sctx, base)
	if err != nil {
		return nil, err
	}
	return &mcp.CreateMessageWithToolsResult{Content: []mcp.Content{res.Content}, Model: res.Model, Role: res.Role, StopReason: res.StopReason}, nil
}

// textSampling is a sampling request in the basic form, each message's
// one content block; a request that offers tools, or carries tool uses or
// results, is refused with an error the server can read.
func textSampling(p *mcp.CreateMessageWithToolsParams) (*mcp.CreateMessageParams, error) {
	if len(p.Tools) > 0 || p.ToolChoice != nil {
		return nil, errSamplingTools
	}
	base := &mcp.CreateMessageParams{MaxTokens: p.MaxTokens, SystemPrompt: p.SystemPrompt, StopSequences: p.StopSequences, Temperature: p.Temperature}
	for i, m := range p.Messages {
		if len(m.Content) != 1 {
			return nil, &jsonrpc.Error{Code: jsonrpc.CodeInvalidParams, Message: fmt.Sprintf("sampling message %d has %d content blocks; this client takes one text block a message, and no tools", i, len(m.Content))}
		}
		switch m.Content[0].(type) {
		case *mcp.ToolUseContent, *mcp.ToolResultContent:
			return nil, errSamplingTools
		}
		base.Messages = append(base.Messages, &mcp.SamplingMessage{Role: m.Role, Content: m.Content[0]})
	}
	return base, nil
}
