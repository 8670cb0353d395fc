package app_test

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/structpb"

	agentdv1 "github.com/agentd/agentd/gen/go/agentd/v1"
	"github.com/agentd/agentd/internal/app"
	"github.com/agentd/agentd/internal/config"
	"github.com/agentd/agentd/internal/grpcserver"
	"github.com/agentd/agentd/internal/telemetry"
	"github.com/agentd/agentd/providers/registry"
)

const (
	// serveEnv makes the re-executed test binary run agentd (as `agentd
	// serve`, configured by AGENTD_CONFIG).
	serveEnv = "AGENTD_TEST_SERVE"
	// counterEnv makes it an MCP server whose tool "delete" appends a line
	// to the file the variable names, so calls can be counted across
	// processes; counterPidsEnv names a file for its pid.
	counterEnv     = "AGENTD_TEST_COUNTER"
	counterPidsEnv = "AGENTD_TEST_COUNTER_PIDS"
	// counterGateEnv, when set, gives the counting server a second tool,
	// "gate", a slow one: it appends "gate:<marker>" to the counter file,
	// then waits until the directory the variable names holds a file
	// named <marker> or "all", and answers "passed <marker>".
	counterGateEnv = "AGENTD_TEST_COUNTER_GATE"
)

func runServe() int {
	exe, err := os.Executable()
	if err != nil {
		return 1
	}
	cfg, err := config.Load(os.Getenv("AGENTD_CONFIG"), os.Getenv, exe)
	if err == nil {
		cfg.Providers, err = registry.Configure(cfg.Providers, os.Getenv) // as agentd serve does
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	cfg.ShutdownDrain = 0 // SIGTERMed by the test, with no load balancer to tell
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM)
	defer stop()
	log := childLogger()
	if err := app.ServeAgent(ctx, app.Options{Config: cfg, Logger: log, Telemetry: grpcserver.Telemetry{}}); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	return 0
}

func runCounter() int {
	if f, err := os.OpenFile(os.Getenv(counterPidsEnv), os.O_APPEND|os.O_CREATE|os.O_WRONLY, 0o600); err == nil {
		fmt.Fprintln(f, os.Getpid())
		f.Close()
	}
	s := mcp.NewServer(&mcp.Implementation{Name: "counter", Version: "1"}, nil)
	type args struct {
		Path string `json:"path"`
	}
	mcp.AddTool(s, &mcp.Tool{Name: "delete", Description: "Deletes a file (counts the call)."},
		func(_ context.Context, _ *mcp.CallToolRequest, in args) (*mcp.CallToolResult, any, error) {
			f, err := os.OpenFile(os.Getenv(counterEnv), os.O_APPEND|os.O_CREATE|os.O_WRONLY, 0o600)
			if err != nil {
				return nil, nil, err
			}
			defer f.Close()
			fmt.Fprintln(f, in.Path)
			return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: "deleted " + in.Path}}}, nil, nil
		})
	if gates := os.Getenv(counterGateEnv); gates != "" {
		type gateArgs struct {
			Marker string `json:"marker"`
		}
		mcp.AddTool(s, &mcp.Tool{Name: "gate", Description: "Waits until its gate opens (counts the call)."},
			func(ctx context.Context, _ *mcp.CallToolRequest, in gateArgs) (*mcp.CallToolResult, any, error) {
				f, err := os.OpenFile(os.Getenv(counterEnv), os.O_APPEND|os.O_CREATE|os.O_WRONLY, 0o600)
				if err != nil {
					return nil, nil, err
				}
				fmt.Fprintln(f, "gate:"+in.Marker)
				f.Close()
				tick := time.NewTicker(10 * time.Millisecond)
				defer tick.Stop()
				for {
					for _, name := range []string{in.Marker, "all"} {
						if _, err := os.Stat(filepath.Join(gates, name)); err == nil {
							return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: "passed " + in.Marker}}}, nil, nil
						}
					}
					select {
					case <-ctx.Done():
						return nil, nil, ctx.Err()
					case <-tick.C:
					}
				}
			})
	}
	if err := s.Run(context.Background(), &mcp.StdioTransport{}); err != nil {
		return 1
	}
	return 0
}

// agentdProcess is agentd running as a child process of the test.
type agentdProcess struct {
	cmd     *exec.Cmd
	exited  chan struct{} // closed when the process has been waited for
	waitErr error
}

func (p *agentdProcess) wait() error {
	<-p.exited
	return p.waitErr
}

func startAgentd(t *testing.T, configPath, addr string) *agentdProcess {
	t.Helper()
	return startChild(t, serveEnv, configPath, addr)
}

