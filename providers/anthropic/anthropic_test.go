package anthropic

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"

	"github.com/google/go-cmp/cmp"
	"google.golang.org/protobuf/encoding/protojson"

	agentdv1 "github.com/agentd/agentd/gen/go/agentd/v1"
	"github.com/agentd/agentd/internal/fault"
	"github.com/agentd/agentd/providers"
	"github.com/agentd/agentd/providers/providertest"
)

func TestTranscripts(t *testing.T) {
	t.Parallel()
	providertest.Run(t, "testdata", func(t *testing.T, baseURL string) providers.Provider {
		return New(providers.Settings{APIKey: "test-key", BaseURL: baseURL})
	})
}

// msgs parses messages written as agentd.v1 proto JSON.
func msgs(t *testing.T, js ...string) []*agentdv1.Message {
	t.Helper()
	var out []*agentdv1.Message
	for _, s := range js {
		m := &agentdv1.Message{}
		if err := protojson.Unmarshal([]byte(s), m); err != nil {
			t.Fatalf("%s: %v", s, err)
		}
		out = append(out, m)
	}
	return out
}

// jsonValue decodes JSON text, or re-encodes a value, for comparison.
func jsonValue(t *testing.T, v any) any {
	t.Helper()
	b, ok := v.(string)
	if !ok {
		enc, err := json.Marshal(v)
		if err != nil {
			t.Fatal(err)
		}
		b = string(enc)
	}
	var out any
	if err := json.Unmarshal([]byte(b), &out); err != nil {
		t.Fatalf("%s: %v", b, err)
	}
	return out
}

