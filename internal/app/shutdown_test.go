package app_test

import (
	"context"
	"io"
	"log/slog"
	"net"
	"testing"
	"time"

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
	exe, env := mcptest.Command(t, mcptest.Tools)
	cfg := config.Default()
	cfg.StateDir = t.TempDir()
	cfg.ShutdownGrace = 300 * time.Millisecond
	cfg.ShutdownDrain = 0
	warm := 0
	cfg.Bridge.Servers = map[string]config.Server{"slow": {Command: exe, Env: env, Warm: &warm}}
	cfg.Bridge.TerminateGrace = 200 * time.Millisecond
	o := app.Options{Config: cfg, Logger: slog.New(slog.NewTextHandler(io.Discard, nil))}
	a, err := app.NewAgent(o)
	if err != nil {
		t.Fatal(err)
	}
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	ctx, stop := context.WithCancel(context.Background())
	defer stop()
	served := make(chan error, 1)
	go func() { served <- a.Serve(ctx, lis, o) }()
	conn, err := grpc.NewClient(lis.Addr().String(), grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
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
