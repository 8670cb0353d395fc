// Command approve approves a tool call inline, on the open Generate stream:
//
//	go run ./examples/go/approve [flags] [address] [request.json]
//
// The agent in examples/approval-start.json may call the demo server's echo
// tool only with a person's approval. agentd sends an ApprovalRequest and
// waits on the stream; this client answers with an ApprovalDecision (always
// yes here) and the generation goes on. Its flags (--token, --tls-ca,
// --tls-cert, --tls-key) are every example's: see examples/go/internal/connect.
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
	o, file := connect.Parse("examples/approval-start.json")
	if err := run(o, file); err != nil {
		fmt.Fprintln(os.Stderr, "go approval example:", err)
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
	approved := 0
	for {
		ev, err := stream.Recv()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return err
		}
		switch k := ev.GetEvent().(type) {
		case *agentdv1.GenerateResponse_ApprovalRequest:
			r := k.ApprovalRequest
			fmt.Println("approval_request", r.GetToolName(), r.GetArguments(), "-> approve")
			if err := stream.Send(&agentdv1.GenerateRequest{Kind: &agentdv1.GenerateRequest_ApprovalDecision{ApprovalDecision: &agentdv1.ApprovalDecision{
				RequestId: r.GetId(), Approved: true, Digest: r.GetDigest(),
			}}}); err != nil {
				return err
			}
			approved++
		case *agentdv1.GenerateResponse_ToolCallFinished:
			fmt.Println("tool_call_finished", k.ToolCallFinished.GetToolName(), k.ToolCallFinished.GetOutput())
		case *agentdv1.GenerateResponse_Paused:
			fmt.Println("paused", k.Paused.GetGenerationId())
		case *agentdv1.GenerateResponse_Completed:
			for _, p := range k.Completed.GetMessage().GetParts() {
				final += p.GetText()
			}
			fmt.Println("completed", final)
		}
	}
	if approved != 1 || !strings.Contains(final, "approved by a person") {
		return fmt.Errorf("the approved call did not complete (approved %d, final %q)", approved, final)
	}
	return nil
}
