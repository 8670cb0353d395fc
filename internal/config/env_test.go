package config

import (
	"bytes"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// The AGENTD_* variables are those agentd has always read, each setting
// the same key.
func TestEnvVariables(t *testing.T) {
	t.Parallel()
	want := map[string]string{
		"AGENTD_LISTEN": "listen", "AGENTD_SHUTDOWN_GRACE": "shutdown_grace", "AGENTD_SHUTDOWN_DRAIN": "shutdown_drain",
		"AGENTD_GC_HEAP_FLOOR_MIB": "gc_heap_floor_mib", "AGENTD_METRICS_LISTEN": "metrics.listen", "AGENTD_DEBUG_LISTEN": "debug.listen",
		"AGENTD_HTTP_CORS_ALLOWED_ORIGINS": "http.cors.allowed_origins",
		"AGENTD_INSECURE":                  "insecure", "AGENTD_REFLECTION": "reflection", "AGENTD_LOG_LEVEL": "log.level", "AGENTD_LOG_FORMAT": "log.format",
		"AGENTD_STATE_DIR": "state_dir", "AGENTD_STORE_DRIVER": "store.driver", "AGENTD_STORE_DSN": "store.dsn",
		"AGENTD_STORE_ENCRYPTION_KEY_FILE": "store.encryption_key_file", "AGENTD_STORE_PREVIOUS_ENCRYPTION_KEY_FILES": "store.previous_encryption_key_files",
		"AGENTD_OAUTH_REDIRECT_URL": "oauth.redirect_url", "AGENTD_OAUTH_CLIENT_METADATA_URL": "oauth.client_metadata_url", "AGENTD_OAUTH_CLIENT_NAME": "oauth.client_name",
		"AGENTD_OAUTH_IDENTITY_PROVIDER_ISSUER": "oauth.identity_provider.issuer", "AGENTD_OAUTH_IDENTITY_PROVIDER_TOKEN_ENDPOINT": "oauth.identity_provider.token_endpoint",
		"AGENTD_OAUTH_IDENTITY_PROVIDER_CLIENT_ID": "oauth.identity_provider.client_id", "AGENTD_OAUTH_IDENTITY_PROVIDER_CLIENT_SECRET_FILE": "oauth.identity_provider.client_secret_file",
		"AGENTD_OAUTH_IDENTITY_PROVIDER_ID_TOKEN_FILE": "oauth.identity_provider.id_token_file",
		"AGENTD_BRIDGE_ADDRESS":                        "bridge.address", "AGENTD_BRIDGE_LISTEN": "bridge.listen", "AGENTD_ADMIN_LISTEN": "admin.listen",
		"AGENTD_BRIDGE_TRUSTED_PEERS": "bridge.trusted_peers", "AGENTD_BRIDGE_ALLOW_PRIVATE_NETWORKS": "bridge.allow_private_networks",
		"AGENTD_BRIDGE_MAX_RESULT_BYTES": "bridge.max_result_bytes", "AGENTD_BRIDGE_ALLOWED_COMMANDS": "bridge.allowed_commands",
		"AGENTD_BRIDGE_DEMO": "bridge.demo", "AGENTD_PRICING_FILE": "pricing.file",
		"AGENTD_BRIDGE_TLS_CA_FILE": "bridge.tls.ca_file", "AGENTD_BRIDGE_TLS_SERVER_NAME": "bridge.tls.server_name",
	}
	for prefix, key := range map[string]string{"AGENTD_TLS_": "tls", "AGENTD_BRIDGE_TLS_": "bridge.tls", "AGENTD_ADMIN_TLS_": "admin.tls"} {
		for _, f := range []string{"cert_file", "key_file", "client_ca_file", "min_version"} {
			want[prefix+strings.ToUpper(f)] = key + "." + f
		}
	}
	got := make(map[string]string)
	for _, s := range envSettings() {
		if s.index == nil {
			t.Errorf("%s sets %s, which no variable can reach", s.env, s.key)
		}
		got[s.env] = s.key
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("variables (-want +got):\n%s", diff)
	}
}

// A misspelt AGENTD_* variable is warned about with the closest one; the
// variables agentd reads, and those of other programs, are not.
func TestEnvWarnings(t *testing.T) {
	t.Parallel()
	environ := []string{
		"AGENTD_LISTN=127.0.0.1:1", "AGENTD_LISTEN=127.0.0.1:2", "AGENTD_TOKN=sk", "AGENTD_FROBNICATE=1",
		"AGENTD_CONFIG=/etc/agentd.yaml", "AGENTD_TEST_ANYTHING=1", "HOME=/root", "OPENAI_API_KEY=sk",
	}
	want := []string{
		"AGENTD_LISTN is not a variable agentd reads; did you mean AGENTD_LISTEN?",
		"AGENTD_TOKN is not a variable agentd reads; did you mean AGENTD_TOKEN?",
		"AGENTD_FROBNICATE is not a variable agentd reads",
	}
	if diff := cmp.Diff(want, EnvWarnings(environ)); diff != "" {
		t.Errorf("EnvWarnings (-want +got):\n%s", diff)
	}
}

// No AGENTD_* variable that the repository's code, scripts or documents
// name is warned about: agentd reads it, or another program (the CLI,
// the tests) does. Go tests are left out: they may misspell one on
// purpose.
func TestEnvWarningsKnowTheTree(t *testing.T) {
	t.Parallel()
	name := regexp.MustCompile(`AGENTD_[A-Z0-9_]+`)
	found := make(map[string]string)
	err := filepath.WalkDir("../..", func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() && (d.Name() == "node_modules" || strings.HasPrefix(d.Name(), ".") && path != "../..") {
			return filepath.SkipDir
		}
		if d.IsDir() || strings.HasSuffix(path, "_test.go") || strings.HasPrefix(path, filepath.Join("..", "..", "internal", "config")) {
			return nil
		}
		data, err := os.ReadFile(path)
		if err != nil || bytes.IndexByte(data, 0) >= 0 {
			return err
		}
		for _, n := range name.FindAllString(string(data), -1) {
			if !strings.HasSuffix(n, "_") { // a prefix: AGENTD_TLS_*
				found[n+"="] = path
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if found["AGENTD_TOKEN="] == "" {
		t.Fatalf("the walk from ../.. found no AGENTD_TOKEN (cmd/agentd reads it); found %d names", len(found))
	}
	var environ []string
	for kv := range found {
		environ = append(environ, kv)
	}
	for _, w := range EnvWarnings(environ) {
		v, _, _ := strings.Cut(w, " ")
		t.Errorf("%s (named in %s)", w, found[v+"="])
	}
}
