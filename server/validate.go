package server

import (
	"cmp"
	"fmt"
	"net/url"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"time"

	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protoreflect"

	agentdv1 "github.com/agentd/agentd/gen/go/agentd/v1"
	"github.com/agentd/agentd/internal/config"
	"github.com/agentd/agentd/internal/fault"
	"github.com/agentd/agentd/internal/policy"
	"github.com/agentd/agentd/providers"
)

// Limits on declarations.
const (
	defaultReadTimeout   = 30 * time.Second
	maxReadTimeout       = time.Hour
	maxReconnectionWait  = 10 * time.Minute
	toolNameMaxLen       = 64
	defaultUnnamedServer = "unnamed server"
	connectorScheme      = "mcp"
)

var toolNamePattern = regexp.MustCompile(`^[a-zA-Z0-9_-]{1,64}$`)

// plan is a validated request, resolved: which provider serves it, where
// each MCP server runs, and the limits in effect. Building a plan performs
// no I/O.
type plan struct {
	tenant        *Tenant
	provider      providers.Provider
	agent         *agentdv1.Agent
	messages      []*agentdv1.Message
	servers       []*serverPlan // declaration order
	maxToolTurns  int
	answerTimeout time.Duration
}

// serverPlan is one declared MCP server, resolved.
type serverPlan struct {
	decl        *agentdv1.MCPServer
	name        string
	field       string // path of the declaration in the request
	transport   agentdv1.Transport
	placement   agentdv1.Placement
	readTimeout time.Duration
	// ref names the registered url server that decl was resolved from
	// (Options.Registered): decl is then the registration with the
	// request's own settings, secrets included, and never leaves agentd
	// but for the bridge; the request keeps the ref alone.
	ref string
}

// violations collects every problem of a request.
type violations []fault.Violation

func (v *violations) add(field, format string, args ...any) {
	*v = append(*v, fault.Violation{Field: field, Description: fmt.Sprintf(format, args...)})
}

// newPlan validates a request (an agent and its conversation) of tenant
// and resolves it with the tenant's providers and rules. root prefixes
// field paths ("start", "resume" or "" for Preview). Every problem is
// reported at once, as field violations: what the tenant's rules refuse
// with the rest (X-D9), by policy.Refusal's rule.
func (s *Service) newPlan(root string, tenant *Tenant, agent *agentdv1.Agent, messages []*agentdv1.Message, answerTimeout *durationValue) (*plan, error) {
	var v, denied violations
	field := func(f string) string {
		if root == "" {
			return f
		}
		return root + "." + f
	}
	p := &plan{tenant: tenant, agent: agent, messages: messages, maxToolTurns: s.cfg.MaxToolTurns, answerTimeout: s.cfg.AnswerTimeout}
	if agent == nil {
		v.add(field("agent"), "is required")
		return nil, fault.InvalidRequest(v)
	}
	s.planProvider(&v, field, p)
	if len(messages) == 0 {
		v.add(field("messages"), "needs at least one message")
	}
	for i, m := range messages {
		validateMessage(&v, field(fmt.Sprintf("messages[%d]", i)), m)
	}
	toolNames := validateTools(&v, field, agent.GetTools())
	s.planSettings(&v, field, p, answerTimeout)
	s.planServers(&v, &denied, field, p)
	if p.provider != nil {
		// Placement problems are reported with the others, for every
		// server whose transport is known.
		p.place(&v, toolNames, field("agent.mcps"))
		p.checkAddresses(&denied)
	}
	if err := policy.Refusal(v, denied); err != nil {
		return nil, err
	}
	return p, nil
}

// planProvider finds the provider the agent names and checks its model.
func (s *Service) planProvider(v *violations, field func(string) string, p *plan) {
	agent, reg := p.agent, p.tenant.Providers
	provider, ok := reg.Lookup(agent.GetProvider())
	switch {
	case agent.GetProvider() == "":
		v.add(field("agent.provider"), "is required; one of %s", strings.Join(reg.Names(), ", "))
	case !ok:
		v.add(field("agent.provider"), "unknown provider %q; one of %s", agent.GetProvider(), strings.Join(reg.Names(), ", "))
	default:
		p.provider = provider
		if agent.GetModel() == "" && !provider.Capabilities().ModelOptional {
			v.add(field("agent.model"), "is required for provider %q", agent.GetProvider())
		} else if mv, ok := provider.(providers.ModelValidator); ok {
			if err := mv.ValidateModel(agent.GetModel()); err != nil {
				v.add(field("agent.model"), "%s", err.Error())
			}
		}
	}
}

