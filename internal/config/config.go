// Package config holds agentd's configuration: one struct, loaded from
// built-in defaults, then an optional YAML file, then AGENTD_* environment
// variables; the command line applies its flags last. Every default is
// stated where its field is declared.
package config

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"maps"
	"net"
	"net/url"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"

	"go.yaml.in/yaml/v3"

	"github.com/agentd/agentd/internal/netaddr"
	"github.com/agentd/agentd/internal/policy"
)

// Self, as a registered server's command, means the running agentd
// executable. The default configuration registers the demo MCP server as
// {command: "@self", args: ["mcp-demo"]}.
const Self = "@self"

// Config is the whole configuration of agentd.
type Config struct {
	// Listen is where `agentd serve` serves AgentService (plus health and
	// reflection). Default "127.0.0.1:7070". Env AGENTD_LISTEN.
	Listen string `yaml:"listen"`

	// ShutdownGrace bounds a graceful shutdown on SIGINT/SIGTERM: running
	// calls get this long to finish before they are cut. Default 10s.
	// Env AGENTD_SHUTDOWN_GRACE.
	ShutdownGrace time.Duration `yaml:"shutdown_grace"`

	// ShutdownDrain is how long, on SIGINT/SIGTERM, `agentd serve`'s
	// health ("readiness" and the AgentService) reports NOT_SERVING while
	// the listeners still accept calls, so that load
	// balancers stop sending new ones, before the graceful shutdown
	// (ShutdownGrace) begins. Default 5s; 0 skips it. Env
	// AGENTD_SHUTDOWN_DRAIN.
	ShutdownDrain time.Duration `yaml:"shutdown_drain"`

	// GCHeapFloorMiB keeps the Go garbage collector from starting a
	// collection before the heap reaches this many MiB, while the live
	// heap is under half of it (beyond that, Go's default pace): agentd
	// keeps little alive and allocates fast, so at Go's default pace it
	// collects many times a second under load. It costs up to this much
	// memory. Read at start, by `agentd serve` and `agentd bridge`. A GOGC
	// in the environment overrides it. Default 64; 0 leaves Go's default.
	// Env AGENTD_GC_HEAP_FLOOR_MIB.
	GCHeapFloorMiB int `yaml:"gc_heap_floor_mib"`

	// Metrics configures the metrics agentd and its bridge record (X-O1).
	Metrics Metrics `yaml:"metrics"`

	// Debug serves Go's profiling endpoints, for operators and benchmarks.
	Debug Debug `yaml:"debug"`

	// Insecure lets `agentd serve` and `agentd bridge` listen on an
	// address other than loopback although agentd authenticates no caller:
	// anyone who can reach the port can then run generations on the
	// configured provider keys. Without it, such an address refuses to
	// start; with it, every start logs a warning. Default false. Env
	// AGENTD_INSECURE; flag --insecure.
	Insecure bool `yaml:"insecure"`

	// TLS, when it names a certificate, serves `agentd serve`'s listener
	// over TLS (X-I4); see TLS. Default: plaintext. Env
	// AGENTD_TLS_CERT_FILE, AGENTD_TLS_KEY_FILE, AGENTD_TLS_CLIENT_CA_FILE,
	// AGENTD_TLS_MIN_VERSION.
	TLS TLS `yaml:"tls"`

	// Auth authenticates agentd's callers. With no method configured,
	// every caller is served unauthenticated, and agentd listens only on
	// loopback unless Insecure.
	Auth Auth `yaml:"auth"`

	// Admin places the bridge's admin service (BridgeAdminService).
	Admin Admin `yaml:"admin"`

	// Reflection serves gRPC server reflection beside every service, open
	// to all callers like health. Default true. Env AGENTD_REFLECTION.
	Reflection bool `yaml:"reflection"`

	// Limits are every tenant's limits unless tenants.<name>.limits sets
	// its own. Default: none.
	Limits Limits `yaml:"limits"`

	// Tenants configures tenants by name (see Tenant). With none
	// configured, every tenant an authenticated caller names is served
	// with the global settings. With any configured, a caller whose tenant
	// is not among them is PermissionDenied, unless "default" is: then it
	// gets the default's settings.
	Tenants map[string]Tenant `yaml:"tenants"`

	// Log configures the structured log on stderr.
	Log Log `yaml:"log"`

	// StateDir holds agentd's durable state on this machine: agentd.db,
	// the SQLite store of paused generations (with store.driver sqlite).
	// Default: $XDG_STATE_HOME/agentd, else ~/.local/state/agentd. Env
	// AGENTD_STATE_DIR.
	StateDir string `yaml:"state_dir"`

	// Store says which store keeps the paused generations (X-G1): SQLite
	// in state_dir (the default) or PostgreSQL. See Store.
	Store Store `yaml:"store"`

	// Bridge configures the BridgeService, embedded or remote.
	Bridge Bridge `yaml:"bridge"`

	// Generation configures the tool loop.
	Generation Generation `yaml:"generation"`

	// OAuth is agentd's identity as the OAuth client of MCP servers that
	// declare an oauth block (X-M1).
	OAuth OAuth `yaml:"oauth"`

	// Providers configures the LLM provider adapters, by name: those
	// providers/registry declares, whose Configure also reads each API
	// key's and base URL's environment variable where the file leaves it
	// empty, and refuses a name no provider has.
	Providers map[string]Provider `yaml:"providers"`
}

// OAuth is how agentd presents itself to the authorization servers of the
// MCP servers it is the OAuth client of. A server's own oauth block
// (client_id, redirect_url) overrides these for that server.
type OAuth struct {
	// RedirectURL is where an authorization server sends the user back
	// after an authorization-code grant: the client application catches
	// the redirect there (agentd generate listens on a loopback one) and
	// answers the authorization request with it. agentd itself serves
	// nothing there. Default "http://127.0.0.1:8976/oauth/callback". Env
	// AGENTD_OAUTH_REDIRECT_URL.
	RedirectURL string `yaml:"redirect_url"`
	// ClientMetadataURL is the https URL of agentd's client ID metadata
	// document, which agentd uses as its client_id at authorization
	// servers that accept one (client_id_metadata_document_supported);
	// the document, served by whoever runs agentd, must list RedirectURL.
	// Default: none, and agentd registers dynamically instead. Env
	// AGENTD_OAUTH_CLIENT_METADATA_URL.
	ClientMetadataURL string `yaml:"client_metadata_url"`
	// ClientName is the client_name agentd registers with dynamically.
	// Default "agentd". Env AGENTD_OAUTH_CLIENT_NAME.
	ClientName string `yaml:"client_name"`
}

// DefaultOAuthRedirectURL is oauth.redirect_url's default.
const DefaultOAuthRedirectURL = "http://127.0.0.1:8976/oauth/callback"

// validate checks o: an absolute redirect URL, and a client metadata URL
// that is https with a path (the CIMD specification's requirement).
func (o OAuth) validate(bad func(string, ...any)) {
	if u, err := url.Parse(o.RedirectURL); err != nil || !u.IsAbs() || u.Host == "" || u.Fragment != "" {
		bad("oauth.redirect_url: must be an absolute URL without a fragment, got %q", o.RedirectURL)
	}
	if o.ClientMetadataURL != "" {
		u, err := url.Parse(o.ClientMetadataURL)
		if err != nil || u.Scheme != "https" || u.Host == "" || u.Path == "" || u.Path == "/" || u.User != nil || u.Fragment != "" {
			bad("oauth.client_metadata_url: must be an https URL with a path (not the root) and without a fragment, got %q", o.ClientMetadataURL)
		}
	}
	if o.ClientName == "" {
		bad("oauth.client_name: must not be empty")
	}
}

// TLS configures TLS on a listener. The certificate, key and client CA
// files are re-read when they change, so they can be rotated without a
// restart. TLS alone authenticates no caller: without auth, the listener
// still stays on loopback (X-I1).
type TLS struct {
	// CertFile is the PEM certificate chain this side presents, leaf
	// first: a listener's server certificate, or the client certificate
	// of `agentd serve` dialling a remote bridge (bridge.tls). Default:
	// none, and the listener serves plaintext.
	CertFile string `yaml:"cert_file"`
	// KeyFile is the PEM private key of CertFile's leaf. Required with
	// CertFile, and only with it.
	KeyFile string `yaml:"key_file"`
	// ClientCAFile is a PEM bundle of CA certificates: with it, every
	// client must present a certificate that one of them verifies (mutual
	// TLS). Needs CertFile. Default: none, no client certificate asked for.
	ClientCAFile string `yaml:"client_ca_file"`
	// MinVersion is the lowest TLS version served (or, dialling, accepted):
	// "1.2" (the default) or "1.3".
	MinVersion string `yaml:"min_version"`
	// CAFile is a PEM bundle of CA certificates that verifies the peer's
	// certificate when this side dials: `agentd serve` dialling a remote
	// bridge (bridge.tls). Default: the system's roots.
	CAFile string `yaml:"ca_file"`
	// ServerName is the name the dialled peer's certificate must carry.
	// Default: the host of the address dialled.
	ServerName string `yaml:"server_name"`
}

