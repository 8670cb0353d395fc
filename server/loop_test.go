package server_test

import (
	"context"
	"encoding/json"
	"fmt"
	"iter"
	"regexp"
	"strings"
	"sync"
	"testing"

	"github.com/google/go-cmp/cmp"
	"google.golang.org/grpc/codes"
	"google.golang.org/protobuf/proto"

	bridgev1 "github.com/agentd/agentd/gen/go/agentd/bridge/v1"
	agentdv1 "github.com/agentd/agentd/gen/go/agentd/v1"
	"github.com/agentd/agentd/internal/fault"
	"github.com/agentd/agentd/providers"
)

func textPart(s string) *agentdv1.Part { return &agentdv1.Part{Kind: &agentdv1.Part_Text{Text: s}} }

func callPart(id, name, args string) *agentdv1.Part {
	return &agentdv1.Part{Kind: &agentdv1.Part_ToolCall{ToolCall: &agentdv1.ToolCall{Id: id, Name: name, Arguments: args}}}
}

func resultPart(id, name, output string, isError bool) *agentdv1.Part {
	return &agentdv1.Part{Kind: &agentdv1.Part_ToolResult{ToolResult: &agentdv1.ToolResult{ToolCallId: id, Name: name, Output: output, IsError: isError}}}
}

func delta(s string) *agentdv1.GenerateResponse {
	return &agentdv1.GenerateResponse{Event: &agentdv1.GenerateResponse_TextDelta{TextDelta: &agentdv1.TextDelta{Text: s}}}
}

// toolResults returns the tool results of the last message of the
// provider's n-th request (0-based).
func toolResults(t *testing.T, p *fakeProvider, n int) *agentdv1.Message {
	t.Helper()
	reqs := p.calls()
	if len(reqs) <= n {
		t.Fatalf("provider called %d times; want at least %d", len(reqs), n+1)
	}
	msgs := reqs[n].Messages
	return msgs[len(msgs)-1]
}