// validateTools checks the agent's function tools and returns the index
// of each by name.
func validateTools(v *violations, field func(string) string, tools []*agentdv1.FunctionTool) map[string]int {
	toolNames := make(map[string]int)
	for i, t := range tools {
		f := field(fmt.Sprintf("agent.tools[%d]", i))
		if !toolNamePattern.MatchString(t.GetName()) {
			v.add(f+".name", "must be 1 to 64 characters of letters, digits, '_' and '-'")
		} else if j, dup := toolNames[t.GetName()]; dup {
			v.add(f+".name", "%q is also the name of agent.tools[%d]", t.GetName(), j)
		} else {
			toolNames[t.GetName()] = i
		}
		if params := t.GetParameters(); params != nil {
			if typ, ok := params.GetFields()["type"]; ok && typ.GetStringValue() != "object" {
				v.add(f+".parameters", `must be a JSON Schema of "type": "object"`)
			}
		}
	}
	return toolNames
}

// planSettings checks the agent's settings (mcp_strategy,
// tool_name_conflict, requires_approval, max_tool_turns, provider_options)
// and the request's answer_timeout, and takes the limits they set.
func (s *Service) planSettings(v *violations, field func(string) string, p *plan, answerTimeout *durationValue) {
	agent := p.agent
	if _, ok := agentdv1.MCPStrategy_name[int32(agent.GetMcpStrategy())]; !ok {
		v.add(field("agent.mcp_strategy"), "unknown strategy %d; one of AUTO, CLIENT, SERVER", agent.GetMcpStrategy())
	}
	if _, ok := agentdv1.ToolNameConflict_name[int32(agent.GetToolNameConflict())]; !ok {
		v.add(field("agent.tool_name_conflict"), "unknown value %d; one of REFUSE, PREFIX", agent.GetToolNameConflict())
	}
	for i, name := range agent.GetRequiresApproval() {
		if name == "" {
			v.add(field(fmt.Sprintf("agent.requires_approval[%d]", i)), "must not be empty")
		}
	}
	if agent.MaxToolTurns != nil {
		if n := agent.GetMaxToolTurns(); n < 1 || n > config.MaxToolTurnsLimit {
			v.add(field("agent.max_tool_turns"), "must be 1..%d, got %d", config.MaxToolTurnsLimit, n)
		} else {
			p.maxToolTurns = int(n)
		}
	}
	if answerTimeout != nil {
		switch d := answerTimeout.d; {
		case !answerTimeout.valid || d < 0:
			v.add(field(answerTimeout.field), "must be a valid, non-negative duration")
		case d > s.cfg.MaxAnswerTimeout:
			v.add(field(answerTimeout.field), "must be at most %s (generation.max_answer_timeout)", s.cfg.MaxAnswerTimeout)
		default:
			p.answerTimeout = d
		}
	}
	if p.provider != nil {
		if ov, ok := p.provider.(providers.OptionsValidator); ok {
			for _, prob := range ov.ValidateOptions(p.options()) {
				v.add(field("agent.provider_options."+prob.Field), "%s", prob.Description)
			}
		}
	}
}

// planServers validates and names the agent's MCP servers, in declaration
// order; names must be distinct. What the tenant's rules refuse goes to
// denied.
func (s *Service) planServers(v, denied *violations, field func(string) string, p *plan) {
	names := make(map[string]int)
	for i, decl := range p.agent.GetMcps() {
		sp := s.planServer(v, field(fmt.Sprintf("agent.mcps[%d]", i)), decl)
		p.checkCommand(denied, sp)
		p.checkRef(denied, sp)
		if sp.transport == agentdv1.Transport_TRANSPORT_UNSPECIFIED {
			// Already refused; its name may be a stand-in.
		} else if j, dup := names[sp.name]; dup {
			v.add(sp.field+".name", "%q is also the name of agent.mcps[%d]; set distinct names", sp.name, j)
		} else {
			names[sp.name] = i
		}
		p.servers = append(p.servers, sp)
	}
}

// durationValue is an optional request duration, pre-checked.
type durationValue struct {
	field string
	d     time.Duration
	valid bool
}

