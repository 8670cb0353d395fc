package main

import (
	"os"
	"strings"
	"testing"

	agentdv1 "github.com/agentd/agentd/gen/go/agentd/v1"
)

// A decision shows what was decided of which request, by whom and why.
func TestDecidedLine(t *testing.T) {
	for _, tc := range []struct {
		d    *agentdv1.ApprovalDecided
		want string
	}{
		{&agentdv1.ApprovalDecided{RequestId: "approval_call_1", Kind: agentdv1.PendingRequestKind_PENDING_REQUEST_KIND_APPROVAL, Approved: true, DecidedBy: "bob", Reason: "looks right"},
			"approval_call_1 approved by bob: looks right"},
		{&agentdv1.ApprovalDecided{RequestId: "approval_call_2", Kind: agentdv1.PendingRequestKind_PENDING_REQUEST_KIND_APPROVAL},
			"approval_call_2 declined"},
		{&agentdv1.ApprovalDecided{RequestId: "input_7", Kind: agentdv1.PendingRequestKind_PENDING_REQUEST_KIND_INPUT, Action: agentdv1.InputAction_INPUT_ACTION_ACCEPT, DecidedBy: "alice"},
			"input_7 answered (accept) by alice"},
		{&agentdv1.ApprovalDecided{RequestId: "authorization_3", Kind: agentdv1.PendingRequestKind_PENDING_REQUEST_KIND_AUTHORIZATION},
			"authorization_3 answered"},
	} {
		if got := decided(tc.d); got != tc.want {
			t.Errorf("decided(%v) = %q; want %q", tc.d, got, tc.want)
		}
	}
}

// A start queued behind the generation that holds its thread says so, and
// how to follow it once it runs; with --json that is on stderr.
func TestGenerateQueued(t *testing.T) {
	t.Parallel()
	addr := serveFake(t, &fakeService{generate: func(s agentdv1.AgentService_GenerateServer) error {
		if _, err := s.Recv(); err != nil {
			return err
		}
		return s.Send(&agentdv1.GenerateResponse{Event: &agentdv1.GenerateResponse_Queued{Queued: &agentdv1.GenerationQueued{
			GenerationId: "gen_2", ThreadId: "thr_1", BehindGenerationId: "gen_1",
		}}})
	}})
	out, _ := mustCLI(t, addr, "", "generate", "--prompt", "hi")
	if want := "queued gen_2 on thread thr_1 behind gen_1\nit runs once the thread is free; follow it: " + os.Args[0] + " attach gen_2\n"; out != want {
		t.Errorf("generate printed %q; want %q", out, want)
	}
	out, errOut := mustCLI(t, addr, "", "generate", "--prompt", "hi", "--json")
	if events := unmarshalLines(t, out, &agentdv1.GenerateResponse{}); len(events) != 1 || !strings.Contains(errOut, " attach gen_2\n") {
		t.Errorf("generate --json printed %v; stderr %q", events, errOut)
	}
}
