package app_test

import (
	"context"
	"encoding/json"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/agentd/agentd/internal/logtest"

	"github.com/agentd/agentd/internal/app"
	"github.com/agentd/agentd/internal/grpcserver"
	"github.com/agentd/agentd/internal/telemetry"
)

// TestBridgeMetricsEndpoint (X-O1): `agentd bridge` with metrics.listen
// serves the bridge's own metrics on GET /metrics: its pools' processes
// (here the registered demo server's warm spare, under its registered
// name and no tenant) and what they spawned.
func TestBridgeMetricsEndpoint(t *testing.T) {
	t.Parallel()
	m, err := telemetry.SetupMetrics(t.Context(), telemetry.ServiceBridge, func(string) string { return "" }, true)
	if err != nil {
		t.Fatal(err)
	}
	defer m.Shutdown(context.Background())
	cfg := demoConfig(t, 1)
	cfg.Bridge.Listen = "127.0.0.1:0"
	cfg.Metrics.Listen = "127.0.0.1:0"
	var logs logtest.Logs
	o := app.Options{
		Config: cfg, Logger: slog.New(slog.NewJSONHandler(&logs, nil)), Metrics: m.Handler(),
		Telemetry: grpcserver.Telemetry{MeterProvider: m.MeterProvider()},
	}
	ctx, cancel := context.WithCancel(t.Context())
	done := make(chan error, 1)
	go func() { done <- app.ServeBridge(ctx, o) }()
	defer func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("ServeBridge: %v", err)
		}
	}()

	want := []string{
		`server="demo",state="warm",tenant=""} 1`,
		`agentd_pool_processes_spawned_total{`,
	}
	var addr, body string
	for deadline := time.Now().Add(settle); ; {
		if addr == "" {
			addr = metricsAddr(t, logs.String())
		}
		if addr != "" {
			body = scrape(t, addr)
			if strings.Contains(body, "agentd_pool_processes{") && strings.Contains(body, want[0]) {
				break
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("X-O1 no warm demo process on GET /metrics (address %q):\n%s\nlogs:\n%s", addr, body, logs.String())
		}
		time.Sleep(10 * time.Millisecond)
	}
	for _, w := range want {
		if !strings.Contains(body, w) {
			t.Errorf("X-O1 GET /metrics lacks %s:\n%s", w, body)
		}
	}
}

// metricsAddr is the address of the "metrics serving" line of a JSON log,
// "" before it is logged.
func metricsAddr(t *testing.T, logs string) string {
	t.Helper()
	for line := range strings.Lines(logs) {
		var rec struct{ Msg, Address string }
		if err := json.Unmarshal([]byte(line), &rec); err != nil {
			t.Fatalf("log line %q: %v", line, err)
		}
		if rec.Msg == "metrics serving" {
			return strings.TrimSuffix(strings.TrimPrefix(rec.Address, "http://"), "/metrics")
		}
	}
	return ""
}
