package app_test

import (
	"io"
	"log/slog"
	"net/http"
	"slices"
	"strings"
	"testing"
	"time"

	agentdv1 "github.com/agentd/agentd/gen/go/agentd/v1"
	"github.com/agentd/agentd/internal/app"
	"github.com/agentd/agentd/internal/app/apptest"
	"github.com/agentd/agentd/internal/grpcserver"
	"github.com/agentd/agentd/internal/telemetry"
)

// TestMetricsEndpoint (X-O1): with metrics.listen set, agentd serves GET
// /metrics in the Prometheus format while it runs: after a generation,
// its token usage, its tool call, its end, the store's operations and the gRPC server's and
// client's (the bridge hop's) metrics are there; once agentd stops, so does the
// endpoint.
func TestMetricsEndpoint(t *testing.T) {
	t.Parallel()
	m, err := telemetry.SetupMetrics(t.Context(), telemetry.ServiceAgent, func(string) string { return "" }, true)
	if err != nil {
		t.Fatal(err)
	}
	defer m.Shutdown(t.Context())
	cfg := demoConfig(t, 0)
	cfg.Metrics.Listen = "127.0.0.1:0"
	o := app.Options{
		Config: cfg, Logger: slog.New(slog.DiscardHandler), Metrics: m.Handler(),
		Telemetry: grpcserver.Telemetry{MeterProvider: m.MeterProvider(), Propagator: telemetry.Propagator()},
	}
	a, conn, stop := apptest.ServeAgent(t, o)
	addr := a.MetricsAddr()
	if addr == "" {
		t.Fatal("MetricsAddr is empty with metrics.listen set")
	}
	generate(t, agentdv1.NewAgentServiceClient(conn), demoStart(t))

	want := []string{
		`gen_ai_client_token_usage_sum{gen_ai_operation_name="chat",gen_ai_provider_name="script",gen_ai_request_model="demo",gen_ai_response_model="demo",gen_ai_token_type="input",`,
		`gen_ai_client_operation_duration_seconds_count{gen_ai_operation_name="chat",`,
		`agentd_generations_ended_total{otel_scope_name="github.com/agentd/agentd/server",otel_scope_schema_url="",otel_scope_version="",outcome="completed",tenant=""} 1`,
		`agentd_tool_calls_total{otel_scope_name="github.com/agentd/agentd/server",otel_scope_schema_url="",otel_scope_version="",outcome="ok",server="demo",tenant="",tool="echo"} 1`,
		`rpc_server_call_duration_seconds_count{`,
		`rpc_method="agentd.v1.AgentService/Generate"`,
		`rpc_client_call_duration_seconds_count{`, // the hop to the embedded bridge
		`rpc_method="agentd.bridge.v1.BridgeService/`,
		`agentd_store_operation_duration_seconds_count{db_system_name="sqlite",operation="create",`, // the store, instrumented
	}
	// The gRPC metrics of a call are recorded as it ends, which the
	// client may see first: wait for them.
	var body string
	for deadline := time.Now().Add(10 * time.Second); ; {
		body = scrape(t, addr)
		if !slices.ContainsFunc(want, func(w string) bool { return !strings.Contains(body, w) }) || time.Now().After(deadline) {
			break
		}
		time.Sleep(10 * time.Millisecond)
	}
	for _, w := range want {
		if !strings.Contains(body, w) {
			t.Errorf("GET /metrics lacks %s:\n%s", w, body)
		}
	}

	stop()
	if _, err := http.Get("http://" + addr + "/metrics"); err == nil {
		t.Error("the metrics endpoint still answers after agentd stopped")
	}
}

// TestMetricsListenNeedsHandler (X-O1): metrics.listen set without a
// handler to serve is refused at start, not silently ignored.
func TestMetricsListenNeedsHandler(t *testing.T) {
	t.Parallel()
	cfg := testConfig(t)
	cfg.Metrics.Listen = "127.0.0.1:0"
	a, err := app.NewAgent(app.Options{Config: cfg, Logger: slog.New(slog.DiscardHandler)})
	if err == nil {
		a.Close()
		t.Fatal("NewAgent with metrics.listen and no handler: no error")
	}
	if !strings.Contains(err.Error(), "metrics.listen") {
		t.Errorf("error %q does not name metrics.listen", err)
	}
}

func scrape(t *testing.T, addr string) string {
	t.Helper()
	resp, err := http.Get("http://" + addr + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("GET /metrics: %d\n%s", resp.StatusCode, body)
	}
	return string(body)
}
