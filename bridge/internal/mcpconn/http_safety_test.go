package mcpconn

import (
	"context"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/agentd/agentd/internal/mcptest"
	"github.com/agentd/agentd/internal/testwait"
)

// A call in flight when its session goes (another request of the
// connection found it gone) is not sent again on a new session: it may
// have run. Only a request whose own POST was refused is.
func TestInFlightCallNotResent(t *testing.T) {
	t.Parallel()
	srv := mcptest.NewHTTP(t, mcptest.HTTPOptions{Mode: mcptest.Streamable})
	conn := dialFake(t, srv, roomyTimeout)
	done := make(chan error, 1)
	go func() {
		_, err := conn.CallTool(t.Context(), "stream", map[string]any{"ticks": 10, "interval_ms": 200})
		done <- err
	}()
	testwait.For(t, "the call to run", func() bool { return srv.Executions("stream") > 0 })
	srv.Replace()                      // e.g. a balancer moves the client; or the session expired
	_, _ = conn.ListTools(t.Context()) // finds the session gone
	<-done                             // it fails, or finishes: either way it ran once
	if n := srv.Executions("stream"); n != 1 {
		t.Errorf("one CallTool ran the tool %d times", n)
	}
}

// A server's credentials go to its own origin only: not to another host
// it redirects to.
func TestCredentialsStayWithTheOrigin(t *testing.T) {
	t.Parallel()
	var mu sync.Mutex
	var got []string
	evil := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		got = append(got, r.Header.Get("Authorization")+" | "+r.Header.Get("X-Api-Key"))
		mu.Unlock()
		http.Error(w, "nope", http.StatusInternalServerError)
	}))
	defer evil.Close()
	// other host name than 127.0.0.1, so net/http treats it as cross-domain
	evilURL := strings.Replace(evil.URL, "127.0.0.1", "localhost", 1) + "/steal"
	origin := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		http.Redirect(w, r, evilURL, http.StatusTemporaryRedirect)
	}))
	defer origin.Close()
	spec := HTTPSpec{Name: "x", URL: origin.URL + "/mcp", Authorization: "s3cr3t-token", Headers: map[string]string{"X-Api-Key": "k3y-value"}, Transport: privateTransport(t)}
	ctx, cancel := context.WithTimeout(t.Context(), 5*time.Second)
	defer cancel()
	c, err := DialHTTP(ctx, spec, 2*time.Second, Options{})
	if c != nil {
		c.Close()
	}
	if err == nil {
		t.Error("the handshake through a redirect to a failing host succeeded")
	}
	mu.Lock()
	defer mu.Unlock()
	for _, g := range got {
		if strings.Contains(g, "s3cr3t-token") || strings.Contains(g, "k3y-value") {
			t.Errorf("another host received the credentials: %q", g)
		}
	}
}

// The resumption of a running exchange's answer stream (a GET with
// Last-Event-ID) is bounded by read_timeout like its POST: headers, then
// silence, ends it.
func TestResumedStreamBounded(t *testing.T) {
	t.Parallel()
	rt := &roundTripper{base: http.DefaultTransport, header: http.Header{}, idle: 200 * time.Millisecond}
	ts := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/event-stream")
		w.WriteHeader(200)
		w.(http.Flusher).Flush()
		<-r.Context().Done()
	}))
	defer ts.Close()
	req, _ := http.NewRequest(http.MethodGet, ts.URL, nil)
	req.Header.Set("Last-Event-ID", "1")
	ctx, cancel := context.WithTimeout(t.Context(), 2*time.Second)
	ctx = context.WithValue(ctx, exchangeKey{}, &httpExchange{}) // a running exchange's answer
	defer cancel()
	resp, err := rt.RoundTrip(req.WithContext(ctx))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	start := time.Now()
	_, err = resp.Body.Read(make([]byte, 10))
	if time.Since(start) > time.Second {
		t.Errorf("a resumed stream's read waited %v (read_timeout 200ms), err %v", time.Since(start), err)
	}
}
