package httpc

import (
	"encoding/json"
	"strings"

	agentdv1 "github.com/agentd/agentd/gen/go/agentd/v1"
	"github.com/agentd/agentd/providers"
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

// ArgumentsObject is a tool call's arguments for an API that takes them
// as a JSON object (Anthropic, Gemini, Ollama): by
// providers.CompactArguments' rule when that makes an object, else "{}",
// since such an API refuses the whole request over one call it cannot
// read.
func ArgumentsObject(args string) json.RawMessage {
	c := providers.CompactArguments([]byte(args))
	if !strings.HasPrefix(c, "{") || !json.Valid([]byte(c)) {
		return json.RawMessage("{}")
	}
	return json.RawMessage(c)
}
