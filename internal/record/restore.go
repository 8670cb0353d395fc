package record

import (
	"context"
	"strings"

	"google.golang.org/protobuf/proto"

	statev1 "github.com/agentd/agentd/gen/go/agentd/state/v1"
	agentdv1 "github.com/agentd/agentd/gen/go/agentd/v1"
	"github.com/agentd/agentd/internal/fault"
	"github.com/agentd/agentd/internal/store"
)

// Restore gives running checkpoint cp of rec, as DecodeRunning decoded it,
// what the record keeps of it elsewhere (items.go): its conversation, from
// the items it covers, and its tool turn's calls and results, filling in
// from the event log what the items and the turn name there. A checkpoint
// that holds its conversation itself is left as it is.
func Restore(ctx context.Context, gens store.Generations, rec store.Generation, cp *statev1.Checkpoint) error {
	conv := cp.GetConversation()
	if conv == nil {
		return nil
	}
	items, err := readItems(ctx, gens, rec, conv.GetCount())
	if err != nil {
		return err
	}
	logged, err := readLogged(ctx, gens, rec, neededSeqs(items, cp.GetTurn()))
	if err != nil {
		return err
	}
	msgs := make([]*agentdv1.Message, len(items))
	for i, it := range items {
		if msgs[i], err = logged.message(it); err != nil {
			return err
		}
	}
	from := min(max(conv.GetAddedFrom(), 0), int64(len(msgs)))
	cp.Messages, cp.Added = msgs, msgs[from:]
	return logged.turn(cp.GetTurn(), msgs)
}

// readItems reads the first count items of rec's conversation.
func readItems(ctx context.Context, gens store.Generations, rec store.Generation, count int64) ([]*statev1.Item, error) {
	items := make([]*statev1.Item, 0, count)
	for int64(len(items)) < count {
		stored, err := gens.Items(ctx, rec.Tenant, rec.ID, int64(len(items))-1, int(min(count-int64(len(items)), store.MaxReadEvents)))
		if err != nil {
			return nil, err
		}
		if len(stored) == 0 {
			return nil, unreadable()
		}
		for _, s := range stored {
			it := &statev1.Item{}
			if s.N != int64(len(items)) || proto.Unmarshal(s.Data, it) != nil {
				return nil, unreadable()
			}
			items = append(items, it)
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

// readLogged reads the text deltas and finished calls of rec's log within
// r.
func readLogged(ctx context.Context, gens store.Generations, rec store.Generation, r seqRange) (loggedEvents, error) {
	out := make(loggedEvents)
	for after := r.first - 1; r.first > 0 && after < r.last; {
		evs, err := gens.Read(ctx, rec.Tenant, rec.ID, after, 0)
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
