// Package auth authenticates agentd's callers and checks their roles.
// A caller sends an API key or an OIDC token (a JWT) as "authorization:
// Bearer <credential>", or, without that header, presents a client
// certificate over mutual TLS. The configuration holds only each API
// key's SHA-256 (auth.api_keys), the issuers whose tokens are accepted
// (auth.oidc) and the certificate principals that are (auth.mtls), each
// with the tenant and roles it gives. Interceptors put the caller's
// Principal in the context of every call they let through; health and
// reflection stay open to all. The configuration can be replaced while
// agentd serves (Reload).
package auth

import (
	"context"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/peer"
	"google.golang.org/grpc/status"

	"github.com/agentd/agentd/internal/config"
	"github.com/agentd/agentd/internal/tlsconf"
)

// Roles a principal may hold. Admin implies observer and tenant_admin;
// generate implies approve. Every authenticated caller, whatever its
// roles, may ask who it is (GetCaller).
const (
	// RoleGenerate starts, resumes and cancels generations, and makes
	// every other call of the AgentService.
	RoleGenerate = "generate"
	// RoleApprove decides what its tenant's generations wait for and
	// reads them, without starting any: DecideRequests and the reads
	// that RoleObserver makes.
	RoleApprove = "approve"
	// RoleObserver reads, without deciding or starting anything: its
	// tenant's generations, pending requests and threads
	// (GetGeneration, ListGenerations, FollowGeneration,
	// StreamGenerationEvents, ListPendingRequests, GetThread,
	// ListThreads, ListThreadItems), and the admin services' reads
	// (across tenants).
	RoleObserver = "observer"
	RoleAdmin    = "admin" // the admin services' writes, and their reads
	// RoleTenantAdmin reads and drops the schema cache's entries of the
	// principal's own tenant, lists its tenant and MCP servers, and
	// revokes its OAuth tokens, and no others': it admits the calls role
	// marks tenant-scoped, which bridge/admin.go and server/admin.go
	// limit to that tenant.
	RoleTenantAdmin = "tenant_admin"
)

// roles are the roles a configuration may give.
var roles = []string{RoleGenerate, RoleApprove, RoleObserver, RoleAdmin, RoleTenantAdmin}

// EveryRole returns the roles a configuration may give, in the order they
// are declared: what a caller holds without authentication.
func EveryRole() []string { return slices.Clone(roles) }

// Principal is an authenticated caller.
type Principal struct {
	// Name names the caller in logs and audit lines, never by its
	// credential: the API key's name, the token's principal claim (sub),
	// or the client certificate's principal.
	Name   string
	Tenant string
	Roles  []string
}

