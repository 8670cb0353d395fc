package scripted

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"google.golang.org/protobuf/testing/protocmp"

	agentdv1 "github.com/agentd/agentd/gen/go/agentd/v1"
	"github.com/agentd/agentd/internal/fault"
	"github.com/agentd/agentd/providers"
)

func user(text string) *agentdv1.Message {
	return &agentdv1.Message{Role: agentdv1.Role_ROLE_USER, Parts: []*agentdv1.Part{{Kind: &agentdv1.Part_Text{Text: text}}}}
}

func assistant() *agentdv1.Message {
	return &agentdv1.Message{Role: agentdv1.Role_ROLE_ASSISTANT, Parts: []*agentdv1.Part{{Kind: &agentdv1.Part_Text{Text: "..."}}}}
}

func toolResults(outputs ...string) *agentdv1.Message {
	m := &agentdv1.Message{Role: agentdv1.Role_ROLE_TOOL}
	for _, o := range outputs {
		m.Parts = append(m.Parts, &agentdv1.Part{Kind: &agentdv1.Part_ToolResult{ToolResult: &agentdv1.ToolResult{Output: o}}})
	}
	return m
}

func collect(t *testing.T, p providers.Provider, req *providers.Request) ([]providers.Event, error) {
	t.Helper()
	var events []providers.Event
	for ev, err := range p.Stream(t.Context(), req) {
		if err != nil {
			return events, err
		}
		events = append(events, ev)
	}
	return events, nil
}

var twoTurns = map[string]any{"script": map[string]any{"turns": []any{
	map[string]any{"text": "Looking.", "tool_calls": []any{
		map[string]any{"name": "echo", "arguments": map[string]any{"text": "hi"}},
		map[string]any{"id": "mine", "name": "add"},
	}},
	map[string]any{"text": "Got: {{tool_outputs}}", "usage": map[string]any{"input_tokens": 7, "output_tokens": 3}},
}}}

func TestScriptPlaysTurnsInOrder(t *testing.T) {
	t.Parallel()
	p := Script()
	first, err := collect(t, p, &providers.Request{Model: "m", Messages: []*agentdv1.Message{user("go")}, Options: twoTurns})
	if err != nil {
		t.Fatal(err)
	}
	want := []providers.Event{
		&providers.TextDelta{Text: "Looking."},
		&providers.ToolCall{Call: &agentdv1.ToolCall{Id: "call_1_1", Name: "echo", Arguments: `{"text":"hi"}`}},
		&providers.ToolCall{Call: &agentdv1.ToolCall{Id: "mine", Name: "add", Arguments: "{}"}},
		&providers.Usage{Usage: &agentdv1.Usage{InputTokens: 1, OutputTokens: 2}},
		// X-O2: the response's model and finish reason, for the chat span:
		// a turn that calls tools stops for them.
		&providers.Stop{Reason: agentdv1.StopReason_STOP_REASON_TOOL_USE, Response: providers.Response{Model: "m", FinishReason: "tool_use"}},
	}
	if diff := cmp.Diff(want, first, protocmp.Transform()); diff != "" {
		t.Errorf("turn 1 (-want +got):\n%s", diff)
	}

	// The second turn: one assistant message after the last user message;
	// {{tool_outputs}} joins the latest tool results.
	second, err := collect(t, p, &providers.Request{
		Messages: []*agentdv1.Message{user("go"), assistant(), toolResults("a", "b")},
		Options:  twoTurns,
	})
	if err != nil {
		t.Fatal(err)
	}
	want = []providers.Event{
		&providers.TextDelta{Text: "Got:"}, &providers.TextDelta{Text: " a"}, &providers.TextDelta{Text: "\nb"},
		&providers.Usage{Usage: &agentdv1.Usage{InputTokens: 7, OutputTokens: 3}},
		&providers.Stop{Reason: agentdv1.StopReason_STOP_REASON_END_TURN, Response: providers.Response{FinishReason: "end_turn"}},
	}
	if diff := cmp.Diff(want, second, protocmp.Transform()); diff != "" {
		t.Errorf("turn 2 (-want +got):\n%s", diff)
	}

	// A new user message restarts the script.
	again, err := collect(t, p, &providers.Request{
		Messages: []*agentdv1.Message{user("go"), assistant(), toolResults("a"), assistant(), user("again")},
		Options:  twoTurns,
	})
	if err != nil {
		t.Fatal(err)
	}
	if got := again[0].(*providers.TextDelta).Text; got != "Looking." {
		t.Errorf("after a new user message the script starts with %q", got)
	}

	// Past the end of the script.
	_, err = collect(t, p, &providers.Request{
		Messages: []*agentdv1.Message{user("go"), assistant(), toolResults("a"), assistant()},
		Options:  twoTurns,
	})
	if fault.KindOf(err) != fault.FailedPrecondition || !strings.Contains(err.Error(), "asks for turn 3") {
		t.Errorf("exhausted script: %v", err)
	}
}

