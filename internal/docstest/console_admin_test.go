package docstest

import (
	"context"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"net/url"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
	jose "github.com/go-jose/go-jose/v4"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/agentd/agentd/internal/auth/oidctest"
	"github.com/agentd/agentd/internal/testwait"
)

// askSchema is what the asker server's form asks: every kind of field an
// MCP elicitation may hold, some required, some with limits.
var askSchema = map[string]any{
	"type": "object",
	"properties": map[string]any{
		"name":      map[string]any{"type": "string", "title": "Your name", "minLength": 2, "maxLength": 40},
		"email":     map[string]any{"type": "string", "title": "Email", "format": "email"},
		"age":       map[string]any{"type": "integer", "title": "Age", "minimum": 18, "maximum": 150},
		"subscribe": map[string]any{"type": "boolean", "title": "Send me the newsletter", "default": false},
		"color": map[string]any{"type": "string", "title": "Favourite colour", "oneOf": []any{
			map[string]any{"const": "red", "title": "Red"}, map[string]any{"const": "green", "title": "Green"},
		}},
	},
	"required": []any{"name", "age", "color"},
}

// asker is an MCP server over HTTP (stateless, so protocol 2026-07-28)
// whose tool ask asks for input with askSchema, and records the answer
// its retry brings.
type asker struct {
	url string

	mu      sync.Mutex
	answers []map[string]any
}

func newAsker(t *testing.T) *asker {
	t.Helper()
	a := &asker{}
	s := mcp.NewServer(&mcp.Implementation{Name: "asker", Version: "1"}, nil)
	s.AddTool(&mcp.Tool{Name: "ask", Description: "Asks who you are.", InputSchema: map[string]any{"type": "object"}}, a.ask)
	srv := httptest.NewServer(mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return s }, &mcp.StreamableHTTPOptions{Stateless: true}))
	t.Cleanup(srv.Close)
	a.url = srv.URL
	return a
}

func (a *asker) ask(_ context.Context, req *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
	r, ok := req.Params.InputResponses["who"].(*mcp.ElicitResult)
	if !ok {
		form := &mcp.ElicitParams{Mode: "form", Message: "Who are you? <b>not bold</b>", RequestedSchema: askSchema}
		return &mcp.CallToolResult{InputRequests: mcp.InputRequestMap{"who": form}, RequestState: "asked"}, nil
	}
	a.mu.Lock()
	a.answers = append(a.answers, map[string]any{"action": r.Action, "content": r.Content})
	a.mu.Unlock()
	return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: "thanks"}}}, nil
}

func (a *asker) answered() []map[string]any {
	a.mu.Lock()
	defer a.mu.Unlock()
	return append([]map[string]any(nil), a.answers...)
}

