package auth

import (
	"context"
	"crypto/x509"
	"encoding/base64"
	"encoding/json"
	"encoding/pem"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/agentd/agentd/internal/logtest"

	jose "github.com/go-jose/go-jose/v4"
	"github.com/google/go-cmp/cmp"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"

	"github.com/agentd/agentd/internal/auth/oidctest"
	"github.com/agentd/agentd/internal/config"
)

// clock is a test's clock: it moves only when the test moves it.
type clock struct {
	mu sync.Mutex
	t  time.Time
}

func newClock() *clock { return &clock{t: time.Unix(1_900_000_000, 0)} }

func (c *clock) now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.t
}

func (c *clock) advance(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.t = c.t.Add(d)
}

func (c *clock) unix() int64 { return c.now().Unix() }

// issuerConfig configures is as an issuer of tokens for oidctest.Audience.
func issuerConfig(is *oidctest.Issuer) config.OIDCIssuer {
	return config.OIDCIssuer{Issuer: is.URL, Audience: oidctest.Audience, CAFile: is.CAFile}
}

// newOIDCAuth is an Authenticator trusting is, on clk, logging to log,
// with edit applied to its configuration.
func newOIDCAuth(t *testing.T, is *oidctest.Issuer, clk *clock, log *logtest.Logs, edit func(*config.Config)) *Authenticator {
	t.Helper()
	cfg := config.Config{Auth: config.Auth{OIDC: []config.OIDCIssuer{issuerConfig(is)}}}
	if edit != nil {
		edit(&cfg)
	}
	a, err := newAuthenticator(cfg, slog.New(slog.NewTextHandler(log, nil)), clk.now)
	if err != nil {
		t.Fatal(err)
	}
	return a
}

// bearerCall authenticates a call carrying token as its bearer credential.
func bearerCall(a *Authenticator, token string) (Principal, error) {
	return a.Authenticate(metadata.NewIncomingContext(context.Background(), metadata.Pairs("authorization", "Bearer "+token)))
}

// tokenSigner signs, with the key it is given, a token of is for sub of
// tenant acme, without roles, issued at clk's now.
func tokenSigner(t *testing.T, is *oidctest.Issuer, clk *clock) func(k oidctest.Key, sub string) string {
	return func(k oidctest.Key, sub string) string {
		return oidctest.Sign(t, k, is.Claims(clk.unix(), sub, "acme", nil, nil))
	}
}

// segment is a token part: JSON, base64url.
func segment(t *testing.T, v any) string {
	t.Helper()
	data, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return base64.RawURLEncoding.EncodeToString(data)
}

