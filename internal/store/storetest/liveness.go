package storetest

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"slices"
	"syscall"
	"testing"
	"time"

	"github.com/agentd/agentd/internal/fault"
	"github.com/agentd/agentd/internal/store"
)

// The liveness tests: replicas that attend (Generations.Attend) in
// processes of their own (DB.AttendElsewhere), which the tests SIGKILL,
// SIGSTOP and SIGCONT, and an adopter in the test's process.

// replicaEnv makes the test binary a replica that attends (Main): the
// options of its store and its id, as JSON.
const replicaEnv = "AGENTD_TEST_STORE_REPLICA"

// settle bounds the wait for a state that comes once the store has seen
// a process end (PostgreSQL ends a dead client's session as soon as it
// reads the closed socket).
const settle = time.Minute

// replicaSpec is what a replica process opens and attends as.
type replicaSpec struct {
	Options store.Options
	Owner   string
}

// Main runs the test binary as a replica when a liveness test started it
// as one, and exits; otherwise it returns at once. The TestMain of a
// package that runs the suite calls it first.
func Main() {
	spec := os.Getenv(replicaEnv)
	if spec == "" {
		return
	}
	if err := runReplica(spec); err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	os.Exit(0)
}

// runReplica opens the store, attends, says so on stdout, and waits until
// stdin closes (the test went) or it is killed. It never closes its
// attendance: its end is a death, as far as the store can tell.
func runReplica(spec string) error {
	var r replicaSpec
	if err := json.Unmarshal([]byte(spec), &r); err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(context.Background(), settle)
	defer cancel()
	s, err := store.Open(ctx, r.Options)
	if err != nil {
		return err
	}
	if _, err := s.Generations().Attend(ctx, r.Owner); err != nil {
		return err
	}
	fmt.Println("attending")
	_, err = io.Copy(io.Discard, os.Stdin)
	return err
}

// ReplicaEnv is the environment variable (NAME=value) that makes the test
// binary, started with it, a replica attending as owner on the database
// that options open (Main): what DB.AttendElsewhere starts.
func ReplicaEnv(options store.Options, owner string) string {
	spec, _ := json.Marshal(replicaSpec{Options: options, Owner: owner}) // strings: it does not fail
	return replicaEnv + "=" + string(spec)
}

// attendElsewhere starts a replica attending as owner on db.
func attendElsewhere(t *testing.T, db DB, owner string) *replica {
	t.Helper()
	return &replica{db.AttendElsewhere(t, owner)}
}

// replica is a replica attending in a process of its own.
type replica struct{ p *os.Process }

// kill SIGKILLs the replica: its liveness ends as it exits.
func (r *replica) kill(t *testing.T) { r.signal(t, syscall.SIGKILL) }

func (r *replica) signal(t *testing.T, sig syscall.Signal) {
	t.Helper()
	fatalIf(t, sig.String(), r.p.Signal(sig))
}

// attend makes g attend as owner until t ends.
func attend(t *testing.T, g store.Generations, owner string) io.Closer {
	t.Helper()
	a := must[io.Closer](t, "Attend")(g.Attend(t.Context(), owner))
	t.Cleanup(func() { errorIf(t, "closing the attendance", a.Close()) })
	return a
}

// createOwned creates running generations owned by owner, leased until
// an hour after t0.
func createOwned(t *testing.T, g store.Generations, owner string, ids ...string) {
	t.Helper()
	for _, id := range ids {
		check(t, errOf(g.Create(t.Context(), store.NewGeneration{Tenant: "acme", ID: id, Owner: owner, Expires: at(time.Hour), Checkpoint: []byte(id), Now: t0})))
	}
}

// adoptNone adopts as the adopter, at a minute after t0 (every lease
// unexpired), and fails t if it took anything.
func adoptNone(t *testing.T, g store.Generations, what string) {
	t.Helper()
	if got := must[[]store.Generation](t, "Adopt")(g.Adopt(t.Context(), "adopter", at(time.Minute), at(2*time.Hour), 100)); len(got) != 0 {
		t.Errorf("%s: Adopt took %v before their leases lapsed", what, adoptedIDs(got))
	}
}

// adoptUntil adopts as the adopter, at a minute after t0, until it has
// taken want (and fails t if it takes anything else, or not all of want
// within settle), and checks each was taken once, with the next epoch.
func adoptUntil(t *testing.T, g store.Generations, want ...string) {
	t.Helper()
	var got []store.Generation
	deadline := time.Now().Add(settle)
	for len(got) < len(want) && time.Now().Before(deadline) {
		got = append(got, must[[]store.Generation](t, "Adopt")(g.Adopt(t.Context(), "adopter", at(time.Minute), at(2*time.Hour), 100))...)
		time.Sleep(10 * time.Millisecond)
	}
	ids := adoptedIDs(got)
	if !slices.Equal(ids, slices.Sorted(slices.Values(want))) {
		t.Fatalf("Adopt took %v; want %v, each once", ids, want)
	}
	for _, a := range got {
		if a.Lease.Owner != "adopter" || a.Lease.Epoch != 2 || !a.Lease.Expires.Equal(at(2*time.Hour)) {
			t.Errorf("%s adopted with lease %+v; want the adopter's, epoch 2", a.ID, a.Lease)
		}
	}
}

