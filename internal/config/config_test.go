package config

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"

	"github.com/agentd/agentd/internal/policy"
)

func env(vars map[string]string) func(string) string {
	return func(k string) string { return vars[k] }
}

func TestLoad(t *testing.T) {
	t.Parallel()
	defaults := Default()
	defaults.Bridge.Servers = map[string]Server{"demo": {Command: "/opt/agentd", Args: []string{"mcp-demo"}}}
	tests := []struct {
		name string
		file string // YAML; empty means no file
		env  map[string]string
		want func(*Config)
	}{
		{name: "no file: embedded defaults", want: func(*Config) {}},
		{name: "empty file", file: "\n", want: func(*Config) {}},
		{
			name: "file overrides defaults",
			file: "listen: 0.0.0.0:9000\nlog: {level: debug}\ngeneration: {max_tool_turns: 5, answer_timeout: 30s}\n",
			want: func(c *Config) {
				c.Listen = "0.0.0.0:9000"
				c.Log.Level = "debug"
				c.Generation.MaxToolTurns = 5
				c.Generation.AnswerTimeout = 30 * time.Second
			},
		},
		{
			name: "servers in a file are registered beside the built-in demo",
			file: "bridge:\n  servers:\n    files: {command: /usr/bin/mcp-files, args: [--root, /tmp], env: {A: b}}\n",
			want: func(c *Config) {
				c.Bridge.Servers["files"] = Server{Command: "/usr/bin/mcp-files", Args: []string{"--root", "/tmp"}, Env: map[string]string{"A": "b"}}
			},
		},
		{
			name: "bridge.demo false leaves the built-in demo out",
			file: "bridge:\n  demo: false\n  servers:\n    files: {command: /usr/bin/mcp-files}\n",
			want: func(c *Config) {
				c.Bridge.Demo = false
				c.Bridge.Servers = map[string]Server{"files": {Command: "/usr/bin/mcp-files"}}
			},
		},
		{
			name: "bridge.demo false with no servers registers none",
			env:  map[string]string{"AGENTD_BRIDGE_DEMO": "false"},
			want: func(c *Config) {
				c.Bridge.Demo = false
				c.Bridge.Servers = map[string]Server{}
			},
		},
		{
			name: "a demo the file registers replaces the built-in one",
			file: "bridge:\n  servers:\n    demo: {command: /usr/bin/my-demo}\n",
			want: func(c *Config) { c.Bridge.Servers = map[string]Server{"demo": {Command: "/usr/bin/my-demo"}} },
		},
		{
			name: "a demo the file registers stays with bridge.demo false",
			file: "bridge:\n  demo: false\n  servers:\n    demo: {command: /usr/bin/my-demo}\n",
			want: func(c *Config) {
				c.Bridge.Demo = false
				c.Bridge.Servers = map[string]Server{"demo": {Command: "/usr/bin/my-demo"}}
			},
		},
		{
			name: "X-I6 shared: false, true (per tenant) and global",
			file: "bridge:\n  servers:\n    a: {command: a, shared: false}\n    b: {command: b, shared: true}\n    c: {command: c, shared: global}\n    d: {command: d}\n",
			want: func(c *Config) {
				c.Bridge.Servers = map[string]Server{
					"a": {Command: "a"}, "b": {Command: "b", Shared: SharedPerTenant}, "c": {Command: "c", Shared: SharedGlobal}, "d": {Command: "d"},
					"demo": {Command: "/opt/agentd", Args: []string{"mcp-demo"}},
				}
			},
		},
		{
			name: "X-I4 tls on both listeners, the file keeping the default min_version",
			file: "tls: {cert_file: /etc/agentd/cert.pem, key_file: /etc/agentd/key.pem}\nbridge: {tls: {cert_file: b.pem, key_file: b.key, client_ca_file: ca.pem, min_version: \"1.3\"}}\n",
			env:  map[string]string{"AGENTD_TLS_CLIENT_CA_FILE": "/etc/agentd/ca.pem"},
			want: func(c *Config) {
				c.TLS = TLS{CertFile: "/etc/agentd/cert.pem", KeyFile: "/etc/agentd/key.pem", ClientCAFile: "/etc/agentd/ca.pem", MinVersion: "1.2"}
				c.Bridge.TLS = TLS{CertFile: "b.pem", KeyFile: "b.key", ClientCAFile: "ca.pem", MinVersion: "1.3"}
			},
		},
		{
			name: "oauth: the redirect URL and client metadata document, the client name from the environment",
			file: "oauth: {redirect_url: \"https://app.example/oauth/callback\", client_metadata_url: \"https://app.example/agentd/client.json\"}\n",
			env:  map[string]string{"AGENTD_OAUTH_CLIENT_NAME": "acme agent"},
			want: func(c *Config) {
				c.OAuth = OAuth{RedirectURL: "https://app.example/oauth/callback", ClientMetadataURL: "https://app.example/agentd/client.json", ClientName: "acme agent"}
			},
		},
		{
			name: "X-G6 bridge.address lists replicas",
			file: "bridge: {address: \"10.0.0.1:7071, bridge-b:7071\"}\n",
			want: func(c *Config) { c.Bridge.Address = "10.0.0.1:7071, bridge-b:7071" },
		},
		{
			name: "X-I8 bridge.tls for both sides of the hop, trusted_peers",
			file: "bridge: {address: bridge.internal:7071, tls: {cert_file: agentd.pem, key_file: agentd-key.pem, ca_file: bridge-ca.pem}}\n",
			env: map[string]string{
				"AGENTD_BRIDGE_TLS_SERVER_NAME": "bridge.example", "AGENTD_BRIDGE_TLS_CLIENT_CA_FILE": "peers-ca.pem",
				"AGENTD_BRIDGE_TRUSTED_PEERS": "spiffe://example.org/agentd-a, ,spiffe://example.org/agentd-b",
			},
			want: func(c *Config) {
				c.Bridge.Address = "bridge.internal:7071"
				c.Bridge.TLS = TLS{CertFile: "agentd.pem", KeyFile: "agentd-key.pem", ClientCAFile: "peers-ca.pem", MinVersion: "1.2", CAFile: "bridge-ca.pem", ServerName: "bridge.example"}
				c.Bridge.TrustedPeers = []string{"spiffe://example.org/agentd-a", "spiffe://example.org/agentd-b"}
			},
		},
		{
			name: "X-I5 admin.listen and admin.tls in the file, reflection off by the environment",
			file: "admin: {listen: 127.0.0.1:7072, tls: {cert_file: a.pem, key_file: a.key}}\n",
			env:  map[string]string{"AGENTD_REFLECTION": "false", "AGENTD_ADMIN_TLS_CLIENT_CA_FILE": "ca.pem"},
			want: func(c *Config) {
				c.Admin = Admin{Listen: "127.0.0.1:7072", TLS: TLS{CertFile: "a.pem", KeyFile: "a.key", ClientCAFile: "ca.pem", MinVersion: "1.2"}}
				c.Reflection = false
			},
		},
		{
			name: "debug.listen from the environment",
			env:  map[string]string{"AGENTD_DEBUG_LISTEN": "127.0.0.1:6060"},
			want: func(c *Config) { c.Debug.Listen = "127.0.0.1:6060" },
		},
		{
			name: "gc_heap_floor_mib 0 from the file",
			file: "gc_heap_floor_mib: 0\n",
			want: func(c *Config) { c.GCHeapFloorMiB = 0 },
		},
		{
			name: "gc_heap_floor_mib from the environment",
			env:  map[string]string{"AGENTD_GC_HEAP_FLOOR_MIB": "256"},
			want: func(c *Config) { c.GCHeapFloorMiB = 256 },
		},
		{
			name: "X-I3 an OIDC issuer gets the defaults it leaves unset",
			file: "auth:\n  oidc:\n    - {issuer: https://idp.example.com, audience: agentd, roles_claim: groups}\n    - {issuer: http://127.0.0.1:8080/realms/x, audience: a, algorithms: [ES384], clock_skew: 5s}\n",
			want: func(c *Config) {
				c.Auth.OIDC = []OIDCIssuer{
					{Issuer: "https://idp.example.com", Audience: "agentd", Algorithms: []string{"RS256", "ES256"}, TenantClaim: "tenant", RolesClaim: "groups", PrincipalClaim: "sub", ClockSkew: time.Minute, RefreshInterval: time.Minute},
					{Issuer: "http://127.0.0.1:8080/realms/x", Audience: "a", Algorithms: []string{"ES384"}, TenantClaim: "tenant", RolesClaim: "roles", PrincipalClaim: "sub", ClockSkew: 5 * time.Second, RefreshInterval: time.Minute},
				}
			},
		},
		{
			name: "X-G1 store: postgres in the file, its DSN from the environment",
			file: "store: {driver: postgres, ping_interval: 2s}\n",
			env:  map[string]string{"AGENTD_STORE_DSN": "postgres://agentd:secret@db:5432/agentd"},
			want: func(c *Config) {
				c.Store = Store{Driver: StorePostgres, DSN: "postgres://agentd:secret@db:5432/agentd", PingInterval: 2 * time.Second}
			},
		},
		{
			name: "X-G1 store: both from the environment",
			env:  map[string]string{"AGENTD_STORE_DRIVER": "postgres", "AGENTD_STORE_DSN": "host=db user=agentd"},
			want: func(c *Config) {
				c.Store.Driver, c.Store.DSN = StorePostgres, "host=db user=agentd"
			},
		},
		{
			name: "X-M3 store: a rotation's previous keys in the file",
			file: "store: {encryption_key_file: /k/new.key, previous_encryption_key_files: [/k/old.key, /k/older.key]}\n",
			want: func(c *Config) {
				c.Store.EncryptionKeyFile = "/k/new.key"
				c.Store.PreviousEncryptionKeyFiles = []string{"/k/old.key", "/k/older.key"}
			},
		},
		{
			name: "X-M3 store: a rotation's previous keys from the environment",
			env:  map[string]string{"AGENTD_STORE_ENCRYPTION_KEY_FILE": "/k/new.key", "AGENTD_STORE_PREVIOUS_ENCRYPTION_KEY_FILES": "/k/old.key, ,/k/older.key"},
			want: func(c *Config) {
				c.Store.EncryptionKeyFile = "/k/new.key"
				c.Store.PreviousEncryptionKeyFiles = []string{"/k/old.key", "/k/older.key"}
			},
		},
		{
			name: "a key of a tenant that tenants.default covers",
			file: "tenants: {default: {}}\nauth: {api_keys: [{name: k, sha256: x, tenant: globex}]}\n",
			want: func(c *Config) {
				c.Tenants = map[string]Tenant{"default": {}}
				c.Auth.APIKeys = []APIKey{{Name: "k", SHA256: "x", Tenant: "globex"}}
			},
		},
		{
			name: "environment overrides the file",
			file: "listen: 0.0.0.0:9000\n",
			env: map[string]string{
				"AGENTD_LISTEN": "127.0.0.1:1", "AGENTD_BRIDGE_ADDRESS": "bridge:7071", "AGENTD_LOG_FORMAT": "json",
				"AGENTD_BRIDGE_ALLOWED_COMMANDS": "npx, uvx", "AGENTD_SHUTDOWN_GRACE": "3s", "AGENTD_INSECURE": "true",
				// Provider variables are providers/registry's (TestConfigure).
				"ANTHROPIC_API_KEY": "sk-ant",
			},
			want: func(c *Config) {
				c.Listen = "127.0.0.1:1"
				c.Bridge.Address = "bridge:7071"
				c.Log.Format = "json"
				c.Bridge.AllowedCommands = []string{"npx", "uvx"}
				c.ShutdownGrace = 3 * time.Second
				c.Insecure = true
			},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			path := ""
			if tt.file != "" {
				path = filepath.Join(t.TempDir(), "agentd.yaml")
				if err := os.WriteFile(path, []byte(tt.file), 0o600); err != nil {
					t.Fatal(err)
				}
			}
			got, err := Load(path, env(tt.env), "/opt/agentd")
			if err != nil {
				t.Fatalf("Load: %v", err)
			}
			want := Default()
			want.StateDir = ".agentd-state" // neither XDG_STATE_HOME nor HOME is set
			want.Bridge.Servers = map[string]Server{"demo": {Command: "/opt/agentd", Args: []string{"mcp-demo"}}}
			tt.want(&want)
			if diff := cmp.Diff(want, got); diff != "" {
				t.Errorf("config (-want +got):\n%s", diff)
			}
		})
	}
}

