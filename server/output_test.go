package server_test

import (
	"context"
	"iter"
	"slices"
	"strings"
	"sync"
	"testing"

	"google.golang.org/genproto/googleapis/rpc/errdetails"
	"google.golang.org/grpc/codes"
	"google.golang.org/protobuf/types/known/structpb"

	agentdv1 "github.com/agentd/agentd/gen/go/agentd/v1"
	"github.com/agentd/agentd/providers"
	"github.com/agentd/agentd/server"
)

// ticketOutput is an output schema: a ticket with a title and a
// priority.
func ticketOutput(t *testing.T, repairs *int32) *agentdv1.Output {
	t.Helper()
	s, err := structpb.NewStruct(map[string]any{
		"type":                 "object",
		"properties":           map[string]any{"title": map[string]any{"type": "string"}, "priority": map[string]any{"enum": []any{"low", "high"}}},
		"required":             []any{"title", "priority"},
		"additionalProperties": false,
	})
	if err != nil {
		t.Fatal(err)
	}
	return &agentdv1.Output{Name: "ticket", Schema: s, RepairTurns: repairs}
}

// structuredAgent is an agent with the demo server's echo whose script
// plays turns, asking for a ticket.
func structuredAgent(t *testing.T, turns string, repairs *int32) *agentdv1.Agent {
	return &agentdv1.Agent{Provider: "script", Model: "m-1", Mcps: []*agentdv1.MCPServer{refServer("", "demo")},
		ProviderOptions: script(t, turns), Output: ticketOutput(t, repairs)}
}

func invalidEvents(events []*agentdv1.GenerateResponse) []*agentdv1.OutputInvalid {
	var out []*agentdv1.OutputInvalid
	for _, ev := range events {
		if o := ev.GetOutputInvalid(); o != nil {
			out = append(out, o)
		}
	}
	return out
}

// With a provider that takes the schema in its own field (the script
// provider does), every turn's request carries it beside the tools, the
// tool loop runs as without it, and the completed event carries the
// answer the schema accepted; GetGeneration shows it too.
func TestStructuredOutputNative(t *testing.T) {
	t.Parallel()
	st := newStore(t, 0)
	prov := recordingScript()
	client := newClientWith(t, server.Options{Bridge: &fakeBridge{onList: offering(serverTools("demo", "echo"))},
		Checkpoints: st, Generations: st.Generations(), Replica: "replica-a"}, prov)
	agent := structuredAgent(t, `{"turns": [
		{"tool_calls": [{"name": "echo", "arguments": {"text": "printer"}}]},
		{"structured": {"title": "The printer jams", "priority": "high"}}]}`, nil)
	events, end := generate(t, client, &agentdv1.StartGeneration{Agent: agent, Messages: userSays("file it")}, nil)
	wantCode(t, end, codes.OK)
	done := completion(events)
	want := map[string]any{"title": "The printer jams", "priority": "high"}
	if got := done.GetStructured().GetStructValue().AsMap(); !mapsEqual(got, want) {
		t.Errorf("completed.structured = %v; want %v", got, want)
	}
	for i, req := range prov.requests {
		if req.Output == nil || req.Output.Name != "ticket" || slices.ContainsFunc(req.Tools, func(ft *agentdv1.FunctionTool) bool { return ft.GetName() == "final_answer" }) {
			t.Errorf("request %d: output %v, tools %v; want the schema in its field, no final_answer", i, req.Output, req.Tools)
		}
	}
	rec, err := client.GetGeneration(t.Context(), &agentdv1.GetGenerationRequest{GenerationId: done.GetGenerationId()})
	if err != nil {
		t.Fatal(err)
	}
	if got := rec.GetGeneration().GetStructured().GetStructValue().AsMap(); !mapsEqual(got, want) {
		t.Errorf("GetGeneration's structured = %v; want %v", got, want)
	}
}

func mapsEqual(a, b map[string]any) bool {
	if len(a) != len(b) {
		return false
	}
	for k, v := range a {
		if b[k] != v {
			return false
		}
	}
	return true
}

// textAnswers is a provider that takes the output schema in its own
// field and answers each turn with the next of answers, as text.
func textAnswers(answers ...string) *fakeProvider {
	var i int
	return &fakeProvider{name: "plain", caps: providers.Capabilities{ModelOptional: true, Output: func(string, bool) bool { return true }},
		stream: func(context.Context, *providers.Request) iter.Seq2[providers.Event, error] {
			text := answers[min(i, len(answers)-1)]
			i++
			return func(yield func(providers.Event, error) bool) {
				_ = yield(&providers.TextDelta{Text: text}, nil) && yield(&providers.Stop{Reason: agentdv1.StopReason_STOP_REASON_END_TURN}, nil)
			}
		}}
}

