package server_test

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"iter"
	"slices"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/testing/protocmp"

	agentdv1 "github.com/agentd/agentd/gen/go/agentd/v1"
	"github.com/agentd/agentd/internal/fault"
	agentdrecord "github.com/agentd/agentd/internal/record"
	"github.com/agentd/agentd/internal/store"
	"github.com/agentd/agentd/providers"
	"github.com/agentd/agentd/server"
)

// storedResult is the summary a finished generation's record keeps.
type storedResult struct {
	Text  string          `json:"text"`
	Usage json.RawMessage `json:"usage"`
	Error string          `json:"error"`
}

func record(t *testing.T, a *pausable, id string) (store.Generation, storedResult) {
	t.Helper()
	g, err := a.store.Generations().Get(t.Context(), "", id)
	if err != nil {
		t.Fatalf("the generation has no record: %v", err)
	}
	var r storedResult
	if g.Result != nil {
		if err := json.Unmarshal(g.Result, &r); err != nil {
			t.Fatalf("result %q: %v", g.Result, err)
		}
	}
	return g, r
}

// storedEvents reads a generation's whole log, each event decoded.
func storedEvents(t *testing.T, a *pausable, id string) []*agentdv1.GenerateResponse {
	t.Helper()
	evs, err := agentdrecord.ReadEvents(t.Context(), a.store.Generations(), "", id, 0)
	if err != nil {
		t.Fatal(err)
	}
	wantSequencesAdopted(t, evs)
	return evs
}

// wantSequences fails unless events are numbered from..from+len-1.
func wantSequences(t *testing.T, events []*agentdv1.GenerateResponse, from int64) {
	t.Helper()
	for i, ev := range events {
		if want := from + int64(i); ev.GetSequence() != want {
			t.Fatalf("event %d (%v) has sequence %d; want %d", i, kinds(events[i:i+1]), ev.GetSequence(), want)
		}
	}
}

// wantSequencesAdopted fails unless events are numbered from 1, one more
// each, but for the adopting replica's first event (its started), numbered
// past the show window after the dead replica's last stored one: no
// number the dead replica may have shown unstored is used again.
func wantSequencesAdopted(t *testing.T, events []*agentdv1.GenerateResponse) {
	t.Helper()
	want := int64(1)
	for i, ev := range events {
		if ev.GetStarted().GetAdopted() {
			want += agentdrecord.ShowWindow
		}
		if ev.GetSequence() != want {
			t.Fatalf("event %d (%v) has sequence %d; want %d", i, kinds(events[i:i+1]), ev.GetSequence(), want)
		}
		want++
	}
}

func textAgent(t *testing.T, text string) *agentdv1.Agent {
	t.Helper()
	return &agentdv1.Agent{Provider: "script", ProviderOptions: script(t, `{"turns": [{"text": "`+text+`"}]}`)}
}

// X-G3: a generation is recorded from its start and, once completed, its
// record holds its state, no owner, and a result with its final text and
// usage. X-G2: every event on the stream carries its sequence number, 1,
// 2, ... without gaps, and the store's log holds exactly those events
// with those numbers.
func TestCompletedGenerationIsRecorded(t *testing.T) {
	t.Parallel()
	a := newPausable(t, &fakeBridge{}, nil, recordingScript())
	events, st := generate(t, a.client, &agentdv1.StartGeneration{Agent: textAgent(t, "hello there"), Messages: userSays("hi")}, nil)
	wantCode(t, st, codes.OK)
	wantSequences(t, events, 1)
	id := started(t, events).GetGenerationId()
	g, res := record(t, a, id)
	if g.State != store.Completed || g.Lease.Owner != "" || g.LastSeq != int64(len(events)) {
		t.Errorf("record: state %s, owner %q, last seq %d; want completed, released, %d", g.State, g.Lease.Owner, g.LastSeq, len(events))
	}
	if res.Text != "hello there" || len(res.Usage) == 0 {
		t.Errorf("result = %+v; want the final text and the usage", res)
	}
	if diff := cmp.Diff(events, storedEvents(t, a, id), protocmp.Transform()); diff != "" {
		t.Errorf("the stored log differs from the events sent (-sent +stored):\n%s", diff)
	}
}

