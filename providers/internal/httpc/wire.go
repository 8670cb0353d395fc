package httpc

import (
	"encoding/json"
	"fmt"
	"strings"

	agentdv1 "github.com/agentd/agentd/gen/go/agentd/v1"
	"github.com/agentd/agentd/providers"
)

// Pieces of the wire formats that several adapters share.

// FunctionTools renders req's function tools in the Chat Completions
// shape ({"type": "function", "function": {...}}) that OpenAI-compatible
// APIs and Ollama take. Structs rather than maps, to spare two maps per
// tool on every turn; their fields are in the order json.Marshal sorts a
// map's keys, so the bytes are the same.
func FunctionTools(req *providers.Request) []any {
	if len(req.Tools) == 0 {
		return nil
	}
	// One array of structs, each in the list by pointer: an interface
	// holds a pointer without allocating, where a struct is copied to the
	// heap one by one.
	tools := make([]functionTool, len(req.Tools))
	out := make([]any, len(req.Tools))
	for i, t := range req.Tools {
		tools[i] = functionTool{
			Function: function{Description: t.GetDescription(), Name: t.GetName(), Parameters: req.Parameters(i)},
			Type:     "function",
		}
		out[i] = &tools[i]
	}
	return out
}

type functionTool struct {
	Function function `json:"function"`
	Type     string   `json:"type"`
}

type function struct {
	Description string `json:"description,omitempty"`
	Name        string `json:"name"`
	Parameters  any    `json:"parameters"`
}

// encodeBody writes t as json.Marshal does, its parameters through e.
func (t functionTool) encodeBody(e *bodyEncoder) error {
	e.buf.WriteString(`{"function":{`)
	if t.Function.Description != "" {
		e.buf.WriteString(`"description":`)
		e.str(t.Function.Description)
		e.buf.WriteByte(',')
	}
	e.buf.WriteString(`"name":`)
	e.str(t.Function.Name)
	e.buf.WriteString(`,"parameters":`)
	if err := e.value(t.Function.Parameters); err != nil {
		return err
	}
	e.buf.WriteString(`},"type":`)
	e.str(t.Type)
	e.buf.WriteByte('}')
	return nil
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

// CallIDs names the tool calls of a turn for the APIs that may send them
// without an id (Gemini, Ollama): "call_<n>", n counting on from the
// calls already in the conversation, so an id made up for this turn stays
// unique within the generation. Not safe for concurrent use.
type CallIDs struct{ n int }

// NewCallIDs counts the tool calls in msgs.
func NewCallIDs(msgs []*agentdv1.Message) *CallIDs {
	c := &CallIDs{}
	for _, m := range msgs {
		for _, part := range m.GetParts() {
			if part.GetToolCall() != nil {
				c.n++
			}
		}
	}
	return c
}

// Next counts one more call and returns its id: id as the API sent it,
// or, when that is empty, one made up.
func (c *CallIDs) Next(id string) string {
	c.n++
	if id != "" {
		return id
	}
	return fmt.Sprintf("call_%d", c.n)
}

// SetByAgentd is why an option naming a body key the adapter builds
// itself is refused.
const SetByAgentd = "is set by agentd and cannot be given as a provider option"

// ReservedOptions is an adapter's ValidateOptions for body keys it
// reserves: a Problem, saying why, for each of keys that options holds,
// in the order of keys. Merged, such an option would be ignored (or
// would replace what agentd builds); refused, its author learns of it
// before a generation starts.
func ReservedOptions(options map[string]any, why string, keys ...string) []providers.Problem {
	var problems []providers.Problem
	for _, k := range keys {
		if _, ok := options[k]; ok {
			problems = append(problems, providers.Problem{Field: k, Description: why})
		}
	}
	return problems
}

// ChatMessage is a message of a Chat Completions request body, written as
// json.Marshal writes the map of the members it has, keys sorted:
// "content" always, then "reasoning_content", "role", "tool_call_id" and
// "tool_calls" where set. A struct rather than a map, to spare the map
// and its boxed values for every message of the conversation on every
// turn; it goes into a body by pointer, which an interface holds without
// allocating.
type ChatMessage struct {
	Role string
	// Content is "content": Parts when not nil, else null when
	// NullContent, else Text.
	Text        string
	NullContent bool
	Parts       []any
	// ReasoningContent is "reasoning_content" when HasReasoning.
	ReasoningContent string
	HasReasoning     bool
	// ToolCallID is "tool_call_id" when HasToolCallID (a tool message).
	ToolCallID    string
	HasToolCallID bool
	// ToolCalls is "tool_calls" when not nil.
	ToolCalls []ChatToolCall
}

// ChatToolCall is an assistant message's tool call:
// {"function": {"arguments": Arguments, "name": Name}, "id": ID, "type": "function"}.
type ChatToolCall struct {
	ID, Name  string
	Arguments string // as the API takes them: a string of JSON
}

// MarshalJSON writes m as Marshal does, for encoding/json.
func (m *ChatMessage) MarshalJSON() ([]byte, error) { return Marshal(m) }

func (m *ChatMessage) encodeBody(e *bodyEncoder) error {
	e.buf.WriteString(`{"content":`)
	switch {
	case m.Parts != nil:
		if err := e.value(m.Parts); err != nil {
			return err
		}
	case m.NullContent:
		e.buf.WriteString("null")
	default:
		e.str(m.Text)
	}
	if m.HasReasoning {
		e.buf.WriteString(`,"reasoning_content":`)
		e.str(m.ReasoningContent)
	}
	e.buf.WriteString(`,"role":`)
	e.str(m.Role)
	if m.HasToolCallID {
		e.buf.WriteString(`,"tool_call_id":`)
		e.str(m.ToolCallID)
	}
	if m.ToolCalls != nil {
		e.buf.WriteString(`,"tool_calls":[`)
		for i, c := range m.ToolCalls {
			if i > 0 {
				e.buf.WriteByte(',')
			}
			e.buf.WriteString(`{"function":{"arguments":`)
			e.str(c.Arguments)
			e.buf.WriteString(`,"name":`)
			e.str(c.Name)
			e.buf.WriteString(`},"id":`)
			e.str(c.ID)
			e.buf.WriteString(`,"type":"function"}`)
		}
		e.buf.WriteByte(']')
	}
	e.buf.WriteByte('}')
	return nil
}
