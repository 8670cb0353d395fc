package auth

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/agentd/agentd/internal/logtest"

	jose "github.com/go-jose/go-jose/v4"
	"github.com/google/go-cmp/cmp"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/peer"
	"google.golang.org/grpc/status"

	"github.com/agentd/agentd/internal/auth/oidctest"
	"github.com/agentd/agentd/internal/config"
	"github.com/agentd/agentd/internal/tlsconf/tlstest"
)

// keys is a configuration with these API keys.
func keys(k ...config.APIKey) config.Config {
	return config.Config{Auth: config.Auth{APIKeys: k}}
}

func newAuth(t *testing.T, log io.Writer) *Authenticator {
	t.Helper()
	a, err := New(keys(
		config.APIKey{Name: "app", SHA256: HashKey("key-app"), Tenant: "acme", Roles: []string{RoleGenerate}},
		config.APIKey{Name: "ops", SHA256: HashKey("key-ops"), Tenant: "acme", Roles: []string{RoleAdmin}},
	), slog.New(slog.NewTextHandler(log, nil)))
	if err != nil {
		t.Fatal(err)
	}
	return a
}

// X-I2: an API key gives its tenant and roles; a missing, malformed or
// unknown credential is Unauthenticated with one message that does not
// say which check failed, and the reason goes to the log, never the key
// (X-I9: an audit line).
func TestAuthenticate(t *testing.T) {
	t.Parallel()
	var log strings.Builder
	a := newAuth(t, &log)
	var refusal string
	for _, tc := range []struct {
		name string
		md   metadata.MD
		want string // the principal's name; "" for a refusal
	}{
		{"X-I2 a valid key", metadata.Pairs("authorization", "Bearer key-app"), "app"},
		{"X-I2 the scheme in any case", metadata.Pairs("authorization", "bearer key-ops"), "ops"},
		{"X-I2 no credential", metadata.MD{}, ""},
		{"X-I2 an unknown key", metadata.Pairs("authorization", "Bearer key-guess"), ""},
		{"X-I2 another scheme", metadata.Pairs("authorization", "Basic key-app"), ""},
		{"X-I2 a bare key", metadata.Pairs("authorization", "key-app"), ""},
		{"X-I2 two credentials", metadata.Pairs("authorization", "Bearer key-app", "authorization", "Bearer key-ops"), ""},
	} {
		p, err := a.Authenticate(metadata.NewIncomingContext(context.Background(), tc.md))
		switch {
		case tc.want != "" && (err != nil || p.Name != tc.want):
			t.Errorf("%s: principal %+v, %v; want %s", tc.name, p, err, tc.want)
		case tc.want == "":
			if status.Code(err) != codes.Unauthenticated {
				t.Errorf("%s: %v; want Unauthenticated", tc.name, err)
				continue
			}
			if refusal == "" {
				refusal = err.Error()
			} else if err.Error() != refusal {
				t.Errorf("%s: refused as %q, another refusal as %q: the message says which check failed", tc.name, err, refusal)
			}
		}
	}
	if p, _ := a.Authenticate(metadata.NewIncomingContext(context.Background(), metadata.Pairs("authorization", "Bearer key-app"))); p.Tenant != "acme" || !p.Has(RoleGenerate) || p.Has(RoleAdmin) {
		t.Errorf("principal %+v; want tenant acme with generate only", p)
	}
	if !strings.Contains(log.String(), "unknown API key") || !strings.Contains(log.String(), "audit=true") {
		t.Errorf("the log does not say why a key was refused:\n%s", log.String())
	}
	if strings.Contains(log.String(), "key-guess") || strings.Contains(log.String(), "key-app") {
		t.Errorf("the log quotes a key:\n%s", log.String())
	}
}

