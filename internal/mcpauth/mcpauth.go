// Package mcpauth is agentd's OAuth 2.1 client for HTTP MCP servers, as the
// MCP authorization specification (2025-11-25) describes it: discovery of
// the server's protected-resource metadata and its authorization server,
// client registration (client ID metadata document, pre-registration or
// dynamic registration), the authorization code grant with PKCE, resource
// indicators and scope step-up, refresh, the client credentials grant
// with client_secret_basic, client_secret_post or private_key_jwt, and
// enterprise-managed authorization (an identity provider's ID token
// exchanged for an identity assertion grant, RFC 8693, presented as an
// RFC 7523 JWT bearer grant).
//
// The authorization code flow is split in two (Begin, Complete) because a
// person has to visit the authorization URL between them, possibly while
// another agentd process holds the request: everything Complete needs is in
// the JSON-serialisable Pending. Tokens are JSON-serialisable too, carrying
// what a refresh needs, so agentd can store them sealed.
//
// Errors are classified with internal/fault and never carry tokens,
// secrets, codes, verifiers, or the path of the MCP server's URL (which may
// hold a credential); they name hosts only.
package mcpauth

import (
	"context"
	"crypto"
	"crypto/rand"
	"crypto/subtle"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"time"

	"golang.org/x/oauth2"

	"github.com/agentd/agentd/internal/fault"
)

// Grant is the OAuth grant a Config uses.
type Grant int

const (
	// AuthorizationCode sends a person to the authorization server (Begin,
	// Complete).
	AuthorizationCode Grant = iota
	// ClientCredentials authenticates agentd itself, with no person
	// involved (Config.ClientCredentials).
	ClientCredentials
	// EnterpriseManaged exchanges the end user's ID token from an
	// enterprise identity provider for an identity assertion grant, and
	// that for a token, with no person involved (Config.EnterpriseManaged).
	EnterpriseManaged
)

// Token endpoint client authentication methods (RFC 7591 names).
const (
	MethodBasic         = "client_secret_basic"
	MethodPost          = "client_secret_post"
	MethodPrivateKeyJWT = "private_key_jwt"
	MethodNone          = "none"
)

// Config is how agentd authorizes to one MCP server. Its methods do not
// modify it and may be called concurrently.
type Config struct {
	Grant Grant
	// ClientID is a pre-registered client; "" means a client ID metadata
	// document (when ClientMetadataURL is set and the authorization server
	// supports them) or dynamic registration.
	ClientID     string
	ClientSecret string
	// PrivateKey authenticates the client with private_key_jwt (RS256 for
	// RSA keys, ES256 for P-256 keys); see ParsePrivateKey.
	PrivateKey crypto.Signer
	// KeyID is the "kid" header of private_key_jwt assertions, if set.
	KeyID string
	// Scopes are asked for in every request, together with the scopes of
	// the server's challenge; when both are empty, the server's
	// scopes_supported are asked for.
	Scopes []string
	// AuthMethod is the token endpoint authentication method: "" chooses
	// private_key_jwt when PrivateKey is set, else none without a secret,
	// else client_secret_post or client_secret_basic, as the authorization
	// server advertises (basic when it advertises neither).
	AuthMethod string
	// RedirectURL is where the authorization server sends the person back
	// (authorization code grant only).
	RedirectURL string
	// ClientMetadataURL is agentd's client ID metadata document (an https
	// URL with a path); "" means agentd does not offer one.
	ClientMetadataURL string
	// ClientName is the client_name of dynamic registrations ("agentd"
	// when empty).
	ClientName string
	// IdentityProvider is where the EnterpriseManaged grant exchanges the
	// end user's ID token.
	IdentityProvider *IdentityProvider
	// HTTPClient makes every request; nil means http.DefaultClient.
	HTTPClient *http.Client
}

// Challenge is what an MCP server answered with when it refused a request:
// the HTTP status (401 or 403) and its WWW-Authenticate header values.
// The zero Challenge is fine for a first authorization without a refusal.
type Challenge struct {
	Status          int
	WWWAuthenticate []string
}

