package app_test

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"database/sql"
	"encoding/base64"
	"encoding/hex"
	"encoding/pem"
	"fmt"
	"io/fs"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"google.golang.org/grpc/codes"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/durationpb"

	bridgev1 "github.com/agentd/agentd/gen/go/agentd/bridge/v1"
	agentdv1 "github.com/agentd/agentd/gen/go/agentd/v1"
	"github.com/agentd/agentd/internal/config"
	"github.com/agentd/agentd/internal/oauthtest"
)

// cnryWrongSecret is a client secret the authorization server refuses.
const cnryWrongSecret = "cnry-wrongsecret-6d2e"

// canaryECKey is a new P-256 private key as PEM (PKCS #8) and the strings
// that would show its material: each line of the PEM body, and the
// private scalar in hex, base64 and base64url (as a JWK's "d").
func canaryECKey(t *testing.T) (*ecdsa.PrivateKey, string, []string) {
	t.Helper()
	k, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	der, err := x509.MarshalPKCS8PrivateKey(k)
	if err != nil {
		t.Fatal(err)
	}
	d, err := k.Bytes()
	if err != nil {
		t.Fatal(err)
	}
	text := string(pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: der}))
	var parts []string
	for line := range strings.Lines(text) {
		if line = strings.TrimSpace(line); line != "" && !strings.HasPrefix(line, "-----") {
			parts = append(parts, line)
		}
	}
	parts = append(parts, hex.EncodeToString(d), base64.StdEncoding.EncodeToString(d), base64.RawURLEncoding.EncodeToString(d))
	return k, text, parts
}

// TestOAuthSecretsCanary is the secrets canary of agentd as an OAuth
// client (X-M3): the client secret and private keys of url servers'
// oauth declarations, and everything the authorization server issues or
// sees from agentd (codes, access and refresh tokens, PKCE verifiers,
// client assertions), appear in none of agentd's logs, spans, metrics
// (X-O1), events (the authorization requests' URLs included), errors,
// RPC answers or store files. It runs an authorization code grant
// answered on the stream, the kept token's reuse, a refresh, the same
// with private_key_jwt, client credentials (and their renewal), the
// enterprise-managed grant (an end user's ID token exchanged, from the
// request or from the service's file, the identity assertion grant
// presented, paused and resumed), cached
// tool listings, a generation paused at an approval with both
// declarations and its resume, Previews, a revocation, and the refusals
// (a wrong secret, an unregistered key, a redirect with another state, a
// person who refuses, nobody to answer, invalid declarations). With
// store.encryption_key_file the tokens are in the store, sealed; without
// one, no file under the state directory holds them. No MCP server
// process runs (url servers only), so it may run in parallel. Url servers
// registered under bridge.servers and used by ref: (a client secret and a
// private key from files, a static token in the configuration) run the
// same grants, a pause and its resume, and a refused override.
func TestOAuthSecretsCanary(t *testing.T) {
	t.Parallel()
	for _, sealed := range []bool{true, false} {
		name := "no key"
		if sealed {
			name = "sealed store"
		}
		t.Run(name, func(t *testing.T) { oauthCanary(t, sealed) })
	}
}