// TestScriptRepeat: a turn with repeat plays that many turns in a row,
// each call named by the turn it is played as, and the script's length
// counts them.
func TestScriptRepeat(t *testing.T) {
	t.Parallel()
	opts := map[string]any{"script": map[string]any{"turns": []any{
		map[string]any{"repeat": 3, "tool_calls": []any{map[string]any{"name": "echo", "arguments": map[string]any{"text": "again"}}}},
		map[string]any{"text": "done"},
	}}}
	// conversation is the request after played turns.
	conversation := func(played int) []*agentdv1.Message {
		msgs := []*agentdv1.Message{user("go")}
		for range played {
			msgs = append(msgs, assistant(), toolResults("again"))
		}
		return msgs
	}
	for _, tt := range []struct {
		played int
		want   providers.Event
	}{
		{0, &providers.ToolCall{Call: &agentdv1.ToolCall{Id: "call_1_1", Name: "echo", Arguments: `{"text":"again"}`}}},
		{2, &providers.ToolCall{Call: &agentdv1.ToolCall{Id: "call_3_1", Name: "echo", Arguments: `{"text":"again"}`}}},
		{3, &providers.TextDelta{Text: "done"}},
	} {
		events, err := collect(t, Script(), &providers.Request{Messages: conversation(tt.played), Options: opts})
		if err != nil {
			t.Fatal(err)
		}
		if diff := cmp.Diff(tt.want, events[0], protocmp.Transform()); diff != "" {
			t.Errorf("after %d turns (-want +got):\n%s", tt.played, diff)
		}
	}
	_, err := collect(t, Script(), &providers.Request{Messages: conversation(4), Options: opts})
	if fault.KindOf(err) != fault.FailedPrecondition || !strings.Contains(err.Error(), "has 4 turns and the conversation asks for turn 5") {
		t.Errorf("past the repeated script's end: %v", err)
	}
}

func TestScriptErrorTurn(t *testing.T) {
	t.Parallel()
	opts := map[string]any{"script": map[string]any{"turns": []any{map[string]any{"error": map[string]any{"kind": "unavailable", "message": "overloaded"}}}}}
	_, err := collect(t, Script(), &providers.Request{Messages: []*agentdv1.Message{user("x")}, Options: opts})
	if fault.KindOf(err) != fault.Unavailable || !strings.Contains(err.Error(), "overloaded") {
		t.Errorf("error turn: %v", err)
	}
}