func TestMessages(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name string
		in   []string
		want string
	}{{
		name: "results of separate tool messages share one user message",
		in: []string{
			`{"role":"ROLE_ASSISTANT","parts":[{"toolCall":{"id":"a","name":"f","arguments":"{}"}},{"toolCall":{"id":"b","name":"g","arguments":"{}"}}]}`,
			`{"role":"ROLE_TOOL","parts":[{"toolResult":{"toolCallId":"a","output":"1"}}]}`,
			`{"role":"ROLE_TOOL","parts":[{"toolResult":{"toolCallId":"b","output":"2","isError":true}}]}`,
		},
		want: `[
			{"role":"assistant","content":[{"type":"tool_use","id":"a","name":"f","input":{}},{"type":"tool_use","id":"b","name":"g","input":{}}]},
			{"role":"user","content":[
				{"type":"tool_result","tool_use_id":"a","content":[{"type":"text","text":"1"}]},
				{"type":"tool_result","tool_use_id":"b","content":[{"type":"text","text":"2"}],"is_error":true}]}]`,
	}, {
		name: "a user message after tool results joins them, results first",
		in: []string{
			`{"role":"ROLE_USER","parts":[{"text":"first"}]}`,
			`{"role":"ROLE_TOOL","parts":[{"toolResult":{"toolCallId":"a","output":"1"}}]}`,
			`{"role":"ROLE_USER","parts":[{"text":"then"}]}`,
		},
		want: `[{"role":"user","content":[
			{"type":"tool_result","tool_use_id":"a","content":[{"type":"text","text":"1"}]},
			{"type":"text","text":"first"},
			{"type":"text","text":"then"}]}]`,
	}, {
		name: "consecutive assistant messages merge; empty ones vanish",
		in: []string{
			`{"role":"ROLE_USER","parts":[{"text":"hi"}]}`,
			`{"role":"ROLE_ASSISTANT","parts":[{"text":"one"}]}`,
			`{"role":"ROLE_ASSISTANT","parts":[{"text":""}]}`,
			`{"role":"ROLE_USER","parts":[]}`,
			`{"role":"ROLE_ASSISTANT","parts":[{"text":"two"}]}`,
		},
		want: `[
			{"role":"user","content":[{"type":"text","text":"hi"}]},
			{"role":"assistant","content":[{"type":"text","text":"one"},{"type":"text","text":"two"}]}]`,
	}, {
		name: "arguments that are not a JSON object become {}",
		in: []string{
			`{"role":"ROLE_ASSISTANT","parts":[
				{"toolCall":{"id":"a","name":"f","arguments":"{\"x\":"}},
				{"toolCall":{"id":"b","name":"f","arguments":"[1]"}},
				{"toolCall":{"id":"c","name":"f"}},
				{"toolCall":{"id":"d","name":"f","arguments":" {\"n\": 12345678901234567890} "}}]}`,
		},
		want: `[{"role":"assistant","content":[
			{"type":"tool_use","id":"a","name":"f","input":{}},
			{"type":"tool_use","id":"b","name":"f","input":{}},
			{"type":"tool_use","id":"c","name":"f","input":{}},
			{"type":"tool_use","id":"d","name":"f","input":{"n":12345678901234567890}}]}]`,
	}, {
		name: "provider tool calls go back as the connector's blocks",
		in: []string{
			`{"role":"ROLE_ASSISTANT","parts":[
				{"providerToolCall":{"id":"m1","serverName":"docs","toolName":"search","arguments":"{\"q\":\"x\"}","output":"found","isError":false}},
				{"providerToolCall":{"id":"m2","serverName":"docs","toolName":"fetch","isError":true}},
				{"text":"done"}]}`,
		},
		want: `[{"role":"assistant","content":[
			{"type":"mcp_tool_use","id":"m1","name":"search","server_name":"docs","input":{"q":"x"}},
			{"type":"mcp_tool_result","tool_use_id":"m1","is_error":false,"content":[{"type":"text","text":"found"}]},
			{"type":"mcp_tool_use","id":"m2","name":"fetch","server_name":"docs","input":{}},
			{"type":"mcp_tool_result","tool_use_id":"m2","is_error":true},
			{"type":"text","text":"done"}]}]`,
	}, {
		name: "media in user messages and tool results",
		in: []string{
			`{"role":"ROLE_USER","parts":[
				{"media":{"mimeType":"image/jpeg","uri":"https://example.com/a.jpg"}},
				{"media":{"mimeType":"application/pdf","data":"JVBERg=="}},
				{"media":{"mimeType":"text/plain","data":"aGk="}},
				{"media":{"mimeType":"audio/wav","data":"UklGRg==","name":"clip.wav"}},
				{"media":{"mimeType":"image/png","uri":"file:///tmp/x.png"}}]}`,
			`{"role":"ROLE_TOOL","parts":[{"toolResult":{"toolCallId":"a","attachments":[{"mimeType":"image/gif","data":"R0lG"}]}}]}`,
		},
		want: `[{"role":"user","content":[
			{"type":"tool_result","tool_use_id":"a","content":[{"type":"image","source":{"type":"base64","media_type":"image/gif","data":"R0lG"}}]},
			{"type":"image","source":{"type":"url","url":"https://example.com/a.jpg"}},
			{"type":"document","source":{"type":"base64","media_type":"application/pdf","data":"JVBERg=="}},
			{"type":"document","source":{"type":"text","media_type":"text/plain","data":"hi"}},
			{"type":"text","text":"[attachment \"clip.wav\" (audio/wav): not sent, the Anthropic API does not accept it]"},
			{"type":"text","text":"[attachment (image/png) at file:///tmp/x.png: not sent, the Anthropic API does not accept it]"}]}]`,
	}}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			got := jsonValue(t, messages(msgs(t, tt.in...)))
			if diff := cmp.Diff(jsonValue(t, tt.want), got); diff != "" {
				t.Errorf("messages (-want +got):\n%s", diff)
			}
		})
	}
}

func servers(n int) []*agentdv1.MCPServer {
	var out []*agentdv1.MCPServer
	for i := range n {
		out = append(out, &agentdv1.MCPServer{Name: fmt.Sprintf("s%d", i), Transport: &agentdv1.MCPServer_Url{Url: fmt.Sprintf("https://s%d.example.com/mcp", i)}})
	}
	return out
}

