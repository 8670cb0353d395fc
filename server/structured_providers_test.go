package server_test

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/google/go-cmp/cmp"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	agentdv1 "github.com/agentd/agentd/gen/go/agentd/v1"
	"github.com/agentd/agentd/providers"
	"github.com/agentd/agentd/providers/registry"
	"github.com/agentd/agentd/server"
)

// apiTurn is what a fake API answers on one turn: a call of the function
// named call, with args (a JSON object), or text.
type apiTurn struct{ call, args, text string }

// wire is an API's streaming wire format: its content type, and its
// answer's body on turn n (from 1), in the shapes of the adapter's
// testdata transcripts.
type wire struct {
	contentType string
	body        func(n int, a apiTurn) string
}

// sse is one server-sent event, named unless name is empty.
func sse(name, data string) string {
	if name == "" {
		return "data: " + data + "\n\n"
	}
	return "event: " + name + "\ndata: " + data + "\n\n"
}

// quote is s as a JSON string.
func quote(s string) string {
	b, _ := json.Marshal(s)
	return string(b)
}

// chatWire is Chat Completions' (openai, azure, deepseek, openrouter,
// requesty): chunks with a delta, one with the finish reason, one with
// the usage, then [DONE].
var chatWire = wire{"text/event-stream", func(n int, a apiTurn) string {
	delta, finish := fmt.Sprintf(`{"role":"assistant","content":%s}`, quote(a.text)), "stop"
	if a.call != "" {
		delta, finish = fmt.Sprintf(`{"role":"assistant","content":null,"tool_calls":[{"index":0,"id":"call_%d","type":"function","function":{"name":%s,"arguments":%s}}]}`,
			n, quote(a.call), quote(a.args)), "tool_calls"
	}
	chunk := func(choices, usage string) string {
		return sse("", fmt.Sprintf(`{"id":"chatcmpl-%d","object":"chat.completion.chunk","created":1764500000,"model":"gpt-4o-mini-2024-07-18","choices":%s,"usage":%s}`, n, choices, usage))
	}
	return chunk(`[{"index":0,"delta":`+delta+`,"logprobs":null,"finish_reason":null}]`, "null") +
		chunk(`[{"index":0,"delta":{},"logprobs":null,"finish_reason":"`+finish+`"}]`, "null") +
		chunk("[]", `{"prompt_tokens":96,"completion_tokens":15,"total_tokens":111}`) + "data: [DONE]\n\n"
}}

// responsesWire is the Responses API's: the response created, one output
// item added (its text streamed as a delta, a call's arguments done) and
// done, the response completed.
var responsesWire = wire{"text/event-stream", func(n int, a apiTurn) string {
	item := fmt.Sprintf(`{"id":"msg_%d","type":"message","status":"completed","role":"assistant","content":[{"type":"output_text","annotations":[],"text":%s}]}`, n, quote(a.text))
	stream := sse("response.output_text.delta", fmt.Sprintf(`{"type":"response.output_text.delta","sequence_number":2,"item_id":"msg_%d","output_index":0,"content_index":0,"delta":%s}`, n, quote(a.text)))
	if a.call != "" {
		item = fmt.Sprintf(`{"id":"fc_%d","type":"function_call","status":"completed","arguments":%s,"call_id":"call_%d","name":%s}`, n, quote(a.args), n, quote(a.call))
		stream = sse("response.function_call_arguments.done", fmt.Sprintf(`{"type":"response.function_call_arguments.done","sequence_number":2,"item_id":"fc_%d","output_index":0,"arguments":%s}`, n, quote(a.args)))
	}
	response := func(status, output string) string {
		return fmt.Sprintf(`{"id":"resp_%d","object":"response","created_at":1764460800,"status":"%s","error":null,"incomplete_details":null,"model":"gpt-5-mini-2025-08-07","output":%s,"usage":{"input_tokens":96,"output_tokens":18,"total_tokens":114}}`, n, status, output)
	}
	return sse("response.created", `{"type":"response.created","sequence_number":0,"response":`+response("in_progress", "[]")+`}`) +
		sse("response.output_item.added", `{"type":"response.output_item.added","sequence_number":1,"output_index":0,"item":`+item+`}`) + stream +
		sse("response.output_item.done", `{"type":"response.output_item.done","sequence_number":3,"output_index":0,"item":`+item+`}`) +
		sse("response.completed", `{"type":"response.completed","sequence_number":4,"response":`+response("completed", "["+item+"]")+`}`)
}}