// X-I5: admin holds observer and tenant_admin; each admin method needs
// its role, and tenant_admin may call the tenant-scoped ones.
func TestRoles(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		held, role string
		want       bool
	}{
		{RoleAdmin, RoleObserver, true},
		{RoleAdmin, RoleTenantAdmin, true},
		{RoleObserver, RoleAdmin, false},
		{RoleTenantAdmin, RoleObserver, false},
		{RoleTenantAdmin, RoleAdmin, false},
		{RoleObserver, RoleTenantAdmin, false},
		{RoleGenerate, RoleApprove, true},
		{RoleApprove, RoleGenerate, false},
		{RoleAdmin, RoleApprove, false},
	} {
		if got := (Principal{Roles: []string{tc.held}}).Has(tc.role); got != tc.want {
			t.Errorf("X-I5 %s holds %s: %v, want %v", tc.held, tc.role, got, tc.want)
		}
	}
	type need struct {
		anyOf        []string
		tenantScoped bool
	}
	gen, reads := []string{RoleGenerate}, []string{RoleApprove, RoleObserver}
	// X-G4: GetGeneration and ListGenerations read the caller's own
	// tenant's generations (the service scopes them). They, the follows,
	// the pending requests and the threads' reads need approve (which
	// generate holds) or observer; the decisions approve; starting,
	// resuming or cancelling a generation generate; asking who one is,
	// any role.
	for method, want := range map[string]need{
		"/agentd.v1.AgentService/Generate":                            {gen, false},
		"/agentd.v1.AgentService/CreateGeneration":                    {gen, false},
		"/agentd.v1.AgentService/Preview":                             {gen, false},
		"/agentd.v1.AgentService/CancelGeneration":                    {gen, false},
		"/agentd.v1.AgentService/CreateThread":                        {gen, false},
		"/agentd.v1.AgentService/GetCaller":                           {nil, false},
		"/agentd.v1.AgentService/GetGeneration":                       {reads, false},
		"/agentd.v1.AgentService/ListGenerations":                     {reads, false},
		"/agentd.v1.AgentService/DecideRequests":                      {[]string{RoleApprove}, false},
		"/agentd.v1.AgentService/ListPendingRequests":                 {reads, false},
		"/agentd.v1.AgentService/FollowGeneration":                    {reads, false},
		"/agentd.v1.AgentService/StreamGenerationEvents":              {reads, false},
		"/agentd.v1.AgentService/GetThread":                           {reads, false},
		"/agentd.v1.AgentService/ListThreads":                         {reads, false},
		"/agentd.v1.AgentService/ListThreadItems":                     {reads, false},
		"/agentd.bridge.v1.BridgeAdminService/GetCacheStats":          {[]string{RoleObserver}, true},
		"/agentd.bridge.v1.BridgeAdminService/GetPoolStats":           {[]string{RoleObserver}, false},
		"/agentd.bridge.v1.BridgeAdminService/ConfigureCache":         {[]string{RoleAdmin}, false},
		"/agentd.bridge.v1.BridgeAdminService/ResetCache":             {[]string{RoleAdmin}, false},
		"/agentd.bridge.v1.BridgeAdminService/ClearCache":             {[]string{RoleAdmin}, true},
		"/agentd.bridge.v1.BridgeAdminService/InvalidateCache":        {[]string{RoleAdmin}, true},
		"/agentd.bridge.v1.BridgeAdminService/ListCacheEntries":       {[]string{RoleObserver}, true},
		"/agentd.bridge.v1.BridgeAdminService/InvalidateCacheEntries": {[]string{RoleAdmin}, true},
		// X-M3: revoking a tenant's OAuth tokens.
		"/agentd.v1.AdminService/RevokeTokens":          {[]string{RoleAdmin}, true},
		"/agentd.v1.AdminService/InvalidateSchemaCache": {[]string{RoleAdmin}, true},
		"/agentd.v1.AdminService/ListTenants":           {[]string{RoleObserver}, true},
		"/agentd.v1.AdminService/ListMCPServers":        {[]string{RoleObserver}, true},
	} {
		if got, scoped := role(method); !slices.Equal(got, want.anyOf) || scoped != want.tenantScoped {
			t.Errorf("X-I5 role(%s) = %v, tenant-scoped %v; want %+v", method, got, scoped, want)
		}
	}
}

