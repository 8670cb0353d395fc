// Package telemetry sets up OpenTelemetry tracing, metrics (SetupMetrics)
// and the structured log.
//
// Tracing always runs (so trace ids reach the logs and cross the hop to the
// bridge), but spans leave the process only when the standard OTEL_*
// variables ask for an exporter: OTEL_TRACES_EXPORTER=otlp, or an
// OTEL_EXPORTER_OTLP_ENDPOINT / OTEL_EXPORTER_OTLP_TRACES_ENDPOINT. The
// protocol follows OTEL_EXPORTER_OTLP_TRACES_PROTOCOL or
// OTEL_EXPORTER_OTLP_PROTOCOL: "grpc", or "http/protobuf" (the default).
// The exporters read the remaining OTEL_EXPORTER_OTLP_* variables (headers,
// TLS, timeouts) themselves. With none of these set, no exporter starts.
package telemetry

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"sync"

	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracegrpc"
	"go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracehttp"
	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/sdk/resource"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/trace"

	"github.com/agentd/agentd/internal/version"
)

// Propagator is the W3C trace-context and baggage propagator agentd uses on
// every hop. Without it, otelgrpc's default (the global no-op) would start
// a new trace at the bridge.
func Propagator() propagation.TextMapPropagator {
	return propagation.NewCompositeTextMapPropagator(propagation.TraceContext{}, propagation.Baggage{})
}

// Setup installs the global propagator and a tracer provider, with an OTLP
// exporter when the environment (read through getenv) asks for one, whose
// spans carry Resource(ctx, service). The returned shutdown flushes and
// stops the exporter.
func Setup(ctx context.Context, service string, getenv func(string) string) (trace.TracerProvider, func(context.Context) error, error) {
	exporter, err := newExporter(ctx, getenv)
	if err != nil {
		return nil, nil, err
	}
	tp, err := newTracerProvider(ctx, service, exporter)
	if err != nil {
		if exporter != nil {
			_ = exporter.Shutdown(ctx)
		}
		return nil, nil, err
	}
	otel.SetTracerProvider(tp)
	otel.SetTextMapPropagator(Propagator())
	return tp, tp.Shutdown, nil
}

// newTracerProvider is a tracer provider with Resource(ctx, service),
// sending its spans to exporter; nil: none, and no span is recorded.
func newTracerProvider(ctx context.Context, service string, exporter sdktrace.SpanExporter) (*sdktrace.TracerProvider, error) {
	res, err := Resource(ctx, service)
	if err != nil {
		return nil, err
	}
	opts := []sdktrace.TracerProviderOption{sdktrace.WithResource(res)}
	if exporter != nil {
		opts = append(opts, sdktrace.WithBatcher(exporter))
	} else {
		// Nothing leaves the process: spans are not recorded, but their ids
		// still reach the logs and cross to the bridge.
		opts = append(opts, sdktrace.WithSampler(sdktrace.NeverSample()))
	}
	return sdktrace.NewTracerProvider(opts...), nil
}

// Service names: agentd serve's, and agentd bridge's, told apart in every
// span and metric.
const (
	ServiceAgent  = "agentd"
	ServiceBridge = "agentd-bridge"
)

// InstanceID names this process in service.instance.id: random, new at
// every start, the same for its traces and its metrics.
var InstanceID = sync.OnceValue(func() string {
	var b [16]byte
	_, _ = rand.Read(b[:])
	return hex.EncodeToString(b[:])
})

