package httpc

import (
	"bytes"
	"encoding/json"
	"testing"

	"google.golang.org/protobuf/types/known/structpb"

	agentdv1 "github.com/agentd/agentd/gen/go/agentd/v1"
	"github.com/agentd/agentd/providers"
)

// TestFunctionToolsBytes (issue 15): the structs FunctionTools renders
// encode to the bytes of the maps it rendered before, with and without a
// description, with the parameters encoded once or not, by json.Marshal
// and by Marshal.
func TestFunctionToolsBytes(t *testing.T) {
	t.Parallel()
	schema, err := structpb.NewStruct(map[string]any{"type": "object", "properties": map[string]any{"q": map[string]any{"type": "string", "description": "<&>"}}})
	if err != nil {
		t.Fatal(err)
	}
	tools := []*agentdv1.FunctionTool{{Name: "a", Description: "says <b>&</b>", Parameters: schema}, {Name: "b"}}
	var maps []any
	for _, tool := range tools {
		params := map[string]any{"type": "object", "properties": map[string]any{}}
		if tool.GetParameters() != nil {
			params = tool.GetParameters().AsMap()
		}
		fn := map[string]any{"name": tool.GetName(), "parameters": params}
		if tool.GetDescription() != "" {
			fn["description"] = tool.GetDescription()
		}
		maps = append(maps, map[string]any{"type": "function", "function": fn})
	}
	want, err := json.Marshal(map[string]any{"tools": maps})
	if err != nil {
		t.Fatal(err)
	}
	encoded := []json.RawMessage{providers.ToolParametersJSON(tools[0]), providers.ToolParametersJSON(tools[1])}
	for _, req := range []*providers.Request{{Tools: tools}, {Tools: tools, ToolParameters: encoded}} {
		for name, marshal := range map[string]func(any) ([]byte, error){"json.Marshal": json.Marshal, "Marshal": Marshal} {
			got, err := marshal(map[string]any{"tools": FunctionTools(req)})
			if err != nil {
				t.Fatal(err)
			}
			if !bytes.Equal(got, want) {
				t.Errorf("FunctionTools encodes with %s to\n%s\nwant\n%s", name, got, want)
			}
		}
	}
}
