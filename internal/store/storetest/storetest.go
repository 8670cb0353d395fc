// Package storetest is the conformance suite of store.Store: one set of tests
// that every implementation runs (SQLite and PostgreSQL, from internal/store's
// tests), so that what agentd relies on holds whichever store it runs on. For
// paused generations (Checkpoints): tenant scoping, versions, fenced claims of
// which exactly one wins, expiry, durability, schema migrations that several
// replicas may start at once. For durable generations (Generations): the
// record and its lease, writes fenced by the lease's epoch, exactly one winner
// among concurrent acquisitions and adoptions, List's pages, the retention
// sweep, the end of pauses that expired; and their event logs: dense sequence
// numbers under concurrent appenders, reads in order, atomic batches; and
// their pending requests and decisions: replaced under the lease, listed
// newest first in pages, each request decided once, whoever decides first. For
// OAuth tokens (Tokens): one per tenant, end user and server, replaced by a
// put, deleted by tenant and narrowed by end user and server. For threads
// (Threads): their records, metadata filters and pages, items in either
// direction, forks, removal with their generations (in batches, when
// swept), an expiry that waits for the thread to be free, tenancy and
// limits;
// the starts on a thread, of which exactly one holds it and the others
// queue in order, and the items its holder's Finish appends exactly once
// as the next one is promoted (or, when its pause runs out, the input it
// keeps). For replicas'
// liveness (Generations.Attend): the generations of a replica that attended
// and was SIGKILLed are adopted before their leases lapse, and those of one
// alive, stopped (SIGSTOP), attending again under the same id, or that never
// attended, are not; these tests run replicas as processes of their own,
// the test binary started again (Main).
package storetest

import (
	"fmt"
	"os"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/agentd/agentd/internal/fault"
	"github.com/agentd/agentd/internal/store"
)

// DB is one empty database, for one test.
type DB struct {
	// Open opens a store on the database, as a replica does (migrating
	// it, if it has not been), sweeping expired records every sweepEvery
	// (0: never). Each call is another replica's handle on the same
	// database. It may be called from several goroutines at once, and
	// inside a synctest bubble (the suite closes what it opens there).
	Open func(sweepEvery time.Duration) (store.Store, error)
	// Stored reports whether the database holds tenant's record id,
	// expired or not: what the sweeper has left.
	Stored func(tenant, id string) (bool, error)
	// AttendElsewhere starts a replica that attends as owner on the
	// database, in a process of its own: the test binary started again
	// with ReplicaEnv, whose TestMain calls Main. It returns once the
	// replica attends; the liveness tests signal it (SIGKILL, SIGSTOP,
	// SIGCONT), and it is killed when t ends.
	AttendElsewhere func(t *testing.T, owner string) *os.Process
}

