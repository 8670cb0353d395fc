// Package auth authenticates agentd's callers and checks their roles. A
// caller sends an API key as "authorization: Bearer <key>"; the
// configuration holds only each key's SHA-256 (auth.api_keys), with the
// tenant and roles it gives. Interceptors put the caller's Principal in
// the context of every call they let through; health and reflection stay
// open to all.
package auth

import (
	"context"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"strings"
	"sync"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/peer"
	"google.golang.org/grpc/status"

	"github.com/agentd/agentd/internal/config"
)

// Roles a principal may hold. Admin implies observer and tenant_admin.
const (
	RoleGenerate = "generate" // AgentService: Generate, Preview
	RoleObserver = "observer" // the admin service's reads
	RoleAdmin    = "admin"    // the admin service's writes, and its reads
	// RoleTenantAdmin reads and drops the schema cache's entries of the
	// principal's own tenant, and no others: it admits the calls role
	// marks tenant-scoped, which bridge/admin.go limits to that tenant.
	RoleTenantAdmin = "tenant_admin"
)

// roles are the roles a configuration may give.
var roles = []string{RoleGenerate, RoleObserver, RoleAdmin, RoleTenantAdmin}

// Principal is an authenticated caller.
type Principal struct {
	Name   string // the API key's name, for logs and audit; never the key
	Tenant string
	Roles  []string
}

// Has reports whether p holds role (admin holds observer and
// tenant_admin too).
func (p Principal) Has(role string) bool {
	return slices.Contains(p.Roles, role) || (role == RoleObserver || role == RoleTenantAdmin) && slices.Contains(p.Roles, RoleAdmin)
}

type principalKey struct{}

// FromContext returns the principal an interceptor authenticated, if any.
func FromContext(ctx context.Context) (Principal, bool) {
	p, ok := ctx.Value(principalKey{}).(Principal)
	return p, ok
}

// NewContext returns ctx carrying p as its authenticated principal, as
// the interceptors make it: for callers that authenticate otherwise, and
// for tests.
func NewContext(ctx context.Context, p Principal) context.Context {
	return context.WithValue(ctx, principalKey{}, p)
}

// Anonymous names the caller in audit lines where no authentication is
// configured.
const Anonymous = "anonymous"

// Caller returns who makes the call in ctx, for audit lines: the API
// key's name and its tenant, or Anonymous and "" without authentication.
func Caller(ctx context.Context) (name, tenant string) {
	if p, ok := FromContext(ctx); ok {
		return p.Name, p.Tenant
	}
	return Anonymous, ""
}

// HashKey returns the hex SHA-256 of an API key: what auth.api_keys holds.
func HashKey(key string) string {
	sum := sha256.Sum256([]byte(key))
	return hex.EncodeToString(sum[:])
}

// errUnauthenticated is every authentication failure, whatever failed:
// the reason goes to the log, never to the caller.
var errUnauthenticated = status.Error(codes.Unauthenticated, "authentication required: send a valid API key as \"authorization: Bearer <key>\"")

// Authenticator checks API keys against their configured hashes.
type Authenticator struct {
	keys []key
	log  *slog.Logger
	// failures rate-limits the log lines of failed authentications.
	mu       sync.Mutex
	window   time.Time
	failures int
}

type key struct {
	hash      [sha256.Size]byte
	principal Principal
}

// New returns an Authenticator for the configured keys, logging failures
// to log. It reports every problem of the keys at once, each naming its
// setting: a name missing or used twice, a sha256 that is not 64 hex
// digits, a missing tenant, an unknown role.
func New(keys []config.APIKey, log *slog.Logger) (*Authenticator, error) {
	a := &Authenticator{log: log}
	var problems []error
	names := make(map[string]bool)
	for i, k := range keys {
		at := fmt.Sprintf("auth.api_keys[%d]", i)
		if k.Name == "" || names[k.Name] {
			problems = append(problems, fmt.Errorf("%s.name: must be set and distinct", at))
		}
		names[k.Name] = true
		raw, err := hex.DecodeString(k.SHA256)
		if err != nil || len(raw) != sha256.Size {
			problems = append(problems, fmt.Errorf("%s.sha256: must be 64 hex digits (agentd keys hash prints them)", at))
		}
		if k.Tenant == "" {
			problems = append(problems, fmt.Errorf("%s.tenant: must be set", at))
		}
		for _, r := range k.Roles {
			if !slices.Contains(roles, r) {
				problems = append(problems, fmt.Errorf("%s.roles: unknown role %q; one of %s", at, r, strings.Join(roles, ", ")))
			}
		}
		var h [sha256.Size]byte
		copy(h[:], raw)
		a.keys = append(a.keys, key{hash: h, principal: Principal{Name: k.Name, Tenant: k.Tenant, Roles: k.Roles}})
	}
	if len(problems) > 0 {
		return nil, errors.Join(problems...)
	}
	return a, nil
}

