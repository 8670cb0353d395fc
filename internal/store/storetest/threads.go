package storetest

import (
	"errors"
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/agentd/agentd/internal/fault"
	"github.com/agentd/agentd/internal/store"
)

// The threads' tests: a thread's record, metadata and items; the
// generations started on it, of which one holds it at a time while the
// others wait in its queue, in order; the items that the one holding it
// appends as it ends, once; the removal of a thread with everything of
// its generations; tenancy and limits. Their times are the caller's but
// for the expiry that reads check, which is the store's clock: the
// threads that tests expire expired long ago.

// ago is an expiry long past by any clock.
var ago = time.UnixMilli(1_000)

// threadsOf opens a replica's handle on db: its threads and generations.
func threadsOf(t *testing.T, db DB) (store.Threads, store.Generations) {
	t.Helper()
	s := open(t, db, 0)
	return s.Threads(), s.Generations()
}

func titem(id, data string) store.ThreadItem { return store.ThreadItem{ID: id, Data: []byte(data)} }

// stored is it as a thread holds it: numbered n, appended by gen at
// created.
func stored(it store.ThreadItem, n int64, gen string, created time.Time) store.ThreadItem {
	it.N, it.Generation, it.CreatedAt = n, gen, created
	return it
}

// createThread records tenant's thread id at t0 with items named ids
// (each item's data is its id and "!").
func createThread(t *testing.T, th store.Threads, tenant, id string, ids ...string) store.Thread {
	t.Helper()
	items := make([]store.ThreadItem, len(ids))
	for i, x := range ids {
		items[i] = titem(x, x+"!")
	}
	return must[store.Thread](t, "CreateThread")(th.CreateThread(t.Context(), store.NewThread{Tenant: tenant, ID: id, Items: items, Now: t0}))
}

// allItems reads every item of a thread, oldest first.
func allItems(t *testing.T, th store.Threads, tenant, id string) []store.ThreadItem {
	t.Helper()
	return must[[]store.ThreadItem](t, "ThreadItems")(th.ThreadItems(t.Context(), tenant, id, store.ItemRange{After: -1}))
}

// startOn creates acme's generation id on thread under owner's lease, as
// m says, and returns what Create returned.
func startOn(t *testing.T, g store.Generations, thread, id string, m store.Multitask, now time.Time) (store.Created, error) {
	t.Helper()
	return g.Create(t.Context(), store.NewGeneration{
		Tenant: "acme", ID: id, Owner: "r1", Expires: now.Add(time.Hour), Checkpoint: []byte(id), Now: now,
		Events: []store.Event{ev("started", id)}, Thread: &store.ThreadStart{ID: thread, Multitask: m},
	})
}

// wantStart checks what Create returned of a start.
func wantStart(t *testing.T, what string, c store.Created, err error, want store.Created) {
	t.Helper()
	if err != nil || c != want {
		t.Errorf("%s: %+v, %v; want %+v", what, c, err, want)
	}
}

// holding is what Create returns of a start that holds its thread from
// base, queuedBehind of one queued behind the generation holding it.
func holding(base int64) store.Created { return store.Created{State: store.Running, ThreadBase: base} }

func queuedBehind(gen string) store.Created { return store.Created{State: store.Queued, Behind: gen} }

// wantThread checks what GetThread says of acme's thread id: its item
// count, the generation holding it, and its queue.
func wantThread(t *testing.T, th store.Threads, id string, items int64, active string, queued ...string) {
	t.Helper()
	got := must[store.Thread](t, "GetThread")(th.GetThread(t.Context(), "acme", id))
	if got.ItemCount != items || got.Active != active || !slices.Equal(got.Queued, queued) {
		t.Errorf("thread %s: %d items, held by %q, queue %v; want %d, %q, %v", id, got.ItemCount, got.Active, got.Queued, items, active, queued)
	}
}

var equateItems = cmp.Comparer(func(a, b []byte) bool { return string(a) == string(b) })

// testThreadLifecycle: a thread from CreateThread to UpdateThread: its
// record as created, read back, merged into, replaced; an id the tenant
// has is a Conflict; an expired thread is not found by any operation.
func testThreadLifecycle(t *testing.T, db DB) {
	th, g := threadsOf(t, db)
	ctx := t.Context()
	wantKind(t, "GetThread of nothing", errOf(th.GetThread(ctx, "acme", "th")), fault.NotFound)
	create := store.NewThread{Tenant: "acme", ID: "th", Metadata: map[string]string{"user": "ann", "topic": "go"},
		Items: []store.ThreadItem{titem("i0", "hello"), titem("i1", "hi")}, ExpiresAt: at(24 * time.Hour), Now: t0}
	want := store.Thread{Tenant: "acme", ID: "th", Metadata: map[string]string{"user": "ann", "topic": "go"},
		CreatedAt: t0, UpdatedAt: t0, ExpiresAt: at(24 * time.Hour), ItemCount: 2}
	got := must[store.Thread](t, "CreateThread")(th.CreateThread(ctx, create))
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("CreateThread returned (-want +got):\n%s", diff)
	}
	wantKind(t, "CreateThread of an id the tenant has", errOf(th.CreateThread(ctx, create)), fault.Conflict)
	checkGetThread(t, th, "after CreateThread", want)
	wantItems := []store.ThreadItem{stored(titem("i0", "hello"), 0, "", t0), stored(titem("i1", "hi"), 1, "", t0)}
	if diff := cmp.Diff(wantItems, allItems(t, th, "acme", "th"), equateItems); diff != "" {
		t.Errorf("the items (-want +got):\n%s", diff)
	}

	// Merged: an empty value removes its key; the expiry stays.
	got = must[store.Thread](t, "UpdateThread")(th.UpdateThread(ctx, "acme", "th", store.ThreadUpdate{
		Metadata: map[string]string{"topic": "", "lang": "en"}, Now: at(time.Minute)}))
	want.Metadata, want.UpdatedAt = map[string]string{"user": "ann", "lang": "en"}, at(time.Minute)
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("UpdateThread (merge) returned (-want +got):\n%s", diff)
	}
	// Replaced, and the expiry removed.
	got = must[store.Thread](t, "UpdateThread")(th.UpdateThread(ctx, "acme", "th", store.ThreadUpdate{
		Metadata: map[string]string{"k": "v"}, Replace: true, SetExpiry: true, Now: at(2 * time.Minute)}))
	want.Metadata, want.UpdatedAt, want.ExpiresAt = map[string]string{"k": "v"}, at(2*time.Minute), time.Time{}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("UpdateThread (replace) returned (-want +got):\n%s", diff)
	}
	other, _ := threadsOf(t, db)
	checkGetThread(t, other, "on another replica", want)
	checkExpiredThread(t, th, g)
}

