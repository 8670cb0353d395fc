package app_test

import (
	"bytes"
	"context"
	"errors"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/agentd/agentd/internal/app"
	"github.com/agentd/agentd/internal/config"
)

// syncBuffer is a log destination that tests read while agentd writes.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// X-I1: agentd authenticates no caller, so it listens only on loopback: an
// address beyond the machine refuses to start, naming the setting and the
// way out, for agentd serve and agentd bridge alike; --insecure lets it
// start, with a warning.
func TestListenBeyondLoopback(t *testing.T) {
	t.Parallel()
	options := func(edit func(*config.Config), log *syncBuffer) app.Options {
		cfg := config.Default()
		cfg.StateDir = t.TempDir()
		edit(&cfg)
		return app.Options{Config: cfg, Logger: slog.New(slog.NewTextHandler(log, nil))}
	}
	for _, tc := range []struct {
		name    string
		serve   func(context.Context, app.Options) error
		edit    func(*config.Config)
		setting string
	}{
		{"X-I1 agentd serve on every interface", app.ServeAgent, func(c *config.Config) { c.Listen = "0.0.0.0:0" }, "listen 0.0.0.0:0"},
		{"X-I1 agentd serve on a host name", app.ServeAgent, func(c *config.Config) { c.Listen = "agentd.internal:0" }, "listen agentd.internal:0"},
		{"X-I1 agentd bridge on every interface", app.ServeBridge, func(c *config.Config) { c.Bridge.Listen = ":0" }, "bridge.listen :0"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			var log syncBuffer
			err := tc.serve(t.Context(), options(tc.edit, &log))
			if !errors.Is(err, app.ErrExposed) {
				t.Fatalf("serve = %v; want ErrExposed", err)
			}
			for _, want := range []string{tc.setting, "--insecure", "127.0.0.1"} {
				if !strings.Contains(err.Error(), want) {
					t.Errorf("error %q does not say %q", err, want)
				}
			}
		})
	}
	t.Run("X-I1 insecure starts, warning", func(t *testing.T) {
		t.Parallel()
		var log syncBuffer
		ctx, cancel := context.WithCancel(t.Context())
		done := make(chan error, 1)
		go func() {
			done <- app.ServeAgent(ctx, options(func(c *config.Config) {
				c.Listen = "0.0.0.0:0"
				c.Insecure = true
				c.Bridge.Pool.Warm = 0
			}, &log))
		}()
		deadline := time.Now().Add(time.Minute) // a margin a loaded machine keeps (X-H6)
		for !strings.Contains(log.String(), "agentd serving") {
			select {
			case err := <-done:
				t.Fatalf("ServeAgent = %v before serving; log:\n%s", err, log.String())
			case <-time.After(10 * time.Millisecond):
			}
			if time.Now().After(deadline) {
				t.Fatalf("agentd never served; log:\n%s", log.String())
			}
		}
		cancel()
		if err := <-done; err != nil {
			t.Errorf("ServeAgent = %v after its context ended", err)
		}
		if !strings.Contains(log.String(), "level=WARN") || !strings.Contains(log.String(), "unauthenticated") {
			t.Errorf("no warning that agentd serves unauthenticated callers; log:\n%s", log.String())
		}
	})
}
