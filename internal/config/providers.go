package config

import (
	"slices"
	"strings"
)

// ProviderEnv declares a provider adapter that takes configuration: its
// name (under providers, and in Agent.provider) and the environment
// variables of its API key and base URL, read when the file leaves them
// empty.
type ProviderEnv struct {
	Name string
	// Key names the API key's variable; KeyFallback, when set, is read
	// when Key's is empty.
	Key, KeyFallback string
	// BaseURL names the base URL's variable. HostPort: it is often
	// host:port alone, and http:// is then assumed.
	BaseURL  string
	HostPort bool
}

// ProviderEnvs declares every provider adapter that takes configuration,
// in the order the README lists them. providers/registry gives each its
// constructor; config stays free of the adapters because the bridge,
// which must not depend on them, reads config too.
var ProviderEnvs = []ProviderEnv{
	{Name: "anthropic", Key: "ANTHROPIC_API_KEY", BaseURL: "ANTHROPIC_BASE_URL"},
	{Name: "openai", Key: "OPENAI_API_KEY", BaseURL: "OPENAI_BASE_URL"},
	{Name: "openai-responses", Key: "OPENAI_API_KEY", BaseURL: "OPENAI_BASE_URL"},
	{Name: "azure", Key: "AZURE_OPENAI_API_KEY", BaseURL: "AZURE_OPENAI_ENDPOINT"},
	{Name: "deepseek", Key: "DEEPSEEK_API_KEY", BaseURL: "DEEPSEEK_BASE_URL"},
	{Name: "gemini", Key: "GEMINI_API_KEY", KeyFallback: "GOOGLE_API_KEY", BaseURL: "GEMINI_BASE_URL"},
	{Name: "ollama", Key: "OLLAMA_API_KEY", BaseURL: "OLLAMA_HOST", HostPort: true},
	{Name: "openrouter", Key: "OPENROUTER_API_KEY", BaseURL: "OPENROUTER_BASE_URL"},
	{Name: "requesty", Key: "REQUESTY_API_KEY", BaseURL: "REQUESTY_BASE_URL"},
}

// providerEnv returns the declaration of the provider named name.
func providerEnv(name string) (ProviderEnv, bool) {
	i := slices.IndexFunc(ProviderEnvs, func(e ProviderEnv) bool { return e.Name == name })
	if i < 0 {
		return ProviderEnv{}, false
	}
	return ProviderEnvs[i], true
}

// providerNames lists the declared providers' names, sorted.
func providerNames() []string {
	names := make([]string, len(ProviderEnvs))
	for i, e := range ProviderEnvs {
		names[i] = e.Name
	}
	slices.Sort(names)
	return names
}

// applyProviderEnv fills each provider's API key and base URL from the
// environment where the file left them empty.
func (c *Config) applyProviderEnv(getenv func(string) string) {
	for _, env := range ProviderEnvs {
		p, configured := c.Providers[env.Name]
		if p.APIKey == "" {
			p.APIKey = getenv(env.Key)
			if p.APIKey == "" && env.KeyFallback != "" {
				p.APIKey = getenv(env.KeyFallback)
			}
		}
		if p.BaseURL == "" {
			p.BaseURL = getenv(env.BaseURL)
			if env.HostPort && p.BaseURL != "" && !strings.Contains(p.BaseURL, "://") {
				p.BaseURL = "http://" + p.BaseURL
			}
		}
		if configured || p.APIKey != "" || p.BaseURL != "" {
			if c.Providers == nil {
				c.Providers = make(map[string]Provider)
			}
			c.Providers[env.Name] = p
		}
	}
}
