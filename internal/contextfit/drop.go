package contextfit

import (
	agentdv1 "github.com/agentd/agentd/gen/go/agentd/v1"

	"context"
	"slices"
)

// Dropper is the policy that leaves out what is oldest. The last user
// message and what follows it (the turn the model is answering) are
// always sent, and the first message too when KeepFirst is set; of the
// history between them, first the oldest tool results' outputs are
// replaced by a note of their size, one at a time, then the oldest turns
// are left out whole. A turn begins at a user message, so a cut never
// falls between a model's tool calls and their results, and what is sent
// after the first message begins with a user message, as every provider
// accepts (Gemini refuses a conversation whose model turn calls a tool
// right after its instructions).
//
// When a cut is needed, the kept history gets back the outputs that fit:
// only the oldest are elided. When even the last turn does not fit, it is
// sent alone, and the trim says over_budget.
type Dropper struct {
	// Budget is the conversation's budget of estimated input tokens.
	Budget int64
	// KeepFirst keeps the conversation's first message whatever its age.
	KeepFirst bool
	// KeepToolResults leaves tool results whole: only whole turns are
	// left out.
	KeepToolResults bool
}

// Fit fits msgs to d's budget; see Fitter. It does no I/O and never
// fails.
func (d Dropper) Fit(_ context.Context, msgs []*agentdv1.Message) ([]*agentdv1.Message, *agentdv1.ContextTrim, error) {
	whole := Estimate(msgs)
	if whole <= d.Budget {
		return msgs, nil, nil
	}
	f := newFitting(msgs)
	f.bound(d.KeepFirst)
	if !d.KeepToolResults {
		f.findResults()
	}
	f.elide(f.lo, d.Budget)
	cut := f.lo
	if f.total > d.Budget {
		cut = f.cut(d.Budget)
		f.elide(cut, d.Budget)
	}
	elided := f.elided(cut)
	if elided == 0 && cut == f.lo {
		return msgs, nil, nil // nothing could be left out
	}
	return f.sent(cut), &agentdv1.ContextTrim{
		ConversationTokens: whole,
		SentTokens:         f.total,
		BudgetTokens:       d.Budget,
		ResultsElided:      int32(elided),
		MessagesDropped:    int32(cut - f.lo),
		OverBudget:         f.total > d.Budget,
	}, nil
}

// fitting is one Fit's estimate of a conversation, as parts of it are
// left out.
type fitting struct {
	msgs  []*agentdv1.Message
	bytes []int64 // each message's size, less its outputs elided
	total int64   // the tokens of what would be sent
	// lo and tail bound the history that may be left out, msgs[lo:tail]:
	// before it the first message kept, from tail the last user message
	// and what follows it.
	lo, tail int
	results  []result // the history's tool outputs, oldest first
}

// result is a tool output that a note could stand for.
type result struct {
	msg, part int
	saves     int64 // bytes
	elided    bool
}

// Estimate is the tokens msgs send, as the estimate counts them, with
// nothing allocated: most turns need no more.
func Estimate(msgs []*agentdv1.Message) int64 {
	var n int64
	for _, m := range msgs {
		n += Tokens(messageBytes(m))
	}
	return n
}

func newFitting(msgs []*agentdv1.Message) *fitting {
	f := &fitting{msgs: msgs, bytes: make([]int64, len(msgs))}
	for i, m := range msgs {
		f.bytes[i] = messageBytes(m)
		f.total += Tokens(f.bytes[i])
	}
	return f
}

// bound finds the history between the first message, if kept, and the
// last user message; with no user message, all of it is kept. A first
// message that calls tools is kept with the tool messages that answer
// it: a call is never sent without its result.
func (f *fitting) bound(keepFirst bool) {
	for i := len(f.msgs) - 1; i >= 0; i-- {
		if f.msgs[i].GetRole() == agentdv1.Role_ROLE_USER {
			f.tail = i
			break
		}
	}
	if keepFirst {
		f.lo = min(1, f.tail)
		for f.lo < f.tail && f.msgs[f.lo].GetRole() == agentdv1.Role_ROLE_TOOL {
			f.lo++
		}
	}
}

// findResults lists the history's tool outputs that a note is smaller
// than.
func (f *fitting) findResults() {
	for i := f.lo; i < f.tail; i++ {
		for j, p := range f.msgs[i].GetParts() {
			output, attachments, ok := toolOutput(p)
			if !ok {
				continue
			}
			if saves := resultBytes(output, attachments) - noteBytes(len(output), attachments); saves > 0 {
				f.results = append(f.results, result{msg: i, part: j, saves: saves})
			}
		}
	}
}

