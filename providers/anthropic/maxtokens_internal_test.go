package anthropic

import (
	"testing"

	"github.com/agentd/agentd/providers"
	"github.com/agentd/agentd/providers/providertest"
)

// TestMaxTokensReachTheWire: a request's MaxTokens (a sampling request's
// cap, X-M5) goes out as max_tokens, over any limit the options set, and
// without changing the options.
func TestMaxTokensReachTheWire(t *testing.T) {
	t.Parallel()
	providertest.MaxTokensWire(t, []string{"max_tokens"}, 4096,
		func(v float64) map[string]any { return map[string]any{"max_tokens": v} },
		func(req *providers.Request) (map[string]any, error) { return requestBody(req) })
}
