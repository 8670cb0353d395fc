package app_test

import (
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"

	agentdv1 "github.com/agentd/agentd/gen/go/agentd/v1"
	"github.com/agentd/agentd/internal/app"
	"github.com/agentd/agentd/internal/app/apptest"
	"github.com/agentd/agentd/internal/config"
	"github.com/agentd/agentd/internal/grpcserver"
	"github.com/agentd/agentd/providers/registry"
)

// fakeTurns is a provider API that answers the first request of a
// generation with a call of the demo server's echo tool, and the second
// with a text that quotes the tool's result, which it must find in the
// request. It records the requests' bodies.
type fakeTurns struct {
	mu     sync.Mutex
	bodies []string
	t      *testing.T
	// turn writes the response to the n-th request (from 1); result is
	// the echo output the second request must carry.
	turn func(w http.ResponseWriter, n int)
}

const echoResult = "through the bridge"

func (f *fakeTurns) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	body, _ := io.ReadAll(r.Body)
	f.mu.Lock()
	f.bodies = append(f.bodies, string(body))
	n := len(f.bodies)
	f.mu.Unlock()
	if n == 2 && !strings.Contains(string(body), echoResult) {
		f.t.Errorf("the second request does not carry the tool's result: %s", body)
	}
	f.turn(w, n)
}

func sseWrite(w http.ResponseWriter, events ...string) {
	w.Header().Set("Content-Type", "text/event-stream")
	for _, e := range events {
		fmt.Fprint(w, e)
	}
}

// chatTurns speaks OpenAI Chat Completions.
func chatTurns(w http.ResponseWriter, n int) {
	chunk := func(v any) string {
		b, _ := json.Marshal(v)
		return "data: " + string(b) + "\n\n"
	}
	choice := func(delta map[string]any, finish any) map[string]any {
		return map[string]any{"choices": []any{map[string]any{"index": 0, "delta": delta, "finish_reason": finish}}}
	}
	if n == 1 {
		sseWrite(w,
			chunk(choice(map[string]any{"role": "assistant", "tool_calls": []any{map[string]any{"index": 0, "id": "call_e2e", "type": "function",
				"function": map[string]any{"name": "echo", "arguments": `{"text":"` + echoResult + `"}`}}}}, nil)),
			chunk(choice(map[string]any{}, "tool_calls")),
			chunk(map[string]any{"choices": []any{}, "usage": map[string]any{"prompt_tokens": 10, "completion_tokens": 5}}),
			"data: [DONE]\n\n")
		return
	}
	sseWrite(w,
		chunk(choice(map[string]any{"role": "assistant", "content": "done: " + echoResult}, nil)),
		chunk(choice(map[string]any{}, "stop")),
		"data: [DONE]\n\n")
}

// geminiTurns speaks Gemini's streamGenerateContent (SSE).
func geminiTurns(w http.ResponseWriter, n int) {
	data := func(v any) string {
		b, _ := json.Marshal(v)
		return "data: " + string(b) + "\n\n"
	}
	part := map[string]any{"functionCall": map[string]any{"name": "echo", "args": map[string]any{"text": echoResult}}}
	if n == 2 {
		part = map[string]any{"text": "done: " + echoResult}
	}
	sseWrite(w, data(map[string]any{
		"candidates":    []any{map[string]any{"content": map[string]any{"role": "model", "parts": []any{part}}, "finishReason": "STOP", "index": 0}},
		"usageMetadata": map[string]any{"promptTokenCount": 10, "candidatesTokenCount": 5, "totalTokenCount": 15},
	}))
}

// ollamaTurns speaks Ollama's /api/chat (NDJSON).
func ollamaTurns(w http.ResponseWriter, n int) {
	w.Header().Set("Content-Type", "application/x-ndjson")
	msg := map[string]any{"role": "assistant", "content": "", "tool_calls": []any{map[string]any{"function": map[string]any{"name": "echo", "arguments": map[string]any{"text": echoResult}}}}}
	if n == 2 {
		msg = map[string]any{"role": "assistant", "content": "done: " + echoResult}
	}
	for _, line := range []map[string]any{
		{"model": "llama3.2", "created_at": "2026-11-30T00:00:00Z", "message": msg, "done": false},
		{"model": "llama3.2", "created_at": "2026-11-30T00:00:01Z", "message": map[string]any{"role": "assistant", "content": ""}, "done": true, "done_reason": "stop", "prompt_eval_count": 10, "eval_count": 5},
	} {
		b, _ := json.Marshal(line)
		fmt.Fprintf(w, "%s\n", b)
	}
}

