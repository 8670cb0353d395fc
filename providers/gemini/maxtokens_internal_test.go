package gemini

import (
	"testing"

	"github.com/agentd/agentd/providers"
	"github.com/agentd/agentd/providers/providertest"
)

// TestMaxTokensReachTheWire: a request's MaxTokens (a sampling request's
// cap, X-M5) goes out as generationConfig.maxOutputTokens, over any limit the options set, and
// without changing the options.
func TestMaxTokensReachTheWire(t *testing.T) {
	t.Parallel()
	providertest.MaxTokensWire(t, []string{"generationConfig", "maxOutputTokens"}, nil,
		func(v float64) map[string]any {
			return map[string]any{"generationConfig": map[string]any{"maxOutputTokens": v, "temperature": 0.5}}
		},
		func(req *providers.Request) (map[string]any, error) { return buildBody(req), nil })
}
