package server_test

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"google.golang.org/genproto/googleapis/rpc/errdetails"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/testing/protocmp"

	bridgev1 "github.com/agentd/agentd/gen/go/agentd/bridge/v1"
	agentdv1 "github.com/agentd/agentd/gen/go/agentd/v1"
	"github.com/agentd/agentd/internal/config"
	"github.com/agentd/agentd/internal/quota"
	"github.com/agentd/agentd/internal/sealer/sealertest"
	"github.com/agentd/agentd/internal/store"
	"github.com/agentd/agentd/internal/testwait"
	"github.com/agentd/agentd/server"
)

// threadReplicas serves two replicas, a and b, on one store, both
// adopting at once what their store makes adoptable (a start queued on a
// thread, once the thread is its).
func threadReplicas(t *testing.T, bridge server.Bridge) (a, b *deciding) {
	t.Helper()
	st := newStore(t, 0)
	fast := func(c *config.Generation) {
		c.LeaseTTL = time.Second
		c.AdoptInterval = 20 * time.Millisecond
	}
	return servedReplica(t, st, "replica-a", bridge, nil, fast, recordingScript()),
		servedReplica(t, st, "replica-b", bridge, nil, fast, recordingScript())
}

// newThread creates a thread of key's tenant.
func (d *deciding) newThread(t *testing.T, key string, req *agentdv1.CreateThreadRequest) *agentdv1.Thread {
	t.Helper()
	res, err := d.client.CreateThread(as(t, key), req)
	if err != nil {
		t.Fatal(err)
	}
	return res.GetThread()
}

// items reads every item of acme's thread id, oldest first, as messages.
func (d *deciding) items(t *testing.T, key, id string) []*agentdv1.Message {
	t.Helper()
	var msgs []*agentdv1.Message
	token := ""
	for {
		res, err := d.client.ListThreadItems(as(t, key), &agentdv1.ListThreadItemsRequest{ThreadId: id, PageToken: token, PageSize: 2})
		if err != nil {
			t.Fatal(err)
		}
		for _, it := range res.GetItems() {
			msgs = append(msgs, it.GetMessage())
		}
		if token = res.GetNextPageToken(); token == "" {
			return msgs
		}
	}
}

func assistantSays(text string) *agentdv1.Message {
	return &agentdv1.Message{Role: agentdv1.Role_ROLE_ASSISTANT, Parts: []*agentdv1.Part{{Kind: &agentdv1.Part_Text{Text: text}}}}
}

func wantMessages(t *testing.T, what string, want, got []*agentdv1.Message) {
	t.Helper()
	if diff := cmp.Diff(want, got, protocmp.Transform()); diff != "" {
		t.Errorf("%s (-want +got):\n%s", what, diff)
	}
}

// A generation on a thread sees the thread's items before the request's
// messages, and the thread gets the request's messages and the answer
// once the generation completes; the next one sees both. The started
// event names the thread; the items page oldest and newest first.
func TestThreadRemembersTheConversation(t *testing.T) {
	t.Parallel()
	a, _ := threadReplicas(t, &fakeBridge{})
	th := a.newThread(t, alice, &agentdv1.CreateThreadRequest{Metadata: map[string]string{"end_user": "u1"}})
	for _, say := range []string{"first", "second"} {
		l := a.start(t, alice, &agentdv1.StartGeneration{Agent: textAgent(t, "answer to "+say), Messages: userSays(say), ThreadId: th.GetThreadId()})
		events, st := l.rest(t)
		wantCode(t, st, codes.OK)
		if got := started(t, events).GetThreadId(); got != th.GetThreadId() {
			t.Errorf("started.thread_id = %q; want %q", got, th.GetThreadId())
		}
	}
	want := []*agentdv1.Message{userSays("first")[0], assistantSays("answer to first"), userSays("second")[0], assistantSays("answer to second")}
	wantMessages(t, "the thread's items", want, a.items(t, alice, th.GetThreadId()))

	res, err := a.client.ListThreadItems(as(t, bob), &agentdv1.ListThreadItemsRequest{ThreadId: th.GetThreadId(), NewestFirst: true, PageSize: 3})
	if err != nil {
		t.Fatal(err)
	}
	if got := res.GetItems(); len(got) != 3 || got[0].GetPosition() != 3 || got[2].GetPosition() != 1 || res.GetNextPageToken() == "" {
		t.Errorf("newest first, 3: %v; want positions 3, 2, 1 and a next page", got)
	}
	next, err := a.client.ListThreadItems(as(t, bob), &agentdv1.ListThreadItemsRequest{ThreadId: th.GetThreadId(), NewestFirst: true, PageSize: 3, PageToken: res.GetNextPageToken()})
	if err != nil || len(next.GetItems()) != 1 || next.GetItems()[0].GetPosition() != 0 {
		t.Errorf("the next page: %v, %v; want position 0", next.GetItems(), err)
	}

	got, err := a.client.GetThread(as(t, alice), &agentdv1.GetThreadRequest{ThreadId: th.GetThreadId()})
	if err != nil || got.GetThread().GetItemCount() != 4 || got.GetThread().GetActiveGenerationId() != "" {
		t.Errorf("GetThread: %v, %v; want 4 items and no active generation", got, err)
	}
}

