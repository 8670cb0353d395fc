package httpc

import (
	"bytes"
	"encoding/json"

	agentdv1 "github.com/agentd/agentd/gen/go/agentd/v1"
)

// Pieces of the wire formats that several adapters share.

// ToolParameters is a function tool's parameters as a JSON Schema object:
// an empty object schema when the tool declares none.
func ToolParameters(t *agentdv1.FunctionTool) map[string]any {
	if t.GetParameters() == nil {
		return map[string]any{"type": "object", "properties": map[string]any{}}
	}
	return t.GetParameters().AsMap()
}

// FunctionTools renders function tools in the Chat Completions shape
// ({"type": "function", "function": {...}}) that OpenAI-compatible APIs
// and Ollama take.
func FunctionTools(tools []*agentdv1.FunctionTool) []any {
	var out []any
	for _, t := range tools {
		fn := map[string]any{"name": t.GetName(), "parameters": ToolParameters(t)}
		if t.GetDescription() != "" {
			fn["description"] = t.GetDescription()
		}
		out = append(out, map[string]any{"type": "function", "function": fn})
	}
	return out
}

// CompactArguments renders a tool call's argument object, as an API sent
// it, as the compact JSON text a ToolCall carries: "{}" for none, null or
// anything that is not JSON.
func CompactArguments(raw json.RawMessage) string {
	var b bytes.Buffer
	if t := bytes.TrimSpace(raw); len(t) == 0 || string(t) == "null" || json.Compact(&b, t) != nil {
		return "{}"
	}
	return b.String()
}
