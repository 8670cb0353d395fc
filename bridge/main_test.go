package bridge

import (
	"context"
	"fmt"
	"maps"
	"net"
	"strconv"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/test/bufconn"
	"google.golang.org/protobuf/types/known/durationpb"

	bridgev1 "github.com/agentd/agentd/gen/go/agentd/bridge/v1"
	"github.com/agentd/agentd/internal/config"
	"github.com/agentd/agentd/internal/mcptest"
	"github.com/agentd/agentd/internal/proctest"
	"github.com/agentd/agentd/internal/testwait"
)

func TestMain(m *testing.M) {
	mcptest.Main()
	proctest.VerifyTestMain(m)
}

const (
	// grace keeps the SIGTERM and SIGKILL escalation short.
	grace = 200 * time.Millisecond
	// roomyTimeout leaves a loaded machine plenty of time: it bounds only
	// what must not fail (X-H6).
	roomyTimeout = 2 * time.Minute
	// shortTimeout is the read_timeout of the timeout tests: the hanging
	// call's, and the trivial calls' around it. Their processes are warm
	// spares (warmTools), whose start and handshake start_timeout bounds,
	// so a busy machine's slow start never meets it (X-H6).
	shortTimeout = 2 * time.Second
)

// fixture is a Service served over an in-memory gRPC connection. The
// registered servers are "tools" (mcptest.Tools) and "demo" (agentd's demo
// server); the test binary itself is the one allowed command.
type fixture struct {
	svc    *Service
	client bridgev1.BridgeServiceClient
	lis    *bufconn.Listener
	exe    string
}

func newFixture(t *testing.T) *fixture {
	t.Helper()
	return newFixtureWith(t, nil)
}

// openErr opens a session of specs and returns the error that refuses it,
// which arrives with the stream's first message; nil if it opened.
func (f *fixture) openErr(t *testing.T, specs ...*bridgev1.ServerSpec) error {
	t.Helper()
	stream, err := f.client.OpenSession(t.Context(), &bridgev1.OpenSessionRequest{Servers: specs})
	if err == nil {
		_, err = stream.Recv()
	}
	return err
}

// newFixtureWith is newFixture with the configuration changed by edit
// before the service starts.
func newFixtureWith(t *testing.T, edit func(*config.Bridge)) *fixture {
	t.Helper()
	return newFixtureOptions(t, edit, nil)
}

// newFixtureOptions is newFixtureWith with the service's options changed
// by editOpts, served by a gRPC server with serverOpts.
func newFixtureOptions(t *testing.T, edit func(*config.Bridge), editOpts func(*Options), serverOpts ...grpc.ServerOption) *fixture {
	t.Helper()
	exe, toolsEnv := mcptest.Command(t, mcptest.Tools)
	_, demoEnv := mcptest.Command(t, mcptest.Demo)
	cfg := config.Default().Bridge
	cfg.AllowedCommands = []string{exe}
	cfg.Servers = map[string]config.Server{
		"tools": {Command: exe, Env: toolsEnv},
		"demo":  {Command: exe, Env: demoEnv},
	}
	cfg.TerminateGrace = grace
	cfg.Pool.Warm = 0 // processes start on first use, so the tests can watch them
	if edit != nil {
		edit(&cfg)
	}
	opts := Options{Config: cfg}
	if editOpts != nil {
		editOpts(&opts)
	}
	svc, err := New(opts)
	if err != nil {
		t.Fatal(err)
	}
	lis := bufconn.Listen(1 << 20)
	srv := grpc.NewServer(serverOpts...)
	svc.Register(srv)
	served := make(chan struct{})
	go func() {
		defer close(served)
		_ = srv.Serve(lis)
	}()
	f := &fixture{svc: svc, lis: lis, exe: exe}
	t.Cleanup(func() {
		srv.Stop()
		<-served
		svc.Close()
	})
	f.client = bridgev1.NewBridgeServiceClient(f.dial(t))
	return f
}

// dial opens a client connection of its own, closed when the test ends.
func (f *fixture) dial(t *testing.T) *grpc.ClientConn {
	t.Helper()
	conn, err := grpc.NewClient("passthrough:///bufnet",
		grpc.WithContextDialer(func(ctx context.Context, _ string) (net.Conn, error) { return f.lis.DialContext(ctx) }),
		grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = conn.Close() })
	return conn
}

// openWith opens a session with req on client and returns its first
// event, the SessionOpened, and its stream. The session lives until ctx
// ends, the stream is dropped or it is closed.
func openWith(t *testing.T, ctx context.Context, client bridgev1.BridgeServiceClient, req *bridgev1.OpenSessionRequest) (*bridgev1.SessionOpened, grpc.ServerStreamingClient[bridgev1.OpenSessionResponse]) {
	t.Helper()
	stream, err := client.OpenSession(ctx, req)
	if err != nil {
		t.Fatalf("OpenSession: %v", err)
	}
	resp, err := stream.Recv()
	if err != nil {
		t.Fatalf("OpenSession: %v", err)
	}
	if resp.GetOpened().GetSessionId() == "" {
		t.Fatalf("first OpenSession event = %v, want opened", resp)
	}
	return resp.GetOpened(), stream
}