// X-I6: another tenant's thread is NOT_FOUND, like an unknown one, for
// every thread call and for a start on it.
func TestThreadsBelongToTheirTenant(t *testing.T) {
	t.Parallel()
	a, _ := threadReplicas(t, &fakeBridge{})
	th := a.newThread(t, alice, &agentdv1.CreateThreadRequest{Messages: userSays("secret")})
	id := th.GetThreadId()
	calls := map[string]func() error{
		"GetThread": func() error {
			_, err := a.client.GetThread(as(t, eve), &agentdv1.GetThreadRequest{ThreadId: id})
			return err
		},
		"ListThreadItems": func() error {
			_, err := a.client.ListThreadItems(as(t, eve), &agentdv1.ListThreadItemsRequest{ThreadId: id})
			return err
		},
		"UpdateThread": func() error {
			_, err := a.client.UpdateThread(as(t, eve), &agentdv1.UpdateThreadRequest{ThreadId: id, Metadata: map[string]string{"k": "v"}})
			return err
		},
		"DeleteThread": func() error {
			_, err := a.client.DeleteThread(as(t, eve), &agentdv1.DeleteThreadRequest{ThreadId: id})
			return err
		},
		"ForkThread": func() error {
			_, err := a.client.ForkThread(as(t, eve), &agentdv1.ForkThreadRequest{ThreadId: id})
			return err
		},
		"Generate": func() error {
			_, st := a.start(t, eve, &agentdv1.StartGeneration{Agent: textAgent(t, "x"), Messages: userSays("hi"), ThreadId: id}).rest(t)
			return st.Err()
		},
	}
	for name, call := range calls {
		if st := status.Convert(call()); st.Code() != codes.NotFound {
			t.Errorf("%s as another tenant: %v; want NOT_FOUND", name, st)
		}
	}
	list, err := a.client.ListThreads(as(t, eve), &agentdv1.ListThreadsRequest{})
	if err != nil || len(list.GetThreads()) != 0 {
		t.Errorf("ListThreads as another tenant: %v, %v; want none", list.GetThreads(), err)
	}
	wantMessages(t, "the thread, unchanged", userSays("secret"), a.items(t, alice, id))
}

