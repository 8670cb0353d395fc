package main

import (
	"errors"
	"fmt"
	"net/url"
	"strings"

	"mvdan.cc/sh/v3/expand"
	"mvdan.cc/sh/v3/syntax"

	agentdv1 "github.com/agentd/agentd/gen/go/agentd/v1"
)

// mcpFlags collects --mcp: NAME=URL, NAME=COMMAND or NAME, each an MCP
// server of the agent. The specs are kept as given, for the command that
// resumes the generation.
type mcpFlags struct {
	servers []*agentdv1.MCPServer
	specs   []string
}

func (m *mcpFlags) String() string { return "" }

func (m *mcpFlags) Set(spec string) error {
	s, err := parseMCP(spec)
	if err != nil {
		return err
	}
	m.servers = append(m.servers, s)
	m.specs = append(m.specs, spec)
	return nil
}

// shownSpec is spec as a printed command may show it: as given, unless
// the server it declares holds what may be a secret (environment values,
// or a URL's user, path or query, which often carry a key): then the
// name alone, with a mark that the rest is to be given again.
func shownSpec(spec string, s *agentdv1.MCPServer) string {
	name, _, _ := strings.Cut(spec, "=")
	u, err := url.Parse(s.GetUrl())
	secretURL := s.GetUrl() != "" && (err != nil || u.User != nil || strings.Trim(u.Path, "/") != "" || u.RawQuery != "")
	if len(s.GetEnv()) > 0 || secretURL {
		return name + "=<as you gave it>"
	}
	return spec
}

// parseMCP reads one --mcp: NAME=URL (http, https, or an OpenAI connector's
// mcp://) is a remote server; NAME=COMMAND a stdio server, its command line
// split as a POSIX shell splits one, leading VAR=value words becoming its
// environment; a NAME alone is the server registered under that name
// (bridge.servers).
func parseMCP(spec string) (*agentdv1.MCPServer, error) {
	name, target, hasTarget := strings.Cut(spec, "=")
	name = strings.TrimSpace(name)
	switch {
	case name == "" || strings.ContainsAny(name, " \t\n"):
		return nil, errors.New(`want NAME=URL, NAME=COMMAND or NAME, e.g. 'files=npx -y @modelcontextprotocol/server-filesystem .'`)
	case !hasTarget:
		return &agentdv1.MCPServer{Name: name, Transport: &agentdv1.MCPServer_Ref{Ref: name}}, nil
	case isURL(strings.TrimSpace(target)):
		return &agentdv1.MCPServer{Name: name, Transport: &agentdv1.MCPServer_Url{Url: strings.TrimSpace(target)}}, nil
	}
	env, words, err := splitCommand(target)
	if err != nil {
		return nil, fmt.Errorf("the command of MCP server %q: %w", name, err)
	}
	return &agentdv1.MCPServer{Name: name, Transport: &agentdv1.MCPServer_Command{Command: words[0]}, Args: words[1:], Env: env}, nil
}

// isURL reports whether target names a remote server rather than a
// command.
func isURL(target string) bool {
	for _, scheme := range []string{"http://", "https://", "mcp://"} {
		if len(target) > len(scheme) && strings.EqualFold(target[:len(scheme)], scheme) {
			return true
		}
	}
	return false
}

// splitCommand splits a command line as a POSIX shell does (quotes and
// backslashes), with the VAR=value words before the command as its
// environment. What a shell would expand ($VAR, $(...), a leading ~), or
// run besides the one command (;, |, &&, redirections), is refused rather
// than passed on unexpanded: the command runs where agentd runs, and only
// the person's own shell can expand it for them.
func splitCommand(line string) (map[string]string, []string, error) {
	f, err := syntax.NewParser(syntax.Variant(syntax.LangPOSIX), syntax.KeepComments(true)).Parse(strings.NewReader(line), "")
	if err != nil {
		return nil, nil, err
	}
	call, err := oneCall(f)
	if err != nil {
		return nil, nil, err
	}
	env, err := assignments(call.Assigns)
	if err != nil {
		return nil, nil, err
	}
	words := make([]string, len(call.Args))
	for i, w := range call.Args {
		if words[i], err = literal(w); err != nil {
			return nil, nil, err
		}
	}
	if len(words) == 0 {
		return nil, nil, errors.New("no command")
	}
	return env, words, nil
}

// oneCall is f's one simple command, with nothing around it.
func oneCall(f *syntax.File) (*syntax.CallExpr, error) {
	if len(f.Stmts) == 0 {
		return nil, errors.New("no command")
	}
	if len(f.Stmts) > 1 {
		return nil, errors.New("want one command (quote ; & and newlines)")
	}
	st := f.Stmts[0]
	call, ok := st.Cmd.(*syntax.CallExpr)
	switch {
	case len(st.Comments) > 0 || len(f.Last) > 0:
		return nil, errors.New("a # starts a comment, which a shell would drop: quote it")
	case !ok || st.Negated || st.Background || len(st.Redirs) > 0:
		return nil, errors.New("want one command, without pipes, redirections, ! or &")
	}
	return call, nil
}

// assignments are the VAR=value words before the command.
func assignments(assigns []*syntax.Assign) (map[string]string, error) {
	if len(assigns) == 0 {
		return nil, nil
	}
	env := make(map[string]string, len(assigns))
	for _, a := range assigns {
		if a.Append || a.Index != nil || a.Array != nil || a.Naked {
			return nil, fmt.Errorf("%s: want VAR=value", a.Name.Value)
		}
		v := ""
		if a.Value != nil {
			var err error
			if v, err = literal(a.Value); err != nil {
				return nil, err
			}
		}
		env[a.Name.Value] = v
	}
	return env, nil
}

// literal is w with its quotes and backslashes removed, as one word; w
// may hold nothing a shell would expand. Glob characters stay as they are, as a shell
// leaves a pattern that matches nothing.
func literal(w *syntax.Word) (string, error) {
	if lit, ok := w.Parts[0].(*syntax.Lit); ok && strings.HasPrefix(lit.Value, "~") {
		return "", errors.New("~ is not expanded here: write the path out, or put the value of --mcp in double quotes so that your shell expands it")
	}
	var bad syntax.Node
	syntax.Walk(w, func(n syntax.Node) bool {
		switch n.(type) {
		case *syntax.ParamExp, *syntax.CmdSubst, *syntax.ArithmExp, *syntax.ProcSubst, *syntax.ExtGlob, *syntax.BraceExp:
			bad = n
		}
		return bad == nil
	})
	if bad != nil {
		return "", fmt.Errorf("%s is not expanded here: put the value of --mcp in double quotes so that your shell expands it, or quote the $ to pass it as is", quoteNode(bad))
	}
	fields, err := expand.Fields(&expand.Config{}, w) // globbing is off: no ReadDir
	if err != nil || len(fields) != 1 {
		return "", fmt.Errorf("cannot read %s as one word", quoteNode(w))
	}
	return fields[0], nil
}

// quoteNode is n as written.
func quoteNode(n syntax.Node) string {
	var b strings.Builder
	if err := syntax.NewPrinter().Print(&b, n); err != nil {
		return "an expansion"
	}
	return b.String()
}
