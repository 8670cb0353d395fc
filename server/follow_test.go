package server_test

import (
	"errors"
	"io"
	"testing"

	"github.com/google/go-cmp/cmp"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/testing/protocmp"

	agentdv1 "github.com/agentd/agentd/gen/go/agentd/v1"
	"github.com/agentd/agentd/internal/store"
	"github.com/agentd/agentd/server"
)

// follow follows generation id after sequence number after with
// FollowGeneration, and returns every event it sent and how it ended.
func follow(t *testing.T, client agentdv1.AgentServiceClient, id string, after int64) ([]*agentdv1.GenerateResponse, *status.Status) {
	t.Helper()
	s, err := client.FollowGeneration(t.Context(), &agentdv1.FollowGenerationRequest{GenerationId: id, AfterSequence: after})
	if err != nil {
		t.Fatalf("FollowGeneration: %v", err)
	}
	var events []*agentdv1.GenerateResponse
	for {
		res, err := s.Recv()
		if errors.Is(err, io.EOF) {
			return events, status.New(codes.OK, "")
		}
		if err != nil {
			return events, status.Convert(err)
		}
		events = append(events, res.GetEvent())
	}
}

// FollowGeneration follows a running generation, on the replica
// that runs it and on another sharing its store, after any sequence
// number: each later event once, in order, the stored ones first, until
// the generation pauses (the stream ends OK after paused); following
// after it has paused replays what is left.
func TestFollowGeneration(t *testing.T) {
	t.Parallel()
	bridge := &fakeBridge{onList: offering(serverTools("files", "read", "delete"))}
	a := newPausable(t, bridge, nil, recordingScript())
	b := replicaOf(t, a, bridge, recordingScript())
	id, vanish := startUntilApproval(t, a, &agentdv1.StartGeneration{Agent: filesAgent(t), Messages: userSays("tidy")})
	waitForState(t, a, id, store.Waiting)

	type followed struct {
		events []*agentdv1.GenerateResponse
		st     *status.Status
	}
	results := make([]chan followed, 2)
	for i, c := range []agentdv1.AgentServiceClient{a.client, b} {
		results[i] = make(chan followed, 1)
		go func() {
			events, st := follow(t, c, id, int64(2*i)) // after 0 here, after 2 on the other replica
			results[i] <- followed{events, st}
		}()
	}
	vanish() // its own client goes: it pauses
	waitForState(t, a, id, store.Paused)
	log := storedEvents(t, a, id)
	pausedEvent(t, log)
	for i, name := range []string{"the same replica, after 0", "another replica, after 2"} {
		got := <-results[i]
		wantCode(t, got.st, codes.OK)
		if diff := cmp.Diff(log[2*i:], got.events, protocmp.Transform()); diff != "" {
			t.Errorf("%s: followed events differ from the log (-stored +followed):\n%s", name, diff)
		}
	}
	events, st := follow(t, b, id, int64(len(log)-1))
	wantCode(t, st, codes.OK)
	if diff := cmp.Diff(log[len(log)-1:], events, protocmp.Transform()); diff != "" {
		t.Errorf("following a paused generation after its next-to-last event (-stored +followed):\n%s", diff)
	}
}

// A follower of a generation that fails sees its events and then
// the failure's status; another tenant's generation is NOT_FOUND with the
// same message as one that does not exist, and a request without an id
// or with a negative sequence number is INVALID_ARGUMENT on those fields.
func TestFollowGenerationErrors(t *testing.T) {
	t.Parallel()
	a, events, st := failedGeneration(t)
	got, fst := follow(t, a.client, started(t, events).GetGenerationId(), 0)
	wantCode(t, fst, codes.Unavailable)
	if fst.Message() != st.Message() || len(got) != 1 || got[0].GetStarted() == nil {
		t.Errorf("followed: %v, %q; want started, then %q", kinds(got), fst.Message(), st.Message())
	}

	s := newStore(t, 0)
	clients := tenantClients(t, server.Options{Bridge: &fakeBridge{}, Checkpoints: s, Generations: s.Generations(), Replica: "r",
		Tenants: tenantsOf(map[string]*server.Tenant{"acme": {}, "globex": {}})}, recordingScript())
	events, gst := generate(t, clients("acme"), &agentdv1.StartGeneration{Agent: textAgent(t, "hi"), Messages: userSays("hi")}, nil)
	wantCode(t, gst, codes.OK)
	id := started(t, events).GetGenerationId()
	_, other := follow(t, clients("globex"), id, 0)
	wantCode(t, other, codes.NotFound)
	_, unknown := follow(t, clients("globex"), "gen_unknown", 0)
	wantCode(t, unknown, codes.NotFound)
	if other.Message() != `no generation "`+id+`"` || unknown.Message() != `no generation "gen_unknown"` {
		t.Errorf("messages %q, %q; want the same, naming only the id", other.Message(), unknown.Message())
	}
	_, bad := follow(t, clients("acme"), "", -1)
	wantCode(t, bad, codes.InvalidArgument)
	if diff := cmp.Diff([]string{"generation_id", "after_sequence"}, violationFields(bad)); diff != "" {
		t.Errorf("violations (-want +got):\n%s", diff)
	}
}