// Run runs the suite. newDB makes an empty database for one test, removed
// when that test ends. The tests run in parallel.
func Run(t *testing.T, newDB func(t *testing.T) DB) {
	tests := []struct {
		name string
		test func(t *testing.T, db DB)
	}{
		{"SaveGetClaimDelete", testSaveGetClaimDelete},
		{"TenantsIsolated", testTenantsIsolated},
		{"FencedWrites", testFencedWrites},
		{"ConcurrentClaims", testConcurrentClaims},
		{"ExpiryAndDurability", testExpiryAndDurability},
		{"Count", testCount},
		{"ConcurrentOpens", testConcurrentOpens},
		{"PingAndClose", testPingAndClose},
		{"GenerationLifecycle", testGenerationLifecycle},
		{"GenerationTenants", testGenerationTenants},
		{"GenerationFencing", testGenerationFencing},
		{"ConcurrentAcquire", testConcurrentAcquire},
		{"ConcurrentAdopt", testConcurrentAdopt},
		{"EventLog", testEventLog},
		{"Items", testItems},
		{"Skip", testSkip},
		{"ConcurrentAppends", testConcurrentAppends},
		{"WithdrawnTurn", testWithdrawnTurn},
		{"CheckpointWithLaterEvents", testCheckpointWithLaterEvents},
		{"StateAlone", testStateAlone},
		{"ListPages", testListPages},
		{"ListFilters", testListFilters},
		{"Cancel", testCancel},
		{"Sweep", testSweep},
		{"ExpirePaused", testExpirePaused},
		{"ConcurrentExpirePaused", testConcurrentExpirePaused},
		{"DeadOwner", testDeadOwner},
		{"SameIDAgain", testSameIDAgain},
		{"Attendance", testAttendance},
		{"PendingRequests", testPendingRequests},
		{"Decide", testDecide},
		{"ConcurrentDecide", testConcurrentDecide},
		{"Tokens", testTokens},
		{"DeleteTokens", testDeleteTokens},
		{"ThreadLifecycle", testThreadLifecycle},
		{"ExpiredWhileHeld", testExpiredWhileHeld},
		{"ThreadList", testThreadList},
		{"ThreadItems", testThreadItems},
		{"ForkThread", testForkThread},
		{"DeleteThread", testDeleteThread},
		{"ThreadTenants", testThreadTenants},
		{"ThreadLimits", testThreadLimits},
		{"ThreadStarts", testThreadStarts},
		{"ThreadFinish", testThreadFinish},
		{"ThreadInterruptOrder", testThreadInterruptOrder},
		{"InterruptedOwners", testInterruptedOwners},
		{"ThreadExpirePaused", testThreadExpirePaused},
		{"ThreadKeepInput", testThreadKeepInput},
		{"ConcurrentThreadStarts", testConcurrentThreadStarts},
		{"FinishAmidStarts", testFinishAmidStarts},
		{"SweepThreads", testSweepThreads},
		{"SweepThreadBatches", testSweepThreadBatches},
		{"Usage", testUsage},
		{"BudgetDefs", testBudgetDefs},
		{"ReserveAtLimit", testReserveAtLimit},
		{"ReserveGrants", testReserveGrants},
		{"ReservationExpiry", testReservationExpiry},
		{"RollingSpans", testRollingSpans},
		{"SettleSpends", testSettleSpends},
		{"ManyCharges", testManyCharges},
		{"BudgetSpends", testBudgetSpends},
		{"UsageLedger", testUsageLedger},
		{"SweepSpending", testSweepSpending},
		{"ConcurrentReserves", testConcurrentReserves},
		{"ConcurrentGrants", testConcurrentGrants},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			tt.test(t, newDB(t))
		})
	}
}

// open opens a store on db, closed when t ends.
func open(t *testing.T, db DB, sweepEvery time.Duration) store.Store {
	t.Helper()
	s, err := db.Open(sweepEvery)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = s.Close() })
	return s
}

// testSaveGetClaimDelete: a record from Save to Delete: Get returns what
// was saved; a version is claimed once, and a claim taken over only once
// stale; a Save unclaims; a Delete may repeat.
func testSaveGetClaimDelete(t *testing.T, db DB) {
	s := open(t, db, 0)
	if _, err := s.Get(t.Context(), "acme", "g1"); fault.KindOf(err) != fault.NotFound {
		t.Fatalf("Get of nothing: %v", err)
	}
	r := saveAndGet(t, s, "acme", "g1", "v1")
	checkClaims(t, s, r)
	checkSaveAndDelete(t, s)
}

// saveAndGet saves data as tenant's record id, and returns it as Get
// does, unclaimed.
func saveAndGet(t *testing.T, s store.Store, tenant, id, data string) store.Record {
	t.Helper()
	check(t, s.Save(t.Context(), tenant, id, []byte(data), time.Now().Add(time.Hour), 0))
	r, err := s.Get(t.Context(), tenant, id)
	if err != nil || string(r.Data) != data || r.Claimed {
		t.Fatalf("Get = %+v, %v", r, err)
	}
	return r
}

