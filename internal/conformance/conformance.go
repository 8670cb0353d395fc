// Package conformance runs the official MCP conformance suite's client
// scenarios (@modelcontextprotocol/conformance, pinned in package.json)
// against agentd. For each scenario the suite starts a test MCP
// server and runs a client command with the server's URL; the client
// here is the shim (internal/conformance/shim), which drives agentd
// through its public Generate API: a script-provider generation whose
// agent declares the scenario's server as a url MCPServer and whose
// scripted turns do what the scenario expects (Scripts). The suite then
// judges what the server saw.
//
// The committed baseline (baseline.yml, in the suite's own
// expected-failures format) names each scenario expected to fail and
// why; Compare fails a run on a failure the baseline does not name and
// on a baseline entry that now passes, so the baseline shrinks as
// agentd's MCP client grows.
package conformance

import (
	"bufio"
	"cmp"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"maps"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"text/tabwriter"

	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/structpb"

	agentdv1 "github.com/agentd/agentd/gen/go/agentd/v1"
)

// Env names what the suite and the runner give the shim.
const (
	// ScenarioEnv is set by the suite to the scenario's name.
	ScenarioEnv = "MCP_CONFORMANCE_SCENARIO"
	// AddrEnv, set by the runner, is the address of an agentd serving
	// the AgentService in plaintext; without it the shim starts its own.
	AddrEnv = "AGENTD_CONFORMANCE_ADDR"
)

// Script is what the client does in one scenario, once connected to the
// scenario's server (which lists its tools): call Tool with Args, or
// nothing more when Tool is empty.
type Script struct {
	Tool string
	Args map[string]any
}

// authTool is the tool the auth scenarios' servers offer once the client
// is authorized.
var authTool = Script{Tool: "test-tool", Args: map[string]any{}}

// listOnly connects and lists tools: what the client-credentials
// scenarios ask.
var listOnly = Script{}

// Scripts holds every client scenario of the pinned suite: what a client
// does in it. A scenario the suite lists and this table lacks fails
// TestScriptsCoverSuite.
var Scripts = map[string]Script{
	"initialize":                          {},
	"tools_call":                          {Tool: "add_numbers", Args: map[string]any{"a": 5, "b": 3}},
	"elicitation-sep1034-client-defaults": {Tool: "test_client_elicitation_defaults", Args: map[string]any{}},
	"sse-retry":                           {Tool: "test_reconnection", Args: map[string]any{}},

	"auth/metadata-default":                     authTool,
	"auth/metadata-var1":                        authTool,
	"auth/metadata-var2":                        authTool,
	"auth/metadata-var3":                        authTool,
	"auth/basic-cimd":                           authTool,
	"auth/scope-from-www-authenticate":          authTool,
	"auth/scope-from-scopes-supported":          authTool,
	"auth/scope-omitted-when-undefined":         authTool,
	"auth/scope-step-up":                        authTool,
	"auth/scope-retry-limit":                    authTool,
	"auth/token-endpoint-auth-basic":            authTool,
	"auth/token-endpoint-auth-post":             authTool,
	"auth/token-endpoint-auth-none":             authTool,
	"auth/pre-registration":                     authTool,
	"auth/2025-03-26-oauth-metadata-backcompat": authTool,
	"auth/2025-03-26-oauth-endpoint-fallback":   authTool,
	"auth/resource-mismatch":                    authTool,
	"auth/offline-access-scope":                 authTool,
	"auth/offline-access-not-supported":         authTool,
	"auth/client-credentials-jwt":               listOnly,
	"auth/client-credentials-basic":             listOnly,
	"auth/cross-app-access-complete-flow":       authTool,
}

// ServerName is the name the scenario's server has in the agent.
const ServerName = "conformance"

// ContextEnv is set by the suite, for the scenarios that need it, to a
// JSON object of what a client is given beforehand (Context).
const ContextEnv = "MCP_CONFORMANCE_CONTEXT"

// Context is what the suite gives the client of some auth scenarios: a
// client registered in advance, with its secret (pre-registration,
// client-credentials-basic, cross-app-access-complete-flow) or its
// private key (client-credentials-jwt). The cross-app scenario also gives
// an identity provider, agentd's client there and the end user's ID
// token from it (idp_*).
type Context struct {
	ClientID      string `json:"client_id"`
	ClientSecret  string `json:"client_secret"`
	PrivateKeyPEM string `json:"private_key_pem"`
	// SigningAlgorithm is the assertion's algorithm the scenario expects
	// (ES256); agentd picks it from the key's type.
	SigningAlgorithm string `json:"signing_algorithm"`

	IdPClientID      string `json:"idp_client_id"`
	IdPIDToken       string `json:"idp_id_token"`
	IdPIssuer        string `json:"idp_issuer"`
	IdPTokenEndpoint string `json:"idp_token_endpoint"`
}

