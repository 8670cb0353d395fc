package mcpconn

import (
	"context"
	"encoding/json"
	"log/slog"
	"strconv"
	"sync"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// Progress is one notifications/progress of a running tools/call (X-M6).
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
	if ir := s.InitializeResult(); ir == nil || ir.Capabilities == nil || ir.Capabilities.Logging == nil {
		return
	}
	if err := s.SetLoggingLevel(ctx, &mcp.SetLoggingLevelParams{Level: serverLogLevel}); err != nil {
		msg := err.Error()
		if c.redactText != nil {
			msg = c.redactText(msg)
		}
		c.log.Debug("mcp server refused logging/setLevel; its log messages are not received", "err", msg)
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

// logMessage logs a server's notifications/message in agentd's log
// (X-M6): with the server's name (c.log's), its logger, its level mapped onto
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
