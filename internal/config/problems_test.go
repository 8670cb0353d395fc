package config

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
)

// loadFile loads file (YAML, written to agentd.yaml in a directory of its
// own) and env, and returns the error's lines with the directory left
// out, so that they begin "agentd.yaml:<line>:".
func loadFile(t *testing.T, file string, vars map[string]string) (Config, []string) {
	t.Helper()
	dir := t.TempDir()
	path := ""
	if file != "" {
		path = filepath.Join(dir, "agentd.yaml")
		if err := os.WriteFile(path, []byte(file), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	cfg, err := Load(path, env(vars), "/opt/agentd")
	if err == nil {
		return cfg, nil
	}
	return cfg, strings.Split(strings.ReplaceAll(err.Error(), dir+string(filepath.Separator), ""), "\n")
}

// What a new user who gets a key, a type or a value wrong is told: where
// (the file and line, or the variable), which key, and what to write.
func TestLoadSaysWhereAndWhat(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name, file string
		env        map[string]string
		want       []string
	}{
		{
			name: "a misspelt key, with the closest known one",
			file: "listen: 127.0.0.1:7070\nlog: {level: info}\ngeneraton: {max_tool_turns: 5}\n",
			want: []string{`agentd.yaml:3: generaton: unknown key; did you mean "generation"?`},
		},
		{
			name: "a misspelt key within a section, among that section's keys",
			file: "generation:\n  leas_ttl: 30s\n",
			want: []string{`agentd.yaml:2: generation.leas_ttl: unknown key; did you mean "lease_ttl"?`},
		},
		{
			name: "an unknown key like no other",
			file: "bridge:\n  servers:\n    docs: {url: https://docs.example/mcp, tokenz_of_the_realm: x}\n",
			want: []string{`agentd.yaml:3: bridge.servers.docs.tokenz_of_the_realm: unknown key`},
		},
		{
			name: "a number for a duration",
			file: strings.Repeat("\n", 10) + "generation:\n  lease_ttl: 30\n",
			want: []string{`agentd.yaml:12: generation.lease_ttl: "30" is not a duration; write 30s`},
		},
		{
			name: "words for a duration",
			file: "shutdown_grace: soon\n",
			want: []string{`agentd.yaml:1: shutdown_grace: "soon" is not a duration; write a number and a unit, e.g. 30s, 5m or 1h`},
		},
		{
			name: "a quantity with its unit for an integer",
			file: "bridge: {max_result_bytes: 2MiB}\n",
			want: []string{`agentd.yaml:1: bridge.max_result_bytes: "2MiB" is not an integer; write a whole number, without quotes or units`},
		},
		{
			name: "a word for a boolean",
			file: "reflection: maybe\n",
			want: []string{`agentd.yaml:1: reflection: "maybe" is not a boolean; write true or false`},
		},
		{
			name: "one value for a list",
			file: "bridge:\n  allowed_commands: npx\n",
			want: []string{`agentd.yaml:2: bridge.allowed_commands: a single value is not a list; write [a, b], or one "- item" line per item`},
		},
		{
			name: "a list for a map",
			file: "bridge:\n  servers: [demo]\n",
			want: []string{`agentd.yaml:2: bridge.servers: a list is not a map; write one "name:" line per entry, indented beneath it, with its keys beneath that`},
		},
		{
			name: "a value for a section",
			file: "log: debug\n",
			want: []string{`agentd.yaml:1: log: a single value is not a section; write its keys indented beneath it, one "key: value" line each`},
		},
		{
			name: "a list for a string",
			file: "listen: [127.0.0.1:7070]\n",
			want: []string{`agentd.yaml:1: listen: a list is not a string; write one value`},
		},
		{
			name: "a key set twice",
			file: "listen: 127.0.0.1:1\nlog: {}\nlisten: 127.0.0.1:2\n",
			want: []string{`agentd.yaml:3: listen: set twice (first on line 1)`},
		},
		{
			name: "a file that is not YAML",
			file: "listen: 127.0.0.1:1\n  bad: indentation\n",
			want: []string{`agentd.yaml:2: mapping values are not allowed in this context`},
		},
		{
			name: "a file that is no map",
			file: "- listen: 127.0.0.1:1\n",
			want: []string{`agentd.yaml:1: the file holds a list, not a map of keys; write one "key: value" line each`},
		},
		{
			name: "every problem of the file at once",
			file: "generaton: {}\nreflection: maybe\nbridge: {pool: {warm: many}}\n",
			want: []string{
				`agentd.yaml:1: generaton: unknown key; did you mean "generation"?`,
				`agentd.yaml:2: reflection: "maybe" is not a boolean; write true or false`,
				`agentd.yaml:3: bridge.pool.warm: "many" is not an integer; write a whole number, without quotes or units`,
			},
		},
		{
			name: "an enumerated key's values, from the file",
			file: "log:\n  level: verbose\n",
			want: []string{`agentd.yaml:2: log.level: "verbose" is not one of debug, info, warn, error`},
		},
		{
			name: "an enumerated key's values, from its variable",
			env:  map[string]string{"AGENTD_LOG_FORMAT": "yaml"},
			want: []string{`AGENTD_LOG_FORMAT: log.format: "yaml" is not one of text, json`},
		},
		{
			name: "an enumerated key that may be unset",
			file: "auth:\n  mtls: {principal_from: email}\n",
			want: []string{`agentd.yaml:2: auth.mtls.principal_from: "email" is not one of uri, dns, cn, or unset`},
		},
		{
			name: "a role no one has, at its entry's line",
			file: "auth:\n  api_keys:\n    - name: ci\n      sha256: x\n      roles: [generate, superuser]\n",
			want: []string{`agentd.yaml:5: auth.api_keys[0].roles[1]: "superuser" is not one of generate, approve, observer, admin, tenant_admin`},
		},
		{
			name: "a TLS version from a variable",
			env:  map[string]string{"AGENTD_BRIDGE_TLS_MIN_VERSION": "1.1"},
			want: []string{`AGENTD_BRIDGE_TLS_MIN_VERSION: bridge.tls.min_version: "1.1" is not one of 1.2, 1.3`},
		},
		{
			name: "a word for a boolean variable",
			env:  map[string]string{"AGENTD_INSECURE": "yes"},
			want: []string{`AGENTD_INSECURE: insecure: "yes" is not a boolean; write true or false`},
		},
		{
			name: "a number for a duration variable",
			env:  map[string]string{"AGENTD_SHUTDOWN_GRACE": "30"},
			want: []string{`AGENTD_SHUTDOWN_GRACE: shutdown_grace: "30" is not a duration; write 30s`},
		},
		{
			name: "a bare port from a variable",
			env:  map[string]string{"AGENTD_LISTEN": "17101"},
			want: []string{`AGENTD_LISTEN: listen: "17101" has no host; write 127.0.0.1:17101`},
		},
		{
			name: "a bare port in the file, for every listen address",
			file: "metrics: {listen: 9464}\nadmin:\n  listen: \"7072\"\ndebug: {listen: 6060}\n",
			want: []string{
				`agentd.yaml:3: admin.listen: "7072" has no host; write 127.0.0.1:7072`,
				`agentd.yaml:1: metrics.listen: "9464" has no host; write 127.0.0.1:9464`,
				`agentd.yaml:4: debug.listen: "6060" has no host; write 127.0.0.1:6060`,
			},
		},
		{
			name: "a semantic problem at its key's line",
			file: "log: {level: info}\ngeneration:\n  max_tool_turns: 5\n  lease_ttl: 500ms\n",
			want: []string{`agentd.yaml:4: generation.lease_ttl: must be at least 1s, got 500ms`},
		},
		{
			name: "a missing key at the line of the section that needs it",
			file: "auth:\n  oidc:\n    - issuer: https://idp.example.com\n",
			want: []string{`agentd.yaml:3: auth.oidc[0].audience: must be set`},
		},
		{
			name: "a semantic problem from a variable",
			env:  map[string]string{"AGENTD_STORE_DSN": "host=db"},
			want: []string{`AGENTD_STORE_DSN: store.dsn: set, but store.driver is sqlite, which does not use it; set store.driver: postgres (AGENTD_STORE_DRIVER=postgres) to use PostgreSQL`},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			_, got := loadFile(t, tt.file, tt.env)
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("Load's error lines (-want +got):\n%s", diff)
			}
		})
	}
}