// anthropicWire is the Messages API's: the message started, one content
// block (text, or a tool_use whose input streams as JSON), the stop
// reason, the message stopped.
var anthropicWire = wire{"text/event-stream", func(n int, a apiTurn) string {
	block, delta, stop := `{"type":"text","text":""}`, fmt.Sprintf(`{"type":"text_delta","text":%s}`, quote(a.text)), "end_turn"
	if a.call != "" {
		block = fmt.Sprintf(`{"type":"tool_use","id":"toolu_%d","name":%s,"input":{}}`, n, quote(a.call))
		delta, stop = fmt.Sprintf(`{"type":"input_json_delta","partial_json":%s}`, quote(a.args)), "tool_use"
	}
	return sse("message_start", fmt.Sprintf(`{"type":"message_start","message":{"id":"msg_%d","type":"message","role":"assistant","model":"claude-sonnet-4-5-20250929","content":[],"stop_reason":null,"stop_sequence":null,"usage":{"input_tokens":412,"output_tokens":1}}}`, n)) +
		sse("content_block_start", `{"type":"content_block_start","index":0,"content_block":`+block+`}`) +
		sse("content_block_delta", `{"type":"content_block_delta","index":0,"delta":`+delta+`}`) +
		sse("content_block_stop", `{"type":"content_block_stop","index":0}`) +
		sse("message_delta", `{"type":"message_delta","delta":{"stop_reason":"`+stop+`","stop_sequence":null},"usage":{"output_tokens":17}}`) +
		sse("message_stop", `{"type":"message_stop"}`)
}}

// geminiWire is streamGenerateContent's (alt=sse): one candidate whose
// part is text or a whole functionCall, finished.
var geminiWire = wire{"text/event-stream", func(n int, a apiTurn) string {
	part := fmt.Sprintf(`{"text":%s}`, quote(a.text))
	if a.call != "" {
		part = fmt.Sprintf(`{"functionCall":{"name":%s,"args":%s}}`, quote(a.call), a.args)
	}
	return sse("", fmt.Sprintf(`{"candidates":[{"content":{"parts":[%s],"role":"model"},"finishReason":"STOP","index":0}],"usageMetadata":{"promptTokenCount":70,"candidatesTokenCount":18,"totalTokenCount":88},"modelVersion":"gemini","responseId":"resp-%d"}`, part, n))
}}

// ollamaWire is /api/chat's NDJSON: the message (text, or whole tool
// calls), then the done line.
var ollamaWire = wire{"application/x-ndjson", func(_ int, a apiTurn) string {
	msg := fmt.Sprintf(`{"role":"assistant","content":%s}`, quote(a.text))
	if a.call != "" {
		msg = fmt.Sprintf(`{"role":"assistant","content":"","tool_calls":[{"function":{"name":%s,"arguments":%s}}]}`, quote(a.call), a.args)
	}
	return `{"model":"llama3.2","created_at":"2025-06-10T09:14:03.512467Z","message":` + msg + `,"done":false}` + "\n" +
		`{"model":"llama3.2","created_at":"2025-06-10T09:14:03.512467Z","message":{"role":"assistant","content":""},"done_reason":"stop","done":true,"prompt_eval_count":213,"eval_count":25}` + "\n"
}}

// fakeAPI answers a provider's requests in order with turns, in its
// wire format, and records each request's body.
type fakeAPI struct {
	t     *testing.T
	wire  wire
	turns []apiTurn

	mu     sync.Mutex
	bodies []string
}

func (f *fakeAPI) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	body, _ := io.ReadAll(r.Body)
	f.mu.Lock()
	n := len(f.bodies)
	f.bodies = append(f.bodies, string(body))
	f.mu.Unlock()
	if n >= len(f.turns) {
		f.t.Errorf("request %d; the API has %d turns", n+1, len(f.turns))
		http.Error(w, `{"error": {"message": "no turn left"}}`, http.StatusBadRequest)
		return
	}
	w.Header().Set("Content-Type", f.wire.contentType)
	_, _ = io.WriteString(w, f.wire.body(n+1, f.turns[n]))
}

