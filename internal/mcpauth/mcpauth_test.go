package mcpauth_test

import (
	"context"
	"crypto"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/rsa"
	"crypto/x509"
	"encoding/json"
	"encoding/pem"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"net/url"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/agentd/agentd/internal/fault"
	"github.com/agentd/agentd/internal/mcpauth"
	"github.com/agentd/agentd/internal/oauthtest"
)

const redirectURL = "http://127.0.0.1:7070/oauth/callback"

// post sends one JSON-RPC request to an MCP endpoint, with a token when
// one is given, and returns the refusal it got (Status 200 when none).
func post(t *testing.T, mcpURL string, tok *mcpauth.Token, method, tool string) mcpauth.Challenge {
	t.Helper()
	body := fmt.Sprintf(`{"jsonrpc":"2.0","id":1,"method":%q,"params":{"name":%q,"arguments":{"text":"hi"}}}`, method, tool)
	req, err := http.NewRequestWithContext(t.Context(), http.MethodPost, mcpURL, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	if tok != nil {
		req.Header.Set("Authorization", tok.Authorization())
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	return mcpauth.Challenge{Status: resp.StatusCode, WWWAuthenticate: resp.Header.Values("WWW-Authenticate")}
}

// authorize runs the whole authorization code flow against s, with the
// Pending crossing a JSON round trip and a fresh Config, as it does when
// another agentd process receives the redirect.
func authorize(t *testing.T, s *oauthtest.Server, cfg mcpauth.Config, ch mcpauth.Challenge, granted []string) (*mcpauth.Token, error) {
	t.Helper()
	ctx := t.Context()
	p, err := cfg.Begin(ctx, s.MCPURL, ch, granted)
	if err != nil {
		return nil, err
	}
	p = roundTrip(t, p)
	loc, err := s.Approve(ctx, p.AuthURL)
	if err != nil {
		t.Fatal(err)
	}
	other := cfg
	return other.Complete(ctx, p, loc)
}

func roundTrip[T any](t *testing.T, v *T) *T {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	out := new(T)
	if err := json.Unmarshal(b, out); err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(v, out); diff != "" {
		t.Fatalf("JSON round trip changed it (-before +after):\n%s", diff)
	}
	return out
}

type bearer struct{ tok *mcpauth.Token }

func (b bearer) RoundTrip(r *http.Request) (*http.Response, error) {
	r = r.Clone(r.Context())
	r.Header.Set("Authorization", b.tok.Authorization())
	return http.DefaultTransport.RoundTrip(r)
}

// callEcho calls the echo tool through the go-sdk client with tok.
func callEcho(t *testing.T, mcpURL string, tok *mcpauth.Token) {
	t.Helper()
	c := mcp.NewClient(&mcp.Implementation{Name: "test", Version: "1"}, &mcp.ClientOptions{Capabilities: &mcp.ClientCapabilities{}})
	tr := &mcp.StreamableClientTransport{Endpoint: mcpURL, HTTPClient: &http.Client{Transport: bearer{tok}}, DisableStandaloneSSE: true}
	cs, err := c.Connect(t.Context(), tr, &mcp.ClientSessionOptions{ProtocolVersion: "2025-11-25"})
	if err != nil {
		t.Fatalf("connect with the token: %v", err)
	}
	defer cs.Close()
	res, err := cs.CallTool(t.Context(), &mcp.CallToolParams{Name: "echo", Arguments: map[string]any{"text": "hello"}})
	if err != nil || res.IsError {
		t.Fatalf("echo: %v %+v", err, res)
	}
}

func wantKind(t *testing.T, err error, k fault.Kind) {
	t.Helper()
	if err == nil {
		t.Fatalf("no error, want %v", k)
	}
	if got := fault.KindOf(err); got != k {
		t.Fatalf("error %q is %v, want %v", err, got, k)
	}
}

// X-M1: the authorization code flow end to end: discovery from a 401's
// challenge, a pre-registered client (client_secret_basic), PKCE and the
// resource indicator checked by the authorization server, the Pending
// completed after a JSON round trip, and the token accepted by the MCP
// server.
func TestAuthorizationCode(t *testing.T) {
	t.Parallel()
	s := oauthtest.New(t, oauthtest.Options{ChallengeScope: true})
	ch := post(t, s.MCPURL, nil, "tools/list", "")
	if ch.Status != http.StatusUnauthorized || ch.StepUp() {
		t.Fatalf("unauthenticated request: %+v", ch)
	}
	cfg := mcpauth.Config{ClientID: s.ClientID, ClientSecret: s.ClientSecret, RedirectURL: redirectURL}
	tok, err := authorize(t, s, cfg, ch, nil)
	if err != nil {
		t.Fatal(err)
	}
	want := &mcpauth.Token{
		TokenType: "Bearer", Scopes: []string{"mcp:read"}, TokenURL: s.Issuer + "/token", Issuer: s.Issuer,
		Resource: s.MCPURL, ClientID: s.ClientID, ClientSecret: s.ClientSecret, AuthMethod: mcpauth.MethodBasic,
	}
	got := *tok
	got.AccessToken, got.RefreshToken, got.Expiry = "", "", time.Time{}
	if diff := cmp.Diff(want, &got); diff != "" {
		t.Errorf("token (-want +got):\n%s", diff)
	}
	if tok.AccessToken == "" || tok.RefreshToken == "" || !tok.Fresh(time.Now()) {
		t.Errorf("token lacks access or refresh token or is stale: %+v", tok.Expiry)
	}
	roundTrip(t, tok)
	callEcho(t, s.MCPURL, tok)
	if diff := cmp.Diff(map[string]int{"authorization_code": 1}, s.Grants()); diff != "" {
		t.Errorf("grants (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff([]string{s.MCPURL, s.MCPURL}, s.Resources()); diff != "" {
		t.Errorf("resource parameters of authorize and token (-want +got):\n%s", diff)
	}
}

// X-M1: registration order: a client ID metadata document when the
// authorization server supports them, else the pre-registered client, else
// dynamic registration (confidential or public, as the server allows).
func TestRegistration(t *testing.T) {
	t.Parallel()
	const cimd = "https://agentd.example/oauth/client.json"
	key := ecKey(t, elliptic.P256())
	for _, tc := range []struct {
		name       string
		opts       oauthtest.Options
		preReg     bool
		key        crypto.Signer
		cimd       bool
		wantClient string // "cimd", "pre", "dcr"
		wantMethod string
		wantErr    fault.Kind
	}{
		{name: "cimd preferred", opts: oauthtest.Options{CIMD: true}, preReg: true, cimd: true, wantClient: "cimd", wantMethod: mcpauth.MethodNone},
		{name: "pre-registered without cimd support", preReg: true, cimd: true, wantClient: "pre", wantMethod: mcpauth.MethodBasic},
		{name: "pre-registered post only", opts: oauthtest.Options{AuthMethods: []string{"client_secret_post"}}, preReg: true, wantClient: "pre", wantMethod: mcpauth.MethodPost},
		{name: "pre-registered private_key_jwt", opts: oauthtest.Options{PublicKey: key.Public(), AuthMethods: []string{"private_key_jwt"}}, preReg: true, key: key, wantClient: "pre", wantMethod: mcpauth.MethodPrivateKeyJWT},
		{name: "dynamic confidential", cimd: true, wantClient: "dcr", wantMethod: mcpauth.MethodBasic},
		{name: "dynamic public", opts: oauthtest.Options{AuthMethods: []string{"none"}}, wantClient: "dcr", wantMethod: mcpauth.MethodNone},
		{name: "no way to register", opts: oauthtest.Options{NoDCR: true}, wantErr: fault.Unauthenticated},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			s := oauthtest.New(t, tc.opts)
			cfg := mcpauth.Config{RedirectURL: redirectURL, ClientName: "agentd test"}
			if tc.preReg {
				cfg.ClientID, cfg.ClientSecret = s.ClientID, s.ClientSecret
			}
			if tc.key != nil {
				cfg.ClientSecret, cfg.PrivateKey = "", tc.key
			}
			if tc.cimd {
				cfg.ClientMetadataURL = cimd
			}
			tok, err := authorize(t, s, cfg, post(t, s.MCPURL, nil, "tools/list", ""), nil)
			if tc.wantErr != fault.Internal {
				wantKind(t, err, tc.wantErr)
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			switch tc.wantClient {
			case "cimd":
				if tok.ClientID != cimd || tok.ClientSecret != "" {
					t.Errorf("client %q, want the CIMD URL without a secret", tok.ClientID)
				}
			case "pre":
				if tok.ClientID != s.ClientID {
					t.Errorf("client %q, want the pre-registered one", tok.ClientID)
				}
			case "dcr":
				if !strings.HasPrefix(tok.ClientID, "dcr-") || (tok.ClientSecret == "") != (tc.wantMethod == mcpauth.MethodNone) {
					t.Errorf("client %q (secret set: %v), want a dynamically registered one", tok.ClientID, tok.ClientSecret != "")
				}
			}
			if tok.AuthMethod != tc.wantMethod {
				t.Errorf("auth method %q, want %q", tok.AuthMethod, tc.wantMethod)
			}
			if got := s.AuthMethods(); got[tc.wantMethod] != 1 {
				t.Errorf("server saw methods %v, want one %s", got, tc.wantMethod)
			}
			// The registered client refreshes too: the token carries it
			// (all but a private key).
			if _, err := (&mcpauth.Config{PrivateKey: tc.key}).Refresh(t.Context(), tok); err != nil {
				t.Errorf("refresh with the token's client: %v", err)
			}
		})
	}
}

// X-M1: the redirect is checked before the code is exchanged: the state
// must be ours, an iss must be the issuer's (and present when promised),
// a refusal is reported; and the authorization server checks PKCE.
func TestCompleteRefusals(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name     string
		opts     oauthtest.Options
		deny     bool
		redirect func(loc string) string
		pending  func(p *mcpauth.Pending)
		wantMsg  string
	}{
		{name: "state mismatch", redirect: func(loc string) string { return setParam(loc, "state", "forged") }, wantMsg: "state"},
		{name: "state missing", redirect: func(loc string) string { return setParam(loc, "state", "") }, wantMsg: "state"},
		{name: "iss mismatch", opts: oauthtest.Options{Iss: true}, redirect: func(loc string) string { return setParam(loc, "iss", "http://127.0.0.1:1") }, wantMsg: "iss"},
		{name: "iss missing though promised", opts: oauthtest.Options{Iss: true}, redirect: func(loc string) string { return setParam(loc, "iss", "") }, wantMsg: "iss"},
		{name: "iss unpromised and wrong", redirect: func(loc string) string { return setParam(loc, "iss", "http://127.0.0.1:1") }, wantMsg: "iss"},
		{name: "user denied", deny: true, wantMsg: "access_denied"},
		{name: "wrong verifier", pending: func(p *mcpauth.Pending) { p.Verifier = strings.Repeat("x", 43) }, wantMsg: "invalid_grant"},
		{name: "wrong resource", pending: func(p *mcpauth.Pending) { p.Resource = "http://127.0.0.1:1/other" }, wantMsg: "invalid_target"},
		{name: "redirect not a URL", redirect: func(string) string { return "http://[::1" }, wantMsg: "not a URL"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			s := oauthtest.New(t, tc.opts)
			cfg := mcpauth.Config{ClientID: s.ClientID, ClientSecret: s.ClientSecret, RedirectURL: redirectURL}
			p, err := cfg.Begin(t.Context(), s.MCPURL, post(t, s.MCPURL, nil, "tools/list", ""), nil)
			if err != nil {
				t.Fatal(err)
			}
			if tc.deny {
				s.DenyNext("access_denied")
			}
			loc, err := s.Approve(t.Context(), p.AuthURL)
			if err != nil {
				t.Fatal(err)
			}
			if tc.redirect != nil {
				loc = tc.redirect(loc)
			}
			if tc.pending != nil {
				tc.pending(p)
			}
			tok, err := cfg.Complete(t.Context(), p, loc)
			wantKind(t, err, fault.Unauthenticated)
			if tok != nil || !strings.Contains(err.Error(), tc.wantMsg) {
				t.Errorf("error %q, want one mentioning %q", err, tc.wantMsg)
			}
			checkClean(t, err, s.ClientSecret, p.State, p.Verifier, codeOf(loc))
		})
	}
}