// A start on a thread that a generation waiting for an approval holds,
// on the other replica: REJECT (the default) is FAILED_PRECONDITION
// naming the generation; ENQUEUE queues it, and it runs once the first
// completes, on whichever replica, after the first's items.
func TestThreadMultitaskRejectAndEnqueue(t *testing.T) {
	t.Parallel()
	bridge := &fakeBridge{onList: offering(serverTools("files", "read", "delete"))}
	a, b := threadReplicas(t, bridge)
	th := a.newThread(t, alice, &agentdv1.CreateThreadRequest{})
	first := a.start(t, alice, &agentdv1.StartGeneration{Agent: filesAgent(t), Messages: userSays("tidy"), ThreadId: th.GetThreadId()})
	req := first.next(t, "the approval request", isApprovalRequest).GetApprovalRequest()
	firstID := first.id(t)

	_, st := b.start(t, alice, &agentdv1.StartGeneration{Agent: textAgent(t, "x"), Messages: userSays("hurry"), ThreadId: th.GetThreadId()}).rest(t)
	wantCode(t, st, codes.FailedPrecondition)
	if info := errorInfo(st); info.GetReason() != store.ThreadBusy || info.GetMetadata()["generation_id"] != firstID {
		t.Errorf("the rejection's ErrorInfo = %v; want %s naming %s", info, store.ThreadBusy, firstID)
	}

	events, st := b.start(t, alice, &agentdv1.StartGeneration{Agent: textAgent(t, "later"), Messages: userSays("then this"), ThreadId: th.GetThreadId(),
		Multitask: agentdv1.Multitask_MULTITASK_ENQUEUE}).rest(t)
	wantCode(t, st, codes.OK)
	if len(events) != 1 || events[0].GetQueued().GetBehindGenerationId() != firstID {
		t.Fatalf("the enqueued start's stream: %v; want one queued event behind %s", events, firstID)
	}
	queuedID := events[0].GetQueued().GetGenerationId()
	g, err := b.client.GetGeneration(as(t, alice), &agentdv1.GetGenerationRequest{GenerationId: queuedID})
	if err != nil || g.GetGeneration().GetState() != agentdv1.GenerationState_GENERATION_STATE_QUEUED {
		t.Errorf("the queued generation: %v, %v; want QUEUED", g, err)
	}

	_, st = a.decide(t, bob, firstID, &agentdv1.ApprovalDecision{RequestId: req.GetId(), Approved: true, Digest: req.GetDigest()})
	wantCode(t, st, codes.OK)
	_, st = first.rest(t)
	wantCode(t, st, codes.OK)
	a.waitState(t, queuedID, store.Completed)
	if log := a.logged(t, queuedID); len(log) == 0 || log[0].GetSequence() != 1 || log[0].GetStarted() == nil || log[0].GetStarted().GetAdopted() {
		t.Errorf("the queued generation's log begins %v; want its started event, numbered 1, not an adoption's", log[:min(len(log), 1)])
	}
	got := a.items(t, alice, th.GetThreadId())
	if len(got) != 6 || got[4].GetParts()[0].GetText() != "then this" || got[5].GetParts()[0].GetText() != "later" {
		t.Errorf("the thread: %v; want the first generation's four items, then the queued one's two", got)
	}
}

// INTERRUPT, from the other replica, stops the generation that holds the
// thread at its next safe point. Here its tool turn waits for an approval
// while its other call has run: the waiting call gets a result saying it
// did not run, the turn ends with both results, and the generation ends
// CANCELLED before its next model turn. The thread keeps the whole turn,
// then the new start's messages.
func TestThreadMultitaskInterrupt(t *testing.T) {
	t.Parallel()
	bridge := &fakeBridge{onList: offering(serverTools("files", "read", "delete"))}
	a, b := threadReplicas(t, bridge)
	th := a.newThread(t, alice, &agentdv1.CreateThreadRequest{})
	first := a.start(t, alice, &agentdv1.StartGeneration{Agent: filesAgent(t), Messages: userSays("tidy"), ThreadId: th.GetThreadId()})
	first.next(t, "the approval request", isApprovalRequest)
	firstID := first.id(t)

	events, st := b.start(t, alice, &agentdv1.StartGeneration{Agent: textAgent(t, "stopped it"), Messages: userSays("stop"), ThreadId: th.GetThreadId(),
		Multitask: agentdv1.Multitask_MULTITASK_INTERRUPT}).rest(t)
	wantCode(t, st, codes.OK)
	queuedID := events[0].GetQueued().GetGenerationId()
	_, st = first.rest(t)
	wantCode(t, st, codes.Canceled)
	a.waitState(t, firstID, store.Cancelled)
	a.waitState(t, queuedID, store.Completed)
	if n := deletesOf(bridge, "a.txt"); n != 0 {
		t.Errorf("delete ran %d times; want never (it was not approved)", n)
	}
	items := a.items(t, alice, th.GetThreadId())
	if len(items) != 5 {
		t.Fatalf("the thread holds %d items: %v; want the interrupted generation's 3, then the new one's 2", len(items), items)
	}
	results := items[2].GetParts()
	if items[0].GetParts()[0].GetText() != "tidy" || len(results) != 2 || results[0].GetToolResult().GetOutput() != "read ok" ||
		!strings.Contains(results[1].GetToolResult().GetOutput(), "not run") || !results[1].GetToolResult().GetIsError() {
		t.Errorf("the interrupted turn as kept: %v; want read's result and delete's saying it did not run", items[:3])
	}
	wantMessages(t, "the new start's items", []*agentdv1.Message{userSays("stop")[0], assistantSays("stopped it")}, items[3:])
}