func nativeServers(n int) []any {
	var out []any
	for i := range n {
		out = append(out, map[string]any{"type": "url", "url": fmt.Sprintf("https://n%d.example.com/mcp", i), "name": fmt.Sprintf("n%d", i)})
	}
	return out
}

func TestServerLimit(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name            string
		declared, given int
		wantErr         bool
	}{
		{"twenty declared", 20, 0, false},
		{"twenty-one declared", 21, 0, true},
		{"twenty in all, some in the options", 15, 5, false},
		{"twenty-one in all, some in the options", 19, 2, true},
		{"twenty-one in the options", 0, 21, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			req := &providers.Request{Model: "m", MCPServers: servers(tt.declared)}
			if tt.given > 0 {
				req.Options = map[string]any{"mcp_servers": nativeServers(tt.given)}
			}
			_, err := requestBody(req)
			if gotErr := err != nil; gotErr != tt.wantErr {
				t.Fatalf("requestBody: %v; want an error: %v", err, tt.wantErr)
			}
			if err != nil && fault.KindOf(err) != fault.Invalid {
				t.Errorf("kind %v, want Invalid: %v", fault.KindOf(err), err)
			}
		})
	}
}

func TestProviderServers(t *testing.T) {
	t.Parallel()
	url := func(u string) *agentdv1.MCPServer_Url { return &agentdv1.MCPServer_Url{Url: u} }
	tests := []struct {
		name    string
		server  *agentdv1.MCPServer
		want    string // the mcp_servers entry
		wantErr string
	}{
		{"bare token", &agentdv1.MCPServer{Name: "a", Transport: url("https://a"), Authorization: "tok"},
			`{"type":"url","url":"https://a","name":"a","authorization_token":"tok"}`, ""},
		{"bearer prefix in any case", &agentdv1.MCPServer{Name: "a", Transport: url("https://a"), Authorization: "bearer  tok "},
			`{"type":"url","url":"https://a","name":"a","authorization_token":"tok"}`, ""},
		{"no authorization", &agentdv1.MCPServer{Name: "a", Transport: url("https://a")},
			`{"type":"url","url":"https://a","name":"a"}`, ""},
		{"another scheme", &agentdv1.MCPServer{Name: "a", Transport: url("https://a"), Authorization: "Basic c2VjcmV0"},
			"", "not a bearer token"},
		{"headers", &agentdv1.MCPServer{Name: "a", Transport: url("https://a"), Headers: map[string]string{"X-Key": "secret"}},
			"", "has headers"},
		{"a command server", &agentdv1.MCPServer{Name: "a", Transport: &agentdv1.MCPServer_Command{Command: "srv"}},
			"", "https URLs only"},
		{"plain http", &agentdv1.MCPServer{Name: "a", Transport: url("http://a")},
			"", "https URLs only"},
		{"no name", &agentdv1.MCPServer{Transport: url("https://a")},
			"", "has no name"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			list, _, err := mcpServers([]*agentdv1.MCPServer{tt.server})
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) || fault.KindOf(err) != fault.Invalid {
					t.Fatalf("error %v, want an Invalid fault containing %q", err, tt.wantErr)
				}
				for _, secret := range []string{"c2VjcmV0", "secret"} {
					if strings.Contains(err.Error(), secret) {
						t.Errorf("the error %q shows a secret", err)
					}
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(jsonValue(t, tt.want), jsonValue(t, list[0])); diff != "" {
				t.Errorf("mcp_servers entry (-want +got):\n%s", diff)
			}
		})
	}
}

// breakpoints lists where a body has cache_control marks.
func breakpoints(body map[string]any) []string {
	var out []string
	for _, key := range []string{"tools", "system"} {
		list, _ := body[key].([]any)
		for i, e := range list {
			if e.(map[string]any)["cache_control"] != nil {
				out = append(out, fmt.Sprintf("%s[%d]", key, i))
			}
		}
	}
	for i, m := range body["messages"].([]any) {
		for j, b := range m.(map[string]any)["content"].([]any) {
			if b.(map[string]any)["cache_control"] != nil {
				out = append(out, fmt.Sprintf("messages[%d][%d]", i, j))
			}
		}
	}
	return out
}

