package openaichat

import (
	"testing"

	"github.com/google/go-cmp/cmp"

	agentdv1 "github.com/agentd/agentd/gen/go/agentd/v1"
	"github.com/agentd/agentd/providers"
)

// TestMaxTokensReachTheWire: a request's MaxTokens (a sampling request's
// cap, X-M5) goes out as max_completion_tokens, over any limit the options set, and
// without changing the options.
func TestMaxTokensReachTheWire(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name      string
		options   map[string]any
		maxTokens int
		want      any
	}{
		{name: "no cap", want: nil},
		{name: "cap", maxTokens: 100, want: 100},
		{name: "cap over the options' limit", options: map[string]any{"max_completion_tokens": 9000.0}, maxTokens: 100, want: 100},
		{name: "the options' limit without a cap", options: map[string]any{"max_completion_tokens": 9000.0}, want: 9000.0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			before := cmp.Diff(map[string]any(nil), tt.options)
			req := &providers.Request{Model: "m", Options: tt.options, MaxTokens: tt.maxTokens,
				Messages: []*agentdv1.Message{{Role: agentdv1.Role_ROLE_USER, Parts: []*agentdv1.Part{{Kind: &agentdv1.Part_Text{Text: "hi"}}}}}}
			body, err := (&provider{}).body(req)
			if err != nil {
				t.Fatal(err)
			}
			got := any(body)
			for _, k := range []string{"max_completion_tokens"} {
				m, _ := got.(map[string]any)
				got = m[k]
			}
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("%s (-want +got):\n%s", "max_completion_tokens", diff)
			}
			if after := cmp.Diff(map[string]any(nil), tt.options); after != before {
				t.Errorf("the options changed: %s", after)
			}
		})
	}
}
