package httpc

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"testing/synctest"
	"time"

	"github.com/agentd/agentd/internal/fault"
	"github.com/agentd/agentd/providers"
	"github.com/agentd/agentd/providers/internal/ndjson"
	"github.com/agentd/agentd/providers/internal/sse"
)

// X-H4: one rule classifies every failure to read a stream.
func TestStreamError(t *testing.T) {
	t.Parallel()
	canceled, cancel := context.WithCancel(t.Context())
	cancel()
	reset := &net.OpError{Op: "read", Net: "tcp", Addr: &net.TCPAddr{IP: net.IPv4(10, 0, 0, 1), Port: 443},
		Err: os.NewSyscallError("read", syscall.ECONNRESET)}
	for _, tc := range []struct {
		name   string
		ctx    context.Context
		err    error
		kind   fault.Kind
		msg    string
		reason string
	}{
		{"the caller gave up", canceled, reset, fault.Canceled, "context canceled", ""},
		{"idle", t.Context(), fmt.Errorf("sse: %w", &idleError{idle: 90 * time.Second}), fault.Timeout,
			"p: the response stream sent nothing for 1m30s", "PROVIDER_STREAM_IDLE"},
		{"another read deadline", t.Context(), os.ErrDeadlineExceeded, fault.Timeout,
			"p: the response stream sent nothing before its read deadline", "PROVIDER_STREAM_IDLE"},
		{"EOF before the terminal event", t.Context(), io.EOF, fault.Unavailable,
			"p: the response stream ended before it was complete", "PROVIDER_STREAM_TRUNCATED"},
		{"cut mid-event", t.Context(), io.ErrUnexpectedEOF, fault.Unavailable,
			"p: the response stream ended before it was complete", "PROVIDER_STREAM_TRUNCATED"},
		{"reset, its address not shown", t.Context(), reset, fault.Unavailable,
			"p: the response stream ended before it was complete", "PROVIDER_STREAM_TRUNCATED"},
		{"an event too large", t.Context(), fmt.Errorf("%w (over 16 bytes)", sse.ErrEventTooLarge), fault.Unavailable,
			"p: sse: event too large (over 16 bytes)", ""},
		{"a line too large", t.Context(), fmt.Errorf("%w (over 16 bytes)", ndjson.ErrLineTooLarge), fault.Unavailable,
			"p: ndjson: line too large (over 16 bytes)", ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			err := StreamError(tc.ctx, "p", tc.err)
			if fault.KindOf(err) != tc.kind || err.Error() != tc.msg {
				t.Errorf("StreamError = %v %q, want %v %q", fault.KindOf(err), err, tc.kind, tc.msg)
			}
			var fe *fault.Error
			if errors.As(err, &fe) && (fe.Reason != tc.reason || tc.reason != "" && fe.Metadata["provider"] != "p") {
				t.Errorf("ErrorInfo %s %v, want %s naming the provider", fe.Reason, fe.Metadata, tc.reason)
			}
			if !errors.Is(err, tc.err) && tc.kind != fault.Canceled {
				t.Errorf("StreamError lost its cause %v", tc.err)
			}
		})
	}
}

// blockingBody's reads wait until it is closed (a provider gone silent).
type blockingBody struct{ closed chan struct{} }

func (b blockingBody) Read([]byte) (int, error) {
	<-b.closed
	return 0, errors.New("read on a closed body")
}

func (b blockingBody) Close() error { close(b.closed); return nil }

// A read that waits longer than idle cancels the request and fails as
// idle, and so does every later read, whichever the cancellation reached.
func TestIdleBody(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		body := blockingBody{closed: make(chan struct{})}
		ctx, cancel := context.WithCancel(t.Context())
		b := &idleBody{ReadCloser: body, cancel: func() { cancel(); body.Close() }, idle: time.Minute}
		start := time.Now()
		for range 2 {
			var idle *idleError
			if _, err := b.Read(make([]byte, 1)); !errors.As(err, &idle) || idle.idle != time.Minute {
				t.Errorf("Read = %v; want the idle error", err)
			}
		}
		if waited := time.Since(start); waited != time.Minute {
			t.Errorf("the reads failed after %s; want 1m0s", waited)
		}
		if ctx.Err() == nil {
			t.Error("the request was not cancelled")
		}
	})
}

// TestFinishReusesConnection: a response closed with Finish after its terminal
// event, a moment before the body's end, gives its connection back: the next
// request reuses it (every turn used to dial anew). A context already ended
// closes without reading.
func TestFinishReusesConnection(t *testing.T) {
	var conns atomic.Int32
	rest := make(chan struct{}) // the client read the terminal event
	srv := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/event-stream")
		fmt.Fprint(w, "data: {\"done\":true}\n\n")
		w.(http.Flusher).Flush()
		select {
		case <-rest:
		case <-r.Context().Done():
		}
		fmt.Fprint(w, "data: [DONE]\n\n") // what an adapter stops before
	}))
	srv.Config.ConnState = func(_ net.Conn, st http.ConnState) {
		if st == http.StateNew {
			conns.Add(1)
		}
	}
	srv.Start()
	t.Cleanup(srv.Close)
	client := NewHTTPClient(providers.Settings{})
	for range 3 {
		req, _ := http.NewRequestWithContext(t.Context(), http.MethodGet, srv.URL, nil)
		resp, err := client.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		line, err := bufio.NewReader(resp.Body).ReadString('\n') // the terminal event
		if err != nil || !strings.Contains(line, "done") {
			t.Fatalf("read %q, %v", line, err)
		}
		rest <- struct{}{}
		Finish(t.Context(), resp.Body)
	}
	if n := conns.Load(); n != 1 {
		t.Errorf("%d connections for 3 requests, want 1", n)
	}
}
