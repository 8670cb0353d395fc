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
	"fmt"
	"os"
	"strings"
	"time"

	"github.com/agentd/agentd/examples/go/internal/connect"
	agentdv1 "github.com/agentd/agentd/gen/go/agentd/v1"
)

func main() {
	o, file := connect.Parse("examples/approval-start.json")
	if err := run(o, file); err != nil {
		fmt.Fprintln(os.Stderr, "go approval example:", o.Explain(err))
		os.Exit(1)
	}
}

func run(o connect.Options, file string) error {
	start, err := connect.ReadStart(file)
	if err != nil {
		return err
	}
	conn, err := o.Dial()
	if err != nil {
		return err
	}
	defer conn.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	stream, err := connect.Start(ctx, conn, start)
	if err != nil {
		return err
	}
	a := approver{stream: stream}
	if err := connect.Each(stream, a.handle); err != nil {
		return err
	}
	if a.approved != 1 || !strings.Contains(a.final, "approved by a person") {
		return fmt.Errorf("the approved call did not complete (approved %d, final %q)", a.approved, a.final)
	}
	return nil
}

// approver approves every call the generation asks about, and keeps how
// many it approved and the final text.
type approver struct {
	stream   agentdv1.AgentService_GenerateClient
	approved int
	final    string
}

// approve approves the call r asks about.
func (a *approver) approve(r *agentdv1.ApprovalRequest) error {
	fmt.Println("approval_request", r.GetToolName(), r.GetArguments(), "-> approve")
	if err := a.stream.Send(&agentdv1.GenerateRequest{Kind: &agentdv1.GenerateRequest_ApprovalDecision{ApprovalDecision: &agentdv1.ApprovalDecision{
		RequestId: r.GetId(), Approved: true, Digest: r.GetDigest(),
	}}}); err != nil {
		return err
	}
	a.approved++
	return nil
}

// handle prints ev, and approves it if it is an approval request.
func (a *approver) handle(ev *agentdv1.GenerateResponse) error {
	switch k := ev.GetEvent().(type) {
	case *agentdv1.GenerateResponse_ApprovalRequest:
		return a.approve(k.ApprovalRequest)
	case *agentdv1.GenerateResponse_ToolCallFinished:
		fmt.Println("tool_call_finished", k.ToolCallFinished.GetToolName(), k.ToolCallFinished.GetOutput())
	case *agentdv1.GenerateResponse_Paused:
		fmt.Println("paused", k.Paused.GetGenerationId())
	case *agentdv1.GenerateResponse_Completed:
		a.final += connect.Text(k.Completed.GetMessage())
		fmt.Println("completed", a.final)
	}
	return nil
}
