package app_test

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"log/slog"
	"net"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/agentd/agentd/internal/logtest"

	jose "github.com/go-jose/go-jose/v4"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	bridgev1 "github.com/agentd/agentd/gen/go/agentd/bridge/v1"
	agentdv1 "github.com/agentd/agentd/gen/go/agentd/v1"
	"github.com/agentd/agentd/internal/app"
	"github.com/agentd/agentd/internal/app/apptest"
	"github.com/agentd/agentd/internal/auth"
	"github.com/agentd/agentd/internal/auth/oidctest"
	"github.com/agentd/agentd/internal/config"
	"github.com/agentd/agentd/internal/tlsconf/tlstest"
)

// previewAs runs Preview (provider mock) with credential as the bearer
// ("" for none).
func previewAs(ctx context.Context, conn *grpc.ClientConn, credential string) error {
	_, err := agentdv1.NewAgentServiceClient(conn).Preview(bearer(ctx, credential), &agentdv1.PreviewRequest{
		Agent:    &agentdv1.Agent{Provider: "mock"},
		Messages: []*agentdv1.Message{{Role: agentdv1.Role_ROLE_USER, Parts: []*agentdv1.Part{{Kind: &agentdv1.Part_Text{Text: "hi"}}}}},
	})
	return err
}

// X-I3 end to end: agentd trusts a local issuer (discovery and JWKS over
// http on loopback): its tokens carry the tenant and roles; the issuer
// rotates its key mid-run and agentd follows; an expired token, or one of
// a tenant not configured, is refused; a token is never logged.
func TestOIDCTokens(t *testing.T) {
	t.Parallel()
	is := oidctest.New(t)
	k1, k2 := oidctest.NewKey(t, "k1", jose.ES256), oidctest.NewKey(t, "k2", jose.RS256)
	is.Publish(k1)
	cfg := testConfig(t)
	// Every unknown kid may fetch the keys again: this test rotates keys
	// and must see the new one at once.
	cfg.Auth.OIDC = []config.OIDCIssuer{{Issuer: is.URL, Audience: oidctest.Audience, RefreshInterval: time.Nanosecond}}
	cfg.Tenants = map[string]config.Tenant{"acme": {}}
	var logs logtest.Logs
	conn, _ := apptest.Serve(t, app.Options{Config: cfg, Logger: slog.New(slog.NewTextHandler(&logs, nil))})
	now := time.Now().Unix()
	token := func(k oidctest.Key, tenant string, roles []string, edits oidctest.Claims) string {
		return oidctest.Sign(t, k, is.Claims(now, "alice@acme", tenant, roles, edits))
	}
	generate := []string{auth.RoleGenerate}
	admin := bridgev1.NewBridgeAdminServiceClient(conn)
	var sent []string
	for _, tc := range []struct {
		name  string
		token string
		call  func(tok string) error
		code  codes.Code
		says  string
	}{
		{"X-I3 a token with generate", token(k1, "acme", generate, nil), nil, codes.OK, ""},
		{"X-I3 the same token again (remembered)", token(k1, "acme", generate, nil), nil, codes.OK, ""},
		{"X-I3 a token without generate", token(k1, "acme", []string{auth.RoleObserver}, nil), nil, codes.PermissionDenied, `"generate"`},
		{"X-I3 an observer reads the admin API", token(k1, "acme", []string{auth.RoleObserver}, nil), func(tok string) error {
			_, err := admin.GetCacheStats(bearer(t.Context(), tok), &bridgev1.GetCacheStatsRequest{})
			return err
		}, codes.OK, ""},
		{"X-I3 a tenant not configured", token(k1, "globex", generate, nil), nil, codes.PermissionDenied, `tenant "globex" is not configured`},
		{"X-I3 an expired token", token(k1, "acme", generate, oidctest.Claims{"exp": now - 3600}), nil, codes.Unauthenticated, "authentication required"},
		{"X-I3 a token of a key the issuer has not published", token(k2, "acme", generate, nil), nil, codes.Unauthenticated, "authentication required"},
		{"X-I3 a token of the key rotated in", "rotate", nil, codes.OK, ""},
		{"X-I3 a new token of the key rotated out", token(k1, "acme", generate, oidctest.Claims{"sub": "bob"}), nil, codes.Unauthenticated, "authentication required"},
	} {
		tok := tc.token
		if tok == "rotate" {
			is.Publish(k2)
			is.Unpublish(k1.ID)
			tok = token(k2, "acme", generate, nil)
		}
		sent = append(sent, tok)
		call := tc.call
		if call == nil {
			call = func(tok string) error { return previewAs(t.Context(), conn, tok) }
		}
		err := call(tok)
		if st := status.Convert(err); st.Code() != tc.code || !strings.Contains(st.Message(), tc.says) {
			t.Errorf("%s: %v; want %v saying %q", tc.name, err, tc.code, tc.says)
		}
	}
	for _, tok := range sent {
		if i := strings.LastIndex(tok, "."); strings.Contains(logs.String(), tok[i+1:]) {
			t.Errorf("the log quotes a token's signature:\n%s", logs.String())
		}
	}
}

