package docstest

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/chromedp/cdproto/cdp"
	"github.com/chromedp/cdproto/page"
	"github.com/chromedp/chromedp"
	"github.com/chromedp/chromedp/kb"
)

// axeSource is axe-core's script (package.json pins it; npm ci installs
// it), read once.
var axeSource = sync.OnceValues(func() ([]byte, error) {
	return os.ReadFile(filepath.Join(root, "node_modules", "axe-core", "axe.min.js"))
})

// audit checks the console page tab shows, and keeps its look: axe-core
// finds no violation of impact serious or critical (labels, contrast,
// names of controls, landmarks' structure), the Tab key reaches every
// control, the page needs no horizontal scroll at 200% zoom (a 640x400
// CSS viewport: 1280x800 at zoom 2), and screenshots at 1280x800 and
// 390x844 go to build/console/<name>-*.png.
// The tab must let scripts past the page's Content-Security-Policy
// (newTab does), for axe-core is injected.
func audit(t *testing.T, tab context.Context, name string) {
	t.Helper()
	axe(t, tab, name)
	keyboard(t, tab, name)
	zoomed(t, tab, name)
	shots := filepath.Join(root, "build", "console")
	screenshot(t, tab, filepath.Join(shots, name+"-390x844.png"), 390, 844)
	screenshot(t, tab, filepath.Join(shots, name+"-1280x800.png"), 1280, 800)
}

// axeViolation is one rule axe-core found broken, with the elements.
type axeViolation struct {
	ID, Impact, Help string
	Nodes            []struct{ Target []any }
}

func axe(t *testing.T, tab context.Context, name string) {
	t.Helper()
	src, err := axeSource()
	if err != nil {
		t.Fatalf("reading axe-core (npm ci installs it): %v", err)
	}
	if _, err := chromedp.Run(tab, chromedp.Evaluate[chromedp.Void](string(src))); err != nil {
		t.Fatalf("%s: injecting axe-core: %v", name, err)
	}
	raw, err := chromedp.Run(tab, chromedp.Evaluate[[]byte](
		`axe.run(document).then(r => ({passed: r.passes.length, violations: r.violations.filter(v => v.impact === "serious" || v.impact === "critical")}))`,
		chromedp.EvalAwaitPromise))
	must(t, name+": running axe-core", err)
	var found struct {
		Passed     int
		Violations []axeViolation
	}
	if err := json.Unmarshal(raw, &found); err != nil {
		t.Fatalf("%s: axe-core's answer %s: %v", name, raw, err)
	}
	if found.Passed == 0 {
		t.Errorf("%s: axe-core checked nothing", name)
	}
	for _, v := range found.Violations {
		var where []string
		for _, n := range v.Nodes {
			where = append(where, fmt.Sprint(n.Target...))
		}
		t.Errorf("%s: axe-core: %s (%s): %s, at %s", name, v.ID, v.Impact, v.Help, strings.Join(where, "; "))
	}
}

// keyboard presses Tab from the page's start until every control shown
// (links, buttons, fields, a details' summary) has had the focus, and
// fails for those that never had it. A control takes several presses at
// most (a date's fields), so twice as many as there are controls, and a
// few, suffice.
func keyboard(t *testing.T, tab context.Context, name string) {
	t.Helper()
	const mark = `(() => {
  const shown = [...document.querySelectorAll("a[href], button, input, select, textarea, summary")]
    .filter(e => !e.disabled && e.getClientRects().length > 0);
  shown.forEach(e => e.dataset.auditControl = "");
  document.addEventListener("focusin", e => { e.target.dataset.auditFocused = ""; });
  document.activeElement?.blur();
  window.scrollTo(0, 0);
  return shown.length;
})()`
	n, err := chromedp.Run(tab, chromedp.Evaluate[int](mark))
	must(t, name+": finding the controls", err)
	presses := make([]chromedp.Action[chromedp.Void], 2*n+5)
	for i := range presses {
		presses[i] = chromedp.KeyEvent(kb.Tab)
	}
	must(t, name+": pressing Tab", chromedp.Do(tab, presses...))
	missed, err := chromedp.Run(tab, chromedp.Evaluate[[]string](`[...document.querySelectorAll("[data-audit-control]:not([data-audit-focused])")]
  .map(e => e.tagName.toLowerCase() + " " + (e.textContent || e.name || e.getAttribute("aria-label") || "").trim().slice(0, 40))`))
	must(t, name+": finding the controls Tab missed", err)
	if len(missed) > 0 {
		t.Errorf("%s: Tab never reached %d of %d controls: %v", name, len(missed), n, missed)
	}
}

// zoomed checks that the page fits, without a horizontal scroll, in the
// width a 1280-pixel window has at 200% zoom.
func zoomed(t *testing.T, tab context.Context, name string) {
	t.Helper()
	must(t, "zooming", chromedp.Do(tab, chromedp.EmulateViewport(640, 400)))
	over, err := chromedp.Run(tab, chromedp.Evaluate[int](`document.documentElement.scrollWidth - document.documentElement.clientWidth`))
	must(t, name+": measuring the page at 200% zoom", err)
	if over > 0 {
		wide, err := chromedp.Run(tab, chromedp.Evaluate[[]string](`[...document.querySelectorAll("body *")]
  .filter(e => e.getBoundingClientRect().right > document.documentElement.clientWidth)
  .slice(-3).map(e => e.tagName.toLowerCase() + (e.className ? "." + e.className : "") + (e.dataset.testid ? "[" + e.dataset.testid + "]" : ""))`))
		must(t, name+": finding what is too wide", err)
		t.Errorf("%s: at 200%% zoom (a 640x400 viewport) the page is %d CSS pixels wider than the window: it scrolls sideways (past its edge: %v)", name, over, wide)
	}
}

// bypassCSP lets the test's scripts (axe-core) run in a tab whose page
// allows its own scripts only.
var bypassCSP chromedp.Action[chromedp.Void] = func(ctx context.Context, t *chromedp.Target) (chromedp.Void, error) {
	_, err := cdp.Call(ctx, t, page.SetBypassCSP, page.SetBypassCSPParams{Enabled: true})
	return chromedp.Void{}, err
}
