// Command shim is the client the MCP conformance suite runs for each of
// its client scenarios (X-M7): `shim [-direct] <server URL>`, with the
// scenario in MCP_CONFORMANCE_SCENARIO. It does what
// conformance.Scripts says the scenario asks, through agentd's public
// Generate API: a script-provider generation on the agentd at
// AGENTD_CONFORMANCE_ADDR, or on one it starts in-process when that is
// unset. With -direct it does the same as a plain go-sdk client instead,
// for comparison. It exits 1 when the generation (or the direct client)
// fails.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"os"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/agentd/agentd/internal/conformance"
	"github.com/agentd/agentd/internal/version"
)

func main() {
	direct := flag.Bool("direct", false, "be a plain go-sdk client instead of driving agentd")
	timeout := flag.Duration("timeout", 25*time.Second, "give up after this long (the suite allows 30s)")
	flag.Parse()
	if flag.NArg() != 1 {
		fmt.Fprintln(os.Stderr, "usage: shim [-direct] <server URL>  (scenario in "+conformance.ScenarioEnv+")")
		os.Exit(2)
	}
	ctx, cancel := context.WithTimeout(context.Background(), *timeout)
	err := run(ctx, *direct, os.Getenv(conformance.ScenarioEnv), flag.Arg(0))
	cancel()
	if err != nil {
		fmt.Fprintln(os.Stderr, "shim:", err)
		os.Exit(1)
	}
}

func run(ctx context.Context, direct bool, scenario, url string) error {
	if direct {
		return runDirect(ctx, scenario, url)
	}
	addr := os.Getenv(conformance.AddrEnv)
	if addr == "" {
		d, err := conformance.StartAgentd(os.Stderr)
		if err != nil {
			return err
		}
		defer d.Stop()
		addr = d.Addr
	}
	out, err := conformance.Generate(ctx, addr, scenario, url)
	for _, c := range out.Calls {
		fmt.Printf("tool call %s: error=%v output=%q\n", c.GetToolName(), c.GetIsError(), c.GetOutput())
	}
	if err != nil {
		return fmt.Errorf("generation: %w", err)
	}
	fmt.Printf("completed: %q\n", out.Final)
	return nil
}

// runDirect is the plain go-sdk client: connect, list tools, call the
// scenario's tool; an elicitation is accepted with empty content.
func runDirect(ctx context.Context, scenario, url string) error {
	s, ok := conformance.Scripts[scenario]
	if !ok {
		return fmt.Errorf("no script for scenario %q", scenario)
	}
	client := mcp.NewClient(&mcp.Implementation{Name: "agentd-conformance-direct", Version: version.Get().Version}, &mcp.ClientOptions{
		ElicitationHandler: func(context.Context, *mcp.ElicitRequest) (*mcp.ElicitResult, error) {
			return &mcp.ElicitResult{Action: "accept", Content: map[string]any{}}, nil
		},
	})
	cs, err := client.Connect(ctx, &mcp.StreamableClientTransport{Endpoint: url}, nil)
	if err != nil {
		return err
	}
	defer cs.Close()
	if _, err := cs.ListTools(ctx, nil); err != nil {
		return err
	}
	if s.Tool == "" {
		return nil
	}
	res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: s.Tool, Arguments: s.Args})
	if err != nil {
		return err
	}
	if res.IsError {
		return errors.New("the tool call failed")
	}
	return nil
}
