package record

import (
	"context"
	"strconv"
	"strings"

	"google.golang.org/protobuf/proto"

	statev1 "github.com/agentd/agentd/gen/go/agentd/state/v1"
	agentdv1 "github.com/agentd/agentd/gen/go/agentd/v1"
	"github.com/agentd/agentd/internal/fault"
	"github.com/agentd/agentd/internal/store"
)

// A running generation's record grows with what happened, once: the
// conversation is kept as items, one per message, each written when the
// generation adds it, and a checkpoint says how many of them it covers
// rather than copying them. What the event log holds already is not
// stored twice: an item's text is the text_delta events that streamed it
// and a tool result the call's tool_call_finished event, both named by
// their sequence numbers; a tool call's arguments are in the item of the
// model's message, and the events that show them (tool_call_started,
// approval_request, function_call) are logged without them, their kind
// naming the item, as the completed event is logged without the messages
// it carries, all filled in when the log is read (logReader). Each of
// these is done only where the pieces are equal: anything else is stored
// whole. The agent, which checkpoints hold too, is kept beside them,
// written once per run (Journal.takeAgent).

// argsKind marks a logged event whose arguments were left out: its kind is
// the event's, argsKind and the number of the item that holds them.
// itemsKind marks a completed event logged without its messages: its kind
// is the event's, itemsKind and the numbers of the first item and the one
// after the last, "3-9" (its message is the last of them).
const (
	argsKind  = "@item="
	itemsKind = "@items="
)

// conversation is what a journal knows of its generation's conversation
// and log, to store each piece once. Its methods run under the journal's
// mutex, in the order the generation records its events and checkpoints.
type conversation struct {
	items   int64                   // the items queued or stored
	text    textRun                 // the text_delta events since the last item
	results map[string]loggedResult // the logged results, by call id, until their item
	args    map[string]callArgs     // the tool calls in items, by call id
	msgs    []*agentdv1.Message     // the conversation as the last checkpoint had it
	added   int64                   // the first of msgs the generation added
	base    int64                   // the first of msgs that is the generation's own: those before are its thread's
}

// textRun is the text of consecutive text_delta events.
type textRun struct {
	first, last int64
	text        strings.Builder
}

type loggedResult struct {
	seq      int64
	finished *agentdv1.ToolCallFinished
}

type callArgs struct {
	item int64
	args string
}

// noteEvent takes in ev, numbered seq, and returns how it is logged: its
// kind, and the event to encode (ev, or a copy without its arguments or
// messages).
func (c *conversation) noteEvent(seq int64, ev *agentdv1.GenerateResponse, kind string) (string, *agentdv1.GenerateResponse) {
	switch k := ev.GetEvent().(type) {
	case *agentdv1.GenerateResponse_TextDelta:
		if c.text.first == 0 {
			c.text.first = seq
		}
		c.text.last = seq
		c.text.text.WriteString(k.TextDelta.GetText())
	case *agentdv1.GenerateResponse_ToolCallFinished:
		if c.results == nil {
			c.results = make(map[string]loggedResult)
		}
		c.results[k.ToolCallFinished.GetCallId()] = loggedResult{seq, k.ToolCallFinished}
	}
	if done := ev.GetCompleted(); done != nil {
		if from, to, ok := c.itemized(done); ok {
			return kind + itemsKind + strconv.FormatInt(from, 10) + "-" + strconv.FormatInt(to, 10), withoutMessages(ev)
		}
		return kind, ev
	}
	id, args := argumentsOf(ev)
	in, ok := c.args[id]
	if !ok || args == "" || args != in.args {
		return kind, ev
	}
	return kind + argsKind + strconv.FormatInt(in.item, 10), withoutArguments(ev)
}