// TestConsoleInputRequest: an MCP server asks for input during a
// detached generation, which pauses; the inbox shows the request as a
// form made from its schema, required fields marked; a form with a
// missing and an out-of-range field shows an error beside each and sends
// nothing; a valid one is sent, the server gets it, and the generation
// completes.
func TestConsoleInputRequest(t *testing.T) {
	chromium := browser(t)
	srv := newAsker(t)
	base := "http://" + serveConsoleWith(t, fmt.Sprintf("bridge:\n  allow_private_networks: true\n  servers:\n    asker: {url: %q}\n", srv.url))
	shots := filepath.Join(root, "build", "console")

	id := startGeneration(t, base, `{"ref": "asker"}`, `{"tool_calls": [{"name": "ask", "arguments": {}}]}`)
	tab := newTab(t, chromium)
	signIn(t, tab, base, consoleAlice)
	item := fmt.Sprintf(`#inbox [data-testid="request"][data-generation-id=%q][data-kind="input"]`, id)
	must(t, "waiting for the input request", chromedp.Do(tab, chromedp.WaitVisible(chromedp.CSS(item+` [data-testid="input-form"]`))))
	if msg := text(t, tab, item+` [data-testid="input-message"]`); msg != "Who are you? <b>not bold</b>" {
		t.Errorf("the message reads %q; want the server's, markup as text", msg)
	}
	field := func(name string) string { return fmt.Sprintf(`%s [data-testid="field-%s"]`, item, name) }
	required, err := chromedp.Run(tab, chromedp.Evaluate[[]string](fmt.Sprintf(
		`[...document.querySelectorAll(%q)].map(e => e.name)`, item+` [aria-required="true"]`)))
	must(t, "reading the required fields", err)
	// A Struct keeps no order: the fields come by name.
	if strings.Join(required, ",") != "age,color,name" {
		t.Errorf("fields marked required: %v; want age, color, name", required)
	}

	// Nothing typed in name, an age beyond the maximum: errors beside
	// both, and the request still pending (nothing sent).
	setField(t, tab, field("color"), "green")
	must(t, "sending an invalid form", chromedp.Do(tab,
		chromedp.SendKeys(chromedp.CSS(field("age")), "200"),
		chromedp.Click(chromedp.CSS(item+` [data-testid="input-accept"]`))))
	must(t, "waiting for the errors", chromedp.Do(tab, chromedp.WaitVisible(chromedp.CSS(item+` [data-field="age"] [data-testid="field-error"]`))))
	if got := text(t, tab, item+` [data-field="name"] [data-testid="field-error"]`); got != "Required." {
		t.Errorf("name's error reads %q; want Required.", got)
	}
	if got := text(t, tab, item+` [data-field="age"] [data-testid="field-error"]`); got != "Must be at most 150." {
		t.Errorf("age's error reads %q; want Must be at most 150.", got)
	}
	phase, err := chromedp.Run(tab, chromedp.Evaluate[string](fmt.Sprintf(`document.querySelector(%q).dataset.phase`, item)))
	must(t, "reading the request's phase", err)
	if phase != "pending" || len(srv.answered()) != 0 {
		t.Errorf("after an invalid form: phase %q, answers %v; want pending and nothing sent", phase, srv.answered())
	}
	audit(t, tab, "input")
	// The form, rather than the request's facts above it, in the
	// screenshots.
	must(t, "scrolling to the form", chromedp.Do(tab, chromedp.ScrollIntoView(chromedp.CSS(item+` [data-testid="input-form"]`))))
	screenshot(t, tab, filepath.Join(shots, "input-1280x800.png"), 1280, 800)
	screenshot(t, tab, filepath.Join(shots, "input-390x844.png"), 390, 844)
	must(t, "sizing the page back", chromedp.Do(tab, chromedp.EmulateViewport(1280, 800)))

	setField(t, tab, field("age"), "36")
	must(t, "sending a valid form", chromedp.Do(tab,
		chromedp.SendKeys(chromedp.CSS(field("name")), "Ada Lovelace"),
		chromedp.SendKeys(chromedp.CSS(field("email")), "ada@example.com"),
		chromedp.Click(chromedp.CSS(field("subscribe"))),
		chromedp.Click(chromedp.CSS(item+` [data-testid="input-accept"]`))))
	waitState(t, base, id, "GENERATION_STATE_COMPLETED")
	answers := srv.answered()
	if len(answers) != 1 {
		t.Fatalf("the server got %d answers; want 1", len(answers))
	}
	got, _ := json.Marshal(answers[0])
	want := `{"action":"accept","content":{"age":36,"color":"green","email":"ada@example.com","name":"Ada Lovelace","subscribe":true}}`
	if string(got) != want {
		t.Errorf("the server got %s; want %s", got, want)
	}
}

// setField sets the value of sel's control as a person's input does,
// with the events a page listens for.
func setField(t *testing.T, tab context.Context, sel, value string) {
	t.Helper()
	_, err := chromedp.Run(tab, chromedp.Evaluate[bool](fmt.Sprintf(`(() => {
  const e = document.querySelector(%q);
  e.value = %q;
  e.dispatchEvent(new Event("input", {bubbles: true}));
  e.dispatchEvent(new Event("change", {bubbles: true}));
  return true;
})()`, sel, value)))
	must(t, "setting "+sel, err)
}

// serveConsoleWith starts bin/agentd requiring alice's or eve's API
// key, with more configuration after its auth.
func serveConsoleWith(t *testing.T, more string) string {
	t.Helper()
	return serveConfigured(t, t.TempDir(), fmt.Sprintf(`auth:
  api_keys:
    - {name: alice, sha256: %s, tenant: acme, roles: [generate]}
    - {name: eve, sha256: %s, tenant: globex, roles: [generate]}
`, keyHash(consoleAlice), keyHash(consoleEve))+more)
}

// keyHash is key's SHA-256, as auth.api_keys holds it.
func keyHash(key string) string {
	sum := sha256.Sum256([]byte(key))
	return hex.EncodeToString(sum[:])
}

