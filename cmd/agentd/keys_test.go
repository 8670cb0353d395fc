package main

import (
	"bytes"
	"context"
	"log/slog"
	"net"
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
