package record_test

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/google/go-cmp/cmp"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/testing/protocmp"

	statev1 "github.com/agentd/agentd/gen/go/agentd/state/v1"
	agentdv1 "github.com/agentd/agentd/gen/go/agentd/v1"
	"github.com/agentd/agentd/internal/record"
	"github.com/agentd/agentd/internal/store"
)

// agentBytes stands for a generation's encoded agent: its instructions
// alone may run to kilobytes.
var agentBytes = []byte(strings.Repeat("instructions ", 200))

// scripted is a generation driven through its journal as the server drives
// one: model turns streaming text and calling a tool, tool turns with
// their results, a checkpoint at each boundary.
type scripted struct {
	t        testing.TB
	j        *record.Journal
	msgs     []*agentdv1.Message
	added    []*agentdv1.Message
	events   []*agentdv1.GenerateResponse
	content  int // the bytes of the arguments, results and text
	toolTurn int32
}

func (s *scripted) checkpoint(turn *statev1.PausedTurn) *statev1.Checkpoint {
	return &statev1.Checkpoint{Version: record.Version, GenerationId: "gen_1", Messages: s.msgs, Added: s.added, ToolTurns: s.toolTurn, Turn: turn, Agent: agentBytes}
}

func (s *scripted) add(m *agentdv1.Message) {
	s.msgs = append(s.msgs, m)
	s.added = append(s.added, m)
}

func (s *scripted) record(ev *agentdv1.GenerateResponse) {
	s.j.Record(ev)
	s.events = append(s.events, ev)
}

// turn runs one model turn that says text and calls echo with args, then
// its tool turn, whose result is output. With stop, it returns once the
// call's result is checkpointed, before the tool turn ends.
func (s *scripted) turn(text, args, output string, stop bool) {
	s.toolTurn++
	id := fmt.Sprintf("call_%d", s.toolTurn)
	for _, w := range strings.SplitAfter(text, " ") {
		s.record(&agentdv1.GenerateResponse{Event: &agentdv1.GenerateResponse_TextDelta{TextDelta: &agentdv1.TextDelta{Text: w}}})
	}
	call := &agentdv1.ToolCall{Id: id, Name: "echo", Arguments: args}
	s.add(&agentdv1.Message{Role: agentdv1.Role_ROLE_ASSISTANT, Parts: []*agentdv1.Part{
		{Kind: &agentdv1.Part_Text{Text: text}}, {Kind: &agentdv1.Part_ToolCall{ToolCall: call}}}})
	calls := []*agentdv1.ToolCall{call}
	s.j.Checkpoint(s.checkpoint(&statev1.PausedTurn{Turn: s.toolTurn, Calls: calls, States: []*statev1.CallState{{}}}))
	s.record(&agentdv1.GenerateResponse{Event: &agentdv1.GenerateResponse_ToolCallStarted{ToolCallStarted: &agentdv1.ToolCallStarted{
		CallId: id, ToolName: "echo", Arguments: args, Turn: s.toolTurn}}})
	if err := s.j.Await(s.t.Context()); err != nil {
		s.t.Fatal(err)
	}
	res := &agentdv1.ToolResult{ToolCallId: id, Name: "echo", Output: output}
	finished := &agentdv1.GenerateResponse{Event: &agentdv1.GenerateResponse_ToolCallFinished{ToolCallFinished: &agentdv1.ToolCallFinished{
		CallId: id, ToolName: "echo", Output: output, Turn: s.toolTurn}}}
	s.j.RecordCheckpoint(finished, s.checkpoint(&statev1.PausedTurn{Turn: s.toolTurn, Calls: calls,
		States: []*statev1.CallState{{State: &statev1.CallState_Result{Result: res}}}}))
	s.events = append(s.events, finished)
	s.content += len(text) + len(args) + len(output)
	if stop {
		return
	}
	s.add(&agentdv1.Message{Role: agentdv1.Role_ROLE_TOOL, Parts: []*agentdv1.Part{{Kind: &agentdv1.Part_ToolResult{ToolResult: res}}}})
	s.j.Checkpoint(s.checkpoint(nil))
}