func TestBreakpoints(t *testing.T) {
	t.Parallel()
	marked := func(n int) []any {
		var out []any
		for i := range n {
			out = append(out, map[string]any{"type": "web_search_20250305", "name": fmt.Sprintf("w%d", i), "cache_control": map[string]any{"type": "ephemeral"}})
		}
		return out
	}
	user := `{"role":"ROLE_USER","parts":[{"text":"hi"}]}`
	thinking := `{"role":"ROLE_ASSISTANT","parts":[{"text":"so far"},{"reasoning":{"text":"t","signature":"s","provider":"anthropic"}}]}`
	tool := []*agentdv1.FunctionTool{{Name: "f"}}
	tests := []struct {
		name     string
		req      *providers.Request
		messages []string
		want     []string
	}{
		{"message, tool and system", &providers.Request{Instructions: "sys", Tools: tool}, []string{user},
			[]string{"tools[0]", "system[0]", "messages[0][0]"}},
		{"the options' marks leave room for two", &providers.Request{Instructions: "sys", Tools: tool, Options: map[string]any{"tools": marked(2)}}, []string{user},
			[]string{"tools[0]", "tools[1]", "tools[2]", "messages[0][0]"}},
		{"the options' marks leave room for one", &providers.Request{Instructions: "sys", Tools: tool, Options: map[string]any{"tools": marked(3)}}, []string{user},
			[]string{"tools[1]", "tools[2]", "tools[3]", "messages[0][0]"}},
		{"the options take all four", &providers.Request{Instructions: "sys", Tools: tool, Options: map[string]any{"tools": marked(4)}}, []string{user},
			[]string{"tools[1]", "tools[2]", "tools[3]", "tools[4]"}},
		{"a system prompt given in the options counts", &providers.Request{Options: map[string]any{
			"system": []any{map[string]any{"type": "text", "text": "s", "cache_control": map[string]any{"type": "ephemeral"}}},
			"tools":  marked(2),
		}}, []string{user},
			[]string{"tools[0]", "tools[1]", "system[0]", "messages[0][0]"}},
		{"a thinking block is skipped", &providers.Request{}, []string{user, thinking},
			[]string{"messages[1][0]"}},
		{"no messages, no tools", &providers.Request{Instructions: "sys"}, nil,
			[]string{"system[0]"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			tt.req.Messages = msgs(t, tt.messages...)
			body, err := requestBody(tt.req)
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(tt.want, breakpoints(body)); diff != "" {
				t.Errorf("breakpoints (-want +got):\n%s", diff)
			}
		})
	}
}

// TestOptionsUntouched checks that building a request never changes the
// agent's options, which every turn of every generation of the agent
// shares.
func TestOptionsUntouched(t *testing.T) {
	t.Parallel()
	options := map[string]any{
		"tools":       []any{map[string]any{"type": "mcp_toolset", "mcp_server_name": "n0"}},
		"mcp_servers": nativeServers(1),
		"system":      []any{map[string]any{"type": "text", "text": "s"}},
	}
	before := jsonValue(t, options)
	req := &providers.Request{Options: options, Tools: []*agentdv1.FunctionTool{{Name: "f"}}, MCPServers: servers(1), Messages: msgs(t, `{"role":"ROLE_USER","parts":[{"text":"hi"}]}`)}
	for range 2 {
		if _, err := requestBody(req); err != nil {
			t.Fatal(err)
		}
	}
	if diff := cmp.Diff(before, jsonValue(t, options)); diff != "" {
		t.Errorf("options changed (-before +after):\n%s", diff)
	}
}

// recorder is a fake API that records each request's headers and answers
// with status and body.
type recorder struct {
	mu      sync.Mutex
	headers []http.Header
	bodies  []string
	status  int
	body    string
}

