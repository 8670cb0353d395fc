package providers

import (
	"bytes"
	"encoding/json"
	"math"
	"testing"

	"google.golang.org/protobuf/types/known/structpb"

	agentdv1 "github.com/agentd/agentd/gen/go/agentd/v1"
)

// TestToolParametersJSON: a request body that splices in the
// parameters encoded once is byte for byte the body that encodes each
// schema's map, whatever the schema holds.
func TestToolParametersJSON(t *testing.T) {
	t.Parallel()
	schema := func(m map[string]any) *structpb.Struct {
		s, err := structpb.NewStruct(m)
		if err != nil {
			t.Fatal(err)
		}
		return s
	}
	tools := []*agentdv1.FunctionTool{
		{Name: "none"},
		{Name: "empty", Parameters: &structpb.Struct{}},
		{Name: "echo", Parameters: schema(map[string]any{
			"type": "object", "required": []any{"message"},
			"properties":           map[string]any{"message": map[string]any{"type": "string", "description": "<b>Tom & Jerry</b> \u2028 é \"q\""}},
			"additionalProperties": false, "$schema": "https://json-schema.org/draft/2020-12/schema",
		})},
		{Name: "numbers", Parameters: schema(map[string]any{"minimum": 1e21, "maximum": 0.000001, "n": 12345678901234567, "nested": []any{nil, true, []any{}}})},
		{Name: "nan", Parameters: &structpb.Struct{Fields: map[string]*structpb.Value{"x": structpb.NewNumberValue(math.Inf(1)), "y": structpb.NewNumberValue(math.NaN())}}},
	}
	body := func(req *Request) []byte {
		var tools []any
		for i, tool := range req.Tools {
			tools = append(tools, map[string]any{"name": tool.GetName(), "parameters": req.Parameters(i)})
		}
		data, err := json.Marshal(map[string]any{"tools": tools})
		if err != nil {
			t.Fatal(err)
		}
		return data
	}
	encoded := &Request{Tools: tools}
	for _, tool := range tools {
		encoded.ToolParameters = append(encoded.ToolParameters, ToolParametersJSON(tool))
	}
	if got, want := body(encoded), body(&Request{Tools: tools}); !bytes.Equal(got, want) {
		t.Errorf("with the parameters encoded once:\n%s\nwith the maps:\n%s", got, want)
	}
	if got := string(encoded.ToolParameters[0]); got != `{"properties":{},"type":"object"}` {
		t.Errorf("no schema encodes to %s", got)
	}

}
