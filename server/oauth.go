package server

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"sync"
	"time"

	bridgev1 "github.com/agentd/agentd/gen/go/agentd/bridge/v1"
	agentdv1 "github.com/agentd/agentd/gen/go/agentd/v1"
	"github.com/agentd/agentd/internal/bridgeclient"
	"github.com/agentd/agentd/internal/fault"
	"github.com/agentd/agentd/internal/mcpauth"
	"github.com/agentd/agentd/internal/netaddr"
	"github.com/agentd/agentd/internal/oauthtokens"
	"github.com/agentd/agentd/internal/record"
)

// OAuthOptions make agentd the OAuth client of the url MCP servers that
// requests declare with oauth (X-M1): it answers their challenges with
// tokens it obtains, keeps per tenant, end user and server (X-M3), and
// refreshes.
type OAuthOptions struct {
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
	// HTTPClient returns the client for the authorization servers of a
	// tenant whose rules allow private addresses or not. Nil: netaddr's
	// transport, which refuses private addresses unless allowed.
	HTTPClient func(allowPrivate bool) *http.Client
}

// oauthClient is the Service's side of OAuth: the tokens, and one
// resolution at a time per token (a refresh token may be used once).
type oauthClient struct {
	opts   OAuthOptions
	tokens oauthtokens.Store
	public *http.Client
	lan    *http.Client
	// locks serializes the resolutions of one key (tenant, end user,
	// server) in this process: concurrent refusals (parallel calls, or
	// generations of one end user) ask the user, or refresh, once.
	locksMu sync.Mutex
	locks   map[oauthtokens.Key]*keyLock
}

type keyLock struct {
	turn  chan struct{} // held by the resolution under way
	users int
}

