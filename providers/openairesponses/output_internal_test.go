package openairesponses

import (
	"encoding/json"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/agentd/agentd/providers"
)

// The format goes into a copy of the options' text settings: the options,
// which every turn of a generation shares, stay as they were.
func TestOutputLeavesOptions(t *testing.T) {
	t.Parallel()
	options := func() map[string]any {
		return map[string]any{"text": map[string]any{"verbosity": "low", "format": map[string]any{"type": "text"}}}
	}
	req := &providers.Request{Model: "gpt-5-mini", Options: options(),
		Output: &providers.Output{Name: "answer", Schema: json.RawMessage(`{"type":"object"}`)}}
	body, err := buildBody(req)
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(options(), req.Options); diff != "" {
		t.Errorf("the options changed (-before +after):\n%s", diff)
	}
	want := map[string]any{"verbosity": "low", "format": map[string]any{"type": "json_schema", "name": "answer", "schema": json.RawMessage(`{"type":"object"}`), "strict": false}}
	if diff := cmp.Diff(want, body["text"]); diff != "" {
		t.Errorf("text (-want +got):\n%s", diff)
	}
}
