package anthropic

import (
	"testing"

	"github.com/agentd/agentd/providers"
)

// TestOutputModels: Claude 4.5 and later take an output schema with tools
// and without; older models, and names the table cannot read, get the
// loop's final_answer tool.
func TestOutputModels(t *testing.T) {
	t.Parallel()
	output := New(providers.Settings{}).Capabilities().Output
	tests := []struct {
		model string
		want  bool
	}{
		{"claude-sonnet-4-5", true},
		{"claude-sonnet-4-5-20250929", true},
		{"claude-haiku-4-5-20251001", true},
		{"claude-opus-4-5", true},
		{"claude-opus-4-6", true},
		{"claude-sonnet-4-6", true},
		{"claude-opus-4-7", true},
		{"claude-sonnet-5", true},
		{"claude-opus-5-20270101", true},
		{"claude-opus-4-1", false},
		{"claude-opus-4-1-20250805", false},
		{"claude-sonnet-4-20250514", false},
		{"claude-opus-4-0", false},
		{"claude-3-7-sonnet-20250219", false},
		{"claude-3-5-haiku-latest", false},
		{"claude-instant-1.2", false},
		{"claude-sonnet", false},
		{"sonnet-4-5", false},
		{"", false},
	}
	for _, tt := range tests {
		for _, withTools := range []bool{false, true} {
			if got := output(tt.model, withTools); got != tt.want {
				t.Errorf("Output(%q, tools %v) = %v, want %v", tt.model, withTools, got, tt.want)
			}
		}
	}
}
