package server

import (
	"os"
	"path/filepath"
	"strconv"
	"testing"
	"time"

	"github.com/agentd/agentd/internal/store"
	"github.com/agentd/agentd/internal/store/pgtest"
)

// BenchmarkBudgetCheck measures what holding a model call to its budgets
// costs the call: a tenant's day, which a replica's allowance holds for
// the whole run, and an API key's rolling day, each taken from (an
// estimate of 5,000 tokens) and released (4,000 used), on SQLite and,
// with AGENTD_TEST_POSTGRES_DSN, PostgreSQL. With a "large" key budget
// the calls never ask the store; with a "renewing" one, a hundred calls'
// worth, the key's allowance (a tenth of it) is given back and asked for
// again every ten calls or so: the store's Settle and Reserve amortized.
func BenchmarkBudgetCheck(b *testing.B) {
	drivers := []string{"sqlite"}
	if os.Getenv("AGENTD_TEST_POSTGRES_DSN") != "" {
		drivers = append(drivers, "postgres")
	}
	for _, driver := range drivers {
		for _, size := range []struct {
			name  string
			limit int64
		}{{"large", 1 << 50}, {"renewing", 100 * 5000}} {
			b.Run(driver+"/"+size.name, func(b *testing.B) {
				sp := newSpendingOf(benchBudgetStore(b, driver), nil)
				est, used := store.Spent{Tokens: 5000}, store.Spent{Tokens: 4000}
				now := time.Now()
				day := time.Date(now.Year(), now.Month(), now.Day(), 0, 0, 0, 0, time.UTC)
				hour := now.UTC().Truncate(time.Hour)
				i := 0
				for b.Loop() {
					subject := strconv.Itoa(i / 90) // a fresh key before the budget is spent
					i++
					for _, c := range []store.Charge{
						{Tenant: "t", Budget: "day", From: day, Bucket: day, MaxTokens: 1 << 50},
						{Tenant: "t", Budget: "key", Subject: subject, From: hour.Add(-23 * time.Hour), Bucket: hour, MaxTokens: size.limit},
					} {
						t, _, refused, err := sp.take(b.Context(), c, est, "bench")
						if err != nil || refused != nil {
							b.Fatalf("take: %v %v", refused, err)
						}
						if _, err := sp.release(b.Context(), t, used); err != nil {
							b.Fatal(err)
						}
					}
				}
			})
		}
	}
}

func benchBudgetStore(b *testing.B, driver string) store.Budgets {
	b.Helper()
	var st store.Store
	var err error
	if driver == "postgres" {
		st, err = store.OpenPostgres(b.Context(), pgtest.DSN(b), 0)
	} else {
		st, err = store.OpenSQLite(filepath.Join(b.TempDir(), "agentd.db"), 0)
	}
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { _ = st.Close() })
	return st.Budgets()
}
