// Package mcptest runs fake MCP servers for the bridge's tests by
// re-executing the test binary, the go-sdk's own trick: a test package's
// TestMain calls Main first, and Command returns what starts a named fake
// as a stdio child. It also tells whether a process is gone.
//
// The fakes are small go-sdk servers. Each writes "mcptest: <name>
// starting" to stderr and, when AGENTD_MCPTEST_PIDFILE is set in its
// environment, appends its pid to that file, so a test can see that a
// process was started, and which.
package mcptest

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/exec"
	"os/signal"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/agentd/agentd/internal/mcpdemo"
)

// The fake servers.
const (
	// Tools is a well-behaved server with the tools listed in newServer,
	// two to a tools/list page.
	Tools = "tools"
	// Demo is agentd's own demo server (internal/mcpdemo).
	Demo = "demo"
	// Banner is Tools, but it prints a banner and log lines on stdout before
	// its first JSON-RPC message, and its tool "noisy" prints a log line on
	// stdout mid-session.
	Banner = "banner"
	// Stubborn is Tools, but it ignores SIGTERM, outlives its stdin and
	// starts a grandchild in its process group that ignores SIGTERM too;
	// its tool "grandchild" returns the grandchild's pid.
	Stubborn = "stubborn"
	// HangList is Tools, but it never answers tools/list.
	HangList = "hanglist"
	// Mute never reads its stdin: the handshake never completes.
	Mute = "mute"
	// SlowStart is Tools, but it waits half a second before it reads its
	// stdin, like a server with a heavy start-up.
	SlowStart = "slowstart"
	// ExitOnUnknown is Tools, but it exits when its first request is not
	// initialize, as some servers do on a request they do not know (the
	// go-sdk's 2026-07-28 server/discover probe ends them).
	ExitOnUnknown = "exitonunknown"
)

// TTLEnv names the ttlMs (in milliseconds) the stdio fakes put on their
// 2026-07-28 tools/list results; unset: an hour, so that a cache keeps
// their lists as long as its own TTL says.
const TTLEnv = "AGENTD_MCPTEST_TTLMS"

// ProbeFileEnv names a file to which ExitOnUnknown appends the method of
// a first request that made it exit.
const ProbeFileEnv = "AGENTD_MCPTEST_PROBEFILE"

// Probes reads the lines ExitOnUnknown wrote to a ProbeFileEnv file; a
// missing file holds none.
func Probes(tb testing.TB, path string) []string { return lines(tb, path) }

// cacheable sets the ttlMs of a fake's list results to ttl.
func cacheable(ttl time.Duration) func(context.Context, mcp.Request, *mcp.Cacheable) {
	return func(_ context.Context, _ mcp.Request, c *mcp.Cacheable) {
		c.TTLMs = int(ttl.Milliseconds())
	}
}

// fakeTTL is the stdio fakes' ttlMs: TTLEnv's, or an hour.
func fakeTTL() time.Duration {
	if ms, err := strconv.Atoi(os.Getenv(TTLEnv)); err == nil {
		return time.Duration(ms) * time.Millisecond
	}
	return time.Hour
}

// runExitOnUnknown serves Tools after an initialize first request, and
// exits at once after any other.
func runExitOnUnknown(ctx context.Context) error {
	in := bufio.NewReader(os.Stdin)
	first, err := in.ReadBytes('\n')
	if err != nil {
		return err
	}
	var msg struct {
		Method string `json:"method"`
	}
	if json.Unmarshal(first, &msg) != nil || msg.Method != "initialize" {
		fmt.Fprintf(os.Stderr, "mcptest: unknown first request %q; exiting\n", msg.Method)
		if path := os.Getenv(ProbeFileEnv); path != "" {
			if f, err := os.OpenFile(path, os.O_APPEND|os.O_CREATE|os.O_WRONLY, 0o600); err == nil {
				fmt.Fprintln(f, msg.Method)
				_ = f.Close()
			}
		}
		os.Exit(0)
	}
	return runOn(ctx, newServer(false), bufio.NewReader(io.MultiReader(bytes.NewReader(first), in)))
}