// sseEvent is one named Server-Sent Event with a JSON payload.
func sseEvent(name string, v any) string {
	b, _ := json.Marshal(v)
	return "event: " + name + "\ndata: " + string(b) + "\n\n"
}

// anthropicTurns speaks Anthropic's Messages stream.
func anthropicTurns(w http.ResponseWriter, n int) {
	var blocks []string
	stop := "end_turn"
	if n == 1 {
		stop = "tool_use"
		blocks = append(blocks,
			sseEvent("content_block_start", map[string]any{"type": "content_block_start", "index": 0, "content_block": map[string]any{"type": "tool_use", "id": "toolu_e2e", "name": "echo", "input": map[string]any{}}}),
			sseEvent("content_block_delta", map[string]any{"type": "content_block_delta", "index": 0, "delta": map[string]any{"type": "input_json_delta", "partial_json": `{"text":"` + echoResult + `"}`}}),
			sseEvent("content_block_stop", map[string]any{"type": "content_block_stop", "index": 0}))
	} else {
		blocks = append(blocks,
			sseEvent("content_block_start", map[string]any{"type": "content_block_start", "index": 0, "content_block": map[string]any{"type": "text", "text": ""}}),
			sseEvent("content_block_delta", map[string]any{"type": "content_block_delta", "index": 0, "delta": map[string]any{"type": "text_delta", "text": "done: " + echoResult}}),
			sseEvent("content_block_stop", map[string]any{"type": "content_block_stop", "index": 0}))
	}
	anthropicMessage(w, stop, blocks...)
}

// anthropicMessage writes a whole Messages stream around content blocks.
func anthropicMessage(w http.ResponseWriter, stop string, blocks ...string) {
	events := []string{sseEvent("message_start", map[string]any{"type": "message_start", "message": map[string]any{
		"id": "msg_e2e", "type": "message", "role": "assistant", "model": "claude-sonnet-4-5", "content": []any{},
		"usage": map[string]any{"input_tokens": 10, "output_tokens": 1},
	}})}
	events = append(events, blocks...)
	events = append(events,
		sseEvent("message_delta", map[string]any{"type": "message_delta", "delta": map[string]any{"stop_reason": stop}, "usage": map[string]any{"output_tokens": 5}}),
		sseEvent("message_stop", map[string]any{"type": "message_stop"}))
	sseWrite(w, events...)
}

// responsesTurns speaks OpenAI's Responses stream.
func responsesTurns(w http.ResponseWriter, n int) {
	if n == 1 {
		responsesMessage(w, map[string]any{"type": "function_call", "id": "fc_e2e", "call_id": "call_e2e", "name": "echo", "arguments": `{"text":"` + echoResult + `"}`, "status": "completed"})
		return
	}
	responsesMessage(w, responsesText("done: "+echoResult))
}

// responsesText is a Responses message output item.
func responsesText(text string) map[string]any {
	return map[string]any{"type": "message", "id": "msg_e2e", "role": "assistant", "status": "completed",
		"content": []any{map[string]any{"type": "output_text", "text": text, "annotations": []any{}}}}
}

// responsesMessage writes a whole Responses stream of output items: text
// as output_text deltas, every item done, then response.completed.
func responsesMessage(w http.ResponseWriter, items ...map[string]any) {
	var events []string
	for i, item := range items {
		if item["type"] == "message" {
			for _, c := range item["content"].([]any) {
				events = append(events, sseEvent("response.output_text.delta", map[string]any{"type": "response.output_text.delta", "item_id": item["id"], "output_index": i, "content_index": 0, "delta": c.(map[string]any)["text"]}))
			}
		}
		events = append(events, sseEvent("response.output_item.done", map[string]any{"type": "response.output_item.done", "output_index": i, "item": item}))
	}
	events = append(events, sseEvent("response.completed", map[string]any{"type": "response.completed", "response": map[string]any{
		"id": "resp_e2e", "object": "response", "status": "completed", "output": items,
		"usage": map[string]any{"input_tokens": 10, "input_tokens_details": map[string]any{"cached_tokens": 0}, "output_tokens": 5, "total_tokens": 15},
	}}))
	sseWrite(w, events...)
}

