package server

import (
	agentdv1 "github.com/agentd/agentd/gen/go/agentd/v1"

	"cmp"
	"context"
	"fmt"
	"strconv"
	"strings"

	"github.com/agentd/agentd/internal/contextfit"
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
	g.ran.turns++
	g.foldSamples() // those of calls a pause cut short, or asked between calls
	msgs, trim, err := g.fitted(ctx)
	if err != nil {
		return nil, err
	}
	hold, err := g.reserveBudgets(ctx, func() *agentdv1.Usage {
		return g.estimate(msgs, g.plan.agent.GetInstructions(), maxOutputTokens(g.plan.agent.GetProviderOptions().AsMap()))
	}, "turn"+strconv.Itoa(turn))
	if err != nil {
		return nil, err
	}
	ctx, chat := g.startChat(ctx, g.plan.agent.GetModel())
	var streamed *agentdv1.Usage // the turn's usage, once the provider's stream has ended
	t := &turnStream{turn: turn, msg: &content{agentProvider: g.plan.agent.GetProvider()}, usage: &agentdv1.Usage{}, seen: make(map[string]bool), trim: trim}
	defer func() {
		chat.end(ctx, streamed, err)
		g.settleBudgets(ctx, hold, g.spentBy(t, msgs, streamed))
	}()
	if err := chat.stream(ctx, g.plan.provider, g.request(msgs), func(ev providers.Event) error {
		t.began = true
		out, err := t.take(ev, chat)
		if err != nil || out == nil {
			return err
		}
		return g.emit(ctx, out)
	}); err != nil {
		return nil, err
	}
	if t.reported {
		streamed = t.usage
	}
	return g.endModelTurn(ctx, t)
}

// fitted is the conversation the next model turn sends: the whole of it,
// or what the agent's context policy fits to the model's window, with what
// it left out. Without a policy nothing is estimated.
func (g *generation) fitted(ctx context.Context) ([]*agentdv1.Message, *agentdv1.ContextTrim, error) {
	policy := g.plan.agent.GetContext()
	if policy == nil {
		return g.messages, nil, nil
	}
	fixed := int64(len(g.plan.agent.GetInstructions())) + g.schemaBytes
	f := contextfit.New(policy, g.plan.agent.GetProvider(), g.plan.agent.GetModel(), fixed)
	if f == nil {
		return g.messages, nil, nil
	}
	return f.Fit(ctx, g.messages)
}

// request is the provider's request for the next model turn: the
// conversation msgs, the tools offered, and the servers the provider runs.
func (g *generation) request(msgs []*agentdv1.Message) *providers.Request {
	return g.withOutput(&providers.Request{
		Model:          g.plan.agent.GetModel(),
		Instructions:   g.plan.agent.GetInstructions(),
		Messages:       msgs,
		Tools:          g.tools,
		ToolParameters: g.toolParams,
		MCPServers:     g.plan.providerServers(),
		Options:        g.plan.options(),
	})
}

// turnStream gathers what one model turn's stream brings: the assistant's
// message, its tool calls, the usage and why it stopped.
type turnStream struct {
	turn     int
	msg      *content
	calls    []*agentdv1.ToolCall
	seen     map[string]bool // the calls' ids
	usage    *agentdv1.Usage
	reported bool // the provider gave the turn's usage
	began    bool // the provider's stream brought an event
	stop     agentdv1.StopReason
	paused   bool
	trim     *agentdv1.ContextTrim // what the turn's request left out of the conversation
}

// take takes one event of the stream; out is what the client is sent of
// it, if anything.
func (t *turnStream) take(ev providers.Event, chat *chatCall) (out *agentdv1.GenerateResponse, _ error) {
	switch ev := ev.(type) {
	case *providers.TextDelta:
		t.msg.addText(ev.Text)
		return &agentdv1.GenerateResponse{Event: &agentdv1.GenerateResponse_TextDelta{TextDelta: &agentdv1.TextDelta{Text: ev.Text}}}, nil
	case *providers.Reasoning:
		t.msg.addReasoning(ev)
	case *providers.ToolCall:
		return nil, t.call(ev.Call)
	case *providers.ProviderToolCall:
		t.msg.add(&agentdv1.Part{Kind: &agentdv1.Part_ProviderToolCall{ProviderToolCall: ev.Call}})
		return &agentdv1.GenerateResponse{Event: &agentdv1.GenerateResponse_ProviderToolCall{ProviderToolCall: ev.Call}}, nil
	case *providers.Usage:
		t.usage, t.reported = ev.Usage, true
	case *providers.Stop:
		t.stop, t.paused = ev.Reason, ev.Paused
		chat.response = ev.Response
	}
	return nil, nil
}

// call takes a tool call of the model's, naming it if the provider gave
// it no id; two calls with one id are the provider's fault.
func (t *turnStream) call(c *agentdv1.ToolCall) error {
	if c.GetId() == "" {
		c.Id = fmt.Sprintf("call_%d_%d", t.turn, len(t.calls)+1)
	}
	if t.seen[c.GetId()] {
		return fault.New(fault.Internal, "the provider returned two tool calls with the id %q", c.GetId())
	}
	t.seen[c.GetId()] = true
	t.calls = append(t.calls, c)
	t.msg.add(&agentdv1.Part{Kind: &agentdv1.Part_ToolCall{ToolCall: c}})
	return nil
}

// endModelTurn counts the turn's usage, tells the client (with why the
// turn stopped), and appends the assistant's message to the conversation.
func (g *generation) endModelTurn(ctx context.Context, t *turnStream) (*reply, error) {
	if len(t.calls) > 0 && (t.stop == agentdv1.StopReason_STOP_REASON_END_TURN || t.stop == agentdv1.StopReason_STOP_REASON_UNSPECIFIED) {
		// Providers say so in their own words, or not at all (Gemini's
		// STOP, a Responses' completed): a turn that called tools stopped
		// for them.
		t.stop = agentdv1.StopReason_STOP_REASON_TOOL_USE
	}
	usage := t.usage
	usage.ToolSchemaBytes = g.schemaBytes
	usage.Turn = int32(t.turn)
	usage.Repeated = g.repeatTurn
	usage.StopReason = t.stop
	usage.Context = t.trim
	g.repeatTurn = false
	g.price(ctx, usage)
	addUsage(g.total, usage)
	g.ran.modelTurn(usage)
	if err := g.emit(ctx, &agentdv1.GenerateResponse{Event: &agentdv1.GenerateResponse_Usage{Usage: usage}}); err != nil {
		return nil, err
	}
	assistant := &agentdv1.Message{Role: agentdv1.Role_ROLE_ASSISTANT, Parts: t.msg.done()}
	g.appendMessage(assistant)
	return &reply{message: assistant, calls: t.calls, stop: t.stop, paused: t.paused}, nil
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

// spentBy is what model turn t, sending msgs, used, as budgets and the
// ledger count it: the provider's usage; for a turn whose stream began
// but ended without one (cut short, failed), the estimate of what was
// sent and of what came back, priced, since the provider bills those;
// nothing for a turn that never began.
func (g *generation) spentBy(t *turnStream, msgs []*agentdv1.Message, streamed *agentdv1.Usage) *agentdv1.Usage {
	if streamed != nil || !t.began {
		return streamed
	}
	return g.estimate(msgs, g.plan.agent.GetInstructions(), contextfit.Estimate([]*agentdv1.Message{{Parts: t.msg.done()}}))
}