// X-I5: each role may make the calls it is given and no other, a refusal
// naming the roles that would do; GetCaller needs none.
func TestAuthorize(t *testing.T) {
	t.Parallel()
	a, err := New(keys(
		config.APIKey{Name: "app", SHA256: HashKey("k-generate"), Tenant: "acme", Roles: []string{RoleGenerate}},
		config.APIKey{Name: "inbox", SHA256: HashKey("k-approve"), Tenant: "acme", Roles: []string{RoleApprove}},
		config.APIKey{Name: "watch", SHA256: HashKey("k-observer"), Tenant: "acme", Roles: []string{RoleObserver}},
		config.APIKey{Name: "ops", SHA256: HashKey("k-tenant_admin"), Tenant: "acme", Roles: []string{RoleTenantAdmin}},
		config.APIKey{Name: "root", SHA256: HashKey("k-admin"), Tenant: "acme", Roles: []string{RoleAdmin}},
	), slog.New(slog.DiscardHandler))
	if err != nil {
		t.Fatal(err)
	}
	const agent, admin = "/agentd.v1.AgentService/", "/agentd.v1.AdminService/"
	for method, allowed := range map[string][]string{
		agent + "GetCaller":             {RoleGenerate, RoleApprove, RoleObserver, RoleTenantAdmin, RoleAdmin},
		agent + "ListGenerations":       {RoleGenerate, RoleApprove, RoleObserver, RoleAdmin},
		agent + "ListThreadItems":       {RoleGenerate, RoleApprove, RoleObserver, RoleAdmin},
		agent + "DecideRequests":        {RoleGenerate, RoleApprove},
		agent + "CancelGeneration":      {RoleGenerate},
		admin + "ListTenants":           {RoleObserver, RoleTenantAdmin, RoleAdmin},
		admin + "ListMCPServers":        {RoleObserver, RoleTenantAdmin, RoleAdmin},
		admin + "InvalidateSchemaCache": {RoleTenantAdmin, RoleAdmin},
		admin + "RevokeTokens":          {RoleTenantAdmin, RoleAdmin},
	} {
		for _, held := range roles {
			ctx := metadata.NewIncomingContext(t.Context(), metadata.Pairs("authorization", "Bearer k-"+held))
			_, err := a.authorize(ctx, method)
			switch want := slices.Contains(allowed, held); {
			case want && err != nil:
				t.Errorf("X-I5 %s calling %s: %v; want it allowed", held, method, err)
			case !want && (status.Code(err) != codes.PermissionDenied || !strings.Contains(status.Convert(err).Message(), strconv.Quote(allowed[0]))):
				t.Errorf("X-I5 %s calling %s: %v; want PERMISSION_DENIED naming the roles that may", held, method, err)
			}
		}
	}
}

// The configured keys are checked at once, every problem named.
func TestNewRefusesBadKeys(t *testing.T) {
	t.Parallel()
	_, err := New(keys(
		config.APIKey{Name: "a", SHA256: "not-hex", Tenant: "t", Roles: []string{"root"}},
		config.APIKey{Name: "a", SHA256: HashKey("k")},
		config.APIKey{Name: "b", SHA256: HashKey("k2"), Tenant: "t", Roles: []string{RoleTenantAdmin}},
	), slog.New(slog.DiscardHandler))
	for _, want := range []string{"auth.api_keys[0].sha256", `unknown role "root"; one of generate, approve, observer, admin, tenant_admin`, "auth.api_keys[1].name", "auth.api_keys[1].tenant"} {
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("New = %v; want it to say %q", err, want)
		}
	}
	if err != nil && strings.Contains(err.Error(), "auth.api_keys[2]") {
		t.Errorf("X-I5 New refuses tenant_admin: %v", err)
	}
}

