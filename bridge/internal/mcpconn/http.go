package mcpconn

import (
	"context"
	"errors"
	"fmt"
	"io"
	"math"
	"net"
	"net/http"
	"net/url"
	"strings"
	"sync/atomic"
	"time"

	"go.opentelemetry.io/otel/propagation"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/agentd/agentd/internal/netaddr"
	"github.com/agentd/agentd/internal/redact"
)

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
	// MaxReconnectionWait bounds the back-off between attempts to reopen a
	// dropped event stream. Zero means 30 s.
	MaxReconnectionWait time.Duration
	// Transport carries the requests; nil means NewTransport(false).
	Transport http.RoundTripper
	// NetworksSetting names, when Transport refuses a private address, the
	// setting that would allow it. Empty means
	// bridge.allow_private_networks.
	NetworksSetting string
	// Authorize, when set, resolves the server's refusals (X-M1): a
	// request refused with 401, or 403 insufficient_scope, waits for it
	// and goes again, once, with the authorization it returns, which
	// every later request carries too. Its error fails the request. Nil:
	// a refusal fails the request (X-M3).
	Authorize func(ctx context.Context, ch Challenge) (authorization string, err error)
}

// Challenge is an HTTP server's refusal of a request's authorization.
type Challenge struct {
	// Status is 401 or 403.
	Status int
	// WWWAuthenticate holds the response's WWW-Authenticate values.
	WWWAuthenticate []string
	// Presented is the authorization the refused request carried; "" for
	// none.
	Presented string
}