// startGeneration starts, as alice, a detached generation of the script
// provider with the MCP server mcp, whose first turn is turn; it then
// says "done: " and the tool's outputs. It returns the generation's id.
func startGeneration(t *testing.T, base, mcp, turn string) string {
	t.Helper()
	start := fmt.Sprintf(`{"agent": {"provider": "script", "mcps": [%s],
  "providerOptions": {"script": {"turns": [%s, {"text": "done: {{tool_outputs}}"}]}}},
  "messages": [{"role": "ROLE_USER", "parts": [{"text": "go"}]}]}`, mcp, turn)
	var created struct{ GenerationID string }
	call(t, base, http.MethodPost, "/v1/generations", start, &created)
	if created.GenerationID == "" {
		t.Fatal("CreateGeneration named no generation")
	}
	return created.GenerationID
}

// consoleClient is the client id the console signs in as at the fake
// issuer.
const consoleClient = "agentd-console"

// fakeIssuer is an OpenID Connect issuer for a browser: discovery, keys,
// an authorization endpoint that signs in at once (it sends the browser
// straight back with a code), and a token endpoint that a page on
// another origin may call (CORS) and that checks the PKCE verifier.
type fakeIssuer struct {
	url string
	key oidctest.Key

	mu    sync.Mutex
	codes map[string]authorization
}

// authorization is what an authorization request asked, kept under its
// code until the code is exchanged.
type authorization struct {
	challenge, nonce, redirect string
}

func newFakeIssuer(t *testing.T) *fakeIssuer {
	t.Helper()
	is := &fakeIssuer{key: oidctest.NewKey(t, "console-key", jose.RS256), codes: make(map[string]authorization)}
	mux := http.NewServeMux()
	mux.HandleFunc("GET /.well-known/openid-configuration", func(w http.ResponseWriter, _ *http.Request) {
		writeJSON(w, map[string]any{"issuer": is.url, "jwks_uri": is.url + "/keys", "authorization_endpoint": is.url + "/authorize",
			"token_endpoint": is.url + "/token", "id_token_signing_alg_values_supported": []string{"RS256"}})
	})
	mux.HandleFunc("GET /keys", func(w http.ResponseWriter, _ *http.Request) {
		writeJSON(w, jose.JSONWebKeySet{Keys: []jose.JSONWebKey{{Key: is.key.Public(), KeyID: is.key.ID, Algorithm: "RS256", Use: "sig"}}})
	})
	mux.HandleFunc("GET /authorize", is.authorize)
	mux.HandleFunc("/token", func(w http.ResponseWriter, r *http.Request) { is.token(t, w, r) })
	srv := httptest.NewServer(mux)
	t.Cleanup(srv.Close)
	is.url = srv.URL
	return is
}

func (is *fakeIssuer) authorize(w http.ResponseWriter, r *http.Request) {
	q := r.URL.Query()
	if q.Get("response_type") != "code" || q.Get("client_id") != consoleClient || q.Get("code_challenge_method") != "S256" ||
		q.Get("code_challenge") == "" || q.Get("nonce") == "" || !strings.Contains(" "+q.Get("scope")+" ", " openid ") {
		http.Error(w, "not an authorization code request with PKCE S256, a nonce and openid", http.StatusBadRequest)
		return
	}
	code := fmt.Sprintf("code-%d", time.Now().UnixNano())
	is.mu.Lock()
	is.codes[code] = authorization{challenge: q.Get("code_challenge"), nonce: q.Get("nonce"), redirect: q.Get("redirect_uri")}
	is.mu.Unlock()
	back, err := url.Parse(q.Get("redirect_uri"))
	if err != nil {
		http.Error(w, "bad redirect_uri", http.StatusBadRequest)
		return
	}
	back.RawQuery = url.Values{"code": {code}, "state": {q.Get("state")}}.Encode()
	http.Redirect(w, r, back.String(), http.StatusFound)
}

