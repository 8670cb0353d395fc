package server

import (
	agentdv1 "github.com/agentd/agentd/gen/go/agentd/v1"

	"strconv"
	"strings"
	"testing"
)

// BenchmarkFitted is what choosing a model turn's conversation costs a
// thread of 1,000 messages (250 turns of a question, a tool call, its
// 2,000-byte result and an answer): nothing without a context policy
// (no estimate is made), the estimate alone with a policy it fits, and
// the estimate and the trim with one it outgrows.
func BenchmarkFitted(b *testing.B) {
	var msgs []*agentdv1.Message
	text := func(n int) *agentdv1.Part {
		return &agentdv1.Part{Kind: &agentdv1.Part_Text{Text: strings.Repeat("x", n)}}
	}
	for i := range 250 {
		id := "c" + strconv.Itoa(i)
		msgs = append(msgs,
			&agentdv1.Message{Role: agentdv1.Role_ROLE_USER, Parts: []*agentdv1.Part{text(200)}},
			&agentdv1.Message{Role: agentdv1.Role_ROLE_ASSISTANT, Parts: []*agentdv1.Part{{Kind: &agentdv1.Part_ToolCall{ToolCall: &agentdv1.ToolCall{Id: id, Name: "read", Arguments: "{}"}}}}},
			&agentdv1.Message{Role: agentdv1.Role_ROLE_TOOL, Parts: []*agentdv1.Part{{Kind: &agentdv1.Part_ToolResult{ToolResult: &agentdv1.ToolResult{ToolCallId: id, Name: "read", Output: strings.Repeat("o", 2000)}}}}},
			&agentdv1.Message{Role: agentdv1.Role_ROLE_ASSISTANT, Parts: []*agentdv1.Part{text(500)}},
		)
	}
	for _, bb := range []struct {
		name   string
		policy *agentdv1.ContextPolicy
	}{
		{"none", nil},
		{"fits", &agentdv1.ContextPolicy{MaxInputTokens: 1 << 20}},
		{"trims", &agentdv1.ContextPolicy{MaxInputTokens: 10_000}},
	} {
		b.Run(bb.name, func(b *testing.B) {
			g := &generation{plan: &plan{agent: &agentdv1.Agent{Provider: "anthropic", Model: "claude-sonnet-4-5", Context: bb.policy}}, messages: msgs}
			b.ReportAllocs()
			for b.Loop() {
				if _, _, err := g.fitted(b.Context()); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
