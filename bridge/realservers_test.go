package bridge

import (
	"bytes"
	"fmt"
	"io"
	"math/rand/v2"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/agentd/agentd/internal/logtest"

	"github.com/google/go-cmp/cmp"
	"google.golang.org/genproto/googleapis/rpc/errdetails"
	"google.golang.org/grpc/codes"
	"google.golang.org/protobuf/testing/protocmp"
	"google.golang.org/protobuf/types/known/durationpb"

	bridgev1 "github.com/agentd/agentd/gen/go/agentd/bridge/v1"
	"github.com/agentd/agentd/internal/config"
	"github.com/agentd/agentd/internal/mcptest"
)

// The real servers: MCP servers published on npm that nobody here wrote,
// installed by `npm ci` into the repository's node_modules.
const (
	everythingScript = "server-everything/dist/index.js"
	filesystemScript = "server-filesystem/dist/index.js"
	// requireNPMEnv makes missing npm servers fail the tests instead of
	// skipping them (make test sets it).
	requireNPMEnv = "AGENTD_REQUIRE_NPM_SERVERS"
	// markEnv marks the processes a test starts, so that it can find them
	// among the test binary's children.
	markEnv = "AGENTD_TEST_MARK"
)

// realNode returns the node executable and the absolute path of each
// script under node_modules/@modelcontextprotocol. When they are missing
// the test is skipped, or fails if requireNPMEnv is 1.
func realNode(t *testing.T, scripts ...string) (node string, paths []string) {
	t.Helper()
	missing := func(what string) {
		t.Helper()
		if os.Getenv(requireNPMEnv) == "1" {
			t.Fatalf("%s is missing; %s=1 requires the real MCP servers (run npm ci)", what, requireNPMEnv)
		}
		t.Skipf("%s is missing; run npm ci to test against the real MCP servers", what)
	}
	base, err := filepath.Abs(filepath.Join("..", "node_modules", "@modelcontextprotocol"))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(base); err != nil {
		missing("node_modules/@modelcontextprotocol")
	}
	for _, s := range scripts {
		p := filepath.Join(base, s)
		if _, err := os.Stat(p); err != nil {
			missing("node_modules/@modelcontextprotocol/" + s)
		}
		paths = append(paths, p)
	}
	node, err = exec.LookPath("node")
	if err != nil {
		missing("node")
	}
	if node, err = filepath.Abs(node); err != nil {
		t.Fatal(err)
	}
	return node, paths
}

// liveChildren lists the test binary's child processes that still run
// (zombies excluded), as "pid cmdline". With a mark, only those whose
// environment holds markEnv=mark.
func liveChildren(t *testing.T, mark string) []string {
	t.Helper()
	entries, err := os.ReadDir("/proc")
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		stat, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
		if err != nil {
			continue // gone meanwhile
		}
		// "pid (comm) state ppid ...": comm may hold spaces and parentheses.
		i := bytes.LastIndexByte(stat, ')')
		if i < 0 {
			continue
		}
		fields := strings.Fields(string(stat[i+1:]))
		if len(fields) < 2 || fields[0] == "Z" || fields[1] != strconv.Itoa(os.Getpid()) {
			continue
		}
		if mark != "" {
			env, err := os.ReadFile(fmt.Sprintf("/proc/%d/environ", pid))
			if err != nil || !slices.Contains(strings.Split(string(env), "\x00"), markEnv+"="+mark) {
				continue
			}
		}
		cmdline, _ := os.ReadFile(fmt.Sprintf("/proc/%d/cmdline", pid))
		out = append(out, fmt.Sprintf("%d %s", pid, strings.ReplaceAll(strings.TrimRight(string(cmdline), "\x00"), "\x00", " ")))
	}
	return out
}

// checkNoChildren fails the test if, when it ends, a process it marked
// (every child of the test binary, when mark is "") still runs. Call it
// before starting anything, so that it runs after every other cleanup.
func checkNoChildren(t *testing.T, mark string) {
	t.Helper()
	t.Cleanup(func() {
		if left := liveChildren(t, mark); len(left) > 0 {
			t.Errorf("X-L7 child processes left after the test: %q", left)
		}
	})
}

