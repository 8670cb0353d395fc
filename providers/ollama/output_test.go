package ollama

import (
	"testing"

	"github.com/agentd/agentd/providers"
)

// TestOutputModels: a schema goes in "format" on a turn without tools,
// on any local model; never with tools, nor to Ollama's cloud.
func TestOutputModels(t *testing.T) {
	t.Parallel()
	tests := []struct {
		baseURL, model          string
		withoutTools, withTools bool
	}{
		{"", "llama3.2", true, false},
		{"", "qwen3:8b", true, false},
		{"http://gpu-box:11434", "hf.co/bartowski/Llama-3.2-3B-Instruct-GGUF:Q4_K_M", true, false},
		{"", "gpt-oss:120b-cloud", false, false},
		{"", "glm-5:cloud", false, false},
		{"", "cloud-model:latest", true, false},
		{"https://ollama.com", "gpt-oss:120b", false, false},
		{"https://api.ollama.com/", "gpt-oss:120b", false, false},
		{"https://notollama.com", "gpt-oss:120b", true, false},
	}
	for _, tt := range tests {
		output := New(providers.Settings{BaseURL: tt.baseURL}).Capabilities().Output
		if got := output(tt.model, false); got != tt.withoutTools {
			t.Errorf("%s at %q: Output without tools = %v, want %v", tt.model, tt.baseURL, got, tt.withoutTools)
		}
		if got := output(tt.model, true); got != tt.withTools {
			t.Errorf("%s at %q: Output with tools = %v, want %v", tt.model, tt.baseURL, got, tt.withTools)
		}
	}
}
