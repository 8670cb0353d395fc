package contextfit_test

import (
	agentdv1 "github.com/agentd/agentd/gen/go/agentd/v1"

	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"google.golang.org/protobuf/encoding/prototext"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/testing/protocmp"

	"github.com/agentd/agentd/internal/contextfit"
)

// text is n bytes of text: n/4 tokens.
func text(n int) string { return strings.Repeat("x", n) }

func msg(role agentdv1.Role, parts ...*agentdv1.Part) *agentdv1.Message {
	return &agentdv1.Message{Role: role, Parts: parts}
}

func user(n int) *agentdv1.Message { return msg(agentdv1.Role_ROLE_USER, textPart(n)) }

func answer(n int) *agentdv1.Message { return msg(agentdv1.Role_ROLE_ASSISTANT, textPart(n)) }

func textPart(n int) *agentdv1.Part { return &agentdv1.Part{Kind: &agentdv1.Part_Text{Text: text(n)}} }

// calls is an assistant message calling "read" once per id: 6 bytes, 2
// tokens, for one call.
func calls(ids ...string) *agentdv1.Message {
	m := msg(agentdv1.Role_ROLE_ASSISTANT)
	for _, id := range ids {
		m.Parts = append(m.Parts, &agentdv1.Part{Kind: &agentdv1.Part_ToolCall{ToolCall: &agentdv1.ToolCall{Id: id, Name: "read", Arguments: "{}"}}})
	}
	return m
}

func result(id, output string) *agentdv1.Part {
	return &agentdv1.Part{Kind: &agentdv1.Part_ToolResult{ToolResult: &agentdv1.ToolResult{ToolCallId: id, Name: "read", Output: output}}}
}

func results(parts ...*agentdv1.Part) *agentdv1.Message {
	return msg(agentdv1.Role_ROLE_TOOL, parts...)
}

// providerCall is a provider tool call with output: 4 bytes of tool name
// and 2 of arguments besides it.
func providerCall(output string) *agentdv1.Part {
	return &agentdv1.Part{Kind: &agentdv1.Part_ProviderToolCall{ProviderToolCall: &agentdv1.ProviderToolCall{
		Id: "p1", ServerName: "docs", ToolName: "find", Arguments: "{}", Output: output,
	}}}
}

// elided is what a note makes of a message: its parts at the indexes
// given, tool results or provider tool calls, with their outputs replaced
// by the note.
func elided(m *agentdv1.Message, notes map[int]string) *agentdv1.Message {
	c := proto.CloneOf(m)
	for i, note := range notes {
		switch k := c.Parts[i].GetKind().(type) {
		case *agentdv1.Part_ToolResult:
			k.ToolResult.Output, k.ToolResult.Attachments = note, nil
		case *agentdv1.Part_ProviderToolCall:
			k.ProviderToolCall.Output = note
		}
	}
	return c
}

// The notes for 4,000, 2,000 and 400 bytes: 60 bytes (15 tokens), 60 and
// 59 (15).
const (
	note4000 = "[tool output left out to fit the context window: 4000 bytes]"
	note2000 = "[tool output left out to fit the context window: 2000 bytes]"
	note400  = "[tool output left out to fit the context window: 400 bytes]"
)

// history is two old turns with a tool call each, and the last user
// message: 10+2+1000+10 + 10+2+1000+10 + 10 = 2,054 tokens.
func history() []*agentdv1.Message {
	return []*agentdv1.Message{
		user(40), calls("c1"), results(result("c1", text(4000))), answer(40),
		user(40), calls("c2"), results(result("c2", text(4000))), answer(40),
		user(40),
	}
}

