package providertest

import (
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	agentdv1 "github.com/agentd/agentd/gen/go/agentd/v1"
	"github.com/agentd/agentd/providers"
)

// MaxTokensWire checks that a request's MaxTokens (a sampling request's
// cap) goes out at path in the body that build makes, over any
// limit the options set there, and without changing the options. noCap is
// what the body holds at path without a cap or options (nil: nothing);
// limit makes the options that set a limit of 9000 at path (with
// whatever else the API keeps beside it).
func MaxTokensWire(t *testing.T, path []string, noCap any, limit func(float64) map[string]any, build func(*providers.Request) (map[string]any, error)) {
	t.Helper()
	tests := []struct {
		name      string
		options   map[string]any
		maxTokens int
		want      any
	}{
		{name: "no cap", want: noCap},
		{name: "cap", maxTokens: 100, want: 100},
		{name: "cap over the options' limit", options: limit(9000), maxTokens: 100, want: 100},
		{name: "the options' limit without a cap", options: limit(9000), want: 9000.0},
	}
	field := strings.Join(path, ".")
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			before := cmp.Diff(map[string]any(nil), tt.options)
			req := &providers.Request{Model: "m", Options: tt.options, MaxTokens: tt.maxTokens,
				Messages: []*agentdv1.Message{{Role: agentdv1.Role_ROLE_USER, Parts: []*agentdv1.Part{{Kind: &agentdv1.Part_Text{Text: "hi"}}}}}}
			body, err := build(req)
			if err != nil {
				t.Fatal(err)
			}
			got := at(body, path)
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("%s (-want +got):\n%s", field, diff)
			}
			if after := cmp.Diff(map[string]any(nil), tt.options); after != before {
				t.Errorf("the options changed: %s", after)
			}
		})
	}
}

// at is the value at path in body; nil when there is none.
func at(body map[string]any, path []string) any {
	v := any(body)
	for _, k := range path {
		m, _ := v.(map[string]any)
		v = m[k]
	}
	return v
}
