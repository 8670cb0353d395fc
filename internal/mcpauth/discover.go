package mcpauth

import (
	"cmp"
	"context"
	"errors"
	"net/url"
	"regexp"
	"slices"
	"strings"

	"github.com/modelcontextprotocol/go-sdk/auth"
	"github.com/modelcontextprotocol/go-sdk/oauthex"

	"github.com/agentd/agentd/internal/fault"
)

// discovery is what the MCP server and its authorization server said about
// themselves.
type discovery struct {
	resource        string // the RFC 8707 resource indicator
	scopesSupported []string
	challenge       []string // the challenge's scope
	as              *oauthex.AuthServerMeta
}

// scopes is what to ask for: explicit scopes with the challenge's, else the
// resource's scopes_supported (the spec's scope selection strategy).
func (d *discovery) scopes(explicit []string) []string {
	if s := union(explicit, d.challenge); len(s) > 0 {
		return s
	}
	return slices.Clone(d.scopesSupported)
}

func (c Challenge) parse() []oauthex.Challenge {
	// A malformed header is as good as none: discovery goes on with the
	// well-known locations.
	cs, _ := oauthex.ParseWWWAuthenticate(c.WWWAuthenticate)
	return cs
}

func bearerParam(cs []oauthex.Challenge, key string) string {
	for _, ch := range cs {
		if ch.Scheme == "bearer" && ch.Params[key] != "" {
			return ch.Params[key]
		}
	}
	return ""
}

// discover finds the protected-resource metadata (the challenge's
// resource_metadata, then the well-known location under the server's path,
// then the root one) and the authorization server's metadata. A server
// without protected-resource metadata is a 2025-03-26 one: its origin is
// its authorization server. An authorization server without metadata gets
// the 2025-03-26 default endpoints.
func (c *Config) discover(ctx context.Context, serverURL string, ch Challenge) (*discovery, error) {
	su, err := url.Parse(serverURL)
	if err != nil || (su.Scheme != "https" && su.Scheme != "http") || su.Host == "" {
		return nil, fault.New(fault.Invalid, "mcpauth: the MCP server URL must be an http or https URL")
	}
	cs := ch.parse()
	d := &discovery{challenge: strings.Fields(bearerParam(cs, "scope")), resource: serverURL}
	origin := url.URL{Scheme: su.Scheme, Host: su.Host}
	prm, err := c.resourceMetadata(ctx, resourceCandidates(su, serverURL, cs), su.Host)
	if err != nil {
		return nil, err
	}
	asURL := origin.String()
	if prm != nil {
		if len(prm.AuthorizationServers) == 0 {
			return nil, fault.New(fault.Unauthenticated, "mcpauth: the protected-resource metadata of %s names no authorization server", su.Host)
		}
		asURL = prm.AuthorizationServers[0]
		d.resource = prm.Resource
		d.scopesSupported = prm.ScopesSupported
	}
	if d.as, err = c.authServer(ctx, asURL); err != nil {
		return nil, err
	}
	return d, nil
}

// resourceCandidate is a place to look for protected-resource metadata,
// and the resource it must name.
type resourceCandidate struct{ metadata, resource string }

// resourceCandidates are where the protected-resource metadata of the
// server at su (serverURL) may be, in the order they are tried: the
// challenge's resource_metadata, the well-known location under the
// server's path, the root one.
func resourceCandidates(su *url.URL, serverURL string, cs []oauthex.Challenge) []resourceCandidate {
	origin := url.URL{Scheme: su.Scheme, Host: su.Host}
	var cands []resourceCandidate
	if m := bearerParam(cs, "resource_metadata"); m != "" {
		cands = append(cands, resourceCandidate{m, serverURL})
	}
	if p := strings.Trim(su.Path, "/"); p != "" {
		cands = append(cands, resourceCandidate{origin.String() + "/.well-known/oauth-protected-resource/" + p, serverURL})
	}
	return append(cands, resourceCandidate{origin.String() + "/.well-known/oauth-protected-resource", origin.String()})
}

