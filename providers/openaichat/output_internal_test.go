package openaichat

import (
	"encoding/json"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/agentd/agentd/internal/fault"
	"github.com/agentd/agentd/providers"
)

func weatherOutput(description, schema string) *providers.Output {
	return &providers.Output{Name: "weather_report", Description: description, Schema: json.RawMessage(schema), Strict: true}
}

// OpenRouter's require_parameters goes into a copy of the options' routing
// object, and the response format over theirs: the options, which every
// turn of a generation shares, stay as they were.
func TestOutputLeavesOptions(t *testing.T) {
	t.Parallel()
	options := func() map[string]any {
		return map[string]any{
			"provider":        map[string]any{"order": []any{"openai"}, "require_parameters": false},
			"response_format": map[string]any{"type": "json_object"},
		}
	}
	req := &providers.Request{Model: "openai/gpt-4o-mini", Options: options(), Output: weatherOutput("", `{"type":"object"}`)}
	p := &provider{d: Dialect{Name: "openrouter", RequireParameters: true}}
	body, err := p.body(req)
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(options(), req.Options); diff != "" {
		t.Errorf("the options changed (-before +after):\n%s", diff)
	}
	if got, want := body["provider"], map[string]any{"order": []any{"openai"}, "require_parameters": true}; !cmp.Equal(got, want) {
		t.Errorf("provider %v, want %v", got, want)
	}
}

// In JSON mode the system message says what the answer must be, after the
// instructions when there are some; a schema that is not JSON is the
// request's fault.
func TestJSONModeSystem(t *testing.T) {
	t.Parallel()
	const sentence = "Answer with one JSON object, and nothing else, that fits the JSON Schema below.\n"
	for _, tc := range []struct {
		name         string
		instructions string
		output       *providers.Output
		want         string // "": the request is invalid
	}{
		{"no output", "Be brief.", nil, "Be brief."},
		{"no instructions", "", weatherOutput("", ` { "type": "object" } `), sentence + `{"type":"object"}`},
		{"description", "", weatherOutput("The weather.", `{"type":"object"}`), sentence + "The weather.\n" + `{"type":"object"}`},
		{"instructions", "Be brief.", weatherOutput("", `{"type":"object"}`), "Be brief.\n\n" + sentence + `{"type":"object"}`},
		{"not JSON", "", weatherOutput("", `{"type":`), ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			p := &provider{d: Dialect{Name: "deepseek", JSONMode: true}}
			got, err := p.system(&providers.Request{Instructions: tc.instructions, Output: tc.output})
			if tc.want == "" {
				if fault.KindOf(err) != fault.Invalid {
					t.Errorf("error %v, want an invalid request", err)
				}
				return
			}
			if err != nil || got != tc.want {
				t.Errorf("system %q, %v; want %q", got, err, tc.want)
			}
		})
	}
}
