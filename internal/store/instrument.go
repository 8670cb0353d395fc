package store

import (
	"context"
	"io"
	"sync"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/metric"
	"go.opentelemetry.io/otel/metric/noop"

	"github.com/agentd/agentd/internal/telemetry"
)

// The store's instruments, in the OpenTelemetry metrics agentd exports.
const (
	// OperationDuration is the histogram of every store operation's
	// duration, in seconds, by operation, db.system.name and, when the
	// operation failed, error.type.
	OperationDuration = "agentd.store.operation.duration"
	// PausedGenerations is the gauge of the paused generations stored, by
	// tenant.
	PausedGenerations = "agentd.generations.paused"
)

// operationBuckets are the bucket boundaries, in seconds, that the
// database semantic conventions advise for db.client.operation.duration.
var operationBuckets = []float64{0.001, 0.005, 0.01, 0.05, 0.1, 0.5, 1, 5, 10}

// pausedObserveTimeout bounds the query behind one observation of the
// paused gauge: a store that does not answer leaves the gauge out of that
// collection rather than hold up the others.
const pausedObserveTimeout = 5 * time.Second

// pausedCounter counts the paused generations of every tenant: the
// stores of this package implement it.
type pausedCounter interface {
	countPaused(ctx context.Context, now time.Time) (map[string]int, error)
}

// Instrument returns s with its operations measured through mp:
// each call's duration in agentd.store.operation.duration, with
// operation (the method: create, checkpoint, finish, pause, resume,
// get_token, reserve, …),
// db.system.name (sqlite or postgresql) and error.type (the error's
// fault kind) when it failed; and agentd.generations.paused, observed at
// each collection by one query of the store: the paused generations
// stored for each tenant that have not expired, those claimed by a
// running resume included, as max_paused_generations counts them. The
// gauge is the whole store's, the same on every replica that shares it
// (aggregate it with max, not sum). Closing the returned Store stops the
// observations and closes s. No attribute holds a generation id, a tenant
// other than as the gauge's tenant, or the DSN. With a nil mp, s is
// returned as it is.
func Instrument(s Store, mp metric.MeterProvider) Store {
	if mp == nil {
		return s
	}
	if _, ok := mp.(noop.MeterProvider); ok {
		return s
	}
	m := mp.Meter("github.com/agentd/agentd/internal/store")
	// Valid names and units: creating these does not fail.
	hist, _ := m.Float64Histogram(OperationDuration, metric.WithUnit("s"),
		metric.WithDescription("Duration of one operation of agentd's state store (a statement or a transaction), by operation."),
		metric.WithExplicitBucketBoundaries(operationBuckets...))
	system := attribute.String("db.system.name", systemName(s))
	in := &instrumented{Store: s, hist: hist, options: telemetry.NewMeasurementOptions(func(l operationLabels) []attribute.KeyValue {
		attrs := []attribute.KeyValue{attribute.String("operation", l.operation), system}
		if l.errType != "" {
			attrs = append(attrs, attribute.String("error.type", l.errType))
		}
		return attrs
	})}
	in.gens = &instrumentedGenerations{gens: s.Generations(), in: in}
	in.tokens = &instrumentedTokens{tokens: s.Tokens(), in: in}
	in.threads = &instrumentedThreads{threads: s.Threads(), in: in}
	in.budgets = &instrumentedBudgets{budgets: s.Budgets(), in: in}
	if pc, ok := s.(pausedCounter); ok {
		gauge, _ := m.Int64ObservableGauge(PausedGenerations, metric.WithUnit("{generation}"),
			metric.WithDescription("Paused generations stored, by tenant: the whole store's count, the same on every replica that shares it."))
		// A tenant's series, once seen, reads 0 when it has nothing paused
		// rather than vanish, so that alerts and max() see the drop; the
		// default tenant ("") has one from the start. Readers may collect
		// at once, hence the lock.
		var mu sync.Mutex
		seen := map[string]bool{"": true}
		in.reg, _ = m.RegisterCallback(func(ctx context.Context, o metric.Observer) error {
			ctx, cancel := context.WithTimeout(ctx, pausedObserveTimeout)
			defer cancel()
			counts, err := pc.countPaused(ctx, time.Now())
			if err != nil {
				return err
			}
			mu.Lock()
			defer mu.Unlock()
			for tenant := range counts {
				seen[tenant] = true
			}
			for tenant := range seen {
				o.ObserveInt64(gauge, int64(counts[tenant]), metric.WithAttributes(attribute.String("tenant", tenant)))
			}
			return nil
		}, gauge)
	}
	return in
}

