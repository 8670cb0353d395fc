package mcpconn

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"net/http"
	"net/url"
	"strconv"
	"sync/atomic"
	"time"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/metric"
	"go.opentelemetry.io/otel/metric/noop"
	"go.opentelemetry.io/otel/trace"
	tracenoop "go.opentelemetry.io/otel/trace/noop"

	"github.com/agentd/agentd/internal/redact"
	"github.com/agentd/agentd/internal/telemetry"
)

// Telemetry makes the MCP client spans and the
// mcp.client.operation.duration histogram of the requests agentd
// sends: initialize, tools/list and tools/call, after the OpenTelemetry
// MCP semantic conventions. One Telemetry serves every connection.
type Telemetry struct {
	tracer   trace.Tracer
	duration metric.Float64Histogram
	metered  bool // a meter provider was given: durations are recorded
	options  *telemetry.MeasurementOptions[durationLabels]
}

// durationLabels are the attributes of one mcp.client.operation.duration
// series. Their values are bounded (methods, tools, servers, tenants,
// versions, error types), so the options made for them are kept.
type durationLabels struct {
	method, transport, tool, version, server, tenant, errType, rpcCode string
}

// durationAttrs are the attributes of l's series.
func durationAttrs(l durationLabels) []attribute.KeyValue {
	attrs := []attribute.KeyValue{
		attribute.String("mcp.method.name", l.method),
		attribute.String("network.transport", l.transport),
		attribute.String("mcp.protocol.version", l.version),
		attribute.String("server", l.server),
		attribute.String("tenant", l.tenant),
	}
	attrs = append(attrs, toolAttrs(l.tool)...)
	if l.errType != "" {
		attrs = append(attrs, attribute.String("error.type", l.errType))
	}
	if l.rpcCode != "" {
		attrs = append(attrs, attribute.String("rpc.response.status_code", l.rpcCode))
	}
	return attrs
}

// toolAttrs are the attributes that name a tools/call's tool; none for
// another request (tool "").
func toolAttrs(tool string) []attribute.KeyValue {
	if tool == "" {
		return nil
	}
	return []attribute.KeyValue{attribute.String("gen_ai.tool.name", tool), attribute.String("gen_ai.operation.name", "execute_tool")}
}

// operationBuckets are the conventions' bucket boundaries for
// mcp.client.operation.duration, in seconds.
var operationBuckets = []float64{0.01, 0.02, 0.05, 0.1, 0.2, 0.5, 1, 2, 5, 10, 30, 60, 120, 300}

// NewTelemetry returns the instruments of connections: spans from tp and
// the histogram from mp; a nil provider makes none of its signal.
func NewTelemetry(tp trace.TracerProvider, mp metric.MeterProvider) (*Telemetry, error) {
	if tp == nil {
		tp = tracenoop.NewTracerProvider()
	}
	metered := mp != nil
	if !metered {
		mp = noop.NewMeterProvider()
	}
	h, err := mp.Meter("github.com/agentd/agentd/bridge").Float64Histogram("mcp.client.operation.duration",
		metric.WithUnit("s"),
		metric.WithDescription("The duration of the MCP request or notification as observed on the sender from the time it was sent until the response or ack is received."),
		metric.WithExplicitBucketBoundaries(operationBuckets...))
	if err != nil {
		return nil, err
	}
	return &Telemetry{tracer: tp.Tracer("github.com/agentd/agentd/bridge"), duration: h, metered: metered,
		options: telemetry.NewMeasurementOptions(durationAttrs)}, nil
}

// Owner is the session a connection serves: the tenant its metrics carry,
// the generation and trace that its server's stderr lines carry, and who
// answers its server's questions.
type Owner struct {
	Tenant     string
	Generation string
	// TraceID is the hex trace id of the session (of its OpenSession
	// call); "" without one.
	TraceID string
	// Elicit answers the server's elicitation/create requests made for
	// the session, with the person's answer; its error fails the
	// server's request. When one tools/call of the session is in flight,
	// the request is that call's: ctx holds the call's values and ends
	// with it. ctx ends with the server's request, and with the
	// connection. Nil: the requests are declined.
	Elicit func(ctx context.Context, p *mcp.ElicitParams) (*mcp.ElicitResult, error)
	// Sample answers the server's sampling/createMessage requests made
	// for the session, text only and without tools (those the
	// connection refuses before), as Elicit does: with the call's values,
	// ending with the server's request. Its error fails the server's
	// request. Nil: the requests are refused.
	//lint:ignore SA1019 sampling is deprecated from MCP 2026-07-28 (SEP-2577); servers still sample
	Sample func(ctx context.Context, p *mcp.CreateMessageParams) (*mcp.CreateMessageResult, error)
}

// labels are an exchange's agentd labels: the server's name as the
// session knows it, and the tenant served.
type labels struct{ server, tenant string }

