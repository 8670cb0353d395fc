package server_test

import (
	"context"
	"iter"
	"slices"
	"testing"

	"github.com/google/go-cmp/cmp"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/testing/protocmp"

	agentdv1 "github.com/agentd/agentd/gen/go/agentd/v1"
	"github.com/agentd/agentd/internal/fault"
	"github.com/agentd/agentd/internal/store"
	"github.com/agentd/agentd/providers"
	"github.com/agentd/agentd/server"
)

// getGeneration calls GetGeneration for id.
func getGeneration(t *testing.T, client agentdv1.AgentServiceClient, id string) (*agentdv1.Generation, *status.Status) {
	t.Helper()
	res, err := client.GetGeneration(t.Context(), &agentdv1.GetGenerationRequest{GenerationId: id})
	return res.GetGeneration(), status.Convert(err)
}

// mustGet is getGeneration that fails the test unless it succeeds.
func mustGet(t *testing.T, client agentdv1.AgentServiceClient, id string) *agentdv1.Generation {
	t.Helper()
	g, st := getGeneration(t, client, id)
	wantCode(t, st, codes.OK)
	return g
}

// listAll pages through ListGenerations with page size size and the
// states given, and returns every generation, in order, and how many
// pages there were.
func listAll(t *testing.T, client agentdv1.AgentServiceClient, size int32, states ...agentdv1.GenerationState) (all []*agentdv1.Generation, pages int) {
	t.Helper()
	req := &agentdv1.ListGenerationsRequest{States: states, PageSize: size}
	for {
		res, err := client.ListGenerations(t.Context(), req)
		if err != nil {
			t.Fatalf("ListGenerations(%v): %v", req, err)
		}
		pages++
		if size > 0 && len(res.GetGenerations()) > int(size) {
			t.Errorf("a page of %d generations; want at most %d", len(res.GetGenerations()), size)
		}
		all = append(all, res.GetGenerations()...)
		if res.GetNextPageToken() == "" {
			return all, pages
		}
		req.PageToken = res.GetNextPageToken()
	}
}

// ids lists the generations' ids.
func ids(gs []*agentdv1.Generation) []string {
	out := make([]string, len(gs))
	for i, g := range gs {
		out[i] = g.GetGenerationId()
	}
	return out
}

// wantTimes fails unless g's times are set and in order, with a finish
// time exactly when it has finished.
func wantTimes(t *testing.T, g *agentdv1.Generation, finished bool) {
	t.Helper()
	created, updated := g.GetCreatedAt().AsTime(), g.GetUpdatedAt().AsTime()
	if g.GetCreatedAt() == nil || g.GetUpdatedAt() == nil || updated.Before(created) {
		t.Errorf("created %v, updated %v; want both, in order", g.GetCreatedAt(), g.GetUpdatedAt())
	}
	if (g.GetFinishedAt() != nil) != finished || finished && g.GetFinishedAt().AsTime().Before(created) {
		t.Errorf("finished_at = %v; want it set (after creation) only once finished (%v)", g.GetFinishedAt(), finished)
	}
}

// X-G4: GetGeneration of a completed generation shows its state, times,
// last sequence number, final message and usage, as its stream ended with
// them; ListGenerations shows the same without the final message.
func TestGetCompletedGeneration(t *testing.T) {
	t.Parallel()
	a := newPausable(t, &fakeBridge{}, nil, recordingScript())
	events, st := generate(t, a.client, &agentdv1.StartGeneration{Agent: textAgent(t, "hello there"), Messages: userSays("hi")}, nil)
	wantCode(t, st, codes.OK)
	completed := events[len(events)-1].GetCompleted()
	id := completed.GetGenerationId()

	g := mustGet(t, a.client, id)
	want := &agentdv1.Generation{
		GenerationId: id,
		State:        agentdv1.GenerationState_GENERATION_STATE_COMPLETED,
		LastSequence: int64(len(events)),
		Message:      completed.GetMessage(),
		Usage:        completed.GetUsage(),
		Provider:     "script",
	}
	times := protocmp.IgnoreFields(&agentdv1.Generation{}, "created_at", "updated_at", "finished_at")
	if diff := cmp.Diff(want, g, protocmp.Transform(), times); diff != "" {
		t.Errorf("GetGeneration (-want +got):\n%s", diff)
	}
	wantTimes(t, g, true)
	listed, _ := listAll(t, a.client, 0)
	want.Message = nil
	if diff := cmp.Diff([]*agentdv1.Generation{want}, listed, protocmp.Transform(), times); diff != "" {
		t.Errorf("ListGenerations (-want +got):\n%s", diff)
	}
}

