package config

import (
	"fmt"
	"net"
	"net/url"
	"time"
)

// Auth configures how agentd authenticates its callers: any of API keys,
// OIDC tokens and client certificates. A call that carries an
// "authorization" header is authenticated by it alone (a JWT by auth.oidc
// when issuers are configured, anything else as an API key); a call
// without one, by its verified client certificate (auth.mtls). `agentd
// serve` applies a changed auth on SIGHUP; tenants apply at the next
// start.
type Auth struct {
	// APIKeys are the API keys callers may send as "authorization: Bearer
	// <key>", each configured only by its SHA-256 (`agentd keys hash`).
	APIKeys []APIKey `yaml:"api_keys"`
	// OIDC are the issuers whose JWTs callers may send as "authorization:
	// Bearer <jwt>".
	OIDC []OIDCIssuer `yaml:"oidc"`
	// MTLS maps the principals of verified client certificates (tls with
	// a client_ca_file) to tenants and roles.
	MTLS MTLS `yaml:"mtls"`
}

// Enabled reports whether any authentication method is configured.
func (a Auth) Enabled() bool {
	return len(a.APIKeys) > 0 || len(a.OIDC) > 0 || len(a.MTLS.Principals) > 0
}

// APIKey is one API key: never the key itself, only its hash, and what it
// gives its caller.
type APIKey struct {
	// Name identifies the key in logs and audit lines.
	Name string `yaml:"name"`
	// SHA256 is the hex SHA-256 of the key.
	SHA256 string `yaml:"sha256"`
	// Tenant is the tenant its caller acts for.
	Tenant string `yaml:"tenant"`
	// Roles are what its caller may do: generate (AgentService), approve
	// (decide what its tenant's generations wait for, and read them:
	// DecideRequests, ListPendingRequests, GetGeneration, ListGenerations,
	// FollowGeneration, StreamGenerationEvents), observer (the admin
	// service's reads), admin (its writes and reads), tenant_admin (the
	// schema cache's stats, clear and invalidate, for its own tenant's
	// entries only).
	Roles []string `yaml:"roles" enum:"generate,approve,observer,admin,tenant_admin"`
}

// OIDCIssuer is one OpenID Connect issuer whose ID or access tokens
// (JWTs) authenticate callers.
type OIDCIssuer struct {
	// Issuer is the issuer URL (required), exactly as the tokens' iss
	// claim gives it; discovery is read from it +
	// "/.well-known/openid-configuration".
	Issuer string `yaml:"issuer"`
	// Audience is the value the tokens' aud claim must contain
	// (required).
	Audience string `yaml:"audience"`
	// Algorithms are the signature algorithms accepted: the asymmetric
	// ones. "none" is not a signature, and an HMAC algorithm (HS256...)
	// would let whoever knows the issuer's public key (everyone) sign
	// tokens if a key were ever taken for a secret.
	Algorithms []string `yaml:"algorithms" enum:"RS256,RS384,RS512,PS256,PS384,PS512,ES256,ES384,ES512,EdDSA"`
	// TenantClaim names the claim that gives the tenant.
	TenantClaim string `yaml:"tenant_claim"`
	// RolesClaim names the claim that gives the roles: an array of
	// strings, or one string of space-separated roles.
	RolesClaim string `yaml:"roles_claim"`
	// PrincipalClaim names the claim that names the caller in logs and
	// audit lines.
	PrincipalClaim string `yaml:"principal_claim"`
	// ClockSkew is the leeway allowed on exp, nbf and iat.
	ClockSkew time.Duration `yaml:"clock_skew"`
	// RefreshInterval is the least time between two fetches of the
	// issuer's keys caused by tokens signed with an unknown key id, and
	// so also how long a failed fetch is not tried again.
	RefreshInterval time.Duration `yaml:"refresh_interval"`
	// CAFile is a PEM bundle that verifies the issuer's HTTPS certificate.
	CAFile string `yaml:"ca_file" default:"the system's roots"`
}

// OIDCAlgorithms are the signature algorithms auth.oidc may accept, as
// the enum of OIDCIssuer.Algorithms lists them.
var OIDCAlgorithms = fieldEnum[OIDCIssuer]("Algorithms")

// WithDefaults returns o with its unset fields at their defaults.
func (o OIDCIssuer) WithDefaults() OIDCIssuer {
	fillUnset(&o, OIDCIssuer{
		Algorithms:      []string{"RS256", "ES256"},
		TenantClaim:     "tenant",
		RolesClaim:      "roles",
		PrincipalClaim:  "sub",
		ClockSkew:       time.Minute,
		RefreshInterval: time.Minute,
	})
	return o
}

// MTLS maps the principals of verified client certificates (tls with a
// client_ca_file) to tenants and roles.
type MTLS struct {
	// PrincipalFrom says which identity of a client certificate is its
	// principal: "uri" (the first URI SAN), "dns" (the first DNS SAN) or
	// "cn" (the subject's common name).
	PrincipalFrom string `yaml:"principal_from" enum:",uri,dns,cn" default:"the first URI SAN, else the first DNS SAN, else the common name"`
	// Principals map certificate principals to tenants and roles; a
	// certificate whose principal is not listed is Unauthenticated.
	Principals []MTLSPrincipal `yaml:"principals"`
}

