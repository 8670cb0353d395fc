package mcpconn

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/agentd/agentd/internal/fault"
	"github.com/agentd/agentd/internal/mcptest"
)

const (
	// grace keeps the SIGTERM and SIGKILL escalation short.
	grace = 200 * time.Millisecond
	// roomyTimeout leaves a loaded machine plenty of time: it bounds only
	// what must not fail (X-H6).
	roomyTimeout = 2 * time.Minute
	// shortTimeout is the read_timeout of the timeout tests. Their
	// connections are dialled with roomyTimeout and then viewed with
	// shortTimeout, so that it bounds the exchange under test, never the
	// handshake of a test binary that a busy machine is slow to start
	// (X-H6).
	shortTimeout = time.Second
)

func stdioSpec(t *testing.T, server string) StdioSpec {
	t.Helper()
	exe, env := mcptest.Command(t, server)
	return StdioSpec{Name: "fake " + server, Command: exe, Env: env, TerminateGrace: grace}
}

func dial(t *testing.T, spec StdioSpec, readTimeout time.Duration, log *recorder) *Conn {
	t.Helper()
	opts := Options{}
	if log != nil {
		opts.Logger = slog.New(log)
	}
	conn, err := DialStdio(t.Context(), spec, readTimeout, opts)
	if err != nil {
		t.Fatalf("DialStdio(%s): %v", spec.Name, err)
	}
	t.Cleanup(func() { _ = conn.Close() })
	return conn
}

// callText calls a tool and returns its text blocks joined.
func callText(t *testing.T, conn *Conn, tool string, args map[string]any) string {
	t.Helper()
	res, err := conn.CallTool(t.Context(), tool, args)
	if err != nil {
		t.Fatalf("CallTool(%s): %v", tool, err)
	}
	var texts []string
	for _, c := range res.Content {
		if tc, ok := c.(*mcp.TextContent); ok {
			texts = append(texts, tc.Text)
		}
	}
	return strings.Join(texts, "\n")
}

func callPid(t *testing.T, conn *Conn, tool string) int {
	t.Helper()
	out := callText(t, conn, tool, nil)
	pid, err := strconv.Atoi(out)
	if err != nil {
		t.Fatalf("%s returned %q, not a pid", tool, out)
	}
	return pid
}

func TestDialStdio(t *testing.T) {
	t.Parallel()
	spec := stdioSpec(t, mcptest.Tools)
	// The server exits once its stdin closes, so Close returns no error,
	// however long a busy machine takes to let it (X-H6).
	spec.TerminateGrace = roomyTimeout
	conn := dial(t, spec, roomyTimeout, nil)
	if conn.Name() != spec.Name {
		t.Errorf("Name() = %q, want %q", conn.Name(), spec.Name)
	}
	pid := conn.Pid()
	if got := callPid(t, conn, "pid"); got != pid {
		t.Errorf("the server runs as pid %d, Pid() = %d", got, pid)
	}

	// Two tools to a page: ListTools follows the cursor.
	tools, err := conn.ListTools(t.Context())
	if err != nil {
		t.Fatalf("ListTools: %v", err)
	}
	var names []string
	for _, tool := range tools {
		names = append(names, tool.Name)
	}
	want := []string{"add", "add_tool", "big", "block", "crash", "echo", "elicit", "env", "fail", "hang", "log", "media", "meta", "no_schema", "pid", "progress", "raw_args", "rpc_error", "sample", "stall", "stderr", "two_texts"}
	if diff := cmp.Diff(want, names); diff != "" {
		t.Errorf("ListTools names (-want +got):\n%s", diff)
	}

	if got := callText(t, conn, "echo", map[string]any{"text": "hello"}); got != "hello" {
		t.Errorf("echo = %q, want hello", got)
	}
	// No arguments are sent as {}, never null, which strict servers reject.
	if got := callText(t, conn, "raw_args", nil); got != "{}" {
		t.Errorf("nil arguments arrived as %q, want {}", got)
	}
	res, err := conn.CallTool(t.Context(), "fail", map[string]any{"text": "boom"})
	if err != nil || !res.IsError {
		t.Errorf("fail = %+v, %v; want an isError result, no error", res, err)
	}
	// A tool's JSON-RPC error comes back as such, for the caller to flatten.
	var rpcErr *jsonrpc.Error
	if _, err := conn.CallTool(t.Context(), "rpc_error", map[string]any{"text": "bad"}); !errors.As(err, &rpcErr) || rpcErr.Message != "bad" {
		t.Errorf("rpc_error: err = %v, want the JSON-RPC error with message bad", err)
	}

	// R-L4: Close stops the process before it returns; it is idempotent.
	if err := conn.Close(); err != nil {
		t.Errorf("Close: %v", err)
	}
	if !mcptest.Gone(pid) {
		t.Errorf("process %d runs after Close returned", pid)
	}
	if err := conn.Close(); err != nil {
		t.Errorf("second Close: %v", err)
	}
}