// complete ends the generation with a final answer: checkpointed, then
// the completed event that carries the messages the generation added.
func (s *scripted) complete(text string) {
	for _, w := range strings.SplitAfter(text, " ") {
		s.record(&agentdv1.GenerateResponse{Event: &agentdv1.GenerateResponse_TextDelta{TextDelta: &agentdv1.TextDelta{Text: w}}})
	}
	final := &agentdv1.Message{Role: agentdv1.Role_ROLE_ASSISTANT, Parts: []*agentdv1.Part{{Kind: &agentdv1.Part_Text{Text: text}}}}
	s.add(final)
	s.j.Checkpoint(s.checkpoint(nil))
	s.record(&agentdv1.GenerateResponse{Event: &agentdv1.GenerateResponse_Completed{Completed: &agentdv1.GenerationCompleted{
		GenerationId: "gen_1", Message: final, Messages: s.added, ToolTurns: s.toolTurn}}})
	s.content += len(text)
	s.j.Settle(s.t.Context(), store.Completed, record.EncodeResult(final, nil, nil))
}

func newScripted(t testing.TB, gens store.Generations) *scripted {
	s := &scripted{t: t, msgs: []*agentdv1.Message{{Role: agentdv1.Role_ROLE_USER, Parts: []*agentdv1.Part{{Kind: &agentdv1.Part_Text{Text: "go"}}}}}}
	o := record.Options{Store: gens, Tenant: "t", ID: "gen_1", Owner: "replica-1", TTL: 60e9,
		Stop: func(err error) { t.Errorf("the generation is stopped: %v", err) },
		Warn: func(msg string, err error) { t.Errorf("%s: %v", msg, err) },
	}
	j, _, err := record.Create(t.Context(), o, s.checkpoint(nil))
	if err != nil {
		t.Fatal(err)
	}
	s.j = j
	return s
}

// restored is the generation's running checkpoint as an adopting replica
// rebuilds it from the store.
func restored(t testing.TB, gens store.Generations) *statev1.Checkpoint {
	t.Helper()
	rec, err := gens.Get(t.Context(), "t", "gen_1")
	if err != nil {
		t.Fatal(err)
	}
	cp, err := record.DecodeRunning(rec.Checkpoint, "gen_1")
	if err != nil {
		t.Fatal(err)
	}
	if err := record.Restore(t.Context(), gens, rec, cp, nil); err != nil {
		t.Fatal(err)
	}
	return cp
}

