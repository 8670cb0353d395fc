package mcpconn

import (
	"errors"
	"fmt"
	"math"
	"net"
	"net/http"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/agentd/agentd/internal/fault"
	"github.com/agentd/agentd/internal/mcptest"
	"github.com/agentd/agentd/internal/testwait"
)

// idle is the read_timeout of the tests that need one to pass: several
// times the stream tool's interval between notifications.
const idle = time.Second

// privateTransport returns a transport that may reach the fakes on
// 127.0.0.1, its idle connections closed when the test ends.
func privateTransport(t *testing.T) *http.Transport {
	t.Helper()
	tr := NewTransport(true)
	t.Cleanup(tr.CloseIdleConnections)
	return tr
}

// dialFake connects to a fake HTTP server as "fake"; the connection is
// closed when the test ends (before the server is).
func dialFake(t *testing.T, srv *mcptest.HTTPServer, readTimeout time.Duration) *Conn {
	t.Helper()
	spec := HTTPSpec{Name: "fake", URL: srv.URL, Transport: privateTransport(t)}
	conn, err := DialHTTP(t.Context(), spec, readTimeout, Options{})
	if err != nil {
		t.Fatalf("DialHTTP: %v", err)
	}
	t.Cleanup(func() { _ = conn.Close() })
	return conn
}

// textOf joins a result's text blocks.
func textOf(res *mcp.CallToolResult) string {
	var parts []string
	for _, c := range res.Content {
		if tc, ok := c.(*mcp.TextContent); ok {
			parts = append(parts, tc.Text)
		}
	}
	return strings.Join(parts, "\n")
}

// noSecrets fails the test if err's text, as the client would see it,
// holds any of secrets (R-X4).
func noSecrets(t *testing.T, err error, secrets ...string) {
	t.Helper()
	shown := []string{err.Error(), fault.Status(err).Message()}
	var fe *fault.Error
	if errors.As(err, &fe) {
		for k, v := range fe.Metadata {
			shown = append(shown, k+"="+v)
		}
	}
	for _, s := range secrets {
		for _, text := range shown {
			if strings.Contains(text, s) {
				t.Errorf("R-X4 error text %q contains %q", text, s)
			}
		}
	}
}

// wantInfo checks err's fault kind and ErrorInfo.
func wantInfo(t *testing.T, err error, kind fault.Kind, reason string, metadata map[string]string) {
	t.Helper()
	if err == nil {
		t.Fatalf("err = nil, want %v", kind)
	}
	if k := fault.KindOf(err); k != kind {
		t.Errorf("kind = %v, want %v (%v)", k, kind, err)
	}
	var fe *fault.Error
	if !errors.As(err, &fe) {
		t.Fatalf("err = %v (%T), want a *fault.Error", err, err)
	}
	if fe.Reason != reason {
		t.Errorf("reason = %q, want %q", fe.Reason, reason)
	}
	if diff := cmp.Diff(metadata, fe.Metadata); diff != "" {
		t.Errorf("metadata (-want +got):\n%s", diff)
	}
}