func validateMessage(v *violations, f string, m *agentdv1.Message) {
	switch m.GetRole() {
	case agentdv1.Role_ROLE_USER, agentdv1.Role_ROLE_ASSISTANT, agentdv1.Role_ROLE_TOOL:
	default:
		v.add(f+".role", "must be USER, ASSISTANT or TOOL")
	}
	if len(m.GetParts()) == 0 {
		v.add(f+".parts", "needs at least one part")
	}
	for j, part := range m.GetParts() {
		pf := fmt.Sprintf("%s.parts[%d]", f, j)
		switch k := part.GetKind().(type) {
		case nil:
			v.add(pf, "is empty")
		case *agentdv1.Part_ToolCall:
			if m.GetRole() != agentdv1.Role_ROLE_ASSISTANT {
				v.add(pf, "tool_call parts belong to ASSISTANT messages")
			}
			if k.ToolCall.GetId() == "" || k.ToolCall.GetName() == "" {
				v.add(pf+".tool_call", "needs id and name")
			}
		case *agentdv1.Part_ToolResult:
			if m.GetRole() != agentdv1.Role_ROLE_TOOL {
				v.add(pf, "tool_result parts belong to TOOL messages")
			}
			if k.ToolResult.GetToolCallId() == "" {
				v.add(pf+".tool_result.tool_call_id", "is required")
			}
		}
	}
}

// planServer validates one declaration and names it (R-D2, R-D3, R-D6):
// what its transport needs, then what every server may set. Secrets are
// never echoed: problems name fields, not values.
func (s *Service) planServer(v *violations, f string, decl *agentdv1.MCPServer) *serverPlan {
	sp := &serverPlan{decl: decl, field: f, name: decl.GetName(), readTimeout: defaultReadTimeout}
	switch decl.GetTransport().(type) {
	case *agentdv1.MCPServer_Url:
		sp.planURL(v)
	case *agentdv1.MCPServer_Ref:
		if reg := s.registered[decl.GetRef()]; reg != nil {
			sp.planRegisteredURL(v, reg)
		} else {
			sp.planStdio(v)
		}
	case *agentdv1.MCPServer_Command:
		sp.planStdio(v)
	default:
		if sp.name == "" {
			sp.name = defaultUnnamedServer
		}
		v.add(f, "MCP server %q needs a url, a command or a ref; it sets only %s", sp.name, setFields(decl))
	}
	sp.planReadTimeout(v)
	for j, name := range decl.GetAllowedTools() {
		if name == "" {
			v.add(fmt.Sprintf("%s.allowed_tools[%d]", f, j), "must not be empty")
		}
	}
	validateApprovalPolicy(v, f+".require_approval", decl.GetRequireApproval())
	validateSampling(v, f+".sampling", decl.GetSampling())
	return sp
}

// planURL validates a url server: an http(s) server, or an OpenAI
// connector (mcp://), named after its host by default.
func (sp *serverPlan) planURL(v *violations) {
	f, decl := sp.field, sp.decl
	u, err := url.Parse(decl.GetUrl())
	switch {
	case err != nil || u.Host == "":
		v.add(f+".url", "must be an absolute http, https or mcp URL")
	case u.Scheme == connectorScheme:
		sp.transport = agentdv1.Transport_TRANSPORT_CONNECTOR
	case u.Scheme == "http" || u.Scheme == "https":
		sp.transport = agentdv1.Transport_TRANSPORT_HTTP
	default:
		v.add(f+".url", "must be an http, https or mcp URL")
	}
	if sp.name == "" {
		sp.name = defaultUnnamedServer
		if err == nil && u.Hostname() != "" {
			sp.name = u.Hostname() // never the path or query: they often carry keys
		}
	}
	for _, only := range []struct {
		set  bool
		name string
	}{{len(decl.GetArgs()) > 0, "args"}, {len(decl.GetEnv()) > 0, "env"}, {len(decl.GetUnsetEnv()) > 0, "unset_env"}} {
		if only.set {
			v.add(f+"."+only.name, "applies to command servers only")
		}
	}
	if w := decl.GetMaxReconnectionWait(); w != nil {
		if d := w.AsDuration(); w.CheckValid() != nil || d <= 0 || d > maxReconnectionWait {
			v.add(f+".max_reconnection_wait", "must be positive and at most %s", maxReconnectionWait)
		}
	}
	if decl.GetOauth() != nil && sp.transport == agentdv1.Transport_TRANSPORT_CONNECTOR {
		v.add(f+".oauth", "applies to http and https servers only; the provider authorizes its connectors")
	}
	validateOAuth(v, f, decl)
}

