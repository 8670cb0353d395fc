package mcpconn

import (
	"context"
	"log/slog"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/agentd/agentd/internal/mcptest"
)

// X-M6: every tools/call carries a progress token of its own, and the
// server's reports for it reach the caller's WithProgress function, all of
// them and in order, before the call returns; a caller without one still
// gets its result.
func TestProgressReachesTheCaller(t *testing.T) {
	t.Parallel()
	conn := dial(t, stdioSpec(t, mcptest.Tools), roomyTimeout, nil)
	var mu sync.Mutex
	var got []Progress
	ctx := WithProgress(t.Context(), func(p Progress) {
		mu.Lock()
		got = append(got, p)
		mu.Unlock()
	})
	if _, err := conn.CallTool(ctx, "progress", map[string]any{"count": 3}); err != nil {
		t.Fatal(err)
	}
	mu.Lock()
	want := []Progress{{1, 3, "step 1"}, {2, 3, "step 2"}, {3, 3, "step 3"}}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("progress reports (-want +got):\n%s", diff)
	}
	mu.Unlock()
	if text := callText(t, conn, "progress", map[string]any{"count": 2}); text != "done" {
		t.Errorf("a call without a progress function answered %q; want done", text)
	}
	first, second := metaOf(t, t.Context(), conn)["progressToken"], metaOf(t, t.Context(), conn)["progressToken"]
	if first == nil || first == second {
		t.Errorf("progress tokens of two calls: %v and %v; want two different ones", first, second)
	}
}

// X-M6: a server's log messages (notifications/message) are asked for at
// info and logged by agentd with the server's name, the level mapped onto
// slog's, the logger's name, and the session the connection serves.
func TestServerLogMessages(t *testing.T) {
	t.Parallel()
	log := newRecorder()
	spec := stdioSpec(t, mcptest.Tools)
	conn := dial(t, spec, roomyTimeout, log)
	conn.Serve(&Owner{Tenant: "acme", Generation: "gen-42", TraceID: "4bf92f3577b34da6a3ce929d0e0e4736"})
	isLog := func(line string) func(record) bool {
		return func(r record) bool { return r.msg == "mcp server log" && r.attrs["line"] == line }
	}
	callText(t, conn, "log", map[string]any{"text": "disk almost full", "level": "warning", "logger": "storage"})
	rec := log.waitFor(t, "the warning", isLog("disk almost full"))
	want := map[string]string{"server": spec.Name, "logger": "storage", "mcp_level": "warning", "tenant": "acme", "generation": "gen-42", "trace_id": "4bf92f3577b34da6a3ce929d0e0e4736"}
	for k, v := range want {
		if rec.attrs[k] != v {
			t.Errorf("the log message's %s is %q; want %q (attributes %v)", k, rec.attrs[k], v, rec.attrs)
		}
	}
	if rec.level != slog.LevelWarn {
		t.Errorf("a warning was logged at %v; want WARN", rec.level)
	}
	for _, tc := range []struct {
		level string
		want  slog.Level
	}{{"critical", slog.LevelError}, {"notice", slog.LevelInfo}} {
		callText(t, conn, "log", map[string]any{"text": "a " + tc.level, "level": tc.level})
		if rec := log.waitFor(t, tc.level, isLog("a "+tc.level)); rec.level != tc.want || rec.attrs["logger"] != "mcptest" {
			t.Errorf("%s: logged at %v by %q; want %v by mcptest", tc.level, rec.level, rec.attrs["logger"], tc.want)
		}
	}
	// Below the level agentd asked for: the server sends nothing.
	callText(t, conn, "log", map[string]any{"text": "chatter", "level": "debug"})
	callText(t, conn, "log", map[string]any{"text": "after the chatter"})
	log.waitFor(t, "the message after", isLog("after the chatter"))
	if _, ok := log.find(isLog("chatter")); ok {
		t.Error("a debug message was logged; agentd asks for info and above")
	}
}

// blockingCall connects to the Tools fake, which writes each
// notifications/cancelled it receives to file, and starts its block tool
// with ctx; it returns once the tool runs, with the connection and the
// call's end.
func blockingCall(t *testing.T, ctx context.Context) (conn *Conn, done <-chan error, file string) {
	t.Helper()
	log := newRecorder()
	spec := stdioSpec(t, mcptest.Tools)
	file = filepath.Join(t.TempDir(), "cancelled")
	spec.Env[mcptest.CancelFileEnv] = file
	conn = dial(t, spec, roomyTimeout, log)
	ended := make(chan error, 1)
	go func() {
		_, err := conn.CallTool(ctx, "block", nil)
		ended <- err
	}()
	log.waitFor(t, "the block tool running", func(r record) bool { return r.attrs["line"] == mcptest.BlockRunning })
	return conn, ended, file
}

// X-M6: a call whose caller gives up is cancelled at the server: the
// go-sdk sends notifications/cancelled, which the server receives.
func TestCancelReachesTheServer(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithCancel(t.Context())
	conn, done, file := blockingCall(t, ctx)
	cancel()
	if err := <-done; err == nil {
		t.Fatal("the cancelled call succeeded")
	}
	lines := mcptest.WaitCancelled(t, file)
	if len(lines) != 1 || !strings.HasPrefix(lines[0], "cancelled ") {
		t.Errorf("the server received %q; want one notifications/cancelled", lines)
	}
	// The connection serves on.
	if text := callText(t, conn, "echo", map[string]any{"text": "still here"}); text != "still here" {
		t.Errorf("a call after the cancelled one answered %q", text)
	}
}

// X-M6: closing a stdio connection with a call in flight (a bridge session
// that closes as its generation is cancelled) cancels the call and tells
// the server so before its stdin closes.
func TestCloseCancelsAtTheServer(t *testing.T) {
	t.Parallel()
	conn, done, file := blockingCall(t, t.Context())
	_ = conn.Close()
	if err := <-done; err == nil {
		t.Fatal("the call the close cut short succeeded")
	}
	if lines := mcptest.WaitCancelled(t, file); len(lines) != 1 {
		t.Errorf("the server received %q; want one notifications/cancelled", lines)
	}
}