// TestToolLoopEvents proves the exact event stream of a generation whose
// model calls an MCP tool and then answers, and that the tool's result
// goes back to the model (R-T1, R-T3, R-T4).
func TestToolLoopEvents(t *testing.T) {
	t.Parallel()
	bridge := &fakeBridge{
		onList: offering(serverTools("demo", "echo")),
		onCall: func(_ context.Context, _, _, args string) (*bridgev1.CallToolResponse, error) {
			var in struct{ Text string }
			if err := json.Unmarshal([]byte(args), &in); err != nil {
				return nil, err
			}
			return &bridgev1.CallToolResponse{Output: in.Text}, nil
		},
	}
	prov := recordingScript()
	client := newClient(t, bridge, prov)
	agent := &agentdv1.Agent{
		Provider: "script",
		Mcps:     []*agentdv1.MCPServer{refServer("", "demo")},
		ProviderOptions: script(t, `{"turns": [
			{"text": "Let me check.", "tool_calls": [{"name": "echo", "arguments": {"text": "hi"}}], "usage": {"input_tokens": 10, "output_tokens": 3}},
			{"text": "It said {{tool_outputs}}", "usage": {"input_tokens": 20, "output_tokens": 4}}
		]}`),
	}

	events, st := generate(t, client, &agentdv1.StartGeneration{Agent: agent, Messages: userSays("say hi")}, nil)

	wantCode(t, st, codes.OK)
	assistant1 := &agentdv1.Message{Role: agentdv1.Role_ROLE_ASSISTANT, Parts: []*agentdv1.Part{textPart("Let me check."), callPart("call_1_1", "echo", `{"text":"hi"}`)}}
	toolMsg := &agentdv1.Message{Role: agentdv1.Role_ROLE_TOOL, Parts: []*agentdv1.Part{resultPart("call_1_1", "echo", "hi", false)}}
	assistant2 := &agentdv1.Message{Role: agentdv1.Role_ROLE_ASSISTANT, Parts: []*agentdv1.Part{textPart("It said hi")}}
	mcp := agentdv1.ToolOrigin_TOOL_ORIGIN_MCP
	want := []*agentdv1.GenerateResponse{
		{Event: &agentdv1.GenerateResponse_Started{Started: &agentdv1.GenerationStarted{
			Servers: []*agentdv1.ServerPlacement{{Name: "demo", Placement: agentdv1.Placement_PLACEMENT_BRIDGE, Transport: agentdv1.Transport_TRANSPORT_STDIO}},
			Tools:   []*agentdv1.ToolInfo{{Name: "echo", Origin: mcp, ServerName: "demo", ServerToolName: "echo"}},
		}}},
		delta("Let"), delta(" me"), delta(" check."),
		{Event: &agentdv1.GenerateResponse_Usage{Usage: &agentdv1.Usage{InputTokens: 10, OutputTokens: 3, Turn: 1, StopReason: agentdv1.StopReason_STOP_REASON_TOOL_USE}}},
		{Event: &agentdv1.GenerateResponse_ToolCallStarted{ToolCallStarted: &agentdv1.ToolCallStarted{
			CallId: "call_1_1", ToolName: "echo", ServerName: "demo", Origin: mcp, Arguments: `{"text":"hi"}`, Turn: 1,
		}}},
		{Event: &agentdv1.GenerateResponse_ToolCallFinished{ToolCallFinished: &agentdv1.ToolCallFinished{
			CallId: "call_1_1", ToolName: "echo", ServerName: "demo", Origin: mcp, Output: "hi", Turn: 1,
		}}},
		delta("It"), delta(" said"), delta(" hi"),
		{Event: &agentdv1.GenerateResponse_Usage{Usage: &agentdv1.Usage{InputTokens: 20, OutputTokens: 4, Turn: 2, StopReason: agentdv1.StopReason_STOP_REASON_END_TURN}}},
		{Event: &agentdv1.GenerateResponse_Completed{Completed: &agentdv1.GenerationCompleted{
			Message:    assistant2,
			Messages:   []*agentdv1.Message{assistant1, toolMsg, assistant2},
			Usage:      &agentdv1.Usage{InputTokens: 30, OutputTokens: 7},
			StopReason: agentdv1.StopReason_STOP_REASON_END_TURN,
			ToolTurns:  1,
			ToolCalls:  1,
		}}},
	}
	if diff := protoDiff(want, events); diff != "" {
		t.Errorf("events (-want +got):\n%s", diff)
	}
	id := events[0].GetStarted().GetGenerationId()
	if id == "" || events[len(events)-1].GetCompleted().GetGenerationId() != id {
		t.Errorf("generation ids: started %q, completed %q; want one non-empty id", id, events[len(events)-1].GetCompleted().GetGenerationId())
	}
	for _, ev := range events {
		if u := ev.GetUsage(); u != nil && u.GetToolSchemaBytes() <= 0 {
			t.Errorf("usage of turn %d reports %d tool schema bytes; want the size of the offered tools", u.GetTurn(), u.GetToolSchemaBytes())
		}
	}

	reqs := prov.calls()
	if len(reqs) != 2 {
		t.Fatalf("provider called %d times; want 2", len(reqs))
	}
	if diff := protoDiff(append(userSays("say hi"), assistant1, toolMsg), reqs[1].Messages); diff != "" {
		t.Errorf("second turn's messages (-want +got):\n%s", diff)
	}
	if diff := protoDiff([]*agentdv1.FunctionTool{{Name: "echo", Description: "the echo tool"}}, reqs[0].Tools); diff != "" {
		t.Errorf("R-T1 tools offered (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff([]bridgeCall{{"demo", "echo", `{"text":"hi"}`}}, bridge.calls()); diff != "" {
		t.Errorf("bridge tool calls (-want +got):\n%s", diff)
	}
	wantCounts(t, bridge, bridgeCounts{Open: 1, List: 1, Call: 1, Close: 1})
}

// TestToolResults proves what the model gets back for unknown tools
// (R-T3) and failed tools (R-T4), and that the loop goes on.
func TestToolResults(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name      string
		calls     string // the first turn's tool_calls
		onCall    func(ctx context.Context, server, tool, arguments string) (*bridgev1.CallToolResponse, error)
		want      *agentdv1.Message
		wantCalls []bridgeCall
		// wantFinished is the tool_call_finished events' is_error flags.
		wantFinished []bool
	}{
		{
			name:  "R-T3 an unknown tool name is an error result naming it",
			calls: `[{"name": "nosuch", "arguments": {}}, {"name": "echo", "arguments": {"x": 1}}]`,
			want: &agentdv1.Message{Role: agentdv1.Role_ROLE_TOOL, Parts: []*agentdv1.Part{
				resultPart("call_1_1", "nosuch", `{"error":"no tool named \"nosuch\" is offered"}`, true),
				resultPart("call_1_2", "echo", "echo ok", false),
			}},
			wantCalls: []bridgeCall{{"demo", "echo", `{"x":1}`}},
			// The client sees the unknown call finish as an error too.
			wantFinished: []bool{true, false},
		},
		{
			name:  "R-T3 the error quotes the name as written, without HTML escaping",
			calls: `[{"name": "a<b>&c", "arguments": {}}]`,
			want: &agentdv1.Message{Role: agentdv1.Role_ROLE_TOOL, Parts: []*agentdv1.Part{
				resultPart("call_1_1", "a<b>&c", `{"error":"no tool named \"a<b>&c\" is offered"}`, true),
			}},
			wantFinished: []bool{true},
		},
		{
			name:  "R-T4 an isError result reaches the model flagged",
			calls: `[{"name": "echo", "arguments": {"x": 1}}]`,
			onCall: func(context.Context, string, string, string) (*bridgev1.CallToolResponse, error) {
				return &bridgev1.CallToolResponse{Output: `{"error":"disk full"}`, IsError: true}, nil
			},
			want: &agentdv1.Message{Role: agentdv1.Role_ROLE_TOOL, Parts: []*agentdv1.Part{
				resultPart("call_1_1", "echo", `{"error":"disk full"}`, true),
			}},
			wantCalls:    []bridgeCall{{"demo", "echo", `{"x":1}`}},
			wantFinished: []bool{true},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			bridge := &fakeBridge{onList: offering(serverTools("demo", "echo")), onCall: tt.onCall}
			prov := recordingScript()
			client := newClient(t, bridge, prov)
			agent := &agentdv1.Agent{
				Provider:        "script",
				Mcps:            []*agentdv1.MCPServer{refServer("", "demo")},
				ProviderOptions: script(t, `{"turns": [{"tool_calls": `+tt.calls+`}, {"text": "done"}]}`),
			}

			events, st := generate(t, client, &agentdv1.StartGeneration{Agent: agent, Messages: userSays("go")}, nil)

			wantCode(t, st, codes.OK)
			if got := kinds(events); got[len(got)-1] != "completed" {
				t.Errorf("events = %v; want the generation to complete", got)
			}
			if diff := protoDiff(tt.want, toolResults(t, prov, 1)); diff != "" {
				t.Errorf("tool results sent to the model (-want +got):\n%s", diff)
			}
			if diff := cmp.Diff(tt.wantCalls, bridge.calls()); diff != "" {
				t.Errorf("bridge tool calls (-want +got):\n%s", diff)
			}
			var finished []bool
			for _, ev := range events {
				if f := ev.GetToolCallFinished(); f != nil {
					finished = append(finished, f.GetIsError())
				}
			}
			if diff := cmp.Diff(tt.wantFinished, finished); diff != "" {
				t.Errorf("tool_call_finished is_error flags (-want +got):\n%s", diff)
			}
		})
	}
}

