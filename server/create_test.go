package server_test

import (
	"context"
	"testing"

	"github.com/google/go-cmp/cmp"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/testing/protocmp"

	bridgev1 "github.com/agentd/agentd/gen/go/agentd/bridge/v1"
	agentdv1 "github.com/agentd/agentd/gen/go/agentd/v1"
	"github.com/agentd/agentd/internal/fault"
	"github.com/agentd/agentd/internal/store"
)

// CreateGeneration starts a generation detached and returns once it
// is recorded and running: its id and its started event's sequence
// number. The generation runs to its end without a client; following it
// after first_sequence-1 shows every event, as its log stores them. Its
// audit line is a detached start's.
func TestCreateGeneration(t *testing.T) {
	t.Parallel()
	client, lines, st, _ := loggedService(t, true, &fakeBridge{}, recordingScript())
	res, err := client.CreateGeneration(t.Context(), &agentdv1.CreateGenerationRequest{Start: &agentdv1.StartGeneration{Agent: textAgent(t, "hello"), Messages: userSays("hi")}})
	if err != nil {
		t.Fatalf("CreateGeneration: %v", err)
	}
	id := res.GetGenerationId()
	if res.GetFirstSequence() != 1 || id == "" {
		t.Fatalf("CreateGeneration = %v; want an id and first_sequence 1", res)
	}
	if _, err := st.Generations().Get(t.Context(), "", id); err != nil {
		t.Fatalf("the created generation has no record: %v", err)
	}
	events, fst := follow(t, client, id, res.GetFirstSequence()-1)
	wantCode(t, fst, codes.OK)
	if got := started(t, events).GetGenerationId(); got != id {
		t.Errorf("started names %q; want %q", got, id)
	}
	if k := kinds(events); k[len(k)-1] != "completed" {
		t.Errorf("followed %v; want it to end with completed", k)
	}
	waitForState(t, &pausable{store: st}, id, store.Completed)
	if diff := cmp.Diff(storedEvents(t, &pausable{store: st}, id), events, protocmp.Transform()); diff != "" {
		t.Errorf("followed events differ from the log (-stored +followed):\n%s", diff)
	}
	audit := lines.named(t, "generation detached")
	if len(audit) != 1 || audit[0]["generation"] != id || audit[0]["audit"] != true {
		t.Errorf("audit lines %v; want one detached start of %s", audit, id)
	}
}

// A detached start whose generation ends before its started event (its
// session cannot open) ends as the generation did, with what its log
// holds, over CreateGeneration and over a detached Generate stream alike;
// the record says it failed.
func TestCreateGenerationEndsBeforeStarted(t *testing.T) {
	t.Parallel()
	bridge := &fakeBridge{onOpen: func(context.Context, *bridgev1.OpenSessionRequest) error {
		return fault.New(fault.Unavailable, "bridge unavailable")
	}}
	a := newPausable(t, bridge, nil, recordingScript())
	start := &agentdv1.StartGeneration{Messages: userSays("go"), Agent: &agentdv1.Agent{
		Provider: "script", Mcps: []*agentdv1.MCPServer{refServer("", "demo")}, ProviderOptions: script(t, `{"turns": [{"text": "done"}]}`)}}
	_, err := a.client.CreateGeneration(t.Context(), &agentdv1.CreateGenerationRequest{Start: start})
	cst := status.Convert(err)
	wantCode(t, cst, codes.Unavailable)
	detached := proto.CloneOf(start)
	detached.Detach = true
	events, gst := generate(t, a.client, detached, nil)
	if cst.Code() != gst.Code() || cst.Message() != gst.Message() {
		t.Errorf("CreateGeneration: %v; Generate: %v; want the same", cst, gst)
	}
	if len(events) != 0 {
		t.Errorf("the detached stream sent %v; want nothing", kinds(events))
	}
	page, _, err := a.store.Generations().List(t.Context(), "", store.ListOptions{})
	if err != nil || len(page) != 2 || page[0].State != store.Failed || page[1].State != store.Failed {
		t.Errorf("the store holds %v (%v); want two failed generations", page, err)
	}
}

// CreateGeneration refuses what Generate's start refuses, with the
// same code, message and field violations, before anything is recorded;
// without a durable record of generations it is FAILED_PRECONDITION.
func TestCreateGenerationRefuses(t *testing.T) {
	t.Parallel()
	a := newPausable(t, &fakeBridge{}, nil, recordingScript())
	for _, tc := range []struct {
		name  string
		start *agentdv1.StartGeneration
	}{
		{"no start", nil},
		{"no messages, unknown provider", &agentdv1.StartGeneration{Agent: &agentdv1.Agent{Provider: "nope"}}},
		{"a command server without a name", &agentdv1.StartGeneration{Agent: &agentdv1.Agent{Provider: "script", Mcps: []*agentdv1.MCPServer{{}}}, Messages: userSays("hi")}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			detached := &agentdv1.StartGeneration{Detach: true}
			if tc.start != nil {
				detached = proto.CloneOf(tc.start)
				detached.Detach = true
			}
			_, gst := generate(t, a.client, detached, nil)
			_, err := a.client.CreateGeneration(t.Context(), &agentdv1.CreateGenerationRequest{Start: tc.start})
			cst := status.Convert(err)
			wantCode(t, cst, codes.InvalidArgument)
			if cst.Code() != gst.Code() || cst.Message() != gst.Message() {
				t.Errorf("CreateGeneration: %v; Generate: %v; want the same", cst, gst)
			}
			if diff := cmp.Diff(fieldViolations(gst), fieldViolations(cst), protocmp.Transform()); diff != "" {
				t.Errorf("violations (-Generate +CreateGeneration):\n%s", diff)
			}
		})
	}
	page, _, err := a.store.Generations().List(t.Context(), "", store.ListOptions{})
	if err != nil || len(page) != 0 {
		t.Errorf("the store holds %d generations (%v); want none", len(page), err)
	}

	_, err = newClient(t, &fakeBridge{}, recordingScript()).CreateGeneration(t.Context(), &agentdv1.CreateGenerationRequest{Start: &agentdv1.StartGeneration{Agent: textAgent(t, "hi"), Messages: userSays("hi")}})
	wantCode(t, status.Convert(err), codes.FailedPrecondition)
}
