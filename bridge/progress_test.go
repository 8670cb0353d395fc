package bridge

import (
	"context"
	"log/slog"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/google/go-cmp/cmp"
	"google.golang.org/protobuf/testing/protocmp"

	"github.com/agentd/agentd/bridge/internal/mcpconn"
	bridgev1 "github.com/agentd/agentd/gen/go/agentd/bridge/v1"
	"github.com/agentd/agentd/internal/mcptest"
	"github.com/agentd/agentd/internal/testwait"
)

// X-M6: a streamed call's progress reports reach the client as progress
// responses naming the call, ahead of its one answer, in order, and the
// last report (the call's final state) is never dropped by the rate limit.
func TestCallToolsProgress(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	id, _ := open(t, t.Context(), f.client, refSpec("t", "tools"))
	stream := openCalls(t, t.Context(), f.client, id)
	startCall(t, stream, 7, "t", "progress", `{"count":50}`)
	var reports []*bridgev1.ToolProgress
	for {
		res := recvAnswer(t, stream)
		if res.GetId() != 7 {
			t.Fatalf("a response for call %d; only call 7 runs", res.GetId())
		}
		if p := res.GetProgress(); p != nil {
			reports = append(reports, p)
			continue
		}
		if res.GetResult().GetOutput() != "done" {
			t.Fatalf("the answer %v; want the result done", res)
		}
		break
	}
	if len(reports) == 0 || len(reports) > 50 {
		t.Fatalf("%d progress responses; want between 1 and the 50 the server sent", len(reports))
	}
	for i := 1; i < len(reports); i++ {
		if reports[i].GetProgress() <= reports[i-1].GetProgress() {
			t.Errorf("progress went from %v to %v", reports[i-1].GetProgress(), reports[i].GetProgress())
		}
	}
	last := reports[len(reports)-1]
	if diff := cmp.Diff(&bridgev1.ToolProgress{Progress: 50, Total: 50, Message: "step 50"}, last, protocmp.Transform()); diff != "" {
		t.Errorf("the last progress response (-want +got):\n%s", diff)
	}
}

// X-M6: the relay sends at most one report per progressInterval for a
// call: the first at once, then the latest of those that came meanwhile,
// dropping the ones it replaced; close sends the pending one at once.
func TestProgressRelayRate(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var mu sync.Mutex
		var sent []float64
		r := newProgressRelay(func(p *bridgev1.ToolProgress) {
			mu.Lock()
			sent = append(sent, p.GetProgress())
			mu.Unlock()
		})
		got := func() []float64 {
			synctest.Wait()
			mu.Lock()
			defer mu.Unlock()
			return append([]float64(nil), sent...)
		}
		note := func(from, to int) {
			for i := from; i <= to; i++ {
				r.note(mcpconn.Progress{Progress: float64(i)})
			}
		}
		note(1, 1)
		if s := got(); !cmp.Equal(s, []float64{1}) {
			t.Fatalf("after the first report: sent %v; want [1] at once", s)
		}
		note(2, 30) // a burst
		if s := got(); !cmp.Equal(s, []float64{1}) {
			t.Fatalf("within the interval: sent %v; want nothing more", s)
		}
		time.Sleep(progressInterval)
		if s := got(); !cmp.Equal(s, []float64{1, 30}) {
			t.Fatalf("after the interval: sent %v; want the latest, 30", s)
		}
		// A steady flood for a second: ten a second, no more.
		for i := range 100 {
			note(31+i, 31+i)
			time.Sleep(progressInterval / 10)
		}
		if n := len(got()) - 2; n > 10 || n < 9 {
			t.Errorf("a second of 100 reports: %d sent; want ten", n)
		}
		note(200, 200)
		r.close()
		s := got()
		if s[len(s)-1] != 200 {
			t.Errorf("close sent %v last; want the final report, 200", s[len(s)-1])
		}
		r.note(mcpconn.Progress{Progress: 300})
		if s := got(); s[len(s)-1] != 200 {
			t.Errorf("a report after close was sent: %v", s)
		}
	})
}

// logWatch is a slog handler that hands the records with message msg to
// a channel.
type logWatch struct {
	msg   string
	attrs []slog.Attr
	seen  chan map[string]string
}

func (h *logWatch) Enabled(context.Context, slog.Level) bool { return true }
func (h *logWatch) Handle(_ context.Context, r slog.Record) error {
	if r.Message != h.msg {
		return nil
	}
	attrs := map[string]string{"level": r.Level.String()}
	for _, a := range h.attrs {
		attrs[a.Key] = a.Value.String()
	}
	r.Attrs(func(a slog.Attr) bool { attrs[a.Key] = a.Value.String(); return true })
	select {
	case h.seen <- attrs:
	default:
	}
	return nil
}
func (h *logWatch) WithAttrs(as []slog.Attr) slog.Handler {
	c := *h
	c.attrs = append(append([]slog.Attr(nil), h.attrs...), as...)
	return &c
}
func (h *logWatch) WithGroup(string) slog.Handler { return h }

// X-M6: a server's log message goes to the bridge's log with the server's
// name, its logger and level, and the session's generation and tenant.
func TestServerLogsCarryTheSession(t *testing.T) {
	t.Parallel()
	watch := &logWatch{msg: "mcp server log", seen: make(chan map[string]string, 1)}
	f := newFixtureOptions(t, nil, func(o *Options) { o.Logger = slog.New(watch) })
	id, _ := open(t, t.Context(), f.client, refSpec("t", "tools"))
	stream := openCalls(t, t.Context(), f.client, id)
	startCall(t, stream, 1, "t", "log", `{"text":"cache warmed","level":"error","logger":"cache"}`)
	if res := recvAnswer(t, stream); res.GetResult().GetOutput() != "ok" {
		t.Fatalf("the log tool answered %v", res)
	}
	got := testwait.Recv(t, watch.seen, "the server's log message to be logged")
	for k, v := range map[string]string{"line": "cache warmed", "level": "ERROR", "logger": "cache", "mcp_level": "error", "generation": t.Name()} {
		if got[k] != v {
			t.Errorf("the log record's %s is %q; want %q (%v)", k, got[k], v, got)
		}
	}
	if !strings.Contains(got["server"], "tools") {
		t.Errorf("the log record names the server %q; want the tools server", got["server"])
	}
	if _, ok := got["tenant"]; !ok {
		t.Errorf("the log record has no tenant: %v", got)
	}
}

// X-M6: a streamed call that its client cancels is cancelled at the MCP
// server: it receives notifications/cancelled.
func TestCallToolsCancelReachesTheServer(t *testing.T) {
	t.Parallel()
	logger, running := mcptest.WatchStderr(mcptest.BlockRunning)
	f := newFixtureOptions(t, nil, func(o *Options) { o.Logger = logger })
	file := filepath.Join(t.TempDir(), "cancelled")
	id, _ := open(t, t.Context(), f.client, commandSpec(t, "b", mcptest.Tools, map[string]string{mcptest.CancelFileEnv: file}))
	stream := openCalls(t, t.Context(), f.client, id)
	startCall(t, stream, 1, "b", "block", "")
	testwait.Recv(t, running, "the block tool to run")
	cancelCall(t, stream, 1)
	if res := recvAnswer(t, stream); res.GetId() != 1 || res.GetError() == nil {
		t.Fatalf("the cancelled call's answer %v; want an error", res)
	}
	if lines := mcptest.WaitCancelled(t, file); len(lines) != 1 {
		t.Errorf("the server received %q; want one notifications/cancelled", lines)
	}
}