// TestToolNameCollisions proves that clashing tool names are refused
// before the model is called, naming the tool and both owners (R-T2).
func TestToolNameCollisions(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name      string
		tools     []string // the agent's function tools
		servers   []*bridgev1.ServerTools
		wantField string
		wantFacts []string
	}{
		{
			name:      "R-T2 two servers offering one name",
			servers:   []*bridgev1.ServerTools{serverTools("alpha", "read", "search"), serverTools("beta", "search")},
			wantField: "start.agent.mcps[1]",
			wantFacts: []string{`"search"`, `"alpha"`, `"beta"`, "PREFIX"},
		},
		{
			name:      "R-T2 a server tool clashing with an agent tool",
			tools:     []string{"search"},
			servers:   []*bridgev1.ServerTools{serverTools("alpha", "search"), serverTools("beta")},
			wantField: "start.agent.mcps[0]",
			wantFacts: []string{`"search"`, "agent", `"alpha"`},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			bridge := &fakeBridge{onList: offering(tt.servers...)}
			prov := plainProvider()
			client := newClient(t, bridge, prov)
			agent := &agentdv1.Agent{Provider: "plain", Mcps: []*agentdv1.MCPServer{refServer("", "alpha"), refServer("", "beta")}}
			for _, name := range tt.tools {
				agent.Tools = append(agent.Tools, &agentdv1.FunctionTool{Name: name})
			}

			events, st := generate(t, client, &agentdv1.StartGeneration{Agent: agent, Messages: userSays("go")}, nil)

			wantCode(t, st, codes.InvalidArgument)
			if diff := cmp.Diff([]string{tt.wantField}, violationFields(st)); diff != "" {
				t.Errorf("violated fields (-want +got):\n%s", diff)
			}
			wantFacts(t, tt.wantField, description(t, st, tt.wantField), tt.wantFacts...)
			if len(events) != 0 {
				t.Errorf("events = %v; want none", kinds(events))
			}
			if n := len(prov.calls()); n != 0 {
				t.Errorf("provider called %d times; want 0", n)
			}
			wantCounts(t, bridge, bridgeCounts{Open: 1, List: 1, Close: 1})
		})
	}
}

