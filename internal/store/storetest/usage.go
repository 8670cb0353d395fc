package storetest

import (
	"testing"
	"time"

	"github.com/agentd/agentd/internal/store"
)

// testUsage (X-G1, X-I6): Usage counts what a tenant uses of its limits,
// its own only: its generations running or waiting (not those queued
// behind a thread, which it counts apart, nor finished ones), its pauses
// not expired at now, the generations it created since (finished ones
// too), its threads not expired, and the most items one of them holds.
// Another tenant's records count for nothing; an unknown tenant uses
// nothing. Another replica's handle reads the same.
func testUsage(t *testing.T, db DB) {
	s := open(t, db, 0)
	ctx := t.Context()
	g, th := s.Generations(), s.Threads()
	now := at(10 * time.Minute)
	create := func(tenant, id string, created time.Time, thread *store.ThreadStart) {
		t.Helper()
		check(t, errOf(g.Create(ctx, store.NewGeneration{Tenant: tenant, ID: id, Owner: "r1", Expires: now.Add(time.Hour),
			Checkpoint: []byte(id), Now: created, Thread: thread})))
	}
	createThread(t, th, "acme", "small", "a", "b", "c")
	createThread(t, th, "acme", "large", "a", "b", "c", "d", "e")
	check(t, errOf(th.CreateThread(ctx, store.NewThread{Tenant: "acme", ID: "gone", ExpiresAt: ago, Now: t0,
		Items: []store.ThreadItem{titem("a", "a"), titem("b", "b"), titem("c", "c"), titem("d", "d"), titem("e", "e"), titem("f", "f")}})))
	create("acme", "running", at(9*time.Minute+30*time.Second), nil)
	create("acme", "waiting", t0, nil)
	check(t, errOf(g.Checkpoint(ctx, "acme", "waiting", 1, store.Checkpoint{State: store.Waiting, Now: t0})))
	create("acme", "holds", t0, &store.ThreadStart{ID: "small", Multitask: store.Enqueue})
	create("acme", "queued", at(9*time.Minute+40*time.Second), &store.ThreadStart{ID: "small", Multitask: store.Enqueue})
	create("acme", "done", at(9*time.Minute+50*time.Second), nil)
	check(t, errOf(g.Finish(ctx, "acme", "done", 1, store.Outcome{State: store.Completed, Now: now})))
	check(t, s.Save(ctx, "acme", "paused", []byte("p"), now.Add(time.Hour), 0))
	check(t, s.Save(ctx, "acme", "expired", []byte("p"), now.Add(-time.Second), 0))
	create("globex", "running", now, nil)
	check(t, s.Save(ctx, "globex", "paused", []byte("p"), now.Add(time.Hour), 0))
	createThread(t, th, "globex", "huge", "a", "b", "c", "d", "e", "f", "g")

	other := open(t, db, 0)
	for _, tc := range []struct {
		tenant string
		want   store.TenantUsage
	}{
		{"acme", store.TenantUsage{Running: 3, Queued: 1, Paused: 1, CreatedSince: 3, Threads: 2, LargestThread: 5}},
		{"globex", store.TenantUsage{Running: 1, Paused: 1, CreatedSince: 1, Threads: 1, LargestThread: 7}},
		{"initech", store.TenantUsage{}},
	} {
		for i, r := range []store.Store{s, other} {
			got, err := r.Usage(ctx, tc.tenant, now.Add(-time.Minute), now)
			if err != nil || got != tc.want {
				t.Errorf("X-G1 Usage(%q) on replica %d = %+v, %v; want %+v", tc.tenant, i, got, err, tc.want)
			}
		}
	}
}
