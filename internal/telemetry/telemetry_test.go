package telemetry

import (
	"bytes"
	"context"
	"log/slog"
	"os"
	"strconv"
	"strings"
	"testing"

	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"

	"github.com/agentd/agentd/internal/version"
)

func TestNewExporter(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name     string
		env      map[string]string
		exporter bool
		err      bool
	}{
		{name: "nothing set: no exporter", env: nil},
		{name: "explicitly none", env: map[string]string{"OTEL_TRACES_EXPORTER": "none", "OTEL_EXPORTER_OTLP_ENDPOINT": "http://127.0.0.1:4318"}},
		{name: "endpoint set: otlp over http", env: map[string]string{"OTEL_EXPORTER_OTLP_ENDPOINT": "http://127.0.0.1:4318"}, exporter: true},
		{name: "grpc protocol", env: map[string]string{"OTEL_TRACES_EXPORTER": "otlp", "OTEL_EXPORTER_OTLP_PROTOCOL": "grpc"}, exporter: true},
		{name: "unsupported exporter", env: map[string]string{"OTEL_TRACES_EXPORTER": "zipkin"}, err: true},
		{name: "unsupported protocol", env: map[string]string{"OTEL_TRACES_EXPORTER": "otlp", "OTEL_EXPORTER_OTLP_PROTOCOL": "http/json"}, err: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			exp, err := newExporter(t.Context(), func(k string) string { return tt.env[k] })
			if (err != nil) != tt.err {
				t.Fatalf("err = %v, want error %v", err, tt.err)
			}
			if (exp != nil) != tt.exporter {
				t.Errorf("exporter = %T, want one: %v", exp, tt.exporter)
			}
			if exp != nil {
				_ = exp.Shutdown(context.Background())
			}
		})
	}
}

func TestLoggerAddsTraceIDs(t *testing.T) {
	t.Parallel()
	var buf bytes.Buffer
	log := NewLogger(&buf, slog.LevelInfo, "json").With("component", "x")
	tp := sdktrace.NewTracerProvider()
	ctx, span := tp.Tracer("t").Start(t.Context(), "op")
	log.InfoContext(ctx, "inside")
	span.End()
	log.InfoContext(t.Context(), "outside")
	lines := strings.Split(strings.TrimSpace(buf.String()), "\n")
	if len(lines) != 2 {
		t.Fatalf("want 2 lines, got %q", buf.String())
	}
	if want := `"trace_id":"` + span.SpanContext().TraceID().String() + `"`; !strings.Contains(lines[0], want) {
		t.Errorf("line inside a span lacks %s: %s", want, lines[0])
	}
	if strings.Contains(lines[1], "trace_id") {
		t.Errorf("line outside a span has a trace id: %s", lines[1])
	}
}

// X-O6: every span carries the resource that tells agentd and its bridge
// apart: service name, version and instance id, host and process, and
// never the command line (whose flags may hold a token).
func TestResourceOnSpans(t *testing.T) {
	t.Parallel()
	for _, service := range []string{ServiceAgent, ServiceBridge} {
		t.Run(service, func(t *testing.T) {
			t.Parallel()
			exp := tracetest.NewInMemoryExporter()
			tp, err := newTracerProvider(t.Context(), service, exp)
			if err != nil {
				t.Fatal(err)
			}
			_, span := tp.Tracer("t").Start(t.Context(), "op")
			span.End()
			// ForceFlush, not Shutdown: the exporter's Shutdown forgets
			// its spans.
			if err := tp.ForceFlush(t.Context()); err != nil {
				t.Fatal(err)
			}
			defer tp.Shutdown(context.Background())
			spans := exp.GetSpans()
			if len(spans) != 1 {
				t.Fatalf("got %d spans, want 1", len(spans))
			}
			got := map[string]string{}
			for _, kv := range spans[0].Resource.Attributes() {
				got[string(kv.Key)] = kv.Value.String()
			}
			want := map[string]string{
				"service.name":         service,
				"service.version":      version.Get().Version,
				"service.instance.id":  InstanceID(),
				"process.pid":          strconv.Itoa(os.Getpid()),
				"process.runtime.name": "go",
			}
			for k, v := range want {
				if got[k] != v {
					t.Errorf("resource %s = %q, want %q", k, got[k], v)
				}
			}
			for _, k := range []string{"host.name", "process.executable.name", "process.runtime.version", "os.type"} {
				if got[k] == "" {
					t.Errorf("resource lacks %s: %v", k, got)
				}
			}
			for _, k := range []string{"process.command_args", "process.command_line", "process.command", "process.executable.path"} {
				if v, ok := got[k]; ok {
					t.Errorf("resource has %s = %q: the command line may hold secrets", k, v)
				}
			}
		})
	}
}

// X-O6: the instance id is one per process, the same for every provider.
func TestInstanceIDStable(t *testing.T) {
	t.Parallel()
	a, b := InstanceID(), InstanceID()
	if a == "" || a != b {
		t.Errorf("InstanceID() = %q then %q, want one non-empty id", a, b)
	}
	res, err := Resource(t.Context(), ServiceAgent)
	if err != nil {
		t.Fatal(err)
	}
	if v, _ := res.Set().Value("service.instance.id"); v.AsString() != a {
		t.Errorf("Resource's service.instance.id = %q, want %q", v.AsString(), a)
	}
}