// ParseContext reads ContextEnv's value; empty is no context.
func ParseContext(raw string) (Context, error) {
	var c Context
	if raw == "" {
		return c, nil
	}
	if err := json.Unmarshal([]byte(raw), &c); err != nil {
		return c, fmt.Errorf("conformance: %s: %w", ContextEnv, err) // json's errors quote no value
	}
	return c, nil
}

// CIMDURL is the client ID metadata document URL the auth/basic-cimd
// scenario expects as the client_id: agentd's oauth.client_metadata_url
// for the suite (its authorization server does not fetch it).
const CIMDURL = "https://conformance-test.local/client-metadata.json"

// OAuth is the oauth block of scenario's server: none outside the auth
// scenarios; the client-credentials grant with the context's secret or
// private key for client-credentials-*; the enterprise-managed grant with
// the context's identity provider and ID token where it gives them
// (cross-app access); otherwise the authorization-code grant, as the
// context's pre-registered client when it gives one (the token
// endpoint's authentication method left to agentd, which picks one the
// authorization server supports).
func OAuth(scenario string, c Context) *agentdv1.OAuthClient {
	if !strings.HasPrefix(scenario, "auth/") {
		return nil
	}
	o := &agentdv1.OAuthClient{ClientId: c.ClientID, ClientSecret: c.ClientSecret, PrivateKey: c.PrivateKeyPEM}
	switch {
	case strings.HasPrefix(scenario, "auth/client-credentials-"):
		o.Grant = agentdv1.GrantType_GRANT_TYPE_CLIENT_CREDENTIALS
	case c.IdPIDToken != "":
		o.Grant = agentdv1.GrantType_GRANT_TYPE_ENTERPRISE_MANAGED
		o.IdentityProvider = &agentdv1.IdentityProvider{TokenEndpoint: c.IdPTokenEndpoint, ClientId: c.IdPClientID, IdToken: c.IdPIDToken}
	}
	return o
}

// Agent is the script agent for scenario against the server at url: it
// declares the server (with the schema cache off, so every generation
// connects afresh, and, in the auth scenarios, agentd as its OAuth
// client: OAuth) and, when the scenario calls a tool, calls it, then
// answers with the tool's output.
func Agent(scenario, url string, c Context) (*agentdv1.Agent, error) {
	s, ok := Scripts[scenario]
	if !ok {
		return nil, fmt.Errorf("conformance: no script for scenario %q", scenario)
	}
	var turns []any
	if s.Tool != "" {
		turns = append(turns, map[string]any{"tool_calls": []any{map[string]any{"name": s.Tool, "arguments": s.Args}}})
		turns = append(turns, map[string]any{"text": "{{tool_outputs}}"})
	} else {
		turns = append(turns, map[string]any{"text": "connected"})
	}
	opts, err := structpb.NewStruct(map[string]any{"script": map[string]any{"turns": turns}})
	if err != nil {
		return nil, err
	}
	return &agentdv1.Agent{
		Provider:        "script",
		Mcps:            []*agentdv1.MCPServer{{Name: ServerName, Transport: &agentdv1.MCPServer_Url{Url: url}, Oauth: OAuth(scenario, c)}},
		McpCache:        proto.Bool(false),
		ProviderOptions: opts,
	}, nil
}

// ParseBaseline reads the expected failures: the suite's baseline format
// (a "client:" list), where every entry must give its reason in a
// comment: "  - auth/basic-cimd  # agentd has no OAuth client yet". It
// returns the reason by scenario.
func ParseBaseline(r io.Reader) (map[string]string, error) {
	entries := map[string]string{}
	sc := bufio.NewScanner(r)
	inClient := false
	for n := 1; sc.Scan(); n++ {
		line := sc.Text()
		if !clientEntry(line, &inClient) {
			continue
		}
		name, reason, err := baselineEntry(n, strings.TrimSpace(line))
		if err != nil {
			return nil, err
		}
		if _, dup := entries[name]; dup {
			return nil, fmt.Errorf("baseline line %d: %s is listed twice", n, name)
		}
		entries[name] = reason
	}
	return entries, sc.Err()
}

// clientEntry reports whether a baseline line is an entry of the client
// list; a heading line sets *inClient, whether the client list follows.
// Blank lines and comments are neither.
func clientEntry(line string, inClient *bool) bool {
	trimmed := strings.TrimSpace(line)
	switch {
	case trimmed == "" || strings.HasPrefix(trimmed, "#"):
		return false
	case !strings.HasPrefix(line, " ") && !strings.HasPrefix(line, "-"):
		*inClient = trimmed == "client:"
		return false
	}
	return *inClient
}

