package app_test

import (
	"context"
	"log/slog"
	"testing"

	"github.com/agentd/agentd/internal/app"
	"github.com/agentd/agentd/internal/app/apptest"
	"github.com/agentd/agentd/internal/config"
	"github.com/agentd/agentd/internal/grpcserver"
	"github.com/agentd/agentd/internal/mcptest"
	"github.com/agentd/agentd/internal/telemetry"
)

// BenchmarkMetricsGeneration measures what metrics cost a whole generation
// (X-O1's budget: at most 2%): two agentds served as `agentd serve` serves
// them on SQLite (in-memory listener, interceptors, embedded bridge, a Go
// stdio MCP server shared by every session), one recording every
// instrument into a meter provider with a Prometheus reader (as with
// metrics.listen set) and one without metrics, running BenchmarkDurability's
// tool loop (4 model turns, 3 tool calls). Rounds of metricsRound
// generations go to each in turn, the order swapping from round to round,
// and it reports the median over rounds of the ratio metrics/none
// ("gen-metrics/none") and each arm's time per generation.
func BenchmarkMetricsGeneration(b *testing.B) {
	exe, env := mcptest.Command(b, mcptest.Tools)
	start := toolLoopRequest(b)
	serve := func(tel grpcserver.Telemetry) func() {
		cfg := benchStoreConfig(b, config.StoreSQLite)
		cfg.Bridge.TerminateGrace = benchGrace
		cfg.Bridge.Servers = map[string]config.Server{"tools": {Command: exe, Env: env, Shared: config.SharedGlobal}}
		conn, _ := apptest.Serve(b, app.Options{Config: cfg, Logger: slog.New(slog.DiscardHandler), Telemetry: tel})
		gen := toolLoop(b, conn, start)
		gen() // connect, start the server's process, fill the schema cache
		return gen
	}
	metrics, err := telemetry.SetupMetrics(b.Context(), telemetry.ServiceAgent, func(string) string { return "" }, true)
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { _ = metrics.Shutdown(context.Background()) })
	perGen, ratios := alternateRounds(b, metricsRound,
		serve(grpcserver.Telemetry{}),
		serve(grpcserver.Telemetry{MeterProvider: metrics.MeterProvider()}))
	b.ReportMetric(median(ratios), "gen-metrics/none")
	b.ReportMetric(median(perGen[0]), "µs/gen-none")
	b.ReportMetric(median(perGen[1]), "µs/gen-metrics")
}

// metricsRound is how many generations a round of
// BenchmarkMetricsGeneration runs on one agentd.
const metricsRound = 20
