package oauthclient

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"

	agentdv1 "github.com/agentd/agentd/gen/go/agentd/v1"
	"github.com/agentd/agentd/internal/mcpauth"
	"github.com/agentd/agentd/internal/oauthtest"
	"github.com/agentd/agentd/internal/oauthtokens"
)

const redirectURL = "http://127.0.0.1:1/oauth/callback"

// fixture is a Client of an oauthtest server, for one subject.
type fixture struct {
	srv    *oauthtest.Server
	client *Client
	sub    *Subject
	logs   *bytes.Buffer // written by the test's goroutine only
	asked  []string      // the person's questions: reason, then granted scopes
}

func newFixture(t *testing.T, decl *agentdv1.OAuthClient, store oauthtokens.Store) *fixture {
	t.Helper()
	f := &fixture{srv: oauthtest.New(t, oauthtest.Options{}), logs: &bytes.Buffer{}}
	f.client = New(Options{Tokens: store, RedirectURL: redirectURL}, slog.New(slog.NewTextHandler(f.logs, nil)))
	if decl.GetGrant() == agentdv1.GrantType_GRANT_TYPE_CLIENT_CREDENTIALS {
		decl.ClientId, decl.ClientSecret = f.srv.ClientID, f.srv.ClientSecret
	}
	cfg, err := f.client.Config(decl, true, false) // oauthtest listens on loopback
	if err != nil {
		t.Fatal(err)
	}
	f.sub = &Subject{Tenant: "acme", EndUser: "alice", URL: f.srv.MCPURL, Config: cfg,
		LogAttrs: []any{"tenant", "acme", "generation", "gen-1", "server", "crm"}}
	return f
}

// unauthorized is the server's refusal of a request without a live token.
func (f *fixture) unauthorized() mcpauth.Challenge {
	return mcpauth.Challenge{Status: 401, WWWAuthenticate: []string{fmt.Sprintf(`Bearer resource_metadata=%q`, f.srv.MetadataURL)}}
}

// insufficient is the server's refusal of a token without its step-up
// scope.
func (f *fixture) insufficient() mcpauth.Challenge {
	return mcpauth.Challenge{Status: 403, WWWAuthenticate: []string{fmt.Sprintf(
		`Bearer error="insufficient_scope", scope="mcp:read %s", resource_metadata=%q`, f.srv.StepUpScope, f.srv.MetadataURL)}}
}

// person answers every question at once, as the caller's person would.
func (f *fixture) person(ch mcpauth.Challenge) AskPerson {
	return func(ctx context.Context, reason agentdv1.AuthorizationReason, granted []string) (*mcpauth.Token, error) {
		f.asked = append(f.asked, reason.String(), strings.Join(granted, " "))
		p, err := f.sub.Config.Begin(ctx, f.sub.URL, ch, granted)
		if err != nil {
			return nil, err
		}
		loc, err := f.srv.Approve(ctx, p.AuthURL)
		if err != nil {
			return nil, err
		}
		return f.sub.Config.Complete(ctx, p, loc)
	}
}

// resolve resolves ch, a refusal of presented, and reports whether a new
// grant came of it.
func (f *fixture) resolve(t *testing.T, ch mcpauth.Challenge, presented string) (*mcpauth.Token, bool) {
	t.Helper()
	tok, obtained, err := f.client.Resolve(t.Context(), f.sub, ch, presented, f.person(ch))
	if err != nil {
		t.Fatalf("Resolve: %v", err)
	}
	if kept := f.kept(t); kept == nil || kept.AccessToken != tok.AccessToken {
		t.Errorf("Resolve returned %q and keeps %v", tok.AccessToken, kept)
	}
	return tok, obtained
}

// kept is the token kept for the subject.
func (f *fixture) kept(t *testing.T) *mcpauth.Token {
	t.Helper()
	tok, err := f.client.Load(t.Context(), f.sub)
	if err != nil {
		t.Fatal(err)
	}
	return tok
}

