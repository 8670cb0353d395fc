package storetest

import (
	"bytes"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/agentd/agentd/internal/fault"
	"github.com/agentd/agentd/internal/store"
)

// The generations' tests: the record, its lease and its fenced writes,
// adoption, List, retention, and the event log. Their
// times are the caller's, as agentd's are: the store reads no clock.

// t0 is the tests' time zero, on a millisecond as the stores keep it.
var t0 = time.UnixMilli(1_800_000_000_000)

func at(d time.Duration) time.Time { return t0.Add(d) }

// generations opens a replica's handle on db.
func generations(t *testing.T, db DB) store.Generations {
	t.Helper()
	return open(t, db, 0).Generations()
}

// wantKind fails t unless err is of kind want.
func wantKind(t *testing.T, what string, err error, want fault.Kind) {
	t.Helper()
	if fault.KindOf(err) != want || err == nil {
		t.Errorf("%s: %v; want %v", what, err, want)
	}
}

func must[T any](t *testing.T, what string) func(T, error) T {
	return func(v T, err error) T {
		t.Helper()
		if err != nil {
			t.Fatalf("%s: %v", what, err)
		}
		return v
	}
}

// check fails t at once on an error.
func check(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}

// errorIf fails t on an error, saying what failed.
func errorIf(t *testing.T, what string, err error) {
	t.Helper()
	if err != nil {
		t.Errorf("%s: %v", what, err)
	}
}

// fatalIf fails t at once on an error, saying what failed.
func fatalIf(t *testing.T, what string, err error) {
	t.Helper()
	if err != nil {
		t.Fatalf("%s: %v", what, err)
	}
}

// errOf is the error of a call that returns a value too, for check.
func errOf[T any](_ T, err error) error { return err }

func ev(kind, data string) store.Event { return store.Event{Kind: kind, Data: []byte(data)} }

// logOf reads the whole of a generation's log, a page at a time.
func logOf(t *testing.T, g store.Generations, tenant, id string) []store.Event {
	t.Helper()
	var out []store.Event
	for after := int64(0); ; after = out[len(out)-1].Seq {
		page, err := g.Read(t.Context(), tenant, id, after, 7)
		if err != nil {
			t.Fatalf("Read(%s, %s): %v", tenant, id, err)
		}
		if len(page) == 0 {
			return out
		}
		out = append(out, page...)
	}
}

// seqs numbers events from first, as the store does.
func seqs(first int64, events ...store.Event) []store.Event {
	out := slices.Clone(events)
	for i := range out {
		out[i].Seq = first + int64(i)
	}
	return out
}

// equateEmpty compares payloads by their bytes (nil and empty alike, and
// quickly: the log holds large ones) and takes no events for none.
var equateEmpty = cmp.Options{
	cmp.Comparer(func(a, b []byte) bool { return bytes.Equal(a, b) }),
	cmp.FilterValues(func(a, b []store.Event) bool { return len(a) == 0 && len(b) == 0 }, cmp.Ignore()),
}

// testGenerationLifecycle: a generation's record from Create to Finish: its
// state, lease, checkpoint and version, the sequence numbers its writes'
// events get, the result kept once it has finished and the checkpoint dropped;
// a retried Finish changes nothing; writes a state refuses are Invalid; the
// record and its log outlive a reopen.
func testGenerationLifecycle(t *testing.T, db DB) {
	s := open(t, db, 0)
	l := &lifecycle{g: s.Generations()}
	l.create(t)
	l.checkpoint(t)
	l.renewAndAppend(t)
	l.finish(t)
	l.finishedRefuses(t)
	wantLog := seqs(1, ev("started", "s"), ev("turn", "t1"), ev("approval", "a"), ev("delta", "d"), ev("done", ""))
	checkLog(t, "the log", l.g, "acme", "g1", wantLog)

	check(t, s.Close())
	l.g = generations(t, db)
	l.get(t, "after reopening")
	checkLog(t, "the log after reopening", l.g, "acme", "g1", wantLog)
}

// lifecycle is testGenerationLifecycle's generation, acme's g1, and the
// record it should have.
type lifecycle struct {
	g    store.Generations
	want store.Generation
}

// get checks the record, when what happened.
func (l *lifecycle) get(t *testing.T, when string) {
	t.Helper()
	got, err := l.g.Get(t.Context(), "acme", "g1")
	if err != nil {
		t.Fatalf("%s: Get: %v", when, err)
	}
	if diff := cmp.Diff(l.want, got, equateEmpty); diff != "" {
		t.Errorf("%s: the record (-want +got):\n%s", when, diff)
	}
}

// create creates the generation, running under replica-1's lease, which
// a second Create of its id cannot replace.
func (l *lifecycle) create(t *testing.T) {
	create := store.NewGeneration{
		Tenant: "acme", ID: "g1", Owner: "replica-1", Expires: at(15 * time.Second),
		Checkpoint: []byte("c0"), Events: []store.Event{ev("started", "s")}, Now: t0,
	}
	check(t, errOf(l.g.Create(t.Context(), create)))
	l.want = store.Generation{
		Tenant: "acme", ID: "g1", State: store.Running,
		Lease:      store.Lease{Owner: "replica-1", Epoch: 1, Expires: at(15 * time.Second)},
		Checkpoint: []byte("c0"), Version: 1, CheckpointSeq: 1, LastSeq: 1,
		CreatedAt: t0, UpdatedAt: t0,
	}
	l.get(t, "after Create")
	wantKind(t, "Create of an id the tenant has", errOf(l.g.Create(t.Context(), create)), fault.Conflict)
}

// checkpoint checkpoints it waiting, with two events; a checkpoint to a
// finished or unknown state, and a Finish in a live or no state, are
// Invalid and change nothing.
func (l *lifecycle) checkpoint(t *testing.T) {
	ctx := t.Context()
	last := must[int64](t, "Checkpoint")(l.g.Checkpoint(ctx, "acme", "g1", 1, store.Checkpoint{
		State: store.Waiting, Data: []byte("c1"), Events: []store.Event{ev("turn", "t1"), ev("approval", "a")}, Now: at(time.Second),
	}))
	if last != 3 {
		t.Errorf("Checkpoint with two events after one: last %d; want 3", last)
	}
	l.want.State, l.want.Checkpoint, l.want.Version, l.want.CheckpointSeq, l.want.LastSeq, l.want.UpdatedAt =
		store.Waiting, []byte("c1"), 2, 3, 3, at(time.Second)
	l.get(t, "after Checkpoint")

	for _, bad := range []store.State{store.Completed, "lost"} {
		_, err := l.g.Checkpoint(ctx, "acme", "g1", 1, store.Checkpoint{State: bad, Data: []byte("x"), Now: t0})
		wantKind(t, fmt.Sprintf("Checkpoint to %q", bad), err, fault.Invalid)
	}
	for _, bad := range []store.State{store.Running, store.Paused, ""} {
		_, err := l.g.Finish(ctx, "acme", "g1", 1, store.Outcome{State: bad, Now: t0})
		wantKind(t, fmt.Sprintf("Finish as %q", bad), err, fault.Invalid)
	}
	l.get(t, "after refused writes")
}

// renewAndAppend renews the lease, which leaves UpdatedAt, and appends
// one event and then none, which leave the checkpoint's sequence number.
func (l *lifecycle) renewAndAppend(t *testing.T) {
	ctx := t.Context()
	fatalIf(t, "Renew", l.g.Renew(ctx, "acme", "g1", 1, at(30*time.Second)))
	l.want.Lease.Expires = at(30 * time.Second)
	l.get(t, "after Renew (which leaves UpdatedAt)")

	if last := must[int64](t, "Append")(l.g.Append(ctx, "acme", "g1", 1, []store.Event{ev("delta", "d")})); last != 4 {
		t.Errorf("Append of one: last %d; want 4", last)
	}
	if last := must[int64](t, "Append")(l.g.Append(ctx, "acme", "g1", 1, nil)); last != 4 {
		t.Errorf("Append of none: last %d; want the log's last, 4", last)
	}
	l.want.LastSeq = 4
	l.get(t, "after Append (which leaves the checkpoint's sequence number)")
}

// finish finishes it completed, keeping the result and dropping the
// checkpoint. A retry of the Finish (its answer was lost) is no error,
// and logs nothing twice; a Finish in another state is a Conflict.
func (l *lifecycle) finish(t *testing.T) {
	ctx := t.Context()
	outcome := store.Outcome{State: store.Completed, Result: []byte("done: 42"), Events: []store.Event{ev("done", "")}, Now: at(2 * time.Second)}
	if last := must[int64](t, "Finish")(l.g.Finish(ctx, "acme", "g1", 1, outcome)); last != 5 {
		t.Errorf("Finish with one event: last %d; want 5", last)
	}
	l.want.State, l.want.Result, l.want.Checkpoint, l.want.LastSeq = store.Completed, []byte("done: 42"), nil, 5
	l.want.Lease = store.Lease{Owner: "", Epoch: 1, Expires: at(2 * time.Second)}
	l.want.UpdatedAt, l.want.FinishedAt = at(2*time.Second), at(2*time.Second)
	l.get(t, "after Finish")

	if last, err := l.g.Finish(ctx, "acme", "g1", 1, outcome); err != nil || last != 5 {
		t.Errorf("Finish again: %d, %v; want 5, nil", last, err)
	}
	_, err := l.g.Finish(ctx, "acme", "g1", 1, store.Outcome{State: store.Failed, Now: at(3 * time.Second)})
	wantKind(t, "Finish again in another state", err, fault.Conflict)
	l.get(t, "after Finish again")
}