// StepUp reports whether the challenge asks for more scopes than the token
// had (403 with error="insufficient_scope"): authorize again with the union
// of the granted scopes and the challenge's.
func (c Challenge) StepUp() bool {
	return c.Status == http.StatusForbidden && bearerParam(c.parse(), "error") == "insufficient_scope"
}

// Scopes are the scopes the challenge asks for (its Bearer scope
// parameter) as a set: sorted, each once.
func (c Challenge) Scopes() []string {
	s := strings.Fields(bearerParam(c.parse(), "scope"))
	// The server's text, bound before it names anything in errors and
	// checkpoints: a scope agentd would not repeat reads "(invalid)".
	s = s[:min(len(s), maxChallengeScopes)]
	for i := range s {
		s[i] = safeCode(s[i])
	}
	slices.Sort(s)
	return slices.Compact(s)
}

// maxChallengeScopes bounds the scopes a challenge is taken to ask.
const maxChallengeScopes = 32

// Token is an access token with what it takes to refresh it. It is
// JSON-serialisable and holds secrets: store it sealed.
type Token struct {
	AccessToken  string    `json:"access_token"`
	TokenType    string    `json:"token_type,omitempty"`
	RefreshToken string    `json:"refresh_token,omitempty"`
	Expiry       time.Time `json:"expiry,omitzero"`
	// Scopes are the scopes granted: the token response's scope, else the
	// scopes asked for.
	Scopes []string `json:"scopes,omitempty"`
	// Grant is the grant that produced the token; a client credentials
	// token without a refresh token is renewed by a new grant.
	Grant    Grant  `json:"grant,omitempty"`
	TokenURL string `json:"token_url"`
	Issuer   string `json:"issuer,omitempty"`
	// Resource is the RFC 8707 resource indicator the token is for.
	Resource string `json:"resource,omitempty"`
	// Identity is whose ID token an enterprise-managed grant exchanged
	// for the token (IdentityOf), so that another's is never presented
	// in its place.
	Identity string `json:"identity,omitempty"`
	// The client that got the token (a dynamically registered one's too).
	ClientID     string `json:"client_id"`
	ClientSecret string `json:"client_secret,omitempty"`
	AuthMethod   string `json:"auth_method,omitempty"`
}

// Authorization is the value of the Authorization header that presents t.
func (t *Token) Authorization() string { return "Bearer " + t.AccessToken }

// Fresh reports whether t does not expire within a minute of now. A token
// without an expiry is fresh until a server refuses it.
func (t *Token) Fresh(now time.Time) bool {
	return t.Expiry.IsZero() || now.Add(time.Minute).Before(t.Expiry)
}

// Pending is an authorization code flow between Begin and Complete. Send
// the person to AuthURL; the rest is what Complete needs, serialisable as
// JSON. It holds secrets (state, verifier, client secret): store it sealed.
type Pending struct {
	AuthURL string   `json:"auth_url"`
	Scopes  []string `json:"scopes,omitempty"`

	State    string `json:"state"`
	Verifier string `json:"verifier"`
	TokenURL string `json:"token_url"`
	Issuer   string `json:"issuer"`
	// IssSupported says the authorization server promised RFC 9207's iss
	// parameter in its redirects, so a redirect without it is refused.
	IssSupported bool   `json:"iss_supported,omitempty"`
	ClientID     string `json:"client_id"`
	ClientSecret string `json:"client_secret,omitempty"`
	AuthMethod   string `json:"auth_method"`
	Resource     string `json:"resource"`
	RedirectURL  string `json:"redirect_url"`
}