// A refusal is resolved by the first of: a fresher token kept meanwhile,
// a refresh, a client-credentials grant, the person. Only a new grant is
// reported obtained.
func TestResolveOrder(t *testing.T) {
	t.Parallel()
	const (
		firstUse    = "AUTHORIZATION_REASON_FIRST_USE"
		stepUp      = "AUTHORIZATION_REASON_STEP_UP"
		reauthorize = "AUTHORIZATION_REASON_REAUTHORIZE"
	)
	for _, tc := range []struct {
		name string
		decl *agentdv1.OAuthClient
		// refuse prepares the second refusal, after a first one resolved
		// with a new token, and returns its challenge and what it refused
		refuse       func(f *fixture, first *mcpauth.Token) (mcpauth.Challenge, string)
		wantFirst    bool // the first token comes back
		wantObtained bool
		// wantAsked are the person's questions (reason, scopes granted),
		// the first resolution's included
		wantAsked  []string
		wantGrants map[string]int
		wantLog    string
	}{
		{
			name: "a fresher token kept meanwhile goes first",
			decl: &agentdv1.OAuthClient{},
			refuse: func(f *fixture, _ *mcpauth.Token) (mcpauth.Challenge, string) {
				return f.unauthorized(), "Bearer at-replaced"
			},
			wantFirst:  true,
			wantAsked:  []string{firstUse, ""},
			wantGrants: map[string]int{"authorization_code": 1},
		},
		{
			name: "the refused token is refreshed",
			decl: &agentdv1.OAuthClient{},
			refuse: func(f *fixture, first *mcpauth.Token) (mcpauth.Challenge, string) {
				return f.unauthorized(), first.Authorization()
			},
			wantAsked:  []string{firstUse, ""},
			wantGrants: map[string]int{"authorization_code": 1, "refresh_token": 1},
		},
		{
			name: "a refused refresh asks the person again",
			decl: &agentdv1.OAuthClient{},
			refuse: func(f *fixture, first *mcpauth.Token) (mcpauth.Challenge, string) {
				f.srv.RevokeAll()
				return f.unauthorized(), first.Authorization()
			},
			wantObtained: true,
			wantAsked:    []string{firstUse, "", reauthorize, ""},
			wantGrants:   map[string]int{"authorization_code": 2},
			wantLog:      `level=INFO msg="oauth token not refreshed; asking for a new one" tenant=acme generation=gen-1 server=crm err=`,
		},
		{
			name: "a step-up asks the person, keeping the scopes granted",
			decl: &agentdv1.OAuthClient{},
			refuse: func(f *fixture, first *mcpauth.Token) (mcpauth.Challenge, string) {
				return f.insufficient(), first.Authorization()
			},
			wantObtained: true,
			wantAsked:    []string{firstUse, "", stepUp, "mcp:read"},
			wantGrants:   map[string]int{"authorization_code": 2},
		},
		{
			name: "client credentials renewed by a new grant",
			decl: &agentdv1.OAuthClient{Grant: agentdv1.GrantType_GRANT_TYPE_CLIENT_CREDENTIALS},
			refuse: func(f *fixture, first *mcpauth.Token) (mcpauth.Challenge, string) {
				return f.unauthorized(), first.Authorization()
			},
			wantGrants: map[string]int{"client_credentials": 2},
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			f := newFixture(t, tc.decl, nil)
			first, obtained := f.resolve(t, f.unauthorized(), "")
			if !obtained {
				t.Error("the first resolution is not reported obtained")
			}
			ch, presented := tc.refuse(f, first)
			got, obtained := f.resolve(t, ch, presented)
			if obtained != tc.wantObtained {
				t.Errorf("obtained %v, want %v", obtained, tc.wantObtained)
			}
			if same := got.AccessToken == first.AccessToken; same != tc.wantFirst {
				t.Errorf("the first token came back: %v, want %v", same, tc.wantFirst)
			}
			if diff := cmp.Diff(tc.wantAsked, f.asked); diff != "" {
				t.Errorf("the person's questions (-want +got):\n%s", diff)
			}
			if diff := cmp.Diff(tc.wantGrants, f.srv.Grants()); diff != "" {
				t.Errorf("grants (-want +got):\n%s", diff)
			}
			f.checkLog(t, tc.wantLog)
		})
	}
}

// checkLog checks that the lines logged hold want, and that none was
// logged when want is "".
func (f *fixture) checkLog(t *testing.T, want string) {
	t.Helper()
	if logs := f.logs.String(); !strings.Contains(logs, want) || want == "" && logs != "" {
		t.Errorf("logs:\n%s\nwant %q", logs, want)
	}
}

