package storetest

import (
	"fmt"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"

	"github.com/agentd/agentd/internal/fault"
	"github.com/agentd/agentd/internal/store"
)

// The budgets' tests: the budgets set through the admin API, the
// spending of their subjects per bucket with the reservations of calls
// under way, and the hourly usage ledger, each a tenant's own.

// nilOrEmpty compares the stores' answers of nothing (nil, or empty).
var nilOrEmpty = cmpopts.EquateEmpty()

// hour is the start of the i-th hour after t0 (which starts one).
func hour(i int) time.Time { return t0.Add(time.Duration(i) * time.Hour) }

// charge is a charge of tokens against acme's budget of name and
// subject, in the bucket of hour i, its span from hour from.
func charge(name, subject string, from, i int, maxTokens, tokens int64) store.Charge {
	return store.Charge{Tenant: "acme", Budget: name, Subject: subject, From: hour(from), Bucket: hour(i), MaxTokens: maxTokens, Tokens: tokens}
}

// reserveOf reserves cs under id at now until a minute later, and returns
// the refusal, if any.
func reserveOf(t *testing.T, b store.Budgets, id string, now time.Time, cs ...store.Charge) *store.Refused {
	t.Helper()
	r, err := b.Reserve(t.Context(), id, cs, now, now.Add(time.Minute))
	if err != nil {
		t.Fatalf("Reserve(%s): %v", id, err)
	}
	return r
}

// settleOf settles cs under id at now, and returns the spending after it.
func settleOf(t *testing.T, b store.Budgets, id string, now time.Time, cs ...store.Charge) []store.Spent {
	t.Helper()
	s, err := b.Settle(t.Context(), id, cs, now)
	if err != nil {
		t.Fatalf("Settle(%s): %v", id, err)
	}
	return s
}

// wantRefused checks a Reserve's refusal: none when want is nil.
func wantRefused(t *testing.T, what string, got, want *store.Refused) {
	t.Helper()
	if diff := cmp.Diff(want, got, nilOrEmpty); diff != "" {
		t.Errorf("%s: refusal (-want +got):\n%s", what, diff)
	}
}

// testBudgetDefs (X-G1, X-I6): PutBudget creates and replaces a budget,
// kept as given; ListBudgets lists every tenant's, by tenant and name, on
// any replica; DeleteBudget says whether there was one, and takes its
// spending and reservations with it, not another budget's or tenant's.
func testBudgetDefs(t *testing.T, db DB) {
	s := open(t, db, 0)
	b := s.Budgets()
	ctx := t.Context()
	if got, err := b.ListBudgets(ctx); err != nil || len(got) != 0 {
		t.Fatalf("ListBudgets of none = %v, %v", got, err)
	}
	defs := []store.BudgetDef{
		{Tenant: "globex", Name: "daily", Spec: []byte("globex's"), UpdatedAt: at(time.Minute)},
		{Tenant: "acme", Name: "monthly", Spec: []byte{0, 1, 0xff}, UpdatedAt: at(2 * time.Minute)},
		{Tenant: "acme", Name: "daily", Spec: []byte("first"), UpdatedAt: at(3 * time.Minute)},
		{Tenant: "acme", Name: "daily", Spec: []byte("second"), UpdatedAt: at(4*time.Minute + 1500*time.Microsecond)},
	}
	for _, d := range defs {
		fatalIf(t, "PutBudget", b.PutBudget(ctx, d))
	}
	want := []store.BudgetDef{defs[3], defs[1], defs[0]}
	want[0].UpdatedAt = at(4*time.Minute + time.Millisecond) // kept to the millisecond
	for i, r := range []store.Budgets{b, open(t, db, 0).Budgets()} {
		got, err := r.ListBudgets(ctx)
		if diff := cmp.Diff(want, got, nilOrEmpty); err != nil || diff != "" {
			t.Errorf("X-G1 ListBudgets on replica %d: %v (-want +got):\n%s", i, err, diff)
		}
	}
	checkDeleteBudget(t, b)
}

