package mcptest

import (
	"bytes"
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// HTTPMode is how a fake HTTP server speaks MCP.
type HTTPMode int

const (
	// Streamable is stateful Streamable HTTP: a session per client
	// (Mcp-Session-Id), answers as event streams, a standalone GET stream.
	Streamable HTTPMode = iota
	// StreamableJSON is Streamable but answers with application/json
	// bodies instead of event streams.
	StreamableJSON
	// Stateless is Streamable HTTP without sessions.
	Stateless
	// SSE is the legacy HTTP+SSE transport only (2024-11-05): GET opens the
	// event stream, POSTs go to the endpoint it names. A POST to the URL
	// itself, as a Streamable HTTP client starts, gets 400.
	SSE
)

func (m HTTPMode) String() string {
	switch m {
	case Streamable:
		return "streamable"
	case StreamableJSON:
		return "streamable-json"
	case Stateless:
		return "stateless"
	case SSE:
		return "sse"
	}
	return fmt.Sprintf("HTTPMode(%d)", int(m))
}

// HTTPOptions configure a fake HTTP server.
type HTTPOptions struct {
	Mode HTTPMode
	// Token, when set, must come as "Authorization: Bearer <Token>"; any
	// request without it gets 401.
	Token string
	// Challenge, when set, is the WWW-Authenticate of a request refused
	// for its token (default: Bearer realm="mcptest"); RefuseStatus its
	// status (default 401).
	Challenge    string
	RefuseStatus int
	// FailCalls answers every tools/call with HTTP 500 and a plain-text
	// body; the tool never runs.
	FailCalls bool
	// TTL, when set, is the ttlMs of the server's 2026-07-28 list results
	// (unset: 0, "immediately stale", the go-sdk's default).
	TTL *time.Duration
	// Wrap, when set, wraps the server's handler: tests inject faults
	// (connection resets, slow bytes) in front of it.
	Wrap func(http.Handler) http.Handler
}

// The stream tool's defaults: a progress notification every
// StreamInterval, StreamTicks times, then the result.
const (
	StreamInterval = 200 * time.Millisecond
	StreamTicks    = 8
)

// StreamInput is the stream tool's arguments.
type StreamInput struct {
	Ticks      int `json:"ticks,omitempty"`
	IntervalMS int `json:"interval_ms,omitempty"`
}

// HTTPRequest is one request a fake HTTP server received.
type HTTPRequest struct {
	Method        string
	Path          string // without the query
	RPCMethod     string // the JSON-RPC method of a POSTed request, if any
	Authorization string
	SessionID     string // the Mcp-Session-Id header
	Traceparent   string // the traceparent header agentd propagates
	// MetaTraceparent is the params._meta.traceparent of a POSTed request.
	MetaTraceparent string
	Status          int // 0 while the response runs
}

// HTTPServer is a fake MCP server over HTTP, on 127.0.0.1, made with the
// go-sdk's own handlers. Its tools:
//
//   - echo {text}: the text;
//   - fail {text}: an isError result with the text;
//   - count: how many times count has run on this server, restarts
//     included (so a repeated execution shows);
//   - stream {ticks, interval_ms}: sends a progress notification every
//     interval (StreamInterval) ticks times (StreamTicks), then returns
//     "sent N notifications";
//   - silent: sends nothing and never answers, until the request is
//     cancelled (counted, see Cancelled) or the server closes;
//   - rpc_error {text}: a JSON-RPC error whose message is the text;
//   - authorization: the Authorization header the tool call came with;
//   - elicit {mode}: as the stdio fakes' (newServer).
//   - sample {prompt, max_tokens, system, tools, image}: as the stdio
//     fakes' (newServer).
//
// Close (run at the end of the test) closes every session and the server.
type HTTPServer struct {
	// URL is the MCP endpoint: the server's address and /mcp. The server
	// answers MCP at any path, so tests may add a path or a query of their
	// own to Base.
	URL string
	// Base is the server's address, http://127.0.0.1:<port>.
	Base string

	opts HTTPOptions
	ts   *httptest.Server
	stop chan struct{} // closed by Close: releases silent tools

	mu         sync.Mutex
	handler    http.Handler
	servers    []*mcp.Server // every generation, for Close
	executions map[string]int
	cancelled  map[string]int
	handshakes int
	discovers  int
	requests   []HTTPRequest

	closeOnce sync.Once
}

// NewHTTP starts a fake HTTP server; it is closed when the test ends.
func NewHTTP(tb testing.TB, opts HTTPOptions) *HTTPServer {
	tb.Helper()
	s := &HTTPServer{opts: opts, stop: make(chan struct{}), executions: make(map[string]int), cancelled: make(map[string]int)}
	s.handler = s.newHandler()
	var h http.Handler = http.HandlerFunc(s.serveHTTP)
	if opts.Wrap != nil {
		h = opts.Wrap(h)
	}
	s.ts = httptest.NewServer(h)
	s.Base = s.ts.URL
	s.URL = s.ts.URL + "/mcp"
	tb.Cleanup(s.Close)
	return s
}

// Restart replaces the server by a fresh one at the same address, as a
// restarted process would be: every session of the old one is closed (its
// event streams end), and a client's old session id gets 404.
func (s *HTTPServer) Restart() {
	closeSessions(s.Replace())
}

// Replace routes every new request to a fresh server, like Restart, but
// leaves the old server's sessions and event streams open, as when a
// balancer sends a client's requests to another replica: the client sees
// no closed stream, only 404 for its session id. It returns the old
// server.
func (s *HTTPServer) Replace() *mcp.Server {
	s.mu.Lock()
	defer s.mu.Unlock()
	old := s.servers[len(s.servers)-1]
	s.handler = s.newHandler()
	return old
}

// Executions reports how many times tool ran, over every restart.
func (s *HTTPServer) Executions(tool string) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.executions[tool]
}

