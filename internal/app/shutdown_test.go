package app_test

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net"
	"strings"
	"testing"
	"time"

	"github.com/agentd/agentd/internal/logtest"

	"github.com/google/go-cmp/cmp"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/protobuf/encoding/protojson"

	agentdv1 "github.com/agentd/agentd/gen/go/agentd/v1"
	"github.com/agentd/agentd/internal/app"
	"github.com/agentd/agentd/internal/config"
	"github.com/agentd/agentd/internal/mcptest"
)

// A shutdown does not wait for the tool call of a generation whose client
// half-closed after its start message (as grpcurl does): the stream's end
// reaches the generation, which stops, and Serve returns within
// shutdown_grace, not the call's read_timeout of ten minutes.
func TestShutdownWithHalfClosedGeneration(t *testing.T) {
	t.Parallel()
	conn, stop, served := serveForShutdown(t, 0, slog.New(slog.NewTextHandler(io.Discard, nil)))
	defer stop()
	start := &agentdv1.StartGeneration{}
	if err := protojson.Unmarshal([]byte(`{
		"agent": {"provider": "script",
			"mcps": [{"ref": "slow", "readTimeout": "600s"}],
			"providerOptions": {"script": {"turns": [{"tool_calls": [{"name": "hang", "arguments": {}}]}, {"text": "done"}]}}},
		"messages": [{"role": "ROLE_USER", "parts": [{"text": "go"}]}]}`), start); err != nil {
		t.Fatal(err)
	}
	stream, err := agentdv1.NewAgentServiceClient(conn).Generate(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	if err := stream.Send(&agentdv1.GenerateRequest{Kind: &agentdv1.GenerateRequest_Start{Start: start}}); err != nil {
		t.Fatal(err)
	}
	if err := stream.CloseSend(); err != nil {
		t.Fatal(err)
	}
	for {
		ev, err := stream.Recv()
		if err != nil {
			t.Fatalf("stream ended before the tool call: %v", err)
		}
		if ev.GetToolCallStarted() != nil {
			break
		}
	}

	stop() // SIGTERM
	select {
	case <-served:
	case <-time.After(time.Minute):
		t.Fatal("Serve still runs a minute after the shutdown began: it waits for the hung tool call")
	}
}

// X-O4: each step of a shutdown is logged, in order: the drain, the
// listeners stopping and stopped, the generations running without a
// client handed over (how many; here one, detached, in a hung tool call),
// the embedded bridge stopping, its connection and the store closing,
// and the end.
func TestShutdownStepsLogged(t *testing.T) {
	t.Parallel()
	var logs logtest.Logs
	conn, stop, served := serveForShutdown(t, time.Millisecond, slog.New(slog.NewJSONHandler(&logs, nil)))
	defer stop()
	start := &agentdv1.StartGeneration{}
	if err := protojson.Unmarshal([]byte(`{
		"detach": true,
		"agent": {"provider": "script",
			"mcps": [{"ref": "slow", "readTimeout": "600s"}],
			"providerOptions": {"script": {"turns": [{"tool_calls": [{"name": "hang", "arguments": {}}]}, {"text": "done"}]}}},
		"messages": [{"role": "ROLE_USER", "parts": [{"text": "go"}]}]}`), start); err != nil {
		t.Fatal(err)
	}
	stream, err := agentdv1.NewAgentServiceClient(conn).Generate(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	if err := stream.Send(&agentdv1.GenerateRequest{Kind: &agentdv1.GenerateRequest_Start{Start: start}}); err != nil {
		t.Fatal(err)
	}
	if err := stream.CloseSend(); err != nil {
		t.Fatal(err)
	}
	for { // the detached generation runs once its stream has its started event
		if _, err := stream.Recv(); err != nil {
			break
		}
	}

	stop() // SIGTERM
	if err := <-served; err != nil {
		t.Fatalf("Serve: %v", err)
	}
	var steps []string
	for line := range strings.Lines(logs.String()) {
		var m map[string]any
		if err := json.Unmarshal([]byte(line), &m); err != nil {
			t.Fatalf("a log line is not JSON: %q", line)
		}
		msg, _ := m["msg"].(string)
		if !strings.HasPrefix(msg, "stopping") && msg != "agentd stopped" && !strings.HasPrefix(msg, "generation handed over") {
			continue
		}
		if n, ok := m["generations"]; ok {
			msg += fmt.Sprintf(" (%v)", n)
		}
		steps = append(steps, msg)
	}
	want := []string{
		"stopping: readiness and the AgentService are NOT_SERVING; still accepting calls while load balancers catch up",
		"stopping: the listeners accept nothing more; running calls have shutdown_grace to finish",
		"stopping: the listeners have stopped",
		"stopping: handing the generations running without a client over to other replicas (1)",
		"generation handed over: agentd is stopping",
		"stopping: the embedded bridge stops, and its MCP server processes",
		"stopping: closing the connection to the bridge",
		"stopping: closing the state store",
		"agentd stopped",
	}
	if diff := cmp.Diff(want, steps); diff != "" {
		t.Errorf("shutdown steps logged (-want +got):\n%s", diff)
	}
}

// serveForShutdown serves agentd over TCP, logging to logger, with the
// fake server mcptest.Tools registered as "slow" (no warm spare), a
// shutdown_grace of 300ms and the given drain. It returns a connection to
// it, stop, which ends Serve's context (as SIGTERM does), and Serve's
// result, once it returns.
func serveForShutdown(t *testing.T, drain time.Duration, logger *slog.Logger) (*grpc.ClientConn, context.CancelFunc, <-chan error) {
	t.Helper()
	exe, env := mcptest.Command(t, mcptest.Tools)
	cfg := config.Default()
	cfg.StateDir = t.TempDir()
	cfg.ShutdownGrace = 300 * time.Millisecond
	cfg.ShutdownDrain = drain
	warm := 0
	cfg.Bridge.Servers = map[string]config.Server{"slow": {Command: exe, Env: env, Warm: &warm}}
	cfg.Bridge.TerminateGrace = 200 * time.Millisecond
	o := app.Options{Config: cfg, Logger: logger}
	a, err := app.NewAgent(o)
	if err != nil {
		t.Fatal(err)
	}
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	ctx, stop := context.WithCancel(context.Background())
	served := make(chan error, 1)
	go func() { served <- a.Serve(ctx, lis, o) }()
	conn, err := grpc.NewClient(lis.Addr().String(), grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		stop()
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	return conn, stop, served
}
