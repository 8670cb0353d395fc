package server

import (
	"context"
	"errors"
	"fmt"
	"net/url"
	"slices"
	"strings"

	bridgev1 "github.com/agentd/agentd/gen/go/agentd/bridge/v1"
	agentdv1 "github.com/agentd/agentd/gen/go/agentd/v1"
	"github.com/agentd/agentd/internal/bridgeclient"
	"github.com/agentd/agentd/internal/fault"
	"github.com/agentd/agentd/internal/mcpauth"
	"github.com/agentd/agentd/internal/oauthclient"
)

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

// authorize resolves a url server's refusal of agentd's authorization:
// with a token a later one replaced, a refresh, a new client-credentials
// grant, or, for an authorization code grant, the person on the stream.
// The token is kept for the generation's tenant, end user and server.
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
	sub, err := g.oauthSubject(sp)
	if err != nil {
		return "", err
	}
	challenge := mcpauth.Challenge{Status: int(ch.GetStatus()), WWWAuthenticate: ch.GetWwwAuthenticate()}
	ask := func(ctx context.Context, reason agentdv1.AuthorizationReason, granted []string) (*mcpauth.Token, error) {
		return g.authorizationCode(ctx, server, sub.URL, sub.Config, challenge, granted, reason)
	}
	t, obtained, err := g.s.oauth.Resolve(ctx, sub, challenge, ch.GetPresented(), ask)
	if err != nil {
		return "", err
	}
	if obtained {
		g.tokenObtained(ctx, server, sub.Config.Grant, t)
	}
	return t.Authorization(), nil
}

// oauthSubject is the generation's end user's token for sp, a url server
// declared with oauth, as the OAuth client knows it: the lines it logs
// name the tenant, the generation and the server.
func (g *generation) oauthSubject(sp *serverPlan) (*oauthclient.Subject, error) {
	cfg, err := g.s.oauth.Config(sp.decl.GetOauth(), g.allowPrivate())
	if err != nil {
		return nil, err
	}
	return &oauthclient.Subject{
		Tenant: g.tenant, EndUser: g.endUser, URL: sp.decl.GetUrl(), Config: cfg,
		LogAttrs: []any{"tenant", g.tenant, "generation", g.id, "server", sp.name},
	}, nil
}

// tokenObtained writes the audit line of a token a new grant obtained for
// server, with attrs after its own.
func (g *generation) tokenObtained(ctx context.Context, server string, gr mcpauth.Grant, t *mcpauth.Token, attrs ...any) {
	g.s.log.InfoContext(ctx, "oauth token obtained", append([]any{"audit", true, "principal", g.caller, "tenant", g.tenant, "generation", g.id,
		"server", server, "grant", grantName(gr), "scopes", strings.Join(t.Scopes, " ")}, attrs...)...)
}

// grantName is gr as the audit lines name it.
func grantName(gr mcpauth.Grant) string {
	if gr == mcpauth.ClientCredentials {
		return "client_credentials"
	}
	return "authorization_code"
}

// authorizationCode runs an authorization code grant: it sends the
// authorization URL to the client as an authorization request and
// exchanges the code of the redirect the client answers with.
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
	// Unanswered, it pauses the generation when it can.
	unanswered := func(why string) error {
		if g.canDefer() {
			return g.deferAuthorization(ctx, server, req, p, why)
		}
		return unanswerable(why)
	}
	if g.link.clientless {
		return nil, unanswered(notAttached)
	}
	redirect, err := g.awaitRedirect(ctx, req, unanswered)
	if err != nil {
		return nil, err
	}
	return cfg.Complete(ctx, p, redirect)
}

// awaitRedirect sends req to the attached client and waits for the
// redirect the person came back with; when nobody answers, the error is
// unanswered's, told why.
func (g *generation) awaitRedirect(ctx context.Context, req *agentdv1.AuthorizationRequest, unanswered func(why string) error) (string, error) {
	if g.canDefer() {
		// Losing the client while it waits pauses the generation, as
		// during an approval; the pause keeps it marked waiting.
		if gone := g.link.waiting(true); gone {
			return "", unanswered("has gone away")
		}
	}
	g.link.mail.expect(req.GetId())
	if err := g.emit(ctx, &agentdv1.GenerateResponse{Event: &agentdv1.GenerateResponse_AuthorizationRequest{AuthorizationRequest: req}}); err != nil {
		return "", err
	}
	answer, err := g.link.mail.await(ctx, req.GetId(), g.plan.answerTimeout)
	switch {
	case errors.Is(err, errUnanswered):
		return "", unanswered("half-closed the stream or went away")
	case errors.Is(err, errAnswerTimeout):
		return "", unanswered(fmt.Sprintf("did not answer within %s", g.plan.answerTimeout))
	case err != nil:
		return "", err
	}
	if g.canDefer() && g.link.waiting(false) {
		// The client went away as the answer came: losing it now stops
		// the generation, as it would have outside the wait.
		g.link.cancel(g.link.gone())
	}
	redirect, _ := answer.(string)
	return redirect, nil
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
// within a minute; "" when there is none, or none can be had without
// asking: the server's refusal then brings the question.
func (g *generation) storedAuthorization(ctx context.Context, sp *serverPlan) string {
	sub, err := g.oauthSubject(sp)
	if err != nil {
		return ""
	}
	return g.s.oauth.Authorization(ctx, sub)
}
