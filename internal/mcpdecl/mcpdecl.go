// Package mcpdecl holds the rules of an MCP server's declaration in the
// request's form (agentd.v1.MCPServer): what each transport needs and
// allows, the name a server gets when it sets none, the bounds of
// read_timeout and max_reconnection_wait, the oauth block, and the
// approval and sampling policies. A request's servers and the url servers
// registered in the configuration (converted to this form) are checked by
// these rules, so that each is written once.
package mcpdecl

import (
	"fmt"
	"net/url"
	"path/filepath"
	"strings"
	"time"

	"google.golang.org/protobuf/reflect/protoreflect"

	agentdv1 "github.com/agentd/agentd/gen/go/agentd/v1"
	"github.com/agentd/agentd/internal/fault"
)

// The bounds of a declaration's durations.
const (
	// DefaultReadTimeout bounds each wait for a server's answers when its
	// declaration sets no read_timeout.
	DefaultReadTimeout = 30 * time.Second
	// MaxReadTimeout is the longest read_timeout.
	MaxReadTimeout = time.Hour
	// MaxReconnectionWait is the longest max_reconnection_wait.
	MaxReconnectionWait = 10 * time.Minute
)

// unnamed is the name of a server that sets none and has nothing to be
// named after.
const unnamed = "unnamed server"

// connectorScheme is the scheme of the URLs that name OpenAI connectors.
const connectorScheme = "mcp"

// Server is what a checked declaration resolves to.
type Server struct {
	// Name is the declared name, or one made of the url's host, the
	// command's base name or the ref.
	Name string
	// Transport is how the server is reached; unspecified when the
	// declaration names no transport.
	Transport agentdv1.Transport
	// ReadTimeout bounds each wait for its answers.
	ReadTimeout time.Duration
}

// Problems collects a declaration's problems, their fields relative to
// the declaration ("" for the declaration itself).
type Problems []fault.Violation

// Add adds a problem of field, relative to the declaration.
func (p *Problems) Add(field, format string, args ...any) {
	*p = append(*p, fault.Violation{Field: field, Description: fmt.Sprintf(format, args...)})
}

// Under returns the problems with their fields under prefix, the
// declaration's own path.
func (p Problems) Under(prefix string) []fault.Violation {
	out := make([]fault.Violation, len(p))
	for i, v := range p {
		v.Field = join(prefix, v.Field)
		out[i] = v
	}
	return out
}

func join(prefix, field string) string {
	switch {
	case field == "":
		return prefix
	case prefix == "":
		return field
	}
	return prefix + "." + field
}

// Check checks decl by the rules of its transport, then what every server
// may set (read_timeout, allowed_tools, require_approval, sampling). A ref
// is checked as a command server's is: what it names is the
// configuration's to say. Secrets are never echoed: problems name fields,
// not values.
func Check(decl *agentdv1.MCPServer) (Server, Problems) {
	var p Problems
	s := Server{Name: decl.GetName(), ReadTimeout: DefaultReadTimeout}
	switch decl.GetTransport().(type) {
	case *agentdv1.MCPServer_Url:
		s.Transport = checkURL(&p, decl, &s.Name)
	case *agentdv1.MCPServer_Command, *agentdv1.MCPServer_Ref:
		s.Transport = checkCommand(&p, decl, &s.Name)
	default:
		if s.Name == "" {
			s.Name = unnamed
		}
		p.Add("", "MCP server %q needs a url, a command or a ref; it sets only %s", s.Name, setFields(decl))
	}
	if d, ok := CheckReadTimeout(&p, decl); ok {
		s.ReadTimeout = d
	}
	CheckUse(&p, decl)
	return s, p
}

// checkURL checks a url server: an http(s) server, or an OpenAI
// connector (mcp://), named after its host by default.
func checkURL(p *Problems, decl *agentdv1.MCPServer, name *string) agentdv1.Transport {
	transport := agentdv1.Transport_TRANSPORT_UNSPECIFIED
	u, err := url.Parse(decl.GetUrl())
	switch {
	case err != nil || u.Host == "":
		p.Add("url", "must be an absolute http, https or mcp URL")
	case u.Scheme == connectorScheme:
		transport = agentdv1.Transport_TRANSPORT_CONNECTOR
	case u.Scheme == "http" || u.Scheme == "https":
		transport = agentdv1.Transport_TRANSPORT_HTTP
	default:
		p.Add("url", "must be an http, https or mcp URL")
	}
	if *name == "" {
		*name = unnamed
		if err == nil && u.Hostname() != "" {
			*name = u.Hostname() // never the path or query: they often carry keys
		}
	}
	for _, only := range []struct {
		set  bool
		name string
	}{{len(decl.GetArgs()) > 0, "args"}, {len(decl.GetEnv()) > 0, "env"}, {len(decl.GetUnsetEnv()) > 0, "unset_env"}} {
		if only.set {
			p.Add(only.name, "applies to command servers only")
		}
	}
	CheckReconnectionWait(p, decl)
	if decl.GetOauth() != nil && transport == agentdv1.Transport_TRANSPORT_CONNECTOR {
		p.Add("oauth", "applies to http and https servers only; the provider authorizes its connectors")
	}
	CheckOAuth(p, decl, requestTerms)
	return transport
}