func newOAuthClient(o OAuthOptions) *oauthClient {
	c := &oauthClient{opts: o, tokens: o.Tokens, locks: make(map[oauthtokens.Key]*keyLock)}
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

// tryLock takes k's lock if it is free.
func (c *oauthClient) tryLock(k oauthtokens.Key) (func(), bool) {
	ctx, cancel := context.WithCancel(context.Background())
	cancel() // lock then takes a free lock only
	unlock, err := c.lock(ctx, k)
	return unlock, err == nil
}

// lock takes k's lock, waiting at most as long as ctx lasts (a person
// may be answering under it), and returns its release.
func (c *oauthClient) lock(ctx context.Context, k oauthtokens.Key) (func(), error) {
	c.locksMu.Lock()
	l := c.locks[k]
	if l == nil {
		l = &keyLock{turn: make(chan struct{}, 1)}
		c.locks[k] = l
	}
	l.users++
	c.locksMu.Unlock()
	leave := func() {
		c.locksMu.Lock()
		if l.users--; l.users == 0 {
			delete(c.locks, k)
		}
		c.locksMu.Unlock()
	}
	release := func() { <-l.turn; leave() }
	select {
	case l.turn <- struct{}{}: // a free lock is taken even when ctx has ended
		return release, nil
	default:
	}
	select {
	case l.turn <- struct{}{}:
		return release, nil
	case <-ctx.Done():
		leave()
		return nil, context.Cause(ctx)
	}
}

// refreshable reports whether t can be renewed without a person: it has
// a refresh token, or came of a client-credentials grant.
func refreshable(t *mcpauth.Token) bool {
	return t.RefreshToken != "" || t.Grant == mcpauth.ClientCredentials
}

// keep stores t for k. A store that fails is logged, not the request's
// failure: the token is good for this generation, and a grant already
// spent (a rotated refresh token, a person's authorization) is not lost
// to a store hiccup.
func (c *oauthClient) keep(ctx context.Context, g *generation, k oauthtokens.Key, server string, t *mcpauth.Token) {
	if err := c.save(ctx, k, t); err != nil {
		g.s.log.WarnContext(ctx, "oauth token not stored; it serves this generation only", "tenant", g.tenant, "generation", g.id, "server", server, "err", err)
	}
}

// load returns the token kept for k, nil when there is none or it is
// not cfg's: it came of another grant or another client (an agent that
// declares the server otherwise), which cfg neither presents nor
// refreshes; its next grant replaces it.
func (c *oauthClient) load(ctx context.Context, k oauthtokens.Key, cfg *mcpauth.Config) (*mcpauth.Token, error) {
	sctx, cancel := record.Context(ctx)
	defer cancel()
	data, err := c.tokens.Get(sctx, k)
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
	if t.Grant != cfg.Grant || cfg.ClientID != "" && t.ClientID != cfg.ClientID {
		return nil, nil
	}
	return t, nil
}

func (c *oauthClient) save(ctx context.Context, k oauthtokens.Key, t *mcpauth.Token) error {
	data, err := json.Marshal(t)
	if err != nil {
		return fault.Wrap(fault.Internal, err, "encoding a token")
	}
	sctx, cancel := record.Context(context.WithoutCancel(ctx))
	defer cancel()
	return c.tokens.Put(sctx, k, data)
}

// config is the mcpauth configuration of a server's oauth declaration.
func (c *oauthClient) config(o *agentdv1.OAuthClient, allowPrivate bool) (*mcpauth.Config, error) {
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
	if o.GetGrant() == agentdv1.GrantType_GRANT_TYPE_CLIENT_CREDENTIALS {
		cfg.Grant = mcpauth.ClientCredentials
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

// Answer answers what the generation's bridged servers ask of agentd
// (bridgeclient.Answerer).
func (g *generation) Answer(ctx context.Context, r *bridgev1.ServerRequest) *bridgev1.AnswerServerRequestRequest {
	switch k := r.GetKind().(type) {
	case *bridgev1.ServerRequest_Authorization:
		v, err := g.authorize(ctx, r.GetServerName(), k.Authorization)
		if err != nil {
			return bridgeclient.Refusal(err)
		}
		return &bridgev1.AnswerServerRequestRequest{Answer: &bridgev1.AnswerServerRequestRequest_Authorization{Authorization: v}}
	case *bridgev1.ServerRequest_Elicitation:
		return g.elicitAnswer(ctx, r)
	case *bridgev1.ServerRequest_Sampling:
		return g.sampleAnswer(ctx, r)
	}
	return nil
}

// authorize resolves a url server's refusal of agentd's authorization
// (X-M1): with a token a later one replaced, a refresh, a new
// client-credentials grant, or, for an authorization code grant, the
// person on the stream (X-M2). The token is kept for the generation's
// tenant, end user and server (X-M3).
func (g *generation) authorize(ctx context.Context, server string, ch *bridgev1.AuthorizationChallenge) (string, error) {
	sp := g.plan.server(server)
	if sp == nil || sp.decl.GetOauth() == nil {
		return "", fault.New(fault.Internal, "the bridge asked for the authorization of %q, which is not an MCP server of the generation declared with oauth", server)
	}
	if d := g.deferredFor(server); d != nil {
		// The person is asked once: every later refusal of the server in
		// this run waits for the same answer, on the resume.
		return "", deferredRefusal(server, d.request.GetId())
	}
	o := g.s.oauth
	cfg, err := o.config(sp.decl.GetOauth(), g.allowPrivate())
	if err != nil {
		return "", err
	}
	serverURL := sp.decl.GetUrl()
	key := oauthtokens.Key{Tenant: g.tenant, EndUser: g.endUser, Server: oauthtokens.ServerKey(serverURL)}
	unlock, err := o.lock(ctx, key)
	if err != nil {
		return "", err
	}
	defer unlock()
	challenge := mcpauth.Challenge{Status: int(ch.GetStatus()), WWWAuthenticate: ch.GetWwwAuthenticate()}
	stored, err := o.load(ctx, key, cfg)
	if err != nil {
		return "", err
	}
	if stored != nil {
		if v := stored.Authorization(); v != ch.GetPresented() && stored.Fresh(time.Now()) {
			// Another request, generation or replica renewed it meanwhile
			// (stepped up too, perhaps): it goes first.
			return v, nil
		}
	}
	stepUp := challenge.StepUp()
	if stored != nil && !stepUp && refreshable(stored) {
		t, err := cfg.Refresh(ctx, stored)
		if err == nil {
			o.keep(ctx, g, key, server, t)
			return t.Authorization(), nil
		}
		if ctx.Err() != nil {
			return "", context.Cause(ctx)
		}
		// Another replica may have used the refresh token first: its
		// token then stands.
		if again, _ := o.load(ctx, key, cfg); again != nil && again.Authorization() != stored.Authorization() && again.Fresh(time.Now()) {
			return again.Authorization(), nil
		}
		g.s.log.InfoContext(ctx, "oauth token not refreshed; asking for a new one", "tenant", g.tenant, "generation", g.id, "server", server, "err", err)
	}
	var t *mcpauth.Token
	if cfg.Grant == mcpauth.ClientCredentials {
		t, err = cfg.ClientCredentials(ctx, serverURL, challenge)
	} else {
		reason := agentdv1.AuthorizationReason_AUTHORIZATION_REASON_FIRST_USE
		var granted []string
		switch {
		case stored != nil && stepUp:
			reason, granted = agentdv1.AuthorizationReason_AUTHORIZATION_REASON_STEP_UP, stored.Scopes
		case stored != nil:
			reason = agentdv1.AuthorizationReason_AUTHORIZATION_REASON_REAUTHORIZE
		}
		t, err = g.authorizationCode(ctx, server, serverURL, cfg, challenge, granted, reason)
	}
	if err != nil {
		return "", err
	}
	o.keep(ctx, g, key, server, t)
	g.s.log.InfoContext(ctx, "oauth token obtained", "audit", true, "principal", g.caller, "tenant", g.tenant, "generation", g.id,
		"server", server, "grant", grantName(cfg.Grant), "scopes", strings.Join(t.Scopes, " "))
	return t.Authorization(), nil
}

func grantName(gr mcpauth.Grant) string {
	if gr == mcpauth.ClientCredentials {
		return "client_credentials"
	}
	return "authorization_code"
}

// authorizationCode runs an authorization code grant: it sends the
// authorization URL to the client as an authorization request and
// exchanges the code of the redirect the client answers with (X-M2).
func (g *generation) authorizationCode(ctx context.Context, server, serverURL string, cfg *mcpauth.Config, ch mcpauth.Challenge, granted []string, reason agentdv1.AuthorizationReason) (*mcpauth.Token, error) {
	unanswerable := func(why string) error {
		msg := "the MCP server %q needs a person to authorize agentd at its authorization server, and the client %s; answer its authorization_request on the Generate stream"
		if g.s.checkpoints != nil {
			msg += ", or set store.encryption_key_file so that the generation can pause for it"
		}
		return fault.New(fault.Unauthenticated, msg, server, why).
			WithInfo("MCP_AUTHORIZATION_UNANSWERED", map[string]string{"server": server})
	}
	const notAttached = "is not attached (the generation runs detached, or another replica adopted it)"
	if g.link.clientless && !g.canDefer() {
		return nil, unanswerable(notAttached)
	}
	p, err := cfg.Begin(ctx, serverURL, ch, granted)
	if err != nil {
		return nil, err
	}
	req := &agentdv1.AuthorizationRequest{
		Id:         fmt.Sprintf("authorization_%d", g.s.authorizations.Add(1)),
		ServerName: server,
		Url:        p.AuthURL,
		Scopes:     p.Scopes,
		Reason:     reason,
	}
	g.s.log.InfoContext(ctx, "authorization requested", "audit", true, "principal", g.caller, "tenant", g.tenant, "generation", g.id,
		"request", req.GetId(), "server", server, "reason", reason.String())
	// Unanswered, it pauses the generation when it can (X-M2).
	unanswered := func(why string) error {
		if g.canDefer() {
			return g.deferAuthorization(ctx, server, req, p, why)
		}
		return unanswerable(why)
	}
	if g.link.clientless {
		return nil, unanswered(notAttached)
	}
	if g.canDefer() {
		// Losing the client while it waits pauses the generation, as
		// during an approval; the pause keeps it marked waiting.
		if gone := g.link.waiting(true); gone {
			return nil, unanswered("has gone away")
		}
	}
	g.link.mail.expect(req.GetId())
	if err := g.emit(ctx, &agentdv1.GenerateResponse{Event: &agentdv1.GenerateResponse_AuthorizationRequest{AuthorizationRequest: req}}); err != nil {
		return nil, err
	}
	answer, err := g.link.mail.await(ctx, req.GetId(), g.plan.answerTimeout)
	switch {
	case errors.Is(err, errUnanswered):
		return nil, unanswered("half-closed the stream or went away")
	case errors.Is(err, errAnswerTimeout):
		return nil, unanswered(fmt.Sprintf("did not answer within %s", g.plan.answerTimeout))
	case err != nil:
		return nil, err
	}
	if g.canDefer() && g.link.waiting(false) {
		// The client went away as the answer came: losing it now stops
		// the generation, as it would have outside the wait.
		g.link.cancel(g.link.gone())
	}
	redirect, _ := answer.(string)
	return cfg.Complete(ctx, p, redirect)
}

// allowPrivate reports whether the generation's tenant may reach private
// addresses: its authorization servers may be there too.
func (g *generation) allowPrivate() bool {
	r := g.s.rules
	if t := g.plan.tenant; t != nil && t.Rules != nil {
		r = t.Rules
	}
	return r != nil && r.AllowPrivateNetworks
}

// server returns the declared server named name; nil if none.
func (p *plan) server(name string) *serverPlan {
	for _, sp := range p.servers {
		if sp.name == name {
			return sp
		}
	}
	return nil
}

// validateOAuth checks a url server's oauth declaration at field f.
func validateOAuth(v *violations, f string, decl *agentdv1.MCPServer) {
	o := decl.GetOauth()
	if o == nil {
		return
	}
	if decl.GetAuthorization() != "" {
		v.add(f+".authorization", "may not be combined with oauth: agentd presents the tokens it obtains")
	}
	for k := range decl.GetHeaders() {
		if strings.EqualFold(k, "Authorization") {
			v.add(f+".headers", "may not set Authorization with oauth: agentd presents the tokens it obtains")
		}
	}
	f += ".oauth"
	if o.GetClientSecret() != "" && o.GetPrivateKey() != "" {
		v.add(f, "client_secret and private_key exclude each other")
	}
	if o.GetPrivateKey() != "" {
		if _, err := mcpauth.ParsePrivateKey(o.GetPrivateKey()); err != nil {
			v.add(f+".private_key", "must be an RSA or ECDSA P-256 private key in PEM (PKCS#8, PKCS#1 or SEC 1)")
		}
	}
	if (o.GetClientSecret() != "" || o.GetPrivateKey() != "") && o.GetClientId() == "" {
		v.add(f+".client_id", "must be set with client_secret or private_key")
	}
	if o.GetGrant() == agentdv1.GrantType_GRANT_TYPE_CLIENT_CREDENTIALS && o.GetClientId() == "" {
		v.add(f+".client_id", "is required with the CLIENT_CREDENTIALS grant")
	}
	switch m := o.GetTokenEndpointAuthMethod(); m {
	case "", "none":
	case "client_secret_basic", "client_secret_post":
		if o.GetClientSecret() == "" {
			v.add(f+".token_endpoint_auth_method", "%s needs client_secret", m)
		}
	case "private_key_jwt":
		if o.GetPrivateKey() == "" {
			v.add(f+".token_endpoint_auth_method", "private_key_jwt needs private_key")
		}
	default:
		v.add(f+".token_endpoint_auth_method", "must be client_secret_basic, client_secret_post, private_key_jwt or none")
	}
	if r := o.GetRedirectUrl(); r != "" {
		if !absoluteURL(r) {
			v.add(f+".redirect_url", "must be an absolute URL")
		}
	}
	if slices.Contains(o.GetScopes(), "") {
		v.add(f+".scopes", "must not hold an empty scope")
	}
}

// absoluteURL reports whether s is an absolute URL; an http(s) one needs
// a host.
func absoluteURL(s string) bool {
	u, err := url.Parse(s)
	return err == nil && u.IsAbs() && (u.Host != "" || u.Scheme != "http" && u.Scheme != "https")
}

// storedAuthorization is the authorization the token agentd keeps for the
// generation's end user at sp carries, refreshed first if it expires
// within a minute (X-M3); "" when there is none, or none can be had
// without asking: the server's refusal then brings the question.
func (g *generation) storedAuthorization(ctx context.Context, sp *serverPlan) string {
	o := g.s.oauth
	cfg, err := o.config(sp.decl.GetOauth(), g.allowPrivate())
	if err != nil {
		return ""
	}
	key := oauthtokens.Key{Tenant: g.tenant, EndUser: g.endUser, Server: oauthtokens.ServerKey(sp.decl.GetUrl())}
	t, err := o.load(ctx, key, cfg)
	if err != nil {
		g.s.log.WarnContext(ctx, "oauth token not read", "tenant", g.tenant, "generation", g.id, "server", sp.name, "err", err)
		return ""
	}
	if t == nil {
		return ""
	}
	if t.Fresh(time.Now()) || !refreshable(t) {
		return t.Authorization() // one that cannot be refreshed is tried: the refusal brings the question
	}
	// A refresh happens under the key's lock, so that one refresh token is
	// used once. When a resolution holds it (a person may be answering),
	// the generation does not wait at its start: the stale token goes,
	// and its refusal waits for that resolution instead.
	unlock, ok := o.tryLock(key)
	if !ok {
		return t.Authorization()
	}
	defer unlock()
	if again, _ := o.load(ctx, key, cfg); again != nil && again.Fresh(time.Now()) {
		return again.Authorization() // refreshed meanwhile
	}
	nt, err := cfg.Refresh(ctx, t)
	if err != nil {
		g.s.log.InfoContext(ctx, "oauth token not refreshed", "tenant", g.tenant, "generation", g.id, "server", sp.name, "err", err)
		return ""
	}
	o.keep(ctx, g, key, sp.name, nt)
	return nt.Authorization()
}