// finishedRefuses: a finished generation takes no more writes, and no
// lease.
func (l *lifecycle) finishedRefuses(t *testing.T) {
	ctx, g := t.Context(), l.g
	_, err := g.Checkpoint(ctx, "acme", "g1", 1, store.Checkpoint{State: store.Running, Now: at(3 * time.Second)})
	wantKind(t, "Checkpoint of a finished generation", err, fault.Conflict)
	_, err = g.Append(ctx, "acme", "g1", 1, []store.Event{ev("late", "")})
	wantKind(t, "Append to a finished generation", err, fault.Conflict)
	wantKind(t, "Renew of a finished generation", g.Renew(ctx, "acme", "g1", 1, at(time.Hour)), fault.Conflict)
	wantKind(t, "Release of a finished generation", g.Release(ctx, "acme", "g1", 1, at(time.Hour)), fault.Conflict)
	_, err = g.Acquire(ctx, "acme", "g1", "replica-2", at(time.Hour), at(2*time.Hour))
	wantKind(t, "Acquire of a finished generation", err, fault.Conflict)
	l.get(t, "after writes to the finished generation")
}

// checkLog checks tenant's log of id against want.
func checkLog(t *testing.T, what string, g store.Generations, tenant, id string, want []store.Event) {
	t.Helper()
	if diff := cmp.Diff(want, logOf(t, g, tenant, id), equateEmpty); diff != "" {
		t.Errorf("%s (-want +got):\n%s", what, diff)
	}
}

// testGenerationTenants: one tenant never sees, acquires or writes another's
// generation: to it, another tenant's generation is not found, with the same
// error as an id that exists nowhere; its fenced writes are refused and change
// nothing. The same id in two tenants is two generations, with two logs.
func testGenerationTenants(t *testing.T, db DB) {
	g := generations(t, db)
	ctx := t.Context()
	nowhere := otherTenantErrors(t, g)
	for _, e := range nowhere {
		if !strings.HasPrefix(e, fault.NotFound.String()) {
			t.Errorf("an id that exists nowhere: %s; want NotFound", e)
		}
	}
	check(t, errOf(g.Create(ctx, store.NewGeneration{
		Tenant: "acme", ID: "g", Owner: "r", Expires: at(time.Second),
		Checkpoint: []byte("acme's"), Events: []store.Event{ev("started", "acme")}, Now: t0,
	})))

	if diff := cmp.Diff(nowhere, otherTenantErrors(t, g)); diff != "" {
		t.Errorf("globex's errors for acme's generation differ from those for an id that exists nowhere (-nowhere +acme's):\n%s", diff)
	}
	checkOtherTenantWritesNothing(t, g)
	checkSameIDTwoTenants(t, g)
}

// otherTenantErrors are the errors of globex's Get, Read and Acquire of
// the id g, each with its kind.
func otherTenantErrors(t *testing.T, g store.Generations) []string {
	ctx := t.Context()
	_, getErr := g.Get(ctx, "globex", "g")
	_, readErr := g.Read(ctx, "globex", "g", 0, 0)
	_, acqErr := g.Acquire(ctx, "globex", "g", "r", at(time.Hour), at(2*time.Hour))
	out := []string{}
	for _, err := range []error{getErr, readErr, acqErr} {
		out = append(out, fmt.Sprintf("%v: %v", fault.KindOf(err), err))
	}
	return out
}

// checkOtherTenantWritesNothing: globex lists none of acme's generation
// g, its fenced writes to it are refused, its sweep passes it over, and
// none of that changes it.
func checkOtherTenantWritesNothing(t *testing.T, g store.Generations) {
	ctx := t.Context()
	before := must[store.Generation](t, "Get")(g.Get(ctx, "acme", "g"))
	if page, _, err := g.List(ctx, "globex", store.ListOptions{}); err != nil || len(page) != 0 {
		t.Errorf("globex lists %d generations, %v; want none", len(page), err)
	}
	_, err := g.Checkpoint(ctx, "globex", "g", 1, store.Checkpoint{State: store.Running, Data: []byte("x"), Now: at(time.Minute)})
	wantKind(t, "globex's Checkpoint", err, fault.Conflict)
	_, err = g.Append(ctx, "globex", "g", 1, []store.Event{ev("x", "")})
	wantKind(t, "globex's Append", err, fault.Conflict)
	_, err = g.Finish(ctx, "globex", "g", 1, store.Outcome{State: store.Cancelled, Now: at(time.Minute)})
	wantKind(t, "globex's Finish", err, fault.Conflict)
	wantKind(t, "globex's Renew", g.Renew(ctx, "globex", "g", 1, at(time.Hour)), fault.Conflict)
	wantKind(t, "globex's Release", g.Release(ctx, "globex", "g", 1, at(time.Minute)), fault.Conflict)
	if n, err := g.Sweep(ctx, at(24*time.Hour)); err != nil || n != 0 {
		t.Errorf("Sweep: %d, %v; want 0 (acme's is live)", n, err)
	}
	if after, err := g.Get(ctx, "acme", "g"); err != nil || !cmp.Equal(before, after, equateEmpty) {
		t.Errorf("globex's writes changed acme's generation: %s, %v", cmp.Diff(before, after, equateEmpty), err)
	}
}

// checkSameIDTwoTenants: globex creates the id acme has, and each
// tenant's generation keeps its own checkpoint and log.
func checkSameIDTwoTenants(t *testing.T, g store.Generations) {
	fatalIf(t, "globex's Create of the id acme has", errOf(g.Create(t.Context(), store.NewGeneration{
		Tenant: "globex", ID: "g", Owner: "r", Expires: at(time.Hour),
		Checkpoint: []byte("globex's"), Events: []store.Event{ev("started", "globex")}, Now: t0,
	})))

	for _, tenant := range []string{"acme", "globex"} {
		got := must[store.Generation](t, "Get")(g.Get(t.Context(), tenant, "g"))
		if string(got.Checkpoint) != tenant+"'s" {
			t.Errorf("%s's generation holds %q", tenant, got.Checkpoint)
		}
		checkLog(t, tenant+"'s log", g, tenant, "g", seqs(1, ev("started", tenant)))
	}
}

// testGenerationFencing: the lease fences every write. A replica that lost its
// lease (another acquired it after it expired, with the next epoch) has every
// write refused with Conflict, and they change nothing; a live lease cannot be
// acquired; a released lease fences its holder too and frees the generation at
// once: a released paused generation for a resume's Acquire, a released
// running one for Adopt. The epoch alone fences: a lease that expired but that
// nobody took is still its holder's.
func testGenerationFencing(t *testing.T, db DB) {
	g := generations(t, db)
	ctx := t.Context()
	check(t, errOf(g.Create(ctx, store.NewGeneration{
		Tenant: "acme", ID: "g", Owner: "r1", Expires: at(15 * time.Second), Checkpoint: []byte("c0"), Now: t0,
	})))

	_, err := g.Acquire(ctx, "acme", "g", "r2", at(15*time.Second-time.Millisecond), at(time.Minute))
	wantKind(t, "Acquire of a live lease", err, fault.Conflict)

	// r1's lease expired and nobody took it: it is still r1's.
	fatalIf(t, "Renew of an expired lease that nobody took", g.Renew(ctx, "acme", "g", 1, at(20*time.Second)))

	got, err := g.Acquire(ctx, "acme", "g", "r2", at(20*time.Second), at(35*time.Second))
	if err != nil {
		t.Fatalf("Acquire at the lease's expiry: %v", err)
	}
	if want := (store.Lease{Owner: "r2", Epoch: 2, Expires: at(35 * time.Second)}); !cmp.Equal(got.Lease, want) || string(got.Checkpoint) != "c0" {
		t.Errorf("Acquire returned %+v with checkpoint %q; want lease %+v, checkpoint c0", got.Lease, got.Checkpoint, want)
	}
	check(t, errOf(g.Append(ctx, "acme", "g", 2, []store.Event{ev("by", "r2")})))
	checkLostLeaseWritesNothing(t, g)
	checkReleasedPaused(t, g)
	checkReleasedRunning(t, g)
}

