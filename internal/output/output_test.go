package output_test

import (
	"testing"

	"github.com/google/go-cmp/cmp"
	"google.golang.org/protobuf/types/known/structpb"

	agentdv1 "github.com/agentd/agentd/gen/go/agentd/v1"
	"github.com/agentd/agentd/internal/output"
)

func schema(t *testing.T, m map[string]any) *structpb.Struct {
	t.Helper()
	s, err := structpb.NewStruct(m)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

var ticket = map[string]any{
	"type":                 "object",
	"properties":           map[string]any{"title": map[string]any{"type": "string"}, "priority": map[string]any{"enum": []any{"low", "high"}}},
	"required":             []any{"title", "priority"},
	"additionalProperties": false,
}

// TestParseRefuses: a schema is checked before anything connects, each
// problem at its path: not an object's, not a schema, a strict one past a
// strict provider's restrictions; a bad name or repair count too.
func TestParseRefuses(t *testing.T) {
	t.Parallel()
	loose := map[string]any{"type": "object", "properties": map[string]any{"a": map[string]any{"type": "object", "properties": map[string]any{"b": map[string]any{"type": "string"}}}}}
	tests := []struct {
		name   string
		out    *agentdv1.Output
		strict bool
		want   []string
	}{
		{"no schema", &agentdv1.Output{}, false, []string{"output.schema"}},
		{"an array's", &agentdv1.Output{Schema: schema(t, map[string]any{"type": "array"})}, false, []string{"output.schema.type"}},
		{"not a schema", &agentdv1.Output{Schema: schema(t, map[string]any{"type": "object", "properties": map[string]any{"a": map[string]any{"type": 5.0}}})}, false, []string{"output.schema.properties.a.type"}},
		{"a bad name and repair count", &agentdv1.Output{Name: "a b", RepairTurns: new(int32(9)), Schema: schema(t, ticket)}, false, []string{"output.name", "output.repair_turns"}},
		{"strict, loose, for a strict provider", &agentdv1.Output{Strict: true, Schema: schema(t, loose)}, true,
			[]string{"output.schema.additionalProperties", "output.schema.required", "output.schema.properties.a.additionalProperties", "output.schema.properties.a.required"}},
		{"strict, loose, for another provider", &agentdv1.Output{Strict: true, Schema: schema(t, loose)}, false, nil},
		{"strict and closed", &agentdv1.Output{Strict: true, Schema: schema(t, ticket)}, true, nil},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			_, bad := output.Parse(tc.out, "output", tc.strict)
			var got []string
			for _, v := range bad {
				got = append(got, v.Field)
			}
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("problems (-want +got):\n%s", diff)
			}
		})
	}
}

// TestCheck: an answer is JSON the schema accepts (a Markdown fence
// around it is let go), else each problem is named at its place.
func TestCheck(t *testing.T) {
	t.Parallel()
	spec, bad := output.Parse(&agentdv1.Output{Schema: schema(t, ticket)}, "output", false)
	if bad != nil {
		t.Fatal(bad)
	}
	tests := []struct {
		answer string
		errs   int
	}{
		{`{"title": "Printer", "priority": "high"}`, 0},
		{"```json\n{\"title\": \"Printer\", \"priority\": \"low\"}\n```", 0},
		{`{"title": "Printer"}`, 1},
		{`{"title": 5, "priority": "urgent", "x": 1}`, 3},
		{`The answer is {"title": "x"}`, 1},
		{`{"title": "a", "priority": "low"} {}`, 1},
	}
	for _, tc := range tests {
		v, errs := spec.Check(tc.answer)
		if len(errs) != tc.errs || (tc.errs == 0) != (v != nil) {
			t.Errorf("Check(%q) = %v, %q; want %d errors", tc.answer, v, errs, tc.errs)
		}
	}
	if v, _ := spec.Check(`{"title": "Printer", "priority": "high"}`); v.GetStructValue().GetFields()["title"].GetStringValue() != "Printer" {
		t.Errorf("the value = %v", v)
	}
}
