package mcpconn

import (
	"context"
	"log/slog"
	"slices"
	"sync"
	"testing"

	"github.com/agentd/agentd/internal/mcptest"
	"github.com/agentd/agentd/internal/proctest"
	"github.com/agentd/agentd/internal/testwait"
)

func TestMain(m *testing.M) {
	mcptest.Main()
	proctest.VerifyTestMain(m)
}

// record is one log record, its attributes flattened to strings.
type record struct {
	level slog.Level
	msg   string
	attrs map[string]string
}

// recorder is a slog.Handler that keeps every record.
type recorder struct {
	mu      *sync.Mutex
	records *[]record
	attrs   []slog.Attr
}

func newRecorder() *recorder {
	return &recorder{mu: new(sync.Mutex), records: new([]record)}
}

func (r *recorder) Enabled(context.Context, slog.Level) bool { return true }

func (r *recorder) Handle(_ context.Context, rec slog.Record) error {
	attrs := make(map[string]string)
	for _, a := range r.attrs {
		attrs[a.Key] = a.Value.String()
	}
	rec.Attrs(func(a slog.Attr) bool {
		attrs[a.Key] = a.Value.String()
		return true
	})
	r.mu.Lock()
	defer r.mu.Unlock()
	*r.records = append(*r.records, record{level: rec.Level, msg: rec.Message, attrs: attrs})
	return nil
}

func (r *recorder) WithAttrs(attrs []slog.Attr) slog.Handler {
	c := *r
	c.attrs = append(slices.Clip(r.attrs), attrs...)
	return &c
}

func (r *recorder) WithGroup(string) slog.Handler { return r }

func (r *recorder) find(match func(record) bool) (record, bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, rec := range *r.records {
		if match(rec) {
			return rec, true
		}
	}
	return record{}, false
}

// waitFor returns the first record that matches, polling because stderr is
// forwarded by its own goroutine.
func (r *recorder) waitFor(t *testing.T, what string, match func(record) bool) record {
	t.Helper()
	var rec record
	testwait.For(t, "a log record: "+what, func() bool {
		var ok bool
		rec, ok = r.find(match)
		return ok
	})
	return rec
}
