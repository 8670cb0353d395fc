package docstest

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/chromedp/cdproto/runtime"
	"github.com/chromedp/chromedp"
)

// chromiumPath is where Debian's chromium package puts the browser.
const chromiumPath = "/usr/bin/chromium"

// browserKey is the API key the page sends as a bearer token.
const browserKey = "browser-example-key"

// TestBrowserExample serves examples/web from an origin of its own and
// drives it in headless Chromium against an agentd that requires an API
// key and allows that origin (CORS): over Connect, then over HTTP/JSON
// with Server-Sent Events, the page starts a generation, shows the tool
// call that needs approval, approves it, and shows the completed answer.
// A screenshot of each run goes to build/.
func TestBrowserExample(t *testing.T) {
	chromium := browser(t)
	page := httptest.NewServer(http.FileServer(http.Dir(bundleWebExample(t))))
	t.Cleanup(page.Close)
	addr := serveForBrowser(t, page.URL)
	for _, mode := range []string{"connect", "sse"} {
		t.Run(mode, func(t *testing.T) {
			u := fmt.Sprintf("%s/?%s#token=%s", page.URL, url.Values{"agentd": {"http://" + addr}, "mode": {mode}}.Encode(), browserKey)
			decided, answer := approveInBrowser(t, chromium, u, filepath.Join(root, "build", "web-"+mode+".png"))
			if want := "approved by browser"; !strings.Contains(decided, want) {
				t.Errorf("the approval_decided event reads %q; want it to contain %q", decided, want)
			}
			if want := "The demo server answered: approved by a person"; !strings.Contains(answer, want) {
				t.Errorf("the page's answer is %q; want it to contain %q", answer, want)
			}
		})
	}
}

// browser returns Chromium's path, or skips the test where it is not
// installed, unless AGENTD_REQUIRE_BROWSER (make test sets it) asks
// for it.
func browser(t *testing.T) string {
	t.Helper()
	if _, err := os.Stat(chromiumPath); err != nil {
		if os.Getenv("AGENTD_REQUIRE_BROWSER") != "" {
			t.Fatalf("%s: %v (make deb installs Debian's chromium)", chromiumPath, err)
		}
		t.Skipf("no %s (make deb installs Debian's chromium)", chromiumPath)
	}
	return chromiumPath
}

// bundleWebExample bundles examples/web with the pinned esbuild, as make
// web does, into a directory beside its index.html, and returns it.
func bundleWebExample(t *testing.T) string {
	t.Helper()
	dir := t.TempDir()
	cmd := exec.CommandContext(t.Context(), filepath.Join("node_modules", ".bin", "esbuild"), "examples/web/app.ts", "--bundle", "--format=esm",
		"--target=es2022", "--minify", "--outfile="+filepath.Join(dir, "app.js"))
	cmd.Dir = root
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("bundling examples/web (npm ci installs esbuild): %v\n%s", err, out)
	}
	html, err := os.ReadFile(filepath.Join(root, "examples", "web", "index.html"))
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "index.html"), html, 0o644); err != nil {
		t.Fatal(err)
	}
	return dir
}

// serveForBrowser starts bin/agentd requiring browserKey and allowing
// requests from origin, and returns its address.
func serveForBrowser(t *testing.T, origin string) string {
	t.Helper()
	tmp := t.TempDir()
	sum := sha256.Sum256([]byte(browserKey))
	cfg := fmt.Sprintf(`auth:
  api_keys:
    - {name: browser, sha256: %s, tenant: web, roles: [generate]}
http:
  cors:
    allowed_origins: [%q]
`, hex.EncodeToString(sum[:]), origin)
	return serveConfigured(t, tmp, cfg)
}

