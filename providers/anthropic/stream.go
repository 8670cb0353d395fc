package anthropic

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"strings"

	agentdv1 "github.com/agentd/agentd/gen/go/agentd/v1"
	"github.com/agentd/agentd/internal/fault"
	"github.com/agentd/agentd/providers"
	"github.com/agentd/agentd/providers/internal/httpc"
	"github.com/agentd/agentd/providers/internal/sse"
)

// event is the data of any stream event; each type fills its own fields.
type event struct {
	Type         string        `json:"type"`
	Index        int           `json:"index"`
	Message      *startMessage `json:"message"`
	ContentBlock *contentBlock `json:"content_block"`
	Delta        *delta        `json:"delta"`
	Usage        *usage        `json:"usage"`
	Error        *apiError     `json:"error"`
}

type startMessage struct {
	ID    string `json:"id"`
	Model string `json:"model"`
	Usage usage  `json:"usage"`
}

// usage counts are cumulative: message_delta repeats the totals so far.
type usage struct {
	InputTokens              *int64 `json:"input_tokens"`
	OutputTokens             *int64 `json:"output_tokens"`
	CacheCreationInputTokens *int64 `json:"cache_creation_input_tokens"`
	CacheReadInputTokens     *int64 `json:"cache_read_input_tokens"`
}

type contentBlock struct {
	Type       string          `json:"type"`
	ID         string          `json:"id"`
	Name       string          `json:"name"`
	ServerName string          `json:"server_name"`
	Input      json.RawMessage `json:"input"`
	Text       string          `json:"text"`
	Thinking   string          `json:"thinking"`
	Signature  string          `json:"signature"`
	Data       string          `json:"data"` // redacted_thinking
	ToolUseID  string          `json:"tool_use_id"`
	IsError    bool            `json:"is_error"`
	Content    json.RawMessage `json:"content"`
}

type delta struct {
	Type        string `json:"type"`
	Text        string `json:"text"`
	Thinking    string `json:"thinking"`
	Signature   string `json:"signature"`
	PartialJSON string `json:"partial_json"`
	StopReason  string `json:"stop_reason"`
}

// openBlock is a content block between its start and its stop.
type openBlock struct {
	block contentBlock
	input strings.Builder // input_json_delta fragments
	text  strings.Builder // text deltas of an mcp_tool_result
}

// reply is what a stream has said so far.
type reply struct {
	blocks map[int]*openBlock
	// uses are the connector's finished mcp_tool_use blocks by id, waiting
	// for their results.
	uses  map[string]*openBlock
	usage *agentdv1.Usage
	stop  agentdv1.StopReason
	// response: the message's id and model (message_start) and its
	// stop_reason, for telemetry.
	response providers.Response
	// paused: stop_reason pause_turn, the server paused a long turn.
	paused bool
}

// readStream turns the SSE stream of a turn into events. The turn ends at
// message_stop; a stream that ends before it was cut off, and is an error
// rather than a short answer.
func readStream(ctx context.Context, body io.Reader, yield func(providers.Event, error) bool) {
	t := &reply{blocks: make(map[int]*openBlock), uses: make(map[string]*openBlock), usage: &agentdv1.Usage{}}
	r := sse.NewReader(body)
	defer r.Close() // its buffer goes back to the pool; no event shares it
	for {
		raw, err := r.Next()
		if err != nil { // io.EOF too: the stream ended before message_stop
			yield(nil, httpc.StreamError(ctx, name, err))
			return
		}
		var ev event
		if err := json.Unmarshal(raw.Data, &ev); err != nil {
			yield(nil, fault.Wrap(fault.Unavailable, err, "anthropic: the response stream holds an invalid %q event", raw.Name))
			return
		}
		kind := raw.Name
		if kind == "" {
			kind = ev.Type
		}
		if kind == "message_stop" {
			if yield(&providers.Usage{Usage: t.usage}, nil) {
				yield(&providers.Stop{Reason: t.stop, Paused: t.paused, Response: t.response}, nil)
			}
			return
		}
		for _, out := range t.handle(kind, &ev) {
			if !yield(out.ev, out.err) || out.err != nil {
				return
			}
		}
	}
}

// result is an event, or the error that ends the stream.
type result struct {
	ev  providers.Event
	err error
}