// X-I3: a token from a configured issuer, signed by a key of its JWKS,
// for the audience, within its validity (with clock_skew's leeway), gives
// the tenant and roles of its claims. Everything else is Unauthenticated
// with the one message that names no check: alg none, HS256 signed with
// the RSA public key, another issuer, another audience, expired, not yet
// valid, an algorithm outside the allow-list, a forged signature. The log
// says why, never quoting the token.
func TestOIDC(t *testing.T) {
	t.Parallel()
	is := oidctest.New(t)
	es, rs := oidctest.NewKey(t, "es-1", jose.ES256), oidctest.NewKey(t, "rs-1", jose.RS256)
	ps := oidctest.Key{ID: "ps-1", Algorithm: jose.PS256, Private: rs.Private}
	is.Publish(es, rs, ps)
	stranger := oidctest.New(t)
	clk := newClock()
	now := clk.unix()
	claims := func(edits oidctest.Claims) oidctest.Claims {
		return is.Claims(now, "alice", "acme", []string{RoleGenerate}, edits)
	}
	pubDER, err := x509.MarshalPKIXPublicKey(rs.Public())
	if err != nil {
		t.Fatal(err)
	}
	pubPEM := pem.EncodeToMemory(&pem.Block{Type: "PUBLIC KEY", Bytes: pubDER})
	valid := oidctest.Sign(t, es, claims(nil))
	parts := strings.Split(valid, ".")
	tokens := []struct {
		name   string
		token  string
		want   *Principal // nil: refused
		reason string     // in the log, for a refusal
	}{
		{"X-I3 ES256 from the issuer", valid, &Principal{Name: "alice", Tenant: "acme", Roles: []string{RoleGenerate}}, ""},
		{"X-I3 RS256, roles as one string, unknown roles left out", oidctest.Sign(t, rs, claims(oidctest.Claims{"roles": "observer billing admin"})),
			&Principal{Name: "alice", Tenant: "acme", Roles: []string{RoleObserver, RoleAdmin}}, ""},
		{"X-I3 expired within clock_skew", oidctest.Sign(t, es, claims(oidctest.Claims{"exp": now - 30})), &Principal{Name: "alice", Tenant: "acme", Roles: []string{RoleGenerate}}, ""},
		{"X-I3 valid within clock_skew of nbf", oidctest.Sign(t, es, claims(oidctest.Claims{"nbf": now + 30, "iat": now + 30})), &Principal{Name: "alice", Tenant: "acme", Roles: []string{RoleGenerate}}, ""},
		{"X-I3 no roles claim", oidctest.Sign(t, es, claims(oidctest.Claims{"roles": nil})), &Principal{Name: "alice", Tenant: "acme"}, ""},
		{"X-I3 alg none", segment(t, map[string]string{"alg": "none", "typ": "JWT"}) + "." + parts[1] + ".", nil, "unexpected signature algorithm"},
		{"X-I3 alg none with a signature", segment(t, map[string]string{"alg": "none", "kid": es.ID}) + "." + parts[1] + "." + parts[2], nil, "unexpected signature algorithm"},
		{"X-I3 HS256 keyed with the RSA public key (PEM)", oidctest.SignHMAC(t, rs.ID, pubPEM, claims(nil)), nil, "unexpected signature algorithm"},
		{"X-I3 HS256 keyed with the RSA public key (DER)", oidctest.SignHMAC(t, rs.ID, pubDER, claims(nil)), nil, "unexpected signature algorithm"},
		{"X-I3 PS256, not among the algorithms", oidctest.Sign(t, ps, claims(nil)), nil, "unexpected signature algorithm"},
		{"X-I3 another issuer", oidctest.Sign(t, es, stranger.Claims(now, "alice", "acme", nil, nil)), nil, "issuer not in auth.oidc"},
		{"X-I3 another audience", oidctest.Sign(t, es, claims(oidctest.Claims{"aud": "someone-else"})), nil, "expected audience"},
		{"X-I3 expired", oidctest.Sign(t, es, claims(oidctest.Claims{"exp": now - 61})), nil, "token expired"},
		{"X-I3 no exp", oidctest.Sign(t, es, claims(oidctest.Claims{"exp": nil})), nil, "token has no exp"},
		{"X-I3 not yet valid", oidctest.Sign(t, es, claims(oidctest.Claims{"nbf": now + 61})), nil, "not valid yet"},
		{"X-I3 issued in the future", oidctest.Sign(t, es, claims(oidctest.Claims{"iat": now + 61})), nil, "issued in the future"},
		{"X-I3 no tenant", oidctest.Sign(t, es, claims(oidctest.Claims{"tenant": nil})), nil, "tenant_claim"},
		{"X-I3 a tenant that is not a string", oidctest.Sign(t, es, claims(oidctest.Claims{"tenant": 7})), nil, "tenant_claim"},
		{"X-I3 claims changed after signing", parts[0] + "." + segment(t, claims(oidctest.Claims{"tenant": "globex"})) + "." + parts[2], nil, "signature does not verify"},
		{"X-I3 signed by an unknown key naming the issuer's kid", oidctest.Sign(t, oidctest.NewKey(t, es.ID, jose.ES256), claims(nil)), nil, "signature does not verify"},
		{"X-I3 claims not JSON", parts[0] + "." + base64.RawURLEncoding.EncodeToString([]byte("{")) + "." + parts[2], nil, "malformed token"},
	}
	var refusal string
	for _, tc := range tokens {
		// An Authenticator each: the log holds 10 refusals a minute.
		var log logtest.Logs
		p, err := bearerCall(newOIDCAuth(t, is, clk, &log, nil), tc.token)
		if tc.want != nil {
			if err != nil {
				t.Errorf("%s: %v", tc.name, err)
			} else if diff := cmp.Diff(*tc.want, p); diff != "" {
				t.Errorf("%s: principal (-want +got):\n%s", tc.name, diff)
			}
			continue
		}
		if status.Code(err) != codes.Unauthenticated {
			t.Errorf("%s: %v, %+v; want Unauthenticated", tc.name, err, p)
			continue
		}
		if refusal == "" {
			refusal = err.Error()
		} else if err.Error() != refusal {
			t.Errorf("%s: refused as %q, another as %q: the message says which check failed", tc.name, err, refusal)
		}
		if !strings.Contains(log.String(), tc.reason) {
			t.Errorf("%s: the log does not say %q:\n%s", tc.name, tc.reason, log.String())
		}
		for _, part := range strings.Split(tc.token, ".") {
			if len(part) > 20 && strings.Contains(log.String(), part) {
				t.Errorf("%s: the log quotes the token:\n%s", tc.name, log.String())
			}
		}
	}
}