func TestLoadRejects(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name, file string
		env        map[string]string
		wantErrs   []string
	}{
		{name: "unknown key", file: "listn: x\n", wantErrs: []string{"listn"}},
		{name: "bad duration", env: map[string]string{"AGENTD_SHUTDOWN_GRACE": "soon"}, wantErrs: []string{"AGENTD_SHUTDOWN_GRACE"}},
		{
			name:     "every problem at once",
			file:     "log: {level: loud, format: xml}\ngeneration: {max_tool_turns: 0}\nbridge: {servers: {x: {command: bin/x}, y: {}}}\n",
			wantErrs: []string{"log.level", "log.format", "generation.max_tool_turns", "bridge.servers.x.command", "bridge.servers.y: needs a command"},
		},
		{
			name:     "X-I4 a certificate without its key, a client CA without a certificate, TLS 1.1",
			file:     "tls: {cert_file: c.pem, min_version: \"1.1\"}\nbridge: {tls: {client_ca_file: ca.pem}}\n",
			wantErrs: []string{"tls: cert_file and key_file must be set together", "tls.min_version", "bridge.tls.client_ca_file"},
		},
		{name: "bridge.demo not a boolean", file: "bridge: {demo: maybe}\n", wantErrs: []string{`agentd.yaml:1: bridge.demo: "maybe" is not a boolean`}},
		{
			name:     "a tenant's demo left out by bridge.demo false",
			file:     "bridge: {demo: false}\ntenants: {acme: {servers: [demo]}}\n",
			wantErrs: []string{`tenants.acme.servers: "demo" is not among bridge.servers`},
		},
		{name: "X-I6 shared neither true, false nor global", file: "bridge: {servers: {a: {command: a, shared: always}}}\n", wantErrs: []string{`agentd.yaml:1: bridge.servers.a.shared: "always" is not one of false, true, global`}},
		{
			name:     "X-I8 trusted_peers without client certificates to name them, an empty peer",
			file:     "bridge: {trusted_peers: [spiffe://example.org/agentd, \"\"], tls: {cert_file: b.pem, key_file: b.key}}\n",
			wantErrs: []string{"bridge.trusted_peers: needs bridge.tls.client_ca_file", "bridge.trusted_peers: empty entry"},
		},
		{
			name: "X-G6 a bridge.address list whose entries are not all host:port",
			env:  map[string]string{"AGENTD_BRIDGE_ADDRESS": "bridge-a:7071, bridge-b,,:7071"},
			wantErrs: []string{
				`bridge.address: entry 2 of the list, "bridge-b", is not a host:port`,
				`bridge.address: entry 3 of the list, "", is not a host:port`,
				`bridge.address: entry 4 of the list, ":7071", is not a host:port`,
			},
		},
		{
			name: "CORS origins a browser never sends, and * beside others",
			env:  map[string]string{"AGENTD_HTTP_CORS_ALLOWED_ORIGINS": "https://app.example.com,https://app.example.com/,app.example.com,*"},
			wantErrs: []string{
				`http.cors.allowed_origins: "*" allows every origin`,
				`http.cors.allowed_origins[1]: "https://app.example.com/" is not an origin`,
				`http.cors.allowed_origins[2]: "app.example.com" is not an origin`,
			},
		},
		{
			name:     "a console trace_url that is no web address, or has no place for the trace id",
			file:     "console: {trace_url: \"javascript:alert({trace_id})\"}\n",
			wantErrs: []string{`console.trace_url: "javascript:alert({trace_id})" is not an http or https URL with {trace_id} in it`},
		},
		{
			name:     "a console trace_url without {trace_id}",
			file:     "console: {trace_url: \"https://jaeger.example/trace/\"}\n",
			wantErrs: []string{`console.trace_url: "https://jaeger.example/trace/" is not an http or https URL`},
		},
		{
			name:     "a console client_id without auth.oidc",
			file:     "console: {client_id: console}\n",
			wantErrs: []string{"console.client_id: needs an issuer in auth.oidc"},
		},
		{
			name:     "a console client_id among several issuers, none named; scopes without openid",
			file:     "console: {client_id: console, scopes: [email]}\nauth:\n  oidc:\n    - {issuer: https://a.example, audience: x}\n    - {issuer: https://b.example, audience: x}\n",
			wantErrs: []string{"console.issuer: auth.oidc has 2 issuers; name the one", "console.scopes: must include openid"},
		},
		{
			name:     "a console issuer that is not in auth.oidc",
			file:     "console: {client_id: console, issuer: https://c.example}\nauth: {oidc: [{issuer: https://a.example, audience: x}]}\n",
			wantErrs: []string{"console.issuer: is none of auth.oidc's issuers"},
		},
		{
			name:     "a console issuer without a client_id",
			file:     "console: {issuer: https://a.example}\nauth: {oidc: [{issuer: https://a.example, audience: x}]}\n",
			wantErrs: []string{"console.issuer and console.scopes: need console.client_id"},
		},
		{
			name:     "debug.listen beyond loopback, even insecure",
			file:     "insecure: true\ndebug: {listen: 0.0.0.0:6060}\n",
			wantErrs: []string{"debug.listen: must be a loopback address"},
		},
		{
			name:     "X-I5 admin.tls without admin.listen",
			env:      map[string]string{"AGENTD_ADMIN_TLS_CERT_FILE": "c.pem", "AGENTD_ADMIN_TLS_KEY_FILE": "k.pem"},
			wantErrs: []string{"admin.tls: needs admin.listen"},
		},
		{
			name:     "X-I5 an admin listener trusting another CA than the principals' of auth.mtls",
			file:     "tls: {cert_file: c.pem, key_file: k.pem, client_ca_file: ca.pem}\nadmin: {listen: 127.0.0.1:7072, tls: {cert_file: a.pem, key_file: a.key, client_ca_file: wide-ca.pem}}\nauth: {mtls: {principals: [{principal: ops, tenant: t, roles: [admin]}]}}\n",
			wantErrs: []string{"admin.tls.client_ca_file: must be tls.client_ca_file while auth.mtls maps principals"},
		},
		{
			name: "X-I3 issuers that would weaken verification",
			file: "auth:\n  oidc:\n    - {issuer: http://idp.example.com, audience: a}\n    - {issuer: https://idp.example.com, algorithms: [none, HS256, ES256]}\n    - {issuer: https://idp.example.com, audience: a, clock_skew: -1s}\n    - {issuer: \"https://idp.example.com/?x=1\", audience: a}\n",
			wantErrs: []string{
				"auth.oidc[0].issuer: must be an https URL", "auth.oidc[1].audience: must be set", `auth.oidc[1].algorithms[0]: "none" is not one of RS256, `,
				`auth.oidc[1].algorithms[1]: "HS256" is not one of RS256, `, "auth.oidc[2].issuer: configured twice", "auth.oidc[2]: clock_skew", "auth.oidc[3].issuer: must be",
			},
		},
		{
			name:     "X-I4 mtls principals without a client CA, twice the same, a bad principal_from",
			file:     "auth:\n  mtls:\n    principal_from: email\n    principals: [{principal: app, tenant: t}, {principal: app}]\n",
			wantErrs: []string{"auth.mtls.principals: need tls.client_ca_file", "auth.mtls.principal_from", "auth.mtls.principals[1].principal", "auth.mtls.principals[1].tenant"},
		},
		{
			name:     "keys and certificates of tenants not configured",
			file:     "tls: {cert_file: c.pem, key_file: k.pem, client_ca_file: ca.pem}\ntenants: {acme: {}}\nauth:\n  api_keys: [{name: k, sha256: x, tenant: globex}, {name: j, sha256: y, tenant: acme}]\n  mtls: {principals: [{principal: app, tenant: initech}]}\n",
			wantErrs: []string{`auth.api_keys[0].tenant: tenant "globex" is not configured`, `auth.mtls.principals[0].tenant: tenant "initech" is not configured`},
		},
		{
			name:     "oauth: a relative redirect URL, a client metadata URL over http or at the root, no client name",
			file:     "oauth: {redirect_url: /callback, client_metadata_url: \"http://app.example/client.json\", client_name: \"\"}\n",
			wantErrs: []string{"oauth.redirect_url: must be an absolute URL", "oauth.client_metadata_url: must be an https URL with a path", "oauth.client_name: must not be empty"},
		},
		{name: "oauth: a client metadata URL at the root", env: map[string]string{"AGENTD_OAUTH_CLIENT_METADATA_URL": "https://app.example/"}, wantErrs: []string{"oauth.client_metadata_url"}},
		{name: "answer timeout above its cap", file: "generation: {answer_timeout: 2h}\n", wantErrs: []string{"generation.answer_timeout"}},
		{name: "X-G1 store: postgres without a DSN", file: "store: {driver: postgres}\n", wantErrs: []string{"store.dsn: required with store.driver postgres"}},
		{name: "X-G3 a lease_ttl under a second", file: "generation: {lease_ttl: 500ms}\n", wantErrs: []string{"generation.lease_ttl: must be at least 1s"}},
		{name: "X-M3 store: previous keys without a current one", file: "store: {previous_encryption_key_files: [/k/old.key]}\n", wantErrs: []string{"store.previous_encryption_key_files: needs store.encryption_key_file"}},
		{
			name:     "X-M3 store: previous keys that are the current one, repeated, or empty",
			file:     "store: {encryption_key_file: /k/new.key, previous_encryption_key_files: [/k/new.key, /k/old.key, /k/old.key, \"\"]}\n",
			wantErrs: []string{"store.previous_encryption_key_files[0]: is store.encryption_key_file", "store.previous_encryption_key_files[2]: listed twice", "store.previous_encryption_key_files[3]: empty"},
		},
		{name: "a negative gc_heap_floor_mib", file: "gc_heap_floor_mib: -1\n", wantErrs: []string{"gc_heap_floor_mib: must be from 0 to 1048576 (1 TiB), got -1"}},
		{name: "X-G1 store: a ping_interval of zero", file: "store: {ping_interval: 0s}\n", wantErrs: []string{"store.ping_interval: must be positive"}},
		{name: "X-G1 store: an unknown driver", env: map[string]string{"AGENTD_STORE_DRIVER": "mysql"}, wantErrs: []string{`AGENTD_STORE_DRIVER: store.driver: "mysql" is not one of sqlite, postgres`}},
		{name: "X-G1 store: a DSN that sqlite would ignore", env: map[string]string{"AGENTD_STORE_DSN": "postgres://db/agentd"}, wantErrs: []string{"store.dsn: set, but store.driver is sqlite"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			path := ""
			if tt.file != "" {
				path = filepath.Join(t.TempDir(), "agentd.yaml")
				if err := os.WriteFile(path, []byte(tt.file), 0o600); err != nil {
					t.Fatal(err)
				}
			}
			_, err := Load(path, env(tt.env), "/opt/agentd")
			if err == nil {
				t.Fatal("Load succeeded")
			}
			for _, want := range tt.wantErrs {
				if !strings.Contains(err.Error(), want) {
					t.Errorf("error %q does not mention %q", err, want)
				}
			}
		})
	}
}

