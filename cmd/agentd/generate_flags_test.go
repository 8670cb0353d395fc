package main

import (
	"io"
	"slices"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"google.golang.org/protobuf/testing/protocmp"
	"google.golang.org/protobuf/types/known/structpb"

	agentdv1 "github.com/agentd/agentd/gen/go/agentd/v1"
)

// TestResumeAnswerFlags: --authorize and --input parse into the resume's
// authorization and input responses; malformed values are refused.
func TestResumeAnswerFlags(t *testing.T) {
	var a authorizeFlags
	var in inputFlags
	for _, v := range []string{"authorization_1=http://127.0.0.1:8976/oauth/callback?code=c&state=s"} {
		if err := a.Set(v); err != nil {
			t.Fatal(err)
		}
	}
	for _, v := range []string{`input_1=accept:{"name":"Ada"}`, "input_2=decline", "input_3=cancel"} {
		if err := in.Set(v); err != nil {
			t.Fatal(err)
		}
	}
	content, _ := structpb.NewStruct(map[string]any{"name": "Ada"})
	wantA := authorizeFlags{{RequestId: "authorization_1", RedirectUrl: "http://127.0.0.1:8976/oauth/callback?code=c&state=s"}}
	wantIn := inputFlags{
		{RequestId: "input_1", Action: agentdv1.InputAction_INPUT_ACTION_ACCEPT, Content: content},
		{RequestId: "input_2", Action: agentdv1.InputAction_INPUT_ACTION_DECLINE},
		{RequestId: "input_3", Action: agentdv1.InputAction_INPUT_ACTION_CANCEL},
	}
	if d := cmp.Diff(wantA, a, protocmp.Transform()); d != "" {
		t.Errorf("--authorize (-want +got):\n%s", d)
	}
	if d := cmp.Diff(wantIn, in, protocmp.Transform()); d != "" {
		t.Errorf("--input (-want +got):\n%s", d)
	}
	for _, bad := range []string{"", "noequals", "=x", "input_1=accept:[1]", "input_1=maybe"} {
		if err := in.Set(bad); err == nil {
			t.Errorf("--input %q accepted", bad)
		}
	}
	for _, bad := range []string{"", "authorization_1", "authorization_1=", "=http://x"} {
		if err := a.Set(bad); err == nil {
			t.Errorf("--authorize %q accepted", bad)
		}
	}
}

