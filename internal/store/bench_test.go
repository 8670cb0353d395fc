package store_test

import (
	"bytes"
	"context"
	"fmt"
	"math/rand/v2"
	"path/filepath"
	"runtime"
	"slices"
	"sync/atomic"
	"testing"
	"time"

	"github.com/agentd/agentd/internal/store"
	"github.com/agentd/agentd/internal/store/pgtest"
)

// benchStores are the stores the benchmarks run on, each opened on an
// empty database of the benchmark's own.
var benchStores = []struct {
	name string
	open func(b *testing.B) store.Store
}{
	{"sqlite", func(b *testing.B) store.Store {
		s, err := store.OpenSQLite(filepath.Join(b.TempDir(), "agentd.db"), 0)
		if err != nil {
			b.Fatal(err)
		}
		return s
	}},
	{"postgres", func(b *testing.B) store.Store {
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		s, err := store.OpenPostgres(ctx, pgtest.DSN(b), 0)
		if err != nil {
			b.Fatal(err)
		}
		return s
	}},
}

// The cost of durability at the store, on each store: a checkpoint at a
// turn boundary (an 8 KiB checkpoint and the turn's closing event), one
// event appended (a 256-byte text delta), and reading back 1,000 events
// (what an attach replays). The writes report their latency's p50 and
// p99, besides the mean (ns/op).
//
//	go test -run '^$' -bench Generations ./internal/store/
//	scripts/postgres.sh run go test -run '^$' -bench Generations ./internal/store/
func BenchmarkGenerations(b *testing.B) {
	checkpoint := bytes.Repeat([]byte("c"), 8<<10)
	delta := store.Event{Kind: "delta", Data: bytes.Repeat([]byte("d"), 256)}
	for _, st := range benchStores {
		// newGeneration opens the store and creates a running generation
		// in it, held until long after the benchmark.
		newGeneration := func(b *testing.B) store.Generations {
			s := st.open(b)
			b.Cleanup(func() { _ = s.Close() })
			g := s.Generations()
			now := time.Now()
			if _, err := g.Create(b.Context(), store.NewGeneration{
				Tenant: "acme", ID: "g", Owner: "r", Expires: now.Add(24 * time.Hour), Checkpoint: checkpoint, Now: now,
			}); err != nil {
				b.Fatal(err)
			}
			return g
		}
		b.Run(st.name+"/Checkpoint", func(b *testing.B) {
			g := newGeneration(b)
			ctx := b.Context()
			c := store.Checkpoint{State: store.Running, Data: checkpoint, Events: []store.Event{{Kind: "turn_done", Data: []byte("{}")}}}
			latencies(b, func() error {
				c.Now = time.Now()
				_, err := g.Checkpoint(ctx, "acme", "g", 1, c)
				return err
			})
		})
		// Eight generations checkpointing at once, as eight concurrent
		// tool loops do: what a write costs when writes queue (the
		// SQLite store commits those that wait together).
		b.Run(st.name+"/Checkpoint/8concurrent", func(b *testing.B) {
			g := newGeneration(b)
			ctx := b.Context()
			var next atomic.Int32
			b.SetParallelism(max(1, 8/runtime.GOMAXPROCS(0)))
			b.RunParallel(func(pb *testing.PB) {
				id := fmt.Sprint("g", next.Add(1))
				now := time.Now()
				if _, err := g.Create(ctx, store.NewGeneration{
					Tenant: "acme", ID: id, Owner: "r", Expires: now.Add(24 * time.Hour), Checkpoint: checkpoint, Now: now,
				}); err != nil {
					b.Error(err)
					return
				}
				c := store.Checkpoint{State: store.Running, Data: checkpoint, Events: []store.Event{{Kind: "turn_done", Data: []byte("{}")}}}
				for pb.Next() {
					c.Now = time.Now()
					if _, err := g.Checkpoint(ctx, "acme", id, 1, c); err != nil {
						b.Error(err)
						return
					}
				}
			})
		})
		// A whole generation's record as bench-e2e's workload writes it
		// (four model turns, three tool calls): created with its 1.1 KB
		// started event, a checkpoint before each tool call with the
		// turn's events, and the finish; 17 events in five writes, under
		// a fresh id each time, made as agentd makes them.
		b.Run(st.name+"/Generation", func(b *testing.B) {
			s := st.open(b)
			b.Cleanup(func() { _ = s.Close() })
			g := s.Generations()
			ctx := b.Context()
			ev := func(kind string, n int) store.Event {
				return store.Event{Kind: kind, Data: bytes.Repeat([]byte("e"), n)}
			}
			started := []store.Event{ev("started", 1124)}
			turn := []store.Event{ev("tool_call_finished", 62), ev("text_delta", 11), ev("usage", 14), ev("tool_call_started", 63)}
			last := []store.Event{ev("tool_call_finished", 62), ev("text_delta", 11), ev("usage", 14), ev("completed", 368)}
			cp := bytes.Repeat([]byte("c"), 600)
			// agentd's ids: the millisecond, then random digits.
			idOf := func() string { return fmt.Sprintf("gen_%012x%020x", time.Now().UnixMilli(), rand.Uint64()) }
			latencies(b, func() error {
				id := idOf()
				now := time.Now()
				if _, err := g.Create(ctx, store.NewGeneration{
					Tenant: "", ID: id, Owner: "r", Expires: now.Add(time.Minute), Checkpoint: cp, Events: started, Now: now,
				}); err != nil {
					return err
				}
				for i := range 3 {
					events := turn
					if i == 0 {
						events = turn[1:]
					}
					c := store.Checkpoint{State: store.Running, Data: cp, Events: events, Now: time.Now()}
					if _, err := g.Checkpoint(ctx, "", id, 1, c); err != nil {
						return err
					}
				}
				_, err := g.Finish(ctx, "", id, 1, store.Outcome{State: store.Completed, Result: cp[:200], Events: last, Now: time.Now()})
				return err
			})
		})
		b.Run(st.name+"/Append", func(b *testing.B) {
			g := newGeneration(b)
			ctx := b.Context()
			events := []store.Event{delta}
			latencies(b, func() error {
				_, err := g.Append(ctx, "acme", "g", 1, events)
				return err
			})
		})
		b.Run(st.name+"/Read1000", func(b *testing.B) {
			g := newGeneration(b)
			ctx := b.Context()
			if _, err := g.Append(ctx, "acme", "g", 1, slices.Repeat([]store.Event{delta}, 1000)); err != nil {
				b.Fatal(err)
			}
			latencies(b, func() error {
				events, err := g.Read(ctx, "acme", "g", 0, 1000)
				if err == nil && len(events) != 1000 {
					err = fmt.Errorf("read %d events; want 1000", len(events))
				}
				return err
			})
		})
	}
}

