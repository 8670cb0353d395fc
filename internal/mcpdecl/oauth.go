package mcpdecl

import (
	"net/url"
	"slices"
	"strings"

	agentdv1 "github.com/agentd/agentd/gen/go/agentd/v1"
	"github.com/agentd/agentd/internal/mcpauth"
)

// The token endpoint authentication methods an oauth block may name, and
// the secret each needs ("" for none).
var authMethods = map[string]string{
	"":                    "",
	"none":                "",
	"client_secret_basic": "client_secret",
	"client_secret_post":  "client_secret",
	"private_key_jwt":     "private_key",
}

// Terms are the words a declaration's problems name its credentials by:
// the request's fields (RequestTerms), or the settings of a server
// registered in the configuration, whose secrets files may hold.
type Terms struct {
	Secret        string // the client secret: "client_secret"
	SecretSetting string // what may set it: "client_secret"
	Key           string // the private key: "private_key"
	// CredentialsGrant names the client credentials grant: "the
	// CLIENT_CREDENTIALS grant".
	CredentialsGrant string
	// EnterpriseGrant names the enterprise-managed grant: "the
	// ENTERPRISE_MANAGED grant".
	EnterpriseGrant string
	// Files lets a secret stand as FromFile: a registered server's
	// secrets may be held in files, read and checked at start.
	Files bool
}

// requestTerms are a request's words; no secret of a request is held in a
// file.
var requestTerms = Terms{
	Secret: "client_secret", SecretSetting: "client_secret", Key: "private_key",
	CredentialsGrant: "the CLIENT_CREDENTIALS grant", EnterpriseGrant: "the ENTERPRISE_MANAGED grant",
}

// FromFile stands, in a declaration made of a registered server's
// settings (Terms.Files), for a secret that a file holds: it counts as
// set, and what the file holds is checked where the file is read.
const FromFile = "\x00held in a file"

// CheckOAuth checks a url server's oauth block, naming credentials in
// terms: agentd presents the tokens it obtains, so no static
// authorization may stand beside it; a secret or key goes with a client
// id, and the token endpoint's method with the secret or key it needs.
func CheckOAuth(p *Problems, decl *agentdv1.MCPServer, terms Terms) {
	o := decl.GetOauth()
	if o == nil {
		return
	}
	if decl.GetAuthorization() != "" {
		p.Add("authorization", "may not be combined with oauth: agentd presents the tokens it obtains")
	}
	for k := range decl.GetHeaders() {
		if strings.EqualFold(k, "Authorization") {
			p.Add("headers", "may not set Authorization with oauth: agentd presents the tokens it obtains")
		}
	}
	checkClient(p, o, terms)
	checkAuthMethod(p, o, terms)
	checkIdentityProvider(p, o, terms)
	if r := o.GetRedirectUrl(); r != "" && !absoluteURL(r) {
		p.Add("oauth.redirect_url", "must be an absolute URL")
	}
	if slices.Contains(o.GetScopes(), "") {
		p.Add("oauth.scopes", "must not hold an empty scope")
	}
}

// checkClient checks the client's identity: a secret or a key, not both,
// with the client id they authenticate.
func checkClient(p *Problems, o *agentdv1.OAuthClient, terms Terms) {
	secret, key := o.GetClientSecret() != "", o.GetPrivateKey() != ""
	if secret && key {
		p.Add("oauth", "%s and %s exclude each other", terms.Secret, terms.Key)
	}
	if key && !(terms.Files && o.GetPrivateKey() == FromFile) {
		if _, err := mcpauth.ParsePrivateKey(o.GetPrivateKey()); err != nil {
			p.Add("oauth.private_key", "must be an RSA or ECDSA P-256 private key in PEM (PKCS#8, PKCS#1 or SEC 1)")
		}
	}
	if (secret || key) && o.GetClientId() == "" {
		p.Add("oauth.client_id", "must be set with %s or %s", terms.Secret, terms.Key)
	}
	if o.GetGrant() == agentdv1.GrantType_GRANT_TYPE_CLIENT_CREDENTIALS && o.GetClientId() == "" {
		p.Add("oauth.client_id", "is required with %s", terms.CredentialsGrant)
	}
}

// checkIdentityProvider checks the enterprise-managed grant's parts: the
// client registered at the MCP server's authorization server, which
// presents the identity assertion grant, and the identity provider's
// endpoints. What the declaration leaves empty comes from the service's
// oauth.identity_provider, which its caller checks.
func checkIdentityProvider(p *Problems, o *agentdv1.OAuthClient, terms Terms) {
	enterprise := o.GetGrant() == agentdv1.GrantType_GRANT_TYPE_ENTERPRISE_MANAGED
	if enterprise && o.GetClientId() == "" {
		p.Add("oauth.client_id", "is required with %s: the client registered at the MCP server's authorization server", terms.EnterpriseGrant)
	}
	idp := o.GetIdentityProvider()
	if idp == nil {
		return
	}
	if !enterprise {
		p.Add("oauth.identity_provider", "applies to %s only", terms.EnterpriseGrant)
	}
	if idp.GetIssuer() != "" && idp.GetTokenEndpoint() != "" {
		p.Add("oauth.identity_provider", "issuer and token_endpoint exclude each other")
	}
	for _, u := range []struct{ field, v string }{{"issuer", idp.GetIssuer()}, {"token_endpoint", idp.GetTokenEndpoint()}} {
		if u.v != "" && !HTTPURL(u.v) {
			p.Add("oauth.identity_provider."+u.field, "must be an absolute http or https URL")
		}
	}
}

// checkAuthMethod checks token_endpoint_auth_method against the secret or
// key it needs.
func checkAuthMethod(p *Problems, o *agentdv1.OAuthClient, terms Terms) {
	m := o.GetTokenEndpointAuthMethod()
	needs, known := authMethods[m]
	switch {
	case !known:
		p.Add("oauth.token_endpoint_auth_method", "must be client_secret_basic, client_secret_post, private_key_jwt or none")
	case needs == "client_secret" && o.GetClientSecret() == "":
		p.Add("oauth.token_endpoint_auth_method", "%s needs %s", m, terms.SecretSetting)
	case needs == "private_key" && o.GetPrivateKey() == "":
		p.Add("oauth.token_endpoint_auth_method", "%s needs %s", m, terms.Key)
	}
}

// HTTPURL reports whether raw is an absolute http or https URL with a
// host: where a Streamable HTTP server can be.
func HTTPURL(raw string) bool {
	u, err := url.Parse(raw)
	return err == nil && (u.Scheme == "http" || u.Scheme == "https") && u.Host != ""
}

// absoluteURL reports whether s is an absolute URL; an http(s) one needs
// a host.
func absoluteURL(s string) bool {
	u, err := url.Parse(s)
	return err == nil && u.IsAbs() && (u.Host != "" || u.Scheme != "http" && u.Scheme != "https")
}