// Enabled reports whether the listener serves TLS.
func (t TLS) Enabled() bool { return t.CertFile != "" }

// Dials reports whether the side that dials with these settings (`agentd
// serve` dialling bridge.address) uses TLS: when they name a client
// certificate, a CA or a server name.
func (t TLS) Dials() bool { return t.CertFile != "" || t.CAFile != "" || t.ServerName != "" }

// AddressList is the replicas that Address lists when it is a
// comma-separated list of host:port, each trimmed of spaces; nil when it
// is one target.
func (b Bridge) AddressList() []string {
	if !strings.Contains(b.Address, ",") {
		return nil
	}
	list := strings.Split(b.Address, ",")
	for i, a := range list {
		list[i] = strings.TrimSpace(a)
	}
	return list
}

// VerifiesPeers reports whether `agentd bridge` serves only peers it
// authenticates: trusted_peers, over TLS that requires client
// certificates.
func (b Bridge) VerifiesPeers() bool {
	return len(b.TrustedPeers) > 0 && b.TLS.Enabled() && b.TLS.ClientCAFile != ""
}

func (t TLS) validate(setting string, bad func(string, ...any)) {
	if (t.CertFile == "") != (t.KeyFile == "") {
		bad("%s: cert_file and key_file must be set together", setting)
	}
	if t.ClientCAFile != "" && t.CertFile == "" {
		bad("%s.client_ca_file: needs cert_file and key_file", setting)
	}
	if t.MinVersion != "1.2" && t.MinVersion != "1.3" {
		bad("%s.min_version: must be 1.2 or 1.3, got %q", setting, t.MinVersion)
	}
}

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

// OIDCIssuer is one OpenID Connect issuer whose ID or access tokens
// (JWTs) authenticate callers.
type OIDCIssuer struct {
	// Issuer is the issuer URL, exactly as the tokens' iss claim gives it;
	// discovery is read from Issuer + "/.well-known/openid-configuration".
	// Required.
	Issuer string `yaml:"issuer"`
	// Audience is the value the tokens' aud claim must contain. Required.
	Audience string `yaml:"audience"`
	// Algorithms are the signature algorithms accepted. Default RS256 and
	// ES256; "none" and the HMAC algorithms are refused.
	Algorithms []string `yaml:"algorithms"`
	// TenantClaim names the claim that gives the tenant. Default "tenant".
	TenantClaim string `yaml:"tenant_claim"`
	// RolesClaim names the claim that gives the roles: an array of
	// strings, or one string of space-separated roles. Default "roles".
	RolesClaim string `yaml:"roles_claim"`
	// PrincipalClaim names the claim that names the caller in logs and
	// audit lines. Default "sub".
	PrincipalClaim string `yaml:"principal_claim"`
	// ClockSkew is the leeway allowed on exp, nbf and iat. Default 1m.
	ClockSkew time.Duration `yaml:"clock_skew"`
	// RefreshInterval is the least time between two fetches of the
	// issuer's keys caused by tokens signed with an unknown key id, and
	// so also how long a failed fetch is not tried again. Default 1m.
	RefreshInterval time.Duration `yaml:"refresh_interval"`
	// CAFile is a PEM bundle that verifies the issuer's HTTPS certificate.
	// Default: the system's roots.
	CAFile string `yaml:"ca_file"`
}

// OIDCAlgorithms are the signature algorithms auth.oidc may accept: the
// asymmetric ones. "none" is not a signature, and an HMAC algorithm
// (HS256...) would let whoever knows the issuer's public key (everyone)
// sign tokens if a key were ever taken for a secret.
var OIDCAlgorithms = []string{"RS256", "RS384", "RS512", "PS256", "PS384", "PS512", "ES256", "ES384", "ES512", "EdDSA"}

// WithDefaults returns o with its unset fields at their defaults:
// algorithms RS256 and ES256, tenant_claim "tenant", roles_claim "roles",
// principal_claim "sub", clock_skew and refresh_interval 1m.
func (o OIDCIssuer) WithDefaults() OIDCIssuer {
	if len(o.Algorithms) == 0 {
		o.Algorithms = []string{"RS256", "ES256"}
	}
	if o.TenantClaim == "" {
		o.TenantClaim = "tenant"
	}
	if o.RolesClaim == "" {
		o.RolesClaim = "roles"
	}
	if o.PrincipalClaim == "" {
		o.PrincipalClaim = "sub"
	}
	if o.ClockSkew == 0 {
		o.ClockSkew = time.Minute
	}
	if o.RefreshInterval == 0 {
		o.RefreshInterval = time.Minute
	}
	return o
}

// MTLS authenticates callers by their verified client certificates.
type MTLS struct {
	// PrincipalFrom says which identity of a client certificate is its
	// principal: "uri" (the first URI SAN), "dns" (the first DNS SAN),
	// "cn" (the subject's common name), or "" (the default): the first
	// URI SAN, else the first DNS SAN, else the common name.
	PrincipalFrom string `yaml:"principal_from"`
	// Principals map certificate principals to tenants and roles; a
	// certificate whose principal is not listed is Unauthenticated.
	Principals []MTLSPrincipal `yaml:"principals"`
}

// MTLSPrincipal is what one client certificate principal gives its
// caller.
type MTLSPrincipal struct {
	// Principal is the certificate's identity, as PrincipalFrom selects it
	// (e.g. "spiffe://example.org/app" or "app.example.org").
	Principal string `yaml:"principal"`
	// Tenant is the tenant its caller acts for.
	Tenant string `yaml:"tenant"`
	// Roles are what its caller may do (see APIKey.Roles).
	Roles []string `yaml:"roles"`
}

// Admin places the bridge's admin service.
type Admin struct {
	// Listen, when set, serves the admin service (with health and
	// reflection) on its own address instead of beside the AgentService
	// (the default, ""): `agentd serve` with its embedded bridge serves it
	// there and no longer on listen; `agentd bridge` serves it there and no
	// longer on bridge.listen; `agentd serve` with a remote bridge
	// (bridge.address) has no admin service and leaves it to that bridge.
	// Under authentication its calls need the observer (reads) or admin
	// (writes) role, or tenant_admin for the caller's own tenant's cache
	// entries; without, it listens only on loopback unless Insecure.
	// Env AGENTD_ADMIN_LISTEN; flag --admin-listen.
	Listen string `yaml:"listen"`
	// TLS serves the admin listener over TLS; see TLS. Needs Listen:
	// beside the AgentService the admin service is served over tls.
	// Env AGENTD_ADMIN_TLS_CERT_FILE, AGENTD_ADMIN_TLS_KEY_FILE,
	// AGENTD_ADMIN_TLS_CLIENT_CA_FILE, AGENTD_ADMIN_TLS_MIN_VERSION.
	TLS TLS `yaml:"tls"`
}

// Limits bound what one tenant may run at once; zero is no limit. A call
// over a limit is ResourceExhausted, with RetryInfo and a QuotaFailure
// naming the limit.
type Limits struct {
	// MaxConcurrentGenerations caps the tenant's generations running at
	// once, resumed ones included (a paused one does not count).
	MaxConcurrentGenerations int `yaml:"max_concurrent_generations"`
	// MaxPausedGenerations caps the tenant's paused generations: a
	// generation that would pause beyond it fails instead (a resumed one
	// that pauses again keeps its place).
	MaxPausedGenerations int `yaml:"max_paused_generations"`
	// GenerationsPerMinute is the rate of new generations: a token bucket
	// holding a minute's worth, refilled continuously. A resume takes no
	// token.
	GenerationsPerMinute int `yaml:"generations_per_minute"`
}

// Tenant is one tenant's configuration. Every field left unset keeps the
// global value; a set one replaces it for this tenant.
type Tenant struct {
	// AllowedCommands replaces bridge.allowed_commands.
	AllowedCommands []string `yaml:"allowed_commands"`
	// Servers lists the registered bridge.servers the tenant may use with
	// ref: (an empty list: none). Default (unset): all of them.
	Servers []string `yaml:"servers"`
	// AllowedEnv replaces bridge.allowed_env.
	AllowedEnv []string `yaml:"allowed_env"`
	// AllowPrivateNetworks replaces bridge.allow_private_networks.
	AllowPrivateNetworks *bool `yaml:"allow_private_networks"`
	// Providers replaces, per provider, its api_key and base_url: a
	// tenant that sets its own key never uses the global one.
	Providers map[string]Provider `yaml:"providers"`
	// Limits replaces the global limits, field by field where set.
	Limits *Limits `yaml:"limits"`
}