// checkDeleteBudget: deleting acme's daily budget deletes it and its
// spending and reservations; globex's daily and acme's monthly keep
// theirs.
func checkDeleteBudget(t *testing.T, b store.Budgets) {
	ctx := t.Context()
	spend := func(tenant, name string) {
		c := charge(name, "k1", 0, 0, 0, 100)
		c.Tenant = tenant
		reserveOf(t, b, tenant+name+"-settled", t0, c)
		settleOf(t, b, tenant+name+"-settled", t0, c)
		reserveOf(t, b, tenant+name+"-under-way", t0, c)
	}
	spend("acme", "daily")
	spend("acme", "monthly")
	spend("globex", "daily")
	if found, err := b.DeleteBudget(ctx, "acme", "daily"); err != nil || !found {
		t.Errorf("DeleteBudget(acme, daily) = %v, %v; want true", found, err)
	}
	if found, err := b.DeleteBudget(ctx, "acme", "daily"); err != nil || found {
		t.Errorf("DeleteBudget(acme, daily) again = %v, %v; want false", found, err)
	}
	for _, tt := range []struct {
		tenant, name string
		want         []store.SubjectSpend
	}{
		{"acme", "daily", nil},
		{"acme", "monthly", []store.SubjectSpend{{Subject: "k1", Spent: store.Spent{Tokens: 100, ReservedTokens: 100}}}},
		{"globex", "daily", []store.SubjectSpend{{Subject: "k1", Spent: store.Spent{Tokens: 100, ReservedTokens: 100}}}},
	} {
		got, err := b.BudgetSpends(ctx, tt.tenant, tt.name, t0, t0, t0, 0)
		if diff := cmp.Diff(tt.want, got, nilOrEmpty); err != nil || diff != "" {
			t.Errorf("X-I6 after DeleteBudget(acme, daily): BudgetSpends(%s, %s): %v (-want +got):\n%s", tt.tenant, tt.name, err, diff)
		}
	}
	got, _ := b.ListBudgets(ctx)
	if len(got) != 2 || got[0].Name != "monthly" || got[1].Tenant != "globex" {
		t.Errorf("after DeleteBudget(acme, daily): ListBudgets = %+v", got)
	}
}

// testReserveAtLimit (X-G1): a Reserve is refused once its subject's
// spending and live reservations have reached a limit, of tokens or of
// money, saying which charge and what the subject had spent, and then
// reserves nothing, not even the charges that passed; below the limit it
// reserves, no more than what is left; another subject, budget or tenant
// is not counted; a Reserve made again under its id replaces the first.
func testReserveAtLimit(t *testing.T, db DB) {
	b := open(t, db, 0).Budgets()
	for i := range 3 {
		wantRefused(t, fmt.Sprintf("call %d under the limit", i), reserveOf(t, b, fmt.Sprint("r", i), t0, charge("daily", "k1", 0, 0, 300, 100)), nil)
	}
	wantRefused(t, "call again under its id", reserveOf(t, b, "r2", t0, charge("daily", "k1", 0, 0, 300, 100)), nil)
	wantRefused(t, "call at the limit of its reservations", reserveOf(t, b, "r3", t0, charge("daily", "k1", 0, 0, 300, 100)),
		&store.Refused{Spent: store.Spent{ReservedTokens: 300}})
	// Another subject, budget or tenant reserves; the second charge of
	// a reservation is refused, and its first is not reserved either.
	other := charge("daily", "k1", 0, 0, 300, 100)
	other.Tenant = "globex"
	wantRefused(t, "another tenant", reserveOf(t, b, "g1", t0, other), nil)
	wantRefused(t, "the second charge at its limit",
		reserveOf(t, b, "r4", t0, charge("daily", "k2", 0, 0, 300, 100), charge("monthly", "", 0, 0, 300, 100), charge("daily", "k1", 0, 0, 300, 100)),
		&store.Refused{Charge: 2, Spent: store.Spent{ReservedTokens: 300}})
	wantRefused(t, "the first charge, not reserved by the refused reservation", reserveOf(t, b, "r5", t0, charge("daily", "k2", 0, 0, 100, 100)), nil)

	// A call that settles for less than it reserved frees the rest.
	got := settleOf(t, b, "r0", t0, charge("daily", "k1", 0, 0, 300, 40))
	if diff := cmp.Diff([]store.Spent{{Tokens: 40, ReservedTokens: 200}}, got, nilOrEmpty); diff != "" {
		t.Errorf("Settle: spending after it (-want +got):\n%s", diff)
	}
	wantRefused(t, "a call below the limit once one settled for less", reserveOf(t, b, "r6", t0, charge("daily", "k1", 0, 0, 300, 100)), nil)
	wantRefused(t, "a call at the limit again", reserveOf(t, b, "r7", t0, charge("daily", "k1", 0, 0, 300, 100)),
		&store.Refused{Spent: store.Spent{Tokens: 40, ReservedTokens: 260}}) // r6 was granted what was left, 60
	checkMoneyLimit(t, b)
}