// providerStack is agentd (embedded bridge, the demo MCP server) whose
// provider named name talks to api.
func providerStack(t *testing.T, name, path string, api http.Handler, options map[string]string) agentdv1.AgentServiceClient {
	t.Helper()
	return providerStackWith(t, name, path, api, options, nil)
}

// providerStackWith is providerStack with the configuration adjusted by
// adjust (when not nil).
func providerStackWith(t *testing.T, name, path string, api http.Handler, options map[string]string, adjust func(*config.Config)) agentdv1.AgentServiceClient {
	t.Helper()
	srv := httptest.NewServer(api)
	t.Cleanup(srv.Close)
	cfg := demoConfig(t, 0)
	cfg.Providers = map[string]config.Provider{name: {APIKey: "test-key", BaseURL: srv.URL + path, Options: options}}
	if adjust != nil {
		adjust(&cfg)
	}
	conn, _ := apptest.Serve(t, app.Options{Config: cfg, Logger: slog.New(slog.DiscardHandler), Telemetry: grpcserver.Telemetry{}})
	return agentdv1.NewAgentServiceClient(conn)
}

// TestProvidersEndToEnd runs, for each provider, a generation whose model
// calls a bridged MCP tool (the demo server's echo) and answers with its
// result: the round trip through Generate, the bridge and the provider's
// wire format. Every provider providers/registry declares has its case.
func TestProvidersEndToEnd(t *testing.T) {
	tested := make(map[string]bool)
	for _, tc := range []struct {
		provider, model, path string
		options               map[string]string
		turns                 func(http.ResponseWriter, int)
		api                   string // the provider whose API the fake is; default: provider
	}{
		{"openai", "gpt-4o-mini", "/v1", nil, chatTurns, ""},
		{"azure", "prod-4o", "", nil, chatTurns, ""},
		{"deepseek", "deepseek-v4-flash", "", nil, chatTurns, ""},
		{"openrouter", "openai/gpt-4o-mini", "/api/v1", nil, chatTurns, ""},
		{"requesty", "openai/gpt-4o-mini", "/v1", nil, chatTurns, ""},
		{"gemini", "gemini-2.5-flash", "", nil, geminiTurns, ""},
		{"ollama", "llama3.2", "", nil, ollamaTurns, ""},
		{"anthropic", "claude-sonnet-4-5", "", nil, anthropicTurns, ""},
		{"openai-responses", "gpt-5-mini", "/v1", nil, responsesTurns, ""},
		// RubyLLM's row: the router picks DeepSeek from the model's prefix.
		{"router", "deepseek/deepseek-v4-flash", "", nil, chatTurns, "deepseek"},
		{"router", "claude-sonnet-4-5", "", nil, anthropicTurns, "anthropic"},
	} {
		configured := tc.provider
		if tc.api != "" {
			configured = tc.api
		}
		tested[configured] = true
		t.Run(tc.provider, func(t *testing.T) {
			api := &fakeTurns{t: t, turn: tc.turns}
			client := providerStack(t, configured, tc.path, api, tc.options)
			start := &agentdv1.StartGeneration{
				Agent:    &agentdv1.Agent{Provider: tc.provider, Model: tc.model, Mcps: []*agentdv1.MCPServer{{Transport: &agentdv1.MCPServer_Ref{Ref: "demo"}}}},
				Messages: []*agentdv1.Message{{Role: agentdv1.Role_ROLE_USER, Parts: []*agentdv1.Part{{Kind: &agentdv1.Part_Text{Text: "echo something"}}}}},
			}
			events := generate(t, client, start)
			last := events[len(events)-1].GetCompleted()
			if last == nil {
				t.Fatalf("events end with %v; want completed", events[len(events)-1])
			}
			var finished *agentdv1.ToolCallFinished
			for _, ev := range events {
				if f := ev.GetToolCallFinished(); f != nil {
					finished = f
				}
			}
			if finished == nil || finished.GetServerName() != "demo" || finished.GetOutput() != echoResult {
				t.Errorf("tool call = %v; want echo on demo returning %q", finished, echoResult)
			}
			if got := last.GetMessage().GetParts()[0].GetText(); got != "done: "+echoResult {
				t.Errorf("final text = %q", got)
			}
			if len(api.bodies) != 2 {
				t.Errorf("the provider got %d requests, want 2", len(api.bodies))
			}
		})
	}
	for _, a := range registry.Declared {
		if !tested[a.Name] {
			t.Errorf("provider %q has no end-to-end case", a.Name)
		}
	}
}
