package app_test

import (
	"context"
	"encoding/hex"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"go.opentelemetry.io/otel"
	colmetricspb "go.opentelemetry.io/proto/otlp/collector/metrics/v1"
	coltracepb "go.opentelemetry.io/proto/otlp/collector/trace/v1"
	commonpb "go.opentelemetry.io/proto/otlp/common/v1"
	metricspb "go.opentelemetry.io/proto/otlp/metrics/v1"
	tracepb "go.opentelemetry.io/proto/otlp/trace/v1"
	"google.golang.org/grpc"

	agentdv1 "github.com/agentd/agentd/gen/go/agentd/v1"
	"github.com/agentd/agentd/internal/app"
	"github.com/agentd/agentd/internal/app/apptest"
	"github.com/agentd/agentd/internal/config"
	"github.com/agentd/agentd/internal/grpcserver"
	"github.com/agentd/agentd/internal/mcptest"
	"github.com/agentd/agentd/internal/telemetry"
)

// otlpReceiver is an OTLP/gRPC collector on loopback that keeps what
// agentd and its bridge export: the operator's view of them.
type otlpReceiver struct {
	coltracepb.UnimplementedTraceServiceServer

	mu      sync.Mutex
	spans   []otlpSpan
	metrics []otlpMetric
}

// otlpSpan is one exported span with the service that exported it.
type otlpSpan struct {
	service string
	*tracepb.Span
}

// otlpMetric is one exported data point: the instrument's name, the
// service and the point's attributes.
type otlpMetric struct {
	service, name string
	attrs         map[string]string
}

func (r *otlpReceiver) Export(_ context.Context, req *coltracepb.ExportTraceServiceRequest) (*coltracepb.ExportTraceServiceResponse, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, rs := range req.GetResourceSpans() {
		service := attrMap(rs.GetResource().GetAttributes())["service.name"]
		for _, ss := range rs.GetScopeSpans() {
			for _, s := range ss.GetSpans() {
				r.spans = append(r.spans, otlpSpan{service: service, Span: s})
			}
		}
	}
	return &coltracepb.ExportTraceServiceResponse{}, nil
}

// metricsService adapts the receiver to the metrics service, whose
// method has the same name as the trace service's.
type metricsService struct {
	colmetricspb.UnimplementedMetricsServiceServer
	r *otlpReceiver
}

func (m metricsService) Export(_ context.Context, req *colmetricspb.ExportMetricsServiceRequest) (*colmetricspb.ExportMetricsServiceResponse, error) {
	m.r.mu.Lock()
	defer m.r.mu.Unlock()
	for _, rm := range req.GetResourceMetrics() {
		service := attrMap(rm.GetResource().GetAttributes())["service.name"]
		for _, sm := range rm.GetScopeMetrics() {
			for _, mt := range sm.GetMetrics() {
				for _, attrs := range pointAttrs(mt) {
					m.r.metrics = append(m.r.metrics, otlpMetric{service: service, name: mt.GetName(), attrs: attrMap(attrs)})
				}
			}
		}
	}
	return &colmetricspb.ExportMetricsServiceResponse{}, nil
}

func pointAttrs(m *metricspb.Metric) [][]*commonpb.KeyValue {
	var out [][]*commonpb.KeyValue
	switch d := m.GetData().(type) {
	case *metricspb.Metric_Sum:
		for _, p := range d.Sum.GetDataPoints() {
			out = append(out, p.GetAttributes())
		}
	case *metricspb.Metric_Gauge:
		for _, p := range d.Gauge.GetDataPoints() {
			out = append(out, p.GetAttributes())
		}
	case *metricspb.Metric_Histogram:
		for _, p := range d.Histogram.GetDataPoints() {
			out = append(out, p.GetAttributes())
		}
	}
	return out
}