// Resource describes this process to OpenTelemetry, for its tracer and
// meter providers alike: service.name (service, ServiceAgent or
// ServiceBridge), service.version (internal/version), service.instance.id
// (InstanceID), the host's name, the OS type, and the
// process's pid, executable name, owner and Go runtime. Never the command
// line, whose flags may hold a token. OTEL_SERVICE_NAME and
// OTEL_RESOURCE_ATTRIBUTES override what they name.
func Resource(ctx context.Context, service string) (*resource.Resource, error) {
	res, err := resource.New(ctx,
		resource.WithAttributes(
			attribute.String("service.name", service),
			attribute.String("service.version", version.Get().Version),
			attribute.String("service.instance.id", InstanceID()),
		),
		resource.WithHost(),
		resource.WithOSType(),
		resource.WithProcessPID(),
		resource.WithProcessExecutableName(),
		resource.WithProcessOwner(),
		resource.WithProcessRuntimeName(),
		resource.WithProcessRuntimeVersion(),
		resource.WithProcessRuntimeDescription(),
		resource.WithFromEnv(), // OTEL_SERVICE_NAME and OTEL_RESOURCE_ATTRIBUTES win
		resource.WithTelemetrySDK(),
	)
	if err != nil {
		// A detector that fails (no user name for the uid, say) leaves
		// its attributes out; the rest stand.
		if res != nil && !errors.Is(err, resource.ErrSchemaURLConflict) {
			return res, nil
		}
		return nil, fmt.Errorf("telemetry: resource: %w", err)
	}
	return res, nil
}

func newExporter(ctx context.Context, getenv func(string) string) (sdktrace.SpanExporter, error) {
	protocol, err := otlpProtocol(getenv, "TRACES", "")
	switch {
	case err != nil || protocol == "":
		return nil, err
	case protocol == "grpc":
		return otlptracegrpc.New(ctx)
	default:
		return otlptracehttp.New(ctx)
	}
}

// otlpProtocol decides, as the standard variables say, whether a signal
// (TRACES, METRICS) is exported by OTLP and with which protocol: "" for none
// (OTEL_<signal>_EXPORTER=none, or neither it nor an OTLP endpoint set), else
// "grpc" or "http/protobuf", from OTEL_EXPORTER_OTLP_<signal>_PROTOCOL or
// OTEL_EXPORTER_OTLP_PROTOCOL. hint follows the refusal of an unsupported
// exporter.
func otlpProtocol(getenv func(string) string, signal, hint string) (string, error) {
	switch exporter := getenv("OTEL_" + signal + "_EXPORTER"); exporter {
	case "none":
		return "", nil
	case "otlp":
	case "":
		if getenv("OTEL_EXPORTER_OTLP_ENDPOINT") == "" && getenv("OTEL_EXPORTER_OTLP_"+signal+"_ENDPOINT") == "" {
			return "", nil
		}
	default:
		return "", fmt.Errorf("telemetry: OTEL_%s_EXPORTER=%q is not supported (use otlp or none%s)", signal, exporter, hint)
	}
	protocol := getenv("OTEL_EXPORTER_OTLP_" + signal + "_PROTOCOL")
	if protocol == "" {
		protocol = getenv("OTEL_EXPORTER_OTLP_PROTOCOL")
	}
	switch protocol {
	case "grpc":
		return protocol, nil
	case "", "http/protobuf":
		return "http/protobuf", nil
	}
	return "", fmt.Errorf("telemetry: OTLP protocol %q is not supported (use grpc or http/protobuf)", protocol)
}

// NewLogger returns a slog logger writing text or JSON to w at level, whose
// records carry trace_id and span_id when their context holds a span.
func NewLogger(w io.Writer, level slog.Level, format string) *slog.Logger {
	opts := &slog.HandlerOptions{Level: level}
	var h slog.Handler
	if format == "json" {
		h = slog.NewJSONHandler(w, opts)
	} else {
		h = slog.NewTextHandler(w, opts)
	}
	return slog.New(traceHandler{h})
}

// traceHandler adds the trace and span ids of the record's context.
type traceHandler struct{ slog.Handler }

func (h traceHandler) Handle(ctx context.Context, r slog.Record) error {
	if sc := trace.SpanContextFromContext(ctx); sc.IsValid() {
		r.AddAttrs(slog.String("trace_id", sc.TraceID().String()), slog.String("span_id", sc.SpanID().String()))
	}
	return h.Handler.Handle(ctx, r)
}

func (h traceHandler) WithAttrs(attrs []slog.Attr) slog.Handler {
	return traceHandler{h.Handler.WithAttrs(attrs)}
}

func (h traceHandler) WithGroup(name string) slog.Handler {
	return traceHandler{h.Handler.WithGroup(name)}
}