// resolvable reports whether resp refuses authorization in a way a new
// token may cure: 401, or 403 insufficient_scope (step-up). Any other 403
// is a refusal that no token changes.
func resolvable(resp *http.Response) bool {
	switch resp.StatusCode {
	case http.StatusUnauthorized:
		return true
	case http.StatusForbidden:
		a := challengeOf(resp)
		return a != nil && a.errorCode == "insufficient_scope"
	}
	return false
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

// ErrAddressNotAllowed is the cause of a refused connection to an address
// only agentd's network reaches (internal/netaddr).
var ErrAddressNotAllowed = netaddr.ErrNotAllowed

// NewTransport returns the HTTP transport for MCP servers: netaddr's,
// which unless allowPrivate refuses the addresses netaddr.Private names,
// checked on the address actually dialled.
func NewTransport(allowPrivate bool) *http.Transport {
	return netaddr.Transport(allowPrivate)
}

// maxRetriesFor returns the go-sdk's stream reconnection attempts whose
// waits never exceed limit. Attempt k waits between b and 2b, b = 1 s ×
// 1.5^(k-1) (full jitter on top of the back-off), so the last attempt m
// needs 2 × 1.5^(m-1) s ≤ limit. A limit under 2 s allows no attempt: the
// event stream is not reopened (-1 disables; 0 would mean the go-sdk's
// default).
func maxRetriesFor(limit time.Duration) int {
	if limit <= 0 {
		limit = 30 * time.Second
	}
	if limit < 2*time.Second {
		return -1
	}
	return 1 + int(math.Floor(math.Log(limit.Seconds()/2)/math.Log(1.5)))
}

// DialHTTP connects to an HTTP server and performs the handshake: over
// Streamable HTTP, or, when the server answers the first POST with 400,
// 404 or 405, over the legacy HTTP+SSE transport. For Streamable HTTP
// each wait for data is bounded by readTimeout.
func DialHTTP(ctx context.Context, spec HTTPSpec, readTimeout time.Duration, opts Options) (*Conn, error) {
	opts.Logger = discard(opts.Logger)
	base := spec.Transport
	if base == nil {
		base = NewTransport(false)
	}
	header := make(http.Header)
	for k, v := range spec.Headers {
		header.Set(k, v)
	}
	if a := AuthorizationHeader(spec.Authorization); a != "" {
		header.Set("Authorization", a)
	}
	var auth *authorizer
	if spec.Authorize != nil {
		auth = &authorizer{resolve: spec.Authorize, turn: make(chan struct{}, 1)}
		auth.current.Store(header.Get("Authorization"))
		header.Del("Authorization")
	}
	origin := originOf(spec.URL)
	// The lifetime of the connection's streams: the legacy SSE transport
	// keeps its event stream on the context given to Connect.
	life, cancel := context.WithCancel(context.WithoutCancel(ctx))
	address, port := endpoint(spec.URL)
	c := &Conn{core: &core{kind: streamableTransport, log: opts.Logger.With("server", spec.Name), prop: opts.Propagator, cancel: cancel, networksSetting: spec.NetworksSetting,
		tel: opts.Telemetry, labels: labels{spec.Name, opts.Tenant}, address: address, port: port, lines: newLineLimiter()},
		name: spec.Name, readTimeout: readTimeout, owner: Owner{Tenant: opts.Tenant}}
	if c.networksSetting == "" {
		c.networksSetting = "bridge.allow_private_networks"
	}
	client := newClient(c.core, opts)
	// Set before the handshake: classify cleans its error.
	c.redactor = newRedactor(spec)

	dialStreamable := func(ctx context.Context) (*mcp.ClientSession, *roundTripper, error) {
		rt := &roundTripper{base: base, header: header, origin: origin, idle: readTimeout, prop: opts.Propagator, refused: &c.refused, auth: auth}
		t := &mcp.StreamableClientTransport{
			Endpoint:   spec.URL,
			HTTPClient: &http.Client{Transport: rt},
			MaxRetries: maxRetriesFor(spec.MaxReconnectionWait),
		}
		s, err := client.Connect(ctx, t, &mcp.ClientSessionOptions{ProtocolVersion: offer(opts.Versions)})
		if err == nil {
			remember(opts.Versions, s)
		}
		return s, rt, err
	}
	dialSSE := func(ctx context.Context) (*mcp.ClientSession, error) {
		rt := &roundTripper{base: base, header: header, origin: origin, sse: true, activity: c.activity, prop: opts.Propagator, refused: &c.refused, auth: auth}
		t := &mcp.SSEClientTransport{Endpoint: spec.URL, HTTPClient: &http.Client{Transport: rt}}
		// The SSE transport's stream lives on Connect's context; the
		// handshake is bounded separately.
		hctx, stop := context.WithTimeout(ctx, readTimeout)
		defer stop()
		type result struct {
			s   *mcp.ClientSession
			err error
		}
		done := make(chan result, 1)
		go func() {
			// The legacy transport speaks the classic protocol: no probe.
			s, err := client.Connect(life, t, &mcp.ClientSessionOptions{ProtocolVersion: ClassicVersion})
			done <- result{s, err}
		}()
		select {
		case r := <-done:
			if r.err == nil {
				remember(opts.Versions, r.s) // the next connection offers the classic handshake at once
			}
			return r.s, r.err
		case <-hctx.Done():
			go func() {
				if r := <-done; r.s != nil {
					_ = r.s.Close()
				}
			}()
			if ctx.Err() != nil {
				return nil, ctx.Err()
			}
			return nil, errReadTimeout
		}
	}

	hctx, done := c.exchangeContext(ctx)
	session, rt, err := dialStreamable(hctx)
	if err != nil && legacyOnly(rt.firstStatus.Load()) {
		c.kind = sseTransport
		session, err = dialSSE(ctx)
	}
	if err != nil {
		err = c.classify(hctx, ctx, "the handshake", err)
		done()
		cancel()
		return nil, err
	}
	c.enableLogs(hctx, session)
	done()
	c.session = session
	if c.kind == sseTransport {
		c.redial = func(ctx context.Context) (*mcp.ClientSession, error) {
			s, err := dialSSE(ctx)
			if err == nil {
				c.enableLogs(ctx, s)
			}
			return s, err
		}
	} else {
		c.redial = func(ctx context.Context) (*mcp.ClientSession, error) {
			s, _, err := dialStreamable(ctx)
			if err == nil {
				c.enableLogs(ctx, s)
			}
			return s, err
		}
	}
	return c, nil
}

// legacyOnly reports whether the status of the first POST says the server
// does not speak Streamable HTTP.
func legacyOnly(status int32) bool {
	return status == http.StatusBadRequest || status == http.StatusNotFound || status == http.StatusMethodNotAllowed
}

// notSent reports whether err means a request never reached the server:
// its session is gone, the connection was already closed, or the server
// could not be dialled.
func notSent(err error) bool {
	if errors.Is(err, mcp.ErrSessionMissing) || errors.Is(err, mcp.ErrConnectionClosed) {
		return true
	}
	var op *net.OpError
	return errors.As(err, &op) && op.Op == "dial" && !errors.Is(err, ErrAddressNotAllowed)
}

// newRedactor hides what an HTTP server's declaration holds secret in
// the texts of its errors: its URL's path and query, and its credentials,
// the authorization (as given, and as the header it becomes) and every
// header value, which a server or a gateway may quote back.
func newRedactor(spec HTTPSpec) *redact.Redactor {
	credentials := []string{spec.Authorization, AuthorizationHeader(spec.Authorization)}
	for _, v := range spec.Headers {
		credentials = append(credentials, v)
	}
	return redact.ForEndpoint(spec.URL, credentials...)
}

// originOf is a URL's scheme and host, lower-cased ("" if it does not
// parse).
func originOf(rawURL string) string {
	u, err := url.Parse(rawURL)
	if err != nil {
		return ""
	}
	return strings.ToLower(u.Scheme + "://" + u.Host)
}

// roundTripper adds the server's headers to requests to the server's own
// origin (never to another host a redirect or an SSE endpoint names),
// records the status of the first POST and whether an exchange's POST may
// have reached the server, and bounds each wait for data of the answer to
// a request: a POST's response, or its resumption (a GET with
// Last-Event-ID).
type roundTripper struct {
	base        http.RoundTripper
	header      http.Header
	origin      string                        // scheme://host of the server's URL
	idle        time.Duration                 // 0: unbounded
	sse         bool                          // the legacy transport's: see errSSESessionGone
	activity    func()                        // legacy SSE: called when the event stream delivers data
	prop        propagation.TextMapPropagator // the request's trace context as headers (nil: none)
	firstStatus atomic.Int32
	// refused keeps the challenge of the last POST the server refused
	// with 401 or 403 (X-M3); the connection's, shared by its round
	// trippers.
	refused *atomic.Pointer[authChallenge]
	// auth holds the authorization of a server whose refusals agentd
	// resolves (nil for others).
	auth *authorizer
}

// authorizer is the authorization of a server declared with oauth: the
// current Authorization value, and how to get a new one. Shared by the
// connection's round trippers, across sessions the connection redials.
type authorizer struct {
	resolve func(context.Context, Challenge) (string, error)
	current atomic.Value // string
	// turn is held by the one resolution under way: concurrent refusals
	// wait for it (a person is asked once), each as long as its own
	// request waits.
	turn chan struct{}
}

// renew resolves a refusal of the request that carried presented. A
// request that carried an authorization since replaced (another request
// resolved meanwhile) goes again with the new one without asking.
func (a *authorizer) renew(ctx context.Context, resp *http.Response, presented string) (string, error) {
	select {
	case a.turn <- struct{}{}:
	case <-ctx.Done():
		return "", context.Cause(ctx)
	}
	defer func() { <-a.turn }()
	if cur := a.current.Load().(string); cur != presented {
		return cur, nil
	}
	v, err := a.resolve(ctx, Challenge{Status: resp.StatusCode, WWWAuthenticate: resp.Header.Values("WWW-Authenticate"), Presented: presented})
	if err != nil {
		return "", err
	}
	a.current.Store(v)
	return v, nil
}

// errSSESessionGone is what a POST of the legacy transport fails with when
// the server answers 404: it does not know the session (it restarted, or
// another replica answered) and did not take the message, so the session
// is lost as for Streamable HTTP and the request may go again on a new
// one. The go-sdk would report only "failed to write".
var errSSESessionGone = fmt.Errorf("the server does not know the session: %w", mcp.ErrSessionMissing)

func (t *roundTripper) RoundTrip(req *http.Request) (*http.Response, error) {
	ctx, cancel := context.WithCancel(req.Context())
	req = req.Clone(ctx)
	if t.origin != "" && strings.EqualFold(req.URL.Scheme+"://"+req.URL.Host, t.origin) {
		for k, vs := range t.header {
			req.Header[k] = vs
		}
	}
	sameOrigin := t.origin != "" && strings.EqualFold(req.URL.Scheme+"://"+req.URL.Host, t.origin)
	presented := ""
	if t.auth != nil && sameOrigin {
		if presented = t.auth.current.Load().(string); presented != "" {
			req.Header.Set("Authorization", presented)
		}
	}
	if t.prop != nil {
		t.prop.Inject(ctx, propagation.HeaderCarrier(req.Header)) // X-O3
	}
	// The standalone GET stream waits for server-initiated messages and may
	// rightly stay silent; only answers to requests are bounded.
	hx, _ := ctx.Value(exchangeKey{}).(*httpExchange)
	// A GET with Last-Event-ID resumes a stream: an exchange's answer while
	// that exchange runs (bounded like its POST), or the standalone stream,
	// which may rightly stay silent.
	resumesAnswer := req.Header.Get("Last-Event-ID") != "" && hx != nil && !hx.done.Load()
	bounded := t.idle > 0 && (req.Method == http.MethodPost || resumesAnswer)
	timeout := func() {
		if hx != nil && hx.end != nil {
			hx.end(errReadTimeout) // the go-sdk then cancels the request on the server
		}
		cancel()
	}
	// The exchange's timers, which its elicitations hold (X-M4).
	timers := &readTimers{}
	if hx != nil && hx.timers != nil {
		timers = hx.timers
	}
	var timer *readTimer
	if bounded {
		timer = timers.start(t.idle, timeout)
	}
	if req.Method == http.MethodPost && req.GetBody != nil && wantsID(ctx) {
		// A traced request learns its JSON-RPC id from its POST's body.
		if body, err := req.GetBody(); err == nil {
			if data, err := io.ReadAll(body); err == nil {
				if msg, err := jsonrpc.DecodeMessage(data); err == nil {
					noteSent(ctx, msg)
				}
			}
			_ = body.Close()
		}
	}
	resp, err := t.base.RoundTrip(req)
	if timer != nil {
		timer.stop()
	}
	if err == nil && t.auth != nil && sameOrigin && resolvable(resp) && ctx.Err() == nil && t.asksFor(req) {
		// The server wants (other) authorization (X-M1): agentd resolves
		// it, a person perhaps taking their time, so no read timeout runs
		// meanwhile; then the request goes again, once.
		if again, ok := t.resend(req); ok {
			_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, 64<<10))
			_ = resp.Body.Close()
			release := timers.hold()
			v, aerr := t.auth.renew(ctx, resp, presented)
			release()
			if aerr != nil {
				if hx != nil {
					hx.authErr.Store(&aerr)
				}
				cancel()
				return nil, aerr
			}
			again.Header.Set("Authorization", v)
			if bounded {
				timer = timers.start(t.idle, timeout)
			}
			resp, err = t.base.RoundTrip(again)
			if timer != nil {
				timer.stop()
			}
		}
	}
	if err != nil {
		cancel()
		var op *net.OpError
		if hx != nil && req.Method == http.MethodPost && !(errors.As(err, &op) && op.Op == "dial") {
			hx.reached.Store(true) // it may have been sent before it failed
		}
		return nil, err
	}
	if a := challengeOf(resp); a != nil && t.refused != nil {
		t.refused.Store(a)
	}
	if req.Method == http.MethodPost {
		noteStatus(ctx, resp.StatusCode)
		if hx != nil && resp.StatusCode != http.StatusNotFound {
			hx.reached.Store(true)
		}
		t.firstStatus.CompareAndSwap(0, int32(resp.StatusCode))
		if t.sse && resp.StatusCode == http.StatusNotFound {
			_ = resp.Body.Close()
			cancel()
			return nil, errSSESessionGone
		}
	}
	body := &cancelBody{ReadCloser: resp.Body, cancel: cancel}
	if t.sse && req.Method == http.MethodGet && t.activity != nil {
		resp.Body = &activityBody{cancelBody: body, activity: t.activity}
		return resp, nil
	}
	if bounded {
		resp.Body = &idleBody{cancelBody: body, timers: timers, idle: t.idle, timeout: timeout}
	} else {
		resp.Body = body
	}
	return resp, nil
}