// itemized reports whether the messages a completed event carries are the
// items from to to-1, its message the last of them: the generation's
// added messages, every one itemized (its last checkpoint, Final's, had
// them all) and stored with the event or before it.
func (c *conversation) itemized(done *agentdv1.GenerationCompleted) (from, to int64, ok bool) {
	msgs := done.GetMessages()
	from, to = c.added, c.added+int64(len(msgs))
	if len(msgs) == 0 || to != int64(len(c.msgs)) || to-c.base > c.items || from < c.base || done.GetMessage() != msgs[len(msgs)-1] {
		return 0, 0, false
	}
	for i, m := range msgs {
		if m != c.msgs[from+int64(i)] {
			return 0, 0, false
		}
	}
	return from - c.base, to - c.base, true
}

// withoutMessages is a copy of ev, a completed event, without its
// messages; ev itself, not yet sent, is left as it was.
func withoutMessages(ev *agentdv1.GenerateResponse) *agentdv1.GenerateResponse {
	done := ev.GetCompleted()
	msg, msgs := done.Message, done.Messages
	done.Message, done.Messages = nil, nil
	slim := proto.CloneOf(ev)
	done.Message, done.Messages = msg, msgs
	return slim
}

// argumentsOf is the call id and arguments of the events that show a tool
// call's arguments.
func argumentsOf(ev *agentdv1.GenerateResponse) (id, args string) {
	switch k := ev.GetEvent().(type) {
	case *agentdv1.GenerateResponse_ToolCallStarted:
		return k.ToolCallStarted.GetCallId(), k.ToolCallStarted.GetArguments()
	case *agentdv1.GenerateResponse_FunctionCall:
		return k.FunctionCall.GetCallId(), k.FunctionCall.GetArguments()
	case *agentdv1.GenerateResponse_ApprovalRequest:
		return k.ApprovalRequest.GetToolCallId(), k.ApprovalRequest.GetArguments()
	}
	return "", ""
}

// setArguments sets the arguments of an event that argumentsOf reads.
func setArguments(ev *agentdv1.GenerateResponse, args string) {
	switch k := ev.GetEvent().(type) {
	case *agentdv1.GenerateResponse_ToolCallStarted:
		k.ToolCallStarted.Arguments = args
	case *agentdv1.GenerateResponse_FunctionCall:
		k.FunctionCall.Arguments = args
	case *agentdv1.GenerateResponse_ApprovalRequest:
		k.ApprovalRequest.Arguments = args
	}
}

// withoutArguments is a copy of ev without its arguments (the strings
// are shared, not copied).
func withoutArguments(ev *agentdv1.GenerateResponse) *agentdv1.GenerateResponse {
	c := proto.CloneOf(ev)
	setArguments(c, "")
	return c
}

// itemize turns checkpoint cp, as the generation has it (its whole
// conversation in messages), into what is stored, in place: cp names the
// messages instead of holding them, and the messages not stored yet are
// returned as items.
func (c *conversation) itemize(cp *statev1.Checkpoint) []store.Item {
	msgs := cp.GetMessages()
	own := int64(len(msgs)) - c.base
	var items []store.Item
	for n := c.items; n < own; n++ {
		items = append(items, store.Item{N: n, Data: c.item(n, msgs[c.base+n])})
	}
	c.items = max(c.items, own)
	c.msgs, c.added = msgs, int64(len(msgs)-len(cp.GetAdded()))
	cp.Conversation = &statev1.Conversation{Count: own, AddedFrom: c.added - c.base}
	cp.Turn = c.turn(cp.GetTurn(), msgs)
	cp.Messages, cp.Added = nil, nil
	if cp.Turn == nil {
		c.results = nil // their turn's item is stored
	}
	return items
}

