package storetest

import (
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/agentd/agentd/internal/fault"
	"github.com/agentd/agentd/internal/store"
)

func item(n int64, data string) store.Item { return store.Item{N: n, Data: []byte(data)} }

// testItems: a generation's conversation items, written with Create,
// Checkpoint and Finish in the same transaction as the rest of the write;
// its agent, written by Create, replaced by a Checkpoint that gives one,
// dropped by Finish;
// an item written again (a retried write) is left as it was; a write
// refused under a lost lease adds none; Items reads after any number, up
// to a limit, in order; Sweep removes them with their generation.
func testItems(t *testing.T, db DB) {
	g := generations(t, db)
	ctx := t.Context()
	check(t, errOf(g.Create(ctx, store.NewGeneration{Tenant: "acme", ID: "g", Owner: "r1", Expires: at(time.Minute), Now: t0,
		Agent: []byte("agent"), Items: []store.Item{item(0, "system"), item(1, "user")}})))

	check(t, errOf(g.Checkpoint(ctx, "acme", "g", 1, store.Checkpoint{State: store.Running, Data: []byte("cp"), Now: at(time.Second),
		Items: []store.Item{item(2, "assistant")}})))
	wantAgent(t, g, "after a checkpoint that gives none", "agent")
	check(t, errOf(g.Checkpoint(ctx, "acme", "g", 1, store.Checkpoint{State: store.Running, Data: []byte("cp"), Agent: []byte("resealed"), Now: at(time.Second)})))
	wantAgent(t, g, "after a checkpoint that gives one", "resealed")
	// A retry of that write: item 2 stays as first written.
	check(t, errOf(g.Checkpoint(ctx, "acme", "g", 1, store.Checkpoint{State: store.Running, Data: []byte("cp"), Now: at(time.Second),
		Items: []store.Item{item(2, "other"), item(3, "tool")}})))
	wantKind(t, "Checkpoint under a lost lease", errOf(g.Checkpoint(ctx, "acme", "g", 7, store.Checkpoint{State: store.Running, Now: at(time.Second),
		Items: []store.Item{item(4, "stale")}})), fault.Conflict)
	check(t, errOf(g.Finish(ctx, "acme", "g", 1, store.Outcome{State: store.Completed, Now: at(2 * time.Second),
		Items: []store.Item{item(4, "final")}})))

	wantAgent(t, g, "once finished", "")
	want := []store.Item{item(0, "system"), item(1, "user"), item(2, "assistant"), item(3, "tool"), item(4, "final")}
	if got := must[[]store.Item](t, "Items")(g.Items(ctx, "acme", "g", -1, 0)); !cmp.Equal(got, want) {
		t.Errorf("Items: %s", cmp.Diff(want, got))
	}
	if got := must[[]store.Item](t, "Items")(g.Items(ctx, "acme", "g", 1, 2)); !cmp.Equal(got, want[2:4]) {
		t.Errorf("Items after 1, limit 2: %s", cmp.Diff(want[2:4], got))
	}
	if got := must[[]store.Item](t, "Items")(g.Items(ctx, "acme", "g", 4, 0)); len(got) != 0 {
		t.Errorf("Items after the last: %v", got)
	}
	wantKind(t, "Items of another tenant's generation", errOf(g.Items(ctx, "other", "g", -1, 0)), fault.NotFound)
	wantKind(t, "Agent of another tenant's generation", errOf(g.Agent(ctx, "other", "g")), fault.NotFound)

	check(t, errOf(g.Sweep(ctx, at(time.Hour))))
	wantKind(t, "Items of a swept generation", errOf(g.Items(ctx, "acme", "g", -1, 0)), fault.NotFound)
}

func wantAgent(t *testing.T, g store.Generations, when, want string) {
	t.Helper()
	if agent := must[[]byte](t, "Agent")(g.Agent(t.Context(), "acme", "g")); string(agent) != want {
		t.Errorf("the agent %s: %q; want %q", when, agent, want)
	}
}

// testSkip: a write whose first event names a sequence number beyond the
// log's next skips to it (the numbers between are never used), in Append,
// Checkpoint and Finish alike; one that names a number at or below the
// log's end is numbered as any.
func testSkip(t *testing.T, db DB) {
	g := generations(t, db)
	ctx := t.Context()
	check(t, errOf(g.Create(ctx, store.NewGeneration{Tenant: "acme", ID: "g", Owner: "r1", Expires: at(time.Minute), Now: t0, Events: []store.Event{ev("started", "")}})))
	skipped := store.Event{Seq: 10, Kind: "withdrawn"}
	if last := must[int64](t, "Append")(g.Append(ctx, "acme", "g", 1, []store.Event{skipped, ev("delta", "a")})); last != 11 {
		t.Errorf("Append skipping to 10: last %d; want 11", last)
	}
	if last := must[int64](t, "Append")(g.Append(ctx, "acme", "g", 1, []store.Event{{Seq: 3, Kind: "delta"}})); last != 12 {
		t.Errorf("Append naming 3: last %d; want 12", last)
	}
	if last := must[int64](t, "Checkpoint")(g.Checkpoint(ctx, "acme", "g", 1, store.Checkpoint{State: store.Running, Data: []byte("cp"), Now: t0,
		Events: []store.Event{{Seq: 20, Kind: "delta"}}})); last != 20 {
		t.Errorf("Checkpoint skipping to 20: last %d; want 20", last)
	}
	if rec := must[store.Generation](t, "Get")(g.Get(ctx, "acme", "g")); rec.CheckpointSeq != 20 {
		t.Errorf("the checkpoint covers up to %d; want 20", rec.CheckpointSeq)
	}
	if last := must[int64](t, "Finish")(g.Finish(ctx, "acme", "g", 1, store.Outcome{State: store.Completed, Now: t0,
		Events: []store.Event{{Seq: 30, Kind: "completed"}}})); last != 30 {
		t.Errorf("Finish skipping to 30: last %d; want 30", last)
	}
	var got []int64
	for _, e := range logOf(t, g, "acme", "g") {
		got = append(got, e.Seq)
	}
	if want := []int64{1, 10, 11, 12, 20, 30}; !cmp.Equal(got, want) {
		t.Errorf("the log's numbers: %v; want %v", got, want)
	}
}