// asksFor reports whether a refusal of req is worth asking agentd about:
// a POST that carries a request (a notification, such as the
// cancellation of a call that gave up, is not: nobody waits for it), or
// the legacy transport's GET that opens its session.
func (t *roundTripper) asksFor(req *http.Request) bool {
	if req.Method == http.MethodGet {
		return t.sse
	}
	if req.Method != http.MethodPost || req.GetBody == nil {
		return false
	}
	body, err := req.GetBody()
	if err != nil {
		return false
	}
	defer body.Close()
	data, err := io.ReadAll(io.LimitReader(body, 1<<20))
	if err != nil {
		return false
	}
	msg, err := jsonrpc.DecodeMessage(data)
	if err != nil {
		return true // not ours to judge: the request goes on as it would
	}
	r, ok := msg.(*jsonrpc.Request)
	return !ok || r.ID.IsValid()
}

// resend returns req ready to go again: its body read afresh. False for a
// request whose body cannot be.
func (t *roundTripper) resend(req *http.Request) (*http.Request, bool) {
	again := req.Clone(req.Context())
	if req.Body != nil && req.Body != http.NoBody {
		if req.GetBody == nil {
			return nil, false
		}
		body, err := req.GetBody()
		if err != nil {
			return nil, false
		}
		again.Body = body
	}
	return again, true
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

// idleBody fails a read that waits longer than idle for data, unless an
// elicitation of its exchange holds its timers meanwhile (X-M4).
type idleBody struct {
	*cancelBody
	timers  *readTimers
	idle    time.Duration
	timeout func()
}

func (b *idleBody) Read(p []byte) (int, error) {
	timer := b.timers.start(b.idle, b.timeout)
	n, err := b.ReadCloser.Read(p)
	if timer.stop() && err != nil {
		return n, errReadTimeout
	}
	return n, err
}

// activityBody reports every read of the legacy transport's event stream.
type activityBody struct {
	*cancelBody
	activity func()
}

func (b *activityBody) Read(p []byte) (int, error) {
	n, err := b.ReadCloser.Read(p)
	if n > 0 {
		b.activity()
	}
	return n, err
}

// errReadTimeout ends a response that sent nothing for read_timeout.
var errReadTimeout = errors.New("no data within read_timeout")
