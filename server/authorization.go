package server

import (
	bridgev1 "github.com/agentd/agentd/gen/go/agentd/bridge/v1"
	statev1 "github.com/agentd/agentd/gen/go/agentd/state/v1"
	agentdv1 "github.com/agentd/agentd/gen/go/agentd/v1"

	"cmp"
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"slices"
	"strings"
	"sync"
	"time"

	"google.golang.org/protobuf/encoding/protojson"

	"github.com/agentd/agentd/internal/fault"
	"github.com/agentd/agentd/internal/mcpauth"
	"github.com/agentd/agentd/internal/oauthclient"
)

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
		if reason == agentdv1.AuthorizationReason_AUTHORIZATION_REASON_STEP_UP && g.stepUps.was(server, challenge.Scopes()) {
			return nil, stepUpRefused(server, challenge.Scopes())
		}
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
	cfg, err := g.s.oauth.Config(sp.decl.GetOauth(), g.allowPrivate(), sp.ref != "")
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
	switch gr {
	case mcpauth.ClientCredentials:
		return "client_credentials"
	case mcpauth.EnterpriseManaged:
		return "enterprise_managed"
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
	if g.link.clientless && !g.canDefer() {
		return nil, unanswerable(whyNotAttached)
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
	if reason == agentdv1.AuthorizationReason_AUTHORIZATION_REASON_STEP_UP {
		g.stepUps.note(server, ch.Scopes()) // asked now: never again for these scopes
	}
	answer, none, err := g.ask(ctx, question{pausable: g.canDefer(), request: func() (string, *agentdv1.GenerateResponse) {
		return req.GetId(), &agentdv1.GenerateResponse{Event: &agentdv1.GenerateResponse_AuthorizationRequest{AuthorizationRequest: req}}
	}})
	switch {
	case err != nil:
		return nil, err
	case none != nil && g.canDefer():
		// Unanswered, it pauses the generation.
		return nil, g.deferAuthorization(ctx, server, req, p, none.why)
	case none != nil:
		return nil, unanswerable(none.why)
	}
	return cfg.Complete(ctx, p, answer.authorization.GetRedirectUrl())
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

// deferAuthorization records request (begun as p) for the resume, and
// returns the refusal that fails the server's request meanwhile.
func (g *generation) deferAuthorization(ctx context.Context, server string, request *agentdv1.AuthorizationRequest, p *mcpauth.Pending, why string) error {
	d := &g.deferred
	d.mu.Lock()
	if d.byName == nil {
		d.byName = make(map[string]*deferredAuth)
	}
	if d.why == "" {
		d.why = why
	}
	d.byName[server] = &deferredAuth{server: server, request: request, pending: p}
	d.mu.Unlock()
	g.s.log.InfoContext(ctx, "authorization deferred to a resume", "tenant", g.tenant, "generation", g.id,
		"request", request.GetId(), "server", server, "why", "the client "+why)
	return deferredRefusal(server, request.GetId())
}

// deferredRefusal is the error of a server's request that waits for a
// deferred authorization.
func deferredRefusal(server, id string) error {
	return fault.New(fault.Unauthenticated,
		"the MCP server %q waits for a person's authorization (request %s); the generation pauses for it", server, id).
		WithInfo("MCP_AUTHORIZATION_DEFERRED", map[string]string{"server": server, "request_id": id})
}

// deferredFor returns the authorization of server deferred in this run;
// nil if none.
func (g *generation) deferredFor(server string) *deferredAuth {
	g.deferred.mu.Lock()
	defer g.deferred.mu.Unlock()
	return g.deferred.byName[server]
}

// sealedDeferral is what a PendingAuthorization seals.
type sealedDeferral struct {
	Request json.RawMessage  `json:"request"` // agentdv1.AuthorizationRequest, protojson
	Pending *mcpauth.Pending `json:"pending"`
}

// authorizationAAD binds a sealed authorization to its generation and
// request.
func authorizationAAD(tenant, id, request string) []byte {
	return []byte(tenant + "\x00" + id + "\x00authorization\x00" + request)
}

// pendingAuthorizations seals the run's deferred authorizations for a
// paused checkpoint, in request order.
func (g *generation) pendingAuthorizations() []*statev1.PendingAuthorization {
	g.deferred.mu.Lock()
	defer g.deferred.mu.Unlock()
	var out []*statev1.PendingAuthorization
	for _, d := range g.deferred.byName {
		req, err := protojson.Marshal(d.request)
		if err != nil {
			panic(fmt.Sprintf("encoding an authorization request: %v", err)) // it was built here
		}
		plain, err := json.Marshal(sealedDeferral{Request: req, Pending: d.pending})
		if err != nil {
			panic(fmt.Sprintf("encoding an authorization request: %v", err))
		}
		out = append(out, &statev1.PendingAuthorization{
			RequestId:  d.request.GetId(),
			ServerName: d.server,
			Sealed:     g.s.sealer.Seal(plain, authorizationAAD(g.tenant, g.id, d.request.GetId())),
			KeyId:      g.s.sealer.ID(),
		})
	}
	slices.SortFunc(out, func(a, b *statev1.PendingAuthorization) int {
		return compareRequestIDs(a.GetRequestId(), b.GetRequestId())
	})
	return out
}

// openAuthorization unseals a paused checkpoint's authorization.
func (s *Service) openAuthorization(tenant, id string, pa *statev1.PendingAuthorization) (*deferredAuth, error) {
	if s.sealer == nil {
		return nil, fault.New(fault.FailedPrecondition,
			"the generation waits for an authorization sealed under the encryption key %s, and this agentd has none (store.encryption_key_file)", pa.GetKeyId())
	}
	plain, _, err := s.sealer.Open(pa.GetSealed(), authorizationAAD(tenant, id, pa.GetRequestId()))
	if err != nil {
		return nil, fault.New(fault.FailedPrecondition,
			"the generation waits for an authorization sealed under the encryption key %s, not one of this agentd's", pa.GetKeyId())
	}
	var sd sealedDeferral
	req := &agentdv1.AuthorizationRequest{}
	if json.Unmarshal(plain, &sd) != nil || sd.Pending == nil || protojson.Unmarshal(sd.Request, req) != nil || req.GetId() != pa.GetRequestId() {
		return nil, fault.New(fault.FailedPrecondition, "the paused generation %q cannot be read by this agentd", id)
	}
	return &deferredAuth{server: pa.GetServerName(), request: req, pending: sd.Pending}, nil
}

// completeAuthorizations exchanges the codes of the resume's answers for
// tokens, kept for the generation's end user, before its servers are
// connected. An exchange that fails (a code refused, a state that does
// not match) fails the resume with nothing run: the checkpoint stays, its
// decision is withdrawn once the pause is given back, and the person may
// authorize again with the same request. One that an
// earlier resume, since gone, already spent is taken as done when the
// token it obtained is kept.
func (g *generation) completeAuthorizations(ctx context.Context) error {
	res := g.resume
	answers := make(map[string]string)
	for _, a := range res.authorizations {
		answers[a.GetRequestId()] = a.GetRedirectUrl()
	}
	for _, pa := range res.checkpoint.GetTurn().GetAuthorizations() {
		d, err := g.s.openAuthorization(g.tenant, g.id, pa)
		if err != nil {
			return err
		}
		sp := g.plan.server(d.server)
		if sp == nil || sp.decl.GetOauth() == nil || sp.decl.GetUrl() == "" {
			return fault.InvalidRequest([]fault.Violation{{Field: "resume.agent", Description: fmt.Sprintf(
				"the generation waits for the authorization of the MCP server %q, which the agent no longer declares as a url server with oauth", d.server)}})
		}
		sub, err := g.oauthSubject(sp)
		if err != nil {
			return err
		}
		t, err := sub.Config.Complete(ctx, d.pending, answers[pa.GetRequestId()])
		if err != nil {
			if ctx.Err() != nil {
				return context.Cause(ctx)
			}
			if kept, _ := g.s.oauth.Load(ctx, sub); kept != nil && kept.Fresh(time.Now()) && res.interruptedAuth {
				continue
			}
			// The person may authorize again, for the same request, once
			// the pause is given back (failed).
			res.refused = append(res.refused, pa.GetRequestId())
			return fault.Wrap(fault.Unauthenticated, err, "the authorization of the MCP server %q failed", d.server).
				WithInfo("MCP_AUTHORIZATION_FAILED", map[string]string{"server": d.server, "request_id": pa.GetRequestId()})
		}
		g.s.oauth.Keep(ctx, sub, t)
		g.tokenObtained(ctx, d.server, sub.Config.Grant, t, "request", pa.GetRequestId())
	}
	return nil
}

// canDefer reports whether an unanswered authorization may pause the
// generation.
func (g *generation) canDefer() bool {
	return g.s.checkpoints != nil && g.s.sealer != nil
}

// stepUps are the step-ups a generation asked a person for, each a
// server's and a set of scopes, kept in its checkpoints. A server that
// refuses the token a person's step-up got, for the same scopes, would
// have the person asked again on every resume of a paused generation:
// the generation asks once, and the request fails after. Safe for
// concurrent use (refusals are resolved while calls run).
type stepUps struct {
	mu    sync.Mutex
	asked map[stepUp]bool
}

// stepUp is a server's step-up, its scopes space-separated.
type stepUp struct{ server, scopes string }

// was reports whether a person was asked the step-up of server to scopes
// (a set) in this generation.
func (s *stepUps) was(server string, scopes []string) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.asked[stepUp{server, strings.Join(scopes, " ")}]
}

// note records that a person is asked the step-up of server to scopes.
func (s *stepUps) note(server string, scopes []string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.asked == nil {
		s.asked = make(map[stepUp]bool)
	}
	s.asked[stepUp{server, strings.Join(scopes, " ")}] = true
}

// list is the step-ups asked, for a checkpoint: sorted by server, then
// scopes.
func (s *stepUps) list() []*statev1.StepUp {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := make([]*statev1.StepUp, 0, len(s.asked))
	for _, k := range slices.SortedFunc(maps.Keys(s.asked), func(a, b stepUp) int {
		return cmp.Or(strings.Compare(a.server, b.server), strings.Compare(a.scopes, b.scopes))
	}) {
		out = append(out, &statev1.StepUp{ServerName: k.server, Scopes: strings.Fields(k.scopes)})
	}
	return out
}

// restore notes the step-ups a checkpoint says were asked.
func (s *stepUps) restore(cp *statev1.Checkpoint) {
	for _, su := range cp.GetStepUps() {
		s.note(su.GetServerName(), su.GetScopes())
	}
}

// stepUpRefused fails a server's request refused for scopes a person was
// asked to authorize in this generation: as the server's refusal of the
// request that follows a step-up does on a live stream.
func stepUpRefused(server string, scopes []string) error {
	scope := strings.Join(scopes, " ")
	return fault.New(fault.Permission,
		"the MCP server %q still refuses agentd for the scope %q, which a person was asked to authorize in this generation; not asking again", server, scope).
		WithInfo("MCP_FORBIDDEN", map[string]string{"server": server, "status": "403", "error": "insufficient_scope", "scope": scope})
}
