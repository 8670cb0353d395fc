package httpc

import (
	"context"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"slices"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	agentdv1 "github.com/agentd/agentd/gen/go/agentd/v1"
	"github.com/agentd/agentd/internal/fault"
	"github.com/agentd/agentd/providers"
)

// server answers with the given statuses in turn (the last repeats).
func server(t *testing.T, statuses []int, header http.Header, body string) (*httptest.Server, *atomic.Int32) {
	t.Helper()
	var n atomic.Int32
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		i := int(n.Add(1)) - 1
		s := statuses[min(i, len(statuses)-1)]
		// Each answer on a connection of its own, so that no connection
		// kept alive from an earlier answer (or from another test's server
		// on a port since reused) takes part in the count.
		w.Header().Set("Connection", "close")
		for k, vs := range header {
			w.Header()[k] = vs
		}
		w.WriteHeader(s)
		if s >= 300 {
			_, _ = w.Write([]byte(body))
		}
	}))
	t.Cleanup(srv.Close)
	return srv, &n
}

func TestRetries(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name     string
		statuses []int
		header   http.Header
		retries  int
		wantN    int32
		wantKind fault.Kind
		wantOK   bool
		wantWait []time.Duration // exact waits, when the server says
	}{
		{name: "429 then ok, retry-after-ms honoured", statuses: []int{429, 200}, header: http.Header{"Retry-After-Ms": {"1500"}}, retries: 2, wantN: 2, wantOK: true, wantWait: []time.Duration{1500 * time.Millisecond}},
		{name: "529 overloaded, retry-after seconds", statuses: []int{529, 529, 200}, header: http.Header{"Retry-After": {"2"}}, retries: 2, wantN: 3, wantOK: true, wantWait: []time.Duration{2 * time.Second, 2 * time.Second}},
		{name: "503 exhausts the retries", statuses: []int{503}, retries: 2, wantN: 3, wantKind: fault.Unavailable},
		{name: "400 is never retried", statuses: []int{400, 200}, retries: 2, wantN: 1, wantKind: fault.Invalid},
		{name: "401 is never retried", statuses: []int{401, 200}, retries: 2, wantN: 1, wantKind: fault.Unauthenticated},
		{name: "x-should-retry false wins over 500", statuses: []int{500, 200}, header: http.Header{"X-Should-Retry": {"false"}}, retries: 2, wantN: 1, wantKind: fault.Unavailable},
		{name: "x-should-retry true wins over 400", statuses: []int{400, 200}, header: http.Header{"X-Should-Retry": {"true"}, "Retry-After-Ms": {"0"}}, retries: 2, wantN: 2, wantOK: true},
		{name: "429 is rate limited", statuses: []int{429}, retries: 0, wantN: 1, wantKind: fault.Exhausted},
		{name: "a wait of more than a minute gets the error now", statuses: []int{429, 200}, header: http.Header{"Retry-After": {"3600"}}, retries: 3, wantN: 1, wantKind: fault.Exhausted, wantWait: []time.Duration{}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			srv, n := server(t, tc.statuses, tc.header, `{"error":{"message":"nope","type":"x"}}`)
			var waits []time.Duration
			c := &Client{Provider: "p", BaseURL: srv.URL, MaxRetries: tc.retries}
			c.SetSleep(func(_ context.Context, d time.Duration) error { waits = append(waits, d); return nil })
			resp, err := c.Do(t.Context(), http.MethodPost, "/x", map[string]any{"a": 1})
			if n.Load() != tc.wantN {
				t.Errorf("%d requests, want %d", n.Load(), tc.wantN)
			}
			if tc.wantOK {
				if err != nil {
					t.Fatalf("Do: %v", err)
				}
				resp.Body.Close()
			} else if fault.KindOf(err) != tc.wantKind {
				t.Errorf("error %v (%v), want kind %v", err, fault.KindOf(err), tc.wantKind)
			}
			if tc.wantWait != nil {
				if len(waits) != len(tc.wantWait) {
					t.Fatalf("waits %v, want %v", waits, tc.wantWait)
				}
				for i := range waits {
					if waits[i] != tc.wantWait[i] {
						t.Errorf("wait %d = %v, want %v", i, waits[i], tc.wantWait[i])
					}
				}
			}
		})
	}
}

