// Command go-example runs the demo generation against a running agentd and
// prints its events:
//
//	go run ./examples/go [flags] [address] [request.json]
//
// Its flags (--token, --tls-ca, --tls-cert, --tls-key) are every
// example's: see examples/go/internal/connect.
package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"strings"
	"time"

	"google.golang.org/protobuf/encoding/protojson"

	"github.com/agentd/agentd/examples/go/internal/connect"
	agentdv1 "github.com/agentd/agentd/gen/go/agentd/v1"
)

func main() {
	o, file := connect.Parse("examples/demo-start.json")
	if err := run(o, file); err != nil {
		fmt.Fprintln(os.Stderr, "go example:", err)
		os.Exit(1)
	}
}

func run(o connect.Options, file string) error {
	data, err := os.ReadFile(file)
	if err != nil {
		return err
	}
	start := &agentdv1.StartGeneration{}
	if err := protojson.Unmarshal(data, start); err != nil {
		return err
	}
	conn, err := o.Dial()
	if err != nil {
		return err
	}
	defer conn.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	stream, err := agentdv1.NewAgentServiceClient(conn).Generate(ctx)
	if err != nil {
		return err
	}
	if err := stream.Send(&agentdv1.GenerateRequest{Kind: &agentdv1.GenerateRequest_Start{Start: start}}); err != nil {
		return err
	}
	var final string
	for {
		ev, err := stream.Recv()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return err
		}
		switch k := ev.GetEvent().(type) {
		case *agentdv1.GenerateResponse_Started:
			fmt.Println("started", k.Started.GetGenerationId())
		case *agentdv1.GenerateResponse_TextDelta:
			fmt.Printf("text_delta %q\n", k.TextDelta.GetText())
		case *agentdv1.GenerateResponse_ToolCallStarted:
			fmt.Println("tool_call_started", k.ToolCallStarted.GetToolName(), k.ToolCallStarted.GetArguments())
		case *agentdv1.GenerateResponse_ToolCallFinished:
			fmt.Println("tool_call_finished", k.ToolCallFinished.GetToolName(), k.ToolCallFinished.GetOutput())
		case *agentdv1.GenerateResponse_Usage:
			fmt.Println("usage", k.Usage.GetInputTokens(), k.Usage.GetOutputTokens())
		case *agentdv1.GenerateResponse_Completed:
			for _, p := range k.Completed.GetMessage().GetParts() {
				final += p.GetText()
			}
			fmt.Println("completed", final)
		}
	}
	if !strings.Contains(final, "hello from agentd") {
		return fmt.Errorf("the generation did not complete with the demo answer (got %q)", final)
	}
	return nil
}
