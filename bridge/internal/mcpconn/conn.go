// Package mcpconn connects agentd's bridge to one MCP server, over stdio or
// HTTP, with the official MCP go-sdk client. It is the only package of
// agentd that starts child processes.
//
// Every exchange is bounded by the server's read timeout, with the
// semantics of its transport: for stdio the whole exchange (handshake,
// tools/list, each tools/call), which the server's notifications do not
// extend, and a server that misses it is killed; for HTTP each wait for
// data, so a response that keeps streaming stays open. Errors are
// classified with internal/fault and name the server and the request, never
// a URL path, a header or an environment value.
package mcpconn

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"time"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/agentd/agentd/internal/fault"
)

// ProtocolVersion is the MCP version agentd offers. Pinning it skips the
// go-sdk's server/discover probe, which costs a round trip against most
// servers and breaks servers that exit on an unknown first request.
const ProtocolVersion = "2025-11-25"

// Options are a connection's callbacks and logger.
type Options struct {
	// Logger receives stderr lines, dropped stdout lines and diagnostics.
	Logger *slog.Logger
	// OnToolsChanged is called when the server sends
	// notifications/tools/list_changed. It must not block.
	OnToolsChanged func()
}

// Conn is one initialized MCP client session. Its methods are safe for
// concurrent use; Close is idempotent.
type Conn struct {
	name        string
	readTimeout time.Duration
	session     *mcp.ClientSession
	proc        *process // nil for HTTP
	log         *slog.Logger

	closeOnce sync.Once
	closeErr  error
}

func newClient(opts Options) *mcp.Client {
	copts := &mcp.ClientOptions{
		Logger: opts.Logger,
		// No roots: a pending roots/list keeps Node servers alive for
		// seconds after their stdin closes.
		Capabilities: &mcp.ClientCapabilities{},
	}
	if opts.OnToolsChanged != nil {
		copts.ToolListChangedHandler = func(context.Context, *mcp.ToolListChangedRequest) { opts.OnToolsChanged() }
	}
	return mcp.NewClient(&mcp.Implementation{Name: "agentd", Version: "1"}, copts)
}

// DialStdio starts spec's process and performs the handshake within
// readTimeout. On any failure the process is stopped before returning.
func DialStdio(ctx context.Context, spec StdioSpec, readTimeout time.Duration, opts Options) (*Conn, error) {
	if opts.Logger == nil {
		opts.Logger = slog.New(slog.DiscardHandler)
	}
	spec.Logger = opts.Logger
	proc, err := startProcess(spec)
	if err != nil {
		return nil, fault.Wrap(fault.Unavailable, err, "")
	}
	c := &Conn{name: spec.Name, readTimeout: readTimeout, proc: proc, log: proc.log}
	stdout := newJSONLines(proc.stdout, func(line []byte) {
		c.log.Warn("mcp server wrote a line that is not JSON-RPC to stdout; dropped", "line", string(line[:min(len(line), maxLogLine)]))
	})
	transport := &mcp.IOTransport{Reader: nopCloser{stdout}, Writer: proc.stdin}
	hctx, cancel := context.WithTimeout(ctx, readTimeout)
	defer cancel()
	session, err := newClient(opts).Connect(hctx, transport, &mcp.ClientSessionOptions{ProtocolVersion: ProtocolVersion})
	if err != nil {
		proc.kill()
		_ = proc.close()
		return nil, c.classify(hctx, ctx, "the handshake", err)
	}
	c.session = session
	return c, nil
}

// HTTPSpec says how to reach an HTTP server.
type HTTPSpec struct {
	// Name is the server's display name.
	Name string
	// URL is the endpoint. Secret beyond its host.
	URL string
	// Authorization is the header value: a bare token gets "Bearer ".
	Authorization string
	// Headers are extra request headers. Secret.
	Headers map[string]string
}

