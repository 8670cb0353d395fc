package app_test

import (
	"context"
	"crypto/tls"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"os"
	"os/signal"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/agentd/agentd/internal/logtest"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"google.golang.org/protobuf/types/known/structpb"

	bridgev1 "github.com/agentd/agentd/gen/go/agentd/bridge/v1"
	agentdv1 "github.com/agentd/agentd/gen/go/agentd/v1"
	"github.com/agentd/agentd/internal/app"
	"github.com/agentd/agentd/internal/app/apptest"
	"github.com/agentd/agentd/internal/config"
	"github.com/agentd/agentd/internal/grpcserver"
	"github.com/agentd/agentd/internal/tlsconf/tlstest"
)

const (
	// bridgeEnv makes the re-executed test binary run `agentd bridge`,
	// configured by AGENTD_CONFIG.
	bridgeEnv = "AGENTD_TEST_BRIDGE"
	// replicaToolsEnv makes it an MCP server that appends a line
	// "<tool> <its parent's pid>" to the file the variable names at each
	// call, so a test sees which bridge ran a call: "where" answers
	// "bridge <its parent's pid>", and "hold" answers only when its call
	// is cancelled (its bridge gone). replicaPidsEnv names a file where
	// it appends "<pid> <parent's pid>" at start.
	replicaToolsEnv = "AGENTD_TEST_REPLICA_TOOLS"
	replicaPidsEnv  = "AGENTD_TEST_REPLICA_PIDS"
)

func runBridge() int {
	exe, err := os.Executable()
	if err != nil {
		return 1
	}
	cfg, err := config.Load(os.Getenv("AGENTD_CONFIG"), os.Getenv, exe)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM)
	defer stop()
	log := childLogger()
	if err := app.ServeBridge(ctx, app.Options{Config: cfg, Logger: log, Telemetry: grpcserver.Telemetry{}}); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	return 0
}

func runReplicaTools() int {
	appendLine := func(path, line string) error {
		f, err := os.OpenFile(path, os.O_APPEND|os.O_CREATE|os.O_WRONLY, 0o600)
		if err != nil {
			return err
		}
		defer f.Close()
		_, err = fmt.Fprintln(f, line)
		return err
	}
	bridge := os.Getppid()
	if err := appendLine(os.Getenv(replicaPidsEnv), fmt.Sprintf("%d %d", os.Getpid(), bridge)); err != nil {
		return 1
	}
	s := mcp.NewServer(&mcp.Implementation{Name: "replica-tools", Version: "1"}, nil)
	mcp.AddTool(s, &mcp.Tool{Name: "where", Description: "Says which bridge runs it."},
		func(context.Context, *mcp.CallToolRequest, struct{}) (*mcp.CallToolResult, any, error) {
			if err := appendLine(os.Getenv(replicaToolsEnv), fmt.Sprintf("where %d", bridge)); err != nil {
				return nil, nil, err
			}
			return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: fmt.Sprintf("bridge %d", bridge)}}}, nil, nil
		})
	mcp.AddTool(s, &mcp.Tool{Name: "hold", Description: "Runs until it is cancelled."},
		func(ctx context.Context, _ *mcp.CallToolRequest, _ struct{}) (*mcp.CallToolResult, any, error) {
			if err := appendLine(os.Getenv(replicaToolsEnv), fmt.Sprintf("hold %d", bridge)); err != nil {
				return nil, nil, err
			}
			<-ctx.Done()
			return nil, nil, ctx.Err()
		})
	if err := s.Run(context.Background(), &mcp.StdioTransport{}); err != nil {
		return 1
	}
	return 0
}

// bridgeReplica is `agentd bridge` running as a child process.
type bridgeReplica struct {
	*agentdProcess
	addr string
}

func (b *bridgeReplica) pid() int { return b.cmd.Process.Pid }

// startBridgeReplicas starts n `agentd bridge` processes whose registered
// server "replica" is the replica-tools MCP server, recording its calls
// in calls and its processes in pids.
func startBridgeReplicas(t *testing.T, n int) (replicas []*bridgeReplica, calls, pids string) {
	t.Helper()
	dir := t.TempDir()
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	calls, pids = filepath.Join(dir, "calls"), filepath.Join(dir, "pids")
	for i := range n {
		addr := freeAddr(t)
		configPath := filepath.Join(dir, fmt.Sprintf("bridge-%d.yaml", i))
		yaml := fmt.Sprintf(`state_dir: %s
bridge:
  listen: %s
  terminate_grace: 500ms
  pool: {warm: 0}
  servers:
    replica:
      command: %s
      env: {%s: %s, %s: %s}
`, filepath.Join(dir, fmt.Sprintf("state-%d", i)), addr, exe, replicaToolsEnv, calls, replicaPidsEnv, pids)
		if err := os.WriteFile(configPath, []byte(yaml), 0o600); err != nil {
			t.Fatal(err)
		}
		replicas = append(replicas, &bridgeReplica{agentdProcess: startChild(t, bridgeEnv, configPath, addr), addr: addr})
	}
	return replicas, calls, pids
}