const (
	serverEnv = "AGENTD_MCPTEST_SERVER"
	// PidFileEnv names a file to which a fake appends its pid at start.
	PidFileEnv = "AGENTD_MCPTEST_PIDFILE"
	// CancelFileEnv names a file to which a fake appends a line for each
	// notifications/cancelled it receives, as it receives it: "cancelled
	// <request id> <reason>".
	CancelFileEnv = "AGENTD_MCPTEST_CANCELFILE"
	// BlockRunning is the stderr line of the block tool as it starts.
	BlockRunning = "mcptest: block running"
	// sleeper is Stubborn's grandchild.
	sleeper = "sleeper"
)

var servers = map[string]func(ctx context.Context) error{
	Tools:         func(ctx context.Context) error { return runStdio(ctx, newServer(false)) },
	Demo:          func(ctx context.Context) error { return mcpdemo.Run(ctx, os.Stdin, os.Stdout) },
	Banner:        runBanner,
	Stubborn:      runStubborn,
	HangList:      runHangList,
	Mute:          func(context.Context) error { return sleepForever() },
	ExitOnUnknown: runExitOnUnknown,
	SlowStart: func(ctx context.Context) error {
		time.Sleep(500 * time.Millisecond)
		return runStdio(ctx, newServer(false))
	},
	sleeper: func(context.Context) error { signal.Ignore(syscall.SIGTERM); return sleepForever() },
}

// Main runs the fake server named by the environment and exits, when the
// process was started as one; otherwise it returns at once. Call it first
// in TestMain.
func Main() {
	name, ok := os.LookupEnv(serverEnv)
	if !ok {
		return
	}
	run := servers[name]
	if run == nil {
		fmt.Fprintf(os.Stderr, "mcptest: unknown server %q\n", name)
		os.Exit(2)
	}
	fmt.Fprintf(os.Stderr, "mcptest: %s starting\n", name)
	if path := os.Getenv(PidFileEnv); path != "" {
		f, err := os.OpenFile(path, os.O_APPEND|os.O_CREATE|os.O_WRONLY, 0o600)
		if err == nil {
			fmt.Fprintln(f, os.Getpid())
			_ = f.Close()
		}
	}
	if err := run(context.Background()); err != nil {
		fmt.Fprintf(os.Stderr, "mcptest: %s: %v\n", name, err)
		os.Exit(1)
	}
	os.Exit(0)
}

// Command returns the executable and the environment that start the fake
// server name.
func Command(tb testing.TB, name string) (string, map[string]string) {
	tb.Helper()
	if servers[name] == nil {
		tb.Fatalf("mcptest: unknown server %q", name)
	}
	exe, err := os.Executable()
	if err != nil {
		tb.Fatal(err)
	}
	return exe, map[string]string{serverEnv: name}
}

// DirectEcho starts the fake server name and connects to it with the
// go-sdk alone, as a client without agentd would, and returns a function
// that calls its echo tool once. Each call is bounded like the bridge's
// (read_timeout, 30 s by default), as the go-sdk recommends for every
// call. Benchmarks compare agentd's calls with it: the floor of a tool
// call. The process stops when tb ends, within grace of its stdin closing.
// It speaks the protocol agentd's bridge ends up on with the go-sdk's
// servers, 2026-07-28, so that a comparison measures agentd and not the
// protocol's difference (DirectEchoOn names another: a call on
// 2026-07-28 costs the go-sdk about 1.2× one on 2025-11-25).
func DirectEcho(tb testing.TB, name string, grace time.Duration) func() {
	tb.Helper()
	return DirectEchoOn(tb, name, grace, "2026-07-28")
}

// DirectEchoOn is DirectEcho offering protocol version.
func DirectEchoOn(tb testing.TB, name string, grace time.Duration, version string) func() {
	tb.Helper()
	exe, env := Command(tb, name)
	cmd := exec.Command(exe)
	for k, v := range env {
		cmd.Env = append(cmd.Env, k+"="+v)
	}
	client := mcp.NewClient(&mcp.Implementation{Name: "bench", Version: "1"}, &mcp.ClientOptions{Capabilities: &mcp.ClientCapabilities{}})
	cs, err := client.Connect(context.Background(), &mcp.CommandTransport{Command: cmd, TerminateDuration: grace}, &mcp.ClientSessionOptions{ProtocolVersion: version})
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { _ = cs.Close() })
	params := &mcp.CallToolParams{Name: "echo", Arguments: map[string]any{"text": "hello"}}
	return func() {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		if _, err := cs.CallTool(ctx, params); err != nil {
			tb.Fatal(err)
		}
	}
}

// Arm is one way of making a call that Paired compares with the direct
// one; Unit names the ratio it reports ("bridge/direct").
type Arm struct {
	Unit string
	Call func()
}

