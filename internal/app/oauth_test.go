package app_test

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/durationpb"
	"google.golang.org/protobuf/types/known/structpb"

	agentdv1 "github.com/agentd/agentd/gen/go/agentd/v1"
	"github.com/agentd/agentd/internal/app"
	"github.com/agentd/agentd/internal/app/apptest"
	"github.com/agentd/agentd/internal/oauthtest"
)

// roomyAnswer is an answer timeout no test reaches.
const roomyAnswer = 10 * time.Minute

// oauthAgent is a script agent that calls tool on the MCP server at url,
// declared with oauth, then says what it returned.
func oauthAgent(t *testing.T, url string, oauth *agentdv1.OAuthClient, tool string) *agentdv1.Agent {
	t.Helper()
	opts, err := structpb.NewStruct(map[string]any{"script": map[string]any{"turns": []any{
		map[string]any{"tool_calls": []any{map[string]any{"name": tool, "arguments": map[string]any{"text": "hi"}}}},
		map[string]any{"text": "{{tool_outputs}}"},
	}}})
	if err != nil {
		t.Fatal(err)
	}
	return &agentdv1.Agent{
		Provider:        "script",
		Mcps:            []*agentdv1.MCPServer{{Name: "crm", Transport: &agentdv1.MCPServer_Url{Url: url}, Oauth: oauth}},
		McpCache:        proto.Bool(false),
		ProviderOptions: opts,
	}
}

// oauthRun is what one generation of oauthGenerate saw.
type oauthRun struct {
	requests []*agentdv1.AuthorizationRequest
	final    string
	paused   *agentdv1.GenerationPaused
	err      error
}

// oauthGenerate runs a generation for endUser, answering every
// authorization request as the person would (approve: the authorization
// server's redirect), or not at all when approve is nil.
func oauthGenerate(t *testing.T, client agentdv1.AgentServiceClient, agent *agentdv1.Agent, endUser string, approve func(string) (string, error)) oauthRun {
	t.Helper()
	start := &agentdv1.StartGeneration{Agent: agent, EndUser: endUser, AnswerTimeout: durationpb.New(roomyAnswer),
		Messages: []*agentdv1.Message{{Role: agentdv1.Role_ROLE_USER, Parts: []*agentdv1.Part{textPart("go")}}}}
	return oauthStream(t, client, &agentdv1.GenerateRequest{Kind: &agentdv1.GenerateRequest_Start{Start: start}}, approve)
}