func attrMap(kvs []*commonpb.KeyValue) map[string]string {
	m := make(map[string]string, len(kvs))
	for _, kv := range kvs {
		v := kv.GetValue()
		switch v.GetValue().(type) {
		case *commonpb.AnyValue_StringValue:
			m[kv.GetKey()] = v.GetStringValue()
		case *commonpb.AnyValue_IntValue:
			m[kv.GetKey()] = fmt.Sprint(v.GetIntValue())
		case *commonpb.AnyValue_BoolValue:
			m[kv.GetKey()] = fmt.Sprint(v.GetBoolValue())
		case *commonpb.AnyValue_ArrayValue:
			var parts []string
			for _, e := range v.GetArrayValue().GetValues() {
				parts = append(parts, e.GetStringValue())
			}
			m[kv.GetKey()] = strings.Join(parts, ",")
		default:
			m[kv.GetKey()] = v.String()
		}
	}
	return m
}

// startOTLPReceiver serves the receiver on loopback and points the
// standard OTEL_* variables at it (OTLP over gRPC), as an operator would.
func startOTLPReceiver(t *testing.T) *otlpReceiver {
	t.Helper()
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	r := &otlpReceiver{}
	srv := grpc.NewServer()
	coltracepb.RegisterTraceServiceServer(srv, r)
	colmetricspb.RegisterMetricsServiceServer(srv, metricsService{r: r})
	done := make(chan struct{})
	go func() { defer close(done); _ = srv.Serve(lis) }()
	t.Cleanup(func() { srv.Stop(); <-done })
	t.Setenv("OTEL_EXPORTER_OTLP_ENDPOINT", "http://"+lis.Addr().String())
	t.Setenv("OTEL_EXPORTER_OTLP_PROTOCOL", "grpc")
	t.Setenv("OTEL_EXPORTER_OTLP_INSECURE", "true")
	return r
}

// otlpTelemetry is a service's tracer and meter providers exporting to the
// receiver the environment names, and the function that flushes both.
func otlpTelemetry(t *testing.T, service string) (grpcserver.Telemetry, *telemetry.Metrics, func()) {
	t.Helper()
	prev := otel.GetTracerProvider()
	tp, shutdown, err := telemetry.Setup(t.Context(), service, os.Getenv)
	if err != nil {
		t.Fatal(err)
	}
	otel.SetTracerProvider(prev) // Setup installs it globally; the test passes it explicitly
	metrics, err := telemetry.SetupMetrics(t.Context(), service, os.Getenv, true)
	if err != nil {
		t.Fatal(err)
	}
	var once sync.Once
	flush := func() {
		once.Do(func() {
			ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
			defer cancel()
			if err := shutdown(ctx); err != nil {
				t.Errorf("%s: flushing spans: %v", service, err)
			}
			if err := metrics.Shutdown(ctx); err != nil {
				t.Errorf("%s: flushing metrics: %v", service, err)
			}
		})
	}
	t.Cleanup(flush)
	return grpcserver.Telemetry{TracerProvider: tp, MeterProvider: metrics.MeterProvider(), Propagator: telemetry.Propagator()}, metrics, flush
}

