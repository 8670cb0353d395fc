package faultsuite

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/agentd/agentd/internal/logtest"

	"go.uber.org/goleak"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/durationpb"
	"google.golang.org/protobuf/types/known/structpb"

	bridgev1 "github.com/agentd/agentd/gen/go/agentd/bridge/v1"
	agentdv1 "github.com/agentd/agentd/gen/go/agentd/v1"
	"github.com/agentd/agentd/internal/app"
	"github.com/agentd/agentd/internal/app/apptest"
	"github.com/agentd/agentd/internal/config"
	"github.com/agentd/agentd/internal/grpcserver"
	"github.com/agentd/agentd/internal/mcptest"
	"github.com/agentd/agentd/internal/proctest"
	"github.com/agentd/agentd/internal/telemetry"
)

func TestMain(m *testing.M) {
	mcptest.Main()
	proctest.VerifyTestMain(m)
}

// settle bounds each wait for a state that agentd, its bridge and their
// processes reach on their own (X-H6): a bound for what never happens,
// with the margin of a loaded machine, not a guess at how long things
// take; a case that passes waits only as long as the state takes to come.
const settle = time.Minute

// stack is one agentd: the AgentService, its embedded bridge and the
// bridge's admin API, served over an in-memory listener. Its registered
// stdio servers are the mcptest fakes "tools", "noisy" (mcptest.Banner)
// and "stubborn".
type stack struct {
	client agentdv1.AgentServiceClient
	admin  bridgev1.BridgeAdminServiceClient
	logs   *logtest.Logs
	stop   func()
}

// options adjust a stack's configuration.
type options func(*config.Config)

// withProvider points the "openai" provider at api.
func withProvider(baseURL string) options {
	return func(c *config.Config) {
		c.Providers = map[string]config.Provider{"openai": {APIKey: "test-key", BaseURL: baseURL, MaxRetries: 2}}
	}
}

// withWarmSpare keeps a warm spare of the registered server name.
func withWarmSpare(name string) options {
	return func(c *config.Config) {
		srv := c.Bridge.Servers[name]
		warm := 1
		srv.Warm = &warm
		c.Bridge.Servers[name] = srv
	}
}

// newStack starts agentd. Every case calls it first: it also records the
// goroutines, child processes and open files already there, and at the
// end of the test stops agentd and checks that it left nothing behind.
func newStack(t *testing.T, opts ...options) *stack {
	t.Helper()
	base := snapshot()
	cfg := config.Default()
	cfg.StateDir = t.TempDir()
	cfg.Bridge.TerminateGrace = 300 * time.Millisecond
	cfg.Bridge.AllowPrivateNetworks = true
	cfg.Bridge.Pool.Warm = 0
	cfg.Bridge.Servers = map[string]config.Server{}
	for name, fake := range map[string]string{"tools": mcptest.Tools, "noisy": mcptest.Banner, "stubborn": mcptest.Stubborn} {
		exe, env := mcptest.Command(t, fake)
		cfg.Bridge.Servers[name] = config.Server{Command: exe, Env: env}
	}
	for _, o := range opts {
		o(&cfg)
	}
	logs := &logtest.Logs{}
	conn, stop := apptest.Serve(t, app.Options{Config: cfg, Logger: telemetry.NewLogger(logs, slog.LevelInfo, "json"), Telemetry: grpcserver.Telemetry{}})
	s := &stack{client: agentdv1.NewAgentServiceClient(conn), admin: bridgev1.NewBridgeAdminServiceClient(conn), logs: logs}
	var once sync.Once
	s.stop = func() {
		once.Do(func() {
			s.wantNoSessions(t)
			stop()
		})
	}
	t.Cleanup(func() {
		s.stop()
		base.wantNothingLeft(t)
	})
	return s
}

