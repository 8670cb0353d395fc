package console

import (
	"encoding/json"
	"strings"
	"testing"
	"testing/fstest"

	"github.com/agentd/agentd/internal/auth/oidctest"
	"github.com/agentd/agentd/internal/config"
)

var page = fstest.MapFS{
	"index.html": {Data: []byte("<!doctype html><title>agentd</title>")},
	"console.js": {Data: []byte("export {}")},
}

// signInConfig reads h's config.json.
func signInConfig(t *testing.T, h handler) Config {
	t.Helper()
	var cfg Config
	if err := json.Unmarshal(get(h, "GET", "/console/config.json").Body.Bytes(), &cfg); err != nil {
		t.Fatal(err)
	}
	return cfg
}

// The page learns the sign-in's endpoints from the issuer's discovery
// document, read once, and its Content-Security-Policy admits calls to
// the token endpoint's origin (the page exchanges its code there), on
// the page only.
func TestSignInEndpoints(t *testing.T) {
	t.Parallel()
	is := oidctest.New(t)
	h := newHandler(page, Config{OIDC: &SignIn{Issuer: is.URL, ClientID: "console", Scopes: []string{"openid"}, Token: "id_token"}})

	got := signInConfig(t, h).OIDC
	if got == nil || got.AuthorizationEndpoint != is.URL+"/authorize" || got.TokenEndpoint != is.URL+"/token" || got.Error != "" ||
		got.ClientID != "console" || got.Token != "id_token" {
		t.Fatalf("config.json's oidc: %+v; want the issuer's endpoints", got)
	}
	if csp := get(h, "GET", "/console/").Header().Get("Content-Security-Policy"); !strings.Contains(csp, "connect-src 'self' "+is.URL+";") {
		t.Errorf("the page's Content-Security-Policy %q; want connect-src admitting %s", csp, is.URL)
	}
	if csp := get(h, "GET", "/console/console.js").Header().Get("Content-Security-Policy"); !strings.Contains(csp, "connect-src 'self';") {
		t.Errorf("the script's Content-Security-Policy %q; want connect-src 'self' alone", csp)
	}
	if discovery, _ := is.Fetches(); discovery != 1 {
		t.Errorf("the discovery document was read %d times; want once", discovery)
	}
}

// An issuer that cannot be read leaves the page without endpoints, told
// why, and its calls to its own origin only.
func TestSignInIssuerDown(t *testing.T) {
	t.Parallel()
	is := oidctest.New(t)
	is.SetDown(true)
	h := newHandler(page, Config{OIDC: &SignIn{Issuer: is.URL, ClientID: "console"}})
	got := signInConfig(t, h).OIDC
	if got == nil || got.Error == "" || got.AuthorizationEndpoint != "" || got.TokenEndpoint != "" {
		t.Fatalf("config.json's oidc: %+v; want no endpoints and the reason", got)
	}
	if csp := get(h, "GET", "/console/").Header().Get("Content-Security-Policy"); !strings.Contains(csp, "connect-src 'self';") {
		t.Errorf("the page's Content-Security-Policy %q; want connect-src 'self' alone", csp)
	}
}

// The page sends the ID token when the issuer's audience is the
// console's client (an ID token's audience), the access token otherwise;
// without a client id it signs in with API keys only.
func TestConfigOf(t *testing.T) {
	t.Parallel()
	issuers := []config.OIDCIssuer{{Issuer: "https://idp.example", Audience: "console", CAFile: "/ca.pem"}}
	for _, tc := range []struct {
		name     string
		clientID string
		audience string
		want     string // the token; "" for no sign-in
	}{
		{"the audience is the client", "console", "console", "id_token"},
		{"the audience is an API", "console", "agentd-api", "access_token"},
		{"no client id", "", "console", ""},
	} {
		cfg := config.Config{Console: config.Console{ClientID: tc.clientID}, Auth: config.Auth{OIDC: issuers}}
		cfg.Auth.OIDC[0].Audience = tc.audience
		got := ConfigOf(cfg).OIDC
		switch {
		case tc.want == "" && got != nil:
			t.Errorf("%s: sign-in %+v; want none", tc.name, got)
		case tc.want != "" && (got == nil || got.Token != tc.want || got.Issuer != "https://idp.example" || got.caFile != "/ca.pem" || strings.Join(got.Scopes, " ") != "openid"):
			t.Errorf("%s: sign-in %+v; want %s from https://idp.example", tc.name, got, tc.want)
		}
	}
}
