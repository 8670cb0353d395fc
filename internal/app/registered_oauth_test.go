package app_test

import (
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	agentdv1 "github.com/agentd/agentd/gen/go/agentd/v1"
	"github.com/agentd/agentd/internal/app"
	"github.com/agentd/agentd/internal/app/apptest"
	"github.com/agentd/agentd/internal/config"
	"github.com/agentd/agentd/internal/oauthtest"
)

// refAgent is oauthAgent with the server used by ref: to the registered
// server ref, under the name name ("" for the default, the ref).
func refAgent(t *testing.T, ref, name, tool string) *agentdv1.Agent {
	t.Helper()
	a := oauthAgent(t, "", nil, tool)
	a.Mcps[0] = &agentdv1.MCPServer{Name: name, Transport: &agentdv1.MCPServer_Ref{Ref: ref}}
	return a
}

// secretFile writes content to a new file of mode 0600 and returns its
// path.
func secretFile(t *testing.T, name, content string) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), name)
	if err := os.WriteFile(p, []byte(content), 0o600); err != nil {
		t.Fatal(err)
	}
	return p
}

// TestRegisteredURLServers: X-M1, X-M2, X-M3 for url servers registered
// under bridge.servers and used by ref:, their secrets read from files.
// An authorization code grant asks the person on the stream once; the
// token is kept for the end user and reused by the next generation; a
// client-credentials grant with private_key_jwt needs no person and its
// token serves two generations; a static authorization works as a
// request's does. The request names the server and may narrow its tools
// but cannot replace where it is or how agentd authenticates; a
// generation paused at an approval of such a server resumes with the
// registration (the checkpoint keeps the ref).
func TestRegisteredURLServers(t *testing.T) {
	t.Parallel()
	erpKey, erpPEM, _ := canaryECKey(t)
	crm := oauthtest.New(t, oauthtest.Options{ChallengeScope: true, OfflineAccess: true})
	erp := oauthtest.New(t, oauthtest.Options{ChallengeScope: true, PublicKey: &erpKey.PublicKey})
	static, _ := crm.Issue("mcp:read")

	cfg := testConfig(t)
	cfg.Bridge.AllowPrivateNetworks = true
	cfg.Bridge.Servers = map[string]config.Server{
		"crm": {URL: crm.MCPURL, OAuth: &config.ServerOAuth{ClientID: crm.ClientID, ClientSecretFile: secretFile(t, "crm-secret", crm.ClientSecret+"\n")}},
		"erp": {URL: erp.MCPURL, OAuth: &config.ServerOAuth{Grant: config.GrantClientCredentials, ClientID: erp.ClientID,
			PrivateKeyFile: secretFile(t, "erp.pem", erpPEM), PrivateKeyID: "k1", TokenEndpointAuthMethod: "private_key_jwt"}},
		"docs": {URL: crm.MCPURL, AuthorizationFile: secretFile(t, "docs-token", static)},
	}
	if err := cfg.Validate(); err != nil {
		t.Fatal(err)
	}
	conn, _ := apptest.Serve(t, app.Options{Config: cfg, Logger: slog.New(slog.DiscardHandler)})
	client := agentdv1.NewAgentServiceClient(conn)
	approve := func(u string) (string, error) { return crm.Approve(t.Context(), u) }

	// X-M2: the first use asks the person, naming the server by its ref.
	code := refAgent(t, "crm", "", "echo")
	run := oauthGenerate(t, client, code, "alice", approve)
	if run.err != nil || len(run.requests) != 1 || !strings.Contains(run.final, "hi") {
		t.Fatalf("first generation: err %v, %d authorization requests, final %q; want one request and the tool's output", run.err, len(run.requests), run.final)
	}
	if r := run.requests[0]; r.GetServerName() != "crm" || r.GetReason() != agentdv1.AuthorizationReason_AUTHORIZATION_REASON_FIRST_USE || !strings.HasPrefix(r.GetUrl(), crm.Issuer) {
		t.Errorf("authorization request = %v, want crm's first use at %s", r, crm.Issuer)
	}
	if got := crm.AuthMethods(); got["client_secret_basic"]+got["client_secret_post"] == 0 {
		t.Errorf("crm's token endpoint saw %v, want the registered client secret", got)
	}

	// X-M3: kept for alice and reused, whatever the request names it.
	before := crm.Grants()
	if run := oauthGenerate(t, client, refAgent(t, "crm", "sales", "echo"), "alice", nil); run.err != nil || len(run.requests) != 0 || !strings.Contains(run.final, "hi") {
		t.Fatalf("second generation: err %v, %d requests, final %q; want the kept token used", run.err, len(run.requests), run.final)
	}
	if got := crm.Grants(); got["authorization_code"] != before["authorization_code"] {
		t.Errorf("grants %v after reuse, before %v", got, before)
	}
	// An inline declaration of the same URL and client shares the token:
	// it is the tenant's, end user's and server's.
	inline := oauthAgent(t, crm.MCPURL, &agentdv1.OAuthClient{ClientId: crm.ClientID, ClientSecret: crm.ClientSecret}, "echo")
	if run := oauthGenerate(t, client, inline, "alice", nil); run.err != nil || len(run.requests) != 0 {
		t.Fatalf("inline declaration of the same server: err %v, %d requests; want the kept token", run.err, len(run.requests))
	}

	// X-M1: client credentials with private_key_jwt, from the key file;
	// the token serves the next generation too.
	machine := refAgent(t, "erp", "", "echo")
	for i := range 2 {
		if run := oauthGenerate(t, client, machine, "", nil); run.err != nil || len(run.requests) != 0 || !strings.Contains(run.final, "hi") {
			t.Fatalf("client credentials, generation %d: err %v, %d requests, final %q", i, run.err, len(run.requests), run.final)
		}
	}
	if got := erp.Grants()["client_credentials"]; got != 1 {
		t.Errorf("client_credentials grants = %d, want 1 (the token reused)", got)
	}
	if erp.AuthMethods()["private_key_jwt"] == 0 {
		t.Errorf("erp's token endpoint saw %v, want private_key_jwt", erp.AuthMethods())
	}

	// A static authorization, from its file.
	if run := oauthGenerate(t, client, refAgent(t, "docs", "", "echo"), "", nil); run.err != nil || len(run.requests) != 0 || !strings.Contains(run.final, "hi") {
		t.Fatalf("static authorization: err %v, %d requests, final %q", run.err, len(run.requests), run.final)
	}

	// What the request may not set beside ref:.
	for name, mutate := range map[string]func(*agentdv1.MCPServer){
		"authorization": func(m *agentdv1.MCPServer) { m.Authorization = "Bearer mine" },
		"headers":       func(m *agentdv1.MCPServer) { m.Headers = map[string]string{"X-Tenant": "other"} },
		"oauth":         func(m *agentdv1.MCPServer) { m.Oauth = &agentdv1.OAuthClient{ClientId: "mine"} },
		"env":           func(m *agentdv1.MCPServer) { m.Env = map[string]string{"A": "b"} },
	} {
		a := refAgent(t, "crm", "", "echo")
		mutate(a.Mcps[0])
		_, err := client.Preview(t.Context(), &agentdv1.PreviewRequest{Agent: a, Messages: canaryStart(nil).GetStart().GetMessages()})
		if st, _ := status.FromError(err); st.Code() != codes.InvalidArgument || !strings.Contains(st.Message(), "registered under bridge.servers") {
			t.Errorf("ref with %s: %v, want InvalidArgument naming the registration", name, err)
		}
	}

	// A registered server stays in agentd's bridge whatever the
	// strategy allows.
	server := refAgent(t, "docs", "", "echo")
	server.McpStrategy = agentdv1.MCPStrategy_MCP_STRATEGY_SERVER
	if _, err := client.Preview(t.Context(), &agentdv1.PreviewRequest{Agent: server, Messages: canaryStart(nil).GetStart().GetMessages()}); status.Code(err) != codes.InvalidArgument {
		t.Errorf("mcp_strategy SERVER with a registered url server: %v, want InvalidArgument", err)
	}

	// Paused at an approval, resumed: the checkpoint holds the ref, and
	// the resume resolves it again.
	gated := func() *agentdv1.Agent {
		a := refAgent(t, "erp", "", "echo")
		a.Mcps[0].RequireApproval = &agentdv1.ApprovalPolicy{Mode: agentdv1.ApprovalMode_APPROVAL_MODE_ALWAYS}
		return a
	}
	var c canaryCapture
	request, paused, store := c.pauseAtApproval(t, client, canaryStart(gated()), cfg.StateDir)
	if strings.Contains(store, erpPEM) {
		t.Error("the paused generation's store holds the registered private key")
	}
	events, err := c.generate(t, client, canaryApprove(t, paused, request, gated()), nil)
	canaryCompleted(t, events, err)
	if got := erp.Grants()["client_credentials"]; got != 1 {
		t.Errorf("client_credentials grants = %d after the resume, want 1", got)
	}
}
