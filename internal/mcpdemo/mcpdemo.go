// Package mcpdemo is the small MCP server built into agentd (`agentd
// mcp-demo`), so that the demo, the examples and the tests need nothing
// outside the repository. It speaks MCP over stdio with the official
// go-sdk and offers three tools:
//
//   - echo {text}: returns the text;
//   - add {a, b}: returns {"sum": a+b} as structured content;
//   - fail {message}: fails with the message (an isError result).
package mcpdemo

import (
	"context"
	"errors"
	"io"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// EchoInput is echo's arguments.
type EchoInput struct {
	Text string `json:"text" jsonschema:"the text to return"`
}

// AddInput is add's arguments.
type AddInput struct {
	A float64 `json:"a" jsonschema:"the first addend"`
	B float64 `json:"b" jsonschema:"the second addend"`
}

// AddOutput is add's structured result.
type AddOutput struct {
	Sum float64 `json:"sum"`
}

// FailInput is fail's arguments.
type FailInput struct {
	Message string `json:"message" jsonschema:"the error message to fail with"`
}

// NewServer returns the demo server.
func NewServer() *mcp.Server {
	// Its tools never change: on 2026-07-28 it lets clients cache its
	// lists for an hour (ttlMs), as long as a cache's own TTL allows.
	s := mcp.NewServer(&mcp.Implementation{Name: "agentd-demo", Version: "1"}, &mcp.ServerOptions{
		SetCacheable: func(_ context.Context, _ mcp.Request, c *mcp.Cacheable) { c.TTLMs = int(time.Hour.Milliseconds()) },
	})
	mcp.AddTool(s, &mcp.Tool{Name: "echo", Description: "Returns the text it is given."},
		func(_ context.Context, _ *mcp.CallToolRequest, in EchoInput) (*mcp.CallToolResult, any, error) {
			return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: in.Text}}}, nil, nil
		})
	mcp.AddTool(s, &mcp.Tool{Name: "add", Description: "Adds two numbers."},
		func(_ context.Context, _ *mcp.CallToolRequest, in AddInput) (*mcp.CallToolResult, AddOutput, error) {
			return nil, AddOutput{Sum: in.A + in.B}, nil
		})
	mcp.AddTool(s, &mcp.Tool{Name: "fail", Description: "Fails with the given message."},
		func(_ context.Context, _ *mcp.CallToolRequest, in FailInput) (*mcp.CallToolResult, any, error) {
			return nil, nil, errors.New(in.Message)
		})
	return s
}

// Run serves the demo server on r and w until r ends or ctx is cancelled.
func Run(ctx context.Context, r io.ReadCloser, w io.WriteCloser) error {
	return NewServer().Run(ctx, &mcp.IOTransport{Reader: r, Writer: w})
}
