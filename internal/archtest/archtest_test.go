package archtest

import (
	"bytes"
	"encoding/json"
	"errors"
	"io"
	"os/exec"
	"slices"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

const module = "github.com/agentd/agentd"

// execAllowed lists the packages that may import os/exec outside tests:
// the one package that starts MCP server processes, the test helpers
// that start fake servers or inspect the process table for tests, the
// conformance runner (make conformance), which runs the MCP conformance
// suite under Node, the end-to-end benchmark (make bench-e2e), which
// runs agentd, its fake model and the floor's MCP server as processes,
// the failover benchmark (make bench-failover), which runs agentd
// replicas and kills them, and the load tool, whose idle mode runs its
// clients in a process of their own (make load-idle).
var execAllowed = []string{
	module + "/bridge/internal/mcpconn",
	module + "/cmd/agentd-bench-e2e",
	module + "/cmd/agentd-bench-failover",
	module + "/cmd/agentd-load",
	module + "/internal/mcptest",
	module + "/internal/proctest",
	module + "/internal/conformance/run",
}

// pkg is the part of `go list -json` output the rules read.
type pkg struct {
	ImportPath string
	ForTest    string   // set on a package compiled for another's test
	Imports    []string // direct imports, test imports included for a test variant
	Deps       []string // every package it depends on, transitively
}

// violations applies the layering rules to a package graph as `go list
// -deps -test -json` describes it. Test variants (a package compiled with
// its _test.go files, and its external x_test package, checked as the
// package's own) are checked too: a test is code a newcomer reads, and a
// benchmark that needs both sides of a boundary belongs above both.
func violations(pkgs []pkg) []string {
	var out []string
	for _, p := range pkgs {
		self := base(p.ImportPath)
		if strings.TrimSuffix(self, "_test") == p.ForTest {
			self = p.ForTest
		}
		rel, ok := strings.CutPrefix(self, module+"/")
		if !ok || strings.HasSuffix(self, ".test") {
			continue // outside the module, or a generated test main
		}
		deps := make([]string, 0, len(p.Deps))
		for _, d := range p.Deps {
			deps = append(deps, base(d))
		}
		slices.Sort(deps)
		deps = slices.Compact(deps)
		for _, d := range deps {
			drel, ok := strings.CutPrefix(d, module+"/")
			if !ok || d == self {
				continue
			}
			for _, r := range layers {
				if r.breaks(rel, drel, slices.Contains(p.Imports, d)) {
					out = append(out, rel+" depends on "+drel+": "+r.why)
					break
				}
			}
		}
		if p.ForTest == "" && slices.Contains(p.Imports, "os/exec") && !slices.Contains(execAllowed, self) {
			out = append(out, rel+" imports os/exec: only bridge/internal/mcpconn starts processes (test helpers: internal/mcptest, internal/proctest; internal/conformance/run runs the suite)")
		}
	}
	slices.Sort(out)
	return slices.Compact(out)
}

// layer is one rule of the module's layers: a package under from never
// depends on one under any of never (directly when direct is set: a
// dependency through another package is that package's business), or,
// for a rule that is not about one folder, match says what breaks it.
type layer struct {
	from   string
	never  []string
	direct bool
	match  func(rel, drel string) bool
	why    string
}

// breaks reports whether a dependency of rel on drel (imported directly
// or not) breaks the rule.
func (l layer) breaks(rel, drel string, imported bool) bool {
	if l.match != nil {
		return l.match(rel, drel)
	}
	if !under(rel, l.from) || (l.direct && !imported) {
		return false
	}
	return slices.ContainsFunc(l.never, func(dir string) bool { return under(drel, dir) })
}

// layers are the module's rules, checked in order: a dependency breaks
// the first it matches.
var layers = []layer{
	{from: "bridge", never: []string{"server", "providers"}, why: "the bridge never reaches server or providers"},
	{from: "internal/bridgeclient", never: []string{"server", "providers"}, why: "the bridge client never reaches server or providers"},
	{from: "providers", never: []string{"server", "bridge", "internal/app"}, why: "providers never reach server, bridge or internal/app"},
	{from: "internal/oauthclient", never: []string{"server"}, why: "the OAuth client never reaches server"},
	{from: "internal/record", never: []string{"server", "internal/app", "bridge", "providers"},
		why: "the record depends on the store's contract and its caller's callbacks, never on server, internal/app, bridge or providers"},
	{from: "internal/mcpdecl", never: []string{"server", "internal/config", "internal/app", "bridge"},
		why: "the rules of declarations stand below everything that declares servers"},
	{from: "internal/app", never: []string{"internal/record"}, direct: true,
		why: "the composition root does not reach into the record's rules: server applies them"},
	{match: func(rel, drel string) bool { return under(drel, "cmd") && !under(rel, "cmd") }, why: "nothing imports cmd"},
	{match: func(rel, drel string) bool { return under(drel, "cmd") && top(rel) != top(drel) }, why: "one command never imports another"},
}

// base strips the " [x.test]" suffix go list gives a test variant.
func base(importPath string) string {
	p, _, _ := strings.Cut(importPath, " ")
	return p
}

// under reports whether the module-relative path rel is dir or inside it.
func under(rel, dir string) bool {
	return rel == dir || strings.HasPrefix(rel, dir+"/")
}

// top returns the first two elements of a cmd/... path: the command.
func top(rel string) string {
	parts := strings.SplitN(rel, "/", 3)
	return strings.Join(parts[:min(2, len(parts))], "/")
}

// X-H3: the module's real graph, tests included, keeps the layers.
func TestLayers(t *testing.T) {
	t.Parallel()
	cmd := exec.CommandContext(t.Context(), "go", "list", "-deps", "-test", "-json=ImportPath,ForTest,Imports,Deps", module+"/...")
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("go list: %v\n%s", err, stderr.Bytes())
	}
	var pkgs []pkg
	for dec := json.NewDecoder(bytes.NewReader(out)); ; {
		var p pkg
		if err := dec.Decode(&p); errors.Is(err, io.EOF) {
			break
		} else if err != nil {
			t.Fatalf("decoding go list output: %v", err)
		}
		pkgs = append(pkgs, p)
	}
	if !slices.ContainsFunc(pkgs, func(p pkg) bool { return p.ImportPath == module+"/bridge/internal/mcpconn" }) {
		t.Fatalf("go list listed %d packages, without bridge/internal/mcpconn: not the whole module", len(pkgs))
	}
	for _, v := range violations(pkgs) {
		t.Error(v)
	}
}