// replicaAgent is a script agent of the bridges' "replica" server: its
// turns call each tool in turn, then answer with the last tool outputs.
func replicaAgent(t *testing.T, tools ...string) *agentdv1.Agent {
	t.Helper()
	var turns []any
	for _, tool := range tools {
		turns = append(turns, map[string]any{"tool_calls": []any{map[string]any{"name": tool, "arguments": map[string]any{}}}})
	}
	turns = append(turns, map[string]any{"text": "{{tool_outputs}}"})
	opts, err := structpb.NewStruct(map[string]any{"script": map[string]any{"turns": turns}})
	if err != nil {
		t.Fatal(err)
	}
	return &agentdv1.Agent{Provider: "script", Mcps: []*agentdv1.MCPServer{{Transport: &agentdv1.MCPServer_Ref{Ref: "replica"}}}, ProviderOptions: opts}
}

// startReplicaGeneration starts agent on client and half-closes.
func startReplicaGeneration(t *testing.T, client agentdv1.AgentServiceClient, agent *agentdv1.Agent) agentdv1.AgentService_GenerateClient {
	t.Helper()
	stream, err := startGeneration(t.Context(), client, agent)
	if err != nil {
		t.Fatal(err)
	}
	stream.CloseSend()
	return stream
}

// finishCalls reads stream to its end and returns the calls' finished
// events and the final text.
func finishCalls(t *testing.T, stream agentdv1.AgentService_GenerateClient) ([]*agentdv1.ToolCallFinished, string) {
	t.Helper()
	var finished []*agentdv1.ToolCallFinished
	var final string
	for {
		ev, err := stream.Recv()
		if errors.Is(err, io.EOF) {
			return finished, final
		}
		if err != nil {
			t.Fatalf("the generation failed: %v", err)
		}
		if f := ev.GetToolCallFinished(); f != nil {
			finished = append(finished, f)
		}
		if c := ev.GetCompleted(); c != nil {
			final = c.GetMessage().GetParts()[0].GetText()
		}
	}
}

