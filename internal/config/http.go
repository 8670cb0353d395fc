package config

import (
	"net/url"
	"slices"
	"strings"
)

// HTTP configures what listen serves to HTTP clients beside gRPC:
// Connect, gRPC-Web and HTTP/JSON. Those are agentd's public services,
// with the same authentication and rules as over gRPC (docs/http.md). Read
// at start, like every setting but auth.
type HTTP struct {
	// CORS lets scripts that a browser loaded from other origins call
	// agentd.
	CORS CORS `yaml:"cors"`
}

// Console configures the web console: a page agentd serves at /console/
// on listen, from files in its binary, for the people around a
// generation (who approves, who operates, who watches). It calls the same
// API as any client, with the credential its user signs in with.
type Console struct {
	// Enabled serves the console. Unset: served where callers are
	// authenticated (auth.api_keys, auth.oidc or auth.mtls), and on a
	// loopback listen address; not otherwise.
	Enabled *bool `yaml:"enabled" default:"on with authentication, or on loopback"`
	// TraceURL is a trace viewer's address for one trace, with
	// {trace_id} where the trace's id goes, such as
	// https://jaeger.example/trace/{trace_id}: a generation's page links
	// its trace id there. Empty: the id is shown as text.
	TraceURL string `yaml:"trace_url"`
}

// validate checks that trace_url is a web address with a place for the
// trace id: a link the console shows its user must lead to a page, and
// never run a script (javascript:).
func (c Console) validate(bad func(string, ...any)) {
	if c.TraceURL == "" {
		return
	}
	u, err := url.Parse(strings.ReplaceAll(c.TraceURL, "{trace_id}", "0"))
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" || !strings.Contains(c.TraceURL, "{trace_id}") {
		bad("console.trace_url: %q is not an http or https URL with {trace_id} in it, e.g. https://jaeger.example/trace/{trace_id}", c.TraceURL)
	}
}

// Serve reports whether the console is served on a listener whose
// callers are authenticated or not, at a loopback address or not.
func (c Console) Serve(authenticated, loopback bool) bool {
	if c.Enabled != nil {
		return *c.Enabled
	}
	return authenticated || loopback
}

// CORS lets scripts that a browser loaded from other origins call
// agentd. Each origin in allowed_origins is written exactly as a browser
// sends it in Origin, scheme://host[:port] with no path; "*", alone,
// allows every origin, which is safe only where every call needs a
// credential that no other site's script holds. agentd never sends
// Access-Control-Allow-Credentials: a browser attaches no cookie and no
// client certificate to a cross-origin call, and a script authenticates by
// sending "Authorization: Bearer <key or token>" itself.
type CORS struct {
	// AllowedOrigins are the origins whose scripts may call agentd; none
	// allows no cross-origin call.
	AllowedOrigins []string `yaml:"allowed_origins" env:"AGENTD_HTTP_CORS_ALLOWED_ORIGINS"`
}

// validate checks that every allowed origin is one a browser sends.
func (c CORS) validate(bad func(string, ...any)) {
	if slices.Contains(c.AllowedOrigins, "*") && len(c.AllowedOrigins) > 1 {
		bad(`http.cors.allowed_origins: "*" allows every origin; list it alone, or list origins without it`)
	}
	for i, origin := range c.AllowedOrigins {
		if origin != "*" && !isOrigin(origin) {
			bad(`http.cors.allowed_origins[%d]: %q is not an origin: write scheme://host[:port] as a browser sends it, e.g. https://app.example.com, with no path (not even "/")`, i, origin)
		}
	}
}

// isOrigin reports whether s is an origin as a browser serializes one:
// http or https, a host and maybe a port, nothing else.
func isOrigin(s string) bool {
	u, err := url.Parse(s)
	return err == nil && (u.Scheme == "http" || u.Scheme == "https") && u.Host != "" &&
		u.User == nil && u.Path == "" && u.RawQuery == "" && !u.ForceQuery && u.Fragment == "" && u.Opaque == ""
}
