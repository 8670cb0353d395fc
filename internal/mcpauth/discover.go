package mcpauth

import (
	"context"
	"errors"
	"net/url"
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
	host := su.Host
	cs := ch.parse()
	d := &discovery{challenge: strings.Fields(bearerParam(cs, "scope"))}

	origin := url.URL{Scheme: su.Scheme, Host: su.Host}
	type candidate struct{ metadata, resource string }
	var cands []candidate
	if m := bearerParam(cs, "resource_metadata"); m != "" {
		cands = append(cands, candidate{m, serverURL})
	}
	if p := strings.Trim(su.Path, "/"); p != "" {
		cands = append(cands, candidate{origin.String() + "/.well-known/oauth-protected-resource/" + p, serverURL})
	}
	cands = append(cands, candidate{origin.String() + "/.well-known/oauth-protected-resource", origin.String()})

	var prm *oauthex.ProtectedResourceMetadata
	for _, cand := range cands {
		if err := ctx.Err(); err != nil {
			return nil, ctxError(err, host)
		}
		// A location that fails (absent, wrong resource, bad JSON) is
		// skipped, as the spec's ordered discovery asks.
		m, err := oauthex.GetProtectedResourceMetadata(ctx, cand.metadata, cand.resource, c.httpClient())
		if err == nil && m != nil {
			prm = m
			break
		}
	}
	asURL := origin.String()
	d.resource = serverURL
	if prm != nil {
		if len(prm.AuthorizationServers) == 0 {
			return nil, fault.New(fault.Unauthenticated, "mcpauth: the protected-resource metadata of %s names no authorization server", host)
		}
		asURL = prm.AuthorizationServers[0]
		d.resource = prm.Resource
		d.scopesSupported = prm.ScopesSupported
	}

	as, err := auth.GetAuthServerMetadata(ctx, asURL, c.httpClient())
	if err != nil {
		if ctx.Err() != nil {
			return nil, ctxError(ctx.Err(), hostOf(asURL))
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
	d.as = as
	return d, nil
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
	asked := MethodNone
	for _, m := range []string{MethodBasic, MethodPost} {
		if slices.Contains(supported, m) {
			asked = m
			break
		}
	}
	name := c.ClientName
	if name == "" {
		name = "agentd"
	}
	meta := &oauthex.ClientRegistrationMetadata{
		RedirectURIs:            []string{c.RedirectURL},
		TokenEndpointAuthMethod: asked,
		GrantTypes:              []string{"authorization_code", "refresh_token"},
		ResponseTypes:           []string{"code"},
		ClientName:              name,
	}
	reg, err := oauthex.RegisterClient(ctx, d.as.RegistrationEndpoint, meta, c.httpClient())
	if err != nil {
		if ctx.Err() != nil {
			return clientAuth{}, ctxError(ctx.Err(), hostOf(d.as.RegistrationEndpoint))
		}
		var re *oauthex.ClientRegistrationError
		if errors.As(err, &re) {
			return clientAuth{}, fault.Hide(fault.Unauthenticated, err, "mcpauth: authorization server %s refused to register agentd (%s)", hostOf(d.as.RegistrationEndpoint), safeCode(re.ErrorCode))
		}
		// The go-sdk's error may quote the response body, which may hold a
		// client secret.
		return clientAuth{}, fault.Hide(fault.Unavailable, err, "mcpauth: dynamic registration at %s failed", hostOf(d.as.RegistrationEndpoint))
	}
	cl := clientAuth{id: reg.ClientID, secret: reg.ClientSecret, method: reg.TokenEndpointAuthMethod}
	if cl.method == "" {
		// RFC 7591: the server may leave out what it accepted as asked.
		cl.method = asked
		if cl.secret == "" {
			cl.method = MethodNone
		} else if asked == MethodNone {
			cl.method = MethodBasic
		}
	}
	return cl, nil
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