// TestDialStdioReadTimeout: R-L1. read_timeout bounds the whole exchange,
// whatever the server sends meanwhile; a miss kills the process with an
// error naming the server and the request; the next dial is a new process.
func TestDialStdioReadTimeout(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name    string
		server  string
		request string
		call    func(ctx context.Context, conn *Conn) error
	}{
		{
			name:    "R-L1 tools/call that never answers",
			server:  mcptest.Tools,
			request: `tools/call for "hang"`,
			call: func(ctx context.Context, conn *Conn) error {
				_, err := conn.CallTool(ctx, "hang", nil)
				return err
			},
		},
		{
			name:    "R-L1 progress and pings do not extend the deadline",
			server:  mcptest.Tools,
			request: `tools/call for "stall"`,
			call: func(ctx context.Context, conn *Conn) error {
				_, err := conn.CallTool(ctx, "stall", nil)
				return err
			},
		},
		{
			name:    "R-L1 tools/list that never answers",
			server:  mcptest.HangList,
			request: "tools/list",
			call: func(ctx context.Context, conn *Conn) error {
				_, err := conn.ListTools(ctx)
				return err
			},
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			log := newRecorder()
			spec := stdioSpec(t, tc.server)
			conn := dial(t, spec, roomyTimeout, log).View(spec.Name, shortTimeout, Owner{})
			pid := conn.Pid()

			// The caller's own deadline is far away: only read_timeout can
			// end the exchange with MCP_TIMEOUT.
			ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
			defer cancel()
			checkTimeout(t, tc.call(ctx, conn), spec.Name, tc.request)
			mcptest.WaitGone(t, pid)
			if tc.server == mcptest.Tools && strings.Contains(tc.request, "stall") {
				// The server did talk during the exchange: a ping it sent
				// was answered.
				log.waitFor(t, "the stalling server's ping was answered", func(r record) bool {
					return r.attrs["line"] == "mcptest: ping answered"
				})
			}

			next := dial(t, spec, roomyTimeout, nil)
			if next.Pid() == pid {
				t.Errorf("the next dial reused pid %d", pid)
			}
			if got := callText(t, next, "echo", map[string]any{"text": "again"}); got != "again" {
				t.Errorf("echo on the fresh process = %q", got)
			}
		})
	}
}

// TestDialStdioStopped: X-L8. A server whose process ends before it
// answers (it crashed, or was killed; here during a call, then during a
// handshake) fails the exchange with ErrStopped, Unavailable, naming the
// server and the request; so does every later exchange of the connection.
func TestDialStdioStopped(t *testing.T) {
	t.Parallel()
	spec := stdioSpec(t, mcptest.Tools)
	conn := dial(t, spec, roomyTimeout, nil)
	_, err := conn.CallTool(t.Context(), "crash", nil)
	checkStopped(t, err, spec.Name, `tools/call for "crash"`)
	_, err = conn.CallTool(t.Context(), "echo", map[string]any{"text": "after"})
	checkStopped(t, err, spec.Name, `tools/call for "echo"`)

	_, err = DialStdio(t.Context(), StdioSpec{Name: "false", Command: "/bin/false", TerminateGrace: grace}, roomyTimeout, Options{})
	checkStopped(t, err, "false", "the handshake")
}

func checkStopped(t *testing.T, err error, server, request string) {
	t.Helper()
	var fe *fault.Error
	if !errors.Is(err, ErrStopped) || !errors.As(err, &fe) || fe.Kind != fault.Unavailable || fe.Reason != "MCP_SERVER_STOPPED" {
		t.Fatalf("err = %v, want ErrStopped, a fault.Unavailable with reason MCP_SERVER_STOPPED", err)
	}
	if diff := cmp.Diff(map[string]string{"server": server, "request": request}, fe.Metadata); diff != "" {
		t.Errorf("metadata (-want +got):\n%s", diff)
	}
	if want := fmt.Sprintf("the MCP server %q stopped during %s", server, request); err.Error() != want {
		t.Errorf("error %q, want %q", err, want)
	}
}