func oauthCanary(t *testing.T, sealed bool) {
	erpKey, erpPEM, erpParts := canaryECKey(t)
	_, wrongPEM, wrongParts := canaryECKey(t)
	crm := oauthtest.New(t, oauthtest.Options{ChallengeScope: true, OfflineAccess: true})
	erp := oauthtest.New(t, oauthtest.Options{ChallengeScope: true, OfflineAccess: true, PublicKey: &erpKey.PublicKey})
	hr := oauthtest.New(t, oauthtest.Options{IdentityProvider: true})

	dir := t.TempDir()
	cfg := testConfig(t)
	cfg.StateDir = filepath.Join(dir, "state")
	cfg.Bridge.AllowPrivateNetworks = true
	if sealed {
		cfg.Store.EncryptionKeyFile = filepath.Join(dir, "store.key")
		if err := os.WriteFile(cfg.Store.EncryptionKeyFile, []byte(hex.EncodeToString(randomBytes(t, 32))), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	// Registered url servers (X-M1), their secrets in files beside the
	// state directory, and a static token in the configuration itself.
	docs := oauthtest.New(t, oauthtest.Options{}) // whose tokens no subtest expires
	static, _ := docs.Issue("mcp:read")
	secretIn := func(name, content string) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte(content), 0o600); err != nil {
			t.Fatal(err)
		}
		return p
	}
	cfg.Bridge.Servers = map[string]config.Server{
		"reg-crm": {URL: crm.MCPURL, OAuth: &config.ServerOAuth{ClientID: crm.ClientID, ClientSecretFile: secretIn("crm-secret", crm.ClientSecret)}},
		"reg-erp": {URL: erp.MCPURL, OAuth: &config.ServerOAuth{Grant: config.GrantClientCredentials, ClientID: erp.ClientID,
			PrivateKeyFile: secretIn("erp.pem", erpPEM), PrivateKeyID: "k1"}},
		"reg-static": {URL: docs.MCPURL, Authorization: static},
		"reg-hr":     {URL: hr.MCPURL, OAuth: &config.ServerOAuth{Grant: config.GrantEnterpriseManaged, ClientID: hr.ClientID, ClientSecretFile: secretIn("hr-secret", hr.ClientSecret)}},
	}
	cfg.OAuth.IdentityProvider = config.IdentityProvider{Issuer: hr.IdP.Issuer, ClientID: hr.IdP.ClientID,
		IDTokenFile: secretIn("id-token", hr.IdP.IDToken(t, "workload@example.com"))}
	s := newCanaryStack(t, cfg)
	var c canaryCapture

	secretDecl := &agentdv1.OAuthClient{ClientId: crm.ClientID, ClientSecret: crm.ClientSecret}
	keyDecl := &agentdv1.OAuthClient{ClientId: erp.ClientID, PrivateKey: erpPEM, PrivateKeyId: "k1"}
	machineDecl := &agentdv1.OAuthClient{Grant: agentdv1.GrantType_GRANT_TYPE_CLIENT_CREDENTIALS, ClientId: erp.ClientID, PrivateKey: erpPEM}
	start := func(agent *agentdv1.Agent, endUser string) *agentdv1.GenerateRequest {
		r := canaryStart(agent)
		r.GetStart().EndUser, r.GetStart().AnswerTimeout = endUser, durationpb.New(roomyAnswer)
		return r
	}
	// answer answers every authorization request with the redirect that
	// redirect makes of the authorization URL; nil half-closes instead.
	answer := func(t *testing.T, redirect func(authURL string) string) func(agentdv1.AgentService_GenerateClient, *agentdv1.GenerateResponse) {
		return func(stream agentdv1.AgentService_GenerateClient, ev *agentdv1.GenerateResponse) {
			r := ev.GetAuthorizationRequest()
			if r == nil {
				return
			}
			if redirect == nil {
				_ = stream.CloseSend()
				return
			}
			if err := stream.Send(&agentdv1.GenerateRequest{Kind: &agentdv1.GenerateRequest_AuthorizationResponse{
				AuthorizationResponse: &agentdv1.AuthorizationResponse{RequestId: r.GetId(), RedirectUrl: redirect(r.GetUrl())}}}); err != nil {
				t.Error(err)
			}
		}
	}
	approve := func(as *oauthtest.Server) func(*testing.T) func(string) string {
		return func(t *testing.T) func(string) string {
			return func(u string) string {
				redirect, err := as.Approve(t.Context(), u)
				if err != nil {
					t.Errorf("approving: %v", err)
				}
				return redirect
			}
		}
	}
	authorizations := func(events []*agentdv1.GenerateResponse) int {
		n := 0
		for _, ev := range events {
			if ev.GetAuthorizationRequest() != nil {
				n++
			}
		}
		return n
	}
	// completes runs a generation that must complete after asking the
	// person asks times (redirect answers them; nil half-closes).
	completes := func(t *testing.T, agent *agentdv1.Agent, endUser string, redirect func(string) string, asks int) {
		t.Helper()
		events, err := c.generate(t, s.client, start(agent, endUser), answer(t, redirect))
		canaryCompleted(t, events, err)
		if got := authorizations(events); got != asks {
			t.Errorf("%d authorization requests, want %d", got, asks)
		}
	}
	fails := func(t *testing.T, agent *agentdv1.Agent, endUser string, redirect func(string) string, want codes.Code) {
		t.Helper()
		_, err := c.generate(t, s.client, start(agent, endUser), answer(t, redirect))
		canaryStatus(t, err, want)
	}

	enterpriseDecl := &agentdv1.OAuthClient{Grant: agentdv1.GrantType_GRANT_TYPE_ENTERPRISE_MANAGED, ClientId: hr.ClientID, ClientSecret: hr.ClientSecret,
		IdentityProvider: &agentdv1.IdentityProvider{IdToken: hr.IdP.IDToken(t, "henry@example.com")}}
	enterprise := oauthAgent(t, hr.MCPURL, enterpriseDecl, "echo")
	withSecret := oauthAgent(t, crm.MCPURL, secretDecl, "echo")
	withKey := oauthAgent(t, erp.MCPURL, keyDecl, "echo")
	machine := oauthAgent(t, erp.MCPURL, machineDecl, "echo")

	t.Run("authorization code with client_secret, approved on the stream", func(t *testing.T) {
		completes(t, withSecret, "alice", approve(crm)(t), 1)
	})
	t.Run("the kept token reused", func(t *testing.T) {
		completes(t, withSecret, "alice", nil, 0)
	})
	t.Run("an expired token refreshed", func(t *testing.T) {
		before := crm.Grants()["refresh_token"]
		crm.ExpireAll()
		completes(t, withSecret, "alice", nil, 0)
		if crm.Grants()["refresh_token"] != before+1 {
			t.Errorf("grants %v: no refresh", crm.Grants())
		}
	})
	t.Run("authorization code with private_key_jwt", func(t *testing.T) {
		completes(t, withKey, "bob", approve(erp)(t), 1)
		erp.ExpireAll()
		completes(t, withKey, "bob", nil, 0)
	})
	t.Run("client credentials with private_key_jwt, renewed after expiry", func(t *testing.T) {
		completes(t, machine, "", nil, 0)
		erp.ExpireAll()
		completes(t, machine, "", nil, 0)
		if erp.Grants()["client_credentials"] != 2 {
			t.Errorf("grants %v, want two client_credentials", erp.Grants())
		}
	})

	t.Run("enterprise-managed grant: an ID token exchanged, kept, renewed", func(t *testing.T) {
		completes(t, enterprise, "henry", nil, 0)
		completes(t, enterprise, "henry", nil, 0)
		hr.ExpireAll()
		completes(t, enterprise, "henry", nil, 0)
		completes(t, refAgent(t, "reg-hr", "", "echo"), "ivy", nil, 0)
		if got := hr.Grants()["urn:ietf:params:oauth:grant-type:jwt-bearer"]; got != 3 {
			t.Errorf("grants %v, want three JWT bearer grants", hr.Grants())
		}
	})
	t.Run("enterprise-managed grant paused at an approval and resumed", func(t *testing.T) {
		gatedHR := func() *agentdv1.Agent {
			a := oauthAgent(t, hr.MCPURL, enterpriseDecl, "echo")
			a.Mcps[0].RequireApproval = &agentdv1.ApprovalPolicy{Mode: agentdv1.ApprovalMode_APPROVAL_MODE_ALWAYS}
			return a
		}
		request, paused, _ := c.pauseAtApproval(t, s.client, start(gatedHR(), "henry"), s.stateDir)
		events, err := c.generate(t, s.client, canaryApprove(t, paused, request, gatedHR()), nil)
		canaryCompleted(t, events, err)
	})

	// Both declarations, secret and key, in a paused generation's
	// checkpoint; the resume carries them again.
	gated := func() *agentdv1.Agent {
		a := oauthAgent(t, erp.MCPURL, machineDecl, "erp__echo")
		a.Mcps[0].Name = "erp"
		a.Mcps[0].RequireApproval = &agentdv1.ApprovalPolicy{Mode: agentdv1.ApprovalMode_APPROVAL_MODE_ALWAYS}
		a.Mcps = append(a.Mcps, withSecret.GetMcps()[0])
		a.ToolNameConflict = agentdv1.ToolNameConflict_TOOL_NAME_CONFLICT_PREFIX
		return a
	}
	var (
		request          *agentdv1.ApprovalRequest
		paused           *agentdv1.GenerationPaused
		storeWhilePaused string
	)
	t.Run("pause at an approval", func(t *testing.T) {
		request, paused, storeWhilePaused = c.pauseAtApproval(t, s.client, start(gated(), "alice"), s.stateDir)
	})
	t.Run("resume with the approval", func(t *testing.T) {
		events, err := c.generate(t, s.client, canaryApprove(t, paused, request, gated()), nil)
		canaryCompleted(t, events, err)
	})

	t.Run("registered url servers by ref", func(t *testing.T) {
		completes(t, refAgent(t, "reg-crm", "", "echo"), "frank", approve(crm)(t), 1)
		completes(t, refAgent(t, "reg-crm", "", "echo"), "frank", nil, 0)
		completes(t, refAgent(t, "reg-erp", "", "echo"), "grace", nil, 0)
		completes(t, refAgent(t, "reg-static", "", "echo"), "", nil, 0)
	})
	regGated := func() *agentdv1.Agent {
		a := refAgent(t, "reg-erp", "", "echo")
		a.Mcps[0].RequireApproval = &agentdv1.ApprovalPolicy{Mode: agentdv1.ApprovalMode_APPROVAL_MODE_ALWAYS}
		a.Mcps = append(a.Mcps, &agentdv1.MCPServer{Transport: &agentdv1.MCPServer_Ref{Ref: "reg-static"}})
		a.ToolNameConflict = agentdv1.ToolNameConflict_TOOL_NAME_CONFLICT_PREFIX
		a.ProviderOptions = refAgent(t, "reg-erp", "", "reg-erp__echo").GetProviderOptions()
		return a
	}
	var storeWhilePausedRegistered string
	t.Run("registered url servers paused at an approval and resumed", func(t *testing.T) {
		request, paused, store := c.pauseAtApproval(t, s.client, start(regGated(), "grace"), s.stateDir)
		storeWhilePausedRegistered = store
		events, err := c.generate(t, s.client, canaryApprove(t, paused, request, regGated()), nil)
		canaryCompleted(t, events, err)
	})
	t.Run("a ref that would replace its registration's secrets", func(t *testing.T) {
		a := refAgent(t, "reg-crm", "", "echo")
		a.Mcps[0].Authorization = cnryWrongSecret
		fails(t, a, "", nil, codes.InvalidArgument)
	})

	t.Run("client credentials with a wrong secret", func(t *testing.T) {
		fails(t, oauthAgent(t, crm.MCPURL, &agentdv1.OAuthClient{Grant: agentdv1.GrantType_GRANT_TYPE_CLIENT_CREDENTIALS,
			ClientId: crm.ClientID, ClientSecret: cnryWrongSecret}, "echo"), "", nil, codes.Unauthenticated)
	})
	t.Run("client credentials with an unregistered key", func(t *testing.T) {
		fails(t, oauthAgent(t, erp.MCPURL, &agentdv1.OAuthClient{Grant: agentdv1.GrantType_GRANT_TYPE_CLIENT_CREDENTIALS,
			ClientId: erp.ClientID, PrivateKey: wrongPEM}, "echo"), "wrong-key", nil, codes.Unauthenticated)
	})
	t.Run("a redirect with another state", func(t *testing.T) {
		// Its code is good: agentd must refuse it without showing it.
		fails(t, withSecret, "carol", func(authURL string) string {
			u, err := url.Parse(approve(crm)(t)(authURL))
			if err != nil {
				t.Fatal(err)
			}
			q := u.Query()
			if q.Get("code") == "" {
				t.Error("the redirect carries no code")
			}
			q.Set("state", "forged-"+q.Get("state"))
			u.RawQuery = q.Encode()
			return u.String()
		}, codes.Unauthenticated)
	})
	t.Run("the person refuses", func(t *testing.T) {
		crm.DenyNext("access_denied")
		fails(t, withSecret, "dave", approve(crm)(t), codes.Unauthenticated)
	})
	t.Run("nobody answers", func(t *testing.T) {
		if !sealed {
			fails(t, withSecret, "erin", nil, codes.Unauthenticated)
			return
		}
		// X-M2: with a sealed store the generation pauses (the request's
		// PKCE verifier and client secret sealed in its checkpoint); the
		// resume brings the redirect.
		events, err := c.generate(t, s.client, start(withSecret, "erin"), answer(t, nil))
		if err != nil {
			t.Fatalf("nobody answers: %v, want a pause", err)
		}
		var paused *agentdv1.GenerationPaused
		for _, ev := range events {
			if p := ev.GetPaused(); p != nil {
				paused = p
			}
		}
		if len(paused.GetAuthorizationRequests()) != 1 {
			t.Fatalf("paused %v, want one authorization request", paused)
		}
		r := paused.GetAuthorizationRequests()[0]
		events, err = c.generate(t, s.client, &agentdv1.GenerateRequest{Kind: &agentdv1.GenerateRequest_Resume{Resume: &agentdv1.ResumeGeneration{
			GenerationId: paused.GetGenerationId(), Agent: withSecret,
			AuthorizationResponses: []*agentdv1.AuthorizationResponse{{RequestId: r.GetId(), RedirectUrl: approve(crm)(t)(r.GetUrl())}},
		}}}, nil)
		canaryCompleted(t, events, err)
	})

	t.Run("the schema cache and pools of oauth servers", func(t *testing.T) {
		// An oauth server's tool list is never cached (each end user may
		// see other tools), even when the agent asks for the cache; the
		// admin API's answers must hold none of the secrets all the same.
		for _, a := range []*agentdv1.Agent{proto.CloneOf(withSecret), proto.CloneOf(machine)} {
			a.McpCache = proto.Bool(true)
			completes(t, a, "alice", nil, 0)
		}
		cache, err := s.admin.GetCacheStats(t.Context(), &bridgev1.GetCacheStatsRequest{})
		c.rpcError(scenario(t), err, nil)
		c.response(scenario(t), cache)
		if cache.GetSize() != 0 {
			t.Errorf("the schema cache holds %d lists of oauth servers, want none", cache.GetSize())
		}
		pools, err := s.admin.GetPoolStats(t.Context(), &bridgev1.GetPoolStatsRequest{})
		c.rpcError(scenario(t), err, nil)
		c.response(scenario(t), pools)
	})
	t.Run("invalid oauth declarations refused before anything connects", func(t *testing.T) {
		notAKey := "-----BEGIN PRIVATE KEY-----\n" + cnryWrongSecret + "\n-----END PRIVATE KEY-----\n"
		bad := func(o *agentdv1.OAuthClient, authorization string) *agentdv1.Agent {
			a := oauthAgent(t, crm.MCPURL, o, "echo")
			a.Mcps[0].Authorization = authorization
			return a
		}
		for name, agent := range map[string]*agentdv1.Agent{
			"secret and key":        bad(&agentdv1.OAuthClient{ClientId: crm.ClientID, ClientSecret: crm.ClientSecret, PrivateKey: erpPEM}, ""),
			"not a key":             bad(&agentdv1.OAuthClient{ClientId: crm.ClientID, PrivateKey: notAKey}, ""),
			"key without client id": bad(&agentdv1.OAuthClient{PrivateKey: wrongPEM}, ""),
			"oauth and a token":     bad(secretDecl, cnryWrongSecret),
		} {
			t.Run(name, func(t *testing.T) {
				fails(t, agent, "", nil, codes.InvalidArgument)
				_, err := s.client.Preview(t.Context(), &agentdv1.PreviewRequest{Agent: agent, Messages: canaryStart(nil).GetStart().GetMessages()})
				c.rpcError(scenario(t), err, nil)
				canaryStatus(t, err, codes.InvalidArgument)
			})
		}
	})
	t.Run("previews", func(t *testing.T) {
		for _, agent := range []*agentdv1.Agent{machine, withSecret, withKey, gated(), regGated(), enterprise} {
			preview, err := s.client.Preview(t.Context(), &agentdv1.PreviewRequest{Agent: agent, Messages: canaryStart(nil).GetStart().GetMessages()})
			c.rpcError(scenario(t), err, nil)
			c.response(scenario(t), preview)
		}
	})
	t.Run("revoke a user's tokens", func(t *testing.T) {
		resp, err := s.tokenAdmin.RevokeTokens(t.Context(), &agentdv1.RevokeTokensRequest{EndUser: "bob", ServerUrl: erp.MCPURL})
		c.rpcError(scenario(t), err, nil)
		c.response(scenario(t), resp)
		if resp.GetRevoked() != 1 {
			t.Errorf("revoked %d tokens, want bob's one", resp.GetRevoked())
		}
	})

	s.scrapeMetrics(t)
	s.stop() // every span ended, every log written, the store closed

	stateFiles := canaryDirBytes(t, s.stateDir)
	rows, n := canaryTokenRows(t, s.stateDir)
	t.Run("canaries reached their destinations", func(t *testing.T) {
		canaryReached(t, map[string]bool{
			"crm authenticated agentd by its client secret": crm.AuthMethods()["client_secret_post"]+crm.AuthMethods()["client_secret_basic"] > 0,
			"erp authenticated agentd by its private key":   erp.AuthMethods()["private_key_jwt"] >= 4,
			"crm exchanged a code and refreshed":            crm.Grants()["authorization_code"] >= 1 && crm.Grants()["refresh_token"] >= 1,
			"crm got a PKCE verifier":                       len(crm.Proofs()) > 0,
			"erp got client assertions":                     len(erp.Proofs()) > 0,
			"hr got identity assertion grants":              len(hr.Proofs()) >= 3,
		})
		// With a key the tokens are in the store, so searching it means
		// something; without one, they must be nowhere on disk.
		if sealed && n == 0 {
			t.Error("no OAuth token stored with store.encryption_key_file set")
		}
		if !sealed && n != 0 {
			t.Errorf("%d OAuth tokens stored without store.encryption_key_file", n)
		}
	})

	secrets := []string{crm.ClientSecret, erp.ClientSecret, hr.ClientSecret, cnryWrongSecret, erpPEM, wrongPEM}
	secrets = append(append(secrets, erpParts...), wrongParts...)
	for _, as := range []*oauthtest.Server{crm, erp, docs, hr} {
		secrets = append(append(secrets, as.Issued()...), as.Proofs()...)
	}
	canaryNoLeaks(t, secrets, s.canaryOutputs, &c, storeWhilePaused, s.stateDir,
		canarySource{"every file under the state directory", "state-files.bin", stateFiles},
		canarySource{"the store's oauth_tokens rows", "token-rows.txt", rows},
		canarySource{"the store while a generation of registered servers was paused", "store-paused-registered.bin", storeWhilePausedRegistered})
}