// X-I3: New fetches nothing (agentd starts while the issuer is down); the
// first token fetches discovery and keys; a verified token is remembered,
// so that it costs no verification again, until it expires.
func TestOIDCLazyAndCached(t *testing.T) {
	t.Parallel()
	is := oidctest.New(t)
	key := is.PublishNewKey(t, "k1", jose.ES256)
	clk := newClock()
	var log logtest.Logs
	a := newOIDCAuth(t, is, clk, &log, nil)
	if d, k := is.Fetches(); d != 0 || k != 0 {
		t.Fatalf("New fetched discovery %d and keys %d times; want none before a token", d, k)
	}
	token := oidctest.Sign(t, key, is.Claims(clk.unix(), "alice", "acme", []string{RoleGenerate}, nil))
	if _, err := bearerCall(a, token); err != nil {
		t.Fatal(err)
	}
	if d, k := is.Fetches(); d != 1 || k != 1 {
		t.Errorf("the first token fetched discovery %d and keys %d times; want once each", d, k)
	}
	// With the key gone from the issuer's set and from agentd's cache, the
	// token still passes: it is remembered as verified.
	is.Unpublish(key.ID)
	kept := a.state.Load().oidc.issuers[is.URL]
	kept.mu.Lock()
	kept.keys = nil
	kept.mu.Unlock()
	if p, err := bearerCall(a, token); err != nil || p.Name != "alice" {
		t.Errorf("X-I3 the token again: %+v, %v; want it remembered", p, err)
	}
	clk.advance(time.Hour + time.Minute + time.Second) // past exp and clock_skew
	if _, err := bearerCall(a, token); status.Code(err) != codes.Unauthenticated {
		t.Errorf("X-I3 the remembered token once expired: %v; want Unauthenticated", err)
	}
}

// X-I3: keys rotate: a token signed by a key the issuer published since
// agentd last fetched makes agentd fetch the key set again, and pass; but
// tokens naming unknown keys fetch it at most once per refresh_interval,
// however many arrive and however concurrently.
func TestOIDCKeyRotation(t *testing.T) {
	t.Parallel()
	is := oidctest.New(t)
	k1, k2, k3 := oidctest.NewKey(t, "k1", jose.ES256), oidctest.NewKey(t, "k2", jose.ES256), oidctest.NewKey(t, "k3", jose.ES256)
	is.Publish(k1)
	clk := newClock()
	var log logtest.Logs
	a := newOIDCAuth(t, is, clk, &log, nil)
	token := tokenSigner(t, is, clk)
	wantFetches := func(name string, want int) {
		t.Helper()
		if _, got := is.Fetches(); got != want {
			t.Errorf("%s: the key set was fetched %d times, want %d", name, got, want)
		}
	}
	if _, err := bearerCall(a, token(k1, "a")); err != nil {
		t.Fatal(err)
	}
	wantFetches("the first token", 1)

	clk.advance(time.Minute) // refresh_interval
	is.Publish(k2)
	is.Unpublish(k1.ID)
	if _, err := bearerCall(a, token(k2, "b")); err != nil {
		t.Errorf("X-I3 a token of the new key: %v", err)
	}
	wantFetches("X-I3 a token of a rotated-in key", 2)
	if _, err := bearerCall(a, token(k1, "c")); status.Code(err) != codes.Unauthenticated {
		t.Errorf("X-I3 a new token of the rotated-out key: %v; want Unauthenticated", err)
	}

	// Unknown key ids within refresh_interval of the last fetch: no fetch.
	is.Publish(k3)
	var wg sync.WaitGroup
	for i := range 20 {
		unknown := token(oidctest.NewKey(t, "unknown-"+string(rune('a'+i)), jose.ES256), "d")
		wg.Go(func() {
			if _, err := bearerCall(a, unknown); status.Code(err) != codes.Unauthenticated {
				t.Errorf("X-I3 an unknown kid: %v; want Unauthenticated", err)
			}
		})
	}
	wg.Wait()
	if _, err := bearerCall(a, token(k3, "e")); status.Code(err) != codes.Unauthenticated {
		t.Errorf("X-I3 a new key within refresh_interval: %v; want Unauthenticated until the next fetch", err)
	}
	wantFetches("X-I3 unknown kids within refresh_interval", 2)

	clk.advance(time.Minute)
	fresh := token(k3, "f")
	for range 10 {
		wg.Go(func() {
			if _, err := bearerCall(a, fresh); err != nil {
				t.Errorf("X-I3 the new key once refresh_interval passed: %v", err)
			}
		})
	}
	wg.Wait()
	wantFetches("X-I3 concurrent tokens of a new key", 3)
}

