// Command go-example runs the demo generation against a running agentd and
// prints its events: go run ./examples/go [address] [request.json]. With
// AGENTD_TOKEN set, it sends that API key ("authorization: Bearer").
package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"strings"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/metadata"
	"google.golang.org/protobuf/encoding/protojson"

	agentdv1 "github.com/agentd/agentd/gen/go/agentd/v1"
)

func main() {
	addr, file := "127.0.0.1:7070", "examples/demo-start.json"
	if len(os.Args) > 1 {
		addr = os.Args[1]
	}
	if len(os.Args) > 2 {
		file = os.Args[2]
	}
	if err := run(addr, file); err != nil {
		fmt.Fprintln(os.Stderr, "go example:", err)
		os.Exit(1)
	}
}

func run(addr, file string) error {
	data, err := os.ReadFile(file)
	if err != nil {
		return err
	}
	start := &agentdv1.StartGeneration{}
	if err := protojson.Unmarshal(data, start); err != nil {
		return err
	}
	conn, err := grpc.NewClient(addr, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		return err
	}
	defer conn.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if token := os.Getenv("AGENTD_TOKEN"); token != "" {
		ctx = metadata.AppendToOutgoingContext(ctx, "authorization", "Bearer "+token)
	}
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
