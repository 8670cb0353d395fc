package config

import (
	"maps"
	"slices"

	"github.com/agentd/agentd/internal/policy"
)

// Limits bound what one tenant may run at once; zero is no limit. A call
// over a limit is ResourceExhausted, with RetryInfo and a QuotaFailure
// naming the limit.
type Limits struct {
	// MaxConcurrentGenerations caps the tenant's generations running at
	// once, resumed ones included (a paused one does not count).
	MaxConcurrentGenerations int `yaml:"max_concurrent_generations"`
	// MaxPausedGenerations caps the tenant's paused generations: a
	// generation that would pause beyond it fails instead (a resumed one
	// that pauses again keeps its place).
	MaxPausedGenerations int `yaml:"max_paused_generations"`
	// GenerationsPerMinute is the rate of new generations: a token bucket
	// holding a minute's worth, refilled continuously. A resume takes no
	// token.
	GenerationsPerMinute int `yaml:"generations_per_minute"`
	// MaxThreads caps the tenant's threads: creating (or forking) one
	// more is refused.
	MaxThreads int `yaml:"max_threads"`
	// MaxThreadItems caps the items of one thread: a start on a thread
	// that holds this many is refused (the generation that crosses it
	// still appends all it added), and so is creating one with more.
	MaxThreadItems int `yaml:"max_thread_items"`
}

// Tenant is one tenant's configuration. Every field left unset keeps the
// global value; a set one replaces it for this tenant.
type Tenant struct {
	// AllowedCommands replaces bridge.allowed_commands.
	AllowedCommands []string `yaml:"allowed_commands" inherit:"bridge.allowed_commands"`
	// Servers lists the registered bridge.servers the tenant may use with
	// ref: (an empty list: none).
	Servers []string `yaml:"servers" default:"all of them"`
	// AllowedEnv replaces bridge.allowed_env.
	AllowedEnv []string `yaml:"allowed_env" inherit:"bridge.allowed_env"`
	// AllowPrivateNetworks replaces bridge.allow_private_networks.
	AllowPrivateNetworks *bool `yaml:"allow_private_networks" inherit:"bridge.allow_private_networks"`
	// Providers replaces, per provider, its api_key and base_url: a
	// tenant that sets its own key never uses the global one. A tenant
	// may set nothing else of a provider.
	Providers map[string]Provider `yaml:"providers" inherit:"providers"`
	// Limits replaces the global limits, field by field where set.
	Limits *Limits `yaml:"limits" inherit:"limits"`
	// GenerationLimits replaces the global generation_limits, field by
	// field where set.
	GenerationLimits *GenerationLimits `yaml:"generation_limits" inherit:"generation_limits"`
	// Budgets replaces the global budgets (an empty list: none).
	Budgets []Budget `yaml:"budgets" inherit:"budgets"`
}

// DefaultTenant names the tenant whose settings a caller gets whose own
// tenant is not configured.
const DefaultTenant = "default"

// TenantSettings are one tenant's effective settings: its own where it
// sets them, the global ones elsewhere.
type TenantSettings struct {
	// Name is the tenant's name (the caller's, even when it is served
	// with the default tenant's settings).
	Name string
	// Entry is the setting its own settings come from, for errors to
	// name: "tenants.<name>", or "tenants.default" for a tenant served
	// with the default's; empty when no tenants are configured.
	Entry string
	// Rules are what its requests may declare.
	Rules policy.Rules
	// Servers are the registered servers it may ref:; nil: all.
	Servers []string
	// Providers are the provider settings its generations use.
	Providers map[string]Provider
	// Limits are its limits.
	Limits Limits
	// GenerationLimits bound each of its generations; where they set no
	// default of max_tool_turns, generation.max_tool_turns is it.
	GenerationLimits GenerationLimits
	// Budgets are its budgets as written, and BudgetsKey where (e.g.
	// "tenants.acme.budgets", or "budgets" for the global ones).
	Budgets    []Budget
	BudgetsKey string
}