func checkGetThread(t *testing.T, th store.Threads, when string, want store.Thread) {
	t.Helper()
	got, err := th.GetThread(t.Context(), want.Tenant, want.ID)
	if err != nil {
		t.Fatalf("%s: GetThread: %v", when, err)
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("%s: GetThread (-want +got):\n%s", when, diff)
	}
}

// checkExpiredThread: a thread that has expired, not yet swept, is not
// found, whatever is asked of it, and not listed.
func checkExpiredThread(t *testing.T, th store.Threads, g store.Generations) {
	ctx := t.Context()
	check(t, errOf(th.CreateThread(ctx, store.NewThread{Tenant: "acme", ID: "old", Items: []store.ThreadItem{titem("x", "x")}, ExpiresAt: ago, Now: t0})))
	wantKind(t, "GetThread of an expired thread", errOf(th.GetThread(ctx, "acme", "old")), fault.NotFound)
	wantKind(t, "ThreadItems of an expired thread", errOf(th.ThreadItems(ctx, "acme", "old", store.ItemRange{After: -1})), fault.NotFound)
	wantKind(t, "UpdateThread of an expired thread", errOf(th.UpdateThread(ctx, "acme", "old", store.ThreadUpdate{Now: t0})), fault.NotFound)
	wantKind(t, "ForkThread of an expired thread", errOf(th.ForkThread(ctx, "acme", "old", "new", -1, nil, 0, t0)), fault.NotFound)
	wantKind(t, "a start on an expired thread", errOf(startOn(t, g, "old", "g", store.Reject, t0)), fault.NotFound)
	_, _, err := th.DeleteThread(ctx, "acme", "old")
	wantKind(t, "DeleteThread of an expired thread", err, fault.NotFound)
	if page, _, err := th.ListThreads(ctx, "acme", store.ThreadListOptions{}); err != nil || len(page) != 1 || page[0].ID != "th" {
		t.Errorf("ListThreads: %+v, %v; want th alone", page, err)
	}
}

// testExpiredWhileHeld: a thread that expires while a generation holds
// it is found, read, updated and started on until it is free: the one
// queued on it then holds it in turn, and SweepThreads leaves it; once
// the last ends, it is not found, and swept.
func testExpiredWhileHeld(t *testing.T, db DB) {
	th, g := threadsOf(t, db)
	ctx := t.Context()
	check(t, errOf(th.CreateThread(ctx, store.NewThread{Tenant: "acme", ID: "th", Items: []store.ThreadItem{titem("i0", "i0!")}, ExpiresAt: at(time.Hour), Now: t0})))
	check(t, errOf(startOn(t, g, "th", "g1", store.Reject, t0)))
	check(t, errOf(th.UpdateThread(ctx, "acme", "th", store.ThreadUpdate{ExpiresAt: ago, SetExpiry: true, Now: t0})))
	check(t, errOf(th.UpdateThread(ctx, "acme", "th", store.ThreadUpdate{Metadata: map[string]string{"k": "v"}, Now: t0})))
	c, err := startOn(t, g, "th", "e1", store.Enqueue, t0)
	wantStart(t, "a start queued on the expired thread", c, err, queuedBehind("g1"))
	wantKind(t, "a start refused by the expired thread", errOf(startOn(t, g, "th", "r", store.Reject, t0)), fault.FailedPrecondition)
	if n := must[int](t, "SweepThreads")(th.SweepThreads(ctx, at(2*time.Hour), time.Time{})); n != 0 {
		t.Errorf("SweepThreads removed %d held threads", n)
	}
	if got := listThreadIDs(t, th); !slices.Equal(got, []string{"th"}) {
		t.Errorf("listed %v; want th", got)
	}
	check(t, errOf(g.Finish(ctx, "acme", "g1", 1, store.Outcome{State: store.Completed, Now: at(time.Second),
		Thread: &store.ThreadAppend{Items: []store.ThreadItem{titem("a1", "x")}}})))
	wantThread(t, th, "th", 2, "e1")
	if got := allItems(t, th, "acme", "th"); len(got) != 2 || got[1].ID != "a1" {
		t.Errorf("the items of the expired thread e1 holds: %+v", got)
	}
	check(t, errOf(g.Acquire(ctx, "acme", "e1", "r2", at(2*time.Second), at(time.Hour))))
	check(t, errOf(g.Finish(ctx, "acme", "e1", 1, store.Outcome{State: store.Completed, Now: at(3 * time.Second)})))
	wantKind(t, "GetThread once free", errOf(th.GetThread(ctx, "acme", "th")), fault.NotFound)
	wantKind(t, "ThreadItems once free", errOf(th.ThreadItems(ctx, "acme", "th", store.ItemRange{After: -1})), fault.NotFound)
	if n := must[int](t, "SweepThreads")(th.SweepThreads(ctx, at(2*time.Hour), time.Time{})); n != 1 {
		t.Errorf("SweepThreads once free: %d; want 1", n)
	}
}

// testThreadList: ListThreads pages through a tenant's threads, newest
// first, each once, keeping those whose metadata has every entry asked
// for; another tenant's are not listed; a token it did not return is
// Invalid.
func testThreadList(t *testing.T, db DB) {
	th, _ := threadsOf(t, db)
	ctx := t.Context()
	var all, anns []string
	for i := range 7 {
		id := fmt.Sprintf("th%d", i)
		user := []string{"ann", "bob"}[i%2]
		check(t, errOf(th.CreateThread(ctx, store.NewThread{Tenant: "acme", ID: id, Now: at(time.Duration(i) * time.Second),
			Metadata: map[string]string{"user": user, "n": fmt.Sprint(i)}})))
		all = append([]string{id}, all...)
		if user == "ann" {
			anns = append([]string{id}, anns...)
		}
	}
	check(t, errOf(th.CreateThread(ctx, store.NewThread{Tenant: "globex", ID: "th9", Metadata: map[string]string{"user": "ann"}, Now: t0})))
	for _, tt := range []struct {
		name     string
		metadata map[string]string
		want     []string
	}{
		{"all", nil, all},
		{"user ann", map[string]string{"user": "ann"}, anns},
		{"user ann and n 2", map[string]string{"user": "ann", "n": "2"}, []string{"th2"}},
		{"user ann and n 3", map[string]string{"user": "ann", "n": "3"}, nil},
		{"unknown key", map[string]string{"team": "x"}, nil},
	} {
		if got := listThreads(t, th, tt.metadata); !slices.Equal(got, tt.want) {
			t.Errorf("%s: listed %v; want %v", tt.name, got, tt.want)
		}
	}
	_, _, err := th.ListThreads(ctx, "acme", store.ThreadListOptions{PageToken: "not-a-token"})
	wantKind(t, "a token ListThreads did not return", err, fault.Invalid)
}