// startChild runs the test binary as the agentd command that env selects
// (serveEnv, bridgeEnv), configured by configPath, and returns once it
// serves on addr. The process is killed when the test ends, if it still
// runs.
func startChild(t *testing.T, env, configPath, addr string) *agentdProcess {
	t.Helper()
	p, ok := tryStartChild(t, env, configPath, addr)
	if !ok {
		t.Fatalf("agentd exited before it served on %s: %v", addr, p.waitErr)
	}
	return p
}

// tryStartChild is startChild, reporting false when the process exits
// before it serves: addr, free when freeAddr chose it, may have been
// taken since by another socket of this machine. It waits for the
// process's own word that it serves on addr (its log line), not for addr
// to answer, which another process could.
func tryStartChild(t *testing.T, env, configPath, addr string) (*agentdProcess, bool) {
	t.Helper()
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	pr, pw, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(exe)
	cmd.Env = append(os.Environ(), env+"=1", "AGENTD_CONFIG="+configPath)
	cmd.Stderr = pw
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	_ = pw.Close() // the child holds its own copy
	serving := make(chan struct{})
	go relayUntilServing(pr, addr, serving)
	p := &agentdProcess{cmd: cmd, exited: make(chan struct{})}
	go func() {
		p.waitErr = cmd.Wait()
		close(p.exited)
	}()
	t.Cleanup(func() {
		_ = cmd.Process.Kill()
		<-p.exited
	})
	select {
	case <-serving:
		return p, true
	case <-p.exited:
		return p, false
	case <-time.After(settle):
		t.Fatalf("agentd does not serve on %s", addr)
		return p, false
	}
}

// childLogger is the log of agentd run as a child process: warnings and
// worse, and the line that says it serves, which tryStartChild waits for.
func childLogger() *slog.Logger {
	return slog.New(servingOrWarn{telemetry.NewLogger(os.Stderr, slog.LevelInfo, "text").Handler()})
}

// servingOrWarn passes records of level Warn and above, and the one that
// says agentd serves.
type servingOrWarn struct{ slog.Handler }

func (h servingOrWarn) Handle(ctx context.Context, r slog.Record) error {
	if r.Level < slog.LevelWarn && !strings.HasSuffix(r.Message, " serving") {
		return nil
	}
	return h.Handler.Handle(ctx, r)
}

func (h servingOrWarn) WithAttrs(attrs []slog.Attr) slog.Handler {
	return servingOrWarn{h.Handler.WithAttrs(attrs)}
}

func (h servingOrWarn) WithGroup(name string) slog.Handler {
	return servingOrWarn{h.Handler.WithGroup(name)}
}

// relayUntilServing copies a child's log lines to this process's stderr,
// closing serving at the line that says it serves on addr, until the child
// closes its end.
func relayUntilServing(r *os.File, addr string, serving chan struct{}) {
	defer r.Close()
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	said := false
	for sc.Scan() {
		line := sc.Text()
		fmt.Fprintln(os.Stderr, line)
		if !said && strings.Contains(line, "serving") && strings.Contains(line, addr) {
			said = true
			close(serving)
		}
	}
	_, _ = io.Copy(os.Stderr, r)
}

func freeAddr(t *testing.T) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return l.Addr().String()
}

func lines(t *testing.T, path string) []string {
	t.Helper()
	data, err := os.ReadFile(path)
	if errors.Is(err, os.ErrNotExist) {
		return nil
	}
	if err != nil {
		t.Fatal(err)
	}
	return strings.Fields(string(data))
}

// counterSetup writes an agentd configuration whose registered server
// "files" is the counting MCP server, and returns its path, agentd's
// address, and the files where the server records calls and pids.
func counterSetup(t *testing.T) (configPath, addr, counter, pids string) {
	t.Helper()
	dir := t.TempDir()
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	counter, pids = filepath.Join(dir, "calls"), filepath.Join(dir, "pids")
	addr = freeAddr(t)
	configPath = filepath.Join(dir, "agentd.yaml")
	yaml := fmt.Sprintf(`listen: %s
state_dir: %s
bridge:
  terminate_grace: 500ms
  servers:
    files:
      command: %s
      env: {%s: %s, %s: %s}
`, addr, filepath.Join(dir, "state"), exe, counterEnv, counter, counterPidsEnv, pids)
	if err := os.WriteFile(configPath, []byte(yaml), 0o600); err != nil {
		t.Fatal(err)
	}
	return configPath, addr, counter, pids
}

