package pool

import (
	"context"
	"maps"
	"testing"
	"testing/synctest"
	"time"

	"github.com/google/go-cmp/cmp"
	"go.opentelemetry.io/otel/attribute"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"

	"github.com/agentd/agentd/internal/telemetry/metrictest"
)

// newMetrics makes the pool instruments on a manual reader.
func newMetrics(t *testing.T) (*Metrics, *sdkmetric.ManualReader) {
	t.Helper()
	reader := sdkmetric.NewManualReader()
	mp := sdkmetric.NewMeterProvider(sdkmetric.WithReader(reader))
	m, err := NewMetrics(mp)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = m.Close()
		_ = mp.Shutdown(context.Background())
	})
	return m, reader
}

func poolAttrs(server string) attribute.Set {
	return attribute.NewSet(attribute.String("server", server), attribute.String("tenant", "acme"))
}

// X-O1: a pool's instruments follow its processes through a life: warm
// spares spawned, sessions taking them (busy), a session that waits at
// max_processes and gets the process a retirement frees, one that waits in
// vain, a crash, and the shutdown, each under the pool's server and
// tenant. The wait durations are exact: the test runs in a synctest
// bubble.
func TestPoolMetrics(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		m, reader := newMetrics(t)
		const a = "{server=fs,tenant=acme}"
		state := func(s string) string { return "agentd.pool.processes{server=fs,state=" + s + ",tenant=acme}" }
		processes := func(warm, busy float64) map[string]float64 {
			return map[string]float64{
				state("warm"): warm, state("busy"): busy, state("starting"): 0, state("stopping"): 0,
				"agentd.pool.processes.max" + a: 2,
			}
		}
		check := func(what string, want map[string]float64) {
			t.Helper()
			got := collect(t, reader)
			for k, v := range want {
				if got[k] != v {
					t.Errorf("X-O1 %s: %s = %v, want %v", what, k, got[k], v)
				}
			}
		}

		f := newFakes()
		p := New("fs", Config{Warm: 1, MaxProcesses: 2, Metrics: m, Attributes: poolAttrs("fs")}, f.dial, discard)
		synctest.Wait()
		check("a warm spare", merge(processes(1, 0), map[string]float64{"agentd.pool.processes.spawned" + a: 1}))

		l1 := acquire(t, p) // the spare, and the filler readies another
		synctest.Wait()
		check("a session holds the spare", merge(processes(1, 1), map[string]float64{"agentd.pool.processes.spawned" + a: 2}))
		l2 := acquire(t, p) // the second spare: the pool is at max_processes
		leases := make(chan *Lease[*fakeConn])
		go func() { leases <- acquire(t, p) }()
		synctest.Wait()
		check("a session waits", merge(processes(0, 2), map[string]float64{"agentd.pool.waits" + a: 1}))

		time.Sleep(3 * time.Second)
		l1.Release(false) // retired: its process served its one session
		l3 := <-leases    // the waiter starts a process in its place
		if _, err := p.Acquire(t.Context(), time.Second); err == nil {
			t.Fatal("Acquire at max_processes succeeded")
		}
		l2.Conn().die()
		l2.Release(false)
		synctest.Wait() // the filler readies a spare in the crashed one's place
		check("after a crash", processes(1, 1))

		p.Close()
		l3.Release(false)
		got := collect(t, reader)
		want := map[string]float64{
			"agentd.pool.processes.spawned" + a:                                       4,
			"agentd.pool.processes.retired{reason=one_session,server=fs,tenant=acme}": 1,
			"agentd.pool.processes.retired{reason=shutdown,server=fs,tenant=acme}":    2, // the busy process and the spare
			"agentd.pool.processes.crashed" + a:                                       1,
			"agentd.pool.waits" + a:                                                   2,
			// Two spares taken at once and a wait of 3 s ...
			"agentd.pool.wait.duration" + a:            3,
			"agentd.pool.wait.duration" + a + "#count": 3,
			// ... and a wait in vain of its whole timeout.
			"agentd.pool.wait.duration{error.type=ResourceExhausted,server=fs,tenant=acme}":       1,
			"agentd.pool.wait.duration{error.type=ResourceExhausted,server=fs,tenant=acme}#count": 1,
		}
		if diff := cmp.Diff(want, got); diff != "" {
			t.Errorf("X-O1 metrics after Close (-want +got; a closed pool's processes are no longer observed):\n%s", diff)
		}
	})
}