// item encodes message m as item n, with what the log holds left out, and
// notes the arguments of its tool calls.
func (c *conversation) item(n int64, m *agentdv1.Message) []byte {
	it := &statev1.Item{Message: m}
	parts := m.GetParts()
	var kept []*agentdv1.Part
	for i, p := range parts {
		lp, ok := c.logged(int32(i), p, parts)
		if !ok {
			continue
		}
		if kept == nil {
			kept = append([]*agentdv1.Part(nil), parts...)
		}
		kept[i] = emptied(p)
		it.Logged = append(it.Logged, lp)
	}
	if kept != nil {
		it.Message = &agentdv1.Message{Role: m.GetRole(), Parts: kept}
	}
	for _, p := range parts {
		if tc := p.GetToolCall(); tc != nil && tc.GetArguments() != "" {
			if c.args == nil {
				c.args = make(map[string]callArgs)
			}
			c.args[tc.GetId()] = callArgs{n, tc.GetArguments()}
		}
	}
	c.text = textRun{}
	data, err := proto.MarshalOptions{Deterministic: true}.Marshal(it)
	if err != nil {
		panic("encoding a conversation item: " + err.Error()) // it was received and decoded
	}
	return data
}

// logged says where the log holds part p of a message whose parts are
// parts, if it does: a text part that is the message's only one and the
// text of the text_delta events since the last item; a tool result equal
// to its logged tool_call_finished.
func (c *conversation) logged(i int32, p *agentdv1.Part, parts []*agentdv1.Part) (*statev1.LoggedPart, bool) {
	switch k := p.GetKind().(type) {
	case *agentdv1.Part_Text:
		if c.text.first == 0 || k.Text == "" || k.Text != c.text.text.String() || textParts(parts) != 1 {
			return nil, false
		}
		return &statev1.LoggedPart{Part: i, First: c.text.first, Last: c.text.last}, true
	case *agentdv1.Part_ToolResult:
		seq, ok := c.resultSeq(k.ToolResult)
		return &statev1.LoggedPart{Part: i, First: seq, Last: seq}, ok
	}
	return nil, false
}

// resultSeq is the sequence number of the tool_call_finished event that
// holds res whole, if one was logged.
func (c *conversation) resultSeq(res *agentdv1.ToolResult) (int64, bool) {
	r, ok := c.results[res.GetToolCallId()]
	if !ok || len(res.GetAttachments()) > 0 || res.GetOutput() != r.finished.GetOutput() ||
		res.GetIsError() != r.finished.GetIsError() || res.GetName() != r.finished.GetToolName() {
		return 0, false
	}
	return r.seq, true
}

func textParts(parts []*agentdv1.Part) int {
	n := 0
	for _, p := range parts {
		if _, ok := p.GetKind().(*agentdv1.Part_Text); ok {
			n++
		}
	}
	return n
}

// emptied is part p of its kind with its logged content left out.
func emptied(p *agentdv1.Part) *agentdv1.Part {
	if res := p.GetToolResult(); res != nil {
		return &agentdv1.Part{Kind: &agentdv1.Part_ToolResult{ToolResult: &agentdv1.ToolResult{ToolCallId: res.GetToolCallId()}}}
	}
	return &agentdv1.Part{Kind: &agentdv1.Part_Text{}}
}

// turn is a running checkpoint's tool turn as stored: its calls named as
// the last message's when they are, its finished calls' results as their
// logged events where those hold them whole.
func (c *conversation) turn(t *statev1.PausedTurn, msgs []*agentdv1.Message) *statev1.PausedTurn {
	if t == nil {
		return nil
	}
	if len(msgs) > 0 && sameCalls(t.GetCalls(), msgs[len(msgs)-1]) {
		t.Calls, t.CallsInConversation = nil, true
	}
	for _, st := range t.GetStates() {
		if res := st.GetResult(); res != nil {
			if seq, ok := c.resultSeq(res); ok {
				st.State = &statev1.CallState_LoggedResult{LoggedResult: seq}
			}
		}
	}
	return t
}

// sameCalls reports whether calls are the tool calls of m, in order.
func sameCalls(calls []*agentdv1.ToolCall, m *agentdv1.Message) bool {
	i := 0
	for _, p := range m.GetParts() {
		tc := p.GetToolCall()
		if tc == nil {
			continue
		}
		if i == len(calls) || !proto.Equal(tc, calls[i]) {
			return false
		}
		i++
	}
	return i == len(calls) && i > 0
}