// X-O4: every retry is reported to the turn's observer, with the failed
// attempt, its status (or what kind of failure it was when no response
// came) and the wait; a wait the client refuses is no retry. The endpoint
// is the base URL's host and port, never its path or query.
func TestRetriesObserved(t *testing.T) {
	t.Parallel()
	srv, _ := server(t, []int{429, 503, 200}, http.Header{"Retry-After-Ms": {"250"}}, `{"error":{"message":"slow down"}}`)
	var got []providers.Retry
	var endpoints []string
	obs := &providers.Observer{
		Endpoint: func(address string, port int) {
			endpoints = append(endpoints, net.JoinHostPort(address, strconv.Itoa(port)))
		},
		Retry: func(r providers.Retry) { got = append(got, r) },
	}
	ctx := providers.WithObserver(t.Context(), obs)
	c := &Client{Provider: "p", BaseURL: srv.URL + "/v1/secret-path", MaxRetries: 2}
	c.SetSleep(func(context.Context, time.Duration) error { return nil })
	resp, err := c.Do(ctx, http.MethodPost, "/x", nil)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	want := []providers.Retry{
		{Attempt: 1, Status: 429, Delay: 250 * time.Millisecond},
		{Attempt: 2, Status: 503, Delay: 250 * time.Millisecond},
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("retries (-want +got):\n%s", diff)
	}
	if wantEP := []string{strings.TrimPrefix(srv.URL, "http://")}; !slices.Equal(endpoints, wantEP) {
		t.Errorf("endpoints %q, want %q", endpoints, wantEP)
	}

	// No response: a connection failure.
	got = nil
	down := &Client{Provider: "p", BaseURL: "http://127.0.0.1:1", MaxRetries: 1}
	down.SetSleep(func(context.Context, time.Duration) error { return nil })
	if _, err := down.Do(ctx, http.MethodPost, "/x", nil); err == nil {
		t.Fatal("Do reached a closed port")
	}
	if len(got) != 1 || got[0].Attempt != 1 || got[0].Status != 0 || got[0].Failure != "connection" {
		t.Errorf("retries %+v, want one connection failure of attempt 1", got)
	}

	// A wait longer than a minute is refused: the error, and no retry.
	got = nil
	long, _ := server(t, []int{429, 200}, http.Header{"Retry-After": {"3600"}}, "")
	c = &Client{Provider: "p", BaseURL: long.URL, MaxRetries: 2}
	if _, err := c.Do(ctx, http.MethodPost, "/x", nil); err == nil {
		t.Fatal("Do waited an hour")
	}
	if len(got) != 0 {
		t.Errorf("retries %+v, want none", got)
	}
}

func TestEndpoint(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		base string
		host string
		port int
		ok   bool
	}{
		{"https://api.openai.com/v1", "api.openai.com", 443, true},
		{"http://localhost:11434", "localhost", 11434, true},
		{"http://[::1]:8080/openai/deployments?api-version=x", "::1", 8080, true},
		{"https://example.com:8443/a/b?key=secret", "example.com", 8443, true},
		{"/relative", "", 0, false},
	} {
		host, port, ok := endpoint(tc.base)
		if host != tc.host || port != tc.port || ok != tc.ok {
			t.Errorf("endpoint(%q) = %q, %d, %v; want %q, %d, %v", tc.base, host, port, ok, tc.host, tc.port, tc.ok)
		}
	}
}

func TestBackoffWithoutRetryAfter(t *testing.T) {
	t.Parallel()
	srv, _ := server(t, []int{502, 502, 502, 200}, nil, "")
	var waits []time.Duration
	c := &Client{Provider: "p", BaseURL: srv.URL, MaxRetries: 3, MinBackoff: 100 * time.Millisecond, MaxBackoff: 250 * time.Millisecond}
	c.SetSleep(func(_ context.Context, d time.Duration) error { waits = append(waits, d); return nil })
	resp, err := c.Do(t.Context(), http.MethodPost, "/x", nil)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	for i, d := range waits {
		ceiling := min(100*time.Millisecond<<i, 250*time.Millisecond)
		if d < ceiling/2 || d > ceiling {
			t.Errorf("wait %d = %v, want within [%v, %v]", i, d, ceiling/2, ceiling)
		}
	}
}

// Back-off stays within its bounds however many retries are configured:
// the doubling must not overflow.
func TestBackoffManyRetries(t *testing.T) {
	t.Parallel()
	c := &Client{Provider: "p", MinBackoff: 500 * time.Millisecond, MaxBackoff: 8 * time.Second}
	var got time.Duration
	c.SetSleep(func(_ context.Context, d time.Duration) error { got = d; return nil })
	for attempt := range 100 {
		if err := c.wait(t.Context(), nil, providers.Retry{Attempt: attempt + 1}, nil); err != nil {
			t.Fatalf("attempt %d: %v", attempt, err)
		}
		if got <= 0 || got > 8*time.Second {
			t.Fatalf("attempt %d waits %v; want within (0, 8s]", attempt, got)
		}
	}
}