// X-G1: store.dsn is a secret: a configuration that is refused does not
// say it, nor any part of it.
func TestStoreDSNNotInErrors(t *testing.T) {
	t.Parallel()
	const dsn = "postgres://agentd:canary-p4ss@db.internal:5432/agentd"
	for _, driver := range []string{"sqlite", "mysql"} {
		_, err := Load("", env(map[string]string{"AGENTD_STORE_DRIVER": driver, "AGENTD_STORE_DSN": dsn}), "/opt/agentd")
		if err == nil {
			t.Fatalf("driver %s with a DSN: loaded", driver)
		}
		for _, part := range []string{"canary-p4ss", "db.internal", "agentd:"} {
			if strings.Contains(err.Error(), part) {
				t.Errorf("driver %s: the error says %q: %v", driver, part, err)
			}
		}
	}
}

// A state_dir written "~/..." in the file is under $HOME, as a shell would
// read it, not a directory named "~".
func TestStateDirTilde(t *testing.T) {
	t.Parallel()
	path := filepath.Join(t.TempDir(), "agentd.yaml")
	if err := os.WriteFile(path, []byte("state_dir: ~/.local/state/agentd\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	env := map[string]string{"HOME": "/home/ada"}
	cfg, err := Load(path, func(k string) string { return env[k] }, "/usr/bin/agentd")
	if err != nil {
		t.Fatal(err)
	}
	if cfg.StateDir != "/home/ada/.local/state/agentd" {
		t.Errorf("state_dir = %q", cfg.StateDir)
	}
}

// TestForTenantNamesSettings: X-I7. A tenant's effective rules come from
// its own entry where it sets them, else from the global settings, and
// say which, so that a refusal names the setting to change; an
// unconfigured tenant gets the default entry's, or nothing.
func TestForTenantNamesSettings(t *testing.T) {
	t.Parallel()
	yes := true
	cfg := Default()
	cfg.Bridge.AllowedCommands = []string{"npx"}
	cfg.Budgets = []Budget{{Name: "global"}}
	cfg.Tenants = map[string]Tenant{
		"acme":    {AllowedCommands: []string{"uvx"}, AllowPrivateNetworks: &yes, Servers: []string{"demo"}, Budgets: []Budget{{Name: "own"}}},
		"default": {AllowedEnv: []string{"PATH"}},
	}
	tests := []struct {
		tenant string
		want   TenantSettings
	}{
		{"acme", TenantSettings{Name: "acme", Entry: "tenants.acme", Servers: []string{"demo"}, Rules: policy.Rules{
			AllowedCommands: []string{"uvx"}, AllowPrivateNetworks: true,
			Settings: policy.Settings{AllowedCommands: "tenants.acme.allowed_commands", AllowPrivateNetworks: "tenants.acme.allow_private_networks"},
		}, Budgets: []Budget{{Name: "own"}}, BudgetsKey: "tenants.acme.budgets"}},
		{"zed", TenantSettings{Name: "zed", Entry: "tenants.default", Rules: policy.Rules{
			AllowedCommands: []string{"npx"}, AllowedEnv: []string{"PATH"},
			Settings: policy.Settings{AllowedEnv: "tenants.default.allowed_env"},
		}, Budgets: []Budget{{Name: "global"}}, BudgetsKey: "budgets"}},
	}
	for _, tc := range tests {
		got, ok := cfg.ForTenant(tc.tenant)
		if !ok {
			t.Fatalf("ForTenant(%q) refused", tc.tenant)
		}
		if diff := cmp.Diff(tc.want, got, cmpopts.EquateEmpty(), cmpopts.IgnoreFields(TenantSettings{}, "GenerationLimits")); diff != "" {
			t.Errorf("X-I7 ForTenant(%q) (-want +got):\n%s", tc.tenant, diff)
		}
	}
	delete(cfg.Tenants, "default")
	if _, ok := cfg.ForTenant("zed"); ok {
		t.Error("X-I7 an unconfigured tenant without tenants.default got settings")
	}
	cfg.Tenants = nil
	if got, ok := cfg.ForTenant("zed"); !ok || got.Entry != "" || got.Rules.Settings != (policy.Settings{}) {
		t.Errorf("without tenants: ForTenant = %+v, %v; want the global settings", got, ok)
	}
}

// X-G6: bridge.address names one target, or lists replicas separated by
// commas.
func TestBridgeAddressList(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		address string
		want    []string
	}{
		{"", nil},
		{"bridge:7071", nil},
		{"dns:///bridge.agentd.svc:7071", nil},
		{"10.0.0.1:7071,10.0.0.2:7071", []string{"10.0.0.1:7071", "10.0.0.2:7071"}},
		{" bridge-a:7071 , [::1]:7071 ", []string{"bridge-a:7071", "[::1]:7071"}},
	} {
		if diff := cmp.Diff(tc.want, Bridge{Address: tc.address}.AddressList()); diff != "" {
			t.Errorf("AddressList of %q (-want +got):\n%s", tc.address, diff)
		}
	}
}

// Registered url servers (X-M1): what a configuration may declare of one,
// read as declared.
func TestLoadRegisteredURLServers(t *testing.T) {
	t.Parallel()
	file := `bridge:
  servers:
    demo: {command: "@self", args: [mcp-demo]}
    docs:
      url: https://docs.example/mcp
      headers: {X-Team: blue}
      authorization_file: /run/secrets/docs
      read_timeout: 90s
    crm:
      url: https://crm.example/mcp
      oauth:
        client_id: agentd
        client_secret_file: /run/secrets/crm
        scopes: [crm.read]
        token_endpoint_auth_method: client_secret_post
        redirect_url: https://app.example/callback
    erp:
      url: http://erp.internal/mcp
      oauth: {grant: client_credentials, client_id: agentd, private_key_file: /run/secrets/erp.pem, private_key_id: k1}
`
	path := filepath.Join(t.TempDir(), "agentd.yaml")
	if err := os.WriteFile(path, []byte(file), 0o600); err != nil {
		t.Fatal(err)
	}
	cfg, err := Load(path, env(nil), "/opt/agentd")
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]Server{
		"demo": {Command: "/opt/agentd", Args: []string{"mcp-demo"}},
		"docs": {URL: "https://docs.example/mcp", Headers: map[string]string{"X-Team": "blue"}, AuthorizationFile: "/run/secrets/docs", ReadTimeout: 90 * time.Second},
		"crm": {URL: "https://crm.example/mcp", OAuth: &ServerOAuth{ClientID: "agentd", ClientSecretFile: "/run/secrets/crm", Scopes: []string{"crm.read"},
			TokenEndpointAuthMethod: "client_secret_post", RedirectURL: "https://app.example/callback"}},
		"erp": {URL: "http://erp.internal/mcp", OAuth: &ServerOAuth{Grant: GrantClientCredentials, ClientID: "agentd", PrivateKeyFile: "/run/secrets/erp.pem", PrivateKeyID: "k1"}},
	}
	if diff := cmp.Diff(want, cfg.Bridge.Servers); diff != "" {
		t.Errorf("bridge.servers (-want +got):\n%s", diff)
	}
}

