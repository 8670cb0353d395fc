package app

import (
	"log/slog"
	"maps"
	"net/url"
	"slices"
	"strings"

	"github.com/agentd/agentd/internal/config"
	"github.com/agentd/agentd/providers"
	"github.com/agentd/agentd/providers/registry"
)

// What agentd says at start of what it can serve, so that a newcomer
// learns before the first request which providers lack a key and which
// servers a request may ref:. No key, secret, URL path, argument or env
// value is logged.

// logProviders logs the providers reg serves: those cfg gives an API key,
// those it gives none although they need one (each with the variable
// that would), and those that need none; and the tenants that set keys of
// their own.
func logProviders(log *slog.Logger, cfg *config.Config, reg *providers.Registry) {
	var keyed, missing, keyless []string
	for _, name := range reg.Names() {
		p, _ := reg.Lookup(name)
		settings := cfg.Providers[name]
		switch a, declared := declaredAdapter(name); {
		case isUnconfigured(p):
			missing = append(missing, name+" ("+missingVariable(a, settings)+")")
		case declared && settings.APIKey != "":
			keyed = append(keyed, name)
		default:
			keyless = append(keyless, name)
		}
	}
	attrs := []any{"with_key", listed(keyed), "without_key", listed(missing), "needing_none", listed(keyless)}
	if own := tenantKeys(cfg); own != "" {
		attrs = append(attrs, "tenants_with_own_keys", own)
	}
	log.Info("providers", attrs...)
}

// declaredAdapter is the declaration of the provider name; false for
// those agentd serves in-process (mock, script, the router).
func declaredAdapter(name string) (registry.Adapter, bool) {
	i := slices.IndexFunc(registry.Declared, func(a registry.Adapter) bool { return a.Name == name })
	if i < 0 {
		return registry.Adapter{}, false
	}
	return registry.Declared[i], true
}

// isUnconfigured reports whether p lacks what agentd's configuration must
// give it, whatever the model.
func isUnconfigured(p providers.Provider) bool {
	cc, ok := p.(providers.ConfigChecker)
	return ok && cc.CheckConfig("") != nil
}

// missingVariable names the variable that would give adapter a what it
// lacks: its API key, or, with one, its base URL.
func missingVariable(a registry.Adapter, settings config.Provider) string {
	switch {
	case settings.APIKey != "":
		return a.BaseURL
	case a.KeyFallback != "":
		return a.Key + " or " + a.KeyFallback
	}
	return a.Key
}

// tenantKeys lists the tenants that set provider keys of their own, each
// with those providers: "acme (anthropic, openai)"; "" when none does.
func tenantKeys(cfg *config.Config) string {
	var out []string
	for _, name := range slices.Sorted(maps.Keys(cfg.Tenants)) {
		var own []string
		for _, p := range slices.Sorted(maps.Keys(cfg.Tenants[name].Providers)) {
			if cfg.Tenants[name].Providers[p].APIKey != "" {
				own = append(own, p)
			}
		}
		if len(own) > 0 {
			out = append(out, name+" ("+strings.Join(own, ", ")+")")
		}
	}
	return strings.Join(out, ", ")
}

// logServers logs the MCP servers that bridge.servers registers for
// ref:, each with its command or its URL's host. With a remote bridge
// (remote), agentd serve resolves only the url servers itself: the
// command servers are the remote bridge's own.
func logServers(log *slog.Logger, b config.Bridge, remote bool) {
	var out []string
	for _, name := range slices.Sorted(maps.Keys(b.Servers)) {
		s := b.Servers[name]
		switch {
		case s.URL != "":
			out = append(out, name+" (url "+urlHost(s.URL)+")")
		case !remote:
			out = append(out, name+" (command "+s.Command+")")
		}
	}
	attrs := []any{"servers", listed(out)}
	if remote {
		attrs = append(attrs, "command_servers", "the remote bridge's")
	}
	log.Info("MCP servers registered", attrs...)
}

// urlHost is the host (and port) of raw, which validation found an http
// or https URL: never its path, query or user information.
func urlHost(raw string) string {
	u, err := url.Parse(raw)
	if err != nil {
		return ""
	}
	return u.Host
}

// listed is names joined for a log line; "none" when there are none.
func listed(names []string) string {
	if len(names) == 0 {
		return "none"
	}
	return strings.Join(names, ", ")
}
