package mcpauth

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"net/url"

	"github.com/coreos/go-oidc/v3/oidc"
	"github.com/go-jose/go-jose/v4"
	"github.com/go-jose/go-jose/v4/jwt"
	"github.com/modelcontextprotocol/go-sdk/oauthex"
	"golang.org/x/oauth2"

	"github.com/agentd/agentd/internal/fault"
)

// jwtBearerGrant is RFC 7523's grant type: a JWT (here the identity
// assertion grant) presented for an access token.
const jwtBearerGrant = "urn:ietf:params:oauth:grant-type:jwt-bearer"

// IdentityProvider is the enterprise identity provider of the
// EnterpriseManaged grant, and the end user's identity there.
type IdentityProvider struct {
	// Issuer is the identity provider's issuer, whose OpenID Connect
	// metadata names its token endpoint; used when TokenEndpoint is empty.
	Issuer string
	// TokenEndpoint is where the ID token is exchanged.
	TokenEndpoint string
	// ClientID and ClientSecret are agentd's client at the identity
	// provider (the secret may be empty: a public client).
	ClientID, ClientSecret string
	// IDToken returns the end user's ID token, read when a grant needs
	// it (a token file may be rotated meanwhile).
	IDToken func() (string, error)
}

// EnterpriseManaged discovers the MCP server's authorization server as
// Begin does, exchanges the end user's ID token at the identity provider
// for an identity assertion grant (ID-JAG) addressed to that
// authorization server and the server's resource, and presents the grant
// there (RFC 7523) as c's client for a token. No person is involved.
func (c *Config) EnterpriseManaged(ctx context.Context, serverURL string, ch Challenge) (*Token, error) {
	idp := c.IdentityProvider
	if err := c.validate(); err != nil {
		return nil, err
	}
	if idp == nil || c.ClientID == "" || idp.ClientID == "" {
		return nil, fault.New(fault.Invalid, "mcpauth: enterprise-managed authorization needs a client ID, and an identity provider with its client ID")
	}
	idToken, err := idp.IDToken()
	if err != nil {
		return nil, err
	}
	d, err := c.discover(ctx, serverURL, ch)
	if err != nil {
		return nil, err
	}
	scopes := d.scopes(c.Scopes)
	grant, err := c.identityAssertion(ctx, idToken, d.as.Issuer, d.resource, scopes)
	if err != nil {
		return nil, err
	}
	cl := clientAuth{id: c.ClientID, secret: c.ClientSecret, method: c.method(d.as.TokenEndpointAuthMethodsSupported)}
	oc, params, err := c.tokenConfig(cl, d.as.TokenEndpoint, d.as.Issuer)
	if err != nil {
		return nil, err
	}
	// The client credentials machinery sends the request: its
	// EndpointParams may name another grant type, as Refresh relies on.
	params.Set("grant_type", jwtBearerGrant)
	params.Set("assertion", grant)
	ot, err := ccConfig(oc, params, scopes).Token(c.ctx(ctx))
	if err != nil {
		return nil, tokenError(err, d.as.TokenEndpoint)
	}
	t := newToken(ot, EnterpriseManaged, scopes, cl, d.as.TokenEndpoint, d.as.Issuer, d.resource)
	t.Identity = IdentityOf(idToken)
	return t, nil
}

// IdentityOf names whose ID token idToken is without holding any of it:
// a hash of its issuer and subject, read without checking its signature
// (the identity provider checks it when it is exchanged). "" when it is
// not a JWT.
func IdentityOf(idToken string) string {
	tok, err := jwt.ParseSigned(idToken, []jose.SignatureAlgorithm{jose.RS256, jose.RS384, jose.RS512, jose.ES256, jose.ES384, jose.ES512, jose.PS256, jose.EdDSA})
	if err != nil {
		return ""
	}
	var c jwt.Claims
	if err := tok.UnsafeClaimsWithoutVerification(&c); err != nil || c.Subject == "" {
		return ""
	}
	sum := sha256.Sum256([]byte(c.Issuer + "\x00" + c.Subject))
	return hex.EncodeToString(sum[:])
}

// identityAssertion exchanges idToken at the identity provider for an
// identity assertion grant for the authorization server audience and the
// resource (RFC 8693, as SEP-990 profiles it), with the go-sdk's exchange.
func (c *Config) identityAssertion(ctx context.Context, idToken, audience, resource string, scopes []string) (string, error) {
	idp := c.IdentityProvider
	endpoint, err := c.idpTokenEndpoint(ctx)
	if err != nil {
		return "", err
	}
	creds := &oauthex.ClientCredentials{ClientID: idp.ClientID}
	if idp.ClientSecret != "" {
		creds.ClientSecretAuth = &oauthex.ClientSecretAuth{ClientSecret: idp.ClientSecret}
	}
	t, err := oauthex.ExchangeToken(ctx, endpoint, &oauthex.TokenExchangeRequest{
		RequestedTokenType: oauthex.TokenTypeIDJAG,
		Audience:           audience,
		Resource:           resource,
		Scope:              scopes,
		SubjectToken:       idToken,
		SubjectTokenType:   oauthex.TokenTypeIDToken,
	}, creds, c.httpClient())
	if err != nil {
		if fromTokenEndpoint(err) {
			return "", tokenError(err, endpoint)
		}
		// The go-sdk's own checks of the request and the response. Its
		// words quote no token.
		return "", fault.Hide(fault.Unauthenticated, err, "mcpauth: identity provider %s did not issue an identity assertion grant", hostOf(endpoint))
	}
	if typ, _ := t.Extra("issued_token_type").(string); typ != oauthex.TokenTypeIDJAG {
		return "", fault.New(fault.Unauthenticated, "mcpauth: identity provider %s issued a %s, not an identity assertion grant", hostOf(endpoint), safeCode(typ))
	}
	return t.AccessToken, nil
}

// idpTokenEndpoint is the identity provider's token endpoint: configured,
// else from its metadata.
func (c *Config) idpTokenEndpoint(ctx context.Context) (string, error) {
	idp := c.IdentityProvider
	if idp.TokenEndpoint != "" {
		return idp.TokenEndpoint, nil
	}
	if idp.Issuer == "" {
		return "", fault.New(fault.Invalid, "mcpauth: the identity provider needs an issuer or a token endpoint")
	}
	// OpenID Connect discovery, which checks the issuer: an identity
	// provider that issues ID tokens publishes it, though not always the
	// PKCE support the go-sdk's metadata fetch insists on.
	p, err := oidc.NewProvider(oidc.ClientContext(ctx, c.httpClient()), idp.Issuer)
	switch {
	case ctx.Err() != nil:
		return "", ctxError(ctx.Err(), hostOf(idp.Issuer))
	case err != nil:
		// go-oidc's error may quote the response; it is kept for logs.
		return "", fault.Hide(fault.Unavailable, err, "mcpauth: no usable OpenID Connect metadata from identity provider %s", hostOf(idp.Issuer))
	case p.Endpoint().TokenURL == "":
		return "", fault.New(fault.Unauthenticated, "mcpauth: identity provider %s publishes no token endpoint", hostOf(idp.Issuer))
	}
	return p.Endpoint().TokenURL, nil
}

// fromTokenEndpoint reports whether err is the token request's own
// failure (refused, failed, unreachable, given up), which tokenError
// classifies, rather than the go-sdk's check of what it sent or got.
func fromTokenEndpoint(err error) bool {
	var re *oauth2.RetrieveError
	var ue *url.Error
	return errors.As(err, &re) || errors.As(err, &ue) || errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded)
}
