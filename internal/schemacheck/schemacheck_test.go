package schemacheck_test

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/agentd/agentd/internal/schemacheck"
)

func doc(t *testing.T, s string) any {
	t.Helper()
	var v any
	if err := json.Unmarshal([]byte(s), &v); err != nil {
		t.Fatal(err)
	}
	return v
}

// A document is a JSON Schema when its meta-schema (2020-12, or the draft
// it declares) says so; each problem names its path within the document,
// and nothing outside the document is loaded.
func TestCheck(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name, schema string
		path         string // the first problem's path; "-" when none is wanted
		says         string
	}{
		{"an object schema", `{"type":"object","properties":{"q":{"type":"string"}},"required":["q"]}`, "-", ""},
		{"draft-07, declared", `{"$schema":"http://json-schema.org/draft-07/schema#","type":"object","properties":{"q":{"type":"integer"}},"additionalProperties":false}`, "-", ""},
		{"a reference within the document", `{"$defs":{"s":{"type":"string"}},"type":"object","properties":{"q":{"$ref":"#/$defs/s"}}}`, "-", ""},
		{"an unknown type", `{"type":"object","properties":{"q":{"type":"no-such-type"}}}`, ".properties.q.type", ""},
		{"required as a string", `{"type":"object","required":"q"}`, ".required", ""},
		{"a negative length", `{"type":"object","properties":{"q":{"type":"string","minLength":-1}}}`, ".properties.q.minLength", ""},
		{"draft-07's own rule", `{"$schema":"http://json-schema.org/draft-07/schema#","type":"object","properties":{"q":{"type":"string","maxLength":"ten"}}}`, ".properties.q.maxLength", ""},
		{"a file referred to", `{"type":"object","properties":{"q":{"$ref":"file:///etc/passwd"}}}`, "", "refer only to itself"},
		{"a URL referred to", `{"type":"object","properties":{"q":{"$ref":"http://127.0.0.1:1/schema.json"}}}`, "", "refer only to itself"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			got := schemacheck.Check(doc(t, tc.schema))
			if tc.path == "-" {
				if len(got) != 0 {
					t.Errorf("problems %+v; want none", got)
				}
				return
			}
			if len(got) == 0 {
				t.Fatalf("no problem; want one at %q", tc.path)
			}
			if got[0].Path != tc.path || got[0].Description == "" || !strings.Contains(got[0].Description, tc.says) {
				t.Errorf("problems %+v; want the first at %q, saying %q", got, tc.path, tc.says)
			}
		})
	}
}
