package mcpconn

import (
	"context"
	"sync"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// elicitationCapabilities is what agentd declares: both modes of
// elicitation. Roots stay undeclared (see newClient).
var elicitationCapabilities = &mcp.ElicitationCapabilities{
	Form: &mcp.FormElicitationCapabilities{},
	URL:  &mcp.URLElicitationCapabilities{},
}

// elicit is the client's elicitation/create handler: it hands the
// server's request to the session it is made for (elicitee) and holds
// the read timers of the calls it may belong to while a person answers.
//
// Before it runs, the go-sdk checks the request (a form's schema is flat,
// a URL request has a URL); after, it checks an accepted form's content
// against the schema and fills in the schema's defaults (SEP-1034), and
// answers the server with a JSON-RPC error instead when the content does
// not fit. An error returned here reaches the server as a JSON-RPC error.
//
// On a 2026-07-28 session the request is an input request of a tools/call
// result (callRounds), made in the call's own context: it is that call's,
// and agentd may defer it (Deferrable, ErrDeferred).
func (c *core) elicit(ctx context.Context, req *mcp.ElicitRequest) (*mcp.ElicitResult, error) {
	owner, calls := c.askee(ctx)
	if owner == nil || owner.Elicit == nil {
		c.log.Info("mcp server asked for input that no session can answer; declined",
			"calls_in_flight", len(calls))
		return &mcp.ElicitResult{Action: "decline"}, nil
	}
	actx, end := askContext(ctx, calls)
	defer end()
	if Deferrable(ctx) { // an input request of its call's result
		actx = context.WithValue(actx, inputRequestKey{}, true)
	}
	return owner.Elicit(actx, req.Params)
}

// askContext is the context that a server's request, made with ctx, is
// asked of its session in, and the function that ends it. The question
// ends with the server's request (ctx), and takes its values from the
// call it belongs to: the one call in flight. With several, nothing on
// the wire says which one the request belongs to: over stdio, 2025-11-25
// relates no request to another, and over Streamable HTTP the go-sdk does
// not tell which response stream carried it. The question is then the
// session's, with no call's values (ctx's own are not the session's
// either: the go-sdk's connection may keep those of the call that dialled
// it). Until it ends, the read timers of the calls it may belong to are
// held: a person's answer is not the server's silence.
func askContext(ctx context.Context, calls []*inflightCall) (context.Context, func()) {
	releases := make([]func(), len(calls))
	for i, call := range calls {
		releases[i] = call.hold()
	}
	base := context.Background()
	if len(calls) == 1 {
		base = calls[0].ctx
	}
	actx, cancel := context.WithCancel(base)
	stop := context.AfterFunc(ctx, cancel)
	return actx, func() {
		stop()
		cancel()
		for _, release := range releases {
			release()
		}
	}
}

// askee returns the session a server's request made with ctx is for, and
// the calls it may belong to: on a 2026-07-28 session, an input request
// of a call's result (callRounds) is that call's; otherwise elicitee
// says.
func (c *core) askee(ctx context.Context) (*Owner, []*inflightCall) {
	if call, _ := ctx.Value(inflightKey{}).(*inflightCall); call != nil && ctx.Value(roundKey{}) != nil {
		if o := c.served(); o != nil {
			return o, []*inflightCall{call}
		}
		return &call.view.owner, []*inflightCall{call}
	}
	return c.elicitee()
}

// elicitee returns the session a server's request is for, and the calls
// in flight it may belong to: a connection that serves one session
// (Serve) asks that session, whatever runs; a process that serves many
// asks the session whose calls are in flight, when they are all one
// view's, and no one otherwise (nil).
func (c *core) elicitee() (*Owner, []*inflightCall) {
	c.callsMu.Lock()
	calls := make([]*inflightCall, 0, len(c.calls))
	for call := range c.calls {
		calls = append(calls, call)
	}
	c.callsMu.Unlock()
	if o := c.served(); o != nil {
		return o, calls
	}
	var view *Conn
	for _, call := range calls {
		if view != nil && call.view != view {
			return nil, calls
		}
		view = call.view
	}
	if view == nil {
		return nil, nil
	}
	return &view.owner, calls
}

// hold holds the read timers of the call's exchange until the returned
// function is called.
func (call *inflightCall) hold() func() {
	call.timersMu.Lock()
	defer call.timersMu.Unlock()
	if call.timers == nil {
		call.timers = &readTimers{}
	}
	return call.timers.hold()
}

// readTimersFor returns the read timers of the exchange of ctx: those of
// its call, if it is one, so that the call's elicitations can hold them.
func readTimersFor(ctx context.Context) *readTimers {
	call, _ := ctx.Value(inflightKey{}).(*inflightCall)
	if call == nil {
		return &readTimers{}
	}
	call.timersMu.Lock()
	defer call.timersMu.Unlock()
	if call.timers == nil {
		call.timers = &readTimers{}
	}
	return call.timers
}

// readTimers are the read timers of one exchange. While a request of the
// server made during the exchange waits for a person (an elicitation),
// they are held: a timer that runs out meanwhile does not fire,
// and once the last hold is released each starts afresh. read_timeout
// bounds the server's silences, never the person's. Safe for concurrent
// use.
type readTimers struct {
	mu     sync.Mutex
	held   int
	timers map[*readTimer]struct{}
}

// readTimer is one wait bounded by read_timeout.
type readTimer struct {
	rs      *readTimers
	d       time.Duration
	t       *time.Timer
	fired   bool
	stopped bool
}

// start calls f after d, unless the timer is stopped first, or held.
func (rs *readTimers) start(d time.Duration, f func()) *readTimer {
	rt := &readTimer{rs: rs, d: d}
	rs.mu.Lock()
	defer rs.mu.Unlock()
	rt.t = time.AfterFunc(d, func() {
		rs.mu.Lock()
		if rt.stopped || rt.fired || rs.held > 0 {
			rs.mu.Unlock()
			return // held: the release starts it again
		}
		rt.fired = true
		delete(rs.timers, rt)
		rs.mu.Unlock()
		f()
	})
	if rs.timers == nil {
		rs.timers = make(map[*readTimer]struct{})
	}
	rs.timers[rt] = struct{}{}
	return rt
}

// stop stops the timer and reports whether it had fired.
func (rt *readTimer) stop() (fired bool) {
	rt.rs.mu.Lock()
	defer rt.rs.mu.Unlock()
	if !rt.fired && !rt.stopped {
		rt.stopped = true
		rt.t.Stop()
		delete(rt.rs.timers, rt)
	}
	return rt.fired
}

// reset starts a running timer's wait again from zero.
func (rt *readTimer) reset() {
	rt.rs.mu.Lock()
	defer rt.rs.mu.Unlock()
	if !rt.fired && !rt.stopped {
		rt.t.Reset(rt.d)
	}
}

// hold holds the timers, those started meanwhile included, until the
// returned function is called (once).
func (rs *readTimers) hold() func() {
	rs.mu.Lock()
	rs.held++
	rs.mu.Unlock()
	var once sync.Once
	return func() {
		once.Do(func() {
			rs.mu.Lock()
			defer rs.mu.Unlock()
			rs.held--
			if rs.held == 0 {
				for rt := range rs.timers {
					rt.t.Reset(rt.d)
				}
			}
		})
	}
}
