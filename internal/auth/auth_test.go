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

// Admin holds observer too; each admin method needs its role.
func TestRoles(t *testing.T) {
	t.Parallel()
	if !(Principal{Roles: []string{RoleAdmin}}).Has(RoleObserver) {
		t.Error("admin does not hold observer")
	}
	if (Principal{Roles: []string{RoleObserver}}).Has(RoleAdmin) {
		t.Error("observer holds admin")
	}
	for method, want := range map[string]string{
		"/agentd.v1.AgentService/Generate":                    RoleGenerate,
		"/agentd.v1.AgentService/Preview":                     RoleGenerate,
		"/agentd.bridge.v1.BridgeAdminService/GetCacheStats":  RoleObserver,
		"/agentd.bridge.v1.BridgeAdminService/GetPoolStats":   RoleObserver,
		"/agentd.bridge.v1.BridgeAdminService/ConfigureCache": RoleAdmin,
		"/agentd.bridge.v1.BridgeAdminService/ClearCache":     RoleAdmin,
	} {
		if got := role(method); got != want {
			t.Errorf("role(%s) = %s, want %s", method, got, want)
		}
	}
}

// The configured keys are checked at once, every problem named.
func TestNewRefusesBadKeys(t *testing.T) {
	t.Parallel()
	_, err := New([]config.APIKey{
		{Name: "a", SHA256: "not-hex", Tenant: "t", Roles: []string{"root"}},
		{Name: "a", SHA256: HashKey("k")},
	}, slog.New(slog.DiscardHandler))
	for _, want := range []string{"auth.api_keys[0].sha256", `unknown role "root"`, "auth.api_keys[1].name", "auth.api_keys[1].tenant"} {
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("New = %v; want it to say %q", err, want)
		}
	}
}
