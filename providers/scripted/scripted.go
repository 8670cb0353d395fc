// Package scripted holds agentd's two in-process providers, which need no
// network and answer deterministically:
//
//   - "script" replays a conversation written in the agent's provider
//     options, one scripted turn per model turn. It drives the tool loop in
//     tests and demos, and lets users test their own agents
//     deterministically.
//   - "mock" accepts any request, MCP declarations included, never calls a
//     tool, and answers "Mock response to: <the last user text>", or, asked
//     for structured output (Request.Output), the simplest JSON value that
//     fits the schema (below).
//
// Both take an output schema for every model, with tools or without
// (Capabilities.Output).
//
// # Scripts
//
// provider_options.script.turns is a list of turns. Each turn has text,
// tool_calls, or both (text first), or an error:
//
//	{"script": {"turns": [
//	  {"tool_calls": [{"name": "echo", "arguments": {"text": "hi"}}]},
//	  {"text": "The server said: {{tool_outputs}}"}
//	]}}
//
// The turn played is the number of assistant messages after the last user
// message, so a script restarts with every new user message and resumes
// correctly after a pause. In text, {{tool_outputs}} is replaced by the
// outputs of the latest tool results, joined by newlines. A tool call's id
// defaults to "call_<turn>_<index>". A turn with "repeat": n is played n
// times in a row, as n turns (absent: once), so that a long conversation
// needs no long script. An error turn
// {"error": {"kind": "unavailable", "message": "..."}} fails the model call
// with that kind (invalid, unavailable, timeout, exhausted, internal). A
// turn may set "usage": {"input_tokens": n, "output_tokens": m}; otherwise
// one token is counted per four bytes of text. A turn may give its answer
// as JSON, "structured": {...} (any JSON value) in place of text: it is
// played as the turn's text, compact, the way a model asked for
// structured output answers, and the loop checks it against the agent's
// output schema like any answer.
//
// provider_options.script.sample is the turn played for an MCP server's
// sampling request, whatever the turn; its text may hold
// {{prompt}}, replaced by the request's last user text. A turn longer
// than the request's MaxTokens (at four bytes a token) is cut there and
// stops with MAX_TOKENS, as a model would.
//
// # The mock's structured answer
//
// Given an output schema, the mock answers with a minimal instance of it,
// encoded compact with its keys sorted: a schema's "const", else the
// first of its "enum", else the instance of what its "$ref" points to
// within the schema, else that of the first schema of its "allOf",
// "anyOf" or "oneOf", else by its "type" (the first of a list; absent:
// object when it has "properties", array when it has "items"): an
// object holds its required properties only, each its own schema's
// instance; an array holds "minItems" instances of "items" (absent:
// none); a string is "", a number or integer 0, a boolean false, and
// anything else null. Other constraints (minLength, minimum, pattern,
// format, ...) are not met. Where required properties and references
// lead back to a schema already followed (a cycle), the value is null
// once 32 schemas deep, each property, item, reference and alternative
// followed counting one.
package scripted

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"iter"
	"strings"
	"unicode"
	"unicode/utf8"

	agentdv1 "github.com/agentd/agentd/gen/go/agentd/v1"
	"github.com/agentd/agentd/internal/fault"
	"github.com/agentd/agentd/providers"
)

// Script returns the "script" provider.
func Script() providers.Provider { return scriptProvider{} }

// Mock returns the "mock" provider.
func Mock() providers.Provider { return mockProvider{} }

type mockProvider struct{}

func (mockProvider) Name() string { return "mock" }
func (mockProvider) Capabilities() providers.Capabilities {
	return providers.Capabilities{ModelOptional: true, Output: always}
}

func (mockProvider) Stream(ctx context.Context, req *providers.Request) iter.Seq2[providers.Event, error] {
	text := "Mock response to: " + lastUserText(req.Messages)
	if req.Output != nil {
		var err error
		if text, err = minimalInstance(req.Output.Schema); err != nil {
			return fail(err)
		}
	}
	return play(ctx, req, &turn{Text: text})
}