// checkMoneyLimit: a budget of money refuses a call once its nanos have
// reached the limit, whatever its tokens.
func checkMoneyLimit(t *testing.T, b store.Budgets) {
	money := store.Charge{Tenant: "acme", Budget: "dollars", From: t0, Bucket: t0, MaxNanos: 1_000_000, Tokens: 10, Nanos: 600_000}
	wantRefused(t, "money: the first call", reserveOf(t, b, "m1", t0, money), nil)
	settleOf(t, b, "m1", t0, money)
	wantRefused(t, "money: the second call, under the limit", reserveOf(t, b, "m2", t0, money), nil)
	wantRefused(t, "money: the third call, at the limit", reserveOf(t, b, "m3", t0, money),
		&store.Refused{Spent: store.Spent{Tokens: 10, Nanos: 600_000, ReservedTokens: 10, ReservedNanos: 400_000}})
}

// testReserveGrants (X-G1): a Reserve grants each charge at most its
// amount, no more than what is left of each of its limits, reserves
// that and writes it back into the charge; a dimension without a limit
// is granted whole; once a grant has taken what was left of a limit, the
// next Reserve is refused.
func testReserveGrants(t *testing.T, db DB) {
	b := open(t, db, 0).Budgets()
	for _, tt := range []struct {
		name                    string
		maxTokens, maxNanos     int64
		spentTokens, spentNanos int64
		askTokens, askNanos     int64
		wantTokens, wantNanos   int64
		full                    bool // the grant took what was left of a limit
	}{
		{"tokens", 300, 0, 250, 0, 100, 7, 50, 7, true},
		{"nanos", 0, 1000, 5, 600, 10, 600, 10, 400, true},
		{"both", 1000, 1000, 900, 700, 500, 500, 100, 300, true},
		{"tokens of both", 1000, 1000, 900, 0, 500, 500, 100, 500, true},
		{"nanos of both", 1000, 1000, 0, 900, 500, 500, 500, 100, true},
		{"tokens, nanos unlimited", 100, 0, 80, 5, 50, 1e12, 20, 1e12, true},
		{"unlimited", 0, 0, 1e6, 1e6, 1e9, 1e9, 1e9, 1e9, false},
		{"less than is left", 1000, 0, 100, 0, 300, 0, 300, 0, false},
		{"exactly what is left", 1000, 0, 700, 0, 300, 0, 300, 0, true},
	} {
		spent := store.Charge{Tenant: "acme", Budget: tt.name, From: t0, Bucket: t0, Tokens: tt.spentTokens, Nanos: tt.spentNanos}
		settleOf(t, b, "spent", t0, spent)
		ask := spent
		ask.MaxTokens, ask.MaxNanos, ask.Tokens, ask.Nanos = tt.maxTokens, tt.maxNanos, tt.askTokens, tt.askNanos
		cs := []store.Charge{ask}
		r, err := b.Reserve(t.Context(), tt.name, cs, t0, t0.Add(time.Minute))
		want := ask
		want.Tokens, want.Nanos = tt.wantTokens, tt.wantNanos
		if diff := cmp.Diff([]store.Charge{want}, cs); err != nil || r != nil || diff != "" {
			t.Errorf("%s: Reserve = %+v, %v; the charge written back (-want +got):\n%s", tt.name, r, err, diff)
		}
		spending := store.Spent{Tokens: tt.spentTokens, Nanos: tt.spentNanos, ReservedTokens: tt.wantTokens, ReservedNanos: tt.wantNanos}
		got, err := b.BudgetSpends(t.Context(), "acme", tt.name, t0, t0, t0, 0)
		if diff := cmp.Diff([]store.SubjectSpend{{Spent: spending}}, got, nilOrEmpty); err != nil || diff != "" {
			t.Errorf("%s: BudgetSpends after the grant: %v (-want +got):\n%s", tt.name, err, diff)
		}
		var wantNext *store.Refused
		if tt.full {
			wantNext = &store.Refused{Spent: spending}
		}
		wantRefused(t, tt.name+": the next Reserve", reserveOf(t, b, tt.name+" next", t0, ask), wantNext)
	}
	checkGrantKept(t, b)
}

