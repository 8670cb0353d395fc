package server

import (
	"cmp"
	"strings"

	agentdv1 "github.com/agentd/agentd/gen/go/agentd/v1"
	"github.com/agentd/agentd/providers"
)

// content builds an assistant message's parts in the order the provider
// streamed them: runs of text deltas join into one text part, pieces of
// reasoning into one block until a signature ends it, and provider tool
// calls and tool calls take their place between them. Providers that check
// what comes back (Anthropic's interleaved thinking, a pause_turn resent
// as is) see their turn as they sent it.
type content struct {
	parts []*agentdv1.Part
	// The open text run or reasoning block, at most one of them.
	text      strings.Builder
	reasoning *openReasoning
	// agentProvider labels reasoning whose event names no provider.
	agentProvider string
}

type openReasoning struct {
	text, signature strings.Builder
	provider        string
}

func (c *content) addText(s string) {
	if s == "" {
		return
	}
	c.closeReasoning()
	c.text.WriteString(s)
}

// addReasoning adds a streamed piece of reasoning: a signature ends the
// block, redacted reasoning is a block of its own, and reasoning from
// another provider (through the router) starts one.
func (c *content) addReasoning(ev *providers.Reasoning) {
	provider := cmp.Or(ev.Provider, c.agentProvider)
	c.closeText()
	if ev.Redacted {
		c.closeReasoning()
		c.parts = append(c.parts, &agentdv1.Part{Kind: &agentdv1.Part_Reasoning{Reasoning: &agentdv1.Reasoning{
			Signature: ev.Signature, Provider: provider, Redacted: true,
		}}})
		return
	}
	if c.reasoning != nil && c.reasoning.provider != provider {
		c.closeReasoning()
	}
	if c.reasoning == nil {
		c.reasoning = &openReasoning{provider: provider}
	}
	c.reasoning.text.WriteString(ev.Text)
	c.reasoning.signature.WriteString(ev.Signature)
	if ev.Signature != "" {
		c.closeReasoning()
	}
}

// add appends a part that is whole when it arrives.
func (c *content) add(p *agentdv1.Part) {
	c.closeText()
	c.closeReasoning()
	c.parts = append(c.parts, p)
}

// done returns the parts, every open run closed.
func (c *content) done() []*agentdv1.Part {
	c.closeText()
	c.closeReasoning()
	return c.parts
}

func (c *content) closeText() {
	if c.text.Len() > 0 {
		c.parts = append(c.parts, &agentdv1.Part{Kind: &agentdv1.Part_Text{Text: c.text.String()}})
		c.text.Reset()
	}
}

func (c *content) closeReasoning() {
	if r := c.reasoning; r != nil {
		c.parts = append(c.parts, &agentdv1.Part{Kind: &agentdv1.Part_Reasoning{Reasoning: &agentdv1.Reasoning{
			Text: r.text.String(), Signature: r.signature.String(), Provider: r.provider,
		}}})
		c.reasoning = nil
	}
}
