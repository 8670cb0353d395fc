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
	"encoding/json"
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
	configName:    "application/json",
}

// policy is the page's Content-Security-Policy: its own scripts, styles
// and API only, no inline script, no frame, no form posting anywhere.
const policy = "default-src 'self'; script-src 'self'; style-src 'self'; img-src 'self' data:; connect-src 'self'; " +
	"base-uri 'none'; form-action 'none'; frame-ancestors 'none'"

// configName is where the page reads Config.
const configName = "config.json"

// Config is what the page learns of agentd's configuration, served as
// Path+"config.json": settings that change what it shows, never a
// secret (anyone who reaches the page may read it).
type Config struct {
	// TraceURL is console.trace_url: a trace viewer's address with
	// {trace_id} in it, or empty.
	TraceURL string `json:"trace_url"`
}

// Handler serves the console under Path, with cfg as its config.json,
// and redirects any other path it is given (Path without its slash) to
// Path.
func Handler(cfg Config) http.Handler {
	dist, err := fs.Sub(files, "dist")
	if err != nil {
		panic("console: the embedded files have no dist directory: " + err.Error()) // go:embed put it there
	}
	return newHandler(dist, cfg)
}

func newHandler(dist fs.FS, cfg Config) handler {
	config, err := json.Marshal(cfg)
	if err != nil {
		panic("console: encoding its configuration: " + err.Error()) // a struct of strings encodes
	}
	return handler{dist, config}
}

type handler struct {
	dist fs.FS
	// config is Config as JSON, made once.
	config []byte
}

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
	body, kind, ok := h.file(name)
	if !ok {
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

// file is the body and type of the console's file name, if it has one.
func (h handler) file(name string) (body []byte, kind string, ok bool) {
	kind, ok = assets[name]
	if !ok {
		return nil, "", false
	}
	if name == configName {
		return h.config, kind, true
	}
	body, err := fs.ReadFile(h.dist, name)
	if err != nil && name == "index.html" {
		body, err = fs.ReadFile(h.dist, "unbuilt.html")
	}
	return body, kind, err == nil
}