// waitLine waits until the file at path has a line starting with prefix,
// and returns it.
func waitLine(t *testing.T, path, prefix string) string {
	t.Helper()
	deadline := time.Now().Add(settle)
	for {
		data, err := os.ReadFile(path)
		if err != nil && !errors.Is(err, os.ErrNotExist) {
			t.Fatal(err)
		}
		for line := range strings.Lines(string(data)) {
			if strings.HasPrefix(line, prefix) {
				return strings.TrimSpace(line)
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("no line %q... in %s after %v", prefix, path, settle)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// processesOf returns the pids of the MCP server processes that the
// bridge with pid bridge started, from the pids file.
func processesOf(t *testing.T, pids string, bridge int) []int {
	t.Helper()
	var out []int
	fields := lines(t, pids)
	for i := 0; i+1 < len(fields); i += 2 {
		pid, _ := strconv.Atoi(fields[i])
		if parent, _ := strconv.Atoi(fields[i+1]); parent == bridge {
			out = append(out, pid)
		}
	}
	return out
}

// X-G6 with real processes: agentd serves with bridge.address listing two
// `agentd bridge` replicas. Sessions spread over both. SIGKILL the
// replica running a generation's tool call: the call reaches the model
// as of unknown outcome and is never run again; the generation's next
// call runs on the other replica, and the generation completes. The
// killed replica's MCP server stops with it (its stdin closed), and none
// is left behind.
func TestBridgeReplicas(t *testing.T) {
	replicas, calls, pids := startBridgeReplicas(t, 2)
	var logs logtest.Logs
	cfg := testConfig(t)
	cfg.Bridge.Address = replicas[0].addr + ", " + replicas[1].addr
	if err := cfg.Validate(); err != nil {
		t.Fatal(err)
	}
	conn, stopAgentd := apptest.Serve(t, app.Options{Config: cfg, Logger: slog.New(slog.NewTextHandler(&logs, nil))})
	client := agentdv1.NewAgentServiceClient(conn)
	byPid := map[string]*bridgeReplica{}
	for _, r := range replicas {
		byPid[strconv.Itoa(r.pid())] = r
	}

	// Sessions spread round-robin: sequential generations alternate
	// between the replicas once both are connected.
	sessions := map[*bridgeReplica]int{}
	for range 6 {
		_, final := finishCalls(t, startReplicaGeneration(t, client, replicaAgent(t, "where")))
		r := byPid[strings.TrimPrefix(final, "bridge ")]
		if r == nil {
			t.Fatalf("the generation answered %q; want the pid of a replica", final)
		}
		sessions[r]++
	}
	for _, r := range replicas {
		if sessions[r] < 2 {
			t.Errorf("X-G6 the replica at %s had %d of 6 sessions; want them spread over both (%v)", r.addr, sessions[r], sessions)
		}
	}

	// A replica killed in the middle of a call.
	stream := startReplicaGeneration(t, client, replicaAgent(t, "hold", "where"))
	held := waitLine(t, calls, "hold ")
	killed := byPid[strings.TrimPrefix(held, "hold ")]
	if killed == nil {
		t.Fatalf("hold ran under %q; want a replica", held)
	}
	if err := killed.cmd.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	_ = killed.wait()
	finished, final := finishCalls(t, stream)
	other := replicas[0]
	if other == killed {
		other = replicas[1]
	}
	if want := fmt.Sprintf("bridge %d", other.pid()); final != want {
		t.Errorf("X-G6 the generation answered %q; want %q: its next call on the other replica", final, want)
	}
	if len(finished) != 2 {
		t.Fatalf("%d calls finished; want 2 (hold, where): %v", len(finished), finished)
	}
	var out struct{ Error string }
	if err := json.Unmarshal([]byte(finished[0].GetOutput()), &out); err != nil || !finished[0].GetIsError() || !strings.Contains(out.Error, "may or may not have run") {
		t.Errorf("X-G6 the call in flight on the killed replica finished as %v; want a tool error saying it may or may not have run", finished[0])
	}
	if n := strings.Count(strings.Join(lines(t, calls), " "), "hold"); n != 1 {
		t.Errorf("X-G6 hold ran %d times; want once: a call of unknown outcome is never run again", n)
	}
	if !strings.Contains(logs.String(), "bridge session lost") {
		t.Errorf("agentd did not log the lost session:\n%s", logs.String())
	}
	orphans := processesOf(t, pids, killed.pid())
	if len(orphans) == 0 {
		t.Errorf("the killed replica started no MCP server; hold ran there")
	}
	for _, pid := range orphans {
		if !waitExit(pid) {
			t.Errorf("X-G6 the killed replica's MCP server %d outlived it by %v", pid, settle)
			_ = syscall.Kill(pid, syscall.SIGKILL)
		}
	}

	// The replica left stops its MCP servers when it stops.
	stopAgentd()
	if err := other.cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	if err := other.wait(); err != nil {
		t.Errorf("the replica left, after SIGTERM: %v", err)
	}
	all := processesOf(t, pids, other.pid())
	for _, pid := range all {
		if !waitExit(pid) {
			t.Errorf("the stopped replica's MCP server %d outlived it by %v", pid, settle)
			_ = syscall.Kill(pid, syscall.SIGKILL)
		}
	}
	if len(all) == 0 {
		t.Errorf("the replica left started MCP servers %v; want some", all)
	}
}

// X-G6 X-I8: bridge.address's forms over mutual TLS: a list, each replica
// dialled and verified as its entry names it, sessions spread over both
// (the bridges' pool stats count the demo server's processes, one per
// session); and a DNS target, dns:///localhost:port, resolving to
// addresses of which only one listens.
func TestBridgeReplicasMTLS(t *testing.T) {
	t.Parallel()
	ca := tlstest.NewCA(t)
	var logs logtest.Logs
	addrs := []string{mtlsBridge(t, ca, &logs, nil, agentdPrincipal), mtlsBridge(t, ca, &logs, nil, agentdPrincipal)}
	agentdCert := peerLeaf(t, ca, "agentd", agentdPrincipal)
	client := agentdVia(t, strings.Join(addrs, ","), hopTLS(t, ca, agentdCert))
	for range 4 {
		if final, err := generateErr(t.Context(), client, demoStart(t)); !errors.Is(err, io.EOF) || !strings.Contains(final, "hello from agentd") {
			t.Fatalf("generation over the listed replicas ended with %v, answer %q; want the demo answer", err, final)
		}
	}
	for _, addr := range addrs {
		conn := dialTLS(t, addr, &tls.Config{RootCAs: ca.Pool(), Certificates: []tls.Certificate{agentdCert.Certificate(t)}})
		stats, err := bridgev1.NewBridgeAdminServiceClient(conn).GetPoolStats(t.Context(), &bridgev1.GetPoolStatsRequest{})
		if err != nil {
			t.Fatal(err)
		}
		var spawned int64
		for _, p := range stats.GetPools() {
			spawned += p.GetSpawned()
		}
		if spawned < 1 {
			t.Errorf("the replica at %s served no session of 4: %v", addr, stats)
		}
	}

	_, port, _ := net.SplitHostPort(addrs[0])
	client = agentdVia(t, "dns:///localhost:"+port, hopTLS(t, ca, agentdCert))
	if final, err := generateErr(t.Context(), client, demoStart(t)); !errors.Is(err, io.EOF) || !strings.Contains(final, "hello from agentd") {
		t.Errorf("generation over dns:///localhost:%s ended with %v, answer %q; want the demo answer", port, err, final)
	}
}
