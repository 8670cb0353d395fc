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

// CheckOAuth checks a url server's oauth block: agentd presents the tokens
// it obtains, so no static authorization may stand beside it; a secret or
// key goes with a client id, and the token endpoint's method with the
// secret or key it needs.
func CheckOAuth(p *Problems, decl *agentdv1.MCPServer) {
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
	checkClient(p, o)
	checkAuthMethod(p, o)
	if r := o.GetRedirectUrl(); r != "" && !AbsoluteURL(r) {
		p.Add("oauth.redirect_url", "must be an absolute URL")
	}
	if slices.Contains(o.GetScopes(), "") {
		p.Add("oauth.scopes", "must not hold an empty scope")
	}
}

// checkClient checks the client's identity: a secret or a key, not both,
// with the client id they authenticate.
func checkClient(p *Problems, o *agentdv1.OAuthClient) {
	secret, key := o.GetClientSecret() != "", o.GetPrivateKey() != ""
	if secret && key {
		p.Add("oauth", "client_secret and private_key exclude each other")
	}
	if key {
		if _, err := mcpauth.ParsePrivateKey(o.GetPrivateKey()); err != nil {
			p.Add("oauth.private_key", "must be an RSA or ECDSA P-256 private key in PEM (PKCS#8, PKCS#1 or SEC 1)")
		}
	}
	if (secret || key) && o.GetClientId() == "" {
		p.Add("oauth.client_id", "must be set with client_secret or private_key")
	}
	if o.GetGrant() == agentdv1.GrantType_GRANT_TYPE_CLIENT_CREDENTIALS && o.GetClientId() == "" {
		p.Add("oauth.client_id", "is required with the CLIENT_CREDENTIALS grant")
	}
}

// checkAuthMethod checks token_endpoint_auth_method against the secret or
// key it needs.
func checkAuthMethod(p *Problems, o *agentdv1.OAuthClient) {
	m := o.GetTokenEndpointAuthMethod()
	needs, known := authMethods[m]
	switch {
	case !known:
		p.Add("oauth.token_endpoint_auth_method", "must be client_secret_basic, client_secret_post, private_key_jwt or none")
	case needs == "client_secret" && o.GetClientSecret() == "":
		p.Add("oauth.token_endpoint_auth_method", "%s needs client_secret", m)
	case needs == "private_key" && o.GetPrivateKey() == "":
		p.Add("oauth.token_endpoint_auth_method", "%s needs private_key", m)
	}
}

// AbsoluteURL reports whether s is an absolute URL; an http(s) one needs
// a host.
func AbsoluteURL(s string) bool {
	u, err := url.Parse(s)
	return err == nil && u.IsAbs() && (u.Host != "" || u.Scheme != "http" && u.Scheme != "https")
}
