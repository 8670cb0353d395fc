package record_test

import (
	"bytes"
	"testing"
	"time"

	"google.golang.org/protobuf/proto"

	agentdv1 "github.com/agentd/agentd/gen/go/agentd/v1"
	"github.com/agentd/agentd/internal/fault"
	"github.com/agentd/agentd/internal/record"
	"github.com/agentd/agentd/internal/sealer"
	"github.com/agentd/agentd/internal/store"
)

// pendingOf lists tenant t's pending requests of generation id, by id.
func pendingOf(t *testing.T, gens store.Generations, id string) map[string]store.State {
	t.Helper()
	page, _, err := gens.ListPending(t.Context(), "t", store.PendingOptions{GenerationID: id})
	if err != nil {
		t.Fatal(err)
	}
	out := make(map[string]store.State)
	for _, r := range page {
		out[r.RequestID] = r.State
	}
	return out
}

// The pending requests a journal is given reach the store with the
// events recorded after them, at the latest: once the event that asks
// one is stored, so is its request. A pause records them paused with its
// state, in one write; an end drops them.
func TestJournalPendingRequests(t *testing.T) {
	t.Parallel()
	gens := newStore(t).Generations()
	j := newJournal(t, gens, nil, "gen_1")
	now := time.Now()
	j.SetPending([]store.PendingRequest{{RequestID: "approval_c1", Kind: store.KindApproval, State: store.Waiting, RequestedAt: now, ExpiresAt: now.Add(time.Minute)}})
	j.Record(&agentdv1.GenerateResponse{Event: &agentdv1.GenerateResponse_ApprovalRequest{ApprovalRequest: &agentdv1.ApprovalRequest{Id: "approval_c1"}}})
	if err := j.Await(t.Context()); err != nil {
		t.Fatal(err)
	}
	if got := pendingOf(t, gens, "gen_1"); got["approval_c1"] != store.Waiting || len(got) != 1 {
		t.Errorf("once the approval request is stored, the pending requests are %v; want approval_c1, waiting", got)
	}
	j.SetPending([]store.PendingRequest{{RequestID: "approval_c1", Kind: store.KindApproval, State: store.Paused, RequestedAt: now, ExpiresAt: now.Add(time.Hour)}})
	j.Settle(t.Context(), store.Paused, nil)
	rec, err := gens.Get(t.Context(), "t", "gen_1")
	if err != nil {
		t.Fatal(err)
	}
	if got := pendingOf(t, gens, "gen_1"); rec.State != store.Paused || got["approval_c1"] != store.Paused {
		t.Errorf("after the pause: %s, pending %v; want paused, approval_c1 paused", rec.State, got)
	}
}

// A journal that finishes its generation drops its pending requests.
func TestJournalEndDropsPending(t *testing.T) {
	t.Parallel()
	gens := newStore(t).Generations()
	j := newJournal(t, gens, nil, "gen_1")
	j.SetPending([]store.PendingRequest{{RequestID: "f1", Kind: store.KindFunctionCall, State: store.Waiting, RequestedAt: time.Now(), ExpiresAt: time.Now()}})
	j.Record(text("a"))
	if err := j.Await(t.Context()); err != nil {
		t.Fatal(err)
	}
	j.Settle(t.Context(), store.Completed, record.EncodeResult(nil, nil, nil))
	if got := pendingOf(t, gens, "gen_1"); len(got) != 0 {
		t.Errorf("after the end: %v; want none", got)
	}
}

// A request sealed under a key opens with it, for its own generation and
// id only, and never without a key; without one it is kept in the clear.
func TestSealRequest(t *testing.T) {
	t.Parallel()
	key, err := sealer.New(bytes.Repeat([]byte{7}, 32))
	if err != nil {
		t.Fatal(err)
	}
	k, err := sealer.NewKeyring(key)
	if err != nil {
		t.Fatal(err)
	}
	req := &agentdv1.PendingRequest{GenerationId: "gen_1", Request: &agentdv1.PendingRequest_Approval{Approval: &agentdv1.ApprovalRequest{Id: "a", Arguments: `{"secret":1}`}}}
	data := record.SealRequest(k, "t", "gen_1", "a", req)
	if bytes.Contains(data, []byte("secret")) {
		t.Errorf("the sealed request shows its arguments: %q", data)
	}
	got := &agentdv1.PendingRequest{}
	if err := record.OpenRequest(k, "t", "gen_1", "a", data, got); err != nil || !proto.Equal(got, req) {
		t.Errorf("OpenRequest: %v, %v; want %v", got, err, req)
	}
	for _, tc := range []struct {
		what           string
		k              *sealer.Keyring
		id, requestID  string
		asDecisionOpen bool
	}{
		{"another generation's", k, "gen_2", "a", false},
		{"another request's", k, "gen_1", "b", false},
		{"as a decision", k, "gen_1", "a", true},
		{"without a key", nil, "gen_1", "a", false},
	} {
		open := record.OpenRequest
		if tc.asDecisionOpen {
			open = record.OpenDecision
		}
		if err := open(tc.k, "t", tc.id, tc.requestID, data, &agentdv1.PendingRequest{}); fault.KindOf(err) != fault.FailedPrecondition {
			t.Errorf("opened %s: %v; want FAILED_PRECONDITION", tc.what, err)
		}
	}
	clear := record.SealRequest(nil, "t", "gen_1", "a", req)
	if err := record.OpenRequest(nil, "t", "gen_1", "a", clear, got); err != nil || !proto.Equal(got, req) {
		t.Errorf("a request kept in the clear: %v, %v", got, err)
	}
}
