package store

import (
	"testing"
	"time"

	"github.com/agentd/agentd/internal/store/pgtest"
)

// An adopter counts the replicas whose liveness is gone as dead only
// while it attends, and from its second Adopt on one liveness: after its
// own was lost and taken again (a store outage ends everyone's), it waits
// one Adopt more.
func TestTrustsFromTheSecondAdopt(t *testing.T) {
	t.Parallel()
	a := newAttendances()
	if a.trusts("b") {
		t.Error("an adopter that does not attend trusts")
	}
	at, err := a.add("b")
	if err != nil {
		t.Fatal(err)
	}
	at.session.Store(1)
	for i, want := range []bool{false, true, true} {
		if got := a.trusts("b"); got != want {
			t.Errorf("Adopt %d on the first liveness trusts: %v; want %v", i+1, got, want)
		}
	}
	at.session.Store(0)
	if a.trusts("b") {
		t.Error("an adopter whose liveness is lost trusts")
	}
	at.session.Store(2)
	for i, want := range []bool{false, true} {
		if got := a.trusts("b"); got != want {
			t.Errorf("Adopt %d on the liveness taken again trusts: %v; want %v", i+1, got, want)
		}
	}
	if _, err := a.add("b"); err == nil {
		t.Error("a second attendance of b was let in")
	}
	a.remove("b")
	if a.trusts("b") {
		t.Error("an adopter that no longer attends trusts")
	}
}

// The keeper of a PostgreSQL liveness whose session ends (a restart, an
// administrator, a connection that broke) takes it again at once; the
// adopter's first Adopt after that takes nothing of a dead replica's, the
// next does.
func TestPostgresLivenessTakenAgain(t *testing.T) {
	t.Parallel()
	p := openPostgres(t, pgtest.DSN(t))
	g := p.Generations()
	ctx := t.Context()
	closer, err := g.Attend(ctx, "b")
	if err != nil {
		t.Fatal(err)
	}
	defer closer.Close()
	a := closer.(*pgAttendance)
	// x attended and died: listed, its lock free.
	if _, err := p.pool.Exec(ctx, `INSERT INTO replicas (id) VALUES ('x')`); err != nil {
		t.Fatal(err)
	}
	later := time.Now().Add(time.Hour)
	if _, err := g.Create(ctx, NewGeneration{Tenant: "acme", ID: "g", Owner: "x", Expires: later, Now: time.Now()}); err != nil {
		t.Fatal(err)
	}
	adopt := func() int {
		t.Helper()
		got, err := g.Adopt(ctx, "b", time.Now(), later, 10)
		if err != nil {
			t.Fatal(err)
		}
		return len(got)
	}
	if n := adopt(); n != 0 {
		t.Fatalf("the first Adopt took %d", n)
	}
	// The one liveness lock of this test's database is b's.
	var ended bool
	err = p.pool.QueryRow(ctx, `SELECT pg_terminate_backend(pid) FROM pg_locks
		WHERE locktype = 'advisory' AND classid = $1 AND objsubid = 2 AND granted
			AND database = (SELECT oid FROM pg_database WHERE datname = current_database())`, livenessClass).Scan(&ended)
	if err != nil || !ended {
		t.Fatalf("ending b's liveness session: %v, %v", ended, err)
	}
	for deadline := time.Now().Add(time.Minute); a.at.session.Load() != 2; time.Sleep(10 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatal("the liveness was not taken again within a minute")
		}
	}
	var held bool
	if err := p.pool.QueryRow(ctx, `SELECT NOT pg_try_advisory_xact_lock_shared($1, hashtext('b'))`, livenessClass).Scan(&held); err != nil || !held {
		t.Fatalf("b's lock is held again: %v, %v", held, err)
	}
	if n := adopt(); n != 0 {
		t.Errorf("the first Adopt on the liveness taken again took %d; want none", n)
	}
	if n := adopt(); n != 1 {
		t.Errorf("the second Adopt on the liveness taken again took %d; want x's generation", n)
	}
}
