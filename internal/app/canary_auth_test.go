package app_test

import (
	"context"
	"crypto/tls"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	jose "github.com/go-jose/go-jose/v4"
	"google.golang.org/grpc/codes"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/protobuf/proto"

	bridgev1 "github.com/agentd/agentd/gen/go/agentd/bridge/v1"
	agentdv1 "github.com/agentd/agentd/gen/go/agentd/v1"
	"github.com/agentd/agentd/internal/app"
	"github.com/agentd/agentd/internal/auth"
	"github.com/agentd/agentd/internal/auth/oidctest"
	"github.com/agentd/agentd/internal/config"
	"github.com/agentd/agentd/internal/tlsconf/tlstest"
)

// The canaries of authentication and TLS: credentials callers send, and
// where agentd's own keys lie.
const (
	cnryAPIKey    = "cnry-apikey-6d1e"    // a valid API key (generate and admin, tenant acme)
	cnryWrongKey  = "cnry-wrongkey-2b8c"  // an API key agentd does not know
	cnryMalformed = "cnry-malformed-93fa" // in authorization headers that are not "Bearer <credential>"
	cnryJWTish    = "cnry-jwtish-0c4d"    // in a credential shaped like a JWT that is none
	cnryClaim     = "cnry-claim-a71b"     // a claim of every token, which agentd reads for nothing
	cnryKeyDir    = "cnry-keydir-5e0f"    // the directory of every TLS file: keys, certificates, CAs
	cnryKeyBytes  = "cnry-keybytes-44d0"  // in the contents of the broken key files
	cnryTenantKey = "cnry-tenantkey-1f2e" // tenant acme's own OpenAI key
)

