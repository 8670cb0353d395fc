package main

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/agentd/agentd/internal/config"
	"github.com/agentd/agentd/internal/tlsconf/tlstest"
)

// X-I4 from the terminal: `agentd generate` dials agentd over TLS with
// --tls-ca, and presents a client certificate with --tls-cert and
// --tls-key to an agentd that requires one (tls.client_ca_file).
func TestGenerateTLS(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	write := func(name string, data []byte) string {
		path := filepath.Join(dir, name)
		if err := os.WriteFile(path, data, 0o600); err != nil {
			t.Fatal(err)
		}
		return path
	}
	ca := tlstest.NewCA(t)
	server, client := ca.Leaf(t, "agentd"), ca.Leaf(t, "terminal")
	caFile := write("ca.pem", ca.PEM)
	clientCert, clientKey := write("client.pem", client.CertPEM), write("client-key.pem", client.KeyPEM)

	cfg := config.Default()
	cfg.StateDir = t.TempDir()
	cfg.Bridge.Pool.Warm = 0
	cfg.TLS = config.TLS{CertFile: write("cert.pem", server.CertPEM), KeyFile: write("key.pem", server.KeyPEM), ClientCAFile: caFile, MinVersion: "1.2"}
	addr := serveAgent(t, cfg)

	for _, tc := range []struct {
		name  string
		flags []string
		ok    bool
	}{
		{"X-I4 plaintext", nil, false},
		{"X-I4 TLS without a client certificate", []string{"--tls-ca", caFile}, false},
		{"X-I4 TLS with a client certificate", []string{"--tls-ca", caFile, "--tls-cert", clientCert, "--tls-key", clientKey}, true},
		{"X-I4 TLS for the name localhost", []string{"--tls-ca", caFile, "--tls-cert", clientCert, "--tls-key", clientKey, "--tls-server-name", "localhost"}, true},
		{"X-I4 TLS for a name the certificate lacks", []string{"--tls-ca", caFile, "--tls-cert", clientCert, "--tls-key", clientKey, "--tls-server-name", "agentd.example"}, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			var out bytes.Buffer
			args := append([]string{"generate", "--addr", addr, "--token", "", "--provider", "mock", "--prompt", "hi"}, tc.flags...)
			err := run(t.Context(), args, strings.NewReader(""), &out, &bytes.Buffer{})
			if got := err == nil && strings.Contains(out.String(), "completed"); got != tc.ok {
				t.Errorf("generate %v: %v, output:\n%s; want success %v", tc.flags, err, out.String(), tc.ok)
			}
		})
	}
}