// systemName is the db.system.name of s.
func systemName(s Store) string {
	switch s.(type) {
	case *SQLite:
		return "sqlite"
	case *Postgres:
		return "postgresql"
	}
	return "other_sql"
}

// instrumented is a Store whose operations are timed.
type instrumented struct {
	Store
	gens    *instrumentedGenerations
	tokens  *instrumentedTokens
	threads *instrumentedThreads
	budgets *instrumentedBudgets
	hist    metric.Float64Histogram
	options *telemetry.MeasurementOptions[operationLabels]
	reg     metric.Registration // the paused gauge's callback; nil without one
}

// operationLabels are the labels of one operation's series besides
// db.system.name, which is the store's.
type operationLabels struct{ operation, errType string }

// done records an operation that began at began and ended with err.
func (in *instrumented) done(ctx context.Context, op string, began time.Time, err error) {
	d := time.Since(began).Seconds()
	l := operationLabels{operation: op}
	if err != nil {
		l.errType = telemetry.ErrorType(err)
	}
	// The operation's own context may have ended: the measurement is
	// still wanted.
	in.hist.Record(context.WithoutCancel(ctx), d, in.options.For(l))
}

func (in *instrumented) Save(ctx context.Context, tenant, id string, data []byte, expires time.Time, ifVersion int64) (err error) {
	defer func(began time.Time) { in.done(ctx, "pause", began, err) }(time.Now())
	return in.Store.Save(ctx, tenant, id, data, expires, ifVersion)
}

func (in *instrumented) Get(ctx context.Context, tenant, id string) (_ Record, err error) {
	defer func(began time.Time) { in.done(ctx, "get_paused", began, err) }(time.Now())
	return in.Store.Get(ctx, tenant, id)
}

func (in *instrumented) Claim(ctx context.Context, tenant, id string, version int64, data []byte, now, staleBefore time.Time) (err error) {
	defer func(began time.Time) { in.done(ctx, "resume", began, err) }(time.Now())
	return in.Store.Claim(ctx, tenant, id, version, data, now, staleBefore)
}

func (in *instrumented) Renew(ctx context.Context, tenant, id string, version int64, data []byte, now time.Time) (err error) {
	defer func(began time.Time) { in.done(ctx, "renew_claim", began, err) }(time.Now())
	return in.Store.Renew(ctx, tenant, id, version, data, now)
}

func (in *instrumented) Count(ctx context.Context, tenant string) (_ int, _ time.Time, err error) {
	defer func(began time.Time) { in.done(ctx, "count_paused", began, err) }(time.Now())
	return in.Store.Count(ctx, tenant)
}

func (in *instrumented) Delete(ctx context.Context, tenant, id string, ifVersion int64) (err error) {
	defer func(began time.Time) { in.done(ctx, "delete_paused", began, err) }(time.Now())
	return in.Store.Delete(ctx, tenant, id, ifVersion)
}

func (in *instrumented) Ping(ctx context.Context) (err error) {
	defer func(began time.Time) { in.done(ctx, "ping", began, err) }(time.Now())
	return in.Store.Ping(ctx)
}

func (in *instrumented) Usage(ctx context.Context, tenant string, since, now time.Time) (_ TenantUsage, err error) {
	defer func(began time.Time) { in.done(ctx, "usage", began, err) }(time.Now())
	return in.Store.Usage(ctx, tenant, since, now)
}

func (in *instrumented) Generations() Generations { return in.gens }

func (in *instrumented) Tokens() Tokens { return in.tokens }

func (in *instrumented) Threads() Threads { return in.threads }

func (in *instrumented) Budgets() Budgets { return in.budgets }

// Close stops the paused gauge's observations and closes the store.
func (in *instrumented) Close() error {
	if in.reg != nil {
		_ = in.reg.Unregister() // fails only for a callback it does not know
		in.reg = nil
	}
	return in.Store.Close()
}

// instrumentedGenerations is the Generations of an instrumented Store.
type instrumentedGenerations struct {
	gens Generations
	in   *instrumented
}