// AuthorizationHeader renders an authorization value: a bare token becomes
// "Bearer <token>"; a value that already names a scheme ("Basic ...",
// "Bearer ...") is kept as is.
func AuthorizationHeader(v string) string {
	if v == "" {
		return ""
	}
	if scheme, rest, ok := strings.Cut(v, " "); ok && rest != "" && isToken(scheme) {
		return v
	}
	return "Bearer " + v
}

// isToken reports whether s is an HTTP auth-scheme token.
func isToken(s string) bool {
	for _, r := range s {
		if !(r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || strings.ContainsRune("!#$%&'*+-.^_`|~", r)) {
			return false
		}
	}
	return s != ""
}

// DialHTTP connects to a Streamable HTTP server and performs the handshake;
// every wait for data is bounded by readTimeout.
func DialHTTP(ctx context.Context, spec HTTPSpec, readTimeout time.Duration, opts Options) (*Conn, error) {
	if opts.Logger == nil {
		opts.Logger = slog.New(slog.DiscardHandler)
	}
	header := make(http.Header)
	for k, v := range spec.Headers {
		header.Set(k, v)
	}
	if a := AuthorizationHeader(spec.Authorization); a != "" {
		header.Set("Authorization", a)
	}
	hc := &http.Client{Transport: &roundTripper{base: http.DefaultTransport, header: header, idle: readTimeout}}
	transport := &mcp.StreamableClientTransport{Endpoint: spec.URL, HTTPClient: hc}
	c := &Conn{name: spec.Name, readTimeout: readTimeout, log: opts.Logger.With("server", spec.Name)}
	session, err := newClient(opts).Connect(ctx, transport, &mcp.ClientSessionOptions{ProtocolVersion: ProtocolVersion})
	if err != nil {
		return nil, c.classify(ctx, ctx, "the handshake", redactURL(err, spec.URL))
	}
	c.session = session
	return c, nil
}

// Name is the server's display name.
func (c *Conn) Name() string { return c.name }

// Pid is the stdio server's process id; 0 for HTTP.
func (c *Conn) Pid() int {
	if c.proc == nil {
		return 0
	}
	return c.proc.pid()
}

// exchangeContext bounds one exchange: for stdio the whole exchange.
func (c *Conn) exchangeContext(ctx context.Context) (context.Context, context.CancelFunc) {
	if c.proc != nil {
		return context.WithTimeout(ctx, c.readTimeout)
	}
	return context.WithCancel(ctx)
}

// ListTools lists every tool of the server, following pagination.
func (c *Conn) ListTools(ctx context.Context) ([]*mcp.Tool, error) {
	ectx, cancel := c.exchangeContext(ctx)
	defer cancel()
	var tools []*mcp.Tool
	for tool, err := range c.session.Tools(ectx, nil) {
		if err != nil {
			return nil, c.classify(ectx, ctx, "tools/list", err)
		}
		tools = append(tools, tool)
	}
	return tools, nil
}

// CallTool calls a tool. A tool's own failure is not an error: it comes
// back as a result with IsError, or as a *jsonrpc.Error that the caller
// turns into data for the model. Other errors are classified.
func (c *Conn) CallTool(ctx context.Context, name string, args map[string]any) (*mcp.CallToolResult, error) {
	if args == nil {
		args = map[string]any{} // never "arguments": null
	}
	ectx, cancel := c.exchangeContext(ctx)
	defer cancel()
	res, err := c.session.CallTool(ectx, &mcp.CallToolParams{Name: name, Arguments: args})
	if err != nil {
		var rpcErr *jsonrpc.Error
		if errors.As(err, &rpcErr) {
			return nil, rpcErr
		}
		return nil, c.classify(ectx, ctx, fmt.Sprintf("tools/call for %q", name), err)
	}
	return res, nil
}

