package record

import (
	"context"
	"slices"
	"strings"

	"google.golang.org/protobuf/proto"

	statev1 "github.com/agentd/agentd/gen/go/agentd/state/v1"
	agentdv1 "github.com/agentd/agentd/gen/go/agentd/v1"
	"github.com/agentd/agentd/internal/fault"
	"github.com/agentd/agentd/internal/store"
)

// Restore gives running checkpoint cp of rec, as DecodeRunning decoded it,
// what the record keeps of it elsewhere (items.go): its agent, beside it;
// its conversation, from the items it covers, and its tool turn's calls
// and results, filling in from the event log what the items and the turn
// name there. A checkpoint that holds its conversation itself is left as
// it is. On a thread, prefix is the thread's first rec.ThreadBase
// messages (ThreadMessages), which the conversation starts with.
func Restore(ctx context.Context, gens store.Generations, rec store.Generation, cp *statev1.Checkpoint, prefix []*agentdv1.Message) error {
	if len(cp.GetAgent()) == 0 {
		// Kept beside the checkpoint.
		agent, err := gens.Agent(ctx, rec.Tenant, rec.ID)
		if err != nil {
			return err
		}
		cp.Agent = agent
	}
	conv := cp.GetConversation()
	if conv == nil {
		return nil
	}
	src := itemSource{gens, rec.Tenant, rec.ID}
	msgs, logged, err := src.messages(ctx, 0, conv.GetCount(), cp.GetTurn())
	if err != nil {
		return err
	}
	from := min(max(conv.GetAddedFrom(), 0), int64(len(msgs)))
	cp.Messages, cp.Added = append(slices.Clip(prefix), msgs...), msgs[from:]
	return logged.turn(cp.GetTurn(), cp.Messages)
}

// itemSource reads a generation's items.
type itemSource struct {
	gens       store.Generations
	tenant, id string
}

// messages reads the messages of items from to to-1, with what the log
// holds of them, and of turn's results, filled in.
func (src itemSource) messages(ctx context.Context, from, to int64, turn *statev1.PausedTurn) ([]*agentdv1.Message, loggedEvents, error) {
	items, err := src.items(ctx, from, to)
	if err != nil {
		return nil, nil, err
	}
	return src.decoded(ctx, items, turn)
}

// decoded is the messages of items, with what the log holds of them, and
// of turn's results, filled in.
func (src itemSource) decoded(ctx context.Context, items []*statev1.Item, turn *statev1.PausedTurn) ([]*agentdv1.Message, loggedEvents, error) {
	logged, err := src.logged(ctx, neededSeqs(items, turn))
	if err != nil {
		return nil, nil, err
	}
	msgs := make([]*agentdv1.Message, len(items))
	for i, it := range items {
		if msgs[i], err = logged.message(it); err != nil {
			return nil, nil, err
		}
	}
	return msgs, logged, nil
}

// items reads items from to to-1.
func (src itemSource) items(ctx context.Context, from, to int64) ([]*statev1.Item, error) {
	items := make([]*statev1.Item, 0, max(to-from, 0))
	for next := from; next < to; {
		stored, err := src.gens.Items(ctx, src.tenant, src.id, next-1, int(min(to-next, store.MaxReadEvents)))
		if err != nil {
			return nil, err
		}
		if len(stored) == 0 {
			return nil, unreadable()
		}
		for _, s := range stored {
			it := &statev1.Item{}
			if s.N != next || proto.Unmarshal(s.Data, it) != nil {
				return nil, unreadable()
			}
			items = append(items, it)
			next++
		}
	}
	return items, nil
}

func unreadable() error {
	return fault.New(fault.FailedPrecondition, "the generation's checkpoint cannot be read by this agentd")
}

// seqRange is the sequence numbers first to last.
type seqRange struct{ first, last int64 }

// neededSeqs are the log's parts that items and turn name.
func neededSeqs(items []*statev1.Item, turn *statev1.PausedTurn) seqRange {
	r := seqRange{}
	add := func(first, last int64) {
		if r.first == 0 || first < r.first {
			r.first = first
		}
		r.last = max(r.last, last)
	}
	for _, it := range items {
		for _, lp := range it.GetLogged() {
			add(lp.GetFirst(), lp.GetLast())
		}
	}
	for _, st := range turn.GetStates() {
		if seq := st.GetLoggedResult(); seq > 0 {
			add(seq, seq)
		}
	}
	return r
}

