// Command go-example runs the demo generation against a running agentd and
// prints its events, reattaching if its stream breaks
// (examples/go/internal/reconnect):
//
//	go run ./examples/go [flags] [address] [request.json]
//
// --detach starts the generation detached: agentd ends the stream after
// started, and the example attaches to follow it to its end. The other
// flags (--token, --tls-ca, --tls-cert, --tls-key) are every example's:
// see examples/go/internal/connect.
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"strings"
	"time"

	"google.golang.org/grpc/status"

	"github.com/agentd/agentd/examples/go/internal/connect"
	"github.com/agentd/agentd/examples/go/internal/reconnect"
	agentdv1 "github.com/agentd/agentd/gen/go/agentd/v1"
)

func main() {
	detach := flag.Bool("detach", false, "start the generation detached, then attach to follow it")
	o, file := connect.Parse("examples/demo-start.json")
	if err := run(o, file, *detach); err != nil {
		fmt.Fprintln(os.Stderr, "go example:", o.Explain(err))
		os.Exit(1)
	}
}

func run(o connect.Options, file string, detach bool) error {
	start, err := connect.ReadStart(file)
	if err != nil {
		return err
	}
	start.Detach = detach
	conn, err := o.Dial()
	if err != nil {
		return err
	}
	defer conn.Close()
	// Long enough for another replica to adopt the generation of one that
	// died (after its lease, generation.lease_ttl, 15 s by default).
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	first := &agentdv1.GenerateRequest{Kind: &agentdv1.GenerateRequest_Start{Start: start}}
	follow := reconnect.Default
	follow.OnAttach = printAttach
	var text reconnect.Text // what a UI would show of the model's text
	var final string
	for ev, err := range follow.Generate(ctx, agentdv1.NewAgentServiceClient(conn), first) {
		if err != nil {
			return err
		}
		final += printEvent(ev, text.Apply(ev))
	}
	if !strings.Contains(final, "hello from agentd") {
		return fmt.Errorf("the generation did not complete with the demo answer (got %q)", final)
	}
	return nil
}

// printAttach says that the example attaches to the generation again,
// and why.
func printAttach(id string, after int64, cause error) {
	why := "the stream ended before the generation did"
	if cause != nil {
		why = status.Convert(cause).Message()
	}
	fmt.Printf("attach %s after %d (%s)\n", id, after, why)
}

// printEvent prints one event (withdrawn: the text a withdrawn turn had
// shown) and returns the completed generation's text, if it is that.
func printEvent(ev *agentdv1.GenerateResponse, withdrawn string) (final string) {
	switch k := ev.GetEvent().(type) {
	case *agentdv1.GenerateResponse_Started:
		fmt.Println("started", k.Started.GetGenerationId())
	case *agentdv1.GenerateResponse_TextDelta:
		fmt.Printf("text_delta %q\n", k.TextDelta.GetText())
	case *agentdv1.GenerateResponse_TurnWithdrawn:
		fmt.Printf("turn_withdrawn %d (%s): discarding %q, the turn is asked again\n",
			k.TurnWithdrawn.GetTurn(), k.TurnWithdrawn.GetReason(), withdrawn)
	case *agentdv1.GenerateResponse_Usage:
		printUsage(k.Usage)
	case *agentdv1.GenerateResponse_Completed:
		final = connect.Text(k.Completed.GetMessage())
		fmt.Println("completed", final)
	default:
		printToolEvent(ev)
	}
	return final
}

// printToolEvent prints a tool call's start, progress and end.
func printToolEvent(ev *agentdv1.GenerateResponse) {
	switch k := ev.GetEvent().(type) {
	case *agentdv1.GenerateResponse_ToolCallStarted:
		fmt.Println("tool_call_started", k.ToolCallStarted.GetToolName(), k.ToolCallStarted.GetArguments())
	case *agentdv1.GenerateResponse_ToolProgress:
		p := k.ToolProgress
		fmt.Printf("tool_progress %s %g/%g %s\n", p.GetCallId(), p.GetProgress(), p.GetTotal(), p.GetMessage())
	case *agentdv1.GenerateResponse_ToolCallFinished:
		fmt.Println("tool_call_finished", k.ToolCallFinished.GetToolName(), k.ToolCallFinished.GetOutput())
	}
}

func printUsage(u *agentdv1.Usage) {
	repeated := ""
	if u.GetRepeated() {
		repeated = " (repeated turn)"
	}
	fmt.Printf("usage %d %d%s\n", u.GetInputTokens(), u.GetOutputTokens(), repeated)
}
