package bridge

import (
	"context"
	"io"
	"log/slog"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"google.golang.org/grpc"
	"google.golang.org/grpc/test/bufconn"

	bridgev1 "github.com/agentd/agentd/gen/go/agentd/bridge/v1"
	"github.com/agentd/agentd/internal/config"
	"github.com/agentd/agentd/internal/grpcserver"
	"github.com/agentd/agentd/internal/mcptest"
	"github.com/agentd/agentd/internal/telemetry"
	agentdserver "github.com/agentd/agentd/server"
)

// The benchmarks behind the bridge's figures in the README; `make bench`
// runs them and prints the ratios.

// benchBridge serves a Service the way agentd does (interceptors, stats
// handler, logging to nowhere) over an in-memory listener.
func benchBridge(b *testing.B, edit func(*config.Bridge)) (*Service, bridgev1.BridgeServiceClient) {
	b.Helper()
	svc := benchService(b, edit)
	return svc, bridgev1.NewBridgeServiceClient(benchServe(b, svc))
}

func benchService(b *testing.B, edit func(*config.Bridge)) *Service {
	b.Helper()
	cfg := config.Default().Bridge
	cfg.TerminateGrace = grace
	cfg.Servers = map[string]config.Server{}
	if edit != nil {
		edit(&cfg)
	}
	svc, err := New(Options{Config: cfg, Logger: telemetry.NewLogger(io.Discard, slog.LevelInfo, "text")})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(svc.Close)
	return svc
}

// benchServe serves svc over an in-memory listener as agentd serves it
// embedded.
func benchServe(b *testing.B, svc *Service) *grpc.ClientConn {
	b.Helper()
	lis := bufconn.Listen(1 << 20)
	log := telemetry.NewLogger(io.Discard, slog.LevelInfo, "text")
	srv, _ := grpcserver.New(grpcserver.Options{Logger: log, QuietOK: true, InMemory: true})
	svc.Register(srv)
	go func() { _ = srv.Serve(lis) }()
	conn, err := grpcserver.Dial("passthrough:///bench", grpcserver.Telemetry{},
		append(grpcserver.InMemoryDialOptions(),
			grpc.WithContextDialer(func(ctx context.Context, _ string) (net.Conn, error) { return lis.DialContext(ctx) }))...)
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() {
		conn.Close()
		srv.Stop()
	})
	return conn
}

func benchOpen(b *testing.B, client bridgev1.BridgeServiceClient, specs ...*bridgev1.ServerSpec) (string, context.CancelFunc) {
	b.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	stream, err := client.OpenSession(ctx, &bridgev1.OpenSessionRequest{Servers: specs})
	if err != nil {
		b.Fatal(err)
	}
	first, err := stream.Recv()
	if err != nil {
		b.Fatal(err)
	}
	return first.GetOpened().GetSessionId(), cancel
}

// BenchmarkCallTool compares one tools/call through the bridge's gRPC API,
// made as agentd makes it (its bridge client, server.NewBridgeClient, over
// the session's CallTools stream), with the same call made directly with
// the go-sdk (with a per-call timeout, as the bridge has), against the
// same Go stdio server. Target: bridge at most 1.25× direct. "direct" and
// "bridge" report each alone; "paired" alternates rounds on one machine
// state and reports the median of the rounds' ratios to direct, which the
// load of a shared machine disturbs far less. Its two more arms say where
// the time goes: "session/direct" is the bridge's own work without gRPC
// (the handler's session call, in process), "unary/direct" the call made
// with one CallTool RPC instead of on the stream.
func BenchmarkCallTool(b *testing.B) {
	exe, env := mcptest.Command(b, mcptest.Tools)
	direct := func(b *testing.B) func() {
		cmd := exec.Command(exe)
		for k, v := range env {
			cmd.Env = append(cmd.Env, k+"="+v)
		}
		client := mcp.NewClient(&mcp.Implementation{Name: "bench", Version: "1"}, &mcp.ClientOptions{Capabilities: &mcp.ClientCapabilities{}})
		cs, err := client.Connect(context.Background(), &mcp.CommandTransport{Command: cmd, TerminateDuration: grace}, &mcp.ClientSessionOptions{ProtocolVersion: "2025-11-25"})
		if err != nil {
			b.Fatal(err)
		}
		b.Cleanup(func() { _ = cs.Close() })
		params := &mcp.CallToolParams{Name: "echo", Arguments: map[string]any{"text": "hello"}}
		return func() {
			// Bounded like the bridge's calls (read_timeout, 30 s by default),
			// as the go-sdk recommends for every call.
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			defer cancel()
			if _, err := cs.CallTool(ctx, params); err != nil {
				b.Fatal(err)
			}
		}
	}
	service := func(b *testing.B) *Service {
		return benchService(b, func(c *config.Bridge) {
			c.Servers["tools"] = config.Server{Command: exe, Env: env}
			c.Pool.Warm = 0
		})
	}
	open := &bridgev1.OpenSessionRequest{Servers: []*bridgev1.ServerSpec{refSpec("tools", "tools")}}
	// bridged calls as agentd does, on a session of its own (and so a
	// process of its own).
	bridged := func(b *testing.B, conn *grpc.ClientConn) func() {
		sess, err := agentdserver.NewBridgeClient(conn).OpenSession(context.Background(), open)
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
	// unary calls with one CallTool RPC each.
	unary := func(b *testing.B, conn *grpc.ClientConn) func() {
		client := bridgev1.NewBridgeServiceClient(conn)
		id, cancel := benchOpen(b, client, refSpec("tools", "tools"))
		b.Cleanup(cancel)
		req := &bridgev1.CallToolRequest{SessionId: id, ServerName: "tools", ToolName: "echo", Arguments: `{"text":"hello"}`}
		call := func() {
			if _, err := client.CallTool(context.Background(), req); err != nil {
				b.Fatal(err)
			}
		}
		call()
		return call
	}
	// inProcess calls the handler's session directly.
	inProcess := func(b *testing.B, svc *Service, conn *grpc.ClientConn) func() {
		id, cancel := benchOpen(b, bridgev1.NewBridgeServiceClient(conn), refSpec("tools", "tools"))
		b.Cleanup(cancel)
		sess, err := svc.session(id)
		if err != nil {
			b.Fatal(err)
		}
		call := func() {
			if _, err := sess.callTool(context.Background(), "tools", "echo", `{"text":"hello"}`); err != nil {
				b.Fatal(err)
			}
		}
		call()
		return call
	}
	b.Run("direct", func(b *testing.B) {
		call := direct(b)
		for b.Loop() {
			call()
		}
	})
	b.Run("bridge", func(b *testing.B) {
		call := bridged(b, benchServe(b, service(b)))
		for b.Loop() {
			call()
		}
	})
	b.Run("paired", func(b *testing.B) {
		svc := service(b)
		conn := benchServe(b, svc)
		arms := []struct {
			unit string
			call func()
		}{
			{"bridge/direct", bridged(b, conn)},
			{"session/direct", inProcess(b, svc, conn)},
			{"unary/direct", unary(b, conn)},
		}
		d := direct(b)
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
			td := round(d)
			for i, arm := range arms {
				ratios[i] = append(ratios[i], float64(round(arm.call))/float64(td))
			}
		}
		for i, arm := range arms {
			slices.Sort(ratios[i])
			b.ReportMetric(ratios[i][len(ratios[i])/2], arm.unit)
		}
	})
}