// Paired runs rounds of 200 calls, direct first and then each arm, and
// reports for each arm the median of its rounds' ratios to direct. Each
// ratio compares calls made under one machine state, so the load of a
// shared machine disturbs it far less than separate runs' figures.
func Paired(b *testing.B, direct func(), arms ...Arm) {
	b.Helper()
	const calls = 200
	round := func(call func()) time.Duration {
		start := time.Now()
		for range calls {
			call()
		}
		return time.Since(start)
	}
	ratios := make([][]float64, len(arms))
	for b.Loop() {
		td := round(direct)
		for i, arm := range arms {
			ratios[i] = append(ratios[i], float64(round(arm.Call))/float64(td))
		}
	}
	for i, arm := range arms {
		slices.Sort(ratios[i])
		b.ReportMetric(ratios[i][len(ratios[i])/2], arm.Unit)
	}
}

// WatchStderr returns a logger to give agentd's MCP connections and a
// channel closed once a server they run writes line to its stderr (which
// they log as "mcp server stderr"): a test waits for that state, never for
// a duration.
func WatchStderr(line string) (*slog.Logger, <-chan struct{}) {
	h := stderrLine{line: line, seen: make(chan struct{}), once: new(sync.Once)}
	return slog.New(h), h.seen
}

// stderrLine is WatchStderr's slog handler.
type stderrLine struct {
	line string
	seen chan struct{}
	once *sync.Once
}

func (h stderrLine) Enabled(context.Context, slog.Level) bool { return true }

func (h stderrLine) Handle(_ context.Context, r slog.Record) error {
	if r.Message != "mcp server stderr" {
		return nil
	}
	r.Attrs(func(a slog.Attr) bool {
		if a.Key == "line" && a.Value.String() == h.line {
			h.once.Do(func() { close(h.seen) })
		}
		return true
	})
	return nil
}

func (h stderrLine) WithAttrs([]slog.Attr) slog.Handler { return h }
func (h stderrLine) WithGroup(string) slog.Handler      { return h }

// Pids reads the pids appended to a pid file; a missing file holds none.
func Pids(tb testing.TB, path string) []int {
	tb.Helper()
	var pids []int
	for _, f := range lines(tb, path) {
		pid, err := strconv.Atoi(f)
		if err != nil {
			tb.Fatalf("pid file %s: %v", path, err)
		}
		pids = append(pids, pid)
	}
	return pids
}

// Gone reports whether process pid no longer runs: it does not exist, or
// it is a zombie that nobody has reaped yet (an orphaned grandchild waits
// for whatever reaps orphans here; it runs no code any more).
func Gone(pid int) bool {
	if err := syscall.Kill(pid, 0); errors.Is(err, syscall.ESRCH) {
		return true
	}
	stat, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return errors.Is(err, os.ErrNotExist)
	}
	// "pid (comm) state ...": comm may hold spaces and parentheses.
	i := strings.LastIndexByte(string(stat), ')')
	return i >= 0 && i+2 < len(stat) && stat[i+2] == 'Z'
}