// checkGrantKept: a Reserve made again under its id is granted again
// what its first was (its own reservation left out), and a refused
// Reserve leaves its charges as asked, those that passed too.
func checkGrantKept(t *testing.T, b store.Budgets) {
	settleOf(t, b, "spent", t0, charge("kept", "k1", 0, 0, 0, 250))
	cs := []store.Charge{charge("kept", "k1", 0, 0, 300, 100)}
	for _, what := range []string{"the first", "again under its id"} {
		wantRefused(t, what, reserveOf(t, b, "r1", t0, cs...), nil)
		if cs[0].Tokens != 50 {
			t.Errorf("%s: granted %d tokens; want 50", what, cs[0].Tokens)
		}
		cs[0].Tokens = 100
	}
	cs = []store.Charge{charge("kept", "k2", 0, 0, 300, 100), charge("kept", "k1", 0, 0, 300, 100)}
	want := slices.Clone(cs)
	wantRefused(t, "the second charge at its limit", reserveOf(t, b, "r2", t0, cs...), &store.Refused{Charge: 1, Spent: store.Spent{Tokens: 250, ReservedTokens: 50}})
	if diff := cmp.Diff(want, cs); diff != "" {
		t.Errorf("a refused Reserve changed its charges (-want +got):\n%s", diff)
	}
}

// testReservationExpiry (X-G1): a reservation counts until it expires
// (a call that died holds its budget no longer); settling it afterwards
// is no error and counts what the call used.
func testReservationExpiry(t *testing.T, db DB) {
	b := open(t, db, 0).Budgets()
	c := charge("daily", "k1", 0, 0, 100, 100)
	wantRefused(t, "the first call", reserveOf(t, b, "died", t0, c), nil) // expires at t0+1m
	wantRefused(t, "a call while the first is under way", reserveOf(t, b, "r1", t0.Add(59*time.Second), c),
		&store.Refused{Spent: store.Spent{ReservedTokens: 100}})
	wantRefused(t, "a call once its reservation expired", reserveOf(t, b, "r2", t0.Add(time.Minute), c), nil)
	spent := settleOf(t, b, "died", t0.Add(time.Minute), c)
	if diff := cmp.Diff([]store.Spent{{Tokens: 100, ReservedTokens: 100}}, spent, nilOrEmpty); diff != "" {
		t.Errorf("Settle of an expired reservation (-want +got):\n%s", diff)
	}
	spent = settleOf(t, b, "never-reserved", t0.Add(time.Minute))
	if len(spent) != 0 {
		t.Errorf("Settle of an unknown reservation without charges = %v", spent)
	}
}

// testRollingSpans (X-G1): a rolling window's spending sums its
// subject's buckets in its span, and the reservations made in it; a
// bucket before the span, or another subject's, is not counted.
func testRollingSpans(t *testing.T, db DB) {
	b := open(t, db, 0).Budgets()
	for i, tokens := range []int64{100, 200, 300} {
		c := charge("rolling", "k1", i, i, 0, tokens)
		id := fmt.Sprint("h", i)
		reserveOf(t, b, id, hour(i), c)
		settleOf(t, b, id, hour(i), c)
	}
	reserveOf(t, b, "other", hour(2), charge("rolling", "k2", 2, 2, 0, 1000))
	now := hour(2).Add(30 * time.Second)
	reserveOf(t, b, "under-way", now, charge("rolling", "k1", 1, 1, 0, 50)) // reserved in hour 1's bucket
	for _, tt := range []struct {
		from  int
		limit int64
		want  *store.Refused
	}{
		{0, 650, &store.Refused{Spent: store.Spent{Tokens: 600, ReservedTokens: 50}}},
		{0, 651, nil},
		{1, 550, &store.Refused{Spent: store.Spent{Tokens: 500, ReservedTokens: 50}}},
		{2, 301, nil},
		{2, 300, &store.Refused{Spent: store.Spent{Tokens: 300}}},
	} {
		got := reserveOf(t, b, "probe", now, charge("rolling", "k1", tt.from, 2, tt.limit, 0))
		wantRefused(t, fmt.Sprintf("hours %d to 2, limit %d", tt.from, tt.limit), got, tt.want)
		settleOf(t, b, "probe", now)
	}
}