// X-M1: iss present and right when the server promises it.
func TestIssAccepted(t *testing.T) {
	t.Parallel()
	s := oauthtest.New(t, oauthtest.Options{Iss: true})
	cfg := mcpauth.Config{ClientID: s.ClientID, ClientSecret: s.ClientSecret, RedirectURL: redirectURL}
	if _, err := authorize(t, s, cfg, mcpauth.Challenge{}, nil); err != nil {
		t.Fatal(err)
	}
}

// X-M1: scope selection: the challenge's scope, else the resource's
// scopes_supported, plus explicit scopes; offline_access when the
// authorization server lists it.
func TestScopes(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name     string
		opts     oauthtest.Options
		explicit []string
		want     []string
	}{
		{name: "from challenge", opts: oauthtest.Options{ChallengeScope: true, Scopes: []string{"a", "b"}}, want: []string{"a", "b"}},
		{name: "from metadata", opts: oauthtest.Options{Scopes: []string{"a", "b"}}, want: []string{"a", "b"}},
		{name: "explicit with challenge", opts: oauthtest.Options{ChallengeScope: true, Scopes: []string{"a"}}, explicit: []string{"x"}, want: []string{"x", "a"}},
		{name: "explicit replaces metadata", opts: oauthtest.Options{Scopes: []string{"a"}}, explicit: []string{"a", "x"}, want: []string{"a", "x"}},
		{name: "offline access", opts: oauthtest.Options{OfflineAccess: true}, want: []string{"mcp:read", "offline_access"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			s := oauthtest.New(t, tc.opts)
			cfg := mcpauth.Config{ClientID: s.ClientID, ClientSecret: s.ClientSecret, RedirectURL: redirectURL, Scopes: tc.explicit}
			p, err := cfg.Begin(t.Context(), s.MCPURL, post(t, s.MCPURL, nil, "tools/list", ""), nil)
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(tc.want, p.Scopes); diff != "" {
				t.Errorf("scopes (-want +got):\n%s", diff)
			}
			u, _ := url.Parse(p.AuthURL)
			if got := u.Query().Get("scope"); got != strings.Join(tc.want, " ") {
				t.Errorf("scope parameter %q", got)
			}
		})
	}
}