// checkLostLeaseWritesNothing: r1, which lost g's lease to r2 (epoch 2),
// writes nothing: every write is a Conflict, and the record and log stay
// as r2 left them.
func checkLostLeaseWritesNothing(t *testing.T, g store.Generations) {
	t.Helper()
	ctx := t.Context()
	before := must[store.Generation](t, "Get")(g.Get(ctx, "acme", "g"))
	_, err := g.Checkpoint(ctx, "acme", "g", 1, store.Checkpoint{State: store.Running, Data: []byte("stale"), Events: []store.Event{ev("by", "r1")}, Now: at(21 * time.Second)})
	wantKind(t, "the old holder's Checkpoint", err, fault.Conflict)
	_, err = g.Append(ctx, "acme", "g", 1, []store.Event{ev("by", "r1"), ev("by", "r1")})
	wantKind(t, "the old holder's Append", err, fault.Conflict)
	_, err = g.Append(ctx, "acme", "g", 1, nil)
	wantKind(t, "the old holder's empty Append", err, fault.Conflict)
	_, err = g.Finish(ctx, "acme", "g", 1, store.Outcome{State: store.Completed, Result: []byte("stale"), Events: []store.Event{ev("by", "r1")}, Now: at(21 * time.Second)})
	wantKind(t, "the old holder's Finish", err, fault.Conflict)
	wantKind(t, "the old holder's Renew", g.Renew(ctx, "acme", "g", 1, at(time.Hour)), fault.Conflict)
	wantKind(t, "the old holder's Release", g.Release(ctx, "acme", "g", 1, at(21*time.Second)), fault.Conflict)
	wantKind(t, "a future epoch's Renew", g.Renew(ctx, "acme", "g", 3, at(time.Hour)), fault.Conflict)
	if after, err := g.Get(ctx, "acme", "g"); err != nil || !cmp.Equal(before, after, equateEmpty) {
		t.Errorf("the old holder's writes changed the record: %s, %v", cmp.Diff(before, after, equateEmpty), err)
	}
	checkLog(t, "the old holder's writes changed the log", g, "acme", "g", seqs(1, ev("by", "r2")))
}

// checkReleasedPaused: r2 pauses g and lets it go: it writes no more,
// Adopt passes it over, and a resume acquires it at once.
func checkReleasedPaused(t *testing.T, g store.Generations) {
	t.Helper()
	ctx := t.Context()
	check(t, errOf(g.Checkpoint(ctx, "acme", "g", 2, store.Checkpoint{State: store.Paused, Data: []byte("paused"), Now: at(22 * time.Second)})))
	check(t, g.Release(ctx, "acme", "g", 2, at(22*time.Second)))
	_, err := g.Append(ctx, "acme", "g", 2, []store.Event{ev("after", "release")})
	wantKind(t, "Append after Release", err, fault.Conflict)
	wantKind(t, "Renew after Release", g.Renew(ctx, "acme", "g", 2, at(time.Hour)), fault.Conflict)
	if adopted := must[[]store.Generation](t, "Adopt")(g.Adopt(ctx, "r9", at(time.Hour), at(2*time.Hour), 10)); len(adopted) != 0 {
		t.Errorf("Adopt took a paused generation: %+v", adopted)
	}
	got, err := g.Acquire(ctx, "acme", "g", "r3", at(23*time.Second), at(38*time.Second))
	if err != nil || got.Lease.Epoch != 3 || got.State != store.Paused || string(got.Checkpoint) != "paused" {
		t.Fatalf("a resume's Acquire of the released paused generation: %+v, %v; want epoch 3, paused", got, err)
	}
}

// checkReleasedRunning: r3 runs g and lets it go (shutting down): Adopt
// takes it at once, long before r3's lease would have expired.
func checkReleasedRunning(t *testing.T, g store.Generations) {
	t.Helper()
	ctx := t.Context()
	check(t, errOf(g.Checkpoint(ctx, "acme", "g", 3, store.Checkpoint{State: store.Running, Data: []byte("running"), Now: at(24 * time.Second)})))
	check(t, g.Release(ctx, "acme", "g", 3, at(25*time.Second)))
	adopted := must[[]store.Generation](t, "Adopt")(g.Adopt(ctx, "r4", at(25*time.Second), at(40*time.Second), 10))
	if len(adopted) != 1 {
		t.Fatalf("Adopt of the released running generation: %d adopted; want 1", len(adopted))
	}
	if a := adopted[0]; a.Lease.Owner != "r4" || a.Lease.Epoch != 4 || !a.Lease.Expires.Equal(at(40*time.Second)) ||
		string(a.Checkpoint) != "running" || a.State != store.Running {
		t.Errorf("Adopt returned %+v", a)
	}
	_, err := g.Checkpoint(ctx, "acme", "g", 3, store.Checkpoint{State: store.Running, Now: at(26 * time.Second)})
	wantKind(t, "Checkpoint by the holder that released it", err, fault.Conflict)
}

// testConcurrentAcquire: of replicas acquiring one generation at once (a client
// reattaching to two of them, say), exactly one gets it.
func testConcurrentAcquire(t *testing.T, db DB) {
	a, b := generations(t, db), generations(t, db)
	check(t, errOf(a.Create(t.Context(), store.NewGeneration{Tenant: "acme", ID: "g", Owner: "dead", Expires: t0, Now: t0})))
	won := acquireTogether(t, a, b)
	if len(won) != 1 {
		t.Fatalf("%d Acquires won (%v); want 1", len(won), won)
	}
	if got := must[store.Generation](t, "Get")(a.Get(t.Context(), "acme", "g")); got.Lease.Owner != won[0] || got.Lease.Epoch != 2 {
		t.Errorf("the record's lease is %+v; want %s's, epoch 2", got.Lease, won[0])
	}
}

// acquireTogether runs eight Acquires of acme's g at once, on a and b,
// and returns the owners that won; the others lose with Conflict.
func acquireTogether(t *testing.T, a, b store.Generations) []string {
	var mu sync.Mutex
	var won []string
	var wg sync.WaitGroup
	for i := range 8 {
		g := []store.Generations{a, b}[i%2]
		wg.Go(func() {
			owner := fmt.Sprintf("r%d", i)
			got, err := g.Acquire(t.Context(), "acme", "g", owner, at(time.Second), at(time.Minute))
			if err != nil {
				wantKind(t, "a losing Acquire", err, fault.Conflict)
				return
			}
			if got.Lease.Owner != owner || got.Lease.Epoch != 2 {
				t.Errorf("%s acquired %+v", owner, got.Lease)
			}
			mu.Lock()
			won = append(won, owner)
			mu.Unlock()
		})
	}
	wg.Wait()
	return won
}

// testConcurrentAdopt: adopters on several replicas at once, each taking a few
// at a time until none is left, adopt every running or waiting generation
// whose lease expired, of any tenant, each exactly once, with the next epoch;
// they leave live leases, paused generations and finished ones.
func testConcurrentAdopt(t *testing.T, db DB) {
	const replicas = 3
	handles := make([]store.Generations, replicas)
	for i := range handles {
		handles[i] = generations(t, db)
	}
	want := seedAdoption(t, handles[0])
	now, until := at(time.Minute), at(time.Hour+time.Minute)
	got := adoptConcurrently(t, handles, now, until)
	checkAdoptedOnce(t, handles[0], want, got)
	if more := must[[]store.Generation](t, "Adopt")(handles[0].Adopt(t.Context(), "late", now, until, 100)); len(more) != 0 {
		t.Errorf("an Adopt after all took %d more", len(more))
	}
}

// seedAdoption creates, across two tenants, 40 generations whose leases
// expired (a third of them waiting), which it returns as tenant/id, and
// beside them live, paused and finished ones.
func seedAdoption(t *testing.T, g store.Generations) map[string]bool {
	t.Helper()
	ctx := t.Context()
	create := func(tenant, id string, expires time.Time) {
		t.Helper()
		check(t, errOf(g.Create(ctx, store.NewGeneration{Tenant: tenant, ID: id, Owner: "dead", Expires: expires, Checkpoint: []byte(id), Now: t0})))
	}
	want := map[string]bool{}
	for i := range 40 {
		tenant := []string{"acme", "globex"}[i%2]
		id := fmt.Sprintf("expired-%02d", i)
		create(tenant, id, at(time.Duration(i)*time.Millisecond))
		if i%3 == 0 {
			check(t, errOf(g.Checkpoint(ctx, tenant, id, 1, store.Checkpoint{State: store.Waiting, Data: []byte(id), Now: t0})))
		}
		want[tenant+"/"+id] = true
	}
	for i := range 5 {
		create("acme", fmt.Sprintf("live-%d", i), at(time.Hour))
	}
	for i := range 3 {
		id := fmt.Sprintf("paused-%d", i)
		create("acme", id, t0)
		check(t, errOf(g.Checkpoint(ctx, "acme", id, 1, store.Checkpoint{State: store.Paused, Now: t0})))
	}
	for i := range 3 {
		id := fmt.Sprintf("finished-%d", i)
		create("globex", id, t0)
		check(t, errOf(g.Finish(ctx, "globex", id, 1, store.Outcome{State: store.Failed, Now: t0})))
	}
	return want
}

// adoptConcurrently runs two adopters on each handle, each adopting at
// most 3 at a time until none is left, and returns each tenant/id's
// adopters.
func adoptConcurrently(t *testing.T, handles []store.Generations, now, until time.Time) map[string][]string {
	var mu sync.Mutex
	got := map[string][]string{}
	var wg sync.WaitGroup
	for r := range handles {
		for a := range 2 {
			owner := fmt.Sprintf("replica-%d/%d", r, a)
			wg.Go(func() {
				for {
					adopted, err := handles[r].Adopt(t.Context(), owner, now, until, 3)
					if err != nil {
						t.Errorf("%s: Adopt: %v", owner, err)
						return
					}
					if len(adopted) == 0 {
						return
					}
					checkAdoptedBatch(t, owner, until, adopted)
					mu.Lock()
					for _, x := range adopted {
						got[x.Tenant+"/"+x.ID] = append(got[x.Tenant+"/"+x.ID], owner)
					}
					mu.Unlock()
				}
			})
		}
	}
	wg.Wait()
	return got
}