// classify turns an exchange's error into a fault. A stdio exchange that
// ran out of its own time (not the caller's) kills the server.
func (c *Conn) classify(exchangeCtx, callerCtx context.Context, request string, err error) error {
	if callerCtx.Err() != nil {
		return callerCtx.Err()
	}
	if errors.Is(exchangeCtx.Err(), context.DeadlineExceeded) {
		if c.proc != nil {
			c.proc.kill()
		}
		return fault.New(fault.Timeout,
			"the MCP server %q did not answer %s within %s, so it was stopped; increase read_timeout on its mcps entry if it needs longer",
			c.name, request, c.readTimeout).
			WithInfo("MCP_TIMEOUT", map[string]string{"server": c.name, "request": request, "read_timeout": c.readTimeout.String()})
	}
	if errors.Is(err, mcp.ErrConnectionClosed) || errors.Is(err, mcp.ErrSessionMissing) {
		return fault.Wrap(fault.Unavailable, err, "the MCP server %q closed the connection during %s", c.name, request).
			WithInfo("MCP_CONNECTION_CLOSED", map[string]string{"server": c.name, "request": request})
	}
	return fault.Wrap(fault.Unavailable, err, "the MCP server %q failed during %s", c.name, request).
		WithInfo("MCP_UNAVAILABLE", map[string]string{"server": c.name, "request": request})
}

// Close ends the session and, for stdio, stops the process and its group.
// Idempotent and safe for concurrent use.
func (c *Conn) Close() error {
	c.closeOnce.Do(func() {
		err := c.session.Close()
		if c.proc != nil {
			// Closing the session closed stdin; the escalation follows.
			err = c.proc.close()
		}
		c.closeErr = err
	})
	return c.closeErr
}

type nopCloser struct{ *jsonLines }

func (nopCloser) Close() error { return nil }

// redactURL replaces the URL, and its path and query, in err's text by
// the host alone: URL paths and queries often carry keys.
func redactURL(err error, raw string) error {
	u, perr := url.Parse(raw)
	if perr != nil || err == nil {
		return errors.New("connection failed")
	}
	safe := u.Scheme + "://" + u.Host + "/…"
	// One pass, longest form first where several match: replacing form by
	// form would rewrite the safe text itself when the host contains the
	// path ("https://mcp.example.com/mcp").
	var pairs []string
	for _, s := range []string{raw, u.String(), u.RequestURI(), u.RawQuery, u.Path} {
		if s != "" && s != "/" {
			pairs = append(pairs, s, safe)
		}
	}
	return errors.New(strings.NewReplacer(pairs...).Replace(err.Error()))
}

// roundTripper adds the server's headers and bounds each wait for data.
type roundTripper struct {
	base   http.RoundTripper
	header http.Header
	idle   time.Duration
}

func (t *roundTripper) RoundTrip(req *http.Request) (*http.Response, error) {
	ctx, cancel := context.WithCancel(req.Context())
	req = req.Clone(ctx)
	for k, vs := range t.header {
		req.Header[k] = vs
	}
	// The standalone GET stream waits for server-initiated messages and may
	// rightly stay silent; only answers to requests are bounded.
	if req.Method != http.MethodPost {
		resp, err := t.base.RoundTrip(req)
		if err != nil {
			cancel()
			return nil, err
		}
		resp.Body = &cancelBody{ReadCloser: resp.Body, cancel: cancel}
		return resp, nil
	}
	timer := time.AfterFunc(t.idle, cancel)
	resp, err := t.base.RoundTrip(req)
	if err != nil {
		timer.Stop()
		cancel()
		return nil, err
	}
	timer.Stop()
	resp.Body = &idleBody{cancelBody: cancelBody{ReadCloser: resp.Body, cancel: cancel}, idle: t.idle}
	return resp, nil
}

type cancelBody struct {
	io.ReadCloser
	cancel context.CancelFunc
}

func (b *cancelBody) Close() error {
	err := b.ReadCloser.Close()
	b.cancel()
	return err
}

// idleBody fails a read that waits longer than idle for data.
type idleBody struct {
	cancelBody
	idle time.Duration
}

func (b *idleBody) Read(p []byte) (int, error) {
	timer := time.AfterFunc(b.idle, b.cancel)
	n, err := b.ReadCloser.Read(p)
	if !timer.Stop() && err != nil {
		return n, fmt.Errorf("no data within read_timeout %s: %w", b.idle, err)
	}
	return n, err
}