// baselineEntry reads the entry on line n: "- <scenario>  # <reason>".
func baselineEntry(n int, line string) (name, reason string, err error) {
	item, ok := strings.CutPrefix(line, "- ")
	if !ok {
		return "", "", fmt.Errorf("baseline line %d: want \"- <scenario>  # <reason>\", got %q", n, line)
	}
	name, reason, _ = strings.Cut(item, "#")
	name, reason = strings.TrimSpace(name), strings.TrimSpace(reason)
	if name == "" || reason == "" {
		return "", "", fmt.Errorf("baseline line %d: every entry names a scenario and gives its reason after #: %q", n, line)
	}
	return name, reason, nil
}

// Check is one of the suite's checks, as checks.json holds it.
type Check struct {
	ID           string `json:"id"`
	Name         string `json:"name"`
	Description  string `json:"description"`
	Status       string `json:"status"` // SUCCESS, FAILURE, WARNING, INFO
	ErrorMessage string `json:"errorMessage"`
}

// Result is one scenario's outcome.
type Result struct {
	Scenario string
	Passed   bool
	// Succeeded, Failed and Warnings count the checks by status.
	Succeeded, Failed, Warnings int
	// Why is the first failed (or warning) check, for the table.
	Why string
}

// Judge is the suite's own verdict on a scenario's checks: it fails on a
// FAILURE or WARNING check, and here also when no check succeeded (a
// client that never reached the server).
func Judge(scenario string, checks []Check) Result {
	r := Result{Scenario: scenario}
	for _, c := range checks {
		r.count(c)
	}
	r.Passed = r.Failed == 0 && r.Warnings == 0 && r.Succeeded > 0
	if r.Succeeded == 0 {
		r.Why = cmp.Or(r.Why, "no check passed: the client never reached the server")
	}
	return r
}

// count counts check c by its status; the first failed (or warning)
// check says why the scenario failed.
func (r *Result) count(c Check) {
	switch c.Status {
	case "SUCCESS":
		r.Succeeded++
		return
	case "FAILURE":
		r.Failed++
	case "WARNING":
		r.Warnings++
	default:
		return
	}
	if r.Why == "" {
		r.Why = c.Name + ": " + firstLine(cmp.Or(c.ErrorMessage, c.Description))
	}
}

func firstLine(s string) string {
	s, _, _ = strings.Cut(s, "\n")
	const limit = 100
	if len(s) > limit {
		s = s[:limit] + "..."
	}
	return s
}

// resultDir is the suite's name for a scenario's results directory:
// "<scenario>-<ISO time with : and . as ->".
var resultDir = regexp.MustCompile(`^(.+)-\d{4}-\d{2}-\d{2}T\d{2}-\d{2}-\d{2}-\d{3}Z$`)

// ReadResults reads every checks.json the suite wrote under dir (its
// --output-dir) and judges each scenario.
func ReadResults(dir string) (map[string]Result, error) {
	results := map[string]Result{}
	err := filepath.WalkDir(dir, func(path string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() || d.Name() != "checks.json" {
			return err
		}
		scenario, checks, err := readChecks(dir, path)
		if err == nil {
			results[scenario] = Judge(scenario, checks)
		}
		return err
	})
	return results, err
}

// readChecks reads the checks.json at path, under dir, and the scenario
// its directory is named after.
func readChecks(dir, path string) (string, []Check, error) {
	scenario, err := scenarioOf(dir, path)
	if err != nil {
		return "", nil, err
	}
	b, err := os.ReadFile(path)
	if err != nil {
		return "", nil, err
	}
	var checks []Check
	if err := json.Unmarshal(b, &checks); err != nil {
		return "", nil, fmt.Errorf("conformance: %s: %w", path, err)
	}
	return scenario, checks, nil
}

// scenarioOf is the scenario whose results directory, under dir, holds
// path.
func scenarioOf(dir, path string) (string, error) {
	rel, err := filepath.Rel(dir, filepath.Dir(path))
	if err != nil {
		return "", err
	}
	m := resultDir.FindStringSubmatch(filepath.ToSlash(rel))
	if m == nil {
		return "", fmt.Errorf("conformance: unexpected results directory %s", rel)
	}
	return m[1], nil
}

// Report is a run held against the baseline.
type Report struct {
	// Rows are every scenario, run or expected, sorted by name.
	Rows []Row
	// Unexpected failed without a baseline entry; Stale passed with one;
	// Missing are scenarios in the baseline or the suite's list that did
	// not run.
	Unexpected, Stale, Missing []string
}

