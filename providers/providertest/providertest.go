// Package providertest is the conformance suite every provider adapter
// runs: recorded wire transcripts (testdata/*.txtar) replayed by a fake
// HTTP server that also checks the adapter's requests.
//
// # Transcripts
//
// A transcript is a txtar archive with these files:
//
//   - call.json: the neutral request to send: {"model", "instructions",
//     "messages": [agentd.v1.Message as proto JSON], "tools":
//     [agentd.v1.FunctionTool], "mcp_servers": [agentd.v1.MCPServer],
//     "options": {...}}.
//   - request1.http, request2.http, ...: what the adapter must send on each
//     attempt: "METHOD /path", then the headers that must match exactly
//     (others are ignored), a blank line, and the JSON body, compared as
//     JSON (key order and spacing do not matter). These are written from
//     the real API's documentation and recordings, never from the
//     adapter's output: a wrong field fails the test.
//   - response1.http, ...: the answer to each attempt: "STATUS", headers, a
//     blank line, and the body, sent as is (SSE, NDJSON or JSON).
//   - events.json: the neutral events the adapter must yield, one JSON
//     object per event ({"text_delta": ...}, {"tool_call": ...},
//     {"provider_tool_call": ...}, {"usage": ...}, {"stop": ...}, with the
//     answer's "response" id, model and finish reason, or
//     {"error": {"kind", "message"}}), and, where they happened, the
//     retries the adapter reported to the turn's providers.Observer
//     ({"retry": {"attempt", "status" or "failure"}}). `go test -update`
//     rewrites it from what the adapter yields. The endpoint the adapter
//     reports must be the fake server's host and port.
//
// # Scenarios
//
// Every adapter has a transcript for each name in Required; Run fails if
// one is missing.
//
// # Shared checks
//
// Beside its transcripts, every adapter's tests run CheckSecrets (no
// credential in any error) and CheckStreamFailures (a stream that goes
// silent or is cut short fails as on every other adapter).
package providertest

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"

	"github.com/google/go-cmp/cmp"
	"golang.org/x/tools/txtar"
	"google.golang.org/protobuf/encoding/protojson"

	agentdv1 "github.com/agentd/agentd/gen/go/agentd/v1"
	"github.com/agentd/agentd/internal/fault"
	"github.com/agentd/agentd/providers"
)

var update = flag.Bool("update", false, "rewrite the events.json of every transcript from what the adapter yields")

// Required are the scenarios every adapter's testdata must cover.
var Required = []string{
	"text",                // one short answer
	"streamed_text",       // an answer in many pieces, with keep-alives
	"tool_call",           // the model asks for one tool
	"tool_result",         // the round trip: the call and its result go back, the model answers
	"parallel_tool_calls", // several tools in one turn
	"failed_tool_result",  // a result flagged as failed goes back
	"error",               // the API refuses the request
	"retry",               // a retryable status (429, 529 or 503), then success
}

// Factory makes the adapter under test, talking to baseURL. The adapter
// must not sleep long between retries (the transcripts send
// retry-after-ms: 0).
type Factory func(t *testing.T, baseURL string) providers.Provider

// Run replays every transcript in dir (usually "testdata") against
// adapters made by newProvider, and checks that the required scenarios
// are there.
func Run(t *testing.T, dir string, newProvider Factory) {
	t.Helper()
	files, err := filepath.Glob(filepath.Join(dir, "*.txtar"))
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, f := range files {
		names = append(names, strings.TrimSuffix(filepath.Base(f), ".txtar"))
	}
	for _, want := range Required {
		if !slices.Contains(names, want) {
			t.Errorf("providertest: %s has no transcript for the required scenario %q", dir, want)
		}
	}
	for _, f := range files {
		t.Run(strings.TrimSuffix(filepath.Base(f), ".txtar"), func(t *testing.T) {
			t.Parallel()
			RunFile(t, f, newProvider)
		})
	}
}

// call is call.json.
type call struct {
	Model        string            `json:"model"`
	Instructions string            `json:"instructions"`
	Messages     []json.RawMessage `json:"messages"`
	Tools        []json.RawMessage `json:"tools"`
	MCPServers   []json.RawMessage `json:"mcp_servers"`
	Options      map[string]any    `json:"options"`
}

