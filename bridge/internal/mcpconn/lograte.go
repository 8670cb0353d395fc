package mcpconn

import (
	"context"
	"log/slog"
	"sync"
	"time"
)

// The lines a server writes on its own (stderr, stray stdout) are logged at
// most logRate per second after a burst of logBurst, so that a server
// flooding its output cannot flood agentd's logs or slow it down; what is
// left out is counted in the next line logged.
const (
	logRate  = 20
	logBurst = 100
)

// lineLimiter is a token bucket over one server's logged lines. Safe for
// concurrent use.
type lineLimiter struct {
	mu         sync.Mutex
	tokens     float64
	last       time.Time
	suppressed int
	now        func() time.Time
}

func newLineLimiter() *lineLimiter {
	return &lineLimiter{tokens: logBurst, now: time.Now}
}

// allow reports whether a line may be logged now and, when it may, how
// many lines were left out since the last one logged. first is true for
// the first line of a run left out, which the caller announces once.
func (l *lineLimiter) allow() (ok bool, suppressed int, first bool) {
	l.mu.Lock()
	defer l.mu.Unlock()
	now := l.now()
	if !l.last.IsZero() {
		l.tokens = min(logBurst, l.tokens+now.Sub(l.last).Seconds()*logRate)
	}
	l.last = now
	if l.tokens < 1 {
		l.suppressed++
		return false, 0, l.suppressed == 1
	}
	l.tokens--
	suppressed, l.suppressed = l.suppressed, 0
	return true, suppressed, false
}

// left is how many lines were left out since the last one logged.
func (l *lineLimiter) left() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.suppressed
}

// logLine logs one line of a server's own output through the limiter.
func (l *lineLimiter) logLine(log *slog.Logger, level slog.Level, msg, line string) {
	ok, suppressed, first := l.allow()
	if first {
		log.Warn("mcp server output is over the logging rate; lines are left out until it slows down", "lines_per_second", logRate)
	}
	if ok {
		log.Log(context.Background(), level, msg, suppressedAttrs("line", line, suppressed)...)
	}
}

// suppressedAttrs are a logged line's attributes, with the count of lines
// left out before it when there were any.
func suppressedAttrs(key, line string, suppressed int) []any {
	if suppressed > 0 {
		return []any{key, line, "suppressed_lines", suppressed}
	}
	return []any{key, line}
}