// DefaultTenant names the tenant whose settings a caller gets whose own
// tenant is not configured.
const DefaultTenant = "default"

// TenantSettings are one tenant's effective settings: its own where it
// sets them, the global ones elsewhere.
type TenantSettings struct {
	// Name is the tenant's name (the caller's, even when it is served
	// with the default tenant's settings).
	Name string
	// Entry is the setting its own settings come from, for errors to
	// name: "tenants.<name>", or "tenants.default" for a tenant served
	// with the default's; empty when no tenants are configured.
	Entry string
	// Rules are what its requests may declare.
	Rules policy.Rules
	// Servers are the registered servers it may ref:; nil: all.
	Servers []string
	// Providers are the provider settings its generations use.
	Providers map[string]Provider
	// Limits are its limits.
	Limits Limits
}

// ForTenant returns the effective settings of tenant name, and false when
// tenants are configured but neither name nor "default" is among them. The
// tenant "" (no authentication) always gets the global settings.
func (c *Config) ForTenant(name string) (TenantSettings, bool) {
	ts := TenantSettings{Name: name, Rules: c.Bridge.Rules(), Providers: c.Providers, Limits: c.Limits}
	// The tenant "" is every caller of an agentd that authenticates none:
	// tenants mean nothing to it, and it keeps the global settings.
	if len(c.Tenants) == 0 || name == "" {
		return ts, true
	}
	entry := name
	t, ok := c.Tenants[name]
	if !ok {
		entry = DefaultTenant
		if t, ok = c.Tenants[DefaultTenant]; !ok {
			return TenantSettings{}, false
		}
	}
	ts.Entry = "tenants." + entry
	if t.AllowedCommands != nil {
		ts.Rules.AllowedCommands = t.AllowedCommands
		ts.Rules.Settings.AllowedCommands = ts.Entry + ".allowed_commands"
	}
	if t.AllowedEnv != nil {
		ts.Rules.AllowedEnv = t.AllowedEnv
		ts.Rules.Settings.AllowedEnv = ts.Entry + ".allowed_env"
	}
	if t.AllowPrivateNetworks != nil {
		ts.Rules.AllowPrivateNetworks = *t.AllowPrivateNetworks
		ts.Rules.Settings.AllowPrivateNetworks = ts.Entry + ".allow_private_networks"
	}
	ts.Servers = t.Servers
	if len(t.Providers) > 0 {
		ts.Providers = make(map[string]Provider, len(c.Providers)+len(t.Providers))
		maps.Copy(ts.Providers, c.Providers)
		for name, p := range t.Providers {
			merged := c.Providers[name]
			if p.APIKey != "" {
				merged.APIKey = p.APIKey
			}
			if p.BaseURL != "" {
				merged.BaseURL = p.BaseURL
			}
			ts.Providers[name] = merged
		}
	}
	if l := t.Limits; l != nil {
		if l.MaxConcurrentGenerations != 0 {
			ts.Limits.MaxConcurrentGenerations = l.MaxConcurrentGenerations
		}
		if l.MaxPausedGenerations != 0 {
			ts.Limits.MaxPausedGenerations = l.MaxPausedGenerations
		}
		if l.GenerationsPerMinute != 0 {
			ts.Limits.GenerationsPerMinute = l.GenerationsPerMinute
		}
	}
	return ts, true
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
	// Roles are what its caller may do: generate (AgentService), observer
	// (the admin service's reads), admin (its writes and reads),
	// tenant_admin (the schema cache's stats, clear and invalidate, for
	// its own tenant's entries only).
	Roles []string `yaml:"roles"`
}

// Rules are what the bridge's configuration allows a request to declare,
// as the server and the bridge both check it.
func (b Bridge) Rules() policy.Rules {
	return policy.Rules{AllowedCommands: b.AllowedCommands, AllowedEnv: b.AllowedEnv, AllowPrivateNetworks: b.AllowPrivateNetworks}
}

// Provider configures one provider adapter; zero values mean its
// defaults.
type Provider struct {
	// APIKey authenticates its requests. Secret.
	APIKey string `yaml:"api_key"`
	// BaseURL replaces its API's base URL (proxies, gateways).
	BaseURL string `yaml:"base_url"`
	// Timeout bounds the wait for a response to begin and each wait for
	// more of a streamed one. Default 5m.
	Timeout time.Duration `yaml:"timeout"`
	// MaxRetries is how often a retryable failure is retried. Default 2;
	// negative: never.
	MaxRetries int `yaml:"max_retries"`
	// Options are the adapter's own settings (README, "Providers").
	Options map[string]string `yaml:"options"`
}

// Log configures logging.
type Log struct {
	// Level is debug, info, warn or error. Default "info".
	// Env AGENTD_LOG_LEVEL.
	Level string `yaml:"level"`
	// Format is text or json. Default "text". Env AGENTD_LOG_FORMAT.
	Format string `yaml:"format"`
}

// The store drivers.
const (
	StoreSQLite   = "sqlite"
	StorePostgres = "postgres"
)

// Store says where agentd keeps its durable state (X-G1). Every replica
// that shares a store resumes the others' paused generations.
type Store struct {
	// Driver is "sqlite" (the default): the embedded database agentd.db
	// in state_dir, which needs no set-up and which replicas on one
	// machine may share; or "postgres": the PostgreSQL database that DSN
	// names, which replicas on several machines share. Either way agentd
	// migrates the schema at start (replicas starting together are safe).
	// Env AGENTD_STORE_DRIVER.
	Driver string `yaml:"driver"`
	// DSN is the PostgreSQL connection string: a URL
	// (postgres://user:password@host:5432/agentd?sslmode=verify-full) or
	// libpq's key=value pairs; pgxpool's pool_max_conns and the other
	// pool_* parameters size the pool. Required with driver postgres, and
	// only with it. Secret: never logged, nor said in an error. Default:
	// none. Env AGENTD_STORE_DSN (which keeps it out of the file).
	DSN string `yaml:"dsn"`
	// PingInterval is how often `agentd serve` checks that the store
	// answers (and that a remote bridge, bridge.address, answers its
	// health check). While the store does not, the AgentService's health
	// and "readiness" are NOT_SERVING (health's overall status, "", and
	// "liveness" stay SERVING: the process is alive) and every Generate
	// stream, new or resuming, fails UNAVAILABLE with a RetryInfo of this
	// interval; the first check that passes makes it SERVING again, unless
	// the other dependency is down. Default 5s.
	PingInterval time.Duration `yaml:"ping_interval"`
	// EncryptionKeyFile names a file holding the 32-byte key (raw, hex or
	// base64) with which a running generation's agent declaration is
	// sealed in its checkpoint (AES-256-GCM), secrets included, so that
	// another replica can adopt it. Every replica sharing the store needs
	// the same key. Without one, the declaration is stored without its
	// secrets (authorization, headers, env values), and a generation whose
	// agent had any fails when another replica would adopt it. Default:
	// none. Env AGENTD_STORE_ENCRYPTION_KEY_FILE.
	//
	// The same key seals the OAuth tokens that agentd keeps for MCP
	// servers (X-M3), bound to their tenant, end user and server; without
	// one, those tokens are kept in the process's memory only.
	EncryptionKeyFile string `yaml:"encryption_key_file"`
	// PreviousEncryptionKeyFiles name the files of keys that
	// encryption_key_file replaced (a rotation), in the same forms: what
	// they sealed is still opened, and sealed again under the current key
	// as agentd uses it (an OAuth token when it is read, a generation's
	// agent at its next checkpoint). Needs encryption_key_file; none may
	// be it or repeat another. Default: none. Env
	// AGENTD_STORE_PREVIOUS_ENCRYPTION_KEY_FILES (comma-separated).
	PreviousEncryptionKeyFiles []string `yaml:"previous_encryption_key_files"`
}

// Metrics configures the metrics' Prometheus endpoint. The same
// instruments are exported by OTLP when the standard OTEL_* variables ask
// for it (OTEL_METRICS_EXPORTER=otlp, OTEL_EXPORTER_OTLP_ENDPOINT, ...).
type Metrics struct {
	// Listen is the address of a Prometheus scrape endpoint (GET /metrics,
	// plain HTTP). Empty (the default) serves none. Env
	// AGENTD_METRICS_LISTEN.
	Listen string `yaml:"listen"`
}