// Begin discovers the MCP server's authorization server, registers agentd
// with it if needed, and returns the authorization URL to send the person
// to. serverURL is the MCP endpoint; ch is the server's refusal (zero if
// none); granted are the scopes of the token the server refused, kept in
// the new request so that a step-up does not lose them.
func (c *Config) Begin(ctx context.Context, serverURL string, ch Challenge, granted []string) (*Pending, error) {
	if c.Grant != AuthorizationCode {
		return nil, fault.New(fault.Invalid, "mcpauth: Begin needs the authorization code grant")
	}
	if err := c.validate(); err != nil {
		return nil, err
	}
	if c.RedirectURL == "" {
		return nil, fault.New(fault.Invalid, "mcpauth: the authorization code grant needs a redirect URL")
	}
	d, err := c.discover(ctx, serverURL, ch)
	if err != nil {
		return nil, err
	}
	if d.as.AuthorizationEndpoint == "" {
		return nil, fault.New(fault.Unauthenticated, "mcpauth: authorization server %s has no authorization endpoint", hostOf(d.as.Issuer))
	}
	cl, err := c.client(ctx, d)
	if err != nil {
		return nil, err
	}
	scopes := union(granted, d.requestScopes(c.Scopes))

	p := &Pending{
		Scopes:       scopes,
		State:        rand.Text(),
		Verifier:     oauth2.GenerateVerifier(),
		TokenURL:     d.as.TokenEndpoint,
		Issuer:       d.as.Issuer,
		IssSupported: d.as.AuthorizationResponseIssParameterSupported,
		ClientID:     cl.id,
		ClientSecret: cl.secret,
		AuthMethod:   cl.method,
		Resource:     d.resource,
		RedirectURL:  c.RedirectURL,
	}
	oc := oauth2.Config{
		ClientID:    cl.id,
		Endpoint:    oauth2.Endpoint{AuthURL: d.as.AuthorizationEndpoint},
		RedirectURL: c.RedirectURL,
		Scopes:      scopes,
	}
	p.AuthURL = oc.AuthCodeURL(p.State, oauth2.S256ChallengeOption(p.Verifier), oauth2.SetAuthURLParam("resource", d.resource))
	return p, nil
}

// requestScopes are the scopes to ask for (d.scopes of configured), with
// offline_access when the server grants refresh tokens for it (SEP-2207:
// agentd wants refresh tokens).
func (d *discovery) requestScopes(configured []string) []string {
	scopes := d.scopes(configured)
	if slices.Contains(d.as.ScopesSupported, "offline_access") && !slices.Contains(scopes, "offline_access") {
		scopes = append(scopes, "offline_access")
	}
	return scopes
}

// Complete finishes the flow p began: it reads the code, state, iss and
// error parameters of redirectURL (where the authorization server sent the
// person back), checks the state and issuer, and exchanges the code, with
// the PKCE verifier and the resource indicator, for a token.
func (c *Config) Complete(ctx context.Context, p *Pending, redirectURL string) (*Token, error) {
	code, err := p.code(redirectURL)
	if err != nil {
		return nil, err
	}
	cl := clientAuth{id: p.ClientID, secret: p.ClientSecret, method: p.AuthMethod}
	oc, params, err := c.tokenConfig(cl, p.TokenURL, p.Issuer)
	if err != nil {
		return nil, err
	}
	oc.RedirectURL = p.RedirectURL
	opts := []oauth2.AuthCodeOption{oauth2.VerifierOption(p.Verifier), oauth2.SetAuthURLParam("resource", p.Resource)}
	for k, v := range params {
		opts = append(opts, oauth2.SetAuthURLParam(k, v[0]))
	}
	ot, err := oc.Exchange(c.ctx(ctx), code, opts...)
	if err != nil {
		return nil, tokenError(err, p.TokenURL)
	}
	return newToken(ot, AuthorizationCode, p.Scopes, cl, p.TokenURL, p.Issuer, p.Resource), nil
}

