package bridge

import (
	"fmt"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"
	"google.golang.org/protobuf/testing/protocmp"
	"google.golang.org/protobuf/types/known/structpb"

	bridgev1 "github.com/agentd/agentd/gen/go/agentd/bridge/v1"
)

func TestFlatten(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name string
		res  *mcp.CallToolResult
		want *bridgev1.CallToolResponse
	}{
		{
			name: "R-T4 no content",
			res:  &mcp.CallToolResult{},
			want: &bridgev1.CallToolResponse{},
		},
		{
			name: "R-T4 text blocks joined by newlines",
			res:  &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: "one"}, &mcp.TextContent{Text: "two"}, &mcp.TextContent{Text: ""}}},
			want: &bridgev1.CallToolResponse{Output: "one\ntwo\n"},
		},
		{
			name: "R-T4 structured content wins over text",
			res: &mcp.CallToolResult{
				Content:           []mcp.Content{&mcp.TextContent{Text: `{"sum": 3}`}},
				StructuredContent: map[string]any{"sum": 3, "note": "<a&b>"},
			},
			want: &bridgev1.CallToolResponse{Output: `{"note":"<a&b>","sum":3}`},
		},
		{
			name: "R-T4 structured content that is not JSON falls back to text",
			res: &mcp.CallToolResult{
				Content:           []mcp.Content{&mcp.TextContent{Text: "fallback"}},
				StructuredContent: map[string]any{"f": func() {}},
			},
			want: &bridgev1.CallToolResponse{Output: "fallback"},
		},
		{
			name: "R-T4 isError becomes {error}",
			res:  &mcp.CallToolResult{IsError: true, Content: []mcp.Content{&mcp.TextContent{Text: `file "a<b>" not found`}, &mcp.TextContent{Text: "try again"}}},
			want: &bridgev1.CallToolResponse{Output: `{"error":"file \"a<b>\" not found\ntry again"}`, IsError: true},
		},
		{
			name: "R-T4 isError wins over structured content",
			res:  &mcp.CallToolResult{IsError: true, Content: []mcp.Content{&mcp.TextContent{Text: "boom"}}, StructuredContent: map[string]any{"ok": false}},
			want: &bridgev1.CallToolResponse{Output: `{"error":"boom"}`, IsError: true},
		},
		{
			name: "R-T4 isError without text",
			res:  &mcp.CallToolResult{IsError: true, Content: []mcp.Content{&mcp.TextContent{Text: "  \n"}}},
			want: &bridgev1.CallToolResponse{Output: `{"error":"The MCP server returned an empty error."}`, IsError: true},
		},
		{
			name: "X-T5 non-text content kept as attachments",
			res: &mcp.CallToolResult{Content: []mcp.Content{
				&mcp.ImageContent{MIMEType: "image/png", Data: []byte("png")},
				&mcp.TextContent{Text: "caption"},
				&mcp.AudioContent{MIMEType: "audio/wav", Data: []byte("wav")},
				&mcp.ResourceLink{URI: "https://example.com/r.pdf", Name: "r.pdf", MIMEType: "application/pdf"},
				&mcp.EmbeddedResource{Resource: &mcp.ResourceContents{URI: "mem://text", MIMEType: "text/plain", Text: "inline"}},
				&mcp.EmbeddedResource{Resource: &mcp.ResourceContents{URI: "mem://blob", MIMEType: "application/octet-stream", Blob: []byte{0, 1}}},
				&mcp.EmbeddedResource{},
			}},
			want: &bridgev1.CallToolResponse{Output: "caption", Attachments: []*bridgev1.Content{
				{Kind: bridgev1.ContentKind_CONTENT_KIND_IMAGE, MimeType: "image/png", Source: &bridgev1.Content_Data{Data: []byte("png")}},
				{Kind: bridgev1.ContentKind_CONTENT_KIND_AUDIO, MimeType: "audio/wav", Source: &bridgev1.Content_Data{Data: []byte("wav")}},
				{Kind: bridgev1.ContentKind_CONTENT_KIND_RESOURCE_LINK, MimeType: "application/pdf", Name: "r.pdf", Source: &bridgev1.Content_Uri{Uri: "https://example.com/r.pdf"}},
				{Kind: bridgev1.ContentKind_CONTENT_KIND_RESOURCE, MimeType: "text/plain", Name: "mem://text", Source: &bridgev1.Content_Data{Data: []byte("inline")}},
				{Kind: bridgev1.ContentKind_CONTENT_KIND_RESOURCE, MimeType: "application/octet-stream", Name: "mem://blob", Source: &bridgev1.Content_Data{Data: []byte{0, 1}}},
			}},
		},
		{
			name: "X-T5 attachments kept on an error",
			res:  &mcp.CallToolResult{IsError: true, Content: []mcp.Content{&mcp.TextContent{Text: "partial"}, &mcp.ImageContent{MIMEType: "image/png", Data: []byte("png")}}},
			want: &bridgev1.CallToolResponse{Output: `{"error":"partial"}`, IsError: true, Attachments: []*bridgev1.Content{
				{Kind: bridgev1.ContentKind_CONTENT_KIND_IMAGE, MimeType: "image/png", Source: &bridgev1.Content_Data{Data: []byte("png")}},
			}},
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			if diff := cmp.Diff(tc.want, flatten(tc.res), protocmp.Transform()); diff != "" {
				t.Errorf("flatten (-want +got):\n%s", diff)
			}
		})
	}
}