// toolOutput is a tool result's or a provider tool call's output and its
// number of attachments.
func toolOutput(p *agentdv1.Part) (output string, attachments int, ok bool) {
	switch k := p.GetKind().(type) {
	case *agentdv1.Part_ToolResult:
		return k.ToolResult.GetOutput(), len(k.ToolResult.GetAttachments()), true
	case *agentdv1.Part_ProviderToolCall:
		return k.ProviderToolCall.GetOutput(), 0, true
	}
	return "", 0, false
}

// elide elides the outputs of msgs[from:], oldest first, until what would
// be sent fits budget; those of msgs[from:] it had elided before are
// given back first.
func (f *fitting) elide(from int, budget int64) {
	for k := range f.results {
		if r := &f.results[k]; r.msg >= from && r.elided {
			f.resize(r.msg, r.saves)
			r.elided = false
		}
	}
	for k := range f.results {
		if f.total <= budget {
			return
		}
		if r := &f.results[k]; r.msg >= from {
			f.resize(r.msg, -r.saves)
			r.elided = true
		}
	}
}

// resize changes message i's size by delta bytes.
func (f *fitting) resize(i int, delta int64) {
	before := Tokens(f.bytes[i])
	f.bytes[i] += delta
	f.total += Tokens(f.bytes[i]) - before
}

// cut returns where the history kept begins: the first user message
// after which what is sent fits budget, every output elided; tail when
// none does. The messages before it are taken out of the total.
func (f *fitting) cut(budget int64) int {
	var dropped int64
	c := f.lo
	for c < f.tail {
		dropped += Tokens(f.bytes[c])
		c++
		if f.msgs[c].GetRole() == agentdv1.Role_ROLE_USER && f.total-dropped <= budget {
			break
		}
	}
	f.total -= dropped
	return c
}

// elided counts the outputs elided from cut on.
func (f *fitting) elided(cut int) int {
	n := 0
	for _, r := range f.results {
		if r.msg >= cut && r.elided {
			n++
		}
	}
	return n
}

// sent is what is sent: the first message kept, and msgs[cut:], each
// message with outputs elided a copy with notes in their place.
func (f *fitting) sent(cut int) []*agentdv1.Message {
	out := make([]*agentdv1.Message, 0, f.lo+len(f.msgs)-cut)
	out = append(out, f.msgs[:f.lo]...)
	rs := f.results
	for i := cut; i < len(f.msgs); i++ {
		for len(rs) > 0 && rs[0].msg < i {
			rs = rs[1:]
		}
		n := 0
		for n < len(rs) && rs[n].msg == i {
			n++
		}
		out = append(out, withNotes(f.msgs[i], rs[:n]))
	}
	return out
}

// withNotes is m with its outputs that rs elided replaced by notes: a
// copy when there are any, m itself when there are none.
func withNotes(m *agentdv1.Message, rs []result) *agentdv1.Message {
	var parts []*agentdv1.Part
	for _, r := range rs {
		if !r.elided {
			continue
		}
		if parts == nil {
			parts = slices.Clone(m.GetParts())
		}
		parts[r.part] = noted(parts[r.part])
	}
	if parts == nil {
		return m
	}
	return &agentdv1.Message{Role: m.GetRole(), Parts: parts}
}

// noted is a copy of a tool result or provider tool call with a note in
// place of its output (and attachments).
func noted(p *agentdv1.Part) *agentdv1.Part {
	switch k := p.GetKind().(type) {
	case *agentdv1.Part_ToolResult:
		r := k.ToolResult
		return &agentdv1.Part{Kind: &agentdv1.Part_ToolResult{ToolResult: &agentdv1.ToolResult{
			ToolCallId: r.GetToolCallId(), Name: r.GetName(), IsError: r.GetIsError(),
			Output: note(len(r.GetOutput()), len(r.GetAttachments())),
		}}}
	case *agentdv1.Part_ProviderToolCall:
		c := k.ProviderToolCall
		return &agentdv1.Part{Kind: &agentdv1.Part_ProviderToolCall{ProviderToolCall: &agentdv1.ProviderToolCall{
			Id: c.GetId(), ServerName: c.GetServerName(), ToolName: c.GetToolName(), Arguments: c.GetArguments(), IsError: c.GetIsError(),
			Output: note(len(c.GetOutput()), 0),
		}}}
	}
	return p
}
