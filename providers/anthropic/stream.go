package anthropic

import (
	"bytes"
	"cmp"
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
		kind, err := decodeEvent(raw, &ev)
		if err != nil {
			yield(nil, err)
			return
		}
		if kind == "message_stop" {
			t.finish(yield)
			return
		}
		if !yieldAll(t.handle(kind, &ev), yield) {
			return
		}
	}
}

// decodeEvent decodes an event's data into ev and returns its kind: the
// event's name, else its data's type.
func decodeEvent(raw sse.Event, ev *event) (string, error) {
	if err := json.Unmarshal(raw.Data, ev); err != nil {
		return "", fault.Wrap(fault.Unavailable, err, "anthropic: the response stream holds an invalid %q event", raw.Name)
	}
	return cmp.Or(raw.Name, ev.Type), nil
}

// finish yields the turn's usage and its stop, at message_stop.
func (t *reply) finish(yield func(providers.Event, error) bool) {
	if yield(&providers.Usage{Usage: t.usage}, nil) {
		yield(&providers.Stop{Reason: t.stop, Paused: t.paused, Response: t.response}, nil)
	}
}

// yieldAll yields what an event completed; false when the stream ends
// there, on an error or when no more is wanted.
func yieldAll(results []result, yield func(providers.Event, error) bool) bool {
	for _, out := range results {
		if !yield(out.ev, out.err) || out.err != nil {
			return false
		}
	}
	return true
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
		t.messageStart(ev)
	case "content_block_start":
		return t.blockStart(ev)
	case "content_block_delta":
		return t.blockDelta(ev)
	case "content_block_stop":
		return t.blockStop(ev)
	case "message_delta":
		t.messageDelta(ev)
	case "error":
		e := ev.Error
		if e == nil {
			e = &apiError{Type: "error", Message: "unknown error"}
		}
		return []result{{err: httpc.Classify(name, 0, e.Type, e.Message)}}
	}
	return nil // ping, and event types newer than this adapter
}

// messageStart takes the response's id, model and first usage.
func (t *reply) messageStart(ev *event) {
	if ev.Message != nil {
		t.response.ID, t.response.Model = ev.Message.ID, ev.Message.Model
		t.addUsage(&ev.Message.Usage)
	}
}

// blockStart opens a content block, and yields the text or reasoning it
// begins with.
func (t *reply) blockStart(ev *event) []result {
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
	return nil
}

// blockDelta yields a delta's text or reasoning, or gathers it into its
// block: a tool's input, and the text of a provider-side tool's result.
func (t *reply) blockDelta(ev *event) []result {
	b := t.blocks[ev.Index]
	if b == nil || ev.Delta == nil {
		return nil
	}
	d := ev.Delta
	switch d.Type {
	case "text_delta":
		return b.textDelta(d.Text)
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
	return nil
}

// textDelta yields a block's text, or gathers it when it is the result of
// a provider-side tool.
func (b *openBlock) textDelta(text string) []result {
	if b.block.Type == "mcp_tool_result" {
		b.text.WriteString(text)
		return nil
	}
	if text != "" {
		return one(&providers.TextDelta{Text: text})
	}
	return nil
}

// blockStop closes a block and yields the call it completes: a tool call,
// or a provider-side call once its result has come (its use is kept until
// then).
func (t *reply) blockStop(ev *event) []result {
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
	return nil
}

// messageDelta takes the stop reason and the usage so far.
func (t *reply) messageDelta(ev *event) {
	if ev.Delta != nil && ev.Delta.StopReason != "" {
		t.stop = stopReasons[ev.Delta.StopReason]
		t.response.FinishReason = ev.Delta.StopReason
		t.paused = ev.Delta.StopReason == "pause_turn"
	}
	if ev.Usage != nil {
		t.addUsage(ev.Usage)
	}
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

// stopReasons maps Anthropic's stop reasons; any other is unspecified.
// tool_use and pause_turn end the turn like end_turn: the tool calls
// yielded say whether the loop goes on, and a pause_turn also sets
// Stop.Paused so that the loop sends the turn back for the server to
// continue. A context window filled up ends the output like max_tokens.
var stopReasons = map[string]agentdv1.StopReason{
	"end_turn":                      agentdv1.StopReason_STOP_REASON_END_TURN,
	"tool_use":                      agentdv1.StopReason_STOP_REASON_END_TURN,
	"pause_turn":                    agentdv1.StopReason_STOP_REASON_END_TURN,
	"max_tokens":                    agentdv1.StopReason_STOP_REASON_MAX_TOKENS,
	"model_context_window_exceeded": agentdv1.StopReason_STOP_REASON_MAX_TOKENS,
	"stop_sequence":                 agentdv1.StopReason_STOP_REASON_STOP_SEQUENCE,
	"refusal":                       agentdv1.StopReason_STOP_REASON_CONTENT_FILTER,
}