// withCert is ctx as a call over TLS whose client presented cert, which
// the client CA verified.
func withCert(ctx context.Context, t *testing.T, cert tlstest.Pair) context.Context {
	t.Helper()
	leaf := cert.Certificate(t).Leaf
	return peer.NewContext(ctx, &peer.Peer{AuthInfo: credentials.TLSInfo{State: tls.ConnectionState{VerifiedChains: [][]*x509.Certificate{{leaf}}}}})
}

// X-I4: a verified client certificate whose principal auth.mtls lists
// authenticates as its tenant and roles, the principal naming the caller;
// an unlisted one is Unauthenticated. A bearer credential, when the call
// has one, is what authenticates it, whatever certificate it presents.
func TestMTLS(t *testing.T) {
	t.Parallel()
	ca := tlstest.NewCA(t)
	app := ca.LeafWith(t, "app", func(c *x509.Certificate) { c.URIs = []*url.URL{{Scheme: "spiffe", Host: "example.org", Path: "/app"}} })
	ops := ca.LeafWith(t, "ops.example.org", func(c *x509.Certificate) { c.DNSNames = nil })
	stranger := ca.Leaf(t, "stranger")
	cfg := keys(config.APIKey{Name: "ci", SHA256: HashKey("key-ci"), Tenant: "globex", Roles: []string{RoleGenerate}})
	cfg.Auth.MTLS.Principals = []config.MTLSPrincipal{
		{Principal: "spiffe://example.org/app", Tenant: "acme", Roles: []string{RoleGenerate}},
		{Principal: "ops.example.org", Tenant: "acme", Roles: []string{RoleAdmin}},
	}
	var log logtest.Logs
	a, err := New(cfg, slog.New(slog.NewTextHandler(&log, nil)))
	if err != nil {
		t.Fatal(err)
	}
	bearer := func(key string) context.Context {
		return metadata.NewIncomingContext(t.Context(), metadata.Pairs("authorization", "Bearer "+key))
	}
	for _, tc := range []struct {
		name string
		ctx  context.Context
		want *Principal
	}{
		{"X-I4 a listed URI SAN", withCert(t.Context(), t, app), &Principal{Name: "spiffe://example.org/app", Tenant: "acme", Roles: []string{RoleGenerate}}},
		{"X-I4 a listed common name", withCert(t.Context(), t, ops), &Principal{Name: "ops.example.org", Tenant: "acme", Roles: []string{RoleAdmin}}},
		{"X-I4 an unlisted principal", withCert(t.Context(), t, stranger), nil},
		{"X-I4 no certificate", t.Context(), nil},
		{"X-I2 an API key beside a certificate", withCert(bearer("key-ci"), t, app), &Principal{Name: "ci", Tenant: "globex", Roles: []string{RoleGenerate}}},
		{"X-I2 an unknown API key beside a listed certificate", withCert(bearer("key-guess"), t, app), nil},
	} {
		p, err := a.Authenticate(tc.ctx)
		switch {
		case tc.want == nil && status.Code(err) != codes.Unauthenticated:
			t.Errorf("%s: %+v, %v; want Unauthenticated", tc.name, p, err)
		case tc.want != nil && err != nil:
			t.Errorf("%s: %v", tc.name, err)
		case tc.want != nil:
			if diff := cmp.Diff(*tc.want, p); diff != "" {
				t.Errorf("%s: principal (-want +got):\n%s", tc.name, diff)
			}
		}
	}
	if !strings.Contains(log.String(), `principal=localhost`) {
		t.Errorf("the log does not name the unlisted principal:\n%s", log.String())
	}

	cfg.Auth.MTLS.PrincipalFrom = "cn"
	cfg.Auth.MTLS.Principals[0].Principal = "app"
	byCN, err := New(cfg, slog.New(slog.DiscardHandler))
	if err != nil {
		t.Fatal(err)
	}
	if p, err := byCN.Authenticate(withCert(t.Context(), t, app)); err != nil || p.Name != "app" {
		t.Errorf("X-I4 principal_from cn: %+v, %v", p, err)
	}
}

