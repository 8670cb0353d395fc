package auth

import (
	"context"
	"encoding/base64"
	"log/slog"
	"strings"
	"testing"

	jose "github.com/go-jose/go-jose/v4"
	"go.uber.org/goleak"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"

	"github.com/agentd/agentd/internal/auth/oidctest"
	"github.com/agentd/agentd/internal/config"
)

// The issuer's fetches run in the calls that need them, and its client
// keeps no idle connection: nothing of auth outlives a test.
func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}

// fuzzAuth is an Authenticator with an API key and a running issuer whose
// key signed the returned seed tokens. The seeds are refused (expired, for
// another audience, ...): a token the fuzzer derives from them must be
// refused too, even one whose signature still verifies.
func fuzzAuth(f *testing.F) (*Authenticator, []string) {
	is := oidctest.New(f)
	key := is.PublishNewKey(f, "k1", jose.ES256)
	clk := newClock()
	cfg := keys(config.APIKey{Name: "app", SHA256: HashKey("key-app"), Tenant: "acme", Roles: []string{RoleGenerate}})
	cfg.Auth.OIDC = []config.OIDCIssuer{issuerConfig(is)}
	a, err := newAuthenticator(cfg, slog.New(slog.DiscardHandler), clk.now)
	if err != nil {
		f.Fatal(err)
	}
	now := clk.unix()
	var seeds []string
	for _, edits := range []oidctest.Claims{
		{"exp": now - 3600},
		{"aud": "someone-else"},
		{"nbf": now + 3600},
		{"tenant": nil},
		{"iss": "https://elsewhere.example.com"},
		{"roles": map[string]any{"admin": true}, "exp": now - 3600},
	} {
		seeds = append(seeds, oidctest.Sign(f, key, is.Claims(now, "alice", "acme", []string{RoleAdmin}, edits)))
	}
	unknown := oidctest.NewKey(f, "k2", jose.ES256)
	seeds = append(seeds, oidctest.Sign(f, unknown, is.Claims(now, "alice", "acme", nil, nil)))
	header := base64.RawURLEncoding.EncodeToString([]byte(`{"alg":"none"}`))
	payload := strings.Split(seeds[0], ".")[1]
	seeds = append(seeds, header+"."+payload+".", "a.b.c", "..", "e30.e30.", "eyJhbGciOiJFUzI1NiJ9.bm90IGpzb24.AAAA")
	return a, seeds
}

// wantRefused fails unless err is Unauthenticated: an issuer that is up
// never makes a token Unavailable.
func wantRefused(t *testing.T, input string, err error) {
	t.Helper()
	if status.Code(err) != codes.Unauthenticated {
		t.Fatalf("%q: %v; want Unauthenticated", input, err)
	}
}

// X-I2: any authorization header value (and any number of them) never
// panics and is Unauthenticated, unless it is exactly a configured key.
func FuzzBearer(f *testing.F) {
	a, tokens := fuzzAuth(f)
	for _, s := range []string{"Bearer key-app", "bearer key-app ", "Bearer  key-app", "Basic key-app", "Bearer", "Bearer ", "", " ", "key-app", "Bearer key-app\x00", "BEARER\tkey-app"} {
		f.Add(s, false)
	}
	for _, tok := range tokens {
		f.Add("Bearer "+tok, true)
	}
	f.Fuzz(func(t *testing.T, value string, twice bool) {
		md := metadata.Pairs("authorization", value)
		if twice {
			md.Append("authorization", value)
		}
		p, err := a.Authenticate(metadata.NewIncomingContext(context.Background(), md))
		token, ok := bearer(value)
		if err == nil && (twice || !ok || token != "key-app" || p.Name != "app") {
			t.Fatalf("%q (twice %v) authenticated as %+v", value, twice, p)
		}
		if err != nil {
			wantRefused(t, value, err)
		}
	})
}

// X-I3: any token through the OIDC path (any string that has a JWT's
// form, with an issuer configured) never panics and is Unauthenticated:
// the seeds are real tokens of the issuer that are refused, so that the
// fuzzer explores past the signature.
func FuzzJWT(f *testing.F) {
	a, tokens := fuzzAuth(f)
	for _, tok := range tokens {
		f.Add(tok)
	}
	f.Fuzz(func(t *testing.T, token string) {
		if !looksLikeJWT(token) {
			token = base64.RawURLEncoding.EncodeToString([]byte(token)) + ".e30.e30"
		}
		_, err := a.Authenticate(metadata.NewIncomingContext(context.Background(), metadata.Pairs("authorization", "Bearer "+token)))
		wantRefused(t, token, err)
	})
}