// always is the in-process providers' Capabilities.Output: they take an
// output schema for every model and turn, the mock to answer with an
// instance of it, the script to play its structured turns as a native
// answer would arrive.
func always(string, bool) bool { return true }

type scriptProvider struct{}

func (scriptProvider) Name() string { return "script" }

func (scriptProvider) Capabilities() providers.Capabilities {
	return providers.Capabilities{ModelOptional: true, ToolErrorFlag: true, MediaToolResults: true, Output: always}
}

// script is provider_options.script.
type script struct {
	Turns  []turn `json:"turns"`
	Sample *turn  `json:"sample,omitempty"`
}

type turn struct {
	Text string `json:"text,omitempty"`
	// Structured is an answer as JSON, played as the turn's text.
	Structured json.RawMessage `json:"structured,omitempty"`
	ToolCalls  []scriptCall    `json:"tool_calls,omitempty"`
	Error      *scriptError    `json:"error,omitempty"`
	Usage      *scriptUsage    `json:"usage,omitempty"`
	Repeat     int             `json:"repeat,omitempty"`
}

type scriptCall struct {
	ID        string          `json:"id,omitempty"`
	Name      string          `json:"name"`
	Arguments json.RawMessage `json:"arguments,omitempty"`
}

type scriptError struct {
	Kind    string `json:"kind"`
	Message string `json:"message"`
}

type scriptUsage struct {
	InputTokens  int64 `json:"input_tokens"`
	OutputTokens int64 `json:"output_tokens"`
}

var errorKinds = map[string]fault.Kind{
	"invalid":     fault.Invalid,
	"unavailable": fault.Unavailable,
	"timeout":     fault.Timeout,
	"exhausted":   fault.Exhausted,
	"internal":    fault.Internal,
}

// parseScript reads provider_options.script, and what is wrong with it.
func parseScript(options map[string]any) (*script, []providers.Problem) {
	raw, ok := options["script"]
	if !ok {
		return nil, []providers.Problem{{Field: "script", Description: `the script provider needs provider_options.script: {"turns": [...]}`}}
	}
	data, err := json.Marshal(raw)
	if err != nil {
		return nil, []providers.Problem{{Field: "script", Description: err.Error()}}
	}
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.DisallowUnknownFields()
	var s script
	if err := dec.Decode(&s); err != nil {
		return nil, []providers.Problem{{Field: "script", Description: "not a valid script: " + err.Error()}}
	}
	var problems []providers.Problem
	if len(s.Turns) == 0 {
		problems = append(problems, providers.Problem{Field: "script.turns", Description: "must have at least one turn"})
	}
	if t := s.Sample; t != nil && (len(t.ToolCalls) > 0 || t.Text == "" && t.Error == nil) {
		problems = append(problems, providers.Problem{Field: "script.sample", Description: "needs text or error, and no tool_calls: a server's sampling request gets text"})
	}
	for i, t := range s.Turns {
		problems = append(problems, t.problems(fmt.Sprintf("script.turns[%d]", i))...)
	}
	return &s, problems
}

// problems says what is wrong with a turn of the script, at field: what
// contentProblems finds, a negative repeat, a call without a name or with
// arguments that are not an object.
func (t *turn) problems(field string) []providers.Problem {
	problems := t.contentProblems(field)
	if t.Repeat < 0 {
		problems = append(problems, providers.Problem{Field: field + ".repeat", Description: "must be 1 or more"})
	}
	for j, c := range t.ToolCalls {
		if c.Name == "" {
			problems = append(problems, providers.Problem{Field: fmt.Sprintf("%s.tool_calls[%d].name", field, j), Description: "must not be empty"})
		}
		if len(c.Arguments) > 0 && !bytes.HasPrefix(bytes.TrimSpace(c.Arguments), []byte("{")) {
			problems = append(problems, providers.Problem{Field: fmt.Sprintf("%s.tool_calls[%d].arguments", field, j), Description: "must be a JSON object"})
		}
	}
	return problems
}

