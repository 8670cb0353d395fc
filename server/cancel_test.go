package server_test

import (
	"strings"
	"testing"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	agentdv1 "github.com/agentd/agentd/gen/go/agentd/v1"
	"github.com/agentd/agentd/internal/store"
	"github.com/agentd/agentd/internal/testwait"
)

// cancel calls CancelGeneration as key.
func (d *deciding) cancel(t *testing.T, key, id, reason string) (*agentdv1.Generation, *status.Status) {
	t.Helper()
	res, err := d.client.CancelGeneration(as(t, key), &agentdv1.CancelGenerationRequest{GenerationId: id, Reason: reason})
	return res.GetGeneration(), status.Convert(err)
}

// waitingOnA serves two replicas, a and b, and starts alice's generation
// id on a's stream l, which waits for an approval of it.
func waitingOnA(t *testing.T) (a, b *deciding, l *liveStream, id string) {
	t.Helper()
	a, b = threadReplicas(t, &fakeBridge{onList: offering(serverTools("files", "read", "delete"))})
	l = a.start(t, alice, &agentdv1.StartGeneration{Agent: filesAgent(t), Messages: userSays("tidy")})
	l.next(t, "the approval request", isApprovalRequest)
	return a, b, l, l.id(t)
}

// mustGetAs is alice's GetGeneration of id, failing the test unless it
// succeeds.
func mustGetAs(t *testing.T, d *deciding, id string) *agentdv1.Generation {
	t.Helper()
	res, err := d.client.GetGeneration(as(t, alice), &agentdv1.GetGenerationRequest{GenerationId: id})
	if err != nil {
		t.Fatal(err)
	}
	return res.GetGeneration()
}

// wantCancelled fails unless acme's generation id, as GetGeneration
// shows it, is CANCELLED with message as its error message.
func (d *deciding) wantCancelled(t *testing.T, id, message string) {
	t.Helper()
	res, err := d.client.GetGeneration(as(t, alice), &agentdv1.GetGenerationRequest{GenerationId: id})
	g := res.GetGeneration()
	if err != nil || g.GetState() != agentdv1.GenerationState_GENERATION_STATE_CANCELLED || g.GetErrorMessage() != message ||
		g.GetErrorCode() != int32(codes.Canceled) {
		t.Errorf("the cancelled generation: %v, %v; want CANCELLED, %q", g, err, message)
	}
}

// A generation waiting for an approval on this replica ends CANCELLED at
// once, its stream CANCELLED, the reason its error message, with an audit
// line naming who cancelled it; a second cancel, of a generation that
// has ended, is FAILED_PRECONDITION, and so is nothing else.
func TestCancelGenerationHere(t *testing.T) {
	t.Parallel()
	a, _, l, id := waitingOnA(t)

	if _, st := a.cancel(t, alice, id, "not today"); st.Code() != codes.OK {
		t.Fatalf("CancelGeneration: %v", st)
	}
	_, st := l.rest(t)
	wantCode(t, st, codes.Canceled)
	a.waitState(t, id, store.Cancelled)
	a.wantCancelled(t, id, "not today")
	testwait.For(t, "the audit line", func() bool {
		return strings.Contains(a.log.String(), `msg="cancel requested" audit=true principal=alice tenant=acme generation=`+id+` reason="not today"`)
	})

	_, st = a.cancel(t, alice, id, "again")
	wantCode(t, st, codes.FailedPrecondition)
}

// X-I6: another tenant's generation is NOT_FOUND, like an unknown one,
// and left running; the approve role may not cancel (generate may).
func TestCancelGenerationRefusals(t *testing.T) {
	t.Parallel()
	a, _, _, id := waitingOnA(t)
	for _, tc := range []struct {
		key, id string
		want    codes.Code
	}{
		{eve, id, codes.NotFound},
		{eve, "gen_unknown", codes.NotFound},
		{bob, id, codes.PermissionDenied},
		{alice, "", codes.InvalidArgument},
	} {
		_, st := a.cancel(t, tc.key, tc.id, "")
		wantCode(t, st, tc.want)
	}
	if g := mustGetAs(t, a, id); g.GetState() != agentdv1.GenerationState_GENERATION_STATE_WAITING {
		t.Errorf("after the refused cancels: %v; want it still WAITING", g.GetState())
	}
}

