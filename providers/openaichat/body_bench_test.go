package openaichat

import (
	"encoding/json"
	"fmt"
	"testing"

	"google.golang.org/protobuf/types/known/structpb"

	agentdv1 "github.com/agentd/agentd/gen/go/agentd/v1"
	"github.com/agentd/agentd/providers"
	"github.com/agentd/agentd/providers/internal/httpc"
)

// BenchmarkBody is one turn's request body as httpc encodes it, offering
// twelve tools of a few properties each (about server-everything's):
// "maps" converts and encodes each schema on the turn, as the adapter does
// when used alone; "encoded" splices the parameters the tool loop encoded
// once for the generation (providers.Request.ToolParameters). Both encode
// with httpc.Marshal, as httpc.Client.Do does; "encoded/json.Marshal" is
// the encoded body through json.Marshal, which checks and compacts each
// spliced schema again.
func BenchmarkBody(b *testing.B) {
	var tools []*agentdv1.FunctionTool
	for i := range 12 {
		s, err := structpb.NewStruct(map[string]any{
			"type": "object", "$schema": "http://json-schema.org/draft-07/schema#", "additionalProperties": false,
			"required": []any{"message"},
			"properties": map[string]any{
				"message": map[string]any{"type": "string", "description": "Message to echo"},
				"count":   map[string]any{"type": "number", "description": "How many times", "default": 1, "minimum": 0},
				"options": map[string]any{"type": "object", "properties": map[string]any{"flag": map[string]any{"type": "boolean"}}},
			},
		})
		if err != nil {
			b.Fatal(err)
		}
		tools = append(tools, &agentdv1.FunctionTool{Name: fmt.Sprintf("tool_%d", i), Description: "Echoes back the input", Parameters: s})
	}
	msgs := []*agentdv1.Message{{Role: agentdv1.Role_ROLE_USER, Parts: []*agentdv1.Part{{Kind: &agentdv1.Part_Text{Text: "Call echo three times."}}}}}
	p := OpenAI(providers.Settings{APIKey: "k"}).(*provider)
	encoded := make([]json.RawMessage, len(tools))
	for i, t := range tools {
		encoded[i] = providers.ToolParametersJSON(t)
	}
	for _, bc := range []struct {
		name    string
		params  []json.RawMessage
		marshal func(any) ([]byte, error)
	}{{"maps", nil, httpc.Marshal}, {"encoded", encoded, httpc.Marshal}, {"encoded/json.Marshal", encoded, json.Marshal}} {
		b.Run(bc.name, func(b *testing.B) {
			req := &providers.Request{Model: "m", Instructions: "be brief", Messages: msgs, Tools: tools, ToolParameters: bc.params}
			b.ReportAllocs()
			for b.Loop() {
				body, err := p.body(req)
				if err != nil {
					b.Fatal(err)
				}
				if _, err := bc.marshal(body); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
