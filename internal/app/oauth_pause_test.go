package app_test

import (
	"encoding/hex"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"google.golang.org/genproto/googleapis/rpc/errdetails"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	agentdv1 "github.com/agentd/agentd/gen/go/agentd/v1"
	"github.com/agentd/agentd/internal/app"
	"github.com/agentd/agentd/internal/app/apptest"
	"github.com/agentd/agentd/internal/config"
	"github.com/agentd/agentd/internal/oauthtest"
)

// pausingConfig is a configuration whose generations pause for the
// authorizations nobody answers (a store and its encryption key), and
// whose bridge reaches the authorization server's MCP server on loopback.
func pausingConfig(t *testing.T) config.Config {
	t.Helper()
	cfg := testConfig(t)
	cfg.Bridge.AllowPrivateNetworks = true
	cfg.Store.EncryptionKeyFile = filepath.Join(t.TempDir(), "store.key")
	if err := os.WriteFile(cfg.Store.EncryptionKeyFile, []byte(hex.EncodeToString(randomBytes(t, 32))), 0o600); err != nil {
		t.Fatal(err)
	}
	return cfg
}

// oauthResume resumes paused with agent and answers, half-closed.
func oauthResume(t *testing.T, client agentdv1.AgentServiceClient, agent *agentdv1.Agent, paused *agentdv1.GenerationPaused, answers ...*agentdv1.AuthorizationResponse) oauthRun {
	t.Helper()
	return oauthStream(t, client, &agentdv1.GenerateRequest{Kind: &agentdv1.GenerateRequest_Resume{Resume: &agentdv1.ResumeGeneration{
		GenerationId: paused.GetGenerationId(), Agent: agent, AuthorizationResponses: answers,
	}}}, nil)
}

// oauthAnswer is the person's answer to r: they approve at as, and give
// the redirect they came back with.
func oauthAnswer(t *testing.T, as *oauthtest.Server, r *agentdv1.AuthorizationRequest) *agentdv1.AuthorizationResponse {
	t.Helper()
	redirect, err := as.Approve(t.Context(), r.GetUrl())
	if err != nil {
		t.Fatalf("approving %s: %v", r.GetUrl(), err)
	}
	return &agentdv1.AuthorizationResponse{RequestId: r.GetId(), RedirectUrl: redirect}
}

