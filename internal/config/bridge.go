package config

import (
	"maps"
	"net"
	"slices"
	"strings"
	"time"

	"github.com/agentd/agentd/internal/policy"
)

// Bridge configures the BridgeService, embedded or remote.
type Bridge struct {
	// Address is the remote BridgeService (`agentd bridge`, which may run
	// as several replicas) that `agentd serve` uses; empty runs the
	// bridge embedded, over an in-memory gRPC listener. Its forms:
	//
	//   - host:port, or a gRPC target such as dns:///bridge:7071: every
	//     address the name resolves to is a replica; the name is resolved
	//     again every 30 s, so replicas come and go with it.
	//   - a comma-separated list of host:port, each a replica:
	//     "bridge-a:7071,bridge-b:7071".
	//
	// Sessions are spread round-robin over the connected replicas, and
	// each stays on the replica that opened it. When a replica is lost,
	// its sessions' calls in flight reach the model as of unknown outcome
	// (never run twice), and each generation goes on with a new session
	// on another replica, whose MCP servers start afresh.
	Address string `yaml:"address" env:"AGENTD_BRIDGE_ADDRESS"`

	// Listen is where `agentd bridge` serves the BridgeService and the
	// BridgeAdminService.
	Listen string `yaml:"listen" env:"AGENTD_BRIDGE_LISTEN"`

	// AllowedCommands lists the executables that a request's `command:`
	// may run, matched exactly against the declared command (so allowing
	// "npx" does not allow "/tmp/npx"). Without any, requests use `ref:`
	// to the registered servers.
	AllowedCommands []string `yaml:"allowed_commands" env:"AGENTD_BRIDGE_ALLOWED_COMMANDS"`

	// Servers are the MCP servers, stdio or url, that requests may use by
	// name with `ref:`. The demo server built into agentd is registered
	// beside those a file sets (bridge.demo).
	Servers map[string]Server `yaml:"servers"`

	// Demo registers the small MCP server built into agentd (`agentd
	// mcp-demo`) as bridge.servers.demo, beside the servers a file registers,
	// unless one of them is named demo itself; false leaves it out.
	Demo bool `yaml:"demo" env:"AGENTD_BRIDGE_DEMO"`

	// TerminateGrace is how long a stdio server gets to exit after its
	// stdin closes, and again after SIGTERM, before its process group is
	// killed.
	TerminateGrace time.Duration `yaml:"terminate_grace"`

	// MaxResultBytes caps one tool result (its text plus attachments)
	// that the bridge passes on, up to the largest message agentd passes
	// (64 MiB): a larger result reaches the model as an error naming the
	// size and this setting, and the generation goes on.
	MaxResultBytes int `yaml:"max_result_bytes" env:"AGENTD_BRIDGE_MAX_RESULT_BYTES"`

	// AllowPrivateNetworks lets url servers name localhost or resolve to
	// loopback, private, shared (100.64/10) and link-local addresses;
	// without it, such URLs are PermissionDenied.
	AllowPrivateNetworks bool `yaml:"allow_private_networks" env:"AGENTD_BRIDGE_ALLOW_PRIVATE_NETWORKS"`

	// AllowedEnv lists variables that a request's env may set although
	// they steer the dynamic loader, an interpreter or a package manager
	// (PATH, HOME, LD_*, DYLD_*, NODE_OPTIONS, PYTHONPATH, NPM_CONFIG_*,
	// ...).
	AllowedEnv []string `yaml:"allowed_env"`

	// TLS secures the hop between `agentd serve` and a remote `agentd
	// bridge`; the embedded bridge, on an in-memory listener, needs none.
	// Each side reads its own fields:
	//
	//   - `agentd bridge` serves its listener over TLS when cert_file
	//     names a certificate: cert_file and key_file are the bridge's
	//     server identity; client_ca_file, when set, requires every peer
	//     to present a client certificate that it verifies (mutual TLS);
	//     min_version is the lowest version served.
	//   - `agentd serve`, with address set, dials the bridge over TLS when
	//     any of cert_file, ca_file or server_name is set: cert_file and
	//     key_file are its client identity (mutual TLS; without them, TLS
	//     that verifies the bridge alone), ca_file verifies the bridge's
	//     certificate, server_name is the name that certificate must
	//     carry, and min_version is the lowest version it accepts. The
	//     client certificate and key are re-read when they change; the CA
	//     file is read at start.
	//
	// Without any of them, the hop is plaintext.
	TLS TLS `yaml:"tls" env:"AGENTD_BRIDGE_TLS_,dial"`

	// TrustedPeers lists the certificate principals of the agentd
	// instances whose calls `agentd bridge` serves (principal_from of
	// auth.mtls says how a certificate names one): only their requests
	// may name a tenant. With it, every call on bridge.listen but health
	// and reflection needs a verified client certificate whose principal
	// is listed: none is Unauthenticated, an unlisted one
	// PermissionDenied. It needs bridge.tls.client_ca_file. Since every
	// peer is then authenticated, the bridge may listen beyond loopback
	// without insecure. Without it, every peer that reaches the listener
	// is served.
	TrustedPeers []string `yaml:"trusted_peers" env:"AGENTD_BRIDGE_TRUSTED_PEERS"`

	// Pool configures the stdio process pools.
	Pool Pool `yaml:"pool"`

	// Cache configures the tool-schema cache.
	Cache Cache `yaml:"cache"`
}