func TestDropperFit(t *testing.T) {
	t.Parallel()
	h := history()
	// A big first turn with small results: 1000+2+100+10 + 10+2+100+10 +
	// 10 = 1,244 tokens.
	bigFirst := []*agentdv1.Message{
		user(4000), calls("c1"), results(result("c1", text(400))), answer(40),
		user(40), calls("c2"), results(result("c2", text(400))), answer(40),
		user(40),
	}
	// One model turn with two calls, answered in one tool message:
	// 10 + 3 + 500+500 + 10 + 10 = 1,033 tokens.
	parallel := []*agentdv1.Message{
		user(40), calls("a", "b"), results(result("a", text(2000)), result("b", text(2000))), answer(40),
		user(40),
	}
	// A provider's own tool call in the model's answer: 10 +
	// (4+2+4000+40)/4 + 10 = 1,032 tokens.
	provider := []*agentdv1.Message{
		user(40), msg(agentdv1.Role_ROLE_ASSISTANT, providerCall(text(4000)), textPart(40)),
		user(40),
	}
	// The last user message's own turn is sent whole, however large:
	// 10+2+1000+10 + 10+2+1000 = 2,034 tokens.
	bigLast := []*agentdv1.Message{
		user(40), calls("c1"), results(result("c1", text(4000))), answer(40),
		user(40), calls("c2"), results(result("c2", text(4000))),
	}
	tests := []struct {
		name     string
		dropper  contextfit.Dropper
		msgs     []*agentdv1.Message
		want     []*agentdv1.Message // nil: msgs itself
		wantTrim *agentdv1.ContextTrim
	}{
		{
			name:    "a conversation within its budget is sent whole",
			dropper: contextfit.Dropper{Budget: 2054},
			msgs:    h,
		},
		{
			name:     "the oldest tool result is elided first, and only it when that is enough",
			dropper:  contextfit.Dropper{Budget: 1100},
			msgs:     h,
			want:     []*agentdv1.Message{h[0], h[1], elided(h[2], map[int]string{0: note4000}), h[3], h[4], h[5], h[6], h[7], h[8]},
			wantTrim: &agentdv1.ContextTrim{ConversationTokens: 2054, SentTokens: 1069, BudgetTokens: 1100, ResultsElided: 1},
		},
		{
			name:     "every result elided, oldest first",
			dropper:  contextfit.Dropper{Budget: 84},
			msgs:     h,
			want:     []*agentdv1.Message{h[0], h[1], elided(h[2], map[int]string{0: note4000}), h[3], h[4], h[5], elided(h[6], map[int]string{0: note4000}), h[7], h[8]},
			wantTrim: &agentdv1.ContextTrim{ConversationTokens: 2054, SentTokens: 84, BudgetTokens: 84, ResultsElided: 2},
		},
		{
			name:     "then the oldest turn is left out whole: the user message, the call and its result, the answer",
			dropper:  contextfit.Dropper{Budget: 50},
			msgs:     h,
			want:     []*agentdv1.Message{h[4], h[5], elided(h[6], map[int]string{0: note4000}), h[7], h[8]},
			wantTrim: &agentdv1.ContextTrim{ConversationTokens: 2054, SentTokens: 47, BudgetTokens: 50, ResultsElided: 1, MessagesDropped: 4},
		},
		{
			name:     "the turns kept get back the results that fit once the oldest is left out",
			dropper:  contextfit.Dropper{Budget: 300},
			msgs:     bigFirst,
			want:     bigFirst[4:],
			wantTrim: &agentdv1.ContextTrim{ConversationTokens: 1244, SentTokens: 132, BudgetTokens: 300, MessagesDropped: 4},
		},
		{
			name:     "keep_tool_results leaves out whole turns only",
			dropper:  contextfit.Dropper{Budget: 1100, KeepToolResults: true},
			msgs:     h,
			want:     h[4:],
			wantTrim: &agentdv1.ContextTrim{ConversationTokens: 2054, SentTokens: 1032, BudgetTokens: 1100, MessagesDropped: 4},
		},
		{
			name:     "keep_first keeps the first message and leaves out the turns after it",
			dropper:  contextfit.Dropper{Budget: 60, KeepFirst: true},
			msgs:     h,
			want:     []*agentdv1.Message{h[0], h[4], h[5], elided(h[6], map[int]string{0: note4000}), h[7], h[8]},
			wantTrim: &agentdv1.ContextTrim{ConversationTokens: 2054, SentTokens: 57, BudgetTokens: 60, ResultsElided: 1, MessagesDropped: 3},
		},
		{
			name:     "parallel calls' results in one tool message are elided in order",
			dropper:  contextfit.Dropper{Budget: 600},
			msgs:     parallel,
			want:     []*agentdv1.Message{parallel[0], parallel[1], elided(parallel[2], map[int]string{0: note2000}), parallel[3], parallel[4]},
			wantTrim: &agentdv1.ContextTrim{ConversationTokens: 1033, SentTokens: 548, BudgetTokens: 600, ResultsElided: 1},
		},
		{
			name:     "parallel calls go with the tool message holding their results",
			dropper:  contextfit.Dropper{Budget: 20, KeepToolResults: true},
			msgs:     parallel,
			want:     parallel[4:],
			wantTrim: &agentdv1.ContextTrim{ConversationTokens: 1033, SentTokens: 10, BudgetTokens: 20, MessagesDropped: 4},
		},
		{
			name:     "a provider tool call's output is elided like a tool result's",
			dropper:  contextfit.Dropper{Budget: 100},
			msgs:     provider,
			want:     []*agentdv1.Message{provider[0], elided(provider[1], map[int]string{0: note4000}), provider[2]},
			wantTrim: &agentdv1.ContextTrim{ConversationTokens: 1032, SentTokens: 47, BudgetTokens: 100, ResultsElided: 1},
		},
		{
			name:     "a provider tool call is left out with its answer",
			dropper:  contextfit.Dropper{Budget: 20},
			msgs:     provider,
			want:     provider[2:],
			wantTrim: &agentdv1.ContextTrim{ConversationTokens: 1032, SentTokens: 10, BudgetTokens: 20, MessagesDropped: 2},
		},
		{
			name:     "over budget: the last user message and what follows are sent whole",
			dropper:  contextfit.Dropper{Budget: 100},
			msgs:     bigLast,
			want:     bigLast[4:],
			wantTrim: &agentdv1.ContextTrim{ConversationTokens: 2034, SentTokens: 1012, BudgetTokens: 100, MessagesDropped: 4, OverBudget: true},
		},
		{
			name:    "over budget with nothing to leave out: sent whole, nothing said",
			dropper: contextfit.Dropper{Budget: 100},
			msgs:    bigLast[4:],
		},
		{
			name:    "the first message kept is the last user message: nothing to leave out",
			dropper: contextfit.Dropper{Budget: 10, KeepFirst: true},
			msgs:    []*agentdv1.Message{user(40), calls("c1"), results(result("c1", text(4000)))},
		},
		{
			name:     "a result whose note is no smaller is left as it is",
			dropper:  contextfit.Dropper{Budget: 20},
			msgs:     []*agentdv1.Message{user(40), calls("c1"), results(result("c1", "ok")), answer(40), user(40)},
			want:     []*agentdv1.Message{user(40)},
			wantTrim: &agentdv1.ContextTrim{ConversationTokens: 33, SentTokens: 10, BudgetTokens: 20, MessagesDropped: 4},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			before := cloneAll(tt.msgs)

			got, trim, err := tt.dropper.Fit(t.Context(), tt.msgs)

			if err != nil {
				t.Fatalf("Fit: %v", err)
			}
			want := tt.want
			if want == nil {
				want = tt.msgs
			}
			if diff := cmp.Diff(want, got, protocmp.Transform()); diff != "" {
				t.Errorf("sent (-want +got):\n%s", diff)
			}
			if diff := cmp.Diff(tt.wantTrim, trim, protocmp.Transform()); diff != "" {
				t.Errorf("trim (-want +got):\n%s", diff)
			}
			if diff := cmp.Diff(before, tt.msgs, protocmp.Transform()); diff != "" {
				t.Errorf("the conversation was changed (-before +after):\n%s", diff)
			}
			wantShared(t, tt.msgs, got)
		})
	}
}

