package openairesponses

import (
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

// streamEvent holds the fields of the stream events this adapter reads;
// the API sends many more, which are ignored.
type streamEvent struct {
	Type         string          `json:"type"`
	OutputIndex  int             `json:"output_index"`
	SummaryIndex int             `json:"summary_index"`
	Delta        string          `json:"delta"`
	Arguments    *string         `json:"arguments"`
	Item         *outputItem     `json:"item"`
	Response     *response       `json:"response"`
	Code         json.RawMessage `json:"code"`
	Message      string          `json:"message"`
	Error        json.RawMessage `json:"error"`
}

// outputItem is an item of a response's output.
type outputItem struct {
	Type             string          `json:"type"`
	ID               string          `json:"id"`
	CallID           string          `json:"call_id"`
	Name             string          `json:"name"`
	Arguments        string          `json:"arguments"`
	ServerLabel      string          `json:"server_label"`
	Output           json.RawMessage `json:"output"`
	Error            json.RawMessage `json:"error"`
	EncryptedContent string          `json:"encrypted_content"`
}

// response is the response object of the terminal events.
type response struct {
	ID                string `json:"id"`
	Model             string `json:"model"`
	Status            string `json:"status"`
	IncompleteDetails *struct {
		Reason string `json:"reason"`
	} `json:"incomplete_details"`
	Error *struct {
		Code    string `json:"code"`
		Message string `json:"message"`
	} `json:"error"`
	Usage *responseUsage `json:"usage"`
}

type responseUsage struct {
	InputTokens        int64 `json:"input_tokens"`
	OutputTokens       int64 `json:"output_tokens"`
	InputTokensDetails *struct {
		CachedTokens int64 `json:"cached_tokens"`
	} `json:"input_tokens_details"`
}

// pendingCall is a function call being streamed.
type pendingCall struct {
	callID, name string
	args         strings.Builder
	done         *string // the arguments of function_call_arguments.done
}

// read parses the SSE stream of one turn and yields its events. It returns
// after the first terminal event (response.completed, response.incomplete,
// response.failed, error); a stream that ends before one is truncated.
func read(ctx context.Context, body io.Reader, yield func(providers.Event, error) bool) {
	r := sse.NewReader(body)
	defer r.Close() // its buffer goes back to the pool; no event shares it
	t := turn{calls: make(map[int]*pendingCall)}
	for {
		raw, err := r.Next()
		if err != nil { // io.EOF too: the stream ended before a terminal event
			yield(nil, httpc.StreamError(ctx, name, err))
			return
		}
		var ev streamEvent
		typ, err := decodeEvent(raw, &ev)
		if err != nil {
			yield(nil, err)
			return
		}
		if !t.handle(typ, &ev, yield) {
			return
		}
	}
}

// decodeEvent decodes an event's data into ev and returns its type: the
// event's name, else its data's type.
func decodeEvent(raw sse.Event, ev *streamEvent) (string, error) {
	if err := json.Unmarshal(raw.Data, ev); err != nil {
		return "", fault.Wrap(fault.Unavailable, err, "%s: the response stream holds invalid JSON", name)
	}
	return cmp.Or(raw.Name, ev.Type), nil
}

// turn is what read gathers of one turn's events.
type turn struct {
	calls   map[int]*pendingCall // the function calls being streamed, by output index
	refused bool                 // the model refused: the turn stops as filtered
}

// handle applies one event of type typ; false when the turn ends there: a
// terminal event, a failure, or no more events wanted.
func (t *turn) handle(typ string, ev *streamEvent, yield func(providers.Event, error) bool) bool {
	switch typ {
	case "response.output_text.delta", "response.refusal.delta":
		return t.text(typ == "response.refusal.delta", ev.Delta, yield)
	case "response.reasoning_summary_text.delta":
		return ev.Delta == "" || yield(&providers.Reasoning{Text: ev.Delta}, nil)
	case "response.reasoning_summary_part.added":
		// Summary parts are paragraphs; keep them apart in the text.
		return ev.SummaryIndex == 0 || yield(&providers.Reasoning{Text: "\n\n"}, nil)
	case "response.output_item.added":
		return t.added(ev, yield)
	case "response.function_call_arguments.delta":
		t.argumentsDelta(ev)
	case "response.function_call_arguments.done":
		t.argumentsDone(ev)
	case "response.output_item.done":
		return t.done(ev, yield)
	case "response.completed", "response.incomplete":
		finish(ev.Response, t.refused, yield)
		return false
	case "response.failed":
		yield(nil, failed(ev.Response))
		return false
	case "error":
		yield(nil, streamError(ev))
		return false
	}
	return true
}

// text yields a piece of the answer's text, or of a refusal: what the
// model says in place of an answer, which the user reads as text, and
// which stops the turn as filtered, so that it is never taken for the
// answer.
func (t *turn) text(refusal bool, delta string, yield func(providers.Event, error) bool) bool {
	t.refused = t.refused || refusal
	return delta == "" || yield(&providers.TextDelta{Text: delta}, nil)
}

// added begins a function call's item; an approval request fails the
// turn.
func (t *turn) added(ev *streamEvent, yield func(providers.Event, error) bool) bool {
	if ev.Item == nil {
		return true
	}
	switch ev.Item.Type {
	case "function_call":
		// name and call_id are reliable only here.
		t.calls[ev.OutputIndex] = &pendingCall{callID: ev.Item.CallID, name: ev.Item.Name}
	case "mcp_approval_request":
		yield(nil, approvalRequested(ev.Item))
		return false
	}
	return true
}

// argumentsDelta adds a fragment of a call's arguments.
func (t *turn) argumentsDelta(ev *streamEvent) {
	if c := t.calls[ev.OutputIndex]; c != nil {
		c.args.WriteString(ev.Delta)
	}
}

// argumentsDone takes a call's whole arguments.
func (t *turn) argumentsDone(ev *streamEvent) {
	if c := t.calls[ev.OutputIndex]; c != nil && ev.Arguments != nil {
		c.done = ev.Arguments
	}
}

// done yields what a finished item is, if anything.
func (t *turn) done(ev *streamEvent, yield func(providers.Event, error) bool) bool {
	if ev.Item == nil {
		return true
	}
	out, err := itemDone(ev.Item, t.calls[ev.OutputIndex])
	delete(t.calls, ev.OutputIndex)
	if err != nil {
		yield(nil, err)
		return false
	}
	return out == nil || yield(out, nil)
}

// itemDone turns a finished output item into its event, or none for items
// that are not reported: messages were streamed as deltas, and
// mcp_list_tools only feeds the API's own context.
func itemDone(it *outputItem, c *pendingCall) (providers.Event, error) {
	switch it.Type {
	case "function_call":
		return &providers.ToolCall{Call: functionCall(it, c)}, nil
	case "mcp_call":
		return &providers.ProviderToolCall{Call: connectorCall(it)}, nil
	case "reasoning":
		if it.EncryptedContent != "" {
			return &providers.Reasoning{Signature: it.EncryptedContent}, nil
		}
	case "mcp_approval_request":
		return nil, approvalRequested(it)
	}
	return nil, nil
}

// functionCall is a finished function_call item, with what its stream
// said (c, nil when it said nothing) over what the item repeats.
func functionCall(it *outputItem, c *pendingCall) *agentdv1.ToolCall {
	call := &agentdv1.ToolCall{Id: it.CallID, Name: it.Name, Arguments: it.Arguments}
	if c != nil {
		call.Id = cmp.Or(c.callID, call.Id)
		call.Name = cmp.Or(c.name, call.Name)
		switch {
		case c.done != nil:
			call.Arguments = *c.done
		case c.args.Len() > 0:
			call.Arguments = c.args.String()
		}
	}
	call.Arguments = providers.CompactArguments([]byte(call.Arguments))
	return call
}

// connectorCall is a finished mcp_call item: a call the API made to a
// provider-side server; a failed one's output is its error when it has
// no other.
func connectorCall(it *outputItem) *agentdv1.ProviderToolCall {
	call := &agentdv1.ProviderToolCall{Id: it.ID, ServerName: it.ServerLabel, ToolName: it.Name, Arguments: providers.CompactArguments([]byte(it.Arguments)), Output: text(it.Output)}
	if msg := errorText(it.Error); msg != "" {
		call.IsError = true
		call.Output = cmp.Or(call.Output, msg)
	}
	return call
}

// approvalRequested is the failure of a turn that stopped for an MCP
// approval: agentd sends its servers with require_approval "never", so the
// request can only come from a native mcp tool in provider_options.
func approvalRequested(it *outputItem) error {
	return fault.New(fault.FailedPrecondition,
		"%s: the API asks for approval to call %q on MCP server %q, which agentd cannot give: set \"require_approval\": \"never\" on that server's mcp tool in provider_options, or declare the server in the agent's mcps so agentd's approvals apply",
		name, it.Name, it.ServerLabel)
}

// finish yields the usage and stop reason of a completed or incomplete
// response; a refused one stops as filtered, whatever its status.
func finish(resp *response, refused bool, yield func(providers.Event, error) bool) {
	if resp == nil {
		yield(nil, fault.New(fault.Unavailable, "%s: the response stream's terminal event holds no response", name))
		return
	}
	if u := resp.Usage; u != nil && !yield(&providers.Usage{Usage: u.usage()}, nil) {
		return
	}
	stop := resp.stop()
	if refused {
		stop.Reason = agentdv1.StopReason_STOP_REASON_CONTENT_FILTER
	}
	yield(stop, nil)
}

// stop is the Stop of a completed or incomplete response. The API gives
// no finish reason but a status, and why an incomplete response stopped.
func (resp *response) stop() *providers.Stop {
	info := providers.Response{ID: resp.ID, Model: resp.Model, FinishReason: resp.Status}
	stop := agentdv1.StopReason_STOP_REASON_END_TURN
	if resp.Status == "incomplete" {
		stop = agentdv1.StopReason_STOP_REASON_UNSPECIFIED
		if d := resp.IncompleteDetails; d != nil {
			info.FinishReason = d.Reason
			stop = incompleteReasons[d.Reason]
		}
	}
	return &providers.Stop{Reason: stop, Response: info}
}

// incompleteReasons maps why a response is incomplete to the stop
// reason; any other is unspecified.
var incompleteReasons = map[string]agentdv1.StopReason{
	"max_output_tokens": agentdv1.StopReason_STOP_REASON_MAX_TOKENS,
	"content_filter":    agentdv1.StopReason_STOP_REASON_CONTENT_FILTER,
}

// usage converts a response's usage. OpenAI counts cached tokens within
// input_tokens; agentd's input_tokens are those billed at the full rate.
func (u *responseUsage) usage() *agentdv1.Usage {
	usage := &agentdv1.Usage{OutputTokens: u.OutputTokens, InputTokens: u.InputTokens}
	if d := u.InputTokensDetails; d != nil {
		usage.CacheReadInputTokens = d.CachedTokens
		usage.InputTokens = max(u.InputTokens-d.CachedTokens, 0)
	}
	return usage
}

// failed is the fault of a response.failed event.
func failed(resp *response) error {
	if resp == nil || resp.Error == nil {
		return httpc.Classify(name, 0, "", "the response failed")
	}
	return httpc.Classify(name, 0, resp.Error.Code, cmp.Or(resp.Error.Message, "the response failed"))
}

// streamError is the fault of an "error" event: {"type": "error", "code",
// "message", "param"}, or the same fields nested in "error".
func streamError(ev *streamEvent) error {
	code, msg := text(ev.Code), ev.Message
	if msg == "" && len(ev.Error) > 0 {
		var m string
		m, code = httpc.ErrorObject(ev.Error)
		msg = m
	}
	return httpc.Classify(name, 0, code, cmp.Or(msg, "the API reported an error"))
}

// text renders a JSON value as text: a string as itself, null as "",
// anything else as its JSON.
func text(raw json.RawMessage) string {
	if len(raw) == 0 || string(raw) == "null" {
		return ""
	}
	var s string
	if json.Unmarshal(raw, &s) == nil {
		return s
	}
	return string(raw)
}

// errorText is the message of an mcp_call's error: a string, or an object
// with a message (protocol and HTTP errors) or content (tool errors).
func errorText(raw json.RawMessage) string {
	var obj struct {
		Message string          `json:"message"`
		Content json.RawMessage `json:"content"`
	}
	if len(raw) > 0 && raw[0] == '{' && json.Unmarshal(raw, &obj) == nil {
		switch {
		case obj.Message != "":
			return obj.Message
		case len(obj.Content) > 0 && string(obj.Content) != "null":
			return text(obj.Content)
		}
	}
	return text(raw)
}