func (rec *recorder) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	b, _ := io.ReadAll(r.Body)
	rec.mu.Lock()
	rec.headers = append(rec.headers, r.Header.Clone())
	rec.bodies = append(rec.bodies, string(b))
	rec.mu.Unlock()
	w.WriteHeader(rec.status)
	_, _ = io.WriteString(w, rec.body)
}

const okStream = "event: message_start\ndata: {\"type\":\"message_start\",\"message\":{\"usage\":{\"input_tokens\":1}}}\n\n" +
	"event: message_stop\ndata: {\"type\":\"message_stop\"}\n\n"

// run streams a turn and returns its events and error.
func run(t *testing.T, p providers.Provider, req *providers.Request) ([]providers.Event, error) {
	t.Helper()
	var evs []providers.Event
	for ev, err := range p.Stream(t.Context(), req) {
		if err != nil {
			return evs, err
		}
		evs = append(evs, ev)
	}
	return evs, nil
}

func TestHeaders(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name        string
		options     map[string]string
		withServers bool
		version     string
		beta        []string
		native      bool // mcp_servers in the agent's options
	}{
		{"defaults", nil, false, "2023-06-01", nil, false},
		{"defaults with a provider-side server", nil, true, "2023-06-01", []string{"mcp-client-2025-11-20"}, false},
		{"defaults with a native server in the options", nil, false, "2023-06-01", []string{"mcp-client-2025-11-20"}, true},
		{"configured betas", map[string]string{"beta": " files-api-2025-04-14, ,context-1m-2025-08-07"}, false, "2023-06-01",
			[]string{"files-api-2025-04-14,context-1m-2025-08-07"}, false},
		{"configured betas with a server", map[string]string{"beta": "files-api-2025-04-14,mcp-client-2025-11-20"}, true, "2023-06-01",
			[]string{"mcp-client-2025-11-20,files-api-2025-04-14"}, false},
		{"another connector beta and version", map[string]string{"mcp_beta": "mcp-client-2026-09-15", "version": "2026-10-21"}, true, "2026-10-21",
			[]string{"mcp-client-2026-09-15"}, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			rec := &recorder{status: http.StatusOK, body: okStream}
			srv := httptest.NewServer(rec)
			defer srv.Close()
			p := New(providers.Settings{APIKey: "k", BaseURL: srv.URL + "/", Options: tt.options})
			req := &providers.Request{Model: "m", Messages: msgs(t, `{"role":"ROLE_USER","parts":[{"text":"hi"}]}`)}
			if tt.withServers {
				req.MCPServers = servers(1)
			}
			if tt.native {
				req.Options = map[string]any{"mcp_servers": nativeServers(1)}
			}
			if _, err := run(t, p, req); err != nil {
				t.Fatal(err)
			}
			h := rec.headers[0]
			if got := h.Get("anthropic-version"); got != tt.version {
				t.Errorf("anthropic-version %q, want %q", got, tt.version)
			}
			if diff := cmp.Diff(tt.beta, h.Values("anthropic-beta")); diff != "" {
				t.Errorf("anthropic-beta (-want +got):\n%s", diff)
			}
			if got := h.Get("x-api-key"); got != "k" {
				t.Errorf("x-api-key %q, want the key", got)
			}
		})
	}
}

func TestNoAPIKey(t *testing.T) {
	t.Parallel()
	rec := &recorder{status: http.StatusOK, body: okStream}
	srv := httptest.NewServer(rec)
	defer srv.Close()
	p := New(providers.Settings{BaseURL: srv.URL, KeyEnv: "ANTHROPIC_API_KEY"})
	_, err := run(t, p, &providers.Request{Model: "m"})
	if fault.KindOf(err) != fault.FailedPrecondition || !strings.Contains(err.Error(), "ANTHROPIC_API_KEY") || !strings.Contains(err.Error(), "providers.anthropic.api_key") {
		t.Errorf("error %v, want a FailedPrecondition naming ANTHROPIC_API_KEY and providers.anthropic.api_key", err)
	}
	if len(rec.headers) != 0 {
		t.Errorf("%d requests sent without a key", len(rec.headers))
	}
}