// TestOperatorView proves the telemetry as an operator sees agentd: the
// standard OTEL_* variables point agentd and a remote `agentd bridge` at
// an OTLP receiver. One generation meets a provider 429, calls a tool
// that fails, one that shows the trace context it received and, on a
// Streamable HTTP server, one answered with a JSON-RPC error, waits for
// an approval until its client leaves (a pause), and is resumed with the
// approval to completion. The receiver must then hold one trace per run
// of the generation, with the span tree of X-O2 (each run's bridge
// session closing within its invoke_agent span), the MCP servers must
// have seen the trace context (X-O3), and the metrics must arrive with
// their labels (X-O1).
func TestOperatorView(t *testing.T) {
	receiver := startOTLPReceiver(t)
	exe, env := mcptest.Command(t, mcptest.Tools)
	web := mcptest.NewHTTP(t, mcptest.HTTPOptions{Mode: mcptest.Streamable})

	// The remote bridge, exporting as agentd-bridge.
	bridgeTel, bridgeMetrics, flushBridge := otlpTelemetry(t, telemetry.ServiceBridge)
	bcfg := testConfig(t)
	bcfg.Bridge.Servers = map[string]config.Server{"tools": {Command: exe, Env: env}}
	bcfg.Bridge.TerminateGrace = 500 * time.Millisecond
	bcfg.Bridge.AllowPrivateNetworks = true
	if err := bcfg.Validate(); err != nil {
		t.Fatal(err)
	}
	bo := app.Options{Config: bcfg, Logger: slog.New(slog.DiscardHandler), Telemetry: bridgeTel}
	b, err := app.NewBridge(bo)
	if err != nil {
		t.Fatal(err)
	}
	bridgeAddr, stopBridge := startTCP(t, func(ctx context.Context, lis net.Listener) error { return b.Serve(ctx, lis, bo) })

	// The provider: a 429 first, then the script.
	api := newCanaryAPI()
	apiSrv := httptest.NewServer(api)
	t.Cleanup(apiSrv.Close)
	api.set(func(w http.ResponseWriter, _ *http.Request, _ []byte, n int) {
		switch n {
		case 1:
			w.Header().Set("retry-after-ms", "1")
			canaryJSON(w, http.StatusTooManyRequests, map[string]any{"error": map[string]any{"message": "slow down", "type": "rate_limit"}})
		case 2:
			canaryToolCalls(w, n, [2]string{"fail", `{"text":"it broke"}`}, [2]string{"meta", `{}`}, [2]string{"rpc_error", rpcErrorArgs})
		case 3:
			canaryToolCalls(w, n, [2]string{"echo", `{"text":"approved"}`})
		default:
			canaryText(w, "all done")
		}
	})

	tel, metrics, flushAgentd := otlpTelemetry(t, telemetry.ServiceAgent)
	cfg := testConfig(t)
	cfg.Bridge.Address = bridgeAddr
	cfg.Providers = map[string]config.Provider{"openai": {APIKey: "sk-proof", BaseURL: apiSrv.URL + "/v1", MaxRetries: 2}}
	cfg.Metrics.Listen = "127.0.0.1:0"
	cfg.Bridge.AllowPrivateNetworks = true
	if err := cfg.Validate(); err != nil {
		t.Fatal(err)
	}
	a, conn, stopAgentd := apptest.ServeAgent(t, app.Options{Config: cfg, Logger: slog.New(slog.DiscardHandler), Telemetry: tel, Metrics: metrics.Handler()})
	client := agentdv1.NewAgentServiceClient(conn)

	agent := &agentdv1.Agent{Provider: "openai", Model: "gpt-4o-mini", RequiresApproval: []string{"echo"},
		Mcps: []*agentdv1.MCPServer{
			{Name: "tools", Transport: &agentdv1.MCPServer_Ref{Ref: "tools"}, AllowedTools: []string{"echo", "fail", "meta"}},
			{Name: "web", Transport: &agentdv1.MCPServer_Url{Url: web.URL}, AllowedTools: []string{"rpc_error"}, Headers: map[string]string{"X-Proof-Key": proofKey}},
		}}
	var c canaryCapture
	request, paused, _ := c.pauseAtApproval(t, client, canaryStart(agent), cfg.StateDir)
	// While it is paused, the store-wide gauge counts it (an observed
	// instrument: read at collection, so scraped now).
	whilePaused := scrape(t, a.MetricsAddr())
	if line := grepLines(whilePaused, "agentd_generations_paused{"); !strings.Contains(line, `tenant=""`) || !strings.HasSuffix(line, "} 1") {
		t.Errorf("X-O1 while one generation is paused the endpoint shows %q; want agentd_generations_paused{...tenant=\"\"} 1", line)
	}
	events, err := c.generate(t, client, canaryApprove(t, paused, request, agent), nil)
	if err != nil || len(events) == 0 || events[len(events)-1].GetCompleted() == nil {
		t.Fatalf("the resume did not complete: err %v after %d events", err, len(events))
	}
	generation := paused.GetGenerationId()

	// What the meta tool saw: the trace context of its call (X-O3).
	var metaOut string
	for _, line := range strings.Split(c.events.String(), "\n") {
		if strings.Contains(line, `"toolCallFinished"`) && strings.Contains(line, `"meta"`) {
			metaOut = line
		}
	}

	// The Prometheus endpoints show the same instruments: agentd's, and
	// what the bridge's would serve (its handler, asked directly).
	scraped := scrape(t, a.MetricsAddr())
	rec := httptest.NewRecorder()
	bridgeMetrics.Handler().ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "/metrics", nil))
	scraped += rec.Body.String()

	stopAgentd()
	stopBridge()
	flushAgentd()
	flushBridge()

	receiver.mu.Lock()
	spans, points := slices.Clone(receiver.spans), slices.Clone(receiver.metrics)
	receiver.mu.Unlock()
	checkOperatorTraces(t, spans, generation, metaOut)
	checkSessionsClose(t, spans)
	checkHTTPSpans(t, spans, web.Requests())
	checkOperatorMetrics(t, points, scraped)
}