// An interrupt cuts nothing short: a call running when it comes ends
// with its own result, which the thread keeps with its turn; the
// generation stops before its next model turn.
func TestThreadInterruptLetsRunningCallsEnd(t *testing.T) {
	t.Parallel()
	gate := make(chan struct{})
	bridge := &fakeBridge{onList: offering(serverTools("files", "slow")), onCall: func(ctx context.Context, _, tool, _ string) (*bridgev1.CallToolResponse, error) {
		select {
		case <-gate:
			return &bridgev1.CallToolResponse{Output: "slow done"}, nil
		case <-ctx.Done():
			return nil, context.Cause(ctx)
		}
	}}
	a, b := threadReplicas(t, bridge)
	th := a.newThread(t, alice, &agentdv1.CreateThreadRequest{})
	agent := &agentdv1.Agent{Provider: "script", Mcps: []*agentdv1.MCPServer{refServer("files", "files")}, ProviderOptions: script(t, `{"turns": [
		{"tool_calls": [{"name": "slow", "arguments": {}}]}, {"text": "never said"}]}`)}
	first := a.start(t, alice, &agentdv1.StartGeneration{Agent: agent, Messages: userSays("go"), ThreadId: th.GetThreadId()})
	testwait.For(t, "the slow call", func() bool { return bridge.callsTo("slow") == 1 })
	_, st := b.start(t, alice, &agentdv1.StartGeneration{Agent: textAgent(t, "ok"), Messages: userSays("stop"), ThreadId: th.GetThreadId(),
		Multitask: agentdv1.Multitask_MULTITASK_INTERRUPT}).rest(t)
	wantCode(t, st, codes.OK)
	testwait.For(t, "the interrupt reaching the generation", func() bool { return strings.Contains(a.log.String(), "generation interrupted by a newer start") })
	close(gate)
	_, st = first.rest(t)
	wantCode(t, st, codes.Canceled)
	items := waitItems(t, a, th.GetThreadId(), 5)
	if got := items[2].GetParts()[0].GetToolResult().GetOutput(); got != "slow done" {
		t.Errorf("the running call's result as the thread keeps it: %q; want its own", got)
	}
}

// waitItems waits until acme's thread id holds n items, and returns them.
func waitItems(t *testing.T, d *deciding, id string, n int) []*agentdv1.Message {
	t.Helper()
	testwait.For(t, fmt.Sprintf("the thread's %d items", n), func() bool {
		got, err := d.client.GetThread(as(t, alice), &agentdv1.GetThreadRequest{ThreadId: id})
		return err == nil && got.GetThread().GetItemCount() == int64(n) && got.GetThread().GetActiveGenerationId() == ""
	})
	return d.items(t, alice, id)
}

