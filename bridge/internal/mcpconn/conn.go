// Package mcpconn connects agentd's bridge to one MCP server, over stdio or
// HTTP, with the official MCP go-sdk client. It is the only package of
// agentd that starts child processes.
//
// Every exchange is bounded by the server's read timeout, with the
// semantics of its transport: for stdio the whole exchange (handshake,
// tools/list, each tools/call), which the server's notifications do not
// extend, and a server that misses it is killed; for Streamable HTTP each
// wait for data, so a response that keeps streaming stays open; for the
// legacy HTTP+SSE transport, whose answers arrive on a long-lived stream,
// the whole exchange. No read timeout runs while a server's elicitation
// made during the exchange waits for a person's answer: the
// exchange's timers start afresh once it is answered. Errors are
// classified with internal/fault and name the server and the request,
// never a URL path, a header or an environment value.
package mcpconn

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"go.opentelemetry.io/otel/propagation"
	"io"
	"log/slog"
	"os"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/agentd/agentd/internal/config"
	"github.com/agentd/agentd/internal/fault"
	"github.com/agentd/agentd/internal/redact"
)

// Options are a connection's logger and trace propagation.
type Options struct {
	// Logger receives stderr lines, dropped stdout lines and diagnostics.
	Logger *slog.Logger
	// Propagator carries the trace context of each request to the server:
	// in the request's params._meta (traceparent, tracestate) on every
	// transport, and as HTTP headers on HTTP. Nil carries none.
	Propagator propagation.TextMapPropagator
	// Telemetry makes the spans and the duration histogram of the
	// requests; nil makes none.
	Telemetry *Telemetry
	// Tenant is the tenant the connection serves, on the durations of its
	// handshake ("" for a pool's process that serves every tenant): a
	// view's own Owner says it for the view's requests.
	Tenant string
	// ServerName is the server's name on the durations of a stdio
	// connection's handshake, when it is not the spec's Name (a pool's
	// name for a command holds the command's base name, which is not a
	// label).
	ServerName string
	// Versions remembers the protocol version the server negotiated: a
	// server known to be classic is offered 2025-11-25 at once, with no
	// server/discover probe. Nil: every connection probes.
	Versions VersionMemory
}

// transportKind says how a connection reaches its server.
type transportKind int

const (
	stdioTransport transportKind = iota
	streamableTransport
	sseTransport
)

// Conn is one initialized MCP client session. Its methods are safe for
// concurrent use; Close is idempotent. The views View makes of it share its
// session (and, for stdio, its process): closing any of them closes it.
type Conn struct {
	*core
	name        string // the server's display name, in errors and the server label
	readTimeout time.Duration
	owner       Owner // the session the view serves: its tenant labels the durations
}

// core is what the views of a connection share.
type core struct {
	kind   transportKind
	log    *slog.Logger
	prop   propagation.TextMapPropagator // nil: no trace context sent
	proc   *process                      // stdio only
	stdout *jsonLines                    // stdio only: the server's filtered stdout
	tel    *Telemetry                    // nil: no spans, no durations
	labels labels                        // the handshake's: the dialled name and tenant
	// address and port are an HTTP server's server.address and
	// server.port (its URL's host alone); "" and 0 for stdio.
	address string
	port    int

	mu      sync.Mutex
	session *mcp.ClientSession
	// redial opens a new session to an HTTP server whose session was lost;
	// nil for stdio.
	redial func(context.Context) (*mcp.ClientSession, error)

	// refused is the challenge of the last request an HTTP server refused
	// with 401 or 403, taken by the classification of its failure.
	refused atomic.Pointer[authChallenge]

	// redactor hides an HTTP server's URL path and query and its
	// credentials in the texts of its errors; nil (hiding nothing) for
	// stdio.
	redactor *redact.Redactor
	// networksSetting names the setting that lets an HTTP server reach a
	// private address, for the refusal of one.
	networksSetting string
	// inflight holds the running exchanges of a legacy SSE connection,
	// whose idle timers data on its event stream resets.
	inflightMu sync.Mutex
	inflight   map[*exchange]struct{}
	// toolsChanged is called on notifications/tools/list_changed.
	toolsChanged atomic.Pointer[func()]
	// progress routes notifications/progress to their calls.
	progress progressTokens
	// calls are the running tools/calls: a stdio connection's close
	// cancels them before it stops the process; a server's elicitation
	// goes to their session.
	callsMu sync.Mutex
	calls   map[*inflightCall]struct{}
	// lines rates the server's log messages, with its stderr lines for
	// stdio (the process's limiter).
	lines *lineLimiter
	// owner is the session an HTTP connection serves (Conn.Serve), for
	// its log messages; a stdio process keeps its own.
	owner atomic.Pointer[Owner]

	closeOnce sync.Once
	closeErr  error
	cancel    context.CancelFunc // ends the lifetime of HTTP streams
}