// X-M1: step-up: a 403 insufficient_scope challenge leads to a new
// authorization for the union of the granted scopes and the challenge's,
// and the new token passes.
func TestStepUp(t *testing.T) {
	t.Parallel()
	s := oauthtest.New(t, oauthtest.Options{ChallengeScope: true})
	cfg := mcpauth.Config{ClientID: s.ClientID, ClientSecret: s.ClientSecret, RedirectURL: redirectURL}
	tok, err := authorize(t, s, cfg, post(t, s.MCPURL, nil, "tools/list", ""), nil)
	if err != nil {
		t.Fatal(err)
	}
	tok.Scopes = append(tok.Scopes, "earlier:grant") // granted before, must survive the step-up
	ch := post(t, s.MCPURL, tok, "tools/call", s.StepUpTool)
	if !ch.StepUp() {
		t.Fatalf("step-up tool answered %+v, want a 403 insufficient_scope", ch)
	}
	tok2, err := authorize(t, s, cfg, ch, tok.Scopes)
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff([]string{"mcp:read", "earlier:grant", s.StepUpScope}, tok2.Scopes); diff != "" {
		t.Errorf("stepped-up scopes (-want +got):\n%s", diff)
	}
	if ch := post(t, s.MCPURL, tok2, "tools/call", s.StepUpTool); ch.Status != http.StatusOK {
		t.Errorf("step-up tool with the new token: %+v", ch)
	}
}

