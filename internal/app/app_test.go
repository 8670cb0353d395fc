package app_test

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.opentelemetry.io/otel/trace"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/testing/protocmp"
	"google.golang.org/protobuf/types/known/durationpb"

	agentdv1 "github.com/agentd/agentd/gen/go/agentd/v1"
	"github.com/agentd/agentd/internal/app"
	"github.com/agentd/agentd/internal/app/apptest"
	"github.com/agentd/agentd/internal/config"
	"github.com/agentd/agentd/internal/grpcserver"
	"github.com/agentd/agentd/internal/mcpdemo"
	"github.com/agentd/agentd/internal/mcptest"
	"github.com/agentd/agentd/internal/pricing"
	"github.com/agentd/agentd/internal/proctest"
	"github.com/agentd/agentd/internal/telemetry"
)

// demoEnv makes the test binary, re-executed by the bridge, serve the demo
// MCP server instead of running tests.
const demoEnv = "AGENTD_TEST_MCP_DEMO"

func TestMain(m *testing.M) {
	mcptest.Main() // a fake MCP server, when the test binary is started as one
	switch {
	case os.Getenv(demoEnv) == "1":
		if err := mcpdemo.Run(context.Background(), os.Stdin, os.Stdout); err != nil {
			os.Exit(1)
		}
		os.Exit(0)
	case os.Getenv(counterEnv) != "":
		os.Exit(runCounter())
	case os.Getenv(serveEnv) == "1":
		os.Exit(runServe())
	case os.Getenv(bridgeEnv) == "1":
		os.Exit(runBridge())
	case os.Getenv(replicaToolsEnv) != "":
		os.Exit(runReplicaTools())
	}
	proctest.VerifyTestMain(m)
}

// stack is an agentd with an embedded bridge, served over bufconn.
type stack struct {
	client agentdv1.AgentServiceClient
	health healthpb.HealthClient
	spans  *tracetest.SpanRecorder
	stop   func() // stops the server and waits for it
}

// testConfig is the default configuration with a state directory of the
// test's own and no warm spare.
func testConfig(t testing.TB) config.Config {
	t.Helper()
	cfg := config.Default()
	cfg.StateDir = t.TempDir()
	cfg.Bridge.Pool.Warm = 0
	cfg.ShutdownDrain = 0 // stopped by the test, with no load balancer to tell
	return cfg
}

// demoConfig is testConfig whose bridge runs the demo MCP server (the
// test binary) as "demo", with warm spares of it and a short
// terminate_grace.
func demoConfig(t *testing.T, warm int) config.Config {
	t.Helper()
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	cfg := testConfig(t)
	cfg.Bridge.Servers = map[string]config.Server{"demo": {Command: exe, Env: map[string]string{demoEnv: "1"}, Warm: &warm}}
	cfg.Bridge.TerminateGrace = 500 * time.Millisecond
	return cfg
}

// newStack starts agentd; warm is the demo server's warm spares.
func newStack(t *testing.T, warm int) *stack {
	t.Helper()
	cfg := demoConfig(t, warm)
	spans := tracetest.NewSpanRecorder()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(spans))
	o := app.Options{
		Config:    cfg,
		Logger:    slog.New(slog.DiscardHandler),
		Telemetry: grpcserver.Telemetry{TracerProvider: tp, Propagator: telemetry.Propagator()},
	}
	conn, stop := apptest.Serve(t, o)
	s := &stack{
		client: agentdv1.NewAgentServiceClient(conn),
		health: healthpb.NewHealthClient(conn),
		spans:  spans,
		stop:   stop,
	}
	return s
}

func demoStart(t *testing.T) *agentdv1.StartGeneration {
	t.Helper()
	return exampleStart(t, "demo-start.json")
}

// exampleStart reads one of the examples' StartGenerations.
func exampleStart(t *testing.T, name string) *agentdv1.StartGeneration {
	t.Helper()
	data, err := os.ReadFile(filepath.Join("..", "..", "examples", name))
	if err != nil {
		t.Fatal(err)
	}
	start := &agentdv1.StartGeneration{}
	if err := protojson.Unmarshal(data, start); err != nil {
		t.Fatal(err)
	}
	return start
}