// latencies runs op b.N times and reports its p50 and p99 in
// microseconds.
func latencies(b *testing.B, op func() error) {
	b.Helper()
	var took []time.Duration
	for b.Loop() {
		start := time.Now()
		if err := op(); err != nil {
			b.Fatal(err)
		}
		took = append(took, time.Since(start))
	}
	slices.Sort(took)
	at := func(q float64) float64 {
		return float64(took[int(q*float64(len(took)-1))]) / float64(time.Microsecond)
	}
	b.ReportMetric(at(0.50), "p50-µs")
	b.ReportMetric(at(0.99), "p99-µs")
}

// Loading a thread at a generation's start, on each store: its 1,000
// items of 2 KiB each, read in one ThreadItems call (the store's part of
// the load; unsealing and decoding them are the caller's).
//
//	go test -run '^$' -bench ThreadItems ./internal/store/
//	scripts/postgres.sh run go test -run '^$' -bench ThreadItems ./internal/store/
func BenchmarkThreadItems(b *testing.B) {
	items := make([]store.ThreadItem, 1000)
	for i := range items {
		items[i] = store.ThreadItem{ID: fmt.Sprintf("itm_%032x", i), Data: bytes.Repeat([]byte{byte(i)}, 2<<10)}
	}
	for _, st := range benchStores {
		b.Run(st.name+"/Read1000", func(b *testing.B) {
			s := st.open(b)
			b.Cleanup(func() { _ = s.Close() })
			th := s.Threads()
			ctx := b.Context()
			if _, err := th.CreateThread(ctx, store.NewThread{Tenant: "acme", ID: "thr", Items: items, Now: time.Now()}); err != nil {
				b.Fatal(err)
			}
			latencies(b, func() error {
				got, err := th.ThreadItems(ctx, "acme", "thr", store.ItemRange{After: -1, Limit: 1000})
				if err == nil && len(got) != 1000 {
					err = fmt.Errorf("read %d items; want 1000", len(got))
				}
				return err
			})
		})
	}
}