// An answer the schema refuses gets a repair turn: an output_invalid
// event names the errors, the model is told them in a user message, and
// its next answer completes the generation. With no repair turn left the
// generation fails FAILED_PRECONDITION, OUTPUT_INVALID with the errors
// and the answer.
func TestStructuredOutputRepair(t *testing.T) {
	t.Parallel()
	answers := []string{`{"title": "The printer jams", "priority": "urgent"}`, "```json\n{\"title\": \"The printer jams\", \"priority\": \"high\"}\n```"}
	prov := textAnswers(answers...)
	client := newClientWith(t, server.Options{Bridge: &fakeBridge{}}, prov)
	agent := &agentdv1.Agent{Provider: "plain", Output: ticketOutput(t, nil)}
	events, end := generate(t, client, &agentdv1.StartGeneration{Agent: agent, Messages: userSays("file it")}, nil)
	wantCode(t, end, codes.OK)
	inv := invalidEvents(events)
	if len(inv) != 1 || !inv[0].GetRepair() || len(inv[0].GetErrors()) != 1 || !strings.HasPrefix(inv[0].GetErrors()[0], ".priority") {
		t.Errorf("output_invalid events %v; want one naming .priority, a repair following", inv)
	}
	if completion(events).GetStructured().GetStructValue().AsMap()["priority"] != "high" {
		t.Errorf("completed = %v; want the repaired answer", completion(events))
	}
	last := prov.requests[len(prov.requests)-1].Messages
	if m := last[len(last)-1]; m.GetRole() != agentdv1.Role_ROLE_USER || !strings.Contains(m.GetParts()[0].GetText(), ".priority") {
		t.Errorf("the repair turn's last message is %v; want the user's, naming the error", m)
	}

	client = newClientWith(t, server.Options{Bridge: &fakeBridge{}}, textAnswers(answers...))
	agent.Output = ticketOutput(t, new(int32(0)))
	events, end = generate(t, client, &agentdv1.StartGeneration{Agent: agent, Messages: userSays("file it")}, nil)
	wantCode(t, end, codes.FailedPrecondition)
	var reason string
	for _, d := range end.Details() {
		if info, ok := d.(*errdetails.ErrorInfo); ok {
			reason = info.GetReason()
			if !strings.Contains(info.GetMetadata()["answer"], "urgent") || !strings.Contains(info.GetMetadata()["errors"], ".priority") {
				t.Errorf("ErrorInfo metadata %v; want the answer and the errors", info.GetMetadata())
			}
		}
	}
	if inv := invalidEvents(events); reason != "OUTPUT_INVALID" || len(inv) != 1 || inv[0].GetRepair() {
		t.Errorf("reason %q, output_invalid %v; want OUTPUT_INVALID after one event without repair", reason, inv)
	}
}

// plainTurns is a provider that takes no output schema: each turn plays
// the next of turns, a tool call or text.
func plainTurns(turns ...*agentdv1.ToolCall) *fakeProvider {
	var i int
	return &fakeProvider{name: "plain", caps: providers.Capabilities{ModelOptional: true}, stream: func(context.Context, *providers.Request) iter.Seq2[providers.Event, error] {
		call := turns[min(i, len(turns)-1)]
		i++
		return func(yield func(providers.Event, error) bool) {
			_ = yield(&providers.ToolCall{Call: call}, nil) && yield(&providers.Stop{Reason: agentdv1.StopReason_STOP_REASON_TOOL_USE}, nil)
		}
	}}
}

// Where the provider takes no schema, the model is offered final_answer,
// whose parameters are the schema, beside the other tools: its call's
// arguments are the answer; a refused one is answered with the errors (a
// repair turn), an accepted one completes the generation, and every call
// of the conversation has its result.
func TestStructuredOutputThroughTheTool(t *testing.T) {
	t.Parallel()
	prov := plainTurns(
		&agentdv1.ToolCall{Id: "c1", Name: "echo", Arguments: `{"text": "x"}`},
		&agentdv1.ToolCall{Id: "c2", Name: "final_answer", Arguments: `{"title": "Jam"}`},
		&agentdv1.ToolCall{Id: "c3", Name: "final_answer", Arguments: `{"title": "Jam", "priority": "low"}`},
	)
	client := newClientWith(t, server.Options{Bridge: &fakeBridge{onList: offering(serverTools("demo", "echo"))}}, prov)
	agent := &agentdv1.Agent{Provider: "plain", Mcps: []*agentdv1.MCPServer{refServer("", "demo")}, Output: ticketOutput(t, nil)}
	events, end := generate(t, client, &agentdv1.StartGeneration{Agent: agent, Messages: userSays("file it")}, nil)
	wantCode(t, end, codes.OK)
	done := completion(events)
	if done.GetStructured().GetStructValue().AsMap()["priority"] != "low" {
		t.Errorf("completed = %v; want the second final answer", done)
	}
	for i, req := range prov.requests {
		names := make([]string, len(req.Tools))
		for j, ft := range req.Tools {
			names[j] = ft.GetName()
		}
		if req.Output != nil || !slices.Equal(names, []string{"echo", "final_answer"}) {
			t.Errorf("request %d: output %v, tools %v; want echo and final_answer offered, no schema field", i, req.Output, names)
		}
	}
	msgs := done.GetMessages()
	var results []string
	for _, m := range msgs {
		for _, p := range m.GetParts() {
			if r := p.GetToolResult(); r != nil {
				results = append(results, r.GetToolCallId())
			}
		}
	}
	if !slices.Equal(results, []string{"c1", "c2", "c3"}) {
		t.Errorf("results of %v; want every call's, the final answers' included", results)
	}
	if inv := invalidEvents(events); len(inv) != 1 || !inv[0].GetRepair() {
		t.Errorf("output_invalid %v; want one, with a repair", inv)
	}
}