// proofKey is a header of the web server's declaration: a secret the
// server quotes back in its JSON-RPC error, which no span may show.
const proofKey = "proof-key-5f0c2a"

// rpcErrorArgs are the arguments of web's rpc_error call: the error's
// message quotes proofKey and runs past a span description's 256 bytes.
var rpcErrorArgs = fmt.Sprintf(`{"text":"refused: the key %s is unknown %s"}`, proofKey, strings.Repeat("x", 300))

// grepLines is text's lines that hold sub.
func grepLines(text, sub string) string {
	var out []string
	for _, l := range strings.Split(text, "\n") {
		if strings.Contains(l, sub) {
			out = append(out, l)
		}
	}
	return strings.Join(out, "\n")
}

func spanID(b []byte) string { return hex.EncodeToString(b) }

// checkOperatorTraces checks the exported span trees of the generation's
// two runs.
func checkOperatorTraces(t *testing.T, spans []otlpSpan, generation, metaOut string) {
	t.Helper()
	byID := map[string]otlpSpan{}
	for _, s := range spans {
		byID[spanID(s.GetSpanId())] = s
	}
	var runs []otlpSpan
	for _, s := range spans {
		if s.GetName() == "invoke_agent" {
			runs = append(runs, s)
		}
	}
	if len(runs) != 2 {
		t.Fatalf("X-O2 want two invoke_agent spans (the start and the resume), got %d of %d spans:\n%s", len(runs), len(spans), dumpSpans(spans))
	}
	for _, run := range runs {
		attrs := attrMap(run.GetAttributes())
		if attrs["gen_ai.conversation.id"] != generation {
			t.Errorf("X-O2 invoke_agent's gen_ai.conversation.id is %q, want the generation %q", attrs["gen_ai.conversation.id"], generation)
		}
		if run.GetStatus().GetCode() == tracepb.Status_STATUS_CODE_ERROR {
			t.Errorf("X-O2 invoke_agent is an error (%s): neither the pause nor the completion is", run.GetStatus().GetMessage())
		}
		parent, ok := byID[spanID(run.GetParentSpanId())]
		if !ok || parent.GetKind() != tracepb.Span_SPAN_KIND_SERVER || !strings.Contains(parent.GetName(), "Generate") {
			t.Errorf("X-O2 invoke_agent's parent is %q, want the gRPC server span of Generate", parent.GetName())
		}
	}
	first := runs[0]
	// Every span of the first run's trace, by name.
	inTrace := func(run otlpSpan) map[string][]otlpSpan {
		out := map[string][]otlpSpan{}
		for _, s := range spans {
			if string(s.GetTraceId()) == string(run.GetTraceId()) {
				out[s.GetName()] = append(out[s.GetName()], s)
			}
		}
		return out
	}
	start := inTrace(first)
	if chats := start["chat gpt-4o-mini"]; len(chats) < 2 {
		t.Errorf("X-O2 want the start's two model turns as chat spans, got %d", len(chats))
	} else {
		retried := 0
		for _, s := range chats {
			attrs := attrMap(s.GetAttributes())
			if s.GetKind() != tracepb.Span_SPAN_KIND_CLIENT || attrs["gen_ai.provider.name"] != "openai" || attrs["server.address"] != "127.0.0.1" ||
				attrs["gen_ai.response.finish_reasons"] != "tool_calls" || attrs["gen_ai.usage.input_tokens"] != "10" || attrs["gen_ai.conversation.id"] != generation {
				t.Errorf("X-O2 chat span %v %v; want CLIENT, openai at 127.0.0.1, finishing with tool_calls, 10 input tokens, in the conversation %q", s.GetKind(), attrs, generation)
			}
			for _, ev := range s.GetEvents() {
				if ev.GetName() == "retry" && attrMap(ev.GetAttributes())["http.response.status_code"] == "429" {
					retried++
				}
			}
		}
		if retried != 1 {
			t.Errorf("X-O2 %d retry events of a 429 on the chat spans; want 1", retried)
		}
	}
	fail := start["execute_tool fail"]
	if len(fail) != 1 || attrMap(fail[0].GetAttributes())["error.type"] != "tool_error" || fail[0].GetStatus().GetCode() != tracepb.Status_STATUS_CODE_ERROR ||
		attrMap(fail[0].GetAttributes())["agentd.mcp.server"] != "tools" || attrMap(fail[0].GetAttributes())["gen_ai.tool.type"] != "extension" {
		t.Errorf("X-O2 want one execute_tool fail span of the server tools, an extension, an error of type tool_error; got %v", fail)
	}
	// The bridge's spans join the generation's trace across the hop.
	var bridgeSpans int
	for _, ss := range start {
		for _, s := range ss {
			if s.service == telemetry.ServiceBridge {
				bridgeSpans++
			}
		}
	}
	if bridgeSpans == 0 {
		t.Errorf("X-O2 no span of agentd-bridge is in the generation's trace:\n%s", dumpSpans(spans))
	}
	// X-O2: the bridge's MCP client spans, and X-O3: the traceparent the
	// MCP server saw names the bridge's tools/call span of the meta call.
	metaCall := start["tools/call meta"]
	if len(metaCall) != 1 || metaCall[0].service != telemetry.ServiceBridge || metaCall[0].GetKind() != tracepb.Span_SPAN_KIND_CLIENT {
		t.Fatalf("X-O2 want one tools/call meta CLIENT span of agentd-bridge in the generation's trace, got %v", metaCall)
	}
	attrs := attrMap(metaCall[0].GetAttributes())
	for k, want := range map[string]string{"mcp.method.name": "tools/call", "gen_ai.tool.name": "meta", "network.transport": "pipe", "mcp.protocol.version": "*", "jsonrpc.request.id": "*"} {
		if got, ok := attrs[k]; !ok || (want != "*" && got != want) {
			t.Errorf("X-O2 tools/call meta has %s=%q, want %q", k, got, want)
		}
	}
	if want := fmt.Sprintf("00-%s-%s-01", hex.EncodeToString(first.GetTraceId()), spanID(metaCall[0].GetSpanId())); !strings.Contains(metaOut, want) {
		t.Errorf("X-O3 the meta tool saw %s; want the traceparent %s (its tools/call span)", metaOut, want)
	}
	if failCall := start["tools/call fail"]; len(failCall) != 1 || attrMap(failCall[0].GetAttributes())["error.type"] != "tool_error" {
		t.Errorf("X-O2 want one tools/call fail span with error.type tool_error, got %v", failCall)
	}
	var initialized bool
	for _, s := range spans {
		// The go-sdk fake speaks MCP 2026-07-28: the handshake is its
		// server/discover probe.
		initialized = initialized || (s.service == telemetry.ServiceBridge && s.GetName() == "server/discover" && s.GetKind() == tracepb.Span_SPAN_KIND_CLIENT)
	}
	if !initialized {
		t.Error("X-O2 no server/discover span of the bridge's MCP handshake")
	}

	// The wait for the approval is a span that ends with the pause, which
	// is not an error.
	if wait := start["await_approval"]; len(wait) != 1 || attrMap(wait[0].GetAttributes())["agentd.approval.decision"] != "paused" {
		t.Errorf("X-O2 want one await_approval span ending paused in the start's trace, got %v", wait)
	}

	// The resume links to the start, and runs the approved call.
	resume := runs[1]
	links := resume.GetLinks()
	if len(links) != 1 || string(links[0].GetTraceId()) != string(first.GetTraceId()) || string(links[0].GetSpanId()) != string(first.GetSpanId()) {
		t.Errorf("X-O2 the resume's invoke_agent links to %v; want the start's invoke_agent", links)
	}
	if string(resume.GetTraceId()) == string(first.GetTraceId()) {
		t.Error("X-O2 the resume runs in the start's trace; want a trace of its own, linked")
	}
	if echo := inTrace(resume)["execute_tool echo"]; len(echo) != 1 {
		t.Errorf("X-O2 want the approved echo call's execute_tool span in the resume's trace, got %d", len(echo))
	}
	for _, s := range inTrace(resume)["chat gpt-4o-mini"] {
		if id := attrMap(s.GetAttributes())["gen_ai.conversation.id"]; id != generation {
			t.Errorf("X-O2 the resume's chat span has gen_ai.conversation.id %q; want the generation %q", id, generation)
		}
	}

	// Nothing but the failing tools is an error: not the pause, not the
	// retried 429, not the bridge session the pause closed.
	var errs []string
	for _, s := range spans {
		if s.GetStatus().GetCode() == tracepb.Status_STATUS_CODE_ERROR {
			errs = append(errs, s.service+" "+s.GetName())
		}
	}
	slices.Sort(errs)
	if want := []string{"agentd execute_tool fail", "agentd execute_tool rpc_error", "agentd-bridge tools/call fail", "agentd-bridge tools/call rpc_error"}; !slices.Equal(errs, want) {
		t.Errorf("X-O2 the spans that are errors: %q; want only %q", errs, want)
	}
}

