package httpc

import (
	"bytes"
	"encoding/json"
	"math"
	"testing"

	agentdv1 "github.com/agentd/agentd/gen/go/agentd/v1"
	"github.com/agentd/agentd/providers"
)

// TestMarshal: Marshal encodes every body to json.Marshal's
// bytes, and fails where json.Marshal fails: the maps and lists it walks
// itself (nil ones too), the keys it sorts, the strings it leaves to
// encoding/json (HTML escaped, invalid UTF-8 replaced), encoded tool
// schemas (by value and by pointer), the adapters' tool structs, and the
// other values options bring.
func TestMarshal(t *testing.T) {
	t.Parallel()
	schema := providers.ToolParametersJSON(&agentdv1.FunctionTool{Name: "t"})
	for _, tc := range []struct {
		name string
		body any
		fail bool
	}{
		{name: "nil", body: nil},
		{name: "empty map", body: map[string]any{}},
		{name: "nil map and list", body: map[string]any{"a": map[string]any(nil), "b": []any(nil), "c": []any{}}},
		{name: "sorted keys", body: map[string]any{"z": 1, "a": 2, "ä": 3, "A": 4, "_": 5, "": 6}},
		{name: "escaped keys and strings", body: map[string]any{"<k&>": "<script>&\u2028\u2029\"\\\n\x01", "bad": "\xff\xfeok"}},
		{name: "control characters", body: map[string]any{"s": "\b\f\n\r\t\x00\x1f\x7f é \u2027\u2028\u2029\u202a 😀 \xed\xa0\x80 \xc3"}},
		{name: "booleans and integers", body: []any{true, false, 0, -1, int64(math.MaxInt64), int64(math.MinInt64), uint8(3), int32(-4)}},
		{name: "numbers", body: map[string]any{"f": 0.1, "i": 7, "big": 1e21, "small": 1e-7, "n": json.Number("12.50"), "neg": math.Copysign(0, -1)}},
		{name: "nested", body: map[string]any{"messages": []any{
			map[string]any{"role": "user", "content": "hi"},
			map[string]any{"role": "assistant", "content": nil, "tool_calls": []any{map[string]any{"id": "c", "function": map[string]any{"arguments": `{"x":1}`}}}},
		}}},
		{name: "encoded schema", body: map[string]any{"tools": []any{map[string]any{"input_schema": providers.CompactJSON(schema), "name": "t"}}}},
		{name: "raw message", body: map[string]any{"r": json.RawMessage(" { \"b\" : [1, 2] } ")}},
		{name: "function tool", body: map[string]any{"tools": []any{
			functionTool{Function: function{Name: "a<b", Description: "d&", Parameters: providers.CompactJSON(schema)}, Type: "function"},
			functionTool{Function: function{Name: "b", Parameters: map[string]any{"type": "object"}}, Type: "function"},
		}}},
		{name: "function tools by pointer, schemas by pointer", body: map[string]any{"tools": []any{
			&functionTool{Function: function{Name: "a", Parameters: (*providers.CompactJSON)(&schema)}, Type: "function"},
		}}},
		{name: "a nil encoded schema pointer", body: map[string]any{"s": (*providers.CompactJSON)(nil)}},
		{name: "option values", body: map[string]any{"stop": []string{"a", "<b>"}, "meta": map[string]string{"y": "1", "x": "2"}, "ok": true, "list": []map[string]any{{"k": 1}}}},
		{name: "unsupported value", body: map[string]any{"t": math.NaN()}, fail: true},
		{name: "unsupported value in a list", body: []any{1, math.Inf(1)}, fail: true},
		{name: "unsupported type", body: map[string]any{"c": make(chan int)}, fail: true},
		{name: "empty encoded schema", body: map[string]any{"s": providers.CompactJSON(nil)}, fail: true},
		{name: "empty encoded schema by pointer", body: map[string]any{"s": new(providers.CompactJSON)}, fail: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			want, wantErr := json.Marshal(tc.body)
			got, err := Marshal(tc.body)
			if tc.fail {
				if err == nil || wantErr == nil {
					t.Fatalf("Marshal: %v, json.Marshal: %v; want both to fail", err, wantErr)
				}
				return
			}
			if err != nil || wantErr != nil {
				t.Fatalf("Marshal: %v, json.Marshal: %v", err, wantErr)
			}
			if !bytes.Equal(got, want) {
				t.Errorf("Marshal:\n%s\njson.Marshal:\n%s", got, want)
			}
		})
	}
}

// FuzzMarshalString: Marshal writes any string as json.Marshal does.
func FuzzMarshalString(f *testing.F) {
	for _, s := range []string{"", "plain", "<a href=\"x\">&amp;</a>", "\x00\x1f\x7f\b\f\n\r\t\\", "\u2028\u2029", "\xff\xfe", "é😀", "\xed\xa0\x80"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		want, err := json.Marshal(s)
		if err != nil {
			t.Fatal(err)
		}
		got, err := Marshal(s)
		if err != nil || !bytes.Equal(got, want) {
			t.Fatalf("Marshal(%q) = %s, %v; json.Marshal gives %s", s, got, err, want)
		}
	})
}