// resourceMetadata is the first of cands' metadata that can be had; nil
// when none can (a 2025-03-26 server). A location that fails (absent,
// wrong resource, bad JSON) is skipped, as the spec's ordered discovery
// asks; but when none is usable and one named another resource, the
// server has metadata that agentd must not use (RFC 9728), and going on
// as for a server without any would end in a registration that fails
// for reasons nobody could tell: that is said instead.
func (c *Config) resourceMetadata(ctx context.Context, cands []resourceCandidate, host string) (*oauthex.ProtectedResourceMetadata, error) {
	named := ""
	for _, cand := range cands {
		if err := ctx.Err(); err != nil {
			return nil, ctxError(err, host)
		}
		m, err := oauthex.GetProtectedResourceMetadata(ctx, cand.metadata, cand.resource, c.httpClient())
		if err == nil && m != nil {
			return m, nil
		}
		if r, ok := otherResource(err); ok && named == "" {
			named = r
		}
	}
	if named != "" {
		return nil, fault.New(fault.Unauthenticated,
			"mcpauth: the protected-resource metadata of %s names a resource at %s other than this server's URL, so it cannot be used (RFC 9728)", host, hostOf(named))
	}
	return nil, nil
}

// The go-sdk's words for metadata that names another resource, and for
// authorization server metadata whose issuer is not the one asked.
var (
	otherResourceText = regexp.MustCompile(`got metadata resource "([^"]*)", want`)
	otherIssuerText   = regexp.MustCompile(`metadata issuer "([^"]*)" does not match issuer URL "([^"]*)"`)
)

// otherResource is the resource that protected-resource metadata named
// instead of the server's, when err says that is why it was refused.
func otherResource(err error) (string, bool) {
	if err == nil {
		return "", false
	}
	m := otherResourceText.FindStringSubmatch(err.Error())
	if m == nil {
		return "", false
	}
	return m[1], true
}

// authServer is the metadata of the authorization server at asURL, or
// the 2025-03-26 default endpoints when it has none; it must have a
// token endpoint.
func (c *Config) authServer(ctx context.Context, asURL string) (*oauthex.AuthServerMeta, error) {
	as, err := auth.GetAuthServerMetadata(ctx, asURL, c.httpClient())
	if err != nil {
		if ctx.Err() != nil {
			return nil, ctxError(ctx.Err(), hostOf(asURL))
		}
		if m := otherIssuerText.FindStringSubmatch(err.Error()); m != nil {
			// RFC 8414: the metadata must name the issuer it was asked
			// for. Issuers are public identifiers.
			return nil, fault.New(fault.Unauthenticated,
				"mcpauth: the metadata of authorization server %s names the issuer %q, not %q as it must (RFC 8414)", hostOf(asURL), m[1], m[2])
		}
		// The go-sdk's error may quote metadata URLs; keep it for logs only.
		return nil, fault.Hide(fault.Unavailable, err, "mcpauth: no usable metadata from authorization server %s", hostOf(asURL))
	}
	if as == nil {
		base := strings.TrimSuffix(asURL, "/")
		as = &oauthex.AuthServerMeta{
			Issuer:                asURL,
			AuthorizationEndpoint: base + "/authorize",
			TokenEndpoint:         base + "/token",
			RegistrationEndpoint:  base + "/register",
		}
	}
	if as.TokenEndpoint == "" {
		return nil, fault.New(fault.Unauthenticated, "mcpauth: authorization server %s has no token endpoint", hostOf(asURL))
	}
	return as, nil
}

// clientAuth is the client agentd is at one authorization server.
type clientAuth struct{ id, secret, method string }