// TestSecretsStayOut checks that neither the API key nor an MCP server's
// token appears in the errors of refused requests, whatever the API
// answers.
func TestSecretsStayOut(t *testing.T) {
	t.Parallel()
	const key, token = "sk-canary-123", "mcp-canary-456"
	tests := []struct {
		status int
		body   string
		kind   fault.Kind
	}{
		{http.StatusUnauthorized, `{"type":"error","error":{"type":"authentication_error","message":"invalid x-api-key"},"request_id":"req_1"}`, fault.Unauthenticated},
		{http.StatusBadRequest, `{"type":"error","error":{"type":"invalid_request_error","message":"mcp_servers.0.authorization_token mcp-canary-456 refused for key sk-canary-123"},"request_id":"req_2"}`, fault.Invalid},
		{http.StatusBadRequest, `<html>Bad Request</html>`, fault.Invalid},
	}
	for _, tt := range tests {
		t.Run(fmt.Sprint(tt.status), func(t *testing.T) {
			t.Parallel()
			rec := &recorder{status: tt.status, body: tt.body}
			srv := httptest.NewServer(rec)
			defer srv.Close()
			p := New(providers.Settings{APIKey: key, BaseURL: srv.URL})
			req := &providers.Request{
				Model:      "m",
				Messages:   msgs(t, `{"role":"ROLE_USER","parts":[{"text":"hi"}]}`),
				MCPServers: []*agentdv1.MCPServer{{Name: "docs", Transport: &agentdv1.MCPServer_Url{Url: "https://docs.example.com/mcp"}, Authorization: "Bearer " + token}},
			}
			_, err := run(t, p, req)
			if err == nil {
				t.Fatal("no error")
			}
			if fault.KindOf(err) != tt.kind {
				t.Errorf("kind %v, want %v: %v", fault.KindOf(err), tt.kind, err)
			}
			st := fault.Status(err)
			for _, text := range []string{err.Error(), fmt.Sprintf("%+v", err), st.Message(), fmt.Sprint(st.Details())} {
				for _, secret := range []string{key, token} {
					if strings.Contains(text, secret) {
						t.Errorf("the error shows %q: %s", secret, text)
					}
				}
			}
			if len(rec.bodies) != 1 || !strings.Contains(rec.bodies[0], token) || rec.headers[0].Get("x-api-key") != key {
				t.Errorf("the request did not carry the secrets: the test checks nothing")
			}
		})
	}
}

// render is an event as the transcripts write it.
func render(ev providers.Event) string {
	m := protojson.MarshalOptions{UseProtoNames: true}
	switch ev := ev.(type) {
	case *providers.TextDelta:
		return "text " + ev.Text
	case *providers.Reasoning:
		return fmt.Sprintf("reasoning %q %q", ev.Text, ev.Signature)
	case *providers.ToolCall:
		b, _ := m.Marshal(ev.Call)
		return "tool_call " + string(b)
	case *providers.ProviderToolCall:
		b, _ := m.Marshal(ev.Call)
		return "provider_tool_call " + string(b)
	case *providers.Usage:
		b, _ := m.Marshal(ev.Usage)
		return "usage " + string(b)
	case *providers.Stop:
		return "stop " + ev.Reason.String()
	}
	return fmt.Sprintf("unknown %T", ev)
}

// normalize rewrites the JSON after an event's kind in one spacing, since
// protojson's varies on purpose.
func normalize(t *testing.T, line string) string {
	t.Helper()
	kind, js, ok := strings.Cut(line, " ")
	if !ok || !strings.HasPrefix(js, "{") {
		return line
	}
	var v any
	if err := json.Unmarshal([]byte(js), &v); err != nil {
		t.Fatalf("%s: %v", line, err)
	}
	b, _ := json.Marshal(v)
	return kind + " " + string(b)
}