// wantNoSessions waits until the bridge has no open session: every
// generation's session closed however it ended.
func (s *stack) wantNoSessions(t *testing.T) {
	t.Helper()
	deadline := time.Now().Add(settle)
	for {
		res, err := s.admin.GetPoolStats(context.Background(), &bridgev1.GetPoolStatsRequest{})
		if err != nil {
			t.Errorf("GetPoolStats: %v", err)
			return
		}
		if res.GetOpenSessions() == 0 {
			return
		}
		if time.Now().After(deadline) {
			t.Errorf("leak: %d bridge sessions still open", res.GetOpenSessions())
			return
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// waitSpare waits until the pool of the registered server name holds a
// warm spare.
func (s *stack) waitSpare(t *testing.T, name string) {
	t.Helper()
	deadline := time.Now().Add(settle)
	for {
		res, err := s.admin.GetPoolStats(t.Context(), &bridgev1.GetPoolStatsRequest{})
		if err != nil {
			t.Fatalf("GetPoolStats: %v", err)
		}
		for _, p := range res.GetPools() {
			if p.GetServerName() == name && p.GetWarm() > 0 {
				return
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("the pool of %q has no warm spare: %v", name, res.GetPools())
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// baseline is what the process held before a case.
type baseline struct {
	goroutines goleak.Option
	fds        int
}

func snapshot() baseline {
	return baseline{goroutines: goleak.IgnoreCurrent(), fds: openFiles()}
}

// wantNothingLeft checks, once agentd stopped, that no goroutine, child
// process or open file remains beyond the baseline.
func (b baseline) wantNothingLeft(t *testing.T) {
	t.Helper()
	deadline := time.Now().Add(settle)
	err := goleak.Find(b.goroutines) // itself retries for about half a second
	for err != nil && time.Now().Before(deadline) {
		err = goleak.Find(b.goroutines)
	}
	if err != nil {
		t.Errorf("leak: goroutines: %v", err)
	}
	for len(proctest.Children()) > 0 && time.Now().Before(deadline) {
		time.Sleep(10 * time.Millisecond)
	}
	if kids := proctest.Children(); len(kids) > 0 {
		t.Errorf("leak: child processes %v", kids)
	}
	for openFiles() > b.fds && time.Now().Before(deadline) {
		time.Sleep(10 * time.Millisecond)
	}
	if n := openFiles(); n > b.fds {
		t.Errorf("leak: %d open files, %d before", n, b.fds)
	}
}

// openFiles counts this process's open file descriptors.
func openFiles() int {
	entries, err := os.ReadDir("/proc/self/fd")
	if err != nil {
		return 0
	}
	return len(entries)
}

// count is how many log lines contain s.
func count(logs *logtest.Logs, s string) int {
	return strings.Count(logs.String(), s)
}

// script is provider_options for the script provider.
func script(t *testing.T, turns ...map[string]any) *structpb.Struct {
	t.Helper()
	list := make([]any, len(turns))
	for i, turn := range turns {
		list[i] = turn
	}
	opts, err := structpb.NewStruct(map[string]any{"script": map[string]any{"turns": list}})
	if err != nil {
		t.Fatal(err)
	}
	return opts
}

// call is a scripted turn that calls tool with args.
func call(tool string, args map[string]any) map[string]any {
	return map[string]any{"tool_calls": []any{map[string]any{"name": tool, "arguments": args}}}
}

// say is a scripted turn that answers with the latest tool outputs.
var say = map[string]any{"text": "{{tool_outputs}}"}

// scripted starts a generation of the script provider with servers.
func scripted(t *testing.T, turns []map[string]any, servers ...*agentdv1.MCPServer) *agentdv1.StartGeneration {
	return &agentdv1.StartGeneration{
		Agent:    &agentdv1.Agent{Provider: "script", ProviderOptions: script(t, turns...), Mcps: servers},
		Messages: []*agentdv1.Message{{Role: agentdv1.Role_ROLE_USER, Parts: []*agentdv1.Part{{Kind: &agentdv1.Part_Text{Text: "go"}}}}},
	}
}

// ref is a registered server, with a read timeout when not zero.
func ref(name string, readTimeout time.Duration) *agentdv1.MCPServer {
	s := &agentdv1.MCPServer{Transport: &agentdv1.MCPServer_Ref{Ref: name}}
	if readTimeout > 0 {
		s.ReadTimeout = durationpb.New(readTimeout)
	}
	return s
}

// url is an HTTP server, with a read timeout when not zero.
func url(name, u string, readTimeout time.Duration) *agentdv1.MCPServer {
	s := &agentdv1.MCPServer{Name: name, Transport: &agentdv1.MCPServer_Url{Url: u}}
	if readTimeout > 0 {
		s.ReadTimeout = durationpb.New(readTimeout)
	}
	return s
}

// outcome is how a generation ended.
type outcome struct {
	events []*agentdv1.GenerateResponse
	status *status.Status // of the stream's end: OK when it completed
}

func (o outcome) completed() *agentdv1.GenerationCompleted {
	if len(o.events) == 0 {
		return nil
	}
	return o.events[len(o.events)-1].GetCompleted()
}

// finished are the tool calls' results, in order.
func (o outcome) finished() []*agentdv1.ToolCallFinished {
	var out []*agentdv1.ToolCallFinished
	for _, ev := range o.events {
		if f := ev.GetToolCallFinished(); f != nil {
			out = append(out, f)
		}
	}
	return out
}

// run runs a generation to its end on a fresh stream.
func (s *stack) run(t *testing.T, ctx context.Context, start *agentdv1.StartGeneration) outcome {
	t.Helper()
	return s.runCtx(t, ctx, start, nil)
}

// runWith runs a generation, calling each with what came so far after
// every event.
func (s *stack) runWith(t *testing.T, ctx context.Context, start *agentdv1.StartGeneration, each func(outcome)) outcome {
	t.Helper()
	return s.runCtx(t, ctx, start, each)
}

func (s *stack) runCtx(t *testing.T, ctx context.Context, start *agentdv1.StartGeneration, each func(outcome)) outcome {
	t.Helper()
	return s.send(t, ctx, &agentdv1.GenerateRequest{Kind: &agentdv1.GenerateRequest_Start{Start: start}}, each)
}

// send opens a stream with first and reads it to its end.
func (s *stack) send(t *testing.T, ctx context.Context, first *agentdv1.GenerateRequest, each func(outcome)) outcome {
	t.Helper()
	stream, err := s.client.Generate(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if err := stream.Send(first); err != nil {
		t.Fatal(err)
	}
	var o outcome
	for {
		ev, err := stream.Recv()
		if errors.Is(err, io.EOF) {
			o.status = status.New(codes.OK, "")
			return o
		}
		if err != nil {
			o.status = status.Convert(err)
			return o
		}
		o.events = append(o.events, ev)
		if each != nil {
			each(o)
		}
	}
}

// wantStatus checks the code of a generation's end and that its message
// says each fact.
func wantStatus(t *testing.T, o outcome, code codes.Code, facts ...string) {
	t.Helper()
	if o.status.Code() != code {
		t.Fatalf("the generation ended with %v %q; want %v", o.status.Code(), o.status.Message(), code)
	}
	for _, f := range facts {
		if !strings.Contains(o.status.Message(), f) {
			t.Errorf("the error %q does not say %q", o.status.Message(), f)
		}
	}
}

// wantCompleted checks that a generation completed with the given final
// text.
func wantCompleted(t *testing.T, o outcome, text string) {
	t.Helper()
	wantStatus(t, o, codes.OK)
	c := o.completed()
	if c == nil {
		t.Fatalf("the stream ended without completed: %v", o.events)
	}
	if got := c.GetMessage().GetParts()[0].GetText(); got != text {
		t.Errorf("final text %q; want %q", got, text)
	}
}
