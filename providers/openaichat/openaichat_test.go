package openaichat_test

import (
	"path/filepath"
	"testing"

	"github.com/agentd/agentd/providers"
	"github.com/agentd/agentd/providers/openaichat"
	"github.com/agentd/agentd/providers/providertest"
)

// Each dialect replays the conformance transcripts of its own directory.
func TestConformance(t *testing.T) {
	t.Parallel()
	for _, d := range []struct {
		name    string
		new     func(providers.Settings) providers.Provider
		path    string // of the real base URL, so requests go to the real paths
		options map[string]string
	}{
		{"openai", openaichat.OpenAI, "/v1", nil},
		{"azure", openaichat.Azure, "", map[string]string{"deployment": "prod-4o"}},
		{"deepseek", openaichat.DeepSeek, "", nil},
		{"openrouter", openaichat.OpenRouter, "/api/v1", map[string]string{"referer": "https://agentd.example", "title": "agentd"}},
		{"requesty", openaichat.Requesty, "/v1", nil},
	} {
		t.Run(d.name, func(t *testing.T) {
			t.Parallel()
			providertest.Run(t, filepath.Join("testdata", d.name), func(t *testing.T, baseURL string) providers.Provider {
				return d.new(providers.Settings{APIKey: "test-key", BaseURL: baseURL + d.path, Options: d.options})
			})
		})
	}
}

// dialects are the package's constructors, by provider name.
var dialects = map[string]func(providers.Settings) providers.Provider{
	"openai": openaichat.OpenAI, "azure": openaichat.Azure, "deepseek": openaichat.DeepSeek,
	"openrouter": openaichat.OpenRouter, "requesty": openaichat.Requesty,
}

// Each dialect's errors keep the API key out, whatever the API echoes.
func TestSecretsStayOut(t *testing.T) {
	t.Parallel()
	for name, newDialect := range dialects {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			providertest.CheckSecrets(t, func(baseURL, key string) providers.Provider {
				return newDialect(providers.Settings{APIKey: key, BaseURL: baseURL, MaxRetries: -1, Options: map[string]string{"deployment": "d"}})
			})
		})
	}
}

// X-H4: each dialect's stream that goes silent, or is cut short, fails as
// it does on every adapter.
func TestStreamFailures(t *testing.T) {
	t.Parallel()
	for name, newDialect := range dialects {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			providertest.CheckStreamFailures(t, newDialect)
		})
	}
}

// Each dialect says which turns take an output schema in the request:
// every turn, but DeepSeek's JSON mode only a turn without tools (one with
// tools gets the loop's final_answer tool).
func TestOutputCapability(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name               string
		withTools, without bool
	}{
		{"openai", true, true},
		{"azure", true, true},
		{"deepseek", false, true},
		{"openrouter", true, true},
		{"requesty", true, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			output := dialects[tc.name](providers.Settings{}).Capabilities().Output
			if output == nil {
				t.Fatal("Capabilities().Output is nil")
			}
			if got := output("some-model", true); got != tc.withTools {
				t.Errorf("with tools: %v, want %v", got, tc.withTools)
			}
			if got := output("some-model", false); got != tc.without {
				t.Errorf("without tools: %v, want %v", got, tc.without)
			}
		})
	}
}