// wantShared fails unless every message sent is one of msgs itself, or a
// copy of one with notes (a message of its own).
func wantShared(t *testing.T, msgs, sent []*agentdv1.Message) {
	t.Helper()
	given := make(map[*agentdv1.Message]bool, len(msgs))
	for _, m := range msgs {
		given[m] = true
	}
	for i, m := range sent {
		if given[m] {
			continue
		}
		if !strings.Contains(prototext.Format(m), "left out to fit") {
			t.Errorf("sent[%d] is a copy without a note: %v", i, m)
		}
	}
}

func cloneAll(msgs []*agentdv1.Message) []*agentdv1.Message {
	out := make([]*agentdv1.Message, len(msgs))
	for i, m := range msgs {
		out[i] = proto.CloneOf(m)
	}
	return out
}

// TestDropperFitAttachments proves a tool result's attachments are left
// out with its output, and counted at the media estimate.
func TestDropperFitAttachments(t *testing.T) {
	t.Parallel()
	img := &agentdv1.Media{MimeType: "image/png", Source: &agentdv1.Media_Data{Data: []byte("png")}}
	withImage := results(result("c1", "shot"))
	withImage.Parts[0].GetToolResult().Attachments = []*agentdv1.Media{img, img}
	msgs := []*agentdv1.Message{user(40), calls("c1"), withImage, answer(40), user(40)}

	got, trim, err := contextfit.Dropper{Budget: 100}.Fit(t.Context(), msgs)

	if err != nil {
		t.Fatalf("Fit: %v", err)
	}
	want := []*agentdv1.Message{msgs[0], msgs[1], elided(withImage, map[int]string{0: "[tool output left out to fit the context window: 4 bytes and 2 attachments]"}), msgs[3], msgs[4]}
	if diff := cmp.Diff(want, got, protocmp.Transform()); diff != "" {
		t.Errorf("sent (-want +got):\n%s", diff)
	}
	// 10 + 2 + (4 + 2*6400)/4 + 10 + 10; the note is 75 bytes.
	wantTrim := &agentdv1.ContextTrim{ConversationTokens: 3233, SentTokens: 51, BudgetTokens: 100, ResultsElided: 1}
	if diff := cmp.Diff(wantTrim, trim, protocmp.Transform()); diff != "" {
		t.Errorf("trim (-want +got):\n%s", diff)
	}
}