type labelsKey struct{}

// withLabels gives the requests of ctx the labels of c, a connection or
// a view of one.
func (c *Conn) withLabels(ctx context.Context) context.Context {
	return context.WithValue(ctx, labelsKey{}, labels{server: c.name, tenant: c.owner.Tenant})
}

// sentRequest is what the transport learns of one traced request: its
// JSON-RPC id (only when wantID: its span records), and for HTTP the
// status of its POST when that failed.
type sentRequest struct {
	wantID bool
	id     atomic.Pointer[string]
	status atomic.Int32
	proto  atomic.Pointer[string] // the HTTP version its POST was answered in ("1.1", "2")
}

// wantsID reports whether ctx belongs to a traced request whose id is
// wanted: an HTTP POST's body is decoded only then.
func wantsID(ctx context.Context) bool {
	sent, _ := ctx.Value(sentKey{}).(*sentRequest)
	return sent != nil && sent.wantID
}

type sentKey struct{}

// noteSent records msg's id on the traced request of ctx, if msg is a
// request (a call) and ctx belongs to a traced one.
func noteSent(ctx context.Context, msg jsonrpc.Message) {
	sent, _ := ctx.Value(sentKey{}).(*sentRequest)
	if sent == nil || !sent.wantID {
		return
	}
	if r, ok := msg.(*jsonrpc.Request); ok && r.IsCall() {
		id := fmt.Sprint(r.ID.Raw())
		sent.id.Store(&id)
	}
}

// noteResponse records, of the HTTP response to the traced request of
// ctx, the version it came in and a failed status.
func noteResponse(ctx context.Context, resp *http.Response) {
	sent, _ := ctx.Value(sentKey{}).(*sentRequest)
	if sent == nil {
		return
	}
	if resp.StatusCode >= 400 {
		sent.status.Store(int32(resp.StatusCode))
	}
	v := strconv.Itoa(resp.ProtoMajor)
	if resp.ProtoMajor == 1 {
		v += "." + strconv.Itoa(resp.ProtoMinor)
	}
	sent.proto.Store(&v)
}

// observedTransport lets a stdio connection's writes tell the traced
// requests their ids, and hands its progress notifications to their calls
// as they are read: the go-sdk runs notification handlers on a
// goroutine of their own, which may run a call's last report after the
// call's answer, read later, has returned. (Streamable HTTP's connection
// cannot be wrapped, since the go-sdk tells it of the session through an
// unexported method; HTTP requests learn their ids in the roundTripper,
// and its progress comes through the client's handler.)
type observedTransport struct {
	mcp.Transport
	progress *progressTokens
}

func (t observedTransport) Connect(ctx context.Context) (mcp.Connection, error) {
	conn, err := t.Transport.Connect(ctx)
	if err != nil {
		return nil, err
	}
	return observedConn{conn, t.progress}, nil
}

type observedConn struct {
	mcp.Connection
	progress *progressTokens
}

func (c observedConn) Read(ctx context.Context) (jsonrpc.Message, error) {
	msg, err := c.Connection.Read(ctx)
	if r, ok := msg.(*jsonrpc.Request); ok && r.Method == "notifications/progress" {
		var p mcp.ProgressNotificationParams
		if json.Unmarshal(r.Params, &p) == nil {
			c.progress.notify(&p)
		}
	}
	return msg, err
}

func (c observedConn) Write(ctx context.Context, msg jsonrpc.Message) error {
	noteSent(ctx, msg)
	err := c.Connection.Write(ctx, msg)
	written(ctx, msg, err)
	return err
}

// endpoint is an HTTP server's address and port for server.address and
// server.port: the URL's host alone, never its path or query.
func endpoint(rawURL string) (string, int) {
	u, err := url.Parse(rawURL)
	if err != nil || u.Hostname() == "" {
		return "", 0
	}
	port, err := strconv.Atoi(u.Port())
	if err != nil {
		switch u.Scheme {
		case "https":
			port = 443
		case "http":
			port = 80
		}
	}
	return u.Hostname(), port
}

// tracedMethod reports the methods that have spans and durations.
func tracedMethod(method string) bool {
	return method == "initialize" || method == "server/discover" || method == "tools/list" || method == "tools/call"
}

// observe is the client's sending middleware: each traced request is a
// span of kind CLIENT, {mcp.method.name} {tool} for tools/call, and one
// mcp.client.operation.duration record; each carries the trace context
// (of its own span, when there is one) in params._meta.
func (c *core) observe(next mcp.MethodHandler) mcp.MethodHandler {
	return func(ctx context.Context, method string, req mcp.Request) (mcp.Result, error) {
		if !tracedMethod(method) {
			c.injectMeta(ctx, req) // the handshake's logging/setLevel carries the connection's context
			return next(ctx, method, req)
		}
		if c.tel == nil {
			c.injectMeta(ctx, req)
			return next(ctx, method, req)
		}
		return c.traced(ctx, method, req, next)
	}
}

