package main

import (
	"context"
	"fmt"
	"io"
)

// The usage of the commands that are not agentd's clients.
var usages = map[string]string{
	"serve": `usage: agentd serve [flags]

Serves AgentService (the Generate stream, GetGeneration,
ListGenerations), with the MCP bridge embedded unless --bridge-addr
names a remote agentd bridge, until SIGINT or SIGTERM; SIGHUP reloads
the configuration file's auth. Settings come from the file (--config),
then AGENTD_* variables, then these flags; docs/configuration.md lists
them all. Provider API keys come from their variables (OPENAI_API_KEY,
ANTHROPIC_API_KEY, ...); mock and script need none.

examples:
  agentd serve
  OPENAI_API_KEY=sk-... agentd serve --listen 127.0.0.1:7070 --log-level debug
  agentd serve --config /etc/agentd/agentd.yaml --bridge-addr bridge.internal:7071
`,
	"bridge": `usage: agentd bridge [flags]

Serves BridgeService alone, for agentd serve --bridge-addr: the bridge
owns the MCP connections, the stdio servers' processes and the tool
schema cache, so that they can run on machines of their own. Settings
come as for agentd serve.

example:
  agentd bridge --listen 0.0.0.0:7071 --config /etc/agentd/bridge.yaml
`,
	"keys": `usage: agentd keys hash < KEY_FILE

Reads one API key from stdin (so that it stays out of the shell's
history and the process list) and prints its SHA-256, which is all
auth.api_keys holds of a key.

example:
  openssl rand -hex 24 > app.key && agentd keys hash < app.key
`,
	"mcp-demo": `usage: agentd mcp-demo

Runs the small MCP server built into agentd on stdin and stdout (tools
add, echo and fail). agentd's default configuration registers it as the
server "demo", which a request names with {"ref": "demo"} or --mcp demo.

example:
  agentd generate --provider mock --mcp demo --prompt 'Hello'
`,
	"version": `usage: agentd version

Prints agentd's version, commit and Go release (also agentd --version).

example:
  agentd version
`,
}

// runServer runs serve or bridge. Their flags are parsed here first as
// the command will parse them, so that -h prints the command's usage on
// stdout and a bad flag says where the usage is.
func runServer(ctx context.Context, name string, args []string, stdout, stderr io.Writer) error {
	fs := newFlagSet("agentd "+name, usages[name])
	(&commonFlags{}).register(fs, name == "serve")
	positional, err := parseFlags(fs, args, stdout)
	if err != nil {
		return err
	}
	if len(positional) > 0 {
		return fmt.Errorf("agentd %s takes flags only, not %q (\"agentd %s -h\" shows them)", name, positional[0], name)
	}
	if name == "bridge" {
		return serveBridge(ctx, args, stderr)
	}
	return serve(ctx, args, stderr)
}

// noArgs checks that a command that takes nothing was given nothing but
// -h, which prints its usage.
func noArgs(name string, args []string, stdout io.Writer) error {
	positional, err := parseFlags(newFlagSet("agentd "+name, usages[name]), args, stdout)
	if err == nil && len(positional) > 0 {
		err = fmt.Errorf("agentd %s takes no arguments (\"agentd %s -h\" shows its usage)", name, name)
	}
	return err
}