// planRegisteredURL resolves a ref: to the registered url server reg. The
// request names it and may set what shapes its use (name, read_timeout,
// max_reconnection_wait, allowed_tools, require_approval); where it is
// and how agentd authenticates (its url, headers, authorization, oauth)
// are the registration's, which the request cannot replace.
func (sp *serverPlan) planRegisteredURL(v *violations, reg *agentdv1.MCPServer) {
	f, decl := sp.field, sp.decl
	sp.transport, sp.ref = agentdv1.Transport_TRANSPORT_HTTP, decl.GetRef()
	var set []string
	for _, o := range []struct {
		set  bool
		name string
	}{
		{decl.GetAuthorization() != "", "authorization"}, {len(decl.GetHeaders()) > 0, "headers"}, {decl.GetOauth() != nil, "oauth"},
		{len(decl.GetArgs()) > 0, "args"}, {len(decl.GetEnv()) > 0, "env"}, {len(decl.GetUnsetEnv()) > 0, "unset_env"},
	} {
		if o.set {
			set = append(set, o.name)
		}
	}
	if len(set) > 0 {
		v.add(f, "%q is a url server registered under bridge.servers, whose url, headers, authorization and oauth are its registration's; beside ref: a request may set name, read_timeout, max_reconnection_wait, allowed_tools and require_approval, not %s",
			sp.decl.GetRef(), sentence(set))
	}
	if w := decl.GetMaxReconnectionWait(); w != nil {
		if d := w.AsDuration(); w.CheckValid() != nil || d <= 0 || d > maxReconnectionWait {
			v.add(f+".max_reconnection_wait", "must be positive and at most %s", maxReconnectionWait)
		}
	}
	if sp.name == "" {
		sp.name = sp.ref
	}
	resolved := proto.CloneOf(reg)
	resolved.Name, resolved.AllowedTools, resolved.RequireApproval = decl.GetName(), decl.GetAllowedTools(), decl.GetRequireApproval()
	if decl.GetReadTimeout() != nil {
		resolved.ReadTimeout = decl.GetReadTimeout()
	}
	if decl.GetMaxReconnectionWait() != nil {
		resolved.MaxReconnectionWait = decl.GetMaxReconnectionWait()
	}
	sp.decl = resolved
}

// planStdio validates a command or ref server, named after its command's
// base name or its ref by default.
func (sp *serverPlan) planStdio(v *violations) {
	f, decl := sp.field, sp.decl
	sp.transport = agentdv1.Transport_TRANSPORT_STDIO
	if decl.GetAuthorization() != "" || len(decl.GetHeaders()) > 0 || decl.GetMaxReconnectionWait() != nil || decl.GetOauth() != nil {
		v.add(f, "authorization, headers, max_reconnection_wait and oauth apply to url servers only")
	}
	if cmd := decl.GetCommand(); cmd != "" || decl.GetRef() != "" {
		if sp.name == "" {
			if cmd != "" {
				sp.name = "command: " + filepath.Base(cmd)
			} else {
				sp.name = decl.GetRef()
			}
		}
	} else {
		v.add(f, "command and ref must not be empty")
	}
	if decl.GetRef() != "" && (len(decl.GetArgs()) > 0 || len(decl.GetEnv()) > 0 || len(decl.GetUnsetEnv()) > 0) {
		v.add(f, "a ref server takes its args and env from its registration; args, env and unset_env apply to command servers")
	}
	for _, name := range decl.GetUnsetEnv() {
		if _, both := decl.GetEnv()[name]; both {
			v.add(f+".unset_env", "%s is both set in env and unset", name)
		}
	}
	for name := range decl.GetEnv() {
		if name == "" || strings.ContainsAny(name, "=\x00") {
			v.add(f+".env", "variable names must be non-empty and contain no '=' or NUL")
		}
	}
}