// token exchanges a code for an ID token of alice of acme (generate),
// for the console's client, when the verifier matches the challenge.
func (is *fakeIssuer) token(t *testing.T, w http.ResponseWriter, r *http.Request) {
	w.Header().Set("Access-Control-Allow-Origin", "*")
	if r.Method == http.MethodOptions {
		w.Header().Set("Access-Control-Allow-Methods", "POST")
		w.Header().Set("Access-Control-Allow-Headers", "Content-Type, Accept")
		return
	}
	if err := r.ParseForm(); err != nil || r.PostForm.Get("grant_type") != "authorization_code" {
		http.Error(w, `{"error":"invalid_request"}`, http.StatusBadRequest)
		return
	}
	is.mu.Lock()
	a, ok := is.codes[r.PostForm.Get("code")]
	delete(is.codes, r.PostForm.Get("code"))
	is.mu.Unlock()
	sum := sha256.Sum256([]byte(r.PostForm.Get("code_verifier")))
	if !ok || base64.RawURLEncoding.EncodeToString(sum[:]) != a.challenge || r.PostForm.Get("redirect_uri") != a.redirect ||
		r.PostForm.Get("client_id") != consoleClient {
		http.Error(w, `{"error":"invalid_grant"}`, http.StatusBadRequest)
		return
	}
	now := time.Now().Unix()
	claims := oidctest.Claims{"iss": is.url, "aud": consoleClient, "sub": "alice@acme", "tenant": "acme", "roles": []string{"generate"},
		"nonce": a.nonce, "iat": now, "nbf": now, "exp": now + 3600}
	writeJSON(w, map[string]any{"id_token": oidctest.Sign(t, is.key, claims), "access_token": "opaque", "token_type": "Bearer", "expires_in": 3600})
}

func writeJSON(w http.ResponseWriter, v any) {
	w.Header().Set("Content-Type", "application/json")
	_ = json.NewEncoder(w).Encode(v)
}

// TestConsoleOIDC: the console signs in with an issuer of auth.oidc
// (console.client_id): the button sends the browser to the issuer's
// authorization endpoint with PKCE, the issuer sends it back with a
// code, the page exchanges it at the token endpoint (another origin,
// which the Content-Security-Policy admits) and keeps the ID token, and
// the inbox reads with it. An answer to a sign-in the tab did not start
// (its state unknown) is refused.
func TestConsoleOIDC(t *testing.T) {
	chromium := browser(t)
	is := newFakeIssuer(t)
	base := "http://" + serveConsoleWith(t, fmt.Sprintf("  oidc:\n    - {issuer: %q, audience: %s}\nconsole:\n  client_id: %s\n", is.url, consoleClient, consoleClient))

	tab := newTab(t, chromium)
	must(t, "opening the sign-in page", chromedp.Do(tab, chromedp.Navigate(base+"/console/"), chromedp.WaitVisible(chromedp.ID("oidc-sign-in"))))
	if got := text(t, tab, "#oidc-sign-in"); got != "Sign in with "+strings.TrimPrefix(is.url, "http://") {
		t.Errorf("the button reads %q", got)
	}
	audit(t, tab, "signin-oidc")
	must(t, "signing in", chromedp.Do(tab, chromedp.Click(chromedp.ID("oidc-sign-in")), chromedp.WaitVisible(chromedp.ID("inbox-status"))))
	waitText(t, tab, "#inbox-status", func(s string) bool { return s == "Nothing is pending." })
	if e := text(t, tab, "#error"); e != "" {
		t.Errorf("the inbox says %q; want no error with the ID token", e)
	}
	kept, err := chromedp.Run(tab, chromedp.Evaluate[string](`sessionStorage.getItem("agentd.console.api_key") + " " + location.search`))
	must(t, "reading the kept token", err)
	if strings.Count(kept, ".") != 2 || strings.Contains(kept, "code=") {
		t.Errorf("kept %q; want a JWT, and the code gone from the address", kept)
	}

	stranger := newTab(t, chromium)
	must(t, "returning with a state this tab did not make", chromedp.Do(stranger,
		chromedp.Navigate(base+"/console/?code=stolen&state=forged"), chromedp.WaitVisible(chromedp.ID("oidc-sign-in"))))
	waitText(t, stranger, "#error", func(s string) bool { return strings.Contains(s, "not to a sign-in this tab started") })
}

// The admin pages' callers, all of acme: an admin, an observer and a
// tenant_admin.
const (
	consoleOps       = "console-ops-key"
	consoleWatcher   = "console-watcher-key"
	consoleAcmeAdmin = "console-acme-admin-key"
)