// checkClaims claims acme's g1 at r's version: the same version cannot be
// claimed twice, and a fresh claim is not stale; one older than
// staleBefore can be taken over.
func checkClaims(t *testing.T, s store.Store, r store.Record) {
	ctx := t.Context()
	now := time.Now()
	fatalIf(t, "Claim", s.Claim(ctx, "acme", "g1", r.Version, []byte("claimed"), now, now.Add(-time.Minute)))
	wantKind(t, "second claim", s.Claim(ctx, "acme", "g1", r.Version, []byte("again"), now, now.Add(-time.Minute)), fault.Conflict)
	r2, _ := s.Get(ctx, "acme", "g1")
	if r2.Version != r.Version+1 || !r2.Claimed || string(r2.Data) != "claimed" {
		t.Errorf("after Claim: %+v; want version %d, claimed", r2, r.Version+1)
	}
	wantKind(t, "claim of a fresh claim", s.Claim(ctx, "acme", "g1", r2.Version, []byte("again"), now, now.Add(-time.Minute)), fault.Conflict)
	errorIf(t, "takeover of a stale claim", s.Claim(ctx, "acme", "g1", r2.Version, []byte("takeover"), now, now.Add(time.Minute)))
}

// checkSaveAndDelete: saving acme's g1 again (the generation paused
// again) unclaims it; Delete removes it, and may repeat.
func checkSaveAndDelete(t *testing.T, s store.Store) {
	ctx := t.Context()
	check(t, s.Save(ctx, "acme", "g1", []byte("v2"), time.Now().Add(time.Hour), 0))
	if r, _ := s.Get(ctx, "acme", "g1"); r.Claimed || string(r.Data) != "v2" {
		t.Errorf("after Save: %+v", r)
	}
	check(t, s.Delete(ctx, "acme", "g1", 0))
	errorIf(t, "second Delete", s.Delete(ctx, "acme", "g1", 0))
	wantKind(t, "after Delete", errOf(s.Get(ctx, "acme", "g1")), fault.NotFound)
}

// One tenant's operations never see or touch another's record of the
// same id.
func testTenantsIsolated(t *testing.T, db DB) {
	s := open(t, db, 0)
	ctx := t.Context()
	later := time.Now().Add(time.Hour)
	check(t, s.Save(ctx, "acme", "g", []byte("acme's"), later, 0))
	r, _ := s.Get(ctx, "acme", "g")
	wantKind(t, "another tenant read the record", errOf(s.Get(ctx, "globex", "g")), fault.NotFound)
	now := time.Now()
	wantKind(t, "another tenant's claim", s.Claim(ctx, "globex", "g", r.Version, []byte("x"), now, now), fault.Conflict)
	wantKind(t, "another tenant's fenced Save", s.Save(ctx, "globex", "g", []byte("x"), later, r.Version), fault.Conflict)
	check(t, s.Delete(ctx, "globex", "g", 0))
	if n, _, err := s.Count(ctx, "globex"); err != nil || n != 0 {
		t.Errorf("globex counts %d, %v; want 0", n, err)
	}
	checkUnchanged(t, s, r)
	// The same id in two tenants is two records.
	check(t, s.Save(ctx, "globex", "g", []byte("globex's"), later, 0))
	if got, _ := s.Get(ctx, "acme", "g"); string(got.Data) != "acme's" {
		t.Errorf("globex's Save replaced acme's record: %+v", got)
	}
}

// checkUnchanged checks that another tenant's writes left acme's record
// g as r: its data, version and claim.
func checkUnchanged(t *testing.T, s store.Store, r store.Record) {
	t.Helper()
	if got, err := s.Get(t.Context(), "acme", "g"); err != nil || string(got.Data) != "acme's" || got.Version != r.Version || got.Claimed {
		t.Errorf("another tenant's writes changed acme's record: %+v, %v", got, err)
	}
}

// A resume's writes (Renew, Save and Delete with its claim's version)
// work while it holds its claim, and fail or do nothing once another
// resume has taken the generation over.
func testFencedWrites(t *testing.T, db DB) {
	s := open(t, db, 0)
	ctx := t.Context()
	check(t, s.Save(ctx, "", "g", []byte("paused"), time.Now().Add(time.Hour), 0))
	r, _ := s.Get(ctx, "", "g")
	now := time.Now()
	check(t, s.Claim(ctx, "", "g", r.Version, []byte("claim A"), now, now.Add(-time.Minute)))
	a := r.Version + 1
	checkHolderRenews(t, s, a, now)
	// B takes the claim over (A looked stale).
	check(t, s.Claim(ctx, "", "g", a, []byte("claim B"), now, now.Add(time.Hour)))
	checkOldHolderFenced(t, s, a, now)
	checkNewHolderWrites(t, s, a+1, now)
}

