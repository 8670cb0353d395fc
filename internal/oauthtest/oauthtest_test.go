package oauthtest_test

import (
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"net/http"
	"net/url"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/agentd/agentd/internal/oauthtest"
)

const redirect = "http://127.0.0.1:7070/cb"

func authorizeURL(s *oauthtest.Server, mod func(url.Values)) string {
	sum := sha256.Sum256([]byte("verifier-verifier-verifier-verifier-verifier"))
	q := url.Values{
		"response_type":         {"code"},
		"client_id":             {s.ClientID},
		"redirect_uri":          {redirect},
		"state":                 {"st"},
		"code_challenge":        {base64.RawURLEncoding.EncodeToString(sum[:])},
		"code_challenge_method": {"S256"},
		"resource":              {s.MCPURL},
		"scope":                 {"mcp:read"},
	}
	if mod != nil {
		mod(q)
	}
	return s.Issuer + "/authorize?" + q.Encode()
}

// The authorization endpoint refuses what a compliant client never sends.
func TestAuthorizeRefusals(t *testing.T) {
	t.Parallel()
	s := oauthtest.New(t, oauthtest.Options{})
	for name, mod := range map[string]func(url.Values){
		"no PKCE":        func(q url.Values) { q.Del("code_challenge") },
		"plain PKCE":     func(q url.Values) { q.Set("code_challenge_method", "plain") },
		"wrong resource": func(q url.Values) { q.Set("resource", "http://127.0.0.1:1/mcp") },
		"no resource":    func(q url.Values) { q.Del("resource") },
		"unknown client": func(q url.Values) { q.Set("client_id", "nobody") },
		"CIMD off":       func(q url.Values) { q.Set("client_id", "https://agentd.example/client.json") },
	} {
		if _, err := s.Approve(t.Context(), authorizeURL(s, mod)); err == nil {
			t.Errorf("%s: approved", name)
		}
	}
}