// With tenants configured, a principal whose tenant is neither among them
// nor covered by tenants.default is PermissionDenied, whichever method
// authenticated it; with a default tenant, it is served.
func TestUnconfiguredTenant(t *testing.T) {
	t.Parallel()
	is := oidctest.New(t)
	key := is.PublishNewKey(t, "k1", jose.ES256)
	clk := newClock()
	ca := tlstest.NewCA(t)
	cert := ca.Leaf(t, "globex-app")
	cfg := keys(config.APIKey{Name: "globex-key", SHA256: HashKey("key-globex"), Tenant: "globex", Roles: []string{RoleGenerate}})
	cfg.Auth.OIDC = []config.OIDCIssuer{issuerConfig(is)}
	cfg.Auth.MTLS.Principals = []config.MTLSPrincipal{{Principal: "localhost", Tenant: "globex", Roles: []string{RoleGenerate}}}
	cfg.Tenants = map[string]config.Tenant{"acme": {}}
	token := oidctest.Sign(t, key, is.Claims(clk.unix(), "alice", "globex", []string{RoleGenerate}, nil))
	calls := map[string]context.Context{
		"X-I2 an API key":           metadata.NewIncomingContext(t.Context(), metadata.Pairs("authorization", "Bearer key-globex")),
		"X-I3 an OIDC token":        metadata.NewIncomingContext(t.Context(), metadata.Pairs("authorization", "Bearer "+token)),
		"X-I4 a client certificate": withCert(t.Context(), t, cert),
	}
	a, err := newAuthenticator(cfg, slog.New(slog.DiscardHandler), clk.now)
	if err != nil {
		t.Fatal(err)
	}
	for name, ctx := range calls {
		_, err := a.Authenticate(ctx)
		if st := status.Convert(err); st.Code() != codes.PermissionDenied || st.Message() != `tenant "globex" is not configured` {
			t.Errorf("%s of an unconfigured tenant: %v; want PermissionDenied naming the tenant", name, err)
		}
	}
	cfg.Tenants[config.DefaultTenant] = config.Tenant{}
	if err := a.Reload(cfg); err != nil {
		t.Fatal(err)
	}
	for name, ctx := range calls {
		if p, err := a.Authenticate(ctx); err != nil || p.Tenant != "globex" {
			t.Errorf("%s with a default tenant: %+v, %v", name, p, err)
		}
	}
}

// X-I2: Reload replaces the keys at once: a revoked key is
// Unauthenticated, a new one passes. A configuration that cannot be used,
// or that turns authentication off, keeps the running one.
func TestReload(t *testing.T) {
	t.Parallel()
	is := oidctest.New(t)
	key := is.PublishNewKey(t, "k1", jose.ES256)
	clk := newClock()
	var log logtest.Logs
	a := newOIDCAuth(t, is, clk, &log, func(c *config.Config) {
		c.Auth.APIKeys = []config.APIKey{{Name: "old", SHA256: HashKey("key-old"), Tenant: "acme", Roles: []string{RoleGenerate}}}
	})
	call := func(key string) error {
		_, err := a.Authenticate(metadata.NewIncomingContext(t.Context(), metadata.Pairs("authorization", "Bearer "+key)))
		return err
	}
	token := oidctest.Sign(t, key, is.Claims(clk.unix(), "alice", "acme", nil, nil))
	if err := errors.Join(call("key-old"), call(token)); err != nil {
		t.Fatal(err)
	}
	cfg := a.state.Load().src
	cfg.APIKeys = []config.APIKey{{Name: "new", SHA256: HashKey("key-new"), Tenant: "acme", Roles: []string{RoleGenerate}}}
	if err := a.Reload(config.Config{Auth: cfg}); err != nil {
		t.Fatal(err)
	}
	if err := call("key-old"); status.Code(err) != codes.Unauthenticated {
		t.Errorf("X-I2 a revoked key after a reload: %v; want Unauthenticated", err)
	}
	if err := errors.Join(call("key-new"), call(token)); err != nil {
		t.Errorf("X-I2 the new key and the same issuer's token after a reload: %v", err)
	}
	if _, jwks := is.Fetches(); jwks != 1 {
		t.Errorf("X-I3 the issuer's keys were fetched %d times; an unchanged issuer keeps its keys across a reload", jwks)
	}

	bad := cfg
	bad.APIKeys = []config.APIKey{{Name: "new", SHA256: "nope", Tenant: "acme"}}
	if err := a.Reload(config.Config{Auth: bad}); err == nil || !strings.Contains(err.Error(), "auth.api_keys[0].sha256") {
		t.Errorf("Reload of a broken key = %v; want it refused, naming the setting", err)
	}
	if err := a.Reload(config.Config{}); err == nil || !strings.Contains(err.Error(), "cannot turn authentication off") {
		t.Errorf("Reload without auth = %v; want it refused", err)
	}
	if err := call("key-new"); err != nil {
		t.Errorf("X-I2 the running keys after refused reloads: %v", err)
	}
}