// contentProblems says what is wrong with what a turn plays: an error
// with anything else, an unknown error kind, both text and structured,
// or nothing to play.
func (t *turn) contentProblems(field string) []providers.Problem {
	answer := t.Text != "" || len(t.Structured) > 0
	switch {
	case t.Error != nil && (answer || len(t.ToolCalls) > 0):
		return []providers.Problem{{Field: field, Description: "an error turn has no text, structured or tool_calls"}}
	case t.Error != nil:
		if _, ok := errorKinds[t.Error.Kind]; !ok {
			return []providers.Problem{{Field: field + ".error.kind", Description: "must be one of invalid, unavailable, timeout, exhausted, internal"}}
		}
	case t.Text != "" && len(t.Structured) > 0:
		return []providers.Problem{{Field: field, Description: "structured is played as the turn's text: give text or structured, not both"}}
	case !answer && len(t.ToolCalls) == 0:
		return []providers.Problem{{Field: field, Description: "needs text, structured, tool_calls or error"}}
	}
	return nil
}

func (scriptProvider) ValidateOptions(options map[string]any) []providers.Problem {
	_, problems := parseScript(options)
	return problems
}

func (scriptProvider) Stream(ctx context.Context, req *providers.Request) iter.Seq2[providers.Event, error] {
	s, problems := parseScript(req.Options)
	if len(problems) > 0 {
		return fail(fault.New(fault.Invalid, "script provider: provider_options.%s: %s", problems[0].Field, problems[0].Description))
	}
	t, err := s.next(req)
	if err != nil {
		return fail(err)
	}
	if t.Error != nil {
		return fail(fault.New(errorKinds[t.Error.Kind], "script provider: %s", t.Error.Message))
	}
	return play(ctx, req, t)
}

// next is the turn the script plays for req: its sample turn, with the
// prompt put in, for a sampling request; else the turn the conversation
// is at, with the latest tool outputs put in and its calls named.
func (s *script) next(req *providers.Request) (*turn, error) {
	if req.Sample {
		if s.Sample == nil {
			return nil, fault.New(fault.FailedPrecondition, "script provider: an MCP server asked for a sample, and the script has no sample turn")
		}
		t := *s.Sample
		t.Text = strings.ReplaceAll(t.Text, "{{prompt}}", lastUserText(req.Messages))
		return &t, nil
	}
	n := turnIndex(req.Messages)
	t, ok := s.at(n)
	if !ok {
		return nil, fault.New(fault.FailedPrecondition,
			"script provider: the script has %d turns and the conversation asks for turn %d", s.length(), n+1)
	}
	t.Text = strings.ReplaceAll(t.Text, "{{tool_outputs}}", latestToolOutputs(req.Messages))
	if len(t.Structured) > 0 {
		// Compact already: the script is decoded from the JSON that
		// encoding the options made.
		t.Text = string(t.Structured)
	}
	for i := range t.ToolCalls {
		if t.ToolCalls[i].ID == "" {
			t.ToolCalls[i].ID = fmt.Sprintf("call_%d_%d", n+1, i+1)
		}
	}
	return &t, nil
}

// at is the script's turn n (from 0), a repeated turn counting as many
// turns as it repeats.
func (s *script) at(n int) (turn, bool) {
	for _, t := range s.Turns {
		if n < t.times() {
			return t, true
		}
		n -= t.times()
	}
	return turn{}, false
}

// length is how many turns the script plays.
func (s *script) length() int {
	n := 0
	for _, t := range s.Turns {
		n += t.times()
	}
	return n
}

// times is how many turns t plays.
func (t *turn) times() int { return max(t.Repeat, 1) }

func fail(err error) iter.Seq2[providers.Event, error] {
	return func(yield func(providers.Event, error) bool) { yield(nil, err) }
}

// play streams a turn: its text word by word, its tool calls, usage, stop.
func play(ctx context.Context, req *providers.Request, t *turn) iter.Seq2[providers.Event, error] {
	return func(yield func(providers.Event, error) bool) {
		for _, ev := range t.events(req) {
			if err := ctx.Err(); err != nil {
				yield(nil, err)
				return
			}
			if !yield(ev, nil) {
				return
			}
		}
	}
}

