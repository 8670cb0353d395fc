package fakemodel_test

import (
	"strings"
	"testing"

	"google.golang.org/protobuf/types/known/structpb"

	agentdv1 "github.com/agentd/agentd/gen/go/agentd/v1"
	"github.com/agentd/agentd/internal/fakemodel"
	"github.com/agentd/agentd/providers"
	"github.com/agentd/agentd/providers/anthropic"
	"github.com/agentd/agentd/providers/ollama"
	"github.com/agentd/agentd/providers/openaichat"
)

// The fake speaks each wire format well enough for agentd's own adapters:
// offered tools and a user's message, it calls the listing tool with
// arguments its schema requires; given the tool's result, it answers in
// text that quotes it.
func TestAdaptersUnderstandTheFake(t *testing.T) {
	t.Parallel()
	fake := fakemodel.Start()
	t.Cleanup(fake.Close)
	for _, tc := range []struct {
		name string
		p    providers.Provider
	}{
		{"openai", openaichat.OpenAI(providers.Settings{APIKey: "k", BaseURL: fake.Origin() + "/v1"})},
		{"anthropic", anthropic.New(providers.Settings{APIKey: "k", BaseURL: fake.Origin()})},
		{"ollama", ollama.New(providers.Settings{BaseURL: fake.Origin()})},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			params, err := structpb.NewStruct(map[string]any{"type": "object", "properties": map[string]any{"path": map[string]any{"type": "string"}}, "required": []any{"path"}})
			if err != nil {
				t.Fatal(err)
			}
			tools := []*agentdv1.FunctionTool{{Name: "read_file", Parameters: params}, {Name: "list_directory", Parameters: params}}
			user := &agentdv1.Message{Role: agentdv1.Role_ROLE_USER, Parts: []*agentdv1.Part{{Kind: &agentdv1.Part_Text{Text: "What is here?"}}}}
			calls, _ := turn(t, tc.p, &providers.Request{Model: "m", Messages: []*agentdv1.Message{user}, Tools: tools})
			if len(calls) != 1 || calls[0].GetName() != "list_directory" || calls[0].GetArguments() != `{"path":"."}` {
				t.Fatalf("calls %v, want list_directory with path .", calls)
			}
			assistant := &agentdv1.Message{Role: agentdv1.Role_ROLE_ASSISTANT, Parts: []*agentdv1.Part{{Kind: &agentdv1.Part_ToolCall{ToolCall: calls[0]}}}}
			result := &agentdv1.Message{Role: agentdv1.Role_ROLE_TOOL, Parts: []*agentdv1.Part{{Kind: &agentdv1.Part_ToolResult{ToolResult: &agentdv1.ToolResult{
				ToolCallId: calls[0].GetId(), Name: "list_directory", Output: "[FILE] README.md"}}}}}
			calls, text := turn(t, tc.p, &providers.Request{Model: "m", Messages: []*agentdv1.Message{user, assistant, result}, Tools: tools})
			if len(calls) != 0 || !strings.Contains(text, "README.md") {
				t.Errorf("after the result: calls %v, text %q; want text quoting it", calls, text)
			}
		})
	}
}

// turn runs one model turn and returns its tool calls and text.
func turn(t *testing.T, p providers.Provider, req *providers.Request) ([]*agentdv1.ToolCall, string) {
	t.Helper()
	var calls []*agentdv1.ToolCall
	var text strings.Builder
	for ev, err := range p.Stream(t.Context(), req) {
		if err != nil {
			t.Fatal(err)
		}
		switch e := ev.(type) {
		case *providers.ToolCall:
			calls = append(calls, e.Call)
		case *providers.TextDelta:
			text.WriteString(e.Text)
		}
	}
	return calls, text.String()
}
