package app_test

import (
	"context"
	"log/slog"
	"strings"
	"testing"

	"github.com/agentd/agentd/internal/app"
	"github.com/agentd/agentd/internal/config"
	"github.com/agentd/agentd/internal/logtest"
)

// agentd serve says at start, at info level, which providers its
// configuration gives an API key, which it gives none (naming the
// variable that would), which need none, and which tenants set keys of
// their own; and which MCP servers a request may ref:, each with its
// command or its URL's host. agentd bridge says the same of its servers.
// No key, secret, argument, env value, header or URL path is logged.
func TestStartupSaysWhatItServes(t *testing.T) {
	t.Parallel()
	const secret = "sk-cnry-5e1d"
	cfg := config.Default()
	cfg.StateDir = t.TempDir()
	cfg.Listen, cfg.Bridge.Listen = "127.0.0.1:0", "127.0.0.1:0"
	cfg.ShutdownDrain = 0
	cfg.Bridge.Pool.Warm = 0
	cfg.Providers = map[string]config.Provider{
		"openai": {APIKey: secret},
		"azure":  {APIKey: secret}, // without its endpoint
	}
	cfg.Tenants = map[string]config.Tenant{
		"acme":   {Providers: map[string]config.Provider{"anthropic": {APIKey: secret}, "gemini": {BaseURL: "https://gemini.example"}}},
		"globex": {},
	}
	cfg.Bridge.Servers = map[string]config.Server{
		"demo":  {Command: "/opt/agentd", Args: []string{"mcp-demo"}},
		"files": {Command: "/usr/bin/mcp-files", Args: []string{"--token=" + secret}, Env: map[string]string{"TOKEN": secret}},
		"docs":  {URL: "https://docs.example:8443/mcp/" + secret + "?key=" + secret, Headers: map[string]string{"X-Key": secret}, Authorization: secret},
	}
	for _, tc := range []struct {
		name    string
		serve   func(context.Context, app.Options) error
		serving string
		want    []string
	}{
		{"agentd serve", app.ServeAgent, "agentd serving", []string{
			`level=INFO msg=providers with_key=openai without_key="anthropic (ANTHROPIC_API_KEY), azure (AZURE_OPENAI_ENDPOINT), deepseek (DEEPSEEK_API_KEY), ` +
				`gemini (GEMINI_API_KEY or GOOGLE_API_KEY), openai-responses (OPENAI_API_KEY), openrouter (OPENROUTER_API_KEY), requesty (REQUESTY_API_KEY)" ` +
				`needing_none="mock, ollama, router, script" tenants_with_own_keys="acme (anthropic)"`,
			`level=INFO msg="MCP servers registered" servers="demo (command /opt/agentd), docs (url docs.example:8443), files (command /usr/bin/mcp-files)"`,
		}},
		{"agentd bridge", app.ServeBridge, "agentd bridge serving", []string{
			`level=INFO msg="MCP servers registered" servers="demo (command /opt/agentd), docs (url docs.example:8443), files (command /usr/bin/mcp-files)"`,
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			var log logtest.Logs
			o := app.Options{Config: cfg, Logger: slog.New(slog.NewTextHandler(&log, nil))}
			serveUntilLogged(t, tc.name, &log, tc.serving, func(ctx context.Context) error { return tc.serve(ctx, o) })
			for _, want := range tc.want {
				if !strings.Contains(log.String(), want) {
					t.Errorf("the log does not say\n%s\nlog:\n%s", want, log.String())
				}
			}
			if strings.Contains(log.String(), secret) || strings.Contains(log.String(), "docs.example:8443/") {
				t.Errorf("the log shows a secret or a URL's path:\n%s", log.String())
			}
		})
	}
}

// With a remote bridge, agentd serve lists only the url servers it
// resolves itself: the command servers are the remote bridge's.
func TestStartupRemoteBridgeServers(t *testing.T) {
	t.Parallel()
	cfg := config.Default()
	cfg.StateDir = t.TempDir()
	cfg.Listen = "127.0.0.1:0"
	cfg.ShutdownDrain = 0
	cfg.Bridge.Address = "127.0.0.1:1"
	cfg.Bridge.Servers["docs"] = config.Server{URL: "https://docs.example/mcp"}
	var log logtest.Logs
	o := app.Options{Config: cfg, Logger: slog.New(slog.NewTextHandler(&log, nil))}
	serveUntilLogged(t, "ServeAgent", &log, "agentd serving", func(ctx context.Context) error { return app.ServeAgent(ctx, o) })
	if want := `msg="MCP servers registered" servers="docs (url docs.example)" command_servers="the remote bridge's"`; !strings.Contains(log.String(), want) {
		t.Errorf("the log does not say\n%s\nlog:\n%s", want, log.String())
	}
}