func (g *instrumentedGenerations) Create(ctx context.Context, ng NewGeneration) (_ Created, err error) {
	defer func(began time.Time) { g.in.done(ctx, "create", began, err) }(time.Now())
	return g.gens.Create(ctx, ng)
}

func (g *instrumentedGenerations) Acquire(ctx context.Context, tenant, id, owner string, now, expires time.Time) (_ Generation, err error) {
	defer func(began time.Time) { g.in.done(ctx, "acquire", began, err) }(time.Now())
	return g.gens.Acquire(ctx, tenant, id, owner, now, expires)
}

func (g *instrumentedGenerations) Renew(ctx context.Context, tenant, id string, epoch int64, expires time.Time) (err error) {
	defer func(began time.Time) { g.in.done(ctx, "renew_lease", began, err) }(time.Now())
	return g.gens.Renew(ctx, tenant, id, epoch, expires)
}

func (g *instrumentedGenerations) Release(ctx context.Context, tenant, id string, epoch int64, now time.Time) (err error) {
	defer func(began time.Time) { g.in.done(ctx, "release", began, err) }(time.Now())
	return g.gens.Release(ctx, tenant, id, epoch, now)
}

func (g *instrumentedGenerations) Checkpoint(ctx context.Context, tenant, id string, epoch int64, c Checkpoint) (_ int64, err error) {
	defer func(began time.Time) { g.in.done(ctx, "checkpoint", began, err) }(time.Now())
	return g.gens.Checkpoint(ctx, tenant, id, epoch, c)
}

func (g *instrumentedGenerations) Finish(ctx context.Context, tenant, id string, epoch int64, o Outcome) (_ int64, err error) {
	defer func(began time.Time) { g.in.done(ctx, "finish", began, err) }(time.Now())
	return g.gens.Finish(ctx, tenant, id, epoch, o)
}

func (g *instrumentedGenerations) Get(ctx context.Context, tenant, id string) (_ Generation, err error) {
	defer func(began time.Time) { g.in.done(ctx, "get", began, err) }(time.Now())
	return g.gens.Get(ctx, tenant, id)
}

func (g *instrumentedGenerations) List(ctx context.Context, tenant string, o ListOptions) (_ []Generation, _ string, err error) {
	defer func(began time.Time) { g.in.done(ctx, "list", began, err) }(time.Now())
	return g.gens.List(ctx, tenant, o)
}

func (g *instrumentedGenerations) Adopt(ctx context.Context, owner string, now, expires time.Time, limit int) (_ []Generation, err error) {
	defer func(began time.Time) { g.in.done(ctx, "adopt", began, err) }(time.Now())
	return g.gens.Adopt(ctx, owner, now, expires, limit)
}

func (g *instrumentedGenerations) Attend(ctx context.Context, owner string) (_ io.Closer, err error) {
	defer func(began time.Time) { g.in.done(ctx, "attend", began, err) }(time.Now())
	return g.gens.Attend(ctx, owner)
}

func (g *instrumentedGenerations) Append(ctx context.Context, tenant, id string, epoch int64, events []Event) (_ int64, err error) {
	defer func(began time.Time) { g.in.done(ctx, "append", began, err) }(time.Now())
	return g.gens.Append(ctx, tenant, id, epoch, events)
}

func (g *instrumentedGenerations) Agent(ctx context.Context, tenant, id string) (_ []byte, err error) {
	defer func(began time.Time) { g.in.done(ctx, "agent", began, err) }(time.Now())
	return g.gens.Agent(ctx, tenant, id)
}

func (g *instrumentedGenerations) Items(ctx context.Context, tenant, id string, after int64, limit int) (_ []Item, err error) {
	defer func(began time.Time) { g.in.done(ctx, "items", began, err) }(time.Now())
	return g.gens.Items(ctx, tenant, id, after, limit)
}

func (g *instrumentedGenerations) Read(ctx context.Context, tenant, id string, after int64, limit int) (_ []Event, err error) {
	defer func(began time.Time) { g.in.done(ctx, "read", began, err) }(time.Now())
	return g.gens.Read(ctx, tenant, id, after, limit)
}

func (g *instrumentedGenerations) ExpirePaused(ctx context.Context, now time.Time, result []byte) (_ int, err error) {
	defer func(began time.Time) { g.in.done(ctx, "expire_paused", began, err) }(time.Now())
	return g.gens.ExpirePaused(ctx, now, result)
}