// TestToolNamePrefix proves opt-in prefixing: "<server>__<tool>", within
// 64 characters by a stable hash, routed back to the server's own tool
// name (X-T6).
func TestToolNamePrefix(t *testing.T) {
	t.Parallel()
	t.Run("X-T6 clashing names become server__tool and route to their server", func(t *testing.T) {
		t.Parallel()
		bridge := &fakeBridge{onList: offering(serverTools("alpha", "search"), serverTools("beta", "search"), serverTools("command: files", "read"))}
		prov := recordingScript()
		client := newClient(t, bridge, prov)
		agent := &agentdv1.Agent{
			Provider:         "script",
			ToolNameConflict: agentdv1.ToolNameConflict_TOOL_NAME_CONFLICT_PREFIX,
			Mcps:             []*agentdv1.MCPServer{refServer("", "alpha"), refServer("", "beta"), commandServer("", "/usr/bin/files")},
			ProviderOptions:  script(t, `{"turns": [{"tool_calls": [{"name": "beta__search", "arguments": {"q": "x"}}]}, {"text": "done"}]}`),
		}

		events, st := generate(t, client, &agentdv1.StartGeneration{Agent: agent, Messages: userSays("go")}, nil)

		wantCode(t, st, codes.OK)
		mcp := agentdv1.ToolOrigin_TOOL_ORIGIN_MCP
		wantTools := []*agentdv1.ToolInfo{
			{Name: "alpha__search", Origin: mcp, ServerName: "alpha", ServerToolName: "search"},
			{Name: "beta__search", Origin: mcp, ServerName: "beta", ServerToolName: "search"},
			{Name: "command__files__read", Origin: mcp, ServerName: "command: files", ServerToolName: "read"},
		}
		if diff := protoDiff(wantTools, started(t, events).GetTools()); diff != "" {
			t.Errorf("started tools (-want +got):\n%s", diff)
		}
		var offered []string
		for _, tool := range prov.calls()[0].Tools {
			offered = append(offered, tool.GetName())
		}
		if diff := cmp.Diff([]string{"alpha__search", "beta__search", "command__files__read"}, offered); diff != "" {
			t.Errorf("tools offered to the model (-want +got):\n%s", diff)
		}
		if diff := cmp.Diff([]bridgeCall{{"beta", "search", `{"q":"x"}`}}, bridge.calls()); diff != "" {
			t.Errorf("bridge tool calls (-want +got):\n%s", diff)
		}
	})

	t.Run("X-T6 long names stay within 64 characters, stable and distinct", func(t *testing.T) {
		t.Parallel()
		const server = "an-mcp-server-with-a-rather-long-name-indeed"
		quick, slow := "search_the_entire_document_index_quickly", "search_the_entire_document_index_slowly"
		bridge := &fakeBridge{onList: offering(serverTools(server, quick, slow))}
		prov := recordingScript()
		client := newClient(t, bridge, prov)
		agent := func(opts string) *agentdv1.Agent {
			return &agentdv1.Agent{
				Provider:         "script",
				ToolNameConflict: agentdv1.ToolNameConflict_TOOL_NAME_CONFLICT_PREFIX,
				Mcps:             []*agentdv1.MCPServer{refServer(server, "big")},
				ProviderOptions:  script(t, opts),
			}
		}

		events, st := generate(t, client, &agentdv1.StartGeneration{Agent: agent(`{"turns": [{"text": "hi"}]}`), Messages: userSays("go")}, nil)
		wantCode(t, st, codes.OK)
		first := started(t, events).GetTools()
		if len(first) != 2 {
			t.Fatalf("started tools = %v; want 2", first)
		}
		full := server + "__" + quick
		valid := regexp.MustCompile(`^[a-zA-Z0-9_-]{1,64}$`)
		for _, info := range first {
			if name := info.GetName(); len(name) != 64 || !valid.MatchString(name) || !strings.HasPrefix(name, full[:40]) {
				t.Errorf("prefixed name %q (%d characters); want 64 valid characters starting %q", name, len(name), full[:40])
			}
		}
		if first[0].GetName() == first[1].GetName() {
			t.Errorf("%q and %q both became %q", quick, slow, first[0].GetName())
		}

		target := first[1].GetName()
		events, st = generate(t, client, &agentdv1.StartGeneration{
			Agent:    agent(fmt.Sprintf(`{"turns": [{"tool_calls": [{"name": %q}]}, {"text": "done"}]}`, target)),
			Messages: userSays("go"),
		}, nil)
		wantCode(t, st, codes.OK)
		if diff := protoDiff(first, started(t, events).GetTools()); diff != "" {
			t.Errorf("prefixed names changed between generations (-first +second):\n%s", diff)
		}
		if diff := cmp.Diff([]bridgeCall{{server, slow, "{}"}}, bridge.calls()); diff != "" {
			t.Errorf("bridge tool calls (-want +got):\n%s", diff)
		}
	})
}