// checkHolderRenews: the holder of claim a renews it, with data and
// without, at a time kept to the millisecond.
func checkHolderRenews(t *testing.T, s store.Store, a int64, now time.Time) {
	ctx := t.Context()
	fatalIf(t, "Renew by the holder", s.Renew(ctx, "", "g", a, nil, now.Add(time.Second)))
	if got, _ := s.Get(ctx, "", "g"); string(got.Data) != "claim A" {
		t.Fatalf("Renew without data changed the data: %q", got.Data)
	}
	fatalIf(t, "Renew with data", s.Renew(ctx, "", "g", a, []byte("claim A, progressed"), now.Add(2*time.Second)))
	got, _ := s.Get(ctx, "", "g")
	if string(got.Data) != "claim A, progressed" || got.Version != a || !got.Claimed || !got.ClaimedAt.Equal(time.UnixMilli(now.Add(2*time.Second).UnixMilli())) {
		t.Fatalf("after Renew: %+v", got)
	}
}

// checkOldHolderFenced: the holder of claim a, taken over, renews and
// saves nothing, and its Delete does nothing.
func checkOldHolderFenced(t *testing.T, s store.Store, a int64, now time.Time) {
	ctx := t.Context()
	wantKind(t, "Renew by the old holder", s.Renew(ctx, "", "g", a, nil, now), fault.Conflict)
	wantKind(t, "Save by the old holder", s.Save(ctx, "", "g", []byte("A pauses"), time.Now().Add(time.Hour), a), fault.Conflict)
	errorIf(t, "Delete by the old holder", s.Delete(ctx, "", "g", a))
	if got, _ := s.Get(ctx, "", "g"); string(got.Data) != "claim B" {
		t.Errorf("the old holder's writes changed the record: %+v", got)
	}
}

// checkNewHolderWrites: the holder of claim b writes; its Save unclaims,
// and a Delete with the version after it removes the record.
func checkNewHolderWrites(t *testing.T, s store.Store, b int64, now time.Time) {
	ctx := t.Context()
	fatalIf(t, "Save by the holder", s.Save(ctx, "", "g", []byte("B pauses"), time.Now().Add(time.Hour), b))
	if got, _ := s.Get(ctx, "", "g"); got.Claimed || string(got.Data) != "B pauses" {
		t.Errorf("after the holder's Save: %+v", got)
	}
	wantKind(t, "Renew of an unclaimed record", s.Renew(ctx, "", "g", b+1, nil, now), fault.Conflict)
	check(t, s.Delete(ctx, "", "g", b+1))
	wantKind(t, "after the holder's Delete", errOf(s.Get(ctx, "", "g")), fault.NotFound)
}

// Of concurrent claims on one version exactly one wins, across replicas:
// a resume sent twice runs once.
func testConcurrentClaims(t *testing.T, db DB) {
	a, b := open(t, db, 0), open(t, db, 0) // two replicas sharing the database
	ctx := t.Context()
	check(t, a.Save(ctx, "", "g", []byte("x"), time.Now().Add(time.Hour), 0))
	r, _ := a.Get(ctx, "", "g")
	var won atomic.Int32
	var wg sync.WaitGroup
	for i := range 8 {
		s := a
		if i%2 == 1 {
			s = b
		}
		wg.Go(func() {
			now := time.Now()
			if err := s.Claim(ctx, "", "g", r.Version, []byte("c"), now, now.Add(-time.Hour)); err == nil {
				won.Add(1)
			} else if fault.KindOf(err) != fault.Conflict {
				t.Errorf("claim: %v", err)
			}
		})
	}
	wg.Wait()
	if won.Load() != 1 {
		t.Errorf("%d claims won, want 1", won.Load())
	}
}