// MTLSPrincipal is what one client certificate principal gives its
// caller.
type MTLSPrincipal struct {
	// Principal is the certificate's identity as principal_from selects
	// it, such as "spiffe://example.org/app" or "app.example.org".
	Principal string `yaml:"principal"`
	// Tenant is the tenant its caller acts for.
	Tenant string `yaml:"tenant"`
	// Roles are what its caller may do, as an API key's roles.
	Roles []string `yaml:"roles" enum:"generate,approve,observer,admin,tenant_admin"`
}

// validateAuth checks auth.oidc and auth.mtls, and that every tenant an
// API key or a client certificate gives is configured when tenants are.
// The roles are checked by their enum; the API keys' names and hashes are
// internal/auth's to check.
func (c *Config) validateAuth(bad func(string, ...any)) {
	c.Auth.validateOIDC(bad)
	c.validateMTLS(bad)
	c.validateAuthTenants(bad)
}

// validateOIDC checks auth.oidc: issuers that tokens can be verified
// against, each configured once.
func (a Auth) validateOIDC(bad func(string, ...any)) {
	issuers := make(map[string]bool)
	for i, o := range a.OIDC {
		at := fmt.Sprintf("auth.oidc[%d]", i)
		// The URL is not quoted: its path may be something only the
		// issuer's users should know.
		if !OIDCURL(o.Issuer) {
			bad("%s.issuer: must be an https URL (or http to a loopback address), without query or fragment", at)
		} else if issuers[o.Issuer] {
			bad("%s.issuer: configured twice", at)
		}
		issuers[o.Issuer] = true
		if o.Audience == "" {
			bad("%s.audience: must be set", at)
		}
		if o.ClockSkew < 0 || o.RefreshInterval < 0 {
			bad("%s: clock_skew and refresh_interval must not be negative", at)
		}
	}
}

// validateMTLS checks auth.mtls: principals that only verified client
// certificates can carry, each mapped once to a tenant.
func (c *Config) validateMTLS(bad func(string, ...any)) {
	m := c.Auth.MTLS
	if len(m.Principals) > 0 && c.TLS.ClientCAFile == "" {
		bad("auth.mtls.principals: need tls.client_ca_file (and tls.cert_file, tls.key_file): only then do clients present verified certificates")
	}
	// The admin listener authenticates with the same principals: a
	// certificate verified by another CA must not pass for one of them.
	if len(m.Principals) > 0 && c.Admin.TLS.ClientCAFile != "" && c.Admin.TLS.ClientCAFile != c.TLS.ClientCAFile {
		bad("admin.tls.client_ca_file: must be tls.client_ca_file while auth.mtls maps principals (another CA's certificates would pass for them)")
	}
	m.validatePrincipals(bad)
}

// validatePrincipals checks that each of auth.mtls.principals names a
// principal of its own and a tenant.
func (m MTLS) validatePrincipals(bad func(string, ...any)) {
	principals := make(map[string]bool)
	for i, p := range m.Principals {
		at := fmt.Sprintf("auth.mtls.principals[%d]", i)
		if p.Principal == "" || principals[p.Principal] {
			bad("%s.principal: must be set and distinct", at)
		}
		principals[p.Principal] = true
		if p.Tenant == "" {
			bad("%s.tenant: must be set", at)
		}
	}
}

// validateAuthTenants checks that every tenant an API key or a client
// certificate gives is configured, when tenants are.
func (c *Config) validateAuthTenants(bad func(string, ...any)) {
	if len(c.Tenants) == 0 {
		return
	}
	configured := func(setting, tenant string) {
		if _, ok := c.ForTenant(tenant); tenant != "" && !ok {
			bad("%s.tenant: tenant %q is not configured (tenants has neither it nor %q)", setting, tenant, DefaultTenant)
		}
	}
	for i, k := range c.Auth.APIKeys {
		configured(fmt.Sprintf("auth.api_keys[%d]", i), k.Tenant)
	}
	for i, p := range c.Auth.MTLS.Principals {
		configured(fmt.Sprintf("auth.mtls.principals[%d]", i), p.Tenant)
	}
}

// OIDCURL reports whether raw may be an OIDC issuer or the address of its
// keys: https, or http to a loopback address (a local issuer), with a host
// and neither credentials, query nor fragment.
func OIDCURL(raw string) bool {
	u, err := url.Parse(raw)
	if err != nil || u.Host == "" || u.User != nil || u.RawQuery != "" || u.Fragment != "" || u.Opaque != "" {
		return false
	}
	return u.Scheme == "https" || u.Scheme == "http" && loopbackHost(u.Hostname())
}

// loopbackHost reports whether host is localhost or a loopback IP.
func loopbackHost(host string) bool {
	ip := net.ParseIP(host)
	return host == "localhost" || ip != nil && ip.IsLoopback()
}