func (g *instrumentedGenerations) Cancel(ctx context.Context, tenant, id, reason string, result []byte, now time.Time) (_ Generation, err error) {
	defer func(began time.Time) { g.in.done(ctx, "cancel", began, err) }(time.Now())
	return g.gens.Cancel(ctx, tenant, id, reason, result, now)
}

func (g *instrumentedGenerations) Sweep(ctx context.Context, before time.Time) (_ int, err error) {
	defer func(began time.Time) { g.in.done(ctx, "sweep", began, err) }(time.Now())
	return g.gens.Sweep(ctx, before)
}

func (g *instrumentedGenerations) ListPending(ctx context.Context, tenant string, o PendingOptions) (_ []PendingRequest, _ string, err error) {
	defer func(began time.Time) { g.in.done(ctx, "list_pending", began, err) }(time.Now())
	return g.gens.ListPending(ctx, tenant, o)
}

func (g *instrumentedGenerations) Decide(ctx context.Context, tenant, id string, ds []Decision) (_ []Decision, err error) {
	defer func(began time.Time) { g.in.done(ctx, "decide", began, err) }(time.Now())
	return g.gens.Decide(ctx, tenant, id, ds)
}

func (g *instrumentedGenerations) Undecide(ctx context.Context, tenant, id string, requestIDs []string) (err error) {
	defer func(began time.Time) { g.in.done(ctx, "undecide", began, err) }(time.Now())
	return g.gens.Undecide(ctx, tenant, id, requestIDs)
}

func (g *instrumentedGenerations) Decisions(ctx context.Context, tenant, id string, requestIDs []string) (_ []Decision, err error) {
	defer func(began time.Time) { g.in.done(ctx, "decisions", began, err) }(time.Now())
	return g.gens.Decisions(ctx, tenant, id, requestIDs)
}

// instrumentedTokens is the Tokens of an instrumented Store.
type instrumentedTokens struct {
	tokens Tokens
	in     *instrumented
}

func (t *instrumentedTokens) GetToken(ctx context.Context, tenant, endUser, server string) (_ []byte, err error) {
	defer func(began time.Time) { t.in.done(ctx, "get_token", began, err) }(time.Now())
	return t.tokens.GetToken(ctx, tenant, endUser, server)
}

func (t *instrumentedTokens) PutToken(ctx context.Context, tenant, endUser, server string, data []byte) (err error) {
	defer func(began time.Time) { t.in.done(ctx, "put_token", began, err) }(time.Now())
	return t.tokens.PutToken(ctx, tenant, endUser, server, data)
}

func (t *instrumentedTokens) DeleteTokens(ctx context.Context, tenant, endUser, server string) (_ int64, err error) {
	defer func(began time.Time) { t.in.done(ctx, "delete_tokens", began, err) }(time.Now())
	return t.tokens.DeleteTokens(ctx, tenant, endUser, server)
}

// instrumentedThreads is the Threads of an instrumented Store.
type instrumentedThreads struct {
	threads Threads
	in      *instrumented
}

func (t *instrumentedThreads) CreateThread(ctx context.Context, nt NewThread) (_ Thread, err error) {
	defer func(began time.Time) { t.in.done(ctx, "create_thread", began, err) }(time.Now())
	return t.threads.CreateThread(ctx, nt)
}

func (t *instrumentedThreads) GetThread(ctx context.Context, tenant, id string) (_ Thread, err error) {
	defer func(began time.Time) { t.in.done(ctx, "get_thread", began, err) }(time.Now())
	return t.threads.GetThread(ctx, tenant, id)
}

func (t *instrumentedThreads) ListThreads(ctx context.Context, tenant string, o ThreadListOptions) (_ []Thread, _ string, err error) {
	defer func(began time.Time) { t.in.done(ctx, "list_threads", began, err) }(time.Now())
	return t.threads.ListThreads(ctx, tenant, o)
}

func (t *instrumentedThreads) ThreadItems(ctx context.Context, tenant, id string, r ItemRange) (_ []ThreadItem, err error) {
	defer func(began time.Time) { t.in.done(ctx, "thread_items", began, err) }(time.Now())
	return t.threads.ThreadItems(ctx, tenant, id, r)
}

