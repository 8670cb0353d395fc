package schemacache

import (
	"context"
	"strings"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/google/go-cmp/cmp"
	"go.opentelemetry.io/otel/metric"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"

	"github.com/agentd/agentd/internal/telemetry/metrictest"
)

// X-O1: the cache counts each lookup as a hit or a miss (a call that
// bypasses the cache as neither), each eviction by its reason (capacity,
// expired, invalidated, cleared), and observes its entries, all by the
// entry's tenant and by nothing that names a key or a server. Expiry runs
// on the bubble's clock.
func TestMetrics(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		reader := sdkmetric.NewManualReader()
		mp := sdkmetric.NewMeterProvider(sdkmetric.WithReader(reader))
		defer mp.Shutdown(context.Background())
		c, err := New(Settings{Enabled: true, TTL: time.Minute, MaxEntries: 2}, mp)
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		var calls atomic.Int32
		keyOf := func(tenant, url string) Key { return NewKey(KeyParts{Tenant: tenant, URL: url}) }
		fetch := func(k Key) {
			t.Helper()
			if _, _, err := c.Fetch(t.Context(), k, nil, fetcher(&calls, tools("x"))); err != nil {
				t.Fatal(err)
			}
		}
		a1, a2, b1 := keyOf("acme", "https://a1.example/mcp"), keyOf("acme", "https://a2.example/mcp"), keyOf("beta", "https://b1.example/mcp")

		fetch(a1) // miss
		fetch(a1) // hit
		fetch(a1) // hit
		fetch(a2) // miss
		fetch(b1) // miss; a1, the oldest write, goes over max_entries
		off := false
		if _, _, err := c.Fetch(t.Context(), a1, &off, fetcher(&calls, tools("x"))); err != nil {
			t.Fatal(err) // bypasses the cache: neither hit nor miss
		}
		want := map[string]float64{
			"agentd.schema_cache.hits{tenant=acme}":                      2,
			"agentd.schema_cache.misses{tenant=acme}":                    2,
			"agentd.schema_cache.misses{tenant=beta}":                    1,
			"agentd.schema_cache.evictions{reason=capacity,tenant=acme}": 1,
			"agentd.schema_cache.entries{tenant=acme}":                   1,
			"agentd.schema_cache.entries{tenant=beta}":                   1,
		}
		if diff := cmp.Diff(want, collect(t, reader)); diff != "" {
			t.Errorf("X-O1 metrics (-want +got):\n%s", diff)
		}

		time.Sleep(2 * time.Minute)
		fetch(a2)        // its expired entry is dropped on lookup; the write drops b1's
		c.Invalidate(a2) // its server's tools changed
		fetch(b1)
		c.ClearTenant("beta")
		fetch(a1)
		want = map[string]float64{
			"agentd.schema_cache.hits{tenant=acme}":                         2,
			"agentd.schema_cache.misses{tenant=acme}":                       4,
			"agentd.schema_cache.misses{tenant=beta}":                       2,
			"agentd.schema_cache.evictions{reason=capacity,tenant=acme}":    1,
			"agentd.schema_cache.evictions{reason=expired,tenant=acme}":     1,
			"agentd.schema_cache.evictions{reason=expired,tenant=beta}":     1,
			"agentd.schema_cache.evictions{reason=invalidated,tenant=acme}": 1,
			"agentd.schema_cache.evictions{reason=cleared,tenant=beta}":     1,
			"agentd.schema_cache.entries{tenant=acme}":                      1,
		}
		got := collect(t, reader)
		if diff := cmp.Diff(want, got); diff != "" {
			t.Errorf("X-O1 metrics (-want +got):\n%s", diff)
		}
		for k := range got {
			if strings.Contains(k, "example") || strings.Contains(k, a1.String()) {
				t.Errorf("X-O1 metric %s names a server or a key", k)
			}
		}
		c.Clear()
		if got := collect(t, reader)["agentd.schema_cache.evictions{reason=cleared,tenant=acme}"]; got != 1 {
			t.Errorf("X-O1 after Clear: %v acme entries counted cleared, want 1", got)
		}
	})
}

// X-O1: without a meter provider the cache records nothing, and Close
// is harmless.
func TestNoMetrics(t *testing.T) {
	t.Parallel()
	c := newCache(t, defaults())
	var calls atomic.Int32
	if _, _, err := c.Fetch(t.Context(), key("a"), nil, fetcher(&calls, tools("x"))); err != nil {
		t.Fatal(err)
	}
	if err := c.Close(); err != nil {
		t.Error(err)
	}
}

// BenchmarkFetchHit measures a cache hit without metrics and with an SDK
// meter provider (X-O1: one counter add with the tenant's precomputed
// attributes).
func BenchmarkFetchHit(b *testing.B) {
	for _, bc := range []struct {
		name    string
		metrics bool
	}{{"none", false}, {"sdk", true}} {
		b.Run(bc.name, func(b *testing.B) {
			var provider metric.MeterProvider // nil: none
			if bc.metrics {
				mp := sdkmetric.NewMeterProvider(sdkmetric.WithReader(sdkmetric.NewManualReader()))
				b.Cleanup(func() { _ = mp.Shutdown(context.Background()) })
				provider = mp
			}
			c, err := New(defaults(), provider)
			if err != nil {
				b.Fatal(err)
			}
			b.Cleanup(func() { _ = c.Close() })
			k := NewKey(KeyParts{Tenant: "acme", URL: "https://a.example/mcp"})
			var calls atomic.Int32
			fetch := fetcher(&calls, tools("x", "y", "z"))
			for b.Loop() {
				if _, _, err := c.Fetch(context.Background(), k, nil, fetch); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// collect reads reader's counters (metrictest.Collect).
func collect(t *testing.T, reader sdkmetric.Reader) map[string]float64 {
	return metrictest.Collect(t, reader, metrictest.NoSums)
}