// Debug configures the profiling endpoint: net/http/pprof and the Go
// runtime's metrics, on a listener of its own.
type Debug struct {
	// Listen is the address of an HTTP endpoint serving /debug/pprof/
	// (net/http/pprof: CPU, heap, allocation, goroutine profiles and
	// execution traces) and GET /debug/runtime (runtime/metrics as JSON:
	// bytes and objects allocated, GC cycles, goroutines). Empty (the
	// default) serves none. It must be a loopback address, whatever
	// Insecure says: the endpoint has no authentication, a profile costs
	// CPU while it runs, and heap profiles and goroutine dumps may reveal
	// memory contents (prompts, arguments, keys); reach it from elsewhere
	// by an SSH tunnel or `kubectl port-forward`. Never served on listen,
	// admin.listen or metrics.listen. Env AGENTD_DEBUG_LISTEN.
	Listen string `yaml:"listen"`
}

// Bridge configures the BridgeService.
type Bridge struct {
	// Address of the remote BridgeService (`agentd bridge`) for `agentd
	// serve` to use, which may run as several replicas (X-G6). Empty (the
	// default) runs the bridge embedded, over an in-memory gRPC listener.
	// Its forms:
	//
	//   - host:port, or a gRPC target such as dns:///bridge:7071: every
	//     address the name resolves to is a replica; the name is resolved
	//     again every 30 s, so replicas come and go with it.
	//   - a comma-separated list of host:port, each a replica:
	//     "bridge-a:7071,bridge-b:7071" (see AddressList).
	//
	// Sessions are spread round-robin over the connected replicas, and
	// each stays on the replica that opened it. When a replica is lost,
	// its sessions' calls in flight reach the model as of unknown outcome
	// (never run twice), and each generation goes on with a new session
	// on another replica, whose MCP servers start afresh. Env
	// AGENTD_BRIDGE_ADDRESS; flag --bridge-addr.
	Address string `yaml:"address"`

	// Listen is where `agentd bridge` serves BridgeService and
	// BridgeAdminService. Default "127.0.0.1:7071". Env
	// AGENTD_BRIDGE_LISTEN.
	Listen string `yaml:"listen"`

	// AllowedCommands lists the executables that a request's `command:` may
	// run, matched exactly against the declared command (so allowing "npx"
	// does not allow "/tmp/npx"). Default: none; requests use `ref:` to the
	// servers below. Env AGENTD_BRIDGE_ALLOWED_COMMANDS (comma-separated).
	AllowedCommands []string `yaml:"allowed_commands"`

	// Servers are the MCP servers, stdio or url, that requests may use by
	// name with `ref:`. Default: {"demo": {command: "@self", args: ["mcp-demo"]}}, the
	// small demo server built into agentd. Setting servers in a file
	// replaces the default map.
	Servers map[string]Server `yaml:"servers"`

	// TerminateGrace is how long a stdio server gets to exit after its stdin
	// closes, and again after SIGTERM, before its process group is killed.
	// Default 2s.
	TerminateGrace time.Duration `yaml:"terminate_grace"`

	// MaxResultBytes caps one tool result (its text plus attachments) that
	// the bridge passes on: a larger result reaches the model as an error
	// naming the size and this setting, and the generation goes on.
	// Default 1 MiB; at most MaxMessageBytes. Env
	// AGENTD_BRIDGE_MAX_RESULT_BYTES.
	MaxResultBytes int `yaml:"max_result_bytes"`

	// AllowPrivateNetworks lets url servers name localhost or resolve to
	// loopback, private, shared (100.64/10) and link-local addresses
	// (internal/netaddr). Default false: such URLs are PermissionDenied.
	// Env AGENTD_BRIDGE_ALLOW_PRIVATE_NETWORKS.
	AllowPrivateNetworks bool `yaml:"allow_private_networks"`

	// AllowedEnv lists variables that a request's env may set although
	// they steer the dynamic loader, an interpreter or a package manager
	// (PATH, HOME, LD_*, DYLD_*, NODE_OPTIONS, PYTHONPATH, NPM_CONFIG_*,
	// ...). Default: none.
	AllowedEnv []string `yaml:"allowed_env"`

	// TLS secures the hop between `agentd serve` and a remote `agentd
	// bridge` (X-I8); the embedded bridge, on an in-memory listener, needs
	// none. Each side reads its own fields:
	//
	//   - `agentd bridge` serves its listener over TLS when CertFile names
	//     a certificate: CertFile and KeyFile are the bridge's server
	//     identity; ClientCAFile, when set, requires every peer to present
	//     a client certificate that it verifies (mutual TLS); MinVersion is
	//     the lowest version served. Default: plaintext.
	//   - `agentd serve`, with Address set, dials the bridge over TLS when
	//     any of CertFile, CAFile or ServerName is set: CertFile and KeyFile
	//     are its client identity (mutual TLS; without them, TLS that
	//     verifies the bridge alone), CAFile verifies the bridge's
	//     certificate (default: the system's roots), ServerName is the name
	//     that certificate must carry (default: the host of Address), and
	//     MinVersion is the lowest version it accepts. The client
	//     certificate and key are re-read when they change; the CA file is
	//     read at start. Default: plaintext.
	//
	// Env AGENTD_BRIDGE_TLS_CERT_FILE, AGENTD_BRIDGE_TLS_KEY_FILE,
	// AGENTD_BRIDGE_TLS_CLIENT_CA_FILE, AGENTD_BRIDGE_TLS_MIN_VERSION,
	// AGENTD_BRIDGE_TLS_CA_FILE, AGENTD_BRIDGE_TLS_SERVER_NAME.
	TLS TLS `yaml:"tls"`

	// TrustedPeers lists the certificate principals (see MTLS.PrincipalFrom
	// for how a certificate names one) of the agentd instances whose calls
	// `agentd bridge` serves: only their requests may name a tenant. With
	// it, every call on bridge.listen but health and reflection needs a
	// verified client certificate whose principal is listed: none is
	// Unauthenticated, an unlisted one PermissionDenied. It needs
	// bridge.tls.client_ca_file, and lets the bridge listen beyond
	// loopback without Insecure (X-I1). Default: none, and every peer that
	// reaches the listener is served. Env AGENTD_BRIDGE_TRUSTED_PEERS
	// (comma-separated).
	TrustedPeers []string `yaml:"trusted_peers"`

	// Pool configures the stdio process pools.
	Pool Pool `yaml:"pool"`

	// Cache configures the tool-schema cache.
	Cache Cache `yaml:"cache"`
}

// Server is an MCP server registered in the configuration: a stdio
// server (Command) that the bridge starts, or a remote one (URL) over
// Streamable HTTP. Exactly one of Command and URL is set.
type Server struct {
	// Command is the executable ("@self" for agentd itself).
	Command string `yaml:"command"`
	// Args are its arguments, in order.
	Args []string `yaml:"args"`
	// Env is added to its environment.
	Env map[string]string `yaml:"env"`
	// Shared lets one process serve many sessions at once, for servers
	// whose tools keep no per-session state: true, one process per tenant
	// serves all of that tenant's sessions; "global", one process serves
	// every tenant's. Default false: a process serves one session, then
	// retires.
	Shared Shared `yaml:"shared"`
	// Warm overrides pool.warm for this server.
	Warm *int `yaml:"warm"`
	// MaxProcesses overrides pool.max_processes for this server (0: keep).
	MaxProcesses int `yaml:"max_processes"`

	// The settings below are a url server's; Args, Env, Shared, Warm and
	// MaxProcesses are a command server's only. `agentd serve` resolves
	// a ref: to a url server from its own configuration (it is the
	// server's OAuth client), and its bridge connects as to a url the
	// request declared: the tenant's allow_private_networks applies.

	// URL is the server's http or https Streamable HTTP endpoint. Its
	// path and query are secret, like a request's url.
	URL string `yaml:"url"`
	// Headers are added to every request to it. Values are secret.
	Headers map[string]string `yaml:"headers"`
	// Authorization is a static credential sent as the Authorization
	// header (a bare token gets "Bearer "). Secret. Excludes OAuth.
	Authorization string `yaml:"authorization"`
	// AuthorizationFile names a file holding Authorization instead (read
	// at start; surrounding white space is dropped), which keeps it out
	// of the configuration (a mounted secret, for instance).
	AuthorizationFile string `yaml:"authorization_file"`
	// ReadTimeout bounds each wait for its answers, at most 1h; a
	// request's read_timeout beside the ref: replaces it. Default: a
	// request's default (30s).
	ReadTimeout time.Duration `yaml:"read_timeout"`
	// OAuth makes agentd the server's OAuth client (X-M1), as a
	// request's oauth declaration does; its tokens are kept per tenant,
	// end user and server URL.
	OAuth *ServerOAuth `yaml:"oauth"`
}