// A schema that is no object's JSON Schema, and a strict schema past a
// strict provider's restrictions, are INVALID_ARGUMENT at the start,
// naming the place; an agent tool named final_answer is refused too.
// Preview shows how the provider takes the schema.
func TestStructuredOutputChecked(t *testing.T) {
	t.Parallel()
	client := newClientWith(t, server.Options{Bridge: &fakeBridge{}}, recordingScript())
	bad := structuredAgent(t, `{"turns": [{"text": "x"}]}`, nil)
	bad.Output.Schema.Fields["properties"] = structpb.NewStructValue(&structpb.Struct{Fields: map[string]*structpb.Value{"title": structpb.NewStringValue("string")}})
	bad.Tools = []*agentdv1.FunctionTool{{Name: "final_answer"}}
	_, end := generate(t, client, &agentdv1.StartGeneration{Agent: bad, Messages: userSays("x")}, nil)
	wantCode(t, end, codes.InvalidArgument)
	var fields []string
	for _, v := range fieldViolations(end) {
		fields = append(fields, v.GetField())
	}
	if !slices.Contains(fields, "start.agent.output.schema.properties.title") || !slices.Contains(fields, "start.agent.tools") {
		t.Errorf("violations at %v; want the schema's place and the tool", fields)
	}
	pv, err := client.Preview(t.Context(), &agentdv1.PreviewRequest{Agent: structuredAgent(t, `{"turns": [{"text": "x"}]}`, nil), Messages: userSays("x")})
	if err != nil {
		t.Fatal(err)
	}
	if o := pv.GetOutput(); !o.GetNativeWithTools() || !o.GetNativeWithoutTools() || o.GetFinalAnswer().GetName() != "final_answer" {
		t.Errorf("preview output %v; want native both ways and the final_answer tool", o)
	}
}

// scriptedTurns is a provider that takes the output schema in its own
// field and plays turns in order: each a tool call or a text answer.
func scriptedTurns(turns ...providers.Event) *fakeProvider {
	var mu sync.Mutex
	var i int
	return &fakeProvider{name: "plain", caps: providers.Capabilities{ModelOptional: true, Output: func(string, bool) bool { return true }},
		stream: func(context.Context, *providers.Request) iter.Seq2[providers.Event, error] {
			mu.Lock()
			ev := turns[min(i, len(turns)-1)]
			i++
			mu.Unlock()
			stop := agentdv1.StopReason_STOP_REASON_END_TURN
			if _, ok := ev.(*providers.ToolCall); ok {
				stop = agentdv1.StopReason_STOP_REASON_TOOL_USE
			}
			return func(yield func(providers.Event, error) bool) {
				_ = yield(ev, nil) && yield(&providers.Stop{Reason: stop}, nil)
			}
		}}
}

// The repair turns an output schema allows are counted across a pause:
// a generation that used its one repair turn, paused for an approval and
// resumed, fails at the next refused answer.
func TestStructuredOutputRepairsAcrossPause(t *testing.T) {
	t.Parallel()
	refused := &providers.TextDelta{Text: `{"title": "Jam", "priority": "urgent"}`}
	prov := scriptedTurns(refused,
		&providers.ToolCall{Call: &agentdv1.ToolCall{Id: "c1", Name: "delete", Arguments: `{"path": "a.txt"}`}},
		refused)
	a := newPausable(t, &fakeBridge{onList: offering(serverTools("files", "read", "delete"))}, nil, prov)
	agent := &agentdv1.Agent{Provider: "plain", RequiresApproval: []string{"delete"}, Mcps: []*agentdv1.MCPServer{refServer("files", "files")}, Output: ticketOutput(t, nil)}
	events, end := generate(t, a.client, &agentdv1.StartGeneration{Agent: agent, Messages: userSays("file it")}, nil)
	wantCode(t, end, codes.OK)
	paused := pausedEvent(t, events)
	if inv := invalidEvents(events); len(inv) != 1 || !inv[0].GetRepair() {
		t.Fatalf("output_invalid before the pause %v; want one, repaired", inv)
	}
	events, end = run(t, a.client, resumeRequest(paused.GetGenerationId(), agent,
		&agentdv1.ApprovalDecision{RequestId: paused.GetApprovalRequests()[0].GetId(), Approved: true}), nil)
	wantCode(t, end, codes.FailedPrecondition)
	if inv := invalidEvents(events); len(inv) != 1 || inv[0].GetRepair() {
		t.Errorf("output_invalid after the resume %v; want one, with no repair left", inv)
	}
}
