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
//     "options": {...}, "output": {"name", "description", "schema",
//     "strict"}}.
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
	"google.golang.org/protobuf/proto"

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
	for i, f := range files {
		t.Run(names[i], func(t *testing.T) {
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
	Output       *providers.Output `json:"output"` // its fields' names, in any case
}

func (c *call) request(t *testing.T) *providers.Request {
	t.Helper()
	req := &providers.Request{Model: c.Model, Instructions: c.Instructions, Options: c.Options, Output: c.Output}
	req.Messages = unmarshalAll(t, "message", c.Messages, func() *agentdv1.Message { return &agentdv1.Message{} })
	req.Tools = unmarshalAll(t, "tool", c.Tools, func() *agentdv1.FunctionTool { return &agentdv1.FunctionTool{} })
	for _, tool := range req.Tools {
		// As the tool loop sends them: encoded once, before the turns
		// (the map an adapter falls back to encodes to the same bytes:
		// providers' TestToolParametersJSON).
		req.ToolParameters = append(req.ToolParameters, providers.ToolParametersJSON(tool))
	}
	req.MCPServers = unmarshalAll(t, "mcp server", c.MCPServers, func() *agentdv1.MCPServer { return &agentdv1.MCPServer{} })
	return req
}

// unmarshalAll decodes each of raws into a new T; what names them in
// errors.
func unmarshalAll[T proto.Message](t *testing.T, what string, raws []json.RawMessage, newT func() T) []T {
	t.Helper()
	var out []T
	for _, m := range raws {
		v := newT()
		if err := protojson.Unmarshal(m, v); err != nil {
			t.Fatalf("call.json %s: %v", what, err)
		}
		out = append(out, v)
	}
	return out
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
	rp := &replay{t: t, exchanges: parseExchanges(t, parts)}
	srv := httptest.NewServer(rp)
	defer srv.Close()

	p := newProvider(t, srv.URL)
	rec := &recorder{}
	got := collect(providers.WithObserver(t.Context(), rec.observer()), p, c.request(t), &rec.observed)
	rec.checkEndpoints(t, strings.TrimPrefix(srv.URL, "http://"))
	rp.checkAllMade()
	gotLines := marshalEvents(t, got)
	if *update {
		updateEvents(t, file, ar, gotLines)
		return
	}
	compareEvents(t, parts["events.json"], gotLines)
}

// parseExchanges reads the transcript's numbered requests and responses.
func parseExchanges(t *testing.T, parts map[string][]byte) []*exchange {
	t.Helper()
	var exchanges []*exchange
	for i := 1; ; i++ {
		reqData, ok := parts[fmt.Sprintf("request%d.http", i)]
		if !ok {
			break
		}
		exchanges = append(exchanges, parseExchange(t, i, reqData, parts[fmt.Sprintf("response%d.http", i)]))
	}
	if len(exchanges) == 0 {
		t.Fatal("no request1.http")
	}
	return exchanges
}

// parseExchange reads the transcript's request and response number i.
func parseExchange(t *testing.T, i int, reqData, respData []byte) *exchange {
	t.Helper()
	first, header, body, err := parseHTTP(reqData)
	if err != nil {
		t.Fatalf("request%d.http: %v", i, err)
	}
	method, path, _ := strings.Cut(first, " ")
	ex := &exchange{method: method, path: path, header: header, body: body}
	statusLine, respHeader, respBody, err := parseHTTP(respData)
	if err != nil {
		t.Fatalf("response%d.http: %v", i, err)
	}
	if ex.status, err = strconv.Atoi(statusLine); err != nil {
		t.Fatalf("response%d.http: status %q", i, statusLine)
	}
	ex.respHeader, ex.respBody = respHeader, respBody
	return ex
}

// replay is the fake provider: it checks each request against the
// transcript's next exchange and answers with that exchange's response.
type replay struct {
	t         *testing.T
	exchanges []*exchange
	mu        sync.Mutex
	next      int
}

func (rp *replay) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	rp.mu.Lock()
	i := rp.next
	rp.next++
	rp.mu.Unlock()
	if i >= len(rp.exchanges) {
		rp.t.Errorf("unexpected request %d: %s %s", i+1, r.Method, r.URL.Path)
		http.Error(w, "unexpected request", http.StatusTeapot)
		return
	}
	ex := rp.exchanges[i]
	checkRequest(rp.t, i+1, ex, r)
	for k, vs := range ex.respHeader {
		w.Header()[k] = vs
	}
	w.WriteHeader(ex.status)
	_, _ = w.Write(ex.respBody)
}

// checkAllMade checks that the adapter made every request of the
// transcript.
func (rp *replay) checkAllMade() {
	rp.mu.Lock()
	defer rp.mu.Unlock()
	if rp.next != len(rp.exchanges) {
		rp.t.Errorf("the adapter made %d requests; the transcript has %d", rp.next, len(rp.exchanges))
	}
}

// recorder keeps the observer's reports: retries join the events, in
// order, and the endpoints are checked against the fake server (its host
// and port, never a path).
type recorder struct {
	observed  []any
	endpoints []string
}

func (rec *recorder) observer() *providers.Observer {
	return &providers.Observer{
		Endpoint: func(address string, port int) {
			rec.endpoints = append(rec.endpoints, net.JoinHostPort(address, strconv.Itoa(port)))
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
			rec.observed = append(rec.observed, map[string]any{"retry": retry})
		},
	}
}

// checkEndpoints checks that the adapter reported the server's endpoint,
// and no other.
func (rec *recorder) checkEndpoints(t *testing.T, want string) {
	t.Helper()
	for _, e := range rec.endpoints {
		if e != want {
			t.Errorf("the adapter reported the endpoint %s; the server is at %s", e, want)
		}
	}
	if len(rec.endpoints) == 0 {
		t.Errorf("the adapter reported no endpoint")
	}
}

// marshalEvents renders the events collected, one JSON line each.
func marshalEvents(t *testing.T, got []any) []string {
	t.Helper()
	var lines []string
	for _, ev := range got {
		b, err := json.Marshal(ev)
		if err != nil {
			t.Fatal(err)
		}
		lines = append(lines, string(b))
	}
	return lines
}

// updateEvents rewrites the transcript's events.json with the events
// collected (-update).
func updateEvents(t *testing.T, file string, ar *txtar.Archive, gotLines []string) {
	t.Helper()
	out := []byte(strings.Join(gotLines, "\n") + "\n")
	i := slices.IndexFunc(ar.Files, func(f txtar.File) bool { return f.Name == "events.json" })
	if i < 0 {
		ar.Files = append(ar.Files, txtar.File{Name: "events.json", Data: out})
	} else {
		ar.Files[i].Data = out
	}
	if err := os.WriteFile(file, txtar.Format(ar), 0o644); err != nil {
		t.Fatal(err)
	}
}

// compareEvents compares the events collected with the transcript's
// events.json, line by line as normalized JSON.
func compareEvents(t *testing.T, events []byte, gotLines []string) {
	t.Helper()
	var want []string
	for _, l := range strings.Split(strings.TrimSpace(string(events)), "\n") {
		if l = strings.TrimSpace(l); l != "" {
			want = append(want, normalizeJSON(t, []byte(l)))
		}
	}
	got := make([]string, len(gotLines))
	for i, l := range gotLines {
		got[i] = normalizeJSON(t, []byte(l))
	}
	if diff := cmp.Diff(want, got); diff != "" {
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
	if len(bytes.TrimSpace(ex.body)) > 0 {
		checkBody(t, n, ex.body, body)
	}
}

// checkBody compares a request's body with the transcript's, as JSON.
func checkBody(t *testing.T, n int, wantBody, body []byte) {
	t.Helper()
	var want, got any
	if err := json.Unmarshal(wantBody, &want); err != nil {
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
	for ev, err := range p.Stream(ctx, req) {
		out = append(out, *observed...)
		*observed = (*observed)[:0]
		if err != nil {
			out = append(out, errorValue(err))
			break
		}
		if v := eventValue(ev); v != nil {
			out = append(out, v)
		}
	}
	return out
}

// errorValue renders the error that ended a turn: its kind and message.
func errorValue(err error) any {
	var fe *fault.Error
	kind := "Internal"
	if errors.As(err, &fe) {
		kind = fe.Kind.String()
	}
	return map[string]any{"error": map[string]any{"kind": kind, "message": err.Error()}}
}

// eventValue renders one event; nil for a kind it does not know.
func eventValue(ev providers.Event) any {
	marshal := protojson.MarshalOptions{UseProtoNames: true}
	switch ev := ev.(type) {
	case *providers.TextDelta:
		return map[string]any{"text_delta": ev.Text}
	case *providers.ToolCall:
		b, _ := marshal.Marshal(ev.Call)
		return map[string]any{"tool_call": json.RawMessage(b)}
	case *providers.ProviderToolCall:
		b, _ := marshal.Marshal(ev.Call)
		return map[string]any{"provider_tool_call": json.RawMessage(b)}
	case *providers.Usage:
		b, _ := marshal.Marshal(ev.Usage)
		return map[string]any{"usage": json.RawMessage(b)}
	case *providers.Reasoning:
		return map[string]any{"reasoning": reasoningValue(ev)}
	case *providers.Stop:
		return stopValue(ev)
	}
	return nil
}

func reasoningValue(ev *providers.Reasoning) map[string]any {
	r := map[string]any{"text": ev.Text, "signature": ev.Signature}
	if ev.Redacted {
		r["redacted"] = true
	}
	if ev.Provider != "" {
		r["provider"] = ev.Provider
	}
	return r
}

func stopValue(ev *providers.Stop) map[string]any {
	stop := map[string]any{"stop": ev.Reason.String()}
	if ev.Paused {
		stop["paused"] = true
	}
	if r := ev.Response; r != (providers.Response{}) {
		stop["response"] = map[string]any{"id": r.ID, "model": r.Model, "finish_reason": r.FinishReason}
	}
	return stop
}