// checkAdopter checks that the record of tenant/id (key) says its adopter
// owner, at the next epoch.
func checkAdopter(t *testing.T, g store.Generations, key, owner string) {
	t.Helper()
	tenant, id, _ := strings.Cut(key, "/")
	if r, err := g.Get(t.Context(), tenant, id); err != nil || r.Lease.Owner != owner || r.Lease.Epoch != 2 {
		t.Errorf("%s: the record's lease is %+v, %v; want %s's", key, r.Lease, err, owner)
	}
}

// checkAdoptedBatch checks what one Adopt returned: at most 3, each with
// owner's lease at the next epoch, until until, and its checkpoint.
func checkAdoptedBatch(t *testing.T, owner string, until time.Time, adopted []store.Generation) {
	if len(adopted) > 3 {
		t.Errorf("%s: Adopt of at most 3 returned %d", owner, len(adopted))
	}
	for _, x := range adopted {
		if x.Lease.Owner != owner || x.Lease.Epoch != 2 || !x.Lease.Expires.Equal(until) || string(x.Checkpoint) != x.ID {
			t.Errorf("%s adopted %s/%s: lease %+v, checkpoint %q", owner, x.Tenant, x.ID, x.Lease, x.Checkpoint)
		}
	}
}

// checkAdoptedOnce checks that exactly the generations in want were
// adopted, each once, and that each record says its adopter.
func checkAdoptedOnce(t *testing.T, g store.Generations, want map[string]bool, got map[string][]string) {
	t.Helper()
	for key, owners := range got {
		if !want[key] {
			t.Errorf("%s was adopted (by %v); its lease had not expired, or it is paused or finished", key, owners)
		} else if len(owners) != 1 {
			t.Errorf("%s was adopted %d times, by %v", key, len(owners), owners)
		}
		checkAdopter(t, g, key, owners[0])
	}
	for key := range want {
		if len(got[key]) == 0 {
			t.Errorf("%s was not adopted", key)
		}
	}
}

// testEventLog: the event log: sequence numbers from 1 without gaps, assigned
// by the store; Read after any sequence number, up to a limit, in order; kinds
// and payloads kept as given; an append under a lost lease logs nothing of its
// batch.
func testEventLog(t *testing.T, db DB) {
	g := generations(t, db)
	ctx := t.Context()
	check(t, errOf(g.Create(ctx, store.NewGeneration{Tenant: "acme", ID: "g", Owner: "r1", Expires: at(time.Second), Now: t0})))
	if events, err := g.Read(ctx, "acme", "g", 0, 0); err != nil || len(events) != 0 {
		t.Errorf("Read of an empty log: %v, %v", events, err)
	}
	want := appendBatchesOf(t, g)
	checkLog(t, "the log", g, "acme", "g", want)
	checkReads(t, g, want)
	wantKind(t, "Read of an unknown generation", errOf(g.Read(ctx, "acme", "unknown", 0, 0)), fault.NotFound)

	check(t, errOf(g.Acquire(ctx, "acme", "g", "r2", at(time.Second), at(time.Minute))))
	_, err := g.Append(ctx, "acme", "g", 1, []store.Event{ev("stale", "1"), ev("stale", "2"), ev("stale", "3")})
	wantKind(t, "Append under the lost lease", err, fault.Conflict)
	if last := must[int64](t, "Append")(g.Append(ctx, "acme", "g", 2, []store.Event{ev("delta", "r2")})); last != int64(len(want))+1 {
		t.Errorf("the new holder's Append: last %d; want %d (the refused batch took no numbers)", last, len(want)+1)
	}
	want = append(want, seqs(int64(len(want))+1, ev("delta", "r2"))...)
	checkLog(t, "the log after a refused batch", g, "acme", "g", want)
}

// appendBatchesOf appends batches of every shape to acme's g (empty and
// nil payloads, a large one, binary, long batches) and returns the log
// they make, each batch's last sequence number checked.
func appendBatchesOf(t *testing.T, g store.Generations) []store.Event {
	var want []store.Event
	for i, batch := range [][]store.Event{
		{ev("delta", "a")},
		{ev("delta", "b"), ev("delta", ""), {Kind: "nil", Data: nil}},
		{ev("big", strings.Repeat("x", 64<<10))},
		{ev("tool_call", `{"name":"search"}`), ev("tool_result", "\x00\xff binary")},
		numbered("long", 8), numbered("longer", 9), numbered("longest", 19),
	} {
		last, err := g.Append(t.Context(), "acme", "g", 1, batch)
		fatalIf(t, fmt.Sprintf("batch %d", i), err)
		want = append(want, seqs(int64(len(want))+1, batch...)...)
		if last != int64(len(want)) {
			t.Errorf("batch %d: last %d; want %d", i, last, len(want))
		}
	}
	return want
}

// checkReads reads acme's g after sequence numbers and up to limits: the
// events after, in order.
func checkReads(t *testing.T, g store.Generations, want []store.Event) {
	for _, tt := range []struct {
		after      int64
		limit      int
		first, end int // want[first:end]
	}{
		{0, 0, 0, len(want)},
		{0, 2, 0, 2},
		{2, 3, 2, 5},
		{5, 100, 5, len(want)},
		{int64(len(want)), 0, 0, 0},
		{100, 0, 0, 0},
		{-5, 1, 0, 1},
	} {
		got, err := g.Read(t.Context(), "acme", "g", tt.after, tt.limit)
		if err != nil {
			t.Errorf("Read(after %d, limit %d): %v", tt.after, tt.limit, err)
			continue
		}
		if diff := cmp.Diff(want[tt.first:tt.end], got, equateEmpty); diff != "" {
			t.Errorf("Read(after %d, limit %d) (-want +got):\n%s", tt.after, tt.limit, diff)
		}
	}
}

// numbered is n events of kind, their data numbered from 1: a batch the
// SQLite store writes in several statements when n > 8.
func numbered(kind string, n int) []store.Event {
	events := make([]store.Event, n)
	for i := range events {
		events[i] = ev(kind, strconv.Itoa(i+1))
	}
	return events
}

// testConcurrentAppends: appenders on several replicas' handles writing one
// generation's log under the same lease at once each get a run of consecutive
// sequence numbers, in their batch's order, and together the log is dense;
// readers following the log meanwhile never see an event while one before it
// is missing.
func testConcurrentAppends(t *testing.T, db DB) {
	const replicas, appenders, batches = 3, 6, 15
	handles := make([]store.Generations, replicas)
	for i := range handles {
		handles[i] = generations(t, db)
	}
	ctx := t.Context()
	check(t, errOf(handles[0].Create(ctx, store.NewGeneration{Tenant: "acme", ID: "g", Owner: "r", Expires: at(time.Hour), Now: t0})))
	written, total := appendBatches(appenders, batches)

	done := make(chan struct{})
	var readers sync.WaitGroup
	for r := range 2 {
		g := handles[r%replicas]
		readers.Go(func() { followLog(t, g, r, total, done) })
	}
	var appending sync.WaitGroup
	for w := range appenders {
		g := handles[w%replicas]
		appending.Go(func() {
			for b := range written[w] {
				last, err := g.Append(ctx, "acme", "g", 1, written[w][b].events)
				if err != nil {
					t.Errorf("appender %d: %v", w, err)
					return
				}
				written[w][b].last = last
			}
		})
	}
	appending.Wait()
	close(done)
	readers.Wait()

	checkAppendedBatches(t, logOf(t, handles[1], "acme", "g"), written, total)
	if got := must[store.Generation](t, "Get")(handles[2].Get(ctx, "acme", "g")); got.LastSeq != int64(total) {
		t.Errorf("the record's LastSeq is %d; want %d", got.LastSeq, total)
	}
}

// checkDense checks that log holds total events, numbered from 1 without
// gaps.
func checkDense(t *testing.T, log []store.Event, total int) {
	t.Helper()
	if len(log) != total {
		t.Fatalf("the log holds %d events; want %d", len(log), total)
	}
	for i, e := range log {
		if e.Seq != int64(i)+1 {
			t.Fatalf("the log's event %d has sequence number %d", i, e.Seq)
		}
	}
}

// appendBatch is one Append's events, and the last sequence number the
// store gave them.
type appendBatch struct {
	events []store.Event
	last   int64
}

// appendBatches makes each appender's batches, of 1 to 3 events, and
// says how many events they hold in all.
func appendBatches(appenders, batches int) (written [][]appendBatch, total int) {
	written = make([][]appendBatch, appenders)
	for w := range appenders {
		for b := range batches {
			n := 1 + (w+b)%3
			var events []store.Event
			for k := range n {
				events = append(events, ev("delta", fmt.Sprintf("w%d-b%d-%d", w, b, k)))
			}
			written[w] = append(written[w], appendBatch{events: events})
			total += n
		}
	}
	return written, total
}

