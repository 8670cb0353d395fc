package providertest

import (
	"bufio"
	"context"
	"errors"
	"io"
	"net"
	"net/http"
	"os"
	"strings"
	"syscall"
	"testing"
	"testing/synctest"
	"time"

	"google.golang.org/genproto/googleapis/rpc/errdetails"
	"google.golang.org/grpc/codes"

	agentdv1 "github.com/agentd/agentd/gen/go/agentd/v1"
	"github.com/agentd/agentd/internal/fault"
	"github.com/agentd/agentd/providers"
)

// StreamIdleTimeout is the Settings.Timeout CheckStreamFailures gives the
// adapter. It passes on a synctest bubble's clock, in no time.
const StreamIdleTimeout = 30 * time.Second

// CheckStreamFailures proves that a response stream failing after it
// began fails alike on every adapter: a stream that goes silent
// for longer than the adapter's timeout is DeadlineExceeded, one cut short
// (closed before the turn's terminal event, or reset mid-event) is
// Unavailable, each with a message that begins with the provider's name
// and an ErrorInfo naming it.
//
// The fake API answers on an in-memory network inside a synctest bubble,
// so the timeout runs on the bubble's clock: the check waits for states
// (every goroutine blocked), never for the machine. newProvider makes the
// adapter from s, adding any options it needs; it must keep s's Timeout,
// Dial and MaxRetries.
func CheckStreamFailures(t *testing.T, newProvider func(s providers.Settings) providers.Provider) {
	t.Helper()
	for _, tc := range []struct {
		name string
		// begin is the body the stream sends before it fails: a blank
		// line every stream format skips, perhaps the start of an event.
		begin string
		// silent: the API then sends nothing and keeps the connection;
		// else it closes it, reset: as a reset.
		silent, reset bool
		code          codes.Code
		reason        string
	}{
		{name: "idle mid-event", begin: "\n{", silent: true, code: codes.DeadlineExceeded, reason: "PROVIDER_STREAM_IDLE"},
		{name: "closed before the end", begin: "\n", code: codes.Unavailable, reason: "PROVIDER_STREAM_TRUNCATED"},
		{name: "reset mid-event", begin: "\n{", reset: true, code: codes.Unavailable, reason: "PROVIDER_STREAM_TRUNCATED"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			synctest.Test(t, func(t *testing.T) {
				dial := func(context.Context, string, string) (net.Conn, error) {
					client, server := net.Pipe()
					go serveBrokenStream(t, server, tc.begin, tc.silent)
					if tc.reset {
						return resetConn{client}, nil
					}
					return client, nil
				}
				p := newProvider(providers.Settings{APIKey: "test-key", BaseURL: "http://provider.test", Timeout: StreamIdleTimeout, MaxRetries: -1, Dial: dial})
				if c, ok := p.(interface{ CloseIdleConnections() }); ok {
					defer c.CloseIdleConnections()
				}
				req := &providers.Request{Model: "canary-model", Messages: []*agentdv1.Message{{
					Role: agentdv1.Role_ROLE_USER, Parts: []*agentdv1.Part{{Kind: &agentdv1.Part_Text{Text: "hi"}}},
				}}}
				checkStreamFailure(t, FirstError(t.Context(), p, req), p.Name(), tc.code, tc.reason)
			})
		})
	}
}

// checkStreamFailure checks that err is the failure of provider's
// response stream, with code and an ErrorInfo of reason.
func checkStreamFailure(t *testing.T, err error, provider string, code codes.Code, reason string) {
	t.Helper()
	if err == nil {
		t.Fatal("the turn ended without an error")
	}
	st := fault.Status(err)
	if st.Code() != code || !strings.HasPrefix(st.Message(), provider+": the response stream ") {
		t.Errorf("%v %q; want %v, %q and what became of the response stream", st.Code(), st.Message(), code, provider+": ")
	}
	var info *errdetails.ErrorInfo
	for _, d := range st.Details() {
		if i, ok := d.(*errdetails.ErrorInfo); ok {
			info = i
		}
	}
	if info.GetReason() != reason || info.GetMetadata()["provider"] != provider {
		t.Errorf("ErrorInfo %v; want reason %s naming provider %q", info, reason, provider)
	}
}

// serveBrokenStream answers one request on conn with a 200 streamed
// response that sends begin, then either nothing until the adapter
// closes the connection (silent) or ends there, the connection closed.
func serveBrokenStream(t *testing.T, conn net.Conn, begin string, silent bool) {
	defer conn.Close()
	req, err := http.ReadRequest(bufio.NewReader(conn))
	if err != nil {
		t.Errorf("the fake API could not read the request: %v", err)
		return
	}
	_, _ = io.Copy(io.Discard, req.Body)
	// No length, no chunking: the body is what comes until the connection
	// closes, so closing it cuts the stream wherever it stands.
	if _, err := io.WriteString(conn, "HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\nConnection: close\r\n\r\n"+begin); err != nil {
		t.Errorf("the fake API could not begin its answer: %v", err)
		return
	}
	if silent {
		_, _ = io.Copy(io.Discard, conn)
	}
}

// resetConn reports the end of its peer's stream as a connection reset.
type resetConn struct{ net.Conn }

func (c resetConn) Read(p []byte) (int, error) {
	n, err := c.Conn.Read(p)
	if errors.Is(err, io.EOF) {
		err = &net.OpError{Op: "read", Net: "tcp", Err: os.NewSyscallError("read", syscall.ECONNRESET)}
	}
	return n, err
}