// Row is one scenario in the table.
type Row struct {
	Result
	Ran      bool
	Expected string // the baseline's reason, when listed
}

// OK is whether the run matches the baseline.
func (r Report) OK() bool {
	return len(r.Unexpected) == 0 && len(r.Stale) == 0 && len(r.Missing) == 0
}

// Compare holds results against baseline (reason by scenario) and the
// scenarios that should have run (the suite's list).
func Compare(results map[string]Result, baseline map[string]string, scenarios []string) Report {
	names := slices.Concat(slices.Collect(maps.Keys(results)), slices.Collect(maps.Keys(baseline)), scenarios)
	slices.Sort(names)
	var rep Report
	for _, n := range slices.Compact(names) {
		res, ran := results[n]
		reason, listed := baseline[n]
		rep.add(n, res, ran, reason, listed)
	}
	return rep
}

// add adds scenario n's row: its result when it ran, and the baseline's
// reason when it lists it; one that did not run is missing, one that
// failed unlisted unexpected, one that passed listed stale.
func (rep *Report) add(n string, res Result, ran bool, reason string, listed bool) {
	row := Row{Result: res, Ran: ran, Expected: reason}
	row.Scenario = n
	rep.Rows = append(rep.Rows, row)
	switch {
	case !ran:
		rep.Missing = append(rep.Missing, n)
	case !res.Passed && !listed:
		rep.Unexpected = append(rep.Unexpected, n)
	case res.Passed && listed:
		rep.Stale = append(rep.Stale, n)
	}
}

// Counts is how many scenarios ran and passed.
func (r Report) Counts() (passed, ran int) {
	for _, row := range r.Rows {
		if row.Ran {
			ran++
			if row.Passed {
				passed++
			}
		}
	}
	return passed, ran
}

// Write prints the table and, when the run does not match the baseline,
// what differs and what to do.
func (r Report) Write(w io.Writer) error {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "SCENARIO\tRESULT\tCHECKS\tNOTE")
	for _, row := range r.Rows {
		result, note := row.verdict()
		checks := ""
		if row.Ran {
			checks = fmt.Sprintf("%d ok, %d failed", row.Succeeded, row.Failed+row.Warnings)
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\n", row.Scenario, result, checks, note)
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	passed, ran := r.Counts()
	fmt.Fprintf(w, "\n%d of %d scenarios pass.\n", passed, ran)
	r.writeDifferences(w)
	return nil
}

// verdict is the row's result in the table, and the note beside it.
func (row Row) verdict() (result, note string) {
	switch {
	case !row.Ran:
		return "NOT RUN", "the suite did not run it"
	case row.Passed && row.Expected != "":
		return "PASS (stale)", "passes but the baseline expects a failure: remove its entry"
	case !row.Passed && row.Expected != "":
		return "fail (expected)", row.Expected
	case !row.Passed:
		return "FAIL", row.Why
	}
	return "pass", ""
}

// writeDifferences writes how the run differs from the baseline, and
// what to do.
func (r Report) writeDifferences(w io.Writer) {
	if len(r.Unexpected) > 0 {
		fmt.Fprintf(w, "Unexpected failures (not in the baseline): %s\n", strings.Join(r.Unexpected, ", "))
	}
	if len(r.Stale) > 0 {
		fmt.Fprintf(w, "Stale baseline entries (they pass now: remove them): %s\n", strings.Join(r.Stale, ", "))
	}
	if len(r.Missing) > 0 {
		fmt.Fprintf(w, "Did not run: %s\n", strings.Join(r.Missing, ", "))
	}
}

// listedScenario is the scenario a line of the list names, if it is an
// item under "Client scenarios"; a heading line sets *inClient, whether
// those follow.
func listedScenario(line string, inClient *bool) (string, bool) {
	if !strings.HasPrefix(line, " ") {
		*inClient = strings.HasPrefix(line, "Client scenarios")
		return "", false
	}
	item, ok := strings.CutPrefix(strings.TrimSpace(line), "- ")
	if !*inClient || !ok {
		return "", false
	}
	name, _, _ := strings.Cut(item, " ")
	return name, true
}

// ParseList reads the client scenarios from the suite's `list` output:
// the "  - <name> [<spec versions>]" lines under "Client scenarios".
func ParseList(r io.Reader) ([]string, error) {
	var names []string
	sc := bufio.NewScanner(r)
	inClient := false
	for sc.Scan() {
		if name, ok := listedScenario(sc.Text(), &inClient); ok {
			names = append(names, name)
		}
	}
	if err := sc.Err(); err != nil {
		return nil, err
	}
	if len(names) == 0 {
		return nil, errors.New("conformance: the suite lists no client scenarios")
	}
	return names, nil
}