// deleteAgent calls the counting server's delete, which needs approval.
func deleteAgent(t *testing.T) *agentdv1.Agent {
	t.Helper()
	opts, err := structpb.NewStruct(map[string]any{"script": map[string]any{"turns": []any{
		map[string]any{"tool_calls": []any{map[string]any{"name": "delete", "arguments": map[string]any{"path": "draft.txt"}}}},
		map[string]any{"text": "{{tool_outputs}}"},
	}}})
	if err != nil {
		t.Fatal(err)
	}
	return &agentdv1.Agent{Provider: "script", RequiresApproval: []string{"delete"}, Mcps: []*agentdv1.MCPServer{{Transport: &agentdv1.MCPServer_Ref{Ref: "files"}}}, ProviderOptions: opts}
}

func dialAgentd(t *testing.T, addr string) agentdv1.AgentServiceClient {
	t.Helper()
	conn, err := grpc.NewClient(addr, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	return agentdv1.NewAgentServiceClient(conn)
}

// startAndPause starts a generation of agent and half-closes at its
// approval request; it returns the paused event.
func startAndPause(t *testing.T, client agentdv1.AgentServiceClient, agent *agentdv1.Agent) *agentdv1.GenerationPaused {
	t.Helper()
	stream, err := client.Generate(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	if err := stream.Send(&agentdv1.GenerateRequest{Kind: &agentdv1.GenerateRequest_Start{Start: &agentdv1.StartGeneration{
		Agent: agent, Messages: []*agentdv1.Message{{Role: agentdv1.Role_ROLE_USER, Parts: []*agentdv1.Part{{Kind: &agentdv1.Part_Text{Text: "tidy up"}}}}},
	}}}); err != nil {
		t.Fatal(err)
	}
	for {
		ev, err := stream.Recv()
		if err != nil {
			t.Fatalf("before the pause: %v", err)
		}
		if ev.GetApprovalRequest() != nil {
			stream.CloseSend() // answer later
		}
		if p := ev.GetPaused(); p != nil {
			return p
		}
	}
}

// resume resumes a paused generation and returns its final text.
func resume(t *testing.T, client agentdv1.AgentServiceClient, paused *agentdv1.GenerationPaused, agent *agentdv1.Agent, approved bool) string {
	t.Helper()
	stream := sendResume(t, client, paused, agent, approved)
	var final string
	for {
		ev, err := stream.Recv()
		if errors.Is(err, io.EOF) {
			return final
		}
		if err != nil {
			t.Fatalf("resume: %v", err)
		}
		if c := ev.GetCompleted(); c != nil {
			final = c.GetMessage().GetParts()[0].GetText()
		}
	}
}

// sendResume opens a stream that resumes paused, deciding its first
// approval request, and half-closes it.
func sendResume(t *testing.T, client agentdv1.AgentServiceClient, paused *agentdv1.GenerationPaused, agent *agentdv1.Agent, approved bool) agentdv1.AgentService_GenerateClient {
	t.Helper()
	stream, err := client.Generate(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	req := paused.GetApprovalRequests()[0]
	if err := stream.Send(&agentdv1.GenerateRequest{Kind: &agentdv1.GenerateRequest_Resume{Resume: &agentdv1.ResumeGeneration{
		GenerationId: paused.GetGenerationId(), Agent: agent,
		ApprovalDecisions: []*agentdv1.ApprovalDecision{{RequestId: req.GetId(), Approved: approved, Digest: req.GetDigest()}},
	}}}); err != nil {
		t.Fatal(err)
	}
	stream.CloseSend()
	return stream
}

// X-A11, R-A8: generations paused for approval survive agentd being
// killed with SIGKILL while others run; a restarted agentd resumes every
// paused one, and the MCP server sees each approved call exactly once,
// even when a resume is repeated, which then says the generation has
// ended. A generation that was running (its client still connected) ends
// with the process: its client sees the stream fail, and a resume of it
// says it is not paused. The old agentd's MCP server processes do not
// survive it (X-L7).
func TestRestartResumesExactlyOnce(t *testing.T) {
	configPath, addr, counter, pids := counterSetup(t)
	agent := deleteAgent(t)

	first := startAgentd(t, configPath, addr)
	client := dialAgentd(t, addr)
	var paused []*agentdv1.GenerationPaused
	for range 3 {
		paused = append(paused, startAndPause(t, client, agent))
	}
	running, runningID := startAndWait(t, client, agent)
	if err := first.cmd.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	_ = first.wait()
	if _, err := running.Recv(); status.Code(err) != codes.Unavailable {
		t.Errorf("the running generation's client saw %v after the kill; want Unavailable", err)
	}
	for _, p := range lines(t, pids) {
		pid, _ := strconv.Atoi(p)
		if !waitExit(pid) {
			t.Fatalf("X-L7 the killed agentd's MCP server %d survived it by %v", pid, settle)
		}
	}
	if n := len(lines(t, counter)); n != 0 {
		t.Fatalf("a gated call ran before it was approved (%d)", n)
	}

	second := startAgentd(t, configPath, addr)
	client = dialAgentd(t, addr)
	for _, p := range paused {
		if final := resume(t, client, p, agent, true); final != "deleted draft.txt" {
			t.Errorf("final text = %q", final)
		}
	}
	if code := resumeCode(t, client, paused[0], agent); code != codes.FailedPrecondition {
		t.Errorf("resuming a finished generation again: %v; want FailedPrecondition", code)
	}
	if code := resumeCode(t, client, &agentdv1.GenerationPaused{GenerationId: runningID, ApprovalRequests: paused[0].GetApprovalRequests()}, agent); code != codes.FailedPrecondition {
		t.Errorf("resuming the generation that was running: %v; want FailedPrecondition", code)
	}
	if got := lines(t, counter); len(got) != len(paused) {
		t.Errorf("R-A8 the MCP server saw %d calls (%v); want exactly one per paused generation (%d)", len(got), got, len(paused))
	}
	if err := second.cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	if err := second.wait(); err != nil {
		t.Errorf("agentd after SIGTERM: %v", err)
	}
}

// startAndWait starts a generation of agent and stays connected at its
// approval request, answering nothing; it returns the open stream and the
// generation's id.
func startAndWait(t *testing.T, client agentdv1.AgentServiceClient, agent *agentdv1.Agent) (agentdv1.AgentService_GenerateClient, string) {
	t.Helper()
	stream, err := client.Generate(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	if err := stream.Send(&agentdv1.GenerateRequest{Kind: &agentdv1.GenerateRequest_Start{Start: &agentdv1.StartGeneration{
		Agent: agent, Messages: []*agentdv1.Message{{Role: agentdv1.Role_ROLE_USER, Parts: []*agentdv1.Part{{Kind: &agentdv1.Part_Text{Text: "tidy up"}}}}},
	}}}); err != nil {
		t.Fatal(err)
	}
	var id string
	for {
		ev, err := stream.Recv()
		if err != nil {
			t.Fatalf("before the approval request: %v", err)
		}
		if s := ev.GetStarted(); s != nil {
			id = s.GetGenerationId()
		}
		if ev.GetApprovalRequest() != nil {
			return stream, id
		}
	}
}

// resumeCode resumes with an approval and returns how the stream ended.
func resumeCode(t *testing.T, client agentdv1.AgentServiceClient, paused *agentdv1.GenerationPaused, agent *agentdv1.Agent) codes.Code {
	t.Helper()
	stream := sendResume(t, client, paused, agent, true)
	for {
		if _, err := stream.Recv(); err != nil {
			if errors.Is(err, io.EOF) {
				return codes.OK
			}
			return status.Code(err)
		}
	}
}

// R-A8 with a real MCP server that counts its calls: a declined call, and
// a call whose tool is no longer offered when the generation resumes,
// reach the server never.
func TestResumeWithoutCall(t *testing.T) {
	configPath, addr, counter, _ := counterSetup(t)
	startAgentd(t, configPath, addr)
	client := dialAgentd(t, addr)
	agent := deleteAgent(t)

	declined := startAndPause(t, client, agent)
	if final := resume(t, client, declined, agent, false); final != `{"error":"declined by user"}` {
		t.Errorf("declined: the model saw %q", final)
	}

	withdrawn := startAndPause(t, client, agent)
	restricted := proto.Clone(agent).(*agentdv1.Agent)
	restricted.Mcps[0].AllowedTools = []string{"list"} // delete is no longer offered
	if final := resume(t, client, withdrawn, restricted, true); final != `{"error":"delete is no longer offered by its MCP server"}` {
		t.Errorf("withdrawn: the model saw %q", final)
	}
	if got := lines(t, counter); len(got) != 0 {
		t.Errorf("the MCP server saw %d calls (%v); want none", len(got), got)
	}
}

// waitExit waits until process pid has exited (or is a zombie, exited
// as far as it can), and reports whether it did within settle.
func waitExit(pid int) bool {
	deadline := time.Now().Add(settle)
	for !zombie(pid) {
		if time.Now().After(deadline) {
			return false
		}
		time.Sleep(20 * time.Millisecond)
	}
	return true
}

// zombie reports whether process pid is gone or a zombie.
func zombie(pid int) bool {
	stat, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return true
	}
	i := strings.LastIndexByte(string(stat), ')')
	return i >= 0 && i+2 < len(stat) && stat[i+2] == 'Z'
}