func checkTimeout(t *testing.T, err error, server, request string) {
	t.Helper()
	var fe *fault.Error
	if !errors.As(err, &fe) || fe.Kind != fault.Timeout || fe.Reason != "MCP_TIMEOUT" {
		t.Fatalf("err = %v, want a fault.Timeout with reason MCP_TIMEOUT", err)
	}
	want := map[string]string{"server": server, "request": request, "read_timeout": shortTimeout.String()}
	if diff := cmp.Diff(want, fe.Metadata); diff != "" {
		t.Errorf("metadata (-want +got):\n%s", diff)
	}
	for _, s := range []string{server, request} {
		if !strings.Contains(err.Error(), s) {
			t.Errorf("error %q does not name %s", err, s)
		}
	}
}

// TestDialStdioHandshakeTimeout: R-L1. The handshake is bounded too, and a
// server that misses it does not survive the failed dial.
func TestDialStdioHandshakeTimeout(t *testing.T) {
	t.Parallel()
	spec := stdioSpec(t, mcptest.Mute)
	pidFile := filepath.Join(t.TempDir(), "pids")
	spec.Env[mcptest.PidFileEnv] = pidFile
	conn, err := DialStdio(t.Context(), spec, shortTimeout, Options{})
	if err == nil {
		_ = conn.Close()
		t.Fatal("DialStdio succeeded against a server that never answers")
	}
	checkTimeout(t, err, spec.Name, "the handshake")
	// The process was stopped before DialStdio returned; it may have been
	// killed before it could write its pid.
	for _, pid := range mcptest.Pids(t, pidFile) {
		if !mcptest.Gone(pid) {
			t.Errorf("process %d runs after the failed dial", pid)
		}
	}
}

func TestDialStdioCallerCancel(t *testing.T) {
	t.Parallel()
	conn := dial(t, stdioSpec(t, mcptest.Tools), roomyTimeout, nil)
	ctx, cancel := context.WithCancel(t.Context())
	errc := make(chan error, 1)
	go func() {
		_, err := conn.CallTool(ctx, "hang", nil)
		errc <- err
	}()
	cancel()
	// The caller gave up: that is the caller's error, not the server's
	// timeout, and the server is not killed for it.
	if err := <-errc; !errors.Is(err, context.Canceled) {
		t.Fatalf("err = %v, want context.Canceled", err)
	}
	if got := callText(t, conn, "echo", map[string]any{"text": "still here"}); got != "still here" {
		t.Errorf("echo after a cancelled call = %q", got)
	}
}

// TestDialStdioBanner: a server that prints a banner and log lines on
// stdout keeps its session; the lines are dropped and logged with the
// server's name.
func TestDialStdioBanner(t *testing.T) {
	t.Parallel()
	log := newRecorder()
	spec := stdioSpec(t, mcptest.Banner)
	conn := dial(t, spec, roomyTimeout, log)
	if _, err := conn.ListTools(t.Context()); err != nil {
		t.Fatalf("ListTools: %v", err)
	}
	if got := callText(t, conn, "noisy", nil); got != "ok" {
		t.Errorf("noisy = %q", got)
	}
	if got := callText(t, conn, "echo", map[string]any{"text": "after the noise"}); got != "after the noise" {
		t.Errorf("echo = %q", got)
	}
	for _, line := range []string{"Fake MCP server v1.0 starting", "[INFO] listening on stdio", "INFO handling noisy"} {
		rec := log.waitFor(t, "dropped "+line, func(r record) bool { return r.attrs["line"] == line })
		if rec.level != slog.LevelWarn || rec.attrs["server"] != spec.Name {
			t.Errorf("record for %q = %+v, want a warning naming %q", line, rec, spec.Name)
		}
	}
}

// TestDialStdioStubbornGroup: X-L7. Close stops a server that ignores its
// stdin closing and SIGTERM, and the grandchild in its process group.
func TestDialStdioStubbornGroup(t *testing.T) {
	t.Parallel()
	spec := stdioSpec(t, mcptest.Stubborn)
	conn := dial(t, spec, roomyTimeout, nil)
	pid := conn.Pid()
	grandchild := callPid(t, conn, "grandchild")
	t.Cleanup(func() {
		if t.Failed() {
			_ = syscall.Kill(grandchild, syscall.SIGKILL)
		}
	})
	if mcptest.Gone(grandchild) {
		t.Fatalf("grandchild %d is not running", grandchild)
	}

	err := conn.Close()
	if err == nil || !strings.Contains(err.Error(), "SIGTERM") || !strings.Contains(err.Error(), spec.Name) {
		t.Errorf("Close = %v, want an error naming %q and SIGTERM", err, spec.Name)
	}
	if !mcptest.Gone(pid) {
		t.Errorf("server %d runs after Close returned", pid)
	}
	mcptest.WaitGone(t, grandchild)
	if again := conn.Close(); !errors.Is(again, err) && (again == nil || again.Error() != err.Error()) {
		t.Errorf("second Close = %v, want %v again", again, err)
	}
}