// X-G3: while a generation waits for its client's approval its record is
// waiting, under this replica's lease; paused, the lease is released; the
// resume takes the record again and the sequence numbers go on from the
// pause's (X-G2), and the log holds both streams' events.
func TestPausedAndResumedGenerationIsRecorded(t *testing.T) {
	t.Parallel()
	bridge := &fakeBridge{onList: offering(serverTools("files", "read", "delete"))}
	a := newPausable(t, bridge, nil, recordingScript())
	id, vanish := startUntilApproval(t, a, &agentdv1.StartGeneration{Agent: filesAgent(t), Messages: userSays("tidy")})
	waitForState(t, a, id, store.Waiting)
	if g, _ := record(t, a, id); g.Lease.Owner != "replica-a" {
		t.Errorf("a waiting generation's owner is %q; want replica-a", g.Lease.Owner)
	}
	vanish()
	waitForState(t, a, id, store.Paused)
	paused, _ := record(t, a, id)
	if paused.Lease.Owner != "" {
		t.Errorf("a paused generation's owner is %q; want none (released)", paused.Lease.Owner)
	}
	first := storedEvents(t, a, id)
	if n := len(first); n == 0 || first[n-1].GetPaused() == nil {
		t.Fatalf("the log of a paused generation is %v; want it to end with paused", kinds(first))
	}

	events, st := run(t, a.client, resumeRequest(id, filesAgent(t), &agentdv1.ApprovalDecision{RequestId: "approval_call_1_2", Approved: true}), nil)
	wantCode(t, st, codes.OK)
	wantSequences(t, events, paused.LastSeq+1)
	g, res := record(t, a, id)
	if g.State != store.Completed || g.Lease.Epoch != 2 || res.Text == "" {
		t.Errorf("record: state %s, epoch %d, result %+v; want completed under the resume's lease (epoch 2)", g.State, g.Lease.Epoch, res)
	}
	if diff := cmp.Diff(append(first, events...), storedEvents(t, a, id), protocmp.Transform()); diff != "" {
		t.Errorf("the stored log differs from the events sent (-sent +stored):\n%s", diff)
	}
}

// X-G3: a generation that fails is recorded failed, with why.
func TestFailedGenerationIsRecorded(t *testing.T) {
	t.Parallel()
	a, events, _ := failedGeneration(t)
	g, res := record(t, a, started(t, events).GetGenerationId())
	if g.State != store.Failed || g.Lease.Owner != "" {
		t.Errorf("record: state %s, owner %q; want failed, released", g.State, g.Lease.Owner)
	}
	if res.Error == "" {
		t.Errorf("result = %+v; want why it failed", res)
	}
}

// waitForState waits until the record of generation id is in state want,
// and released unless want is running or waiting: its owner writes state
// changes in the background, and releases a paused one after recording it.
func waitForState(t *testing.T, a *pausable, id string, want store.State) {
	t.Helper()
	tick := time.NewTicker(5 * time.Millisecond)
	defer tick.Stop()
	for {
		g, err := a.store.Generations().Get(t.Context(), "", id)
		held := want == store.Running || want == store.Waiting
		if err == nil && g.State == want && (held || g.Lease.Owner == "") {
			return
		}
		select {
		case <-t.Context().Done():
			t.Fatalf("the record never reached %s (last: %s, %v)", want, g.State, err)
		case <-tick.C:
		}
	}
}

// replicaOf serves another AgentService (replica-b) on a's store.
func replicaOf(t *testing.T, a *pausable, bridge server.Bridge, ps ...providers.Provider) agentdv1.AgentServiceClient {
	t.Helper()
	return newClientWith(t, server.Options{Bridge: bridge, Checkpoints: a.store, Generations: a.store.Generations(), Replica: "replica-b"}, ps...)
}

