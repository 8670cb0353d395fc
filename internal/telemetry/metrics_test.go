package telemetry

import (
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"go.opentelemetry.io/otel/metric/noop"
)

func TestNewMetricExporter(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name     string
		env      map[string]string
		exporter bool
		err      bool
	}{
		{name: "nothing set: no exporter", env: nil},
		{name: "explicitly none", env: map[string]string{"OTEL_METRICS_EXPORTER": "none", "OTEL_EXPORTER_OTLP_ENDPOINT": "http://127.0.0.1:4318"}},
		{name: "endpoint set: otlp over http", env: map[string]string{"OTEL_EXPORTER_OTLP_ENDPOINT": "http://127.0.0.1:4318"}, exporter: true},
		{name: "metrics endpoint set", env: map[string]string{"OTEL_EXPORTER_OTLP_METRICS_ENDPOINT": "http://127.0.0.1:4318/v1/metrics"}, exporter: true},
		{name: "traces endpoint alone: no metrics exporter", env: map[string]string{"OTEL_EXPORTER_OTLP_TRACES_ENDPOINT": "http://127.0.0.1:4318"}},
		{name: "grpc protocol", env: map[string]string{"OTEL_METRICS_EXPORTER": "otlp", "OTEL_EXPORTER_OTLP_PROTOCOL": "grpc"}, exporter: true},
		{name: "metrics protocol wins", env: map[string]string{"OTEL_METRICS_EXPORTER": "otlp", "OTEL_EXPORTER_OTLP_PROTOCOL": "http/json", "OTEL_EXPORTER_OTLP_METRICS_PROTOCOL": "grpc"}, exporter: true},
		{name: "unsupported exporter", env: map[string]string{"OTEL_METRICS_EXPORTER": "prometheus"}, err: true},
		{name: "unsupported protocol", env: map[string]string{"OTEL_METRICS_EXPORTER": "otlp", "OTEL_EXPORTER_OTLP_PROTOCOL": "http/json"}, err: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			exp, err := newMetricExporter(t.Context(), func(k string) string { return tt.env[k] })
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

// TestSetupMetrics (X-O1): without Prometheus or OTLP, the provider is a
// no-op; with Prometheus, an instrument of the provider shows on the
// handler's GET /metrics, and only there (a private registry).
func TestSetupMetrics(t *testing.T) {
	t.Parallel()
	none := func(string) string { return "" }
	m, err := SetupMetrics(t.Context(), ServiceAgent, none, false)
	if err != nil {
		t.Fatal(err)
	}
	if _, ok := m.MeterProvider().(noop.MeterProvider); !ok || m.Handler() != nil {
		t.Errorf("nothing asked for metrics: provider %T, handler %v; want a no-op and none", m.MeterProvider(), m.Handler())
	}
	if err := m.Shutdown(t.Context()); err != nil {
		t.Error(err)
	}

	m, err = SetupMetrics(t.Context(), ServiceAgent, none, true)
	if err != nil {
		t.Fatal(err)
	}
	defer m.Shutdown(context.Background())
	c, _ := m.MeterProvider().Meter("test").Int64Counter("agentd.test.things")
	c.Add(t.Context(), 3)
	srv := httptest.NewServer(m.Handler())
	defer srv.Close()
	resp, err := http.Get(srv.URL + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK || !strings.Contains(string(body), "agentd_test_things_total") {
		t.Errorf("GET /metrics: %d, want 200 with agentd_test_things_total:\n%s", resp.StatusCode, body)
	}
	if strings.Contains(string(body), "go_goroutines") {
		t.Error("GET /metrics shows the global registry's collectors; want a private registry")
	}
	resp, err = http.Get(srv.URL + "/other")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusNotFound {
		t.Errorf("GET /other: %d, want 404", resp.StatusCode)
	}
}