// oauthStream sends first on a new Generate stream and reads it to its
// end as oauthGenerate does.
func oauthStream(t *testing.T, client agentdv1.AgentServiceClient, first *agentdv1.GenerateRequest, approve func(string) (string, error)) oauthRun {
	t.Helper()
	var run oauthRun
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	stream, err := client.Generate(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if err := stream.Send(first); err != nil {
		t.Fatal(err)
	}
	if approve == nil {
		_ = stream.CloseSend()
	}
	for {
		ev, err := stream.Recv()
		if errors.Is(err, io.EOF) {
			return run
		}
		if err != nil {
			run.err = err
			return run
		}
		if r := ev.GetAuthorizationRequest(); r != nil {
			run.requests = append(run.requests, r)
			if approve == nil {
				continue
			}
			redirect, err := approve(r.GetUrl())
			if err != nil {
				t.Fatalf("approving %s: %v", r.GetUrl(), err)
			}
			if err := stream.Send(&agentdv1.GenerateRequest{Kind: &agentdv1.GenerateRequest_AuthorizationResponse{
				AuthorizationResponse: &agentdv1.AuthorizationResponse{RequestId: r.GetId(), RedirectUrl: redirect}}}); err != nil {
				t.Fatal(err)
			}
		}
		if c := ev.GetCompleted(); c != nil {
			for _, p := range c.GetMessage().GetParts() {
				run.final += p.GetText()
			}
		}
		if p := ev.GetPaused(); p != nil {
			run.paused = p
		}
	}
}

// TestOAuthEndToEnd: X-M1, X-M2, X-M3 through the public API, against an
// authorization server and MCP server of our own. The first generation
// asks the person (authorization code with PKCE, on the stream), the
// token is kept for the tenant, end user and server and reused by the
// next generation without asking; an expired token is refreshed, a tool
// that needs more scopes steps up; another end user is asked afresh, as
// is one whose tokens were revoked; a refused token that cannot be
// refreshed is asked for again (REAUTHORIZE);
// client credentials need no person; an unanswerable request ends the
// generation UNAUTHENTICATED, naming the server.
func TestOAuthEndToEnd(t *testing.T) {
	t.Parallel()
	as := oauthtest.New(t, oauthtest.Options{ChallengeScope: true, OfflineAccess: true})
	cfg := testConfig(t)
	cfg.Bridge.AllowPrivateNetworks = true
	conn, _ := apptest.Serve(t, app.Options{Config: cfg, Logger: slog.New(slog.DiscardHandler)})
	client := agentdv1.NewAgentServiceClient(conn)
	approve := func(u string) (string, error) { return as.Approve(t.Context(), u) }
	code := oauthAgent(t, as.MCPURL, &agentdv1.OAuthClient{ClientId: as.ClientID, ClientSecret: as.ClientSecret}, "echo")

	// X-M2: the first use asks the person, on the stream.
	run := oauthGenerate(t, client, code, "alice", approve)
	if run.err != nil || len(run.requests) != 1 || !strings.Contains(run.final, "hi") {
		t.Fatalf("first generation: err %v, %d authorization requests, final %q; want one request and the tool's output", run.err, len(run.requests), run.final)
	}
	r := run.requests[0]
	if r.GetServerName() != "crm" || r.GetReason() != agentdv1.AuthorizationReason_AUTHORIZATION_REASON_FIRST_USE || !strings.HasPrefix(r.GetUrl(), as.Issuer) {
		t.Errorf("authorization request = %v, want crm's first use at %s", r, as.Issuer)
	}

	// X-M3: the token is kept and reused: no question, no grant.
	before := as.Grants()
	if run := oauthGenerate(t, client, code, "alice", nil); run.err != nil || len(run.requests) != 0 {
		t.Fatalf("second generation: err %v, %d requests; want the kept token used", run.err, len(run.requests))
	}
	if got := as.Grants(); got["authorization_code"] != before["authorization_code"] {
		t.Errorf("grants %v after reuse, before %v", got, before)
	}

	// X-M3: an expired token is refreshed before use, without asking.
	as.ExpireAll()
	if run := oauthGenerate(t, client, code, "alice", nil); run.err != nil || len(run.requests) != 0 {
		t.Fatalf("after expiry: err %v, %d requests; want a refresh", run.err, len(run.requests))
	}
	if got := as.Grants()["refresh_token"]; got != before["refresh_token"]+1 {
		t.Errorf("refresh grants = %d, want %d", got, before["refresh_token"]+1)
	}

	// X-M1: a tool that needs more scopes steps up, asking with STEP_UP.
	stepUp := oauthAgent(t, as.MCPURL, &agentdv1.OAuthClient{ClientId: as.ClientID, ClientSecret: as.ClientSecret}, as.StepUpTool)
	run = oauthGenerate(t, client, stepUp, "alice", approve)
	if run.err != nil || len(run.requests) != 1 || run.requests[0].GetReason() != agentdv1.AuthorizationReason_AUTHORIZATION_REASON_STEP_UP {
		t.Fatalf("step-up: err %v, requests %v; want one STEP_UP", run.err, run.requests)
	}
	if !strings.Contains(strings.Join(run.requests[0].GetScopes(), " "), as.StepUpScope) {
		t.Errorf("step-up scopes %v lack %s", run.requests[0].GetScopes(), as.StepUpScope)
	}

	// X-M3: tokens are the end user's: bob is asked.
	if run := oauthGenerate(t, client, code, "bob", approve); run.err != nil || len(run.requests) != 1 {
		t.Fatalf("bob: err %v, %d requests; want one of his own", run.err, len(run.requests))
	}

	// X-M3: a revoked token is gone: bob is asked again.
	admin := agentdv1.NewAdminServiceClient(conn)
	res, err := admin.RevokeTokens(t.Context(), &agentdv1.RevokeTokensRequest{EndUser: "bob", ServerUrl: as.MCPURL})
	if err != nil || res.GetRevoked() != 1 {
		t.Fatalf("RevokeTokens(bob) = %v, %v; want 1 revoked", res, err)
	}
	if run := oauthGenerate(t, client, code, "bob", approve); run.err != nil || len(run.requests) != 1 ||
		run.requests[0].GetReason() != agentdv1.AuthorizationReason_AUTHORIZATION_REASON_FIRST_USE {
		t.Fatalf("bob after revocation: err %v, requests %v; want a FIRST_USE one", run.err, run.requests)
	}

	// X-M2: a token refused that cannot be refreshed (the authorization
	// server forgot every grant) asks again, as REAUTHORIZE.
	as.RevokeAll()
	run = oauthGenerate(t, client, code, "alice", approve)
	if run.err != nil || len(run.requests) != 1 || run.requests[0].GetReason() != agentdv1.AuthorizationReason_AUTHORIZATION_REASON_REAUTHORIZE {
		t.Fatalf("alice after the grants were revoked: err %v, requests %v; want one REAUTHORIZE", run.err, run.requests)
	}

	// X-M2: nobody to answer: UNAUTHENTICATED naming the server.
	run = oauthGenerate(t, client, code, "carol", nil)
	if st, _ := status.FromError(run.err); st.Code() != codes.Unauthenticated || !strings.Contains(st.Message(), `"crm"`) {
		t.Errorf("carol without a client: %v, want Unauthenticated naming crm", run.err)
	}

	// X-M1: client credentials need no person.
	machine := oauthAgent(t, as.MCPURL, &agentdv1.OAuthClient{Grant: agentdv1.GrantType_GRANT_TYPE_CLIENT_CREDENTIALS, ClientId: as.ClientID, ClientSecret: as.ClientSecret}, "echo")
	if run := oauthGenerate(t, client, machine, "", nil); run.err != nil || len(run.requests) != 0 || !strings.Contains(run.final, "hi") {
		t.Fatalf("client credentials: err %v, %d requests, final %q", run.err, len(run.requests), run.final)
	}
	if as.Grants()["client_credentials"] != 1 {
		t.Errorf("grants %v, want one client_credentials", as.Grants())
	}

	// X-M3: a token is its grant's and client's: alice's, obtained by
	// her authorization, is not what a client-credentials agent presents.
	if run := oauthGenerate(t, client, machine, "alice", nil); run.err != nil || len(run.requests) != 0 {
		t.Fatalf("client credentials for alice: err %v, %d requests", run.err, len(run.requests))
	}
	if as.Grants()["client_credentials"] != 2 {
		t.Errorf("grants %v, want a client_credentials grant of its own", as.Grants())
	}
}