// followLog is reader r following g's log while the appenders run: it
// never sees an event while one before it is missing, and once done is
// closed it has seen all total.
func followLog(t *testing.T, g store.Generations, r, total int, done <-chan struct{}) {
	var seen int64
	finalPass := false
	for {
		n, ok := readAfter(t, g, r, &seen)
		switch {
		case !ok:
			return
		case n > 0:
			continue
		case finalPass:
			if seen != int64(total) {
				t.Errorf("reader %d saw %d events; want %d", r, seen, total)
			}
			return
		}
		select { // poll while the appenders run
		case <-done:
			finalPass = true
		case <-time.After(time.Millisecond):
		}
	}
}

// readAfter is reader r reading a page of the log after *seen, which it
// moves on; it returns how many events it read, and false after a
// failure or a gap.
func readAfter(t *testing.T, g store.Generations, r int, seen *int64) (int, bool) {
	events, err := g.Read(t.Context(), "acme", "g", *seen, 10)
	if err != nil {
		t.Errorf("reader %d: %v", r, err)
		return 0, false
	}
	for _, e := range events {
		if e.Seq != *seen+1 {
			t.Errorf("reader %d read %d after %d: a gap", r, e.Seq, *seen)
			return 0, false
		}
		*seen = e.Seq
	}
	return len(events), true
}

// checkAppendedBatches checks that the log is dense and holds every batch
// where its Append said, in order.
func checkAppendedBatches(t *testing.T, log []store.Event, written [][]appendBatch, total int) {
	t.Helper()
	checkDense(t, log, total)
	for w := range written {
		for b, bt := range written[w] {
			first := bt.last - int64(len(bt.events)) + 1
			if first < 1 || bt.last > int64(total) {
				t.Errorf("appender %d, batch %d: last %d out of range", w, b, bt.last)
				continue
			}
			if diff := cmp.Diff(seqs(first, bt.events...), log[first-1:bt.last], equateEmpty); diff != "" {
				t.Errorf("appender %d, batch %d is not where Append said, in order (-want +got):\n%s", w, b, diff)
			}
		}
	}
}

// testWithdrawnTurn: how a model turn in flight at a crash is withdrawn. The
// owner's checkpoint at the turn boundary says the log's sequence number then;
// the turn's deltas follow it; the owner dies. Its adopter finds the events
// after CheckpointSeq (the partial turn), appends an event that withdraws
// them, and asks the turn again; the dead owner's late writes are refused. A
// client replaying the log from any point sees the partial turn, then its
// withdrawal, then the turn again: what a client watching live saw.
func testWithdrawnTurn(t *testing.T, db DB) {
	r1, r2 := generations(t, db), generations(t, db)
	ctx := t.Context()
	crashMidTurn(t, r1)
	// r1 dies; its lease expires.
	adopted := must[[]store.Generation](t, "Adopt")(r2.Adopt(ctx, "r2", at(16*time.Second), at(31*time.Second), 10))
	if len(adopted) != 1 {
		t.Fatalf("Adopt: %d generations; want 1", len(adopted))
	}
	a := adopted[0]
	if a.CheckpointSeq != 3 || a.LastSeq != 5 || string(a.Checkpoint) != "turn 1 done" {
		t.Fatalf("the adopted record: checkpoint %q at %d, log at %d; want \"turn 1 done\" at 3, log at 5", a.Checkpoint, a.CheckpointSeq, a.LastSeq)
	}
	wantKind(t, "the dead owner's late Append", errOf(r1.Append(ctx, "acme", "g", 1, []store.Event{ev("delta", "late")})), fault.Conflict)
	withdraw := ev("withdrawn", fmt.Sprint(a.CheckpointSeq+1))
	check(t, errOf(r2.Append(ctx, "acme", "g", a.Lease.Epoch, []store.Event{withdraw, ev("delta", "turn 2, again")})))
	check(t, errOf(r2.Finish(ctx, "acme", "g", a.Lease.Epoch, store.Outcome{State: store.Completed, Events: []store.Event{ev("done", "")}, Now: at(17 * time.Second)})))
	want := seqs(1, ev("started", ""), ev("delta", "turn 1"), ev("turn_done", "1"),
		ev("delta", "turn 2, part"), ev("delta", "of it"), withdraw, ev("delta", "turn 2, again"), ev("done", ""))
	checkReplays(t, r1, want)
}

// checkReplays checks what a client reads of acme's g from each point of
// the log: the rest of want.
func checkReplays(t *testing.T, g store.Generations, want []store.Event) {
	for after := range int64(len(want)) {
		got, err := g.Read(t.Context(), "acme", "g", after, 0)
		check(t, err)
		if diff := cmp.Diff(want[after:], got, equateEmpty); diff != "" {
			t.Errorf("a client that saw up to %d reads (-want +got):\n%s", after, diff)
		}
	}
}

// crashMidTurn runs acme's g on g (replica r1) to a checkpoint after its
// first turn, and two deltas of the second.
func crashMidTurn(t *testing.T, g store.Generations) {
	ctx := t.Context()
	check(t, errOf(g.Create(ctx, store.NewGeneration{
		Tenant: "acme", ID: "g", Owner: "r1", Expires: at(15 * time.Second),
		Checkpoint: []byte("turn 0"), Events: []store.Event{ev("started", "")}, Now: t0,
	})))

	check(t, errOf(g.Checkpoint(ctx, "acme", "g", 1, store.Checkpoint{
		State: store.Running, Data: []byte("turn 1 done"), Events: []store.Event{ev("delta", "turn 1"), ev("turn_done", "1")}, Now: at(time.Second),
	})))
	check(t, errOf(g.Append(ctx, "acme", "g", 1, []store.Event{ev("delta", "turn 2, part"), ev("delta", "of it")})))
}

// testListPages: List pages through a tenant's generations newest first (by
// creation, then id), each once, with the token of the next page, "" at
// the end; filtered by state; without checkpoints. A generation created
// between pages appears on none of the later ones, and none repeats. A
// token List did not give, or a state that does not exist, is Invalid.
func testListPages(t *testing.T, db DB) {
	g := generations(t, db)
	ctx := t.Context()
	seedListPages(t, g)
	for _, tt := range []struct {
		o         store.ListOptions
		want      []string
		wantPages int
	}{
		{store.ListOptions{}, []string{"g", "f", "e", "d", "c", "b", "a"}, 1},
		{store.ListOptions{PageSize: 3}, []string{"g", "f", "e", "d", "c", "b", "a"}, 3},
		{store.ListOptions{PageSize: 7}, []string{"g", "f", "e", "d", "c", "b", "a"}, 1},
		{store.ListOptions{PageSize: 1}, []string{"g", "f", "e", "d", "c", "b", "a"}, 7},
		{store.ListOptions{PageSize: 2, States: []store.State{store.Completed, store.Failed, store.Cancelled}}, []string{"g", "e", "b"}, 2},
		{store.ListOptions{States: []store.State{store.Running}}, []string{"f", "a"}, 1},
		{store.ListOptions{States: []store.State{store.Paused, store.Waiting}}, []string{"d", "c"}, 1},
	} {
		ids, pages := listAll(t, g, tt.o)
		if !slices.Equal(ids, tt.want) || pages != tt.wantPages {
			t.Errorf("List(%+v): %v in %d pages; want %v in %d", tt.o, ids, pages, tt.want, tt.wantPages)
		}
	}

	first, next, err := g.List(ctx, "acme", store.ListOptions{PageSize: 2})
	if err != nil || len(first) != 2 || next == "" {
		t.Fatalf("the first page: %d, %q, %v", len(first), next, err)
	}
	check(t, errOf(g.Create(ctx, store.NewGeneration{Tenant: "acme", ID: "newer", Owner: "r", Expires: at(time.Hour), Now: at(time.Hour)})))
	ids, _ := listAll(t, g, store.ListOptions{PageSize: 2, PageToken: next})
	if want := []string{"e", "d", "c", "b", "a"}; !slices.Equal(ids, want) {
		t.Errorf("the pages after a generation was created: %v; want %v", ids, want)
	}

	for _, o := range []store.ListOptions{
		{PageToken: "not a token"},
		{PageToken: "bm90LWEtbnVtYmVy"}, // "not-a-number", base64
		{States: []store.State{"lost"}},
	} {
		_, _, err := g.List(ctx, "acme", o)
		wantKind(t, fmt.Sprintf("List(%+v)", o), err, fault.Invalid)
	}
}

// seedListPages creates acme's generations a to g, each created and
// ending up as listed, and globex's a and b.
func seedListPages(t *testing.T, g store.Generations) {
	t.Helper()
	ctx := t.Context()
	for _, x := range []struct {
		id      string
		created time.Duration
		state   store.State
	}{
		{"a", 0, store.Running},
		{"b", time.Second, store.Completed},
		{"c", time.Second, store.Paused}, // the same millisecond as b: by id
		{"d", 2 * time.Second, store.Waiting},
		{"e", 3 * time.Second, store.Failed},
		{"f", 4 * time.Second, store.Running},
		{"g", 5 * time.Second, store.Cancelled},
	} {
		tenants := []string{"acme", "globex"}
		if x.id > "b" {
			tenants = tenants[:1]
		}
		for _, tenant := range tenants {
			check(t, errOf(g.Create(ctx, store.NewGeneration{
				Tenant: tenant, ID: x.id, Owner: "r", Expires: at(time.Hour), Checkpoint: []byte("big checkpoint"),
				Events: []store.Event{ev("started", "")}, Now: at(x.created),
			})))

		}
		switch {
		case x.state.Finished():
			check(t, errOf(g.Finish(ctx, "acme", x.id, 1, store.Outcome{State: x.state, Result: []byte("result of " + x.id), Now: at(time.Minute)})))
		case x.state != store.Running:
			check(t, errOf(g.Checkpoint(ctx, "acme", x.id, 1, store.Checkpoint{State: x.state, Data: []byte("c"), Now: at(time.Minute)})))
		}
	}
}

