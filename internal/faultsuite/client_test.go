package faultsuite

import (
	"context"
	"testing"
	"time"

	"google.golang.org/grpc/codes"

	agentdv1 "github.com/agentd/agentd/gen/go/agentd/v1"
)

// A client that goes away while a tool call runs ends the generation; the
// call is cancelled, and its server process does not outlive the session.
func TestClientGoneDuringToolCall(t *testing.T) {
	s := newStack(t)
	ctx, cancel := context.WithCancel(t.Context())
	o := s.runWith(t, ctx, scripted(t, []map[string]any{call("hang", nil), say}, ref("tools", time.Minute)), func(o outcome) {
		if o.events[len(o.events)-1].GetToolCallStarted() != nil {
			cancel()
		}
	})
	if o.status.Code() != codes.Canceled {
		t.Errorf("the client saw %v; want Canceled", o.status.Code())
	}
}

// A client that goes away while an approval is pending pauses the
// generation; a new client resumes it with the decision, and the approved
// call runs once.
func TestClientGoneWhileApprovalPending(t *testing.T) {
	s := newStack(t)
	start := scripted(t, []map[string]any{call("echo", map[string]any{"text": "approved"}), say}, ref("tools", 0))
	start.Agent.RequiresApproval = []string{"echo"}
	ctx, cancel := context.WithCancel(t.Context())
	var id string
	var request *agentdv1.ApprovalRequest
	s.runWith(t, ctx, start, func(o outcome) {
		ev := o.events[len(o.events)-1]
		if st := ev.GetStarted(); st != nil {
			id = st.GetGenerationId()
		}
		if r := ev.GetApprovalRequest(); r != nil {
			request = r
			cancel()
		}
	})
	if request == nil {
		t.Fatal("no approval request")
	}
	// The pause is stored as the stream breaks; resume until it is there
	// (X-H6: a state to wait for, however long a loaded machine takes).
	resume := &agentdv1.GenerateRequest{Kind: &agentdv1.GenerateRequest_Resume{Resume: &agentdv1.ResumeGeneration{
		GenerationId:      id,
		Agent:             start.Agent,
		ApprovalDecisions: []*agentdv1.ApprovalDecision{{RequestId: request.GetId(), Approved: true, Digest: request.GetDigest()}},
	}}}
	deadline := time.Now().Add(settle)
	for {
		o := s.resume(t, resume)
		if o.status.Code() == codes.OK {
			wantCompleted(t, o, "approved")
			if f := o.finished(); len(f) != 1 || f[0].GetOutput() != "approved" {
				t.Errorf("tool calls after the resume: %v; want the approved one, once", f)
			}
			return
		}
		if o.status.Code() != codes.NotFound && o.status.Code() != codes.FailedPrecondition || time.Now().After(deadline) {
			t.Fatalf("resume: %v %q", o.status.Code(), o.status.Message())
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// resume sends a resume as the first message of a new stream.
func (s *stack) resume(t *testing.T, req *agentdv1.GenerateRequest) outcome {
	t.Helper()
	return s.send(t, t.Context(), req, nil)
}
