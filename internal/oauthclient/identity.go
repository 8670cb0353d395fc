package oauthclient

import (
	"cmp"
	"os"
	"strings"

	agentdv1 "github.com/agentd/agentd/gen/go/agentd/v1"
	"github.com/agentd/agentd/internal/fault"
	"github.com/agentd/agentd/internal/mcpauth"
	"github.com/agentd/agentd/internal/mcpdecl"
)

// IdentityProvider is the service's enterprise identity provider
// (oauth.identity_provider): what an ENTERPRISE_MANAGED declaration
// leaves empty.
type IdentityProvider struct {
	Issuer, TokenEndpoint, ClientID, ClientSecret string
	// IDTokenFile holds the ID token presented when a declaration passes
	// none: a workload identity, read at each grant, since whoever
	// writes it rotates it.
	IDTokenFile string
}

// with is the identity provider of declaration d (nil for none). A
// declaration that names a provider of its own (an issuer or a token
// endpoint) takes nothing from the service's: the service's client secret
// goes to the service's provider alone. Otherwise each empty field takes
// the service's. The ID token is d's; the service's file (a workload
// identity) stands in only for a server the configuration registers
// (registered), never for one a request declares.
func (p IdentityProvider) with(d *agentdv1.IdentityProvider, registered bool) *mcpauth.IdentityProvider {
	out := &mcpauth.IdentityProvider{Issuer: d.GetIssuer(), TokenEndpoint: d.GetTokenEndpoint(), ClientID: d.GetClientId(), ClientSecret: d.GetClientSecret()}
	if !ownProvider(d) {
		out.Issuer, out.TokenEndpoint = p.Issuer, p.TokenEndpoint
		out.ClientID, out.ClientSecret = cmp.Or(d.GetClientId(), p.ClientID), cmp.Or(d.GetClientSecret(), p.ClientSecret)
	}
	switch tok := d.GetIdToken(); {
	case tok != "":
		out.IDToken = func() (string, error) { return tok, nil }
	case registered:
		out.IDToken = p.idToken
	default:
		out.IDToken = func() (string, error) {
			return "", fault.New(fault.Invalid, "the ENTERPRISE_MANAGED grant of a request's server needs the end user's ID token: identity_provider.id_token")
		}
	}
	return out
}

// ownProvider reports whether d names an identity provider of its own.
func ownProvider(d *agentdv1.IdentityProvider) bool {
	return d.GetIssuer() != "" || d.GetTokenEndpoint() != ""
}

// idToken reads the ID token file. Its errors name the setting, never
// what the file holds.
func (p IdentityProvider) idToken() (string, error) {
	if p.IDTokenFile == "" {
		return "", fault.New(fault.Invalid, "the ENTERPRISE_MANAGED grant needs the end user's ID token: pass identity_provider.id_token, or set oauth.identity_provider.id_token_file")
	}
	b, err := os.ReadFile(p.IDTokenFile)
	if err != nil {
		return "", fault.Hide(fault.FailedPrecondition, err, "the ID token file of oauth.identity_provider.id_token_file cannot be read")
	}
	tok := strings.TrimSpace(string(b))
	if tok == "" {
		return "", fault.New(fault.FailedPrecondition, "the ID token file of oauth.identity_provider.id_token_file is empty")
	}
	return tok, nil
}

// CheckIdentity adds to p what an ENTERPRISE_MANAGED declaration o lacks
// once the service's oauth.identity_provider fills its empty fields: the
// identity provider, agentd's client there, and an ID token. Other
// grants lack nothing here.
func (c *Client) CheckIdentity(p *mcpdecl.Problems, o *agentdv1.OAuthClient) {
	if o.GetGrant() != agentdv1.GrantType_GRANT_TYPE_ENTERPRISE_MANAGED {
		return
	}
	service := ", in the declaration or the service's oauth.identity_provider"
	d := o.GetIdentityProvider()
	if ownProvider(d) {
		service = ": a declaration that names its own identity provider takes nothing from the service's"
	}
	idp := c.opts.IdentityProvider.with(d, false)
	if idp.Issuer == "" && idp.TokenEndpoint == "" {
		p.Add("oauth.identity_provider.issuer", "is required (or token_endpoint)%s", service)
	}
	if idp.ClientID == "" {
		p.Add("oauth.identity_provider.client_id", "is required%s", service)
	}
	if d.GetIdToken() == "" {
		p.Add("oauth.identity_provider.id_token", "is required: the end user's ID token (the service's oauth.identity_provider.id_token_file serves the servers registered under bridge.servers only)")
	}
}
