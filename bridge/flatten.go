package bridge

import (
	"bytes"
	"encoding/json"
	"fmt"
	"strings"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	bridgev1 "github.com/agentd/agentd/gen/go/agentd/bridge/v1"
	"github.com/agentd/agentd/internal/toolerror"
)

// emptyErrorMessage stands in for a JSON-RPC error without a message.
const emptyErrorMessage = "The MCP server returned an empty error."

// flattenRPCError turns a tool's JSON-RPC error into data for the model.
func flattenRPCError(err *jsonrpc.Error) *bridgev1.CallToolResponse {
	return &bridgev1.CallToolResponse{Output: errorOutput(err.Message), IsError: true}
}

// errorOutput is a tool's failure as the model reads it: {"error": msg},
// with emptyErrorMessage for a blank msg.
func errorOutput(msg string) string {
	if strings.TrimSpace(msg) == "" {
		msg = emptyErrorMessage
	}
	return toolerror.JSON(msg)
}

// flatten turns a tool result into what the model sees: structured content
// as JSON if present, else the text blocks joined by newlines; an isError
// result as {"error": "<its text>"}. Non-text blocks are kept as
// attachments.
func flatten(res *mcp.CallToolResult) *bridgev1.CallToolResponse {
	var texts []string
	var attachments []*bridgev1.Content
	for _, c := range res.Content {
		if t, ok := c.(*mcp.TextContent); ok {
			texts = append(texts, t.Text)
		} else if a := attachment(c); a != nil {
			attachments = append(attachments, a)
		}
	}
	return &bridgev1.CallToolResponse{IsError: res.IsError, Attachments: attachments, Output: output(res, texts)}
}

// attachment is a content block other than text as the model's client
// gets it; nil for a block it does not pass on.
func attachment(c mcp.Content) *bridgev1.Content {
	switch c := c.(type) {
	case *mcp.ImageContent:
		return &bridgev1.Content{Kind: bridgev1.ContentKind_CONTENT_KIND_IMAGE, MimeType: c.MIMEType, Source: &bridgev1.Content_Data{Data: c.Data}}
	case *mcp.AudioContent:
		return &bridgev1.Content{Kind: bridgev1.ContentKind_CONTENT_KIND_AUDIO, MimeType: c.MIMEType, Source: &bridgev1.Content_Data{Data: c.Data}}
	case *mcp.ResourceLink:
		return &bridgev1.Content{Kind: bridgev1.ContentKind_CONTENT_KIND_RESOURCE_LINK, MimeType: c.MIMEType, Name: c.Name, Source: &bridgev1.Content_Uri{Uri: c.URI}}
	case *mcp.EmbeddedResource:
		r := c.Resource
		if r == nil {
			return nil
		}
		data := r.Blob
		if data == nil {
			data = []byte(r.Text)
		}
		return &bridgev1.Content{Kind: bridgev1.ContentKind_CONTENT_KIND_RESOURCE, MimeType: r.MIMEType, Name: r.URI, Source: &bridgev1.Content_Data{Data: data}}
	}
	return nil
}

// output is a result's text for the model: an isError result's text as
// {"error": ...}, structured content as JSON, or the text blocks.
func output(res *mcp.CallToolResult, texts []string) string {
	joined := strings.Join(texts, "\n")
	if res.IsError {
		return errorOutput(joined)
	}
	if res.StructuredContent == nil {
		return joined
	}
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(res.StructuredContent); err != nil {
		return joined
	}
	return strings.TrimSuffix(b.String(), "\n")
}

// capResult replaces a result larger than limit bytes (its output plus its
// attachments' data) with an error for the model that names the size and
// the setting, so that one huge answer neither floods the model's context
// nor fails the generation.
func capResult(res *bridgev1.CallToolResponse, tool string, limit int) *bridgev1.CallToolResponse {
	size := len(res.GetOutput())
	for _, a := range res.GetAttachments() {
		size += len(a.GetData()) + len(a.GetUri())
	}
	if limit <= 0 || size <= limit {
		return res
	}
	return &bridgev1.CallToolResponse{IsError: true, Output: toolerror.JSON(fmt.Sprintf(
		"the result of the tool %q is %d bytes, more than the %d bytes agentd passes on (bridge.max_result_bytes); ask it for less, such as a narrower query or one page",
		tool, size, limit))}
}
