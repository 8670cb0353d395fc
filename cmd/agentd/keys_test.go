package main

import (
	"bytes"
	"context"
	"fmt"
	"log/slog"
	"net"
	"path/filepath"
	"strings"
	"testing"

	"github.com/agentd/agentd/internal/app"
	"github.com/agentd/agentd/internal/auth"
	"github.com/agentd/agentd/internal/config"
)

// X-I2 from the terminal: `agentd keys hash` prints what auth.api_keys
// holds of a key, and `agentd generate --token` sends the key, without
// which the same generation is refused.
func TestKeysAndToken(t *testing.T) {
	var hash bytes.Buffer
	if err := run(t.Context(), []string{"keys", "hash"}, strings.NewReader("sk-terminal\n"), &hash, &bytes.Buffer{}); err != nil {
		t.Fatal(err)
	}
	if got := strings.TrimSpace(hash.String()); got != auth.HashKey("sk-terminal") || len(got) != 64 {
		t.Fatalf("keys hash printed %q", got)
	}

	cfg := config.Default()
	cfg.StateDir = t.TempDir()
	cfg.Bridge.Pool.Warm = 0
	cfg.Auth.APIKeys = []config.APIKey{{Name: "terminal", SHA256: strings.TrimSpace(hash.String()), Tenant: "t", Roles: []string{auth.RoleGenerate}}}
	addr := serveAgent(t, cfg)

	generate := func(extra ...string) (string, error) {
		var out bytes.Buffer
		args := append([]string{"generate", "--addr", addr, "--provider", "mock", "--prompt", "hi"}, extra...)
		err := run(t.Context(), args, strings.NewReader(""), &out, &bytes.Buffer{})
		return out.String(), err
	}
	t.Setenv("AGENTD_TOKEN", "")
	if _, err := generate(); err == nil || !strings.Contains(err.Error(), "Unauthenticated") {
		t.Errorf("generate without --token: %v; want Unauthenticated", err)
	}
	if out, err := generate("--token", "sk-terminal"); err != nil || !strings.Contains(out, "completed") {
		t.Errorf("generate --token: %v, output:\n%s", err, out)
	}
}

// serveAgent serves agentd with cfg on a loopback port until the test
// ends, and returns its address.
func serveAgent(t *testing.T, cfg config.Config) string {
	t.Helper()
	cfg.ShutdownDrain = 0 // stopped by the test, with no load balancer to tell
	o := app.Options{Config: cfg, Logger: slog.New(slog.DiscardHandler)}
	a, err := app.NewAgent(o)
	if err != nil {
		t.Fatal(err)
	}
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- a.Serve(ctx, lis, o) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("Serve: %v", err)
		}
	})
	return lis.Addr().String()
}

// X-I2 from the terminal: neither `agentd keys hash` nor `agentd generate`
// prints the key it is given, wherever it comes from (stdin, --token,
// AGENTD_TOKEN) and however the command fails: a refused key, a key
// gRPC cannot send, a bad flag, the usage. Nor does `agentd generate`
// print the path of its --tls-key (X-I4).
func TestKeyNeverPrinted(t *testing.T) {
	const canary = "sk-cnry-terminal-7e5d"
	keyDir := filepath.Join(t.TempDir(), "cnry-terminal-keys")
	cfg := config.Default()
	cfg.StateDir = t.TempDir()
	cfg.Bridge.Pool.Warm = 0
	cfg.Auth.APIKeys = []config.APIKey{{Name: "terminal", SHA256: auth.HashKey("sk-other"), Tenant: "t", Roles: []string{auth.RoleGenerate}}}
	addr := serveAgent(t, cfg)

	type result struct {
		out, errOut string
		err         error
	}
	runWith := func(env string, stdin string, args ...string) result {
		t.Setenv("AGENTD_TOKEN", env)
		var out, errOut bytes.Buffer
		err := run(t.Context(), args, strings.NewReader(stdin), &out, &errOut)
		return result{out.String(), errOut.String(), err}
	}
	generate := []string{"generate", "--addr", addr, "--provider", "mock", "--prompt", "hi"}
	for _, tc := range []struct {
		name    string
		r       result
		wantErr string // what the error says, proving the key was used
	}{
		{"keys hash", runWith("", canary+"\n", "keys", "hash"), ""},
		{"keys hash given the key as an argument", runWith("", "", "keys", "hash", canary), "usage"},
		{"keys given the key as the subcommand", runWith("", "", "keys", canary), "usage"},
		{"generate --token refused", runWith("", "", append(generate, "--token", canary)...), "Unauthenticated"},
		{"generate with AGENTD_TOKEN refused", runWith(canary, "", generate...), "Unauthenticated"},
		{"generate --token that gRPC cannot send", runWith("", "", append(generate, "--token", canary+"\n")...), "non-printable"},
		{"generate --token with a bad flag", runWith("", "", "generate", "--token", canary, "--no-such-flag"), "no-such-flag"},
		{"generate -h with AGENTD_TOKEN", runWith(canary, "", "generate", "-h"), "help requested"},
		{"generate with AGENTD_TOKEN and a bad flag", runWith(canary, "", "generate", "--no-such-flag"), "no-such-flag"},
		{"generate --tls-key that cannot be read", runWith("", "", append(generate, "--tls-cert", filepath.Join(keyDir, "cert.pem"), "--tls-key", filepath.Join(keyDir, "key.pem"))...), "--tls-cert: no such file"},
	} {
		if tc.r.err == nil && tc.wantErr != "" || tc.r.err != nil && !strings.Contains(tc.r.err.Error(), tc.wantErr) {
			t.Errorf("%s: error %v, want one saying %q", tc.name, tc.r.err, tc.wantErr)
		}
		for what, text := range map[string]string{"error": fmt.Sprint(tc.r.err), "stdout": tc.r.out, "stderr": tc.r.errOut} {
			if strings.Contains(text, "cnry-terminal") {
				t.Errorf("%s: the %s shows the key:\n%s", tc.name, what, text)
			}
		}
	}
}
