package bridge

import (
	"bufio"
	"encoding/json"
	"fmt"
	"log/slog"
	"strings"
	"testing"

	"github.com/agentd/agentd/internal/logtest"

	"github.com/google/go-cmp/cmp"
	"go.opentelemetry.io/contrib/instrumentation/google.golang.org/grpc/otelgrpc"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/propagation"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.opentelemetry.io/otel/trace"
	"google.golang.org/grpc"
	"google.golang.org/grpc/metadata"

	bridgev1 "github.com/agentd/agentd/gen/go/agentd/bridge/v1"
	"github.com/agentd/agentd/internal/config"
	"github.com/agentd/agentd/internal/testwait"
)

// telemetryFixture is a fixture whose spans, metrics and JSON log a test
// reads, served behind otelgrpc, so that an OpenSession call's trace
// context reaches the session.
type telemetryFixture struct {
	*fixture
	spans  *tracetest.SpanRecorder
	reader *sdkmetric.ManualReader
	logs   *logtest.Logs
}

func newTelemetryFixture(t *testing.T, edit func(*config.Bridge)) *telemetryFixture {
	t.Helper()
	tf := &telemetryFixture{spans: tracetest.NewSpanRecorder(), reader: sdkmetric.NewManualReader(), logs: new(logtest.Logs)}
	tp := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(tf.spans))
	tf.fixture = newFixtureOptions(t, edit, func(o *Options) {
		o.TracerProvider = tp
		o.MeterProvider = sdkmetric.NewMeterProvider(sdkmetric.WithReader(tf.reader))
		o.Logger = slog.New(slog.NewJSONHandler(tf.logs, nil))
	}, grpc.StatsHandler(otelgrpc.NewServerHandler(otelgrpc.WithTracerProvider(tp), otelgrpc.WithPropagators(propagation.TraceContext{}))))
	return tf
}

// stderrLine waits for the log record of the server's stderr line, and
// returns its attributes.
func (tf *telemetryFixture) stderrLine(t *testing.T, line string) map[string]any {
	t.Helper()
	var found map[string]any
	// The line is forwarded by its own goroutine.
	testwait.Until(t, func() error {
		logs := tf.logs.String()
		sc := bufio.NewScanner(strings.NewReader(logs))
		for sc.Scan() {
			var rec map[string]any
			if json.Unmarshal(sc.Bytes(), &rec) == nil && rec["msg"] == "mcp server stderr" && rec["line"] == line {
				found = rec
				return nil
			}
		}
		return fmt.Errorf("no stderr record of %q in:\n%s", line, logs)
	})
	return found
}

// durations returns the attribute sets of mcp.client.operation.duration's
// points, as server/tenant/method/tool/error strings, with their counts.
func (tf *telemetryFixture) durations(t *testing.T) map[string]uint64 {
	t.Helper()
	var rm metricdata.ResourceMetrics
	if err := tf.reader.Collect(t.Context(), &rm); err != nil {
		t.Fatal(err)
	}
	out := make(map[string]uint64)
	for _, sm := range rm.ScopeMetrics {
		for _, m := range sm.Metrics {
			if m.Name != "mcp.client.operation.duration" {
				continue
			}
			for _, dp := range m.Data.(metricdata.Histogram[float64]).DataPoints {
				get := func(k string) string { v, _ := dp.Attributes.Value(attribute.Key(k)); return v.AsString() }
				out[strings.Join([]string{get("server"), get("tenant"), get("mcp.method.name"), get("gen_ai.tool.name"), get("error.type")}, "/")] += dp.Count
			}
		}
	}
	return out
}

// openTraced opens a session for tenant and generation, its OpenSession
// call carrying the trace context of parent.
func (tf *telemetryFixture) openTraced(t *testing.T, parent trace.SpanContext, tenant, generation string, specs ...*bridgev1.ServerSpec) string {
	t.Helper()
	ctx := metadata.AppendToOutgoingContext(t.Context(), "traceparent", "00-"+parent.TraceID().String()+"-"+parent.SpanID().String()+"-01")
	opened, _ := openWith(t, ctx, tf.client, &bridgev1.OpenSessionRequest{Servers: specs, GenerationId: generation, Tenant: tenant})
	return opened.GetSessionId()
}

var telemetryParent = trace.NewSpanContext(trace.SpanContextConfig{
	TraceID: trace.TraceID{0xc, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15},
	SpanID:  trace.SpanID{0xd, 1, 2, 3, 4, 5, 6, 7}, TraceFlags: trace.FlagsSampled,
})

// X-O4: a pooled process that serves one session at a time writes stderr
// lines that carry the session's tenant, generation and trace id (the
// trace of its OpenSession call). X-O1: the bridge's MCP requests are
// mcp.client.operation.duration points labelled with the server's name as
// the session declared it and the session's tenant; the handshake of a
// pool's process, made for no session, has the pool's name and tenant.
// X-O2: the requests are CLIENT spans.
func TestMCPTelemetry(t *testing.T) {
	t.Parallel()
	tf := newTelemetryFixture(t, nil)
	id := tf.openTraced(t, telemetryParent, "acme", "gen-7", refSpec("t", "tools"))
	call(t, tf.client, id, "t", "stderr", `{"text":"written for gen-7"}`)
	call(t, tf.client, id, "t", "fail", `{"text":"no"}`)

	rec := tf.stderrLine(t, "written for gen-7")
	for k, v := range map[string]string{"tenant": "acme", "generation": "gen-7", "trace_id": telemetryParent.TraceID().String(), "server": "tools"} {
		if rec[k] != v {
			t.Errorf("the stderr line's %s is %v; want %q (record %v)", k, rec[k], v, rec)
		}
	}
	want := map[string]uint64{
		"tools//server/discover//":          1, // the go-sdk fake speaks 2026-07-28 (X-M8)
		"t/acme/tools/call/stderr/":         1,
		"t/acme/tools/call/fail/tool_error": 1,
	}
	if diff := cmp.Diff(want, tf.durations(t)); diff != "" {
		t.Errorf("mcp.client.operation.duration points, server/tenant/method/tool/error (-want +got):\n%s", diff)
	}
	var names []string
	for _, sp := range tf.spans.Ended() {
		if sp.SpanKind() == trace.SpanKindClient {
			names = append(names, sp.Name())
		}
	}
	if diff := cmp.Diff([]string{"server/discover", "tools/call stderr", "tools/call fail"}, names); diff != "" {
		t.Errorf("CLIENT spans (-want +got):\n%s", diff)
	}
}

// X-O4: a shared process serves many sessions at once, so its stderr lines
// name no session: the server's name and pid alone.
func TestMCPTelemetrySharedStderr(t *testing.T) {
	t.Parallel()
	tf := newTelemetryFixture(t, func(c *config.Bridge) {
		s := c.Servers["tools"]
		s.Shared = config.SharedGlobal
		c.Servers["tools"] = s
	})
	id := tf.openTraced(t, telemetryParent, "acme", "gen-8", refSpec("t", "tools"))
	call(t, tf.client, id, "t", "stderr", `{"text":"written while shared"}`)
	rec := tf.stderrLine(t, "written while shared")
	for _, k := range []string{"tenant", "generation", "trace_id"} {
		if _, ok := rec[k]; ok {
			t.Errorf("a shared process's stderr line has %s: %v", k, rec)
		}
	}
	if rec["server"] != "tools" {
		t.Errorf("a shared process's stderr line names server %v; want tools", rec["server"])
	}
}
