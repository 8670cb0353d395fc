package docstest

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"net/http"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/agentd/agentd/internal/store"
	"github.com/agentd/agentd/internal/testwait"
)

// The console's callers: alice starts and decides acme's generations;
// olga of acme only watches (the role observer); eve is of another
// tenant.
const (
	consoleAlice = "console-alice-key"
	consoleOlga  = "console-olga-key"
	consoleEve   = "console-eve-key"
)

// consoleTraceURL is the console's trace viewer in the tests.
const consoleTraceURL = "https://traces.example/trace/{trace_id}"

// xssText is what the tool call of the console's generation says: markup
// that must show as text.
const xssText = `<img src=x onerror="window.pwned=1"><script>window.pwned=2</script>`

// TestConsole drives the web console (served by bin/agentd at /console/,
// from its embedded files) in headless Chromium. Alice signs in with her
// API key; a generation of her tenant's, paused on an approval, is in
// the inbox, its tool call's arguments (which hold markup) shown as text;
// a new pending request shows within a second (the time is logged); she
// approves, and the generation completes. Eve, of another tenant, in a
// browser of her own, sees none of it. Screenshots at 1280x800 and
// 390x844 go to build/console/. It runs on each store (onEachStore).
func TestConsole(t *testing.T) { onEachStore(t, consoleInbox) }

func consoleInbox(t *testing.T, driver string) {
	chromium := browser(t)
	base := "http://" + serveConsoleSeeded(t, driver, nil)
	shots := filepath.Join(root, "build", "console")

	paused := startPaused(t, base, xssText)
	alice := newTab(t, chromium)
	signIn(t, alice, base, consoleAlice)
	item := fmt.Sprintf(`#inbox [data-testid="request"][data-generation-id=%q]`, paused)
	must(t, "waiting for the paused generation's request", chromedp.Do(alice, chromedp.WaitVisible(chromedp.CSS(item))))

	markupAsText(t, alice, item+` [data-testid="arguments"]`, "#inbox")
	audit(t, alice, "inbox")

	// A new request reaches the open page within a second.
	began := time.Now()
	second := startPaused(t, base, "a second request")
	must(t, "waiting for the new request", chromedp.Do(alice,
		chromedp.WaitVisible(chromedp.CSS(fmt.Sprintf(`#inbox [data-testid="request"][data-generation-id=%q]`, second)))))
	t.Logf("the inbox showed a new pending request %v after it was asked (target: 1 s)", time.Since(began).Round(time.Millisecond))

	must(t, "approving", chromedp.Do(alice,
		chromedp.SendKeys(chromedp.CSS(item+` [data-testid="reason"]`), "checked in the console"),
		chromedp.Click(chromedp.CSS(item+` [data-testid="approve"]`))))
	waitState(t, base, paused, "GENERATION_STATE_COMPLETED")

	// A limit's approval takes the value to raise the limit to.
	limited := startAtLimit(t, base)
	item = fmt.Sprintf(`#inbox [data-testid="request"][data-generation-id=%q][data-kind="limit"]`, limited)
	must(t, "waiting for the limit's approval", chromedp.Do(alice, chromedp.WaitVisible(chromedp.CSS(item+` [data-testid="limit"]`))))
	audit(t, alice, "inbox-limit")
	must(t, "raising the limit", chromedp.Do(alice,
		chromedp.SendKeys(chromedp.CSS(item+` [data-testid="raise-to"]`), "3"),
		chromedp.Click(chromedp.CSS(item+` [data-testid="approve"]`))))
	waitState(t, base, limited, "GENERATION_STATE_COMPLETED")

	eve := newTab(t, chromium)
	signIn(t, eve, base, consoleEve)
	must(t, "eve's inbox", chromedp.Do(eve, chromedp.WaitVisible(chromedp.CSS(`#inbox-status`))))
	waitText(t, eve, "#inbox-status", func(s string) bool { return s != "" && !strings.Contains(s, "Loading") })
	n, err := chromedp.Run(eve, chromedp.Evaluate[int](`document.querySelectorAll('#inbox [data-testid="request"]').length`))
	must(t, "counting eve's requests", err)
	if n != 0 {
		t.Errorf("eve, of another tenant, sees %d requests; want none", n)
	}
	screenshot(t, eve, filepath.Join(shots, "inbox-empty-1280x800.png"), 1280, 800)
	signInPage := newTab(t, chromium)
	must(t, "opening the sign-in page", chromedp.Do(signInPage, chromedp.Navigate(base+"/console/"), chromedp.WaitVisible(chromedp.ID("api-key"))))
	audit(t, signInPage, "signin")
}

