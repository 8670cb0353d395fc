package mcpconn

import (
	"cmp"
	"context"
	"errors"
	"math"
	"net"
	"net/http"
	"net/url"
	"strings"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"go.opentelemetry.io/otel/propagation"

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
	// Authorize, when set, resolves the server's refusals: a
	// request refused with 401, or 403 insufficient_scope, waits for it
	// and goes again, once, with the authorization it returns, which
	// every later request carries too. Its error fails the request, and
	// every later refusal of the same authorization asking the same (status
	// and scopes) without another call, unless it was cancelled or timed
	// out. Nil: a refusal fails the request.
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
	// The lifetime of the connection's streams: the legacy SSE transport
	// keeps its event stream on the context given to Connect.
	life, cancel := context.WithCancel(context.WithoutCancel(ctx))
	c := newHTTPConn(spec, readTimeout, opts, cancel)
	d := newHTTPDialer(c, spec, opts, life)
	hctx, done := c.exchangeContext(ctx)
	session, rt, err := d.streamable(hctx)
	if err != nil && legacyOnly(rt.firstStatus.Load()) {
		c.kind = sseTransport
		session, err = d.sse(ctx)
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
	c.redial = d.redial
	return c, nil
}

// newHTTPConn makes the connection to spec's server, without a session
// yet; cancel ends the lifetime of its streams.
func newHTTPConn(spec HTTPSpec, readTimeout time.Duration, opts Options, cancel context.CancelFunc) *Conn {
	address, port := endpoint(spec.URL)
	return &Conn{
		core: &core{
			kind: streamableTransport, log: opts.Logger.With("server", spec.Name), prop: opts.Propagator, cancel: cancel,
			tel: opts.Telemetry, labels: labels{spec.Name, opts.Tenant}, address: address, port: port, lines: newLineLimiter(),
			networksSetting: cmp.Or(spec.NetworksSetting, "bridge.allow_private_networks"),
			// Set before the handshake: classify cleans its error.
			redactor: newRedactor(spec),
		},
		name: spec.Name, readTimeout: readTimeout, owner: Owner{Tenant: opts.Tenant},
	}
}

// httpDialer opens the sessions of one HTTP connection: the first, and a
// new one whenever the server lost the last (redial).
type httpDialer struct {
	c        *Conn
	client   *mcp.Client
	url      string
	base     http.RoundTripper
	header   http.Header // every request's, to the server's own origin
	origin   string
	auth     *authorizer // nil unless agentd resolves the server's refusals
	prop     propagation.TextMapPropagator
	versions VersionMemory
	retries  int             // the Streamable HTTP event stream's reconnection attempts
	life     context.Context // the lifetime of the connection's streams
}

func newHTTPDialer(c *Conn, spec HTTPSpec, opts Options, life context.Context) *httpDialer {
	d := &httpDialer{
		c: c, client: newClient(c.core, opts), url: spec.URL, base: spec.Transport, origin: originOf(spec.URL),
		prop: opts.Propagator, versions: opts.Versions, retries: maxRetriesFor(spec.MaxReconnectionWait), life: life,
	}
	if d.base == nil {
		d.base = NewTransport(false)
	}
	d.header, d.auth = requestHeaders(spec)
	return d
}

// requestHeaders are the headers every request to spec's server carries,
// and, for a server whose refusals agentd resolves (spec.Authorize), the
// authorizer that holds its authorization instead of the headers: the
// value changes as agentd resolves refusals.
func requestHeaders(spec HTTPSpec) (http.Header, *authorizer) {
	header := make(http.Header)
	for k, v := range spec.Headers {
		header.Set(k, v)
	}
	if a := AuthorizationHeader(spec.Authorization); a != "" {
		header.Set("Authorization", a)
	}
	if spec.Authorize == nil {
		return header, nil
	}
	auth := &authorizer{resolve: spec.Authorize, turn: make(chan struct{}, 1)}
	auth.current.Store(header.Get("Authorization"))
	header.Del("Authorization")
	return header, auth
}

// roundTripper makes the transport of one session's requests: the legacy
// transport's (sse) reports the activity of its event stream; Streamable
// HTTP's bounds each wait for data of an answer by read_timeout.
func (d *httpDialer) roundTripper(sse bool) *roundTripper {
	rt := &roundTripper{base: d.base, header: d.header, origin: d.origin, prop: d.prop, refused: &d.c.refused, auth: d.auth}
	if sse {
		rt.sse, rt.activity = true, d.c.activity
	} else {
		rt.idle = d.c.readTimeout
	}
	return rt
}

// streamable opens a Streamable HTTP session, offering the version the
// server negotiated before (or the modern one). Its round tripper tells
// the status of the first POST.
func (d *httpDialer) streamable(ctx context.Context) (*mcp.ClientSession, *roundTripper, error) {
	rt := d.roundTripper(false)
	t := &mcp.StreamableClientTransport{Endpoint: d.url, HTTPClient: &http.Client{Transport: rt}, MaxRetries: d.retries}
	s, err := d.client.Connect(ctx, t, &mcp.ClientSessionOptions{ProtocolVersion: offer(d.versions)})
	if err == nil {
		remember(d.versions, s)
	}
	return s, rt, err
}

// sse opens a session over the legacy HTTP+SSE transport, its handshake
// bounded by read_timeout.
func (d *httpDialer) sse(ctx context.Context) (*mcp.ClientSession, error) {
	t := &mcp.SSEClientTransport{Endpoint: d.url, HTTPClient: &http.Client{Transport: d.roundTripper(true)}}
	// The SSE transport's stream lives on Connect's context; the
	// handshake is bounded separately.
	hctx, stop := context.WithTimeout(ctx, d.c.readTimeout)
	defer stop()
	type result struct {
		s   *mcp.ClientSession
		err error
	}
	done := make(chan result, 1)
	go func() {
		// The legacy transport speaks the classic protocol: no probe.
		s, err := d.client.Connect(d.life, t, &mcp.ClientSessionOptions{ProtocolVersion: ClassicVersion})
		done <- result{s, err}
	}()
	select {
	case r := <-done:
		if r.err == nil {
			remember(d.versions, r.s) // the next connection offers the classic handshake at once
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

// redial opens a new session over the connection's transport, and asks
// the server for its log messages on it.
func (d *httpDialer) redial(ctx context.Context) (*mcp.ClientSession, error) {
	var s *mcp.ClientSession
	var err error
	if d.c.kind == sseTransport {
		s, err = d.sse(ctx)
	} else {
		s, _, err = d.streamable(ctx)
	}
	if err == nil {
		d.c.enableLogs(ctx, s)
	}
	return s, err
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