// client chooses how agentd identifies itself to the authorization server:
// its client ID metadata document when the server supports them, else the
// pre-registered client, else a dynamic registration.
func (c *Config) client(ctx context.Context, d *discovery) (clientAuth, error) {
	supported := d.as.TokenEndpointAuthMethodsSupported
	switch {
	case c.ClientMetadataURL != "" && d.as.ClientIDMetadataDocumentSupported:
		return clientAuth{id: c.ClientMetadataURL, method: MethodNone}, nil
	case c.ClientID != "":
		return clientAuth{id: c.ClientID, secret: c.ClientSecret, method: c.method(supported)}, nil
	case d.as.RegistrationEndpoint != "":
	default:
		return clientAuth{}, fault.New(fault.Unauthenticated, "mcpauth: authorization server %s offers no way to register agentd (no client ID metadata documents, no dynamic registration) and no client ID is configured", hostOf(d.as.Issuer))
	}
	return c.register(ctx, d.as.RegistrationEndpoint, supported)
}

// register registers agentd at the registration endpoint, asking for the
// first of basic and post the server supports (none otherwise).
func (c *Config) register(ctx context.Context, endpoint string, supported []string) (clientAuth, error) {
	asked := MethodNone
	for _, m := range []string{MethodBasic, MethodPost} {
		if slices.Contains(supported, m) {
			asked = m
			break
		}
	}
	meta := &oauthex.ClientRegistrationMetadata{
		RedirectURIs:            []string{c.RedirectURL},
		TokenEndpointAuthMethod: asked,
		GrantTypes:              []string{"authorization_code", "refresh_token"},
		ResponseTypes:           []string{"code"},
		ClientName:              cmp.Or(c.ClientName, "agentd"),
	}
	reg, err := oauthex.RegisterClient(ctx, endpoint, meta, c.httpClient())
	if err != nil {
		return clientAuth{}, registrationError(ctx, err, endpoint)
	}
	cl := clientAuth{id: reg.ClientID, secret: reg.ClientSecret, method: reg.TokenEndpointAuthMethod}
	if cl.method == "" {
		cl.method = acceptedMethod(asked, cl.secret)
	}
	return cl, nil
}

// acceptedMethod is the method of a registration whose answer left it
// out: RFC 7591 lets the server leave out what it accepted as asked. A
// client without a secret can only be none, one with a secret asked for
// none is basic.
func acceptedMethod(asked, secret string) string {
	switch {
	case secret == "":
		return MethodNone
	case asked == MethodNone:
		return MethodBasic
	}
	return asked
}

// registrationError is the fault of a failed registration at endpoint.
func registrationError(ctx context.Context, err error, endpoint string) error {
	if ctx.Err() != nil {
		return ctxError(ctx.Err(), hostOf(endpoint))
	}
	var re *oauthex.ClientRegistrationError
	if errors.As(err, &re) {
		return fault.Hide(fault.Unauthenticated, err, "mcpauth: authorization server %s refused to register agentd (%s)", hostOf(endpoint), safeCode(re.ErrorCode))
	}
	// The go-sdk's error may quote the response body, which may hold a
	// client secret.
	return fault.Hide(fault.Unavailable, err, "mcpauth: dynamic registration at %s failed", hostOf(endpoint))
}

// method is the token endpoint authentication method of a configured
// client, given what the authorization server supports.
func (c *Config) method(supported []string) string {
	switch {
	case c.AuthMethod != "":
		return c.AuthMethod
	case c.PrivateKey != nil:
		return MethodPrivateKeyJWT
	case c.ClientSecret == "":
		return MethodNone
	case slices.Contains(supported, MethodPost) && !slices.Contains(supported, MethodBasic):
		return MethodPost
	}
	// RFC 6749 requires basic of every server that takes secrets.
	return MethodBasic
}

func ctxError(err error, host string) error {
	if errors.Is(err, context.DeadlineExceeded) {
		return fault.Hide(fault.Timeout, err, "mcpauth: authorization with %s timed out", host)
	}
	return fault.Hide(fault.Canceled, err, "mcpauth: authorization with %s canceled", host)
}
