package server

import (
	"context"
	"io"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"google.golang.org/grpc"
	"google.golang.org/protobuf/testing/protocmp"

	agentdv1 "github.com/agentd/agentd/gen/go/agentd/v1"
)

// TestGrantedTokens: X-M5. A sample may have what the server asked for,
// at most the server's cap (1024 when 0), and the cap when it asked for
// none.
func TestGrantedTokens(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name  string
		cap   int32
		asked int64
		want  int
	}{
		{"fewer than the cap", 500, 100, 100},
		{"more than the cap", 500, 2000, 500},
		{"none asked", 500, 0, 500},
		{"the default cap", 0, 5000, defaultSampleMaxTokens},
		{"under the default cap", 0, 10, 10},
	}
	for _, tt := range tests {
		decl := &agentdv1.MCPServer{Sampling: &agentdv1.Sampling{Mode: agentdv1.SamplingMode_SAMPLING_MODE_ALLOW, MaxTokens: tt.cap}}
		if got := grantedTokens(decl, tt.asked); got != tt.want {
			t.Errorf("%s: grantedTokens(cap %d, asked %d) = %d, want %d", tt.name, tt.cap, tt.asked, got, tt.want)
		}
	}
}

// decisionsStream is a Generate stream whose client sends msgs, then
// half-closes.
type decisionsStream struct {
	grpc.ServerStream
	msgs []*agentdv1.GenerateRequest
}

func (s *decisionsStream) Context() context.Context { return context.Background() }
func (s *decisionsStream) Recv() (*agentdv1.GenerateRequest, error) {
	if len(s.msgs) == 0 {
		return nil, io.EOF
	}
	m := s.msgs[0]
	s.msgs = s.msgs[1:]
	return m, nil
}
func (s *decisionsStream) Send(*agentdv1.GenerateResponse) error { return nil }

// TestSamplingDecisionsGoToTheirRequest: X-M5. A decision on a sampling
// approval request goes to the request waiting for it, not to the loop's
// approvals (where an id it does not know fails the generation); one no
// request waits for any more (answered late, or twice) is dropped.
func TestSamplingDecisionsGoToTheirRequest(t *testing.T) {
	t.Parallel()
	decision := func(id string, approved bool) *agentdv1.GenerateRequest {
		return &agentdv1.GenerateRequest{Kind: &agentdv1.GenerateRequest_ApprovalDecision{ApprovalDecision: &agentdv1.ApprovalDecision{RequestId: id, Approved: approved}}}
	}
	stream := &decisionsStream{msgs: []*agentdv1.GenerateRequest{
		decision("sampling_1", true), decision("sampling_2", true), decision("approval_call_1", false),
	}}
	l := newLink(stream, func(error) {})
	defer l.out.close()
	l.mail.expect("sampling_1")
	l.receive(stream)
	got, err := l.mail.await(t.Context(), "sampling_1", time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(&agentdv1.ApprovalDecision{RequestId: "sampling_1", Approved: true}, got.approval, protocmp.Transform()); diff != "" {
		t.Errorf("sampling_1's answer (-want +got):\n%s", diff)
	}
	approvals, _, _, err := l.mail.take()
	if err != nil {
		t.Fatal(err)
	}
	var loop []*agentdv1.ApprovalDecision
	for _, d := range approvals {
		loop = append(loop, d.approval)
	}
	if diff := cmp.Diff([]*agentdv1.ApprovalDecision{{RequestId: "approval_call_1"}}, loop, protocmp.Transform()); diff != "" {
		t.Errorf("the loop's approvals (-want +got):\n%s", diff)
	}
}