// A resolution waits for the key's resolution under way as long as its
// context lasts, and then fails without a grant.
func TestResolveWaitsForTheKey(t *testing.T) {
	t.Parallel()
	f := newFixture(t, &agentdv1.OAuthClient{}, nil)
	unlock, err := f.client.locks.lock(t.Context(), f.sub.key())
	if err != nil {
		t.Fatal(err)
	}
	defer unlock()
	cause := errors.New("the generation ended")
	ctx, cancel := context.WithCancelCause(t.Context())
	failed := make(chan error)
	go func() {
		_, _, err := f.client.Resolve(ctx, f.sub, f.unauthorized(), "", f.person(f.unauthorized()))
		failed <- err
	}()
	waitUsers(t, &f.client.locks, f.sub.key(), 2)
	cancel(cause)
	if err := <-failed; err != cause {
		t.Errorf("Resolve: %v, want the context's cause", err)
	}
	if len(f.asked) != 0 || len(f.srv.Grants()) != 0 {
		t.Errorf("the person was asked %v, grants %v; want nothing", f.asked, f.srv.Grants())
	}
}

// A token that a store fails to keep still serves, and the failure is
// logged.
func TestKeepFails(t *testing.T) {
	t.Parallel()
	f := newFixture(t, &agentdv1.OAuthClient{}, &fakeStore{Store: oauthtokens.NewMemory(), put: func() error { return errors.New("disk full") }})
	tok, obtained, err := f.client.Resolve(t.Context(), f.sub, f.unauthorized(), "", f.person(f.unauthorized()))
	if err != nil || !obtained || tok == nil {
		t.Fatalf("Resolve: %v, %v, %v; want a token obtained", tok, obtained, err)
	}
	want := `level=WARN msg="oauth token not stored; it serves this generation only" tenant=acme generation=gen-1 server=crm err="disk full"`
	f.checkLog(t, want)
}

// Authorization is the kept token's, refreshed first when it is about to
// expire and no resolution holds the key; else nothing.
func TestAuthorization(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name string
		// setUp changes the kept token (tok, a first resolution's) or the
		// fixture, and returns the Authorization wanted ("refreshed" for a
		// new one)
		setUp       func(t *testing.T, f *fixture, tok *mcpauth.Token) string
		wantRefresh int
		wantLog     string
	}{
		{
			name:  "fresh",
			setUp: func(t *testing.T, f *fixture, tok *mcpauth.Token) string { return tok.Authorization() },
		},
		{
			name: "about to expire: refreshed",
			setUp: func(t *testing.T, f *fixture, tok *mcpauth.Token) string {
				f.keepExpiring(t, tok)
				return "refreshed"
			},
			wantRefresh: 1,
		},
		{
			name: "about to expire while a resolution holds the key: as it is",
			setUp: func(t *testing.T, f *fixture, tok *mcpauth.Token) string {
				f.keepExpiring(t, tok)
				unlock, err := f.client.locks.lock(t.Context(), f.sub.key())
				if err != nil {
					t.Fatal(err)
				}
				t.Cleanup(unlock)
				return tok.Authorization()
			},
		},
		{
			name: "about to expire and not refreshed: none",
			setUp: func(t *testing.T, f *fixture, tok *mcpauth.Token) string {
				f.keepExpiring(t, tok)
				f.srv.RevokeAll()
				return ""
			},
			wantLog: `level=INFO msg="oauth token not refreshed" tenant=acme generation=gen-1 server=crm err=`,
		},
		{
			name: "another client's: none",
			setUp: func(t *testing.T, f *fixture, tok *mcpauth.Token) string {
				f.sub.Config.ClientID = "another"
				return ""
			},
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			f := newFixture(t, &agentdv1.OAuthClient{}, nil)
			if got := f.client.Authorization(t.Context(), f.sub); got != "" {
				t.Errorf("Authorization without a token: %q, want none", got)
			}
			tok, _ := f.resolve(t, f.unauthorized(), "")
			want := tc.setUp(t, f, tok)
			got := f.client.Authorization(t.Context(), f.sub)
			if want == "refreshed" {
				if kept := f.kept(t); got == tok.Authorization() || got != kept.Authorization() {
					t.Errorf("Authorization %q, want a new token, kept", got)
				}
			} else if got != want {
				t.Errorf("Authorization %q, want %q", got, want)
			}
			if n := f.srv.Grants()["refresh_token"]; n != tc.wantRefresh {
				t.Errorf("%d refreshes, want %d", n, tc.wantRefresh)
			}
			f.checkLog(t, tc.wantLog)
		})
	}
}