// TestHTTPModes: the same client reaches every kind of HTTP server:
// stateful and stateless Streamable HTTP, JSON answers, and an SSE-only
// server, whose refusal of the first POST sends DialHTTP to the legacy
// transport. A tool's isError result is data, not an error.
func TestHTTPModes(t *testing.T) {
	t.Parallel()
	tests := []struct {
		mode       mcptest.HTTPMode
		kind       transportKind
		wantDelete bool // Close ends a server-side session
	}{
		{mcptest.Streamable, streamableTransport, true},
		{mcptest.StreamableJSON, streamableTransport, true},
		{mcptest.Stateless, streamableTransport, false},
		{mcptest.SSE, sseTransport, false},
	}
	for _, tc := range tests {
		t.Run(tc.mode.String(), func(t *testing.T) {
			t.Parallel()
			srv := mcptest.NewHTTP(t, mcptest.HTTPOptions{Mode: tc.mode})
			conn := dialFake(t, srv, roomyTimeout)
			if conn.kind != tc.kind {
				t.Errorf("transport = %v, want %v", conn.kind, tc.kind)
			}
			if conn.Pid() != 0 || conn.Exited() != nil {
				t.Errorf("Pid() = %d, Exited() = %v for an HTTP server, want 0 and nil", conn.Pid(), conn.Exited())
			}
			tools, err := conn.ListTools(t.Context())
			if err != nil {
				t.Fatalf("ListTools: %v", err)
			}
			var names []string
			for _, tool := range tools {
				names = append(names, tool.Name)
			}
			if want := []string{"authorization", "count", "echo", "elicit", "fail", "meta", "rpc_error", "sample", "silent", "stream"}; !cmp.Equal(want, names) {
				t.Errorf("ListTools = %v, want %v", names, want)
			}

			res, err := conn.CallTool(t.Context(), "echo", map[string]any{"text": "hi"})
			if err != nil {
				t.Fatalf("CallTool(echo): %v", err)
			}
			if res.IsError || textOf(res) != "hi" {
				t.Errorf("echo = %q (isError %v), want hi", textOf(res), res.IsError)
			}

			// R-T4: a tool's own failure is a result, for the model.
			res, err = conn.CallTool(t.Context(), "fail", map[string]any{"text": "boom"})
			if err != nil {
				t.Fatalf("CallTool(fail) = %v, want an isError result", err)
			}
			if !res.IsError || textOf(res) != "boom" {
				t.Errorf("fail = %q (isError %v), want boom, isError", textOf(res), res.IsError)
			}

			// An unknown tool is the server's JSON-RPC error, passed back as
			// is, for the model.
			_, err = conn.CallTool(t.Context(), "nope", nil)
			var rpcErr *jsonrpc.Error
			if !errors.As(err, &rpcErr) || !strings.Contains(rpcErr.Message, "nope") {
				t.Errorf("CallTool(nope) = %v, want the server's JSON-RPC error naming the tool", err)
			}

			if err := conn.Close(); err != nil {
				t.Errorf("Close: %v", err)
			}
			if err := conn.Close(); err != nil {
				t.Errorf("second Close: %v", err)
			}
			if got := srv.Handshakes(); got != 1 {
				t.Errorf("handshakes = %d, want 1", got)
			}
			reqs := srv.Requests()
			if tc.mode == mcptest.SSE {
				// The Streamable HTTP attempt was refused, then the legacy
				// transport opened its stream (recorded when it ended).
				if len(reqs) == 0 || reqs[0].Method != "POST" || reqs[0].Status != 400 {
					t.Errorf("first request = %+v, want a refused POST (400)", reqs[:min(len(reqs), 1)])
				}
				if !slices.ContainsFunc(reqs, func(r mcptest.HTTPRequest) bool { return r.Method == "GET" && r.Status != 400 }) {
					t.Errorf("requests = %+v, want the legacy GET stream", reqs)
				}
			}
			deleted := false
			for _, r := range reqs {
				deleted = deleted || r.Method == "DELETE"
			}
			if deleted != tc.wantDelete {
				t.Errorf("DELETE sent = %v, want %v", deleted, tc.wantDelete)
			}
		})
	}
}