// freePort returns a port that was free on 127.0.0.1 a moment ago, below
// the kernel's ephemeral range (Linux's is 32768-60999): a listener that
// another test opens on port 0 meanwhile cannot be given it before the
// server binds it (and answer the check that the server listens).
func freePort(t *testing.T) int {
	t.Helper()
	for range 100 {
		port := 20000 + rand.IntN(12000)
		l, err := net.Listen("tcp", net.JoinHostPort("127.0.0.1", strconv.Itoa(port)))
		if err != nil {
			continue
		}
		l.Close()
		return port
	}
	t.Fatal("no free port in 20000-31999")
	return 0
}

// startHTTPServer starts `node script mode` with PORT set, in its own
// process group, marked with mark, and waits until it accepts connections
// on 127.0.0.1; it returns the port. When the test ends the whole group
// is killed and the process reaped. A port taken meanwhile by someone else
// makes it try another.
func startHTTPServer(t *testing.T, node, script, mode, mark string) int {
	t.Helper()
	for attempt := 1; ; attempt++ {
		port, out, listening := tryHTTPServer(t, node, script, mode, mark)
		if listening {
			return port
		}
		if attempt == 3 || !strings.Contains(out, "EADDRINUSE") && !strings.Contains(out, "already in use") {
			t.Fatalf("%s %s exited before listening on port %d:\n%s", script, mode, port, out)
		}
		t.Logf("port %d was taken; trying another", port)
	}
}

// tryHTTPServer is one attempt of startHTTPServer: it reports whether the
// server listens, or returns its output once it has exited.
func tryHTTPServer(t *testing.T, node, script, mode, mark string) (port int, output string, listening bool) {
	t.Helper()
	port = freePort(t)
	out := new(logtest.Logs)
	cmd := exec.Command(node, script, mode)
	cmd.Env = append(os.Environ(), "PORT="+strconv.Itoa(port), markEnv+"="+mark)
	cmd.Stdout, cmd.Stderr = out, out
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		t.Fatalf("starting %s %s: %v", script, mode, err)
	}
	exited := make(chan struct{})
	go func() {
		_ = cmd.Wait()
		close(exited)
	}()
	t.Cleanup(func() {
		_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
		<-exited
		if t.Failed() {
			t.Logf("%s %s output:\n%s", script, mode, out)
		}
	})
	addr := net.JoinHostPort("127.0.0.1", strconv.Itoa(port))
	deadline := time.Now().Add(roomyTimeout)
	for {
		if conn, err := net.DialTimeout("tcp", addr, time.Second); err == nil {
			_ = conn.Close()
			return port, "", true
		}
		select {
		case <-exited:
			return port, out.String(), false
		case <-time.After(20 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s %s does not listen on port %d:\n%s", script, mode, port, out)
		}
	}
}

// realFixture is a service that allows node as a command and private
// networks (the servers listen on 127.0.0.1).
func realFixture(t *testing.T, node string) *fixture {
	t.Helper()
	return newFixtureWith(t, func(c *config.Bridge) {
		c.AllowedCommands = append(c.AllowedCommands, node)
		c.AllowPrivateNetworks = true
	})
}

func toolNames(t *testing.T, f *fixture, session string) []string {
	t.Helper()
	res, err := f.client.ListTools(t.Context(), &bridgev1.ListToolsRequest{SessionId: session})
	if err != nil {
		t.Fatalf("ListTools: %v", err)
	}
	if len(res.GetServers()) != 1 {
		t.Fatalf("ListTools = %v, want one server", res)
	}
	var names []string
	for _, tool := range res.GetServers()[0].GetTools() {
		if tool.GetInputSchema().AsMap()["type"] != "object" {
			t.Errorf("tool %s: input schema %v, want an object schema", tool.GetName(), tool.GetInputSchema())
		}
		names = append(names, tool.GetName())
	}
	return names
}

// closeRealSession closes a session and checks that its stream ends.
func closeRealSession(t *testing.T, f *fixture, session string, stream interface {
	Recv() (*bridgev1.OpenSessionResponse, error)
}) {
	t.Helper()
	if _, err := f.client.CloseSession(t.Context(), &bridgev1.CloseSessionRequest{SessionId: session}); err != nil {
		t.Fatalf("CloseSession: %v", err)
	}
	for {
		// A server may have announced a tool list change meanwhile.
		_, err := stream.Recv()
		if err == io.EOF {
			return
		}
		if err != nil {
			t.Fatalf("stream after CloseSession: %v, want EOF", err)
		}
	}
}