// X-I3: an issuer that is down: keys fetched before keep verifying its
// tokens; a token that needs keys agentd cannot fetch is Unavailable (the
// caller may retry), not Unauthenticated. Unreachable at the first token,
// it is Unavailable too, and agentd serves it once it is back.
func TestOIDCIssuerDown(t *testing.T) {
	t.Parallel()
	is := oidctest.New(t)
	k1, k2 := oidctest.NewKey(t, "k1", jose.ES256), oidctest.NewKey(t, "k2", jose.ES256)
	is.Publish(k1)
	clk := newClock()
	var log logtest.Logs
	a := newOIDCAuth(t, is, clk, &log, nil)
	token := tokenSigner(t, is, clk)
	is.SetDown(true)
	if _, err := bearerCall(a, token(k1, "a")); status.Code(err) != codes.Unavailable {
		t.Errorf("X-I3 a token while the issuer was never reached: %v; want Unavailable", err)
	}
	if !strings.Contains(log.String(), "discovery: 503") || strings.Contains(log.String(), "openid-configuration") {
		t.Errorf("the log does not say why (without the URL's path):\n%s", log.String())
	}
	if _, err := bearerCall(a, token(k1, "a")); status.Code(err) != codes.Unavailable {
		t.Errorf("X-I3 again within refresh_interval: %v; want Unavailable", err)
	}
	is.SetDown(false)
	clk.advance(time.Minute)
	if _, err := bearerCall(a, token(k1, "b")); err != nil {
		t.Fatalf("X-I3 once the issuer is back: %v", err)
	}
	is.SetDown(true)
	if _, err := bearerCall(a, token(k1, "c")); err != nil {
		t.Errorf("X-I3 a new token of a cached key while the issuer is down: %v", err)
	}
	clk.advance(time.Minute)
	if _, err := bearerCall(a, token(k2, "d")); status.Code(err) != codes.Unavailable {
		t.Errorf("X-I3 a token of a key not cached while the issuer is down: %v; want Unavailable", err)
	}
	if _, err := bearerCall(a, token(k1, "e")); err != nil {
		t.Errorf("X-I3 the cached key after a failed fetch: %v", err)
	}
}

// X-I3: an https issuer is verified with ca_file; without it, its
// certificate is not trusted and its tokens cannot be checked.
func TestOIDCCAFile(t *testing.T) {
	t.Parallel()
	is := oidctest.NewTLS(t)
	key := is.PublishNewKey(t, "k1", jose.ES256)
	clk := newClock()
	token := oidctest.Sign(t, key, is.Claims(clk.unix(), "alice", "acme", nil, nil))
	var log logtest.Logs
	if _, err := bearerCall(newOIDCAuth(t, is, clk, &log, nil), token); err != nil {
		t.Errorf("X-I3 with ca_file: %v", err)
	}
	without := newOIDCAuth(t, is, clk, &log, func(c *config.Config) { c.Auth.OIDC[0].CAFile = "" })
	if _, err := bearerCall(without, token); status.Code(err) != codes.Unavailable || !strings.Contains(log.String(), "certificate") {
		t.Errorf("X-I3 without ca_file: %v; want Unavailable, the log saying why:\n%s", err, log.String())
	}
}

// X-I3: New refuses what would weaken verification, naming each setting.
func TestNewRefusesBadIssuers(t *testing.T) {
	t.Parallel()
	_, err := New(config.Config{Auth: config.Auth{OIDC: []config.OIDCIssuer{
		{Issuer: "http://idp.example.com", Audience: "a"},
		{Issuer: "https://idp.example.com", Algorithms: []string{"none", "HS256", "ES256"}},
		{Issuer: "https://other.example.com", Audience: "a", CAFile: "/nonexistent/ca.pem"},
	}}}, slog.New(slog.DiscardHandler))
	for _, want := range []string{"auth.oidc[0].issuer", "auth.oidc[1].audience", `auth.oidc[1].algorithms: "none"`, `auth.oidc[1].algorithms: "HS256"`, "auth.oidc[2].ca_file"} {
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("New = %v; want it to say %q", err, want)
		}
	}
	if err != nil && strings.Contains(err.Error(), "nonexistent") {
		t.Errorf("New = %v: it quotes a file path", err)
	}
}
