// Package oauthclient is agentd's policy as the OAuth client of the url
// MCP servers that requests declare with oauth: it keeps one token per
// tenant, end user and server (a key), renews it, and resolves a server's
// refusal of agentd's authorization with, in this order, a token renewed
// meanwhile, a refresh, a client-credentials grant, or a person's
// authorization code grant, which its caller runs (Resolve). One
// resolution at a time runs per key in a process, since a refresh token
// may be used once and a person should be asked once.
//
// The OAuth protocol (discovery, registration, PKCE, the grants) is
// mcpauth's; where tokens are kept is oauthtokens'. What a generation
// does around a resolution (asking the person on its stream, pausing for
// the answer, the audit lines) is its caller's.
package oauthclient

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"log/slog"
	"net/http"
	"slices"
	"time"

	agentdv1 "github.com/agentd/agentd/gen/go/agentd/v1"
	"github.com/agentd/agentd/internal/fault"
	"github.com/agentd/agentd/internal/mcpauth"
	"github.com/agentd/agentd/internal/netaddr"
	"github.com/agentd/agentd/internal/oauthtokens"
	"github.com/agentd/agentd/internal/store"
)

// Options make agentd the OAuth client of the url MCP servers that
// requests declare with oauth: it answers their challenges with tokens it
// obtains, keeps per tenant, end user and server, and refreshes.
type Options struct {
	// Tokens keeps the tokens. Nil: process memory (oauthtokens.NewMemory),
	// so they last until agentd stops and another replica has its own.
	Tokens oauthtokens.Store
	// RedirectURL is where authorization servers send the user back, for
	// servers whose declaration names none (oauth.redirect_url).
	RedirectURL string
	// ClientMetadataURL is agentd's client ID metadata document
	// (oauth.client_metadata_url); "" for none.
	ClientMetadataURL string
	// ClientName is the name agentd registers dynamically with.
	ClientName string
	// IdentityProvider holds the enterprise identity provider settings
	// (oauth.identity_provider) that an ENTERPRISE_MANAGED declaration's
	// empty fields take.
	IdentityProvider IdentityProvider
	// HTTPClient returns the client for the authorization servers of a
	// tenant whose rules allow private addresses or not. Nil: netaddr's
	// transport, which refuses private addresses unless allowed.
	HTTPClient func(allowPrivate bool) *http.Client
}

// Client holds the tokens and the keys' locks. Its methods are safe for
// concurrent use.
type Client struct {
	opts   Options
	log    *slog.Logger
	tokens oauthtokens.Store
	public *http.Client
	lan    *http.Client
	locks  keyLocks
}

// New returns a Client that logs to log (nil: nowhere).
func New(o Options, log *slog.Logger) *Client {
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	c := &Client{opts: o, log: log, tokens: o.Tokens}
	if c.tokens == nil {
		c.tokens = oauthtokens.NewMemory()
	}
	if o.HTTPClient != nil {
		c.public, c.lan = o.HTTPClient(false), o.HTTPClient(true)
	} else {
		c.public = &http.Client{Transport: netaddr.Transport(false), Timeout: time.Minute}
		c.lan = &http.Client{Transport: netaddr.Transport(true), Timeout: time.Minute}
	}
	return c
}

// Config is the mcpauth configuration of a server's oauth declaration o,
// for a tenant that may reach private addresses or not (its
// authorization servers may be there too).
//
// registered says the server is one the configuration registers, whose
// enterprise-managed grant may present the service's own ID token.
func (c *Client) Config(o *agentdv1.OAuthClient, allowPrivate, registered bool) (*mcpauth.Config, error) {
	cfg := &mcpauth.Config{
		ClientID:          o.GetClientId(),
		ClientSecret:      o.GetClientSecret(),
		KeyID:             o.GetPrivateKeyId(),
		Scopes:            o.GetScopes(),
		AuthMethod:        o.GetTokenEndpointAuthMethod(),
		RedirectURL:       cmp.Or(o.GetRedirectUrl(), c.opts.RedirectURL),
		ClientMetadataURL: c.opts.ClientMetadataURL,
		ClientName:        c.opts.ClientName,
		HTTPClient:        c.public,
	}
	if allowPrivate {
		cfg.HTTPClient = c.lan
	}
	switch o.GetGrant() {
	case agentdv1.GrantType_GRANT_TYPE_CLIENT_CREDENTIALS:
		cfg.Grant = mcpauth.ClientCredentials
	case agentdv1.GrantType_GRANT_TYPE_ENTERPRISE_MANAGED:
		cfg.Grant = mcpauth.EnterpriseManaged
		cfg.IdentityProvider = c.opts.IdentityProvider.with(o.GetIdentityProvider(), registered)
	}
	if k := o.GetPrivateKey(); k != "" {
		signer, err := mcpauth.ParsePrivateKey(k)
		if err != nil {
			return nil, err
		}
		cfg.PrivateKey = signer
	}
	return cfg, nil
}

