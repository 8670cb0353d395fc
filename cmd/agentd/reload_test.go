package main

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/agentd/agentd/internal/logtest"

	"github.com/agentd/agentd/internal/auth"
)

// X-I2: `agentd serve` reads its config file again on SIGHUP and applies
// its auth: a key revoked in the file is Unauthenticated after the signal,
// the key added is served; a file that no longer loads changes nothing,
// and the log says so.
func TestSIGHUPReloadsKeys(t *testing.T) {
	t.Setenv("AGENTD_TOKEN", "")
	dir := t.TempDir()
	path := filepath.Join(dir, "agentd.yaml")
	writeConfig := func(key string) {
		t.Helper()
		cfg := fmt.Sprintf("listen: 127.0.0.1:0\nshutdown_drain: 0s\nstate_dir: %s\nbridge: {pool: {warm: 0}}\nauth:\n  api_keys: [{name: app, sha256: %s, tenant: acme, roles: [generate]}]\n",
			filepath.Join(dir, "state"), auth.HashKey(key))
		if err := os.WriteFile(path, []byte(cfg), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	writeConfig("sk-before")
	var logs logtest.Logs
	hup := make(chan os.Signal)
	ctx, cancel := context.WithCancel(t.Context())
	done := make(chan error, 1)
	go func() { done <- serveReloading(ctx, []string{"--config", path}, &logs, hup) }()
	defer func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("serve: %v", err)
		}
	}()
	waitLog := func(want string) {
		t.Helper()
		deadline := time.Now().Add(time.Minute) // a margin a loaded machine keeps (X-H6)
		for !strings.Contains(logs.String(), want) {
			select {
			case err := <-done:
				t.Fatalf("serve = %v; log:\n%s", err, logs.String())
			case <-time.After(10 * time.Millisecond):
			}
			if time.Now().After(deadline) {
				t.Fatalf("the log never said %q:\n%s", want, logs.String())
			}
		}
	}
	waitLog("agentd serving")
	addr := regexp.MustCompile(`address=(127\.0\.0\.1:\d+)`).FindStringSubmatch(logs.String())[1]
	generate := func(token string) error {
		return run(t.Context(), []string{"generate", "--addr", addr, "--provider", "mock", "--prompt", "hi", "--token", token}, strings.NewReader(""), &bytes.Buffer{}, &bytes.Buffer{})
	}
	if err := generate("sk-before"); err != nil {
		t.Fatalf("before the reload: %v", err)
	}

	writeConfig("sk-after")
	hup <- syscall.SIGHUP
	waitLog("config reloaded")
	if err := generate("sk-before"); err == nil || !strings.Contains(err.Error(), "Unauthenticated") {
		t.Errorf("X-I2 the revoked key after SIGHUP: %v; want Unauthenticated", err)
	}
	if err := generate("sk-after"); err != nil {
		t.Errorf("X-I2 the new key after SIGHUP: %v", err)
	}

	if err := os.WriteFile(path, []byte("auth: {api_keys: [{name: app, sha256: nope}]}\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	hup <- syscall.SIGHUP
	waitLog("configuration not reloaded")
	if err := generate("sk-after"); err != nil {
		t.Errorf("X-I2 the running key after a broken file: %v", err)
	}
}
