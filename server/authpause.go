package server

import (
	"context"
	"encoding/json"
	"fmt"
	"net/url"
	"slices"
	"sync"
	"time"

	"google.golang.org/protobuf/encoding/protojson"

	statev1 "github.com/agentd/agentd/gen/go/agentd/state/v1"
	agentdv1 "github.com/agentd/agentd/gen/go/agentd/v1"
	"github.com/agentd/agentd/internal/fault"
	"github.com/agentd/agentd/internal/mcpauth"
)

// An authorization code grant that nobody answers on the stream (the
// client half-closed, went away, let answer_timeout pass, or was never
// attached) pauses the generation like an approval (X-M2): the grant's
// request waits in the checkpoint, sealed, and the resume brings the
// person's redirect. The calls the server refused for want of it did not
// run (a 401 is the server's refusal to run them), so they run once the
// resume has exchanged the code; an authorization asked while the
// servers' tools were listed pauses the generation before its first
// model turn. Pausing needs a state store and store.encryption_key_file:
// the request holds the PKCE verifier and the client's credentials,
// which, like tokens, are kept only sealed. Without them the generation
// ends UNAUTHENTICATED as before.

// deferredAuth is an authorization request of the generation that waits
// for the resume.
type deferredAuth struct {
	server  string
	request *agentdv1.AuthorizationRequest
	pending *mcpauth.Pending
}

// deferrals are a generation's deferred authorizations, one per server:
// every later refusal of that server in this run waits for the same one.
type deferrals struct {
	mu     sync.Mutex
	why    string // why the first was deferred: the client's absence
	byName map[string]*deferredAuth
	inputs int // input requests deferred (X-M4, 2026-07-28)
}

// canDefer reports whether an unanswered authorization may pause the
// generation.
func (g *generation) canDefer() bool {
	return g.s.checkpoints != nil && g.s.sealer != nil
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

// pauseWhy reports why authorizations or input requests were deferred,
// for the pause of the turn; "" if none was.
func (g *generation) pauseWhy() string {
	g.deferred.mu.Lock()
	defer g.deferred.mu.Unlock()
	if len(g.deferred.byName) == 0 && g.deferred.inputs == 0 {
		return ""
	}
	return g.deferred.why
}

// deferredWhy reports why authorizations were deferred; "" if none was.
func (g *generation) deferredWhy() string {
	g.deferred.mu.Lock()
	defer g.deferred.mu.Unlock()
	if len(g.deferred.byName) == 0 {
		return ""
	}
	return g.deferred.why
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

// compareRequestIDs orders "authorization_<n>" ids by n.
func compareRequestIDs(a, b string) int {
	if len(a) != len(b) {
		return len(a) - len(b)
	}
	switch {
	case a < b:
		return -1
	case a > b:
		return 1
	}
	return 0
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

// deferredRequests are the run's deferred authorization requests, in
// request order, as the paused event lists them.
func (g *generation) deferredRequests() []*agentdv1.AuthorizationRequest {
	g.deferred.mu.Lock()
	defer g.deferred.mu.Unlock()
	var out []*agentdv1.AuthorizationRequest
	for _, d := range g.deferred.byName {
		out = append(out, d.request)
	}
	slices.SortFunc(out, func(a, b *agentdv1.AuthorizationRequest) int { return compareRequestIDs(a.GetId(), b.GetId()) })
	return out
}

// checkAuthorizationAnswers requires exactly one answer, a URL, for every
// authorization the paused turn waits for (R-A7).
func checkAuthorizationAnswers(v *violations, turn *statev1.PausedTurn, r *agentdv1.ResumeGeneration) {
	var pending []string
	for _, pa := range turn.GetAuthorizations() {
		pending = append(pending, pa.GetRequestId())
	}
	matchAnswers(v, "authorization_responses", "authorization", pending, r.GetAuthorizationResponses(), func(field string, a *agentdv1.AuthorizationResponse) {
		if u, err := url.Parse(a.GetRedirectUrl()); err != nil || !u.IsAbs() {
			v.add(field+".redirect_url", "must be the absolute URL the authorization server redirected the person to")
		}
	})
}

// requestAnswer is an answer that names the request it answers.
type requestAnswer interface{ GetRequestId() string }

// matchAnswers requires exactly one of answers (the resume's list of that
// name) for each pending request id, and none for a request that is not
// waiting (R-A7); check sees every answer, with its field path, for what
// else it must hold.
func matchAnswers[T requestAnswer](v *violations, list, what string, pending []string, answers []T, check func(field string, a T)) {
	waiting := make(map[string]bool, len(pending))
	for _, id := range pending {
		waiting[id] = true
	}
	seen := make(map[string]bool)
	for i, a := range answers {
		field := fmt.Sprintf("resume.%s[%d]", list, i)
		switch id := a.GetRequestId(); {
		case !waiting[id]:
			v.add(field+".request_id", "%s", fmt.Sprintf("no %s request %q is waiting", what, id))
		case seen[id]:
			v.add(field+".request_id", "%s", fmt.Sprintf("%q is answered twice", id))
		}
		seen[a.GetRequestId()] = true
		check(field, a)
	}
	var missing []string
	for _, id := range pending {
		if !seen[id] {
			missing = append(missing, id)
		}
	}
	if len(missing) > 0 {
		v.add("resume", "%s", fmt.Sprintf("missing answers for %s", sentence(missing)))
	}
}

// answerIDs are the request ids of answers, for a claim.
func answerIDs[T requestAnswer](answers []T) []string {
	ids := make([]string, len(answers))
	for i, a := range answers {
		ids[i] = a.GetRequestId()
	}
	return ids
}

// completeAuthorizations exchanges the codes of the resume's answers for
// tokens, kept for the generation's end user, before its servers are
// connected. An exchange that fails (a code refused, a state that does
// not match) fails the resume with nothing run: the checkpoint stays, and
// the person may authorize again with the same request. One that an
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
			return fault.Wrap(fault.Unauthenticated, err, "the authorization of the MCP server %q failed", d.server).
				WithInfo("MCP_AUTHORIZATION_FAILED", map[string]string{"server": d.server, "request_id": pa.GetRequestId()})
		}
		g.s.oauth.Keep(ctx, sub, t)
		g.tokenObtained(ctx, d.server, sub.Config.Grant, t, "request", pa.GetRequestId())
	}
	return nil
}