func newClient(c *core, opts Options) *mcp.Client {
	clientOpts := &mcp.ClientOptions{
		Logger: opts.Logger,
		// No roots: a pending roots/list keeps Node servers alive for
		// seconds after their stdin closes. Elicitation in both modes;
		// sampling without tools, declared here since the handler that
		// sees a request's tools would declare tools.
		//lint:ignore SA1019 sampling is deprecated from MCP 2026-07-28 (SEP-2577); servers still sample
		Capabilities:       &mcp.ClientCapabilities{Elicitation: elicitationCapabilities, Sampling: samplingCapabilities},
		ElicitationHandler: c.elicit,
		//lint:ignore SA1019 sampling is deprecated from MCP 2026-07-28 (SEP-2577); servers still sample
		CreateMessageWithToolsHandler: c.sample,
		ToolListChangedHandler: func(context.Context, *mcp.ToolListChangedRequest) {
			if f := c.toolsChanged.Load(); f != nil {
				(*f)()
			}
		},
		ProgressNotificationHandler: func(_ context.Context, req *mcp.ProgressNotificationClientRequest) {
			if c.kind != stdioTransport { // stdio's are handed over as read: observedConn
				c.progress.notify(req.Params)
			}
		},
		//lint:ignore SA1019 logging is deprecated from MCP 2026-07-28 (SEP-2577); agentd speaks 2025-11-25, where servers log so
		LoggingMessageHandler: func(_ context.Context, req *mcp.LoggingMessageRequest) {
			c.logMessage(req.Params)
		},
		// callRounds answers a 2026-07-28 call's input requests itself,
		// through these handlers, so that agentd can defer them.
		MultiRoundTrip: &mcp.MultiRoundTripOptions{Disabled: true},
	}
	client := mcp.NewClient(&mcp.Implementation{Name: "agentd", Version: "1"}, clientOpts)
	client.AddSendingMiddleware(c.observe)
	return client
}

// OnToolsChanged sets what to call when the server sends
// notifications/tools/list_changed (nil: nothing). f must not block. A
// pooled process serves sessions one after another, so its listener
// changes with its session.
func (c *Conn) OnToolsChanged(f func()) {
	if f == nil {
		c.toolsChanged.Store(nil)
		return
	}
	c.toolsChanged.Store(&f)
}

func discard(log *slog.Logger) *slog.Logger {
	if log == nil {
		return slog.New(slog.DiscardHandler)
	}
	return log
}

// DialStdio starts spec's process and performs the handshake within
// readTimeout. On any failure the process is stopped before returning.
//
// It offers 2026-07-28 unless opts.Versions knows the server as
// classic. A server that ends its connection on the server/discover probe
// (it exits on a request it does not know, which leaves the go-sdk's
// fallback initialize without a process) gets a fresh process and the
// classic handshake, and is remembered as classic.
func DialStdio(ctx context.Context, spec StdioSpec, readTimeout time.Duration, opts Options) (*Conn, error) {
	version := offer(opts.Versions)
	c, err := dialStdio(ctx, spec, readTimeout, opts, version)
	if err != nil && Modern(version) && errors.Is(err, ErrStopped) && ctx.Err() == nil {
		discard(opts.Logger).Info("mcp server stopped on the protocol probe; starting it again with the classic handshake",
			"server", spec.Name, "offered", version, "fallback", ClassicVersion)
		c, err = dialStdio(ctx, spec, readTimeout, opts, ClassicVersion)
	}
	if err != nil {
		return nil, err
	}
	remember(opts.Versions, c.session)
	return c, nil
}

