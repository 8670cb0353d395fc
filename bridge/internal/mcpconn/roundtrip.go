package mcpconn

import (
	"context"
	"errors"
	"fmt"
	"io"
	"maps"
	"net"
	"net/http"
	"slices"
	"strings"
	"sync/atomic"
	"time"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"
	"go.opentelemetry.io/otel/propagation"

	"github.com/agentd/agentd/internal/fault"
)

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

// roundTripper is the transport of the http.Client that the go-sdk's
// transport of one session sends its requests through: see RoundTrip. The
// connection makes one per session it dials.
type roundTripper struct {
	base        http.RoundTripper
	header      http.Header
	origin      string                        // scheme://host of the server's URL
	idle        time.Duration                 // 0: unbounded
	sse         bool                          // the legacy transport's: see errSSESessionGone
	activity    func()                        // legacy SSE: called when the event stream delivers data
	prop        propagation.TextMapPropagator // the request's trace context as headers (nil: none)
	firstStatus atomic.Int32                  // of the first POST; 0 until it is answered
	// refused keeps the challenge of the last POST the server refused
	// with 401 or 403; the connection's, shared by its round
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
	// failed keeps why each failed resolution failed, so that a later
	// refusal of the same authorization asking for the same thing fails
	// alike rather than ask a person again (a connection's probe and the
	// classic handshake it falls back to are refused alike). Held with
	// turn.
	failed map[refusal]error
}

// refusal is what a resolution answers: the authorization a refused
// request carried, and what the refusal asked for (its status, and the
// scopes of a step-up as a sorted set). A 401 after a failed step-up, or
// a step-up to other scopes, is another question.
type refusal struct {
	presented string
	status    int
	scopes    string
}

// refusalOf is resp's refusal of a request that carried presented.
func refusalOf(resp *http.Response, presented string) refusal {
	r := refusal{presented: presented, status: resp.StatusCode}
	if a := challengeOf(resp); a != nil {
		scopes := strings.Fields(a.scope)
		slices.Sort(scopes)
		r.scopes = strings.Join(slices.Compact(scopes), " ")
	}
	return r
}

// renew resolves a refusal of the request that carried presented. A
// request that carried an authorization since replaced (another request
// resolved meanwhile) goes again with the new one without asking; one
// whose refusal a resolution already failed to resolve fails with its
// error.
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
	r := refusalOf(resp, presented)
	if err, ok := a.failed[r]; ok {
		return "", err
	}
	v, err := a.resolve(ctx, Challenge{Status: resp.StatusCode, WWWAuthenticate: resp.Header.Values("WWW-Authenticate"), Presented: presented})
	if err != nil {
		a.remember(ctx, r, err)
		return "", err
	}
	a.current.Store(v)
	return v, nil
}

// remember keeps err as the answer to r, unless the resolution was cut
// short: a cancelled or timed-out wait says nothing about the grant, and
// the next refusal may ask again. a.turn is held.
func (a *authorizer) remember(ctx context.Context, r refusal, err error) {
	// Only an answer is remembered (a person declined, an authorization
	// server refused): a wait cut short, or a dependency that failed, says
	// nothing of the next attempt.
	switch fault.KindOf(err) {
	case fault.Unauthenticated, fault.Permission, fault.Invalid, fault.FailedPrecondition:
	default:
		return
	}
	if ctx.Err() != nil {
		return
	}
	if a.failed == nil {
		a.failed = make(map[refusal]error)
	}
	a.failed[r] = err
}

// errSSESessionGone is what a POST of the legacy transport fails with when
// the server answers 404: it does not know the session (it restarted, or
// another replica answered) and did not take the message, so the session
// is lost as for Streamable HTTP and the request may go again on a new
// one. The go-sdk would report only "failed to write".
var errSSESessionGone = fmt.Errorf("the server does not know the session: %w", mcp.ErrSessionMissing)