// TestParallelToolCalls proves that one turn's MCP calls run in parallel
// and that their results reach the model in call order (X-F2). Each call
// blocks until every call of the turn has arrived, so a loop that ran them
// one by one would never finish; they then finish in reverse order.
func TestParallelToolCalls(t *testing.T) {
	t.Parallel()
	const n = 3
	var (
		mu       sync.Mutex
		arrived  int
		all      = make(chan struct{})
		finished [n + 2]chan struct{}
	)
	for i := range finished {
		finished[i] = make(chan struct{})
	}
	close(finished[n+1])
	bridge := &fakeBridge{
		onList: offering(serverTools("demo", "slow")),
		onCall: func(ctx context.Context, _, _, args string) (*bridgev1.CallToolResponse, error) {
			var in struct{ N int }
			if err := json.Unmarshal([]byte(args), &in); err != nil || in.N < 1 || in.N > n {
				return nil, fmt.Errorf("bad arguments %s", args)
			}
			mu.Lock()
			arrived++
			if arrived == n {
				close(all)
			}
			mu.Unlock()
			for _, ch := range []chan struct{}{all, finished[in.N+1]} {
				select {
				case <-ch:
				case <-ctx.Done():
					return nil, ctx.Err()
				}
			}
			defer close(finished[in.N])
			return &bridgev1.CallToolResponse{Output: fmt.Sprintf("result %d", in.N)}, nil
		},
	}
	prov := recordingScript()
	client := newClient(t, bridge, prov)
	agent := &agentdv1.Agent{
		Provider: "script",
		Mcps:     []*agentdv1.MCPServer{refServer("", "demo")},
		ProviderOptions: script(t, `{"turns": [
			{"tool_calls": [{"name": "slow", "arguments": {"n": 1}}, {"name": "slow", "arguments": {"n": 2}}, {"name": "slow", "arguments": {"n": 3}}]},
			{"text": "done"}
		]}`),
	}

	events, st := generate(t, client, &agentdv1.StartGeneration{Agent: agent, Messages: userSays("go")}, nil)

	wantCode(t, st, codes.OK)
	want := &agentdv1.Message{Role: agentdv1.Role_ROLE_TOOL, Parts: []*agentdv1.Part{
		resultPart("call_1_1", "slow", "result 1", false),
		resultPart("call_1_2", "slow", "result 2", false),
		resultPart("call_1_3", "slow", "result 3", false),
	}}
	if diff := protoDiff(want, toolResults(t, prov, 1)); diff != "" {
		t.Errorf("tool results sent to the model (-want +got):\n%s", diff)
	}
	finishedEvents := 0
	for _, k := range kinds(events) {
		if k == "tool_call_finished" {
			finishedEvents++
		}
	}
	if finishedEvents != n {
		t.Errorf("%d tool_call_finished events; want %d", finishedEvents, n)
	}
}

// TestFunctionTools proves that the agent's own tools run at the client:
// a FunctionCall on the stream, answered by a FunctionResult, whose output
// reaches the model (X-F1).
func TestFunctionTools(t *testing.T) {
	t.Parallel()
	bridge := &fakeBridge{}
	prov := recordingScript()
	client := newClient(t, bridge, prov)
	agent := &agentdv1.Agent{
		Provider: "script",
		Tools:    []*agentdv1.FunctionTool{{Name: "get_weather", Description: "Weather for a city"}},
		ProviderOptions: script(t, `{"turns": [
			{"tool_calls": [{"name": "get_weather", "arguments": {"city": "Paris"}}], "usage": {"input_tokens": 5, "output_tokens": 1}},
			{"text": "It is {{tool_outputs}}", "usage": {"input_tokens": 7, "output_tokens": 3}}
		]}`),
	}

	events, st := generate(t, client, &agentdv1.StartGeneration{Agent: agent, Messages: userSays("weather?")}, func(ev *agentdv1.GenerateResponse, s stream) {
		if fc := ev.GetFunctionCall(); fc != nil {
			s.Send(functionResult(fc.GetCallId(), "sunny"))
		}
	})

	wantCode(t, st, codes.OK)
	fn := agentdv1.ToolOrigin_TOOL_ORIGIN_FUNCTION
	assistant1 := &agentdv1.Message{Role: agentdv1.Role_ROLE_ASSISTANT, Parts: []*agentdv1.Part{callPart("call_1_1", "get_weather", `{"city":"Paris"}`)}}
	toolMsg := &agentdv1.Message{Role: agentdv1.Role_ROLE_TOOL, Parts: []*agentdv1.Part{resultPart("call_1_1", "get_weather", "sunny", false)}}
	assistant2 := &agentdv1.Message{Role: agentdv1.Role_ROLE_ASSISTANT, Parts: []*agentdv1.Part{textPart("It is sunny")}}
	want := []*agentdv1.GenerateResponse{
		{Event: &agentdv1.GenerateResponse_Started{Started: &agentdv1.GenerationStarted{
			Tools: []*agentdv1.ToolInfo{{Name: "get_weather", Origin: fn}},
		}}},
		{Event: &agentdv1.GenerateResponse_Usage{Usage: &agentdv1.Usage{InputTokens: 5, OutputTokens: 1, Turn: 1, StopReason: agentdv1.StopReason_STOP_REASON_TOOL_USE}}},
		{Event: &agentdv1.GenerateResponse_ToolCallStarted{ToolCallStarted: &agentdv1.ToolCallStarted{
			CallId: "call_1_1", ToolName: "get_weather", Origin: fn, Arguments: `{"city":"Paris"}`, Turn: 1,
		}}},
		{Event: &agentdv1.GenerateResponse_FunctionCall{FunctionCall: &agentdv1.FunctionCall{CallId: "call_1_1", Name: "get_weather", Arguments: `{"city":"Paris"}`}}},
		{Event: &agentdv1.GenerateResponse_ToolCallFinished{ToolCallFinished: &agentdv1.ToolCallFinished{
			CallId: "call_1_1", ToolName: "get_weather", Origin: fn, Output: "sunny", Turn: 1,
		}}},
		delta("It"), delta(" is"), delta(" sunny"),
		{Event: &agentdv1.GenerateResponse_Usage{Usage: &agentdv1.Usage{InputTokens: 7, OutputTokens: 3, Turn: 2, StopReason: agentdv1.StopReason_STOP_REASON_END_TURN}}},
		{Event: &agentdv1.GenerateResponse_Completed{Completed: &agentdv1.GenerationCompleted{
			Message:    assistant2,
			Messages:   []*agentdv1.Message{assistant1, toolMsg, assistant2},
			Usage:      &agentdv1.Usage{InputTokens: 12, OutputTokens: 4},
			StopReason: agentdv1.StopReason_STOP_REASON_END_TURN,
			ToolTurns:  1,
			ToolCalls:  1,
		}}},
	}
	if diff := protoDiff(want, events); diff != "" {
		t.Errorf("events (-want +got):\n%s", diff)
	}
	if diff := protoDiff(toolMsg, toolResults(t, prov, 1)); diff != "" {
		t.Errorf("tool results sent to the model (-want +got):\n%s", diff)
	}
	wantCounts(t, bridge, bridgeCounts{})
}