// A failed generation leaves its thread as it was; with on_failure
// KEEP_INPUT its request's messages stay.
func TestThreadOnFailure(t *testing.T) {
	t.Parallel()
	a, _ := threadReplicas(t, &fakeBridge{})
	failing := &agentdv1.Agent{Provider: "script", ProviderOptions: script(t, `{"turns": [{"error": {"kind": "unavailable", "message": "down"}}]}`)}
	for _, tc := range []struct {
		onFailure agentdv1.OnFailure
		want      []*agentdv1.Message
	}{
		{agentdv1.OnFailure_ON_FAILURE_UNSPECIFIED, nil},
		{agentdv1.OnFailure_ON_FAILURE_KEEP_INPUT, userSays("try")},
	} {
		th := a.newThread(t, alice, &agentdv1.CreateThreadRequest{})
		_, st := a.start(t, alice, &agentdv1.StartGeneration{Agent: failing, Messages: userSays("try"), ThreadId: th.GetThreadId(), OnFailure: tc.onFailure}).rest(t)
		wantCode(t, st, codes.Unavailable)
		wantMessages(t, "the thread after a failure, "+tc.onFailure.String(), tc.want, a.items(t, alice, th.GetThreadId()))
	}
}

// DeleteThread deletes the thread, its items and its generations: nothing
// of them can be read afterwards.
func TestDeleteThreadLeavesNothing(t *testing.T) {
	t.Parallel()
	a, _ := threadReplicas(t, &fakeBridge{})
	th := a.newThread(t, alice, &agentdv1.CreateThreadRequest{})
	events, st := a.start(t, alice, &agentdv1.StartGeneration{Agent: textAgent(t, "noted"), Messages: userSays("remember this"), ThreadId: th.GetThreadId()}).rest(t)
	wantCode(t, st, codes.OK)
	genID := started(t, events).GetGenerationId()

	res, err := a.client.DeleteThread(as(t, alice), &agentdv1.DeleteThreadRequest{ThreadId: th.GetThreadId()})
	if err != nil || res.GetItemsDeleted() != 2 || res.GetGenerationsDeleted() != 1 {
		t.Fatalf("DeleteThread: %v, %v; want 2 items and 1 generation deleted", res, err)
	}
	if _, err := a.client.GetThread(as(t, alice), &agentdv1.GetThreadRequest{ThreadId: th.GetThreadId()}); status.Code(err) != codes.NotFound {
		t.Errorf("GetThread after the delete: %v; want NOT_FOUND", err)
	}
	if _, err := a.client.GetGeneration(as(t, alice), &agentdv1.GetGenerationRequest{GenerationId: genID}); status.Code(err) != codes.NotFound {
		t.Errorf("GetGeneration of its generation after the delete: %v; want NOT_FOUND", err)
	}
	if evs, err := a.store.Generations().Read(t.Context(), "acme", genID, 0, 0); err == nil || len(evs) > 0 {
		t.Errorf("its generation's log after the delete: %d events, %v; want NotFound", len(evs), err)
	}
	if its, err := a.store.Generations().Items(t.Context(), "acme", genID, -1, 0); err == nil || len(its) > 0 {
		t.Errorf("its generation's conversation after the delete: %d items, %v; want NotFound", len(its), err)
	}
}

// previous_generation_id continues a generation that ran on no thread
// (a new thread holding its conversation), then the thread it led to
// while it is the last to append, and a fork of it after others have.
func TestPreviousGeneration(t *testing.T) {
	t.Parallel()
	a, _ := threadReplicas(t, &fakeBridge{})
	say := func(prev, text string) (genID, threadID string) {
		t.Helper()
		events, st := a.start(t, alice, &agentdv1.StartGeneration{Agent: textAgent(t, "re: "+text), Messages: userSays(text), PreviousGenerationId: prev}).rest(t)
		wantCode(t, st, codes.OK)
		s := started(t, events)
		return s.GetGenerationId(), s.GetThreadId()
	}
	g1, noThread := say("", "one")
	if noThread != "" {
		t.Fatalf("a start without a thread runs on %q", noThread)
	}
	g2, th := say(g1, "two")
	g3, th3 := say(g2, "three")
	if th == "" || th3 != th {
		t.Fatalf("threads %q then %q; want one, continued", th, th3)
	}
	_ = g3
	wantMessages(t, "the implicit thread", []*agentdv1.Message{
		userSays("one")[0], assistantSays("re: one"), userSays("two")[0], assistantSays("re: two"), userSays("three")[0], assistantSays("re: three"),
	}, a.items(t, alice, th))

	_, fork := say(g2, "branch")
	if fork == th || fork == "" {
		t.Fatalf("continuing an earlier generation ran on %q; want a fork of %q", fork, th)
	}
	wantMessages(t, "the fork", []*agentdv1.Message{
		userSays("one")[0], assistantSays("re: one"), userSays("two")[0], assistantSays("re: two"), userSays("branch")[0], assistantSays("re: branch"),
	}, a.items(t, alice, fork))
}