// canaryDirBytes returns the bytes of every regular file under dir.
func canaryDirBytes(t *testing.T, dir string) string {
	t.Helper()
	var b strings.Builder
	err := filepath.WalkDir(dir, func(path string, d fs.DirEntry, err error) error {
		if err != nil || !d.Type().IsRegular() {
			return err
		}
		data, err := os.ReadFile(path)
		fmt.Fprintf(&b, "== %s\n", path)
		b.Write(data)
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	return b.String()
}

// canaryTokenRows returns every row of the SQLite store's oauth_tokens
// table, and their number.
func canaryTokenRows(t *testing.T, stateDir string) (string, int) {
	t.Helper()
	db, err := sql.Open("sqlite", "file:"+filepath.Join(stateDir, "agentd.db")+"?mode=ro")
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	rows, err := db.QueryContext(t.Context(), `SELECT tenant, end_user, server, data FROM oauth_tokens`)
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	var b strings.Builder
	n := 0
	for rows.Next() {
		var tenant, endUser, server string
		var data []byte
		if err := rows.Scan(&tenant, &endUser, &server, &data); err != nil {
			t.Fatal(err)
		}
		n++
		fmt.Fprintf(&b, "%s | %s | %s | %s\n", tenant, endUser, server, data)
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	if n == 0 {
		b.WriteString("(no rows)\n")
	}
	return b.String(), n
}

func randomBytes(t *testing.T, n int) []byte {
	t.Helper()
	b := make([]byte, n)
	if _, err := rand.Read(b); err != nil {
		t.Fatal(err)
	}
	return b
}