func TestFlattenRPCError(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name string
		err  *jsonrpc.Error
		want *bridgev1.CallToolResponse
	}{
		{"R-T4 message", &jsonrpc.Error{Code: -32602, Message: `unknown tool "x"`}, &bridgev1.CallToolResponse{Output: `{"error":"unknown tool \"x\""}`, IsError: true}},
		{"R-T4 empty message", &jsonrpc.Error{Code: -32000}, &bridgev1.CallToolResponse{Output: `{"error":"The MCP server returned an empty error."}`, IsError: true}},
		{"R-T4 blank message", &jsonrpc.Error{Code: -32000, Message: " \t"}, &bridgev1.CallToolResponse{Output: `{"error":"The MCP server returned an empty error."}`, IsError: true}},
		{"R-T4 HTML is not escaped", &jsonrpc.Error{Code: -32000, Message: "<&>"}, &bridgev1.CallToolResponse{Output: `{"error":"<&>"}`, IsError: true}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			if diff := cmp.Diff(tc.want, flattenRPCError(tc.err), protocmp.Transform()); diff != "" {
				t.Errorf("flattenRPCError (-want +got):\n%s", diff)
			}
		})
	}
}

func TestConvertTool(t *testing.T) {
	t.Parallel()
	emptySchema := mustStruct(t, map[string]any{"type": "object", "properties": map[string]any{}})
	yes, no := true, false
	tests := []struct {
		name string
		tool *mcp.Tool
		want *bridgev1.Tool
	}{
		{
			name: "R-T1 missing schema becomes an empty object schema",
			tool: &mcp.Tool{Name: "t", Description: "d"},
			want: &bridgev1.Tool{Name: "t", Description: "d", InputSchema: emptySchema},
		},
		{
			name: "R-T1 schema that is not an object becomes an empty object schema",
			tool: &mcp.Tool{Name: "t", InputSchema: []any{"not", "an", "object"}},
			want: &bridgev1.Tool{Name: "t", InputSchema: emptySchema},
		},
		{
			name: "R-T1 schema kept",
			tool: &mcp.Tool{Name: "t", InputSchema: map[string]any{"type": "object", "properties": map[string]any{"q": map[string]any{"type": "string"}}, "required": []any{"q"}}},
			want: &bridgev1.Tool{Name: "t", InputSchema: mustStruct(t, map[string]any{"type": "object", "properties": map[string]any{"q": map[string]any{"type": "string"}}, "required": []any{"q"}})},
		},
		{
			name: "annotations take the MCP defaults",
			tool: &mcp.Tool{Name: "t", Annotations: &mcp.ToolAnnotations{Title: "T", ReadOnlyHint: true}},
			want: &bridgev1.Tool{Name: "t", InputSchema: emptySchema, Annotations: &bridgev1.ToolAnnotations{Title: "T", ReadOnlyHint: true, DestructiveHint: true, OpenWorldHint: true}},
		},
		{
			name: "annotations set",
			tool: &mcp.Tool{Name: "t", Annotations: &mcp.ToolAnnotations{DestructiveHint: &no, IdempotentHint: true, OpenWorldHint: &no}},
			want: &bridgev1.Tool{Name: "t", InputSchema: emptySchema, Annotations: &bridgev1.ToolAnnotations{IdempotentHint: true}},
		},
		{
			name: "annotations explicitly true",
			tool: &mcp.Tool{Name: "t", Annotations: &mcp.ToolAnnotations{DestructiveHint: &yes, OpenWorldHint: &yes}},
			want: &bridgev1.Tool{Name: "t", InputSchema: emptySchema, Annotations: &bridgev1.ToolAnnotations{DestructiveHint: true, OpenWorldHint: true}},
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			if diff := cmp.Diff(tc.want, convertTool(tc.tool), protocmp.Transform()); diff != "" {
				t.Errorf("convertTool (-want +got):\n%s", diff)
			}
		})
	}
}

func mustStruct(t *testing.T, m map[string]any) *structpb.Struct {
	t.Helper()
	s, err := structpb.NewStruct(m)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

func TestCapResult(t *testing.T) {
	t.Parallel()
	small := &bridgev1.CallToolResponse{Output: "0123456789"}
	withImage := &bridgev1.CallToolResponse{Output: "see", Attachments: []*bridgev1.Content{{Source: &bridgev1.Content_Data{Data: make([]byte, 10)}}}}
	tests := []struct {
		name   string
		res    *bridgev1.CallToolResponse
		limit  int
		capped bool
	}{
		{"at the limit", small, 10, false},
		{"over the limit", small, 9, true},
		{"attachments count", withImage, 12, true},
		{"no limit", small, 0, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			got := capResult(tt.res, "big", tt.limit)
			if !tt.capped {
				if got != tt.res {
					t.Errorf("capResult changed a result within the limit: %v", got)
				}
				return
			}
			if !got.GetIsError() || len(got.GetAttachments()) != 0 {
				t.Errorf("capped result = %v, want an error without attachments", got)
			}
			for _, want := range []string{`\"big\"`, "bridge.max_result_bytes", fmt.Sprint(tt.limit)} {
				if !strings.Contains(got.GetOutput(), want) {
					t.Errorf("output %s does not name %s", got.GetOutput(), want)
				}
			}
		})
	}
}