func TestValidateOptions(t *testing.T) {
	t.Parallel()
	v := Script().(providers.OptionsValidator)
	tests := []struct {
		name    string
		options map[string]any
		want    []string // fields
	}{
		{name: "valid", options: twoTurns},
		{name: "missing", options: nil, want: []string{"script"}},
		{name: "unknown field", options: map[string]any{"script": map[string]any{"turns": []any{map[string]any{"txt": "x"}}}}, want: []string{"script"}},
		{name: "no turns", options: map[string]any{"script": map[string]any{"turns": []any{}}}, want: []string{"script.turns"}},
		{name: "bad turns", options: map[string]any{"script": map[string]any{"turns": []any{
			map[string]any{},
			map[string]any{"text": "x", "error": map[string]any{"kind": "unavailable"}},
			map[string]any{"error": map[string]any{"kind": "bogus"}},
			map[string]any{"tool_calls": []any{map[string]any{"arguments": []any{1}}}},
			map[string]any{"text": "x", "repeat": -1},
			map[string]any{"text": "x", "structured": map[string]any{"a": 1}},
			map[string]any{"structured": map[string]any{"a": 1}, "error": map[string]any{"kind": "internal"}},
		}}}, want: []string{"script.turns[0]", "script.turns[1]", "script.turns[2].error.kind", "script.turns[3].tool_calls[0].name", "script.turns[3].tool_calls[0].arguments", "script.turns[4].repeat", "script.turns[5]", "script.turns[6]"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			var got []string
			for _, p := range v.ValidateOptions(tt.options) {
				got = append(got, p.Field)
			}
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("problems (-want +got):\n%s", diff)
			}
		})
	}
}

func TestMockAnswersWithoutTools(t *testing.T) {
	t.Parallel()
	events, err := collect(t, Mock(), &providers.Request{
		Messages: []*agentdv1.Message{user("Hello there")},
		Tools:    []*agentdv1.FunctionTool{{Name: "search"}},
	})
	if err != nil {
		t.Fatal(err)
	}
	var text strings.Builder
	for _, ev := range events {
		switch ev := ev.(type) {
		case *providers.TextDelta:
			text.WriteString(ev.Text)
		case *providers.ToolCall:
			t.Errorf("mock called a tool: %v", ev.Call)
		}
	}
	if got, want := text.String(), "Mock response to: Hello there"; got != want {
		t.Errorf("mock text = %q, want %q", got, want)
	}
}

func TestWordsRoundTrip(t *testing.T) {
	t.Parallel()
	for _, s := range []string{"", "one", " lead", "two words", "tabs\tand\nnewlines  ", "héllo wörld ünïcode", "a\u00a0b c"} {
		if got := strings.Join(words(s), ""); got != s {
			t.Errorf("words(%q) joins to %q", s, got)
		}
	}
}

// TestScriptSampleAndMaxTokens: a sampling request (X-M5) plays the
// script's sample turn, whatever the turn, and a cap cuts the text at
// four bytes a token and stops with MAX_TOKENS.
func TestScriptSampleAndMaxTokens(t *testing.T) {
	t.Parallel()
	withSample := map[string]any{"script": map[string]any{
		"turns":  []any{map[string]any{"tool_calls": []any{map[string]any{"name": "echo"}}}},
		"sample": map[string]any{"text": "You said: {{prompt}}"},
	}}
	tests := []struct {
		name      string
		options   map[string]any
		sample    bool
		maxTokens int
		wantText  string
		wantStop  agentdv1.StopReason
		wantKind  fault.Kind
	}{
		{name: "sample", options: withSample, sample: true, wantText: "You said: ping", wantStop: agentdv1.StopReason_STOP_REASON_END_TURN},
		{name: "sample capped", options: withSample, sample: true, maxTokens: 2, wantText: "You said", wantStop: agentdv1.StopReason_STOP_REASON_MAX_TOKENS},
		{name: "turn capped", options: twoTurns, maxTokens: 1, wantText: "Look", wantStop: agentdv1.StopReason_STOP_REASON_MAX_TOKENS},
		{name: "no sample turn", options: twoTurns, sample: true, wantKind: fault.FailedPrecondition},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			events, err := collect(t, Script(), &providers.Request{Messages: []*agentdv1.Message{user("ping")}, Options: tt.options, Sample: tt.sample, MaxTokens: tt.maxTokens})
			if tt.wantKind != 0 {
				if fault.KindOf(err) != tt.wantKind {
					t.Fatalf("err = %v, want kind %v", err, tt.wantKind)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			var text strings.Builder
			var stop agentdv1.StopReason
			for _, ev := range events {
				switch ev := ev.(type) {
				case *providers.TextDelta:
					text.WriteString(ev.Text)
				case *providers.Stop:
					stop = ev.Reason
				}
			}
			if text.String() != tt.wantText || stop != tt.wantStop {
				t.Errorf("got %q, %v; want %q, %v", text.String(), stop, tt.wantText, tt.wantStop)
			}
		})
	}
}