// X-H3: each rule catches what it forbids, directly or through another
// package, in code and in tests.
func TestRules(t *testing.T) {
	t.Parallel()
	m := func(rel string) string { return module + "/" + rel }
	for _, tc := range []struct {
		name string
		pkgs []pkg
		want []string
	}{
		{"allowed arrows", []pkg{
			{ImportPath: m("server"), Deps: []string{m("providers"), m("internal/bridgeclient"), m("internal/fault"), "fmt"}},
			{ImportPath: m("cmd/agentd"), Deps: []string{m("internal/app"), m("server"), m("bridge")}},
			{ImportPath: m("bridge"), Deps: []string{m("internal/config"), m("bridge/internal/mcpconn")}},
			{ImportPath: m("bridge/internal/mcpconn"), Imports: []string{"os/exec"}},
			{ImportPath: m("internal/mcptest"), Imports: []string{"os/exec"}},
		}, nil},
		{"bridge test imports server", []pkg{
			{ImportPath: m("bridge") + " [" + m("bridge") + ".test]", ForTest: m("bridge"), Deps: []string{m("server") + " [" + m("bridge") + ".test]"}},
		}, []string{"bridge depends on server: the bridge never reaches server or providers"}},
		{"bridge client test imports server", []pkg{
			{ImportPath: m("internal/bridgeclient_test") + " [" + m("internal/bridgeclient") + ".test]", ForTest: m("internal/bridgeclient"), Deps: []string{m("server")}},
		}, []string{"internal/bridgeclient depends on server: the bridge client never reaches server or providers"}},
		{"bridge client reaches providers through another package", []pkg{
			{ImportPath: m("internal/bridgeclient"), Deps: []string{m("internal/x"), m("providers/anthropic")}},
		}, []string{"internal/bridgeclient depends on providers/anthropic: the bridge client never reaches server or providers"}},
		{"bridge reaches providers through another package", []pkg{
			{ImportPath: m("bridge/internal/pool"), Deps: []string{m("internal/x"), m("providers/anthropic")}},
		}, []string{"bridge/internal/pool depends on providers/anthropic: the bridge never reaches server or providers"}},
		{"providers import app", []pkg{
			{ImportPath: m("providers/gemini"), Deps: []string{m("internal/app")}},
			{ImportPath: m("providers/router"), Deps: []string{m("bridge/internal/pool")}},
		}, []string{
			"providers/gemini depends on internal/app: providers never reach server, bridge or internal/app",
			"providers/router depends on bridge/internal/pool: providers never reach server, bridge or internal/app",
		}},
		{"cmd imported", []pkg{
			{ImportPath: m("internal/app"), Deps: []string{m("cmd/agentd")}},
			{ImportPath: m("cmd/agentd-load"), Deps: []string{m("cmd/agentd")}},
		}, []string{
			"cmd/agentd-load depends on cmd/agentd: one command never imports another",
			"internal/app depends on cmd/agentd: nothing imports cmd",
		}},
		{"the OAuth client's test reaches server through app", []pkg{
			{ImportPath: m("internal/oauthclient") + " [" + m("internal/oauthclient") + ".test]", ForTest: m("internal/oauthclient"), Deps: []string{m("internal/app"), m("server")}},
		}, []string{"internal/oauthclient depends on server: the OAuth client never reaches server"}},
		{"the record reaches server through the bridge client", []pkg{
			{ImportPath: m("internal/record"), Deps: []string{m("internal/bridgeclient"), m("server")}},
		}, []string{"internal/record depends on server: the record depends on the store's contract and its caller's callbacks, never on server, internal/app, bridge or providers"}},
		{"the declarations' rules read the configuration", []pkg{
			{ImportPath: m("internal/mcpdecl") + " [" + m("internal/mcpdecl") + ".test]", ForTest: m("internal/mcpdecl"), Deps: []string{m("internal/config")}},
		}, []string{"internal/mcpdecl depends on internal/config: the rules of declarations stand below everything that declares servers"}},
		{"the composition root imports the record, not through server", []pkg{
			{ImportPath: m("internal/app"), Imports: []string{m("server")}, Deps: []string{m("server"), m("internal/record")}},
			{ImportPath: m("internal/app/apptest"), Imports: []string{m("internal/record")}, Deps: []string{m("internal/record")}},
		}, []string{"internal/app/apptest depends on internal/record: the composition root does not reach into the record's rules: server applies them"}},
		{"os/exec outside mcpconn", []pkg{
			{ImportPath: m("server"), Imports: []string{"os/exec"}},
			{ImportPath: m("bridge") + " [" + m("bridge") + ".test]", ForTest: m("bridge"), Imports: []string{"os/exec"}},
		}, []string{"server imports os/exec: only bridge/internal/mcpconn starts processes (test helpers: internal/mcptest, internal/proctest; internal/conformance/run runs the suite)"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if diff := cmp.Diff(tc.want, violations(tc.pkgs)); diff != "" {
				t.Errorf("violations (-want +got):\n%s", diff)
			}
		})
	}
}
