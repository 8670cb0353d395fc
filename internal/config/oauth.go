package config

import (
	"maps"
	"net/url"
	"slices"
)

// OAuth is how agentd presents itself to the authorization servers of
// the MCP servers it is the OAuth client of: those registered or
// declared with an oauth block. A server's own oauth block
// (client_id, redirect_url) overrides these for that server.
type OAuth struct {
	// RedirectURL is where an authorization server sends the user back
	// after an authorization-code grant: the client application catches
	// the redirect there (agentd generate listens on a loopback one) and
	// answers the authorization request with it. agentd itself serves
	// nothing there.
	RedirectURL string `yaml:"redirect_url" env:"AGENTD_OAUTH_REDIRECT_URL"`
	// ClientMetadataURL is the https URL of agentd's client ID metadata
	// document, which agentd uses as its client_id at authorization
	// servers that accept one (client_id_metadata_document_supported);
	// without it, agentd registers dynamically. The document, served by
	// whoever runs agentd, must list redirect_url.
	ClientMetadataURL string `yaml:"client_metadata_url" env:"AGENTD_OAUTH_CLIENT_METADATA_URL"`
	// ClientName is the client_name agentd registers with dynamically.
	ClientName string `yaml:"client_name" env:"AGENTD_OAUTH_CLIENT_NAME"`
	// IdentityProvider is the enterprise identity provider of the
	// enterprise-managed grant: registered servers of that grant use it,
	// and a request's ENTERPRISE_MANAGED declaration that names no
	// provider of its own takes its issuer and client from it.
	IdentityProvider IdentityProvider `yaml:"identity_provider"`
}

// IdentityProvider is where agentd exchanges an end user's ID token for
// an identity assertion grant (RFC 8693) in the enterprise-managed grant.
type IdentityProvider struct {
	// Issuer is the identity provider's issuer; its token endpoint is read
	// from its OpenID Connect discovery document. Excludes token_endpoint.
	Issuer string `yaml:"issuer" env:"AGENTD_OAUTH_IDENTITY_PROVIDER_ISSUER"`
	// TokenEndpoint is the identity provider's token endpoint, instead of
	// discovering it.
	TokenEndpoint string `yaml:"token_endpoint" env:"AGENTD_OAUTH_IDENTITY_PROVIDER_TOKEN_ENDPOINT"`
	// ClientID is the client agentd is at the identity provider, which
	// the ID tokens are issued to.
	ClientID string `yaml:"client_id" env:"AGENTD_OAUTH_IDENTITY_PROVIDER_CLIENT_ID"`
	// ClientSecretFile names a file holding that client's secret, if it
	// has one.
	ClientSecretFile string `yaml:"client_secret_file" env:"AGENTD_OAUTH_IDENTITY_PROVIDER_CLIENT_SECRET_FILE"`
	// IDTokenFile names a file holding the ID token that registered
	// servers of the enterprise_managed grant present: a workload
	// identity, the same for every generation, read at each grant
	// (whoever writes it may rotate it). A request's server never gets
	// it: a request passes its end user's own.
	IDTokenFile string `yaml:"id_token_file" env:"AGENTD_OAUTH_IDENTITY_PROVIDER_ID_TOKEN_FILE"`
}

// Usable reports whether p names an identity provider and agentd's
// client there; an ID token may still come with each request.
func (p IdentityProvider) Usable() bool {
	return (p.Issuer != "" || p.TokenEndpoint != "") && p.ClientID != ""
}

// validate checks p: URLs where URLs go, one way to the token endpoint.
func (p IdentityProvider) validate(bad func(string, ...any)) {
	const f = "oauth.identity_provider"
	if p.Issuer != "" && p.TokenEndpoint != "" {
		bad("%s: issuer and token_endpoint exclude each other", f)
	}
	for _, u := range []struct{ key, v string }{{"issuer", p.Issuer}, {"token_endpoint", p.TokenEndpoint}} {
		if u.v != "" && !redirectURL(u.v) {
			bad("%s.%s: must be an absolute http or https URL without a fragment", f, u.key)
		}
	}
	if p.ClientSecretFile != "" && p.ClientID == "" {
		bad("%s.client_secret_file: needs client_id", f)
	}
}

// DefaultOAuthRedirectURL is oauth.redirect_url's default.
const DefaultOAuthRedirectURL = "http://127.0.0.1:8976/oauth/callback"

// validate checks o: an absolute redirect URL, and a client metadata URL
// that is https with a path (the CIMD specification's requirement).
func (o OAuth) validate(bad func(string, ...any)) {
	if !redirectURL(o.RedirectURL) {
		bad("oauth.redirect_url: must be an absolute URL without a fragment, got %q", o.RedirectURL)
	}
	if o.ClientMetadataURL != "" && !clientMetadataURL(o.ClientMetadataURL) {
		bad("oauth.client_metadata_url: must be an https URL with a path (not the root) and without a fragment, got %q", o.ClientMetadataURL)
	}
	if o.ClientName == "" {
		bad("oauth.client_name: must not be empty")
	}
	o.IdentityProvider.validate(bad)
}

// redirectURL reports whether raw may be oauth.redirect_url: an absolute
// URL with a host and without a fragment.
func redirectURL(raw string) bool {
	u, err := url.Parse(raw)
	return err == nil && u.IsAbs() && u.Host != "" && u.Fragment == ""
}

// clientMetadataURL reports whether raw may be the URL of a client ID
// metadata document: https, with a host and a path (not the root), and
// neither credentials nor a fragment.
func clientMetadataURL(raw string) bool {
	u, err := url.Parse(raw)
	return err == nil && u.Scheme == "https" && u.Host != "" && u.Path != "" && u.Path != "/" && u.User == nil && u.Fragment == ""
}

// validateEnterpriseServers checks that the registered servers of the
// enterprise_managed grant have an identity provider, and an ID token:
// no request can pass one for a registered server, so it is the file's.
func (c *Config) validateEnterpriseServers(bad func(string, ...any)) {
	idp := c.OAuth.IdentityProvider
	for _, name := range slices.Sorted(maps.Keys(c.Bridge.Servers)) {
		o := c.Bridge.Servers[name].OAuth
		if o == nil || o.Grant != GrantEnterpriseManaged {
			continue
		}
		if !idp.Usable() || idp.IDTokenFile == "" {
			bad("bridge.servers.%s.oauth: the enterprise_managed grant needs oauth.identity_provider with an issuer or token_endpoint, client_id and id_token_file", name)
		}
	}
}