// What a registered url server may not declare, each refusal naming the
// setting and never a secret's value.
func TestLoadRejectsRegisteredURLServers(t *testing.T) {
	t.Parallel()
	const secret = "sk-cnry-4f1e"
	tests := []struct {
		name, server string
		wantErrs     []string
	}{
		{name: "command and url", server: "{command: x, url: https://a.example/mcp}", wantErrs: []string{"bridge.servers.s: command and url exclude each other"}},
		{name: "neither", server: "{headers: {X-A: b}}", wantErrs: []string{"bridge.servers.s: needs a command"}},
		{name: "not http", server: "{url: \"ftp://a.example/" + secret + "\"}", wantErrs: []string{"bridge.servers.s.url: must be an absolute http or https URL"}},
		{name: "relative", server: "{url: /mcp}", wantErrs: []string{"bridge.servers.s.url"}},
		{
			name: "process settings", server: "{url: https://a.example/mcp, args: [a], env: {A: b}, shared: true, warm: 1, max_processes: 2}",
			wantErrs: []string{"bridge.servers.s: args, env, shared, warm, max_processes apply to command servers only"},
		},
		{name: "url settings on a command", server: "{command: x, authorization: " + secret + ", read_timeout: 5s}", wantErrs: []string{"apply to url servers only"}},
		{name: "authorization twice", server: "{url: https://a.example/mcp, authorization: " + secret + ", authorization_file: /f}", wantErrs: []string{"authorization and authorization_file exclude each other"}},
		{name: "a read_timeout beyond its cap", server: "{url: https://a.example/mcp, read_timeout: 2h}", wantErrs: []string{"bridge.servers.s.read_timeout"}},
		{name: "oauth and a static token", server: "{url: https://a.example/mcp, authorization: " + secret + ", oauth: {}}", wantErrs: []string{"bridge.servers.s.authorization: may not be combined with oauth"}},
		{name: "oauth and a token's file", server: "{url: https://a.example/mcp, authorization_file: /run/secrets/t, oauth: {}}", wantErrs: []string{"bridge.servers.s.authorization_file: may not be combined with oauth"}},
		{name: "oauth and an Authorization header", server: "{url: https://a.example/mcp, headers: {authorization: " + secret + "}, oauth: {}}", wantErrs: []string{"bridge.servers.s.headers: may not set Authorization with oauth"}},
		{name: "an unknown grant", server: "{url: https://a.example/mcp, oauth: {grant: password}}", wantErrs: []string{`bridge.servers.s.oauth.grant: "password" is not one of authorization_code, client_credentials, enterprise_managed`}},
		{
			name: "enterprise managed without a client or an identity provider", server: "{url: https://a.example/mcp, oauth: {grant: enterprise_managed}}",
			wantErrs: []string{"bridge.servers.s.oauth.client_id: is required with the enterprise_managed grant", "bridge.servers.s.oauth: the enterprise_managed grant needs oauth.identity_provider"},
		},
		{
			name: "client credentials without client or secret", server: "{url: https://a.example/mcp, oauth: {grant: client_credentials}}",
			wantErrs: []string{"bridge.servers.s.oauth.client_id: is required", "bridge.servers.s.oauth: the client_credentials grant needs client_secret"},
		},
		{name: "a secret without a client", server: "{url: https://a.example/mcp, oauth: {client_secret: " + secret + "}}", wantErrs: []string{"bridge.servers.s.oauth.client_id: must be set"}},
		{
			name: "secret and key", server: "{url: https://a.example/mcp, oauth: {client_id: c, client_secret: " + secret + ", client_secret_file: /s, private_key_file: /k}}",
			wantErrs: []string{"client_secret and client_secret_file exclude each other", "a client secret and private_key_file exclude each other"},
		},
		{
			name: "auth methods without their secrets", server: "{url: https://a.example/mcp, oauth: {client_id: c, token_endpoint_auth_method: private_key_jwt, private_key_id: k1}}",
			wantErrs: []string{"private_key_jwt needs private_key_file", "private_key_id: needs private_key_file"},
		},
		{name: "a secret method without a secret", server: "{url: https://a.example/mcp, oauth: {client_id: c, token_endpoint_auth_method: client_secret_basic}}", wantErrs: []string{"client_secret_basic needs client_secret"}},
		{name: "an unknown method", server: "{url: https://a.example/mcp, oauth: {token_endpoint_auth_method: tls_client_auth}}", wantErrs: []string{"oauth.token_endpoint_auth_method: must be"}},
		{name: "a relative redirect, an empty scope", server: "{url: https://a.example/mcp, oauth: {redirect_url: /cb, scopes: [a, \"\"]}}", wantErrs: []string{"oauth.redirect_url: must be an absolute URL", "oauth.scopes: must not hold an empty scope"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			path := filepath.Join(t.TempDir(), "agentd.yaml")
			if err := os.WriteFile(path, []byte("bridge: {servers: {s: "+tt.server+"}}\n"), 0o600); err != nil {
				t.Fatal(err)
			}
			_, err := Load(path, env(nil), "/opt/agentd")
			if err == nil {
				t.Fatal("Load succeeded")
			}
			for _, want := range tt.wantErrs {
				if !strings.Contains(err.Error(), want) {
					t.Errorf("error %q does not mention %q", err, want)
				}
			}
			if strings.Contains(err.Error(), secret) {
				t.Errorf("error %q shows a secret", err)
			}
		})
	}
}