// TestRealServerEverything: server-everything, a server nobody here wrote,
// over stdio (an allowed command, X-S1), Streamable HTTP and the legacy
// HTTP+SSE transport (DialHTTP falls back to it): through the service its
// tools are listed (R-T1) and called (R-T3, R-T4), and when the session
// closes no process of the session is left (R-L4, X-L7).
//
// Not parallel with other top-level tests, so that the check for leftover
// children sees only this test's processes; its subtests run in parallel,
// each checking the processes it marked.
func TestRealServerEverything(t *testing.T) {
	node, scripts := realNode(t, everythingScript)
	script := scripts[0]
	checkNoChildren(t, "")
	f := realFixture(t, node)
	tests := []struct {
		name string
		spec func(t *testing.T, mark string) *bridgev1.ServerSpec
	}{
		{"stdio", func(t *testing.T, mark string) *bridgev1.ServerSpec {
			return &bridgev1.ServerSpec{Transport: &bridgev1.ServerSpec_Stdio{Stdio: &bridgev1.StdioTarget{
				Command: node, Args: []string{script, "stdio"}, Env: map[string]string{markEnv: mark},
			}}}
		}},
		{"streamable HTTP", func(t *testing.T, mark string) *bridgev1.ServerSpec {
			port := startHTTPServer(t, node, script, "streamableHttp", mark)
			return &bridgev1.ServerSpec{Transport: &bridgev1.ServerSpec_Http{Http: &bridgev1.HTTPTarget{
				Url: fmt.Sprintf("http://127.0.0.1:%d/mcp", port),
			}}}
		}},
		{"SSE", func(t *testing.T, mark string) *bridgev1.ServerSpec {
			port := startHTTPServer(t, node, script, "sse", mark)
			return &bridgev1.ServerSpec{Transport: &bridgev1.ServerSpec_Http{Http: &bridgev1.HTTPTarget{
				Url: fmt.Sprintf("http://127.0.0.1:%d/sse", port),
			}}}
		}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			mark := "everything " + tc.name
			checkNoChildren(t, mark)
			spec := tc.spec(t, mark)
			spec.Name, spec.ReadTimeout = "everything", durationpb.New(roomyTimeout)
			id, stream := open(t, t.Context(), f.client, spec)

			names := toolNames(t, f, id)
			for _, want := range []string{"echo", "get-sum", "get-structured-content", "trigger-long-running-operation"} {
				if !slices.Contains(names, want) {
					t.Errorf("R-T1 tools = %v, want %s among them", names, want)
				}
			}
			calls := []struct {
				tool, args string
				want       *bridgev1.CallToolResponse
			}{
				{"echo", `{"message":"hello from agentd"}`, &bridgev1.CallToolResponse{Output: "Echo: hello from agentd"}},
				{"get-sum", `{"a":2,"b":3.5}`, &bridgev1.CallToolResponse{Output: "The sum of 2 and 3.5 is 5.5."}},
			}
			for _, c := range calls {
				got := call(t, f.client, id, "everything", c.tool, c.args)
				if diff := cmp.Diff(c.want, got, protocmp.Transform()); diff != "" {
					t.Errorf("R-T4 CallTool(%s, %s) (-want +got):\n%s", c.tool, c.args, diff)
				}
			}
			// The server's validation failure reaches the model as data.
			if got := call(t, f.client, id, "everything", "get-sum", `{"a":"two"}`); !got.GetIsError() {
				t.Errorf("R-T4 get-sum with bad arguments = %v, want is_error", got)
			}
			closeRealSession(t, f, id, stream)
		})
	}
}

