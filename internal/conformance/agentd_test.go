package conformance

import (
	"errors"
	"net"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"google.golang.org/grpc"
	"google.golang.org/protobuf/testing/protocmp"
	"google.golang.org/protobuf/types/known/structpb"

	agentdv1 "github.com/agentd/agentd/gen/go/agentd/v1"
)

// personAgent is an AgentService whose generation asks the client to
// authorize at authURL, then for input, and completes with what the
// client answered; the answers go to got.
type personAgent struct {
	agentdv1.UnimplementedAgentServiceServer
	authURL string
	got     chan []*agentdv1.GenerateRequest
}

func (p *personAgent) Generate(s agentdv1.AgentService_GenerateServer) error {
	start, err := s.Recv()
	if err != nil {
		return err
	}
	answers := []*agentdv1.GenerateRequest{start}
	defer func() { p.got <- answers }()
	for _, ev := range []*agentdv1.GenerateResponse{
		{Event: &agentdv1.GenerateResponse_AuthorizationRequest{AuthorizationRequest: &agentdv1.AuthorizationRequest{Id: "authz_1", ServerName: ServerName, Url: p.authURL}}},
		{Event: &agentdv1.GenerateResponse_InputRequest{InputRequest: &agentdv1.InputRequest{Id: "in_1", ServerName: ServerName, Mode: agentdv1.InputMode_INPUT_MODE_FORM}}},
	} {
		if err := s.Send(ev); err != nil {
			return err
		}
		a, err := s.Recv()
		if err != nil {
			return err
		}
		answers = append(answers, a)
	}
	return s.Send(&agentdv1.GenerateResponse{Event: &agentdv1.GenerateResponse_Completed{Completed: &agentdv1.GenerationCompleted{
		Message: &agentdv1.Message{Parts: []*agentdv1.Part{{Kind: &agentdv1.Part_Text{Text: "done"}}}},
	}}})
}

// X-M7: in an auth scenario the shim declares the server with its oauth
// block and acts as the person: it visits the authorization URL, answers
// with the authorization server's redirect (not followed: nothing listens
// there), and accepts a request for input as it is.
func TestGenerateActsAsPerson(t *testing.T) {
	as := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		q := r.URL.Query()
		back, err := url.Parse(q.Get("redirect_uri"))
		if r.URL.Path != "/authorize" || err != nil {
			http.Error(w, "no", http.StatusBadRequest)
			return
		}
		back.RawQuery = url.Values{"code": {"test-auth-code"}, "state": {q.Get("state")}}.Encode()
		http.Redirect(w, r, back.String(), http.StatusFound)
	}))
	defer as.Close()
	authURL := as.URL + "/authorize?" + url.Values{"client_id": {"c"}, "redirect_uri": {"http://127.0.0.1:1/oauth/callback"}, "state": {"st-1"}}.Encode()
	p := &personAgent{authURL: authURL, got: make(chan []*agentdv1.GenerateRequest, 1)}
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := grpc.NewServer()
	agentdv1.RegisterAgentServiceServer(srv, p)
	served := make(chan error, 1)
	go func() { served <- srv.Serve(lis) }()
	defer func() { srv.Stop(); <-served }()

	c := Context{ClientID: "pre-client", ClientSecret: "pre-secret"}
	out, err := Generate(t.Context(), lis.Addr().String(), "auth/pre-registration", "http://127.0.0.1:1/mcp", c)
	if err != nil {
		t.Fatal(err)
	}
	got := <-p.got
	if len(got) != 3 {
		t.Fatalf("the generation got %d messages, want the start and two answers: %v", len(got), got)
	}
	if diff := cmp.Diff(OAuth("auth/pre-registration", c), got[0].GetStart().GetAgent().GetMcps()[0].GetOauth(), protocmp.Transform()); diff != "" {
		t.Errorf("the declared oauth block (-want +got):\n%s", diff)
	}
	want := []*agentdv1.GenerateRequest{
		{Kind: &agentdv1.GenerateRequest_AuthorizationResponse{AuthorizationResponse: &agentdv1.AuthorizationResponse{
			RequestId: "authz_1", RedirectUrl: "http://127.0.0.1:1/oauth/callback?code=test-auth-code&state=st-1",
		}}},
		{Kind: &agentdv1.GenerateRequest_InputResponse{InputResponse: &agentdv1.InputResponse{
			RequestId: "in_1", Action: agentdv1.InputAction_INPUT_ACTION_ACCEPT, Content: &structpb.Struct{},
		}}},
	}
	if diff := cmp.Diff(want, got[1:], protocmp.Transform()); diff != "" {
		t.Errorf("the answers (-want +got):\n%s", diff)
	}
	if out.Final != "done" || len(out.Authorizations) != 1 || len(out.Inputs) != 1 {
		t.Errorf("outcome %+v", out)
	}
}

// X-M7: an authorization server that does not redirect fails the person's
// step, saying so.
func TestAuthorizeWithoutRedirect(t *testing.T) {
	as := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		http.Error(w, "denied", http.StatusForbidden)
	}))
	defer as.Close()
	_, err := Authorize(t.Context(), as.URL+"/authorize")
	if err == nil || !strings.Contains(err.Error(), "403 Forbidden without a redirect") {
		t.Errorf("Authorize: %v", err)
	}
	var uerr *url.Error
	if _, err := Authorize(t.Context(), "http://127.0.0.1:0/authorize"); !errors.As(err, &uerr) {
		t.Errorf("Authorize of a closed port: %v", err)
	}
}