// X-O1: retirements are counted by reason: a spare beyond warm idle for
// idle_timeout (idle), one past max_lifetime (max_lifetime); and a spare
// that exits on its own is counted as crashed, and replaced.
func TestPoolRetirementMetrics(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		m, reader := newMetrics(t)
		idling := New("idling", Config{Shared: true, IdleTimeout: time.Minute, Metrics: m, Attributes: poolAttrs("idling")}, newFakes().dial, discard)
		defer idling.Close()
		aging := New("aging", Config{Warm: 1, MaxProcesses: 2, MaxLifetime: time.Hour, Metrics: m, Attributes: poolAttrs("aging")}, newFakes().dial, discard)
		defer aging.Close()
		dying := newFakes()
		dying.life = 10 * time.Second
		crashing := New("crashing", Config{Warm: 1, MaxProcesses: 1, Metrics: m, Attributes: poolAttrs("crashing")}, dying.dial, discard)
		defer crashing.Close()

		acquire(t, idling).Release(false) // the shared process stays, idle
		time.Sleep(90*time.Minute + 5*time.Second)
		synctest.Wait()
		got := collect(t, reader)
		want := map[string]float64{
			"agentd.pool.processes.retired{reason=idle,server=idling,tenant=acme}":          1,
			"agentd.pool.processes.retired{reason=max_lifetime,server=aging,tenant=acme}":   1,
			"agentd.pool.processes.spawned{server=aging,tenant=acme}":                       2,
			"agentd.pool.processes{server=aging,state=warm,tenant=acme}":                    1,
			"agentd.pool.processes.crashed{server=crashing,tenant=acme}":                    540, // one every 10 s
			"agentd.pool.processes.spawned{server=crashing,tenant=acme}":                    541,
			"agentd.pool.processes{server=crashing,state=warm,tenant=acme}":                 1,
			"agentd.pool.processes{server=idling,state=warm,tenant=acme}":                   0,
			"agentd.pool.processes.retired{reason=one_session,server=crashing,tenant=acme}": 0,
		}
		for k, v := range want {
			if got[k] != v {
				t.Errorf("X-O1 %s = %v, want %v", k, got[k], v)
			}
		}
	})
}

func merge(a, b map[string]float64) map[string]float64 {
	out := maps.Clone(a)
	maps.Copy(out, b)
	return out
}

// BenchmarkAcquireShared measures a session's Acquire and Release of a
// shared pool's process, without metrics and with an SDK meter provider
// (X-O1: one histogram record per Acquire, with the pool's precomputed
// attributes; the processes are observed only at collection).
func BenchmarkAcquireShared(b *testing.B) {
	for _, bc := range []struct {
		name    string
		metrics bool
	}{{"none", false}, {"sdk", true}} {
		b.Run(bc.name, func(b *testing.B) {
			cfg := Config{Shared: true, StartTimeout: time.Minute}
			if bc.metrics {
				mp := sdkmetric.NewMeterProvider(sdkmetric.WithReader(sdkmetric.NewManualReader()))
				b.Cleanup(func() { _ = mp.Shutdown(context.Background()) })
				m, err := NewMetrics(mp)
				if err != nil {
					b.Fatal(err)
				}
				b.Cleanup(func() { _ = m.Close() })
				cfg.Metrics, cfg.Attributes = m, poolAttrs("bench")
			}
			p := New("bench", cfg, newFakes().dial, discard)
			b.Cleanup(p.Close)
			for b.Loop() {
				l, err := p.Acquire(context.Background(), time.Minute)
				if err != nil {
					b.Fatal(err)
				}
				l.Release(false)
			}
		})
	}
}

// collect reads reader (metrictest.Collect), with the histograms' sums:
// the waits are exact in a synctest bubble.
func collect(t *testing.T, reader sdkmetric.Reader) map[string]float64 {
	return metrictest.Collect(t, reader, metrictest.AllSums)
}