// markupAsText checks that sel's text holds xssText's markup as text,
// and that no markup became an element under scope or ran.
func markupAsText(t *testing.T, tab context.Context, sel, scope string) {
	t.Helper()
	if got := text(t, tab, sel); !strings.Contains(got, `<img src=x onerror=`) || !strings.Contains(got, "<script>") {
		t.Errorf("%s reads %q; want the markup as text", sel, got)
	}
	pwned, err := chromedp.Run(tab, chromedp.Evaluate[bool](fmt.Sprintf(`window.pwned !== undefined || document.querySelector("%[1]s img, %[1]s script") !== null`, scope)))
	must(t, "looking for injected markup", err)
	if pwned {
		t.Errorf("markup in %s became elements or ran", sel)
	}
}

// serveConsoleSeeded starts bin/agentd requiring an API key (alice and
// olga of acme, alice with the role generate, olga observer; eve of
// globex, generate), with a trace viewer for the console, its state in
// driver's store, after seed (when not nil) has written to that store;
// it returns agentd's address.
func serveConsoleSeeded(t *testing.T, driver string, seed func(store.Store)) string {
	t.Helper()
	tmp := t.TempDir()
	hash := func(key string) string {
		sum := sha256.Sum256([]byte(key))
		return hex.EncodeToString(sum[:])
	}
	storeCfg, open := consoleStore(t, driver, filepath.Join(tmp, "state"))
	if seed != nil {
		st, err := open()
		if err != nil {
			t.Fatal(err)
		}
		seed(st)
		if err := st.Close(); err != nil {
			t.Fatal(err)
		}
	}
	cfg := fmt.Sprintf(`auth:
  api_keys:
    - {name: alice, sha256: %s, tenant: acme, roles: [generate]}
    - {name: olga, sha256: %s, tenant: acme, roles: [observer]}
    - {name: eve, sha256: %s, tenant: globex, roles: [generate]}
console: {trace_url: %q}
`, hash(consoleAlice), hash(consoleOlga), hash(consoleEve), consoleTraceURL)
	return serveConfigured(t, tmp, cfg+storeCfg)
}

// startPaused starts, as alice, a detached generation whose tool call
// (echo, with say as its text) needs an approval: with no client, it
// pauses for it. It returns the generation's id.
func startPaused(t *testing.T, base, say string) string {
	t.Helper()
	args, _ := json.Marshal(map[string]string{"text": say})
	start := fmt.Sprintf(`{"agent": {"provider": "script", "mcps": [{"ref": "demo"}], "requiresApproval": ["echo"],
  "providerOptions": {"script": {"turns": [{"tool_calls": [{"name": "echo", "arguments": %s}]}, {"text": "done: {{tool_outputs}}"}]}}},
  "messages": [{"role": "ROLE_USER", "parts": [{"text": "echo it"}]}]}`, args)
	var created struct{ GenerationID string }
	call(t, base, http.MethodPost, "/v1/generations", start, &created)
	if created.GenerationID == "" {
		t.Fatal("CreateGeneration named no generation")
	}
	return created.GenerationID
}