// TestHTTPBearerToken: R-D4 on the wire, against a server that requires
// a bearer token (401 without it). A bare token is sent as "Bearer
// <token>" on every request, the legacy transport's too; without it the
// handshake fails, and the error never shows the token (R-X4).
func TestHTTPBearerToken(t *testing.T) {
	t.Parallel()
	const token = "tok-s3cret"
	tests := []struct {
		name          string
		mode          mcptest.HTTPMode
		authorization string
		ok            bool
	}{
		{"R-D4 bare token, streamable", mcptest.Streamable, token, true},
		{"R-D4 bare token, stateless", mcptest.Stateless, token, true},
		{"R-D4 bare token, sse", mcptest.SSE, token, true},
		{"R-D4 scheme kept", mcptest.Streamable, "Bearer " + token, true},
		{"R-D4 no token", mcptest.Streamable, "", false},
		{"R-D4 wrong token", mcptest.Streamable, "tok-wrong", false},
		{"R-D4 wrong scheme", mcptest.Streamable, "Basic " + token, false},
		{"R-D4 wrong token, sse", mcptest.SSE, "tok-wrong", false},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			srv := mcptest.NewHTTP(t, mcptest.HTTPOptions{Mode: tc.mode, Token: token})
			spec := HTTPSpec{Name: "secured", URL: srv.URL, Authorization: tc.authorization, Transport: privateTransport(t)}
			conn, err := DialHTTP(t.Context(), spec, roomyTimeout, Options{})
			if !tc.ok {
				if err == nil {
					_ = conn.Close()
					t.Fatal("DialHTTP succeeded without the right token")
				}
				// X-M3: a refusal agentd cannot answer is Unauthenticated, not
				// Unavailable.
				wantInfo(t, err, fault.Unauthenticated, "MCP_UNAUTHORIZED", map[string]string{"server": "secured", "request": "the handshake", "status": "401"})
				if !strings.Contains(err.Error(), "requires authorization") {
					t.Errorf("error %q does not say the server requires authorization", err)
				}
				noSecrets(t, err, token, "tok-wrong")
				if n := srv.Handshakes(); n != 0 {
					t.Errorf("the server answered %d handshakes without the token", n)
				}
				return
			}
			if err != nil {
				t.Fatalf("DialHTTP: %v", err)
			}
			res, err := conn.CallTool(t.Context(), "authorization", nil)
			if err != nil {
				t.Fatalf("CallTool: %v", err)
			}
			if got := textOf(res); got != "Bearer "+token && tc.mode != mcptest.SSE {
				t.Errorf("the tool saw Authorization %q, want %q", got, "Bearer "+token)
			}
			if err := conn.Close(); err != nil {
				t.Errorf("Close: %v", err)
			}
			reqs := srv.Requests()
			for _, r := range reqs {
				if r.Authorization != "Bearer "+token || r.Status == 401 {
					t.Errorf("%s request carried Authorization %q (status %d), want %q", r.Method, r.Authorization, r.Status, "Bearer "+token)
				}
			}
			if len(reqs) < 3 {
				t.Errorf("requests = %+v, want at least the handshake and the call", reqs)
			}
		})
	}
}

// TestHTTPRefusalNamed: X-M3. A server that refuses agentd's credentials
// ends the request Unauthenticated (401) or PermissionDenied (403), not
// Unavailable, naming the server and what its Bearer challenge asks for:
// the scope, the error code and the host of its protected-resource
// metadata, but never that URL's path or query (it may carry a token),
// nor the token agentd sent.
func TestHTTPRefusalNamed(t *testing.T) {
	t.Parallel()
	const challenge = `Bearer realm="mcptest", error="insufficient_scope", scope="files:read files:write", ` +
		`resource_metadata="https://auth.example.com/.well-known/oauth-protected-resource/tenant-42/mcp?key=sk-meta"`
	tests := []struct {
		name   string
		status int
		kind   fault.Kind
		reason string
	}{
		{"401", 401, fault.Unauthenticated, "MCP_UNAUTHORIZED"},
		{"403", 403, fault.Permission, "MCP_FORBIDDEN"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			srv := mcptest.NewHTTP(t, mcptest.HTTPOptions{Mode: mcptest.Streamable, Token: "tok-right", Challenge: challenge, RefuseStatus: tc.status})
			spec := HTTPSpec{Name: "files", URL: srv.URL, Authorization: "tok-s3cret", Transport: privateTransport(t)}
			conn, err := DialHTTP(t.Context(), spec, roomyTimeout, Options{})
			if err == nil {
				_ = conn.Close()
				t.Fatal("DialHTTP succeeded with a refused token")
			}
			wantInfo(t, err, tc.kind, tc.reason, map[string]string{
				"server": "files", "request": "the handshake", "status": tc.name,
				"scope": "files:read files:write", "error": "insufficient_scope", "resource_metadata_host": "https://auth.example.com",
			})
			for _, want := range []string{`"files"`, `"files:read files:write"`, "https://auth.example.com", "insufficient_scope"} {
				if !strings.Contains(err.Error(), want) {
					t.Errorf("error %q does not name %s", err, want)
				}
			}
			noSecrets(t, err, "tok-s3cret", "tenant-42", "sk-meta", "oauth-protected-resource")
		})
	}
}