// checkSessionsClose checks that each run's bridge session closes within
// the run's invoke_agent span (X-O2), although it closes after the client
// has the run's last event: its CloseSession call is a child of the run,
// and it, like every other child (the session's streams among them), ended
// no later than the run did.
func checkSessionsClose(t *testing.T, spans []otlpSpan) {
	t.Helper()
	for _, run := range spans {
		if run.GetName() != "invoke_agent" {
			continue
		}
		which := attrMap(run.GetAttributes())["agentd.run"]
		closes := 0
		for _, s := range spans {
			if string(s.GetParentSpanId()) != string(run.GetSpanId()) {
				continue
			}
			if strings.HasSuffix(s.GetName(), "/CloseSession") && s.GetKind() == tracepb.Span_SPAN_KIND_CLIENT {
				closes++
			}
			if s.GetEndTimeUnixNano() > run.GetEndTimeUnixNano() {
				t.Errorf("X-O2 %s ended %v after its parent, the %s run's invoke_agent; want the run to cover it", s.GetName(),
					time.Duration(s.GetEndTimeUnixNano()-run.GetEndTimeUnixNano()), which)
			}
		}
		if closes != 1 {
			t.Errorf("X-O2 the %s run's invoke_agent has %d CloseSession children; want its session's close", which, closes)
		}
	}
}

