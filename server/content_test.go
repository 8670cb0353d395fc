package server_test

import (
	"context"
	"iter"
	"testing"

	"google.golang.org/grpc/codes"

	agentdv1 "github.com/agentd/agentd/gen/go/agentd/v1"
	"github.com/agentd/agentd/providers"
)

// turns is a fake provider stream that plays one event list per request.
func turns(ts ...[]providers.Event) func(context.Context, *providers.Request) iter.Seq2[providers.Event, error] {
	n := 0
	return func(context.Context, *providers.Request) iter.Seq2[providers.Event, error] {
		evs := ts[min(n, len(ts)-1)]
		n++
		return func(yield func(providers.Event, error) bool) {
			for _, ev := range evs {
				if !yield(ev, nil) {
					return
				}
			}
		}
	}
}

func reasoningPart(text, sig, provider string, redacted bool) *agentdv1.Part {
	return &agentdv1.Part{Kind: &agentdv1.Part_Reasoning{Reasoning: &agentdv1.Reasoning{Text: text, Signature: sig, Provider: provider, Redacted: redacted}}}
}

// TestAssistantContent proves how a streamed turn becomes the assistant
// message: parts in the order the provider streamed them, text deltas
// joined per run, reasoning joined into blocks that a signature ends,
// redacted reasoning and another provider's reasoning as blocks of their
// own.
func TestAssistantContent(t *testing.T) {
	t.Parallel()
	end := &providers.Stop{Reason: agentdv1.StopReason_STOP_REASON_END_TURN}
	ptc := &agentdv1.ProviderToolCall{Id: "mcp_1", ServerName: "docs", ToolName: "search", Arguments: "{}", Output: "found"}
	prov := plainProvider()
	prov.stream = turns([]providers.Event{
		&providers.Reasoning{Text: "Think "}, &providers.Reasoning{Text: "hard."}, &providers.Reasoning{Signature: "sig1"},
		&providers.Reasoning{Signature: "opaque", Redacted: true},
		&providers.TextDelta{Text: "Searching"}, &providers.TextDelta{Text: "..."},
		&providers.ProviderToolCall{Call: ptc},
		&providers.Reasoning{Text: "Routed thought", Provider: "anthropic"},
		&providers.TextDelta{Text: "Found it."},
		end,
	})
	client := newClient(t, &fakeBridge{}, prov)

	events, st := generate(t, client, &agentdv1.StartGeneration{Agent: &agentdv1.Agent{Provider: prov.name}, Messages: userSays("find")}, nil)

	wantCode(t, st, codes.OK)
	want := &agentdv1.Message{Role: agentdv1.Role_ROLE_ASSISTANT, Parts: []*agentdv1.Part{
		reasoningPart("Think hard.", "sig1", "plain", false),
		reasoningPart("", "opaque", "plain", true),
		textPart("Searching..."),
		{Kind: &agentdv1.Part_ProviderToolCall{ProviderToolCall: ptc}},
		reasoningPart("Routed thought", "", "anthropic", false),
		textPart("Found it."),
	}}
	if diff := protoDiff(want, events[len(events)-1].GetCompleted().GetMessage()); diff != "" {
		t.Errorf("assistant message (-want +got):\n%s", diff)
	}
}

// TestPausedTurnContinues proves that a turn the provider paused while it
// ran its own tools (Anthropic's pause_turn) is sent back as is for the
// provider to continue, counting as a tool turn, and that max_tool_turns
// bounds such continuations too.
func TestPausedTurnContinues(t *testing.T) {
	t.Parallel()
	ptc := &agentdv1.ProviderToolCall{Id: "mcp_1", ServerName: "docs", ToolName: "search", Arguments: "{}", Output: "found"}
	paused := []providers.Event{
		&providers.ProviderToolCall{Call: ptc},
		&providers.Stop{Reason: agentdv1.StopReason_STOP_REASON_END_TURN, Paused: true},
	}
	final := []providers.Event{&providers.TextDelta{Text: "Done."}, &providers.Stop{Reason: agentdv1.StopReason_STOP_REASON_END_TURN}}

	t.Run("continues", func(t *testing.T) {
		t.Parallel()
		prov := urlProvider()
		prov.stream = turns(paused, final)
		client := newClient(t, &fakeBridge{}, prov)

		events, st := generate(t, client, &agentdv1.StartGeneration{Agent: &agentdv1.Agent{Provider: prov.name}, Messages: userSays("find")}, nil)

		wantCode(t, st, codes.OK)
		first := &agentdv1.Message{Role: agentdv1.Role_ROLE_ASSISTANT, Parts: []*agentdv1.Part{{Kind: &agentdv1.Part_ProviderToolCall{ProviderToolCall: ptc}}}}
		reqs := prov.calls()
		if len(reqs) != 2 {
			t.Fatalf("provider called %d times; want 2", len(reqs))
		}
		if diff := protoDiff(append(userSays("find"), first), reqs[1].Messages); diff != "" {
			t.Errorf("continuation request (-want +got):\n%s", diff)
		}
		done := events[len(events)-1].GetCompleted()
		if done.GetToolTurns() != 1 || len(done.GetMessages()) != 2 {
			t.Errorf("completed with %d tool turns and %d messages; want 1 and 2", done.GetToolTurns(), len(done.GetMessages()))
		}
	})
	t.Run("bounded by max_tool_turns", func(t *testing.T) {
		t.Parallel()
		prov := urlProvider()
		prov.stream = turns(paused) // pauses for ever
		client := newClient(t, &fakeBridge{}, prov)
		maxTurns := int32(3)

		events, st := generate(t, client, &agentdv1.StartGeneration{Agent: &agentdv1.Agent{Provider: prov.name, MaxToolTurns: &maxTurns}, Messages: userSays("find")}, nil)

		wantCode(t, st, codes.OK)
		if n := len(prov.calls()); n != 4 {
			t.Errorf("provider called %d times; want 4 (the first turn and 3 continuations)", n)
		}
		if l := events[len(events)-1].GetCompleted().GetLimit(); l.GetName() != "max_tool_turns" || l.GetUsed() != 3 {
			t.Errorf("completed at limit %v; want max_tool_turns, 3 used", l)
		}
	})
}