// listAll lists acme's generations with o, page after page, and returns
// their ids and how many pages they came in; each must be acme's,
// without its checkpoint, and a finished one with its result.
func listAll(t *testing.T, g store.Generations, o store.ListOptions) (ids []string, pages int) {
	t.Helper()
	all := listPages(t, g, o)
	for _, page := range all {
		ids = append(ids, checkPage(t, o.PageSize, page)...)
	}
	return ids, len(all)
}

// listPages lists acme's generations with o, page after page.
func listPages(t *testing.T, g store.Generations, o store.ListOptions) [][]store.Generation {
	t.Helper()
	var pages [][]store.Generation
	for {
		page, next, err := g.List(t.Context(), "acme", o)
		if err != nil {
			t.Fatalf("List(%+v): %v", o, err)
		}
		pages = append(pages, page)
		if next == "" {
			return pages
		}
		if len(pages) > 20 {
			t.Fatal("List does not end")
		}
		o.PageToken = next
	}
}

// checkPage checks a page of at most size (0: any) that List returned,
// and returns its ids.
func checkPage(t *testing.T, size int, page []store.Generation) []string {
	t.Helper()
	if size > 0 && len(page) > size {
		t.Errorf("a page of %d holds %d", size, len(page))
	}
	var ids []string
	for _, x := range page {
		checkListed(t, x)
		ids = append(ids, x.ID)
	}
	return ids
}

// checkListed checks a generation List returned: acme's, without its
// checkpoint, and a finished one with its result.
func checkListed(t *testing.T, x store.Generation) {
	t.Helper()
	if x.Tenant != "acme" || x.Checkpoint != nil || x.LastSeq != 1 || x.CreatedAt.IsZero() {
		t.Errorf("List returned %+v; want acme's, without its checkpoint", x)
	}
	if x.State.Finished() && string(x.Result) != "result of "+x.ID {
		t.Errorf("List returned %s without its result: %q", x.ID, x.Result)
	}
}

// testSweep: Sweep removes the generations that finished at or before the
// time given (now less the retention), of every tenant, with their logs,
// and leaves the rest: later-finished and live ones, however old. Two
// replicas sweeping at once remove each once.
func testSweep(t *testing.T, db DB) {
	a, b := generations(t, db), generations(t, db)
	ctx := t.Context()
	createFinished(t, a, "acme", "at-1h", time.Hour)
	createFinished(t, a, "globex", "at-1h", time.Hour)
	createFinished(t, a, "acme", "at-2h", 2*time.Hour)
	createFinished(t, a, "acme", "live", -1)
	createFinished(t, a, "globex", "live", -1)
	check(t, errOf(a.Checkpoint(ctx, "globex", "live", 1, store.Checkpoint{State: store.Paused, Now: t0})))

	if n := must[int](t, "Sweep")(a.Sweep(ctx, at(time.Hour-time.Millisecond))); n != 0 {
		t.Errorf("Sweep before any finished: %d removed", n)
	}
	sweepTogether(t, a, b, at(time.Hour))
	for _, x := range []struct {
		tenant, id string
		want       bool
	}{{"acme", "at-1h", false}, {"globex", "at-1h", false}, {"acme", "at-2h", true}, {"acme", "live", true}, {"globex", "live", true}} {
		if got := exists(t, a, x.tenant, x.id); got != x.want {
			t.Errorf("after the sweep at 1h, %s/%s exists: %v; want %v", x.tenant, x.id, got, x.want)
		}
	}
	wantKind(t, "Read of a swept generation", errOf(a.Read(ctx, "acme", "at-1h", 0, 0)), fault.NotFound)

	if n := must[int](t, "Sweep")(b.Sweep(ctx, at(1000*time.Hour))); n != 1 {
		t.Errorf("the sweep at 1000h removed %d; want 1 (the live ones stay)", n)
	}
	if !exists(t, a, "acme", "live") || !exists(t, a, "globex", "live") {
		t.Error("a sweep removed a live generation")
	}
	// The log went with its generation: the id made anew starts a log of
	// its own.
	createFinished(t, a, "acme", "at-1h", -1)
	checkLog(t, "the log of a generation made anew after its sweep", a, "acme", "at-1h", seqs(1, ev("started", "at-1h")))
}

// createFinished creates tenant's generation id and, unless finished is
// negative, finishes it completed then.
func createFinished(t *testing.T, g store.Generations, tenant, id string, finished time.Duration) {
	t.Helper()
	check(t, errOf(g.Create(t.Context(), store.NewGeneration{Tenant: tenant, ID: id, Owner: "r", Expires: t0, Events: []store.Event{ev("started", id)}, Now: t0})))
	if finished >= 0 {
		check(t, errOf(g.Finish(t.Context(), tenant, id, 1, store.Outcome{State: store.Completed, Result: []byte("r"), Events: []store.Event{ev("done", id)}, Now: at(finished)})))
	}
}

// sweepTogether sweeps on a and b at once, up to before: between them
// they remove the two generations that finished by then.
func sweepTogether(t *testing.T, a, b store.Generations, before time.Time) {
	var wg sync.WaitGroup
	var n [2]int
	var errs [2]error
	for i, g := range []store.Generations{a, b} {
		wg.Go(func() { n[i], errs[i] = g.Sweep(t.Context(), before) })
	}
	wg.Wait()
	if errs[0] != nil || errs[1] != nil || n[0]+n[1] != 2 {
		t.Errorf("two Sweeps at once removed %v (errors %v); want 2 in all", n, errs)
	}
}

// exists reports whether tenant's generation id exists.
func exists(t *testing.T, g store.Generations, tenant, id string) bool {
	t.Helper()
	_, err := g.Get(t.Context(), tenant, id)
	if err != nil && fault.KindOf(err) != fault.NotFound {
		t.Fatal(err)
	}
	return err == nil
}

// pause records tenant's generation id as a paused one, owned by "r"
// until it released its lease (release) or not; with a pause (its
// paused checkpoint in Checkpoints) expiring at expires unless that is
// zero.
func pause(t *testing.T, s store.Store, tenant, id string, release bool, expires time.Time) {
	t.Helper()
	ctx := t.Context()
	g := s.Generations()
	check(t, errOf(g.Create(ctx, store.NewGeneration{Tenant: tenant, ID: id, Owner: "r", Expires: at(15 * time.Second),
		Checkpoint: []byte("c0"), Agent: []byte("agent of " + id), Events: []store.Event{ev("started", id)}, Now: t0})))

	if !expires.IsZero() {
		check(t, s.Save(ctx, tenant, id, []byte("pause of "+id), expires, 0))
	}
	check(t, errOf(g.Checkpoint(ctx, tenant, id, 1, store.Checkpoint{State: store.Paused, Data: []byte("c1"),
		Events: []store.Event{ev("paused", id)}, Now: at(time.Minute)})))
	if release {
		check(t, g.Release(ctx, tenant, id, 1, at(time.Minute)))
	}
}

// testExpirePaused: ExpirePaused cancels, with the result given, the paused
// generations of every tenant whose pause (their checkpoint in
// Checkpoints, of the same tenant) expired at or before now unclaimed,
// or is gone, and that nobody holds; finished at now, their checkpoint
// and agent dropped, their log and lease kept, no Acquire takes them
// after, and Sweep removes them. It leaves a pause not yet expired (until
// it has), with its agent, one a resume claimed, paused generations under
// a lease (a resume's, or their owner's before it released them),
// running, waiting and finished ones.
func testExpirePaused(t *testing.T, db DB) {
	s := open(t, db, 0)
	g := s.Generations()
	ctx := t.Context()
	now := at(time.Hour)
	ends := seedExpirePaused(t, s, now)
	before := map[string]store.Generation{}
	for key := range ends {
		tenant, id, _ := strings.Cut(key, "/")
		before[key] = must[store.Generation](t, "Get")(g.Get(ctx, tenant, id))
	}

	result := []byte(`{"error":"the pause expired"}`)
	if n := must[int](t, "ExpirePaused")(g.ExpirePaused(ctx, now, result)); n != 5 {
		t.Errorf("ExpirePaused ended %d; want 5", n)
	}
	checkExpired(t, g, ends, before, result, now)
	checkExpireAfter(t, g, result, now)
}

