// Package ollama is the adapter of Ollama's native chat API ("ollama"):
// POST {base}/api/chat with a streamed NDJSON answer, one ChatResponse per
// line and a last line with "done": true.
//
// Ollama runs no MCP server itself, so every MCP server of its agents runs
// in agentd's bridge. Its tool messages have no error flag, so a failed
// result reaches the model as its {"error": ...} text; tool results carry
// no media.
//
// The base URL defaults to http://localhost:11434. Ollama needs no key; an
// API key, when configured, is sent as "Authorization: Bearer" for the
// proxies and hosted endpoints that ask for one.
//
// A request's Output goes in "format" as the JSON Schema object, in place
// of any format the provider options set, on a turn without tools
// (Capabilities.Output), and never to Ollama's cloud models, which take
// no schema. The answer streams as text.
package ollama

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"io"
	"iter"
	"net/http"
	"strings"

	agentdv1 "github.com/agentd/agentd/gen/go/agentd/v1"
	"github.com/agentd/agentd/internal/fault"
	"github.com/agentd/agentd/providers"
	"github.com/agentd/agentd/providers/internal/httpc"
	"github.com/agentd/agentd/providers/internal/ndjson"
)

const (
	name           = "ollama"
	defaultBaseURL = "http://localhost:11434"
)

type provider struct {
	client *httpc.Client
	key    string // redacted from errors
	output func(model string, withTools bool) bool
}

// New returns the "ollama" provider.
func New(s providers.Settings) providers.Provider {
	h := make(http.Header)
	h.Set("Accept", "application/x-ndjson")
	if s.APIKey != "" {
		h.Set("Authorization", "Bearer "+s.APIKey)
	}
	return &provider{client: httpc.New(name, s, defaultBaseURL, h), key: s.APIKey, output: takesOutput(s.BaseURL)}
}

// CloseIdleConnections closes the adapter's idle connections.
func (p *provider) CloseIdleConnections() { p.client.CloseIdleConnections() }

func (p *provider) Name() string { return name }

func (p *provider) Capabilities() providers.Capabilities {
	return providers.Capabilities{Output: p.output}
}

// ValidateOptions refuses options that would replace what agentd builds;
// "stream": false in particular would turn the answer into one JSON
// object this adapter does not read.
func (p *provider) ValidateOptions(options map[string]any) []providers.Problem {
	return httpc.ReservedOptions(options, httpc.SetByAgentd, "model", "messages", "stream")
}

func (p *provider) Stream(ctx context.Context, req *providers.Request) iter.Seq2[providers.Event, error] {
	return func(yield func(providers.Event, error) bool) {
		yield = httpc.RedactErrors(yield, req, p.key)
		body, err := buildBody(req)
		if err != nil {
			yield(nil, err)
			return
		}
		resp, err := p.client.Do(ctx, http.MethodPost, "/api/chat", body)
		if err != nil {
			yield(nil, err)
			return
		}
		defer httpc.Finish(ctx, resp.Body)
		read(ctx, resp.Body, httpc.NewCallIDs(req.Messages), yield)
	}
}

// buildBody builds the /api/chat body, provider options merged in
// ("options", "think", "keep_alive", "format", ...).
func buildBody(req *providers.Request) (map[string]any, error) {
	msgs := []any{}
	if req.Instructions != "" {
		msgs = append(msgs, map[string]any{"role": "system", "content": req.Instructions})
	}
	for _, m := range req.Messages {
		converted, err := message(m)
		if err != nil {
			return nil, err
		}
		msgs = append(msgs, converted...)
	}
	body := map[string]any{"model": req.Model, "messages": msgs, "stream": true}
	if len(req.Tools) > 0 {
		body["tools"] = httpc.FunctionTools(req)
	}
	httpc.MergeOptions(body, req.Options, "tools")
	if req.MaxTokens > 0 {
		httpc.SetNested(body, "options", "num_predict", req.MaxTokens)
	}
	if req.Output != nil {
		// In place of any format the options set: one grammar holds the
		// answer.
		body["format"] = req.Output.Schema
	}
	return body, nil
}

// message converts one neutral message into Ollama messages: a tool
// message becomes one "tool" message per result.
func message(m *agentdv1.Message) ([]any, error) {
	switch m.GetRole() {
	case agentdv1.Role_ROLE_USER:
		msg, err := userMessage(m)
		if err != nil {
			return nil, err
		}
		return []any{msg}, nil
	case agentdv1.Role_ROLE_ASSISTANT:
		return []any{assistantMessage(m)}, nil
	case agentdv1.Role_ROLE_TOOL:
		return toolMessages(m), nil
	}
	return nil, fault.New(fault.Invalid, "ollama: a message has no role")
}

// toolMessages converts a tool message: a "tool" message per result.
func toolMessages(m *agentdv1.Message) []any {
	var out []any
	for _, part := range m.GetParts() {
		if r := part.GetToolResult(); r != nil {
			out = append(out, map[string]any{"role": "tool", "content": r.GetOutput(), "tool_name": r.GetName()})
		}
	}
	return out
}