// RoundTrip sends one of the go-sdk's HTTP requests to the server and
// returns its response. The go-sdk's transports (Streamable HTTP and the
// legacy HTTP+SSE) take an http.Client and offer no hook between their
// requests and the wire, so what agentd adds to each request lives in the
// client's RoundTripper:
//
//   - the server's headers and authorization go to its own origin only
//     (prepare), with the request's trace context;
//   - each wait for data of the answer to a request is bounded by
//     read_timeout (send, and the response's body), and ends the exchange
//     when it runs out;
//   - a refusal of a server whose OAuth client agentd is (401, or 403
//     asking for more scope) is resolved, with no read timeout running
//     while a person may be asked, and the request goes again, once
//     (reauthorize);
//   - what the connection must learn of the response is noted: a
//     refusal's challenge, for the error that names it; the first POST's
//     status, which tells a server that speaks only the legacy transport;
//     whether the exchange's POST may have reached the server, which then
//     never sends it again on a new session (failed, answered).
func (t *roundTripper) RoundTrip(req *http.Request) (*http.Response, error) {
	tr := t.prepare(req)
	resp, err := tr.send(tr.req)
	if err == nil && tr.mayReauthorize(resp) {
		again, aerr := tr.reauthorize(resp)
		if aerr != nil {
			tr.cancel()
			return nil, aerr
		}
		if again != nil {
			resp, err = tr.send(again)
		}
	}
	if err != nil {
		return nil, tr.failed(err)
	}
	return tr.answered(resp)
}

// trip is one request's way through the roundTripper.
type trip struct {
	t      *roundTripper
	req    *http.Request // the go-sdk's request, cloned onto ctx
	ctx    context.Context
	cancel context.CancelFunc // ends the request, and its response's body
	// hx is the exchange the request belongs to; nil for the standalone
	// stream, which waits for the server's own messages.
	hx *httpExchange
	// timers are the exchange's read timers, which its elicitations hold
	// while a person answers.
	timers *readTimers
	// bounded: each wait for data of the answer is bounded by idle. The
	// standalone stream may rightly stay silent; only answers are bounded.
	bounded    bool
	sameOrigin bool   // the request goes to the server's own origin
	presented  string // the authorization agentd resolved that it carries ("" for none)
}

// prepare clones req onto a context of its own, gives it the server's
// headers and authorization if it goes to the server's own origin (never
// to another host that a redirect or an SSE endpoint names) and its trace
// context, and finds the exchange it belongs to. A traced request learns
// its JSON-RPC id from its POST's body.
func (t *roundTripper) prepare(req *http.Request) *trip {
	ctx, cancel := context.WithCancel(req.Context())
	tr := &trip{t: t, req: req.Clone(ctx), ctx: ctx, cancel: cancel, timers: &readTimers{}}
	tr.sameOrigin = t.origin != "" && strings.EqualFold(req.URL.Scheme+"://"+req.URL.Host, t.origin)
	if tr.sameOrigin {
		maps.Copy(tr.req.Header, t.header)
		tr.presentAuthorization()
	}
	if t.prop != nil {
		t.prop.Inject(ctx, propagation.HeaderCarrier(tr.req.Header))
	}
	tr.hx, _ = ctx.Value(exchangeKey{}).(*httpExchange)
	if tr.hx != nil && tr.hx.timers != nil {
		tr.timers = tr.hx.timers
	}
	tr.bounded = t.idle > 0 && (req.Method == http.MethodPost || tr.resumesAnswer())
	noteRequestID(ctx, tr.req)
	return tr
}

// presentAuthorization gives the request the authorization agentd
// resolved for the server, when it resolves the server's refusals.
func (tr *trip) presentAuthorization() {
	if tr.t.auth == nil {
		return
	}
	if tr.presented = tr.t.auth.current.Load().(string); tr.presented != "" {
		tr.req.Header.Set("Authorization", tr.presented)
	}
}

// resumesAnswer reports whether the request is a GET with Last-Event-ID
// that resumes the answer of its exchange while that exchange runs
// (bounded like its POST), rather than the standalone stream.
func (tr *trip) resumesAnswer() bool {
	return tr.req.Header.Get("Last-Event-ID") != "" && tr.hx != nil && !tr.hx.done.Load()
}

// noteRequestID tells the traced request of ctx its JSON-RPC id, read from
// req's body if req is a POST.
func noteRequestID(ctx context.Context, req *http.Request) {
	if req.Method != http.MethodPost || req.GetBody == nil || !wantsID(ctx) {
		return
	}
	body, err := req.GetBody()
	if err != nil {
		return
	}
	defer body.Close()
	if data, err := io.ReadAll(body); err == nil {
		if msg, err := jsonrpc.DecodeMessage(data); err == nil {
			noteSent(ctx, msg)
		}
	}
}