// code reads the code of the redirect to redirectURL, once its state,
// error and issuer are checked.
func (p *Pending) code(redirectURL string) (string, error) {
	u, err := url.Parse(redirectURL)
	if err != nil {
		return "", fault.New(fault.Unauthenticated, "mcpauth: the authorization redirect is not a URL")
	}
	q := u.Query()
	// The state comes first: an error response for somebody else's flow
	// says nothing about ours.
	if subtle.ConstantTimeCompare([]byte(q.Get("state")), []byte(p.State)) != 1 || p.State == "" {
		return "", fault.New(fault.Unauthenticated, "mcpauth: the authorization redirect's state does not match the request's")
	}
	if e := q.Get("error"); e != "" {
		return "", fault.New(fault.Unauthenticated, "mcpauth: authorization server %s refused the authorization (%s)", hostOf(p.Issuer), safeCode(e)).
			WithInfo("OAUTH_REFUSED", map[string]string{"error": safeCode(e)})
	}
	if err := p.checkIss(q.Get("iss")); err != nil {
		return "", err
	}
	code := q.Get("code")
	if code == "" {
		return "", fault.New(fault.Unauthenticated, "mcpauth: the authorization redirect has no code")
	}
	return code, nil
}

// checkIss checks the redirect's iss (RFC 9207): one that is there must
// be the issuer's; one that was promised must be there.
func (p *Pending) checkIss(iss string) error {
	switch {
	case iss == "" && p.IssSupported:
		return fault.New(fault.Unauthenticated, "mcpauth: the authorization redirect has no iss though authorization server %s promised it", hostOf(p.Issuer))
	case iss != "" && iss != p.Issuer:
		return fault.New(fault.Unauthenticated, "mcpauth: the authorization redirect's iss is not authorization server %s", hostOf(p.Issuer))
	}
	return nil
}

// ClientCredentials discovers the MCP server's authorization server as Begin
// does and gets a token for agentd itself with the client credentials grant.
func (c *Config) ClientCredentials(ctx context.Context, serverURL string, ch Challenge) (*Token, error) {
	if err := c.validate(); err != nil {
		return nil, err
	}
	if c.ClientID == "" {
		return nil, fault.New(fault.Invalid, "mcpauth: the client credentials grant needs a client ID")
	}
	d, err := c.discover(ctx, serverURL, ch)
	if err != nil {
		return nil, err
	}
	cl := clientAuth{id: c.ClientID, secret: c.ClientSecret, method: c.method(d.as.TokenEndpointAuthMethodsSupported)}
	if cl.method == MethodNone {
		return nil, fault.New(fault.Invalid, "mcpauth: the client credentials grant needs a client secret or a private key")
	}
	return c.clientCredentials(ctx, cl, d.as.TokenEndpoint, d.as.Issuer, d.resource, d.scopes(c.Scopes))
}

// Refresh renews t: with its refresh token (keeping it when the server
// does not rotate it), or, for a client credentials token without one, with
// a new client credentials grant for the same scopes. The client is t's;
// c gives only the private key (for private_key_jwt) and the HTTP client.
func (c *Config) Refresh(ctx context.Context, t *Token) (*Token, error) {
	cl := clientAuth{id: t.ClientID, secret: t.ClientSecret, method: t.AuthMethod}
	if t.RefreshToken == "" {
		if t.Grant == ClientCredentials {
			return c.clientCredentials(ctx, cl, t.TokenURL, t.Issuer, t.Resource, t.Scopes)
		}
		return nil, fault.New(fault.Unauthenticated, "mcpauth: the token for %s has no refresh token; authorize again", hostOf(t.Resource))
	}
	oc, params, err := c.tokenConfig(cl, t.TokenURL, t.Issuer)
	if err != nil {
		return nil, err
	}
	// oauth2's own refresh cannot send RFC 8707's resource, so the request
	// goes through the client credentials machinery, whose EndpointParams
	// may name another grant type.
	params.Set("grant_type", "refresh_token")
	params.Set("refresh_token", t.RefreshToken)
	if t.Resource != "" {
		params.Set("resource", t.Resource)
	}
	ot, err := ccConfig(oc, params, nil).Token(c.ctx(ctx))
	if err != nil {
		return nil, tokenError(err, t.TokenURL)
	}
	nt := newToken(ot, t.Grant, t.Scopes, cl, t.TokenURL, t.Issuer, t.Resource)
	if nt.RefreshToken == "" {
		nt.RefreshToken = t.RefreshToken
	}
	return nt, nil
}

