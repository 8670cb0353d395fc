package oauthclient

import (
	"context"
	"log/slog"
	"time"

	agentdv1 "github.com/agentd/agentd/gen/go/agentd/v1"
	"github.com/agentd/agentd/internal/mcpauth"
)

// AskPerson runs the authorization code grant through a person: the
// caller sends the authorization URL where a person can answer, and
// exchanges the code of the redirect they come back with. reason says
// why the person is asked; granted are the scopes of the token a
// step-up replaces, kept in the new request so that it loses none.
type AskPerson func(ctx context.Context, reason agentdv1.AuthorizationReason, granted []string) (*mcpauth.Token, error)

// Resolve answers a server's refusal ch of the authorization presented
// ("" for none) with a token for s, the first of: the token kept for s
// when it is fresh and not the one refused (another request, generation
// or replica renewed it meanwhile, stepped up perhaps); a refresh of the
// kept token, unless the server asks for more scopes; a new
// client-credentials or enterprise-managed grant, for a declaration of
// that grant; else the person's authorization code grant, which ask runs.
// The token is kept.
//
// It waits for the key's resolution under way, if any, as long as ctx
// lasts: that one may be asking the person already. obtained reports a
// new grant (client credentials or the person's) rather than a token
// renewed.
func (c *Client) Resolve(ctx context.Context, s *Subject, ch mcpauth.Challenge, presented string, ask AskPerson) (t *mcpauth.Token, obtained bool, err error) {
	unlock, err := c.locks.lock(ctx, s.key())
	if err != nil {
		return nil, false, err
	}
	defer unlock()
	stored, err := c.Load(ctx, s)
	if err != nil {
		return nil, false, err
	}
	if t, err := c.renew(ctx, s, ch, presented, stored); t != nil || err != nil {
		return t, false, err
	}
	switch s.Config.Grant {
	case mcpauth.ClientCredentials:
		t, err = s.Config.ClientCredentials(ctx, s.URL, ch)
	case mcpauth.EnterpriseManaged:
		t, err = s.Config.EnterpriseManaged(ctx, s.URL, ch)
	default:
		reason, granted := askReason(stored, ch.StepUp())
		t, err = ask(ctx, reason, granted)
	}
	if err != nil {
		return nil, false, err
	}
	c.Keep(ctx, s, t)
	return t, true, nil
}

// renew returns the token that answers ch without a new grant: stored,
// the token kept, when it is fresh and not the one presented, or its
// refresh; nil without an error when a new grant is due.
func (c *Client) renew(ctx context.Context, s *Subject, ch mcpauth.Challenge, presented string, stored *mcpauth.Token) (*mcpauth.Token, error) {
	switch {
	case stored == nil:
		return nil, nil
	case stored.Authorization() != presented && stored.Fresh(time.Now()):
		return stored, nil
	case ch.StepUp() || !refreshable(stored):
		return nil, nil // a refresh keeps the scopes: a step-up needs a new grant
	}
	return c.refresh(ctx, s, stored)
}

// refresh renews stored, the token of s that a server refused, and keeps
// the new one. It returns nil without an error when no refresh stands,
// and a new grant is due.
func (c *Client) refresh(ctx context.Context, s *Subject, stored *mcpauth.Token) (*mcpauth.Token, error) {
	t, err := s.Config.Refresh(ctx, stored)
	if err == nil {
		c.Keep(ctx, s, t)
		return t, nil
	}
	if ctx.Err() != nil {
		return nil, context.Cause(ctx)
	}
	// Another replica may have used the refresh token first: its token
	// then stands.
	if again, _ := c.Load(ctx, s); again != nil && again.Authorization() != stored.Authorization() && again.Fresh(time.Now()) {
		return again, nil
	}
	c.logErr(ctx, slog.LevelInfo, "oauth token not refreshed; asking for a new one", s, err)
	return nil, nil
}

// askReason is why a person is asked, given the token kept (nil if none)
// and whether the server asks for more scopes than it holds; with the
// scopes it holds when they are to be kept.
func askReason(stored *mcpauth.Token, stepUp bool) (agentdv1.AuthorizationReason, []string) {
	switch {
	case stored == nil:
		return agentdv1.AuthorizationReason_AUTHORIZATION_REASON_FIRST_USE, nil
	case stepUp:
		return agentdv1.AuthorizationReason_AUTHORIZATION_REASON_STEP_UP, stored.Scopes
	}
	return agentdv1.AuthorizationReason_AUTHORIZATION_REASON_REAUTHORIZE, nil
}

// Authorization is the Authorization header value to open a session with
// s's server: the kept token's, refreshed first if it expires within a
// minute; "" when there is none, or none can be had without asking: the
// server's refusal then brings the question (Resolve).
func (c *Client) Authorization(ctx context.Context, s *Subject) string {
	t, err := c.Load(ctx, s)
	if err != nil {
		c.logErr(ctx, slog.LevelWarn, "oauth token not read", s, err)
		return ""
	}
	switch {
	case t == nil:
		return ""
	case t.Fresh(time.Now()) || !refreshable(t):
		return t.Authorization() // one that cannot be refreshed is tried: the refusal brings the question
	}
	return c.refreshStale(ctx, s, t)
}

// refreshStale is the Authorization of a refresh of t, s's token about to
// expire; "" when the refresh fails. A refresh happens under the key's
// lock, so that one refresh token is used once. When a resolution holds
// it (a person may be answering), the session does not wait at its
// opening: the stale token goes, and its refusal waits for that
// resolution instead.
func (c *Client) refreshStale(ctx context.Context, s *Subject, t *mcpauth.Token) string {
	unlock, ok := c.locks.tryLock(s.key())
	if !ok {
		return t.Authorization()
	}
	defer unlock()
	if again, _ := c.Load(ctx, s); again != nil && again.Fresh(time.Now()) {
		return again.Authorization() // refreshed meanwhile
	}
	nt, err := s.Config.Refresh(ctx, t)
	if err != nil {
		c.logErr(ctx, slog.LevelInfo, "oauth token not refreshed", s, err)
		return ""
	}
	c.Keep(ctx, s, nt)
	return nt.Authorization()
}
