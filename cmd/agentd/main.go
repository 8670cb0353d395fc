// Command agentd runs LLM agents whose tools come from MCP servers, as a
// gRPC service.
//
//	agentd serve      AgentService with the bridge embedded (default 127.0.0.1:7070)
//	agentd bridge     BridgeService alone (default 127.0.0.1:7071)
//	agentd generate   run a generation against a running agentd and print its events
//	agentd keys hash  print the SHA-256 of an API key read from stdin (for auth.api_keys)
//	agentd mcp-demo   the built-in demo MCP server, on stdio
//	agentd version    print the version, commit and Go release (also --version)
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"syscall"

	"github.com/agentd/agentd/internal/version"
)

const usage = `usage: agentd <command> [flags]

commands:
  serve      serve AgentService, with the bridge embedded unless --bridge-addr is set
  bridge     serve BridgeService alone
  generate   run a generation against a running agentd and print its events
  keys hash  print the SHA-256 of an API key read from stdin, for auth.api_keys
  mcp-demo   run the built-in demo MCP server on stdin/stdout
  version    print agentd's version, commit and Go release (also --version)

Run "agentd <command> -h" for a command's flags.
`

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	// The first signal starts a graceful shutdown; a second one, with the
	// default handling restored, ends the process at once.
	context.AfterFunc(ctx, stop)
	err := run(ctx, os.Args[1:], os.Stdin, os.Stdout, os.Stderr)
	stop()
	if err != nil {
		if !errors.Is(err, flag.ErrHelp) {
			fmt.Fprintln(os.Stderr, "agentd:", err)
		}
		os.Exit(2)
	}
}

func run(ctx context.Context, args []string, stdin io.Reader, stdout, stderr io.Writer) error {
	if len(args) == 0 {
		fmt.Fprint(stderr, usage)
		return flag.ErrHelp
	}
	switch args[0] {
	case "serve":
		return serve(ctx, args[1:], stderr)
	case "bridge":
		return serveBridge(ctx, args[1:], stderr)
	case "generate":
		return generate(ctx, args[1:], os.Getenv, stdin, stdout, stderr)
	case "keys":
		return keys(args[1:], stdin, stdout)
	case "mcp-demo":
		return mcpDemo(ctx)
	case "version", "--version", "-version":
		fmt.Fprintln(stdout, version.Get())
		return nil
	case "-h", "--help", "help":
		fmt.Fprint(stdout, usage)
		return nil
	}
	fmt.Fprint(stderr, usage)
	return fmt.Errorf("unknown command %q", args[0])
}