// X-G4: a failed generation shows its state and why it failed: the status
// its stream ended with; it has no final message.
func TestGetFailedGeneration(t *testing.T) {
	t.Parallel()
	a, events, st := failedGeneration(t)
	g := mustGet(t, a.client, started(t, events).GetGenerationId())
	if g.GetState() != agentdv1.GenerationState_GENERATION_STATE_FAILED || codes.Code(g.GetErrorCode()) != st.Code() ||
		g.GetErrorMessage() != st.Message() || g.GetMessage() != nil || g.GetLastSequence() != int64(len(events)) {
		t.Errorf("GetGeneration = %v; want failed with %v %q, no message, last sequence %d", g, st.Code(), st.Message(), len(events))
	}
	wantTimes(t, g, true)
}

// X-G4: a generation whose model turn is under way is running, with no
// finish time nor result; once it completes, it shows completed.
func TestGetRunningGeneration(t *testing.T) {
	t.Parallel()
	release := make(chan struct{})
	slow := &fakeProvider{name: "slow", caps: providers.Capabilities{ModelOptional: true},
		stream: func(ctx context.Context, _ *providers.Request) iter.Seq2[providers.Event, error] {
			select {
			case <-release:
			case <-ctx.Done():
			}
			return turnOf(&providers.TextDelta{Text: "at last"})
		}}
	a := newPausable(t, &fakeBridge{}, nil, slow)
	s, err := a.client.Generate(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Send(&agentdv1.GenerateRequest{Kind: &agentdv1.GenerateRequest_Start{Start: &agentdv1.StartGeneration{Agent: &agentdv1.Agent{Provider: "slow"}, Messages: userSays("hi")}}}); err != nil {
		t.Fatal(err)
	}
	ev, err := s.Recv()
	if err != nil || ev.GetStarted() == nil {
		t.Fatalf("first event %v, %v; want started", ev, err)
	}
	id := ev.GetStarted().GetGenerationId()
	g := mustGet(t, a.client, id)
	if g.GetState() != agentdv1.GenerationState_GENERATION_STATE_RUNNING || g.GetUsage() != nil || g.GetMessage() != nil || g.GetErrorCode() != 0 {
		t.Errorf("GetGeneration = %v; want running, no result", g)
	}
	wantTimes(t, g, false)
	close(release)
	if err := s.CloseSend(); err != nil {
		t.Fatal(err)
	}
	for {
		if _, err := s.Recv(); err != nil {
			break
		}
	}
	waitForState(t, a, id, store.Completed)
	if g := mustGet(t, a.client, id); g.GetState() != agentdv1.GenerationState_GENERATION_STATE_COMPLETED || g.GetMessage() == nil {
		t.Errorf("after it ended: %v; want completed, with its message", g)
	}
}

// X-G4: a generation that waits on its client for an approval is waiting,
// and shows the approval request it waits for; once paused (its
// client half-closed), it shows the approval requests it waits for and
// when the pause expires, exactly as its paused event did, to
// GetGeneration; ListGenerations shows what it waits for too.
func TestGetPausedGeneration(t *testing.T) {
	t.Parallel()
	bridge := &fakeBridge{onList: offering(serverTools("files", "read", "delete"))}
	a := newPausable(t, bridge, nil, recordingScript())
	var id string
	var waiting *agentdv1.Generation
	var asked *agentdv1.ApprovalRequest
	events, st := generate(t, a.client, &agentdv1.StartGeneration{Agent: filesAgent(t), Messages: userSays("tidy")},
		func(ev *agentdv1.GenerateResponse, s stream) {
			if started := ev.GetStarted(); started != nil {
				id = started.GetGenerationId()
			}
			if ev.GetApprovalRequest() != nil {
				asked = ev.GetApprovalRequest()
				waitForState(t, a, id, store.Waiting)
				waiting = mustGet(t, a.client, id)
				_ = s.CloseSend() // answer later: it pauses
			}
		})
	wantCode(t, st, codes.OK)
	if diff := cmp.Diff([]*agentdv1.ApprovalRequest{asked}, waiting.GetApprovalRequests(), protocmp.Transform()); waiting.GetState() != agentdv1.GenerationState_GENERATION_STATE_WAITING || diff != "" {
		t.Errorf("at its approval request: %v; want waiting, for the request on its stream (-want +got):\n%s", waiting.GetState(), diff)
	}
	paused := events[len(events)-1].GetPaused()
	if paused == nil || len(paused.GetApprovalRequests()) == 0 {
		t.Fatalf("the stream ended with %v; want paused, waiting for an approval", kinds(events[len(events)-1:]))
	}
	waitForState(t, a, id, store.Paused)
	g := mustGet(t, a.client, id)
	want := &agentdv1.Generation{
		GenerationId:     id,
		State:            agentdv1.GenerationState_GENERATION_STATE_PAUSED,
		LastSequence:     int64(len(events)),
		ApprovalRequests: paused.GetApprovalRequests(),
		FunctionCalls:    paused.GetFunctionCalls(),
		ExpiresAt:        paused.GetExpiresAt(),
		Provider:         "script",
	}
	times := protocmp.IgnoreFields(&agentdv1.Generation{}, "created_at", "updated_at")
	if diff := cmp.Diff(want, g, protocmp.Transform(), times); diff != "" {
		t.Errorf("GetGeneration of the paused generation (-want +got):\n%s", diff)
	}
	wantTimes(t, g, false)
	listed, _ := listAll(t, a.client, 0, agentdv1.GenerationState_GENERATION_STATE_PAUSED)
	want.ExpiresAt = nil
	if diff := cmp.Diff([]*agentdv1.Generation{want}, listed, protocmp.Transform(), times); diff != "" {
		t.Errorf("ListGenerations (-want +got):\n%s", diff)
	}
	// Resumed and completed, it has no pending requests any more.
	events, st = run(t, a.client, resumeRequest(id, filesAgent(t), &agentdv1.ApprovalDecision{RequestId: paused.GetApprovalRequests()[0].GetId(), Approved: true}), nil)
	wantCode(t, st, codes.OK)
	done := mustGet(t, a.client, id)
	if done.GetState() != agentdv1.GenerationState_GENERATION_STATE_COMPLETED || len(done.GetApprovalRequests()) != 0 || done.GetExpiresAt() != nil ||
		done.GetLastSequence() != events[len(events)-1].GetSequence() {
		t.Errorf("after the resume: %v; want completed at sequence %d, nothing pending", done, events[len(events)-1].GetSequence())
	}
}

// X-G4: another tenant's generation is NOT_FOUND, with the same message as
// an id that exists nowhere, and is not among its list; the owner's
// tenant finds it.
func TestGenerationOfAnotherTenant(t *testing.T) {
	t.Parallel()
	st := newStore(t, 0)
	clients := tenantClients(t, server.Options{Bridge: &fakeBridge{}, Checkpoints: st, Generations: st.Generations(), Replica: "r",
		Tenants: tenantsOf(map[string]*server.Tenant{"acme": {}, "globex": {}})}, recordingScript())
	events, s := generate(t, clients("acme"), &agentdv1.StartGeneration{Agent: textAgent(t, "hi"), Messages: userSays("hi")}, nil)
	wantCode(t, s, codes.OK)
	id := started(t, events).GetGenerationId()

	_, other := getGeneration(t, clients("globex"), id)
	_, unknown := getGeneration(t, clients("globex"), "gen_unknown")
	wantCode(t, other, codes.NotFound)
	wantCode(t, unknown, codes.NotFound)
	if other.Message() != `no generation "`+id+`"` || unknown.Message() != `no generation "gen_unknown"` {
		t.Errorf("messages %q, %q; want the same, naming only the id", other.Message(), unknown.Message())
	}
	if listed, _ := listAll(t, clients("globex"), 0); len(listed) != 0 {
		t.Errorf("globex lists %v; want none of acme's", ids(listed))
	}
	if listed, _ := listAll(t, clients("acme"), 0); !slices.Equal(ids(listed), []string{id}) {
		t.Errorf("acme lists %v; want [%s]", ids(listed), id)
	}
	_, denied := getGeneration(t, clients("initech"), id)
	wantCode(t, denied, codes.PermissionDenied)
}

// X-G4: ListGenerations pages through the tenant's generations newest
// first, each once, filtered by state; the pages hold at most page_size.
func TestListGenerations(t *testing.T) {
	t.Parallel()
	st := newStore(t, 0)
	a := &pausable{client: newClientWith(t, server.Options{Bridge: &fakeBridge{}, Checkpoints: st, Generations: st.Generations(), Replica: "r"},
		recordingScript(), brokenProvider()), store: st}
	var completed, failed []string
	for i := range 5 {
		agent := textAgent(t, "hi")
		if i%2 == 1 {
			agent = &agentdv1.Agent{Provider: "broken"}
		}
		events, _ := generate(t, a.client, &agentdv1.StartGeneration{Agent: agent, Messages: userSays("hi")}, nil)
		id := started(t, events).GetGenerationId()
		if i%2 == 1 {
			failed = append(failed, id)
		} else {
			completed = append(completed, id)
		}
	}
	for _, tc := range []struct {
		name      string
		size      int32
		states    []agentdv1.GenerationState
		want      []string
		wantPages int
	}{
		{"all, one page", 0, nil, append(slices.Clone(completed), failed...), 1},
		{"all, pages of 2", 2, nil, append(slices.Clone(completed), failed...), 3},
		{"all, pages of 5", 5, nil, append(slices.Clone(completed), failed...), 1},
		{"completed, pages of 1", 1, []agentdv1.GenerationState{agentdv1.GenerationState_GENERATION_STATE_COMPLETED}, completed, 3},
		{"failed", 0, []agentdv1.GenerationState{agentdv1.GenerationState_GENERATION_STATE_FAILED}, failed, 1},
		{"completed or failed", 4, []agentdv1.GenerationState{agentdv1.GenerationState_GENERATION_STATE_FAILED, agentdv1.GenerationState_GENERATION_STATE_COMPLETED},
			append(slices.Clone(completed), failed...), 2},
		{"paused: none", 0, []agentdv1.GenerationState{agentdv1.GenerationState_GENERATION_STATE_PAUSED}, []string{}, 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, pages := listAll(t, a.client, tc.size, tc.states...)
			if diff := cmp.Diff(tc.want, ids(got), cmpSorted); diff != "" || pages != tc.wantPages {
				t.Errorf("listed %d pages of %v; want %d pages (-want +got):\n%s", pages, ids(got), tc.wantPages, diff)
			}
			for i := 1; i < len(got); i++ {
				if got[i].GetCreatedAt().AsTime().After(got[i-1].GetCreatedAt().AsTime()) {
					t.Errorf("%s (created %v) is listed after %s (created %v); want newest first", got[i].GetGenerationId(), got[i].GetCreatedAt().AsTime(),
						got[i-1].GetGenerationId(), got[i-1].GetCreatedAt().AsTime())
				}
			}
			for _, g := range got {
				if g.GetMessage() != nil || g.GetUsage() == nil {
					t.Errorf("listed %s with message %v, usage %v; want no message, its usage", g.GetGenerationId(), g.GetMessage(), g.GetUsage())
				}
			}
		})
	}
}