// X-M1: refresh: an expired token is refused by the MCP server; Refresh
// gets a new one with the resource indicator, the server rotates the
// refresh token, and the spent one is refused.
func TestRefresh(t *testing.T) {
	t.Parallel()
	s := oauthtest.New(t, oauthtest.Options{})
	cfg := mcpauth.Config{ClientID: s.ClientID, ClientSecret: s.ClientSecret, RedirectURL: redirectURL}
	tok, err := authorize(t, s, cfg, mcpauth.Challenge{}, nil)
	if err != nil {
		t.Fatal(err)
	}
	s.ExpireAll()
	if ch := post(t, s.MCPURL, tok, "tools/list", ""); ch.Status != http.StatusUnauthorized {
		t.Fatalf("expired token answered %d", ch.Status)
	}
	// A restarted agentd refreshes with a Config of its own: the token
	// carries the client.
	tok2, err := (&mcpauth.Config{}).Refresh(t.Context(), roundTrip(t, tok))
	if err != nil {
		t.Fatal(err)
	}
	if tok2.AccessToken == tok.AccessToken || tok2.RefreshToken == tok.RefreshToken || tok2.RefreshToken == "" {
		t.Error("refresh did not give a new access token and a rotated refresh token")
	}
	if diff := cmp.Diff(tok.Scopes, tok2.Scopes); diff != "" {
		t.Errorf("scopes changed (-old +new):\n%s", diff)
	}
	callEcho(t, s.MCPURL, tok2)
	if r := s.Resources(); r[len(r)-1] != s.MCPURL {
		t.Errorf("refresh sent resource %q", r[len(r)-1])
	}
	_, err = cfg.Refresh(t.Context(), tok)
	wantKind(t, err, fault.Unauthenticated)
	checkClean(t, err, tok.RefreshToken, tok.AccessToken, s.ClientSecret)

	s.RevokeAll()
	_, err = cfg.Refresh(t.Context(), tok2)
	wantKind(t, err, fault.Unauthenticated)

	noRefresh := *tok2
	noRefresh.RefreshToken = ""
	_, err = cfg.Refresh(t.Context(), &noRefresh)
	wantKind(t, err, fault.Unauthenticated)
	if diff := cmp.Diff(map[string]int{"authorization_code": 1, "refresh_token": 1}, s.Grants()); diff != "" {
		t.Errorf("grants (-want +got):\n%s", diff)
	}
}

