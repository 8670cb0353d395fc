package server_test

import (
	"context"
	"errors"
	"io"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"google.golang.org/protobuf/testing/protocmp"

	agentdv1 "github.com/agentd/agentd/gen/go/agentd/v1"
	"github.com/agentd/agentd/internal/config"
	"github.com/agentd/agentd/internal/fault"
	"github.com/agentd/agentd/internal/store"
	"github.com/agentd/agentd/internal/testwait"
	"github.com/agentd/agentd/server"
)

// flakyGenerations is a store whose Renew fails as unavailable while down
// is set: a replica cut off from its store.
type flakyGenerations struct {
	store.Generations
	down        atomic.Bool
	appendsDown atomic.Bool // Append and Checkpoint fail as unavailable
}

func (f *flakyGenerations) Append(ctx context.Context, tenant, id string, epoch int64, events []store.Event) (int64, error) {
	if f.appendsDown.Load() {
		return 0, fault.New(fault.Unavailable, "the store is down")
	}
	return f.Generations.Append(ctx, tenant, id, epoch, events)
}

func (f *flakyGenerations) Checkpoint(ctx context.Context, tenant, id string, epoch int64, c store.Checkpoint) (int64, error) {
	if f.appendsDown.Load() {
		return 0, fault.New(fault.Unavailable, "the store is down")
	}
	return f.Generations.Checkpoint(ctx, tenant, id, epoch, c)
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
	testwait.For(t, "a bridge session closed", func() bool { return bridge.counts().Close > 0 })
	g, _ := record(t, a, id)
	if g.Lease.Owner != "replica-x" || g.Lease.Epoch != taken.Lease.Epoch || g.State != store.Waiting || g.LastSeq != taken.LastSeq {
		t.Errorf("record after the takeover: %+v; want it as replica-x took it, untouched", g)
	}
	if _, err := a.store.Get(t.Context(), "", id); err == nil {
		t.Errorf("the replica that lost the lease paused the generation")
	}
}

// X-G2: events reach clients only once they are in the store, on the
// generation's own stream and on one attached on the replica that runs it
// (which follows it in memory): a replica that adopts the generation
// after this one died numbers its events from the store's last, so a
// client must never have seen a number the store lacks. While the store
// refuses the log's writes, the generation goes on (X-G3: its writes are
// retried) and neither stream receives anything; once the store is back
// both receive everything, each once, in order, exactly as logged. An
// MCP call, meanwhile, waits for its start to be stored (X-G3).
func TestEventsReachClientsOnceStored(t *testing.T) {
	t.Parallel()
	st := newStore(t, 0)
	gens := &flakyGenerations{Generations: st.Generations()}
	gens.appendsDown.Store(true)
	script := recordingScript()
	bridge := &fakeBridge{onList: offering(serverTools("files", "read", "delete"))}
	client := newClientWith(t, server.Options{Bridge: bridge, Checkpoints: st, Generations: gens, Replica: "replica-a"}, script)
	a := &pausable{client: client, store: st}

	own, err := client.Generate(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	if err := own.Send(&agentdv1.GenerateRequest{Kind: &agentdv1.GenerateRequest_Start{Start: &agentdv1.StartGeneration{Agent: filesAgent(t), Messages: userSays("tidy")}}}); err != nil {
		t.Fatal(err)
	}
	ownCh := make(chan *agentdv1.GenerateResponse, 100)
	go func() {
		defer close(ownCh)
		for {
			ev, err := own.Recv()
			if err != nil {
				return
			}
			ownCh <- ev
		}
	}()
	// The model's first turn has been played (its events numbered):
	// nothing is stored, so nothing was sent; and the read call waits for
	// its start to be stored before it runs (X-G3).
	testwait.For(t, "the model asked once", func() bool { return len(script.calls()) == 1 })
	if len(ownCh) != 0 {
		t.Fatalf("the client received %d events the store does not have", len(ownCh))
	}
	if n := bridge.callsTo("read"); n != 0 {
		t.Fatalf("the read call ran %d times before its start was stored", n)
	}
	g, _ := record(t, a, id0(t, st))
	if g.LastSeq != 0 {
		t.Fatalf("the store holds %d events; want none while it refuses appends", g.LastSeq)
	}
	id := g.ID
	att, err := client.Generate(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	if err := att.Send(&agentdv1.GenerateRequest{Kind: &agentdv1.GenerateRequest_Attach{Attach: &agentdv1.AttachGeneration{GenerationId: id}}}); err != nil {
		t.Fatal(err)
	}
	gens.appendsDown.Store(false)
	var ownEvents []*agentdv1.GenerateResponse
	var req *agentdv1.ApprovalRequest
	for req == nil {
		ev, ok := <-ownCh
		if !ok {
			t.Fatal("the generation's stream ended before its approval request")
		}
		ownEvents = append(ownEvents, ev)
		req = ev.GetApprovalRequest()
	}
	attEvents, _ := untilApproval(t, att)
	if err := own.Send(approve(req.GetId(), req.GetDigest(), true)); err != nil {
		t.Fatal(err)
	}
	_ = own.CloseSend()
	_ = att.CloseSend()
	for ev := range ownCh {
		ownEvents = append(ownEvents, ev)
	}
	attEvents = append(attEvents, rest(t, att)...)
	wantSequences(t, ownEvents, 1)
	if diff := cmp.Diff(ownEvents, attEvents, protocmp.Transform()); diff != "" {
		t.Errorf("attached events differ (-own +attached):\n%s", diff)
	}
	if diff := cmp.Diff(ownEvents, storedEvents(t, a, id), protocmp.Transform()); diff != "" {
		t.Errorf("stored events differ (-own +stored):\n%s", diff)
	}
	if g, _ := record(t, a, id); g.State != store.Completed {
		t.Errorf("the generation is %s; want completed", g.State)
	}
}

// id0 is the id of the one generation in st.
func id0(t *testing.T, st store.Store) string {
	t.Helper()
	page, _, err := st.Generations().List(t.Context(), "", store.ListOptions{})
	if err != nil || len(page) != 1 {
		t.Fatalf("listing the generations: %d, %v; want one", len(page), err)
	}
	return page[0].ID
}

type eventStream interface {
	Recv() (*agentdv1.GenerateResponse, error)
}

// untilApproval reads s up to its first approval request.
func untilApproval(t *testing.T, s eventStream) ([]*agentdv1.GenerateResponse, *agentdv1.ApprovalRequest) {
	t.Helper()
	var events []*agentdv1.GenerateResponse
	for {
		ev, err := s.Recv()
		if err != nil {
			t.Fatalf("before the approval request: %v", err)
		}
		events = append(events, ev)
		if req := ev.GetApprovalRequest(); req != nil {
			return events, req
		}
	}
}

// rest reads s to its end, which must be OK.
func rest(t *testing.T, s eventStream) []*agentdv1.GenerateResponse {
	t.Helper()
	var events []*agentdv1.GenerateResponse
	for {
		ev, err := s.Recv()
		if errors.Is(err, io.EOF) {
			return events
		}
		if err != nil {
			t.Fatalf("stream: %v", err)
		}
		events = append(events, ev)
	}
}