// ReadEvents returns up to store.MaxReadEvents events of tenant's
// generation id after sequence number after, as its clients were sent
// them.
func ReadEvents(ctx context.Context, gens store.Generations, tenant, id string, after int64) ([]*agentdv1.GenerateResponse, error) {
	evs, err := gens.Read(ctx, tenant, id, after, 0)
	if err != nil {
		return nil, err
	}
	r := &logReader{gens: gens, tenant: tenant, id: id}
	out := make([]*agentdv1.GenerateResponse, len(evs))
	for i, e := range evs {
		if out[i], err = r.event(ctx, e); err != nil {
			return nil, err
		}
	}
	return out, nil
}

// logReader reads a generation's log and items, filling in what the
// record stores once.
type logReader struct {
	gens       store.Generations
	tenant, id string
	items      map[int64]*statev1.Item
}

// event decodes stored event e, with the arguments it was logged without.
func (r *logReader) event(ctx context.Context, e store.Event) (*agentdv1.GenerateResponse, error) {
	ev := &agentdv1.GenerateResponse{}
	if err := proto.Unmarshal(e.Data, ev); err != nil {
		return nil, fault.Wrap(fault.Internal, err, "decoding a stored event")
	}
	ev.Sequence = e.Seq
	if _, ref, ok := strings.Cut(e.Kind, itemsKind); ok {
		return ev, r.fillCompleted(ctx, ev, ref)
	}
	_, ref, ok := strings.Cut(e.Kind, argsKind)
	if !ok {
		return ev, nil
	}
	n, err := strconv.ParseInt(ref, 10, 64)
	if err != nil {
		return nil, fault.New(fault.Internal, "a stored event of kind %q names no item", e.Kind)
	}
	it, err := r.item(ctx, n)
	if err != nil {
		return nil, err
	}
	id, _ := argumentsOf(ev)
	for _, p := range it.GetMessage().GetParts() {
		if tc := p.GetToolCall(); tc != nil && tc.GetId() == id {
			setArguments(ev, tc.GetArguments())
			return ev, nil
		}
	}
	return nil, fault.New(fault.Internal, "the stored event %d names item %d, which has no call %q", e.Seq, n, id)
}

// fillCompleted gives a completed event logged without its messages
// those of items ref ("from-to").
func (r *logReader) fillCompleted(ctx context.Context, ev *agentdv1.GenerateResponse, ref string) error {
	a, b, _ := strings.Cut(ref, "-")
	from, err1 := strconv.ParseInt(a, 10, 64)
	to, err2 := strconv.ParseInt(b, 10, 64)
	done := ev.GetCompleted()
	if err1 != nil || err2 != nil || to <= from || done == nil {
		return fault.New(fault.Internal, "a stored completed event names items %q", ref)
	}
	msgs, _, err := itemSource{r.gens, r.tenant, r.id}.messages(ctx, from, to, nil)
	if err != nil {
		return err
	}
	done.Messages, done.Message = msgs, msgs[len(msgs)-1]
	return nil
}

// item reads item n, and those after it, once.
func (r *logReader) item(ctx context.Context, n int64) (*statev1.Item, error) {
	if it, ok := r.items[n]; ok {
		return it, nil
	}
	stored, err := r.gens.Items(ctx, r.tenant, r.id, n-1, 0)
	if err != nil {
		return nil, err
	}
	if r.items == nil {
		r.items = make(map[int64]*statev1.Item)
	}
	for _, s := range stored {
		it := &statev1.Item{}
		if err := proto.Unmarshal(s.Data, it); err != nil {
			return nil, fault.Wrap(fault.Internal, err, "decoding a stored conversation item")
		}
		r.items[s.N] = it
	}
	if it, ok := r.items[n]; ok {
		return it, nil
	}
	return nil, fault.New(fault.Internal, "the generation's conversation has no item %d", n)
}