// testSettleSpends (X-G1): Settle ends its reservation, adds each
// charge to its bucket and returns each charge's spending after it, in
// the charges' order: counted, with the reservations still live; the
// spending of one subject in two buckets of one span, or of the same
// counter twice, counts both.
func testSettleSpends(t *testing.T, db DB) {
	b := open(t, db, 0).Budgets()
	reserveOf(t, b, "a", t0, charge("daily", "", 0, 0, 0, 500), charge("daily", "k1", 0, 0, 0, 500))
	reserveOf(t, b, "b", t0, charge("daily", "", 0, 0, 0, 70), charge("daily", "k2", 0, 0, 0, 70))
	nanos := charge("dollars", "", 0, 1, 0, 5)
	nanos.Nanos = 1_500
	got := settleOf(t, b, "a", t0,
		charge("daily", "", 0, 0, 0, 400), charge("daily", "k1", 0, 0, 0, 400), nanos,
		charge("hourly", "", 0, 0, 0, 1), charge("hourly", "", 0, 1, 0, 2), charge("hourly", "", 0, 1, 0, 3))
	want := []store.Spent{
		{Tokens: 400, ReservedTokens: 70}, {Tokens: 400}, {Tokens: 5, Nanos: 1_500},
		{Tokens: 1}, {Tokens: 6}, {Tokens: 6},
	}
	if diff := cmp.Diff(want, got, nilOrEmpty); diff != "" {
		t.Errorf("Settle: spending after it (-want +got):\n%s", diff)
	}
	got = settleOf(t, b, "b", t0, charge("daily", "", 0, 0, 0, 70), charge("daily", "k2", 0, 0, 0, 0))
	if diff := cmp.Diff([]store.Spent{{Tokens: 470}, {}}, got, nilOrEmpty); diff != "" {
		t.Errorf("Settle of the second (-want +got):\n%s", diff)
	}
	got = settleOf(t, b, "b", t0, charge("daily", "", 0, 0, 0, 30))
	if diff := cmp.Diff([]store.Spent{{Tokens: 500}}, got, nilOrEmpty); diff != "" {
		t.Errorf("Settle again under an id settled (-want +got):\n%s", diff)
	}
}

// testManyCharges (X-G1): a reservation of more charges than a
// statement takes is checked, reserved and settled whole: refused at its
// last charge, it reserves none of the others.
func testManyCharges(t *testing.T, db DB) {
	b := open(t, db, 0).Budgets()
	subjects := func(prefix string) []store.Charge {
		var cs []store.Charge
		for i := range 10 {
			cs = append(cs, charge("daily", fmt.Sprint(prefix, i), 0, 0, 100, 100))
		}
		return cs
	}
	spent := subjects("s")
	wantRefused(t, "ten charges", reserveOf(t, b, "r1", t0, spent...), nil)
	got := settleOf(t, b, "r1", t0, spent...)
	if diff := cmp.Diff(slices.Repeat([]store.Spent{{Tokens: 100}}, 10), got, nilOrEmpty); diff != "" {
		t.Errorf("Settle of ten charges (-want +got):\n%s", diff)
	}
	last := append(subjects("t")[:9], spent[9])
	wantRefused(t, "ten charges, the last at its limit", reserveOf(t, b, "r2", t0, last...), &store.Refused{Charge: 9, Spent: store.Spent{Tokens: 100}})
	if got, err := b.BudgetSpends(t.Context(), "acme", "daily", t0, t0, t0, 0); err != nil || len(got) != 10 {
		t.Errorf("after the refused reservation: %v, %v; want the ten subjects settled alone", got, err)
	}
}

