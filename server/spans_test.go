package server_test

import (
	"context"
	"fmt"
	"testing"

	"github.com/google/go-cmp/cmp"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.opentelemetry.io/otel/trace"
	grpccodes "google.golang.org/grpc/codes"

	bridgev1 "github.com/agentd/agentd/gen/go/agentd/bridge/v1"
	agentdv1 "github.com/agentd/agentd/gen/go/agentd/v1"
	"github.com/agentd/agentd/internal/testwait"
	"github.com/agentd/agentd/server"
)

// span is what the test checks of an ended span.
type span struct {
	Name   string
	Kind   trace.SpanKind
	Parent string // the parent's name; "" for a root
	Attrs  map[string]string
	Error  bool
}

// runsEnded waits until n invoke_agent spans have ended, and returns
// them: a run's span ends once its bridge session has closed, which may
// be after its stream ended.
func runsEnded(t *testing.T, rec *tracetest.SpanRecorder, n int) []sdktrace.ReadOnlySpan {
	t.Helper()
	var runs []sdktrace.ReadOnlySpan
	testwait.For(t, fmt.Sprintf("%d invoke_agent spans ended", n), func() bool {
		runs = runs[:0]
		for _, s := range rec.Ended() {
			if s.Name() == "invoke_agent" {
				runs = append(runs, s)
			}
		}
		return len(runs) >= n
	})
	return runs
}

// X-O2 (first part): a generation is one invoke_agent span (INTERNAL)
// carrying its id as gen_ai.conversation.id, its provider, model and
// usage; each model turn a chat span (CLIENT) under it; each tool call an
// execute_tool span under it, MCP tools (gen_ai.tool.type extension) and
// function tools (function) alike, with its name and call id; a result
// flagged as an error marks its span error.type tool_error; the wait for
// the function's result is an await_approval span under it, ending
// answered; and a generation that pauses is not an error.
func TestGenerationSpans(t *testing.T) {
	t.Parallel()
	rec := tracetest.NewSpanRecorder()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(rec))
	bridge := &fakeBridge{onList: offering(serverTools("files", "read", "broken")), onCall: func(_ context.Context, _, tool, _ string) (*bridgev1.CallToolResponse, error) {
		return &bridgev1.CallToolResponse{Output: tool + " done", IsError: tool == "broken"}, nil
	}}
	client := newClientWith(t, server.Options{Bridge: bridge, TracerProvider: tp}, recordingScript())
	agent := &agentdv1.Agent{Provider: "script", Mcps: []*agentdv1.MCPServer{refServer("files", "files")},
		Tools: []*agentdv1.FunctionTool{{Name: "ask"}},
		ProviderOptions: script(t, `{"turns": [
			{"tool_calls": [{"name": "read", "id": "c1"}, {"name": "broken", "id": "c2"}, {"name": "ask", "id": "c3"}]},
			{"text": "done"}]}`)}
	events, st := generate(t, client, &agentdv1.StartGeneration{Agent: agent, Messages: userSays("go")}, func(ev *agentdv1.GenerateResponse, s stream) {
		if fc := ev.GetFunctionCall(); fc != nil {
			_ = s.Send(functionResult(fc.GetCallId(), "answered"))
		}
	})
	wantCode(t, st, grpccodes.OK)
	id := started(t, events).GetGenerationId()
	runsEnded(t, rec, 1)

	got := map[string]span{}
	names := map[trace.SpanID]string{}
	for _, s := range rec.Ended() {
		names[s.SpanContext().SpanID()] = s.Name()
	}
	for _, s := range rec.Ended() {
		sp := span{Name: s.Name(), Kind: s.SpanKind(), Parent: names[s.Parent().SpanID()], Attrs: map[string]string{}, Error: s.Status().Code == codes.Error}
		for _, kv := range s.Attributes() {
			switch kv.Key {
			case "gen_ai.operation.name", "gen_ai.conversation.id", "gen_ai.provider.name", "gen_ai.tool.name", "gen_ai.tool.call.id", "gen_ai.tool.type", "error.type", "agentd.outcome", "agentd.approval.decision":
				sp.Attrs[string(kv.Key)] = kv.Value.String()
			}
		}
		key := s.Name()
		if v, ok := sp.Attrs["gen_ai.tool.call.id"]; ok {
			key += " " + v
		}
		if _, dup := got[key]; dup && s.Name() == "chat" {
			key += " 2"
		}
		got[key] = sp
	}
	tool := func(name, callID, typ string, errored bool) span {
		sp := span{Name: "execute_tool " + name, Kind: trace.SpanKindInternal, Parent: "invoke_agent", Attrs: map[string]string{
			"gen_ai.operation.name": "execute_tool", "gen_ai.tool.name": name, "gen_ai.tool.call.id": callID, "gen_ai.tool.type": typ,
		}}
		if errored {
			sp.Attrs["error.type"], sp.Error = "tool_error", true
		}
		return sp
	}
	chat := span{Name: "chat", Kind: trace.SpanKindClient, Parent: "invoke_agent", Attrs: map[string]string{"gen_ai.operation.name": "chat", "gen_ai.conversation.id": id, "gen_ai.provider.name": "script"}}
	want := map[string]span{
		"invoke_agent": {Name: "invoke_agent", Kind: trace.SpanKindInternal, Attrs: map[string]string{
			"gen_ai.operation.name": "invoke_agent", "gen_ai.conversation.id": id, "gen_ai.provider.name": "script", "agentd.outcome": "completed",
		}},
		"chat": chat, "chat 2": chat,
		"execute_tool read c1":   tool("read", "c1", "extension", false),
		"execute_tool broken c2": tool("broken", "c2", "extension", true),
		"execute_tool ask c3":    tool("ask", "c3", "function", false),
		// The wait for the function's result (X-O2).
		"await_approval": {Name: "await_approval", Kind: trace.SpanKindInternal, Parent: "invoke_agent", Attrs: map[string]string{"agentd.approval.decision": "answered"}},
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("spans (-want +got):\n%s", diff)
	}
}