// ForkThread copies the items up to one of them; the two threads go
// their own ways. UpdateThread merges metadata; ListThreads filters on
// it.
func TestForkUpdateAndListThreads(t *testing.T) {
	t.Parallel()
	a, _ := threadReplicas(t, &fakeBridge{})
	th := a.newThread(t, alice, &agentdv1.CreateThreadRequest{Messages: append(userSays("a"), assistantSays("b"), userSays("c")[0]), Metadata: map[string]string{"end_user": "u1"}})
	items, err := a.client.ListThreadItems(as(t, alice), &agentdv1.ListThreadItemsRequest{ThreadId: th.GetThreadId()})
	if err != nil {
		t.Fatal(err)
	}
	fork, err := a.client.ForkThread(as(t, alice), &agentdv1.ForkThreadRequest{ThreadId: th.GetThreadId(), UpToItemId: items.GetItems()[1].GetItemId()})
	if err != nil {
		t.Fatal(err)
	}
	wantMessages(t, "the fork", append(userSays("a"), assistantSays("b")), a.items(t, alice, fork.GetThread().GetThreadId()))
	if fork.GetThread().GetMetadata()["end_user"] != "u1" {
		t.Errorf("the fork's metadata = %v; want the forked thread's", fork.GetThread().GetMetadata())
	}
	up, err := a.client.UpdateThread(as(t, alice), &agentdv1.UpdateThreadRequest{ThreadId: fork.GetThread().GetThreadId(), Metadata: map[string]string{"end_user": "u2", "title": "fork"}})
	if err != nil || up.GetThread().GetMetadata()["end_user"] != "u2" || up.GetThread().GetMetadata()["title"] != "fork" {
		t.Fatalf("UpdateThread: %v, %v", up, err)
	}
	list, err := a.client.ListThreads(as(t, alice), &agentdv1.ListThreadsRequest{Metadata: map[string]string{"end_user": "u1"}})
	if err != nil || len(list.GetThreads()) != 1 || list.GetThreads()[0].GetThreadId() != th.GetThreadId() {
		t.Errorf("ListThreads end_user=u1: %v, %v; want the first thread alone", list.GetThreads(), err)
	}
	wantMessages(t, "the forked thread, unchanged", append(userSays("a"), assistantSays("b"), userSays("c")[0]), a.items(t, alice, th.GetThreadId()))
}