// raw is the bodies of the requests so far.
func (f *fakeAPI) raw() []string {
	f.mu.Lock()
	defer f.mu.Unlock()
	return slices.Clone(f.bodies)
}

// requests is the bodies of the requests so far, decoded.
func (f *fakeAPI) requests() []map[string]any {
	bodies := f.raw()
	out := make([]map[string]any, len(bodies))
	for i, b := range bodies {
		if err := json.Unmarshal([]byte(b), &out[i]); err != nil {
			f.t.Errorf("request %d: %v", i+1, err)
		}
	}
	return out
}

// lookup is the member of body at path, its keys joined by dots.
func lookup(body map[string]any, path string) (any, bool) {
	var v any = body
	for _, k := range strings.Split(path, ".") {
		m, ok := v.(map[string]any)
		if !ok {
			return nil, false
		}
		if v, ok = m[k]; !ok {
			return nil, false
		}
	}
	return v, true
}

// offersFinalAnswer reports whether body's tools declare final_answer,
// in whatever shape the API declares functions.
func offersFinalAnswer(body map[string]any) bool {
	tools, _ := json.Marshal(body["tools"])
	return strings.Contains(string(tools), `"final_answer"`)
}

// structuredRow is a provider row of docs/providers.md's structured
// output table: a real adapter, by its registry name, with a model.
type structuredRow struct {
	name, provider, model string
	wire                  wire
	// field is where the API takes the schema (its keys joined by dots).
	// A native row sends want there (the schema when want is nil); a tool
	// row sends nothing there, and the final_answer tool instead.
	field   string
	native  bool
	want    any
	noTools bool
}

// turns are the API's answers: echo called (unless the row offers no
// tools), an answer the schema refuses (a priority it does not list, or
// none), and one it accepts; as text on native rows, as final_answer
// calls on tool rows.
func (r structuredRow) turns() []apiTurn {
	answers := []apiTurn{{call: "final_answer", args: `{"title":"Jam"}`}, {call: "final_answer", args: `{"title":"Jam","priority":"high"}`}}
	if r.native {
		answers = []apiTurn{{text: `{"title":"Jam","priority":"urgent"}`}, {text: `{"title":"Jam","priority":"high"}`}}
	}
	if r.noTools {
		return answers
	}
	return append([]apiTurn{{call: "echo", args: `{"text":"printer"}`}}, answers...)
}

// generate runs a generation of the row's agent against the real adapter
// pointed at a fakeAPI playing the row's turns.
func (r structuredRow) generate(t *testing.T, repairs *int32) (*fakeAPI, *fakeBridge, []*agentdv1.GenerateResponse, *status.Status) {
	t.Helper()
	api := &fakeAPI{t: t, wire: r.wire, turns: r.turns()}
	srv := httptest.NewServer(api)
	t.Cleanup(srv.Close)
	i := slices.IndexFunc(registry.Declared, func(a registry.Adapter) bool { return a.Name == r.provider })
	prov := registry.Declared[i].New(providers.Settings{APIKey: "test-key", BaseURL: srv.URL, MaxRetries: -1})
	if c, ok := prov.(interface{ CloseIdleConnections() }); ok {
		t.Cleanup(c.CloseIdleConnections)
	}
	bridge := &fakeBridge{onList: offering(serverTools("demo", "echo"))}
	client := newClientWith(t, server.Options{Bridge: bridge}, prov)
	agent := &agentdv1.Agent{Provider: r.provider, Model: r.model, Output: ticketOutput(t, repairs)}
	if !r.noTools {
		agent.Mcps = []*agentdv1.MCPServer{refServer("", "demo")}
	}
	events, end := generate(t, client, &agentdv1.StartGeneration{Agent: agent, Messages: userSays("file it")}, nil)
	return api, bridge, events, end
}