// textOf joins the text a turn streamed.
func textOf(events []providers.Event) string {
	var b strings.Builder
	for _, ev := range events {
		if d, ok := ev.(*providers.TextDelta); ok {
			b.WriteString(d.Text)
		}
	}
	return b.String()
}

// A structured turn is played as the turn's text, its JSON compact, after
// a turn that called a tool; it may call tools of its own too.
func TestScriptStructuredTurn(t *testing.T) {
	t.Parallel()
	opts := map[string]any{"script": map[string]any{"turns": []any{
		map[string]any{"tool_calls": []any{map[string]any{"name": "lookup"}}},
		map[string]any{"structured": map[string]any{"city": "Paris", "tags": []any{"a b", 2.5, nil}}},
		map[string]any{"structured": []any{1}, "tool_calls": []any{map[string]any{"name": "lookup"}}},
	}}}
	output := &providers.Output{Name: "answer", Schema: json.RawMessage(`{"type":"object"}`)}
	events, err := collect(t, Script(), &providers.Request{
		Model:    "m",
		Messages: []*agentdv1.Message{user("go"), assistant(), toolResults("found")},
		Options:  opts,
		Output:   output,
	})
	if err != nil {
		t.Fatal(err)
	}
	if got, want := textOf(events), `{"city":"Paris","tags":["a b",2.5,null]}`; got != want {
		t.Errorf("text = %q, want %q", got, want)
	}
	stop := events[len(events)-1]
	want := &providers.Stop{Reason: agentdv1.StopReason_STOP_REASON_END_TURN, Response: providers.Response{Model: "m", FinishReason: "end_turn"}}
	if diff := cmp.Diff(want, stop, protocmp.Transform()); diff != "" {
		t.Errorf("stop (-want +got):\n%s", diff)
	}

	third, err := collect(t, Script(), &providers.Request{
		Messages: []*agentdv1.Message{user("go"), assistant(), toolResults("found"), assistant(), toolResults("again")},
		Options:  opts,
	})
	if err != nil {
		t.Fatal(err)
	}
	if got := textOf(third); got != "[1]" {
		t.Errorf("third turn's text = %q, want [1]", got)
	}
	if _, ok := third[1].(*providers.ToolCall); !ok {
		t.Errorf("third turn: %T after the text, want its tool call", third[1])
	}
}

func TestInProcessProvidersTakeOutput(t *testing.T) {
	t.Parallel()
	for _, p := range []providers.Provider{Mock(), Script()} {
		output := p.Capabilities().Output
		for _, withTools := range []bool{false, true} {
			if output == nil || !output("any-model", withTools) {
				t.Errorf("%s: Output(tools %v) is not true", p.Name(), withTools)
			}
		}
	}
}

