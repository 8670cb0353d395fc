package bridge

import (
	"context"
	"fmt"
	"strings"
	"testing"

	sdkmetric "go.opentelemetry.io/otel/sdk/metric"

	"github.com/agentd/agentd/internal/mcptest"
	"github.com/agentd/agentd/internal/telemetry/metrictest"
	"github.com/agentd/agentd/internal/testwait"
)

// waitMetrics waits until every metric of want has its value.
func waitMetrics(t *testing.T, reader sdkmetric.Reader, what string, want map[string]float64) map[string]float64 {
	t.Helper()
	var got map[string]float64
	testwait.Until(t, func() error {
		got = collectMetrics(t, reader)
		for k, v := range want {
			if got[k] != v {
				return fmt.Errorf("X-O1 %s: %s = %v, want %v; all: %v", what, k, got[k], v, got)
			}
		}
		return nil
	})
	return got
}

// TestMetrics (X-O1): the bridge's pools and schema cache record to the
// meter provider of its Options: a registered server's pool under its
// registered name and no tenant (it serves every tenant), a request's
// command under the name the request gave it and the session's tenant,
// never its command line; the cache by tenant.
func TestMetrics(t *testing.T) {
	t.Parallel()
	reader := sdkmetric.NewManualReader()
	mp := sdkmetric.NewMeterProvider(sdkmetric.WithReader(reader))
	t.Cleanup(func() { _ = mp.Shutdown(context.Background()) })
	f := newFixtureOptions(t, warmTools(t, "warm"), func(o *Options) { o.MeterProvider = mp })
	waitMetrics(t, reader, "a warm spare", map[string]float64{
		"agentd.pool.processes{server=warm,state=warm,tenant=}": 1,
		"agentd.pool.processes.spawned{server=warm,tenant=}":    1,
		"agentd.pool.processes.max{server=warm,tenant=}":        float64(f.svc.cfg.Pool.MaxProcesses),
	})

	openAcme := func() string {
		t.Helper()
		return openAs(t, f.client, "acme", refSpec("w", "warm"), commandSpec(t, "mine", mcptest.Tools, nil))
	}
	id := openAcme()
	list(t, f.client, id) // both connect: the spare, and a process started for the command
	waitMetrics(t, reader, "a session holds the spare and a command's process", map[string]float64{
		"agentd.schema_cache.misses{tenant=acme}":                   2,
		"agentd.schema_cache.entries{tenant=acme}":                  2,
		"agentd.pool.processes{server=warm,state=busy,tenant=}":     1,
		"agentd.pool.processes{server=mine,state=busy,tenant=acme}": 1,
		"agentd.pool.processes.spawned{server=mine,tenant=acme}":    1,
		"agentd.pool.wait.duration{server=warm,tenant=}#count":      1,
		"agentd.pool.wait.duration{server=mine,tenant=acme}#count":  1,
	})
	call(t, f.client, id, "mine", "crash", "")
	waitMetrics(t, reader, "a crash", map[string]float64{
		"agentd.pool.processes.crashed{server=mine,tenant=acme}":    1,
		"agentd.pool.processes{server=mine,state=busy,tenant=acme}": 0,
	})
	closeSession(t, f.client, id)
	waitMetrics(t, reader, "the session's process retired", map[string]float64{
		"agentd.pool.processes.retired{reason=one_session,server=warm,tenant=}": 1,
		"agentd.pool.processes{server=warm,state=busy,tenant=}":                 0,
	})

	id = openAcme()
	list(t, f.client, id)
	got := waitMetrics(t, reader, "a warm cache", map[string]float64{
		"agentd.schema_cache.hits{tenant=acme}":   2,
		"agentd.schema_cache.misses{tenant=acme}": 2,
	})
	for k := range got {
		if strings.Contains(k, f.exe) || strings.Contains(k, "command") || strings.Contains(k, t.Name()) || strings.Contains(k, id) {
			t.Errorf("X-O1 metric %s carries a command line, a generation or a session", k)
		}
	}
}

// collectMetrics reads reader (metrictest.Collect): the histograms by
// count.
func collectMetrics(t *testing.T, reader sdkmetric.Reader) map[string]float64 {
	return metrictest.Collect(t, reader, metrictest.NoSums)
}