// serveConfigured starts bin/agentd, on a loopback port of its own, with
// the configuration cfg and its state in tmp, and returns its address.
func serveConfigured(t *testing.T, tmp, cfg string) string {
	t.Helper()
	file := filepath.Join(tmp, "agentd.yaml")
	if err := os.WriteFile(file, []byte(cfg), 0o600); err != nil {
		t.Fatal(err)
	}
	dir := filepath.Join(tmp, "top")
	if err := os.MkdirAll(filepath.Join(dir, "bin"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(agentdBinary(t, tmp), filepath.Join(dir, "bin", "agentd")); err != nil {
		t.Fatal(err)
	}
	return serve(t, dir, append(cleanEnv(), "AGENTD_LISTEN=127.0.0.1:0", "AGENTD_STATE_DIR="+filepath.Join(tmp, "state"),
		"AGENTD_SHUTDOWN_DRAIN=0", "AGENTD_CONFIG="+file))
}

// approveInBrowser opens u in headless Chromium, starts the generation,
// approves its tool call and waits for the page to end, writing a
// screenshot to shot. It returns the approval_decided event's line and
// the answer the page shows.
func approveInBrowser(t *testing.T, chromium, u, shot string) (decided, answer string) {
	t.Helper()
	opts := append(chromedp.DefaultExecAllocatorOptions[:], chromedp.ExecPath(chromium), chromedp.NoSandbox,
		chromedp.UserDataDir(t.TempDir()), chromedp.WindowSize(1000, 800),
		// This machine's network is closed: without these Chromium
		// reaches for Google's hosts at every start.
		chromedp.Flag("disable-quic", true), chromedp.Flag("disable-component-update", true))
	alloc, cancelAlloc := chromedp.NewExecAllocator(t.Context(), opts...)
	defer cancelAlloc()
	ctx, cancel := chromedp.NewContext(alloc)
	defer cancel()
	// The page's console and exceptions, to read when it fails.
	must(t, "starting Chromium", chromedp.Listen(ctx, func(ev any) {
		switch ev := ev.(type) {
		case *runtime.EventConsoleAPICalled:
			for _, a := range ev.Args {
				t.Logf("page console.%s: %s", ev.Type, a.Value)
			}
		case *runtime.EventExceptionThrown:
			t.Logf("page exception: %s", ev.ExceptionDetails.Text)
		}
	}))
	must(t, "opening the page", chromedp.Do(ctx, chromedp.Navigate(u), chromedp.Click(chromedp.ID("start")),
		chromedp.WaitVisible(chromedp.CSS(`#approval:not([hidden]), #status[data-state="failed"]`))))
	if status := text(t, ctx, "#status"); status != "waiting for your decision" {
		t.Fatalf("the page shows no approval; its status: %q", status)
	}
	must(t, "approving", chromedp.Do(ctx, chromedp.Click(chromedp.ID("approve")),
		chromedp.WaitVisible(chromedp.CSS(`#status[data-state="completed"], #status[data-state="failed"]`))))
	png, err := chromedp.Run(ctx, chromedp.FullScreenshot(100))
	must(t, "taking a screenshot", err)
	writeScreenshot(t, shot, png)
	if status := text(t, ctx, "#status"); status != "completed" {
		t.Fatalf("the page ended %q", status)
	}
	return text(t, ctx, `#events li[data-kind="approvalDecided"]`), text(t, ctx, "#answer")
}

// text is the text of the page's first element that sel selects.
func text(t *testing.T, ctx context.Context, sel string) string {
	t.Helper()
	s, err := chromedp.Run(ctx, chromedp.Text(chromedp.CSS(sel)))
	must(t, "reading "+sel, err)
	return s
}

func must(t *testing.T, what string, err error) {
	t.Helper()
	if err != nil {
		t.Fatalf("%s: %v", what, err)
	}
}

// writeScreenshot keeps the page's last look for a person to check.
func writeScreenshot(t *testing.T, path string, png []byte) {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, png, 0o644); err != nil {
		t.Fatal(err)
	}
	t.Logf("screenshot: %s", path)
}
