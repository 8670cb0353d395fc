package telemetry

import (
	"bytes"
	"context"
	"log/slog"
	"strings"
	"testing"

	sdktrace "go.opentelemetry.io/otel/sdk/trace"
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