// dialStdio starts spec's process and performs the handshake offering
// version.
func dialStdio(ctx context.Context, spec StdioSpec, readTimeout time.Duration, opts Options, version string) (*Conn, error) {
	opts.Logger = discard(opts.Logger)
	spec.Logger = opts.Logger
	proc, err := startProcess(spec)
	if err != nil {
		return nil, fault.Wrap(fault.Unavailable, err, "")
	}
	c := &Conn{core: &core{kind: stdioTransport, proc: proc, log: proc.log, lines: proc.lines, prop: opts.Propagator, tel: opts.Telemetry, labels: labels{cmp.Or(opts.ServerName, spec.Name), opts.Tenant}},
		name: spec.Name, readTimeout: readTimeout, owner: Owner{Tenant: opts.Tenant}}
	stdout := newJSONLines(proc.stdout, config.MaxMessageBytes, func(line []byte) {
		proc.lines.logLine(c.log, slog.LevelWarn, "mcp server wrote a line that is not JSON-RPC to stdout; dropped", string(line[:min(len(line), maxLogLine)]))
	})
	c.stdout = stdout
	transport := observedTransport{lineTransport{stdout: stdout, stdin: proc.stdin}, &c.progress}
	hctx, cancel := context.WithTimeout(ctx, readTimeout)
	defer cancel()
	session, err := newClient(c.core, opts).Connect(hctx, transport, &mcp.ClientSessionOptions{ProtocolVersion: version})
	if err != nil {
		proc.kill()
		_ = proc.close()
		return nil, c.classify(hctx, ctx, "the handshake", err)
	}
	c.enableLogs(hctx, session)
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

// Exited is closed when a stdio server's process has exited; nil for HTTP.
func (c *Conn) Exited() <-chan struct{} {
	if c.proc == nil {
		return nil
	}
	return c.proc.exited
}

// View returns a view of the connection for one session: its errors and
// the server label of its durations name the server as the session does,
// the tenant label is owner's, and its exchanges are bounded by
// readTimeout (for Streamable HTTP that is fixed when dialling). A pooled
// process serves sessions one after another, each with its own view.
func (c *Conn) View(name string, readTimeout time.Duration, owner Owner) *Conn {
	return &Conn{core: c.core, name: name, readTimeout: readTimeout, owner: owner}
}

// Serve says whom a connection serves now, for a stdio server's stderr
// lines and any server's log messages: a session that has
// the connection to itself sets its owner when it takes it and nil when it
// gives it back. A process that serves many sessions at once has none.
func (c *Conn) Serve(o *Owner) {
	if c.proc != nil {
		c.proc.owner.Store(o)
		return
	}
	c.core.owner.Store(o)
}

// exchangeContext bounds one exchange. stdio: the whole exchange. Streamable
// HTTP: each wait for data; the transport ends the exchange through the
// context (cause errReadTimeout) when a read times out, so that the go-sdk
// tells the server to stop (notifications/cancelled). Legacy SSE: the
// answer comes on the long-lived event stream, so each wait for data on
// that stream is bounded: the exchange ends when the stream stays silent
// for read_timeout.
//
// Every transport's timers are the exchange's readTimers, which a server's
// elicitation during the exchange holds while a person answers.
func (c *Conn) exchangeContext(ctx context.Context) (context.Context, func()) {
	timers := readTimersFor(ctx)
	ctx, cancel := context.WithCancelCause(ctx)
	if c.kind == stdioTransport {
		t := timers.start(c.readTimeout, func() { cancel(errReadTimeout) })
		return ctx, func() { t.stop(); cancel(nil) }
	}
	if c.kind == streamableTransport {
		hx := &httpExchange{end: cancel, timers: timers}
		return context.WithValue(ctx, exchangeKey{}, hx), func() { hx.done.Store(true); cancel(nil) }
	}
	hx := &httpExchange{timers: timers}
	ctx = context.WithValue(ctx, exchangeKey{}, hx)
	e := &exchange{timer: timers.start(c.readTimeout, func() { cancel(errReadTimeout) })}
	c.inflightMu.Lock()
	if c.inflight == nil {
		c.inflight = make(map[*exchange]struct{})
	}
	c.inflight[e] = struct{}{}
	c.inflightMu.Unlock()
	return ctx, func() {
		hx.done.Store(true)
		e.timer.stop()
		c.inflightMu.Lock()
		delete(c.inflight, e)
		c.inflightMu.Unlock()
		cancel(nil)
	}
}

// exchange is a running request of a legacy SSE connection.
type exchange struct {
	timer *readTimer
}

// activity restarts the idle timers of the running exchanges: data came on
// the event stream.
func (c *core) activity() {
	c.inflightMu.Lock()
	defer c.inflightMu.Unlock()
	for e := range c.inflight {
		e.timer.reset()
	}
}

// exchangeKey holds the *httpExchange of an HTTP exchange, for its
// transport.
type exchangeKey struct{}

// httpExchange is what an HTTP exchange's transport learns and may do.
type httpExchange struct {
	// end ends a Streamable HTTP exchange whose response went silent for
	// read_timeout (nil for legacy SSE, whose waits are timed apart).
	end context.CancelCauseFunc
	// timers times the exchange's waits for data.
	timers *readTimers
	// reached: a POST of the exchange may have reached the server (it got
	// an answer other than 404, or failed after it was sent). Such a
	// request is never sent again on a new session: it may have run.
	reached atomic.Bool
	// done: the exchange is over; a stream that still carries it (the
	// go-sdk may resume one later) is no longer its answer.
	done atomic.Bool
	// authErr is why agentd could not resolve the server's refusal of a
	// request of the exchange: the exchange's error.
	authErr atomic.Pointer[error]
}

// mayHaveReached reports whether a request of the exchange of ctx may
// have reached the server.
func mayHaveReached(ctx context.Context) bool {
	hx, _ := ctx.Value(exchangeKey{}).(*httpExchange)
	return hx != nil && hx.reached.Load()
}

// timedOut reports whether an exchange ended because the server missed its
// read timeout.
func timedOut(exchangeCtx context.Context) bool {
	return errors.Is(exchangeCtx.Err(), context.DeadlineExceeded) || errors.Is(context.Cause(exchangeCtx), errReadTimeout)
}

func (c *core) current() *mcp.ClientSession {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.session
}

// do runs one request on the session, bounded as exchangeContext says, and
// stops a stdio server that its failure leaves unfit to keep.
func (c *Conn) do(ctx context.Context, request string, readOnly bool, f func(context.Context, *mcp.ClientSession) error) error {
	ctx = c.withLabels(ctx)
	ectx, cancel := c.exchangeContext(ctx)
	defer cancel()
	err := c.exchange(ectx, ctx, request, readOnly, f)
	if c.proc != nil && unfit(err) {
		// At once, not when the connection is closed: the process's other
		// exchanges end now too, and the error the caller gets says that
		// the server was stopped.
		c.proc.kill()
	}
	return err
}

// exchange runs one request on the session within ectx, the exchange's
// context, and classifies its failure. An HTTP server whose session is
// gone (it restarted), or that could not be reached at all, gets one new
// session and the request once more, but only if the request's own POST
// never reached the server (it was refused with 404, or never sent): a
// request that was in flight when the session went may have run, and is
// not repeated.
func (c *Conn) exchange(ectx, ctx context.Context, request string, readOnly bool, f func(context.Context, *mcp.ClientSession) error) error {
	session := c.current()
	err := f(ectx, session)
	// A read-only request (tools/list, all its pages) may always go again;
	// a call only if it never reached the server.
	if err == nil || c.redial == nil || !notSent(err) || !readOnly && mayHaveReached(ectx) || ectx.Err() != nil {
		return c.classifyOrPass(ectx, ctx, request, err)
	}
	c.log.Info("mcp server session lost; initializing a new one", "server", c.name, "request", request, "err", c.redactor.Err(err))
	fresh, rerr := c.replace(ectx, session)
	if rerr != nil {
		return c.classify(ectx, ctx, request, rerr)
	}
	return c.classifyOrPass(ectx, ctx, request, f(ectx, fresh))
}

// replace swaps a lost session for a new one, once for concurrent callers
// that saw the same loss.
func (c *core) replace(ctx context.Context, lost *mcp.ClientSession) (*mcp.ClientSession, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.session != lost {
		return c.session, nil // another caller already replaced it
	}
	// The new session's long-lived streams must not carry the exchange
	// that happened to replace it: its timeouts are not theirs.
	fresh, err := c.redial(context.WithValue(ctx, exchangeKey{}, (*httpExchange)(nil)))
	if err != nil {
		return nil, err
	}
	_ = lost.Close()
	c.session = fresh
	return fresh, nil
}

// classifyOrPass classifies err unless it is a tool's JSON-RPC error, which
// is the tool's answer and goes back as is.
func (c *Conn) classifyOrPass(exchangeCtx, callerCtx context.Context, request string, err error) error {
	if err == nil {
		return nil
	}
	var rpcErr *jsonrpc.Error
	if errors.As(err, &rpcErr) && !rejectedByTransport(rpcErr) {
		if c.redactor != nil {
			// A gateway's error may quote the request's credentials.
			return &jsonrpc.Error{Code: rpcErr.Code, Message: c.redactor.Text(rpcErr.Message)}
		}
		return rpcErr
	}
	return c.classify(exchangeCtx, callerCtx, request, err)
}

// rejectedByTransport reports whether e is the go-sdk's marker (its
// internal jsonrpc2.ErrRejected, code -32005) for a request that its HTTP
// transport could not complete: an HTTP error status such as 500, a
// failed or timed-out connection. The server did not answer it, so it is
// no tool data. A server's own JSON-RPC error in a non-2xx body comes
// first in the chain and is still passed back.
func rejectedByTransport(e *jsonrpc.Error) bool {
	return e.Code == -32005 && e.Message == "rejected by transport"
}

// opaque keeps err's text but drops its chain when the chain holds a
// *jsonrpc.Error (such as the transport's rejection marker): callers take
// a *jsonrpc.Error in a CallTool error for the tool's answer.
func opaque(err error) error {
	var rpcErr *jsonrpc.Error
	if errors.As(err, &rpcErr) {
		return errors.New(err.Error())
	}
	return err
}

// ListTools lists every tool of the server, following pagination.
func (c *Conn) ListTools(ctx context.Context) ([]*mcp.Tool, error) {
	tools, _, err := c.ListToolsTTL(ctx)
	return tools, err
}

// ListToolsTTL lists every tool of the server, following pagination, and
// says how long the server lets the list be cached: the least ttlMs of
// its pages on a 2026-07-28 session (0: not at all), nil on a classic
// one, whose servers give no hint.
func (c *Conn) ListToolsTTL(ctx context.Context) ([]*mcp.Tool, *time.Duration, error) {
	var tools []*mcp.Tool
	var ttl *time.Duration
	err := c.do(ctx, "tools/list", true, func(ctx context.Context, s *mcp.ClientSession) error {
		var err error
		tools, ttl, err = listAll(ctx, s)
		return err
	})
	if err != nil {
		return nil, nil, err
	}
	return tools, ttl, nil
}

// listAll lists every page of the session's tools, with the least ttlMs of
// the pages on a 2026-07-28 session (nil on a classic one).
func listAll(ctx context.Context, s *mcp.ClientSession) ([]*mcp.Tool, *time.Duration, error) {
	var tools []*mcp.Tool
	var ttl *time.Duration
	modern := s.InitializeResult() != nil && Modern(s.InitializeResult().ProtocolVersion)
	params := &mcp.ListToolsParams{}
	for {
		res, err := s.ListTools(ctx, params)
		if err != nil {
			return nil, nil, err
		}
		tools = append(tools, res.Tools...)
		if d := time.Duration(max(res.TTLMs, 0)) * time.Millisecond; modern && (ttl == nil || d < *ttl) {
			ttl = &d
		}
		if res.NextCursor == "" {
			return tools, ttl, nil
		}
		params = &mcp.ListToolsParams{Cursor: res.NextCursor}
	}
}

// CallTool calls a tool with args: a map[string]any, or a JSON object
// already encoded as json.RawMessage (nil or empty means {}: never
// "arguments": null, which many servers reject). The call carries a
// progress token; ctx's WithProgress function gets the server's reports.
// Cancelling ctx cancels the call at the server too: the go-sdk sends it
// notifications/cancelled. A tool's own failure is
// not an error: it comes back as a result with IsError, or as a
// *jsonrpc.Error that the caller turns into data for the model. A call
// whose input request agentd deferred (2026-07-28) ends with
// *InputRequired; ctx's WithRetry answers retry it. Other errors are
// classified.
func (c *Conn) CallTool(ctx context.Context, name string, args any) (*mcp.CallToolResult, error) {
	args = callArguments(args)
	// Every call carries a progress token of its own; the reports
	// go to the caller's WithProgress function, if any, until it returns.
	onProgress, _ := ctx.Value(progressKey{}).(func(Progress))
	token, retire := c.progress.issue(onProgress)
	defer retire()
	caller := ctx
	ctx, call := c.track(ctx)
	defer c.untrack(ctx, call)
	request := fmt.Sprintf("tools/call for %q", name)
	var res *mcp.CallToolResult
	var deferred *InputRequired
	err := c.do(ctx, request, false, func(ctx context.Context, s *mcp.ClientSession) error {
		var err error
		params := &mcp.CallToolParams{Name: name, Arguments: args}
		params.SetProgressToken(token)
		res, err = c.callRounds(ctx, s, params)
		if ir, ok := errors.AsType[*InputRequired](err); ok {
			deferred = ir
			return nil
		}
		return err
	})
	if deferred != nil {
		return nil, deferred
	}
	if err != nil && call.cut.Load() && caller.Err() == nil {
		// The connection's close (its process crashed, or its session
		// ended) cut the call short, not its caller: the server stopped
		// during the call, which may or may not have run.
		return nil, c.stoppedDuring(request, err)
	}
	if err != nil {
		return nil, err
	}
	return res, nil
}

// meta is a request's _meta (observe puts it in): the trace context of ctx (W3C traceparent
// and tracestate, as the propagator writes them), or nil without one.
func (c *core) meta(ctx context.Context) mcp.Meta {
	if c.prop == nil {
		return nil
	}
	carrier := propagation.MapCarrier{}
	c.prop.Inject(ctx, carrier)
	if len(carrier) == 0 {
		return nil
	}
	m := make(mcp.Meta, len(carrier))
	for k, v := range carrier {
		m[k] = v
	}
	return m
}

// ErrStopped is in the chain of a stdio exchange's error when the server's
// process ended (it crashed, or was killed) or closed its stdout before it
// answered. A tools/call that failed so may or may not have run.
var ErrStopped = errors.New("the MCP server stopped")

// ended reports whether err is a stdio connection's end: the server's
// stdout reached its end (mid-message, or with our end of the pipe closed),
// its stdin no longer takes writes, or the go-sdk already saw either. The
// go-sdk also closes a connection itself on a protocol error while the
// process lives on; that counts as an end too, deliberately: the process
// is dropped all the same, and the call may or may not have run.
func ended(err error) bool {
	return errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) || errors.Is(err, os.ErrClosed) ||
		errors.Is(err, syscall.EPIPE) || errors.Is(err, mcp.ErrConnectionClosed)
}

