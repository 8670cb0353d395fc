package server_test

import (
	"context"
	"sync/atomic"
	"testing"
	"time"

	agentdv1 "github.com/agentd/agentd/gen/go/agentd/v1"
	"github.com/agentd/agentd/internal/config"
	"github.com/agentd/agentd/internal/fault"
	"github.com/agentd/agentd/internal/store"
	"github.com/agentd/agentd/server"
)

// flakyGenerations is a store whose Renew fails as unavailable while down
// is set: a replica cut off from its store.
type flakyGenerations struct {
	store.Generations
	down atomic.Bool
}

func (f *flakyGenerations) Renew(ctx context.Context, tenant, id string, epoch int64, expires time.Time) error {
	if f.down.Load() {
		return fault.New(fault.Unavailable, "the store is down")
	}
	return f.Generations.Renew(ctx, tenant, id, epoch, expires)
}

// X-G3: a replica that cannot renew its lease (the store is unavailable to
// it) keeps the generation going and retries; once another replica has
// acquired the generation, the first one's next write is refused and its
// generation stops, writing nothing more.
func TestLostLeaseStopsTheGeneration(t *testing.T) {
	t.Parallel()
	st := newStore(t, 0)
	gens := &flakyGenerations{Generations: st.Generations()}
	cfg := config.Default().Generation
	cfg.LeaseTTL = 150 * time.Millisecond
	bridge := &fakeBridge{onList: offering(serverTools("files", "read", "delete"))}
	client := newClientWith(t, server.Options{Bridge: bridge, Config: cfg, Checkpoints: st, Generations: gens, Replica: "replica-a"}, recordingScript())
	a := &pausable{client: client, store: st}
	id, vanish := startUntilApproval(t, a, &agentdv1.StartGeneration{Agent: filesAgent(t), Messages: userSays("tidy")})
	defer vanish()
	waitForState(t, a, id, store.Waiting)
	gens.down.Store(true)
	// Another replica takes the generation once the lease has lapsed.
	tick := time.NewTicker(10 * time.Millisecond)
	defer tick.Stop()
	var taken store.Generation
	for {
		now := time.Now()
		g, err := st.Generations().Acquire(t.Context(), "", id, "replica-x", now, now.Add(time.Hour))
		if err == nil {
			taken = g
			break
		}
		if fault.KindOf(err) != fault.Conflict {
			t.Fatal(err)
		}
		<-tick.C
	}
	gens.down.Store(false)
	// The first replica's next renewal is refused: its generation stops
	// and closes its bridge session.
	waitFor(t, func() bool { return bridge.counts().Close > 0 })
	g, _ := record(t, a, id)
	if g.Lease.Owner != "replica-x" || g.Lease.Epoch != taken.Lease.Epoch || g.State != store.Waiting || g.LastSeq != taken.LastSeq {
		t.Errorf("record after the takeover: %+v; want it as replica-x took it, untouched", g)
	}
	if _, err := a.store.Get(t.Context(), "", id); err == nil {
		t.Errorf("the replica that lost the lease paused the generation")
	}
}

// waitFor polls cond until it holds.
func waitFor(t *testing.T, cond func() bool) {
	t.Helper()
	tick := time.NewTicker(5 * time.Millisecond)
	defer tick.Stop()
	for !cond() {
		select {
		case <-t.Context().Done():
			t.Fatal("the condition never held")
		case <-tick.C:
		}
	}
}