// Get ignores an expired record at once; the sweeper removes it on its
// next tick, but keeps a claimed record a day past its last claim or
// renewal, whatever its expiry (its resume may still run); a record
// survives a reopen. The store reads synctest's clock, so every time
// here is exact, not a guess at how long a loaded machine takes.
func testExpiryAndDurability(t *testing.T, db DB) {
	synctest.Test(t, func(t *testing.T) {
		const sweepEvery = time.Hour
		s, err := db.Open(sweepEvery)
		if err != nil {
			t.Fatal(err)
		}
		defer s.Close()
		ctx := t.Context()
		t0 := time.Now()
		check(t, s.Save(ctx, "", "short", []byte("x"), t0, 0))
		wantKind(t, "a record was returned at its expiry", errOf(s.Get(ctx, "", "short")), fault.NotFound)
		check(t, s.Save(ctx, "", "long", []byte("kept"), t0.Add(48*time.Hour), 0))
		// A record claimed before it expires: its resume still runs.
		check(t, s.Save(ctx, "", "resuming", []byte("x"), t0.Add(time.Minute), 0))
		r := must[store.Record](t, "Get")(s.Get(ctx, "", "resuming"))
		check(t, s.Claim(ctx, "", "resuming", r.Version, []byte("claimed"), t0, t0))

		checkSweeps(t, db, s, r.Version+1, sweepEvery)
		check(t, s.Close())
		reopened, err := db.Open(0)
		if err != nil {
			t.Fatal(err)
		}
		defer reopened.Close()
		r, err = reopened.Get(ctx, "", "long")
		if err != nil || string(r.Data) != "kept" {
			t.Errorf("after reopening: %+v, %v", r, err)
		}
	})
}

// checkSweeps lets the sweeper run: its first tick removes the record
// that expired, not the claimed one, which the resume (holding claim) then
// renews; it keeps that one for a day past the renewal, and removes it on
// the tick after.
func checkSweeps(t *testing.T, db DB, s store.Store, claim int64, sweepEvery time.Duration) {
	t0 := time.Now()
	stored := func(id string) bool {
		t.Helper()
		return must[bool](t, "Stored")(db.Stored("", id))
	}
	sleep(sweepEvery - time.Millisecond)
	if !stored("short") {
		t.Fatal("the expired record was swept before the sweeper's first tick")
	}
	sleep(time.Millisecond)
	if stored("short") {
		t.Fatal("the sweeper's tick at 1h left the record that expired at 0h")
	}
	if !stored("resuming") {
		t.Fatal("the sweeper removed a record claimed an hour ago")
	}
	renewed := time.Now() // t0+1h, past the record's expiry at t0+1m
	fatalIf(t, "the resume of a claimed record past its expiry lost it", s.Renew(t.Context(), "", "resuming", claim, nil, renewed))
	sleep(24 * time.Hour) // the tick at exactly a day after the renewal
	if !stored("resuming") {
		t.Fatal("the sweeper removed a claimed record a day after its renewal; it keeps it that long")
	}
	sleep(sweepEvery)
	if stored("resuming") {
		t.Fatalf("the claimed record outlived the tick after %v (a day past its renewal at %v)", time.Since(t0), renewed.Sub(t0))
	}
}

// sleep lets synctest's clock run d, and the sweeper finish any tick due.
func sleep(d time.Duration) {
	time.Sleep(d)
	synctest.Wait()
}

