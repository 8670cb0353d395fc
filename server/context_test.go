package server_test

import (
	"context"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
	"google.golang.org/grpc/codes"
	"google.golang.org/protobuf/testing/protocmp"

	bridgev1 "github.com/agentd/agentd/gen/go/agentd/bridge/v1"
	agentdv1 "github.com/agentd/agentd/gen/go/agentd/v1"
	"github.com/agentd/agentd/providers/scripted"
)

// TestContextPolicy proves that each model turn sends the conversation as
// the agent's context policy fits it, and that the turn's usage event
// says what was left out: the old tool output elided, or the old turn
// left out whole, while the turn being answered (the last user message,
// the model's tool call and its result) is sent whole every time.
func TestContextPolicy(t *testing.T) {
	t.Parallel()
	// An earlier exchange of the thread: 100 + 5 + 1000 + 10 tokens, and
	// the new question, 2.
	old := []*agentdv1.Message{
		{Role: agentdv1.Role_ROLE_USER, Parts: []*agentdv1.Part{textPart(strings.Repeat("q", 400))}},
		{Role: agentdv1.Role_ROLE_ASSISTANT, Parts: []*agentdv1.Part{callPart("c0", "echo", `{"text":"old"}`)}},
		{Role: agentdv1.Role_ROLE_TOOL, Parts: []*agentdv1.Part{resultPart("c0", "echo", strings.Repeat("o", 4000), false)}},
		{Role: agentdv1.Role_ROLE_ASSISTANT, Parts: []*agentdv1.Part{textPart(strings.Repeat("a", 40))}},
	}
	ask := userSays("say hi")[0]
	oldElided := &agentdv1.Message{Role: agentdv1.Role_ROLE_TOOL, Parts: []*agentdv1.Part{
		resultPart("c0", "echo", "[tool output left out to fit the context window: 4000 bytes]", false),
	}}
	// The turn being answered, as the second model turn sends it: 8 + 1
	// tokens.
	call := &agentdv1.Message{Role: agentdv1.Role_ROLE_ASSISTANT, Parts: []*agentdv1.Part{textPart("Let me check."), callPart("call_1_1", "echo", `{"text":"hi"}`)}}
	answer := &agentdv1.Message{Role: agentdv1.Role_ROLE_TOOL, Parts: []*agentdv1.Part{resultPart("call_1_1", "echo", "hi", false)}}
	tests := []struct {
		name     string
		policy   *agentdv1.ContextPolicy
		want     [2][]*agentdv1.Message // what each model turn sends
		wantTrim [2]*agentdv1.ContextTrim
	}{
		{
			name:   "the old tool output is elided",
			policy: &agentdv1.ContextPolicy{MaxInputTokens: 200},
			want: [2][]*agentdv1.Message{
				{old[0], old[1], oldElided, old[3], ask},
				{old[0], old[1], oldElided, old[3], ask, call, answer},
			},
			wantTrim: [2]*agentdv1.ContextTrim{
				{ConversationTokens: 1117, SentTokens: 132, BudgetTokens: 200, ResultsElided: 1},
				{ConversationTokens: 1126, SentTokens: 141, BudgetTokens: 200, ResultsElided: 1},
			},
		},
		{
			name:   "the old turn is left out whole",
			policy: &agentdv1.ContextPolicy{MaxInputTokens: 50},
			want:   [2][]*agentdv1.Message{{ask}, {ask, call, answer}},
			wantTrim: [2]*agentdv1.ContextTrim{
				{ConversationTokens: 1117, SentTokens: 2, BudgetTokens: 50, MessagesDropped: 4},
				{ConversationTokens: 1126, SentTokens: 11, BudgetTokens: 50, MessagesDropped: 4},
			},
		},
		{
			name:   "a budget the conversation fits: sent whole, nothing said",
			policy: &agentdv1.ContextPolicy{MaxInputTokens: 2000},
			want: [2][]*agentdv1.Message{
				append(old[:4:4], ask),
				append(old[:4:4], ask, call, answer),
			},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			bridge := &fakeBridge{
				onList: offering(serverTools("demo", "echo")),
				onCall: func(context.Context, string, string, string) (*bridgev1.CallToolResponse, error) {
					return &bridgev1.CallToolResponse{Output: "hi"}, nil
				},
			}
			prov := recordingScript()
			client := newClient(t, bridge, prov)
			agent := &agentdv1.Agent{
				Provider: "script",
				Mcps:     []*agentdv1.MCPServer{refServer("", "demo")},
				Context:  tt.policy,
				ProviderOptions: script(t, `{"turns": [
					{"text": "Let me check.", "tool_calls": [{"name": "echo", "arguments": {"text": "hi"}}]},
					{"text": "It said {{tool_outputs}}"}
				]}`),
			}

			events, st := generate(t, client, &agentdv1.StartGeneration{Agent: agent, Messages: append(old[:4:4], ask)}, nil)

			wantCode(t, st, codes.OK)
			var trims []*agentdv1.ContextTrim
			for _, ev := range events {
				if u := ev.GetUsage(); u != nil {
					trims = append(trims, u.GetContext())
				}
			}
			if diff := cmp.Diff(tt.wantTrim[:], trims, protocmp.Transform()); diff != "" {
				t.Errorf("the usage events' context (-want +got):\n%s", diff)
			}
			reqs := prov.calls()
			if len(reqs) != 2 {
				t.Fatalf("provider called %d times; want 2", len(reqs))
			}
			for i, req := range reqs {
				if diff := cmp.Diff(tt.want[i], req.Messages, protocmp.Transform()); diff != "" {
					t.Errorf("model turn %d's conversation (-want +got):\n%s", i+1, diff)
				}
			}
			if got := events[len(events)-1].GetCompleted().GetMessage(); !strings.Contains(got.GetParts()[0].GetText(), "It said hi") {
				t.Errorf("completed message = %v; want the script's answer", got)
			}
		})
	}
}

// TestContextPolicyValidation proves that a policy's negative numbers are
// refused up front with their fields, and nothing reaches the provider.
func TestContextPolicyValidation(t *testing.T) {
	t.Parallel()
	client := newClient(t, &fakeBridge{}, scripted.Mock())
	agent := &agentdv1.Agent{Provider: "mock", Context: &agentdv1.ContextPolicy{MaxInputTokens: -1, ReserveOutputTokens: -4096}}

	events, st := generate(t, client, &agentdv1.StartGeneration{Agent: agent, Messages: userSays("hi")}, nil)

	wantCode(t, st, codes.InvalidArgument)
	if len(events) != 0 {
		t.Errorf("events = %v; want none", kinds(events))
	}
	want := []string{"start.agent.context.max_input_tokens", "start.agent.context.reserve_output_tokens"}
	if diff := cmp.Diff(want, violationFields(st), cmpopts.SortSlices(func(a, b string) bool { return a < b })); diff != "" {
		t.Errorf("violated fields (-want +got):\n%s", diff)
	}
	wantFacts(t, want[0], description(t, st, want[0]), "negative", "-1")
	wantFacts(t, want[1], description(t, st, want[1]), "negative", "-4096")
}
