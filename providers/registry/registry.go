// Package registry builds the providers agentd serves: the in-process
// "mock" and "script", an adapter for each provider internal/config
// declares (config.ProviderEnvs: its name and environment variables),
// configured from the configuration, and the "router" over them all.
// internal/app serves what New returns; tests iterate Adapters.
//
// A provider is declared in config.ProviderEnvs and given its constructor
// here; New and Adapters fail naming a provider that has one without the
// other.
package registry

import (
	"fmt"
	"maps"
	"slices"

	"github.com/agentd/agentd/internal/config"
	"github.com/agentd/agentd/providers"
	"github.com/agentd/agentd/providers/anthropic"
	"github.com/agentd/agentd/providers/gemini"
	"github.com/agentd/agentd/providers/ollama"
	"github.com/agentd/agentd/providers/openaichat"
	"github.com/agentd/agentd/providers/openairesponses"
	"github.com/agentd/agentd/providers/router"
	"github.com/agentd/agentd/providers/scripted"
)

// constructors makes each declared provider's adapter.
var constructors = map[string]func(providers.Settings) providers.Provider{
	"anthropic":        anthropic.New,
	"openai":           openaichat.OpenAI,
	"openai-responses": openairesponses.New,
	"azure":            openaichat.Azure,
	"deepseek":         openaichat.DeepSeek,
	"gemini":           gemini.New,
	"ollama":           ollama.New,
	"openrouter":       openaichat.OpenRouter,
	"requesty":         openaichat.Requesty,
}

// Adapter is a provider adapter that takes configuration: its
// declaration and its constructor.
type Adapter struct {
	config.ProviderEnv
	New func(providers.Settings) providers.Provider
}

// Settings are the adapter's settings from its configuration, with its
// API key's variable named for the error of a request made without one.
func (a Adapter) Settings(c config.Provider) providers.Settings {
	return providers.Settings{APIKey: c.APIKey, KeyEnv: a.Key, BaseURL: c.BaseURL, Timeout: c.Timeout, MaxRetries: c.MaxRetries, Options: c.Options}
}

// Adapters lists the adapters in the order config.ProviderEnvs declares
// them.
func Adapters() ([]Adapter, error) {
	adapters := make([]Adapter, 0, len(config.ProviderEnvs))
	declared := make(map[string]bool)
	for _, env := range config.ProviderEnvs {
		newProvider, ok := constructors[env.Name]
		if !ok {
			return nil, fmt.Errorf("registry: provider %q is declared in config.ProviderEnvs but has no constructor in providers/registry", env.Name)
		}
		declared[env.Name] = true
		adapters = append(adapters, Adapter{ProviderEnv: env, New: newProvider})
	}
	for _, name := range slices.Sorted(maps.Keys(constructors)) {
		if !declared[name] {
			return nil, fmt.Errorf("registry: provider %q has a constructor in providers/registry but no declaration in config.ProviderEnvs", name)
		}
	}
	return adapters, nil
}

// New is the registry agentd serves, each adapter configured by
// configured[its name] (its zero value when absent: the adapter's
// defaults).
func New(configured map[string]config.Provider) (*providers.Registry, error) {
	adapters, err := Adapters()
	if err != nil {
		return nil, err
	}
	all := []providers.Provider{scripted.Mock(), scripted.Script()}
	for _, a := range adapters {
		all = append(all, a.New(a.Settings(configured[a.Name])))
	}
	var reg *providers.Registry
	lookup := func(name string) (providers.Provider, bool) { return reg.Lookup(name) }
	reg, err = providers.NewRegistry(append(all, router.New(lookup))...)
	return reg, err
}