// testCount: Count is a tenant's paused generations that have not expired,
// claimed ones included, and the earliest expiry among them: what
// limits.max_paused_generations is held to, and when a place frees.
func testCount(t *testing.T, db DB) {
	synctest.Test(t, func(t *testing.T) {
		s, err := db.Open(0)
		if err != nil {
			t.Fatal(err)
		}
		defer s.Close()
		ctx := t.Context()
		t0 := time.Now()
		if n, _ := count(t, s, "acme", t0); n != 0 {
			t.Fatalf("an empty store counts %d", n)
		}
		seedCount(t, s, t0)
		if n, next := count(t, s, "acme", t0); n != 2 || next != time.Hour {
			t.Errorf("acme: %d, next expiry in %s; want 2 (the expired one not counted), in 1h", n, next)
		}
		r, _ := s.Get(ctx, "acme", "a")
		check(t, s.Claim(ctx, "acme", "a", r.Version, []byte("claimed"), t0, t0))
		if n, _ := count(t, s, "acme", t0); n != 2 {
			t.Errorf("acme with one claimed: %d; want 2", n)
		}
		if n, next := count(t, s, "globex", t0); n != 1 || next != time.Minute {
			t.Errorf("globex: %d, in %s; want 1, in 1m", n, next)
		}
		check(t, s.Delete(ctx, "acme", "b", 0))
		time.Sleep(time.Hour)
		if n, _ := count(t, s, "acme", t0); n != 0 {
			t.Errorf("acme after its records expired or went: %d", n)
		}
	})
}

// seedCount saves acme's records expiring in 1h and 2h and one expired
// at once, and globex's expiring in 1m.
func seedCount(t *testing.T, s store.Store, t0 time.Time) {
	for id, expires := range map[string]time.Duration{"a": time.Hour, "b": 2 * time.Hour, "gone": 0} {
		check(t, s.Save(t.Context(), "acme", id, []byte("x"), t0.Add(expires), 0))
	}
	check(t, s.Save(t.Context(), "globex", "c", []byte("x"), t0.Add(time.Minute), 0))
}

// count is Count of tenant, its next expiry as a time after t0; none
// without a record.
func count(t *testing.T, s store.Store, tenant string, t0 time.Time) (int, time.Duration) {
	t.Helper()
	n, next, err := s.Count(t.Context(), tenant)
	if err != nil {
		t.Fatal(err)
	}
	if n == 0 {
		if !next.IsZero() {
			t.Errorf("Count(%q) = 0 with an expiry %v", tenant, next)
		}
		return 0, 0
	}
	return n, next.Sub(t0)
}

// Replicas that start together on a new database all open it: one
// migrates, the others wait, and none fails or migrates twice. Each then
// sees what another wrote.
func testConcurrentOpens(t *testing.T, db DB) {
	stores := openConcurrently(t, db, 6)
	if t.Failed() {
		return
	}
	ctx := t.Context()
	for i, s := range stores {
		fatalIf(t, fmt.Sprintf("replica %d: Save", i), s.Save(ctx, "", fmt.Sprint(i), []byte{byte(i)}, time.Now().Add(time.Hour), 0))
	}
	for i, s := range stores {
		next := (i + 1) % len(stores)
		if r, err := s.Get(ctx, "", fmt.Sprint(next)); err != nil || len(r.Data) != 1 || r.Data[0] != byte(next) {
			t.Errorf("replica %d reading replica %d's record: %+v, %v", i, next, r, err)
		}
	}
	// A replica started later finds the schema in place.
	if later, err := db.Open(0); err != nil {
		t.Errorf("a later replica: %v", err)
	} else {
		_ = later.Close()
	}
}

// openConcurrently opens n stores on db at once, each closed when t ends;
// an open that fails fails t.
func openConcurrently(t *testing.T, db DB, n int) []store.Store {
	stores := make([]store.Store, n)
	errs := make([]error, n)
	var wg sync.WaitGroup
	for i := range n {
		wg.Go(func() { stores[i], errs[i] = db.Open(0) })
	}
	wg.Wait()
	for i, s := range stores {
		if s != nil {
			t.Cleanup(func() { _ = s.Close() })
		}
		errorIf(t, fmt.Sprintf("replica %d", i), errs[i])
	}
	return stores
}

// Ping answers while the store is open; Close is idempotent.
func testPingAndClose(t *testing.T, db DB) {
	s, err := db.Open(time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	errorIf(t, "Ping of an open store", s.Ping(t.Context()))
	check(t, s.Close())
	errorIf(t, "second Close", s.Close())
	wantKind(t, "Ping of a closed store", s.Ping(t.Context()), fault.Unavailable)
}