// Starts queued on a thread run, detached, in the order they were
// queued, once those ahead of them have ended.
func TestQueuedStartsRunInOrder(t *testing.T) {
	t.Parallel()
	bridge := &fakeBridge{onList: offering(serverTools("files", "read", "delete"))}
	a, b := threadReplicas(t, bridge)
	th := a.newThread(t, alice, &agentdv1.CreateThreadRequest{})
	first := a.start(t, alice, &agentdv1.StartGeneration{Agent: filesAgent(t), Messages: userSays("tidy"), ThreadId: th.GetThreadId()})
	req := first.next(t, "the approval request", isApprovalRequest).GetApprovalRequest()
	for i, text := range []string{"second", "third"} {
		events, st := b.start(t, alice, &agentdv1.StartGeneration{Agent: textAgent(t, "ok "+text), Messages: userSays(text), ThreadId: th.GetThreadId(),
			Multitask: agentdv1.Multitask_MULTITASK_ENQUEUE}).rest(t)
		if st.Code() != codes.OK || len(events) != 1 || events[0].GetQueued() == nil {
			t.Fatalf("enqueue %d: %v, %v", i, kinds(events), st)
		}
	}
	_, st := a.decide(t, bob, first.id(t), &agentdv1.ApprovalDecision{RequestId: req.GetId(), Approved: true, Digest: req.GetDigest()})
	wantCode(t, st, codes.OK)
	testwait.For(t, "both queued generations ran", func() bool {
		got, err := a.client.GetThread(as(t, alice), &agentdv1.GetThreadRequest{ThreadId: th.GetThreadId()})
		return err == nil && got.GetThread().GetItemCount() == 8 && got.GetThread().GetActiveGenerationId() == ""
	})
	got := a.items(t, alice, th.GetThreadId())
	if got[4].GetParts()[0].GetText() != "second" || got[6].GetParts()[0].GetText() != "third" {
		t.Errorf("the thread: %v; want the queued ones in their order", got)
	}
}

// X-I7: limits.max_threads refuses one thread more, created or forked,
// and limits.max_thread_items a start on a thread that holds that many
// items: RESOURCE_EXHAUSTED with a QuotaFailure naming the tenant and
// the setting.
func TestThreadLimits(t *testing.T) {
	t.Parallel()
	st := newStore(t, 0)
	limits := limited(func(l *quota.Limits) {
		l.Threads = quota.Limit{N: 1, Setting: "tenants.acme.limits.max_threads"}
		l.ThreadItems = quota.Limit{N: 2, Setting: "tenants.acme.limits.max_thread_items"}
	})
	acme := tenantClients(t, server.Options{Checkpoints: st, Generations: st.Generations(), Threads: st.Threads(), Replica: "replica-a",
		Tenants: tenantsOf(map[string]*server.Tenant{"acme": limits})}, recordingScript())("acme")
	wantQuota := func(err error, setting string) {
		t.Helper()
		st := status.Convert(err)
		want := []proto.Message{&errdetails.QuotaFailure{Violations: []*errdetails.QuotaFailure_Violation{{Subject: "tenant:acme", Description: setting}}}}
		if diff := cmp.Diff(want, quotaDetails(st), protocmp.Transform()); st.Code() != codes.ResourceExhausted || diff != "" {
			t.Errorf("%v; want RESOURCE_EXHAUSTED naming %s (-want +got):\n%s", st, setting, diff)
		}
	}
	th, err := acme.CreateThread(t.Context(), &agentdv1.CreateThreadRequest{Messages: append(userSays("a"), assistantSays("b"))})
	if err != nil {
		t.Fatal(err)
	}
	_, err = acme.CreateThread(t.Context(), &agentdv1.CreateThreadRequest{})
	wantQuota(err, "tenants.acme.limits.max_threads")
	_, err = acme.ForkThread(t.Context(), &agentdv1.ForkThreadRequest{ThreadId: th.GetThread().GetThreadId()})
	wantQuota(err, "tenants.acme.limits.max_threads")
	_, st2 := generate(t, acme, &agentdv1.StartGeneration{Agent: textAgent(t, "x"), Messages: userSays("c"), ThreadId: th.GetThread().GetThreadId()}, nil)
	wantQuota(st2.Err(), "tenants.acme.limits.max_thread_items")
}

// With store.encryption_key_file, a thread's items are sealed in the
// store: their text is nowhere in what the store holds, and reads open
// them.
func TestThreadItemsAreSealed(t *testing.T) {
	t.Parallel()
	st := newStore(t, 0)
	d := servedReplica(t, st, "replica-a", &fakeBridge{}, sealertest.Keyring(t, 7), nil, recordingScript())
	th := d.newThread(t, alice, &agentdv1.CreateThreadRequest{Messages: userSays("the launch code is 0000")})
	items, err := st.Threads().ThreadItems(t.Context(), "acme", th.GetThreadId(), store.ItemRange{After: -1})
	if err != nil || len(items) != 1 {
		t.Fatalf("stored items: %v, %v", items, err)
	}
	if strings.Contains(string(items[0].Data), "launch code") {
		t.Errorf("the stored item holds its text in the clear: %q", items[0].Data)
	}
	wantMessages(t, "the items read", userSays("the launch code is 0000"), d.items(t, alice, th.GetThreadId()))
}

