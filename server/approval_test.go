package server_test

import (
	"regexp"
	"testing"

	"github.com/google/go-cmp/cmp"
	"google.golang.org/grpc/codes"
	"google.golang.org/protobuf/testing/protocmp"

	agentdv1 "github.com/agentd/agentd/gen/go/agentd/v1"
)

var hexDigest = regexp.MustCompile(`^[0-9a-f]{64}$`)

// TestInlineApprovals proves the approval gate (R-A4, R-A5, R-A8): a gated
// call waits for the client's decision on the open stream while the
// turn's other calls run; approving runs it exactly once, declining gives
// the model {"error":"declined by user"} without a call.
func TestInlineApprovals(t *testing.T) {
	t.Parallel()
	readResult := resultPart("call_1_1", "read", "read ok", false)
	tests := []struct {
		name             string
		requiresApproval []string
		policy           *agentdv1.ApprovalPolicy
		approved         bool
		sendDigest       bool
		repeat           bool // send the decision twice
		wantDeletes      int
		wantDelete       *agentdv1.Part
	}{
		{
			name:             "R-A4 R-A5 requires_approval, approved with the digest",
			requiresApproval: []string{"delete"},
			approved:         true,
			sendDigest:       true,
			wantDeletes:      1,
			wantDelete:       resultPart("call_1_2", "delete", "delete ok", false),
		},
		{
			name:        "R-A1 R-A4 a server policy's always list, approved without a digest",
			policy:      &agentdv1.ApprovalPolicy{Always: &agentdv1.ToolNames{ToolNames: []string{"delete"}}},
			approved:    true,
			wantDeletes: 1,
			wantDelete:  resultPart("call_1_2", "delete", "delete ok", false),
		},
		{
			name:        "R-A1 R-A4 a server policy's never list gates the rest",
			policy:      &agentdv1.ApprovalPolicy{Never: &agentdv1.ToolNames{ToolNames: []string{"read"}}},
			approved:    true,
			sendDigest:  true,
			wantDeletes: 1,
			wantDelete:  resultPart("call_1_2", "delete", "delete ok", false),
		},
		{
			name:             "R-A8 an approval sent twice runs the call once",
			requiresApproval: []string{"delete"},
			approved:         true,
			repeat:           true,
			wantDeletes:      1,
			wantDelete:       resultPart("call_1_2", "delete", "delete ok", false),
		},
		{
			name:             "R-A8 declined: no call, the model is told",
			requiresApproval: []string{"delete"},
			approved:         false,
			sendDigest:       true,
			wantDeletes:      0,
			wantDelete:       resultPart("call_1_2", "delete", `{"error":"declined by user"}`, true),
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			bridge := &fakeBridge{onList: offering(serverTools("files", "read", "delete"))}
			prov := recordingScript()
			client := newClient(t, bridge, prov)
			files := refServer("files", "files")
			files.RequireApproval = tt.policy
			agent := &agentdv1.Agent{
				Provider:         "script",
				RequiresApproval: tt.requiresApproval,
				Mcps:             []*agentdv1.MCPServer{files},
				ProviderOptions: script(t, `{"turns": [
					{"tool_calls": [{"name": "read", "arguments": {"path": "a.txt"}}, {"name": "delete", "arguments": {"path": "a.txt"}}]},
					{"text": "done"}
				]}`),
			}

			// The client answers only once the ungated call has finished:
			// had the gate held up the whole turn, it would never answer.
			var requests []*agentdv1.ApprovalRequest
			readDone, answered := false, false
			_, st := generate(t, client, &agentdv1.StartGeneration{Agent: agent, Messages: userSays("go")}, func(ev *agentdv1.GenerateResponse, s stream) {
				if r := ev.GetApprovalRequest(); r != nil {
					requests = append(requests, r)
				}
				if f := ev.GetToolCallFinished(); f != nil && f.GetToolName() == "read" {
					readDone = true
				}
				if len(requests) == 1 && readDone && !answered {
					answered = true
					if got := bridge.callsTo("delete"); got != 0 {
						t.Errorf("delete ran %d times before it was approved", got)
					}
					digest := ""
					if tt.sendDigest {
						digest = requests[0].GetDigest()
					}
					s.Send(approve(requests[0].GetId(), digest, tt.approved))
					if tt.repeat {
						s.Send(approve(requests[0].GetId(), digest, tt.approved))
					}
				}
			})

			wantCode(t, st, codes.OK)
			want := []*agentdv1.ApprovalRequest{{
				Id:         "approval_call_1_2",
				ToolCallId: "call_1_2",
				ServerName: "files",
				ToolName:   "delete",
				Arguments:  `{"path":"a.txt"}`,
				Prompt:     "Allow delete to run?",
			}}
			if diff := cmp.Diff(want, requests, protocmp.Transform(), protocmp.IgnoreFields(&agentdv1.ApprovalRequest{}, "digest")); diff != "" {
				t.Errorf("approval requests (-want +got):\n%s", diff)
			}
			if len(requests) == 1 && !hexDigest.MatchString(requests[0].GetDigest()) {
				t.Errorf("digest = %q; want hex SHA-256", requests[0].GetDigest())
			}
			if got := bridge.callsTo("delete"); got != tt.wantDeletes {
				t.Errorf("delete ran %d times; want %d", got, tt.wantDeletes)
			}
			if got := bridge.callsTo("read"); got != 1 {
				t.Errorf("read ran %d times; want 1", got)
			}
			wantResults := &agentdv1.Message{Role: agentdv1.Role_ROLE_TOOL, Parts: []*agentdv1.Part{readResult, tt.wantDelete}}
			if diff := protoDiff(wantResults, toolResults(t, prov, 1)); diff != "" {
				t.Errorf("R-A9 tool results sent to the model, in call order (-want +got):\n%s", diff)
			}
			wantCounts(t, bridge, bridgeCounts{Open: 1, List: 1, Call: 1 + tt.wantDeletes, Close: 1})
		})
	}
}