// ServerOAuth is a registered url server's OAuth client (the request's
// oauth declaration, agentd.v1.OAuthClient, in configuration form).
type ServerOAuth struct {
	// Grant is authorization_code (the default: a person authorizes on
	// the Generate stream) or client_credentials (agentd itself).
	Grant string `yaml:"grant"`
	// ClientID is the pre-registered client's id. Required with
	// client_credentials and with a secret or key; without one agentd
	// uses its client ID metadata document or registers dynamically.
	ClientID string `yaml:"client_id"`
	// ClientSecret authenticates ClientID (client_secret_basic or
	// client_secret_post). Secret.
	ClientSecret string `yaml:"client_secret"`
	// ClientSecretFile names a file holding ClientSecret instead.
	ClientSecretFile string `yaml:"client_secret_file"`
	// PrivateKeyFile names a PEM file holding the RSA or ECDSA P-256
	// private key (PKCS#8, PKCS#1 or SEC 1) that signs private_key_jwt
	// assertions. Excludes a client secret.
	PrivateKeyFile string `yaml:"private_key_file"`
	// PrivateKeyID is the key's kid in the assertions' header.
	PrivateKeyID string `yaml:"private_key_id"`
	// Scopes are asked for; default: those of the server's challenge or
	// metadata.
	Scopes []string `yaml:"scopes"`
	// TokenEndpointAuthMethod is client_secret_basic,
	// client_secret_post, private_key_jwt or none; default: what the
	// secret or key and the authorization server's metadata allow.
	TokenEndpointAuthMethod string `yaml:"token_endpoint_auth_method"`
	// RedirectURL replaces oauth.redirect_url for this server.
	RedirectURL string `yaml:"redirect_url"`
}

// The grants of ServerOAuth.Grant.
const (
	GrantAuthorizationCode = "authorization_code"
	GrantClientCredentials = "client_credentials"
)

// ServerSecrets are a registered url server's secrets, as Secrets reads
// them.
type ServerSecrets struct {
	Authorization string
	ClientSecret  string
	PrivateKeyPEM string
}

// Secrets reads the secrets of the registered server name: the inline
// values, or the files that hold them. An error names the setting and
// the file, never what it holds.
func (s Server) Secrets(name string) (ServerSecrets, error) {
	read := func(setting, file string) (string, error) {
		data, err := os.ReadFile(file)
		if err != nil {
			return "", fmt.Errorf("bridge.servers.%s.%s: %w", name, setting, err)
		}
		return strings.TrimSpace(string(data)), nil
	}
	out := ServerSecrets{Authorization: s.Authorization}
	var err error
	if s.AuthorizationFile != "" {
		if out.Authorization, err = read("authorization_file", s.AuthorizationFile); err != nil {
			return ServerSecrets{}, err
		}
	}
	if o := s.OAuth; o != nil {
		out.ClientSecret = o.ClientSecret
		if o.ClientSecretFile != "" {
			if out.ClientSecret, err = read("oauth.client_secret_file", o.ClientSecretFile); err != nil {
				return ServerSecrets{}, err
			}
		}
		if o.PrivateKeyFile != "" {
			if out.PrivateKeyPEM, err = read("oauth.private_key_file", o.PrivateKeyFile); err != nil {
				return ServerSecrets{}, err
			}
		}
	}
	return out, nil
}

// validate reports the problems of the registered server name through
// bad. Values are never echoed but the command's: headers, tokens,
// secrets and URLs may carry keys.
func (s Server) validate(name string, bad func(string, ...any)) {
	f := "bridge.servers." + name
	if s.Warm != nil && *s.Warm < 0 || s.MaxProcesses < 0 {
		bad("%s: warm and max_processes must not be negative", f)
	}
	switch {
	case s.Command == "" && s.URL == "":
		bad("%s: needs a command (a stdio server) or a url (a remote one)", f)
		return
	case s.Command != "" && s.URL != "":
		bad("%s: command and url exclude each other; register a stdio server or a url server", f)
		return
	case s.Command != "":
		if s.Command != filepath.Base(s.Command) && !filepath.IsAbs(s.Command) {
			bad("%s.command: must be a bare executable name or an absolute path, got %q", f, s.Command)
		}
		if s.Authorization != "" || s.AuthorizationFile != "" || len(s.Headers) > 0 || s.ReadTimeout != 0 || s.OAuth != nil {
			bad("%s: authorization, authorization_file, headers, read_timeout and oauth apply to url servers only", f)
		}
		return
	}
	if u, err := url.Parse(s.URL); err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		bad("%s.url: must be an absolute http or https URL", f)
	}
	var commandOnly []string
	for _, o := range []struct {
		set  bool
		name string
	}{{len(s.Args) > 0, "args"}, {len(s.Env) > 0, "env"}, {s.Shared != NotShared, "shared"}, {s.Warm != nil, "warm"}, {s.MaxProcesses != 0, "max_processes"}} {
		if o.set {
			commandOnly = append(commandOnly, o.name)
		}
	}
	if len(commandOnly) > 0 {
		bad("%s: %s apply to command servers only; a url server has no process", f, strings.Join(commandOnly, ", "))
	}
	if s.Authorization != "" && s.AuthorizationFile != "" {
		bad("%s: authorization and authorization_file exclude each other", f)
	}
	for k := range s.Headers {
		if k == "" || strings.ContainsAny(k, " :\r\n") {
			bad("%s.headers: header names must be non-empty tokens", f)
		}
	}
	if s.ReadTimeout < 0 || s.ReadTimeout > maxServerReadTimeout {
		bad("%s.read_timeout: must be positive and at most %s", f, maxServerReadTimeout)
	}
	if s.OAuth != nil {
		s.OAuth.validate(f, s, bad)
	}
}

// maxServerReadTimeout is the longest read_timeout, as a request's.
const maxServerReadTimeout = time.Hour

func (o *ServerOAuth) validate(f string, s Server, bad func(string, ...any)) {
	if s.Authorization != "" || s.AuthorizationFile != "" {
		bad("%s: authorization and oauth exclude each other: agentd presents the tokens it obtains", f)
	}
	for k := range s.Headers {
		if strings.EqualFold(k, "Authorization") {
			bad("%s.headers: may not set Authorization with oauth: agentd presents the tokens it obtains", f)
		}
	}
	f += ".oauth"
	secret := o.ClientSecret != "" || o.ClientSecretFile != ""
	key := o.PrivateKeyFile != ""
	switch o.Grant {
	case "", GrantAuthorizationCode:
	case GrantClientCredentials:
		if o.ClientID == "" {
			bad("%s.client_id: is required with the client_credentials grant", f)
		}
		if !secret && !key {
			bad("%s: the client_credentials grant needs client_secret, client_secret_file or private_key_file", f)
		}
	default:
		bad("%s.grant: must be authorization_code or client_credentials, got %q", f, o.Grant)
	}
	if o.ClientSecret != "" && o.ClientSecretFile != "" {
		bad("%s: client_secret and client_secret_file exclude each other", f)
	}
	if secret && key {
		bad("%s: a client secret and private_key_file exclude each other", f)
	}
	if (secret || key) && o.ClientID == "" && o.Grant != GrantClientCredentials {
		bad("%s.client_id: must be set with a client secret or private_key_file", f)
	}
	if o.PrivateKeyID != "" && !key {
		bad("%s.private_key_id: needs private_key_file", f)
	}
	switch m := o.TokenEndpointAuthMethod; m {
	case "", "none":
	case "client_secret_basic", "client_secret_post":
		if !secret {
			bad("%s.token_endpoint_auth_method: %s needs client_secret or client_secret_file", f, m)
		}
	case "private_key_jwt":
		if !key {
			bad("%s.token_endpoint_auth_method: private_key_jwt needs private_key_file", f)
		}
	default:
		bad("%s.token_endpoint_auth_method: must be client_secret_basic, client_secret_post, private_key_jwt or none", f)
	}
	if r := o.RedirectURL; r != "" {
		if u, err := url.Parse(r); err != nil || !u.IsAbs() || (u.Scheme == "http" || u.Scheme == "https") && u.Host == "" {
			bad("%s.redirect_url: must be an absolute URL", f)
		}
	}
	if slices.Contains(o.Scopes, "") {
		bad("%s.scopes: must not hold an empty scope", f)
	}
}

// Shared says which sessions one process of a registered server may serve
// at once. In YAML it is false, true or "global".
type Shared int