func (c *Config) clientCredentials(ctx context.Context, cl clientAuth, tokenURL, issuer, resource string, scopes []string) (*Token, error) {
	oc, params, err := c.tokenConfig(cl, tokenURL, issuer)
	if err != nil {
		return nil, err
	}
	if resource != "" {
		params.Set("resource", resource)
	}
	ot, err := ccConfig(oc, params, scopes).Token(c.ctx(ctx))
	if err != nil {
		return nil, tokenError(err, tokenURL)
	}
	return newToken(ot, ClientCredentials, scopes, cl, tokenURL, issuer, resource), nil
}

func (c *Config) validate() error {
	if err := c.validateMethod(); err != nil {
		return err
	}
	if c.ClientMetadataURL != "" && !httpsWithPath(c.ClientMetadataURL) {
		return fault.New(fault.Invalid, "mcpauth: the client ID metadata document URL must be https with a path")
	}
	return nil
}

// httpsWithPath reports whether raw is an https URL with a host and a
// path, as a client ID metadata document URL must be.
func httpsWithPath(raw string) bool {
	u, err := url.Parse(raw)
	return err == nil && u.Scheme == "https" && u.Host != "" && strings.Trim(u.Path, "/") != ""
}

// validateMethod refuses an unknown token endpoint authentication method,
// and private_key_jwt without a key.
func (c *Config) validateMethod() error {
	switch c.AuthMethod {
	case "", MethodBasic, MethodPost, MethodNone:
	case MethodPrivateKeyJWT:
		if c.PrivateKey == nil {
			return fault.New(fault.Invalid, "mcpauth: private_key_jwt needs a private key")
		}
	default:
		return fault.New(fault.Invalid, "mcpauth: unknown token endpoint authentication method %q", safeCode(c.AuthMethod))
	}
	return nil
}

func (c *Config) httpClient() *http.Client {
	if c.HTTPClient != nil {
		return c.HTTPClient
	}
	return http.DefaultClient
}

// ctx carries the HTTP client to oauth2, which takes it from the context.
func (c *Config) ctx(ctx context.Context) context.Context {
	return context.WithValue(ctx, oauth2.HTTPClient, c.httpClient())
}

func newToken(ot *oauth2.Token, g Grant, asked []string, cl clientAuth, tokenURL, issuer, resource string) *Token {
	t := &Token{
		AccessToken:  ot.AccessToken,
		TokenType:    ot.TokenType,
		RefreshToken: ot.RefreshToken,
		Expiry:       ot.Expiry,
		Scopes:       slices.Clone(asked),
		Grant:        g,
		TokenURL:     tokenURL,
		Issuer:       issuer,
		Resource:     resource,
		ClientID:     cl.id,
		ClientSecret: cl.secret,
		AuthMethod:   cl.method,
	}
	if s, ok := ot.Extra("scope").(string); ok && s != "" {
		t.Scopes = strings.Fields(s)
	}
	return t
}

// union is a's scopes followed by b's that a lacks.
func union(a, b []string) []string {
	out := slices.Clone(a)
	for _, s := range b {
		if !slices.Contains(out, s) {
			out = append(out, s)
		}
	}
	return out
}

// hostOf is the host of a URL, the only part of it errors may name.
func hostOf(raw string) string {
	u, err := url.Parse(raw)
	if err != nil || u.Host == "" {
		return "(unknown host)"
	}
	return u.Host
}

// safeCode bounds an OAuth error code or other short token from a peer
// before it goes into an error message.
func safeCode(s string) string {
	if len(s) > 64 || strings.IndexFunc(s, unsafeInCode) >= 0 {
		return "(invalid)"
	}
	return s
}

// unsafeInCode reports whether r may not appear in a code safeCode
// passes: anything but printable ASCII, and quotes and backslashes.
func unsafeInCode(r rune) bool {
	return r <= ' ' || r > '~' || r == '"' || r == '\\'
}