// checkRequests fails unless every request carried the schema as the
// row's API takes it, and the last told the model why its answer was
// refused.
func (r structuredRow) checkRequests(t *testing.T, api *fakeAPI, schema map[string]any) {
	t.Helper()
	want := r.want
	if want == nil {
		want = schema
	}
	for i, body := range api.requests() {
		got, sent := lookup(body, r.field)
		switch {
		case r.native && (!sent || offersFinalAnswer(body)):
			t.Errorf("request %d: %s sent %t, final_answer offered %t; want the schema in its field alone", i+1, r.field, sent, offersFinalAnswer(body))
		case r.native:
			if diff := cmp.Diff(want, got); diff != "" {
				t.Errorf("request %d: %s (-want +got):\n%s", i+1, r.field, diff)
			}
		case sent || !offersFinalAnswer(body):
			t.Errorf("request %d: %s = %v, final_answer offered %t; want the final_answer tool alone", i+1, r.field, got, offersFinalAnswer(body))
		}
	}
	if raw := api.raw(); !strings.Contains(raw[len(raw)-1], "does not fit the required JSON Schema") {
		t.Errorf("the repair turn's request %s; want the schema's errors told to the model", raw[len(raw)-1])
	}
}

// Every provider row of the structured output table works with the tool
// loop over its API's own wire format: the real adapter sends the schema
// in the API's field where the row is native, else the final_answer tool;
// the model calls echo, gives an answer the schema refuses, is told why
// (an output_invalid event says a repair follows) and gives one it
// accepts, which completes the generation. With no repair turn, the
// refused answer fails it: FAILED_PRECONDITION, OUTPUT_INVALID.
func TestStructuredProviders(t *testing.T) {
	t.Parallel()
	const chatSchema = "response_format.json_schema.schema"
	for _, r := range []structuredRow{
		{name: "openai", provider: "openai", model: "gpt-4o-mini", wire: chatWire, field: chatSchema, native: true},
		{name: "openai-responses", provider: "openai-responses", model: "gpt-5-mini", wire: responsesWire, field: "text.format.schema", native: true},
		{name: "azure", provider: "azure", model: "prod-4o", wire: chatWire, field: chatSchema, native: true},
		{name: "deepseek", provider: "deepseek", model: "deepseek-chat", wire: chatWire, field: "response_format"},
		{name: "deepseek without tools", provider: "deepseek", model: "deepseek-chat", wire: chatWire, field: "response_format.type", native: true, want: "json_object", noTools: true},
		{name: "openrouter", provider: "openrouter", model: "openai/gpt-4o-mini", wire: chatWire, field: chatSchema, native: true},
		{name: "requesty", provider: "requesty", model: "openai/gpt-4o-mini", wire: chatWire, field: chatSchema, native: true},
		{name: "anthropic claude-sonnet-4-5", provider: "anthropic", model: "claude-sonnet-4-5", wire: anthropicWire, field: "output_config.format.schema", native: true},
		{name: "anthropic claude-3-5-haiku", provider: "anthropic", model: "claude-3-5-haiku-20241022", wire: anthropicWire, field: "output_config"},
		{name: "gemini-3", provider: "gemini", model: "gemini-3-flash-preview", wire: geminiWire, field: "generationConfig.responseJsonSchema", native: true},
		{name: "gemini-2.5", provider: "gemini", model: "gemini-2.5-flash", wire: geminiWire, field: "generationConfig.responseJsonSchema"},
		{name: "ollama", provider: "ollama", model: "llama3.2", wire: ollamaWire, field: "format"},
	} {
		t.Run(r.name, func(t *testing.T) {
			t.Parallel()
			api, bridge, events, end := r.generate(t, nil)
			wantCode(t, end, codes.OK)
			want := map[string]any{"title": "Jam", "priority": "high"}
			if got := completion(events).GetStructured().GetStructValue().AsMap(); !mapsEqual(got, want) {
				t.Errorf("completed.structured = %v; want %v", got, want)
			}
			if inv := invalidEvents(events); len(inv) != 1 || !inv[0].GetRepair() {
				t.Errorf("output_invalid %v; want one, with a repair", inv)
			}
			if n, want := bridge.callsTo("echo"), len(r.turns())-2; n != want {
				t.Errorf("echo ran %d times; want %d", n, want)
			}
			r.checkRequests(t, api, ticketOutput(t, nil).GetSchema().AsMap())

			api, _, events, end = r.generate(t, new(int32(0)))
			wantCode(t, end, codes.FailedPrecondition)
			if reason := errorInfo(end).GetReason(); reason != "OUTPUT_INVALID" || len(invalidEvents(events)) != 1 || len(api.raw()) != len(r.turns())-1 {
				t.Errorf("reason %q after %d output_invalid events and %d requests; want OUTPUT_INVALID after the refused answer", reason, len(invalidEvents(events)), len(api.raw()))
			}
		})
	}
}