func (c *call) request(t *testing.T) *providers.Request {
	t.Helper()
	req := &providers.Request{Model: c.Model, Instructions: c.Instructions, Options: c.Options}
	for _, m := range c.Messages {
		msg := &agentdv1.Message{}
		if err := protojson.Unmarshal(m, msg); err != nil {
			t.Fatalf("call.json message: %v", err)
		}
		req.Messages = append(req.Messages, msg)
	}
	for _, m := range c.Tools {
		tool := &agentdv1.FunctionTool{}
		if err := protojson.Unmarshal(m, tool); err != nil {
			t.Fatalf("call.json tool: %v", err)
		}
		req.Tools = append(req.Tools, tool)
		// As the tool loop sends them: encoded once, before the turns
		// (the map an adapter falls back to encodes to the same bytes:
		// providers' TestToolParametersJSON).
		req.ToolParameters = append(req.ToolParameters, providers.ToolParametersJSON(tool))
	}
	for _, m := range c.MCPServers {
		srv := &agentdv1.MCPServer{}
		if err := protojson.Unmarshal(m, srv); err != nil {
			t.Fatalf("call.json mcp server: %v", err)
		}
		req.MCPServers = append(req.MCPServers, srv)
	}
	return req
}

// exchange is one expected request and its recorded response.
type exchange struct {
	method, path string
	header       http.Header
	body         []byte
	status       int
	respHeader   http.Header
	respBody     []byte
}

func parseHTTP(data []byte) (first string, header http.Header, body []byte, err error) {
	head, body, _ := bytes.Cut(data, []byte("\n\n"))
	lines := strings.Split(string(head), "\n")
	first = strings.TrimSpace(lines[0])
	header = make(http.Header)
	for _, l := range lines[1:] {
		k, v, ok := strings.Cut(l, ":")
		if !ok {
			return "", nil, nil, fmt.Errorf("bad header line %q", l)
		}
		header.Add(strings.TrimSpace(k), strings.TrimSpace(v))
	}
	return first, header, body, nil
}