// testBudgetSpends (X-G1, X-I6): BudgetSpends returns a budget's
// subjects' spending in a span, counted and reserved, the most tokens
// first (then by subject), at most limit of them (0: all); another
// budget's, tenant's, or bucket's are not counted.
func testBudgetSpends(t *testing.T, db DB) {
	b := open(t, db, 0).Budgets()
	ctx := t.Context()
	for _, c := range []store.Charge{
		charge("daily", "ann", 0, 0, 0, 300), charge("daily", "bob", 0, 1, 0, 100), charge("daily", "bob", 0, 0, 0, 150),
		charge("daily", "cid", 0, 1, 0, 200), charge("daily", "dan", 0, 2, 0, 900), charge("weekly", "eve", 0, 0, 0, 900),
		{Tenant: "globex", Budget: "daily", Subject: "fay", From: hour(0), Bucket: hour(0), Tokens: 900, Nanos: 9},
	} {
		reserveOf(t, b, "s", t0, c)
		settleOf(t, b, "s", t0, c)
	}
	reserveOf(t, b, "live", t0, charge("daily", "bob", 0, 1, 0, 100), charge("daily", "gus", 0, 0, 0, 50))
	ann := store.SubjectSpend{Subject: "ann", Spent: store.Spent{Tokens: 300}}
	bob := store.SubjectSpend{Subject: "bob", Spent: store.Spent{Tokens: 250, ReservedTokens: 100}}
	cid := store.SubjectSpend{Subject: "cid", Spent: store.Spent{Tokens: 200}}
	gus := store.SubjectSpend{Subject: "gus", Spent: store.Spent{ReservedTokens: 50}}
	for _, tt := range []struct {
		limit int
		want  []store.SubjectSpend
	}{
		{0, []store.SubjectSpend{bob, ann, cid, gus}},
		{2, []store.SubjectSpend{bob, ann}},
	} {
		got, err := b.BudgetSpends(ctx, "acme", "daily", hour(0), hour(1), t0, tt.limit)
		if diff := cmp.Diff(tt.want, got, nilOrEmpty); err != nil || diff != "" {
			t.Errorf("BudgetSpends(limit %d): %v (-want +got):\n%s", tt.limit, err, diff)
		}
	}
	got, err := b.BudgetSpends(ctx, "acme", "daily", hour(1), hour(1), t0.Add(time.Minute), 0) // the reservations expired
	if diff := cmp.Diff([]store.SubjectSpend{cid, {Subject: "bob", Spent: store.Spent{Tokens: 100}}}, got, nilOrEmpty); err != nil || diff != "" {
		t.Errorf("BudgetSpends of hour 1 once the reservations expired: %v (-want +got):\n%s", err, diff)
	}
}

// usageEntry is an entry of acme's ledger in hour i of key and user,
// priced in currency: one call of 10 input and 5 output tokens, 1 and 2
// tokens read and written from the cache, costing nanos.
func usageEntry(key, user, currency string, i int, nanos int64) store.UsageEntry {
	return store.UsageEntry{Tenant: "acme", APIKey: key, EndUser: user, Currency: currency, Hour: hour(i),
		Calls: 1, Input: 10, Output: 5, CacheRead: 1, CacheWrite: 2, Nanos: nanos}
}

// total is the sum of n entries of usageEntry's, costing nanos, with
// unpriced of them unpriced.
func total(subject, currency string, n, nanos, unpriced int64) store.UsageTotal {
	return store.UsageTotal{Subject: subject, Currency: currency, Calls: n, Input: 10 * n, Output: 5 * n, CacheRead: n, CacheWrite: 2 * n,
		Nanos: nanos, Unpriced: unpriced}
}

// testUsageLedger (X-G1, X-I6): AddUsage adds entries to their hour's
// row (an entry's time within the hour is its hour), SumUsage sums a
// tenant's rows in a span of hours, whole, by API key or by end user, one
// row per subject and currency, the most spent first, narrowed to a
// subject when asked; another tenant's and hours outside the span are
// not counted; a grouping of no column is Invalid.
func testUsageLedger(t *testing.T, db DB) {
	b := open(t, db, 0).Budgets()
	ctx := t.Context()
	unpriced := usageEntry("k2", "ann", "", 1, 0)
	unpriced.Unpriced = 1
	globex := usageEntry("k1", "ann", "USD", 0, 1000)
	globex.Tenant = "globex"
	late := usageEntry("k1", "bob", "USD", 0, 7)
	late.Hour = hour(0).Add(59 * time.Minute)
	fatalIf(t, "AddUsage", b.AddUsage(ctx, []store.UsageEntry{
		usageEntry("k1", "ann", "USD", 0, 100), usageEntry("k1", "ann", "USD", 0, 100), late,
		usageEntry("k2", "bob", "USD", 1, 50), usageEntry("k2", "bob", "EUR", 1, 300), unpriced, globex,
		usageEntry("k1", "ann", "USD", 2, 10_000), usageEntry("k2", "ann", "USD", 3, 1), // after the span
	}))
	fatalIf(t, "AddUsage again", b.AddUsage(ctx, []store.UsageEntry{usageEntry("k1", "bob", "USD", 1, 3)}))
	for _, tt := range []struct {
		groupBy, subject string
		want             []store.UsageTotal
	}{
		{"", "", []store.UsageTotal{total("", "EUR", 1, 300, 0), total("", "USD", 5, 260, 0), total("", "", 1, 0, 1)}},
		{"api_key", "", []store.UsageTotal{total("k2", "EUR", 1, 300, 0), total("k1", "USD", 4, 210, 0), total("k2", "USD", 1, 50, 0), total("k2", "", 1, 0, 1)}},
		{"end_user", "", []store.UsageTotal{total("bob", "EUR", 1, 300, 0), total("ann", "USD", 2, 200, 0), total("bob", "USD", 3, 60, 0), total("ann", "", 1, 0, 1)}},
		{"api_key", "k1", []store.UsageTotal{total("k1", "USD", 4, 210, 0)}},
		{"end_user", "ann", []store.UsageTotal{total("ann", "USD", 2, 200, 0), total("ann", "", 1, 0, 1)}},
		{"end_user", "zed", nil},
	} {
		got, err := b.SumUsage(ctx, store.UsageQuery{Tenant: "acme", From: hour(0), To: hour(2), GroupBy: tt.groupBy, Subject: tt.subject})
		if diff := cmp.Diff(tt.want, got, nilOrEmpty); err != nil || diff != "" {
			t.Errorf("SumUsage(by %q, %q): %v (-want +got):\n%s", tt.groupBy, tt.subject, err, diff)
		}
	}
	for _, q := range []store.UsageQuery{{Tenant: "acme", GroupBy: "model"}, {Tenant: "acme", Subject: "k1"}} {
		wantKind(t, fmt.Sprintf("SumUsage(by %q, %q)", q.GroupBy, q.Subject), errOf(b.SumUsage(ctx, q)), fault.Invalid)
	}
}