// Authenticate returns the principal of the API key ctx's metadata
// carries. Every key is compared, in constant time, whichever matches, so
// the time taken says nothing of which key is closest.
func (a *Authenticator) Authenticate(ctx context.Context) (Principal, error) {
	values := metadata.ValueFromIncomingContext(ctx, "authorization")
	if len(values) != 1 {
		return Principal{}, a.fail(ctx, "no credential, or more than one")
	}
	scheme, token, ok := strings.Cut(values[0], " ")
	token = strings.TrimSpace(token)
	if !ok || !strings.EqualFold(scheme, "Bearer") || token == "" {
		return Principal{}, a.fail(ctx, "malformed authorization (want Bearer and a key)")
	}
	sum := sha256.Sum256([]byte(token))
	match := -1
	for i, k := range a.keys {
		if subtle.ConstantTimeCompare(sum[:], k.hash[:]) == 1 {
			match = i
		}
	}
	if match < 0 {
		return Principal{}, a.fail(ctx, "unknown API key")
	}
	return a.keys[match].principal, nil
}

// fail logs why an authentication failed, at most 10 lines a minute with
// the count of those left out, and returns the one error callers see.
func (a *Authenticator) fail(ctx context.Context, reason string) error {
	a.mu.Lock()
	now := time.Now()
	if now.Sub(a.window) >= time.Minute {
		if a.failures > 10 {
			a.log.Warn("authentication failures not logged", "audit", true, "count", a.failures-10)
		}
		a.window, a.failures = now, 0
	}
	a.failures++
	logIt := a.failures <= 10
	a.mu.Unlock()
	if logIt {
		a.log.Warn("authentication failed", "audit", true, "reason", reason, "method", methodOf(ctx), "peer", peerOf(ctx))
	}
	return errUnauthenticated
}

func peerOf(ctx context.Context) string {
	if p, ok := peer.FromContext(ctx); ok && p.Addr != nil {
		return p.Addr.String()
	}
	return ""
}

func methodOf(ctx context.Context) string {
	m, _ := grpc.Method(ctx)
	return m
}

// open lists the services every caller may use unauthenticated.
var open = []string{"/grpc.health.v1.Health/", "/grpc.reflection.v1.ServerReflection/", "/grpc.reflection.v1alpha.ServerReflection/"}

// role is the role a method needs: the admin service's reads need
// observer, its writes admin; everything else (the AgentService), generate.
// tenantScoped: tenant_admin may call it too, for its own tenant's
// entries.
func role(method string) (need string, tenantScoped bool) {
	service, name, _ := strings.Cut(strings.TrimPrefix(method, "/"), "/")
	if strings.HasSuffix(service, ".BridgeAdminService") {
		scoped := name == "GetCacheStats" || name == "ClearCache" || name == "InvalidateCache"
		if strings.HasPrefix(name, "Get") {
			return RoleObserver, scoped
		}
		return RoleAdmin, scoped
	}
	return RoleGenerate, false
}

// authorize authenticates a call to method and checks its role.
func (a *Authenticator) authorize(ctx context.Context, method string) (context.Context, error) {
	if slices.ContainsFunc(open, func(prefix string) bool { return strings.HasPrefix(method, prefix) }) {
		return ctx, nil
	}
	p, err := a.Authenticate(ctx)
	if err != nil {
		return nil, err
	}
	if need, scoped := role(method); !p.Has(need) && !(scoped && p.Has(RoleTenantAdmin)) {
		also := ""
		if scoped {
			also = fmt.Sprintf(" (or %q, for its own tenant's entries)", RoleTenantAdmin)
		}
		return nil, status.Errorf(codes.PermissionDenied, "this call needs the role %q%s, which the caller's API key does not give", need, also)
	}
	return context.WithValue(ctx, principalKey{}, p), nil
}

// UnaryInterceptor authenticates and authorizes unary calls.
func (a *Authenticator) UnaryInterceptor() grpc.UnaryServerInterceptor {
	return func(ctx context.Context, req any, info *grpc.UnaryServerInfo, handler grpc.UnaryHandler) (any, error) {
		ctx, err := a.authorize(ctx, info.FullMethod)
		if err != nil {
			return nil, err
		}
		return handler(ctx, req)
	}
}

// StreamInterceptor authenticates and authorizes streams.
func (a *Authenticator) StreamInterceptor() grpc.StreamServerInterceptor {
	return func(srv any, ss grpc.ServerStream, info *grpc.StreamServerInfo, handler grpc.StreamHandler) error {
		ctx, err := a.authorize(ss.Context(), info.FullMethod)
		if err != nil {
			return err
		}
		return handler(srv, &authedStream{ServerStream: ss, ctx: ctx})
	}
}

// authedStream carries the principal in its context.
type authedStream struct {
	grpc.ServerStream
	ctx context.Context
}

func (s *authedStream) Context() context.Context { return s.ctx }