// TestConsoleAdminPages needs the AdminService's ListTenants,
// ListMCPServers and InvalidateSchemaCache, and GetCaller. A paused
// generation of acme's (its demo server's pool and schema-cache entry,
// one paused generation) is on the pages: the tenants page shows acme's
// paused generations beside its limit, and only acme when the URL names
// it; the MCP servers page lists the demo server, its pool and the cache
// entry, with Invalidate for an admin and a tenant_admin of acme, none
// for an observer; an admin's Invalidate drops the entry. Screenshots at
// 1280x800 and 390x844 go to build/console/.
func TestConsoleAdminPages(t *testing.T) {
	chromium := browser(t)
	base := "http://" + serveConfigured(t, t.TempDir(), fmt.Sprintf(`auth:
  api_keys:
    - {name: alice, sha256: %s, tenant: acme, roles: [generate]}
    - {name: ops, sha256: %s, tenant: acme, roles: [admin]}
    - {name: watcher, sha256: %s, tenant: acme, roles: [observer]}
    - {name: acme-admin, sha256: %s, tenant: acme, roles: [tenant_admin]}
tenants:
  acme: {limits: {max_concurrent_generations: 10, max_paused_generations: 5, max_threads: 100}}
  globex: {}
`, keyHash(consoleAlice), keyHash(consoleOps), keyHash(consoleWatcher), keyHash(consoleAcmeAdmin)))
	startPaused(t, base, "for the admin pages")

	ops := newTab(t, chromium)
	signIn(t, ops, base, consoleOps)
	goTo(t, ops, "#/tenants", "h1")
	paused := `[data-testid="tenant"][data-name="acme"] [data-testid="use-paused"] .figure`
	answered(t, ops, `[data-testid="tenant"]`)
	must(t, "waiting for acme's card", chromedp.Do(ops, chromedp.WaitVisible(chromedp.CSS(paused))))
	if got := text(t, ops, paused); got != "1 / 5 paused" {
		t.Errorf("acme's paused generations read %q; want 1 / 5 paused", got)
	}
	must(t, "waiting for globex's card", chromedp.Do(ops, chromedp.WaitVisible(chromedp.CSS(`[data-testid="tenant"][data-name="globex"]`))))
	audit(t, ops, "tenants")
	goTo(t, ops, "#/tenants?tenant=acme", "h1")
	testwaitCount(t, ops, `[data-testid="tenant"]`, 1)

	entry := `[data-testid="cache-entry"][data-server="demo"]`
	goTo(t, ops, "#/mcp", "h1")
	answered(t, ops, `[data-testid="server"]`)
	must(t, "waiting for the MCP servers page", chromedp.Do(ops,
		chromedp.WaitVisible(chromedp.CSS(`[data-testid="server"][data-name="demo"]`)),
		chromedp.WaitVisible(chromedp.CSS(`[data-testid="pool"][data-server="demo"]`)),
		chromedp.WaitVisible(chromedp.CSS(entry+` [data-testid="invalidate"]`))))
	audit(t, ops, "mcp")

	watcher := newTab(t, chromium)
	signIn(t, watcher, base, consoleWatcher)
	goTo(t, watcher, "#/mcp", "h1")
	must(t, "the observer's MCP servers page", chromedp.Do(watcher, chromedp.WaitVisible(chromedp.CSS(entry))))
	testwaitCount(t, watcher, `[data-testid="invalidate"], [data-testid="invalidate-tenant"]`, 0)

	acmeAdmin := newTab(t, chromium)
	signIn(t, acmeAdmin, base, consoleAcmeAdmin)
	goTo(t, acmeAdmin, "#/mcp", "h1")
	must(t, "the tenant_admin's MCP servers page", chromedp.Do(acmeAdmin,
		chromedp.WaitVisible(chromedp.CSS(`[data-testid="invalidate-tenant"][data-tenant="acme"]`))))

	must(t, "invalidating the entry", chromedp.Do(ops, chromedp.Click(chromedp.CSS(entry+` [data-testid="invalidate"]`))))
	waitText(t, ops, "#mcp-status", func(s string) bool { return strings.Contains(s, "1 entry dropped") })
	testwaitCount(t, ops, entry, 0)
}

// answered waits until tab's page shows sel or an error, and fails with
// the error: a method the server does not serve fails the test at once
// rather than when it times out.
func answered(t *testing.T, tab context.Context, sel string) {
	t.Helper()
	must(t, "waiting for the page's answer", chromedp.Do(tab, chromedp.WaitVisible(chromedp.CSS(sel+`, #error:not(:empty)`))))
	if e := text(t, tab, "#error"); e != "" {
		t.Fatalf("the page says %q", e)
	}
}

// testwaitCount waits until sel selects n elements in tab.
func testwaitCount(t *testing.T, tab context.Context, sel string, n int) {
	t.Helper()
	testwait.For(t, fmt.Sprintf("%d of %s", n, sel), func() bool {
		got, err := chromedp.Run(tab, chromedp.Evaluate[int](fmt.Sprintf(`document.querySelectorAll(%q).length`, sel)))
		must(t, "counting "+sel, err)
		return got == n
	})
}