// checkHTTPSpans checks the bridge's MCP client spans of the Streamable
// HTTP server web (X-O2): each names its protocol, http and the version;
// its rpc_error call, answered with a JSON-RPC error, has the code as
// rpc.response.status_code and the error's message as its status, the
// declaration's secret hidden and the text cut short. And each request web
// received that has a span, its handshake's among them, named that span
// in params._meta.traceparent (X-O3).
func checkHTTPSpans(t *testing.T, spans []otlpSpan, received []mcptest.HTTPRequest) {
	t.Helper()
	byID := map[string]otlpSpan{}
	methods := map[string]int{}
	for _, s := range spans {
		attrs := attrMap(s.GetAttributes())
		if s.service != telemetry.ServiceBridge || s.GetKind() != tracepb.Span_SPAN_KIND_CLIENT || attrs["network.transport"] != "tcp" {
			continue
		}
		byID[spanID(s.GetSpanId())] = s
		methods[attrs["mcp.method.name"]]++
		if attrs["network.protocol.name"] != "http" || attrs["network.protocol.version"] != "1.1" {
			t.Errorf("X-O2 web's %s span has network.protocol.name %q and version %q; want http 1.1", s.GetName(), attrs["network.protocol.name"], attrs["network.protocol.version"])
		}
		if s.GetName() == "tools/call rpc_error" {
			checkRPCErrorSpan(t, s)
		}
	}
	if methods["initialize"]+methods["server/discover"] == 0 || methods["tools/list"] == 0 || methods["tools/call"] != 1 {
		t.Errorf("X-O2 web's spans are of %v; want its handshake, tools/list and the rpc_error call", methods)
	}
	traced := 0
	for _, r := range received {
		switch r.RPCMethod {
		case "initialize", "server/discover", "tools/list", "tools/call":
		case "logging/setLevel":
			checkSetLevelContext(t, r.MetaTraceparent, byID)
			continue
		default:
			continue
		}
		traced++
		parts := strings.Split(r.MetaTraceparent, "-")
		if len(parts) != 4 {
			t.Errorf("X-O3 web's %s request carried the traceparent %q in params._meta; want one", r.RPCMethod, r.MetaTraceparent)
			continue
		}
		if s, ok := byID[parts[2]]; !ok || attrMap(s.GetAttributes())["mcp.method.name"] != r.RPCMethod || hex.EncodeToString(s.GetTraceId()) != parts[1] {
			t.Errorf("X-O3 web's %s request carried the traceparent %q in params._meta; want its own %s span's", r.RPCMethod, r.MetaTraceparent, r.RPCMethod)
		}
	}
	if traced != len(byID) {
		t.Errorf("X-O3 web received %d requests with spans, of %d spans", traced, len(byID))
	}
}