// listThreads lists acme's threads with metadata, three a page, and
// returns their ids.
func listThreads(t *testing.T, th store.Threads, metadata map[string]string) []string {
	t.Helper()
	var ids []string
	o := store.ThreadListOptions{Metadata: metadata, PageSize: 3}
	for {
		page, next, err := th.ListThreads(t.Context(), "acme", o)
		if err != nil {
			t.Fatalf("ListThreads: %v", err)
		}
		for _, x := range page {
			if x.Queued != nil || x.Metadata["n"] == "" {
				t.Errorf("listed %+v: want its metadata, no queue", x)
			}
			ids = append(ids, x.ID)
		}
		if next == "" {
			return ids
		}
		o.PageToken = next
	}
}

// testThreadItems: ThreadItems reads a range of the items, oldest first
// or newest first, up to a limit; a range past the last is empty; the
// items of an unknown thread, or another tenant's, are NotFound.
func testThreadItems(t *testing.T, db DB) {
	th, _ := threadsOf(t, db)
	ctx := t.Context()
	var ids []string
	for i := range 10 {
		ids = append(ids, fmt.Sprint("i", i))
	}
	createThread(t, th, "acme", "th", ids...)
	for _, tt := range []struct {
		r    store.ItemRange
		want []int64
	}{
		{store.ItemRange{After: -1}, []int64{0, 1, 2, 3, 4, 5, 6, 7, 8, 9}},
		{store.ItemRange{After: 2, Before: 6}, []int64{3, 4, 5}},
		{store.ItemRange{After: -1, Limit: 3}, []int64{0, 1, 2}},
		{store.ItemRange{After: -1, Limit: 3, Desc: true}, []int64{9, 8, 7}},
		{store.ItemRange{After: -1, Before: 5, Limit: 2, Desc: true}, []int64{4, 3}},
		{store.ItemRange{After: 6, Desc: true}, []int64{9, 8, 7}},
		{store.ItemRange{After: 9}, nil},
	} {
		got, err := th.ThreadItems(ctx, "acme", "th", tt.r)
		var ns []int64
		for _, it := range got {
			ns = append(ns, it.N)
			if it.ID != fmt.Sprint("i", it.N) || string(it.Data) != it.ID+"!" {
				t.Errorf("%+v: item %d is %q, %q", tt.r, it.N, it.ID, it.Data)
			}
		}
		if err != nil || !slices.Equal(ns, tt.want) {
			t.Errorf("ThreadItems(%+v) = %v, %v; want %v", tt.r, ns, err, tt.want)
		}
	}
	wantKind(t, "ThreadItems of an unknown thread", errOf(th.ThreadItems(ctx, "acme", "nope", store.ItemRange{After: -1})), fault.NotFound)
	wantKind(t, "ThreadItems of another tenant's thread", errOf(th.ThreadItems(ctx, "globex", "th", store.ItemRange{After: -1})), fault.NotFound)
}

