package config

import (
	"maps"
	"slices"
	"time"
)

// Provider configures one provider adapter; zero values mean the
// adapter's defaults.
type Provider struct {
	// APIKey authenticates its requests. Secret.
	APIKey string `yaml:"api_key"`
	// BaseURL replaces its API's base URL (proxies, gateways).
	BaseURL string `yaml:"base_url"`
	// Timeout bounds the wait for a response to begin and each wait for
	// more of a streamed one.
	Timeout time.Duration `yaml:"timeout" default:"the adapter's (5m)"`
	// MaxRetries is how often a retryable failure is retried; negative:
	// never.
	MaxRetries int `yaml:"max_retries" default:"the adapter's (2)"`
	// Options are the adapter's own settings (README, "Providers").
	Options map[string]string `yaml:"options"`
}

// validateProviders checks the providers' settings; their names are
// providers/registry's to check.
func (c *Config) validateProviders(bad func(string, ...any)) {
	for _, name := range slices.Sorted(maps.Keys(c.Providers)) {
		if c.Providers[name].Timeout < 0 {
			bad("providers.%s.timeout: must not be negative", name)
		}
	}
}