// WaitGone fails the test unless process pid is gone within a generous
// deadline. It proves that a process stops, not how fast.
func WaitGone(tb testing.TB, pid int) {
	tb.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for !Gone(pid) {
		if time.Now().After(deadline) {
			tb.Fatalf("process %d still runs", pid)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

func sleepForever() error {
	for {
		time.Sleep(time.Hour)
	}
}

func runStdio(ctx context.Context, s *mcp.Server) error {
	return runOn(ctx, s, bufio.NewReader(os.Stdin))
}

// runOn serves s on in and stdout, as mcp.StdioTransport would, noting
// the ids of the client's subscriptions/listen requests on the way.
func runOn(ctx context.Context, s *mcp.Server, in *bufio.Reader) error {
	return s.Run(ctx, &mcp.IOTransport{Reader: io.NopCloser(&sniffer{in: in}), Writer: nopWriteCloser{os.Stdout}})
}

type nopWriteCloser struct{ io.Writer }

func (nopWriteCloser) Close() error { return nil }

// listenIDs holds the JSON-RPC ids (as JSON) of the client's
// subscriptions/listen requests: the long-lived stream a 2026-07-28
// client opens for change notifications, which it cancels as it closes.
// Such a cancellation ends no call, and the fakes do not record it.
var listenIDs sync.Map

// sniffer passes its input through line by line, noting the ids of
// subscriptions/listen requests.
type sniffer struct {
	in  *bufio.Reader
	buf []byte
}

func (s *sniffer) Read(p []byte) (int, error) {
	if len(s.buf) == 0 {
		line, err := s.in.ReadBytes('\n')
		if len(line) == 0 {
			return 0, err
		}
		var msg struct {
			ID     json.RawMessage `json:"id"`
			Method string          `json:"method"`
		}
		if json.Unmarshal(line, &msg) == nil && msg.Method == "subscriptions/listen" {
			listenIDs.Store(string(msg.ID), true)
		}
		s.buf = line
	}
	n := copy(p, s.buf)
	s.buf = s.buf[n:]
	return n, nil
}

// TextInput is the arguments of echo, fail, rpc_error and stderr.
type TextInput struct {
	Text string `json:"text,omitempty"`
}

// SizeInput is big's arguments.
type SizeInput struct {
	Size int `json:"size"`
}

// CountInput is progress's arguments.
type CountInput struct {
	Count int `json:"count"`
}

// LogInput is log's arguments.
type LogInput struct {
	Text   string `json:"text"`
	Level  string `json:"level,omitempty"`  // "info" when empty
	Logger string `json:"logger,omitempty"` // "mcptest" when empty
}

// LinesInput is flood's arguments.
type LinesInput struct {
	Lines int `json:"lines"`
}

// AddInput is add's arguments.
type AddInput struct {
	A float64 `json:"a"`
	B float64 `json:"b"`
}

// AddOutput is add's structured result.
type AddOutput struct {
	Sum float64 `json:"sum"`
}

// EnvOutput is env's structured result: the process's arguments and
// environment.
type EnvOutput struct {
	Args []string          `json:"args"`
	Env  map[string]string `json:"env"`
}

func text(s string) *mcp.CallToolResult {
	return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: s}}}
}

var objectSchema = map[string]any{"type": "object"}

