package faultsuite

import (
	"bufio"
	"context"
	"fmt"
	"net/http"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"google.golang.org/grpc/codes"

	"github.com/agentd/agentd/internal/config"
	"github.com/agentd/agentd/internal/mcptest"
)

// X-L8: a stdio server that crashes mid-call is data for the model, not a
// failed generation: the model sees an error naming the server (flagged),
// the generation goes on, and the server's next call runs on a fresh
// process.
func TestStdioCrashMidCall(t *testing.T) {
	s := newStack(t)
	o := s.run(t, t.Context(), scripted(t, []map[string]any{call("crash", nil), call("echo", map[string]any{"text": "again"}), say}, ref("tools", 0)))
	wantCompleted(t, o, "again")
	f := o.finished()
	want := `{"error":"the MCP server \"tools\" stopped during the call; it may or may not have run"}`
	if len(f) != 2 || !f[0].GetIsError() || f[0].GetOutput() != want || f[1].GetIsError() {
		t.Errorf("X-L8 tool results %v; want the crash as an error for the model (%s), then echo's answer", f, want)
	}
}

// A stdio server that hangs misses its read_timeout: the generation fails
// naming the server, the request and the setting (R-L1), and the process is
// stopped. X-H6: the call runs on a warm spare, whose handshake
// start_timeout bounds, and the read_timeout (2 s) leaves tools/list room
// on a busy machine, so it is the hang that misses it.
func TestStdioHang(t *testing.T) {
	s := newStack(t, withWarmSpare("tools"))
	s.waitSpare(t, "tools")
	o := s.run(t, t.Context(), scripted(t, []map[string]any{call("hang", nil), say}, ref("tools", 2*time.Second)))
	wantStatus(t, o, codes.DeadlineExceeded, `"tools"`, `tools/call for "hang"`, "read_timeout")
}

// A stdio server that floods stdout and stderr with garbage keeps working:
// the garbage is dropped, and logged at a bounded rate.
func TestStdioFlood(t *testing.T) {
	s := newStack(t)
	const lines = 5000
	o := s.run(t, t.Context(), scripted(t, []map[string]any{call("flood", map[string]any{"lines": lines}), call("echo", map[string]any{"text": "still here"}), say}, ref("noisy", 0)))
	wantCompleted(t, o, "still here")
	// The count of the lines left out comes with the next line logged,
	// or when the server's process stops: the session closes after the
	// stream has ended, so the log is read once agentd has stopped.
	s.stop()
	logged := count(s.logs, "not JSON-RPC") + count(s.logs, "mcp server stderr")
	if logged == 0 || logged > 2*(100+20*10) {
		t.Errorf("%d garbage lines logged of %d written to stdout and %d to stderr; want some, at a bounded rate", logged, lines, lines)
	}
	if !strings.Contains(s.logs.String(), "suppressed_lines") && logged < 2*lines {
		t.Error("lines were left out of the log without saying how many")
	}
}

// A result larger than bridge.max_result_bytes reaches the model as an
// error naming the size and the setting; the generation goes on. The
// stress run sends 50 MB.
func TestStdioHugeResult(t *testing.T) {
	s := newStack(t)
	size := hugeResult
	o := s.run(t, t.Context(), scripted(t, []map[string]any{call("big", map[string]any{"size": size}), say}, ref("tools", 30*time.Second)))
	wantStatus(t, o, codes.OK)
	f := o.finished()
	if len(f) != 1 || !f[0].GetIsError() {
		t.Fatalf("tool results %v; want one error", f)
	}
	for _, want := range []string{fmt.Sprintf("%d bytes", size), "bridge.max_result_bytes"} {
		if !strings.Contains(f[0].GetOutput(), want) {
			t.Errorf("the model saw %q, which does not say %q", f[0].GetOutput(), want)
		}
	}
}

// A message beyond the bridge's hard limit stops the server: the
// generation fails naming it, and nothing is kept of the message. Stress
// only: the server writes 64 MiB.
func TestStdioMessageOverLimit(t *testing.T) {
	if !stress {
		t.Skip("writes 64 MiB; run by make stress")
	}
	s := newStack(t)
	o := s.run(t, t.Context(), scripted(t, []map[string]any{call("big", map[string]any{"size": config.MaxMessageBytes + 1}), say}, ref("tools", 60*time.Second)))
	wantStatus(t, o, codes.Unavailable, `"tools"`, "larger than 64 MiB")
}

// A server that ignores SIGTERM, with a grandchild that does too, is
// killed with its process group when its session ends (the leak check
// proves it).
func TestStdioIgnoresSIGTERM(t *testing.T) {
	s := newStack(t)
	wantCompleted(t, s.run(t, t.Context(), scripted(t, []map[string]any{call("grandchild", nil), {"text": "ok"}}, ref("stubborn", 0))), "ok")
}