// Validate, run on a configuration the flags changed, names the key of
// each problem, with no file to point to.
func TestValidateNamesKeys(t *testing.T) {
	t.Parallel()
	cfg := Default()
	cfg.Log.Level = "verbose"
	cfg.Listen = "7070"
	want := "log.level: \"verbose\" is not one of debug, info, warn, error\nlisten: \"7070\" has no host; write 127.0.0.1:7070"
	if err := cfg.Validate(); err == nil || err.Error() != want {
		t.Errorf("Validate() = %v, want %q", err, want)
	}
}

// The file's YAML is read as yaml.v3 reads it: anchors and merge keys,
// null keeping a default (and emptying a list or a map), YAML 1.1's yes
// for true, slog's other spellings of a level.
func TestLoadReadsYAMLAsYAML(t *testing.T) {
	t.Parallel()
	file := `base: &base {command: /usr/bin/x, args: [--quiet]}
`
	_, errs := loadFile(t, file, nil)
	if want := []string{`agentd.yaml:1: base: unknown key`}; !cmp.Equal(want, errs) {
		t.Errorf("an anchor on an unknown key: %v", errs)
	}
	file = `listen:
insecure: yes
log: {level: DEBUG}
bridge:
  allowed_env: ~
  servers:
    a: &a {command: /usr/bin/x, args: [--quiet], max_processes: 2}
    b:
      <<: *a
      max_processes: 3
    c: *a
generation:
  <<: [{max_tool_turns: 7, lease_ttl: 20s}, {max_tool_turns: 9}]
  lease_ttl: 30s
`
	cfg, errs := loadFile(t, file, nil)
	if errs != nil {
		t.Fatal(errs)
	}
	want := Default()
	want.StateDir = ".agentd-state"
	want.Insecure = true
	want.Log.Level = "DEBUG"
	a := Server{Command: "/usr/bin/x", Args: []string{"--quiet"}, MaxProcesses: 2}
	b := a
	b.MaxProcesses = 3
	want.Bridge.Servers = map[string]Server{"a": a, "b": b, "c": a, "demo": {Command: "/opt/agentd", Args: []string{"mcp-demo"}}}
	want.Generation.MaxToolTurns, want.Generation.LeaseTTL = 7, 30*time.Second
	if diff := cmp.Diff(want, cfg); diff != "" {
		t.Errorf("config (-want +got):\n%s", diff)
	}
}