// TestMaxToolTurns proves that max_tool_turns ends a runaway loop: by
// default the generation completes with the final event naming the
// limit and the figures, the model's last message its message, and the
// calls it asked for past the limit answered as not run, without
// running; with on_limit FAIL it fails RESOURCE_EXHAUSTED with a clear
// message and an ErrorInfo naming the limit (R-F3).
func TestMaxToolTurns(t *testing.T) {
	t.Parallel()
	agent := func(onLimit agentdv1.OnLimit) *agentdv1.Agent {
		maxTurns := int32(2)
		return &agentdv1.Agent{
			Provider:     "script",
			MaxToolTurns: &maxTurns,
			Limits:       &agentdv1.GenerationLimits{OnLimit: onLimit},
			Mcps:         []*agentdv1.MCPServer{refServer("", "demo")},
			ProviderOptions: script(t, `{"turns": [
				{"tool_calls": [{"name": "echo"}]},
				{"tool_calls": [{"name": "echo"}]},
				{"text": "one more", "tool_calls": [{"name": "echo"}]},
				{"text": "done"}
			]}`),
		}
	}
	t.Run("R-F3 END", func(t *testing.T) {
		t.Parallel()
		bridge := &fakeBridge{onList: offering(serverTools("demo", "echo"))}
		client := newClient(t, bridge, recordingScript())

		events, st := generate(t, client, &agentdv1.StartGeneration{Agent: agent(agentdv1.OnLimit_ON_LIMIT_UNSPECIFIED), Messages: userSays("go")}, nil)

		wantCode(t, st, codes.OK)
		done := completion(events)
		want := &agentdv1.LimitReached{Name: "max_tool_turns", Value: 2, Used: 2, Unit: "tool_turns", Ceiling: 1000}
		if diff := protoDiff(want, done.GetLimit()); diff != "" {
			t.Errorf("completed.limit (-want +got):\n%s", diff)
		}
		if done.GetToolTurns() != 2 || done.GetToolCalls() != 2 || done.GetStopReason() != agentdv1.StopReason_STOP_REASON_TOOL_USE {
			t.Errorf("completed with %d tool turns, %d tool calls, %v; want 2, 2, TOOL_USE", done.GetToolTurns(), done.GetToolCalls(), done.GetStopReason())
		}
		msgs := done.GetMessages()
		if done.GetMessage().GetParts()[0].GetText() != "one more" || !proto.Equal(done.GetMessage(), msgs[len(msgs)-2]) {
			t.Errorf("completed.message = %v; want the model's last message", done.GetMessage())
		}
		wantNotRun(t, msgs[len(msgs)-1], "max_tool_turns", "call_3_1")
		wantCounts(t, bridge, bridgeCounts{Open: 1, List: 1, Call: 2, Close: 1})
	})
	t.Run("R-F3 FAIL", func(t *testing.T) {
		t.Parallel()
		bridge := &fakeBridge{onList: offering(serverTools("demo", "echo"))}
		client := newClient(t, bridge, recordingScript())

		_, st := generate(t, client, &agentdv1.StartGeneration{Agent: agent(agentdv1.OnLimit_ON_LIMIT_FAIL), Messages: userSays("go")}, nil)

		wantCode(t, st, codes.ResourceExhausted)
		wantFacts(t, "status message", st.Message(), "2 tool turns", "max_tool_turns")
		info := errorInfo(st)
		if info.GetReason() != "MAX_TOOL_TURNS" || info.GetMetadata()["max_tool_turns"] != "2" || info.GetMetadata()["used"] != "2" {
			t.Errorf("ErrorInfo = %v; want reason MAX_TOOL_TURNS with max_tool_turns 2, used 2", info)
		}
		wantCounts(t, bridge, bridgeCounts{Open: 1, List: 1, Call: 2, Close: 1})
	})
}