// X-M1: a server that does not rotate refresh tokens: the old one is kept.
func TestRefreshKeepsRefreshToken(t *testing.T) {
	t.Parallel()
	var form url.Values
	ts := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_ = r.ParseForm()
		form = r.PostForm
		w.Header().Set("Content-Type", "application/json")
		fmt.Fprint(w, `{"access_token":"new","token_type":"Bearer","expires_in":60}`)
	}))
	t.Cleanup(ts.Close)
	old := &mcpauth.Token{AccessToken: "old", RefreshToken: "keep-me", TokenURL: ts.URL, Resource: "http://127.0.0.1:9/mcp", ClientID: "c", AuthMethod: mcpauth.MethodNone, Scopes: []string{"s"}}
	tok, err := (&mcpauth.Config{}).Refresh(t.Context(), old)
	if err != nil {
		t.Fatal(err)
	}
	if tok.AccessToken != "new" || tok.RefreshToken != "keep-me" || !slices.Equal(tok.Scopes, []string{"s"}) {
		t.Errorf("refreshed token %+v", tok)
	}
	want := url.Values{"grant_type": {"refresh_token"}, "refresh_token": {"keep-me"}, "resource": {old.Resource}, "client_id": {"c"}}
	if diff := cmp.Diff(want, form); diff != "" {
		t.Errorf("refresh request (-want +got):\n%s", diff)
	}
}

func rsaKey(t *testing.T) *rsa.PrivateKey {
	t.Helper()
	k, err := rsa.GenerateKey(rand.Reader, 2048)
	if err != nil {
		t.Fatal(err)
	}
	return k
}