// A misspelt key is matched to the closest known key; nothing is
// suggested when none is close.
func TestClosest(t *testing.T) {
	t.Parallel()
	known := []string{"listen", "generation", "tls", "log", "store"}
	for _, tc := range []struct{ name, want string }{
		{"generaton", "generation"}, {"listn", "listen"}, {"Listen", "listen"}, {"tsl", "tls"}, {"stroe", "store"},
		{"xyz", ""}, {"logging", ""}, {"gen", ""},
	} {
		got, _ := closest(tc.name, known)
		if got != tc.want {
			t.Errorf("closest(%q) = %q, want %q", tc.name, got, tc.want)
		}
	}
}

// A value written where a section, a map, a list or a string belongs may
// be a secret: a problem says where it is and what to write, never what
// it holds; a file that is one value (a token file given as --config, say)
// too.
func TestLoadNeverShowsAValue(t *testing.T) {
	t.Parallel()
	const secret = "sk-cnry-7a1d"
	for _, file := range []string{
		"providers: {openai: " + secret + "}\n",
		"bridge: {servers: {x: " + secret + "}}\n",
		"bridge: {servers: {x: {url: https://a.example/mcp, headers: " + secret + "}}}\n",
		"bridge: {servers: {x: {command: x, args: --token=" + secret + "}}}\n",
		secret + "\n",
	} {
		_, lines := loadFile(t, file, nil)
		if len(lines) == 0 {
			t.Errorf("%q loaded", file)
		}
		if text := strings.Join(lines, "\n"); strings.Contains(text, secret) {
			t.Errorf("%q: the error shows the value:\n%s", file, text)
		}
	}
}

// A null list item is no item, as YAML decoders have it, and a file that
// is null is an empty one: the defaults.
func TestLoadNulls(t *testing.T) {
	t.Parallel()
	cfg, lines := loadFile(t, "bridge:\n  allowed_commands: [npx, ~]\n  servers: {x: {command: x, args: [--verbose, ~]}}\n", nil)
	if lines != nil {
		t.Fatalf("Load: %v", lines)
	}
	if got := cfg.Bridge.AllowedCommands; !slices.Equal(got, []string{"npx"}) {
		t.Errorf("allowed_commands = %q; want [npx]", got)
	}
	if got := cfg.Bridge.Servers["x"].Args; !slices.Equal(got, []string{"--verbose"}) {
		t.Errorf("args = %q; want [--verbose]", got)
	}
	if cfg, lines := loadFile(t, "---\n~\n", nil); lines != nil || cfg.Listen != Default().Listen {
		t.Errorf("a null file: %v, listen %q; want the defaults", lines, cfg.Listen)
	}
}

// oauth.identity_provider names one way to the identity provider's token
// endpoint, by absolute URLs, and a secret file only for a client.
func TestIdentityProviderSettings(t *testing.T) {
	t.Parallel()
	cfg := Default()
	cfg.OAuth.IdentityProvider = IdentityProvider{Issuer: "idp.example", TokenEndpoint: "https://idp.example/token", ClientSecretFile: "/run/secrets/idp"}
	want := "oauth.identity_provider: issuer and token_endpoint exclude each other\n" +
		"oauth.identity_provider.issuer: must be an absolute http or https URL without a fragment\n" +
		"oauth.identity_provider.client_secret_file: needs client_id"
	if err := cfg.Validate(); err == nil || err.Error() != want {
		t.Errorf("Validate() = %v, want %q", err, want)
	}
	cfg.OAuth.IdentityProvider = IdentityProvider{Issuer: "https://idp.example", ClientID: "agentd"}
	if err := cfg.Validate(); err != nil {
		t.Errorf("Validate() = %v", err)
	}
}
