package httpc

import (
	"bytes"
	"encoding/json"
	"testing"

	"google.golang.org/protobuf/types/known/structpb"

	agentdv1 "github.com/agentd/agentd/gen/go/agentd/v1"
	"github.com/agentd/agentd/providers"
)

// TestFunctionToolsBytes: the structs FunctionTools renders
// encode to the bytes of the maps it rendered before, with and without a
// description, with the parameters encoded once or not, by json.Marshal
// and by Marshal.
func TestFunctionToolsBytes(t *testing.T) {
	t.Parallel()
	schema, err := structpb.NewStruct(map[string]any{"type": "object", "properties": map[string]any{"q": map[string]any{"type": "string", "description": "<&>"}}})
	if err != nil {
		t.Fatal(err)
	}
	tools := []*agentdv1.FunctionTool{{Name: "a", Description: "says <b>&</b>", Parameters: schema}, {Name: "b"}}
	var maps []any
	for _, tool := range tools {
		params := map[string]any{"type": "object", "properties": map[string]any{}}
		if tool.GetParameters() != nil {
			params = tool.GetParameters().AsMap()
		}
		fn := map[string]any{"name": tool.GetName(), "parameters": params}
		if tool.GetDescription() != "" {
			fn["description"] = tool.GetDescription()
		}
		maps = append(maps, map[string]any{"type": "function", "function": fn})
	}
	want, err := json.Marshal(map[string]any{"tools": maps})
	if err != nil {
		t.Fatal(err)
	}
	encoded := []json.RawMessage{providers.ToolParametersJSON(tools[0]), providers.ToolParametersJSON(tools[1])}
	for _, req := range []*providers.Request{{Tools: tools}, {Tools: tools, ToolParameters: encoded}} {
		for name, marshal := range map[string]func(any) ([]byte, error){"json.Marshal": json.Marshal, "Marshal": Marshal} {
			got, err := marshal(map[string]any{"tools": FunctionTools(req)})
			if err != nil {
				t.Fatal(err)
			}
			if !bytes.Equal(got, want) {
				t.Errorf("FunctionTools encodes with %s to\n%s\nwant\n%s", name, got, want)
			}
		}
	}
}

// TestChatMessageBytes: a ChatMessage encodes, by Marshal and by
// json.Marshal, to the bytes of the map of the members it has.
func TestChatMessageBytes(t *testing.T) {
	t.Parallel()
	parts := []any{map[string]any{"type": "text", "text": "<look>"}, map[string]any{"type": "image_url", "image_url": map[string]any{"url": "data:image/png;base64,AA=="}}}
	for _, tc := range []struct {
		name string
		msg  *ChatMessage
		want map[string]any
	}{
		{"system", &ChatMessage{Role: "system", Text: "be <brief> & kind\n"}, map[string]any{"role": "system", "content": "be <brief> & kind\n"}},
		{"empty user text", &ChatMessage{Role: "user"}, map[string]any{"role": "user", "content": ""}},
		{"user parts", &ChatMessage{Role: "user", Parts: parts}, map[string]any{"role": "user", "content": parts}},
		{"assistant text", &ChatMessage{Role: "assistant", Text: "done \u2028"}, map[string]any{"role": "assistant", "content": "done \u2028"}},
		{
			"assistant calls, null content, reasoning",
			&ChatMessage{Role: "assistant", NullContent: true, HasReasoning: true, ReasoningContent: "", ToolCalls: []ChatToolCall{
				{ID: "call_1", Name: "echo", Arguments: `{"message":"<hi>"}`}, {ID: "", Name: "b", Arguments: "{}"},
			}},
			map[string]any{"role": "assistant", "content": nil, "reasoning_content": "", "tool_calls": []any{
				map[string]any{"id": "call_1", "type": "function", "function": map[string]any{"name": "echo", "arguments": `{"message":"<hi>"}`}},
				map[string]any{"id": "", "type": "function", "function": map[string]any{"name": "b", "arguments": "{}"}},
			}},
		},
		{"tool result", &ChatMessage{Role: "tool", HasToolCallID: true, ToolCallID: "call_1", Text: "\xff ok"}, map[string]any{"role": "tool", "tool_call_id": "call_1", "content": "\xff ok"}},
		{"tool result, empty id", &ChatMessage{Role: "tool", HasToolCallID: true}, map[string]any{"role": "tool", "tool_call_id": "", "content": ""}},
	} {
		want, err := json.Marshal(map[string]any{"messages": []any{tc.want}})
		if err != nil {
			t.Fatal(err)
		}
		for name, marshal := range map[string]func(any) ([]byte, error){"json.Marshal": json.Marshal, "Marshal": Marshal} {
			got, err := marshal(map[string]any{"messages": []any{tc.msg}})
			if err != nil {
				t.Fatalf("%s: %s: %v", tc.name, name, err)
			}
			if !bytes.Equal(got, want) {
				t.Errorf("%s: %s gives\n%s\nwant\n%s", tc.name, name, got, want)
			}
		}
	}
}