// TestAuthSecretsCanary is TestSecretsCanary for the credentials that
// authenticate callers and the hop to a remote bridge (X-I2, X-I3, X-I4,
// X-I8, X-I9): API keys (a valid one, an
// unknown one, ones in malformed headers), OIDC tokens (valid, of a role
// not enough, expired, for another audience, mis-signed; each with a
// canary claim) and the paths and contents of TLS keys (agentd's tls, the
// bridge hop's bridge.tls on both sides, the remote bridge's admin.tls,
// all in a directory whose name is a canary, each rotated to a broken
// file mid-run, and broken at start). agentd dials a remote bridge over
// mutual TLS; generations succeed with each credential, are refused
// without a valid one, pause (a stored record) and resume; the bridge's
// admin service answers over its own TLS listener. Then none of the
// canaries may appear in anything agentd or the bridge produced: logs
// (JSON and text, debug level), spans, the errors and events clients got,
// the admin answers, the errors of a start refused, the state store. The
// SHA-256 of the API key is in the configuration and may appear; the key
// may not. It also checks that every credential was looked at (the log
// says why each refused one was) and every rotation seen, so that the
// absence of the canaries means something. With -artifacts, everything
// captured is kept in the test's artifact directory.
func TestAuthSecretsCanary(t *testing.T) {
	t.Parallel()
	mod := time.Now().Add(-time.Hour)
	keyDir := filepath.Join(t.TempDir(), cnryKeyDir)
	if err := os.Mkdir(keyDir, 0o700); err != nil {
		t.Fatal(err)
	}
	// Every private key's PEM body is a canary too.
	var keyBodies []string
	write := func(name string, data []byte) string {
		path := filepath.Join(keyDir, name)
		tlstest.WriteFile(t, path, data, mod)
		return path
	}
	pairFiles := func(name string, pair tlstest.Pair) config.TLS {
		keyBodies = append(keyBodies, strings.Split(string(pair.KeyPEM), "\n")[1])
		return config.TLS{CertFile: write(name+".pem", pair.CertPEM), KeyFile: write(name+"-key.pem", pair.KeyPEM), MinVersion: "1.2"}
	}
	brokenKey := []byte("-----BEGIN PRIVATE KEY-----\n" + cnryKeyBytes + "\n-----END PRIVATE KEY-----\n")
	breakKey := func(path string) { tlstest.WriteFile(t, path, brokenKey, mod.Add(time.Minute)) }
	ca := tlstest.NewCA(t)
	caFile := write("ca.pem", ca.PEM)

	is := oidctest.New(t)
	signing, forged := oidctest.NewKey(t, "k1", jose.ES256), oidctest.NewKey(t, "k1", jose.ES256)
	is.Publish(signing)
	now := time.Now().Unix()
	token := func(k oidctest.Key, roles []string, edits oidctest.Claims) string {
		claims := is.Claims(now, "alice@acme", "acme", roles, edits)
		claims["cnry"] = cnryClaim
		return oidctest.Sign(t, k, claims)
	}
	both := []string{auth.RoleGenerate, auth.RoleAdmin}
	tokens := map[string]string{
		"valid":          token(signing, both, nil),
		"observer":       token(signing, []string{auth.RoleObserver}, nil),
		"expired":        token(signing, both, oidctest.Claims{"iat": now - 7200, "nbf": now - 7200, "exp": now - 3600}),
		"other audience": token(signing, both, oidctest.Claims{"aud": "someone-else"}),
		"mis-signed":     token(forged, both, nil),
	}
	secrets := append([]string{cnryAPIKey, cnryWrongKey, cnryMalformed, cnryJWTish, cnryClaim, cnryKeyDir, cnryKeyBytes, cnryTenantKey}, canarySecrets...)
	for _, tok := range tokens {
		// The whole token, its claims and its signature.
		parts := strings.Split(tok, ".")
		secrets = append(secrets, tok, parts[1], parts[2])
	}

	var sawTenantKey atomic.Bool
	api := newCanaryAPI()
	apiSrv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Header.Get("Authorization") == "Bearer "+cnryTenantKey {
			sawTenantKey.Store(true)
		}
		api.ServeHTTP(w, r)
	}))
	t.Cleanup(apiSrv.Close)
	web := newCanaryMCP(t, mcpModeOK)

	// What agentd and the bridge share: who may call, and the tenant.
	base := config.Default()
	base.Bridge.Pool.Warm = 0
	base.ShutdownDrain = 0
	base.Auth.APIKeys = []config.APIKey{{Name: "acme-app", SHA256: auth.HashKey(cnryAPIKey), Tenant: "acme", Roles: both}}
	base.Auth.OIDC = []config.OIDCIssuer{{Issuer: is.URL, Audience: oidctest.Audience}}
	base.Tenants = map[string]config.Tenant{"acme": {Providers: map[string]config.Provider{"openai": {APIKey: cnryTenantKey, BaseURL: apiSrv.URL + "/v1"}}}}

	out := newCanaryOutputs(t)

	// The remote bridge: mutual TLS for agentd alone, and its admin
	// service on a TLS listener of its own.
	bcfg := base
	bcfg.StateDir = t.TempDir()
	bcfg.Bridge.AllowPrivateNetworks = true
	bcfg.Bridge.TLS = pairFiles("bridge", ca.Leaf(t, "bridge"))
	bcfg.Bridge.TLS.ClientCAFile = caFile
	bcfg.Bridge.TrustedPeers = []string{agentdPrincipal}
	bcfg.Admin.Listen = "127.0.0.1:0" // its listener is serveTCP2's
	bcfg.Admin.TLS = pairFiles("admin", ca.Leaf(t, "admin"))
	if err := bcfg.Validate(); err != nil {
		t.Fatal(err)
	}
	bo := out.options(bcfg)
	b, err := app.NewBridge(bo)
	if err != nil {
		t.Fatal(err)
	}
	bridgeAddr, adminAddr, stopBridge := serveTCP2(t, func(ctx context.Context, lis, admin net.Listener) error {
		return b.ServeWithAdmin(ctx, lis, admin, bo)
	})

	// agentd: TLS on its listener, dialling the bridge with its client
	// certificate.
	acfg := base
	acfg.StateDir = t.TempDir()
	acfg.Providers = map[string]config.Provider{"openai": {BaseURL: apiSrv.URL + "/v1"}}
	acfg.TLS = pairFiles("agentd", ca.Leaf(t, "agentd"))
	acfg.Bridge.Address = bridgeAddr
	acfg.Bridge.TLS = pairFiles("agentd-client", peerLeaf(t, ca, "agentd-client", agentdPrincipal))
	acfg.Bridge.TLS.CAFile = caFile
	if err := acfg.Validate(); err != nil {
		t.Fatal(err)
	}
	ao := out.options(acfg)
	a, err := app.NewAgent(ao)
	if err != nil {
		t.Fatal(err)
	}
	agentdAddr, stopAgent := startTCP(t, func(ctx context.Context, lis net.Listener) error { return a.Serve(ctx, lis, ao) })

	trusting := &tls.Config{RootCAs: ca.Pool()}
	client := agentdv1.NewAgentServiceClient(dialTLS(t, agentdAddr, trusting))
	admin := bridgev1.NewBridgeAdminServiceClient(dialTLS(t, adminAddr, trusting))
	var c canaryCapture
	key := func(k string) []string { return []string{"Bearer " + k} }
	agent := func(approval bool) *agentdv1.Agent {
		w := web.decl(cnryAuth)
		if approval {
			w.RequireApproval = &agentdv1.ApprovalPolicy{Mode: agentdv1.ApprovalMode_APPROVAL_MODE_ALWAYS}
		}
		return &agentdv1.Agent{Provider: "openai", Model: "gpt-4o-mini", Mcps: []*agentdv1.MCPServer{w}, ToolNameConflict: agentdv1.ToolNameConflict_TOOL_NAME_CONFLICT_PREFIX}
	}
	echoThenText := func(w http.ResponseWriter, _ *http.Request, _ []byte, n int) {
		if n == 1 {
			canaryToolCalls(w, n, [2]string{"web__echo", `{"text":"hello"}`})
			return
		}
		canaryText(w, "done")
	}

	// A client dials only when it first calls: agentd's first handshake
	// with the bridge, in the first generation, is the first look at these
	// files since they were read at start.
	t.Run("the bridge hop's keys rotated to broken files before agentd first dials", func(t *testing.T) {
		breakKey(acfg.Bridge.TLS.KeyFile)
		breakKey(bcfg.Bridge.TLS.KeyFile)
	})

	t.Run("API key: a generation with a tool call", func(t *testing.T) {
		api.set(echoThenText)
		events, err := c.generate(t, client, canaryStart(agent(false)), nil, key(cnryAPIKey)...)
		canaryCompleted(t, events, err)
	})

	t.Run("OIDC token: a generation with a tool call", func(t *testing.T) {
		api.set(echoThenText)
		events, err := c.generate(t, client, canaryStart(agent(false)), nil, key(tokens["valid"])...)
		canaryCompleted(t, events, err)
	})

	t.Run("OIDC token: preview", func(t *testing.T) {
		preview, err := client.Preview(bearer(t.Context(), tokens["valid"]), &agentdv1.PreviewRequest{Agent: agent(false), Messages: canaryStart(nil).GetStart().GetMessages()})
		c.rpcError(scenario(t), err, nil)
		c.response(scenario(t), preview)
		canaryStatus(t, err, codes.OK)
	})

	t.Run("refused credentials", func(t *testing.T) {
		api.set(func(w http.ResponseWriter, _ *http.Request, _ []byte, _ int) {
			t.Error("a refused generation reached the provider")
			w.WriteHeader(http.StatusInternalServerError)
		})
		for _, tc := range []struct {
			name    string
			headers []string
			want    codes.Code
		}{
			{"an unknown API key", key(cnryWrongKey), codes.Unauthenticated},
			{"a credential without a scheme", []string{cnryMalformed}, codes.Unauthenticated},
			{"a Basic credential", []string{"Basic " + cnryMalformed}, codes.Unauthenticated},
			{"two authorization headers, one valid", []string{"Bearer " + cnryAPIKey, "Bearer " + cnryWrongKey}, codes.Unauthenticated},
			{"a credential shaped like a JWT", key("eyJhbGciOiJFUzI1NiJ9." + cnryJWTish + ".c2ln"), codes.Unauthenticated},
			{"an expired token", key(tokens["expired"]), codes.Unauthenticated},
			{"a token for another audience", key(tokens["other audience"]), codes.Unauthenticated},
			{"a token mis-signed", key(tokens["mis-signed"]), codes.Unauthenticated},
			{"a token without the role generate", key(tokens["observer"]), codes.PermissionDenied},
		} {
			t.Run(tc.name, func(t *testing.T) {
				_, err := c.generate(t, client, canaryStart(agent(false)), nil, tc.headers...)
				canaryStatus(t, err, tc.want)
			})
		}
	})

	// Paused with the API key, resumed with a token of the same tenant.
	var (
		request          *agentdv1.ApprovalRequest
		paused           *agentdv1.GenerationPaused
		storeWhilePaused string
	)
	t.Run("API key: pause at an approval request", func(t *testing.T) {
		api.set(echoThenText)
		request, paused, storeWhilePaused = c.pauseAtApproval(t, client, canaryStart(agent(true)), acfg.StateDir, key(cnryAPIKey)...)
	})

	t.Run("OIDC token: resume with the approval", func(t *testing.T) {
		events, err := c.generate(t, client, canaryApprove(t, paused, request, agent(true)), nil, key(tokens["valid"])...)
		canaryCompleted(t, events, err)
	})

	t.Run("admin API over admin.tls", func(t *testing.T) {
		off := false
		for _, tc := range []struct {
			name string
			cred string
			call func(ctx context.Context) (proto.Message, error)
			want codes.Code
		}{
			{"cache stats with the API key", cnryAPIKey, func(ctx context.Context) (proto.Message, error) {
				return admin.GetCacheStats(ctx, &bridgev1.GetCacheStatsRequest{})
			}, codes.OK},
			{"pool stats with the token", tokens["valid"], func(ctx context.Context) (proto.Message, error) {
				return admin.GetPoolStats(ctx, &bridgev1.GetPoolStatsRequest{})
			}, codes.OK},
			{"configure with the token", tokens["valid"], func(ctx context.Context) (proto.Message, error) {
				return admin.ConfigureCache(ctx, &bridgev1.ConfigureCacheRequest{Enabled: &off})
			}, codes.OK},
			{"invalidate with the API key", cnryAPIKey, func(ctx context.Context) (proto.Message, error) {
				return admin.InvalidateCache(ctx, &bridgev1.InvalidateCacheRequest{Server: web.spec()})
			}, codes.OK},
			{"configure with a token of observer", tokens["observer"], func(ctx context.Context) (proto.Message, error) {
				return admin.ConfigureCache(ctx, &bridgev1.ConfigureCacheRequest{Enabled: &off})
			}, codes.PermissionDenied},
			{"cache stats with an unknown API key", cnryWrongKey, func(ctx context.Context) (proto.Message, error) {
				return admin.GetCacheStats(ctx, &bridgev1.GetCacheStatsRequest{})
			}, codes.Unauthenticated},
		} {
			t.Run(tc.name, func(t *testing.T) {
				resp, err := tc.call(bearer(t.Context(), tc.cred))
				c.rpcError(scenario(t), err, nil)
				if err == nil {
					c.response(scenario(t), resp)
				}
				canaryStatus(t, err, tc.want)
			})
		}
	})

	// A server reads its files again at the first handshake after they
	// changed: new connections make them.
	t.Run("server keys rotated to broken files", func(t *testing.T) {
		for _, path := range []string{acfg.TLS.KeyFile, bcfg.Admin.TLS.KeyFile, bcfg.Bridge.TLS.KeyFile} {
			tlstest.WriteFile(t, path, brokenKey, mod.Add(2*time.Minute))
		}
		api.set(echoThenText)
		events, err := c.generate(t, agentdv1.NewAgentServiceClient(dialTLS(t, agentdAddr, trusting)), canaryStart(agent(false)), nil, key(cnryAPIKey)...)
		canaryCompleted(t, events, err)
		stats, err := bridgev1.NewBridgeAdminServiceClient(dialTLS(t, adminAddr, trusting)).GetCacheStats(bearer(t.Context(), tokens["valid"]), &bridgev1.GetCacheStatsRequest{})
		c.rpcError(scenario(t), err, nil)
		c.response(scenario(t), stats)
		canaryStatus(t, err, codes.OK)
		peer := &tls.Config{RootCAs: ca.Pool(), Certificates: []tls.Certificate{peerLeaf(t, ca, "checker", agentdPrincipal).Certificate(t)}}
		_, err = healthpb.NewHealthClient(dialTLS(t, bridgeAddr, peer)).Check(t.Context(), &healthpb.HealthCheckRequest{})
		c.rpcError(scenario(t), err, nil)
		canaryStatus(t, err, codes.OK)
	})

	// What `agentd serve` and `agentd bridge` print when they cannot
	// start.
	t.Run("key files that cannot be used at start", func(t *testing.T) {
		broken := write("broken-key.pem", brokenKey)
		missing := filepath.Join(keyDir, "missing-key.pem")
		// The running ones' keys are broken by now: each start gets good
		// files but for the one it is refused for.
		agentdHop := pairFiles("agentd-client-2", peerLeaf(t, ca, "agentd-client-2", agentdPrincipal))
		agentdHop.CAFile = caFile
		bridgeTLS := pairFiles("bridge-2", ca.Leaf(t, "bridge-2"))
		bridgeTLS.ClientCAFile = caFile
		// Each start is agentd's or the bridge's running configuration,
		// edited.
		agentd := func(edit func(*config.Config)) func() error {
			return func() error {
				cfg := acfg
				cfg.StateDir = t.TempDir()
				edit(&cfg)
				a, err := app.NewAgent(out.options(cfg))
				if err == nil {
					a.Close()
				}
				return err
			}
		}
		bridge := func(edit func(*config.Config)) func() error {
			return func() error {
				cfg := bcfg
				edit(&cfg)
				_, err := app.NewBridge(out.options(cfg))
				return err
			}
		}
		for _, tc := range []struct {
			name, setting string
			start         func() error
		}{
			{"agentd's tls.key_file missing", "tls.key_file", agentd(func(cfg *config.Config) {
				cfg.Bridge.TLS, cfg.TLS.KeyFile = agentdHop, missing
			})},
			{"agentd's bridge.tls.key_file broken", "bridge.tls.key_file", agentd(func(cfg *config.Config) { cfg.Bridge.TLS.KeyFile = broken })},
			{"the bridge's bridge.tls.key_file missing", "bridge.tls.key_file", bridge(func(cfg *config.Config) { cfg.Bridge.TLS.KeyFile = missing })},
			{"the bridge's admin.tls.key_file broken", "admin.tls.key_file", bridge(func(cfg *config.Config) {
				cfg.Bridge.TLS, cfg.Admin.TLS.KeyFile = bridgeTLS, broken
			})},
		} {
			t.Run(tc.name, func(t *testing.T) {
				err := tc.start()
				if err == nil {
					t.Fatal("started")
				}
				c.rpcError(scenario(t), err, nil)
				if !strings.Contains(" "+err.Error(), " "+tc.setting) {
					t.Errorf("%v: does not name %s", err, tc.setting)
				}
			})
		}
	})

	stopAgent()
	stopBridge() // every span ended, every log written, the store closed

	t.Run("canaries reached their destinations", func(t *testing.T) {
		_, jwks := is.Fetches()
		canaryReached(t, map[string]bool{
			"OpenAI got tenant acme's own key":                sawTenantKey.Load(),
			"the MCP server got its token":                    web.sawToken.Load(),
			"agentd and the bridge fetched the issuer's keys": jwks >= 2,
		})
		// Each refused credential was looked at, and refused for what it
		// is; each broken key was read, and refused.
		log := out.textLogs.String()
		for _, want := range []string{
			`reason="unknown API key"`,
			`reason="malformed authorization (want Bearer and a credential)"`,
			`reason="more than one authorization header"`,
			`reason="malformed token: its claims are not`,
			`token expired`,
			`expected audience`,
			`the signature does not verify`,
			`this call needs the role \"generate\"`,
			`this call needs the role \"admin\"`,
			`msg="TLS client certificate files changed but cannot be used; still presenting the previous certificate" setting=bridge.tls error="bridge.tls.cert_file with bridge.tls.key_file: `,
			`component=bridge setting=bridge.tls error="bridge.tls.cert_file with bridge.tls.key_file: `,
			`component=agent setting=tls error="tls.cert_file with tls.key_file: `,
			`component=admin setting=admin.tls error="admin.tls.cert_file with admin.tls.key_file: `,
			`audit=true principal=alice@acme tenant=acme method=ConfigureCache`,
			`audit=true principal=alice@acme tenant=acme generation=` + paused.GetGenerationId(),
		} {
			if !strings.Contains(log, want) {
				t.Errorf("the log does not say %s", want)
			}
		}
		// Once per change: the bridge's own key broke twice.
		if n := strings.Count(log, "cannot be used"); n != 5 {
			t.Errorf("the log says %d times that key files cannot be used, want 5 (agentd's client certificate once, each server's key once, the bridge's twice)", n)
		}
	})

	canaryNoLeaks(t, append(secrets, keyBodies...), out, &c, storeWhilePaused, acfg.StateDir)
}
