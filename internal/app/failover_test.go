package app_test

import (
	"slices"
	"syscall"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	agentdv1 "github.com/agentd/agentd/gen/go/agentd/v1"
	"github.com/agentd/agentd/internal/config"
	"github.com/agentd/agentd/internal/store"
)

// X-G5 (with X-G3): a replica that is alive but cut off. Replica A runs a
// generation whose "gate" call is in flight when A is stopped (SIGSTOP)
// for longer than its lease (1 s here). A stopped process keeps its
// liveness, so replica B adopts the generation only once A's lease has
// lapsed, not sooner, and completes it: the gate call of unknown outcome,
// then the next turn's "delete". Meanwhile the gate passes; A, continued
// (SIGCONT), has the gate's result to write and a turn to go on with, and
// does neither: its writes are refused (the epoch fences them), its client
// stream ends, and the counting server saw each call once, the delete
// run by B only. Nothing A's client was sent is missing from the log, nor
// numbered after B's adoption. On PostgreSQL and on SQLite.
func TestProofStoppedReplica(t *testing.T) {
	t.Parallel()
	for _, driver := range []string{config.StorePostgres, config.StoreSQLite} {
		t.Run(driver, func(t *testing.T) {
			t.Parallel()
			stoppedReplica(t, driver)
		})
	}
}

func stoppedReplica(t *testing.T, driver string) {
	c := newProofCluster(t, driver, "")
	c.leaseTTL = time.Second // the shortest agentd allows
	a, b := c.start(t, c.dsn), c.start(t, c.dsn)
	agent := filesScriptAgent(t, callsTurn(toolCall("gate", "marker", "slow")), callsTurn(toolCall("delete", "path", "after")), outputsTurn)
	stream := a.startAttached(t, agent)
	seen := recvUntil(t, stream, "started", func(ev *agentdv1.GenerateResponse) bool { return ev.GetStarted() != nil })
	id := seen[0].GetStarted().GetGenerationId()
	waitLine(t, c.counter, "gate:slow")

	leased := c.waitRecord(t, id, "A's lease", func(r store.Generation) bool { return r.Lease.Epoch == 1 }).Lease
	if err := a.cmd.Process.Signal(syscall.SIGSTOP); err != nil {
		t.Fatal(err)
	}
	lapsed := c.adoptedFromStopped(t, id, leased)
	c.openGate(t, "slow")
	text := c.waitCompleted(t, id)
	if err := a.cmd.Process.Signal(syscall.SIGCONT); err != nil {
		t.Fatal(err)
	}
	seen = append(seen, ended(t, stream)...)

	if want := "deleted after"; text != want {
		t.Errorf("X-G3 the model's last turn saw %q; want %q", text, want)
	}
	if n, m := c.count(t, "gate:slow"), c.count(t, "after"); n != 1 || m != 1 {
		t.Errorf("X-G5 the counting server saw the gate call %d times and the delete %d times; want each once (the delete by B alone)", n, m)
	}
	logged, adoptedAt := c.adoptedOnce(t, id)
	checkSentBefore(t, seen, logged, logged[adoptedAt].GetSequence())
	if f := logged[slices.IndexFunc(logged, func(ev *agentdv1.GenerateResponse) bool { return ev.GetToolCallFinished().GetToolName() == "gate" })].GetToolCallFinished(); !unknownOutcome(f.GetOutput()) {
		t.Errorf("X-G3 the gate call finished as %v; want of unknown outcome, as B found it", f)
	}
	b.attach(t, id, 0) // B serves the log whole
	t.Logf("A's lease lapsed at %v; B adopted at or after it", lapsed)
}

// checkSentBefore requires every event a replica's client was sent to be
// the log's event of that number, numbered before the adoption's.
func checkSentBefore(t *testing.T, sent, logged []*agentdv1.GenerateResponse, adoption int64) {
	t.Helper()
	bySeq := make(map[int64]*agentdv1.GenerateResponse, len(logged))
	for _, ev := range logged {
		bySeq[ev.GetSequence()] = ev
	}
	for _, ev := range sent {
		switch seq := ev.GetSequence(); {
		case seq >= adoption:
			t.Errorf("X-G3 the stopped replica's client got %s numbered %d, after B adopted the generation at %d", kind(ev), seq, adoption)
		case !cmp.Equal(ev, bySeq[seq], asLogged):
			t.Errorf("X-G2 the stopped replica's client got %v; the log holds %v there", ev, bySeq[seq])
		}
	}
}

// adoptedFromStopped waits until another replica adopts generation id
// from its stopped owner, whose lease was leased before it stopped, and
// requires the adoption to have come no sooner than the owner's lease
// lapsed: the adopter's lease runs for leaseTTL from the adoption (or
// from a renewal after it, which only makes it look later), the owner's
// is the latest of its leases seen. It returns when that lapsed.
func (c *proofCluster) adoptedFromStopped(t *testing.T, id string, leased store.Lease) time.Time {
	t.Helper()
	adopted := c.waitRecord(t, id, "adoption", func(r store.Generation) bool {
		if r.Lease.Epoch == leased.Epoch && r.Lease.Expires.After(leased.Expires) {
			leased = r.Lease
		}
		return r.Lease.Epoch > leased.Epoch
	})
	if at := adopted.Lease.Expires.Add(-c.leaseTTL); at.Before(leased.Expires) {
		t.Errorf("X-G5 the stopped replica's generation was adopted at %v, before its lease lapsed at %v: a stopped replica is alive", at, leased.Expires)
	}
	return leased.Expires
}

// ended receives what is left on the stream of a replica whose
// generation another replica took: it ends, with whatever status.
func ended(t *testing.T, stream agentdv1.AgentService_GenerateClient) []*agentdv1.GenerateResponse {
	t.Helper()
	var evs []*agentdv1.GenerateResponse
	for {
		ev, err := stream.Recv()
		if err != nil {
			t.Logf("the stopped replica's stream ended: %v", err)
			return evs
		}
		evs = append(evs, ev)
	}
}
