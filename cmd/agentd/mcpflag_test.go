package main

import (
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"google.golang.org/protobuf/testing/protocmp"

	agentdv1 "github.com/agentd/agentd/gen/go/agentd/v1"
)

// --mcp NAME=URL is a remote server, NAME=COMMAND a stdio server whose
// command line is split as a shell splits one, NAME alone a registered
// server; what a shell would expand, or run besides the command, is
// refused with a reason.
func TestMCPFlag(t *testing.T) {
	t.Parallel()
	command := func(name, cmd string, args ...string) *agentdv1.MCPServer {
		return &agentdv1.MCPServer{Name: name, Transport: &agentdv1.MCPServer_Command{Command: cmd}, Args: args}
	}
	withEnv := func(s *agentdv1.MCPServer, env map[string]string) *agentdv1.MCPServer {
		s.Env = env
		return s
	}
	for _, tc := range []struct {
		spec    string
		want    *agentdv1.MCPServer
		wantErr string
	}{
		{spec: "files=npx -y @modelcontextprotocol/server-filesystem .", want: command("files", "npx", "-y", "@modelcontextprotocol/server-filesystem", ".")},
		{spec: `notes=/opt/my server/bin/mcp`, want: command("notes", "/opt/my", "server/bin/mcp")},
		{spec: `notes='/opt/my server/bin/mcp' --root "a b" c\ d 'it'\''s'`, want: command("notes", "/opt/my server/bin/mcp", "--root", "a b", "c d", "it's")},
		{spec: `q=tool "say \"hi\"" '$HOME' \$PATH`, want: command("q", "tool", `say "hi"`, "$HOME", "$PATH")},
		{spec: "g=tool *.txt a=b", want: command("g", "tool", "*.txt", "a=b")},
		{spec: "  spaced  =  uvx  mcp-server-time  ", want: command("spaced", "uvx", "mcp-server-time")},
		{spec: "gh=GITHUB_TOKEN=t-1 DEBUG= github-mcp-server stdio", want: withEnv(command("gh", "github-mcp-server", "stdio"), map[string]string{"GITHUB_TOKEN": "t-1", "DEBUG": ""})},
		{spec: "a=b=c tool", want: withEnv(command("a", "tool"), map[string]string{"b": "c"})},
		{spec: `e=tool "" ''`, want: command("e", "tool", "", "")},
		{spec: "docs=https://example.com/mcp", want: &agentdv1.MCPServer{Name: "docs", Transport: &agentdv1.MCPServer_Url{Url: "https://example.com/mcp"}}},
		{spec: "local=HTTP://127.0.0.1:9000/mcp?k=v", want: &agentdv1.MCPServer{Name: "local", Transport: &agentdv1.MCPServer_Url{Url: "HTTP://127.0.0.1:9000/mcp?k=v"}}},
		{spec: "drive=mcp://google_drive", want: &agentdv1.MCPServer{Name: "drive", Transport: &agentdv1.MCPServer_Url{Url: "mcp://google_drive"}}},
		{spec: "demo", want: &agentdv1.MCPServer{Name: "demo", Transport: &agentdv1.MCPServer_Ref{Ref: "demo"}}},
		{spec: "", wantErr: "want NAME=URL"},
		{spec: "=npx server", wantErr: "want NAME=URL"},
		{spec: "my files=npx", wantErr: "want NAME=URL"},
		{spec: "files=", wantErr: "no command"},
		{spec: "files=   ", wantErr: "no command"},
		{spec: "files=ENV=1", wantErr: "no command"},
		{spec: `files=npx 'unterminated`, wantErr: `the command of MCP server "files"`},
		{spec: "files=npx server $HOME", wantErr: "$HOME is not expanded here"},
		{spec: `files=npx server "$HOME/notes"`, wantErr: "$HOME is not expanded here"},
		{spec: "files=npx server $(pwd)", wantErr: "$(pwd) is not expanded here"},
		{spec: "files=npx server ~/notes", wantErr: "~ is not expanded here"},
		{spec: "files=TOKEN=$SECRET npx server", wantErr: "$SECRET is not expanded here"},
		{spec: "files=npx server; rm -rf /", wantErr: "want one command"},
		{spec: "files=npx server | tee log", wantErr: "want one command"},
		{spec: "files=npx server > log", wantErr: "want one command"},
		{spec: "files=npx server &", wantErr: "want one command"},
		{spec: "files=npx server && echo", wantErr: "want one command"},
		{spec: "files=npx --color #fff", wantErr: "a # starts a comment"},
		{spec: "files=(npx server)", wantErr: "want one command"},
	} {
		got, err := parseMCP(tc.spec)
		if tc.wantErr != "" {
			if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
				t.Errorf("--mcp %q: %v, %v; want an error saying %q", tc.spec, got, err, tc.wantErr)
			}
			continue
		}
		if err != nil {
			t.Errorf("--mcp %q: %v", tc.spec, err)
			continue
		}
		if d := cmp.Diff(tc.want, got, protocmp.Transform()); d != "" {
			t.Errorf("--mcp %q (-want +got):\n%s", tc.spec, d)
		}
	}
}

// A printed command (a pause's hint) shows an --mcp as given unless its
// server holds what may be a secret: an environment value, or a URL's
// user, path or query.
func TestShownSpec(t *testing.T) {
	t.Parallel()
	for spec, want := range map[string]string{
		"files=npx -y @modelcontextprotocol/server-filesystem .": "files=npx -y @modelcontextprotocol/server-filesystem .",
		"gh=GITHUB_TOKEN=ghp_secret npx -y server-github":        "gh=<as you gave it>",
		"docs=https://docs.example":                              "docs=https://docs.example",
		"docs=https://docs.example/mcp?key=k1":                   "docs=<as you gave it>",
		"docs=https://u:p@docs.example":                          "docs=<as you gave it>",
		"demo":                                                   "demo",
	} {
		s, err := parseMCP(spec)
		if err != nil {
			t.Fatalf("%q: %v", spec, err)
		}
		if got := shownSpec(spec, s); got != want {
			t.Errorf("shownSpec(%q) = %q; want %q", spec, got, want)
		}
	}
}