// seedExpirePaused pauses generations whose pause expired by now or did
// not, released, claimed, leased or resumed, and creates live and
// finished ones; it returns, by tenant/id, whether ExpirePaused at now
// ends each.
func seedExpirePaused(t *testing.T, s store.Store, now time.Time) map[string]bool {
	g := s.Generations()
	ctx := t.Context()
	ends := map[string]bool{}
	paused := func(tenant, id string, release bool, expires time.Time, end bool) {
		t.Helper()
		pause(t, s, tenant, id, release, expires)
		ends[tenant+"/"+id] = end
	}
	paused("acme", "expired", true, at(30*time.Minute), true)
	paused("acme", "at-now", true, now, true)
	paused("acme", "gone", true, time.Time{}, true)
	paused("globex", "expired", true, at(30*time.Minute), true)
	paused("acme", "unexpired", true, at(2*time.Hour), false)
	paused("acme", "claimed", true, at(30*time.Minute), false)
	check(t, s.Claim(ctx, "acme", "claimed", 1, []byte("claimed"), at(20*time.Minute), t0))
	paused("acme", "leased", false, at(30*time.Minute), false)
	paused("acme", "resumed", true, at(30*time.Minute), false)
	check(t, errOf(g.Acquire(ctx, "acme", "resumed", "resumer", at(20*time.Minute), at(2*time.Hour))))
	// Another tenant's pause of the same id, not expired, is not this one.
	paused("globex", "shadowed", true, at(30*time.Minute), true)
	check(t, s.Save(ctx, "acme", "shadowed", []byte("acme's"), at(2*time.Hour), 0))
	for _, id := range []string{"running", "waiting", "completed"} {
		check(t, errOf(g.Create(ctx, store.NewGeneration{Tenant: "acme", ID: id, Owner: "r", Expires: at(15 * time.Second), Now: t0})))
		ends["acme/"+id] = false
	}
	check(t, errOf(g.Checkpoint(ctx, "acme", "waiting", 1, store.Checkpoint{State: store.Waiting, Now: t0})))
	check(t, g.Release(ctx, "acme", "waiting", 1, t0))
	check(t, errOf(g.Finish(ctx, "acme", "completed", 1, store.Outcome{State: store.Completed, Result: []byte("done"), Now: at(10 * time.Minute)})))
	return ends
}

// checkExpired checks each generation after ExpirePaused at now: those it
// ends cancelled with result, the others as they were before; an expired
// pause keeps its log and can no longer be resumed.
func checkExpired(t *testing.T, g store.Generations, ends map[string]bool, before map[string]store.Generation, result []byte, now time.Time) {
	for key, end := range ends {
		tenant, id, _ := strings.Cut(key, "/")
		want := before[key]
		if end {
			want.State, want.Result, want.Checkpoint, want.UpdatedAt, want.FinishedAt = store.Cancelled, result, nil, now, now
		}
		if diff := cmp.Diff(want, must[store.Generation](t, "Get")(g.Get(t.Context(), tenant, id)), equateEmpty); diff != "" {
			t.Errorf("%s after ExpirePaused (-want +got):\n%s", key, diff)
		}
	}
	for _, key := range []string{"acme/expired", "globex/expired", "acme/gone", "acme/unexpired", "acme/claimed"} {
		tenant, id, _ := strings.Cut(key, "/")
		want := "agent of " + id
		if ends[key] {
			want = ""
		}
		if got := must[[]byte](t, "Agent")(g.Agent(t.Context(), tenant, id)); string(got) != want {
			t.Errorf("the agent of %s after ExpirePaused: %q; want %q", key, got, want)
		}
	}
	checkLog(t, "the log of an expired pause", g, "acme", "expired", seqs(1, ev("started", "expired"), ev("paused", "expired")))
	_, err := g.Acquire(t.Context(), "acme", "expired", "late-resume", now, at(2*time.Hour))
	wantKind(t, "Acquire of an expired pause", err, fault.Conflict)
}

// checkExpireAfter: ExpirePaused again at now ends nothing more; the
// pause that had not expired ends once it has; finished, they go with the
// retention sweep.
func checkExpireAfter(t *testing.T, g store.Generations, result []byte, now time.Time) {
	ctx := t.Context()
	if n := must[int](t, "ExpirePaused")(g.ExpirePaused(ctx, now, result)); n != 0 {
		t.Errorf("ExpirePaused again ended %d more; want none", n)
	}
	if n := must[int](t, "ExpirePaused")(g.ExpirePaused(ctx, at(2*time.Hour), result)); n != 1 {
		t.Errorf("ExpirePaused at 2h ended %d; want 1", n)
	}
	if got := must[store.Generation](t, "Get")(g.Get(ctx, "acme", "unexpired")); got.State != store.Cancelled || !got.FinishedAt.Equal(at(2*time.Hour)) {
		t.Errorf("the pause that expired at 2h: %s, finished at %v", got.State, got.FinishedAt)
	}
	// The five ended at 1h, and the one completed before.
	if n := must[int](t, "Sweep")(g.Sweep(ctx, now)); n != 6 {
		t.Errorf("the sweep at 1h removed %d; want 6", n)
	}
	wantKind(t, "Get of a swept expired pause", errOf(g.Get(ctx, "globex", "expired")), fault.NotFound)
}

// testConcurrentExpirePaused: of an Acquire (a resume) and ExpirePaused
// running at once on a paused generation whose pause has expired, exactly one
// takes effect: the resume holds it, paused, or it is cancelled and the
// Acquire fails with Conflict. Replicas expiring at once end each generation
// once.
func testConcurrentExpirePaused(t *testing.T, db DB) {
	const n = 24
	sa, sb := open(t, db, 0), open(t, db, 0)
	a, b := sa.Generations(), sb.Generations()
	for i := range n {
		pause(t, sa, "acme", fmt.Sprintf("g%02d", i), true, at(30*time.Minute))
	}
	acquired, expired := raceExpiry(t, a, b, n, at(time.Hour))
	nAcquired := 0
	for i, ok := range acquired {
		if ok {
			nAcquired++
		}
		checkRaced(t, a, i, ok)
	}
	if nAcquired+expired[0]+expired[1] != n {
		t.Errorf("%d acquired, %v expired; want one or the other for each of %d", nAcquired, expired, n)
	}
}

// raceExpiry runs, at once, an Acquire (a resume) of each of n paused
// generations on a or b, and ExpirePaused at now on both; it returns
// which Acquires won, and how many each ExpirePaused ended.
func raceExpiry(t *testing.T, a, b store.Generations, n int, now time.Time) ([]bool, [2]int) {
	ctx := t.Context()
	start := make(chan struct{})
	var wg sync.WaitGroup
	acquired := make([]bool, n)
	var expired [2]int
	for i := range n {
		wg.Go(func() {
			<-start
			_, err := []store.Generations{a, b}[i%2].Acquire(ctx, "acme", fmt.Sprintf("g%02d", i), fmt.Sprintf("r%d", i), now, at(2*time.Hour))
			if err != nil {
				wantKind(t, "a losing Acquire", err, fault.Conflict)
				return
			}
			acquired[i] = true
		})
	}
	for i, g := range []store.Generations{a, b} {
		wg.Go(func() {
			<-start
			var err error
			expired[i], err = g.ExpirePaused(ctx, now, []byte("expired"))
			errorIf(t, "ExpirePaused", err)
		})
	}
	close(start)
	wg.Wait()
	return acquired, expired
}

// checkRaced checks generation i after the race: paused under its
// resumer's lease when its Acquire won, else cancelled and unleased.
func checkRaced(t *testing.T, g store.Generations, i int, acquired bool) {
	id := fmt.Sprintf("g%02d", i)
	got := must[store.Generation](t, "Get")(g.Get(t.Context(), "acme", id))
	switch {
	case acquired:
		if got.State != store.Paused || got.Lease.Owner != fmt.Sprintf("r%d", i) || got.Lease.Epoch != 2 {
			t.Errorf("%s, acquired: %s, lease %+v; want paused, r%d's, epoch 2", id, got.State, got.Lease, i)
		}
	case got.State != store.Cancelled || got.Lease.Owner != "" || got.Lease.Epoch != 1:
		t.Errorf("%s, not acquired: %s, lease %+v; want cancelled, unleased, epoch 1", id, got.State, got.Lease)
	}
}

// logText is tenant's log of id in short, "seq:data" each.
func logText(t *testing.T, g store.Generations, tenant, id string) string {
	var kinds []string
	for _, e := range logOf(t, g, tenant, id) {
		kinds = append(kinds, fmt.Sprintf("%d:%s", e.Seq, e.Data))
	}
	return strings.Join(kinds, " ")
}

// testCheckpointWithLaterEvents: a checkpoint written with the events
// it covers and, in the same write, events after it: the log holds them
// all, in order, and CheckpointSeq is the last one it covers, so a
// replica adopting the generation reads the later ones as what happened
// since.
func testCheckpointWithLaterEvents(t *testing.T, db DB) {
	ctx := t.Context()
	g := generations(t, db)
	check(t, errOf(g.Create(ctx, store.NewGeneration{Tenant: "acme", ID: "g1", Owner: "r1", Expires: at(time.Minute), Events: []store.Event{ev("started", "s")}, Now: t0})))
	last := must[int64](t, "Checkpoint")(g.Checkpoint(ctx, "acme", "g1", 1, store.Checkpoint{
		State: store.Running, Data: []byte("calls"), Events: []store.Event{ev("usage", "u")},
		After: []store.Event{ev("tool_call_started", "a"), ev("tool_call_started", "b")}, Now: at(time.Second),
	}))
	rec := must[store.Generation](t, "Get")(g.Get(ctx, "acme", "g1"))
	if last != 4 || rec.LastSeq != 4 || rec.CheckpointSeq != 2 || string(rec.Checkpoint) != "calls" {
		t.Errorf("after a checkpoint with 1 event covered and 2 after: last %d, record %+v; want the log at 4, the checkpoint at 2", last, rec)
	}
	if got, want := logText(t, g, "acme", "g1"), "1:s 2:u 3:a 4:b"; got != want {
		t.Errorf("the log is %s; want %s", got, want)
	}
	checkOnlyLaterEvents(t, g)
}