// userMessage converts a user message: its texts and its images. Ollama
// takes images as base64 and fetches nothing itself; other media would be
// dropped without the model knowing, so they are refused.
func userMessage(m *agentdv1.Message) (map[string]any, error) {
	var texts, images []string
	for _, part := range m.GetParts() {
		switch k := part.GetKind().(type) {
		case *agentdv1.Part_Text:
			texts = append(texts, k.Text)
		case *agentdv1.Part_Media:
			if len(k.Media.GetData()) == 0 || !strings.HasPrefix(k.Media.GetMimeType(), "image/") {
				return nil, fault.New(fault.Invalid, "ollama: a user message holds %q media%s; Ollama accepts only inline images",
					k.Media.GetMimeType(), byURI(k.Media))
			}
			images = append(images, base64.StdEncoding.EncodeToString(k.Media.GetData()))
		}
	}
	msg := map[string]any{"role": "user", "content": strings.Join(texts, "\n")}
	if len(images) > 0 {
		msg["images"] = images
	}
	return msg, nil
}

// assistantMessage converts an assistant message: its text, its own
// thinking (another provider's reasoning means nothing to this model)
// and its tool calls.
func assistantMessage(m *agentdv1.Message) map[string]any {
	var texts, thinking []string
	var calls []any
	for _, part := range m.GetParts() {
		switch k := part.GetKind().(type) {
		case *agentdv1.Part_Text:
			texts = append(texts, k.Text)
		case *agentdv1.Part_Reasoning:
			if k.Reasoning.GetProvider() == name {
				thinking = append(thinking, k.Reasoning.GetText())
			}
		case *agentdv1.Part_ToolCall:
			calls = append(calls, map[string]any{"function": map[string]any{
				"name": k.ToolCall.GetName(), "arguments": httpc.ArgumentsObject(k.ToolCall.GetArguments()),
			}})
		}
	}
	msg := map[string]any{"role": "assistant", "content": strings.Join(texts, "")}
	if t := strings.Join(thinking, ""); t != "" {
		msg["thinking"] = t
	}
	if len(calls) > 0 {
		msg["tool_calls"] = calls
	}
	return msg
}

func byURI(m *agentdv1.Media) string {
	if m.GetUri() != "" {
		return " by URI"
	}
	return ""
}

// chatResponse is one NDJSON line of a streamed /api/chat answer.
type chatResponse struct {
	Model   string `json:"model"`
	Message struct {
		Content   string `json:"content"`
		Thinking  string `json:"thinking"`
		ToolCalls []struct {
			ID       string `json:"id"`
			Function struct {
				Name      string          `json:"name"`
				Arguments json.RawMessage `json:"arguments"`
			} `json:"function"`
		} `json:"tool_calls"`
	} `json:"message"`
	Done            bool   `json:"done"`
	DoneReason      string `json:"done_reason"`
	PromptEvalCount int64  `json:"prompt_eval_count"`
	EvalCount       int64  `json:"eval_count"`
	Error           string `json:"error"`
}

// read parses the NDJSON stream of one turn and yields its events; ids
// names its tool calls.
func read(ctx context.Context, body io.Reader, ids *httpc.CallIDs, yield func(providers.Event, error) bool) {
	r := ndjson.NewReader(body)
	defer r.Close() // its buffer goes back to the pool; no event shares it
	for {
		line, err := r.Next()
		if err != nil { // io.EOF too: the stream ended before "done"
			yield(nil, httpc.StreamError(ctx, name, err))
			return
		}
		var c chatResponse
		if err := json.Unmarshal(line, &c); err != nil {
			yield(nil, fault.Wrap(fault.Unavailable, err, "ollama: the response stream holds invalid JSON"))
			return
		}
		if !c.yield(ids, yield) || c.Done {
			return
		}
	}
}

// yield yields what one line of the stream holds: its thinking, text and
// tool calls and, on the last, the usage and stop; an error the line
// carries ends the stream. It returns false when no more is wanted.
func (c *chatResponse) yield(ids *httpc.CallIDs, yield func(providers.Event, error) bool) bool {
	if c.Error != "" {
		yield(nil, httpc.Classify(name, 0, "", c.Error))
		return false
	}
	if c.Message.Thinking != "" && !yield(&providers.Reasoning{Text: c.Message.Thinking}, nil) {
		return false
	}
	if c.Message.Content != "" && !yield(&providers.TextDelta{Text: c.Message.Content}, nil) {
		return false
	}
	for _, tc := range c.Message.ToolCalls {
		call := &agentdv1.ToolCall{Id: ids.Next(tc.ID), Name: tc.Function.Name, Arguments: providers.CompactArguments(tc.Function.Arguments)}
		if !yield(&providers.ToolCall{Call: call}, nil) {
			return false
		}
	}
	return !c.Done || c.finish(yield)
}

// finish yields the usage and stop of the stream's last line.
func (c *chatResponse) finish(yield func(providers.Event, error) bool) bool {
	usage := &agentdv1.Usage{InputTokens: c.PromptEvalCount, OutputTokens: c.EvalCount}
	if !yield(&providers.Usage{Usage: usage}, nil) {
		return false
	}
	// Ollama names no response: an answer has no id.
	info := providers.Response{Model: c.Model, FinishReason: c.DoneReason}
	return yield(&providers.Stop{Reason: stopReasons[c.DoneReason], Response: info}, nil)
}

// stopReasons maps Ollama's done reasons; any other is unspecified.
var stopReasons = map[string]agentdv1.StopReason{
	"stop":   agentdv1.StopReason_STOP_REASON_END_TURN,
	"length": agentdv1.StopReason_STOP_REASON_MAX_TOKENS,
}