// The first page (50, newest first) of a tenant's generations, of 10,000,
// unfiltered and narrowed by each of List's filters: a model, an end user
// and a thread that few generations have (the newest of them among the
// oldest generations), a provider that half have, and a day's range.
//
//	go test -run '^$' -bench ListGenerations ./internal/store/
//	scripts/postgres.sh run go test -run '^$' -bench ListGenerations ./internal/store/
func BenchmarkListGenerations(b *testing.B) {
	day := time.Date(2026, 12, 1, 0, 0, 0, 0, time.UTC)
	for _, st := range benchStores {
		b.Run(st.name, func(b *testing.B) {
			s := st.open(b)
			b.Cleanup(func() { _ = s.Close() })
			seedGenerations(b, s, day)
			for _, f := range []struct {
				name string
				o    store.ListOptions
			}{
				{"all", store.ListOptions{}},
				{"model", store.ListOptions{Model: "rare"}},
				{"end_user", store.ListOptions{EndUser: "rare"}},
				{"thread", store.ListOptions{Thread: "rare"}},
				{"provider", store.ListOptions{Provider: "p1"}},
				{"created", store.ListOptions{CreatedAfter: day.Add(-24 * time.Hour), CreatedBefore: day}},
			} {
				b.Run(f.name, func(b *testing.B) {
					for b.Loop() {
						if _, _, err := s.Generations().List(b.Context(), "acme", f.o); err != nil {
							b.Fatal(err)
						}
					}
				})
			}
		})
	}
}

// seedGenerations creates 10,000 generations of acme, a minute apart
// until day and on after it, and some of another tenant; the 100 oldest
// have the model, end user and thread "rare".
func seedGenerations(b *testing.B, s store.Store, day time.Time) {
	ctx := b.Context()
	if _, err := s.Threads().CreateThread(ctx, store.NewThread{Tenant: "acme", ID: "rare", Now: day}); err != nil {
		b.Fatal(err)
	}
	first := day.Add(-5000 * time.Minute)
	for i := range 10_000 {
		o := store.Origin{Provider: fmt.Sprint("p", i%2), Model: fmt.Sprint("m", i%8), EndUser: fmt.Sprint("u", i%50)}
		ng := store.NewGeneration{Tenant: "acme", ID: fmt.Sprintf("gen_%05d", i), Owner: "r", Expires: day, Now: first.Add(time.Duration(i) * time.Minute)}
		if i < 100 {
			o.Model, o.EndUser = "rare", "rare"
			ng.Thread = &store.ThreadStart{ID: "rare", Multitask: store.Enqueue}
		}
		ng.Origin = o
		if _, err := s.Generations().Create(ctx, ng); err != nil {
			b.Fatal(err)
		}
	}
}

// A model call's budget check, on each store: one Reserve and one Settle
// of two charges (a tenant's monthly budget and its API key's rolling
// day, 24 hourly buckets), against budgets with spending in every
// bucket. Each call reserves under an id of its own.
//
//	go test -run '^$' -bench BudgetReserveSettle -benchtime 2000x ./internal/store/
//	scripts/postgres.sh run go test -run '^$' -bench BudgetReserveSettle -benchtime 2000x ./internal/store/
func BenchmarkBudgetReserveSettle(b *testing.B) {
	for _, st := range benchStores {
		b.Run(st.name, func(b *testing.B) {
			s := st.open(b)
			b.Cleanup(func() { _ = s.Close() })
			bs := s.Budgets()
			ctx := b.Context()
			now := time.Now()
			hour := now.Truncate(time.Hour)
			month := time.Date(now.Year(), now.Month(), 1, 0, 0, 0, 0, time.UTC)
			charges := []store.Charge{
				{Tenant: "acme", Budget: "monthly", From: month, Bucket: month, MaxNanos: 1 << 62, Tokens: 1000, Nanos: 5_000_000},
				{Tenant: "acme", Budget: "key-daily", Subject: "key_1", From: hour.Add(-23 * time.Hour), Bucket: hour, MaxTokens: 1 << 62, Tokens: 1000},
			}
			for i := range 24 { // a day of spending in the rolling window
				c := charges[1]
				c.Bucket = hour.Add(-time.Duration(i) * time.Hour)
				if _, err := bs.Settle(ctx, "seed", []store.Charge{charges[0], c}, now); err != nil {
					b.Fatal(err)
				}
			}
			var n int
			latencies(b, func() error {
				n++
				id := fmt.Sprint("call_", n)
				now := time.Now()
				if r, err := bs.Reserve(ctx, id, charges, now, now.Add(time.Minute)); err != nil || r != nil {
					return fmt.Errorf("Reserve: %+v, %v", r, err)
				}
				_, err := bs.Settle(ctx, id, charges, now)
				return err
			})
		})
	}
}
