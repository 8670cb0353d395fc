package pool

import (
	"context"
	"errors"
	"sync"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/metric"
	"go.opentelemetry.io/otel/metric/noop"

	"github.com/agentd/agentd/internal/telemetry"
)

// Metrics are the pools' instruments, made once per meter provider
// and shared by every pool given them in its Config; each pool records
// under its Config.Attributes. A pool's events (spawns, retirements,
// crashes, waits) are counted where they happen, with measurement options
// made once when the pool is; its processes by state are observed from
// the live pools when the metrics are collected, so the hot path pays
// nothing for them.
type Metrics struct {
	spawned  metric.Int64Counter
	retired  metric.Int64Counter
	crashed  metric.Int64Counter
	waits    metric.Int64Counter
	waitTime metric.Float64Histogram
	reg      metric.Registration

	mu    sync.Mutex
	pools map[observed]struct{} // the live pools; nil for noMetrics
}

// observed is a pool whose processes are counted at each collection.
type observed interface {
	observe(o metric.Observer, processes, limit metric.Int64Observable)
}

// waitBuckets span a warm spare (well under a millisecond) to a session
// that waits out a long read_timeout.
var waitBuckets = []float64{0.001, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 120}

// The states of agentd.pool.processes.
var states = [...]string{
	"warm",     // initialized, waiting for a session
	"busy",     // held by a session (a shared process: by one or more)
	"starting", // being spawned and initialized
	"stopping", // retired, still exiting: it counts against MaxProcesses
}

// reason is why a process was retired (agentd.pool.processes.retired's
// reason); a process that exited on its own or broke is counted as
// crashed instead.
type reason int

const (
	oneSession reason = iota // a process that is not shared serves one session
	idle                     // a spare beyond Warm idle for IdleTimeout
	lifetime                 // older than MaxLifetime
	shutdown                 // the pool closed
	nReasons
)

var reasons = [nReasons]string{"one_session", "idle", "max_lifetime", "shutdown"}

// NewMetrics makes the pool instruments of mp (nil: a no-op provider).
// Close unregisters the observation of the pools' processes.
func NewMetrics(mp metric.MeterProvider) (*Metrics, error) {
	if mp == nil {
		mp = noop.NewMeterProvider()
	}
	m := mp.Meter("github.com/agentd/agentd/bridge")
	ms := &Metrics{pools: make(map[observed]struct{})}
	var errs [8]error
	ms.spawned, errs[0] = m.Int64Counter("agentd.pool.processes.spawned", metric.WithUnit("{process}"),
		metric.WithDescription("MCP server processes the pool started and initialized."))
	ms.retired, errs[1] = m.Int64Counter("agentd.pool.processes.retired", metric.WithUnit("{process}"),
		metric.WithDescription("MCP server processes the pool stopped, by reason."))
	ms.crashed, errs[2] = m.Int64Counter("agentd.pool.processes.crashed", metric.WithUnit("{process}"),
		metric.WithDescription("MCP server processes that exited on their own or broke (a call's timeout killed them)."))
	ms.waits, errs[3] = m.Int64Counter("agentd.pool.waits", metric.WithUnit("{wait}"),
		metric.WithDescription("Sessions that had to wait for a process: none was warm and the pool was at max_processes."))
	ms.waitTime, errs[4] = m.Float64Histogram("agentd.pool.wait.duration", metric.WithUnit("s"),
		metric.WithDescription("Time a session took to get a process from the pool: every acquisition, warm, spawned or waited for."),
		metric.WithExplicitBucketBoundaries(waitBuckets...))
	var processes, limit metric.Int64ObservableUpDownCounter
	processes, errs[5] = m.Int64ObservableUpDownCounter("agentd.pool.processes", metric.WithUnit("{process}"),
		metric.WithDescription("MCP server processes of the pool, by state."))
	limit, errs[6] = m.Int64ObservableUpDownCounter("agentd.pool.processes.max", metric.WithUnit("{process}"),
		metric.WithDescription("The most processes the pool runs at once (max_processes)."))
	ms.reg, errs[7] = m.RegisterCallback(func(_ context.Context, o metric.Observer) error {
		ms.mu.Lock()
		defer ms.mu.Unlock()
		for p := range ms.pools {
			p.observe(o, processes, limit)
		}
		return nil
	}, processes, limit)
	if err := errors.Join(errs[:]...); err != nil {
		return nil, err
	}
	return ms, nil
}

// Close stops observing the pools. Idempotent; nil Metrics are fine.
func (m *Metrics) Close() error {
	if m == nil || m.reg == nil {
		return nil
	}
	return m.reg.Unregister()
}

// noMetrics are the instruments of a pool given none: they record
// nothing, and observe no pool.
var noMetrics = &Metrics{
	spawned: noop.Int64Counter{}, retired: noop.Int64Counter{}, crashed: noop.Int64Counter{},
	waits: noop.Int64Counter{}, waitTime: noop.Float64Histogram{},
}

// add and remove start and stop observing p. A pool adds itself when it
// is made and removes itself when it closes.
func (m *Metrics) add(p observed) {
	if m.pools == nil {
		return
	}
	m.mu.Lock()
	m.pools[p] = struct{}{}
	m.mu.Unlock()
}

func (m *Metrics) remove(p observed) {
	if m.pools == nil {
		return
	}
	m.mu.Lock()
	delete(m.pools, p)
	m.mu.Unlock()
}

// meters are one pool's instruments and its measurement options, made
// once.
type meters struct {
	m       *Metrics
	set     attribute.Set
	attrs   metric.MeasurementOption
	reasons [nReasons]metric.AddOption
	states  [len(states)]metric.ObserveOption
}

func newMeters(m *Metrics, set attribute.Set) *meters {
	if m == nil {
		m = noMetrics
	}
	pm := &meters{m: m, set: set, attrs: metric.WithAttributeSet(set)}
	for i, r := range reasons {
		pm.reasons[i] = metric.WithAttributeSet(with(set, attribute.String("reason", r)))
	}
	for i, s := range states {
		pm.states[i] = metric.WithAttributeSet(with(set, attribute.String("state", s)))
	}
	return pm
}

// with is set with kv added.
func with(set attribute.Set, kv attribute.KeyValue) attribute.Set {
	return attribute.NewSet(append(set.ToSlice(), kv)...)
}

func (pm *meters) spawned()         { pm.m.spawned.Add(context.Background(), 1, pm.attrs) }
func (pm *meters) crashed()         { pm.m.crashed.Add(context.Background(), 1, pm.attrs) }
func (pm *meters) waited()          { pm.m.waits.Add(context.Background(), 1, pm.attrs) }
func (pm *meters) retired(r reason) { pm.m.retired.Add(context.Background(), 1, pm.reasons[r]) }

// observe reports the processes by state: warm, busy, starting, stopping.
func (pm *meters) observe(o metric.Observer, processes metric.Int64Observable, counts [len(states)]int) {
	for i, n := range counts {
		o.ObserveInt64(processes, int64(n), pm.states[i])
	}
}

// acquired records how long an Acquire took; err, when it failed, adds
// its class as error.type (never its message).
func (pm *meters) acquired(ctx context.Context, began time.Time, err error) {
	d := time.Since(began).Seconds()
	if err == nil {
		pm.m.waitTime.Record(ctx, d, pm.attrs)
		return
	}
	pm.m.waitTime.Record(ctx, d, metric.WithAttributeSet(with(pm.set, attribute.String("error.type", telemetry.ErrorType(err)))))
}
