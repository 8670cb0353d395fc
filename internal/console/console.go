// Package console serves agentd's web console: a page for the people
// around a generation (who approves, who operates, who watches), from
// files embedded in the binary at build time (dist/, which `make console`
// writes). A binary built without them serves a page saying how to build
// them. The console talks to the same origin's API (Connect), whose
// authentication, tenancy and roles decide what it may do; its files need
// no credential.
package console

import (
	"embed"
	"io/fs"
	"net/http"
	"strings"
)

//go:embed dist
var files embed.FS

// Path is where the console is served.
const Path = "/console/"

// The console's own files: the page, its script and its style sheet.
// Anything else under Path is not found.
var assets = map[string]string{
	"index.html":  "text/html; charset=utf-8",
	"console.js":  "text/javascript; charset=utf-8",
	"console.css": "text/css; charset=utf-8",
}

// policy is the page's Content-Security-Policy: its own scripts, styles
// and API only, no inline script, no frame, no form posting anywhere.
const policy = "default-src 'self'; script-src 'self'; style-src 'self'; img-src 'self' data:; connect-src 'self'; " +
	"base-uri 'none'; form-action 'none'; frame-ancestors 'none'"

// Handler serves the console under Path, and redirects any other path it
// is given (Path without its slash) to Path.
func Handler() http.Handler {
	dist, err := fs.Sub(files, "dist")
	if err != nil {
		panic("console: the embedded files have no dist directory: " + err.Error()) // go:embed put it there
	}
	return handler{dist}
}

type handler struct{ dist fs.FS }

func (h handler) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if r.Method != http.MethodGet && r.Method != http.MethodHead {
		w.Header().Set("Allow", "GET, HEAD")
		http.Error(w, "the console's files are read with GET", http.StatusMethodNotAllowed)
		return
	}
	name, under := strings.CutPrefix(r.URL.Path, Path)
	if !under {
		http.Redirect(w, r, Path, http.StatusMovedPermanently)
		return
	}
	if name == "" {
		name = "index.html"
	}
	kind, ok := assets[name]
	if !ok {
		http.NotFound(w, r)
		return
	}
	body, err := fs.ReadFile(h.dist, name)
	if err != nil && name == "index.html" {
		body, err = fs.ReadFile(h.dist, "unbuilt.html")
	}
	if err != nil {
		http.NotFound(w, r)
		return
	}
	hd := w.Header()
	hd.Set("Content-Type", kind)
	hd.Set("Content-Security-Policy", policy)
	hd.Set("X-Content-Type-Options", "nosniff")
	hd.Set("X-Frame-Options", "DENY")
	hd.Set("Referrer-Policy", "no-referrer")
	// The files keep their names across builds: a browser asks again.
	hd.Set("Cache-Control", "no-cache")
	if r.Method == http.MethodHead {
		return
	}
	_, _ = w.Write(body)
}