// Cancelled reports how many times tool (silent) was told to stop: the
// client cancelled the request, or its session was closed.
func (s *HTTPServer) Cancelled(tool string) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.cancelled[tool]
}

// Handshakes reports how many initialize requests the server answered,
// and server/discover requests it answered (a 2026-07-28 handshake).
func (s *HTTPServer) Handshakes() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.handshakes
}

// Discovers reports how many server/discover requests (the 2026-07-28
// probe) the server received, answered or refused.
func (s *HTTPServer) Discovers() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.discovers
}

// Requests returns every request received so far.
func (s *HTTPServer) Requests() []HTTPRequest {
	s.mu.Lock()
	defer s.mu.Unlock()
	return slices.Clone(s.requests)
}

// Close closes every session and stops the server. Idempotent.
func (s *HTTPServer) Close() {
	s.closeOnce.Do(func() {
		close(s.stop)
		s.mu.Lock()
		servers := slices.Clone(s.servers)
		s.mu.Unlock()
		for _, srv := range servers {
			closeSessions(srv)
		}
		s.ts.CloseClientConnections()
		s.ts.Close()
	})
}

func closeSessions(srv *mcp.Server) {
	for ss := range srv.Sessions() {
		_ = ss.Close()
	}
}

// newHandler makes a new generation of the server. s.mu is held or s is
// not shared yet.
func (s *HTTPServer) newHandler() http.Handler {
	srv := s.newServer()
	s.servers = append(s.servers, srv)
	get := func(*http.Request) *mcp.Server { return srv }
	switch s.opts.Mode {
	case SSE:
		return mcp.NewSSEHandler(get, nil)
	case Stateless:
		return mcp.NewStreamableHTTPHandler(get, &mcp.StreamableHTTPOptions{Stateless: true})
	case StreamableJSON:
		return mcp.NewStreamableHTTPHandler(get, &mcp.StreamableHTTPOptions{JSONResponse: true})
	default:
		return mcp.NewStreamableHTTPHandler(get, nil)
	}
}

func (s *HTTPServer) serveHTTP(w http.ResponseWriter, r *http.Request) {
	rec := HTTPRequest{Method: r.Method, Path: r.URL.Path, Authorization: r.Header.Get("Authorization"), SessionID: r.Header.Get("Mcp-Session-Id"),
		Traceparent: r.Header.Get("Traceparent")}
	if r.Method == http.MethodPost && r.Body != nil {
		body, err := io.ReadAll(r.Body)
		if err != nil {
			http.Error(w, "cannot read the body", http.StatusBadRequest)
			return
		}
		r.Body = io.NopCloser(bytes.NewReader(body))
		var msg struct {
			Method string `json:"method"`
			Params struct {
				Meta struct {
					Traceparent string `json:"traceparent"`
				} `json:"_meta"`
			} `json:"params"`
		}
		_ = json.Unmarshal(body, &msg)
		rec.RPCMethod, rec.MetaTraceparent = msg.Method, msg.Params.Meta.Traceparent
	}
	// Recorded on arrival, in order; the status when the response ends.
	s.mu.Lock()
	i := len(s.requests)
	s.requests = append(s.requests, rec)
	s.mu.Unlock()
	sw := &statusWriter{ResponseWriter: w, status: http.StatusOK}
	defer func() {
		s.mu.Lock()
		s.requests[i].Status = sw.status
		s.mu.Unlock()
	}()
	switch {
	case s.opts.Token != "" && rec.Authorization != "Bearer "+s.opts.Token:
		sw.Header().Set("WWW-Authenticate", cmp.Or(s.opts.Challenge, `Bearer realm="mcptest"`))
		http.Error(sw, "missing or wrong bearer token", cmp.Or(s.opts.RefuseStatus, http.StatusUnauthorized))
		return
	case s.opts.FailCalls && rec.RPCMethod == "tools/call":
		http.Error(sw, "internal server error", http.StatusInternalServerError)
		return
	}
	s.mu.Lock()
	h := s.handler
	s.mu.Unlock()
	h.ServeHTTP(sw, r)
}

// statusWriter records the status of a response; Unwrap lets
// http.ResponseController reach the flusher.
type statusWriter struct {
	http.ResponseWriter
	status      int
	wroteHeader bool
}