// everything returns how to start server-everything over stdio, or skips.
func everything(b *testing.B) (node, script string) {
	b.Helper()
	script, err := filepath.Abs(filepath.Join("..", "node_modules", "@modelcontextprotocol", "server-everything", "dist", "index.js"))
	if err != nil {
		b.Fatal(err)
	}
	if _, err := os.Stat(script); err != nil {
		b.Skip("server-everything is not installed (npm ci)")
	}
	node, err = exec.LookPath("node")
	if err != nil {
		b.Skip("node is not installed")
	}
	return node, script
}

// BenchmarkFirstCall measures a generation's first call to
// server-everything over stdio: open a session, call echo, close. With a
// warm pool the process was spawned and initialized ahead; cold, the call
// waits for Node to start and the handshake. Target: warm at least 20×
// faster.
func BenchmarkFirstCall(b *testing.B) {
	node, script := everything(b)
	for _, tc := range []struct {
		name string
		warm int
	}{{"cold", 0}, {"warm", 1}} {
		b.Run(tc.name, func(b *testing.B) {
			svc, client := benchBridge(b, func(c *config.Bridge) {
				c.Servers["everything"] = config.Server{Command: node, Args: []string{script, "stdio"}, Warm: &tc.warm}
			})
			spec := refSpec("everything", "everything")
			for b.Loop() {
				b.StopTimer()
				if tc.warm > 0 {
					waitWarm(b, svc, "everything")
				}
				b.StartTimer()
				id, cancel := benchOpen(b, client, spec)
				if _, err := client.CallTool(context.Background(), &bridgev1.CallToolRequest{SessionId: id, ServerName: "everything", ToolName: "echo", Arguments: `{"message":"hi"}`}); err != nil {
					b.Fatal(err)
				}
				b.StopTimer()
				if _, err := client.CloseSession(context.Background(), &bridgev1.CloseSessionRequest{SessionId: id}); err != nil {
					b.Fatal(err)
				}
				cancel()
				b.StartTimer()
			}
		})
	}
}

func waitWarm(b *testing.B, svc *Service, name string) {
	b.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for {
		for _, s := range svc.pools.stats() {
			if s.GetServerName() == name && s.GetWarm() > 0 {
				return
			}
		}
		if time.Now().After(deadline) {
			b.Fatal("no warm spare")
		}
		time.Sleep(time.Millisecond)
	}
}

// BenchmarkWarmCacheSetup measures a generation's set-up with a warm
// schema cache: open a session, list the tools of three servers, close.
// It reports the processes spawned per set-up (target: zero).
func BenchmarkWarmCacheSetup(b *testing.B) {
	exe, env := mcptest.Command(b, mcptest.Tools)
	svc, client := benchBridge(b, func(c *config.Bridge) {
		for _, name := range []string{"a", "b", "c"} {
			c.Servers[name] = config.Server{Command: exe, Env: env}
		}
		c.Pool.Warm = 0
	})
	specs := []*bridgev1.ServerSpec{refSpec("a", "a"), refSpec("b", "b"), refSpec("c", "c")}
	setup := func() {
		id, cancel := benchOpen(b, client, specs...)
		if _, err := client.ListTools(context.Background(), &bridgev1.ListToolsRequest{SessionId: id}); err != nil {
			b.Fatal(err)
		}
		if _, err := client.CloseSession(context.Background(), &bridgev1.CloseSessionRequest{SessionId: id}); err != nil {
			b.Fatal(err)
		}
		cancel()
	}
	setup() // warms the cache
	spawned := func() (n int64) {
		for _, s := range svc.pools.stats() {
			n += s.GetSpawned()
		}
		return n
	}
	before := spawned()
	for b.Loop() {
		setup()
	}
	b.ReportMetric(float64(spawned()-before)/float64(b.N), "spawns/op")
}