// Reasons of the failures after which a stdio server is not kept: it
// missed its read timeout, or wrote a message over the limit.
const (
	reasonTimeout  = "MCP_TIMEOUT"
	reasonTooLarge = "MCP_MESSAGE_TOO_LARGE"
)

// unfit reports whether err, a classified failure of an exchange, leaves a
// stdio server unfit to keep.
func unfit(err error) bool {
	var fe *fault.Error
	return errors.As(err, &fe) && (fe.Reason == reasonTimeout || fe.Reason == reasonTooLarge)
}

// classify turns an exchange's error into a fault. It only names the
// failure; a stdio server the failure leaves unfit (see unfit) is stopped
// by the caller, as the error says.
func (c *Conn) classify(exchangeCtx, callerCtx context.Context, request string, err error) error {
	if callerCtx.Err() != nil {
		return callerCtx.Err()
	}
	if fe, ok := errors.AsType[*fault.Error](err); ok {
		return fe
	}
	err = c.redactor.Err(err)
	if timedOut(exchangeCtx) || errors.Is(err, errReadTimeout) {
		return c.timedOutDuring(request)
	}
	if aerr := c.unresolved(exchangeCtx); aerr != nil {
		return aerr
	}
	if errors.Is(err, ErrAddressNotAllowed) {
		return fault.New(fault.Permission,
			"the MCP server %q resolves to a loopback, private, shared or link-local address, which %s does not allow", c.name, c.networksSetting).
			WithInfo("MCP_ADDRESS_NOT_ALLOWED", map[string]string{"server": c.name})
	}
	if c.stdout.overflowed() {
		return fault.New(fault.Unavailable,
			"the MCP server %q wrote a message larger than %d MiB during %s, so it was stopped", c.name, config.MaxMessageBytes>>20, request).
			WithInfo(reasonTooLarge, map[string]string{"server": c.name, "request": request})
	}
	if a := c.refused.Swap(nil); a != nil {
		return a.fault(c.name, request)
	}
	return c.failedDuring(request, err)
}