func (w *statusWriter) WriteHeader(code int) {
	if !w.wroteHeader {
		w.status, w.wroteHeader = code, true
	}
	w.ResponseWriter.WriteHeader(code)
}

func (w *statusWriter) Write(p []byte) (int, error) {
	w.wroteHeader = true
	return w.ResponseWriter.Write(p)
}

func (w *statusWriter) Unwrap() http.ResponseWriter { return w.ResponseWriter }

func (s *HTTPServer) newServer() *mcp.Server {
	var opts *mcp.ServerOptions
	if s.opts.TTL != nil {
		opts = &mcp.ServerOptions{SetCacheable: cacheable(*s.opts.TTL)}
	}
	srv := mcp.NewServer(&mcp.Implementation{Name: "mcptest-http", Version: "1"}, opts)
	mcp.AddTool(srv, &mcp.Tool{Name: "echo", Description: "Returns the text."},
		func(_ context.Context, _ *mcp.CallToolRequest, in TextInput) (*mcp.CallToolResult, any, error) {
			return text(in.Text), nil, nil
		})
	mcp.AddTool(srv, &mcp.Tool{Name: "fail", Description: "Fails with the text."},
		func(_ context.Context, _ *mcp.CallToolRequest, in TextInput) (*mcp.CallToolResult, any, error) {
			return nil, nil, errors.New(in.Text)
		})
	srv.AddTool(&mcp.Tool{Name: "count", Description: "Counts its executions.", InputSchema: objectSchema},
		func(context.Context, *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
			return text(fmt.Sprint(s.Executions("count"))), nil
		})
	mcp.AddTool(srv, &mcp.Tool{Name: "stream", Description: "Sends progress, then answers."}, s.stream)
	srv.AddTool(&mcp.Tool{Name: "silent", Description: "Never answers.", InputSchema: objectSchema}, s.silent)
	srv.AddTool(&mcp.Tool{Name: "meta", Description: "The call's _meta, as JSON.", InputSchema: objectSchema}, metaTool)
	srv.AddTool(&mcp.Tool{Name: "rpc_error", Description: "Answers with a JSON-RPC error.", InputSchema: objectSchema}, rpcErrorTool)
	srv.AddTool(&mcp.Tool{Name: "authorization", Description: "The Authorization header of the call.", InputSchema: objectSchema},
		func(_ context.Context, req *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
			if req.Extra == nil || req.Extra.Header == nil {
				return text(""), nil
			}
			return text(req.Extra.Header.Get("Authorization")), nil
		})
	addElicit(srv, s.stop)
	addSample(srv, s.stop)
	srv.AddReceivingMiddleware(s.countRequests)
	return srv
}

// stream is the stream tool: it sends a progress notification every
// interval (StreamInterval, or the input's), ticks times (StreamTicks, or
// the input's), then answers.
func (s *HTTPServer) stream(ctx context.Context, req *mcp.CallToolRequest, in StreamInput) (*mcp.CallToolResult, any, error) {
	ticks, interval := StreamTicks, StreamInterval
	if in.Ticks > 0 {
		ticks = in.Ticks
	}
	if in.IntervalMS > 0 {
		interval = time.Duration(in.IntervalMS) * time.Millisecond
	}
	for i := range ticks {
		select {
		case <-ctx.Done():
			return nil, nil, ctx.Err()
		case <-s.stop:
			return nil, nil, errors.New("server closed")
		case <-time.After(interval):
		}
		if err := req.Session.NotifyProgress(ctx, &mcp.ProgressNotificationParams{
			ProgressToken: "stream", Progress: float64(i + 1), Total: float64(ticks), Message: "still working",
		}); err != nil {
			return nil, nil, err
		}
	}
	return text(fmt.Sprintf("sent %d notifications", ticks)), nil, nil
}

// silent is the silent tool: it answers only when its call is cancelled
// (which it counts) or the server closes.
func (s *HTTPServer) silent(ctx context.Context, _ *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
	select {
	case <-ctx.Done():
		s.mu.Lock()
		s.cancelled["silent"]++
		s.mu.Unlock()
		return nil, ctx.Err()
	case <-s.stop:
		return nil, errors.New("server closed")
	}
}

// countRequests is the server's middleware that counts handshakes
// (initialize, and a stateless server's discover), discovers and tool
// executions.
func (s *HTTPServer) countRequests(next mcp.MethodHandler) mcp.MethodHandler {
	return func(ctx context.Context, method string, req mcp.Request) (mcp.Result, error) {
		s.mu.Lock()
		switch method {
		case "initialize":
			s.handshakes++
		case "server/discover":
			s.discovers++
			s.mu.Unlock()
			res, err := next(ctx, method, req)
			s.mu.Lock()
			if err == nil && s.opts.Mode == Stateless {
				s.handshakes++ // the 2026-07-28 handshake
			}
			s.mu.Unlock()
			return res, err
		case "tools/call":
			if call, ok := req.(*mcp.CallToolRequest); ok {
				s.executions[call.Params.Name]++
			}
		}
		s.mu.Unlock()
		return next(ctx, method, req)
	}
}