// testSweepSpending (X-G1): SweepSpending deletes the counters of
// buckets and the ledger's rows of hours before its time, and the
// reservations expired at it, and says how many; the rest stay.
func testSweepSpending(t *testing.T, db DB) {
	b := open(t, db, 0).Budgets()
	ctx := t.Context()
	for i := range 3 {
		c := charge("hourly", "k1", i, i, 0, 1)
		reserveOf(t, b, "s", t0, c)
		settleOf(t, b, "s", t0, c)
		check(t, b.AddUsage(ctx, []store.UsageEntry{usageEntry("k1", "ann", "USD", i, 1)}))
	}
	reserveOf(t, b, "expired", t0, charge("hourly", "k2", 2, 2, 0, 1)) // until t0+1m
	reserveOf(t, b, "live", hour(2), charge("hourly", "k1", 2, 2, 0, 1))
	n, err := b.SweepSpending(ctx, hour(2))
	if err != nil || n != 5 {
		t.Errorf("SweepSpending = %d, %v; want 5 (2 counters, 2 hours of the ledger, 1 reservation)", n, err)
	}
	got, err := b.BudgetSpends(ctx, "acme", "hourly", hour(0), hour(2), t0, 0)
	if diff := cmp.Diff([]store.SubjectSpend{{Subject: "k1", Spent: store.Spent{Tokens: 1, ReservedTokens: 1}}}, got, nilOrEmpty); err != nil || diff != "" {
		t.Errorf("after SweepSpending: %v (-want +got):\n%s", err, diff)
	}
	usage, err := b.SumUsage(ctx, store.UsageQuery{Tenant: "acme", From: hour(0), To: hour(3)})
	if err != nil || len(usage) != 1 || usage[0].Calls != 1 {
		t.Errorf("the ledger after SweepSpending: %+v, %v; want hour 2's call", usage, err)
	}
	if n, err := b.SweepSpending(ctx, hour(2)); err != nil || n != 0 {
		t.Errorf("SweepSpending again = %d, %v; want 0", n, err)
	}
}

// testConcurrentReserves (X-G1): replicas' calls that reserve against
// one budget at once are serialized: of many calls that each reserve
// 100 tokens against a limit of 1,000 and settle what they reserved, on
// two replicas, exactly ten pass, whatever their interleaving (a call
// passes only while the spending and reservations it sees stay below the
// limit, and each sees every one before it), and the others are refused.
func testConcurrentReserves(t *testing.T, db DB) {
	replicas := []store.Budgets{open(t, db, 0).Budgets(), open(t, db, 0).Budgets()}
	const callers, calls = 8, 6
	var passed, refused atomic.Int64
	var wg sync.WaitGroup
	for i := range callers {
		b := replicas[i%len(replicas)]
		wg.Go(func() {
			for j := range calls {
				if !reserveAndSettle(t, b, fmt.Sprintf("c%d-%d", i, j)) {
					refused.Add(1)
					continue
				}
				passed.Add(1)
			}
		})
	}
	wg.Wait()
	got, err := replicas[0].BudgetSpends(t.Context(), "acme", "tight", t0, t0, time.Now(), 0)
	want := []store.SubjectSpend{{Subject: "k", Spent: store.Spent{Tokens: 1000}}}
	if diff := cmp.Diff(want, got, nilOrEmpty); err != nil || diff != "" {
		t.Errorf("spending after the calls: %v (-want +got):\n%s", err, diff)
	}
	if passed.Load() != 10 || refused.Load() != callers*calls-10 {
		t.Errorf("%d calls passed and %d were refused; want 10 and %d", passed.Load(), refused.Load(), callers*calls-10)
	}
}