// traced sends a traced request through next within its span, and records
// its duration.
func (c *core) traced(ctx context.Context, method string, req mcp.Request, next mcp.MethodHandler) (mcp.Result, error) {
	lab, ok := ctx.Value(labelsKey{}).(labels)
	if !ok {
		lab = c.labels
	}
	name, tool := method, ""
	if p, ok := req.GetParams().(*mcp.CallToolParams); ok {
		tool = p.Name
		name = method + " " + tool
	}
	transport := "pipe"
	if c.kind != stdioTransport {
		transport = "tcp"
	}
	ctx, span := c.tel.tracer.Start(ctx, name, trace.WithSpanKind(trace.SpanKindClient), trace.WithAttributes(c.spanAttrs(method, transport, tool)...))
	defer span.End()
	c.injectMeta(ctx, req)
	sent := &sentRequest{wantID: span.IsRecording()}
	ctx = context.WithValue(ctx, sentKey{}, sent)
	start := time.Now()
	res, err := next(ctx, method, req)
	elapsed := time.Since(start).Seconds()
	version := requestVersion(method, req, res)
	errType, cancelled := c.errorType(ctx, sent, res, err)
	rpcCode := rpcErrorCode(err)
	c.endSpan(span, req, sent, version, errType, cancelled, err)
	if c.tel.metered {
		c.tel.duration.Record(context.WithoutCancel(ctx), elapsed, c.tel.options.For(durationLabels{
			method: method, transport: transport, tool: tool, version: version,
			server: lab.server, tenant: lab.tenant, errType: errType, rpcCode: rpcCode,
		}))
	}
	return res, err
}

// rpcErrorCode is the code of the JSON-RPC error a server answered with,
// as the conventions' rpc.response.status_code; "" for anything else.
func rpcErrorCode(err error) string {
	if rpcErr, ok := errors.AsType[*jsonrpc.Error](err); ok && !rejectedByTransport(rpcErr) {
		return strconv.Itoa(int(rpcErr.Code))
	}
	return ""
}

// spanAttrs are a request's span attributes at its start: an HTTP
// server's address and port beside what its duration records.
func (c *core) spanAttrs(method, transport, tool string) []attribute.KeyValue {
	attrs := []attribute.KeyValue{
		attribute.String("mcp.method.name", method),
		attribute.String("network.transport", transport),
	}
	attrs = append(attrs, toolAttrs(tool)...)
	if c.address != "" {
		attrs = append(attrs, attribute.String("server.address", c.address), attribute.Int("server.port", c.port))
	}
	if c.kind != stdioTransport {
		attrs = append(attrs, attribute.String("network.protocol.name", "http"))
	}
	return attrs
}

// requestVersion is the protocol version a request went with: the one its
// session negotiated; during the handshake, the one offered: the
// probe's, or initialize's.
func requestVersion(method string, req mcp.Request, res mcp.Result) string {
	if ir, ok := res.(*mcp.InitializeResult); ok && ir != nil {
		return ir.ProtocolVersion
	}
	if cs, _ := req.GetSession().(*mcp.ClientSession); cs != nil && cs.InitializeResult() != nil {
		return cs.InitializeResult().ProtocolVersion
	}
	if method == "server/discover" {
		return ModernVersion
	}
	if p, ok := req.GetParams().(*mcp.InitializeParams); ok && p != nil {
		return p.ProtocolVersion
	}
	return ClassicVersion
}

// endSpan records on a request's span how it ended: its version, its
// JSON-RPC id, a Streamable HTTP session's id, and its failure
// (error.type), or the caller's cancellation (a pause, the generation's
// end, the client's cancel), which is no failure of the request.
func (c *core) endSpan(span trace.Span, req mcp.Request, sent *sentRequest, version, errType string, cancelled bool, err error) {
	span.SetAttributes(attribute.String("mcp.protocol.version", version))
	if id := sent.id.Load(); id != nil {
		span.SetAttributes(attribute.String("jsonrpc.request.id", *id))
	}
	if v := sent.proto.Load(); v != nil {
		span.SetAttributes(attribute.String("network.protocol.version", *v))
	}
	if cs, _ := req.GetSession().(*mcp.ClientSession); c.kind == streamableTransport && cs != nil && cs.ID() != "" {
		span.SetAttributes(attribute.String("mcp.session.id", cs.ID()))
	}
	switch {
	case cancelled:
		span.SetAttributes(attribute.Bool("agentd.cancelled", true))
	case errType != "":
		span.SetAttributes(attribute.String("error.type", errType))
		span.SetStatus(codes.Error, c.statusDescription(errType, err))
		if code := rpcErrorCode(err); code != "" {
			span.SetAttributes(attribute.String("rpc.response.status_code", code))
		}
	}
}