// A store that cannot be read gives no Authorization, and says so.
func TestAuthorizationUnread(t *testing.T) {
	t.Parallel()
	f := newFixture(t, &agentdv1.OAuthClient{}, &fakeStore{Store: oauthtokens.NewMemory(), get: func() error { return errors.New("store down") }})
	if got := f.client.Authorization(t.Context(), f.sub); got != "" {
		t.Errorf("Authorization %q, want none", got)
	}
	want := `level=WARN msg="oauth token not read" tenant=acme generation=gen-1 server=crm err="store down"`
	f.checkLog(t, want)
}

// keepExpiring keeps tok as if it expired within the minute.
func (f *fixture) keepExpiring(t *testing.T, tok *mcpauth.Token) {
	t.Helper()
	old := *tok
	old.Expiry = time.Now().Add(30 * time.Second)
	f.client.Keep(t.Context(), f.sub, &old)
}

// The declaration's oauth block becomes the mcpauth configuration, with
// agentd's defaults where it names none.
func TestConfig(t *testing.T) {
	t.Parallel()
	const cimd = "https://agentd.example/client.json"
	c := New(Options{RedirectURL: redirectURL, ClientMetadataURL: cimd, ClientName: "acme agent"}, nil)
	for _, tc := range []struct {
		name         string
		decl         *agentdv1.OAuthClient
		allowPrivate bool
		want         *mcpauth.Config // HTTPClient aside
		wantHTTP     *http.Client
	}{
		{
			name:     "agentd's defaults",
			decl:     &agentdv1.OAuthClient{},
			want:     &mcpauth.Config{RedirectURL: redirectURL, ClientMetadataURL: cimd, ClientName: "acme agent"},
			wantHTTP: c.public,
		},
		{
			name: "the declaration's own, private addresses allowed",
			decl: &agentdv1.OAuthClient{
				Grant: agentdv1.GrantType_GRANT_TYPE_CLIENT_CREDENTIALS, ClientId: "c", ClientSecret: "s", Scopes: []string{"a"},
				TokenEndpointAuthMethod: "client_secret_post", RedirectUrl: "https://app.example/cb",
			},
			allowPrivate: true,
			want: &mcpauth.Config{
				Grant: mcpauth.ClientCredentials, ClientID: "c", ClientSecret: "s", Scopes: []string{"a"}, AuthMethod: "client_secret_post",
				RedirectURL: "https://app.example/cb", ClientMetadataURL: cimd, ClientName: "acme agent",
			},
			wantHTTP: c.lan,
		},
		{name: "a private key that does not parse", decl: &agentdv1.OAuthClient{ClientId: "c", PrivateKey: "not a key"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			got, err := c.Config(tc.decl, tc.allowPrivate, false)
			if tc.want == nil {
				if err == nil {
					t.Errorf("Config: %+v, want an error", got)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(tc.want, got, cmpopts.IgnoreFields(mcpauth.Config{}, "HTTPClient")); diff != "" {
				t.Errorf("Config (-want +got):\n%s", diff)
			}
			if got.HTTPClient != tc.wantHTTP {
				t.Error("Config's HTTP client is not the one for the tenant's addresses")
			}
		})
	}
}

// fakeStore is a Store whose Get or Put fail with what its fields give.
type fakeStore struct {
	oauthtokens.Store
	get, put func() error
}

func (s *fakeStore) Get(ctx context.Context, k oauthtokens.Key) ([]byte, error) {
	if s.get != nil {
		return nil, s.get()
	}
	return s.Store.Get(ctx, k)
}

func (s *fakeStore) Put(ctx context.Context, k oauthtokens.Key, token []byte) error {
	if s.put != nil {
		return s.put()
	}
	return s.Store.Put(ctx, k, token)
}