// planReadTimeout validates read_timeout, which every server may set.
func (sp *serverPlan) planReadTimeout(v *violations) {
	rt := sp.decl.GetReadTimeout()
	if rt == nil {
		return
	}
	if d := rt.AsDuration(); rt.CheckValid() != nil || d <= 0 || d > maxReadTimeout {
		v.add(sp.field+".read_timeout", "must be a positive duration of at most %s", maxReadTimeout)
	} else {
		sp.readTimeout = d
	}
}

// validateApprovalPolicy validates a server's require_approval, at field
// f: a known mode, or always and never lists, not both.
func validateApprovalPolicy(v *violations, f string, pol *agentdv1.ApprovalPolicy) {
	if pol == nil {
		return
	}
	if _, ok := agentdv1.ApprovalMode_name[int32(pol.GetMode())]; !ok {
		v.add(f+".mode", "unknown mode %d", pol.GetMode())
	}
	if pol.GetMode() != agentdv1.ApprovalMode_APPROVAL_MODE_UNSPECIFIED && (pol.GetAlways() != nil || pol.GetNever() != nil) {
		v.add(f, "mode cannot be combined with always or never")
	}
}

// validateSampling validates a server's sampling policy (X-M5), at
// field f: a known mode, and a cap that is not negative.
func validateSampling(v *violations, f string, s *agentdv1.Sampling) {
	if _, ok := agentdv1.SamplingMode_name[int32(s.GetMode())]; !ok {
		v.add(f+".mode", "unknown mode %d", s.GetMode())
	}
	if s.GetMaxTokens() < 0 {
		v.add(f+".max_tokens", "must not be negative")
	}
}

// checkCommand refuses what the bridge's rules for the tenant would
// refuse of a command server (its command, the variables of its env that
// steer programs), so that it is reported with the request's other
// problems, not when the session opens.
func (p *plan) checkCommand(denied *violations, sp *serverPlan) {
	c, ok := sp.decl.GetTransport().(*agentdv1.MCPServer_Command)
	rules := p.tenant.Rules
	if !ok || rules == nil {
		return
	}
	if why := rules.CommandRefusal(c.Command); why != "" && c.Command != "" {
		denied.add(sp.field+".command", "%s", why)
	}
	for _, why := range rules.EnvRefusals(sp.decl.GetEnv()) {
		denied.add(sp.field+".env", "%s", why)
	}
}

// checkRef refuses a ref: to a registered server that the tenant may not
// use (tenants.<name>.servers), as the bridge would.
func (p *plan) checkRef(denied *violations, sp *serverPlan) {
	ref := cmp.Or(sp.ref, sp.decl.GetRef())
	if ref == "" || p.tenant.Servers == nil || slices.Contains(p.tenant.Servers, ref) {
		return
	}
	denied.add(sp.field+".ref", "the registered server %q is not among the servers %s lets this tenant use", ref, p.tenant.ServersSetting)
}

// checkAddresses refuses the url servers placed in the bridge whose
// address the tenant's rules would refuse (allow_private_networks). A
// server the provider runs is reached from its network, not agentd's.
func (p *plan) checkAddresses(denied *violations) {
	rules := p.tenant.Rules
	if rules == nil {
		return
	}
	for _, sp := range p.bridged() {
		u, ok := sp.decl.GetTransport().(*agentdv1.MCPServer_Url)
		if !ok || sp.transport != agentdv1.Transport_TRANSPORT_HTTP {
			continue
		}
		if parsed, err := url.Parse(u.Url); err == nil {
			if why := rules.AddressRefusal(parsed.Hostname()); why != "" {
				if sp.ref != "" {
					denied.add(sp.field+".ref", "the registered server %q: %s", sp.ref, why)
				} else {
					denied.add(sp.field+".url", "%s", why)
				}
			}
		}
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

// sentence joins names as "a", "a and b", "a, b and c".
func sentence(names []string) string {
	switch len(names) {
	case 0:
		return ""
	case 1:
		return names[0]
	}
	return strings.Join(names[:len(names)-1], ", ") + " and " + names[len(names)-1]
}

// options is Agent.provider_options as a JSON object for the adapters
// (providers.Request.Options), converted afresh for each turn: a
// generation that waits on its client holds only the request's own form
// (issue 15), and no turn sees another's changes.
func (p *plan) options() map[string]any {
	if o := p.agent.GetProviderOptions(); o != nil {
		return o.AsMap()
	}
	return nil
}