const (
	// NotShared (false): a process serves one session, then retires. A
	// warm spare that has served no session yet may go to any tenant.
	NotShared Shared = iota
	// SharedPerTenant (true): one process serves every session of one
	// tenant at once; each tenant has its own, so no state crosses from
	// one tenant to another.
	SharedPerTenant
	// SharedGlobal ("global"): one process serves every session of every
	// tenant at once.
	SharedGlobal
)

// String is the value as YAML spells it.
func (s Shared) String() string {
	switch s {
	case SharedPerTenant:
		return "true"
	case SharedGlobal:
		return "global"
	default:
		return "false"
	}
}

// UnmarshalYAML reads false, true or "global".
func (s *Shared) UnmarshalYAML(n *yaml.Node) error {
	var b bool
	if n.Kind == yaml.ScalarNode && n.Decode(&b) == nil {
		*s = NotShared
		if b {
			*s = SharedPerTenant
		}
		return nil
	}
	if n.Kind == yaml.ScalarNode && n.Value == "global" {
		*s = SharedGlobal
		return nil
	}
	return fmt.Errorf("line %d: shared must be true, false or \"global\"", n.Line)
}

// Pool configures the stdio process pools: one per registered server (per
// tenant for one registered shared: true), and one per tenant and distinct
// allowed command configuration.
type Pool struct {
	// Warm is how many spawned, initialized spare processes each registered
	// server keeps ready. Default 1.
	Warm int `yaml:"warm"`
	// CommandWarm is the same for servers started by a request's command
	// (per tenant and command configuration). Default 0: they start on
	// first use.
	CommandWarm int `yaml:"command_warm"`
	// MaxProcesses caps a pool's live processes; a session waits (up to
	// its read_timeout) for one beyond that. Default 8.
	MaxProcesses int `yaml:"max_processes"`
	// IdleTimeout retires spares beyond the warm count that have waited
	// this long, and drops, with its processes, a tenant's pool (of a
	// command, or of a server registered shared: true) that none of the
	// tenant's sessions has used this long. Default 5m.
	IdleTimeout time.Duration `yaml:"idle_timeout"`
	// MaxLifetime retires a process this old (a busy one when its session
	// ends). Default 1h.
	MaxLifetime time.Duration `yaml:"max_lifetime"`
	// StartTimeout bounds spawning and initializing a spare. Default 30s.
	StartTimeout time.Duration `yaml:"start_timeout"`
}

// Cache configures the tool-schema cache.
type Cache struct {
	// Enabled: tool lists are cached (a request may opt out with
	// mcp_cache: false). Default true.
	Enabled bool `yaml:"enabled"`
	// TTL is an entry's lifetime. Default 300s.
	TTL time.Duration `yaml:"ttl"`
	// MaxEntries bounds the entries; the oldest write is evicted first.
	// Default 100.
	MaxEntries int `yaml:"max_entries"`
}

// DefaultPool returns the pool settings agentd runs with.
func DefaultPool() Pool {
	return Pool{Warm: 1, MaxProcesses: 8, IdleTimeout: 5 * time.Minute, MaxLifetime: time.Hour, StartTimeout: 30 * time.Second}
}

// DefaultCache returns the cache settings agentd runs with; the bridge's
// schema cache has no defaults of its own.
func DefaultCache() Cache {
	return Cache{Enabled: true, TTL: 300 * time.Second, MaxEntries: 100}
}

// MaxToolTurnsLimit caps a tool-turn budget: generation.max_tool_turns
// here, and a request's agent.max_tool_turns.
const MaxToolTurnsLimit = 1000

// Generation configures the tool loop.
type Generation struct {
	// MaxToolTurns is the tool-turn budget of a generation whose agent sets
	// none. Default 25; at most MaxToolTurnsLimit.
	MaxToolTurns int `yaml:"max_tool_turns"`
	// AnswerTimeout is how long a generation waits on its stream for
	// approval decisions and function results before pausing, when the
	// request sets no answer_timeout. Default 2m.
	AnswerTimeout time.Duration `yaml:"answer_timeout"`
	// MaxAnswerTimeout caps a request's answer_timeout. Default 1h.
	MaxAnswerTimeout time.Duration `yaml:"max_answer_timeout"`
	// PauseTTL is how long a paused generation can be resumed. Default
	// 24h. One not resumed by then ends as cancelled (X-G4).
	PauseTTL time.Duration `yaml:"pause_ttl"`
	// ResumeStaleAfter is how long a resume may hold a paused generation
	// before another resume may take it over (the first is presumed dead;
	// the calls it approved are reported as of unknown outcome, never run
	// twice). Default 10m.
	ResumeStaleAfter time.Duration `yaml:"resume_stale_after"`
	// LeaseTTL is how long the lease of a running generation's owner
	// lasts unless renewed (X-G3): the owner renews it every third of it,
	// and another replica may take the generation over once it lapses.
	// Default 15s; at least 1s.
	LeaseTTL time.Duration `yaml:"lease_ttl"`
	// AdoptInterval is how often each replica looks for running
	// generations whose owner's lease lapsed (it died) and adopts them
	// (X-G3). Default 2s.
	AdoptInterval time.Duration `yaml:"adopt_interval"`
	// Retention is how long a finished generation's record (its state,
	// result and event log) is kept for GetGeneration, ListGenerations and
	// attach (X-G4). Default 24h.
	Retention time.Duration `yaml:"retention"`
}

// DefaultMaxResultBytes is the default of Bridge.MaxResultBytes: 1 MiB,
// about 250,000 tokens of text, more than a model can use from one call.
const DefaultMaxResultBytes = 1 << 20

// MaxMessageBytes bounds any one message between agentd and an MCP server
// and on the bridge's gRPC hop: 64 MiB. A stdio server that writes a
// longer message is stopped.
const MaxMessageBytes = 64 << 20

// Default returns the configuration agentd runs with when nothing is set.
func Default() Config {
	return Config{
		Listen:         "127.0.0.1:7070",
		ShutdownGrace:  10 * time.Second,
		ShutdownDrain:  5 * time.Second,
		GCHeapFloorMiB: 64,
		TLS:            TLS{MinVersion: "1.2"},
		Admin:          Admin{TLS: TLS{MinVersion: "1.2"}},
		Reflection:     true,
		Log:            Log{Level: "info", Format: "text"},
		Store:          Store{Driver: StoreSQLite, PingInterval: 5 * time.Second},
		OAuth:          OAuth{RedirectURL: DefaultOAuthRedirectURL, ClientName: "agentd"},
		Bridge: Bridge{
			Listen:         "127.0.0.1:7071",
			TLS:            TLS{MinVersion: "1.2"},
			Servers:        map[string]Server{"demo": {Command: Self, Args: []string{"mcp-demo"}}},
			TerminateGrace: 2 * time.Second,
			MaxResultBytes: DefaultMaxResultBytes,
			Pool:           DefaultPool(),
			Cache:          DefaultCache(),
		},
		Generation: Generation{
			MaxToolTurns:     25,
			AnswerTimeout:    2 * time.Minute,
			MaxAnswerTimeout: time.Hour,
			PauseTTL:         24 * time.Hour,
			ResumeStaleAfter: 10 * time.Minute,
			LeaseTTL:         15 * time.Second,
			AdoptInterval:    2 * time.Second,
			Retention:        24 * time.Hour,
		},
	}
}

// Load builds the configuration: defaults, then the YAML file at path (if
// path is not empty), then AGENTD_* environment variables read through
// getenv. "@self" commands become executable. The result is validated.
// Provider keys and base URLs from the environment are
// providers/registry's (Configure), applied by agentd serve.
func Load(path string, getenv func(string) string, executable string) (Config, error) {
	cfg := Default()
	if path != "" {
		data, err := os.ReadFile(path)
		if err != nil {
			return Config{}, fmt.Errorf("config: %w", err)
		}
		if err := decodeYAML(data, &cfg); err != nil {
			return Config{}, fmt.Errorf("config %s: %w", path, err)
		}
	}
	if err := cfg.applyEnv(getenv); err != nil {
		return Config{}, err
	}
	if cfg.StateDir == "" {
		cfg.StateDir = defaultStateDir(getenv)
	} else if rest, ok := strings.CutPrefix(cfg.StateDir, "~/"); ok && getenv("HOME") != "" {
		cfg.StateDir = filepath.Join(getenv("HOME"), rest) // as a shell would
	}
	for i, o := range cfg.Auth.OIDC {
		cfg.Auth.OIDC[i] = o.WithDefaults()
	}
	for name, s := range cfg.Bridge.Servers {
		if s.Command == Self {
			s.Command = executable
			cfg.Bridge.Servers[name] = s
		}
	}
	if err := cfg.Validate(); err != nil {
		return Config{}, err
	}
	return cfg, nil
}