// loggedEvents are the events of a log that items and turns name: the
// text deltas and finished calls, by sequence number.
type loggedEvents map[int64]*agentdv1.GenerateResponse

// logged reads the text deltas and finished calls of the log within r.
func (src itemSource) logged(ctx context.Context, r seqRange) (loggedEvents, error) {
	out := make(loggedEvents)
	for after := r.first - 1; r.first > 0 && after < r.last; {
		evs, err := src.gens.Read(ctx, src.tenant, src.id, after, 0)
		if err != nil {
			return nil, err
		}
		if len(evs) == 0 {
			break
		}
		for _, e := range evs {
			if e.Seq > r.last {
				break
			}
			if e.Kind == "text_delta" || e.Kind == "tool_call_finished" {
				ev := &agentdv1.GenerateResponse{}
				if err := proto.Unmarshal(e.Data, ev); err != nil {
					return nil, unreadable()
				}
				out[e.Seq] = ev
			}
		}
		after = evs[len(evs)-1].Seq
	}
	return out, nil
}

// message is item it's message, with its logged parts filled in.
func (l loggedEvents) message(it *statev1.Item) (*agentdv1.Message, error) {
	m := it.GetMessage()
	if m == nil {
		return nil, unreadable()
	}
	for _, lp := range it.GetLogged() {
		i := int(lp.GetPart())
		if i < 0 || i >= len(m.GetParts()) {
			return nil, unreadable()
		}
		p, err := l.part(m.Parts[i], lp)
		if err != nil {
			return nil, err
		}
		m.Parts[i] = p
	}
	return m, nil
}

// part is part p, emptied when stored, as the log holds it.
func (l loggedEvents) part(p *agentdv1.Part, lp *statev1.LoggedPart) (*agentdv1.Part, error) {
	if res := p.GetToolResult(); res != nil {
		full, err := l.result(res.GetToolCallId(), lp.GetFirst())
		if err != nil {
			return nil, err
		}
		return &agentdv1.Part{Kind: &agentdv1.Part_ToolResult{ToolResult: full}}, nil
	}
	var b strings.Builder
	for seq := lp.GetFirst(); seq <= lp.GetLast(); seq++ {
		if d, ok := l[seq].GetEvent().(*agentdv1.GenerateResponse_TextDelta); ok {
			b.WriteString(d.TextDelta.GetText())
		}
	}
	if lp.GetFirst() <= 0 || b.Len() == 0 {
		return nil, unreadable()
	}
	return &agentdv1.Part{Kind: &agentdv1.Part_Text{Text: b.String()}}, nil
}

// result is call id's result as its tool_call_finished event, seq, holds
// it.
func (l loggedEvents) result(id string, seq int64) (*agentdv1.ToolResult, error) {
	f := l[seq].GetToolCallFinished()
	if f == nil || f.GetCallId() != id {
		return nil, unreadable()
	}
	return &agentdv1.ToolResult{ToolCallId: id, Name: f.GetToolName(), Output: f.GetOutput(), IsError: f.GetIsError()}, nil
}

// turn fills in t's calls, when they are the last message's, and its
// logged results.
func (l loggedEvents) turn(t *statev1.PausedTurn, msgs []*agentdv1.Message) error {
	if t == nil {
		return nil
	}
	if t.GetCallsInConversation() {
		if len(msgs) == 0 {
			return unreadable()
		}
		t.Calls, t.CallsInConversation = toolCalls(msgs[len(msgs)-1]), false
	}
	if len(t.GetStates()) != len(t.GetCalls()) {
		return unreadable()
	}
	for i, st := range t.GetStates() {
		if seq := st.GetLoggedResult(); seq > 0 {
			res, err := l.result(t.Calls[i].GetId(), seq)
			if err != nil {
				return err
			}
			st.State = &statev1.CallState_Result{Result: res}
		}
	}
	return nil
}

// toolCalls are m's tool calls, in order.
func toolCalls(m *agentdv1.Message) []*agentdv1.ToolCall {
	var calls []*agentdv1.ToolCall
	for _, p := range m.GetParts() {
		if tc := p.GetToolCall(); tc != nil {
			calls = append(calls, tc)
		}
	}
	return calls
}