// events are what a turn streams: its text word by word, cut at req's
// MaxTokens (four bytes a token), its tool calls, its usage (the
// script's, else estimated) and its stop.
func (t *turn) events(req *providers.Request) []providers.Event {
	// In process, there is no response id; the model is the one asked for.
	stop := &providers.Stop{Reason: agentdv1.StopReason_STOP_REASON_END_TURN, Response: providers.Response{Model: req.Model, FinishReason: "end_turn"}}
	if len(t.ToolCalls) > 0 {
		stop.Reason, stop.Response.FinishReason = agentdv1.StopReason_STOP_REASON_TOOL_USE, "tool_use"
	}
	if limit := req.MaxTokens * 4; req.MaxTokens > 0 && len(t.Text) > limit {
		t = &turn{Text: cutUTF8(t.Text, limit), Usage: t.Usage}
		stop.Reason, stop.Response.FinishReason = agentdv1.StopReason_STOP_REASON_MAX_TOKENS, "max_tokens"
	}
	var events []providers.Event
	for _, w := range words(t.Text) {
		events = append(events, &providers.TextDelta{Text: w})
	}
	for _, c := range t.ToolCalls {
		events = append(events, &providers.ToolCall{Call: &agentdv1.ToolCall{Id: c.ID, Name: c.Name, Arguments: providers.CompactArguments(c.Arguments)}})
	}
	usage := &agentdv1.Usage{InputTokens: estimateTokens(req), OutputTokens: tokens(len(t.Text))}
	if t.Usage != nil {
		usage = &agentdv1.Usage{InputTokens: t.Usage.InputTokens, OutputTokens: t.Usage.OutputTokens}
	}
	return append(events, &providers.Usage{Usage: usage}, stop)
}

// cutUTF8 cuts s to at most n bytes, and no rune in half.
func cutUTF8(s string, n int) string {
	cut := s[:n]
	for !utf8.ValidString(cut) {
		cut = cut[:len(cut)-1]
	}
	return cut
}

// turnIndex counts the assistant messages after the last user message.
func turnIndex(msgs []*agentdv1.Message) int {
	n := 0
	for i := len(msgs) - 1; i >= 0; i-- {
		switch msgs[i].GetRole() {
		case agentdv1.Role_ROLE_USER:
			return n
		case agentdv1.Role_ROLE_ASSISTANT:
			n++
		}
	}
	return n
}

func lastUserText(msgs []*agentdv1.Message) string {
	for i := len(msgs) - 1; i >= 0; i-- {
		if msgs[i].GetRole() != agentdv1.Role_ROLE_USER {
			continue
		}
		var texts []string
		for _, p := range msgs[i].GetParts() {
			if t := p.GetText(); t != "" {
				texts = append(texts, t)
			}
		}
		return strings.Join(texts, "\n")
	}
	return ""
}

// latestToolOutputs joins the outputs of the most recent tool message.
func latestToolOutputs(msgs []*agentdv1.Message) string {
	for i := len(msgs) - 1; i >= 0; i-- {
		if msgs[i].GetRole() != agentdv1.Role_ROLE_TOOL {
			continue
		}
		var outs []string
		for _, p := range msgs[i].GetParts() {
			if r := p.GetToolResult(); r != nil {
				outs = append(outs, r.GetOutput())
			}
		}
		return strings.Join(outs, "\n")
	}
	return ""
}

// words splits text into pieces that concatenate back to it, each a word
// with the spaces before it, so text streams the way models stream it.
func words(text string) []string {
	var out []string
	start, prevSpace := 0, true
	for i, r := range text {
		space := unicode.IsSpace(r)
		if i > start && space && !prevSpace {
			out = append(out, text[start:i])
			start = i
		}
		prevSpace = space
	}
	if start < len(text) {
		out = append(out, text[start:])
	}
	return out
}

func estimateTokens(req *providers.Request) int64 {
	n := len(req.Instructions)
	for _, m := range req.Messages {
		for _, p := range m.GetParts() {
			n += len(p.GetText()) + len(p.GetToolCall().GetArguments()) + len(p.GetToolResult().GetOutput())
		}
	}
	return tokens(n)
}

func tokens(bytes int) int64 { return int64((bytes + 3) / 4) }
