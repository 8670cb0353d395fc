package main

import (
	"bytes"
	"errors"
	"flag"
	"strings"
	"testing"

	"github.com/agentd/agentd/internal/config"
	"github.com/agentd/agentd/internal/tlsconf/tlstest"
)

// X-I4 from the terminal: `agentd generate` dials agentd over TLS with
// --tls-ca, and presents a client certificate with --tls-cert and
// --tls-key to an agentd that requires one (tls.client_ca_file). The flags
// default to AGENTD_TLS_CA, AGENTD_TLS_CERT and AGENTD_TLS_KEY, and a flag
// given, even empty, overrides its variable.
func TestGenerateTLS(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	ca, other := tlstest.NewCA(t), tlstest.NewCA(t)
	caFile, otherCA := ca.WriteFile(t, dir, "ca"), other.WriteFile(t, dir, "other-ca")
	serverCert, serverKey := ca.Leaf(t, "agentd").WriteFiles(t, dir, "server")
	clientCert, clientKey := ca.Leaf(t, "terminal").WriteFiles(t, dir, "client")
	strangerCert, strangerKey := other.Leaf(t, "stranger").WriteFiles(t, dir, "stranger")

	cfg := config.Default()
	cfg.StateDir = t.TempDir()
	cfg.Bridge.Pool.Warm = 0
	cfg.TLS = config.TLS{CertFile: serverCert, KeyFile: serverKey, ClientCAFile: caFile, MinVersion: "1.2"}
	addr := serveAgent(t, cfg)

	mutual := []string{"--tls-ca", caFile, "--tls-cert", clientCert, "--tls-key", clientKey}
	mutualEnv := map[string]string{"AGENTD_TLS_CA": caFile, "AGENTD_TLS_CERT": clientCert, "AGENTD_TLS_KEY": clientKey}
	for _, tc := range []struct {
		name  string
		env   map[string]string
		flags []string
		ok    bool
	}{
		{"X-I4 plaintext", nil, nil, false},
		{"X-I4 TLS without a client certificate", nil, []string{"--tls-ca", caFile}, false},
		{"X-I4 TLS with a client certificate", nil, mutual, true},
		{"X-I4 TLS for the name localhost", nil, append(mutual, "--tls-server-name", "localhost"), true},
		{"X-I4 TLS for a name the certificate lacks", nil, append(mutual, "--tls-server-name", "agentd.example"), false},
		{"X-I4 TLS from the environment", mutualEnv, nil, true},
		{"X-I4 the environment's CA without a client certificate", map[string]string{"AGENTD_TLS_CA": caFile}, nil, false},
		{"X-I4 flags override the environment", map[string]string{"AGENTD_TLS_CA": otherCA, "AGENTD_TLS_CERT": strangerCert, "AGENTD_TLS_KEY": strangerKey}, mutual, true},
		{"X-I4 the environment's certificate of another CA", map[string]string{"AGENTD_TLS_CA": caFile, "AGENTD_TLS_CERT": strangerCert, "AGENTD_TLS_KEY": strangerKey}, nil, false},
		{"X-I4 empty flags override the environment", mutualEnv, []string{"--tls-cert", "", "--tls-key", ""}, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			var out bytes.Buffer
			args := append([]string{"--addr", addr, "--provider", "mock", "--prompt", "hi"}, tc.flags...)
			getenv := func(name string) string { return tc.env[name] }
			err := generate(t.Context(), args, getenv, strings.NewReader(""), &out, &bytes.Buffer{})
			if got := err == nil && strings.Contains(out.String(), "completed"); got != tc.ok {
				t.Errorf("generate with %v and flags %v: %v, output:\n%s; want success %v", tc.env, tc.flags, err, out.String(), tc.ok)
			}
		})
	}
}

// X-I4: the usage of `agentd generate` shows nothing of what AGENTD_TOKEN
// and AGENTD_TLS_* hold: the flags take them after parsing, not as
// defaults the flag package would print.
func TestGenerateUsageHidesEnvironment(t *testing.T) {
	t.Parallel()
	env := map[string]string{"AGENTD_TOKEN": "sk-cnry-usage", "AGENTD_TLS_CA": "/cnry/ca.pem", "AGENTD_TLS_CERT": "/cnry/cert.pem", "AGENTD_TLS_KEY": "/cnry/key.pem"}
	var out, errOut bytes.Buffer
	err := generate(t.Context(), []string{"-h"}, func(name string) string { return env[name] }, strings.NewReader(""), &out, &errOut)
	if !errors.Is(err, flag.ErrHelp) {
		t.Errorf("generate -h: %v; want flag.ErrHelp", err)
	}
	if !strings.Contains(out.String(), "AGENTD_TLS_KEY") {
		t.Errorf("the usage does not name AGENTD_TLS_KEY:\n%s", out.String())
	}
	if strings.Contains(out.String()+errOut.String(), "cnry") {
		t.Errorf("the usage shows what the environment holds:\n%s%s", out.String(), errOut.String())
	}
}
