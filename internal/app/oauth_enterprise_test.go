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
	"github.com/agentd/agentd/internal/logtest"
	"github.com/agentd/agentd/internal/oauthtest"
)

// TestOAuthEnterpriseManaged: X-M1 and X-M3 for the enterprise-managed
// grant, through the public API. The end user's ID token, passed with the
// generation, is exchanged at the identity provider for an identity
// assertion grant, which agentd's client presents at the MCP server's
// authorization server: nobody is asked. The token is kept for the
// tenant, end user and server and reused; once expired it is renewed by a
// new exchange. A registered server of that grant uses the service's
// identity provider and its ID token file; a request's server must bring
// the end user's ID token. Neither a forged ID token's refusal nor
// anything else puts a token, a grant or a secret in the logs.
// The audit line names the grant.
func TestOAuthEnterpriseManaged(t *testing.T) {
	t.Parallel()
	as := oauthtest.New(t, oauthtest.Options{IdentityProvider: true, ChallengeScope: true})
	tokenFile := filepath.Join(t.TempDir(), "id-token")
	if err := os.WriteFile(tokenFile, []byte(as.IdP.IDToken(t, "workload")+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	cfg := testConfig(t)
	cfg.Bridge.AllowPrivateNetworks = true
	cfg.OAuth.IdentityProvider = config.IdentityProvider{Issuer: as.IdP.Issuer, ClientID: as.IdP.ClientID, IDTokenFile: tokenFile}
	cfg.Bridge.Servers = map[string]config.Server{
		"reg-hr": {URL: as.MCPURL, OAuth: &config.ServerOAuth{Grant: config.GrantEnterpriseManaged, ClientID: as.ClientID, ClientSecret: as.ClientSecret}},
	}
	var logs logtest.Logs
	conn, _ := apptest.Serve(t, app.Options{Config: cfg, Logger: slog.New(slog.NewTextHandler(&logs, nil))})
	client := agentdv1.NewAgentServiceClient(conn)
	decl := func(idToken string) *agentdv1.OAuthClient {
		return &agentdv1.OAuthClient{Grant: agentdv1.GrantType_GRANT_TYPE_ENTERPRISE_MANAGED, ClientId: as.ClientID, ClientSecret: as.ClientSecret,
			IdentityProvider: &agentdv1.IdentityProvider{IdToken: idToken}}
	}
	alice := oauthAgent(t, as.MCPURL, decl(as.IdP.IDToken(t, "alice@example.com")), "echo")
	exchanges := func() int { return as.Grants()["urn:ietf:params:oauth:grant-type:jwt-bearer"] }

	run := oauthGenerate(t, client, alice, "alice", nil)
	if run.err != nil || len(run.requests) != 0 || !strings.Contains(run.final, "hi") {
		t.Fatalf("first generation: err %v, %d authorization requests, final %q; want the tool's output and nobody asked", run.err, len(run.requests), run.final)
	}
	if exchanges() != 1 || as.Grants()["urn:ietf:params:oauth:grant-type:token-exchange"] != 1 {
		t.Errorf("grants %v, want one token exchange at the identity provider and one JWT bearer grant", as.Grants())
	}
	if !strings.Contains(logs.String(), "grant=enterprise_managed") {
		t.Errorf("no audit line names the enterprise_managed grant:\n%s", logs.String())
	}

	// X-M3: kept and reused; renewed by a new exchange once expired.
	if run := oauthGenerate(t, client, alice, "alice", nil); run.err != nil || exchanges() != 1 {
		t.Fatalf("second generation: err %v, grants %v; want the kept token", run.err, as.Grants())
	}
	// X-M3: a token is the ID token's subject's: another's ID token under
	// the same end user (an application that names none) is exchanged
	// anew, never served the first one's token.
	bob := oauthAgent(t, as.MCPURL, decl(as.IdP.IDToken(t, "bob@example.com")), "echo")
	if run := oauthGenerate(t, client, bob, "alice", nil); run.err != nil || exchanges() != 2 {
		t.Fatalf("another's ID token under the same end user: err %v, grants %v; want an exchange of its own", run.err, as.Grants())
	}
	as.ExpireAll()
	if run := oauthGenerate(t, client, alice, "alice", nil); run.err != nil || len(run.requests) != 0 || exchanges() != 3 {
		t.Fatalf("after expiry: err %v, %d requests, grants %v; want a new exchange", run.err, len(run.requests), as.Grants())
	}

	// The service's ID token file is a registered server's alone: a
	// request's server must bring the end user's.
	if run := oauthGenerate(t, client, refAgent(t, "reg-hr", "", "echo"), "reg", nil); run.err != nil || !strings.Contains(run.final, "hi") || exchanges() != 4 {
		t.Fatalf("registered server: err %v, final %q, grants %v", run.err, run.final, as.Grants())
	}
	if run := oauthGenerate(t, client, oauthAgent(t, as.MCPURL, decl(""), "echo"), "svc", nil); status.Code(run.err) != codes.InvalidArgument || exchanges() != 4 {
		t.Fatalf("a request's server without an ID token: err %v, grants %v; want INVALID_ARGUMENT and no exchange", run.err, as.Grants())
	}

	// An ID token the identity provider did not issue is refused there.
	other := oauthtest.New(t, oauthtest.Options{IdentityProvider: true})
	forgedToken := other.IdP.IDToken(t, "mallory@example.com")
	forged := oauthAgent(t, as.MCPURL, decl(forgedToken), "echo")
	if run := oauthGenerate(t, client, forged, "mallory", nil); status.Code(run.err) != codes.Unauthenticated {
		t.Errorf("a forged ID token: %v, want Unauthenticated", run.err)
	}
	for _, secret := range append([]string{forgedToken, as.ClientSecret}, as.Issued()...) {
		if strings.Contains(logs.String(), secret) {
			t.Errorf("the logs show a secret: an ID token, a grant, a token or the client secret")
		}
	}
}

// X-M1: an ENTERPRISE_MANAGED declaration is checked before anything
// connects: its client at the authorization server, and the identity
// provider, its client and an ID token from it or from the service.
func TestOAuthEnterpriseManagedRefused(t *testing.T) {
	t.Parallel()
	cfg := testConfig(t)
	cfg.Bridge.AllowPrivateNetworks = true
	conn, _ := apptest.Serve(t, app.Options{Config: cfg, Logger: slog.New(slog.DiscardHandler)})
	client := agentdv1.NewAgentServiceClient(conn)
	agent := oauthAgent(t, "http://127.0.0.1:1/mcp", &agentdv1.OAuthClient{Grant: agentdv1.GrantType_GRANT_TYPE_ENTERPRISE_MANAGED,
		IdentityProvider: &agentdv1.IdentityProvider{Issuer: "idp.example", TokenEndpoint: "https://idp.example/token"}}, "echo")
	run := oauthGenerate(t, client, agent, "alice", nil)
	st, _ := status.FromError(run.err)
	for _, want := range []string{
		"oauth.client_id: is required with the ENTERPRISE_MANAGED grant",
		"oauth.identity_provider: issuer and token_endpoint exclude each other",
		"oauth.identity_provider.issuer: must be an absolute http or https URL",
		"oauth.identity_provider.client_id: is required: a declaration that names its own identity provider takes nothing from the service's",
		"oauth.identity_provider.id_token: is required",
	} {
		if got := strings.Join(detailTexts(st), "\n"); st.Code() != codes.InvalidArgument || !strings.Contains(got, want) {
			t.Errorf("status %v %q does not say %q", st.Code(), got, want)
		}
	}
}