func generate(t *testing.T, client agentdv1.AgentServiceClient, start *agentdv1.StartGeneration) []*agentdv1.GenerateResponse {
	t.Helper()
	stream, err := client.Generate(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	if err := stream.Send(&agentdv1.GenerateRequest{Kind: &agentdv1.GenerateRequest_Start{Start: start}}); err != nil {
		t.Fatal(err)
	}
	var events []*agentdv1.GenerateResponse
	for {
		ev, err := stream.Recv()
		if errors.Is(err, io.EOF) {
			return events
		}
		if err != nil {
			t.Fatalf("Recv after %d events: %v", len(events), err)
		}
		events = append(events, ev)
	}
}

// normalize blanks what differs between runs: ids and durations.
func normalize(events []*agentdv1.GenerateResponse) {
	for _, ev := range events {
		switch k := ev.GetEvent().(type) {
		case *agentdv1.GenerateResponse_Started:
			k.Started.GenerationId = "gen"
		case *agentdv1.GenerateResponse_ToolCallFinished:
			k.ToolCallFinished.Duration = durationpb.New(0)
		case *agentdv1.GenerateResponse_Completed:
			k.Completed.GenerationId = "gen"
		}
	}
}

func text(s string) *agentdv1.GenerateResponse {
	return &agentdv1.GenerateResponse{Event: &agentdv1.GenerateResponse_TextDelta{TextDelta: &agentdv1.TextDelta{Text: s}}}
}

func textPart(s string) *agentdv1.Part { return &agentdv1.Part{Kind: &agentdv1.Part_Text{Text: s}} }

// TestDemoGeneration drives the demo generation through the whole
// in-memory gRPC stack (AgentService → embedded BridgeService → a real
// stdio MCP server) and checks every event.
//
// Not parallel: it counts the test process's children, which another
// test's MCP servers would disturb.
func TestDemoGeneration(t *testing.T) {
	// No warm spare: every child left afterwards would be the generation's.
	s := newStack(t, 0)
	events := generate(t, s.client, demoStart(t))
	normalize(events)

	call := &agentdv1.ToolCall{Id: "call_1_1", Name: "echo", Arguments: `{"text":"hello from agentd"}`}
	first := &agentdv1.Message{Role: agentdv1.Role_ROLE_ASSISTANT, Parts: []*agentdv1.Part{textPart("Let me ask the demo server."), {Kind: &agentdv1.Part_ToolCall{ToolCall: call}}}}
	result := &agentdv1.Message{Role: agentdv1.Role_ROLE_TOOL, Parts: []*agentdv1.Part{{Kind: &agentdv1.Part_ToolResult{ToolResult: &agentdv1.ToolResult{
		ToolCallId: "call_1_1", Name: "echo", Output: "hello from agentd",
	}}}}}
	final := &agentdv1.Message{Role: agentdv1.Role_ROLE_ASSISTANT, Parts: []*agentdv1.Part{textPart("The demo server answered: hello from agentd")}}
	mcpTool := func(name string) *agentdv1.ToolInfo {
		return &agentdv1.ToolInfo{Name: name, Origin: agentdv1.ToolOrigin_TOOL_ORIGIN_MCP, ServerName: "demo", ServerToolName: name}
	}
	// The script's tokens cost nothing, a cost the shipped price table
	// knows.
	prices, err := pricing.Load("", pricing.Inline{})
	if err != nil {
		t.Fatal(err)
	}
	free := prices.Cost("script", "", nil)
	usage := func(turn int32, in, out int64, stop agentdv1.StopReason) *agentdv1.GenerateResponse {
		return &agentdv1.GenerateResponse{Event: &agentdv1.GenerateResponse_Usage{Usage: &agentdv1.Usage{
			Turn: turn, InputTokens: in, OutputTokens: out, ToolSchemaBytes: 579, StopReason: stop, Cost: free,
		}}}
	}
	want := []*agentdv1.GenerateResponse{
		{Event: &agentdv1.GenerateResponse_Started{Started: &agentdv1.GenerationStarted{
			GenerationId: "gen",
			Servers:      []*agentdv1.ServerPlacement{{Name: "demo", Placement: agentdv1.Placement_PLACEMENT_BRIDGE, Transport: agentdv1.Transport_TRANSPORT_STDIO}},
			Tools:        []*agentdv1.ToolInfo{mcpTool("add"), mcpTool("echo"), mcpTool("fail")},
		}}},
		text("Let"), text(" me"), text(" ask"), text(" the"), text(" demo"), text(" server."),
		usage(1, 15, 7, agentdv1.StopReason_STOP_REASON_TOOL_USE),
		{Event: &agentdv1.GenerateResponse_ToolCallStarted{ToolCallStarted: &agentdv1.ToolCallStarted{
			CallId: "call_1_1", ToolName: "echo", ServerName: "demo", Origin: agentdv1.ToolOrigin_TOOL_ORIGIN_MCP, Arguments: `{"text":"hello from agentd"}`, Turn: 1,
		}}},
		{Event: &agentdv1.GenerateResponse_ToolCallFinished{ToolCallFinished: &agentdv1.ToolCallFinished{
			CallId: "call_1_1", ToolName: "echo", ServerName: "demo", Origin: agentdv1.ToolOrigin_TOOL_ORIGIN_MCP, Duration: durationpb.New(0), Output: "hello from agentd", Turn: 1,
		}}},
		text("The"), text(" demo"), text(" server"), text(" answered:"), text(" hello"), text(" from"), text(" agentd"),
		usage(2, 33, 11, agentdv1.StopReason_STOP_REASON_END_TURN),
		{Event: &agentdv1.GenerateResponse_Completed{Completed: &agentdv1.GenerationCompleted{
			GenerationId: "gen",
			Message:      final,
			Messages:     []*agentdv1.Message{first, result, final},
			Usage:        &agentdv1.Usage{InputTokens: 48, OutputTokens: 18, ToolSchemaBytes: 2 * 579, Cost: free},
			StopReason:   agentdv1.StopReason_STOP_REASON_END_TURN,
			ToolTurns:    1,
			ToolCalls:    1,
		}}},
	}
	// X-G2: the events are numbered 1, 2, ... in the order sent.
	for i, ev := range events {
		if ev.GetSequence() != int64(i+1) {
			t.Errorf("event %d has sequence %d; want %d", i, ev.GetSequence(), i+1)
		}
	}
	// The started event names the trace of the call, which tracing made.
	if id := events[0].GetStarted().GetTraceId(); !regexp.MustCompile(`^[0-9a-f]{32}$`).MatchString(id) {
		t.Errorf("started.trace_id = %q, want a W3C trace id", id)
	}
	if diff := cmp.Diff(want, events, protocmp.Transform(), protocmp.IgnoreFields(&agentdv1.GenerateResponse{}, "sequence"),
		protocmp.IgnoreFields(&agentdv1.GenerationStarted{}, "trace_id")); diff != "" {
		t.Errorf("events (-want +got):\n%s", diff)
	}
	// The generation's process stops after its stream has ended.
	deadline := time.Now().Add(settle)
	for kids := proctest.Children(); len(kids) > 0; kids = proctest.Children() {
		if time.Now().After(deadline) {
			t.Fatalf("child processes left after the generation: %v", kids)
		}
		time.Sleep(10 * time.Millisecond)
	}

	// The trace crosses from the AgentService to the bridge: every bridge
	// server span descends from the Generate server span.
	s.stop()
	byID := make(map[trace.SpanID]sdktrace.ReadOnlySpan)
	var generateSpan sdktrace.ReadOnlySpan
	var bridgeSpans []sdktrace.ReadOnlySpan
	for _, sp := range s.spans.Ended() {
		byID[sp.SpanContext().SpanID()] = sp
		switch {
		case sp.Name() == "agentd.v1.AgentService/Generate" && sp.SpanKind() == trace.SpanKindServer:
			generateSpan = sp
		case strings.HasPrefix(sp.Name(), "agentd.bridge.v1.BridgeService/") && sp.SpanKind() == trace.SpanKindServer,
			sp.Name() == "tools/call echo": // the call's span, on the CallTools stream
			bridgeSpans = append(bridgeSpans, sp)
		}
	}
	if !slices.ContainsFunc(bridgeSpans, func(sp sdktrace.ReadOnlySpan) bool { return sp.Name() == "tools/call echo" }) {
		t.Error("no bridge span for the tool call")
	}
	if generateSpan == nil {
		t.Fatal("no Generate server span")
	}
	if len(bridgeSpans) < 3 { // OpenSession, ListTools, CallTool (and CloseSession)
		t.Fatalf("want the bridge's server spans, got %d", len(bridgeSpans))
	}
	for _, sp := range bridgeSpans {
		if sp.SpanContext().TraceID() != generateSpan.SpanContext().TraceID() {
			t.Errorf("%s: trace %s, want the Generate trace %s", sp.Name(), sp.SpanContext().TraceID(), generateSpan.SpanContext().TraceID())
			continue
		}
		if !sp.Parent().IsRemote() {
			t.Errorf("%s: parent is not remote: the context did not cross the gRPC hop", sp.Name())
		}
		if !descends(sp, generateSpan, byID) {
			t.Errorf("%s does not descend from the Generate span", sp.Name())
		}
	}
}

// TestRepeatedGenerations: the generations after the first name the demo
// server's list by its schema-cache revision, and the bridge answers it
// unchanged; each offers exactly what the first did, so every
// event of every generation is the same.
func TestRepeatedGenerations(t *testing.T) {
	t.Parallel()
	s := newStack(t, 0)
	var first []*agentdv1.GenerateResponse
	for i := range 3 {
		events := generate(t, s.client, demoStart(t))
		normalize(events)
		if i == 0 {
			first = events
			continue
		}
		if diff := cmp.Diff(first, events, protocmp.Transform(), protocmp.IgnoreFields(&agentdv1.GenerationStarted{}, "trace_id")); diff != "" {
			t.Errorf("generation %d, against the first (-first +got):\n%s", i+1, diff)
		}
	}
}

func descends(sp, ancestor sdktrace.ReadOnlySpan, byID map[trace.SpanID]sdktrace.ReadOnlySpan) bool {
	for range 10 {
		parent, ok := byID[sp.Parent().SpanID()]
		if !ok {
			return false
		}
		if parent.SpanContext().SpanID() == ancestor.SpanContext().SpanID() {
			return true
		}
		sp = parent
	}
	return false
}

// TestHealth checks that the AgentService reports SERVING.
func TestHealth(t *testing.T) {
	t.Parallel()
	s := newStack(t, 0)
	for _, service := range []string{"", "agentd.v1.AgentService"} {
		res, err := s.health.Check(t.Context(), &healthpb.HealthCheckRequest{Service: service})
		if err != nil {
			t.Fatalf("Check(%q): %v", service, err)
		}
		if res.GetStatus() != healthpb.HealthCheckResponse_SERVING {
			t.Errorf("Check(%q) = %v, want SERVING", service, res.GetStatus())
		}
	}
}

// TestShutdownStopsGenerations: stopping agentd while a generation waits
// for an approval ends it and leaves no MCP server process behind (X-L7).
// Not parallel, like TestDemoGeneration.
func TestShutdownStopsGenerations(t *testing.T) {
	s := newStack(t, 2) // warm spares must stop too
	waitForChildren(t, 2)
	start := demoStart(t)
	start.Agent.RequiresApproval = []string{"echo"}
	stream, err := s.client.Generate(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	if err := stream.Send(&agentdv1.GenerateRequest{Kind: &agentdv1.GenerateRequest_Start{Start: proto.Clone(start).(*agentdv1.StartGeneration)}}); err != nil {
		t.Fatal(err)
	}
	for {
		ev, err := stream.Recv()
		if err != nil {
			t.Fatalf("stream ended before the approval request: %v", err)
		}
		if ev.GetApprovalRequest() != nil {
			break
		}
	}
	s.stop()
	if kids := proctest.Children(); len(kids) > 0 {
		t.Errorf("child processes left after shutdown: %v", kids)
	}
}

// settle bounds each wait of these tests for a state that real processes
// and connections reach (X-H6): it is a bound for what never happens, with
// the margin of a loaded machine, not a guess at how long things take; a
// test that passes waits only as long as the state takes to come.
const settle = time.Minute

// waitForChildren waits until the test process has at least n children.
func waitForChildren(t *testing.T, n int) {
	t.Helper()
	deadline := time.Now().Add(settle)
	for len(proctest.Children()) < n {
		if time.Now().After(deadline) {
			t.Fatalf("want %d child processes, have %v", n, proctest.Children())
		}
		time.Sleep(10 * time.Millisecond)
	}
}