// X-I2: `agentd serve` reloads its auth at run time: after a reload that
// revokes a key, that key is Unauthenticated and the new one is served; a
// reload that cannot be applied leaves the running keys.
func TestReloadRevokesKey(t *testing.T) {
	t.Parallel()
	cfg := testConfig(t)
	cfg.Auth.APIKeys = []config.APIKey{{Name: "old", SHA256: auth.HashKey("sk-old"), Tenant: "acme", Roles: []string{auth.RoleGenerate}}}
	var logs logtest.Logs
	a, conn, _ := apptest.ServeAgent(t, app.Options{Config: cfg, Logger: slog.New(slog.NewTextHandler(&logs, nil))})
	if err := previewAs(t.Context(), conn, "sk-old"); err != nil {
		t.Fatal(err)
	}
	next := cfg
	next.Auth.APIKeys = []config.APIKey{{Name: "new", SHA256: auth.HashKey("sk-new"), Tenant: "acme", Roles: []string{auth.RoleGenerate}}}
	next.Generation.MaxToolTurns = 3
	if err := a.Reload(next); err != nil {
		t.Fatal(err)
	}
	if err := previewAs(t.Context(), conn, "sk-old"); status.Code(err) != codes.Unauthenticated {
		t.Errorf("X-I2 a revoked key after a reload: %v; want Unauthenticated", err)
	}
	if err := previewAs(t.Context(), conn, "sk-new"); err != nil {
		t.Errorf("X-I2 the new key after a reload: %v", err)
	}
	for _, want := range []string{"config reloaded: auth applied", "settings other than auth changed"} {
		if !strings.Contains(logs.String(), want) {
			t.Errorf("the log does not say %q:\n%s", want, logs.String())
		}
	}

	broken := next
	broken.Tenants = map[string]config.Tenant{"globex": {}}
	if err := a.Reload(broken); err == nil || !strings.Contains(err.Error(), `auth.api_keys[0].tenant: tenant "acme" is not configured`) {
		t.Errorf("Reload of a key of an unconfigured tenant = %v; want it refused, naming the setting", err)
	}
	off := next
	off.Auth = config.Auth{}
	if err := a.Reload(off); err == nil {
		t.Error("a reload turned authentication off")
	}
	if err := previewAs(t.Context(), conn, "sk-new"); err != nil {
		t.Errorf("X-I2 the running key after refused reloads: %v", err)
	}
	if err := previewAs(t.Context(), conn, ""); status.Code(err) != codes.Unauthenticated {
		t.Errorf("X-I2 no key after refused reloads: %v; want Unauthenticated", err)
	}
}

// X-I4: with auth.mtls, a client certificate that tls.client_ca_file
// verifies and whose principal is listed authenticates with its tenant
// and roles; one from the same CA but not listed is Unauthenticated; one
// from another CA fails the TLS handshake.
func TestMTLSPrincipals(t *testing.T) {
	t.Parallel()
	ca, clients, other := tlstest.NewCA(t), tlstest.NewCA(t), tlstest.NewCA(t)
	spiffe := func(name string) func(*x509.Certificate) {
		return func(c *x509.Certificate) {
			c.URIs = []*url.URL{{Scheme: "spiffe", Host: "example.org", Path: "/" + name}}
		}
	}
	cfg := testConfig(t)
	cfg.TLS = tlsFiles(t, ca.Leaf(t, "agentd"), clients, time.Now())
	cfg.Auth.MTLS.Principals = []config.MTLSPrincipal{
		{Principal: "spiffe://example.org/app", Tenant: "acme", Roles: []string{auth.RoleGenerate}},
		{Principal: "spiffe://example.org/ops", Tenant: "acme", Roles: []string{auth.RoleAdmin}},
	}
	if err := cfg.Validate(); err != nil {
		t.Fatal(err)
	}
	o := app.Options{Config: cfg, Logger: slog.New(slog.DiscardHandler)}
	a, err := app.NewAgent(o)
	if err != nil {
		t.Fatal(err)
	}
	addr := serveTCP(t, func(ctx context.Context, lis net.Listener) error { return a.Serve(ctx, lis, o) })
	dial := func(cert tlstest.Pair) *grpc.ClientConn {
		return dialTLS(t, addr, &tls.Config{RootCAs: ca.Pool(), Certificates: []tls.Certificate{cert.Certificate(t)}})
	}
	appConn, ops := dial(clients.LeafWith(t, "app", spiffe("app"))), dial(clients.LeafWith(t, "ops", spiffe("ops")))
	stranger := dial(clients.LeafWith(t, "stranger", spiffe("stranger")))
	foreign := dial(other.LeafWith(t, "app", spiffe("app")))
	stats := func(conn *grpc.ClientConn) error {
		_, err := bridgev1.NewBridgeAdminServiceClient(conn).GetCacheStats(t.Context(), &bridgev1.GetCacheStatsRequest{})
		return err
	}
	for _, tc := range []struct {
		name string
		err  error
		code codes.Code
	}{
		{"X-I4 a listed principal with generate runs Preview", previewAs(t.Context(), appConn, ""), codes.OK},
		{"X-I4 a listed principal without observer cannot read the admin API", stats(appConn), codes.PermissionDenied},
		{"X-I4 a listed admin reads the admin API", stats(ops), codes.OK},
		{"X-I4 an unlisted principal from the client CA", previewAs(t.Context(), stranger, ""), codes.Unauthenticated},
		{"X-I4 a certificate from another CA fails the handshake", previewAs(t.Context(), foreign, ""), codes.Unavailable},
		{"X-I2 a bearer credential is what authenticates, when sent", previewAs(t.Context(), appConn, "sk-guess"), codes.Unauthenticated},
	} {
		if status.Code(tc.err) != tc.code {
			t.Errorf("%s: %v; want %v", tc.name, tc.err, tc.code)
		}
	}
}