// handle applies one event and returns what it completes.
func (t *reply) handle(kind string, ev *event) []result {
	switch kind {
	case "message_start":
		if ev.Message != nil {
			t.response.ID, t.response.Model = ev.Message.ID, ev.Message.Model
			t.addUsage(&ev.Message.Usage)
		}
	case "content_block_start":
		if ev.ContentBlock == nil {
			return nil
		}
		b := &openBlock{block: *ev.ContentBlock}
		t.blocks[ev.Index] = b
		switch b.block.Type {
		case "text":
			if b.block.Text != "" {
				return one(&providers.TextDelta{Text: b.block.Text})
			}
		case "thinking":
			if b.block.Thinking != "" || b.block.Signature != "" {
				return one(&providers.Reasoning{Text: b.block.Thinking, Signature: b.block.Signature})
			}
		case "redacted_thinking":
			if b.block.Data != "" {
				return one(&providers.Reasoning{Signature: b.block.Data, Redacted: true})
			}
		}
	case "content_block_delta":
		b := t.blocks[ev.Index]
		if b == nil || ev.Delta == nil {
			return nil
		}
		d := ev.Delta
		switch d.Type {
		case "text_delta":
			if b.block.Type == "mcp_tool_result" {
				b.text.WriteString(d.Text)
				return nil
			}
			if d.Text != "" {
				return one(&providers.TextDelta{Text: d.Text})
			}
		case "thinking_delta":
			if d.Thinking != "" {
				return one(&providers.Reasoning{Text: d.Thinking})
			}
		case "signature_delta":
			if d.Signature != "" {
				return one(&providers.Reasoning{Signature: d.Signature})
			}
		case "input_json_delta":
			b.input.WriteString(d.PartialJSON)
		}
	case "content_block_stop":
		b := t.blocks[ev.Index]
		delete(t.blocks, ev.Index)
		if b == nil {
			return nil
		}
		switch b.block.Type {
		case "tool_use":
			return one(&providers.ToolCall{Call: &agentdv1.ToolCall{Id: b.block.ID, Name: b.block.Name, Arguments: b.arguments()}})
		case "mcp_tool_use":
			t.uses[b.block.ID] = b
		case "mcp_tool_result":
			return one(&providers.ProviderToolCall{Call: t.providerCall(b)})
		}
	case "message_delta":
		if ev.Delta != nil && ev.Delta.StopReason != "" {
			t.stop = stopReason(ev.Delta.StopReason)
			t.response.FinishReason = ev.Delta.StopReason
			t.paused = ev.Delta.StopReason == "pause_turn"
		}
		if ev.Usage != nil {
			t.addUsage(ev.Usage)
		}
	case "error":
		e := ev.Error
		if e == nil {
			e = &apiError{Type: "error", Message: "unknown error"}
		}
		return []result{{err: httpc.Classify(name, 0, e.Type, e.Message)}}
	}
	return nil // ping, and event types newer than this adapter
}

func one(ev providers.Event) []result { return []result{{ev: ev}} }

// addUsage takes the counts an event reports. Input and cache counts come
// with message_start; a message_delta that repeats them as zero does not
// erase them.
func (t *reply) addUsage(u *usage) {
	set := func(dst *int64, v *int64) {
		if v != nil && *v > 0 {
			*dst = *v
		}
	}
	set(&t.usage.InputTokens, u.InputTokens)
	set(&t.usage.CacheWriteInputTokens, u.CacheCreationInputTokens)
	set(&t.usage.CacheReadInputTokens, u.CacheReadInputTokens)
	if u.OutputTokens != nil {
		t.usage.OutputTokens = *u.OutputTokens
	}
}

// arguments is the input of a tool_use or mcp_tool_use block: its
// streamed fragments, else the input of its start (a block sent whole),
// by providers.CompactArguments' rule.
func (b *openBlock) arguments() string {
	in := []byte(b.input.String())
	if len(bytes.TrimSpace(in)) == 0 {
		in = b.block.Input
	}
	return providers.CompactArguments(in)
}

// providerCall joins an mcp_tool_result with the mcp_tool_use it answers.
func (t *reply) providerCall(res *openBlock) *agentdv1.ProviderToolCall {
	c := &agentdv1.ProviderToolCall{Id: res.block.ToolUseID, IsError: res.block.IsError}
	if use := t.uses[res.block.ToolUseID]; use != nil {
		delete(t.uses, res.block.ToolUseID)
		c.ServerName, c.ToolName, c.Arguments = use.block.ServerName, use.block.Name, use.arguments()
	}
	c.Output = resultText(res.block.Content) + res.text.String()
	return c
}

// resultText is the content of an mcp_tool_result: a string, or text
// blocks joined by newlines.
func resultText(content json.RawMessage) string {
	var s string
	if json.Unmarshal(content, &s) == nil {
		return s
	}
	var blocks []struct {
		Type string `json:"type"`
		Text string `json:"text"`
	}
	if json.Unmarshal(content, &blocks) != nil {
		return ""
	}
	var texts []string
	for _, b := range blocks {
		if b.Type == "text" {
			texts = append(texts, b.Text)
		}
	}
	return strings.Join(texts, "\n")
}

// stopReason maps Anthropic's stop reasons. tool_use and pause_turn end
// the turn like end_turn: the tool calls yielded say whether the loop goes
// on, and a pause_turn also sets Stop.Paused so that the loop sends the
// turn back for the server to continue. A context window filled up ends
// the output like max_tokens.
func stopReason(r string) agentdv1.StopReason {
	switch r {
	case "end_turn", "tool_use", "pause_turn":
		return agentdv1.StopReason_STOP_REASON_END_TURN
	case "max_tokens", "model_context_window_exceeded":
		return agentdv1.StopReason_STOP_REASON_MAX_TOKENS
	case "stop_sequence":
		return agentdv1.StopReason_STOP_REASON_STOP_SEQUENCE
	case "refusal":
		return agentdv1.StopReason_STOP_REASON_CONTENT_FILTER
	}
	return agentdv1.StopReason_STOP_REASON_UNSPECIFIED
}
