package store_test

import (
	"context"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"

	"github.com/agentd/agentd/internal/store"
	"github.com/agentd/agentd/internal/store/pgtest"
	"github.com/agentd/agentd/internal/store/storetest"
	"github.com/agentd/agentd/internal/telemetry/metrictest"
)

// X-O1: an instrumented store is the store it wraps, as the conformance
// suite sees it.
func TestInstrumentedSQLite(t *testing.T) {
	t.Parallel()
	storetest.Run(t, func(t *testing.T) storetest.DB {
		path := filepath.Join(t.TempDir(), "agentd.db")
		mp := sdkmetric.NewMeterProvider(sdkmetric.WithReader(sdkmetric.NewManualReader()))
		t.Cleanup(func() { _ = mp.Shutdown(context.Background()) })
		return storetest.DB{
			Open: func(sweepEvery time.Duration) (store.Store, error) {
				s, err := store.OpenSQLite(path, sweepEvery)
				if err != nil {
					return nil, err
				}
				return store.Instrument(s, mp), nil
			},
			Stored:          sqliteStored(path),
			AttendElsewhere: attendElsewhere(store.Options{Driver: store.DriverSQLite, Path: path}),
		}
	})
}

// X-O1: every operation of an instrumented store is timed in
// agentd.store.operation.duration by operation and db.system.name, with
// error.type when it failed; agentd.generations.paused reports the paused
// generations stored per tenant at each collection, expired ones left
// out, 0 for a tenant seen before that has none now, and nothing once the
// store is closed.
func TestInstrument(t *testing.T) {
	t.Parallel()
	stores := []struct {
		system string
		open   func(t *testing.T) store.Store
	}{
		{"sqlite", func(t *testing.T) store.Store {
			s, err := store.OpenSQLite(filepath.Join(t.TempDir(), "agentd.db"), 0)
			if err != nil {
				t.Fatal(err)
			}
			return s
		}},
		{"postgresql", func(t *testing.T) store.Store {
			dsn := pgtest.DSN(t) // skips without a PostgreSQL server
			s, err := store.OpenPostgres(t.Context(), dsn, 0)
			if err != nil {
				t.Fatal(err)
			}
			return s
		}},
	}
	for _, tt := range stores {
		t.Run(tt.system, func(t *testing.T) {
			t.Parallel()
			reader := sdkmetric.NewManualReader()
			mp := sdkmetric.NewMeterProvider(sdkmetric.WithReader(reader))
			t.Cleanup(func() { _ = mp.Shutdown(context.Background()) })
			s := store.Instrument(tt.open(t), mp)
			closed := false
			t.Cleanup(func() {
				if !closed {
					_ = s.Close()
				}
			})
			ctx := t.Context()
			now := time.Now()
			for _, p := range []struct {
				tenant, id string
				expires    time.Time
			}{
				{"acme", "g1", now.Add(time.Hour)},
				{"acme", "g2", now.Add(time.Hour)},
				{"", "g3", now.Add(time.Hour)},
				{"globex", "g4", now.Add(-time.Minute)}, // expired: not counted
			} {
				if err := s.Save(ctx, p.tenant, p.id, []byte("cp"), p.expires, 0); err != nil {
					t.Fatal(err)
				}
			}
			if _, err := s.Get(ctx, "acme", "missing"); err == nil {
				t.Fatal("Get of a missing generation succeeded")
			}
			if _, err := s.Generations().Create(ctx, store.NewGeneration{Tenant: "acme", ID: "r1", Owner: "replica", Expires: now.Add(time.Minute), Now: now, Checkpoint: []byte("cp")}); err != nil {
				t.Fatal(err)
			}
			if _, err := s.Generations().Checkpoint(ctx, "acme", "r1", 1, store.Checkpoint{State: store.Running, Data: []byte("cp2"), Now: now}); err != nil {
				t.Fatal(err)
			}
			if _, err := s.Generations().Finish(ctx, "acme", "r1", 7, store.Outcome{State: store.Completed, Now: now}); err == nil {
				t.Fatal("Finish under a lease never held succeeded")
			}
			// X-M3: the tokens' operations too.
			if err := s.Tokens().PutToken(ctx, "acme", "u", "k", []byte("sealed")); err != nil {
				t.Fatal(err)
			}
			if _, err := s.Tokens().GetToken(ctx, "acme", "u", "other"); err == nil {
				t.Fatal("GetToken of a missing token succeeded")
			}
			if _, err := s.Tokens().DeleteTokens(ctx, "acme", "", ""); err != nil {
				t.Fatal(err)
			}
			// What a tenant uses, for the AdminService's ListTenants.
			if _, err := s.Usage(ctx, "acme", now.Add(-time.Minute), now); err != nil {
				t.Fatal(err)
			}
			budgetOperations(t, s.Budgets(), now)

			sys := "db.system.name=" + tt.system
			want := map[string]float64{
				"agentd.store.operation.duration{" + sys + ",operation=pause}#count":                          4,
				"agentd.store.operation.duration{" + sys + ",error.type=NotFound,operation=get_paused}#count": 1,
				"agentd.store.operation.duration{" + sys + ",operation=create}#count":                         1,
				"agentd.store.operation.duration{" + sys + ",operation=checkpoint}#count":                     1,
				// A lease lost is a Conflict, whose gRPC code is Aborted.
				"agentd.store.operation.duration{" + sys + ",error.type=Aborted,operation=finish}#count":            1,
				"agentd.store.operation.duration{" + sys + ",operation=put_token}#count":                            1,
				"agentd.store.operation.duration{" + sys + ",error.type=NotFound,operation=get_token}#count":        1,
				"agentd.store.operation.duration{" + sys + ",operation=delete_tokens}#count":                        1,
				"agentd.store.operation.duration{" + sys + ",operation=usage}#count":                                1,
				"agentd.store.operation.duration{" + sys + ",operation=put_budget}#count":                           1,
				"agentd.store.operation.duration{" + sys + ",operation=list_budgets}#count":                         1,
				"agentd.store.operation.duration{" + sys + ",operation=delete_budget}#count":                        1,
				"agentd.store.operation.duration{" + sys + ",operation=reserve}#count":                              1,
				"agentd.store.operation.duration{" + sys + ",operation=settle}#count":                               1,
				"agentd.store.operation.duration{" + sys + ",operation=budget_spends}#count":                        1,
				"agentd.store.operation.duration{" + sys + ",operation=add_usage}#count":                            1,
				"agentd.store.operation.duration{" + sys + ",operation=sum_usage}#count":                            1,
				"agentd.store.operation.duration{" + sys + ",error.type=InvalidArgument,operation=sum_usage}#count": 1,
				"agentd.store.operation.duration{" + sys + ",operation=sweep_spending}#count":                       1,
				"agentd.generations.paused{tenant=acme}":                                                            2,
				"agentd.generations.paused{tenant=}":                                                                1,
			}
			if diff := cmp.Diff(want, collectStore(t, reader)); diff != "" {
				t.Errorf("metrics (-want +got):\n%s", diff)
			}

			// A tenant whose paused generations are gone reads 0; one that
			// never had any (globex: only an expired one) has no series.
			for _, id := range []string{"g1", "g2"} {
				if err := s.Delete(ctx, "acme", id, 0); err != nil {
					t.Fatal(err)
				}
			}
			got := collectStore(t, reader)
			for k, v := range map[string]float64{"agentd.generations.paused{tenant=acme}": 0, "agentd.generations.paused{tenant=}": 1} {
				if n, ok := got[k]; !ok || n != v {
					t.Errorf("after acme's paused generations are deleted: %s = %v (present %v), want %v", k, n, ok, v)
				}
			}
			if _, ok := got["agentd.generations.paused{tenant=globex}"]; ok {
				t.Error("globex, which never had a paused generation, has a series")
			}

			if err := s.Close(); err != nil {
				t.Fatal(err)
			}
			closed = true
			for k := range collectStore(t, reader) {
				if strings.HasPrefix(k, store.PausedGenerations) {
					t.Errorf("%s observed after Close", k)
				}
			}
		})
	}
}