func tokenRequest(t *testing.T, s *oauthtest.Server, form url.Values, basic bool) (int, map[string]any) {
	t.Helper()
	req, err := http.NewRequestWithContext(t.Context(), http.MethodPost, s.Issuer+"/token", strings.NewReader(form.Encode()))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	if basic {
		req.SetBasicAuth(s.ClientID, s.ClientSecret)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var body map[string]any
	if err := json.NewDecoder(resp.Body).Decode(&body); err != nil {
		t.Fatal(err)
	}
	return resp.StatusCode, body
}

// A code is spent by its first exchange.
func TestCodeSingleUse(t *testing.T) {
	t.Parallel()
	s := oauthtest.New(t, oauthtest.Options{})
	loc, err := s.Approve(t.Context(), authorizeURL(s, nil))
	if err != nil {
		t.Fatal(err)
	}
	u, _ := url.Parse(loc)
	form := url.Values{
		"grant_type":    {"authorization_code"},
		"code":          {u.Query().Get("code")},
		"redirect_uri":  {redirect},
		"code_verifier": {"verifier-verifier-verifier-verifier-verifier"},
		"resource":      {s.MCPURL},
	}
	if st, body := tokenRequest(t, s, form, true); st != http.StatusOK || body["access_token"] == nil || body["scope"] != "mcp:read" {
		t.Fatalf("first exchange: %d %v", st, body)
	}
	if st, body := tokenRequest(t, s, form, true); st != http.StatusBadRequest || body["error"] != "invalid_grant" {
		t.Errorf("second exchange: %d %v", st, body)
	}
	if st, body := tokenRequest(t, s, url.Values{"grant_type": {"password"}}, true); st != http.StatusBadRequest || body["error"] != "unsupported_grant_type" {
		t.Errorf("password grant: %d %v", st, body)
	}
	if st, _ := tokenRequest(t, s, url.Values{"grant_type": {"client_credentials"}, "client_id": {s.ClientID}, "client_secret": {"wrong"}}, false); st != http.StatusUnauthorized {
		t.Errorf("wrong secret: %d", st)
	}
}

func mcpStatus(t *testing.T, s *oauthtest.Server, access, tool string) (int, string) {
	t.Helper()
	body := `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"` + tool + `","arguments":{}}}`
	req, err := http.NewRequestWithContext(t.Context(), http.MethodPost, s.MCPURL, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	if access != "" {
		req.Header.Set("Authorization", "Bearer "+access)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	return resp.StatusCode, resp.Header.Get("WWW-Authenticate")
}

// The MCP endpoint: 401 without a live token, 403 insufficient_scope for
// the step-up tool without its scope, and tokens die by ExpireAll and
// RevokeAll.
func TestProtectedResource(t *testing.T) {
	t.Parallel()
	s := oauthtest.New(t, oauthtest.Options{ChallengeScope: true})
	if st, ch := mcpStatus(t, s, "", "echo"); st != http.StatusUnauthorized || !strings.Contains(ch, s.MetadataURL) || !strings.Contains(ch, `scope="mcp:read"`) {
		t.Errorf("no token: %d %q", st, ch)
	}
	base, _ := s.Issue("mcp:read")
	if st, ch := mcpStatus(t, s, base, s.StepUpTool); st != http.StatusForbidden || !strings.Contains(ch, `error="insufficient_scope"`) || !strings.Contains(ch, s.StepUpScope) {
		t.Errorf("step-up tool with base scope: %d %q", st, ch)
	}
	if st, ch := mcpStatus(t, s, "at-unknown", "echo"); st != http.StatusUnauthorized || !strings.Contains(ch, "invalid_token") {
		t.Errorf("unknown token: %d %q", st, ch)
	}
	if st, _ := mcpStatus(t, s, base, "echo"); st == http.StatusUnauthorized || st == http.StatusForbidden {
		t.Errorf("live token refused: %d", st)
	}
	s.ExpireAll()
	if st, _ := mcpStatus(t, s, base, "echo"); st != http.StatusUnauthorized {
		t.Errorf("expired token: %d", st)
	}
	admin, _ := s.Issue("mcp:read", s.StepUpScope)
	if st, _ := mcpStatus(t, s, admin, s.StepUpTool); st == http.StatusUnauthorized || st == http.StatusForbidden {
		t.Errorf("step-up tool with its scope: %d", st)
	}
	s.RevokeAll()
	if st, _ := mcpStatus(t, s, admin, "echo"); st != http.StatusUnauthorized {
		t.Errorf("revoked token: %d", st)
	}
}

// Issued lists the code, then the tokens of its exchange and of a refresh
// and Issue's; Proofs the verifier the exchange carried.
func TestIssuedAndProofs(t *testing.T) {
	t.Parallel()
	s := oauthtest.New(t, oauthtest.Options{})
	loc, err := s.Approve(t.Context(), authorizeURL(s, nil))
	if err != nil {
		t.Fatal(err)
	}
	u, _ := url.Parse(loc)
	code := u.Query().Get("code")
	verifier := "verifier-verifier-verifier-verifier-verifier"
	_, exchanged := tokenRequest(t, s, url.Values{
		"grant_type":    {"authorization_code"},
		"code":          {code},
		"redirect_uri":  {redirect},
		"code_verifier": {verifier},
		"resource":      {s.MCPURL},
	}, true)
	_, refreshed := tokenRequest(t, s, url.Values{"grant_type": {"refresh_token"}, "refresh_token": {exchanged["refresh_token"].(string)}}, true)
	access, refresh := s.Issue("mcp:read")
	want := []string{code,
		exchanged["access_token"].(string), exchanged["refresh_token"].(string),
		refreshed["access_token"].(string), refreshed["refresh_token"].(string),
		access, refresh}
	if diff := cmp.Diff(want, s.Issued()); diff != "" {
		t.Errorf("Issued() (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff([]string{verifier}, s.Proofs()); diff != "" {
		t.Errorf("Proofs() (-want +got):\n%s", diff)
	}
}