func ecKey(t *testing.T, c elliptic.Curve) *ecdsa.PrivateKey {
	t.Helper()
	k, err := ecdsa.GenerateKey(c, rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	return k
}

// X-M1: the client credentials grant with client_secret_basic,
// client_secret_post and private_key_jwt (RS256, ES256), each the only
// method the authorization server accepts; renewing such a token is a new
// grant.
func TestClientCredentials(t *testing.T) {
	t.Parallel()
	rk, ek := rsaKey(t), ecKey(t, elliptic.P256())
	for _, tc := range []struct {
		method string
		key    crypto.Signer
	}{
		{method: mcpauth.MethodBasic},
		{method: mcpauth.MethodPost},
		{method: mcpauth.MethodPrivateKeyJWT, key: rk},
		{method: mcpauth.MethodPrivateKeyJWT, key: ek},
	} {
		t.Run(fmt.Sprintf("%s %T", tc.method, tc.key), func(t *testing.T) {
			t.Parallel()
			opts := oauthtest.Options{AuthMethods: []string{tc.method}, ChallengeScope: true}
			if tc.key != nil {
				opts.PublicKey = tc.key.Public()
			}
			s := oauthtest.New(t, opts)
			cfg := mcpauth.Config{Grant: mcpauth.ClientCredentials, ClientID: s.ClientID, PrivateKey: tc.key, KeyID: "k1"}
			if tc.key == nil {
				cfg.ClientSecret = s.ClientSecret
			}
			tok, err := cfg.ClientCredentials(t.Context(), s.MCPURL, post(t, s.MCPURL, nil, "tools/list", ""))
			if err != nil {
				t.Fatal(err)
			}
			if tok.AuthMethod != tc.method || tok.RefreshToken != "" || tok.Grant != mcpauth.ClientCredentials {
				t.Errorf("token %+v", tok)
			}
			callEcho(t, s.MCPURL, tok)
			s.ExpireAll()
			tok2, err := cfg.Refresh(t.Context(), roundTrip(t, tok))
			if err != nil {
				t.Fatal(err)
			}
			callEcho(t, s.MCPURL, tok2)
			if diff := cmp.Diff(map[string]int{"client_credentials": 2}, s.Grants()); diff != "" {
				t.Errorf("grants (-want +got):\n%s", diff)
			}
			if diff := cmp.Diff(map[string]int{tc.method: 2}, s.AuthMethods()); diff != "" {
				t.Errorf("auth methods (-want +got):\n%s", diff)
			}
		})
	}
}

// X-M1: a client credentials grant the authorization server refuses (a
// wrong secret, a key it does not know) is Unauthenticated and quiet.
func TestClientCredentialsRefused(t *testing.T) {
	t.Parallel()
	s := oauthtest.New(t, oauthtest.Options{PublicKey: rsaKey(t).Public()})
	for _, cfg := range []mcpauth.Config{
		{Grant: mcpauth.ClientCredentials, ClientID: s.ClientID, ClientSecret: "wrong-secret-value"},
		{Grant: mcpauth.ClientCredentials, ClientID: s.ClientID, PrivateKey: rsaKey(t)},
	} {
		_, err := cfg.ClientCredentials(t.Context(), s.MCPURL, mcpauth.Challenge{})
		wantKind(t, err, fault.Unauthenticated)
		checkClean(t, err, "wrong-secret-value", s.ClientSecret, "/mcp")
	}
	_, err := (&mcpauth.Config{Grant: mcpauth.ClientCredentials}).ClientCredentials(t.Context(), s.MCPURL, mcpauth.Challenge{})
	wantKind(t, err, fault.Invalid)
}

// discoveryServer is a hand-built MCP server and authorization server on
// one origin, publishing metadata where a test says.
func discoveryServer(t *testing.T, prmAt, prmResource string, asMeta bool) (origin string) {
	t.Helper()
	mux := http.NewServeMux()
	var base string
	if prmAt != "" {
		mux.HandleFunc("GET "+prmAt, func(w http.ResponseWriter, r *http.Request) {
			res := base + prmResource
			w.Header().Set("Content-Type", "application/json")
			fmt.Fprintf(w, `{"resource":%q,"authorization_servers":[%q],"scopes_supported":["s1"]}`, res, base+"/tenant")
		})
	}
	if asMeta {
		meta := func(issuer string) http.HandlerFunc {
			return func(w http.ResponseWriter, r *http.Request) {
				w.Header().Set("Content-Type", "application/json")
				fmt.Fprintf(w, `{"issuer":%q,"authorization_endpoint":%q,"token_endpoint":%q,"response_types_supported":["code"],"code_challenge_methods_supported":["S256"]}`,
					base+issuer, base+issuer+"/auth", base+issuer+"/tok")
			}
		}
		mux.HandleFunc("GET /.well-known/oauth-authorization-server/tenant", meta("/tenant"))
		mux.HandleFunc("GET /.well-known/oauth-authorization-server", meta(""))
	}
	ts := httptest.NewServer(mux)
	t.Cleanup(ts.Close)
	base = ts.URL
	return base
}

// X-M1: discovery order: the challenge's resource_metadata, the
// well-known location under the MCP path, the root one; and the 2025-03-26
// fallbacks (no resource metadata: the origin is the authorization server;
// no authorization server metadata: /authorize, /token, /register).
func TestDiscovery(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name          string
		prmAt         string
		prmResource   string
		inChallenge   bool
		asMeta        bool
		wantAuth      string // relative to the origin
		wantToken     string
		wantResource  string
		wantScopeFrom string
		wantErr       string // the metadata cannot be used: the error says why
	}{
		{name: "challenge URL", prmAt: "/custom/prm.json", prmResource: "/mcp/x", inChallenge: true, asMeta: true, wantAuth: "/tenant/auth", wantToken: "/tenant/tok", wantResource: "/mcp/x", wantScopeFrom: "s1"},
		{name: "path well-known", prmAt: "/.well-known/oauth-protected-resource/mcp/x", prmResource: "/mcp/x", asMeta: true, wantAuth: "/tenant/auth", wantToken: "/tenant/tok", wantResource: "/mcp/x", wantScopeFrom: "s1"},
		{name: "root well-known", prmAt: "/.well-known/oauth-protected-resource", prmResource: "", asMeta: true, wantAuth: "/tenant/auth", wantToken: "/tenant/tok", wantResource: "", wantScopeFrom: "s1"},
		{name: "challenge URL with wrong resource refused, said so", prmAt: "/custom/prm.json", prmResource: "/elsewhere", inChallenge: true, asMeta: true, wantErr: "other than this server's URL"},
		{name: "2025-03-26 metadata at origin", asMeta: true, wantAuth: "/auth", wantToken: "/tok", wantResource: "/mcp/x"},
		{name: "2025-03-26 default endpoints", wantAuth: "/authorize", wantToken: "/token", wantResource: "/mcp/x"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			origin := discoveryServer(t, tc.prmAt, tc.prmResource, tc.asMeta)
			var ch mcpauth.Challenge
			if tc.inChallenge {
				ch = mcpauth.Challenge{Status: 401, WWWAuthenticate: []string{fmt.Sprintf(`Bearer resource_metadata="%s%s"`, origin, tc.prmAt)}}
			}
			cfg := mcpauth.Config{ClientID: "c", RedirectURL: redirectURL}
			p, err := cfg.Begin(t.Context(), origin+"/mcp/x", ch, nil)
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) || strings.Contains(err.Error(), "/mcp/x") {
					t.Fatalf("Begin: %v; want an error saying %q, without the server's path", err, tc.wantErr)
				}
				wantKind(t, err, fault.Unauthenticated)
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if !strings.HasPrefix(p.AuthURL, origin+tc.wantAuth+"?") || p.TokenURL != origin+tc.wantToken || p.Resource != origin+tc.wantResource {
				t.Errorf("auth URL %s, token URL %s, resource %s", p.AuthURL, p.TokenURL, p.Resource)
			}
			u, _ := url.Parse(p.AuthURL)
			q := u.Query()
			if q.Get("resource") != p.Resource || q.Get("code_challenge_method") != "S256" || q.Get("code_challenge") == "" || q.Get("state") != p.State || q.Get("scope") != tc.wantScopeFrom {
				t.Errorf("authorization request %v", q)
			}
		})
	}
}