func decodeYAML(data []byte, cfg *Config) error {
	// A file that sets bridge.servers replaces the default registrations
	// rather than merging into them.
	var probe struct {
		Bridge struct {
			Servers *yaml.Node `yaml:"servers"`
		} `yaml:"bridge"`
	}
	if err := yaml.Unmarshal(data, &probe); err != nil {
		return err
	}
	if probe.Bridge.Servers != nil {
		cfg.Bridge.Servers = nil
	}
	dec := yaml.NewDecoder(bytes.NewReader(data))
	dec.KnownFields(true)
	// An empty file decodes to the defaults.
	if err := dec.Decode(cfg); err != nil && !errors.Is(err, io.EOF) {
		return err
	}
	return nil
}

func (c *Config) applyEnv(getenv func(string) string) error {
	str := func(name string, dst *string) {
		if v := getenv(name); v != "" {
			*dst = v
		}
	}
	dur := func(name string, dst *time.Duration) error {
		v := getenv(name)
		if v == "" {
			return nil
		}
		d, err := time.ParseDuration(v)
		if err != nil {
			return fmt.Errorf("config: %s: %w", name, err)
		}
		*dst = d
		return nil
	}
	str("AGENTD_LISTEN", &c.Listen)
	str("AGENTD_METRICS_LISTEN", &c.Metrics.Listen)
	str("AGENTD_DEBUG_LISTEN", &c.Debug.Listen)
	str("AGENTD_LOG_LEVEL", &c.Log.Level)
	str("AGENTD_LOG_FORMAT", &c.Log.Format)
	str("AGENTD_STATE_DIR", &c.StateDir)
	str("AGENTD_STORE_DRIVER", &c.Store.Driver)
	str("AGENTD_STORE_DSN", &c.Store.DSN)
	str("AGENTD_STORE_ENCRYPTION_KEY_FILE", &c.Store.EncryptionKeyFile)
	if v := getenv("AGENTD_STORE_PREVIOUS_ENCRYPTION_KEY_FILES"); v != "" {
		c.Store.PreviousEncryptionKeyFiles = splitList(v)
	}
	str("AGENTD_OAUTH_REDIRECT_URL", &c.OAuth.RedirectURL)
	str("AGENTD_OAUTH_CLIENT_METADATA_URL", &c.OAuth.ClientMetadataURL)
	str("AGENTD_OAUTH_CLIENT_NAME", &c.OAuth.ClientName)
	str("AGENTD_BRIDGE_ADDRESS", &c.Bridge.Address)
	str("AGENTD_BRIDGE_LISTEN", &c.Bridge.Listen)
	str("AGENTD_ADMIN_LISTEN", &c.Admin.Listen)
	str("AGENTD_BRIDGE_TLS_CA_FILE", &c.Bridge.TLS.CAFile)
	str("AGENTD_BRIDGE_TLS_SERVER_NAME", &c.Bridge.TLS.ServerName)
	if v := getenv("AGENTD_BRIDGE_TRUSTED_PEERS"); v != "" {
		c.Bridge.TrustedPeers = splitList(v)
	}
	for prefix, t := range map[string]*TLS{"AGENTD_TLS_": &c.TLS, "AGENTD_BRIDGE_TLS_": &c.Bridge.TLS, "AGENTD_ADMIN_TLS_": &c.Admin.TLS} {
		str(prefix+"CERT_FILE", &t.CertFile)
		str(prefix+"KEY_FILE", &t.KeyFile)
		str(prefix+"CLIENT_CA_FILE", &t.ClientCAFile)
		str(prefix+"MIN_VERSION", &t.MinVersion)
	}
	boolean := func(name string, dst *bool) error {
		v := getenv(name)
		if v == "" {
			return nil
		}
		b, err := strconv.ParseBool(v)
		if err != nil {
			return fmt.Errorf("config: %s: %w", name, err)
		}
		*dst = b
		return nil
	}
	if err := boolean("AGENTD_BRIDGE_ALLOW_PRIVATE_NETWORKS", &c.Bridge.AllowPrivateNetworks); err != nil {
		return err
	}
	if err := boolean("AGENTD_INSECURE", &c.Insecure); err != nil {
		return err
	}
	if err := boolean("AGENTD_REFLECTION", &c.Reflection); err != nil {
		return err
	}
	if v := getenv("AGENTD_BRIDGE_MAX_RESULT_BYTES"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil {
			return fmt.Errorf("config: AGENTD_BRIDGE_MAX_RESULT_BYTES: %w", err)
		}
		c.Bridge.MaxResultBytes = n
	}
	if v := getenv("AGENTD_GC_HEAP_FLOOR_MIB"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil {
			return fmt.Errorf("config: AGENTD_GC_HEAP_FLOOR_MIB: %w", err)
		}
		c.GCHeapFloorMiB = n
	}
	if v := getenv("AGENTD_BRIDGE_ALLOWED_COMMANDS"); v != "" {
		c.Bridge.AllowedCommands = splitList(v)
	}
	if err := dur("AGENTD_SHUTDOWN_DRAIN", &c.ShutdownDrain); err != nil {
		return err
	}
	return dur("AGENTD_SHUTDOWN_GRACE", &c.ShutdownGrace)
}

// splitList splits a comma-separated environment value, dropping blanks.
func splitList(v string) []string {
	var out []string
	for _, item := range strings.Split(v, ",") {
		if item = strings.TrimSpace(item); item != "" {
			out = append(out, item)
		}
	}
	return out
}

// Validate reports every problem of the configuration at once.
func (c *Config) Validate() error {
	var errs []error
	bad := func(format string, args ...any) { errs = append(errs, fmt.Errorf(format, args...)) }
	if c.Listen == "" {
		bad("listen: must not be empty")
	}
	if c.Bridge.Listen == "" {
		bad("bridge.listen: must not be empty")
	}
	c.TLS.validate("tls", bad)
	c.Bridge.TLS.validate("bridge.tls", bad)
	c.Admin.TLS.validate("admin.tls", bad)
	c.Bridge.validatePeers(bad)
	c.Bridge.validateAddress(bad)
	if c.Admin.Listen == "" && (c.Admin.TLS.CertFile != "" || c.Admin.TLS.ClientCAFile != "") {
		bad("admin.tls: needs admin.listen (without it, the admin service is served beside the main service, over its tls)")
	}
	if c.Debug.Listen != "" && !netaddr.LoopbackListen(c.Debug.Listen) {
		bad("debug.listen: must be a loopback address (127.0.0.1:port, [::1]:port or localhost:port): the profiling endpoint has no authentication and may reveal memory contents")
	}
	c.validateTenants(bad)
	c.validateAuth(bad)
	c.OAuth.validate(bad)
	c.Store.validate(bad)
	if c.GCHeapFloorMiB < 0 || c.GCHeapFloorMiB > 1<<20 {
		bad("gc_heap_floor_mib: must be from 0 to 1048576 (1 TiB), got %d", c.GCHeapFloorMiB)
	}
	if c.ShutdownDrain < 0 {
		bad("shutdown_drain: must not be negative, got %s", c.ShutdownDrain)
	}
	if c.ShutdownGrace <= 0 {
		bad("shutdown_grace: must be positive, got %s", c.ShutdownGrace)
	}
	if c.Bridge.TerminateGrace <= 0 {
		bad("bridge.terminate_grace: must be positive, got %s", c.Bridge.TerminateGrace)
	}
	if c.Bridge.MaxResultBytes <= 0 || c.Bridge.MaxResultBytes > MaxMessageBytes {
		bad("bridge.max_result_bytes: must be between 1 and %d, got %d", MaxMessageBytes, c.Bridge.MaxResultBytes)
	}
	if _, err := c.Log.SlogLevel(); err != nil {
		bad("log.level: %v", err)
	}
	if !slices.Contains([]string{"text", "json"}, c.Log.Format) {
		bad("log.format: must be text or json, got %q", c.Log.Format)
	}
	for _, cmd := range c.Bridge.AllowedCommands {
		if cmd == "" {
			bad("bridge.allowed_commands: empty entry")
		}
	}
	for _, name := range slices.Sorted(maps.Keys(c.Bridge.Servers)) {
		s := c.Bridge.Servers[name]
		if name == "" {
			bad("bridge.servers: empty name")
		}
		s.validate(name, bad)
	}
	pool := c.Bridge.Pool
	if pool.Warm < 0 || pool.CommandWarm < 0 {
		bad("bridge.pool.warm and bridge.pool.command_warm: must not be negative")
	}
	if pool.MaxProcesses < 1 {
		bad("bridge.pool.max_processes: must be at least 1, got %d", pool.MaxProcesses)
	}
	for name, d := range map[string]time.Duration{"idle_timeout": pool.IdleTimeout, "max_lifetime": pool.MaxLifetime, "start_timeout": pool.StartTimeout} {
		if d <= 0 {
			bad("bridge.pool.%s: must be positive, got %s", name, d)
		}
	}
	if c.Bridge.Cache.TTL <= 0 {
		bad("bridge.cache.ttl: must be a positive duration, got %s", c.Bridge.Cache.TTL)
	}
	if c.Bridge.Cache.MaxEntries < 1 {
		bad("bridge.cache.max_entries: must be a positive integer, got %d", c.Bridge.Cache.MaxEntries)
	}
	for _, name := range slices.Sorted(maps.Keys(c.Providers)) {
		if c.Providers[name].Timeout < 0 {
			bad("providers.%s.timeout: must not be negative", name)
		}
	}
	g := c.Generation
	if g.MaxToolTurns < 1 || g.MaxToolTurns > MaxToolTurnsLimit {
		bad("generation.max_tool_turns: must be 1..%d, got %d", MaxToolTurnsLimit, g.MaxToolTurns)
	}
	if g.AnswerTimeout < 0 {
		bad("generation.answer_timeout: must not be negative, got %s", g.AnswerTimeout)
	}
	if g.PauseTTL <= 0 {
		bad("generation.pause_ttl: must be positive, got %s", g.PauseTTL)
	}
	if g.ResumeStaleAfter <= 0 {
		bad("generation.resume_stale_after: must be positive, got %s", g.ResumeStaleAfter)
	}
	if g.LeaseTTL < time.Second {
		bad("generation.lease_ttl: must be at least 1s, got %s", g.LeaseTTL)
	}
	if g.AdoptInterval <= 0 {
		bad("generation.adopt_interval: must be positive, got %s", g.AdoptInterval)
	}
	if g.Retention <= 0 {
		bad("generation.retention: must be positive, got %s", g.Retention)
	}
	if g.MaxAnswerTimeout <= 0 {
		bad("generation.max_answer_timeout: must be positive, got %s", g.MaxAnswerTimeout)
	} else if g.AnswerTimeout > g.MaxAnswerTimeout {
		bad("generation.answer_timeout: %s exceeds generation.max_answer_timeout %s", g.AnswerTimeout, g.MaxAnswerTimeout)
	}
	return errors.Join(errs...)
}