// X-O2: a generation that pauses (its client went without answering)
// ends its invoke_agent span without an error, and its unanswered
// function call's span too.
func TestPauseIsNotAnError(t *testing.T) {
	t.Parallel()
	rec := tracetest.NewSpanRecorder()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(rec))
	st := newStore(t, 0)
	client := newClientWith(t, server.Options{Bridge: &fakeBridge{}, TracerProvider: tp, Checkpoints: st, Generations: st.Generations(), Replica: "r"}, recordingScript())
	agent := &agentdv1.Agent{Provider: "script", Tools: []*agentdv1.FunctionTool{{Name: "ask"}},
		ProviderOptions: script(t, `{"turns": [{"tool_calls": [{"name": "ask"}]}, {"text": "done"}]}`)}
	events, s := generate(t, client, &agentdv1.StartGeneration{Agent: agent, Messages: userSays("go")}, nil)
	wantCode(t, s, grpccodes.OK)
	if events[len(events)-1].GetPaused() == nil {
		t.Fatalf("events %v; want paused", kinds(events))
	}
	var seen int
	for _, sp := range rec.Ended() {
		if sp.Name() == "invoke_agent" || sp.Name() == "execute_tool ask" {
			seen++
			if sp.Status().Code == codes.Error {
				t.Errorf("span %s ended as an error: %v", sp.Name(), sp.Status())
			}
		}
		if sp.Name() == "invoke_agent" {
			for _, kv := range sp.Attributes() {
				if kv.Key == "agentd.outcome" && kv.Value != attribute.StringValue("paused") {
					t.Errorf("invoke_agent outcome %v; want paused", kv.Value.String())
				}
			}
		}
	}
	if seen != 2 {
		t.Errorf("found %d of the invoke_agent and execute_tool ask spans; want both", seen)
	}
}
