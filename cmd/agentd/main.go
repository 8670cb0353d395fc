// Command agentd runs LLM agents whose tools come from MCP servers, as a
// gRPC service, and is that service's command-line client.
//
//	agentd serve      AgentService with the bridge embedded (default 127.0.0.1:7070)
//	agentd bridge     BridgeService alone (default 127.0.0.1:7071)
//	agentd generate   run a generation against a running agentd and print its events
//	agentd chat       talk with an agent at the terminal, on a thread agentd remembers
//	agentd attach     follow a generation's events, and answer its pause at the terminal
//	agentd get        print one generation
//	agentd list       list generations, newest first
//	agentd resume     resume a paused generation with its answers
//	agentd threads    list, show and delete threads
//	agentd keys hash  print the SHA-256 of an API key read from stdin (for auth.api_keys)
//	agentd mcp-demo   the built-in demo MCP server, on stdio
//	agentd version    print the version, commit and Go release (also --version)
//
// The client commands (generate, chat, attach, get, list, resume, threads)
// reach agentd at AGENTD_ADDR, 127.0.0.1:7070 by default. docs/cli.md
// describes them.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"strings"
	"syscall"

	"github.com/agentd/agentd/internal/version"
)

const usage = `usage: agentd <command> [flags]

agentd runs LLM agents whose tools come from MCP servers, as a gRPC
service; its client commands run and follow generations on it.

commands:
  serve      serve AgentService, with the bridge embedded unless --bridge-addr is set
  bridge     serve BridgeService alone
  generate   run a generation on a running agentd and print its events
  chat       talk with an agent at the terminal, on a thread agentd remembers
  attach     follow a generation's events; answer its pause at the terminal
  get        print one generation: its state, what it waits for, its result
  list       list generations, newest first
  resume     resume a paused generation with the answers it waits for
  threads    list, show (with their conversation) and delete threads
  keys hash  print the SHA-256 of an API key read from stdin, for auth.api_keys
  mcp-demo   run the built-in demo MCP server on stdin/stdout
  version    print agentd's version, commit and Go release (also --version)

The client commands (generate, chat, attach, get, list, resume, threads)
reach agentd at AGENTD_ADDR (default 127.0.0.1:7070), or at --addr.

example:
  agentd serve &
  agentd generate --provider mock --prompt 'Hello'

Run "agentd <command> -h" for a command's flags and examples.
`

// errUsage is a command line that names no command; the usage was
// printed instead.
var errUsage = errors.New("no command")

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	// The first signal starts a graceful shutdown; a second one, with the
	// default handling restored, ends the process at once.
	context.AfterFunc(ctx, stop)
	err := run(ctx, os.Args[1:], os.Stdin, os.Stdout, os.Stderr)
	stop()
	os.Exit(exitCode(err, os.Stderr))
}

// exitCode is the process's status after err, which it reports on
// stderr: 0 after success and after help asked for, 2 otherwise.
func exitCode(err error, stderr io.Writer) int {
	switch {
	case err == nil, errors.Is(err, flag.ErrHelp):
		return 0
	case !errors.Is(err, errUsage):
		fmt.Fprintln(stderr, "agentd:", err)
	}
	return 2
}

// clientCommands are the commands that call a running agentd; getenv
// gives their flags' defaults.
var clientCommands = map[string]func(ctx context.Context, args []string, getenv func(string) string, stdin io.Reader, stdout, stderr io.Writer) error{
	"generate": generate,
	"chat":     chat,
	"attach":   attach,
	"get":      get,
	"list":     list,
	"resume":   resume,
	"threads":  threads,
}

func run(ctx context.Context, args []string, stdin io.Reader, stdout, stderr io.Writer) error {
	if len(args) == 0 {
		fmt.Fprint(stderr, usage)
		return errUsage
	}
	if client, ok := clientCommands[args[0]]; ok {
		return client(ctx, args[1:], os.Getenv, stdin, stdout, stderr)
	}
	switch args[0] {
	case "serve", "bridge":
		return runServer(ctx, args[0], args[1:], stdout, stderr)
	case "keys":
		return keys(args[1:], stdin, stdout)
	case "mcp-demo":
		if err := noArgs("mcp-demo", args[1:], stdout); err != nil {
			return err
		}
		return mcpDemo(ctx)
	case "version", "--version", "-version":
		if err := noArgs("version", args[1:], stdout); err != nil {
			return err
		}
		fmt.Fprintln(stdout, version.Get())
		return nil
	case "-h", "--help", "-help", "help":
		return help(ctx, args[1:], stdout, stderr)
	}
	fmt.Fprint(stderr, usage)
	return fmt.Errorf("unknown command %q", args[0])
}

// help prints agentd's usage, or with a command's name that command's.
func help(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	switch {
	case len(args) == 0:
		fmt.Fprint(stdout, usage)
		return nil
	case strings.HasPrefix(args[0], "-") || args[0] == "help":
		// Help about help is the usage: going round again would not end.
		fmt.Fprint(stdout, usage)
		return nil
	}
	return run(ctx, []string{args[0], "-h"}, nil, stdout, stderr)
}