// TestApprovalDigest proves that an approval is bound to its call (X-A10):
// two gated calls get different digests, and a decision carrying another
// call's digest is refused without running anything.
func TestApprovalDigest(t *testing.T) {
	t.Parallel()
	bridge := &fakeBridge{onList: offering(serverTools("files", "delete"))}
	client := newClient(t, bridge, recordingScript())
	agent := &agentdv1.Agent{
		Provider:         "script",
		RequiresApproval: []string{"delete"},
		Mcps:             []*agentdv1.MCPServer{refServer("files", "files")},
		ProviderOptions: script(t, `{"turns": [
			{"tool_calls": [{"name": "delete", "arguments": {"path": "a.txt"}}, {"name": "delete", "arguments": {"path": "b.txt"}}]},
			{"text": "done"}
		]}`),
	}

	var requests []*agentdv1.ApprovalRequest
	_, st := generate(t, client, &agentdv1.StartGeneration{Agent: agent, Messages: userSays("go")}, func(ev *agentdv1.GenerateResponse, s stream) {
		if r := ev.GetApprovalRequest(); r != nil {
			requests = append(requests, r)
			if len(requests) == 2 {
				s.Send(approve(requests[1].GetId(), requests[0].GetDigest(), true))
			}
		}
	})

	wantCode(t, st, codes.InvalidArgument)
	if diff := cmp.Diff([]string{"approval_decision.digest"}, violationFields(st)); diff != "" {
		t.Errorf("violated fields (-want +got):\n%s", diff)
	}
	if len(requests) != 2 || requests[0].GetDigest() == requests[1].GetDigest() {
		t.Errorf("approval requests = %v; want two with different digests", requests)
	}
	wantCounts(t, bridge, bridgeCounts{Open: 1, List: 1, Close: 1})
}

// TestApprovalWithPrefixedNames proves that requires_approval gates a
// server's tool whatever name the model sees it by (R-A3, X-T6): with
// prefixing, "delete" still gates "files__delete".
func TestApprovalWithPrefixedNames(t *testing.T) {
	t.Parallel()
	bridge := &fakeBridge{onList: offering(serverTools("files", "delete"))}
	client := newClient(t, bridge, recordingScript())
	agent := &agentdv1.Agent{
		Provider:         "script",
		ToolNameConflict: agentdv1.ToolNameConflict_TOOL_NAME_CONFLICT_PREFIX,
		RequiresApproval: []string{"delete"},
		Mcps:             []*agentdv1.MCPServer{refServer("files", "files")},
		ProviderOptions:  script(t, `{"turns": [{"tool_calls": [{"name": "files__delete"}]}, {"text": "done"}]}`),
	}

	var requests []*agentdv1.ApprovalRequest
	_, st := generate(t, client, &agentdv1.StartGeneration{Agent: agent, Messages: userSays("go")}, func(ev *agentdv1.GenerateResponse, s stream) {
		if r := ev.GetApprovalRequest(); r != nil {
			requests = append(requests, r)
			s.Send(approve(r.GetId(), r.GetDigest(), false))
		}
	})

	wantCode(t, st, codes.OK)
	if len(requests) != 1 || requests[0].GetServerName() != "files" {
		t.Errorf("approval requests = %v; want one for files__delete", requests)
	}
	wantCounts(t, bridge, bridgeCounts{Open: 1, List: 1, Close: 1})
}
