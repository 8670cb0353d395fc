package contextfit_test

import (
	agentdv1 "github.com/agentd/agentd/gen/go/agentd/v1"

	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/agentd/agentd/internal/contextfit"
)

// TestNew proves which budget a policy gets: its max_input_tokens, else
// the window of a model the table knows less the reserve and what every
// request sends besides the conversation; and no Fitter at all without a
// policy, or for a model the table does not know.
func TestNew(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name            string
		policy          *agentdv1.ContextPolicy
		provider, model string
		fixedBytes      int64
		want            contextfit.Fitter // nil: none
	}{
		{name: "no policy", provider: "anthropic", model: "claude-sonnet-4-5"},
		{name: "unknown model, no max", policy: &agentdv1.ContextPolicy{}, provider: "ollama", model: "llama3.2"},
		{
			name:   "max_input_tokens, whatever the model",
			policy: &agentdv1.ContextPolicy{MaxInputTokens: 5000, KeepFirst: true, KeepToolResults: true}, provider: "ollama", model: "llama3.2", fixedBytes: 4000,
			want: contextfit.Dropper{Budget: 5000, KeepFirst: true, KeepToolResults: true},
		},
		{
			name:   "a known window less the default reserve and the instructions and tools",
			policy: &agentdv1.ContextPolicy{}, provider: "anthropic", model: "claude-sonnet-4-5", fixedBytes: 4001,
			want: contextfit.Dropper{Budget: 200_000 - 4096 - 1001},
		},
		{
			name:   "a known window less the policy's reserve",
			policy: &agentdv1.ContextPolicy{ReserveOutputTokens: 32_000}, provider: "openai", model: "gpt-4o-mini",
			want: contextfit.Dropper{Budget: 128_000 - 32_000},
		},
		{
			name:   "a model whose input is capped below its window",
			policy: &agentdv1.ContextPolicy{}, provider: "openai-responses", model: "gpt-5-mini-2025-08-07",
			want: contextfit.Dropper{Budget: 272_000},
		},
		{
			name:   "instructions larger than the window leave nothing",
			policy: &agentdv1.ContextPolicy{}, provider: "openai", model: "gpt-4o", fixedBytes: 1 << 20,
			want: contextfit.Dropper{Budget: 0},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			got := contextfit.New(tt.policy, tt.provider, tt.model, tt.fixedBytes)
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("New (-want +got):\n%s", diff)
			}
		})
	}
}

// TestLookup proves the table knows the models the adapters' tests use,
// by provider, through the router, and by family, and knows none it has
// no row for.
func TestLookup(t *testing.T) {
	t.Parallel()
	tests := []struct {
		provider, model string
		want            int64 // the window; 0: unknown
	}{
		{"anthropic", "claude-sonnet-4-5", 200_000},
		{"anthropic", "claude-sonnet-4-5-20250929", 200_000},
		{"anthropic", "claude-haiku-4-5", 200_000},
		{"anthropic", "claude-opus-4-1", 200_000},
		{"anthropic", "claude-opus-4-6", 1_000_000},
		{"anthropic", "claude-sonnet-4-6", 1_000_000},
		{"openai", "gpt-4o", 128_000},
		{"openai", "gpt-4o-mini-2024-07-18", 128_000},
		{"openai", "gpt-4.1", 1_047_576},
		{"openai", "gpt-4.1-mini", 1_047_576},
		{"openai", "gpt-5-mini", 400_000},
		{"openai", "gpt-5-chat-latest", 128_000},
		{"openai", "o1", 200_000},
		{"openai", "o1-mini", 128_000},
		{"openai", "o3", 200_000},
		{"openai", "o3-mini", 200_000},
		{"openai", "o4-mini", 200_000},
		{"openai-responses", "gpt-5-mini-2025-08-07", 400_000},
		{"gemini", "gemini-2.5-flash", 1_048_576},
		{"gemini", "gemini-2.5-pro", 1_048_576},
		{"gemini", "gemini-3-pro-preview", 1_048_576},
		{"deepseek", "deepseek-v4-flash", 1_000_000},
		{"router", "claude-haiku-4-5", 200_000},
		{"router", "anthropic/claude-sonnet-4-5", 200_000},
		{"router", "gpt-4o-mini", 128_000},
		{"router", "deepseek/deepseek-v4-flash", 1_000_000},
		// Unknown: a family's name ends at a hyphen; other adapters'
		// models are their own (Azure's deployments, OpenRouter's
		// names, Ollama's local window); a model served by another
		// provider than its row's.
		{"openai", "gpt-5.1", 0},
		{"openai", "o4", 0},
		{"openai", "gpt-nope", 0},
		{"azure", "prod-4o", 0},
		{"azure", "gpt-4o", 0},
		{"openrouter", "openai/gpt-4o-mini", 0},
		{"ollama", "llama3.2", 0},
		{"anthropic", "gpt-4o", 0},
		{"deepseek", "deepseek-chat", 0},
		{"script", "", 0},
	}
	for _, tt := range tests {
		w, ok := contextfit.Lookup(tt.provider, tt.model)
		if ok != (tt.want != 0) || w.Tokens != tt.want {
			t.Errorf("Lookup(%q, %q) = %d, %v; want %d", tt.provider, tt.model, w.Tokens, ok, tt.want)
		}
	}
}