// timedOutDuring is the failure of request whose server missed its read
// timeout; a stdio server was stopped for it.
func (c *Conn) timedOutDuring(request string) error {
	stopped := ""
	if c.proc != nil {
		stopped = ", so it was stopped"
	}
	return fault.New(fault.Timeout,
		"the MCP server %q did not answer %s within %s%s; increase read_timeout on its mcps entry if it needs longer",
		c.name, request, c.readTimeout, stopped).
		WithInfo(reasonTimeout, map[string]string{"server": c.name, "request": request, "read_timeout": c.readTimeout.String()})
}

// unresolved is why agentd could not resolve the server's refusal of a
// request of the exchange of ctx, which is the exchange's error;
// nil if it resolved every refusal, or met none.
func (c *Conn) unresolved(exchangeCtx context.Context) error {
	hx, _ := exchangeCtx.Value(exchangeKey{}).(*httpExchange)
	if hx == nil {
		return nil
	}
	e := hx.authErr.Load()
	if e == nil {
		return nil
	}
	c.refused.Store(nil) // the refusal is told by its resolution's error
	return *e
}

// failedDuring is the failure of request whose server went away or
// failed: a stdio server that stopped, a connection the server closed, or
// any other failure, its cause (redacted for HTTP: it names the host,
// never the path) kept.
func (c *Conn) failedDuring(request string, err error) error {
	cause := opaque(err)
	if c.proc != nil && ended(err) {
		return c.stoppedDuring(request, cause)
	}
	if errors.Is(err, mcp.ErrConnectionClosed) || errors.Is(err, mcp.ErrSessionMissing) {
		return fault.Hide(fault.Unavailable, cause, "the MCP server %q closed the connection during %s", c.name, request).
			WithInfo("MCP_CONNECTION_CLOSED", map[string]string{"server": c.name, "request": request})
	}
	return fault.Wrap(fault.Unavailable, cause, "the MCP server %q failed during %s", c.name, request).
		WithInfo("MCP_UNAVAILABLE", map[string]string{"server": c.name, "request": request})
}