// Secrets reads a registered server's secrets from their files, white
// space trimmed; a file it cannot read is named, its setting too.
func TestServerSecrets(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	write := func(name, content string) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte(content), 0o600); err != nil {
			t.Fatal(err)
		}
		return p
	}
	pem := "-----BEGIN PRIVATE KEY-----\nAAAA\n-----END PRIVATE KEY-----"
	tests := []struct {
		name   string
		server Server
		want   ServerSecrets
		err    string
	}{
		{name: "inline", server: Server{Authorization: "tok"}, want: ServerSecrets{Authorization: "tok"}},
		{name: "authorization_file", server: Server{AuthorizationFile: write("auth", "Bearer tok\n")}, want: ServerSecrets{Authorization: "Bearer tok"}},
		{name: "oauth inline secret", server: Server{OAuth: &ServerOAuth{ClientSecret: "s"}}, want: ServerSecrets{ClientSecret: "s"}},
		{
			name:   "oauth files",
			server: Server{OAuth: &ServerOAuth{ClientSecretFile: write("secret", " s3 \n"), PrivateKeyFile: write("key.pem", pem+"\n")}},
			want:   ServerSecrets{ClientSecret: "s3", PrivateKeyPEM: pem},
		},
		{name: "a missing file", server: Server{OAuth: &ServerOAuth{PrivateKeyFile: filepath.Join(dir, "none.pem")}}, err: "bridge.servers.erp.oauth.private_key_file: open " + filepath.Join(dir, "none.pem")},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			got, err := tt.server.Secrets("erp")
			if tt.err != "" {
				if err == nil || !strings.HasPrefix(err.Error(), tt.err) {
					t.Fatalf("Secrets() error %v, want %q", err, tt.err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("Secrets() (-want +got):\n%s", diff)
			}
		})
	}
}