// validate checks store. The DSN's syntax is the store's to check when it
// opens; no message here quotes it.
func (s Store) validate(bad func(string, ...any)) {
	switch s.Driver {
	case StoreSQLite:
		if s.DSN != "" {
			bad("store.dsn: set, but store.driver is sqlite, which does not use it; set store.driver: postgres (AGENTD_STORE_DRIVER=postgres) to use PostgreSQL")
		}
	case StorePostgres:
		if s.DSN == "" {
			bad("store.dsn: required with store.driver postgres (or AGENTD_STORE_DSN)")
		}
	default:
		bad("store.driver: must be sqlite or postgres, got %q", s.Driver)
	}
	if s.PingInterval <= 0 {
		bad("store.ping_interval: must be positive, got %s", s.PingInterval)
	}
	if len(s.PreviousEncryptionKeyFiles) > 0 && s.EncryptionKeyFile == "" {
		bad("store.previous_encryption_key_files: needs store.encryption_key_file, the key that replaced them")
	}
	for i, f := range s.PreviousEncryptionKeyFiles {
		switch {
		case f == "":
			bad("store.previous_encryption_key_files[%d]: empty", i)
		case f == s.EncryptionKeyFile:
			bad("store.previous_encryption_key_files[%d]: is store.encryption_key_file; a rotation puts a new key there", i)
		case slices.Contains(s.PreviousEncryptionKeyFiles[:i], f):
			bad("store.previous_encryption_key_files[%d]: listed twice", i)
		}
	}
}

// validateAddress checks the list form of bridge.address: every entry is
// a host:port.
func (b Bridge) validateAddress(bad func(string, ...any)) {
	for i, a := range b.AddressList() {
		if host, port, err := net.SplitHostPort(a); err != nil || host == "" || port == "" {
			bad("bridge.address: entry %d of the list, %q, is not a host:port", i+1, a)
		}
	}
}

// validatePeers checks bridge.trusted_peers: only a certificate that the
// bridge verified names a peer.
func (b Bridge) validatePeers(bad func(string, ...any)) {
	if len(b.TrustedPeers) > 0 && b.TLS.ClientCAFile == "" {
		bad("bridge.trusted_peers: needs bridge.tls.client_ca_file (with cert_file and key_file), so that every peer presents a certificate the bridge verifies")
	}
	for _, p := range b.TrustedPeers {
		if p == "" {
			bad("bridge.trusted_peers: empty entry")
		}
	}
}

// validateTenants checks the limits and tenants.
func (c *Config) validateTenants(bad func(string, ...any)) {
	checkLimits := func(setting string, l Limits) {
		if l.MaxConcurrentGenerations < 0 || l.MaxPausedGenerations < 0 || l.GenerationsPerMinute < 0 {
			bad("%s: limits must not be negative", setting)
		}
	}
	checkLimits("limits", c.Limits)
	for _, name := range slices.Sorted(maps.Keys(c.Tenants)) {
		t := c.Tenants[name]
		at := "tenants." + name
		if name == "" {
			bad("tenants: empty name")
		}
		if t.Limits != nil {
			checkLimits(at+".limits", *t.Limits)
		}
		for _, s := range t.Servers {
			if _, ok := c.Bridge.Servers[s]; !ok {
				bad("%s.servers: %q is not among bridge.servers", at, s)
			}
		}
		for _, cmd := range t.AllowedCommands {
			if cmd == "" {
				bad("%s.allowed_commands: empty entry", at)
			}
		}
		for _, p := range slices.Sorted(maps.Keys(t.Providers)) {
			if o := t.Providers[p]; o.Timeout != 0 || o.MaxRetries != 0 || len(o.Options) > 0 {
				bad("%s.providers.%s: a tenant may set only api_key and base_url", at, p)
			}
		}
	}
}

// validateAuth checks auth.oidc and auth.mtls, and that every tenant an
// API key or a client certificate gives is configured when tenants are.
// The API keys' names, hashes and roles are internal/auth's to check, as
// are the roles of auth.mtls.principals.
func (c *Config) validateAuth(bad func(string, ...any)) {
	issuers := make(map[string]bool)
	for i, o := range c.Auth.OIDC {
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
		for _, alg := range o.Algorithms {
			if !slices.Contains(OIDCAlgorithms, alg) {
				bad("%s.algorithms: %q is not allowed; one of %s", at, alg, strings.Join(OIDCAlgorithms, ", "))
			}
		}
		if o.ClockSkew < 0 || o.RefreshInterval < 0 {
			bad("%s: clock_skew and refresh_interval must not be negative", at)
		}
	}
	m := c.Auth.MTLS
	if !slices.Contains([]string{"", "uri", "dns", "cn"}, m.PrincipalFrom) {
		bad("auth.mtls.principal_from: must be uri, dns or cn (or unset: the first of them present), got %q", m.PrincipalFrom)
	}
	if len(m.Principals) > 0 && c.TLS.ClientCAFile == "" {
		bad("auth.mtls.principals: need tls.client_ca_file (and tls.cert_file, tls.key_file): only then do clients present verified certificates")
	}
	// The admin listener authenticates with the same principals: a
	// certificate verified by another CA must not pass for one of them.
	if len(m.Principals) > 0 && c.Admin.TLS.ClientCAFile != "" && c.Admin.TLS.ClientCAFile != c.TLS.ClientCAFile {
		bad("admin.tls.client_ca_file: must be tls.client_ca_file while auth.mtls maps principals (another CA's certificates would pass for them)")
	}
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
	for i, p := range m.Principals {
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
	switch u.Scheme {
	case "https":
		return true
	case "http":
		host := u.Hostname()
		ip := net.ParseIP(host)
		return host == "localhost" || ip != nil && ip.IsLoopback()
	}
	return false
}

// defaultStateDir is $XDG_STATE_HOME/agentd, else ~/.local/state/agentd,
// else .agentd-state in the working directory.
func defaultStateDir(getenv func(string) string) string {
	if d := getenv("XDG_STATE_HOME"); d != "" {
		return filepath.Join(d, "agentd")
	}
	if home := getenv("HOME"); home != "" {
		return filepath.Join(home, ".local", "state", "agentd")
	}
	return ".agentd-state"
}

// SlogLevel parses Level.
func (l Log) SlogLevel() (slog.Level, error) {
	var lvl slog.Level
	err := lvl.UnmarshalText([]byte(l.Level))
	return lvl, err
}
