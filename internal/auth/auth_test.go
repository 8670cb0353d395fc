package auth

import (
	"context"
	"io"
	"log/slog"
	"strings"
	"testing"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"

	"github.com/agentd/agentd/internal/config"
)

func newAuth(t *testing.T, log io.Writer) *Authenticator {
	t.Helper()
	a, err := New([]config.APIKey{
		{Name: "app", SHA256: HashKey("key-app"), Tenant: "acme", Roles: []string{RoleGenerate}},
		{Name: "ops", SHA256: HashKey("key-ops"), Tenant: "acme", Roles: []string{RoleAdmin}},
	}, slog.New(slog.NewTextHandler(log, nil)))
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
	} {
		if got := (Principal{Roles: []string{tc.held}}).Has(tc.role); got != tc.want {
			t.Errorf("X-I5 %s holds %s: %v, want %v", tc.held, tc.role, got, tc.want)
		}
	}
	type need struct {
		role         string
		tenantScoped bool
	}
	for method, want := range map[string]need{
		"/agentd.v1.AgentService/Generate":                     {RoleGenerate, false},
		"/agentd.v1.AgentService/Preview":                      {RoleGenerate, false},
		"/agentd.bridge.v1.BridgeAdminService/GetCacheStats":   {RoleObserver, true},
		"/agentd.bridge.v1.BridgeAdminService/GetPoolStats":    {RoleObserver, false},
		"/agentd.bridge.v1.BridgeAdminService/ConfigureCache":  {RoleAdmin, false},
		"/agentd.bridge.v1.BridgeAdminService/ResetCache":      {RoleAdmin, false},
		"/agentd.bridge.v1.BridgeAdminService/ClearCache":      {RoleAdmin, true},
		"/agentd.bridge.v1.BridgeAdminService/InvalidateCache": {RoleAdmin, true},
	} {
		if got, scoped := role(method); got != want.role || scoped != want.tenantScoped {
			t.Errorf("X-I5 role(%s) = %s, tenant-scoped %v; want %+v", method, got, scoped, want)
		}
	}
}

// The configured keys are checked at once, every problem named.
func TestNewRefusesBadKeys(t *testing.T) {
	t.Parallel()
	_, err := New([]config.APIKey{
		{Name: "a", SHA256: "not-hex", Tenant: "t", Roles: []string{"root"}},
		{Name: "a", SHA256: HashKey("k")},
		{Name: "b", SHA256: HashKey("k2"), Tenant: "t", Roles: []string{RoleTenantAdmin}},
	}, slog.New(slog.DiscardHandler))
	for _, want := range []string{"auth.api_keys[0].sha256", `unknown role "root"; one of generate, observer, admin, tenant_admin`, "auth.api_keys[1].name", "auth.api_keys[1].tenant"} {
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("New = %v; want it to say %q", err, want)
		}
	}
	if err != nil && strings.Contains(err.Error(), "auth.api_keys[2]") {
		t.Errorf("X-I5 New refuses tenant_admin: %v", err)
	}
}