// TestOAuthAuthorizationPause: X-M2, an authorization nobody answers on
// the stream pauses the generation like an approval, and the resume
// carries the person's redirect. A first use pauses before the first
// model turn (the servers' tools could not be listed); a step-up pauses
// the turn, and the refused call runs once the resume has the token. A
// redirect that does not fit fails the resume and leaves the pause to
// be resumed again; a resume without the answer is refused.
func TestOAuthAuthorizationPause(t *testing.T) {
	t.Parallel()
	as := oauthtest.New(t, oauthtest.Options{ChallengeScope: true, OfflineAccess: true})
	cfg := pausingConfig(t)
	cfg.Bridge.Servers = map[string]config.Server{"registered-crm": {URL: as.MCPURL, OAuth: &config.ServerOAuth{ClientID: as.ClientID, ClientSecret: as.ClientSecret}}}
	conn, _ := apptest.Serve(t, app.Options{Config: cfg, Logger: slog.New(slog.DiscardHandler)})
	client := agentdv1.NewAgentServiceClient(conn)
	decl := &agentdv1.OAuthClient{ClientId: as.ClientID, ClientSecret: as.ClientSecret}
	code := oauthAgent(t, as.MCPURL, decl, "echo")
	resume := func(agent *agentdv1.Agent, paused *agentdv1.GenerationPaused, answers ...*agentdv1.AuthorizationResponse) oauthRun {
		t.Helper()
		return oauthResume(t, client, agent, paused, answers...)
	}
	answer := func(r *agentdv1.AuthorizationRequest) *agentdv1.AuthorizationResponse {
		t.Helper()
		return oauthAnswer(t, as, r)
	}

	// First use, the client half-closed: the generation pauses before its
	// first model turn, with the request in the paused event.
	run := oauthGenerate(t, client, code, "dana", nil)
	if run.err != nil || run.paused == nil || len(run.paused.GetAuthorizationRequests()) != 1 {
		t.Fatalf("first use without an answer: err %v, paused %v; want a pause with one authorization request", run.err, run.paused)
	}
	first := run.paused.GetAuthorizationRequests()[0]
	if first.GetServerName() != "crm" || first.GetReason() != agentdv1.AuthorizationReason_AUTHORIZATION_REASON_FIRST_USE || !strings.HasPrefix(first.GetUrl(), as.Issuer) {
		t.Errorf("paused authorization request = %v, want crm's first use at %s", first, as.Issuer)
	}
	if len(run.requests) != 1 || run.requests[0].GetId() != first.GetId() {
		t.Errorf("stream requests %v, want the paused one %s", run.requests, first.GetId())
	}

	// A resume must answer it.
	if r := resume(code, run.paused); status.Code(r.err) != codes.InvalidArgument {
		t.Errorf("resume without the answer: %v, want InvalidArgument", r.err)
	}
	// A redirect that does not fit (another state) fails the resume
	// UNAUTHENTICATED; the pause stays.
	good := answer(first)
	forged := &agentdv1.AuthorizationResponse{RequestId: first.GetId(), RedirectUrl: strings.Replace(good.GetRedirectUrl(), "state=", "state=x", 1)}
	if r := resume(code, run.paused, forged); status.Code(r.err) != codes.Unauthenticated {
		t.Errorf("resume with a forged state: %v, want Unauthenticated", r.err)
	}
	// The right one completes it: the tool ran with the new token.
	if r := resume(code, run.paused, good); r.err != nil || !strings.Contains(r.final, "hi") || len(r.requests) != 0 {
		t.Fatalf("resume with the redirect: err %v, final %q, %d requests; want the tool's output and no question", r.err, r.final, len(r.requests))
	}

	// Step-up in a tool turn, the client half-closed: the turn pauses with
	// the refused call waiting; the resume runs it with the new scopes.
	stepUp := oauthAgent(t, as.MCPURL, decl, as.StepUpTool)
	run = oauthGenerate(t, client, stepUp, "dana", nil)
	if run.err != nil || run.paused == nil || len(run.paused.GetAuthorizationRequests()) != 1 ||
		run.paused.GetAuthorizationRequests()[0].GetReason() != agentdv1.AuthorizationReason_AUTHORIZATION_REASON_STEP_UP {
		t.Fatalf("step-up without an answer: err %v, paused %v; want a pause with one STEP_UP request", run.err, run.paused)
	}
	if r := resume(stepUp, run.paused, answer(run.paused.GetAuthorizationRequests()[0])); r.err != nil || !strings.Contains(r.final, "hi") {
		t.Fatalf("step-up resume: err %v, final %q; want the tool's output", r.err, r.final)
	}
	// The kept token now has the scope: no question, no pause.
	if r := oauthGenerate(t, client, stepUp, "dana", nil); r.err != nil || r.paused != nil || !strings.Contains(r.final, "hi") {
		t.Fatalf("after the step-up: err %v, paused %v, final %q", r.err, r.paused, r.final)
	}

	// A registered url server (ref:) pauses and resumes the same way: the
	// resume resolves the ref again from the configuration.
	registered := oauthAgent(t, as.MCPURL, nil, "echo")
	registered.Mcps[0].Transport, registered.Mcps[0].Oauth = &agentdv1.MCPServer_Ref{Ref: "registered-crm"}, nil
	run = oauthGenerate(t, client, registered, "emil", nil)
	if run.err != nil || len(run.paused.GetAuthorizationRequests()) != 1 {
		t.Fatalf("registered server without an answer: err %v, paused %v; want a pause with one authorization request", run.err, run.paused)
	}
	if r := resume(registered, run.paused, answer(run.paused.GetAuthorizationRequests()[0])); r.err != nil || !strings.Contains(r.final, "hi") {
		t.Fatalf("registered server resume: err %v, final %q; want the tool's output", r.err, r.final)
	}
}