// CheckReconnectionWait checks max_reconnection_wait, a url server's.
func CheckReconnectionWait(p *Problems, decl *agentdv1.MCPServer) {
	if w := decl.GetMaxReconnectionWait(); w != nil {
		if d := w.AsDuration(); w.CheckValid() != nil || d <= 0 || d > MaxReconnectionWait {
			p.Add("max_reconnection_wait", "must be positive and at most %s", MaxReconnectionWait)
		}
	}
}

// checkCommand checks a command or ref server, named after its command's
// base name or its ref by default.
func checkCommand(p *Problems, decl *agentdv1.MCPServer, name *string) agentdv1.Transport {
	if decl.GetAuthorization() != "" || len(decl.GetHeaders()) > 0 || decl.GetMaxReconnectionWait() != nil || decl.GetOauth() != nil {
		p.Add("", "authorization, headers, max_reconnection_wait and oauth apply to url servers only")
	}
	switch cmd, ref := decl.GetCommand(), decl.GetRef(); {
	case cmd == "" && ref == "":
		p.Add("", "command and ref must not be empty")
	case *name != "":
	case cmd != "":
		*name = "command: " + filepath.Base(cmd)
	default:
		*name = ref
	}
	if decl.GetRef() != "" && (len(decl.GetArgs()) > 0 || len(decl.GetEnv()) > 0 || len(decl.GetUnsetEnv()) > 0) {
		p.Add("", "a ref server takes its args and env from its registration; args, env and unset_env apply to command servers")
	}
	checkEnv(p, decl)
	return agentdv1.Transport_TRANSPORT_STDIO
}

// checkEnv checks a command server's env and unset_env: names that can be
// set, none both set and unset.
func checkEnv(p *Problems, decl *agentdv1.MCPServer) {
	for _, name := range decl.GetUnsetEnv() {
		if _, both := decl.GetEnv()[name]; both {
			p.Add("unset_env", "%s is both set in env and unset", name)
		}
	}
	for name := range decl.GetEnv() {
		if name == "" || strings.ContainsAny(name, "=\x00") {
			p.Add("env", "variable names must be non-empty and contain no '=' or NUL")
		}
	}
}

// CheckReadTimeout checks read_timeout, which every server may set, and
// returns it when it is set and valid.
func CheckReadTimeout(p *Problems, decl *agentdv1.MCPServer) (time.Duration, bool) {
	rt := decl.GetReadTimeout()
	if rt == nil {
		return 0, false
	}
	d := rt.AsDuration()
	if rt.CheckValid() != nil || d <= 0 || d > MaxReadTimeout {
		p.Add("read_timeout", "must be a positive duration of at most %s", MaxReadTimeout)
		return 0, false
	}
	return d, true
}

// CheckUse checks what shapes a server's use, whatever its transport:
// allowed_tools, require_approval and sampling.
func CheckUse(p *Problems, decl *agentdv1.MCPServer) {
	for j, name := range decl.GetAllowedTools() {
		if name == "" {
			p.Add(fmt.Sprintf("allowed_tools[%d]", j), "must not be empty")
		}
	}
	if pol := decl.GetRequireApproval(); pol != nil {
		if _, ok := agentdv1.ApprovalMode_name[int32(pol.GetMode())]; !ok {
			p.Add("require_approval.mode", "unknown mode %d", pol.GetMode())
		}
		if pol.GetMode() != agentdv1.ApprovalMode_APPROVAL_MODE_UNSPECIFIED && (pol.GetAlways() != nil || pol.GetNever() != nil) {
			p.Add("require_approval", "mode cannot be combined with always or never")
		}
	}
	s := decl.GetSampling()
	if _, ok := agentdv1.SamplingMode_name[int32(s.GetMode())]; !ok {
		p.Add("sampling.mode", "unknown mode %d", s.GetMode())
	}
	if s.GetMaxTokens() < 0 {
		p.Add("sampling.max_tokens", "must not be negative")
	}
}

// setFields lists the names of the fields a declaration sets, never their
// values.
func setFields(m *agentdv1.MCPServer) string {
	var names []string
	m.ProtoReflect().Range(func(fd protoreflect.FieldDescriptor, _ protoreflect.Value) bool {
		names = append(names, string(fd.Name()))
		return true
	})
	if len(names) == 0 {
		return "nothing"
	}
	return strings.Join(names, ", ")
}
