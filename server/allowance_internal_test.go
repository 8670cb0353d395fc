package server

import (
	"path/filepath"
	"testing"
	"time"

	"github.com/agentd/agentd/internal/store"
)

// allowanceStore is a SQLite store's budgets, and a spending over them
// whose clock is *now.
func allowanceStore(t *testing.T, now *time.Time) (store.Budgets, *spending) {
	t.Helper()
	st, err := store.OpenSQLite(filepath.Join(t.TempDir(), "agentd.db"), 0)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = st.Close() })
	sp := newSpendingOf(st.Budgets(), nil)
	sp.now = func() time.Time { return *now }
	return st.Budgets(), sp
}

func dayCharge(name string, max int64, now time.Time) store.Charge {
	day := now.UTC().Truncate(24 * time.Hour)
	return store.Charge{Tenant: "t", Budget: name, From: day, Bucket: day, MaxTokens: max}
}

func storeSpent(t *testing.T, st store.Budgets, c store.Charge, now time.Time) store.Spent {
	t.Helper()
	s, err := st.BudgetSpends(t.Context(), c.Tenant, c.Budget, c.From, c.Bucket, now, 0)
	if err != nil {
		t.Fatal(err)
	}
	if len(s) == 0 {
		return store.Spent{}
	}
	return s[0].Spent
}

// Two budgets renewed for one call at one instant keep a reservation
// each: their ids come from the replica's count, not from the clock.
func TestAllowanceIDsAreUnique(t *testing.T) {
	t.Parallel()
	now := time.Date(2026, 1, 1, 12, 0, 0, 0, time.UTC)
	st, sp := allowanceStore(t, &now)
	a, b := dayCharge("a", 1000, now), dayCharge("b", 1000, now)
	for _, c := range []store.Charge{a, b} {
		if _, _, _, err := sp.take(t.Context(), c, store.Spent{Tokens: 10}, "g:turn1"); err != nil {
			t.Fatal(err)
		}
	}
	for _, c := range []store.Charge{a, b} {
		if got := storeSpent(t, st, c, now); got.ReservedTokens != 100 {
			t.Errorf("budget %s: %+v reserved; want its allowance, 100", c.Budget, got)
		}
	}
}

// An allowance still in use when the replica stops is given back by its
// last call: what the call used is counted, nothing stays reserved.
func TestAllowanceBusyAtStop(t *testing.T) {
	t.Parallel()
	now := time.Date(2026, 1, 1, 12, 0, 0, 0, time.UTC)
	st, sp := allowanceStore(t, &now)
	c := dayCharge("a", 1000, now)
	tk, _, _, err := sp.take(t.Context(), c, store.Spent{Tokens: 10}, "g:turn1")
	if err != nil {
		t.Fatal(err)
	}
	if err := sp.giveBack(t.Context(), true); err != nil {
		t.Fatal(err)
	}
	settled, err := sp.release(t.Context(), tk, store.Spent{Tokens: 50})
	if err != nil || settled == nil {
		t.Fatalf("release: %v, %v; want the allowance given back", settled, err)
	}
	if got := storeSpent(t, st, c, now); got.Tokens != 50 || got.ReservedTokens != 0 {
		t.Errorf("the store has %+v; want 50 counted, nothing reserved", got)
	}
}

// An allowance in steady use is given back well before its reservation
// lapses: after 22 minutes of calls, the store has counted what they
// used, and another replica is granted only what is left.
func TestAllowanceRenewedBeforeItLapses(t *testing.T) {
	t.Parallel()
	now := time.Date(2026, 1, 1, 12, 0, 0, 0, time.UTC)
	st, sp := allowanceStore(t, &now)
	c := dayCharge("a", 100000, now)
	for range 22 * 60 * 2 {
		tk, _, _, err := sp.take(t.Context(), c, store.Spent{Tokens: 1}, "g:turn")
		if err != nil {
			t.Fatal(err)
		}
		if _, err := sp.release(t.Context(), tk, store.Spent{Tokens: 1}); err != nil {
			t.Fatal(err)
		}
		now = now.Add(time.Second / 2)
		if err := sp.giveBack(t.Context(), false); err != nil {
			t.Fatal(err)
		}
	}
	got := storeSpent(t, st, c, now)
	if got.Tokens < 2000 {
		t.Errorf("the store counted %+v after 2,640 calls of a token; want what the renewed allowances used", got)
	}
	other := []store.Charge{c}
	other[0].Tokens = 100000
	if _, err := st.Reserve(t.Context(), "other", other, now, now.Add(time.Minute)); err != nil {
		t.Fatal(err)
	}
	if left := 100000 - got.Tokens - got.ReservedTokens; other[0].Tokens > left {
		t.Errorf("another replica was granted %d; want at most what is left, %d", other[0].Tokens, left)
	}
}

// A budget held by allowances (reserved, not spent) is told from one
// that is spent.
func TestAllowanceHeldIsNotSpent(t *testing.T) {
	t.Parallel()
	now := time.Date(2026, 1, 1, 12, 0, 0, 0, time.UTC)
	_, sp := allowanceStore(t, &now)
	c := dayCharge("a", 10000, now)
	var refused *budgetRefusal
	for range 4 {
		_, _, r, err := sp.take(t.Context(), c, store.Spent{Tokens: 4196}, "g:turn")
		if err != nil {
			t.Fatal(err)
		}
		refused = r
	}
	if refused == nil || refused.spent.reaches(c) {
		t.Errorf("the fourth call: %+v; want it refused while the budget is held, not spent", refused)
	}
}