// budgetOperations calls each of b's operations once, and SumUsage once
// more with a grouping of no column.
func budgetOperations(t *testing.T, b store.Budgets, now time.Time) {
	ctx := t.Context()
	c := []store.Charge{{Tenant: "acme", Budget: "daily", From: now, Bucket: now, MaxTokens: 10, Tokens: 1}}
	errs := []error{
		b.PutBudget(ctx, store.BudgetDef{Tenant: "acme", Name: "daily", Spec: []byte("spec")}),
		errOf(b.ListBudgets(ctx)),
		errOf(b.DeleteBudget(ctx, "acme", "daily")),
		errOf(b.Reserve(ctx, "r", c, now, now.Add(time.Minute))),
		errOf(b.Settle(ctx, "r", c, now)),
		errOf(b.BudgetSpends(ctx, "acme", "daily", now, now, now, 10)),
		b.AddUsage(ctx, []store.UsageEntry{{Tenant: "acme", Hour: now, Calls: 1}}),
		errOf(b.SumUsage(ctx, store.UsageQuery{Tenant: "acme", From: now, To: now.Add(time.Hour)})),
		errOf(b.SweepSpending(ctx, now.Add(-time.Hour))),
	}
	for i, err := range errs {
		if err != nil {
			t.Fatalf("budget operation %d: %v", i, err)
		}
	}
	if _, err := b.SumUsage(ctx, store.UsageQuery{Tenant: "acme", GroupBy: "model"}); err == nil {
		t.Fatal("SumUsage by a column that is none succeeded")
	}
}

func errOf[T any](_ T, err error) error { return err }

// collectStore reads reader (metrictest.Collect): the durations by count
// only.
func collectStore(t *testing.T, reader sdkmetric.Reader) map[string]float64 {
	return metrictest.Collect(t, reader, metrictest.NoSums)
}