// TestOAuthStepUpAskedOnce: X-M2, a step-up is asked of a person once per
// generation. The server refuses the step-up tool for its scope whatever
// the token holds (the conformance suite's "scope upgrade will never
// succeed"): the generation pauses for the STEP_UP authorization, the
// resume answers it, and the server refuses the new token for the same
// scope. The resumed generation does not pause to ask again: it ends
// PERMISSION_DENIED (MCP_FORBIDDEN), as a live stream's refused retry
// does, naming the server and the scope, with no question on its
// stream.
func TestOAuthStepUpAskedOnce(t *testing.T) {
	t.Parallel()
	as := oauthtest.New(t, oauthtest.Options{ChallengeScope: true, OfflineAccess: true, StepUpNeverSucceeds: true})
	conn, _ := apptest.Serve(t, app.Options{Config: pausingConfig(t), Logger: slog.New(slog.DiscardHandler)})
	client := agentdv1.NewAgentServiceClient(conn)
	decl := &agentdv1.OAuthClient{ClientId: as.ClientID, ClientSecret: as.ClientSecret}

	// The end user's first token, with the base scopes, asked on the stream.
	approve := func(u string) (string, error) { return as.Approve(t.Context(), u) }
	if run := oauthGenerate(t, client, oauthAgent(t, as.MCPURL, decl, "echo"), "gwen", approve); run.err != nil || len(run.requests) != 1 {
		t.Fatalf("first use: err %v, %d requests; want one answered", run.err, len(run.requests))
	}

	stepUp := oauthAgent(t, as.MCPURL, decl, as.StepUpTool)
	run := oauthGenerate(t, client, stepUp, "gwen", nil)
	if run.err != nil || len(run.paused.GetAuthorizationRequests()) != 1 ||
		run.paused.GetAuthorizationRequests()[0].GetReason() != agentdv1.AuthorizationReason_AUTHORIZATION_REASON_STEP_UP {
		t.Fatalf("step-up without an answer: err %v, paused %v; want a pause with one STEP_UP request", run.err, run.paused)
	}
	before := as.Grants()["authorization_code"]
	r := oauthResume(t, client, stepUp, run.paused, oauthAnswer(t, as, run.paused.GetAuthorizationRequests()[0]))
	if got := as.Grants()["authorization_code"]; got != before+1 {
		t.Errorf("authorization code grants = %d, want %d: the resume exchanges the step-up's code", got, before+1)
	}
	if r.paused != nil || len(r.requests) != 0 {
		t.Fatalf("the resume paused %v with requests %v; want no second question for the same scope", r.paused, r.requests)
	}
	st, _ := status.FromError(r.err)
	if st.Code() != codes.PermissionDenied {
		t.Fatalf("the resume ended %v, want PermissionDenied", r.err)
	}
	for _, want := range []string{`"crm"`, as.StepUpScope, "not asking again"} {
		if !strings.Contains(st.Message(), want) {
			t.Errorf("error %q does not say %s", st.Message(), want)
		}
	}
	if reason, md := errorInfo(st); reason != "MCP_FORBIDDEN" || md["server"] != "crm" || !strings.Contains(md["scope"], as.StepUpScope) {
		t.Errorf("error info %s %v, want MCP_FORBIDDEN naming crm and %s", reason, md, as.StepUpScope)
	}
}

// errorInfo is the reason and metadata of st's ErrorInfo; "" without one.
func errorInfo(st *status.Status) (string, map[string]string) {
	for _, d := range st.Details() {
		if info, ok := d.(*errdetails.ErrorInfo); ok {
			return info.GetReason(), info.GetMetadata()
		}
	}
	return "", nil
}