// startAtLimit starts a generation of alice's, detached, that pauses at
// its limit of one tool call, its second turn's call waiting, and returns
// its id.
func startAtLimit(t *testing.T, base string) string {
	t.Helper()
	start := `{"agent": {"provider": "script", "mcps": [{"ref": "demo"}], "limits": {"maxToolCalls": 1, "onLimit": "ON_LIMIT_PAUSE"},
  "providerOptions": {"script": {"turns": [{"repeat": 3, "tool_calls": [{"name": "echo", "arguments": {"text": "again"}}]}, {"text": "done"}]}}},
  "messages": [{"role": "ROLE_USER", "parts": [{"text": "echo it"}]}]}`
	var created struct{ GenerationID string }
	call(t, base, http.MethodPost, "/v1/generations", start, &created)
	if created.GenerationID == "" {
		t.Fatal("CreateGeneration named no generation")
	}
	return created.GenerationID
}

// waitState waits until alice's generation id is in state.
func waitState(t *testing.T, base, id, state string) {
	t.Helper()
	testwait.For(t, "generation "+id+" "+state, func() bool {
		var got struct{ Generation struct{ State string } }
		call(t, base, http.MethodGet, "/v1/generations/"+id, "", &got)
		return got.Generation.State == state
	})
}

// call calls agentd's HTTP/JSON route as alice and decodes the answer.
func call(t *testing.T, base, method, path, body string, out any) {
	t.Helper()
	req, err := http.NewRequestWithContext(t.Context(), method, base+path, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Authorization", "Bearer "+consoleAlice)
	if body != "" {
		req.Header.Set("Content-Type", "application/json")
	}
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	var buf bytes.Buffer
	_, _ = buf.ReadFrom(res.Body)
	if res.StatusCode != http.StatusOK {
		t.Fatalf("%s %s: %s %s", method, path, res.Status, buf.String())
	}
	if err := json.Unmarshal(buf.Bytes(), out); err != nil {
		t.Fatalf("%s %s: %v in %s", method, path, err, buf.String())
	}
}

// newTab starts a Chromium of its own (its own storage: another person's
// browser) and returns its tab, closed when the test ends. The tab lets
// the test's scripts past the page's Content-Security-Policy (audit
// injects axe-core); the console's own scripts need no such leave.
func newTab(t *testing.T, chromium string) context.Context {
	t.Helper()
	opts := append(chromedp.DefaultExecAllocatorOptions[:], chromedp.ExecPath(chromium), chromedp.NoSandbox,
		chromedp.UserDataDir(t.TempDir()), chromedp.WindowSize(1280, 800),
		chromedp.Flag("disable-quic", true), chromedp.Flag("disable-component-update", true))
	alloc, cancelAlloc := chromedp.NewExecAllocator(t.Context(), opts...)
	ctx, cancel := chromedp.NewContext(alloc)
	t.Cleanup(func() {
		cancel()
		cancelAlloc()
	})
	must(t, "starting Chromium", chromedp.Do(ctx, bypassCSP))
	return ctx
}

// signIn opens the console in tab and signs in with key.
func signIn(t *testing.T, tab context.Context, base, key string) {
	t.Helper()
	must(t, "signing in", chromedp.Do(tab, chromedp.Navigate(base+"/console/"),
		chromedp.WaitVisible(chromedp.ID("api-key")),
		chromedp.SendKeys(chromedp.ID("api-key"), key),
		chromedp.Click(chromedp.ID("sign-in")),
		chromedp.WaitVisible(chromedp.ID("sign-out"))))
}

// waitText waits until ok accepts the text of sel's first element.
func waitText(t *testing.T, tab context.Context, sel string, ok func(string) bool) {
	t.Helper()
	testwait.For(t, sel+"'s text", func() bool { return ok(text(t, tab, sel)) })
}

// screenshot writes tab's page, at width by height, to path.
func screenshot(t *testing.T, tab context.Context, path string, width, height int64) {
	t.Helper()
	must(t, "sizing the page", chromedp.Do(tab, chromedp.EmulateViewport(width, height)))
	png, err := chromedp.Run(tab, chromedp.CaptureScreenshot())
	must(t, "taking a screenshot", err)
	writeScreenshot(t, path, png)
}
