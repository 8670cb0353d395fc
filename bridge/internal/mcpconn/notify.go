//lint:file-ignore SA1019 logging is deprecated from MCP 2026-07-28 (SEP-2577); agentd speaks 2025-11-25, where servers log so

package mcpconn

import (
	"context"
	"encoding/json"
	"log/slog"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// Progress is one notifications/progress of a running tools/call.
type Progress struct {
	Progress float64
	Total    float64 // 0: unknown
	Message  string
}

type progressKey struct{}

// WithProgress returns ctx for a CallTool whose server's progress reports
// go to f, in the order they arrive. f runs on the connection's reader:
// it must not block.
func WithProgress(ctx context.Context, f func(Progress)) context.Context {
	return context.WithValue(ctx, progressKey{}, f)
}

// progressTokens routes notifications/progress to the calls that asked
// for them, by token. Safe for concurrent use.
type progressTokens struct {
	mu    sync.Mutex
	next  uint64
	calls map[string]func(Progress)
}

// issue returns a new token, unique on the connection, whose reports go
// to f (nil: dropped), and the function that retires it.
func (p *progressTokens) issue(f func(Progress)) (string, func()) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.next++
	token := "agentd-" + strconv.FormatUint(p.next, 10)
	if f == nil {
		return token, func() {}
	}
	if p.calls == nil {
		p.calls = make(map[string]func(Progress))
	}
	p.calls[token] = f
	return token, func() {
		p.mu.Lock()
		delete(p.calls, token)
		p.mu.Unlock()
	}
}

// notify hands a report to the call of its token; reports for tokens that
// are retired or unknown (a server's mistake) are dropped.
func (p *progressTokens) notify(params *mcp.ProgressNotificationParams) {
	token, ok := params.ProgressToken.(string)
	if !ok {
		return
	}
	p.mu.Lock()
	f := p.calls[token]
	p.mu.Unlock()
	if f != nil {
		f(Progress{Progress: params.Progress, Total: params.Total, Message: params.Message})
	}
}

// serverLogLevel is the level agentd asks servers that log
// (notifications/message) for: without logging/setLevel, the go-sdk's
// servers, among others, send none.
const serverLogLevel mcp.LoggingLevel = "info"

// enableLogs asks a server that declares the logging capability for its
// log messages at serverLogLevel and above. A server that refuses is still
// used: its logs are lost, nothing else.
func (c *core) enableLogs(ctx context.Context, s *mcp.ClientSession) {
	if ir := s.InitializeResult(); ir == nil || ir.Capabilities == nil || ir.Capabilities.Logging == nil || Modern(ir.ProtocolVersion) {
		return // a 2026-07-28 session asks per request instead (injectMeta)
	}
	if err := s.SetLoggingLevel(ctx, &mcp.SetLoggingLevelParams{Level: serverLogLevel}); err != nil {
		c.log.Debug("mcp server refused logging/setLevel; its log messages are not received", "err", c.redactor.Text(err.Error()))
	}
}

// slogLevel maps an MCP (syslog) level onto slog's.
func slogLevel(l mcp.LoggingLevel) slog.Level {
	switch l {
	case "debug":
		return slog.LevelDebug
	case "info", "notice":
		return slog.LevelInfo
	case "warning":
		return slog.LevelWarn
	case "error", "critical", "alert", "emergency":
		return slog.LevelError
	}
	return slog.LevelInfo
}

// logMessage logs a server's notifications/message in agentd's log:
// with the server's name (c.log's), its logger, its level mapped onto
// slog's, and the session the connection serves (tenant, generation,
// trace) when it serves one. It shares the rate of the server's stderr
// lines.
func (c *core) logMessage(params *mcp.LoggingMessageParams) {
	var data string
	switch d := params.Data.(type) {
	case string:
		data = d
	default:
		b, err := json.Marshal(d)
		if err != nil {
			return
		}
		data = string(b)
	}
	if len(data) > maxLogLine {
		data = data[:maxLogLine]
	}
	log := c.log.With("mcp_level", string(params.Level)) // c.log names the server
	if params.Logger != "" {
		log = log.With("logger", params.Logger)
	}
	if o := c.served(); o != nil {
		log = log.With("tenant", o.Tenant, "generation", o.Generation, "trace_id", o.TraceID)
	}
	c.lines.logLine(log, slogLevel(params.Level), "mcp server log", data)
}