// Without any method configured every call passes, as no one; a reload
// can turn authentication on.
func TestNoAuthThenReload(t *testing.T) {
	t.Parallel()
	a, err := New(config.Config{}, slog.New(slog.DiscardHandler))
	if err != nil {
		t.Fatal(err)
	}
	if ctx, err := a.authorize(t.Context(), "/agentd.v1.AgentService/Generate"); err != nil {
		t.Fatalf("without auth: %v", err)
	} else if _, ok := FromContext(ctx); ok {
		t.Error("without auth, the call has a principal")
	}
	if err := a.Reload(keys(config.APIKey{Name: "k", SHA256: HashKey("key"), Tenant: "t", Roles: []string{RoleGenerate}})); err != nil {
		t.Fatal(err)
	}
	if _, err := a.authorize(t.Context(), "/agentd.v1.AgentService/Generate"); status.Code(err) != codes.Unauthenticated {
		t.Errorf("X-I2 after a reload turning auth on, a call without a key: %v; want Unauthenticated", err)
	}
}

// BenchmarkAuthenticate is the authenticator's own share of a call:
// authorize with an API key among ten, and with an OIDC token verified
// before (the cached verification a caller gets on every call after its
// first), against a call with no auth configured.
func BenchmarkAuthenticate(b *testing.B) {
	is := oidctest.New(b)
	key := is.PublishNewKey(b, "k1", jose.ES256)
	var apiKeys []config.APIKey
	for i := range 10 {
		apiKeys = append(apiKeys, config.APIKey{Name: fmt.Sprint("k", i), SHA256: HashKey(fmt.Sprint("key-", i)), Tenant: "acme", Roles: []string{RoleGenerate}})
	}
	cfg := keys(apiKeys...)
	cfg.Auth.OIDC = []config.OIDCIssuer{issuerConfig(is)}
	cfg.Tenants = map[string]config.Tenant{"acme": {}}
	a, err := New(cfg, slog.New(slog.DiscardHandler))
	if err != nil {
		b.Fatal(err)
	}
	none, err := New(config.Config{}, slog.New(slog.DiscardHandler))
	if err != nil {
		b.Fatal(err)
	}
	token := oidctest.Sign(b, key, is.Claims(time.Now().Unix(), "bench", "acme", []string{RoleGenerate}, nil))
	const method = "/agentd.v1.AgentService/Generate"
	for _, tc := range []struct {
		name string
		a    *Authenticator
		md   metadata.MD
	}{
		{"none", none, metadata.MD{}},
		{"apikey", a, metadata.Pairs("authorization", "Bearer key-7")},
		{"jwt", a, metadata.Pairs("authorization", "Bearer "+token)},
	} {
		b.Run(tc.name, func(b *testing.B) {
			ctx := metadata.NewIncomingContext(context.Background(), tc.md)
			if _, err := tc.a.authorize(ctx, method); err != nil {
				b.Fatal(err)
			}
			for b.Loop() {
				if _, err := tc.a.authorize(ctx, method); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