// TestHTTPSessionLost: a server that restarts forgets its sessions, so the
// next request's Mcp-Session-Id gets 404. The request then succeeds on a
// new session, transparently, and runs exactly once: the server counts its
// executions.
func TestHTTPSessionLost(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name           string
		mode           mcptest.HTTPMode
		lose           func(*mcptest.HTTPServer, *Conn)
		wantHandshakes int
		want404        bool // the client learns of the loss from a 404
	}{
		{"streamable restarted", mcptest.Streamable, restart, 2, true},
		{"streamable replaced", mcptest.Streamable, replace, 2, true},
		{"streamable-json restarted", mcptest.StreamableJSON, restart, 2, true},
		{"stateless restarted", mcptest.Stateless, restart, 1, false}, // no session to lose: 2026-07-28, one server/discover
		// The legacy transport learns of the loss when its event stream
		// ends, or from a 404 to its POST.
		{"sse restarted", mcptest.SSE, restartNoticed, 2, false},
		{"sse replaced", mcptest.SSE, replace, 2, true},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			srv := mcptest.NewHTTP(t, mcptest.HTTPOptions{Mode: tc.mode})
			conn := dialFake(t, srv, roomyTimeout)
			count := func(want string) {
				t.Helper()
				res, err := conn.CallTool(t.Context(), "count", nil)
				if err != nil {
					t.Fatalf("CallTool(count): %v", err)
				}
				if got := textOf(res); got != want {
					t.Errorf("count = %s, want %s", got, want)
				}
			}
			count("1")
			tc.lose(srv, conn)
			count("2")
			count("3")
			if n := srv.Executions("count"); n != 3 {
				t.Errorf("count ran %d times for 3 calls", n)
			}
			if n := srv.Handshakes(); n != tc.wantHandshakes {
				t.Errorf("handshakes = %d, want %d", n, tc.wantHandshakes)
			}
			if tc.want404 {
				saw404 := false
				for _, r := range srv.Requests() {
					saw404 = saw404 || r.Status == 404
				}
				if !saw404 {
					t.Error("the restarted server never answered 404: the test did not lose the session")
				}
			}
		})
	}
}

// The ways a session is lost.
var (
	restart = func(srv *mcptest.HTTPServer, _ *Conn) { srv.Restart() }
	replace = func(srv *mcptest.HTTPServer, _ *Conn) { srv.Replace() }
	// restartNoticed restarts the server and waits until the client has
	// seen its session end.
	restartNoticed = func(srv *mcptest.HTTPServer, conn *Conn) {
		srv.Restart()
		_ = conn.current().Wait()
	}
)