// DefaultMaxResultBytes is the default of Bridge.MaxResultBytes: 1 MiB,
// about 250,000 tokens of text, more than a model can use from one call.
const DefaultMaxResultBytes = 1 << 20

// MaxMessageBytes bounds any one message between agentd and an MCP server
// and on the bridge's gRPC hop: 64 MiB. A stdio server that writes a
// longer message is stopped.
const MaxMessageBytes = 64 << 20

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

// Rules are what the bridge's configuration allows a request to declare,
// as the server and the bridge both check it.
func (b Bridge) Rules() policy.Rules {
	return policy.Rules{AllowedCommands: b.AllowedCommands, AllowedEnv: b.AllowedEnv, AllowPrivateNetworks: b.AllowPrivateNetworks}
}

// Pool configures the stdio process pools. There is one per registered
// server (per tenant for one registered shared: true), and one per tenant
// and distinct allowed command configuration.
type Pool struct {
	// Warm is how many spawned, initialized spare processes each
	// registered server keeps ready.
	Warm int `yaml:"warm"`
	// CommandWarm is how many spare processes each server started by a
	// request's command keeps ready (per tenant and command
	// configuration); 0 starts them on first use.
	CommandWarm int `yaml:"command_warm"`
	// MaxProcesses caps a pool's live processes; a session waits (up to
	// its read_timeout) for one beyond that.
	MaxProcesses int `yaml:"max_processes"`
	// IdleTimeout retires spares beyond the warm count that have waited
	// this long, and drops, with its processes, a tenant's pool (of a
	// command, or of a server registered shared: true) that none of the
	// tenant's sessions has used this long.
	IdleTimeout time.Duration `yaml:"idle_timeout"`
	// MaxLifetime retires a process this old (a busy one when its session
	// ends).
	MaxLifetime time.Duration `yaml:"max_lifetime"`
	// StartTimeout bounds spawning and initializing a spare.
	StartTimeout time.Duration `yaml:"start_timeout"`
}

// Cache configures the tool-schema cache.
type Cache struct {
	// Enabled caches tool lists (a request may opt out with mcp_cache:
	// false).
	Enabled bool `yaml:"enabled"`
	// TTL is an entry's lifetime.
	TTL time.Duration `yaml:"ttl"`
	// MaxEntries bounds the entries; the oldest write is evicted first.
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

// validate checks the bridge's settings and the servers it registers.
func (b Bridge) validate(bad func(string, ...any)) {
	b.validatePeers(bad)
	b.validateAddress(bad)
	positive(bad, "bridge.terminate_grace", b.TerminateGrace)
	if b.MaxResultBytes <= 0 || b.MaxResultBytes > MaxMessageBytes {
		bad("bridge.max_result_bytes: must be between 1 and %d, got %d", MaxMessageBytes, b.MaxResultBytes)
	}
	if slices.Contains(b.AllowedCommands, "") {
		bad("bridge.allowed_commands: empty entry")
	}
	for _, name := range slices.Sorted(maps.Keys(b.Servers)) {
		if name == "" {
			bad("bridge.servers: empty name")
		}
		b.Servers[name].validate(name, bad)
	}
	b.Pool.validate(bad)
	b.Cache.validate(bad)
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
	if slices.Contains(b.TrustedPeers, "") {
		bad("bridge.trusted_peers: empty entry")
	}
}

func (p Pool) validate(bad func(string, ...any)) {
	if p.Warm < 0 {
		bad("bridge.pool.warm: must not be negative, got %d", p.Warm)
	}
	if p.CommandWarm < 0 {
		bad("bridge.pool.command_warm: must not be negative, got %d", p.CommandWarm)
	}
	if p.MaxProcesses < 1 {
		bad("bridge.pool.max_processes: must be at least 1, got %d", p.MaxProcesses)
	}
	positive(bad, "bridge.pool.idle_timeout", p.IdleTimeout)
	positive(bad, "bridge.pool.max_lifetime", p.MaxLifetime)
	positive(bad, "bridge.pool.start_timeout", p.StartTimeout)
}

func (c Cache) validate(bad func(string, ...any)) {
	positive(bad, "bridge.cache.ttl", c.TTL)
	if c.MaxEntries < 1 {
		bad("bridge.cache.max_entries: must be a positive integer, got %d", c.MaxEntries)
	}
}