// sseEvents writes events as an SSE stream: each is "name data".
func sseEvents(evs ...string) string {
	var b strings.Builder
	for _, e := range evs {
		name, data, _ := strings.Cut(e, " ")
		fmt.Fprintf(&b, "event: %s\ndata: %s\n\n", name, data)
	}
	return b.String()
}

// TestStream covers stream shapes the transcripts do not: results that
// arrive in deltas, unknown events, usage repeated in message_delta,
// stop reasons, malformed events.
func TestStream(t *testing.T) {
	t.Parallel()
	stop := func(reason string) string {
		return `message_delta {"type":"message_delta","delta":{"stop_reason":"` + reason + `"}}`
	}
	tests := []struct {
		name    string
		stream  string
		want    []string
		wantErr fault.Kind // the zero value, Internal, means none: no case expects Internal
	}{{
		name: "an mcp_tool_result in deltas, and one without its use",
		stream: sseEvents(
			`content_block_start {"type":"content_block_start","index":0,"content_block":{"type":"mcp_tool_use","id":"u1","name":"echo","server_name":"s","input":{"a":1}}}`,
			`content_block_stop {"type":"content_block_stop","index":0}`,
			`content_block_start {"type":"content_block_start","index":1,"content_block":{"type":"mcp_tool_result","tool_use_id":"u1","is_error":false,"content":[]}}`,
			`content_block_delta {"type":"content_block_delta","index":1,"delta":{"type":"text_delta","text":"Hel"}}`,
			`content_block_delta {"type":"content_block_delta","index":1,"delta":{"type":"text_delta","text":"lo"}}`,
			`content_block_stop {"type":"content_block_stop","index":1}`,
			`content_block_start {"type":"content_block_start","index":2,"content_block":{"type":"mcp_tool_result","tool_use_id":"u9","is_error":true,"content":"boom"}}`,
			`content_block_stop {"type":"content_block_stop","index":2}`,
			stop("pause_turn"),
			`message_stop {"type":"message_stop"}`,
		),
		want: []string{
			`provider_tool_call {"id":"u1","server_name":"s","tool_name":"echo","arguments":"{\"a\":1}","output":"Hello"}`,
			`provider_tool_call {"id":"u9","output":"boom","is_error":true}`,
			`usage {}`,
			`stop STOP_REASON_END_TURN`,
		},
	}, {
		name: "unknown events and blocks are ignored; usage in message_delta",
		stream: sseEvents(
			`message_start {"type":"message_start","message":{"usage":{"input_tokens":10,"cache_read_input_tokens":5,"output_tokens":1}}}`,
			`future_event {"type":"future_event","x":1}`,
			`content_block_start {"type":"content_block_start","index":0,"content_block":{"type":"server_tool_use","id":"s1","name":"web_search","input":{}}}`,
			`content_block_delta {"type":"content_block_delta","index":0,"delta":{"type":"input_json_delta","partial_json":"{}"}}`,
			`content_block_stop {"type":"content_block_stop","index":0}`,
			`content_block_delta {"type":"content_block_delta","index":7,"delta":{"type":"text_delta","text":"no block"}}`,
			`content_block_start {"type":"content_block_start","index":1,"content_block":{"type":"text","text":"Hi"}}`,
			`content_block_delta {"type":"content_block_delta","index":1,"delta":{"type":"citations_delta","citation":{}}}`,
			`content_block_stop {"type":"content_block_stop","index":1}`,
			`message_delta {"type":"message_delta","delta":{"stop_reason":"max_tokens"},"usage":{"input_tokens":0,"output_tokens":7}}`,
			`message_stop {"type":"message_stop"}`,
		),
		want: []string{
			`text Hi`,
			`usage {"input_tokens":"10","output_tokens":"7","cache_read_input_tokens":"5"}`,
			`stop STOP_REASON_MAX_TOKENS`,
		},
	}, {
		name: "a tool_use sent whole, with invalid arguments",
		stream: sseEvents(
			`content_block_start {"type":"content_block_start","index":0,"content_block":{"type":"tool_use","id":"t1","name":"f","input":{"b": 2}}}`,
			`content_block_stop {"type":"content_block_stop","index":0}`,
			`content_block_start {"type":"content_block_start","index":1,"content_block":{"type":"tool_use","id":"t2","name":"f","input":{}}}`,
			`content_block_delta {"type":"content_block_delta","index":1,"delta":{"type":"input_json_delta","partial_json":"{\"x\": "}}`,
			`content_block_stop {"type":"content_block_stop","index":1}`,
			stop("refusal"),
			`message_stop {"type":"message_stop"}`,
		),
		want: []string{
			`tool_call {"id":"t1","name":"f","arguments":"{\"b\":2}"}`,
			`tool_call {"id":"t2","name":"f","arguments":"{\"x\": "}`,
			`usage {}`,
			`stop STOP_REASON_CONTENT_FILTER`,
		},
	}, {
		name:   "stop_sequence",
		stream: sseEvents(stop("stop_sequence"), `message_stop {"type":"message_stop"}`),
		want:   []string{`usage {}`, `stop STOP_REASON_STOP_SEQUENCE`},
	}, {
		name:    "a rate limit reported in the stream",
		stream:  sseEvents(`error {"type":"error","error":{"type":"rate_limit_error","message":"Rate limited"}}`),
		wantErr: fault.Exhausted,
	}, {
		name:    "a malformed event",
		stream:  sseEvents(`content_block_delta {"type":"content_block_delta","index":`),
		wantErr: fault.Unavailable,
	}, {
		name:    "an empty stream",
		stream:  "",
		wantErr: fault.Unavailable,
	}}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			var got []string
			var gotErr error
			readStream(t.Context(), strings.NewReader(tt.stream), func(ev providers.Event, err error) bool {
				if err != nil {
					gotErr = err
					return false
				}
				got = append(got, render(ev))
				return true
			})
			var want []string
			for _, w := range tt.want {
				want = append(want, normalize(t, w))
			}
			for i := range got {
				got[i] = normalize(t, got[i])
			}
			if diff := cmp.Diff(want, got); diff != "" {
				t.Errorf("events (-want +got):\n%s", diff)
			}
			if tt.wantErr == fault.Internal {
				if gotErr != nil {
					t.Errorf("error %v", gotErr)
				}
				return
			}
			var fe *fault.Error
			if !errors.As(gotErr, &fe) || fe.Kind != tt.wantErr {
				t.Errorf("error %v, want a %v fault", gotErr, tt.wantErr)
			}
		})
	}
}