// RunFile replays one transcript.
func RunFile(t *testing.T, file string, newProvider Factory) {
	t.Helper()
	ar, err := txtar.ParseFile(file)
	if err != nil {
		t.Fatal(err)
	}
	parts := make(map[string][]byte)
	for _, f := range ar.Files {
		parts[f.Name] = f.Data
	}
	var c call
	if err := json.Unmarshal(parts["call.json"], &c); err != nil {
		t.Fatalf("call.json: %v", err)
	}
	var exchanges []*exchange
	for i := 1; ; i++ {
		reqData, ok := parts[fmt.Sprintf("request%d.http", i)]
		if !ok {
			break
		}
		first, header, body, err := parseHTTP(reqData)
		if err != nil {
			t.Fatalf("request%d.http: %v", i, err)
		}
		method, path, _ := strings.Cut(first, " ")
		ex := &exchange{method: method, path: path, header: header, body: body}
		statusLine, respHeader, respBody, err := parseHTTP(parts[fmt.Sprintf("response%d.http", i)])
		if err != nil {
			t.Fatalf("response%d.http: %v", i, err)
		}
		if ex.status, err = strconv.Atoi(statusLine); err != nil {
			t.Fatalf("response%d.http: status %q", i, statusLine)
		}
		ex.respHeader, ex.respBody = respHeader, respBody
		exchanges = append(exchanges, ex)
	}
	if len(exchanges) == 0 {
		t.Fatal("no request1.http")
	}

	var mu sync.Mutex
	next := 0
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		i := next
		next++
		mu.Unlock()
		if i >= len(exchanges) {
			t.Errorf("unexpected request %d: %s %s", i+1, r.Method, r.URL.Path)
			http.Error(w, "unexpected request", http.StatusTeapot)
			return
		}
		ex := exchanges[i]
		checkRequest(t, i+1, ex, r)
		for k, vs := range ex.respHeader {
			w.Header()[k] = vs
		}
		w.WriteHeader(ex.status)
		_, _ = w.Write(ex.respBody)
	}))
	defer srv.Close()

	p := newProvider(t, srv.URL)
	// The observer's reports join the events, in order (retries), or are
	// checked against the fake server (the endpoint: its host and port,
	// never a path).
	var observed []any
	var endpoints []string
	obs := &providers.Observer{
		Endpoint: func(address string, port int) {
			endpoints = append(endpoints, net.JoinHostPort(address, strconv.Itoa(port)))
		},
		Retry: func(r providers.Retry) {
			// Not the delay: without retry-after it has a random jitter.
			retry := map[string]any{"attempt": r.Attempt}
			if r.Status != 0 {
				retry["status"] = r.Status
			}
			if r.Failure != "" {
				retry["failure"] = r.Failure
			}
			observed = append(observed, map[string]any{"retry": retry})
		},
	}
	got := collect(providers.WithObserver(t.Context(), obs), p, c.request(t), &observed)
	wantEndpoint := strings.TrimPrefix(srv.URL, "http://")
	for _, e := range endpoints {
		if e != wantEndpoint {
			t.Errorf("the adapter reported the endpoint %s; the server is at %s", e, wantEndpoint)
		}
	}
	if len(endpoints) == 0 {
		t.Errorf("the adapter reported no endpoint")
	}
	mu.Lock()
	if next != len(exchanges) {
		t.Errorf("the adapter made %d requests; the transcript has %d", next, len(exchanges))
	}
	mu.Unlock()

	var gotLines []string
	for _, ev := range got {
		b, err := json.Marshal(ev)
		if err != nil {
			t.Fatal(err)
		}
		gotLines = append(gotLines, string(b))
	}
	if *update {
		out := strings.Join(gotLines, "\n") + "\n"
		for i, f := range ar.Files {
			if f.Name == "events.json" {
				ar.Files[i].Data = []byte(out)
			}
		}
		if _, ok := parts["events.json"]; !ok {
			ar.Files = append(ar.Files, txtar.File{Name: "events.json", Data: []byte(out)})
		}
		if err := os.WriteFile(file, txtar.Format(ar), 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	var want []string
	for _, l := range strings.Split(strings.TrimSpace(string(parts["events.json"])), "\n") {
		if l = strings.TrimSpace(l); l != "" {
			want = append(want, normalizeJSON(t, []byte(l)))
		}
	}
	for i := range gotLines {
		gotLines[i] = normalizeJSON(t, []byte(gotLines[i]))
	}
	if diff := cmp.Diff(want, gotLines); diff != "" {
		t.Errorf("events (-want +got):\n%s", diff)
	}
}

// checkRequest compares a request with what the transcript requires.
func checkRequest(t *testing.T, n int, ex *exchange, r *http.Request) {
	t.Helper()
	if r.Method != ex.method || r.URL.Path != strings.Split(ex.path, "?")[0] {
		t.Errorf("request %d: %s %s, want %s %s", n, r.Method, r.URL.Path, ex.method, ex.path)
	}
	if _, query, ok := strings.Cut(ex.path, "?"); ok && r.URL.RawQuery != query {
		t.Errorf("request %d: query %q, want %q", n, r.URL.RawQuery, query)
	}
	for k, vs := range ex.header {
		if got := r.Header.Values(k); !slices.Equal(got, vs) {
			t.Errorf("request %d: header %s = %q, want %q", n, k, got, vs)
		}
	}
	body, err := io.ReadAll(r.Body)
	if err != nil {
		t.Errorf("request %d: %v", n, err)
		return
	}
	if len(bytes.TrimSpace(ex.body)) == 0 {
		return
	}
	var want, got any
	if err := json.Unmarshal(ex.body, &want); err != nil {
		t.Errorf("request%d.http body: %v", n, err)
		return
	}
	if err := json.Unmarshal(body, &got); err != nil {
		t.Errorf("request %d: the body is not JSON: %v", n, err)
		return
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("request %d body (-want +got):\n%s", n, diff)
	}
}

func normalizeJSON(t *testing.T, b []byte) string {
	t.Helper()
	var v any
	if err := json.Unmarshal(b, &v); err != nil {
		t.Fatalf("events.json: %v: %s", err, b)
	}
	out, _ := json.Marshal(v)
	return string(out)
}

// collect runs a turn and renders its events (and error) as JSON-able
// values; what an observer appended to *observed while an event was on
// its way comes before that event.
func collect(ctx context.Context, p providers.Provider, req *providers.Request, observed *[]any) []any {
	var out []any
	marshal := protojson.MarshalOptions{UseProtoNames: true}
	for ev, err := range p.Stream(ctx, req) {
		out = append(out, *observed...)
		*observed = (*observed)[:0]
		if err != nil {
			var fe *fault.Error
			kind := "Internal"
			if errors.As(err, &fe) {
				kind = fe.Kind.String()
			}
			out = append(out, map[string]any{"error": map[string]any{"kind": kind, "message": err.Error()}})
			break
		}
		switch ev := ev.(type) {
		case *providers.TextDelta:
			out = append(out, map[string]any{"text_delta": ev.Text})
		case *providers.ToolCall:
			b, _ := marshal.Marshal(ev.Call)
			out = append(out, map[string]any{"tool_call": json.RawMessage(b)})
		case *providers.ProviderToolCall:
			b, _ := marshal.Marshal(ev.Call)
			out = append(out, map[string]any{"provider_tool_call": json.RawMessage(b)})
		case *providers.Usage:
			b, _ := marshal.Marshal(ev.Usage)
			out = append(out, map[string]any{"usage": json.RawMessage(b)})
		case *providers.Reasoning:
			r := map[string]any{"text": ev.Text, "signature": ev.Signature}
			if ev.Redacted {
				r["redacted"] = true
			}
			if ev.Provider != "" {
				r["provider"] = ev.Provider
			}
			out = append(out, map[string]any{"reasoning": r})
		case *providers.Stop:
			stop := map[string]any{"stop": ev.Reason.String()}
			if ev.Paused {
				stop["paused"] = true
			}
			if r := ev.Response; r != (providers.Response{}) {
				stop["response"] = map[string]any{"id": r.ID, "model": r.Model, "finish_reason": r.FinishReason}
			}
			out = append(out, stop)
		}
	}
	return out
}