// stoppedDuring is the failure of request whose stdio server stopped (or
// was stopped) while it ran: cause, hidden behind ErrStopped.
func (c *Conn) stoppedDuring(request string, cause error) error {
	return fault.Hide(fault.Unavailable, fmt.Errorf("%w: %w", ErrStopped, opaque(cause)), "the MCP server %q stopped during %s", c.name, request).
		WithInfo("MCP_SERVER_STOPPED", map[string]string{"server": c.name, "request": request})
}

// Close ends the session and, for stdio, stops the process and its group.
// Idempotent and safe for concurrent use.
func (c *Conn) Close() error {
	c.closeOnce.Do(func() {
		var err error
		if c.proc != nil {
			// The go-sdk's Close waits for the calls in flight, so the
			// process is stopped beside it (stdin closed, then SIGTERM and
			// SIGKILL to the group), which ends those calls: a close never
			// waits for a hung call's read_timeout.
			// The calls cut short are cancelled first, and the server
			// told so (notifications/cancelled), before its stdin closes.
			c.cutCalls()
			stopped := make(chan error, 1)
			go func() { stopped <- c.proc.close() }()
			_ = c.current().Close()
			err = <-stopped
		} else {
			err = c.current().Close()
		}
		if c.cancel != nil {
			c.cancel()
		}
		c.closeErr = c.redactor.Err(err)
	})
	return c.closeErr
}

// emptyObject is the arguments of a call given none.
var emptyObject = json.RawMessage("{}")

// callArguments is what a call sends as its arguments: args, or an empty
// object for nil and empty ones.
func callArguments(args any) any {
	switch a := args.(type) {
	case nil:
		return emptyObject
	case map[string]any:
		if a == nil {
			return emptyObject
		}
	case json.RawMessage:
		if len(a) == 0 {
			return emptyObject
		}
	}
	return args
}