// reserveAndSettle is a call of testConcurrentReserves: false when it is
// refused.
func reserveAndSettle(t *testing.T, b store.Budgets, id string) bool {
	ctx := t.Context()
	c := store.Charge{Tenant: "acme", Budget: "tight", Subject: "k", From: t0, Bucket: t0, MaxTokens: 1000, Tokens: 100}
	now := time.Now()
	r, err := b.Reserve(ctx, id, []store.Charge{c}, now, now.Add(time.Hour))
	if err != nil {
		t.Errorf("Reserve(%s): %v", id, err)
		return false
	}
	if r != nil {
		return false
	}
	if _, err := b.Settle(ctx, id, []store.Charge{c}, now); err != nil {
		t.Errorf("Settle(%s): %v", id, err)
	}
	return true
}

// testConcurrentGrants (X-G1): replicas' callers that each take a chunk
// of 300 tokens of a budget of 1,000 at once, spend 100 of it and settle
// that, on two replicas, are never granted more than is left: the
// budget's spending and reservations never pass its limit, whatever
// their interleaving, and its spending ends at the limit, not past it.
func testConcurrentGrants(t *testing.T, db DB) {
	replicas := []store.Budgets{open(t, db, 0).Budgets(), open(t, db, 0).Budgets()}
	const callers, limit = 8, 1000
	var wg sync.WaitGroup
	for i := range callers {
		b := replicas[i%len(replicas)]
		wg.Go(func() {
			for j := 0; ; j++ {
				if !takeChunk(t, b, fmt.Sprintf("c%d-%d", i, j), limit) {
					return
				}
			}
		})
	}
	wg.Wait()
	got, err := replicas[0].BudgetSpends(t.Context(), "acme", "chunks", t0, t0, time.Now(), 0)
	want := []store.SubjectSpend{{Subject: "k", Spent: store.Spent{Tokens: limit}}}
	if diff := cmp.Diff(want, got, nilOrEmpty); err != nil || diff != "" {
		t.Errorf("spending after the calls: %v (-want +got):\n%s", err, diff)
	}
}

// takeChunk is a call of testConcurrentGrants: it takes a chunk, checks
// that the budget's spending and reservations have not passed limit,
// and settles the 100 tokens it spent of the chunk; false once the
// budget is spent (refused with nothing else reserved), or on an error.
func takeChunk(t *testing.T, b store.Budgets, id string, limit int64) bool {
	ctx := t.Context()
	c := []store.Charge{{Tenant: "acme", Budget: "chunks", Subject: "k", From: t0, Bucket: t0, MaxTokens: limit, Tokens: 300}}
	now := time.Now()
	r, err := b.Reserve(ctx, id, c, now, now.Add(time.Hour))
	if err != nil {
		t.Errorf("Reserve(%s): %v", id, err)
		return false
	}
	if r != nil {
		return r.Spent.Tokens < limit // others' chunks, which they will settle
	}
	if c[0].Tokens <= 0 || c[0].Tokens > 300 {
		t.Errorf("Reserve(%s) granted %d tokens; want 1 to 300", id, c[0].Tokens)
	}
	spends, err := b.BudgetSpends(ctx, "acme", "chunks", t0, t0, now, 0)
	if err != nil || len(spends) != 1 || spends[0].Tokens+spends[0].ReservedTokens > limit {
		t.Errorf("after Reserve(%s): BudgetSpends = %+v, %v; want the spending and reservations within %d", id, spends, err, limit)
	}
	c[0].Tokens = min(100, c[0].Tokens)
	if _, err := b.Settle(ctx, id, c, now); err != nil {
		t.Errorf("Settle(%s): %v", id, err)
		return false
	}
	return true
}