// TestStopEarly checks that a consumer may stop the iteration at any
// event: the adapter yields nothing more.
func TestStopEarly(t *testing.T) {
	t.Parallel()
	stream := sseEvents(
		`content_block_start {"type":"content_block_start","index":0,"content_block":{"type":"text","text":""}}`,
		`content_block_delta {"type":"content_block_delta","index":0,"delta":{"type":"text_delta","text":"a"}}`,
		`content_block_delta {"type":"content_block_delta","index":0,"delta":{"type":"text_delta","text":"b"}}`,
		`message_stop {"type":"message_stop"}`,
	)
	for stopAt := 1; stopAt <= 3; stopAt++ {
		n := 0
		readStream(t.Context(), strings.NewReader(stream), func(providers.Event, error) bool {
			n++
			if n > stopAt {
				t.Fatalf("yield called after it returned false (stop at %d)", stopAt)
			}
			return n < stopAt
		})
	}
}

// The shared check: whatever the API echoes of the request, neither the
// key nor an MCP server's token reaches an error.
func TestSecretsEchoed(t *testing.T) {
	t.Parallel()
	providertest.CheckSecrets(t, func(baseURL, key string) providers.Provider {
		return New(providers.Settings{APIKey: key, BaseURL: baseURL, MaxRetries: -1})
	})
}

// X-H4: a stream that goes silent, or is cut short, fails as it does on
// every adapter.
func TestStreamFailures(t *testing.T) {
	t.Parallel()
	providertest.CheckStreamFailures(t, New)
}