// A generation on a thread that pauses for an approval holds the thread
// while paused; decided and resumed, it completes and the thread gets its
// messages once: the earlier items, then its request, its tool call,
// the result and its answer. The resumed model turn saw the thread's
// earlier items too.
func TestPausedGenerationOnAThread(t *testing.T) {
	t.Parallel()
	bridge := &fakeBridge{onList: offering(serverTools("files", "read", "delete"))}
	prov := recordingScript()
	d := servedReplica(t, newStore(t, 0), "replica-a", bridge, nil, nil, prov)
	th := d.newThread(t, alice, &agentdv1.CreateThreadRequest{Messages: append(userSays("earlier"), assistantSays("noted"))})
	paused := d.pausedFor(t, &agentdv1.StartGeneration{Agent: filesAgent(t), Messages: userSays("tidy"), ThreadId: th.GetThreadId()})
	got, err := d.client.GetThread(as(t, alice), &agentdv1.GetThreadRequest{ThreadId: th.GetThreadId()})
	if err != nil || got.GetThread().GetActiveGenerationId() != paused.GetGenerationId() || got.GetThread().GetItemCount() != 2 {
		t.Fatalf("the thread while paused: %v, %v; want it held by %s, still 2 items", got, err, paused.GetGenerationId())
	}
	req := paused.GetApprovalRequests()[0]
	_, st := d.decide(t, bob, paused.GetGenerationId(), &agentdv1.ApprovalDecision{RequestId: req.GetId(), Approved: true, Digest: req.GetDigest()})
	wantCode(t, st, codes.OK)
	d.waitState(t, paused.GetGenerationId(), store.Completed)
	items := d.items(t, alice, th.GetThreadId())
	if len(items) != 6 || items[2].GetParts()[0].GetText() != "tidy" || items[3].GetRole() != agentdv1.Role_ROLE_ASSISTANT ||
		items[4].GetRole() != agentdv1.Role_ROLE_TOOL || items[5].GetParts()[0].GetText() != "done: read ok\ndelete ok" {
		t.Errorf("the thread after the resume: %v; want the 2 earlier items, then the generation's 4", items)
	}
	calls := prov.calls()
	last := calls[len(calls)-1].Messages
	if len(last) != 5 || last[0].GetParts()[0].GetText() != "earlier" {
		t.Errorf("the resumed model turn saw %d messages starting %v; want the thread's 2, then the generation's 3", len(last), last[0])
	}
}

// A paused generation on a thread started with on_failure KEEP_INPUT
// whose pause runs out leaves its input on the thread: the store appends
// what the start gave it to keep as it ends the generation.
func TestExpiredPauseKeepsInput(t *testing.T) {
	t.Parallel()
	bridge := &fakeBridge{onList: offering(serverTools("files", "read", "delete"))}
	d := servedReplica(t, newStore(t, 0), "replica-a", bridge, nil, nil, recordingScript())
	th := d.newThread(t, alice, &agentdv1.CreateThreadRequest{})
	paused := d.pausedFor(t, &agentdv1.StartGeneration{Agent: filesAgent(t), Messages: userSays("tidy"), ThreadId: th.GetThreadId(),
		OnFailure: agentdv1.OnFailure_ON_FAILURE_KEEP_INPUT})
	if n, err := d.store.Generations().ExpirePaused(t.Context(), time.Now().Add(365*24*time.Hour), nil); err != nil || n != 1 {
		t.Fatalf("ExpirePaused: %d, %v; want the paused generation", n, err)
	}
	d.waitState(t, paused.GetGenerationId(), store.Cancelled)
	wantMessages(t, "the thread after the pause ran out", userSays("tidy"), waitItems(t, d, th.GetThreadId(), 1))
}