// A generation running on the other replica is marked in the store: the
// response shows it still live, and its replica cancels it, its stream
// ending CANCELLED; without a reason, its message names who cancelled.
func TestCancelGenerationOnAnotherReplica(t *testing.T) {
	t.Parallel()
	a, b, l, id := waitingOnA(t)

	g, st := b.cancel(t, alice, id, "")
	wantCode(t, st, codes.OK)
	if s := g.GetState(); s != agentdv1.GenerationState_GENERATION_STATE_WAITING && s != agentdv1.GenerationState_GENERATION_STATE_CANCELLED {
		t.Errorf("the response: %v; want WAITING (its replica has yet to stop it) or CANCELLED", s)
	}
	_, st = l.rest(t)
	wantCode(t, st, codes.Canceled)
	a.waitState(t, id, store.Cancelled)
	a.wantCancelled(t, id, "alice cancelled the generation (CancelGeneration)")
}

// A paused generation ends CANCELLED at once, its paused checkpoint gone
// (nothing resumes it); its thread, started with on_failure KEEP_INPUT,
// keeps its input alone and is free again.
func TestCancelPausedGeneration(t *testing.T) {
	t.Parallel()
	a, b := threadReplicas(t, &fakeBridge{onList: offering(serverTools("files", "read", "delete"))})
	th := a.newThread(t, alice, &agentdv1.CreateThreadRequest{})
	paused := a.pausedFor(t, &agentdv1.StartGeneration{Agent: filesAgent(t), Messages: userSays("tidy"), ThreadId: th.GetThreadId(),
		OnFailure: agentdv1.OnFailure_ON_FAILURE_KEEP_INPUT})
	id := paused.GetGenerationId()

	g, st := b.cancel(t, alice, id, "no longer needed")
	wantCode(t, st, codes.OK)
	if g.GetState() != agentdv1.GenerationState_GENERATION_STATE_CANCELLED {
		t.Errorf("the response: %v; want CANCELLED at once", g.GetState())
	}
	a.wantCancelled(t, id, "no longer needed")
	if _, err := a.store.Get(t.Context(), "acme", id); err == nil {
		t.Error("the paused checkpoint is still there")
	}
	wantMessages(t, "the thread after the cancel", userSays("tidy"), waitItems(t, a, th.GetThreadId(), 1))
}

// A generation queued on a thread ends CANCELLED at once and leaves the
// queue: the one holding the thread goes on, and the thread keeps nothing
// of the cancelled one.
func TestCancelQueuedGeneration(t *testing.T) {
	t.Parallel()
	a, b := threadReplicas(t, &fakeBridge{onList: offering(serverTools("files", "read", "delete"))})
	th := a.newThread(t, alice, &agentdv1.CreateThreadRequest{})
	first := a.start(t, alice, &agentdv1.StartGeneration{Agent: filesAgent(t), Messages: userSays("tidy"), ThreadId: th.GetThreadId()})
	req := first.next(t, "the approval request", isApprovalRequest).GetApprovalRequest()
	events, st := b.start(t, alice, &agentdv1.StartGeneration{Agent: textAgent(t, "never"), Messages: userSays("later"), ThreadId: th.GetThreadId(),
		Multitask: agentdv1.Multitask_MULTITASK_ENQUEUE, OnFailure: agentdv1.OnFailure_ON_FAILURE_KEEP_INPUT}).rest(t)
	wantCode(t, st, codes.OK)
	queued := events[0].GetQueued().GetGenerationId()

	g, st := b.cancel(t, alice, queued, "changed my mind")
	wantCode(t, st, codes.OK)
	if g.GetState() != agentdv1.GenerationState_GENERATION_STATE_CANCELLED {
		t.Errorf("the response: %v; want CANCELLED at once", g.GetState())
	}
	a.wantCancelled(t, queued, "changed my mind")
	got, err := a.client.GetThread(as(t, alice), &agentdv1.GetThreadRequest{ThreadId: th.GetThreadId()})
	if err != nil || len(got.GetThread().GetQueuedGenerationIds()) != 0 || got.GetThread().GetActiveGenerationId() != first.id(t) {
		t.Errorf("the thread: %v, %v; want the first holding it, nothing queued", got, err)
	}

	_, st = a.decide(t, bob, first.id(t), &agentdv1.ApprovalDecision{RequestId: req.GetId(), Approved: true, Digest: req.GetDigest()})
	wantCode(t, st, codes.OK)
	_, st = first.rest(t)
	wantCode(t, st, codes.OK)
	if items := waitItems(t, a, th.GetThreadId(), 4); items[0].GetParts()[0].GetText() != "tidy" {
		t.Errorf("the thread: %v; want the first generation's four items alone", items)
	}
}
