package app_test

import (
	"context"
	"errors"
	"log/slog"
	"net"
	"net/http"
	"regexp"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/agentd/agentd/internal/logtest"

	"github.com/agentd/agentd/internal/app"
	"github.com/agentd/agentd/internal/auth"
	"github.com/agentd/agentd/internal/config"
	"github.com/agentd/agentd/internal/tlsconf/tlstest"
)

// servingLine is agentd serve's first line, with its address and the
// admin service's.
var servingLine = regexp.MustCompile(`msg="agentd serving" address=(\S+) bridge=embedded admin=(\S+)`)

// serveUntilLogged runs serve (named name: ServeAgent, ServeBridge) until
// log holds serving, then ends its context: serve must return nil.
func serveUntilLogged(t *testing.T, name string, log *logtest.Logs, serving string, serve func(context.Context) error) {
	t.Helper()
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	done := make(chan error, 1)
	go func() { done <- serve(ctx) }()
	deadline := time.Now().Add(time.Minute) // a margin a loaded machine keeps (X-H6)
	for !strings.Contains(log.String(), serving) {
		select {
		case err := <-done:
			t.Fatalf("%s = %v before serving; log:\n%s", name, err, log.String())
		case <-time.After(10 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s never served; log:\n%s", name, log.String())
		}
	}
	cancel()
	if err := <-done; err != nil {
		t.Errorf("%s = %v after its context ended", name, err)
	}
}

// X-I1: without authentication agentd listens only on loopback: an
// address beyond the machine refuses to start, naming the setting and the
// way out, for agentd serve and agentd bridge alike; --insecure lets it
// start, with a warning, and so do API keys (auth.api_keys) and client
// certificates mapped to principals (auth.mtls), without one.
func TestListenBeyondLoopback(t *testing.T) {
	t.Parallel()
	options := func(edit func(*config.Config), log *logtest.Logs) app.Options {
		cfg := config.Default()
		cfg.StateDir = t.TempDir()
		cfg.ShutdownDrain = 0
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
		{"X-I4 TLS alone is not authentication", app.ServeAgent, func(c *config.Config) {
			c.Listen = "0.0.0.0:0"
			c.TLS = config.TLS{CertFile: "cert.pem", KeyFile: "key.pem", ClientCAFile: "ca.pem", MinVersion: "1.2"}
		}, "listen 0.0.0.0:0"},
		{"X-I4 nor on the bridge", app.ServeBridge, func(c *config.Config) {
			c.Bridge.Listen = ":0"
			c.Bridge.TLS = config.TLS{CertFile: "cert.pem", KeyFile: "key.pem", MinVersion: "1.2"}
		}, "bridge.listen :0"},
		{"X-I5 agentd serve's admin.listen on every interface", app.ServeAgent, func(c *config.Config) { c.Admin.Listen = "0.0.0.0:0" }, "admin.listen 0.0.0.0:0"},
		{"X-I5 agentd bridge's admin.listen on every interface", app.ServeBridge, func(c *config.Config) { c.Admin.Listen = ":0" }, "admin.listen :0"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			var log logtest.Logs
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
	ca := tlstest.NewCA(t)
	mtls := tlsFiles(t, ca.Leaf(t, "agentd"), ca, time.Now())
	for _, tc := range []struct {
		name string
		edit func(*config.Config)
		warn bool
	}{
		{"X-I1 insecure starts, warning", func(c *config.Config) { c.Insecure = true }, true},
		{"X-I1 API keys let it start, without a warning", func(c *config.Config) {
			c.Auth.APIKeys = []config.APIKey{{Name: "ci", SHA256: auth.HashKey("k"), Tenant: "t", Roles: []string{auth.RoleGenerate}}}
		}, false},
		{"X-I5 API keys let admin.listen start beyond loopback too", func(c *config.Config) {
			c.Admin.Listen = "0.0.0.0:0"
			c.Auth.APIKeys = []config.APIKey{{Name: "ci", SHA256: auth.HashKey("k"), Tenant: "t", Roles: []string{auth.RoleAdmin}}}
		}, false},
		{"X-I1 client certificates mapped by auth.mtls let it start, without a warning", func(c *config.Config) {
			c.TLS = mtls
			c.Auth.MTLS.Principals = []config.MTLSPrincipal{{Principal: "spiffe://example.org/app", Tenant: "t", Roles: []string{auth.RoleGenerate}}}
		}, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			var log logtest.Logs
			serveUntilLogged(t, "ServeAgent", &log, "agentd serving", func(ctx context.Context) error {
				return app.ServeAgent(ctx, options(func(c *config.Config) {
					c.Listen = "0.0.0.0:0"
					c.Bridge.Pool.Warm = 0
					tc.edit(c)
				}, &log))
			})
			if m := servingLine.FindStringSubmatch(log.String()); m == nil || (m[1] == m[2]) != !strings.Contains(tc.name, "admin.listen") {
				t.Errorf("the log does not say where the admin service is (beside the AgentService, or on admin.listen):\n%s", log.String())
			}
			if warned := strings.Contains(log.String(), "serving unauthenticated"); warned != tc.warn {
				t.Errorf("warned that agentd serves unauthenticated callers: %v, want %v; log:\n%s", warned, tc.warn, log.String())
			}
		})
	}
}

// An address already in use, the first thing a second agentd on one
// machine meets, refuses the start naming the listener's setting and every
// way to set it, for each listener agentd serve and agentd bridge open.
func TestListenAddressInUse(t *testing.T) {
	t.Parallel()
	taken, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { taken.Close() })
	addr := taken.Addr().String()
	for _, tc := range []struct {
		setting string
		serve   func(context.Context, app.Options) error
		edit    func(*config.Config)
		setBy   []string
	}{
		{"listen", app.ServeAgent, func(c *config.Config) { c.Listen = addr }, []string{"AGENTD_LISTEN", "--listen", "make run LISTEN="}},
		{"admin.listen", app.ServeAgent, func(c *config.Config) { c.Admin.Listen = addr }, []string{"AGENTD_ADMIN_LISTEN", "--admin-listen"}},
		{"metrics.listen", app.ServeAgent, func(c *config.Config) { c.Metrics.Listen = addr }, []string{"AGENTD_METRICS_LISTEN"}},
		{"debug.listen", app.ServeAgent, func(c *config.Config) { c.Debug.Listen = addr }, []string{"AGENTD_DEBUG_LISTEN"}},
		{"bridge.listen", app.ServeBridge, func(c *config.Config) { c.Bridge.Listen = addr }, []string{"AGENTD_BRIDGE_LISTEN", "agentd bridge --listen"}},
	} {
		t.Run(tc.setting, func(t *testing.T) {
			t.Parallel()
			cfg := config.Default()
			cfg.StateDir = t.TempDir()
			cfg.Listen, cfg.Bridge.Listen = "127.0.0.1:0", "127.0.0.1:0"
			cfg.Bridge.Pool.Warm = 0
			tc.edit(&cfg)
			var log logtest.Logs
			o := app.Options{Config: cfg, Logger: slog.New(slog.NewTextHandler(&log, nil)), Metrics: http.NotFoundHandler()}
			err := tc.serve(t.Context(), o)
			if !errors.Is(err, syscall.EADDRINUSE) {
				t.Fatalf("serve = %v; want the address in use", err)
			}
			for _, want := range append([]string{tc.setting + ": listen tcp " + addr, "address already in use", "set " + tc.setting + " ("}, tc.setBy...) {
				if !strings.Contains(err.Error(), want) {
					t.Errorf("error %q does not say %q", err, want)
				}
			}
		})
	}
}