// Asked for structured output, the mock answers with the schema's
// minimal instance instead of its usual text.
func TestMockStructuredAnswer(t *testing.T) {
	t.Parallel()
	schema := `{"type":"object","properties":{"summary":{"type":"string"},"score":{"type":"number"},"note":{"type":"string"}},"required":["summary","score"]}`
	events, err := collect(t, Mock(), &providers.Request{
		Messages: []*agentdv1.Message{user("Hello there")},
		Output:   &providers.Output{Name: "review", Schema: json.RawMessage(schema)},
	})
	if err != nil {
		t.Fatal(err)
	}
	if got, want := textOf(events), `{"score":0,"summary":""}`; got != want {
		t.Errorf("text = %q, want %q", got, want)
	}

	_, err = collect(t, Mock(), &providers.Request{Output: &providers.Output{Schema: json.RawMessage(`{"type":`)}})
	if fault.KindOf(err) != fault.Invalid {
		t.Errorf("a schema that is not JSON: %v, want Invalid", err)
	}
}

func TestMinimalInstance(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name, schema, want string
	}{
		{"empty object", `{"type":"object"}`, `{}`},
		{"only required properties", `{"type":"object","properties":{"a":{"type":"string"},"b":{"type":"integer"}},"required":["b"]}`, `{"b":0}`},
		{"every type", `{"type":"object","properties":{
			"s":{"type":"string"},"n":{"type":"number"},"i":{"type":"integer"},"b":{"type":"boolean"},
			"a":{"type":"array","items":{"type":"string"}},"o":{"type":"object","properties":{"x":{"type":"boolean"}},"required":["x"]},
			"z":{"type":"null"}},
			"required":["s","n","i","b","a","o","z"]}`,
			`{"a":[],"b":false,"i":0,"n":0,"o":{"x":false},"s":"","z":null}`},
		{"enum: its first value", `{"enum":["red","green"]}`, `"red"`},
		{"const", `{"type":"string","const":"fixed"}`, `"fixed"`},
		{"const over enum", `{"const":3,"enum":[1,2,3]}`, `3`},
		{"a list of types: the first", `{"type":["integer","null"]}`, `0`},
		{"properties imply an object", `{"properties":{"a":{"type":"boolean"}},"required":["a"]}`, `{"a":false}`},
		{"items imply an array", `{"items":{"type":"string"}}`, `[]`},
		{"minItems", `{"type":"array","items":{"enum":["x"]},"minItems":2}`, `["x","x"]`},
		{"anyOf: the first", `{"anyOf":[{"type":"string"},{"type":"null"}]}`, `""`},
		{"oneOf: the first", `{"oneOf":[{"type":"boolean"},{"type":"string"}]}`, `false`},
		{"allOf: the first", `{"allOf":[{"$ref":"#/$defs/p"}],"$defs":{"p":{"type":"integer"}}}`, `0`},
		{"$defs reference", `{"type":"object","properties":{"p":{"$ref":"#/$defs/point"}},"required":["p"],
			"$defs":{"point":{"type":"object","properties":{"x":{"type":"number"},"y":{"type":"number"}},"required":["x","y"]}}}`,
			`{"p":{"x":0,"y":0}}`},
		{"definitions reference, escaped", `{"$ref":"#/definitions/a~1b","definitions":{"a/b":{"enum":[7]}}}`, `7`},
		{"a reference to nothing", `{"$ref":"#/$defs/missing"}`, `null`},
		{"an outside reference", `{"$ref":"https://example.com/s.json"}`, `null`},
		{"a required cycle ends in null", `{"type":"object","properties":{"next":{"$ref":"#"}},"required":["next"]}`,
			// Two schemas a level: the property's, and the root it refers to.
			strings.Repeat(`{"next":`, 16) + `null` + strings.Repeat(`}`, 16)},
		{"a required property without a schema", `{"type":"object","required":["x"]}`, `{"x":null}`},
		{"no type", `{}`, `null`},
		{"a boolean schema", `true`, `null`},
		{"a reference to itself", `{"$ref":"#"}`, `null`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			got, err := minimalInstance(json.RawMessage(tt.schema))
			if err != nil {
				t.Fatal(err)
			}
			if got != tt.want {
				t.Errorf("minimalInstance =\n%s\nwant\n%s", got, tt.want)
			}
		})
	}
}
