package server

import (
	agentdv1 "github.com/agentd/agentd/gen/go/agentd/v1"

	"cmp"
	"fmt"
	"net/url"
	"slices"
	"strings"
	"time"

	"google.golang.org/protobuf/proto"

	"github.com/agentd/agentd/internal/fault"
	"github.com/agentd/agentd/internal/mcpdecl"
	"github.com/agentd/agentd/internal/netaddr"
	"github.com/agentd/agentd/internal/output"
	"github.com/agentd/agentd/providers"
)

// plan is a validated request, resolved: which provider serves it, where
// each MCP server runs, and the limits in effect. Building a plan performs
// no I/O.
type plan struct {
	tenant        *Tenant
	provider      providers.Provider
	agent         *agentdv1.Agent
	messages      []*agentdv1.Message
	servers       []*serverPlan // declaration order
	limits        limitSet
	answerTimeout time.Duration
	output        *output.Spec // the agent's output schema; nil for none
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

// durationValue is an optional request duration, pre-checked.
type durationValue struct {
	field string
	d     time.Duration
	valid bool
}

// place decides where each server runs: in the provider or in agentd's
// bridge, by the agent's mcp_strategy, what the provider can serve, and
// what only agentd can do for a server (ask approvals, be its OAuth
// client, answer its samples). mcpsField is the path of the request's
// mcps list.
func (p *plan) place(v *violations, agentTools map[string]int, mcpsField string) {
	caps := p.provider.Capabilities()
	providerSide := 0
	for _, sp := range p.servers {
		if sp.transport == agentdv1.Transport_TRANSPORT_UNSPECIFIED {
			continue
		}
		f := p.factsOf(sp, caps, agentTools)
		sp.placement = p.decide(v, sp, f, caps)
		if sp.placement == agentdv1.Placement_PLACEMENT_PROVIDER {
			providerSide++
		} else {
			p.checkConnector(v, sp, f.why)
		}
	}
	if limit := caps.MaxProviderServers; limit > 0 && providerSide > limit {
		v.add(mcpsField, "%s serves at most %d MCP servers per request, and %d would run there; use mcp_strategy CLIENT for some", p.agent.GetProvider(), limit, providerSide)
	}
}

// placeFacts are what decides where one server runs.
type placeFacts struct {
	capable bool   // the provider serves servers of its transport
	why     string // why the provider cannot serve it after all; "" when nothing is known against it
	// What keeps it in agentd's bridge: approvals its policy could ask,
	// agentd as its OAuth client (agentd holds its tokens), samples (only
	// agentd answers them), and the names requires_approval gates that it
	// may offer.
	gated, oauth, samples bool
	gatedNames            []string
}

// keptInBridge reports whether only agentd's bridge can run the server.
func (f placeFacts) keptInBridge() bool {
	return f.gated || f.oauth || f.samples || len(f.gatedNames) > 0
}

// factsOf finds what decides where sp runs.
func (p *plan) factsOf(sp *serverPlan, caps providers.Capabilities, agentTools map[string]int) placeFacts {
	var f placeFacts
	switch sp.transport {
	case agentdv1.Transport_TRANSPORT_HTTP:
		if f.capable = caps.ServesURLServers; f.capable {
			f.why = unreachable(sp.decl.GetUrl())
		}
	case agentdv1.Transport_TRANSPORT_CONNECTOR:
		f.capable = caps.ServesConnectors
	}
	if sp.ref != "" {
		// Its URL and secrets are the configuration's, for agentd's
		// bridge only.
		f.capable, f.why = false, "it is registered in agentd's configuration (bridge.servers), which keeps its URL and secrets in agentd's bridge"
	}
	if f.capable && f.why == "" && caps.ServerProblem != nil {
		f.why = caps.ServerProblem(sp.decl)
	}
	if f.why != "" {
		f.capable = false
	}
	f.gated = mcpdecl.CouldGate(sp.decl.GetRequireApproval())
	f.oauth = sp.decl.GetOauth() != nil
	f.samples = mcpdecl.SamplingMode(sp.decl) != agentdv1.SamplingMode_SAMPLING_MODE_DENY
	f.gatedNames = requiresApprovalServedBy(p.agent, sp.decl, agentTools)
	return f
}

// decide places sp by the agent's mcp_strategy: CLIENT runs every server
// in agentd's bridge; AUTO hands the provider what it can serve and only
// agentd need not run; SERVER requires the provider to serve each, and
// says why where it cannot.
func (p *plan) decide(v *violations, sp *serverPlan, f placeFacts, caps providers.Capabilities) agentdv1.Placement {
	switch p.agent.GetMcpStrategy() {
	case agentdv1.MCPStrategy_MCP_STRATEGY_CLIENT:
	case agentdv1.MCPStrategy_MCP_STRATEGY_SERVER:
		if !p.refuseProviderSide(v, sp, f, caps) {
			return agentdv1.Placement_PLACEMENT_PROVIDER
		}
	default: // AUTO
		if f.capable && !f.keptInBridge() {
			return agentdv1.Placement_PLACEMENT_PROVIDER
		}
	}
	return agentdv1.Placement_PLACEMENT_BRIDGE
}

// refuseProviderSide says, in v, why mcp_strategy SERVER cannot hand sp
// to the provider; false when it can.
func (p *plan) refuseProviderSide(v *violations, sp *serverPlan, f placeFacts, caps providers.Capabilities) bool {
	provider := p.agent.GetProvider()
	switch {
	case f.why != "":
		v.add(sp.field, "%s cannot serve the MCP server %q itself: %s; but mcp_strategy SERVER requires it to. Use mcp_strategy AUTO to run it in agentd's bridge",
			provider, sp.name, f.why)
	case !f.capable:
		served := "none"
		if caps.ServesURLServers {
			served = "url servers"
		}
		v.add(sp.field, "%s cannot serve the %s MCP server %q itself, but mcp_strategy SERVER requires it to; servers it can serve: %s. Use mcp_strategy AUTO to run the rest in agentd's bridge",
			provider, transportWord(sp.transport), sp.name, served)
	case f.oauth:
		v.add(sp.field+".oauth", "agentd is the %q MCP server's OAuth client and presents its tokens only from its bridge, but mcp_strategy SERVER hands it to %s; use mcp_strategy AUTO or CLIENT, or give a token in authorization instead",
			sp.name, provider)
	case f.samples:
		v.add(sp.field+".sampling", "the %q MCP server may sample agentd's model, which only agentd's bridge can let it do, but mcp_strategy SERVER hands it to %s; use mcp_strategy AUTO or CLIENT, or set sampling.mode to DENY",
			sp.name, provider)
	case f.gated:
		v.add(sp.field+".require_approval", "the %q MCP server's tool calls need approval, which is asked only when agentd runs the server in its bridge, but mcp_strategy SERVER hands it to %s; use mcp_strategy AUTO or CLIENT, or set require_approval to NEVER",
			sp.name, provider)
	case len(f.gatedNames) > 0:
		remedy := "list the tools it may offer in allowed_tools"
		if len(sp.decl.GetAllowedTools()) > 0 {
			remedy = "remove " + sentence(f.gatedNames) + " from its allowed_tools"
		}
		v.add(sp.field, "requires_approval names %s, which the %q MCP server may offer, and approval is asked only when agentd runs the server in its bridge, but mcp_strategy SERVER hands it to %s; %s, or use mcp_strategy AUTO or CLIENT",
			sentence(f.gatedNames), sp.name, provider, remedy)
	default:
		return false
	}
	return true
}

// checkConnector refuses a connector (mcp://) left in agentd's bridge,
// which cannot reach it: why says why its provider cannot serve it
// (mcp_strategy SERVER said so already), else no provider of this kind
// can.
func (p *plan) checkConnector(v *violations, sp *serverPlan, why string) {
	provider := p.agent.GetProvider()
	switch {
	case sp.transport != agentdv1.Transport_TRANSPORT_CONNECTOR:
	case why == "":
		v.add(sp.field+".url", "mcp:// URLs name OpenAI connectors, which only a provider that serves connectors can reach; %s runs this server in agentd's bridge", provider)
	case p.agent.GetMcpStrategy() != agentdv1.MCPStrategy_MCP_STRATEGY_SERVER:
		v.add(sp.field+".url", "%s cannot serve the connector %q: %s", provider, sp.name, why)
	}
}

// bridged returns the servers that run in the bridge.
func (p *plan) bridged() []*serverPlan {
	var out []*serverPlan
	for _, sp := range p.servers {
		if sp.placement == agentdv1.Placement_PLACEMENT_BRIDGE {
			out = append(out, sp)
		}
	}
	return out
}

// providerServers returns the declarations the provider serves itself.
func (p *plan) providerServers() []*agentdv1.MCPServer {
	var out []*agentdv1.MCPServer
	for _, sp := range p.servers {
		if sp.placement == agentdv1.Placement_PLACEMENT_PROVIDER {
			d := sp.decl
			if d.GetName() == "" {
				d = cloneWithName(d, sp.name)
			}
			out = append(out, d)
		}
	}
	return out
}

// placements lists where each server runs, in declaration order.
func (p *plan) placements(only agentdv1.Placement) []*agentdv1.ServerPlacement {
	var out []*agentdv1.ServerPlacement
	for _, sp := range p.servers {
		if only != agentdv1.Placement_PLACEMENT_UNSPECIFIED && sp.placement != only {
			continue
		}
		out = append(out, &agentdv1.ServerPlacement{Name: sp.name, Placement: sp.placement, Transport: sp.transport})
	}
	return out
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

// options is Agent.provider_options as a JSON object for the adapters
// (providers.Request.Options), converted afresh for each turn: a
// generation that waits on its client holds only the request's own form,
// and no turn sees another's changes.
func (p *plan) options() map[string]any {
	if o := p.agent.GetProviderOptions(); o != nil {
		return o.AsMap()
	}
	return nil
}

// server returns the declared server named name; nil if none.
func (p *plan) server(name string) *serverPlan {
	for _, sp := range p.servers {
		if sp.name == name {
			return sp
		}
	}
	return nil
}

// unreachable says why a provider's cloud cannot reach a url server: a
// host that netaddr.PrivateHost names (localhost, or a loopback, private,
// shared, link-local or unspecified address) only resolves on agentd's
// side. "" means nothing is known against it. The text names
// neither the host nor the path.
func unreachable(raw string) string {
	u, err := url.Parse(raw)
	if err != nil {
		return "" // the bridge reports a malformed URL
	}
	if netaddr.PrivateHost(u.Hostname()) {
		return "its URL names localhost or a loopback, private, shared or link-local address, which only agentd's network can reach"
	}
	return ""
}

func transportWord(t agentdv1.Transport) string {
	switch t {
	case agentdv1.Transport_TRANSPORT_STDIO:
		return "command"
	case agentdv1.Transport_TRANSPORT_CONNECTOR:
		return "connector"
	}
	return "url"
}

// cloneWithName returns a copy of decl with its name set.
func cloneWithName(decl *agentdv1.MCPServer, name string) *agentdv1.MCPServer {
	c := proto.Clone(decl).(*agentdv1.MCPServer)
	c.Name = name
	return c
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

// requiresApprovalServedBy lists the requires_approval names that this
// server may offer: with allowed_tools, those it allows; without, every
// name that is not one of the agent's own tools, since the server's tools
// are unknown until agentd connects to it.
func requiresApprovalServedBy(agent *agentdv1.Agent, decl *agentdv1.MCPServer, agentTools map[string]int) []string {
	var names []string
	for _, name := range agent.GetRequiresApproval() {
		if allowed := decl.GetAllowedTools(); len(allowed) > 0 {
			if slices.Contains(allowed, name) {
				names = append(names, name)
			}
		} else if _, own := agentTools[name]; !own {
			names = append(names, name)
		}
	}
	return names
}