// TestSessionClosedOnce proves that every way a generation ends closes its
// bridge session exactly once, and never hides the generation's own error
// (R-L4).
func TestSessionClosedOnce(t *testing.T) {
	t.Parallel()
	toolThenText := `{"turns": [{"tool_calls": [{"name": "echo"}]}, {"text": "done"}]}`
	maxTurns := int32(1)
	tests := []struct {
		name     string
		bridge   *fakeBridge
		script   string
		maxTurns *int32
		limits   *agentdv1.GenerationLimits
		wantCode codes.Code
		want     bridgeCounts
	}{
		{
			name:     "R-L4 completed",
			bridge:   &fakeBridge{onList: offering(serverTools("demo", "echo"))},
			script:   toolThenText,
			wantCode: codes.OK,
			want:     bridgeCounts{Open: 1, List: 1, Call: 1, Close: 1},
		},
		{
			name:     "R-L4 the model fails mid-loop",
			bridge:   &fakeBridge{onList: offering(serverTools("demo", "echo"))},
			script:   `{"turns": [{"tool_calls": [{"name": "echo"}]}, {"error": {"kind": "unavailable", "message": "overloaded"}}]}`,
			wantCode: codes.Unavailable,
			want:     bridgeCounts{Open: 1, List: 1, Call: 1, Close: 1},
		},
		{
			name: "R-L4 listing tools fails",
			bridge: &fakeBridge{onList: func(context.Context) ([]*bridgev1.ServerTools, error) {
				return nil, fault.New(fault.Unavailable, "the demo server went away")
			}},
			script:   toolThenText,
			wantCode: codes.Unavailable,
			want:     bridgeCounts{Open: 1, List: 1, Close: 1},
		},
		{
			name: "R-L4 a tool call fails the generation",
			bridge: &fakeBridge{
				onList: offering(serverTools("demo", "echo")),
				onCall: func(context.Context, string, string, string) (*bridgev1.CallToolResponse, error) {
					return nil, fault.New(fault.Timeout, "the demo server did not answer tools/call within 30s")
				},
			},
			script:   toolThenText,
			wantCode: codes.DeadlineExceeded,
			want:     bridgeCounts{Open: 1, List: 1, Call: 1, Close: 1},
		},
		{
			name:     "R-L4 tool names collide",
			bridge:   &fakeBridge{onList: offering(serverTools("demo", "echo", "echo"))},
			script:   toolThenText,
			wantCode: codes.InvalidArgument,
			want:     bridgeCounts{Open: 1, List: 1, Close: 1},
		},
		{
			name:     "R-L4 max_tool_turns reached",
			bridge:   &fakeBridge{onList: offering(serverTools("demo", "echo"))},
			script:   `{"turns": [{"tool_calls": [{"name": "echo"}]}, {"tool_calls": [{"name": "echo"}]}]}`,
			maxTurns: &maxTurns,
			wantCode: codes.OK,
			want:     bridgeCounts{Open: 1, List: 1, Call: 1, Close: 1},
		},
		{
			name:     "R-L4 max_tool_turns reached with on_limit FAIL",
			bridge:   &fakeBridge{onList: offering(serverTools("demo", "echo"))},
			script:   `{"turns": [{"tool_calls": [{"name": "echo"}]}, {"tool_calls": [{"name": "echo"}]}]}`,
			maxTurns: &maxTurns,
			limits:   &agentdv1.GenerationLimits{OnLimit: agentdv1.OnLimit_ON_LIMIT_FAIL},
			wantCode: codes.ResourceExhausted,
			want:     bridgeCounts{Open: 1, List: 1, Call: 1, Close: 1},
		},
		{
			name: "R-L4 opening the session fails: nothing to close",
			bridge: &fakeBridge{onOpen: func(context.Context, *bridgev1.OpenSessionRequest) error {
				return fault.New(fault.Unavailable, "bridge unavailable")
			}},
			script:   toolThenText,
			wantCode: codes.Unavailable,
			want:     bridgeCounts{Open: 1},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			client := newClient(t, tt.bridge, recordingScript())
			agent := &agentdv1.Agent{
				Provider:        "script",
				MaxToolTurns:    tt.maxTurns,
				Limits:          tt.limits,
				Mcps:            []*agentdv1.MCPServer{refServer("", "demo")},
				ProviderOptions: script(t, tt.script),
			}

			_, st := generate(t, client, &agentdv1.StartGeneration{Agent: agent, Messages: userSays("go")}, nil)

			wantCode(t, st, tt.wantCode)
			wantCounts(t, tt.bridge, tt.want)
		})
	}
}

