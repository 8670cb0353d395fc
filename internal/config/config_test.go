package config

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
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
			name: "servers in a file replace the default registrations",
			file: "bridge:\n  servers:\n    files: {command: /usr/bin/mcp-files, args: [--root, /tmp], env: {A: b}}\n",
			want: func(c *Config) {
				c.Bridge.Servers = map[string]Server{"files": {Command: "/usr/bin/mcp-files", Args: []string{"--root", "/tmp"}, Env: map[string]string{"A": "b"}}}
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
			name: "X-I5 admin.listen and admin.tls in the file, reflection off by the environment",
			file: "admin: {listen: 127.0.0.1:7072, tls: {cert_file: a.pem, key_file: a.key}}\n",
			env:  map[string]string{"AGENTD_REFLECTION": "false", "AGENTD_ADMIN_TLS_CLIENT_CA_FILE": "ca.pem"},
			want: func(c *Config) {
				c.Admin = Admin{Listen: "127.0.0.1:7072", TLS: TLS{CertFile: "a.pem", KeyFile: "a.key", ClientCAFile: "ca.pem", MinVersion: "1.2"}}
				c.Reflection = false
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
			wantErrs: []string{"log.level", "log.format", "generation.max_tool_turns", "bridge.servers.x.command", "bridge.servers.y.command"},
		},
		{
			name:     "X-I4 a certificate without its key, a client CA without a certificate, TLS 1.1",
			file:     "tls: {cert_file: c.pem, min_version: \"1.1\"}\nbridge: {tls: {client_ca_file: ca.pem}}\n",
			wantErrs: []string{"tls: cert_file and key_file must be set together", "tls.min_version", "bridge.tls.client_ca_file"},
		},
		{
			name:     "X-I5 admin.tls without admin.listen",
			env:      map[string]string{"AGENTD_ADMIN_TLS_CERT_FILE": "c.pem", "AGENTD_ADMIN_TLS_KEY_FILE": "k.pem"},
			wantErrs: []string{"admin.tls: needs admin.listen"},
		},
		{name: "answer timeout above its cap", file: "generation: {answer_timeout: 2h}\n", wantErrs: []string{"generation.answer_timeout"}},
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