// The console signs in with the only issuer of auth.oidc, or the one
// console.issuer names among several, asking for openid unless told
// otherwise; without a client id, with none.
func TestConsoleSignInIssuer(t *testing.T) {
	t.Parallel()
	a := OIDCIssuer{Issuer: "https://a.example", Audience: "console"}
	b := OIDCIssuer{Issuer: "https://b.example", Audience: "api"}
	for _, tc := range []struct {
		name    string
		console Console
		issuers []OIDCIssuer
		want    string // the issuer; "" for none
	}{
		{"the only one", Console{ClientID: "console"}, []OIDCIssuer{a}, a.Issuer},
		{"the one named", Console{ClientID: "console", Issuer: b.Issuer}, []OIDCIssuer{a, b}, b.Issuer},
		{"none named among several", Console{ClientID: "console"}, []OIDCIssuer{a, b}, ""},
		{"no client id", Console{Issuer: a.Issuer}, []OIDCIssuer{a}, ""},
	} {
		c := Config{Console: tc.console, Auth: Auth{OIDC: tc.issuers}}
		got, ok := c.SignInIssuer()
		if got.Issuer != tc.want || ok != (tc.want != "") {
			t.Errorf("%s: %q %v; want %q", tc.name, got.Issuer, ok, tc.want)
		}
	}
	if got := (Console{}).SignInScopes(); !slices.Equal(got, []string{"openid"}) {
		t.Errorf("default scopes %v; want [openid]", got)
	}
}