// TestHTTPSessionLostConcurrent: callers that lose the session at the same
// time share one new session, and each request runs once.
func TestHTTPSessionLostConcurrent(t *testing.T) {
	t.Parallel()
	srv := mcptest.NewHTTP(t, mcptest.HTTPOptions{Mode: mcptest.Streamable})
	conn := dialFake(t, srv, roomyTimeout)
	if _, err := conn.CallTool(t.Context(), "count", nil); err != nil {
		t.Fatalf("CallTool(count): %v", err)
	}
	srv.Restart()
	const callers = 8
	var wg sync.WaitGroup
	errs := make(chan error, callers)
	for range callers {
		wg.Go(func() {
			if _, err := conn.CallTool(t.Context(), "count", nil); err != nil {
				errs <- err
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Errorf("CallTool(count) after the restart: %v", err)
	}
	if n := srv.Executions("count"); n != 1+callers {
		t.Errorf("count ran %d times for %d calls", n, 1+callers)
	}
	if n := srv.Handshakes(); n != 2 {
		t.Errorf("handshakes = %d, want 2 (one new session for every caller)", n)
	}
}

// TestHTTPReadTimeout: R-L2. For Streamable HTTP, read_timeout bounds each
// wait for data: a tool that keeps sending progress for longer than
// read_timeout succeeds; one that sends nothing for read_timeout fails
// with a Timeout naming the server and the request, never the URL's path
// or the token (R-X4), runs once, and the server is told to stop. (The
// legacy SSE transport bounds the whole exchange instead: it is only in
// the silent table.)
func TestHTTPReadTimeout(t *testing.T) {
	t.Parallel()
	t.Run("R-L2 a stream that keeps sending stays open", func(t *testing.T) {
		t.Parallel()
		// The stream runs StreamTicks*StreamInterval, longer than idle.
		if total := mcptest.StreamTicks * mcptest.StreamInterval; total <= idle {
			t.Fatalf("the stream lasts %s, not longer than the read timeout %s", total, idle)
		}
		for _, mode := range []mcptest.HTTPMode{mcptest.Streamable, mcptest.Stateless, mcptest.SSE} {
			t.Run(mode.String(), func(t *testing.T) {
				t.Parallel()
				srv := mcptest.NewHTTP(t, mcptest.HTTPOptions{Mode: mode})
				conn := dialFake(t, srv, idle)
				res, err := conn.CallTool(t.Context(), "stream", nil)
				if err != nil {
					t.Fatalf("CallTool(stream): %v", err)
				}
				if want := fmt.Sprintf("sent %d notifications", mcptest.StreamTicks); textOf(res) != want {
					t.Errorf("stream = %q, want %q", textOf(res), want)
				}
				// The connection is still good.
				if _, err := conn.CallTool(t.Context(), "echo", map[string]any{"text": "after"}); err != nil {
					t.Errorf("CallTool(echo) after the stream: %v", err)
				}
				if n := srv.Executions("stream"); n != 1 {
					t.Errorf("stream ran %d times", n)
				}
			})
		}
	})
	t.Run("R-L2 silence longer than read_timeout fails", func(t *testing.T) {
		t.Parallel()
		for _, mode := range []mcptest.HTTPMode{mcptest.Streamable, mcptest.StreamableJSON, mcptest.Stateless, mcptest.SSE} {
			t.Run(mode.String(), func(t *testing.T) {
				t.Parallel()
				srv := mcptest.NewHTTP(t, mcptest.HTTPOptions{Mode: mode})
				spec := HTTPSpec{Name: "fake", URL: srv.Base + "/tenant-42/mcp?key=sk-query", Authorization: "tok-secret", Transport: privateTransport(t)}
				conn, err := DialHTTP(t.Context(), spec, idle, Options{})
				if err != nil {
					t.Fatalf("DialHTTP: %v", err)
				}
				t.Cleanup(func() { _ = conn.Close() })
				_, err = conn.CallTool(t.Context(), "silent", nil)
				request := `tools/call for "silent"`
				wantInfo(t, err, fault.Timeout, "MCP_TIMEOUT", map[string]string{"server": "fake", "request": request, "read_timeout": idle.String()})
				for _, s := range []string{`"fake"`, request, "read_timeout"} {
					if !strings.Contains(err.Error(), s) {
						t.Errorf("error %q does not name %s", err, s)
					}
				}
				noSecrets(t, err, "tenant-42", "sk-query", "tok-secret")
				if n := srv.Executions("silent"); n != 1 {
					t.Errorf("silent ran %d times, want 1", n)
				}
				// A server with sessions is told to stop (notifications/
				// cancelled): the tool does not run on unseen, and closing
				// the session need not wait for it. A stateless server has
				// no session to which a cancellation could refer: the
				// client can only drop the request.
				if mode != mcptest.Stateless {
					testwait.For(t, "the server to see the request cancelled", func() bool { return srv.Cancelled("silent") == 1 })
				}
			})
		}
	})
}

// TestHTTPServerError: a server that answers tools/call with HTTP 500 is a
// failure of the generation (Unavailable), not data for the model; the
// tool never ran. Its error names the server and the request, never the
// URL's path or query or the token (R-X4).
func TestHTTPServerError(t *testing.T) {
	t.Parallel()
	for _, mode := range []mcptest.HTTPMode{mcptest.Streamable, mcptest.StreamableJSON, mcptest.Stateless, mcptest.SSE} {
		t.Run(mode.String(), func(t *testing.T) {
			t.Parallel()
			srv := mcptest.NewHTTP(t, mcptest.HTTPOptions{Mode: mode, FailCalls: true})
			spec := HTTPSpec{Name: "fake", URL: srv.Base + "/tenant-42/mcp?key=sk-query", Authorization: "tok-secret", Transport: privateTransport(t)}
			conn, err := DialHTTP(t.Context(), spec, roomyTimeout, Options{})
			if err != nil {
				t.Fatalf("DialHTTP: %v", err)
			}
			t.Cleanup(func() { _ = conn.Close() })
			if _, err := conn.ListTools(t.Context()); err != nil {
				t.Fatalf("ListTools: %v", err)
			}
			res, err := conn.CallTool(t.Context(), "echo", map[string]any{"text": "hi"})
			if res != nil {
				t.Errorf("CallTool = %v, want no result", res)
			}
			var rpcErr *jsonrpc.Error
			if errors.As(err, &rpcErr) {
				t.Fatalf("CallTool = JSON-RPC error %v, want a failure that is not tool data", err)
			}
			wantInfo(t, err, fault.Unavailable, "MCP_UNAVAILABLE", map[string]string{"server": "fake", "request": `tools/call for "echo"`})
			noSecrets(t, err, "tenant-42", "sk-query", "tok-secret")
			if n := srv.Executions("echo"); n != 0 {
				t.Errorf("echo ran %d times behind a 500", n)
			}
		})
	}
}

// TestHTTPPrivateAddressRefused: X-S2. The transport built without
// allow_private_networks refuses loopback addresses, by name or literal,
// before anything reaches the server; the error is Permission naming the
// setting, never the URL's path or query or the token (R-X4).
func TestHTTPPrivateAddressRefused(t *testing.T) {
	t.Parallel()
	srv := mcptest.NewHTTP(t, mcptest.HTTPOptions{Mode: mcptest.Streamable})
	_, port, err := net.SplitHostPort(strings.TrimPrefix(srv.Base, "http://"))
	if err != nil {
		t.Fatal(err)
	}
	tests := []struct{ name, host string }{
		{"X-S2 localhost", "localhost"},
		{"X-S2 127.0.0.1", "127.0.0.1"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			tr := NewTransport(false)
			t.Cleanup(tr.CloseIdleConnections)
			url := "http://" + net.JoinHostPort(tc.host, port) + "/tenant-42/mcp?key=sk-query"
			spec := HTTPSpec{Name: "local", URL: url, Authorization: "tok-secret", Transport: tr}
			conn, err := DialHTTP(t.Context(), spec, roomyTimeout, Options{})
			if err == nil {
				_ = conn.Close()
				t.Fatal("DialHTTP reached a loopback server")
			}
			wantInfo(t, err, fault.Permission, "MCP_ADDRESS_NOT_ALLOWED", map[string]string{"server": "local"})
			if !strings.Contains(err.Error(), "bridge.allow_private_networks") || !strings.Contains(err.Error(), `"local"`) {
				t.Errorf("error %q does not name the server and bridge.allow_private_networks", err)
			}
			noSecrets(t, err, "tenant-42", "sk-query", "tok-secret")
		})
	}
	t.Run("X-I7 the refusal names the tenant's setting it was given", func(t *testing.T) {
		t.Parallel()
		spec := HTTPSpec{Name: "local", URL: "http://127.0.0.1:" + port + "/mcp", NetworksSetting: "tenants.acme.allow_private_networks"}
		_, err := DialHTTP(t.Context(), spec, roomyTimeout, Options{})
		if k := fault.KindOf(err); k != fault.Permission || !strings.Contains(err.Error(), "tenants.acme.allow_private_networks") {
			t.Errorf("DialHTTP = %v, want Permission naming tenants.acme.allow_private_networks", err)
		}
	})
	t.Run("nil transport is the refusing one", func(t *testing.T) {
		t.Parallel()
		_, err := DialHTTP(t.Context(), HTTPSpec{Name: "local", URL: "http://127.0.0.1:" + port + "/mcp"}, roomyTimeout, Options{})
		if k := fault.KindOf(err); k != fault.Permission {
			t.Errorf("DialHTTP without a transport = %v, want Permission", err)
		}
	})
	t.Cleanup(func() {
		if reqs := srv.Requests(); len(reqs) != 0 {
			t.Errorf("X-S2 the server received %d requests, want none", len(reqs))
		}
	})
}

// TestMaxRetriesFor: R-D7. max_reconnection_wait bounds the go-sdk's
// reconnection back-off, 1 s growing 1.5× an attempt: for every limit of
// 1 s or more the last attempt's back-off never exceeds the limit, and the
// attempts stop no earlier than they must. (The go-sdk adds up to as much
// again as jitter, which this bound does not cover.)
func TestMaxRetriesFor(t *testing.T) {
	t.Parallel()
	// longestWait is the go-sdk's longest wait before attempt n (1-based):
	// the back-off 1 s × 1.5^(n-1) plus full jitter of up to as much again.
	longestWait := func(n int) time.Duration {
		return 2 * time.Duration(float64(time.Second)*math.Pow(1.5, float64(n-1)))
	}
	tests := []struct {
		limit time.Duration
		want  int
	}{
		{0, 7}, // unset: 30 s
		{-time.Second, 7},
		// Under 2 s no attempt fits: the stream is not reopened.
		{500 * time.Millisecond, -1},
		{1999 * time.Millisecond, -1},
		{2 * time.Second, 1},
		{2999 * time.Millisecond, 1},
		{3 * time.Second, 2},
		{5 * time.Second, 3},
		{10 * time.Second, 4},
		{30 * time.Second, 7},
		{time.Minute, 9},
		{10 * time.Minute, 15},
	}
	for _, tc := range tests {
		t.Run(fmt.Sprintf("R-D7 %s", tc.limit), func(t *testing.T) {
			t.Parallel()
			if got := maxRetriesFor(tc.limit); got != tc.want {
				t.Errorf("maxRetriesFor(%s) = %d, want %d", tc.limit, got, tc.want)
			}
		})
	}
	t.Run("R-D7 never beyond the limit, never short of it", func(t *testing.T) {
		t.Parallel()
		for ms := int64(2000); ms <= 600_000; ms += 7 {
			for _, limit := range []time.Duration{time.Duration(ms) * time.Millisecond, time.Duration(ms)*time.Millisecond - 1} {
				if limit < 2*time.Second {
					continue
				}
				n := maxRetriesFor(limit)
				if n < 1 {
					t.Fatalf("maxRetriesFor(%s) = %d, want at least 1", limit, n)
				}
				if w := longestWait(n); w > limit {
					t.Fatalf("maxRetriesFor(%s) = %d: the last wait may reach %s", limit, n, w)
				}
				if w := longestWait(n + 1); w <= limit {
					t.Fatalf("maxRetriesFor(%s) = %d: one more attempt (waiting up to %s) would fit", limit, n, w)
				}
			}
		}
	})
}

// TestHTTPErrorsRedacted: R-X4 across the failures of a dial: a refused
// connection, a 401, a server that is not MCP. No error shows the URL's
// path or query, the token or a header value.
func TestHTTPErrorsRedacted(t *testing.T) {
	t.Parallel()
	secured := mcptest.NewHTTP(t, mcptest.HTTPOptions{Mode: mcptest.Streamable, Token: "tok-right"})
	closed := func() string {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		addr := l.Addr().String()
		_ = l.Close()
		return "http://" + addr
	}()
	tests := []struct {
		name string
		base string
		kind fault.Kind
	}{
		{"R-X4 connection refused", closed, fault.Unavailable},
		{"R-X4 401", secured.Base, fault.Unauthenticated}, // X-M3
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			spec := HTTPSpec{
				Name: "remote", URL: tc.base + "/v1/tenant-42/mcp?api_key=sk-query&x=1",
				Authorization: "tok-wrong", Headers: map[string]string{"X-Api-Key": "hdr-secret"},
				Transport: privateTransport(t),
			}
			_, err := DialHTTP(t.Context(), spec, roomyTimeout, Options{})
			if err == nil {
				t.Fatal("DialHTTP succeeded")
			}
			if k := fault.KindOf(err); k != tc.kind {
				t.Errorf("kind = %v, want %v (%v)", k, tc.kind, err)
			}
			if !strings.Contains(err.Error(), `"remote"`) {
				t.Errorf("error %q does not name the server", err)
			}
			noSecrets(t, err, "tenant-42", "/v1/", "api_key", "sk-query", "tok-wrong", "hdr-secret")
		})
	}
}
