package ollama

import (
	"testing"

	"github.com/agentd/agentd/providers"
	"github.com/agentd/agentd/providers/providertest"
)

// TestMaxTokensReachTheWire: a request's MaxTokens (a sampling request's
// cap, X-M5) goes out as options.num_predict, over any limit the options set, and
// without changing the options.
func TestMaxTokensReachTheWire(t *testing.T) {
	t.Parallel()
	providertest.MaxTokensWire(t, []string{"options", "num_predict"}, nil,
		func(v float64) map[string]any {
			return map[string]any{"options": map[string]any{"num_predict": v, "temperature": 0.5}}
		},
		func(req *providers.Request) (map[string]any, error) { return buildBody(req) })
}
