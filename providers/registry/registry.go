// Package registry declares the providers agentd serves, each in one
// place: its name (under providers in the configuration, and in
// Agent.provider), the environment variables of its API key and base URL,
// and its constructor. Configure completes and checks the configuration's
// providers section from these declarations; New builds what agentd
// serves: the in-process "mock" and "script", an adapter for each declared
// provider, and the "router" over them all; NewTenants builds that for
// each tenant with provider keys of its own. Adding a provider is one
// entry in Declared.
package registry

import (
	"cmp"
	"fmt"
	"maps"
	"slices"
	"strings"

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

// Adapter declares a provider adapter that takes configuration.
type Adapter struct {
	Name string
	// Key names the API key's variable; KeyFallback, when set, is read
	// when Key's is empty.
	Key, KeyFallback string
	// BaseURL names the base URL's variable. HostPort: it is often
	// host:port alone, and http:// is then assumed.
	BaseURL  string
	HostPort bool
	// New makes the adapter.
	New func(providers.Settings) providers.Provider
}

// Declared lists every provider adapter that takes configuration, in the
// order the README lists them.
var Declared = []Adapter{
	{Name: "anthropic", Key: "ANTHROPIC_API_KEY", BaseURL: "ANTHROPIC_BASE_URL", New: anthropic.New},
	{Name: "openai", Key: "OPENAI_API_KEY", BaseURL: "OPENAI_BASE_URL", New: openaichat.OpenAI},
	{Name: "openai-responses", Key: "OPENAI_API_KEY", BaseURL: "OPENAI_BASE_URL", New: openairesponses.New},
	{Name: "azure", Key: "AZURE_OPENAI_API_KEY", BaseURL: "AZURE_OPENAI_ENDPOINT", New: openaichat.Azure},
	{Name: "deepseek", Key: "DEEPSEEK_API_KEY", BaseURL: "DEEPSEEK_BASE_URL", New: openaichat.DeepSeek},
	{Name: "gemini", Key: "GEMINI_API_KEY", KeyFallback: "GOOGLE_API_KEY", BaseURL: "GEMINI_BASE_URL", New: gemini.New},
	{Name: "ollama", Key: "OLLAMA_API_KEY", BaseURL: "OLLAMA_HOST", HostPort: true, New: ollama.New},
	{Name: "openrouter", Key: "OPENROUTER_API_KEY", BaseURL: "OPENROUTER_BASE_URL", New: openaichat.OpenRouter},
	{Name: "requesty", Key: "REQUESTY_API_KEY", BaseURL: "REQUESTY_BASE_URL", New: openaichat.Requesty},
}

// Settings are the adapter's settings from its configuration, with its
// API key's variable named for the error of a request made without one.
func (a Adapter) Settings(c config.Provider) providers.Settings {
	return providers.Settings{APIKey: c.APIKey, KeyEnv: a.Key, BaseURL: c.BaseURL, Timeout: c.Timeout, MaxRetries: c.MaxRetries, Options: c.Options}
}

// Configure returns the configuration's providers section completed from
// the environment: each declared provider's API key and base URL, where the
// file left them empty, from its variables (read through getenv). A
// provider appears in the result when the file names it or a variable
// configures it. A name the file gives that no provider has is an error
// naming the setting.
func Configure(file map[string]config.Provider, getenv func(string) string) (map[string]config.Provider, error) {
	if err := checkNames("providers", file); err != nil {
		return nil, err
	}
	var out map[string]config.Provider
	for _, a := range Declared {
		p, configured := file[a.Name]
		if p.APIKey == "" {
			p.APIKey = a.keyFromEnv(getenv)
		}
		if p.BaseURL == "" {
			p.BaseURL = a.baseURLFromEnv(getenv)
		}
		if configured || p.APIKey != "" || p.BaseURL != "" {
			if out == nil {
				out = make(map[string]config.Provider)
			}
			out[a.Name] = p
		}
	}
	return out, nil
}

// keyFromEnv is the adapter's API key from its variable, else from its
// fallback variable.
func (a Adapter) keyFromEnv(getenv func(string) string) string {
	if a.KeyFallback == "" {
		return getenv(a.Key)
	}
	return cmp.Or(getenv(a.Key), getenv(a.KeyFallback))
}

// baseURLFromEnv is the adapter's base URL from its variable; a host and
// port alone (as OLLAMA_HOST may be) is an http URL.
func (a Adapter) baseURLFromEnv(getenv func(string) string) string {
	u := getenv(a.BaseURL)
	if a.HostPort && u != "" && !strings.Contains(u, "://") {
		return "http://" + u
	}
	return u
}

// checkNames refuses a provider configured under setting ("providers",
// or "tenants.<name>.providers") that is not declared.
func checkNames(setting string, configured map[string]config.Provider) error {
	for _, name := range slices.Sorted(maps.Keys(configured)) {
		if !slices.ContainsFunc(Declared, func(a Adapter) bool { return a.Name == name }) {
			names := make([]string, len(Declared))
			for i, a := range Declared {
				names[i] = a.Name
			}
			slices.Sort(names)
			return fmt.Errorf("config: %s.%s: unknown provider; one of %s", setting, name, strings.Join(names, ", "))
		}
	}
	return nil
}

// New is the registry agentd serves, each adapter configured by
// configured[its name] (its zero value when absent: the adapter's
// defaults). A configured name that no provider has is an error.
func New(configured map[string]config.Provider) (*providers.Registry, error) {
	if err := checkNames("providers", configured); err != nil {
		return nil, err
	}
	all := []providers.Provider{scripted.Mock(), scripted.Script()}
	for _, a := range Declared {
		all = append(all, a.New(a.Settings(configured[a.Name])))
	}
	var reg *providers.Registry
	lookup := func(name string) (providers.Provider, bool) { return reg.Lookup(name) }
	reg, err := providers.NewRegistry(append(all, router.New(lookup))...)
	return reg, err
}

// Tenants are the registries agentd serves by tenant: the global
// one, configured by providers, and one of its own for each configured
// tenant that sets provider keys or base URLs (tenants.<name>.providers,
// merged over providers by config.ForTenant). A tenant's generations thus
// use its own key wherever it set one, never another tenant's, and the
// global one only for a provider it left alone.
type Tenants struct {
	global *providers.Registry
	own    map[string]*providers.Registry
}

// NewTenants builds the registries of cfg: cfg.Providers as Configure
// completed them, and each tenant's. A provider name under
// tenants.<name>.providers that no provider has is an error naming the
// setting, as under providers.
func NewTenants(cfg *config.Config) (*Tenants, error) {
	global, err := New(cfg.Providers)
	if err != nil {
		return nil, err
	}
	t := &Tenants{global: global, own: make(map[string]*providers.Registry)}
	for _, name := range slices.Sorted(maps.Keys(cfg.Tenants)) {
		own := cfg.Tenants[name].Providers
		if len(own) == 0 {
			continue
		}
		if err := checkNames("tenants."+name+".providers", own); err != nil {
			return nil, err
		}
		settings, _ := cfg.ForTenant(name)
		if t.own[name], err = New(settings.Providers); err != nil {
			return nil, err
		}
	}
	return t, nil
}

// Global is the registry of the global provider settings.
func (t *Tenants) Global() *providers.Registry { return t.global }

// For returns the registry of the configured tenant name: its own, or the
// global one when it sets no provider of its own (or is not configured).
func (t *Tenants) For(name string) *providers.Registry {
	if r, ok := t.own[name]; ok {
		return r
	}
	return t.global
}

// CloseIdleConnections closes the idle connections of every registry's
// providers.
func (t *Tenants) CloseIdleConnections() {
	t.global.CloseIdleConnections()
	for _, r := range t.own {
		r.CloseIdleConnections()
	}
}
