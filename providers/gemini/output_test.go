package gemini

import (
	"testing"

	"github.com/agentd/agentd/providers"
)

// TestOutputModels: Gemini 3 and later take an output schema with
// function tools and without; Gemini 2.x only without; other names never.
func TestOutputModels(t *testing.T) {
	t.Parallel()
	output := New(providers.Settings{}).Capabilities().Output
	tests := []struct {
		model                   string
		withoutTools, withTools bool
	}{
		{"gemini-3-pro-preview", true, true},
		{"gemini-3-flash-preview", true, true},
		{"gemini-3.1-pro-preview", true, true},
		{"models/gemini-3-pro-preview", true, true},
		{"gemini-4-pro", true, true},
		{"gemini-2.5-flash", true, false},
		{"gemini-2.5-pro", true, false},
		{"gemini-2.5-flash-lite-preview-09-2025", true, false},
		{"models/gemini-2.0-flash", true, false},
		{"gemini-1.5-pro", false, false},
		{"gemini-flash-latest", false, false},
		{"gemini-exp-1206", false, false},
		{"gemma-3-27b-it", false, false},
		{"tunedModels/my-model", false, false},
		{"", false, false},
	}
	for _, tt := range tests {
		if got := output(tt.model, false); got != tt.withoutTools {
			t.Errorf("Output(%q, without tools) = %v, want %v", tt.model, got, tt.withoutTools)
		}
		if got := output(tt.model, true); got != tt.withTools {
			t.Errorf("Output(%q, with tools) = %v, want %v", tt.model, got, tt.withTools)
		}
	}
}