// checkSetLevelContext checks (X-O3) that the handshake's
// logging/setLevel, which has no span of its own, carries in
// params._meta the trace of web's spans.
func checkSetLevelContext(t *testing.T, traceparent string, byID map[string]otlpSpan) {
	t.Helper()
	parts := strings.Split(traceparent, "-")
	for _, s := range byID {
		if len(parts) == 4 && hex.EncodeToString(s.GetTraceId()) == parts[1] {
			return
		}
	}
	t.Errorf("X-O3 web's logging/setLevel request carried the traceparent %q in params._meta; want one of its spans' trace", traceparent)
}

// checkRPCErrorSpan checks the span of web's rpc_error call (X-O2).
func checkRPCErrorSpan(t *testing.T, s otlpSpan) {
	t.Helper()
	attrs := attrMap(s.GetAttributes())
	if attrs["rpc.response.status_code"] != "-32000" || attrs["error.type"] != "-32000" || s.GetStatus().GetCode() != tracepb.Status_STATUS_CODE_ERROR {
		t.Errorf("X-O2 tools/call rpc_error has rpc.response.status_code %q, error.type %q and status %v; want -32000, -32000, an error",
			attrs["rpc.response.status_code"], attrs["error.type"], s.GetStatus().GetCode())
	}
	desc := s.GetStatus().GetMessage()
	if !strings.HasPrefix(desc, "refused: the key ") || strings.Contains(desc, proofKey) || len(desc) > 256+len("…") || !strings.HasSuffix(desc, "…") {
		t.Errorf("X-O2 tools/call rpc_error's status description is %q; want the error's message, the key hidden, cut to 256 bytes", desc)
	}
}

func dumpSpans(spans []otlpSpan) string {
	var b strings.Builder
	for _, s := range spans {
		fmt.Fprintf(&b, "%s %s %s parent=%s kind=%v status=%v %v\n", s.service, hex.EncodeToString(s.GetTraceId())[:8],
			s.GetName(), spanID(s.GetParentSpanId()), s.GetKind(), s.GetStatus().GetCode(), attrMap(s.GetAttributes()))
	}
	return b.String()
}

