package main

import (
	"bytes"
	"net"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"google.golang.org/grpc"
	"google.golang.org/protobuf/testing/protocmp"

	"github.com/agentd/agentd/examples/go/internal/connect"
	agentdv1 "github.com/agentd/agentd/gen/go/agentd/v1"
)

// agent is an AgentService that asks for authorization and completes once
// answered; got has the start and the answer.
type agent struct {
	agentdv1.UnimplementedAgentServiceServer
	got chan []*agentdv1.GenerateRequest
}

func (a *agent) Generate(s agentdv1.AgentService_GenerateServer) error {
	var got []*agentdv1.GenerateRequest
	defer func() { a.got <- got }()
	start, err := s.Recv()
	if err != nil {
		return err
	}
	got = append(got, start)
	for _, ev := range []*agentdv1.GenerateResponse{
		{Event: &agentdv1.GenerateResponse_Started{Started: &agentdv1.GenerationStarted{GenerationId: "gen_1"}}},
		{Event: &agentdv1.GenerateResponse_AuthorizationRequest{AuthorizationRequest: &agentdv1.AuthorizationRequest{
			Id: "authz_1", ServerName: "tracker", Url: "https://auth.example/authorize?state=st", Scopes: []string{"issues:read"},
		}}},
	} {
		if err := s.Send(ev); err != nil {
			return err
		}
	}
	answer, err := s.Recv()
	if err != nil {
		return err
	}
	got = append(got, answer)
	return s.Send(&agentdv1.GenerateResponse{Event: &agentdv1.GenerateResponse_Completed{Completed: &agentdv1.GenerationCompleted{
		Message: &agentdv1.Message{Parts: []*agentdv1.Part{{Kind: &agentdv1.Part_Text{Text: "authorized"}}}},
	}}})
}

// X-M2: the example starts the generation of examples/oauth-start.json (a url
// server with an oauth block), prints the authorization URL and answers
// with the redirect URL read from its input.
func TestOAuthExample(t *testing.T) {
	a := &agent{got: make(chan []*agentdv1.GenerateRequest, 1)}
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := grpc.NewServer()
	agentdv1.RegisterAgentServiceServer(srv, a)
	served := make(chan error, 1)
	go func() { served <- srv.Serve(lis) }()
	defer func() { srv.Stop(); <-served }()

	redirect := "http://127.0.0.1:8976/oauth/callback?code=c-1&state=st"
	var out bytes.Buffer
	if err := run(connect.Options{Address: lis.Addr().String()}, "../../oauth-start.json", strings.NewReader(redirect+"\n"), &out); err != nil {
		t.Fatalf("run: %v\n%s", err, out.String())
	}
	got := <-a.got
	if len(got) != 2 {
		t.Fatalf("the agent got %v", got)
	}
	if s := got[0].GetStart().GetAgent().GetMcps()[0]; s.GetUrl() == "" || s.GetOauth() == nil {
		t.Errorf("the request's server is not a url server with oauth: %v", s)
	}
	want := &agentdv1.GenerateRequest{Kind: &agentdv1.GenerateRequest_AuthorizationResponse{AuthorizationResponse: &agentdv1.AuthorizationResponse{RequestId: "authz_1", RedirectUrl: redirect}}}
	if diff := cmp.Diff(want, got[1], protocmp.Transform()); diff != "" {
		t.Errorf("the answer (-want +got):\n%s", diff)
	}
	for _, say := range []string{"https://auth.example/authorize?state=st", "completed authorized"} {
		if !strings.Contains(out.String(), say) {
			t.Errorf("the output does not say %q:\n%s", say, out.String())
		}
	}
}