// attachTo attaches to generation id after sequence after and returns
// every event the stream sent and how it ended.
func attachTo(t *testing.T, client agentdv1.AgentServiceClient, id string, after int64) ([]*agentdv1.GenerateResponse, *status.Status) {
	t.Helper()
	return run(t, client, &agentdv1.GenerateRequest{Kind: &agentdv1.GenerateRequest_Attach{Attach: &agentdv1.AttachGeneration{GenerationId: id, AfterSequence: after}}}, nil)
}

// X-G2: a client attaches to a running generation, on the replica that
// runs it or on another sharing its store, after any sequence number: it
// receives every later event once, in order (the events stored so far,
// then those that come while it follows), and its stream ends when the
// generation completes. The generation's own stream sees the same events.
func TestAttachReplaysThenFollows(t *testing.T) {
	t.Parallel()
	bridge := &fakeBridge{onList: offering(serverTools("files", "read", "delete"))}
	a := newPausable(t, bridge, nil, recordingScript())
	b := replicaOf(t, a, bridge, recordingScript())
	s, err := a.client.Generate(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Send(&agentdv1.GenerateRequest{Kind: &agentdv1.GenerateRequest_Start{Start: &agentdv1.StartGeneration{Agent: filesAgent(t), Messages: userSays("tidy")}}}); err != nil {
		t.Fatal(err)
	}
	var own []*agentdv1.GenerateResponse
	var req *agentdv1.ApprovalRequest
	for req == nil {
		ev, err := s.Recv()
		if err != nil {
			t.Fatal(err)
		}
		own = append(own, ev)
		req = ev.GetApprovalRequest()
	}
	id := started(t, own).GetGenerationId()

	type attached struct {
		events []*agentdv1.GenerateResponse
		st     *status.Status
	}
	results := make([]chan attached, 2)
	for i, c := range []agentdv1.AgentServiceClient{a.client, b} {
		results[i] = make(chan attached, 1)
		go func() {
			events, st := attachTo(t, c, id, int64(i)) // after 0 here, after 1 on the other replica
			results[i] <- attached{events, st}
		}()
	}
	// Both follow the generation until it ends: it waits for the answer.
	waitForState(t, a, id, store.Waiting)
	if err := s.Send(approve(req.GetId(), req.GetDigest(), true)); err != nil {
		t.Fatal(err)
	}
	if err := s.CloseSend(); err != nil {
		t.Fatal(err)
	}
	for {
		ev, err := s.Recv()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		own = append(own, ev)
	}
	wantSequences(t, own, 1)
	for i, name := range []string{"the same replica, after 0", "another replica, after 1"} {
		got := <-results[i]
		wantCode(t, got.st, codes.OK)
		if diff := cmp.Diff(own[i:], got.events, protocmp.Transform()); diff != "" {
			t.Errorf("%s: attached events differ from the generation's own (-own +attached):\n%s", name, diff)
		}
	}
	// Attaching after the end replays what is left, then ends.
	events, st := attachTo(t, b, id, int64(len(own)-2))
	wantCode(t, st, codes.OK)
	if diff := cmp.Diff(own[len(own)-2:], events, protocmp.Transform()); diff != "" {
		t.Errorf("attaching to a completed generation (-own +attached):\n%s", diff)
	}
}

// X-G2: attaching to a generation that does not exist, or to another
// tenant's, is NOT_FOUND with the same message; a failed generation's
// attached stream ends with its status; an attached stream is read-only.
func TestAttachErrors(t *testing.T) {
	t.Parallel()
	st := newStore(t, 0)
	clients := tenantClients(t, server.Options{Bridge: &fakeBridge{}, Checkpoints: st, Generations: st.Generations(), Replica: "r",
		Tenants: tenantsOf(map[string]*server.Tenant{"acme": {}, "globex": {}})}, recordingScript())
	events, s := generate(t, clients("acme"), &agentdv1.StartGeneration{Agent: textAgent(t, "hi"), Messages: userSays("hi")}, nil)
	wantCode(t, s, codes.OK)
	id := started(t, events).GetGenerationId()

	_, other := attachTo(t, clients("globex"), id, 0)
	wantCode(t, other, codes.NotFound)
	_, unknown := attachTo(t, clients("globex"), "gen_unknown", 0)
	wantCode(t, unknown, codes.NotFound)
	if want := `no generation "gen_unknown"`; unknown.Message() != want || other.Message() != `no generation "`+id+`"` {
		t.Errorf("messages %q, %q; want the same, naming only the id", other.Message(), unknown.Message())
	}
	_, bad := attachTo(t, clients("acme"), "", -1)
	wantCode(t, bad, codes.InvalidArgument)
	if diff := cmp.Diff([]string{"attach.generation_id", "attach.after_sequence"}, violationFields(bad)); diff != "" {
		t.Errorf("violations (-want +got):\n%s", diff)
	}
}

// X-G2: a client attached to a generation that fails sees the failure's
// status when the stream ends.
func TestAttachToFailedGeneration(t *testing.T) {
	t.Parallel()
	a, events, st := failedGeneration(t)
	got, ast := attachTo(t, a.client, started(t, events).GetGenerationId(), 0)
	wantCode(t, ast, codes.Unavailable)
	if ast.Message() != st.Message() || len(got) != 1 || got[0].GetStarted() == nil {
		t.Errorf("attached: %v, %q; want started, then %q", kinds(got), ast.Message(), st.Message())
	}
}

// X-G2: an attached stream is read-only: an answer sent on it ends it
// INVALID_ARGUMENT, and the generation still waits for its own stream.
func TestAttachIsReadOnly(t *testing.T) {
	t.Parallel()
	bridge := &fakeBridge{onList: offering(serverTools("files", "read", "delete"))}
	a := newPausable(t, bridge, nil, recordingScript())
	id, vanish := startUntilApproval(t, a, &agentdv1.StartGeneration{Agent: filesAgent(t), Messages: userSays("tidy")})
	defer waitForState(t, a, id, store.Paused) // its own client goes: it pauses
	defer vanish()
	// The record says it waits once the keeper has written the state,
	// which may come after the client has the approval request.
	waitForState(t, a, id, store.Waiting)
	events, st := run(t, a.client, &agentdv1.GenerateRequest{Kind: &agentdv1.GenerateRequest_Attach{Attach: &agentdv1.AttachGeneration{GenerationId: id}}},
		func(ev *agentdv1.GenerateResponse, s stream) {
			if req := ev.GetApprovalRequest(); req != nil {
				_ = s.Send(approve(req.GetId(), req.GetDigest(), true))
			}
		})
	wantCode(t, st, codes.InvalidArgument)
	if !slices.Contains(kinds(events), "approval_request") {
		t.Errorf("attached events %v; want the approval request among them", kinds(events))
	}
	if g, _ := record(t, a, id); g.State != store.Waiting {
		t.Errorf("the generation is %s; want it still waiting for its own stream", g.State)
	}
	if n := bridge.callsTo("delete"); n != 0 {
		t.Errorf("delete ran %d times on an attached stream's approval", n)
	}
}

// failedGeneration runs a generation whose provider is down, on a service
// that records generations; it ends UNAVAILABLE, with status st.
func failedGeneration(t *testing.T) (a *pausable, events []*agentdv1.GenerateResponse, st *status.Status) {
	t.Helper()
	broken := &fakeProvider{name: "broken", caps: providers.Capabilities{ModelOptional: true},
		stream: func(context.Context, *providers.Request) iter.Seq2[providers.Event, error] {
			return func(yield func(providers.Event, error) bool) {
				yield(nil, fault.New(fault.Unavailable, "the provider is down"))
			}
		}}
	a = newPausable(t, &fakeBridge{}, nil, broken)
	events, st = generate(t, a.client, &agentdv1.StartGeneration{Agent: &agentdv1.Agent{Provider: "broken"}, Messages: userSays("hi")}, nil)
	wantCode(t, st, codes.Unavailable)
	return a, events, st
}