// TestRealServerFilesystem: server-filesystem over stdio, on a directory
// of the test's: its tools are listed, list_allowed_directories names the
// directory and read_text_file reads a file written there; a path outside
// it is refused as data for the model.
func TestRealServerFilesystem(t *testing.T) {
	node, scripts := realNode(t, filesystemScript)
	checkNoChildren(t, "")
	dir := t.TempDir()
	if resolved, err := filepath.EvalSymlinks(dir); err == nil {
		dir = resolved
	}
	const content = "a note written by the agentd test"
	file := filepath.Join(dir, "note.txt")
	if err := os.WriteFile(file, []byte(content+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	f := realFixture(t, node)
	const mark = "filesystem"
	checkNoChildren(t, mark)
	spec := &bridgev1.ServerSpec{
		Name: "files", ReadTimeout: durationpb.New(roomyTimeout),
		Transport: &bridgev1.ServerSpec_Stdio{Stdio: &bridgev1.StdioTarget{
			Command: node, Args: []string{scripts[0], dir}, Env: map[string]string{markEnv: mark},
		}},
	}
	id, stream := open(t, t.Context(), f.client, spec)

	names := toolNames(t, f, id)
	for _, want := range []string{"read_text_file", "list_allowed_directories", "list_directory", "write_file"} {
		if !slices.Contains(names, want) {
			t.Errorf("R-T1 tools = %v, want %s among them", names, want)
		}
	}
	if got := call(t, f.client, id, "files", "list_allowed_directories", "{}"); got.GetIsError() || !strings.Contains(got.GetOutput(), dir) {
		t.Errorf("list_allowed_directories = %v, want it to name %s", got, dir)
	}
	args := fmt.Sprintf(`{"path":%q}`, file)
	if got := call(t, f.client, id, "files", "read_text_file", args); got.GetIsError() || !strings.Contains(got.GetOutput(), content) {
		t.Errorf("read_text_file = %v, want the file's content", got)
	}
	outside := fmt.Sprintf(`{"path":%q}`, filepath.Join(filepath.Dir(dir), "elsewhere.txt"))
	if got := call(t, f.client, id, "files", "read_text_file", outside); !got.GetIsError() {
		t.Errorf("read_text_file outside the directory = %v, want is_error", got)
	}
	closeRealSession(t, f, id, stream)
}

// httpSpec declares a fake HTTP server.
func httpSpec(name, url, authorization string, readTimeout time.Duration) *bridgev1.ServerSpec {
	return &bridgev1.ServerSpec{
		Name: name, ReadTimeout: durationpb.New(readTimeout),
		Transport: &bridgev1.ServerSpec_Http{Http: &bridgev1.HTTPTarget{Url: url, Authorization: authorization}},
	}
}

// errorInfo returns the ErrorInfo detail of a gRPC error.
func errorInfo(t *testing.T, err error, code codes.Code) (string, *errdetails.ErrorInfo) {
	t.Helper()
	st := wantCode(t, err, code)
	for _, d := range st.Details() {
		if info, ok := d.(*errdetails.ErrorInfo); ok {
			return st.Message(), info
		}
	}
	t.Fatalf("error %v has no ErrorInfo", err)
	return "", nil
}

// TestHTTPServers: fake HTTP servers through the service. A tool's isError
// is data for the model; an HTTP 500 is a failure of the generation
// (Unavailable), never data, and shows no secret (R-X4). The bearer token
// reaches the server (R-D4); a silent server fails with DeadlineExceeded
// naming the server and the request, while a streaming one outlasts
// read_timeout (R-L2); a restarted server's lost session is replaced
// without running the tool twice.
func TestHTTPServers(t *testing.T) {
	t.Parallel()
	f := newFixtureWith(t, func(c *config.Bridge) { c.AllowPrivateNetworks = true })

	t.Run("R-T4 isError is data, HTTP 500 is a failure", func(t *testing.T) {
		t.Parallel()
		ok := mcptest.NewHTTP(t, mcptest.HTTPOptions{Mode: mcptest.Streamable})
		broken := mcptest.NewHTTP(t, mcptest.HTTPOptions{Mode: mcptest.Streamable, FailCalls: true})
		id, _ := open(t, t.Context(), f.client,
			httpSpec("ok", ok.URL, "", roomyTimeout),
			httpSpec("broken", broken.Base+"/tenant-42/mcp?key=sk-query", "tok-secret", roomyTimeout))
		got := call(t, f.client, id, "ok", "fail", `{"text":"boom"}`)
		if diff := cmp.Diff(&bridgev1.CallToolResponse{Output: `{"error":"boom"}`, IsError: true}, got, protocmp.Transform()); diff != "" {
			t.Errorf("isError tool (-want +got):\n%s", diff)
		}
		_, err := f.client.CallTool(t.Context(), &bridgev1.CallToolRequest{SessionId: id, ServerName: "broken", ToolName: "echo", Arguments: `{"text":"hi"}`})
		msg, info := errorInfo(t, err, codes.Unavailable)
		if info.GetReason() != "MCP_UNAVAILABLE" || info.GetMetadata()["server"] != "broken" || info.GetMetadata()["request"] != `tools/call for "echo"` {
			t.Errorf("ErrorInfo = %v, want MCP_UNAVAILABLE naming broken and the request", info)
		}
		for _, s := range []string{"tenant-42", "sk-query", "tok-secret"} {
			if strings.Contains(msg, s) {
				t.Errorf("R-X4 message %q contains %q", msg, s)
			}
		}
		if n := broken.Executions("echo"); n != 0 {
			t.Errorf("echo ran %d times behind the 500", n)
		}
	})

	t.Run("R-D4 bearer token", func(t *testing.T) {
		t.Parallel()
		srv := mcptest.NewHTTP(t, mcptest.HTTPOptions{Mode: mcptest.Streamable, Token: "tok-123"})
		id, _ := open(t, t.Context(), f.client, httpSpec("secured", srv.URL, "tok-123", roomyTimeout), httpSpec("anonymous", srv.URL, "", roomyTimeout))
		if got := call(t, f.client, id, "secured", "authorization", "{}"); got.GetOutput() != "Bearer tok-123" {
			t.Errorf("the server saw Authorization %q, want Bearer tok-123", got.GetOutput())
		}
		_, err := f.client.CallTool(t.Context(), &bridgev1.CallToolRequest{SessionId: id, ServerName: "anonymous", ToolName: "echo"})
		// X-M3: a refusal is Unauthenticated, naming the server.
		msg, _ := errorInfo(t, err, codes.Unauthenticated)
		if !strings.Contains(msg, "requires authorization") || !strings.Contains(msg, `"anonymous"`) {
			t.Errorf("message %q does not say the server refused anonymous", msg)
		}
	})

	t.Run("R-L2 read_timeout", func(t *testing.T) {
		t.Parallel()
		srv := mcptest.NewHTTP(t, mcptest.HTTPOptions{Mode: mcptest.Streamable})
		id, _ := open(t, t.Context(), f.client, httpSpec("slow", srv.URL, "", time.Second))
		if got := call(t, f.client, id, "slow", "stream", "{}"); got.GetIsError() || got.GetOutput() != fmt.Sprintf("sent %d notifications", mcptest.StreamTicks) {
			t.Errorf("R-L2 a stream that keeps sending = %v, want it to finish", got)
		}
		_, err := f.client.CallTool(t.Context(), &bridgev1.CallToolRequest{SessionId: id, ServerName: "slow", ToolName: "silent"})
		msg, info := errorInfo(t, err, codes.DeadlineExceeded)
		want := &errdetails.ErrorInfo{Reason: "MCP_TIMEOUT", Domain: "agentd", Metadata: map[string]string{
			"server": "slow", "request": `tools/call for "silent"`, "read_timeout": time.Second.String(),
		}}
		if diff := cmp.Diff(want, info, protocmp.Transform()); diff != "" {
			t.Errorf("ErrorInfo (-want +got):\n%s", diff)
		}
		if !strings.Contains(msg, `"slow"`) || !strings.Contains(msg, "silent") {
			t.Errorf("message %q does not name the server and the request", msg)
		}
		// The next call works, on a new connection.
		if got := call(t, f.client, id, "slow", "echo", `{"text":"again"}`); got.GetOutput() != "again" {
			t.Errorf("echo after the timeout = %v", got)
		}
		if n := srv.Executions("silent"); n != 1 {
			t.Errorf("silent ran %d times", n)
		}
	})

	t.Run("restarted server", func(t *testing.T) {
		t.Parallel()
		srv := mcptest.NewHTTP(t, mcptest.HTTPOptions{Mode: mcptest.Streamable})
		id, _ := open(t, t.Context(), f.client, httpSpec("restarting", srv.URL, "", roomyTimeout))
		for i, restart := range []bool{false, true, false} {
			if restart {
				srv.Restart()
			}
			if got := call(t, f.client, id, "restarting", "count", "{}"); got.GetOutput() != strconv.Itoa(i+1) {
				t.Errorf("count #%d = %v", i+1, got)
			}
		}
		if n := srv.Executions("count"); n != 3 {
			t.Errorf("count ran %d times for 3 calls", n)
		}
		if n := srv.Handshakes(); n != 2 {
			t.Errorf("handshakes = %d, want 2", n)
		}
	})
}