// newServer returns the Tools server. Its tools:
//
//   - echo {text}: the text; annotated (title "Echo", read-only, closed world);
//   - add {a, b}: {"sum": a+b} as structured content;
//   - fail {text}: an isError result with the text;
//   - rpc_error {text}: a JSON-RPC error whose message is the text;
//   - two_texts: two text blocks, "one" and "two";
//   - media: text, image, audio, resource link and embedded resource blocks;
//   - no_schema: listed without an input schema;
//   - raw_args: the arguments exactly as they came on the wire;
//   - pid: the server's pid;
//   - env: EnvOutput;
//   - stderr {text}: writes the text and a newline to stderr;
//   - hang: never answers;
//   - stall: never answers, but sends progress notifications and pings the
//     client meanwhile, and writes "mcptest: ping answered" to stderr
//     after the first answered ping;
//   - add_tool: adds a tool, so the server sends tools/list_changed;
//   - crash: exits the process with status 3 without answering;
//   - big {size}: a text of size bytes;
//   - progress {count}: sends count progress notifications for the call's
//     progress token (progress 1..count of total count, message "step
//     <i>"), then answers "done";
//   - log {text, level, logger}: sends the text as a log message
//     (notifications/message, if the client's logging level lets it),
//     then answers "ok";
//   - block: writes BlockRunning to stderr, then answers only once the
//     call is cancelled (with the error "cancelled"); the server records the notifications/cancelled it
//     receives in the file named by CancelFileEnv.
//   - elicit {mode}: asks the client for input (elicitation/create), in
//     form mode (ElicitForm) or url mode (ElicitURL), and answers with
//     the client's answer as it came on the wire (ElicitOutput).
//   - sample {prompt, max_tokens, system, tools, image}: asks the client
//     for a completion (sampling/createMessage) and answers with it
//     (SampleOutput), or fails with the client's error.
//
// With stdoutNoise (the Banner server) it also has:
//
//   - noisy: prints a log line on stdout, then answers "ok";
//   - flood {lines}: prints that many lines of garbage on stdout and on
//     stderr, then answers "ok".
func newServer(stdoutNoise bool) *mcp.Server {
	s := mcp.NewServer(&mcp.Implementation{Name: "mcptest", Version: "1"}, &mcp.ServerOptions{PageSize: 2, SetCacheable: cacheable(fakeTTL())})
	readOnly := false
	mcp.AddTool(s, &mcp.Tool{
		Name: "echo", Description: "Returns the text.",
		Annotations: &mcp.ToolAnnotations{Title: "Echo", ReadOnlyHint: true, OpenWorldHint: &readOnly},
	}, func(_ context.Context, _ *mcp.CallToolRequest, in TextInput) (*mcp.CallToolResult, any, error) {
		return text(in.Text), nil, nil
	})
	mcp.AddTool(s, &mcp.Tool{Name: "add", Description: "Adds two numbers."},
		func(_ context.Context, _ *mcp.CallToolRequest, in AddInput) (*mcp.CallToolResult, AddOutput, error) {
			return nil, AddOutput{Sum: in.A + in.B}, nil
		})
	mcp.AddTool(s, &mcp.Tool{Name: "fail", Description: "Fails."},
		func(_ context.Context, _ *mcp.CallToolRequest, in TextInput) (*mcp.CallToolResult, any, error) {
			return nil, nil, errors.New(in.Text)
		})
	s.AddTool(&mcp.Tool{Name: "rpc_error", Description: "Answers with a JSON-RPC error.", InputSchema: objectSchema}, rpcErrorTool)
	s.AddTool(&mcp.Tool{Name: "two_texts", InputSchema: objectSchema},
		func(context.Context, *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
			return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: "one"}, &mcp.TextContent{Text: "two"}}}, nil
		})
	s.AddTool(&mcp.Tool{Name: "media", InputSchema: objectSchema},
		func(context.Context, *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
			return &mcp.CallToolResult{Content: []mcp.Content{
				&mcp.TextContent{Text: "see attachments"},
				&mcp.ImageContent{MIMEType: "image/png", Data: []byte("png-bytes")},
				&mcp.AudioContent{MIMEType: "audio/wav", Data: []byte("wav-bytes")},
				&mcp.ResourceLink{URI: "file:///tmp/report.txt", Name: "report.txt", MIMEType: "text/plain"},
				&mcp.EmbeddedResource{Resource: &mcp.ResourceContents{URI: "mem://note", MIMEType: "text/plain", Text: "a note"}},
			}}, nil
		})
	s.AddTool(&mcp.Tool{Name: "no_schema", Description: "Has no input schema.", InputSchema: objectSchema},
		func(context.Context, *mcp.CallToolRequest) (*mcp.CallToolResult, error) { return text("ok"), nil })
	s.AddTool(&mcp.Tool{Name: "raw_args", InputSchema: objectSchema},
		func(_ context.Context, req *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
			return text(string(req.Params.Arguments)), nil
		})
	s.AddTool(&mcp.Tool{Name: "meta", InputSchema: objectSchema}, metaTool)
	s.AddTool(&mcp.Tool{Name: "pid", InputSchema: objectSchema},
		func(context.Context, *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
			return text(strconv.Itoa(os.Getpid())), nil
		})
	mcp.AddTool(s, &mcp.Tool{Name: "env"},
		func(context.Context, *mcp.CallToolRequest, struct{}) (*mcp.CallToolResult, EnvOutput, error) {
			out := EnvOutput{Args: os.Args[1:], Env: map[string]string{}}
			for _, kv := range os.Environ() {
				k, v, _ := strings.Cut(kv, "=")
				out.Env[k] = v
			}
			return nil, out, nil
		})
	mcp.AddTool(s, &mcp.Tool{Name: "stderr"},
		func(_ context.Context, _ *mcp.CallToolRequest, in TextInput) (*mcp.CallToolResult, any, error) {
			fmt.Fprintln(os.Stderr, in.Text)
			return text("ok"), nil, nil
		})
	s.AddTool(&mcp.Tool{Name: "hang", InputSchema: objectSchema},
		func(context.Context, *mcp.CallToolRequest) (*mcp.CallToolResult, error) { return nil, sleepForever() })
	s.AddTool(&mcp.Tool{Name: "stall", InputSchema: objectSchema}, stall)
	s.AddTool(&mcp.Tool{Name: "add_tool", InputSchema: objectSchema},
		func(context.Context, *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
			s.AddTool(&mcp.Tool{Name: "added", InputSchema: objectSchema},
				func(context.Context, *mcp.CallToolRequest) (*mcp.CallToolResult, error) { return text("added"), nil })
			return text("ok"), nil
		})
	s.AddTool(&mcp.Tool{Name: "crash", InputSchema: objectSchema},
		func(context.Context, *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
			os.Exit(3)
			return nil, nil
		})
	mcp.AddTool(s, &mcp.Tool{Name: "big", Description: "Returns a text of the given size."},
		func(_ context.Context, _ *mcp.CallToolRequest, in SizeInput) (*mcp.CallToolResult, any, error) {
			return text(strings.Repeat("x", in.Size)), nil, nil
		})
	mcp.AddTool(s, &mcp.Tool{Name: "progress", Description: "Reports its progress count times."},
		func(ctx context.Context, req *mcp.CallToolRequest, in CountInput) (*mcp.CallToolResult, any, error) {
			if token := req.Params.GetProgressToken(); token != nil {
				for i := 1; i <= in.Count; i++ {
					_ = req.Session.NotifyProgress(ctx, &mcp.ProgressNotificationParams{
						ProgressToken: token, Progress: float64(i), Total: float64(in.Count), Message: "step " + strconv.Itoa(i),
					})
				}
			}
			return text("done"), nil, nil
		})
	mcp.AddTool(s, &mcp.Tool{Name: "log", Description: "Sends a log message."},
		func(ctx context.Context, req *mcp.CallToolRequest, in LogInput) (*mcp.CallToolResult, any, error) {
			//lint:ignore SA1019 the fake logs as servers of MCP 2025-11-25 do
			level := mcp.LoggingLevel(in.Level)
			if level == "" {
				level = "info"
			}
			logger := in.Logger
			if logger == "" {
				logger = "mcptest"
			}
			//lint:ignore SA1019 the fake logs as servers of MCP 2025-11-25 do
			if err := req.Session.Log(ctx, &mcp.LoggingMessageParams{Level: level, Logger: logger, Data: in.Text}); err != nil {
				return nil, nil, err
			}
			return text("ok"), nil, nil
		})
	s.AddTool(&mcp.Tool{Name: "block", InputSchema: objectSchema},
		func(ctx context.Context, _ *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
			fmt.Fprintln(os.Stderr, BlockRunning)
			<-ctx.Done()
			return nil, errors.New("cancelled")
		})
	addElicit(s, nil)
	addSample(s, nil)
	s.AddReceivingMiddleware(recordCancellations)
	if stdoutNoise {
		mcp.AddTool(s, &mcp.Tool{Name: "flood", Description: "Floods stdout and stderr with garbage."},
			func(_ context.Context, _ *mcp.CallToolRequest, in LinesInput) (*mcp.CallToolResult, any, error) {
				// One write per line, each shorter than PIPE_BUF, so that the
				// SDK's own messages on stdout stay whole.
				line := "garbage " + strings.Repeat("#", 200) + "\n"
				for range in.Lines {
					_, _ = os.Stdout.WriteString(line)
					_, _ = os.Stderr.WriteString(line)
				}
				return text("ok"), nil, nil
			})
		s.AddTool(&mcp.Tool{Name: "noisy", InputSchema: objectSchema},
			func(context.Context, *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
				fmt.Fprintln(os.Stdout, "INFO handling noisy")
				return text("ok"), nil
			})
	}
	// The go-sdk refuses a tool without an input schema; drop it on the way
	// out, as servers in other languages may.
	s.AddReceivingMiddleware(func(next mcp.MethodHandler) mcp.MethodHandler {
		return func(ctx context.Context, method string, req mcp.Request) (mcp.Result, error) {
			res, err := next(ctx, method, req)
			if lt, ok := res.(*mcp.ListToolsResult); ok && err == nil {
				for i, t := range lt.Tools {
					if t.Name == "no_schema" {
						c := *t
						c.InputSchema = nil
						lt.Tools[i] = &c
					}
				}
			}
			return res, err
		}
	})
	return s
}