// checkOnlyLaterEvents: a checkpoint with only later events covers what
// was there before.
func checkOnlyLaterEvents(t *testing.T, g store.Generations) {
	ctx := t.Context()
	must[int64](t, "Checkpoint")(g.Checkpoint(ctx, "acme", "g1", 1, store.Checkpoint{
		State: store.Running, Data: []byte("c2"), After: []store.Event{ev("text_delta", "t")}, Now: at(2 * time.Second),
	}))
	if rec := must[store.Generation](t, "Get")(g.Get(ctx, "acme", "g1")); rec.CheckpointSeq != 4 || rec.LastSeq != 5 {
		t.Errorf("after a checkpoint with only later events: checkpoint at %d, log at %d; want 4 and 5", rec.CheckpointSeq, rec.LastSeq)
	}
}

// testStateAlone: a Checkpoint without data changes the state alone (a
// generation that pauses): the checkpoint stored stays, and so does its
// CheckpointSeq, though events are appended with it; the version counts
// it. One with data replaces both.
func testStateAlone(t *testing.T, db DB) {
	ctx := t.Context()
	g := generations(t, db)
	check(t, errOf(g.Create(ctx, store.NewGeneration{Tenant: "acme", ID: "g1", Owner: "r1", Expires: at(time.Minute), Checkpoint: []byte("c1"),
		Events: []store.Event{ev("started", "s")}, Now: t0})))

	check(t, errOf(g.Checkpoint(ctx, "acme", "g1", 1, store.Checkpoint{State: store.Running, Data: []byte("c2"), Events: []store.Event{ev("usage", "u")}, Now: at(time.Second)})))
	check(t, errOf(g.Append(ctx, "acme", "g1", 1, []store.Event{ev("approval_request", "a")})))
	check(t, errOf(g.Checkpoint(ctx, "acme", "g1", 1, store.Checkpoint{State: store.Paused, Events: []store.Event{ev("paused", "p")}, Now: at(2 * time.Second)})))
	rec := must[store.Generation](t, "Get")(g.Get(ctx, "acme", "g1"))
	if rec.State != store.Paused || string(rec.Checkpoint) != "c2" || rec.CheckpointSeq != 2 || rec.LastSeq != 4 || rec.Version != 3 {
		t.Errorf("after a change of state alone: %s, checkpoint %q at %d, log at %d, version %d; want paused, c2 at 2, 4, 3",
			rec.State, rec.Checkpoint, rec.CheckpointSeq, rec.LastSeq, rec.Version)
	}
	check(t, errOf(g.Checkpoint(ctx, "acme", "g1", 1, store.Checkpoint{State: store.Paused, Data: []byte{}, Now: at(3 * time.Second)})))
	if rec := must[store.Generation](t, "Get")(g.Get(ctx, "acme", "g1")); len(rec.Checkpoint) != 0 || rec.CheckpointSeq != 4 {
		t.Errorf("after an empty checkpoint: %q at %d; want it empty, at 4", rec.Checkpoint, rec.CheckpointSeq)
	}
}

// testListFilters: List keeps the generations whose provider, model, end
// user or thread is the one asked (each exact), created in the half-open
// range asked, with every filter given at once, in pages, each with its
// Origin as Create recorded it; another tenant's never. A page token is
// bound to the filters it was made with: used with others, Invalid.
func testListFilters(t *testing.T, db DB) {
	s := open(t, db, 0)
	g := s.Generations()
	seedListFilters(t, s)
	ago := time.Second // the range [1s, 3s)
	for _, tt := range []struct {
		o    store.ListOptions
		want []string
	}{
		{store.ListOptions{Provider: "anthropic"}, []string{"d", "c", "a"}},
		{store.ListOptions{Model: "gpt"}, []string{"e", "b"}},
		{store.ListOptions{EndUser: "u1"}, []string{"e", "d", "a"}},
		{store.ListOptions{Thread: "th"}, []string{"c"}},
		{store.ListOptions{CreatedAfter: at(ago), CreatedBefore: at(3 * ago)}, []string{"c", "b"}},
		{store.ListOptions{CreatedAfter: at(3 * ago)}, []string{"e", "d"}},
		{store.ListOptions{CreatedBefore: at(ago)}, []string{"a"}},
		{store.ListOptions{Provider: "anthropic", EndUser: "u1", PageSize: 1}, []string{"d", "a"}},
		{store.ListOptions{Model: "claude", States: []store.State{store.Running}, CreatedAfter: at(ago)}, []string{"c"}},
		{store.ListOptions{Model: "Claude"}, nil},
		{store.ListOptions{Provider: "anthropic", Model: "gpt"}, nil},
	} {
		var ids []string
		for _, x := range slices.Concat(listPages(t, g, tt.o)...) {
			ids = append(ids, x.ID)
			if want := filterOrigins[x.ID]; x.Origin != want {
				t.Errorf("List(%+v) gave %s with %+v; want %+v", tt.o, x.ID, x.Origin, want)
			}
		}
		if !slices.Equal(ids, tt.want) {
			t.Errorf("List(%+v): %v; want %v", tt.o, ids, tt.want)
		}
	}
	if x := must[store.Generation](t, "Get")(g.Get(t.Context(), "acme", "e")); x.Origin != filterOrigins["e"] {
		t.Errorf("Get: origin %+v; want %+v", x.Origin, filterOrigins["e"])
	}
	checkBoundTokens(t, g)
}

// filterOrigins are the origins of seedListFilters' generations.
var filterOrigins = map[string]store.Origin{
	"a": {StartedBy: "alice", EndUser: "u1", Provider: "anthropic", Model: "claude"},
	"b": {StartedBy: "alice", EndUser: "u2", Provider: "openai", Model: "gpt"},
	"c": {StartedBy: "bob", EndUser: "u2", Provider: "anthropic", Model: "claude"},
	"d": {EndUser: "u1", Provider: "anthropic", Model: "haiku"},
	"e": {StartedBy: "bob", EndUser: "u1", Provider: "openai", Model: "gpt", TraceID: "0af7651916cd43dd8448eb211c80319c"},
}

// seedListFilters creates acme's generations a to e, a second apart, c
// on the thread th, and globex's a, of the same origin as acme's.
func seedListFilters(t *testing.T, s store.Store) {
	t.Helper()
	ctx := t.Context()
	createThread(t, s.Threads(), "acme", "th")
	for i, id := range []string{"a", "b", "c", "d", "e"} {
		ng := store.NewGeneration{Tenant: "acme", ID: id, Owner: "r", Expires: at(time.Hour), Origin: filterOrigins[id],
			Events: []store.Event{ev("started", "")}, Now: at(time.Duration(i) * time.Second)}
		if id == "c" {
			ng.Thread = &store.ThreadStart{ID: "th"}
		}
		check(t, errOf(s.Generations().Create(ctx, ng)))
	}
	check(t, errOf(s.Generations().Create(ctx, store.NewGeneration{Tenant: "globex", ID: "a", Owner: "r", Expires: at(time.Hour),
		Origin: filterOrigins["a"], Now: t0})))
}

// checkBoundTokens: a token continues the list of its filters only
// (states in any order, and any page size); with other filters, or none,
// it is Invalid, and so is an unfiltered list's token with filters.
func checkBoundTokens(t *testing.T, g store.Generations) {
	t.Helper()
	ctx := t.Context()
	first := func(o store.ListOptions) string {
		_, next, err := g.List(ctx, "acme", o)
		if err != nil || next == "" {
			t.Fatalf("List(%+v): next %q, %v", o, next, err)
		}
		return next
	}
	gpt := first(store.ListOptions{Model: "gpt", PageSize: 1})
	states := first(store.ListOptions{States: []store.State{store.Running, store.Completed}, PageSize: 1})
	plain := first(store.ListOptions{PageSize: 1})
	for _, o := range []store.ListOptions{
		{Model: "gpt", PageToken: gpt, PageSize: 5},
		{States: []store.State{store.Completed, store.Running}, PageToken: states},
		{PageToken: plain},
	} {
		if _, _, err := g.List(ctx, "acme", o); err != nil {
			t.Errorf("List(%+v): %v", o, err)
		}
	}
	for _, o := range []store.ListOptions{
		{Model: "claude", PageToken: gpt},
		{PageToken: gpt},
		{Model: "gpt", EndUser: "u1", PageToken: gpt},
		{Model: "gpt", CreatedAfter: t0, PageToken: gpt},
		{States: []store.State{store.Running}, PageToken: states},
		{Model: "gpt", PageToken: plain},
		{CreatedBefore: at(time.Hour), PageToken: plain},
	} {
		_, _, err := g.List(ctx, "acme", o)
		wantKind(t, fmt.Sprintf("List(%+v)", o), err, fault.Invalid)
	}
}