// Has reports whether p holds role (admin holds observer and
// tenant_admin too; generate holds approve).
func (p Principal) Has(role string) bool {
	switch {
	case slices.Contains(p.Roles, role):
		return true
	case role == RoleObserver || role == RoleTenantAdmin:
		return slices.Contains(p.Roles, RoleAdmin)
	case role == RoleApprove:
		return slices.Contains(p.Roles, RoleGenerate)
	}
	return false
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

// Caller returns who makes the call in ctx, for audit lines: the
// principal's name and its tenant, or Anonymous and "" without
// authentication.
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
var errUnauthenticated = status.Error(codes.Unauthenticated, `authentication required: send a valid API key or token as "authorization: Bearer <credential>", or a client certificate that auth.mtls lists`)

// errUnavailable refuses a token that might be valid but cannot be
// checked now: its issuer's keys cannot be fetched, and none cached
// verifies it. The caller may try again.
var errUnavailable = status.Error(codes.Unavailable, "authentication unavailable: the token issuer's signing keys cannot be fetched; try again later")

// Authenticator authenticates callers by API key, OIDC token or client
// certificate, as its current configuration says. It is safe for
// concurrent use, Reload included.
type Authenticator struct {
	log *slog.Logger
	// now is the clock of tokens' validity and of the limit on fetching
	// issuers' keys; tests set their own.
	now   func() time.Time
	state atomic.Pointer[state]

	// failures rate-limits the log lines of failed authentications.
	mu       sync.Mutex
	window   time.Time
	failures int
}

// state is one configuration of an Authenticator: Reload replaces it
// whole.
type state struct {
	src      config.Auth
	keys     []key
	oidc     *oidcAuth // nil without issuers
	mtlsFrom string
	mtls     map[string]Principal // by certificate principal
	// tenants holds the configuration's tenants alone, for ForTenant.
	tenants config.Config
}

type key struct {
	hash      [sha256.Size]byte
	principal Principal
}

// New returns an Authenticator for cfg's auth and tenants, logging
// failures to log. It reports every problem of auth at once, each naming
// its setting: an API key's name missing or used twice, a sha256 that is
// not 64 hex digits, a missing tenant, an unknown role, an issuer's
// algorithm not allowed or its ca_file unreadable. It fetches nothing:
// each issuer's discovery document and keys are fetched for the first
// token it signed, so that agentd starts while an issuer is down. With no
// method configured, every call passes unauthenticated.
func New(cfg config.Config, log *slog.Logger) (*Authenticator, error) {
	return newAuthenticator(cfg, log, time.Now)
}

func newAuthenticator(cfg config.Config, log *slog.Logger, now func() time.Time) (*Authenticator, error) {
	a := &Authenticator{log: log, now: now}
	st, err := a.build(cfg, nil)
	if err != nil {
		return nil, err
	}
	a.state.Store(st)
	return a, nil
}

// Reload replaces the configuration with cfg's auth and tenants, at once for
// every call that starts after it; calls already authenticated keep their
// principal. An issuer configured exactly as before keeps its fetched keys,
// the tokens it verified and its ca_file as first read. A configuration New
// would refuse, or one that turns authentication off (the listener's address
// was chosen for an authenticated service), leaves the current one in place,
// and the error says why.
func (a *Authenticator) Reload(cfg config.Config) error {
	old := a.state.Load()
	if old.src.Enabled() && !cfg.Auth.Enabled() {
		return errors.New("auth: a reload cannot turn authentication off; restart agentd to serve without it")
	}
	st, err := a.build(cfg, old)
	if err != nil {
		return err
	}
	a.state.Store(st)
	return nil
}

// build makes the state of cfg, keeping old's OIDC state when the issuers
// did not change.
func (a *Authenticator) build(cfg config.Config, old *state) (*state, error) {
	st := &state{src: cfg.Auth, mtlsFrom: cfg.Auth.MTLS.PrincipalFrom, tenants: config.Config{Tenants: cfg.Tenants}}
	var problems, more []error
	st.keys, problems = apiKeys(cfg.Auth.APIKeys)
	st.mtls, more = mtlsPrincipals(cfg.Auth.MTLS)
	problems = append(problems, more...)
	if len(cfg.Auth.OIDC) > 0 {
		if old != nil && old.oidc != nil && reflect.DeepEqual(old.src.OIDC, cfg.Auth.OIDC) {
			st.oidc = old.oidc
		} else {
			var err error
			if st.oidc, err = newOIDC(cfg.Auth.OIDC, a.now); err != nil {
				problems = append(problems, err)
			}
		}
	}
	if len(problems) > 0 {
		return nil, errors.Join(problems...)
	}
	return st, nil
}

// apiKeys reads auth.api_keys, and what is wrong with them: each needs a
// distinct name, a SHA-256 in hex, a tenant and known roles.
func apiKeys(configured []config.APIKey) ([]key, []error) {
	var keys []key
	var problems []error
	names := make(map[string]bool)
	for i, k := range configured {
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
		problems = append(problems, checkRoles(at, k.Roles)...)
		var h [sha256.Size]byte
		copy(h[:], raw)
		keys = append(keys, key{hash: h, principal: Principal{Name: k.Name, Tenant: k.Tenant, Roles: k.Roles}})
	}
	return keys, problems
}

// mtlsPrincipals reads auth.mtls, and what is wrong with it: where the
// principal comes from, and each principal's distinct name, tenant and
// known roles. Nil when it lists no principal.
func mtlsPrincipals(m config.MTLS) (map[string]Principal, []error) {
	if len(m.Principals) == 0 {
		return nil, nil
	}
	var problems []error
	if !slices.Contains([]string{tlsconf.PrincipalAuto, tlsconf.PrincipalURI, tlsconf.PrincipalDNS, tlsconf.PrincipalCN}, m.PrincipalFrom) {
		problems = append(problems, fmt.Errorf("auth.mtls.principal_from: must be uri, dns or cn, got %q", m.PrincipalFrom))
	}
	principals := make(map[string]Principal, len(m.Principals))
	for i, p := range m.Principals {
		at := fmt.Sprintf("auth.mtls.principals[%d]", i)
		if _, dup := principals[p.Principal]; p.Principal == "" || dup {
			problems = append(problems, fmt.Errorf("%s.principal: must be set and distinct", at))
		}
		if p.Tenant == "" {
			problems = append(problems, fmt.Errorf("%s.tenant: must be set", at))
		}
		problems = append(problems, checkRoles(at, p.Roles)...)
		principals[p.Principal] = Principal{Name: p.Principal, Tenant: p.Tenant, Roles: p.Roles}
	}
	return principals, problems
}

// checkRoles refuses the roles at at that are not agentd's.
func checkRoles(at string, rs []string) []error {
	var problems []error
	for _, r := range rs {
		if !slices.Contains(roles, r) {
			problems = append(problems, fmt.Errorf("%s.roles: unknown role %q; one of %s", at, r, strings.Join(roles, ", ")))
		}
	}
	return problems
}

// Authenticate returns the principal that ctx's call authenticates as:
// by the bearer credential of its "authorization" header if it has one,
// else by its verified client certificate. A failure is Unauthenticated,
// saying nothing of what failed (the log says it), except that a token
// whose issuer's keys cannot be fetched is Unavailable, and a principal
// whose tenant is not configured is PermissionDenied.
func (a *Authenticator) Authenticate(ctx context.Context) (Principal, error) {
	st := a.state.Load()
	p, err := a.identify(ctx, st)
	if err != nil {
		return Principal{}, err
	}
	if _, ok := st.tenants.ForTenant(p.Tenant); !ok {
		return Principal{}, a.refuse(ctx, "caller refused", fmt.Sprintf("tenant %q is not configured", p.Tenant),
			status.Errorf(codes.PermissionDenied, "tenant %q is not configured", p.Tenant), "principal", p.Name)
	}
	return p, nil
}

func (a *Authenticator) identify(ctx context.Context, st *state) (Principal, error) {
	values := metadata.ValueFromIncomingContext(ctx, "authorization")
	switch len(values) {
	case 0:
		return a.byCertificate(ctx, st)
	case 1:
	default:
		return Principal{}, a.fail(ctx, "more than one authorization header")
	}
	token, ok := bearer(values[0])
	if !ok {
		return Principal{}, a.fail(ctx, "malformed authorization (want Bearer and a credential)")
	}
	if st.oidc != nil && looksLikeJWT(token) {
		return a.byToken(ctx, st, token)
	}
	return st.apiKey(ctx, a, token)
}

// byCertificate returns the principal of the call's verified client
// certificate, when auth.mtls lists it.
func (a *Authenticator) byCertificate(ctx context.Context, st *state) (Principal, error) {
	cert := tlsconf.PeerCertificate(ctx)
	if cert == nil || st.mtls == nil {
		return Principal{}, a.fail(ctx, "no credential")
	}
	name := tlsconf.Principal(cert, st.mtlsFrom)
	if p, ok := st.mtls[name]; ok {
		return p, nil
	}
	return Principal{}, a.refuse(ctx, "authentication failed", "client certificate principal not listed in auth.mtls.principals", errUnauthenticated, "principal", name)
}

// byToken returns the principal of a JWT an issuer verifies; a token
// whose issuer's keys cannot be fetched is Unavailable.
func (a *Authenticator) byToken(ctx context.Context, st *state, token string) (Principal, error) {
	p, err := st.oidc.authenticate(ctx, token)
	var refusal *tokenRefusal
	switch {
	case err == nil:
		return p, nil
	case errors.As(err, &refusal) && refusal.unavailable:
		return Principal{}, a.refuse(ctx, "authentication failed", refusal.reason, errUnavailable)
	}
	return Principal{}, a.fail(ctx, err.Error())
}

// apiKey returns the principal of an API key. Every key is compared, in
// constant time, whichever matches, so the time taken says nothing of
// which key is closest.
func (st *state) apiKey(ctx context.Context, a *Authenticator, token string) (Principal, error) {
	sum := sha256.Sum256([]byte(token))
	match := -1
	for i, k := range st.keys {
		if subtle.ConstantTimeCompare(sum[:], k.hash[:]) == 1 {
			match = i
		}
	}
	if match < 0 {
		return Principal{}, a.fail(ctx, "unknown API key")
	}
	return st.keys[match].principal, nil
}

// bearer is the credential of an authorization header's value "Bearer
// <credential>" (the scheme in any case).
func bearer(value string) (string, bool) {
	scheme, token, ok := strings.Cut(value, " ")
	token = strings.TrimSpace(token)
	return token, ok && strings.EqualFold(scheme, "Bearer") && token != ""
}

// looksLikeJWT reports whether a bearer credential has a JWT's compact
// form: three parts of base64url separated by dots, the first two not
// empty (the third is, in an unsigned token, which is then refused as
// one). API keys are never sent to an issuer's verification, nor tokens
// compared with API keys.
func looksLikeJWT(token string) bool {
	header, rest, _ := strings.Cut(token, ".")
	payload, _, _ := strings.Cut(rest, ".")
	return strings.Count(token, ".") == 2 && header != "" && payload != "" && !strings.ContainsFunc(token, notInJWT)
}

// notInJWT reports whether r is neither base64url nor a dot.
func notInJWT(r rune) bool {
	return !('A' <= r && r <= 'Z' || 'a' <= r && r <= 'z' || '0' <= r && r <= '9' || r == '-' || r == '_' || r == '.')
}

// fail logs why an authentication failed and returns the one error
// callers see.
func (a *Authenticator) fail(ctx context.Context, reason string) error {
	return a.refuse(ctx, "authentication failed", reason, errUnauthenticated)
}

// refuse logs msg, why a call is refused and attrs as an audit line, at
// most 10 lines a minute with the count of those left out, and returns
// err.
func (a *Authenticator) refuse(ctx context.Context, msg, reason string, err error, attrs ...any) error {
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
		a.log.Warn(msg, append([]any{"audit", true, "reason", reason, "method", methodOf(ctx), "peer", peerOf(ctx)}, attrs...)...)
	}
	return err
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

// reading are the AgentService's reads, which observer and approve
// admit besides generate.
var reading = []string{"ListPendingRequests", "GetGeneration", "ListGenerations", "FollowGeneration", "StreamGenerationEvents",
	"GetThread", "ListThreads", "ListThreadItems"}

// bridgeScoped are the bridge admin API's methods that a tenant_admin may
// call for its own tenant's schema cache entries.
var bridgeScoped = []string{"GetCacheStats", "ClearCache", "InvalidateCache", "ListCacheEntries", "InvalidateCacheEntries"}

// role is what a method needs: one of the roles anyOf (none: any
// authenticated caller may call it), and, when tenantScoped, tenant_admin
// may call it too, for its own tenant's entries (the service limits it to
// them).
func role(method string) (anyOf []string, tenantScoped bool) {
	service, name, _ := strings.Cut(strings.TrimPrefix(method, "/"), "/")
	switch {
	case service == "agentd.v1.AgentService":
		return agentRole(name), false
	case service == "agentd.v1.AdminService":
		return adminRole(name), true
	case strings.HasSuffix(service, ".BridgeAdminService"):
		return adminRole(name), slices.Contains(bridgeScoped, name)
	}
	return []string{RoleGenerate}, false
}

// agentRole is what the AgentService's method name needs: nothing but
// authentication to ask who the caller is, approve to decide, approve or
// observer to read, generate for the rest (starting, resuming and
// cancelling generations, and threads' writes).
func agentRole(name string) []string {
	switch {
	case name == "GetCaller":
		return nil
	case name == "DecideRequests":
		return []string{RoleApprove}
	case slices.Contains(reading, name):
		return []string{RoleApprove, RoleObserver}
	}
	return []string{RoleGenerate}
}

// adminRole is what an admin service's method name needs: observer for
// its reads, admin for its writes.
func adminRole(name string) []string {
	if strings.HasPrefix(name, "Get") || strings.HasPrefix(name, "List") {
		return []string{RoleObserver}
	}
	return []string{RoleAdmin}
}

// authorize authenticates a call to method and checks its role. Without
// any method configured, every call passes.
func (a *Authenticator) authorize(ctx context.Context, method string) (context.Context, error) {
	if !a.state.Load().src.Enabled() || slices.ContainsFunc(open, func(prefix string) bool { return strings.HasPrefix(method, prefix) }) {
		return ctx, nil
	}
	p, err := a.Authenticate(ctx)
	if err != nil {
		return nil, err
	}
	anyOf, scoped := role(method)
	if len(anyOf) > 0 && !slices.ContainsFunc(anyOf, p.Has) && !(scoped && p.Has(RoleTenantAdmin)) {
		return nil, denied(anyOf, scoped)
	}
	return context.WithValue(ctx, principalKey{}, p), nil
}

// denied is PermissionDenied for a caller without any of the roles
// anyOf, naming them, and the roles that hold them.
func denied(anyOf []string, scoped bool) error {
	names := make([]string, 0, len(anyOf)+1)
	for _, r := range anyOf {
		names = append(names, strconv.Quote(r))
	}
	if slices.Contains(anyOf, RoleApprove) {
		names = append(names, strconv.Quote(RoleGenerate))
	}
	also := ""
	if len(names) > 1 {
		also = " (or " + strings.Join(names[1:], ", ") + ")"
	}
	if scoped {
		also += fmt.Sprintf(" (or %q, for its own tenant's entries)", RoleTenantAdmin)
	}
	return status.Errorf(codes.PermissionDenied, "this call needs the role %s%s, which the caller's credential does not give", names[0], also)
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
