package main

import (
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