// An authorization server whose metadata names another issuer than the
// one it was asked for is refused (RFC 8414), and the error names both.
func TestIssuerMismatch(t *testing.T) {
	t.Parallel()
	mux := http.NewServeMux()
	var base string
	mux.HandleFunc("GET /.well-known/oauth-authorization-server", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		fmt.Fprintf(w, `{"issuer":"https://other.example","authorization_endpoint":%q,"token_endpoint":%q,"response_types_supported":["code"],"code_challenge_methods_supported":["S256"]}`,
			base+"/auth", base+"/tok")
	})
	ts := httptest.NewServer(mux)
	t.Cleanup(ts.Close)
	base = ts.URL
	_, err := (&mcpauth.Config{ClientID: "c", RedirectURL: redirectURL}).Begin(t.Context(), base+"/mcp/tok_abcdef", mcpauth.Challenge{}, nil)
	wantKind(t, err, fault.Unauthenticated)
	if err == nil || !strings.Contains(err.Error(), `"https://other.example"`) || !strings.Contains(err.Error(), fmt.Sprintf("%q", base)) {
		t.Errorf("Begin: %v; want the issuer the metadata named and the one expected", err)
	}
	checkClean(t, err, "tok_abcdef")
}

// X-M1: errors name hosts only: never a secret, token, code, verifier or
// the MCP server URL's path; an unreachable authorization server is
// Unavailable; bad configuration is Invalid.
func TestErrors(t *testing.T) {
	t.Parallel()
	dead := httptest.NewServer(http.NotFoundHandler())
	dead.Close()
	_, err := (&mcpauth.Config{ClientID: "c", ClientSecret: "s3cr3t", RedirectURL: redirectURL}).Begin(t.Context(), dead.URL+"/mcp/tok_abcdef", mcpauth.Challenge{}, nil)
	wantKind(t, err, fault.Unavailable)
	checkClean(t, err, "tok_abcdef", "s3cr3t")
	if u, _ := url.Parse(dead.URL); !strings.Contains(err.Error(), u.Host) {
		t.Errorf("error %q does not name the host", err)
	}

	for _, cfg := range []mcpauth.Config{
		{ClientID: "c"}, // no redirect URL
		{ClientID: "c", RedirectURL: redirectURL, ClientMetadataURL: "http://agentd.example/client.json"},
		{ClientID: "c", RedirectURL: redirectURL, ClientMetadataURL: "https://agentd.example/"},
		{ClientID: "c", RedirectURL: redirectURL, AuthMethod: "private_key_jwt"},
		{ClientID: "c", RedirectURL: redirectURL, AuthMethod: "tls_client_auth"},
		{ClientID: "c", RedirectURL: redirectURL, Grant: mcpauth.ClientCredentials},
	} {
		_, err := cfg.Begin(t.Context(), "http://127.0.0.1:1/mcp", mcpauth.Challenge{}, nil)
		wantKind(t, err, fault.Invalid)
	}
	_, err = (&mcpauth.Config{ClientID: "c", RedirectURL: redirectURL}).Begin(t.Context(), "file:///etc/passwd", mcpauth.Challenge{}, nil)
	wantKind(t, err, fault.Invalid)

	ctx, cancel := context.WithCancel(t.Context())
	cancel()
	_, err = (&mcpauth.Config{ClientID: "c", RedirectURL: redirectURL}).Begin(ctx, "http://127.0.0.1:1/mcp", mcpauth.Challenge{}, nil)
	wantKind(t, err, fault.Canceled)
}

