package server_test

import (
	"context"
	"encoding/json"
	"iter"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"google.golang.org/grpc/codes"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/testing/protocmp"

	agentdv1 "github.com/agentd/agentd/gen/go/agentd/v1"
	"github.com/agentd/agentd/internal/fault"
	"github.com/agentd/agentd/internal/store"
	"github.com/agentd/agentd/providers"
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
	evs, err := a.store.Generations().Read(t.Context(), "", id, 0, 0)
	if err != nil {
		t.Fatal(err)
	}
	var out []*agentdv1.GenerateResponse
	for i, e := range evs {
		ev := &agentdv1.GenerateResponse{}
		if err := proto.Unmarshal(e.Data, ev); err != nil {
			t.Fatal(err)
		}
		if ev.GetSequence() != e.Seq || e.Seq != int64(i+1) {
			t.Errorf("stored event %d: seq %d, sequence %d", i, e.Seq, ev.GetSequence())
		}
		out = append(out, ev)
	}
	return out
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
	broken := &fakeProvider{name: "broken", caps: providers.Capabilities{ModelOptional: true},
		stream: func(context.Context, *providers.Request) iter.Seq2[providers.Event, error] {
			return func(yield func(providers.Event, error) bool) {
				yield(nil, fault.New(fault.Unavailable, "the provider is down"))
			}
		}}
	a := newPausable(t, &fakeBridge{}, nil, broken)
	events, st := generate(t, a.client, &agentdv1.StartGeneration{Agent: &agentdv1.Agent{Provider: "broken"}, Messages: userSays("hi")}, nil)
	wantCode(t, st, codes.Unavailable)
	g, res := record(t, a, started(t, events).GetGenerationId())
	if g.State != store.Failed || g.Lease.Owner != "" {
		t.Errorf("record: state %s, owner %q; want failed, released", g.State, g.Lease.Owner)
	}
	if res.Error == "" {
		t.Errorf("result = %+v; want why it failed", res)
	}
}

// waitForState waits until the record of generation id is in state want:
// its owner writes state changes in the background.
func waitForState(t *testing.T, a *pausable, id string, want store.State) {
	t.Helper()
	tick := time.NewTicker(5 * time.Millisecond)
	defer tick.Stop()
	for {
		g, err := a.store.Generations().Get(t.Context(), "", id)
		if err == nil && g.State == want {
			return
		}
		select {
		case <-t.Context().Done():
			t.Fatalf("the record never reached %s (last: %s, %v)", want, g.State, err)
		case <-tick.C:
		}
	}
}
