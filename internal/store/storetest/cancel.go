package storetest

import (
	"slices"
	"testing"
	"time"

	"github.com/agentd/agentd/internal/fault"
	"github.com/agentd/agentd/internal/store"
)

// testCancel: Cancel ends a queued generation at once, Cancelled, out of
// its thread's queue (the next one queued holds the thread after the
// active one; the thread keeps nothing of the cancelled one), and marks
// any other live one for Interrupted to list, with the first reason
// given, to its lease's holder (a paused one under a released lease: to
// anyone). A finished generation is FailedPrecondition; an unknown one,
// or another tenant's, NotFound.
func testCancel(t *testing.T, db DB) {
	th, g := threadsOf(t, db)
	ctx := t.Context()
	createThread(t, th, "acme", "th", "i0")
	check(t, errOf(startOn(t, g, "th", "g1", store.Reject, t0)))
	check(t, errOf(startOn(t, g, "th", "q1", store.Enqueue, t0)))
	check(t, errOf(startOn(t, g, "th", "q2", store.Enqueue, t0)))

	x := must[store.Generation](t, "Cancel queued")(g.Cancel(ctx, "acme", "q1", "not needed", []byte("cancelled"), at(time.Minute)))
	if x.State != store.Cancelled || !x.FinishedAt.Equal(at(time.Minute)) || string(x.Result) != "cancelled" || x.Lease.Owner != "" {
		t.Errorf("Cancel of a queued generation: %+v; want it cancelled at once", x)
	}
	wantThread(t, th, "th", 1, "g1", "q2")
	if x := must[store.Generation](t, "Get")(g.Get(ctx, "acme", "q1")); x.State != store.Cancelled {
		t.Errorf("Get after Cancel: %s; want cancelled", x.State)
	}
	check(t, errOf(g.Finish(ctx, "acme", "g1", 1, store.Outcome{State: store.Completed, Now: at(2 * time.Minute)})))
	wantThread(t, th, "th", 1, "q2")

	checkCancelMarks(t, th, g)

	check(t, errOf(g.Create(ctx, store.NewGeneration{Tenant: "globex", ID: "theirs", Owner: "r1", Expires: at(time.Hour), Now: t0})))
	for id, want := range map[string]fault.Kind{"g1": fault.FailedPrecondition, "q1": fault.FailedPrecondition, "nothing": fault.NotFound, "theirs": fault.NotFound} {
		_, err := g.Cancel(ctx, "acme", id, "again", nil, at(time.Hour))
		wantKind(t, "Cancel of "+id, err, want)
	}
	if x := must[store.Generation](t, "Get")(g.Get(ctx, "globex", "theirs")); x.State != store.Running {
		t.Errorf("another tenant's Cancel changed %+v", x)
	}
}

// checkCancelMarks: a running and a paused generation asked to cancel
// stay as they are, listed by Interrupted with the first reason: the
// running one to its owner alone, the paused one, released, to anyone.
func checkCancelMarks(t *testing.T, th store.Threads, g store.Generations) {
	t.Helper()
	ctx := t.Context()
	check(t, errOf(g.Create(ctx, store.NewGeneration{Tenant: "acme", ID: "run", Owner: "r1", Expires: at(time.Hour), Now: t0})))
	check(t, errOf(g.Create(ctx, store.NewGeneration{Tenant: "acme", ID: "paused", Owner: "r1", Expires: at(time.Hour), Now: t0})))
	check(t, errOf(g.Checkpoint(ctx, "acme", "paused", 1, store.Checkpoint{State: store.Paused, Now: t0})))
	check(t, g.Release(ctx, "acme", "paused", 1, t0))
	for _, id := range []string{"run", "paused", "run"} {
		x := must[store.Generation](t, "Cancel")(g.Cancel(ctx, "acme", id, "stop "+id, nil, at(time.Minute)))
		if x.State.Finished() || !x.FinishedAt.IsZero() {
			t.Errorf("Cancel of a live generation ended it: %+v", x)
		}
	}
	check(t, errOf(g.Cancel(ctx, "acme", "run", "another reason", nil, at(time.Minute)))) // the first reason stays
	for owner, want := range map[string][]store.Interruption{
		"r1": {
			{Tenant: "acme", ID: "paused", State: store.Paused, Cancel: true, Reason: "stop paused"},
			{Tenant: "acme", ID: "run", State: store.Running, Owner: "r1", Cancel: true, Reason: "stop run"},
		},
		"r2": {{Tenant: "acme", ID: "paused", State: store.Paused, Cancel: true, Reason: "stop paused"}},
	} {
		got := must[[]store.Interruption](t, "Interrupted")(th.Interrupted(ctx, owner, 10))
		if !slices.Equal(got, want) {
			t.Errorf("Interrupted(%s) = %+v; want %+v", owner, got, want)
		}
	}
}