// checkOperatorMetrics checks that the instruments arrived by OTLP with
// their labels, and that the Prometheus endpoint showed them too.
func checkOperatorMetrics(t *testing.T, points []otlpMetric, scraped string) {
	t.Helper()
	has := func(service, name string, want map[string]string) bool {
		for _, p := range points {
			if p.service != service || p.name != name {
				continue
			}
			ok := true
			for k, v := range want {
				if got, present := p.attrs[k]; !present || (v != "*" && got != v) {
					ok = false
				}
			}
			if ok {
				return true
			}
		}
		return false
	}
	for _, c := range []struct {
		service, name string
		attrs         map[string]string
	}{
		{telemetry.ServiceAgent, "gen_ai.client.token.usage", map[string]string{"gen_ai.provider.name": "openai", "gen_ai.token.type": "input", "tenant": "*"}},
		{telemetry.ServiceAgent, "gen_ai.client.operation.duration", map[string]string{"gen_ai.operation.name": "chat", "gen_ai.request.model": "gpt-4o-mini"}},
		{telemetry.ServiceAgent, "agentd.tool.calls", map[string]string{"server": "tools", "tool": "fail", "outcome": "error"}},
		{telemetry.ServiceAgent, "agentd.provider.retries", map[string]string{"gen_ai.provider.name": "openai", "http.response.status_code": "429"}},
		{telemetry.ServiceAgent, "gen_ai.client.operation.time_to_first_chunk", map[string]string{"gen_ai.request.model": "gpt-4o-mini", "server.address": "127.0.0.1"}},
		{telemetry.ServiceAgent, "agentd.generations.ended", map[string]string{"outcome": "paused"}},
		{telemetry.ServiceAgent, "agentd.generations.ended", map[string]string{"outcome": "completed"}},
		{telemetry.ServiceAgent, "rpc.server.call.duration", map[string]string{"rpc.method": "*"}},
		{telemetry.ServiceBridge, "rpc.server.call.duration", map[string]string{"rpc.method": "*"}},
		{telemetry.ServiceAgent, "agentd.approvals.requested", map[string]string{"server": "tools", "tool": "echo"}},
		{telemetry.ServiceAgent, "agentd.approvals.decided", map[string]string{"tool": "echo", "decision": "*"}},
		{telemetry.ServiceAgent, "gen_ai.execute_tool.duration", map[string]string{"gen_ai.tool.name": "fail", "error.type": "tool_error", "server": "tools"}},
		{telemetry.ServiceAgent, "agentd.store.operation.duration", map[string]string{"operation": "pause", "db.system.name": "sqlite"}},
		{telemetry.ServiceBridge, "mcp.client.operation.duration", map[string]string{"mcp.method.name": "tools/call", "gen_ai.tool.name": "meta", "server": "tools"}},
		{telemetry.ServiceBridge, "mcp.client.operation.duration", map[string]string{"mcp.method.name": "server/discover", "server": "tools"}},
		{telemetry.ServiceBridge, "agentd.pool.processes.spawned", map[string]string{"server": "tools", "tenant": ""}},
		{telemetry.ServiceBridge, "agentd.pool.wait.duration", map[string]string{"server": "tools"}},
		{telemetry.ServiceBridge, "agentd.schema_cache.misses", map[string]string{"tenant": "*"}},
	} {
		if !has(c.service, c.name, c.attrs) {
			t.Errorf("X-O1 no %s point from %s with %v", c.name, c.service, c.attrs)
		}
	}
	// The series README's queries ("Metrics worth watching") use, with
	// their labels, as agentd's endpoint shows them.
	for _, series := range []string{
		`agentd_tool_calls_total{`, `outcome="error"`, `gen_ai_client_token_usage_sum{`, `gen_ai_token_type="input"`,
		`agentd_provider_retries_total{`, `http_response_status_code="429"`,
		`gen_ai_client_operation_time_to_first_chunk_seconds_bucket{`, `agentd_approvals_pending{`,
		`agentd_store_operation_duration_seconds_bucket{`, `operation="checkpoint"`, `agentd_store_operation_duration_seconds_count{`,
		`agentd_generations_ended_total{`,
		`mcp_client_operation_duration_seconds_bucket{`, `mcp_method_name="tools/call"`, `agentd_pool_wait_duration_seconds_bucket{`,
	} {
		if !strings.Contains(scraped, series) {
			t.Errorf("X-O1 the Prometheus endpoint does not show %s", series)
		}
	}
	var names []string
	for _, p := range points {
		names = append(names, p.service+" "+p.name)
	}
	slices.Sort(names)
	t.Logf("metric points: %v", slices.Compact(names))
}