// testForkThread: a fork copies the items up to the one named, with their
// ids, data, generations and times, and the metadata unless given some;
// it holds no generation, and is a thread of its own: what is appended
// to the one forked afterwards is not in it.
func testForkThread(t *testing.T, db DB) {
	th, g := threadsOf(t, db)
	ctx := t.Context()
	check(t, errOf(th.CreateThread(ctx, store.NewThread{Tenant: "acme", ID: "src", Metadata: map[string]string{"user": "ann"},
		Items: []store.ThreadItem{titem("i0", "a"), titem("i1", "b")}, Now: t0})))
	c, err := startOn(t, g, "src", "s1", store.Reject, t0)
	wantStart(t, "a start on src", c, err, holding(2))
	check(t, errOf(g.Finish(ctx, "acme", "s1", 1, store.Outcome{State: store.Completed, Now: at(time.Second),
		Thread: &store.ThreadAppend{Items: []store.ThreadItem{titem("i2", "c"), titem("i3", "d")}}})))
	src := allItems(t, th, "acme", "src")

	fork := must[store.Thread](t, "ForkThread")(th.ForkThread(ctx, "acme", "src", "fork", 2, nil, 0, at(2*time.Second)))
	want := store.Thread{Tenant: "acme", ID: "fork", Metadata: map[string]string{"user": "ann"}, CreatedAt: at(2 * time.Second),
		UpdatedAt: at(2 * time.Second), ItemCount: 3}
	if diff := cmp.Diff(want, fork); diff != "" {
		t.Errorf("ForkThread returned (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff(src[:3], allItems(t, th, "acme", "fork"), equateItems); diff != "" {
		t.Errorf("the fork's items (-src +fork):\n%s", diff)
	}
	all := must[store.Thread](t, "ForkThread")(th.ForkThread(ctx, "acme", "src", "all", -1, map[string]string{"user": "bob"}, 0, at(2*time.Second)))
	if all.ItemCount != 4 || !cmp.Equal(all.Metadata, map[string]string{"user": "bob"}) {
		t.Errorf("a fork of all with metadata: %+v", all)
	}

	c, err = startOn(t, g, "src", "s2", store.Reject, at(3*time.Second))
	wantStart(t, "another start on src", c, err, holding(4))
	check(t, errOf(g.Finish(ctx, "acme", "s2", 1, store.Outcome{State: store.Completed, Now: at(4 * time.Second),
		Thread: &store.ThreadAppend{Items: []store.ThreadItem{titem("i4", "e")}}})))
	wantThread(t, th, "fork", 3, "")
	wantThread(t, th, "src", 5, "")
	wantKind(t, "ForkThread to an id the tenant has", errOf(th.ForkThread(ctx, "acme", "src", "fork", -1, nil, 0, t0)), fault.Conflict)
	wantKind(t, "ForkThread of an unknown thread", errOf(th.ForkThread(ctx, "acme", "nope", "x", -1, nil, 0, t0)), fault.NotFound)
}

// testDeleteThread: DeleteThread removes the thread, its items and every
// generation on it (finished, running, queued) with their logs, items
// and paused checkpoints: nothing of them is read after, and the
// running one's owner has its writes refused; it leaves the rest.
func testDeleteThread(t *testing.T, db DB) {
	s := open(t, db, 0)
	th, g := s.Threads(), s.Generations()
	ctx := t.Context()
	createThread(t, th, "acme", "th", "i0", "i1")
	createThread(t, th, "acme", "keep", "k0")
	check(t, errOf(startOn(t, g, "th", "done", store.Reject, t0)))
	check(t, errOf(g.Finish(ctx, "acme", "done", 1, store.Outcome{State: store.Completed, Events: []store.Event{ev("done", "")}, Now: t0,
		Items: []store.Item{item(0, "x")}, Thread: &store.ThreadAppend{Items: []store.ThreadItem{titem("a0", "y")}}})))
	check(t, errOf(startOn(t, g, "th", "active", store.Reject, t0)))
	check(t, errOf(g.Create(ctx, store.NewGeneration{Tenant: "acme", ID: "running", Owner: "r1", Expires: at(time.Hour), Now: t0,
		Agent: []byte("agent"), Items: []store.Item{item(0, "x")}, Thread: &store.ThreadStart{ID: "keep"}})))
	check(t, errOf(g.Create(ctx, store.NewGeneration{Tenant: "acme", ID: "queued", Now: t0,
		Thread: &store.ThreadStart{ID: "keep", Multitask: store.Enqueue}})))
	check(t, s.Save(ctx, "acme", "queued", []byte("paused"), time.Now().Add(time.Hour), 0))
	check(t, errOf(g.Create(ctx, store.NewGeneration{Tenant: "acme", ID: "alone", Owner: "r1", Expires: at(time.Hour), Now: t0})))

	items, gens, err := th.DeleteThread(ctx, "acme", "keep")
	if err != nil || items != 1 || gens != 2 {
		t.Errorf("DeleteThread(keep) = %d items, %d generations, %v; want 1, 2", items, gens, err)
	}
	checkThreadGone(t, s, "keep", "running", "queued")
	_, err = g.Checkpoint(ctx, "acme", "running", 1, store.Checkpoint{State: store.Running, Now: at(time.Second)})
	wantKind(t, "the deleted generation owner's Checkpoint", err, fault.Conflict)
	_, err = g.Finish(ctx, "acme", "running", 1, store.Outcome{State: store.Completed, Now: at(time.Second),
		Thread: &store.ThreadAppend{Items: []store.ThreadItem{titem("late", "")}}})
	wantKind(t, "the deleted generation owner's Finish", err, fault.Conflict)

	items, gens, err = th.DeleteThread(ctx, "acme", "th")
	if err != nil || items != 3 || gens != 2 {
		t.Errorf("DeleteThread(th) = %d items, %d generations, %v; want 3, 2", items, gens, err)
	}
	checkThreadGone(t, s, "th", "done", "active")
	if !exists(t, g, "acme", "alone") {
		t.Error("DeleteThread removed a generation on no thread")
	}
	_, _, err = th.DeleteThread(ctx, "acme", "th")
	wantKind(t, "DeleteThread again", err, fault.NotFound)
}

// checkThreadGone: nothing is read of acme's thread, nor of gens.
func checkThreadGone(t *testing.T, s store.Store, thread string, gens ...string) {
	t.Helper()
	ctx, th, g := t.Context(), s.Threads(), s.Generations()
	wantKind(t, "GetThread of a deleted thread", errOf(th.GetThread(ctx, "acme", thread)), fault.NotFound)
	wantKind(t, "ThreadItems of a deleted thread", errOf(th.ThreadItems(ctx, "acme", thread, store.ItemRange{After: -1})), fault.NotFound)
	wantKind(t, "a start on a deleted thread", errOf(startOn(t, g, thread, "again", store.Enqueue, t0)), fault.NotFound)
	for _, id := range gens {
		wantKind(t, "Get of a deleted thread's generation", errOf(g.Get(ctx, "acme", id)), fault.NotFound)
		wantKind(t, "Read of a deleted thread's generation", errOf(g.Read(ctx, "acme", id, 0, 0)), fault.NotFound)
		wantKind(t, "Items of a deleted thread's generation", errOf(g.Items(ctx, "acme", id, -1, 0)), fault.NotFound)
		wantKind(t, "Agent of a deleted thread's generation", errOf(g.Agent(ctx, "acme", id)), fault.NotFound)
		wantKind(t, "the paused checkpoint of a deleted thread's generation", errOf(s.Get(ctx, "acme", id)), fault.NotFound)
	}
}

// testThreadTenants: another tenant's thread is not found, with the same
// error as one that exists nowhere, whatever it asks; the same id in two
// tenants is two threads.
func testThreadTenants(t *testing.T, db DB) {
	th, g := threadsOf(t, db)
	ctx := t.Context()
	nowhere := otherTenantThreadErrors(t, th, g)
	createThread(t, th, "acme", "th", "i0")
	if diff := cmp.Diff(nowhere, otherTenantThreadErrors(t, th, g)); diff != "" {
		t.Errorf("globex's errors for acme's thread differ from those for one nowhere (-nowhere +acme's):\n%s", diff)
	}
	if page, _, err := th.ListThreads(ctx, "globex", store.ThreadListOptions{}); err != nil || len(page) != 0 {
		t.Errorf("globex lists %v, %v; want none", page, err)
	}
	createThread(t, th, "globex", "th", "g0", "g1")
	wantThread(t, th, "th", 1, "")
	if got := allItems(t, th, "globex", "th"); len(got) != 2 || got[0].ID != "g0" {
		t.Errorf("globex's items: %+v", got)
	}
}

// otherTenantThreadErrors are the errors of globex's operations on the
// thread th, each with its kind.
func otherTenantThreadErrors(t *testing.T, th store.Threads, g store.Generations) []string {
	ctx := t.Context()
	_, _, delErr := th.DeleteThread(ctx, "globex", "th")
	_, startErr := g.Create(ctx, store.NewGeneration{Tenant: "globex", ID: "g", Owner: "r", Expires: at(time.Hour), Now: t0,
		Thread: &store.ThreadStart{ID: "th"}})
	var out []string
	for _, err := range []error{
		errOf(th.GetThread(ctx, "globex", "th")),
		errOf(th.ThreadItems(ctx, "globex", "th", store.ItemRange{After: -1})),
		errOf(th.UpdateThread(ctx, "globex", "th", store.ThreadUpdate{Metadata: map[string]string{"x": "y"}, Now: t0})),
		errOf(th.ForkThread(ctx, "globex", "th", "f", -1, nil, 0, t0)),
		delErr, startErr,
	} {
		out = append(out, fmt.Sprintf("%v: %v", fault.KindOf(err), err))
	}
	return out
}

// testThreadLimits: a tenant's threads stop at MaxThreads, forks
// included, and a thread's items at MaxItems, for CreateThread and for a
// start on it: Exhausted, with the limit's QuotaFailure.
func testThreadLimits(t *testing.T, db DB) {
	th, g := threadsOf(t, db)
	ctx := t.Context()
	for i := range 2 {
		check(t, errOf(th.CreateThread(ctx, store.NewThread{Tenant: "acme", ID: fmt.Sprint("th", i), MaxThreads: 2, Now: t0,
			Items: []store.ThreadItem{titem("a", "a"), titem("b", "b")}})))
	}
	wantQuota(t, "a third thread", errOf(th.CreateThread(ctx, store.NewThread{Tenant: "acme", ID: "th2", MaxThreads: 2, Now: t0})))
	wantQuota(t, "a fork past the limit", errOf(th.ForkThread(ctx, "acme", "th0", "fork", -1, nil, 2, t0)))
	check(t, errOf(th.CreateThread(ctx, store.NewThread{Tenant: "globex", ID: "th2", MaxThreads: 2, Now: t0})))
	wantQuota(t, "more items than MaxItems", errOf(th.CreateThread(ctx, store.NewThread{Tenant: "acme", ID: "big", MaxItems: 1, Now: t0,
		Items: []store.ThreadItem{titem("a", "a"), titem("b", "b")}})))
	start := func(max int64) error {
		_, err := g.Create(ctx, store.NewGeneration{Tenant: "acme", ID: "g", Owner: "r", Expires: at(time.Hour), Now: t0,
			Thread: &store.ThreadStart{ID: "th0", MaxItems: max}})
		return err
	}
	wantQuota(t, "a start on a thread at MaxItems", start(2))
	errorIf(t, "a start on a thread below MaxItems", start(3))
}

func wantQuota(t *testing.T, what string, err error) {
	t.Helper()
	var f *fault.Error
	if !errors.As(err, &f) || f.Kind != fault.Exhausted || len(f.Quota) == 0 {
		t.Errorf("%s: %v; want Exhausted with a QuotaFailure", what, err)
	}
}

// testThreadStarts: a start on a thread that no generation holds takes
// it; one on a thread held is refused (Reject, naming the holder), or
// queued behind the others (Enqueue), or ahead of them, the holder
// marked interrupted (Interrupt). A queued generation keeps what Create
// gave it but holds no lease: no Acquire or Adopt takes it, and List
// tells it from the running ones.
func testThreadStarts(t *testing.T, db DB) {
	th, g := threadsOf(t, db)
	ctx := t.Context()
	createThread(t, th, "acme", "th", "i0")
	c, err := startOn(t, g, "th", "g1", store.Reject, t0)
	wantStart(t, "a start on a free thread", c, err, holding(1))
	got := must[store.Generation](t, "Get")(g.Get(ctx, "acme", "g1"))
	if got.Thread != "th" || got.ThreadBase != 1 || got.State != store.Running || got.Lease.Owner != "r1" || got.Interrupted {
		t.Errorf("the generation holding the thread: %+v", got)
	}
	_, err = startOn(t, g, "th", "g2", store.Reject, t0)
	var f *fault.Error
	if !errors.As(err, &f) || f.Kind != fault.FailedPrecondition || f.Reason != store.ThreadBusy || f.Metadata["generation_id"] != "g1" {
		t.Errorf("a rejected start: %#v; want FailedPrecondition, %s naming g1", err, store.ThreadBusy)
	}
	wantKind(t, "Get of a rejected start", errOf(g.Get(ctx, "acme", "g2")), fault.NotFound)
	for _, id := range []string{"e1", "e2"} {
		c, err = startOn(t, g, "th", id, store.Enqueue, t0)
		wantStart(t, "an enqueued start", c, err, queuedBehind("g1"))
	}
	checkQueued(t, g, "e1")
	c, err = startOn(t, g, "th", "i1", store.Interrupt, t0)
	wantStart(t, "an interrupting start", c, err, queuedBehind("g1"))
	wantThread(t, th, "th", 1, "g1", "i1", "e1", "e2")
	if got := must[store.Generation](t, "Get")(g.Get(ctx, "acme", "g1")); !got.Interrupted || got.State != store.Running {
		t.Errorf("the interrupted generation: %+v", got)
	}
	want := []store.Interruption{{Tenant: "acme", ID: "g1", State: store.Running, Owner: "r1"}}
	if got := must[[]store.Interruption](t, "Interrupted")(th.Interrupted(ctx, "r1", 10)); !cmp.Equal(got, want) {
		t.Errorf("Interrupted: %+v; want %+v", got, want)
	}
	check(t, errOf(startOn(t, g, "th", "i2", store.Interrupt, t0)))
	wantThread(t, th, "th", 1, "g1", "i2", "i1", "e1", "e2")
	checkListedQueued(t, g)
}

// checkQueued: acme's queued generation id keeps its checkpoint and log
// but has no lease, and neither Acquire nor Adopt takes it.
func checkQueued(t *testing.T, g store.Generations, id string) {
	t.Helper()
	ctx := t.Context()
	got := must[store.Generation](t, "Get")(g.Get(ctx, "acme", id))
	if got.State != store.Queued || got.Lease != (store.Lease{}) || got.Thread != "th" || got.ThreadBase != 0 || string(got.Checkpoint) != id {
		t.Errorf("a queued generation: %+v", got)
	}
	checkLog(t, "a queued generation's log", g, "acme", id, seqs(1, ev("started", id)))
	_, err := g.Acquire(ctx, "acme", id, "r2", at(time.Hour), at(2*time.Hour))
	wantKind(t, "Acquire of a queued generation", err, fault.Conflict)
	if adopted := must[[]store.Generation](t, "Adopt")(g.Adopt(ctx, "r2", at(time.Minute), at(time.Hour), 10)); len(adopted) != 0 {
		t.Errorf("Adopt took %+v; want none", adopted)
	}
	_, err = g.Checkpoint(ctx, "acme", id, 0, store.Checkpoint{State: store.Running, Now: t0})
	wantKind(t, "a Checkpoint of a queued generation", err, fault.Conflict)
}

// checkListedQueued: List tells the queued generations from the running
// one.
func checkListedQueued(t *testing.T, g store.Generations) {
	t.Helper()
	for _, tt := range []struct {
		states []store.State
		want   []string
	}{
		{[]store.State{store.Queued}, []string{"i2", "i1", "e2", "e1"}},
		{[]store.State{store.Running}, []string{"g1"}},
		{[]store.State{store.Running, store.Queued}, []string{"i2", "i1", "g1", "e2", "e1"}},
	} {
		page, _, err := g.List(t.Context(), "acme", store.ListOptions{States: tt.states})
		var ids []string
		for _, x := range page {
			ids = append(ids, x.ID)
			if !slices.Contains(tt.states, x.State) {
				t.Errorf("List(%v) listed %s %s", tt.states, x.ID, x.State)
			}
		}
		slices.Sort(ids)
		want := slices.Sorted(slices.Values(tt.want))
		if err != nil || !slices.Equal(ids, want) {
			t.Errorf("List(%v) = %v, %v; want %v", tt.states, ids, err, want)
		}
	}
}

// testThreadFinish: the Finish of the generation holding a thread
// appends its items, numbered on, once: a retry appends nothing, nor
// does a Finish under a lost lease. The first generation queued then
// holds the thread, running under a released lease that Adopt takes at
// once, its conversation starting with every item; and so on, in the
// queue's order, until none is left.
func testThreadFinish(t *testing.T, db DB) {
	th, g := threadsOf(t, db)
	ctx := t.Context()
	createThread(t, th, "acme", "th", "i0")
	check(t, errOf(startOn(t, g, "th", "g1", store.Reject, t0)))
	check(t, errOf(startOn(t, g, "th", "e1", store.Enqueue, t0)))
	check(t, errOf(startOn(t, g, "th", "e2", store.Enqueue, t0)))
	appended := []store.ThreadItem{titem("a1", "x"), titem("a2", "y")}
	outcome := store.Outcome{State: store.Completed, Now: at(time.Second), Thread: &store.ThreadAppend{Items: appended}}
	wantKind(t, "a Finish under a lost lease", errOf(g.Finish(ctx, "acme", "g1", 2, outcome)), fault.Conflict)
	wantThread(t, th, "th", 1, "g1", "e1", "e2")
	check(t, errOf(g.Finish(ctx, "acme", "g1", 1, outcome)))
	check(t, errOf(g.Finish(ctx, "acme", "g1", 1, outcome)))
	wantThread(t, th, "th", 3, "e1", "e2")
	want := []store.ThreadItem{stored(titem("i0", "i0!"), 0, "", t0), stored(appended[0], 1, "g1", at(time.Second)), stored(appended[1], 2, "g1", at(time.Second))}
	if diff := cmp.Diff(want, allItems(t, th, "acme", "th"), equateItems); diff != "" {
		t.Errorf("the items after g1's Finish, and its retry (-want +got):\n%s", diff)
	}
	if got := must[store.Thread](t, "GetThread")(th.GetThread(ctx, "acme", "th")); !got.UpdatedAt.Equal(at(time.Second)) {
		t.Errorf("the thread's UpdatedAt is %v; want the Finish's", got.UpdatedAt)
	}
	promoted := must[store.Generation](t, "Get")(g.Get(ctx, "acme", "e1"))
	if promoted.State != store.Running || promoted.Lease != (store.Lease{Expires: at(time.Second)}) || promoted.ThreadBase != 3 {
		t.Errorf("the generation promoted: %+v; want running, released at the Finish, base 3", promoted)
	}
	adopted := must[[]store.Generation](t, "Adopt")(g.Adopt(ctx, "r2", at(2*time.Second), at(time.Hour), 10))
	if len(adopted) != 1 || adopted[0].ID != "e1" || adopted[0].Lease.Epoch != 1 || string(adopted[0].Checkpoint) != "e1" {
		t.Fatalf("Adopt took %+v; want e1, epoch 1", adopted)
	}
	// e1 fails and keeps nothing: e2 starts from the same items.
	check(t, errOf(g.Finish(ctx, "acme", "e1", 1, store.Outcome{State: store.Failed, Now: at(3 * time.Second)})))
	wantThread(t, th, "th", 3, "e2")
	acquired := must[store.Generation](t, "Acquire")(g.Acquire(ctx, "acme", "e2", "r3", at(3*time.Second), at(time.Hour)))
	if acquired.ThreadBase != 3 || acquired.Lease.Epoch != 1 {
		t.Errorf("e2 acquired: %+v", acquired)
	}
	check(t, errOf(g.Finish(ctx, "acme", "e2", 1, store.Outcome{State: store.Completed, Now: at(4 * time.Second),
		Thread: &store.ThreadAppend{Items: []store.ThreadItem{titem("b1", "z")}}})))
	wantThread(t, th, "th", 4, "")
	c, err := startOn(t, g, "th", "g3", store.Reject, at(5*time.Second))
	wantStart(t, "a start once the queue is done", c, err, holding(4))
}

// testThreadInterruptOrder: interrupting starts run before the queued
// ones, the latest first; the generation interrupted is listed by
// Interrupted until it ends; a start queued once another holds the
// thread is behind that one.
func testThreadInterruptOrder(t *testing.T, db DB) {
	th, g := threadsOf(t, db)
	ctx := t.Context()
	createThread(t, th, "acme", "th")
	check(t, errOf(startOn(t, g, "th", "g1", store.Reject, t0)))
	check(t, errOf(startOn(t, g, "th", "e1", store.Enqueue, t0)))
	check(t, errOf(startOn(t, g, "th", "i1", store.Interrupt, t0)))
	check(t, errOf(startOn(t, g, "th", "i2", store.Interrupt, t0)))
	check(t, errOf(g.Finish(ctx, "acme", "g1", 1, store.Outcome{State: store.Cancelled, Now: at(time.Second)})))
	if got := must[[]store.Interruption](t, "Interrupted")(th.Interrupted(ctx, "r1", 10)); len(got) != 0 {
		t.Errorf("Interrupted after the generation ended: %+v", got)
	}
	c, err := startOn(t, g, "th", "e2", store.Enqueue, at(time.Second))
	wantStart(t, "a start once the interrupting one holds the thread", c, err, queuedBehind("i2"))
	var order []string
	for i := range 4 {
		now := at(time.Duration(2+i) * time.Second)
		adopted := must[[]store.Generation](t, "Adopt")(g.Adopt(ctx, "r2", now, at(time.Hour), 10))
		if len(adopted) != 1 {
			t.Fatalf("Adopt took %d; want the one holding the thread", len(adopted))
		}
		order = append(order, adopted[0].ID)
		check(t, errOf(g.Finish(ctx, "acme", adopted[0].ID, 1, store.Outcome{State: store.Completed, Now: now})))
	}
	if want := []string{"i2", "i1", "e1", "e2"}; !slices.Equal(order, want) {
		t.Errorf("ran %v; want %v", order, want)
	}
	wantThread(t, th, "th", 0, "")
}

// testInterruptedOwners: Interrupted lists for a replica the interrupted
// generations whose lease it holds, and the paused ones whose lease is
// released or has lapsed by the store's clock, whoever held it; not
// another replica's running or waiting ones, lapsed or not, nor its
// paused ones under a lease that runs; by lease expiry, then id, up to
// the limit.
func testInterruptedOwners(t *testing.T, db DB) {
	th, g := threadsOf(t, db)
	ctx := t.Context()
	later := at(3 * time.Hour)
	for _, x := range []struct {
		id, owner string
		expires   time.Time
		state     store.State
		release   bool
	}{
		{"mine", "r1", at(time.Hour), store.Running, false},
		{"mine-waiting", "r1", at(2 * time.Hour), store.Waiting, false},
		{"released", "r2", later, store.Paused, true},
		{"lapsed", "r2", ago, store.Paused, false},
		{"paused-held", "r2", later, store.Paused, false},
		{"theirs", "r2", later, store.Running, false},
		{"theirs-lapsed", "r2", ago.Add(time.Second), store.Running, false},
	} {
		createThread(t, th, "acme", x.id)
		check(t, errOf(g.Create(ctx, store.NewGeneration{Tenant: "acme", ID: x.id, Owner: x.owner, Expires: x.expires, Now: t0,
			Thread: &store.ThreadStart{ID: x.id}})))
		check(t, errOf(g.Checkpoint(ctx, "acme", x.id, 1, store.Checkpoint{State: x.state, Now: t0})))
		if x.release {
			check(t, g.Release(ctx, "acme", x.id, 1, t0))
		}
		check(t, errOf(startOn(t, g, x.id, x.id+"-next", store.Interrupt, t0)))
	}
	for _, tt := range []struct {
		owner string
		limit int
		want  []string
	}{
		{"r1", 10, []string{"lapsed", "released", "mine", "mine-waiting"}},
		{"r1", 2, []string{"lapsed", "released"}},
		{"r2", 10, []string{"lapsed", "theirs-lapsed", "released", "paused-held", "theirs"}},
		{"r3", 10, []string{"lapsed", "released"}},
	} {
		var ids []string
		for _, in := range must[[]store.Interruption](t, "Interrupted")(th.Interrupted(ctx, tt.owner, tt.limit)) {
			ids = append(ids, in.ID)
		}
		if !slices.Equal(ids, tt.want) {
			t.Errorf("Interrupted(%s, %d) = %v; want %v", tt.owner, tt.limit, ids, tt.want)
		}
	}
}

// testThreadExpirePaused: a paused generation holding a thread that
// ExpirePaused ends gives the thread up, appending nothing (it keeps no
// input), to the first one queued.
func testThreadExpirePaused(t *testing.T, db DB) {
	th, g := threadsOf(t, db)
	ctx := t.Context()
	createThread(t, th, "acme", "th", "i0")
	check(t, errOf(startOn(t, g, "th", "g1", store.Reject, t0)))
	check(t, errOf(g.Checkpoint(ctx, "acme", "g1", 1, store.Checkpoint{State: store.Paused, Now: t0})))
	check(t, g.Release(ctx, "acme", "g1", 1, t0))
	check(t, errOf(startOn(t, g, "th", "e1", store.Enqueue, t0)))
	if n := must[int](t, "ExpirePaused")(g.ExpirePaused(ctx, at(time.Minute), []byte("expired"))); n != 1 {
		t.Errorf("ExpirePaused ended %d; want 1", n)
	}
	wantThread(t, th, "th", 1, "e1")
	if got := must[store.Generation](t, "Get")(g.Get(ctx, "acme", "e1")); got.State != store.Running || got.ThreadBase != 1 ||
		!got.Lease.Expires.Equal(at(time.Minute)) {
		t.Errorf("the generation promoted: %+v", got)
	}
}

// testThreadKeepInput: a generation started with KeepInput whose pause
// runs out while it holds its thread leaves that input on the thread,
// after its items, as its own; so does one queued with it that the
// store promoted before its pause ran out. Finish appends what its
// Outcome gives, never the input. The input goes with its generation
// (Sweep, DeleteThread): the same ids store theirs again.
func testThreadKeepInput(t *testing.T, db DB) {
	th, g := threadsOf(t, db)
	ctx := t.Context()
	createThread(t, th, "acme", "th", "i0")
	input := map[string][]store.ThreadItem{
		"g1": {titem("in1", "one"), titem("in2", "two")},
		"e1": {titem("q1", "queued")},
		"e2": {titem("q2", "never")},
	}
	start := func(id string, m store.Multitask) (store.Created, error) {
		return g.Create(ctx, store.NewGeneration{Tenant: "acme", ID: id, Owner: "r1", Expires: at(time.Hour), Now: t0,
			Thread: &store.ThreadStart{ID: "th", Multitask: m, KeepInput: input[id]}})
	}
	c, err := start("g1", store.Reject)
	wantStart(t, "a start keeping its input", c, err, holding(1))
	for _, id := range []string{"e1", "e2"} {
		check(t, errOf(start(id, store.Enqueue)))
	}
	expirePause(t, g, "g1", 1, at(time.Minute))
	wantThread(t, th, "th", 3, "e1", "e2")
	adopted := must[[]store.Generation](t, "Adopt")(g.Adopt(ctx, "r2", at(2*time.Minute), at(time.Hour), 10))
	if len(adopted) != 1 || adopted[0].ID != "e1" || adopted[0].ThreadBase != 3 {
		t.Fatalf("Adopt took %+v; want e1, base 3", adopted)
	}
	expirePause(t, g, "e1", 1, at(3*time.Minute))
	wantThread(t, th, "th", 4, "e2")
	acquired := must[store.Generation](t, "Acquire")(g.Acquire(ctx, "acme", "e2", "r2", at(4*time.Minute), at(time.Hour)))
	check(t, errOf(g.Finish(ctx, "acme", "e2", acquired.Lease.Epoch, store.Outcome{State: store.Failed, Now: at(5 * time.Minute)})))
	wantThread(t, th, "th", 4, "")
	want := []store.ThreadItem{stored(titem("i0", "i0!"), 0, "", t0),
		stored(input["g1"][0], 1, "g1", at(time.Minute)), stored(input["g1"][1], 2, "g1", at(time.Minute)),
		stored(input["e1"][0], 3, "e1", at(3*time.Minute))}
	if diff := cmp.Diff(want, allItems(t, th, "acme", "th"), equateItems); diff != "" {
		t.Errorf("the items (-want +got):\n%s", diff)
	}

	if n := must[int](t, "Sweep")(g.Sweep(ctx, at(time.Hour))); n != 3 {
		t.Errorf("Sweep removed %d; want 3", n)
	}
	check(t, errOf(start("g1", store.Reject)))
	_, _, err = th.DeleteThread(ctx, "acme", "th")
	check(t, err)
	createThread(t, th, "acme", "th")
	c, err = start("g1", store.Reject)
	wantStart(t, "a start keeping its input again, once the thread was deleted", c, err, holding(0))
}

// expirePause pauses acme's generation id, under the lease of epoch,
// releases it, and has ExpirePaused end it at now.
func expirePause(t *testing.T, g store.Generations, id string, epoch int64, now time.Time) {
	t.Helper()
	ctx := t.Context()
	check(t, errOf(g.Checkpoint(ctx, "acme", id, epoch, store.Checkpoint{State: store.Paused, Now: now})))
	check(t, g.Release(ctx, "acme", id, epoch, now))
	if n := must[int](t, "ExpirePaused")(g.ExpirePaused(ctx, now, []byte("expired"))); n != 1 {
		t.Errorf("ExpirePaused ended %d; want %s alone", n, id)
	}
}

// testConcurrentThreadStarts: of starts on one thread at once, on
// several replicas, exactly one holds it: with Enqueue the others are
// queued behind it, each once; with Reject they are refused.
func testConcurrentThreadStarts(t *testing.T, db DB) {
	const starts = 12
	handles := make([]store.Generations, 3)
	var th store.Threads
	for i := range handles {
		th, handles[i] = threadsOf(t, db)
	}
	for _, m := range []store.Multitask{store.Enqueue, store.Reject} {
		thread := fmt.Sprint("th", m)
		createThread(t, th, "acme", thread)
		var mu sync.Mutex
		var running, queued []string
		var wg sync.WaitGroup
		for i := range starts {
			wg.Go(func() {
				id := fmt.Sprintf("%s-g%02d", thread, i)
				c, err := startOn(t, handles[i%len(handles)], thread, id, m, t0)
				mu.Lock()
				defer mu.Unlock()
				switch {
				case err == nil && c.State == store.Running:
					running = append(running, id)
				case err == nil && c.State == store.Queued:
					queued = append(queued, id)
				case fault.KindOf(err) != fault.FailedPrecondition:
					t.Errorf("%s: %+v, %v", id, c, err)
				}
			})
		}
		wg.Wait()
		checkOneHolds(t, th, thread, m, running, queued)
	}
}

// checkOneHolds: one start holds the thread, and the queue holds the
// queued ones, each once (none with Reject).
func checkOneHolds(t *testing.T, th store.Threads, thread string, m store.Multitask, running, queued []string) {
	t.Helper()
	if len(running) != 1 {
		t.Fatalf("multitask %d: %d starts hold the thread (%v); want 1", m, len(running), running)
	}
	got := must[store.Thread](t, "GetThread")(th.GetThread(t.Context(), "acme", thread))
	want := 0
	if m == store.Enqueue {
		want = 11
	}
	if got.Active != running[0] || len(queued) != want || !cmp.Equal(slices.Sorted(slices.Values(got.Queued)), slices.Sorted(slices.Values(queued))) {
		t.Errorf("multitask %d: the thread is held by %q with queue %v; want %q and the %d queued %v", m, got.Active, got.Queued, running[0], want, queued)
	}
}

// testFinishAmidStarts: the generation holding a thread ends while
// starts on it queue, some interrupting it, on several replicas at once:
// none is lost, none runs twice, and the thread is never left with a
// queue but nobody holding it.
func testFinishAmidStarts(t *testing.T, db DB) {
	const rounds, starts = 4, 6
	handles := make([]store.Generations, 3)
	var th store.Threads
	for i := range handles {
		th, handles[i] = threadsOf(t, db)
	}
	for r := range rounds {
		thread := fmt.Sprint("th", r)
		createThread(t, th, "acme", thread)
		holder := thread + "-holder"
		check(t, errOf(startOn(t, handles[0], thread, holder, store.Reject, t0)))
		var wg sync.WaitGroup
		wg.Go(func() {
			errorIf(t, "Finish", errOf(handles[1].Finish(t.Context(), "acme", holder, 1, store.Outcome{State: store.Completed, Now: t0,
				Thread: &store.ThreadAppend{Items: []store.ThreadItem{titem("a", "a")}}})))
		})
		var ids []string
		for i := range starts {
			id := fmt.Sprintf("%s-g%d", thread, i)
			ids = append(ids, id)
			m := []store.Multitask{store.Enqueue, store.Interrupt}[i%2]
			wg.Go(func() { errorIf(t, "a start", errOf(startOn(t, handles[i%len(handles)], thread, id, m, t0))) })
		}
		wg.Wait()
		got := must[store.Thread](t, "GetThread")(th.GetThread(t.Context(), "acme", thread))
		all := append([]string{got.Active}, got.Queued...)
		if got.ItemCount != 1 || !cmp.Equal(slices.Sorted(slices.Values(all)), ids) {
			t.Errorf("round %d: %d items, held by %q, queue %v; want 1 item, and %v held and queued", r, got.ItemCount, got.Active, got.Queued, ids)
		}
	}
}

// testSweepThreads: SweepThreads removes the threads that expired and,
// given a time, those without an expiry unchanged since before it, with
// their generations, but none that a generation holds.
func testSweepThreads(t *testing.T, db DB) {
	th, g := threadsOf(t, db)
	ctx := t.Context()
	create := func(id string, expires, now time.Time) {
		t.Helper()
		check(t, errOf(th.CreateThread(ctx, store.NewThread{Tenant: "acme", ID: id, ExpiresAt: expires, Now: now})))
	}
	create("expired", at(time.Hour), t0)
	create("idle", time.Time{}, t0)
	create("fresh", time.Time{}, at(2*time.Hour))
	create("later", at(100*time.Hour), t0)
	create("held", at(time.Hour), t0)
	check(t, errOf(startOn(t, g, "expired", "done", store.Reject, t0)))
	check(t, errOf(g.Finish(ctx, "acme", "done", 1, store.Outcome{State: store.Completed, Now: t0})))
	check(t, errOf(startOn(t, g, "held", "live", store.Reject, t0)))

	if n := must[int](t, "SweepThreads")(th.SweepThreads(ctx, at(3*time.Hour), time.Time{})); n != 1 {
		t.Errorf("SweepThreads of the expired: %d; want 1", n)
	}
	wantKind(t, "Get of a swept thread's generation", errOf(g.Get(ctx, "acme", "done")), fault.NotFound)
	if n := must[int](t, "SweepThreads")(th.SweepThreads(ctx, at(3*time.Hour), at(time.Hour))); n != 1 {
		t.Errorf("SweepThreads of the idle: %d; want 1", n)
	}
	if got := listThreadIDs(t, th); !slices.Equal(got, []string{"fresh", "held", "later"}) {
		t.Errorf("left %v; want fresh, held, later", got)
	}
	check(t, errOf(g.Finish(ctx, "acme", "live", 1, store.Outcome{State: store.Completed, Now: at(2 * time.Hour)})))
	if n := must[int](t, "SweepThreads")(th.SweepThreads(ctx, at(3*time.Hour), time.Time{})); n != 1 {
		t.Errorf("SweepThreads once the generation holding it ended: %d; want 1", n)
	}
}

// testSweepThreadBatches: a backlog of more threads than one of
// SweepThreads' transactions removes is removed by one sweep, batch by
// batch, but for those that generations hold.
func testSweepThreadBatches(t *testing.T, db DB) {
	th, g := threadsOf(t, db)
	ctx := t.Context()
	due := 2*store.SweepBatch + 5
	for i := range due + 2 {
		check(t, errOf(th.CreateThread(ctx, store.NewThread{Tenant: "acme", ID: fmt.Sprintf("th%03d", i), ExpiresAt: at(time.Hour), Now: t0})))
	}
	check(t, errOf(startOn(t, g, "th000", "held", store.Reject, t0)))
	check(t, errOf(startOn(t, g, fmt.Sprintf("th%03d", due+1), "held-last", store.Reject, t0)))
	if n := must[int](t, "SweepThreads")(th.SweepThreads(ctx, at(2*time.Hour), time.Time{})); n != due {
		t.Errorf("SweepThreads removed %d; want %d", n, due)
	}
	if got, want := listThreadIDs(t, th), []string{"th000", fmt.Sprintf("th%03d", due+1)}; !slices.Equal(got, want) {
		t.Errorf("left %v; want %v", got, want)
	}
}

// listThreadIDs lists acme's threads' ids, sorted; expiries are in the
// tests' future, not the store's clock's past.
func listThreadIDs(t *testing.T, th store.Threads) []string {
	t.Helper()
	page := must[[]store.Thread](t, "ListThreads")(func() ([]store.Thread, error) {
		page, _, err := th.ListThreads(t.Context(), "acme", store.ThreadListOptions{})
		return page, err
	}())
	var ids []string
	for _, x := range page {
		ids = append(ids, x.ID)
	}
	slices.Sort(ids)
	return ids
}