// send sends req (the request, or its second attempt), the wait for the
// response bounded by read_timeout when the answer is.
func (tr *trip) send(req *http.Request) (*http.Response, error) {
	if !tr.bounded {
		return tr.t.base.RoundTrip(req)
	}
	timer := tr.timers.start(tr.t.idle, tr.timeout)
	defer timer.stop()
	return tr.t.base.RoundTrip(req)
}

// timeout ends a request whose answer stayed silent for read_timeout, and
// a Streamable HTTP exchange with it: the go-sdk then cancels the request
// on the server.
func (tr *trip) timeout() {
	if tr.hx != nil && tr.hx.end != nil {
		tr.hx.end(errReadTimeout)
	}
	tr.cancel()
}

// mayReauthorize reports whether agentd resolves the server's refusal in
// resp: it resolves the server's refusals, the request went to the
// server's own origin, a new token may cure the refusal, the request
// still runs, and a refusal of it is worth asking about (asksFor).
func (tr *trip) mayReauthorize(resp *http.Response) bool {
	return tr.t.auth != nil && tr.sameOrigin && resolvable(resp) && tr.ctx.Err() == nil && tr.t.asksFor(tr.req)
}

// reauthorize resolves the server's refusal in resp, a person perhaps
// taking their time, so no read timeout runs meanwhile, and returns the
// request ready to go again with the authorization agentd resolved; nil
// when its body cannot be read again, and the refusal is the answer. The
// error is why agentd could not resolve it, which the exchange keeps as
// its own.
func (tr *trip) reauthorize(resp *http.Response) (*http.Request, error) {
	again, ok := tr.t.resend(tr.req)
	if !ok {
		return nil, nil
	}
	_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, 64<<10))
	_ = resp.Body.Close()
	release := tr.timers.hold()
	v, err := tr.t.auth.renew(tr.ctx, resp, tr.presented)
	release()
	if err != nil {
		if tr.hx != nil {
			tr.hx.authErr.Store(&err)
		}
		return nil, err
	}
	again.Header.Set("Authorization", v)
	return again, nil
}

// failed ends a request that got no response. A POST that may have been
// sent before it failed (anything but a failed dial) may have reached the
// server: it is never sent again on a new session.
func (tr *trip) failed(err error) error {
	tr.cancel()
	var op *net.OpError
	if tr.hx != nil && tr.req.Method == http.MethodPost && !(errors.As(err, &op) && op.Op == "dial") {
		tr.hx.reached.Store(true)
	}
	return err
}

// answered takes the server's response: it keeps a refusal's challenge
// for the classification of the failure, notes a POST's status
// (posted), and wraps the body (body).
func (tr *trip) answered(resp *http.Response) (*http.Response, error) {
	if a := challengeOf(resp); a != nil && tr.t.refused != nil {
		tr.t.refused.Store(a)
	}
	if tr.req.Method == http.MethodPost {
		if err := tr.posted(resp); err != nil {
			return nil, err
		}
	}
	resp.Body = tr.body(resp.Body)
	return resp, nil
}

// posted notes the status of a POST: on its traced request; as the
// exchange's reach (any answer but 404 means the server took the
// message); and as the connection's first status, which tells a server
// that speaks only the legacy transport. A legacy SSE server's 404 fails
// the request with errSSESessionGone.
func (tr *trip) posted(resp *http.Response) error {
	noteResponse(tr.ctx, resp)
	if tr.hx != nil && resp.StatusCode != http.StatusNotFound {
		tr.hx.reached.Store(true)
	}
	tr.t.firstStatus.CompareAndSwap(0, int32(resp.StatusCode))
	if tr.t.sse && resp.StatusCode == http.StatusNotFound {
		_ = resp.Body.Close()
		tr.cancel()
		return errSSESessionGone
	}
	return nil
}

// body wraps a response's body so that closing it ends the request's
// context; the legacy transport's event stream reports each read
// (activity), and a bounded answer times each wait for data.
func (tr *trip) body(b io.ReadCloser) io.ReadCloser {
	body := &cancelBody{ReadCloser: b, cancel: tr.cancel}
	switch {
	case tr.t.sse && tr.req.Method == http.MethodGet && tr.t.activity != nil:
		return &activityBody{cancelBody: body, activity: tr.t.activity}
	case tr.bounded:
		return &idleBody{cancelBody: body, timers: tr.timers, idle: tr.t.idle, timeout: tr.timeout}
	}
	return body
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
// elicitation of its exchange holds its timers meanwhile.
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