func TestClassify(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		status        int
		typ, msg      string
		kind          fault.Kind
		reasonContain string
	}{
		{400, "invalid_request_error", "prompt is too long: 210000 tokens > 200000 maximum", fault.Invalid, "CONTEXT_TOO_LONG"},
		{400, "invalid_request_error", "This model's maximum context length is 128000 tokens", fault.Invalid, "CONTEXT_TOO_LONG"},
		{400, "INVALID_ARGUMENT", "The input token count (1200000) exceeds the maximum number of tokens allowed (1048576).", fault.Invalid, "CONTEXT_TOO_LONG"},
		{0, "overloaded_error", "Overloaded", fault.Unavailable, "OVERLOADED"},
		{429, "", "slow down", fault.Exhausted, "RATE_LIMITED"},
		{403, "", "forbidden", fault.Permission, "PROVIDER_PERMISSION"},
		{500, "", "boom", fault.Unavailable, "PROVIDER_ERROR"},
	} {
		err := Classify("p", tc.status, tc.typ, tc.msg)
		var fe *fault.Error
		if fault.KindOf(err) != tc.kind {
			t.Errorf("%d %q: kind %v, want %v", tc.status, tc.msg, fault.KindOf(err), tc.kind)
		}
		if fe, _ = err.(*fault.Error); fe == nil || !strings.Contains(fe.Reason, tc.reasonContain) {
			t.Errorf("%d %q: reason %v", tc.status, tc.msg, fe)
		}
	}
}

func TestOpenAIError(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct{ body, msg, typ string }{
		{`{"error":{"message":"bad","type":"invalid_request_error"}}`, "bad", "invalid_request_error"},
		{`{"error":"model not found"}`, "model not found", ""},
		{`{"error":{"code":429,"message":"quota","status":"RESOURCE_EXHAUSTED"}}`, "quota", "RESOURCE_EXHAUSTED"},
		{`not json`, "not json", ""},
	} {
		msg, typ := OpenAIError([]byte(tc.body))
		if msg != tc.msg || typ != tc.typ {
			t.Errorf("OpenAIError(%s) = %q %q, want %q %q", tc.body, msg, typ, tc.msg, tc.typ)
		}
	}
}

func TestMergeOptions(t *testing.T) {
	t.Parallel()
	body := map[string]any{"model": "m", "tools": []any{"mine"}}
	MergeOptions(body, map[string]any{"model": "theirs", "tools": []any{"native"}, "temperature": 0.5}, "tools")
	if body["model"] != "m" || body["temperature"] != 0.5 || len(body["tools"].([]any)) != 2 {
		t.Errorf("merged = %v", body)
	}
}

// CloseIdleConnections reaches the transport under the idle-timeout
// wrapper: the keep-alive connection of a finished request closes.
func TestCloseIdleConnections(t *testing.T) {
	t.Parallel()
	closed := make(chan struct{})
	srv := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { _, _ = w.Write([]byte("{}")) }))
	srv.Config.ConnState = func(_ net.Conn, s http.ConnState) {
		if s == http.StateClosed {
			close(closed)
		}
	}
	srv.Start()
	defer srv.Close()
	c := &Client{Provider: "p", BaseURL: srv.URL, HTTP: NewHTTPClient(providers.Settings{Timeout: time.Second})}
	resp, err := c.Do(t.Context(), http.MethodPost, "/", map[string]any{})
	if err != nil {
		t.Fatal(err)
	}
	_, _ = io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	c.CloseIdleConnections()
	select {
	case <-closed:
	case <-time.After(5 * time.Second):
		t.Fatal("the idle connection was not closed")
	}
}

func TestArgumentsObject(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct{ args, want string }{
		{"", "{}"},
		{"null", "{}"},
		{`{"a": {"b": [1]}}`, `{"a":{"b":[1]}}`},
		{`[1]`, "{}"},
		{`"text"`, "{}"},
		{`{"x": `, "{}"},
		{`{"a":1} {"b":2}`, "{}"},
	} {
		if got := string(ArgumentsObject(tc.args)); got != tc.want {
			t.Errorf("ArgumentsObject(%q) = %s, want %s", tc.args, got, tc.want)
		}
	}
}

func TestCallIDs(t *testing.T) {
	t.Parallel()
	call := &agentdv1.Part{Kind: &agentdv1.Part_ToolCall{ToolCall: &agentdv1.ToolCall{Id: "a"}}}
	text := &agentdv1.Part{Kind: &agentdv1.Part_Text{Text: "t"}}
	ids := NewCallIDs([]*agentdv1.Message{
		{Role: agentdv1.Role_ROLE_ASSISTANT, Parts: []*agentdv1.Part{text, call, call}},
		{Role: agentdv1.Role_ROLE_USER, Parts: []*agentdv1.Part{text}},
		{Role: agentdv1.Role_ROLE_ASSISTANT, Parts: []*agentdv1.Part{call}},
	})
	var got []string
	for _, id := range []string{"", "fc_9", ""} {
		got = append(got, ids.Next(id))
	}
	if want := []string{"call_4", "fc_9", "call_6"}; !slices.Equal(got, want) {
		t.Errorf("ids %q, want %q", got, want)
	}
}

func TestReservedOptions(t *testing.T) {
	t.Parallel()
	got := ReservedOptions(map[string]any{"stream": false, "model": "m", "temperature": 0.2}, "why", "model", "messages", "stream")
	want := []providers.Problem{{Field: "model", Description: "why"}, {Field: "stream", Description: "why"}}
	if !slices.Equal(got, want) {
		t.Errorf("ReservedOptions = %v, want %v", got, want)
	}
}