// recordCancellations appends each notifications/cancelled to the file
// named by CancelFileEnv, if set, before the server acts on it.
func recordCancellations(next mcp.MethodHandler) mcp.MethodHandler {
	return func(ctx context.Context, method string, req mcp.Request) (mcp.Result, error) {
		if path := os.Getenv(CancelFileEnv); path != "" && method == "notifications/cancelled" {
			p, ok := req.GetParams().(*mcp.CancelledParams)
			if ok {
				id, _ := json.Marshal(p.RequestID)
				_, listen := listenIDs.Load(string(id))
				ok = !listen
			}
			if ok {
				if f, err := os.OpenFile(path, os.O_APPEND|os.O_CREATE|os.O_WRONLY, 0o600); err == nil {
					fmt.Fprintf(f, "cancelled %v %s\n", p.RequestID, p.Reason)
					_ = f.Close()
				}
			}
		}
		return next(ctx, method, req)
	}
}

// Cancellations reads the lines that the fakes wrote to a CancelFileEnv
// file; a missing file holds none.
func Cancellations(tb testing.TB, path string) []string {
	tb.Helper()
	return lines(tb, path)
}

// lines reads the non-empty lines of a file the fakes append to; a
// missing file has none.
func lines(tb testing.TB, path string) []string {
	tb.Helper()
	data, err := os.ReadFile(path)
	if errors.Is(err, os.ErrNotExist) {
		return nil
	}
	if err != nil {
		tb.Fatal(err)
	}
	var out []string
	for _, l := range strings.Split(string(data), "\n") {
		if l = strings.TrimSpace(l); l != "" {
			out = append(out, l)
		}
	}
	return out
}

