package server

import (
	agentdv1 "github.com/agentd/agentd/gen/go/agentd/v1"

	"cmp"
	"context"
	"fmt"
	"strings"

	"github.com/agentd/agentd/internal/fault"
	"github.com/agentd/agentd/providers"
)

// reply is what one model turn produced.
type reply struct {
	message *agentdv1.Message
	calls   []*agentdv1.ToolCall
	stop    agentdv1.StopReason
	// paused: the provider paused its own turn and continues when the
	// conversation is sent back (providers.Stop.Paused).
	paused bool
}

// modelTurn streams one provider turn, forwarding text as it comes, and
// appends the assistant message to the conversation.
func (g *generation) modelTurn(ctx context.Context, turn int) (_ *reply, err error) {
	model := g.plan.agent.GetModel()
	g.ran.turns++
	g.foldSamples() // those of calls a pause cut short, or asked between calls
	ctx, chat := g.startChat(ctx, model)
	var streamed *agentdv1.Usage // the turn's usage, once the provider's stream has ended
	var providerErr error        // the provider's stream failed
	defer func() { chat.end(ctx, streamed, providerErr, err) }()
	req := &providers.Request{
		Model:          model,
		Instructions:   g.plan.agent.GetInstructions(),
		Messages:       g.messages,
		Tools:          g.tools,
		ToolParameters: g.toolParams,
		MCPServers:     g.plan.providerServers(),
		Options:        g.plan.options(),
	}
	msg := &content{agentProvider: g.plan.agent.GetProvider()}
	var calls []*agentdv1.ToolCall
	usage := &agentdv1.Usage{}
	stop := agentdv1.StopReason_STOP_REASON_UNSPECIFIED
	paused := false
	reported := false // the provider gave the turn's usage
	seen := make(map[string]bool)
	for ev, err := range g.plan.provider.Stream(ctx, req) {
		if err != nil {
			providerErr = err
			return nil, err
		}
		chat.chunk()
		switch ev := ev.(type) {
		case *providers.TextDelta:
			msg.addText(ev.Text)
			if err := g.emit(ctx, &agentdv1.GenerateResponse{Event: &agentdv1.GenerateResponse_TextDelta{TextDelta: &agentdv1.TextDelta{Text: ev.Text}}}); err != nil {
				return nil, err
			}
		case *providers.Reasoning:
			msg.addReasoning(ev)
		case *providers.ToolCall:
			c := ev.Call
			if c.GetId() == "" {
				c.Id = fmt.Sprintf("call_%d_%d", turn, len(calls)+1)
			}
			if seen[c.GetId()] {
				return nil, fault.New(fault.Internal, "the provider returned two tool calls with the id %q", c.GetId())
			}
			seen[c.GetId()] = true
			calls = append(calls, c)
			msg.add(&agentdv1.Part{Kind: &agentdv1.Part_ToolCall{ToolCall: c}})
		case *providers.ProviderToolCall:
			msg.add(&agentdv1.Part{Kind: &agentdv1.Part_ProviderToolCall{ProviderToolCall: ev.Call}})
			if err := g.emit(ctx, &agentdv1.GenerateResponse{Event: &agentdv1.GenerateResponse_ProviderToolCall{ProviderToolCall: ev.Call}}); err != nil {
				return nil, err
			}
		case *providers.Usage:
			usage = ev.Usage
			reported = true
		case *providers.Stop:
			stop, paused = ev.Reason, ev.Paused
			chat.response = ev.Response
		}
	}
	if reported {
		streamed = usage
	}
	usage.ToolSchemaBytes = g.schemaBytes
	usage.Turn = int32(turn)
	usage.Repeated = g.repeatTurn
	g.repeatTurn = false
	addUsage(g.total, usage)
	g.ran.modelTurn(usage)
	if err := g.emit(ctx, &agentdv1.GenerateResponse{Event: &agentdv1.GenerateResponse_Usage{Usage: usage}}); err != nil {
		return nil, err
	}
	assistant := &agentdv1.Message{Role: agentdv1.Role_ROLE_ASSISTANT, Parts: msg.done()}
	g.appendMessage(assistant)
	return &reply{message: assistant, calls: calls, stop: stop, paused: paused}, nil
}

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
