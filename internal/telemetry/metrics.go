package telemetry

import (
	"context"
	"fmt"
	"net/http"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	"go.opentelemetry.io/otel/exporters/otlp/otlpmetric/otlpmetricgrpc"
	"go.opentelemetry.io/otel/exporters/otlp/otlpmetric/otlpmetrichttp"
	otelprom "go.opentelemetry.io/otel/exporters/prometheus"
	"go.opentelemetry.io/otel/metric"
	"go.opentelemetry.io/otel/metric/noop"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
)

// Metrics is agentd's meter provider and its readers: a Prometheus
// registry of its own, when asked for (metrics.listen), and an OTLP
// exporter, when the standard OTEL_* variables ask for one. Both readers
// see the same instruments.
type Metrics struct {
	provider metric.MeterProvider
	sdk      *sdkmetric.MeterProvider // nil when no reader asked for metrics
	handler  http.Handler             // nil without Prometheus
}

// SetupMetrics builds the meter provider. With prometheus set, it
// registers a Prometheus reader on a private registry (never the global
// one), served by Handler. OTLP export follows the environment (read
// through getenv) as tracing's does: OTEL_METRICS_EXPORTER=otlp, or an
// OTEL_EXPORTER_OTLP_ENDPOINT / OTEL_EXPORTER_OTLP_METRICS_ENDPOINT; the
// protocol follows OTEL_EXPORTER_OTLP_METRICS_PROTOCOL or
// OTEL_EXPORTER_OTLP_PROTOCOL: "grpc", or "http/protobuf" (the default).
// With neither, the provider is a no-op and records nothing.
func SetupMetrics(ctx context.Context, service string, getenv func(string) string, withPrometheus bool) (*Metrics, error) {
	exporter, err := newMetricExporter(ctx, getenv)
	if err != nil {
		return nil, err
	}
	if exporter == nil && !withPrometheus {
		return &Metrics{provider: noop.NewMeterProvider()}, nil
	}
	res, err := Resource(ctx, service)
	if err != nil {
		if exporter != nil {
			_ = exporter.Shutdown(ctx)
		}
		return nil, err
	}
	opts := []sdkmetric.Option{sdkmetric.WithResource(res)}
	m := &Metrics{}
	if withPrometheus {
		reg := prometheus.NewRegistry()
		reader, err := otelprom.New(otelprom.WithRegisterer(reg))
		if err != nil {
			if exporter != nil {
				_ = exporter.Shutdown(ctx)
			}
			return nil, fmt.Errorf("telemetry: prometheus: %w", err)
		}
		opts = append(opts, sdkmetric.WithReader(reader))
		mux := http.NewServeMux()
		mux.Handle("GET /metrics", promhttp.HandlerFor(reg, promhttp.HandlerOpts{}))
		m.handler = mux
	}
	if exporter != nil {
		opts = append(opts, sdkmetric.WithReader(sdkmetric.NewPeriodicReader(exporter)))
	}
	m.sdk = sdkmetric.NewMeterProvider(opts...)
	m.provider = m.sdk
	return m, nil
}

// MeterProvider is the provider every instrument of agentd comes from.
func (m *Metrics) MeterProvider() metric.MeterProvider { return m.provider }

// Handler serves GET /metrics in the Prometheus text format; nil when
// SetupMetrics was not asked for Prometheus.
func (m *Metrics) Handler() http.Handler { return m.handler }

// Shutdown flushes the OTLP exporter and stops the provider; after it,
// instruments record nothing.
func (m *Metrics) Shutdown(ctx context.Context) error {
	if m.sdk == nil {
		return nil
	}
	return m.sdk.Shutdown(ctx)
}

func newMetricExporter(ctx context.Context, getenv func(string) string) (sdkmetric.Exporter, error) {
	protocol, err := otlpProtocol(getenv, "METRICS", "; for Prometheus, set metrics.listen")
	switch {
	case err != nil || protocol == "":
		return nil, err
	case protocol == "grpc":
		return otlpmetricgrpc.New(ctx)
	default:
		return otlpmetrichttp.New(ctx)
	}
}