// statusDescription is a failed request's span status description: a
// JSON-RPC error's message, as the conventions ask, with the connection's
// secrets hidden (a server may quote the request it refuses) and at most
// maxDescription bytes; otherwise its error.type.
func (c *core) statusDescription(errType string, err error) string {
	if rpcErr, ok := errors.AsType[*jsonrpc.Error](err); ok && !rejectedByTransport(rpcErr) && rpcErr.Message != "" {
		return redact.Shorten(c.redactor.Text(rpcErr.Message), maxDescription)
	}
	return errType
}

// maxDescription bounds a span's status description.
const maxDescription = 256

// injectMeta puts the trace context of ctx in the params._meta of the
// handshake's server/discover, initialize and logging/setLevel (which has
// no span of its own: it carries its connection's context), tools/list
// and tools/call,
// beside what is there (a call's
// progress token, a 2026-07-28 session's protocol _meta). On a 2026-07-28 session,
// which has no logging/setLevel, it also asks for the server's log
// messages during the request: the logLevel _meta key.
func (c *core) injectMeta(ctx context.Context, req mcp.Request) {
	var p interface {
		GetMeta() map[string]any
		SetMeta(map[string]any)
	}
	switch params := req.GetParams().(type) {
	case *mcp.CallToolParams:
		p = params
	case *mcp.ListToolsParams:
		p = params
	case *mcp.InitializeParams:
		p = params
	case *mcp.DiscoverParams:
		p = params
	//lint:ignore SA1019 logging is deprecated from MCP 2026-07-28 (SEP-2577); classic servers are still asked for their logs
	case *mcp.SetLoggingLevelParams:
		p = params
	default:
		return
	}
	m := c.requestMeta(ctx, req)
	if len(m) == 0 {
		return
	}
	meta := p.GetMeta()
	if meta == nil {
		meta = make(map[string]any, len(m))
	}
	maps.Copy(meta, m)
	p.SetMeta(meta)
}

// requestMeta is what agentd adds to a request's _meta: the trace context
// of ctx, and on a 2026-07-28 session the log level it asks for.
func (c *core) requestMeta(ctx context.Context, req mcp.Request) mcp.Meta {
	m := c.meta(ctx)
	if cs, ok := req.GetSession().(*mcp.ClientSession); ok && cs.InitializeResult() != nil && Modern(cs.InitializeResult().ProtocolVersion) {
		if m == nil {
			m = mcp.Meta{}
		}
		//lint:ignore SA1019 logging is deprecated from MCP 2026-07-28 (SEP-2577); servers still log so
		m[mcp.MetaKeyLogLevel] = serverLogLevel
	}
	return m
}

// errorType is the error.type of a finished request, low in cardinality
// and free of the server's text: tool_error for a result flagged isError,
// what the server answered (answerErrorType), or a failure of agentd's
// side (failureType); "" for a success. cancelled reports the caller's
// cancellation, which is no failure of the request.
func (c *core) errorType(ctx context.Context, sent *sentRequest, res mcp.Result, err error) (errType string, cancelled bool) {
	if err == nil {
		if r, ok := res.(*mcp.CallToolResult); ok && r != nil && r.IsError {
			return "tool_error", false
		}
		return "", false
	}
	if t := answerErrorType(sent, err); t != "" {
		return t, false
	}
	return c.failureType(ctx, err)
}

// answerErrorType is the error a server answered a request with: its
// JSON-RPC error code, or its HTTP error status; "" for neither.
func answerErrorType(sent *sentRequest, err error) string {
	if rpcErr, ok := errors.AsType[*jsonrpc.Error](err); ok && !rejectedByTransport(rpcErr) {
		return strconv.Itoa(int(rpcErr.Code))
	}
	if status := sent.status.Load(); status != 0 {
		return strconv.Itoa(int(status))
	}
	return ""
}

// failureType is the error.type of a request the server did not answer:
// timeout, cancelled (the caller's cancellation: cancelled reports it),
// address_not_allowed, message_too_large, connection_closed, or _OTHER.
func (c *core) failureType(ctx context.Context, err error) (errType string, cancelled bool) {
	switch {
	case timedOut(ctx) || errors.Is(err, errReadTimeout) || errors.Is(err, context.DeadlineExceeded):
		return "timeout", false
	case ctx.Err() != nil || errors.Is(err, context.Canceled):
		return "cancelled", true
	case errors.Is(err, ErrAddressNotAllowed):
		return "address_not_allowed", false
	case c.stdout.overflowed():
		return "message_too_large", false
	case ended(err) || errors.Is(err, mcp.ErrSessionMissing):
		return "connection_closed", false
	}
	return "_OTHER", false
}