// served is the session the connection serves now (see Conn.Serve); nil
// when none, or many.
func (c *core) served() *Owner {
	if c.proc != nil {
		return c.proc.owner.Load()
	}
	return c.owner.Load()
}

// cancelNotifyWait bounds how long a cancelled stdio call waits for the
// go-sdk to write its notifications/cancelled, which it does on a
// goroutine of its own after the call has returned.
const cancelNotifyWait = time.Second

// inflightCall is a running tools/call. A stdio connection's close that
// cuts it short cancels it, and waits until the server has been told
// (notifications/cancelled), so that stopping the process does not
// overtake the notification.
// A server's elicitation made during it is asked with its context, and
// holds its read timers.
type inflightCall struct {
	view *Conn // the view that called: whose session it is
	// ctx is the call's own context, kept for the server's requests made
	// during the call, which the go-sdk hands over without it.
	ctx      context.Context
	timersMu sync.Mutex
	timers   *readTimers // its exchange's; nil until it starts
	cancel   context.CancelFunc
	cut      atomic.Bool   // the connection's close cancelled it, not its caller
	sent     atomic.Bool   // the request was written: the server may be running it
	notified chan struct{} // closed once notifications/cancelled for it was written
	once     sync.Once
	settled  chan struct{} // closed once CallTool has returned
}

type inflightKey struct{}

// written notes a message written for the call of ctx, if any.
func written(ctx context.Context, msg jsonrpc.Message, err error) {
	call, _ := ctx.Value(inflightKey{}).(*inflightCall)
	r, ok := msg.(*jsonrpc.Request)
	if call == nil || !ok {
		return
	}
	switch {
	case r.IsCall():
		if err == nil {
			call.sent.Store(true)
		}
	case r.Method == "notifications/cancelled":
		call.once.Do(func() { close(call.notified) })
	}
}

// track registers a call of the view c; a stdio connection's close
// cancels its context.
func (c *Conn) track(ctx context.Context) (context.Context, *inflightCall) {
	ctx, cancel := context.WithCancel(ctx)
	call := &inflightCall{view: c, cancel: cancel, notified: make(chan struct{}), settled: make(chan struct{})}
	ctx = context.WithValue(ctx, inflightKey{}, call)
	call.ctx = ctx
	c.callsMu.Lock()
	if c.calls == nil {
		c.calls = make(map[*inflightCall]struct{})
	}
	c.calls[call] = struct{}{}
	c.callsMu.Unlock()
	return ctx, call
}

// untrack ends a call once it returned; a call that was cancelled after
// its request went out first waits, within cancelNotifyWait, for the
// server to be told.
func (c *core) untrack(ctx context.Context, call *inflightCall) {
	if ctx.Err() != nil && call.sent.Load() {
		t := time.NewTimer(cancelNotifyWait)
		select {
		case <-call.notified:
		case <-t.C:
		}
		t.Stop()
	}
	call.cancel()
	c.callsMu.Lock()
	delete(c.calls, call)
	c.callsMu.Unlock()
	close(call.settled)
}

// cutCalls cancels the running calls and waits until each has returned,
// its server told, before a close stops the process.
func (c *core) cutCalls() {
	c.callsMu.Lock()
	calls := make([]*inflightCall, 0, len(c.calls))
	for call := range c.calls {
		call.cut.Store(true)
		call.cancel()
		calls = append(calls, call)
	}
	c.callsMu.Unlock()
	t := time.NewTimer(2 * cancelNotifyWait)
	defer t.Stop()
	for _, call := range calls {
		select {
		case <-call.settled:
		case <-t.C:
			return
		}
	}
}