// The agent's flags build the start: each --mcp server gated as
// --require-approval says (always by default), --request alone or with
// none of the flags it replaces; args gives them back as typed, and the
// command printed with them splits back into the same words.
func TestAgentFlags(t *testing.T) {
	t.Parallel()
	gated := func(s *agentdv1.MCPServer, mode agentdv1.ApprovalMode) *agentdv1.MCPServer {
		s.RequireApproval = &agentdv1.ApprovalPolicy{Mode: mode}
		return s
	}
	files := "files=npx -y @modelcontextprotocol/server-filesystem 'My Documents'"
	for _, tc := range []struct {
		name    string
		args    []string
		want    *agentdv1.Agent
		wantErr string
	}{
		{"flags", []string{"--provider", "openai", "--model", "gpt-4o-mini", "--instructions", "Be brief.", "--mcp", files, "--mcp", "demo", "--prompt", "List the files"},
			&agentdv1.Agent{Provider: "openai", Model: "gpt-4o-mini", Instructions: "Be brief.", Mcps: []*agentdv1.MCPServer{
				gated(&agentdv1.MCPServer{Name: "files", Transport: &agentdv1.MCPServer_Command{Command: "npx"}, Args: []string{"-y", "@modelcontextprotocol/server-filesystem", "My Documents"}}, agentdv1.ApprovalMode_APPROVAL_MODE_ALWAYS),
				gated(&agentdv1.MCPServer{Name: "demo", Transport: &agentdv1.MCPServer_Ref{Ref: "demo"}}, agentdv1.ApprovalMode_APPROVAL_MODE_ALWAYS),
			}}, ""},
		{"never", []string{"--mcp", "docs=https://example.com/mcp", "--require-approval", "NEVER", "--prompt", "hi"},
			&agentdv1.Agent{Provider: "mock", Mcps: []*agentdv1.MCPServer{gated(&agentdv1.MCPServer{Name: "docs", Transport: &agentdv1.MCPServer_Url{Url: "https://example.com/mcp"}}, agentdv1.ApprovalMode_APPROVAL_MODE_NEVER)}}, ""},
		{"the default provider", []string{"--prompt", "hi"}, &agentdv1.Agent{Provider: "mock"}, ""},
		{"a file", []string{"--request", "../../examples/demo-start.json"}, nil, ""},
		{"no prompt", []string{"--provider", "mock"}, nil, "give --prompt"},
		{"a bad approval mode", []string{"--require-approval", "sometimes", "--prompt", "hi"}, nil, "want always or never"},
		{"a bad --mcp", []string{"--mcp", "files=npx $HOME", "--prompt", "hi"}, nil, "$HOME is not expanded here"},
		{"a file and a model", []string{"--request", "../../examples/demo-start.json", "--model", "x"}, nil, "give --model only without it"},
		{"a file and an --mcp", []string{"--request", "../../examples/demo-start.json", "--mcp", "demo"}, nil, "give --mcp only without it"},
		{"a file and a prompt", []string{"--request", "../../examples/demo-start.json", "--prompt", "hi"}, nil, "give --prompt only without it"},
		{"a file that is not there", []string{"--request", "nope.json"}, nil, "no such file"},
		{"an argument", []string{"--prompt", "hi", "there"}, nil, `takes flags only, not "there"`},
	} {
		f, err := parseGenerateFlags(tc.args, func(string) string { return "" }, io.Discard)
		var start *agentdv1.StartGeneration
		if err == nil {
			start, err = f.agent.start(f.prompt)
		}
		if tc.wantErr != "" {
			if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
				t.Errorf("%s: %v; want an error saying %q", tc.name, err, tc.wantErr)
			}
			continue
		}
		if err != nil {
			t.Fatalf("%s: %v", tc.name, err)
		}
		if tc.want == nil {
			tc.want = start.GetAgent() // the file's, checked below
			if start.GetAgent().GetProvider() != "script" || len(start.GetMessages()) != 1 {
				t.Errorf("%s: the file's start is not read: %v", tc.name, start)
			}
		}
		if d := cmp.Diff(tc.want, start.GetAgent(), protocmp.Transform()); d != "" {
			t.Errorf("%s (-want +got):\n%s", tc.name, d)
		}
		agentArgs := f.agent.args()
		words, err := shellWordsOf(typed{prog: "bin/agentd", addr: "127.0.0.1:7070"}.command("resume", append([]string{"gen_1"}, agentArgs...)...))
		if want := append(append([]string{"bin/agentd", "resume", "gen_1"}, agentArgs...), "--addr", "127.0.0.1:7070"); err != nil || !slices.Equal(words, want) {
			t.Errorf("%s: the printed command splits into %q, %v; want %q", tc.name, words, err, want)
		}
		if slices.Contains(agentArgs, "--prompt") {
			t.Errorf("%s: the agent's flags %q hold the prompt", tc.name, agentArgs)
		}
	}
}

func shellWordsOf(line string) ([]string, error) {
	_, words, err := splitCommand(line)
	return words, err
}

// Positional arguments and flags mix in any order; after --, everything
// is positional.
func TestParseFlagsMixed(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		args, want []string
		asJSON     bool
	}{
		{[]string{"gen_1", "--json"}, []string{"gen_1"}, true},
		{[]string{"--json", "gen_1"}, []string{"gen_1"}, true},
		{[]string{"gen_1", "gen_2"}, []string{"gen_1", "gen_2"}, false},
		{[]string{"--", "--json", "gen_1"}, []string{"--json", "gen_1"}, false},
		{[]string{"gen_1", "--", "--json"}, []string{"gen_1", "--json"}, false},
	} {
		var asJSON bool
		fs := newFlagSet("agentd test", "")
		fs.BoolVar(&asJSON, "json", false, "")
		got, err := parseFlags(fs, tc.args, io.Discard)
		if err != nil || !slices.Equal(got, tc.want) || asJSON != tc.asJSON {
			t.Errorf("parseFlags(%q) = %q, json %v, %v; want %q, json %v", tc.args, got, asJSON, err, tc.want, tc.asJSON)
		}
	}
}
