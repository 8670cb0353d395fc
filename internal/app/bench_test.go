package app_test

import (
	"context"
	"io"
	"log/slog"
	"net"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/test/bufconn"
	"google.golang.org/protobuf/types/known/durationpb"

	bridgev1 "github.com/agentd/agentd/gen/go/agentd/bridge/v1"
	"github.com/agentd/agentd/internal/app"
	"github.com/agentd/agentd/internal/config"
	"github.com/agentd/agentd/internal/grpcserver"
	"github.com/agentd/agentd/internal/mcptest"
	"github.com/agentd/agentd/internal/telemetry"
	"github.com/agentd/agentd/server"
)

// benchGrace bounds a fake server's stop once its stdin closes.
const benchGrace = 200 * time.Millisecond

// BenchmarkCallTool compares one tools/call made as agentd makes it (its
// bridge client, server.NewBridgeClient, over the session's CallTools
// stream to a bridge served as agentd embeds it) with the same call made
// directly with the go-sdk, against the same Go stdio server. Target:
// bridge at most 1.25× direct. "direct" and "bridge" report each alone;
// "paired" alternates rounds on one machine state and reports the median
// of the rounds' ratios ("bridge/direct"). The bridge package's
// BenchmarkCallTool says where the bridge's share goes. It sits here, above
// both server and bridge, because it needs both sides of the boundary.
func BenchmarkCallTool(b *testing.B) {
	exe, env := mcptest.Command(b, mcptest.Tools)
	// bridged makes calls as agentd does, on a session of its own (and so
	// a process of its own).
	bridged := func(b *testing.B) func() {
		client := server.NewBridgeClient(benchBridge(b, config.Server{Command: exe, Env: env}))
		sess, err := client.OpenSession(context.Background(), &bridgev1.OpenSessionRequest{Servers: []*bridgev1.ServerSpec{
			{Name: "tools", Transport: &bridgev1.ServerSpec_Ref{Ref: "tools"}, ReadTimeout: durationpb.New(30 * time.Second)},
		}})
		if err != nil {
			b.Fatal(err)
		}
		b.Cleanup(func() { sess.Close(context.Background()) })
		call := func() {
			if _, err := sess.CallTool(context.Background(), "tools", "echo", `{"text":"hello"}`); err != nil {
				b.Fatal(err)
			}
		}
		call() // connect outside the measurement
		return call
	}
	b.Run("direct", func(b *testing.B) {
		call := mcptest.DirectEcho(b, mcptest.Tools, benchGrace)
		for b.Loop() {
			call()
		}
	})
	b.Run("bridge", func(b *testing.B) {
		call := bridged(b)
		for b.Loop() {
			call()
		}
	})
	b.Run("paired", func(b *testing.B) {
		mcptest.Paired(b, mcptest.DirectEcho(b, mcptest.Tools, benchGrace), mcptest.Arm{Unit: "bridge/direct", Call: bridged(b)})
	})
}

// benchBridge serves a bridge the way agentd embeds it (interceptors,
// stats handler, an in-memory listener), with srv registered as "tools"
// and no warm spare, and returns a connection to it.
func benchBridge(b *testing.B, srv config.Server) *grpc.ClientConn {
	b.Helper()
	cfg := config.Default()
	cfg.Bridge.TerminateGrace = benchGrace
	cfg.Bridge.Pool.Warm = 0
	cfg.Bridge.Servers = map[string]config.Server{"tools": srv}
	o := app.Options{Config: cfg, Logger: telemetry.NewLogger(io.Discard, slog.LevelInfo, "text")}
	br, err := app.NewBridge(o)
	if err != nil {
		b.Fatal(err)
	}
	lis := bufconn.Listen(1 << 20)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- br.Serve(ctx, lis, o) }()
	conn, err := grpcserver.Dial("passthrough:///bench", grpcserver.Telemetry{}, nil,
		append(grpcserver.InMemoryDialOptions(),
			grpc.WithContextDialer(func(ctx context.Context, _ string) (net.Conn, error) { return lis.DialContext(ctx) }))...)
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() {
		conn.Close()
		cancel()
		<-done
	})
	return conn
}
