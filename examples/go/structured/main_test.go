package main

import (
	"bytes"
	"net"
	"strings"
	"testing"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/structpb"

	"github.com/agentd/agentd/examples/go/internal/connect"
	agentdv1 "github.com/agentd/agentd/gen/go/agentd/v1"
)

// answering is an AgentService whose Generate wants the ticket's output
// schema on the start, refuses a first answer and completes with answer.
type answering struct {
	agentdv1.UnimplementedAgentServiceServer
	answer *structpb.Value
}

func (a *answering) Generate(stream agentdv1.AgentService_GenerateServer) error {
	req, err := stream.Recv()
	if err != nil {
		return err
	}
	o := req.GetStart().GetAgent().GetOutput()
	if o.GetName() != "ticket" || len(o.GetSchema().GetFields()["required"].GetListValue().GetValues()) != 3 {
		return status.Errorf(codes.InvalidArgument, "want the ticket's output, got %v", o)
	}
	for _, ev := range []*agentdv1.GenerateResponse{
		{Event: &agentdv1.GenerateResponse_Started{Started: &agentdv1.GenerationStarted{GenerationId: "gen_1"}}},
		{Event: &agentdv1.GenerateResponse_OutputInvalid{OutputInvalid: &agentdv1.OutputInvalid{Turn: 1, Errors: []string{"/priority: not one of low, medium, high"}, Repair: true}}},
		{Event: &agentdv1.GenerateResponse_Completed{Completed: &agentdv1.GenerationCompleted{GenerationId: "gen_1", Structured: a.answer}}},
	} {
		if err := stream.Send(ev); err != nil {
			return err
		}
	}
	return nil
}

func serve(t *testing.T, s agentdv1.AgentServiceServer) connect.Options {
	t.Helper()
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := grpc.NewServer()
	agentdv1.RegisterAgentServiceServer(srv, s)
	served := make(chan error, 1)
	go func() { served <- srv.Serve(lis) }()
	t.Cleanup(func() { srv.Stop(); <-served })
	return connect.Options{Address: lis.Addr().String()}
}

// The example sends the ticket's schema as the agent's output, and
// decodes the completed event's structured answer into a Ticket; a
// completion without one is an error.
func TestStructuredTicket(t *testing.T) {
	answer, err := structpb.NewValue(map[string]any{"title": "Checkout times out", "priority": "high", "tags": []any{"checkout", "timeout"}})
	if err != nil {
		t.Fatal(err)
	}
	var out bytes.Buffer
	if err := run(serve(t, &answering{answer: answer}), "../../structured-start.json", &out); err != nil {
		t.Fatalf("run: %v\n%s", err, out.String())
	}
	for _, want := range []string{"output_invalid turn 1 (repair true): /priority: not one of low, medium, high\n", "ticket: [high] Checkout times out (checkout, timeout)\n"} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("the example did not print %q:\n%s", want, out.String())
		}
	}
	err = run(serve(t, &answering{}), "../../structured-start.json", &out)
	if err == nil || !strings.Contains(err.Error(), "without a structured answer") {
		t.Errorf("a completion without the answer: %v", err)
	}
}