// An HTTP server that answers tools/call with 500 fails the generation
// with an error naming the server, never its URL's path.
func TestHTTP500(t *testing.T) {
	srv := mcptest.NewHTTP(t, mcptest.HTTPOptions{FailCalls: true})
	s := newStack(t)
	o := s.run(t, t.Context(), scripted(t, []map[string]any{call("echo", map[string]any{"text": "x"}), say}, url("api", srv.Base+"/secret-path/mcp", 0)))
	wantStatus(t, o, codes.Unavailable, `"api"`)
	if strings.Contains(o.status.Message(), "secret-path") {
		t.Errorf("the error shows the URL's path: %s", o.status.Message())
	}
}

// An HTTP server that resets the connection of a tools/call fails the
// generation; the call is not repeated (it may have run).
func TestHTTPConnectionReset(t *testing.T) {
	srv := mcptest.NewHTTP(t, mcptest.HTTPOptions{Mode: mcptest.StreamableJSON, Wrap: onToolCall(func(w http.ResponseWriter) {
		conn, _, err := http.NewResponseController(w).Hijack()
		if err == nil {
			conn.Close()
		}
	})})
	s := newStack(t)
	o := s.run(t, t.Context(), scripted(t, []map[string]any{call("count", nil), say}, url("api", srv.URL, 0)))
	wantStatus(t, o, codes.Unavailable, `"api"`)
	if n := srv.Executions("count"); n != 0 {
		t.Errorf("the tool ran %d times behind the reset connection", n)
	}
}

// An HTTP server restarted mid-session (its session id unknown to it now)
// is reconnected to, and the generation completes. X-H6: the server
// restarts as the second call arrives, before it reads it, so the call
// meets the restarted server (404 for its session: it never ran, and is
// sent again on a new session) whatever the machine's speed; a restart
// timed from the client's events could cut the call mid-flight instead,
// which fails the generation by design (it may have run).
func TestHTTPRestartMidSession(t *testing.T) {
	var srv *mcptest.HTTPServer
	var calls atomic.Int32
	srv = mcptest.NewHTTP(t, mcptest.HTTPOptions{Wrap: func(next http.Handler) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			if isToolCall(r) && calls.Add(1) == 2 {
				srv.Restart()
			}
			next.ServeHTTP(w, r)
		})
	}})
	s := newStack(t)
	turns := []map[string]any{call("echo", map[string]any{"text": "before"}), call("echo", map[string]any{"text": "after"}), say}
	o := s.run(t, t.Context(), scripted(t, turns, url("api", srv.URL, 0)))
	wantCompleted(t, o, "after")
	if n := calls.Load(); n != 3 {
		t.Errorf("the server got %d tool calls; want 3: the first, the second refused by the restarted server, and it again on a new session", n)
	}
	if n := srv.Executions("echo"); n != 2 {
		t.Errorf("echo ran %d times; want 2", n)
	}
}

// An HTTP server that trickles its answer slower than read_timeout fails
// the generation with DeadlineExceeded naming the server.
func TestHTTPTrickle(t *testing.T) {
	const readTimeout = 300 * time.Millisecond
	srv := mcptest.NewHTTP(t, mcptest.HTTPOptions{Mode: mcptest.StreamableJSON, Wrap: func(next http.Handler) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			if !isToolCall(r) {
				next.ServeHTTP(w, r)
				return
			}
			next.ServeHTTP(&trickleWriter{ResponseWriter: w, gap: 2 * readTimeout, ctx: r.Context()}, r)
		})
	}})
	s := newStack(t)
	o := s.run(t, t.Context(), scripted(t, []map[string]any{call("echo", map[string]any{"text": "slow"}), say}, url("api", srv.URL, readTimeout)))
	wantStatus(t, o, codes.DeadlineExceeded, `"api"`)
}

// onToolCall wraps a handler: tools/call requests get f instead.
func onToolCall(f func(http.ResponseWriter)) func(http.Handler) http.Handler {
	return func(next http.Handler) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			if isToolCall(r) {
				f(w)
				return
			}
			next.ServeHTTP(w, r)
		})
	}
}

// isToolCall peeks at a POST's body for a tools/call, leaving it readable.
func isToolCall(r *http.Request) bool {
	if r.Method != http.MethodPost {
		return false
	}
	br := bufio.NewReaderSize(r.Body, 1<<16)
	peek, _ := br.Peek(1 << 16)
	r.Body = struct {
		*bufio.Reader
		closer
	}{br, closer{r.Body}}
	return strings.Contains(string(peek), `"tools/call"`)
}

type closer struct{ c interface{ Close() error } }

func (c closer) Close() error { return c.c.Close() }

// trickleWriter writes one byte at a time, gap apart.
type trickleWriter struct {
	http.ResponseWriter
	gap time.Duration
	ctx context.Context
}

func (w *trickleWriter) Write(p []byte) (int, error) {
	for i := range p {
		select {
		case <-w.ctx.Done():
			return i, w.ctx.Err()
		case <-time.After(w.gap):
		}
		if _, err := w.ResponseWriter.Write(p[i : i+1]); err != nil {
			return i, err
		}
		http.NewResponseController(w.ResponseWriter).Flush()
	}
	return len(p), nil
}