func TestParsePrivateKey(t *testing.T) {
	t.Parallel()
	rk, ek := rsaKey(t), ecKey(t, elliptic.P256())
	pkcs8 := func(k any) []byte {
		b, err := x509.MarshalPKCS8PrivateKey(k)
		if err != nil {
			t.Fatal(err)
		}
		return b
	}
	sec1, err := x509.MarshalECPrivateKey(ek)
	if err != nil {
		t.Fatal(err)
	}
	p384, err := x509.MarshalECPrivateKey(ecKey(t, elliptic.P384()))
	if err != nil {
		t.Fatal(err)
	}
	enc := func(typ string, b []byte) string { return string(pem.EncodeToMemory(&pem.Block{Type: typ, Bytes: b})) }
	for _, tc := range []struct {
		name string
		pem  string
		want crypto.PublicKey
	}{
		{"pkcs8 rsa", enc("PRIVATE KEY", pkcs8(rk)), rk.Public()},
		{"pkcs1 rsa", enc("RSA PRIVATE KEY", x509.MarshalPKCS1PrivateKey(rk)), rk.Public()},
		{"pkcs8 ec", enc("PRIVATE KEY", pkcs8(ek)), ek.Public()},
		{"sec1 ec", enc("EC PRIVATE KEY", sec1), ek.Public()},
		{"p-384", enc("EC PRIVATE KEY", p384), nil},
		{"not pem", "SECRETKEYMATERIAL", nil},
		{"corrupt", enc("PRIVATE KEY", []byte("SECRETKEYMATERIAL")), nil},
		{"wrong type", enc("CERTIFICATE", []byte("SECRETKEYMATERIAL")), nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			k, err := mcpauth.ParsePrivateKey(tc.pem)
			if tc.want == nil {
				wantKind(t, err, fault.Invalid)
				checkClean(t, err, "SECRETKEYMATERIAL", "U0VDUkVU")
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if eq, ok := k.Public().(interface{ Equal(crypto.PublicKey) bool }); !ok || !eq.Equal(tc.want) {
				t.Error("parsed a different key")
			}
		})
	}
}

func TestTokenAndChallenge(t *testing.T) {
	t.Parallel()
	now := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	for _, tc := range []struct {
		expiry time.Time
		fresh  bool
	}{
		{time.Time{}, true},
		{now.Add(2 * time.Minute), true},
		{now.Add(30 * time.Second), false},
		{now.Add(-time.Second), false},
	} {
		if got := (&mcpauth.Token{Expiry: tc.expiry}).Fresh(now); got != tc.fresh {
			t.Errorf("Fresh with expiry %v = %v", tc.expiry, got)
		}
	}
	if got := (&mcpauth.Token{AccessToken: "abc"}).Authorization(); got != "Bearer abc" {
		t.Errorf("Authorization() = %q", got)
	}
	for _, tc := range []struct {
		ch   mcpauth.Challenge
		want bool
	}{
		{mcpauth.Challenge{Status: 403, WWWAuthenticate: []string{`Bearer error="insufficient_scope", scope="a b"`}}, true},
		{mcpauth.Challenge{Status: 401, WWWAuthenticate: []string{`Bearer error="insufficient_scope", scope="a b"`}}, false},
		{mcpauth.Challenge{Status: 403, WWWAuthenticate: []string{`Bearer error="invalid_token"`}}, false},
		{mcpauth.Challenge{Status: 403, WWWAuthenticate: []string{`"garbage`}}, false},
		{mcpauth.Challenge{}, false},
	} {
		if got := tc.ch.StepUp(); got != tc.want {
			t.Errorf("%+v StepUp() = %v", tc.ch, got)
		}
	}
}

// checkClean fails if err's text contains any of secrets.
func checkClean(t *testing.T, err error, secrets ...string) {
	t.Helper()
	var fe *fault.Error
	if !errors.As(err, &fe) {
		t.Errorf("error %q is not classified", err)
	}
	for _, s := range secrets {
		if s != "" && strings.Contains(err.Error(), s) {
			t.Errorf("error %q contains a secret %q", err, s)
		}
	}
}

func setParam(raw, k, v string) string {
	u, err := url.Parse(raw)
	if err != nil {
		panic(err)
	}
	q := u.Query()
	if v == "" {
		q.Del(k)
	} else {
		q.Set(k, v)
	}
	u.RawQuery = q.Encode()
	return u.String()
}

func codeOf(raw string) string {
	u, err := url.Parse(raw)
	if err != nil {
		return ""
	}
	return u.Query().Get("code")
}