// X-G3: an adopting replica rebuilds the conversation, the tool turn's
// calls and their results exactly, from a record that stored each message
// once, at a turn boundary and inside a tool turn; and the log replays the
// events as the client was sent them, arguments included.
func TestRestoreRebuildsTheConversation(t *testing.T) {
	t.Parallel()
	gens := newStore(t).Generations()
	s := newScripted(t, gens)
	for i := range 3 {
		s.turn(fmt.Sprintf("calling echo, turn %d", i), fmt.Sprintf(`{"text":%q}`, strings.Repeat("a", 100*i)), strings.Repeat("b", 50*i+1), false)
	}
	s.turn("once more", `{"text":"last"}`, "last", true)
	if err := s.j.Await(t.Context()); err != nil {
		t.Fatal(err)
	}
	cp := restored(t, gens)
	if diff := cmp.Diff(s.msgs, cp.GetMessages(), protocmp.Transform()); diff != "" {
		t.Errorf("restored conversation (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff(s.added, cp.GetAdded(), protocmp.Transform()); diff != "" {
		t.Errorf("restored added (-want +got):\n%s", diff)
	}
	turn := cp.GetTurn()
	if len(turn.GetCalls()) != 1 || turn.GetCalls()[0].GetId() != "call_4" || turn.GetStates()[0].GetResult().GetOutput() != "last" {
		t.Errorf("restored turn %v: want call_4 with its result", turn)
	}
	got, err := record.ReadEvents(t.Context(), gens, "t", "gen_1", 0)
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(s.events, got, protocmp.Transform()); diff != "" {
		t.Errorf("replayed events (-sent +replayed):\n%s", diff)
	}
	s.j.Settle(t.Context(), store.Completed, record.EncodeResult(nil, nil, nil))
}

// X-G3: what a generation writes grows with what happened: each turn's
// arguments, result and text are written once (in the conversation's
// items or the event log, not both, nor again in every checkpoint), and
// its agent once, beside its checkpoints, so that the bytes written stay
// within the content plus a bounded overhead per turn however long the
// generation runs.
func TestRecordWritesEachPieceOnce(t *testing.T) {
	t.Parallel()
	gens := &countingGenerations{Generations: newStore(t).Generations()}
	s := newScripted(t, gens)
	const turns, k = 40, 8 << 10
	for i := range turns {
		s.turn(fmt.Sprintf("turn %d: calling echo", i), fmt.Sprintf(`{"text":%q}`, strings.Repeat("x", k)), "Echo: "+strings.Repeat("x", k), false)
	}
	if err := s.j.Await(t.Context()); err != nil {
		t.Fatal(err)
	}
	if cp := restored(t, gens); !proto.Equal(s.msgs[len(s.msgs)-1], cp.GetMessages()[len(cp.GetMessages())-1]) {
		t.Error("the restored conversation does not end with the last tool result")
	}
	s.complete("all the echoes came back")
	const perTurn = 512 // three checkpoints and events: ids, names, counts, framing (245 bytes measured)
	if written, limit := gens.written(), int64(s.content+len(agentBytes)+perTurn*turns); written > limit {
		t.Errorf("the record wrote %d bytes for %d bytes of content in %d turns; want at most %d", written, s.content, turns, limit)
	}
	got, err := record.ReadEvents(t.Context(), gens, "t", "gen_1", 0)
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(s.events, got, protocmp.Transform()); diff != "" {
		t.Errorf("replayed events (-sent +replayed):\n%s", diff)
	}
}

// countingGenerations counts the bytes of the checkpoints, agents, events
// and items written.
type countingGenerations struct {
	store.Generations
	mu sync.Mutex
	n  int64
}

func (c *countingGenerations) add(data, agent []byte, events []store.Event, items []store.Item) {
	n := len(data) + len(agent)
	for _, e := range events {
		n += len(e.Kind) + len(e.Data)
	}
	for _, it := range items {
		n += len(it.Data)
	}
	c.mu.Lock()
	c.n += int64(n)
	c.mu.Unlock()
}

func (c *countingGenerations) written() int64 {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.n
}

func (c *countingGenerations) Create(ctx context.Context, g store.NewGeneration) (store.Created, error) {
	c.add(g.Checkpoint, g.Agent, g.Events, g.Items)
	return c.Generations.Create(ctx, g)
}

func (c *countingGenerations) Checkpoint(ctx context.Context, tenant, id string, epoch int64, cp store.Checkpoint) (int64, error) {
	c.add(cp.Data, cp.Agent, append(slices.Clip(cp.Events), cp.After...), cp.Items)
	return c.Generations.Checkpoint(ctx, tenant, id, epoch, cp)
}

func (c *countingGenerations) Finish(ctx context.Context, tenant, id string, epoch int64, o store.Outcome) (int64, error) {
	c.add(o.Result, nil, o.Events, o.Items)
	return c.Generations.Finish(ctx, tenant, id, epoch, o)
}

func (c *countingGenerations) Append(ctx context.Context, tenant, id string, epoch int64, events []store.Event) (int64, error) {
	c.add(nil, nil, events, nil)
	return c.Generations.Append(ctx, tenant, id, epoch, events)
}
