package config

import "net/url"

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