// Subject is what a call is about: one end user's token for one server,
// under the server's declaration.
type Subject struct {
	// Tenant and EndUser are whose token it is.
	Tenant, EndUser string
	// URL is the MCP server's endpoint: the resource the token is for, and
	// the key's server (oauthtokens.ServerKey).
	URL string
	// Config is the server's oauth declaration's (Client.Config).
	Config *mcpauth.Config
	// LogAttrs open the attributes of every line logged about the subject
	// (the caller's tenant, generation and server, say).
	LogAttrs []any
}

// key is the subject's token's key.
func (s *Subject) key() oauthtokens.Key {
	return oauthtokens.Key{Tenant: s.Tenant, EndUser: s.EndUser, Server: oauthtokens.ServerKey(s.URL)}
}

// logErr logs msg about s at level, with err.
func (c *Client) logErr(ctx context.Context, level slog.Level, msg string, s *Subject, err error) {
	c.log.Log(ctx, level, msg, append(slices.Clip(s.LogAttrs), "err", err)...)
}

// Load returns the token kept for s, nil when there is none or it is not
// its Config's: it came of another grant or another client (an agent that
// declares the server otherwise), which the Config neither presents nor
// refreshes; its next grant replaces it.
func (c *Client) Load(ctx context.Context, s *Subject) (*mcpauth.Token, error) {
	sctx, cancel := store.WriteContext(ctx)
	defer cancel()
	data, err := c.tokens.Get(sctx, s.key())
	if errors.Is(err, oauthtokens.ErrUnreadable) {
		return nil, nil // its key is gone: as if none, and the next grant replaces it
	}
	if err != nil || data == nil {
		return nil, err
	}
	t := &mcpauth.Token{}
	if err := json.Unmarshal(data, t); err != nil {
		return nil, nil // unreadable: as if none, and the next grant replaces it
	}
	if t.Grant != s.Config.Grant || s.Config.ClientID != "" && t.ClientID != s.Config.ClientID || !sameIdentity(t, s.Config) {
		return nil, nil
	}
	return t, nil
}

// sameIdentity reports whether t, if an enterprise-managed grant's, was
// obtained for the ID token cfg presents now: an application that names
// no end user would otherwise have one user's token serve another's.
func sameIdentity(t *mcpauth.Token, cfg *mcpauth.Config) bool {
	if t.Grant != mcpauth.EnterpriseManaged || cfg.IdentityProvider == nil {
		return true
	}
	idToken, err := cfg.IdentityProvider.IDToken()
	return err == nil && mcpauth.IdentityOf(idToken) == t.Identity
}

// Keep stores t as s's token. A store that fails is logged, not the
// caller's failure: the token is good for the caller's generation, and a
// grant already spent (a rotated refresh token, a person's authorization)
// is not lost to a store hiccup.
func (c *Client) Keep(ctx context.Context, s *Subject, t *mcpauth.Token) {
	if err := c.save(ctx, s.key(), t); err != nil {
		c.logErr(ctx, slog.LevelWarn, "oauth token not stored; it serves this generation only", s, err)
	}
}

func (c *Client) save(ctx context.Context, k oauthtokens.Key, t *mcpauth.Token) error {
	data, err := json.Marshal(t)
	if err != nil {
		return fault.Wrap(fault.Internal, err, "encoding a token")
	}
	sctx, cancel := store.WriteContext(ctx)
	defer cancel()
	return c.tokens.Put(sctx, k, data)
}

// refreshable reports whether t can be renewed without a person: it has
// a refresh token, or came of a client-credentials grant. A token of an
// enterprise-managed grant is renewed by a new grant when refused.
func refreshable(t *mcpauth.Token) bool {
	return t.RefreshToken != "" || t.Grant == mcpauth.ClientCredentials
}