// open opens a session of specs on client for the test's generation, and
// returns its id and stream, as openWith.
func open(t *testing.T, ctx context.Context, client bridgev1.BridgeServiceClient, specs ...*bridgev1.ServerSpec) (string, grpc.ServerStreamingClient[bridgev1.OpenSessionResponse]) {
	t.Helper()
	opened, stream := openWith(t, ctx, client, &bridgev1.OpenSessionRequest{Servers: specs, GenerationId: t.Name()})
	return opened.GetSessionId(), stream
}

// openedBy opens a session with req on client and returns its
// SessionOpened; the session lives until the test ends.
func openedBy(t *testing.T, client bridgev1.BridgeServiceClient, req *bridgev1.OpenSessionRequest) *bridgev1.SessionOpened {
	t.Helper()
	opened, _ := openWith(t, t.Context(), client, req)
	return opened
}

// refSpec declares a registered server.
func refSpec(name, ref string) *bridgev1.ServerSpec {
	return &bridgev1.ServerSpec{Name: name, Transport: &bridgev1.ServerSpec_Ref{Ref: ref}, ReadTimeout: durationpb.New(roomyTimeout)}
}

// commandSpec declares a fake server by command, with extra environment.
func commandSpec(t *testing.T, name, server string, env map[string]string) *bridgev1.ServerSpec {
	t.Helper()
	exe, e := mcptest.Command(t, server)
	maps.Copy(e, env)
	return &bridgev1.ServerSpec{
		Name:        name,
		Transport:   &bridgev1.ServerSpec_Stdio{Stdio: &bridgev1.StdioTarget{Command: exe, Env: e}},
		ReadTimeout: durationpb.New(roomyTimeout),
	}
}

func call(t *testing.T, client bridgev1.BridgeServiceClient, session, server, tool, args string) *bridgev1.CallToolResponse {
	t.Helper()
	res, err := client.CallTool(t.Context(), &bridgev1.CallToolRequest{SessionId: session, ServerName: server, ToolName: tool, Arguments: args})
	if err != nil {
		t.Fatalf("CallTool(%s, %s): %v", server, tool, err)
	}
	return res
}

// callPid returns the pid of server's process, starting it if needed.
func callPid(t *testing.T, client bridgev1.BridgeServiceClient, session, server, tool string) int {
	t.Helper()
	res := call(t, client, session, server, tool, "")
	pid, err := strconv.Atoi(res.GetOutput())
	if err != nil || res.GetIsError() {
		t.Fatalf("%s on %s = %v, want a pid", tool, server, res)
	}
	return pid
}

// warmTools registers the Tools fake as name, with a warm spare.
func warmTools(t *testing.T, name string) func(*config.Bridge) {
	t.Helper()
	exe, env := mcptest.Command(t, mcptest.Tools)
	return func(c *config.Bridge) {
		warm := 1
		c.Servers[name] = config.Server{Command: exe, Env: env, Warm: &warm}
	}
}

// registeredTools registers the Tools fake under each name of shared,
// shared as its value says.
func registeredTools(t *testing.T, shared map[string]config.Shared) func(*config.Bridge) {
	t.Helper()
	exe, env := mcptest.Command(t, mcptest.Tools)
	return func(c *config.Bridge) {
		for name, s := range shared {
			c.Servers[name] = config.Server{Command: exe, Env: env, Shared: s}
		}
	}
}

// slowFixture is a fixture whose registered server slow, the Tools fake,
// keeps a warm spare, and slow's declaration with the short read_timeout
// of the timeout tests: a hanging call runs on the spare, so its
// read_timeout bounds no handshake, which a busy machine may slow.
func slowFixture(t *testing.T) (*fixture, *bridgev1.ServerSpec) {
	t.Helper()
	f := newFixtureWith(t, warmTools(t, "slow"))
	waitSpare(t, f, "slow")
	spec := refSpec("slow", "slow")
	spec.ReadTimeout = durationpb.New(shortTimeout)
	return f, spec
}

// waitSpare waits until the pool of the registered server name holds a
// warm spare.
func waitSpare(t *testing.T, f *fixture, name string) {
	t.Helper()
	waitPools(t, f, name, func(s *bridgev1.PoolStats) bool { return s.GetWarm() == 1 })
}

// waitSessions waits until the service holds n sessions.
func waitSessions(t *testing.T, svc *Service, n int) {
	t.Helper()
	testwait.Until(t, func() error {
		if got := svc.Sessions(); got != n {
			return fmt.Errorf("Sessions() = %d, want %d", got, n)
		}
		return nil
	})
}