// WaitCancelled fails the test unless a fake writes a cancellation to the
// CancelFileEnv file path within a generous deadline (a bound for what
// never happens, not a guess at how long it takes), and returns the lines.
func WaitCancelled(tb testing.TB, path string) []string {
	tb.Helper()
	deadline := time.Now().Add(time.Minute)
	for {
		if lines := Cancellations(tb, path); len(lines) > 0 {
			return lines
		}
		if time.Now().After(deadline) {
			tb.Fatalf("no notifications/cancelled reached the server (file %s)", path)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

func stall(ctx context.Context, req *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
	reported := false
	for i := 0; ; i++ {
		_ = req.Session.NotifyProgress(ctx, &mcp.ProgressNotificationParams{ProgressToken: "stall", Progress: float64(i), Message: "still working"})
		if err := req.Session.Ping(ctx, nil); err == nil && !reported {
			fmt.Fprintln(os.Stderr, "mcptest: ping answered")
			reported = true
		}
		select {
		case <-ctx.Done():
			return nil, ctx.Err()
		case <-time.After(20 * time.Millisecond):
		}
	}
}

func runBanner(ctx context.Context) error {
	fmt.Fprintln(os.Stdout, "Fake MCP server v1.0 starting")
	fmt.Fprintln(os.Stdout, "[INFO] listening on stdio")
	fmt.Fprintln(os.Stdout, "")
	return runStdio(ctx, newServer(true))
}

func runHangList(ctx context.Context) error {
	s := newServer(false)
	s.AddReceivingMiddleware(func(next mcp.MethodHandler) mcp.MethodHandler {
		return func(ctx context.Context, method string, req mcp.Request) (mcp.Result, error) {
			if method == "tools/list" {
				return nil, sleepForever()
			}
			return next(ctx, method, req)
		}
	})
	return runStdio(ctx, s)
}

func runStubborn(ctx context.Context) error {
	signal.Ignore(syscall.SIGTERM)
	exe, err := os.Executable()
	if err != nil {
		return err
	}
	// Same process group, no death signal: only a kill of the group stops it.
	child := exec.Command(exe)
	child.Env = []string{serverEnv + "=" + sleeper}
	if err := child.Start(); err != nil {
		return err
	}
	s := newServer(false)
	s.AddTool(&mcp.Tool{Name: "grandchild", InputSchema: objectSchema},
		func(context.Context, *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
			return text(strconv.Itoa(child.Process.Pid)), nil
		})
	_ = runStdio(ctx, s)
	// Outlive stdin: only signals end this process.
	return sleepForever()
}

// metaTool answers with the request's _meta, as JSON: what the client sent
// with the call (its trace context, which agentd propagates to the server).
// rpcErrorTool answers its call with the JSON-RPC error -32000, whose
// message is the call's text, as a server that refuses a request does.
func rpcErrorTool(_ context.Context, req *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
	var in TextInput
	_ = json.Unmarshal(req.Params.Arguments, &in)
	return nil, &jsonrpc.Error{Code: -32000, Message: in.Text}
}

func metaTool(_ context.Context, req *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
	b, err := json.Marshal(req.Params.Meta)
	if err != nil {
		return nil, err
	}
	return text(string(b)), nil
}

// ElicitInput is elicit's arguments: "form" (or empty) or "url".
type ElicitInput struct {
	Mode string `json:"mode,omitempty"`
}

// ElicitOutput is elicit's structured result: the client's answer as it
// came on the wire, before the server's go-sdk checks it and fills in
// defaults itself, so that a test sees what the client sent.
type ElicitOutput struct {
	Action  string         `json:"action"`
	Content map[string]any `json:"content,omitempty"`
}

// ElicitForm is elicit's form request: every property has a default, and
// none is required, so an answer with part of the content gets the rest
// from the client (SEP-1034).
var ElicitForm = &mcp.ElicitParams{
	Mode:    "form",
	Message: "Who are you?",
	RequestedSchema: map[string]any{
		"type": "object",
		"properties": map[string]any{
			"name":      map[string]any{"type": "string", "default": "Ada"},
			"age":       map[string]any{"type": "integer", "default": 36},
			"ratio":     map[string]any{"type": "number", "default": 0.5},
			"subscribe": map[string]any{"type": "boolean", "default": true},
			"color":     map[string]any{"type": "string", "enum": []any{"red", "green"}, "default": "green"},
		},
	},
}

// ElicitURL is elicit's url request.
var ElicitURL = &mcp.ElicitParams{
	Mode:          "url",
	Message:       "Connect your account.",
	URL:           "https://auth.example.com/connect?flow=mcptest",
	ElicitationID: "mcptest-elicitation-1",
}

type wireAnswerKey struct{}

// ElicitState is the request state of elicit's input request.
const ElicitState = "mcptest-elicit-state"

// elicitRounds is elicit on a 2026-07-28 session: the first call returns
// the input request "answer"; its retry, which must echo ElicitState,
// answers with the client's answer as it came.
func elicitRounds(req *mcp.CallToolRequest, params *mcp.ElicitParams) (*mcp.CallToolResult, ElicitOutput, error) {
	r, ok := req.Params.InputResponses["answer"].(*mcp.ElicitResult)
	if !ok {
		return &mcp.CallToolResult{InputRequests: mcp.InputRequestMap{"answer": params}, RequestState: ElicitState}, ElicitOutput{}, nil
	}
	if req.Params.RequestState != ElicitState {
		return nil, ElicitOutput{}, fmt.Errorf("the retry carried the request state %q", req.Params.RequestState)
	}
	wire := ElicitOutput{Action: r.Action}
	if r.Content != nil {
		data, _ := json.Marshal(r.Content)
		_ = json.Unmarshal(data, &wire.Content)
	}
	return nil, wire, nil
}

// addElicit adds the elicit tool to s. A question still waiting when stop
// is closed is given up (nil: never), so that closing the server's
// sessions, which waits for its tools, does not wait for an answer that
// will not come.
func addElicit(s *mcp.Server, stop <-chan struct{}) {
	mcp.AddTool(s, &mcp.Tool{Name: "elicit", Description: "Asks the client for input."},
		func(ctx context.Context, req *mcp.CallToolRequest, in ElicitInput) (*mcp.CallToolResult, ElicitOutput, error) {
			ctx, cancel := context.WithCancel(ctx)
			defer cancel()
			go func() {
				select {
				case <-stop:
					cancel()
				case <-ctx.Done():
				}
			}()
			params := ElicitForm
			if in.Mode == "url" {
				params = ElicitURL
			}
			if ip := req.Session.InitializeParams(); ip != nil && ip.ProtocolVersion >= "2026-07-28" {
				// 2026-07-28: the question is an input request in the
				// result, and the answer comes with the call's retry.
				return elicitRounds(req, params)
			}
			var wire ElicitOutput
			if _, err := req.Session.Elicit(context.WithValue(ctx, wireAnswerKey{}, &wire), params); err != nil {
				return nil, ElicitOutput{}, err
			}
			return nil, wire, nil
		})
	// The server's go-sdk fills in defaults too: the answer is recorded
	// before it does.
	s.AddSendingMiddleware(func(next mcp.MethodHandler) mcp.MethodHandler {
		return func(ctx context.Context, method string, req mcp.Request) (mcp.Result, error) {
			res, err := next(ctx, method, req)
			wire, _ := ctx.Value(wireAnswerKey{}).(*ElicitOutput)
			if r, ok := res.(*mcp.ElicitResult); ok && err == nil && wire != nil {
				wire.Action = r.Action
				if r.Content != nil {
					data, _ := json.Marshal(r.Content)
					_ = json.Unmarshal(data, &wire.Content)
				}
			}
			return res, err
		}
	})
}