func adoptedIDs(gs []store.Generation) []string {
	ids := make([]string, 0, len(gs))
	for _, g := range gs {
		ids = append(ids, g.ID)
	}
	slices.Sort(ids)
	return ids
}

// testDeadOwner: an adopter that attends takes the running and waiting
// generations of a replica that attended and was SIGKILLed, long before
// their leases lapse, each once with the next epoch, and leaves its paused
// one. It leaves those of a replica that lives, of one stopped (SIGSTOP: a
// stopped process keeps its liveness) and of an owner that never attended
// (an agentd from before liveness) until their leases lapse, and an
// adopter that does not attend takes nothing before the leases lapse.
func testDeadOwner(t *testing.T, db DB) {
	g := generations(t, db)
	attend(t, g, "adopter")
	dying, stopped := attendElsewhere(t, db, "dying"), attendElsewhere(t, db, "stopped")
	createOwned(t, g, "dying", "dying-running", "dying-waiting", "dying-paused")
	check(t, errOf(g.Checkpoint(t.Context(), "acme", "dying-waiting", 1, store.Checkpoint{State: store.Waiting, Now: t0})))
	check(t, errOf(g.Checkpoint(t.Context(), "acme", "dying-paused", 1, store.Checkpoint{State: store.Paused, Now: t0})))
	check(t, g.Release(t.Context(), "acme", "dying-paused", 1, t0))
	createOwned(t, g, "stopped", "stopped-running")
	createOwned(t, g, "old", "old-running")
	adoptNone(t, g, "every owner alive")

	stopped.signal(t, syscall.SIGSTOP)
	dying.kill(t)
	checkNotAttending(t, db)
	adoptUntil(t, g, "dying-running", "dying-waiting")
	adoptNone(t, g, "the dead one's taken")
	stopped.signal(t, syscall.SIGCONT)
	adoptNone(t, g, "the stopped one resumed")

	late := must[[]store.Generation](t, "Adopt")(g.Adopt(t.Context(), "adopter", at(time.Hour), at(2*time.Hour), 100))
	if ids := adoptedIDs(late); !slices.Equal(ids, []string{"old-running", "stopped-running"}) {
		t.Errorf("Adopt once the leases lapsed took %v; want old-running and stopped-running", ids)
	}
}

// checkNotAttending: an adopter that does not attend knows no owner dead.
func checkNotAttending(t *testing.T, db DB) {
	t.Helper()
	g := generations(t, db)
	for range 2 {
		if got := must[[]store.Generation](t, "Adopt")(g.Adopt(t.Context(), "unattended", at(time.Minute), at(2*time.Hour), 100)); len(got) != 0 {
			t.Fatalf("an adopter that does not attend took %v before their leases lapsed", adoptedIDs(got))
		}
	}
}

// testSameIDAgain: a replica that attends again under the id of one that
// died is alive: neither its generations nor its predecessor's are
// adopted before their leases lapse. Once it dies too, all of them are.
func testSameIDAgain(t *testing.T, db DB) {
	g := generations(t, db)
	attend(t, g, "adopter")
	first := attendElsewhere(t, db, "x")
	createOwned(t, g, "x", "before")
	adoptNone(t, g, "x alive")
	first.kill(t)
	again := attendElsewhere(t, db, "x")
	createOwned(t, g, "x", "after")
	adoptNone(t, g, "x alive again")
	adoptNone(t, g, "x alive again, asked twice")
	again.kill(t)
	adoptUntil(t, g, "after", "before")
}

// testAttendance: an id attends once: a second Attend, through the same
// store or another, fails with Conflict (the other once its context
// ends), and succeeds once the first attendance is closed. A replica that
// closed its attendance is not dead: its generations wait for their
// leases. Close may repeat.
func testAttendance(t *testing.T, db DB) {
	adopter, g, other := generations(t, db), generations(t, db), generations(t, db)
	attend(t, adopter, "adopter")
	a := attend(t, g, "r")
	wantKind(t, "a second Attend through the same store", errOf(g.Attend(t.Context(), "r")), fault.Conflict)
	ctx, cancel := context.WithTimeout(t.Context(), 2*time.Second)
	defer cancel()
	wantKind(t, "a second Attend through another store", errOf(other.Attend(ctx, "r")), fault.Conflict)
	createOwned(t, g, "r", "left-running")
	adoptNone(t, adopter, "r attending")
	check(t, a.Close())
	check(t, a.Close())
	adoptNone(t, adopter, "r closed its attendance")
	adoptNone(t, adopter, "r closed its attendance, asked twice")
	b := must[io.Closer](t, "Attend once closed")(other.Attend(t.Context(), "r"))
	check(t, b.Close())
}
