package console

import (
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"testing/fstest"
)

// get asks h for path with method and returns the answer.
func get(h http.Handler, method, path string) *httptest.ResponseRecorder {
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, httptest.NewRequest(method, path, nil))
	return rec
}

// The console's page, script, style sheet and configuration are served with their types
// and a Content-Security-Policy that allows no inline script and no other
// host; nothing else under /console/ is; /console redirects to
// /console/; only GET and HEAD read them.
func TestServesTheConsole(t *testing.T) {
	t.Parallel()
	h := newHandler(fstest.MapFS{
		"index.html":   {Data: []byte("<!doctype html><title>agentd</title>")},
		"console.js":   {Data: []byte("export {}")},
		"console.css":  {Data: []byte("body{}")},
		"unbuilt.html": {Data: []byte("not built")},
		"secret.txt":   {Data: []byte("no")},
	}, Config{TraceURL: "https://jaeger.example/trace/{trace_id}"})
	for _, tc := range []struct {
		method, path string
		status       int
		kind, body   string
	}{
		{"GET", "/console/", http.StatusOK, "text/html; charset=utf-8", "<title>agentd</title>"},
		{"GET", "/console/index.html", http.StatusOK, "text/html; charset=utf-8", "<title>agentd</title>"},
		{"GET", "/console/console.js", http.StatusOK, "text/javascript; charset=utf-8", "export {}"},
		{"GET", "/console/console.css", http.StatusOK, "text/css; charset=utf-8", "body{}"},
		{"GET", "/console/config.json", http.StatusOK, "application/json", `{"trace_url":"https://jaeger.example/trace/{trace_id}"}`},
		{"HEAD", "/console/", http.StatusOK, "text/html; charset=utf-8", ""},
		{"GET", "/console/secret.txt", http.StatusNotFound, "", ""},
		{"GET", "/console/unbuilt.html", http.StatusNotFound, "", ""},
		{"GET", "/console", http.StatusMovedPermanently, "", ""},
		{"POST", "/console/", http.StatusMethodNotAllowed, "", ""},
	} {
		rec := get(h, tc.method, tc.path)
		if rec.Code != tc.status {
			t.Errorf("%s %s: %d; want %d", tc.method, tc.path, rec.Code, tc.status)
			continue
		}
		if tc.status != http.StatusOK {
			continue
		}
		hd := rec.Header()
		if hd.Get("Content-Type") != tc.kind || !strings.Contains(rec.Body.String(), tc.body) {
			t.Errorf("%s %s: %s %q; want %s with %q", tc.method, tc.path, hd.Get("Content-Type"), rec.Body, tc.kind, tc.body)
		}
		csp := hd.Get("Content-Security-Policy")
		if !strings.Contains(csp, "script-src 'self';") || strings.Contains(csp, "unsafe-inline") || !strings.Contains(csp, "frame-ancestors 'none'") {
			t.Errorf("%s %s: Content-Security-Policy %q; want own scripts only, no inline, no framing", tc.method, tc.path, csp)
		}
		if hd.Get("X-Content-Type-Options") != "nosniff" {
			t.Errorf("%s %s: no nosniff", tc.method, tc.path)
		}
	}
	if rec := get(h, "GET", "/console"); rec.Header().Get("Location") != Path {
		t.Errorf("/console redirects to %q; want %s", rec.Header().Get("Location"), Path)
	}
}

// A binary built without the console's files serves a page saying how
// to build them.
func TestUnbuilt(t *testing.T) {
	t.Parallel()
	rec := get(Handler(Config{}), "GET", "/console/")
	if rec.Code != http.StatusOK {
		t.Fatalf("GET /console/: %d", rec.Code)
	}
	unbuilt := get(newHandler(fstest.MapFS{"unbuilt.html": {Data: []byte("run make build")}}, Config{}), "GET", "/console/")
	if unbuilt.Code != http.StatusOK || !strings.Contains(unbuilt.Body.String(), "make build") {
		t.Errorf("without index.html: %d %q; want the page saying how to build it", unbuilt.Code, unbuilt.Body)
	}
	if b, err := files.ReadFile("dist/unbuilt.html"); err != nil || !strings.Contains(string(b), "make build") {
		t.Errorf("the embedded unbuilt.html: %v; want it to say how to build the console", err)
	}
}