// cmpSorted compares lists of ids as sets: the order within one
// millisecond of creation is the ids', not the creation's.
var cmpSorted = cmp.Transformer("sorted", func(s []string) []string {
	s = slices.Clone(s)
	slices.Sort(s)
	return s
})

// brokenProvider is a provider that is down: its generations fail
// UNAVAILABLE.
func brokenProvider() *fakeProvider {
	return &fakeProvider{name: "broken", caps: providers.Capabilities{ModelOptional: true},
		stream: func(context.Context, *providers.Request) iter.Seq2[providers.Event, error] {
			return func(yield func(providers.Event, error) bool) {
				yield(nil, fault.New(fault.Unavailable, "the provider is down"))
			}
		}}
}

// X-G4: GetGeneration and ListGenerations refuse a bad request with every
// problem as a field violation, before reading anything; an unknown id is
// NOT_FOUND; without a durable record of generations both are
// FAILED_PRECONDITION; a store that fails makes them UNAVAILABLE.
func TestGenerationRequestErrors(t *testing.T) {
	t.Parallel()
	st := newStore(t, 0)
	client := newClientWith(t, server.Options{Bridge: &fakeBridge{}, Checkpoints: st, Generations: st.Generations(), Replica: "r"}, recordingScript())
	closed := newStore(t, 0)
	down := newClientWith(t, server.Options{Bridge: &fakeBridge{}, Checkpoints: closed, Generations: closed.Generations(), Replica: "r"}, recordingScript())
	if err := closed.Close(); err != nil {
		t.Fatal(err)
	}
	unrecorded := newClient(t, &fakeBridge{}, recordingScript())
	get := func(c agentdv1.AgentServiceClient, id string) func() error {
		return func() error {
			_, err := c.GetGeneration(t.Context(), &agentdv1.GetGenerationRequest{GenerationId: id})
			return err
		}
	}
	list := func(c agentdv1.AgentServiceClient, req *agentdv1.ListGenerationsRequest) func() error {
		return func() error {
			_, err := c.ListGenerations(t.Context(), req)
			return err
		}
	}
	for _, tc := range []struct {
		name   string
		call   func() error
		code   codes.Code
		fields []string
	}{
		{"get without an id", get(client, ""), codes.InvalidArgument, []string{"generation_id"}},
		{"get an unknown id", get(client, "gen_unknown"), codes.NotFound, nil},
		{"list a negative page size", list(client, &agentdv1.ListGenerationsRequest{PageSize: -1}), codes.InvalidArgument, []string{"page_size"}},
		{"list too large a page", list(client, &agentdv1.ListGenerationsRequest{PageSize: 1001}), codes.InvalidArgument, []string{"page_size"}},
		{"list the largest page", list(client, &agentdv1.ListGenerationsRequest{PageSize: 1000}), codes.OK, nil},
		{"list unknown states", list(client, &agentdv1.ListGenerationsRequest{PageSize: -1, States: []agentdv1.GenerationState{
			agentdv1.GenerationState_GENERATION_STATE_RUNNING, agentdv1.GenerationState_GENERATION_STATE_UNSPECIFIED, 42}}),
			codes.InvalidArgument, []string{"page_size", "states[1]", "states[2]"}},
		{"list after a bad page token", list(client, &agentdv1.ListGenerationsRequest{PageToken: "not-a-token"}), codes.InvalidArgument, []string{"page_token"}},
		{"get without a record", get(unrecorded, "gen_x"), codes.FailedPrecondition, nil},
		{"list without a record", list(unrecorded, &agentdv1.ListGenerationsRequest{}), codes.FailedPrecondition, nil},
		{"get while the store fails", get(down, "gen_x"), codes.Unavailable, nil},
		{"list while the store fails", list(down, &agentdv1.ListGenerationsRequest{}), codes.Unavailable, nil},
		{"a bad request while the store fails", get(down, ""), codes.InvalidArgument, []string{"generation_id"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			st := status.Convert(tc.call())
			wantCode(t, st, tc.code)
			if diff := cmp.Diff(tc.fields, violationFields(st)); diff != "" {
				t.Errorf("violations (-want +got):\n%s", diff)
			}
		})
	}
}