// TestNotedFields guards the copies a note makes: a ToolResult or a
// ProviderToolCall with a field that Fit does not copy fails here.
func TestNotedFields(t *testing.T) {
	t.Parallel()
	for _, tt := range []struct {
		m    proto.Message
		want []string
	}{
		{&agentdv1.Message{}, []string{"role", "parts"}},
		{&agentdv1.ToolResult{}, []string{"tool_call_id", "name", "output", "is_error", "attachments"}},
		{&agentdv1.ProviderToolCall{}, []string{"id", "server_name", "tool_name", "arguments", "output", "is_error"}},
	} {
		fields := tt.m.ProtoReflect().Descriptor().Fields()
		var got []string
		for i := range fields.Len() {
			got = append(got, string(fields.Get(i).Name()))
		}
		if diff := cmp.Diff(tt.want, got); diff != "" {
			t.Errorf("%s's fields (-copied +declared):\n%s", tt.m.ProtoReflect().Descriptor().FullName(), diff)
		}
	}
}

// A first message kept that calls tools is kept with the tool message
// that answers it: a call is never sent without its result.
func TestKeepFirstKeepsItsResults(t *testing.T) {
	t.Parallel()
	msgs := []*agentdv1.Message{calls("c0"), results(result("c0", text(400))), answer(40), user(40), answer(40), user(40)}
	got, _, err := contextfit.Dropper{Budget: 1, KeepFirst: true}.Fit(t.Context(), msgs)
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff([]*agentdv1.Message{msgs[0], msgs[1], msgs[5]}, got, protocmp.Transform()); diff != "" {
		t.Errorf("sent (-want +got):\n%s", diff)
	}
}
