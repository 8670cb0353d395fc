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

// with is the identity provider of declaration d (nil for none): d's
// fields, each empty one taking the service's. Issuer and token endpoint
// go together: a declaration that names either names the provider.
func (p IdentityProvider) with(d *agentdv1.IdentityProvider) *mcpauth.IdentityProvider {
	out := &mcpauth.IdentityProvider{
		Issuer:        p.Issuer,
		TokenEndpoint: p.TokenEndpoint,
		ClientID:      cmp.Or(d.GetClientId(), p.ClientID),
		ClientSecret:  cmp.Or(d.GetClientSecret(), p.ClientSecret),
		IDToken:       p.idToken,
	}
	if d.GetIssuer() != "" || d.GetTokenEndpoint() != "" {
		out.Issuer, out.TokenEndpoint = d.GetIssuer(), d.GetTokenEndpoint()
	}
	if tok := d.GetIdToken(); tok != "" {
		out.IDToken = func() (string, error) { return tok, nil }
	}
	return out
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
	const service = ", in the declaration or the service's oauth.identity_provider"
	idp, d := c.opts.IdentityProvider.with(o.GetIdentityProvider()), o.GetIdentityProvider()
	if idp.Issuer == "" && idp.TokenEndpoint == "" {
		p.Add("oauth.identity_provider.issuer", "is required (or token_endpoint)%s", service)
	}
	if idp.ClientID == "" {
		p.Add("oauth.identity_provider.client_id", "is required%s", service)
	}
	if d.GetIdToken() == "" && c.opts.IdentityProvider.IDTokenFile == "" {
		p.Add("oauth.identity_provider.id_token", "is required: the end user's ID token (or the service's oauth.identity_provider.id_token_file)")
	}
}