// TestClientEndsGeneration proves what happens when the client cancels or
// half-closes: a cancel message ends the generation as Canceled; a
// half-close while answers are pending is FailedPrecondition, since this
// agentd cannot pause yet. Either way the gated call never runs and the
// bridge session closes exactly once (R-L4).
func TestClientEndsGeneration(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name     string
		onCall   func(ctx context.Context, server, tool, arguments string) (*bridgev1.CallToolResponse, error)
		script   string
		respond  func(*agentdv1.GenerateResponse, stream)
		wantCode codes.Code
		wantMsg  []string
		want     bridgeCounts
	}{
		{
			name: "cancel message during a tool call",
			onCall: func(ctx context.Context, _, _, _ string) (*bridgev1.CallToolResponse, error) {
				<-ctx.Done()
				return nil, ctx.Err()
			},
			script: `{"turns": [{"tool_calls": [{"name": "read"}]}, {"text": "done"}]}`,
			respond: func(ev *agentdv1.GenerateResponse, s stream) {
				if ev.GetToolCallStarted() != nil {
					s.Send(cancelRequest())
				}
			},
			wantCode: codes.Canceled,
			wantMsg:  []string{"cancel"},
			want:     bridgeCounts{Open: 1, List: 1, Call: 1, Close: 1},
		},
		{
			name:   "cancel message while an approval is pending",
			script: `{"turns": [{"tool_calls": [{"name": "delete"}]}, {"text": "done"}]}`,
			respond: func(ev *agentdv1.GenerateResponse, s stream) {
				if ev.GetApprovalRequest() != nil {
					s.Send(cancelRequest())
				}
			},
			wantCode: codes.Canceled,
			wantMsg:  []string{"cancel"},
			want:     bridgeCounts{Open: 1, List: 1, Close: 1},
		},
		{
			name:   "half-close while an approval is pending",
			script: `{"turns": [{"tool_calls": [{"name": "delete"}]}, {"text": "done"}]}`,
			respond: func(ev *agentdv1.GenerateResponse, s stream) {
				if ev.GetApprovalRequest() != nil {
					s.CloseSend()
				}
			},
			wantCode: codes.FailedPrecondition,
			wantMsg:  []string{"1 answer", "half-closed", "cannot pause"},
			want:     bridgeCounts{Open: 1, List: 1, Close: 1},
		},
		{
			name:   "half-close while a function result is pending",
			script: `{"turns": [{"tool_calls": [{"name": "get_weather"}, {"name": "read"}]}, {"text": "done"}]}`,
			respond: func(ev *agentdv1.GenerateResponse, s stream) {
				if ev.GetFunctionCall() != nil {
					s.CloseSend()
				}
			},
			wantCode: codes.FailedPrecondition,
			wantMsg:  []string{"half-closed", "cannot pause"},
			want:     bridgeCounts{Open: 1, List: 1, Call: 1, Close: 1},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			bridge := &fakeBridge{onList: offering(serverTools("files", "read", "delete")), onCall: tt.onCall}
			client := newClient(t, bridge, recordingScript())
			agent := &agentdv1.Agent{
				Provider:         "script",
				Tools:            []*agentdv1.FunctionTool{{Name: "get_weather"}},
				RequiresApproval: []string{"delete"},
				Mcps:             []*agentdv1.MCPServer{refServer("", "files")},
				ProviderOptions:  script(t, tt.script),
			}

			_, st := generate(t, client, &agentdv1.StartGeneration{Agent: agent, Messages: userSays("go")}, tt.respond)

			wantCode(t, st, tt.wantCode)
			wantFacts(t, "status message", st.Message(), tt.wantMsg...)
			wantCounts(t, bridge, tt.want)
		})
	}
}

// TestCancelWhileModelStreams proves that a cancel message stops a model
// turn in progress and still closes the bridge session once (R-L4).
func TestCancelWhileModelStreams(t *testing.T) {
	t.Parallel()
	bridge := &fakeBridge{onList: offering(serverTools("demo", "echo"))}
	prov := plainProvider()
	prov.stream = func(ctx context.Context, _ *providers.Request) iter.Seq2[providers.Event, error] {
		return func(yield func(providers.Event, error) bool) {
			if !yield(&providers.TextDelta{Text: "thinking"}, nil) {
				return
			}
			<-ctx.Done()
			yield(nil, ctx.Err())
		}
	}
	client := newClient(t, bridge, prov)
	agent := &agentdv1.Agent{Provider: "plain", Mcps: []*agentdv1.MCPServer{refServer("", "demo")}}

	events, st := generate(t, client, &agentdv1.StartGeneration{Agent: agent, Messages: userSays("go")}, func(ev *agentdv1.GenerateResponse, s stream) {
		if ev.GetTextDelta() != nil {
			s.Send(cancelRequest())
		}
	})

	wantCode(t, st, codes.Canceled)
	if diff := cmp.Diff([]string{"started", "text_delta"}, kinds(events)); diff != "" {
		t.Errorf("events (-want +got):\n%s", diff)
	}
	wantCounts(t, bridge, bridgeCounts{Open: 1, List: 1, Close: 1})
}