func (t *instrumentedThreads) UpdateThread(ctx context.Context, tenant, id string, u ThreadUpdate) (_ Thread, err error) {
	defer func(began time.Time) { t.in.done(ctx, "update_thread", began, err) }(time.Now())
	return t.threads.UpdateThread(ctx, tenant, id, u)
}

func (t *instrumentedThreads) DeleteThread(ctx context.Context, tenant, id string) (_, _ int64, err error) {
	defer func(began time.Time) { t.in.done(ctx, "delete_thread", began, err) }(time.Now())
	return t.threads.DeleteThread(ctx, tenant, id)
}

func (t *instrumentedThreads) ForkThread(ctx context.Context, tenant, id, newID string, upTo int64, metadata map[string]string, maxThreads int64, now time.Time) (_ Thread, err error) {
	defer func(began time.Time) { t.in.done(ctx, "fork_thread", began, err) }(time.Now())
	return t.threads.ForkThread(ctx, tenant, id, newID, upTo, metadata, maxThreads, now)
}

func (t *instrumentedThreads) Interrupted(ctx context.Context, owner string, limit int) (_ []Interruption, err error) {
	defer func(began time.Time) { t.in.done(ctx, "interrupted", began, err) }(time.Now())
	return t.threads.Interrupted(ctx, owner, limit)
}

func (t *instrumentedThreads) SweepThreads(ctx context.Context, now, idleBefore time.Time) (_ int, err error) {
	defer func(began time.Time) { t.in.done(ctx, "sweep_threads", began, err) }(time.Now())
	return t.threads.SweepThreads(ctx, now, idleBefore)
}

// instrumentedBudgets is the Budgets of an instrumented Store.
type instrumentedBudgets struct {
	budgets Budgets
	in      *instrumented
}

func (b *instrumentedBudgets) PutBudget(ctx context.Context, d BudgetDef) (err error) {
	defer func(began time.Time) { b.in.done(ctx, "put_budget", began, err) }(time.Now())
	return b.budgets.PutBudget(ctx, d)
}

func (b *instrumentedBudgets) DeleteBudget(ctx context.Context, tenant, name string) (_ bool, err error) {
	defer func(began time.Time) { b.in.done(ctx, "delete_budget", began, err) }(time.Now())
	return b.budgets.DeleteBudget(ctx, tenant, name)
}

func (b *instrumentedBudgets) ListBudgets(ctx context.Context) (_ []BudgetDef, err error) {
	defer func(began time.Time) { b.in.done(ctx, "list_budgets", began, err) }(time.Now())
	return b.budgets.ListBudgets(ctx)
}

func (b *instrumentedBudgets) Reserve(ctx context.Context, id string, charges []Charge, now, expires time.Time) (_ *Refused, err error) {
	defer func(began time.Time) { b.in.done(ctx, "reserve", began, err) }(time.Now())
	return b.budgets.Reserve(ctx, id, charges, now, expires)
}

func (b *instrumentedBudgets) Settle(ctx context.Context, id string, charges []Charge, now time.Time) (_ []Spent, err error) {
	defer func(began time.Time) { b.in.done(ctx, "settle", began, err) }(time.Now())
	return b.budgets.Settle(ctx, id, charges, now)
}

func (b *instrumentedBudgets) BudgetSpends(ctx context.Context, tenant, name string, from, bucket, now time.Time, limit int) (_ []SubjectSpend, err error) {
	defer func(began time.Time) { b.in.done(ctx, "budget_spends", began, err) }(time.Now())
	return b.budgets.BudgetSpends(ctx, tenant, name, from, bucket, now, limit)
}

func (b *instrumentedBudgets) AddUsage(ctx context.Context, entries []UsageEntry) (err error) {
	defer func(began time.Time) { b.in.done(ctx, "add_usage", began, err) }(time.Now())
	return b.budgets.AddUsage(ctx, entries)
}

func (b *instrumentedBudgets) SumUsage(ctx context.Context, q UsageQuery) (_ []UsageTotal, err error) {
	defer func(began time.Time) { b.in.done(ctx, "sum_usage", began, err) }(time.Now())
	return b.budgets.SumUsage(ctx, q)
}

func (b *instrumentedBudgets) SweepSpending(ctx context.Context, before time.Time) (_ int64, err error) {
	defer func(began time.Time) { b.in.done(ctx, "sweep_spending", began, err) }(time.Now())
	return b.budgets.SweepSpending(ctx, before)
}