// ForTenant returns the effective settings of tenant name, and false when
// tenants are configured but neither name nor "default" is among them. The
// tenant "" (no authentication) always gets the global settings.
func (c *Config) ForTenant(name string) (TenantSettings, bool) {
	ts := TenantSettings{Name: name, Rules: c.Bridge.Rules(), Providers: c.Providers, Limits: c.Limits, GenerationLimits: c.GenerationLimits,
		Budgets: c.Budgets, BudgetsKey: "budgets"}
	// The tenant "" is every caller of an agentd that authenticates none:
	// tenants mean nothing to it, and it keeps the global settings.
	if len(c.Tenants) == 0 || name == "" {
		return ts, true
	}
	entry := name
	t, ok := c.Tenants[name]
	if !ok {
		entry = DefaultTenant
		if t, ok = c.Tenants[DefaultTenant]; !ok {
			return TenantSettings{}, false
		}
	}
	ts.Entry = "tenants." + entry
	ts.Rules = t.rules(ts.Rules, ts.Entry)
	ts.Servers = t.Servers
	ts.Providers = t.providers(c.Providers)
	if t.Limits != nil {
		ts.Limits = t.Limits.over(ts.Limits)
	}
	if t.GenerationLimits != nil {
		ts.GenerationLimits = t.GenerationLimits.over(ts.GenerationLimits)
	}
	if t.Budgets != nil {
		ts.Budgets, ts.BudgetsKey = t.Budgets, ts.Entry+".budgets"
	}
	return ts, true
}

// rules are global with the tenant's own rules in their place, each
// named by its setting in entry.
func (t Tenant) rules(global policy.Rules, entry string) policy.Rules {
	r := global
	if t.AllowedCommands != nil {
		r.AllowedCommands = t.AllowedCommands
		r.Settings.AllowedCommands = entry + ".allowed_commands"
	}
	if t.AllowedEnv != nil {
		r.AllowedEnv = t.AllowedEnv
		r.Settings.AllowedEnv = entry + ".allowed_env"
	}
	if t.AllowPrivateNetworks != nil {
		r.AllowPrivateNetworks = *t.AllowPrivateNetworks
		r.Settings.AllowPrivateNetworks = entry + ".allow_private_networks"
	}
	return r
}

// providers are the global provider settings with the tenant's API keys
// and base URLs in their place.
func (t Tenant) providers(global map[string]Provider) map[string]Provider {
	if len(t.Providers) == 0 {
		return global
	}
	out := make(map[string]Provider, len(global)+len(t.Providers))
	maps.Copy(out, global)
	for name, p := range t.Providers {
		merged := global[name]
		if p.APIKey != "" {
			merged.APIKey = p.APIKey
		}
		if p.BaseURL != "" {
			merged.BaseURL = p.BaseURL
		}
		out[name] = merged
	}
	return out
}

// over is global with l's limits in place where l sets them.
func (l Limits) over(global Limits) Limits {
	fillUnset(&l, global)
	return l
}

func (l Limits) validate(setting string, bad func(string, ...any)) {
	if l.MaxConcurrentGenerations < 0 || l.MaxPausedGenerations < 0 || l.GenerationsPerMinute < 0 || l.MaxThreads < 0 || l.MaxThreadItems < 0 {
		bad("%s: limits must not be negative", setting)
	}
}

// validateTenants checks the limits and tenants.
func (c *Config) validateTenants(bad func(string, ...any)) {
	c.Limits.validate("limits", bad)
	c.GenerationLimits.validate("generation_limits", bad)
	c.GenerationLimits.checkDefaults("generation_limits", c.Generation.MaxToolTurns, bad)
	for _, name := range slices.Sorted(maps.Keys(c.Tenants)) {
		if name == "" {
			bad("tenants: empty name")
		}
		c.Tenants[name].validate("tenants."+name, c.Bridge.Servers, bad)
		if own := c.Tenants[name].GenerationLimits; own != nil {
			own.validate("tenants."+name+".generation_limits", bad)
			own.over(c.GenerationLimits).checkDefaults("tenants."+name+".generation_limits", c.Generation.MaxToolTurns, bad)
		}
	}
}

// validate checks tenant t, configured at entry, among the registered
// servers.
func (t Tenant) validate(entry string, servers map[string]Server, bad func(string, ...any)) {
	if t.Limits != nil {
		t.Limits.validate(entry+".limits", bad)
	}
	for _, s := range t.Servers {
		if _, ok := servers[s]; !ok {
			bad("%s.servers: %q is not among bridge.servers", entry, s)
		}
	}
	if slices.Contains(t.AllowedCommands, "") {
		bad("%s.allowed_commands: empty entry", entry)
	}
	t.validateProviders(entry, bad)
}

// validateProviders checks that tenant t, configured at entry, sets only
// what a tenant may of a provider.
func (t Tenant) validateProviders(entry string, bad func(string, ...any)) {
	for _, p := range slices.Sorted(maps.Keys(t.Providers)) {
		if o := t.Providers[p]; o.Timeout != 0 || o.MaxRetries != 0 || len(o.Options) > 0 {
			bad("%s.providers.%s: a tenant may set only api_key and base_url", entry, p)
		}
	}
}