// TestDialStdioArgsEnv: R-D5. Arguments arrive in order, env is set, unset
// removes a variable, and nothing of the parent's environment beyond the
// inherited list reaches the child.
func TestDialStdioArgsEnv(t *testing.T) {
	// Not parallel: t.Setenv.
	t.Setenv("AGENTD_TEST_PROVIDER_KEY", "sk-must-not-leak")
	t.Setenv("TZ", "Europe/Paris")
	spec := stdioSpec(t, mcptest.Tools)
	spec.Args = []string{"first", "two words", "--flag=x", ""}
	spec.Env["MCPTEST_A"] = "alpha"
	spec.Env["MCPTEST_B"] = "beta"
	spec.Unset = []string{"MCPTEST_B", "PATH"}
	conn := dial(t, spec, roomyTimeout, nil)

	res, err := conn.CallTool(t.Context(), "env", nil)
	if err != nil {
		t.Fatalf("CallTool(env): %v", err)
	}
	data, err := json.Marshal(res.StructuredContent)
	if err != nil {
		t.Fatal(err)
	}
	var got mcptest.EnvOutput
	if err := json.Unmarshal(data, &got); err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(spec.Args, got.Args); diff != "" {
		t.Errorf("args (-want +got):\n%s", diff)
	}
	if got.Env["MCPTEST_A"] != "alpha" {
		t.Errorf("MCPTEST_A = %q, want alpha", got.Env["MCPTEST_A"])
	}
	if got.Env["TZ"] != "Europe/Paris" {
		t.Errorf("TZ = %q, want it inherited", got.Env["TZ"])
	}
	for _, k := range []string{"MCPTEST_B", "PATH", "AGENTD_TEST_PROVIDER_KEY"} {
		if v, ok := got.Env[k]; ok {
			t.Errorf("%s = %q reached the child", k, v)
		}
	}
	for k := range got.Env {
		if _, set := spec.Env[k]; !set && !slices.Contains(inheritedEnv, k) {
			t.Errorf("%s reached the child: not inherited, not set", k)
		}
	}
}

// TestDialStdioStderr: each stderr line is logged with the server's name
// and pid, bounded in length.
func TestDialStdioStderr(t *testing.T) {
	t.Parallel()
	log := newRecorder()
	spec := stdioSpec(t, mcptest.Tools)
	conn := dial(t, spec, roomyTimeout, log)
	pid := strconv.Itoa(conn.Pid())

	isStderr := func(line string) func(record) bool {
		return func(r record) bool { return r.msg == "mcp server stderr" && r.attrs["line"] == line }
	}
	rec := log.waitFor(t, "the start-up line", isStderr("mcptest: tools starting"))
	want := map[string]string{"server": spec.Name, "pid": pid, "line": "mcptest: tools starting"}
	if diff := cmp.Diff(want, rec.attrs); diff != "" {
		t.Errorf("stderr record attributes (-want +got):\n%s", diff)
	}

	callText(t, conn, "stderr", map[string]any{"text": "line one\r"})
	log.waitFor(t, "a CRLF line", isStderr("line one"))

	long := strings.Repeat("x", 3*maxLogLine)
	callText(t, conn, "stderr", map[string]any{"text": long})
	callText(t, conn, "stderr", map[string]any{"text": "after the long line"})
	log.waitFor(t, "the long line, bounded", isStderr(long[:maxLogLine]))
	log.waitFor(t, "the line after the long one", isStderr("after the long line"))
}

func TestDialStdioStartFailure(t *testing.T) {
	t.Parallel()
	spec := StdioSpec{Name: "missing", Command: filepath.Join(t.TempDir(), "secret-dir", "mcp-server-x"), Env: map[string]string{"TOKEN": "sk-secret"}}
	_, err := DialStdio(t.Context(), spec, roomyTimeout, Options{})
	if k := fault.KindOf(err); k != fault.Unavailable {
		t.Fatalf("err = %v (kind %v), want Unavailable", err, k)
	}
	msg := err.Error()
	for _, s := range []string{`"missing"`, "mcp-server-x"} {
		if !strings.Contains(msg, s) {
			t.Errorf("error %q does not name %s", msg, s)
		}
	}
	for _, s := range []string{"secret-dir", "sk-secret", os.TempDir()} {
		if strings.Contains(msg, s) {
			t.Errorf("error %q contains %q", msg, s)
		}
	}
}
