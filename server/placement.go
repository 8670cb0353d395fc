package server

import (
	"net/url"

	agentdv1 "github.com/agentd/agentd/gen/go/agentd/v1"
	"github.com/agentd/agentd/internal/netaddr"
)

// place decides where each server runs (R-S1–R-S4, R-A2, R-A3). mcpsField
// is the path of the request's mcps list.
func (p *plan) place(v *violations, agentTools map[string]int, mcpsField string) {
	caps := p.provider.Capabilities()
	strategy := p.agent.GetMcpStrategy()
	served := "none"
	if caps.ServesURLServers {
		served = "url servers"
	}
	provider := p.agent.GetProvider()
	providerSide := 0
	for _, sp := range p.servers {
		if sp.transport == agentdv1.Transport_TRANSPORT_UNSPECIFIED {
			continue
		}
		capable, why := false, ""
		switch sp.transport {
		case agentdv1.Transport_TRANSPORT_HTTP:
			capable = caps.ServesURLServers
			if capable {
				why = unreachable(sp.decl.GetUrl())
			}
		case agentdv1.Transport_TRANSPORT_CONNECTOR:
			capable = caps.ServesConnectors
		}
		if sp.ref != "" {
			// Its URL and secrets are the configuration's, for agentd's
			// bridge only.
			capable, why = false, "it is registered in agentd's configuration (bridge.servers), which keeps its URL and secrets in agentd's bridge"
		}
		if capable && why == "" && caps.ServerProblem != nil {
			why = caps.ServerProblem(sp.decl)
		}
		if why != "" {
			capable = false
		}
		gatedByPolicy := policyCouldGate(sp.decl.GetRequireApproval())
		oauth := sp.decl.GetOauth() != nil // agentd holds its tokens (X-M1)
		// Only agentd answers its samples (X-M5).
		samples := samplingMode(sp.decl) != agentdv1.SamplingMode_SAMPLING_MODE_DENY
		gatedNames := requiresApprovalServedBy(p.agent, sp.decl, agentTools)
		sp.placement = agentdv1.Placement_PLACEMENT_BRIDGE
		switch strategy {
		case agentdv1.MCPStrategy_MCP_STRATEGY_CLIENT:
		case agentdv1.MCPStrategy_MCP_STRATEGY_SERVER:
			switch {
			case why != "":
				v.add(sp.field, "%s cannot serve the MCP server %q itself: %s; but mcp_strategy SERVER requires it to. Use mcp_strategy AUTO to run it in agentd's bridge",
					provider, sp.name, why)
			case !capable:
				v.add(sp.field, "%s cannot serve the %s MCP server %q itself, but mcp_strategy SERVER requires it to; servers it can serve: %s. Use mcp_strategy AUTO to run the rest in agentd's bridge",
					provider, transportWord(sp.transport), sp.name, served)
			case oauth:
				v.add(sp.field+".oauth", "agentd is the %q MCP server's OAuth client and presents its tokens only from its bridge, but mcp_strategy SERVER hands it to %s; use mcp_strategy AUTO or CLIENT, or give a token in authorization instead",
					sp.name, provider)
			case samples:
				v.add(sp.field+".sampling", "the %q MCP server may sample agentd's model, which only agentd's bridge can let it do, but mcp_strategy SERVER hands it to %s; use mcp_strategy AUTO or CLIENT, or set sampling.mode to DENY",
					sp.name, provider)
			case gatedByPolicy:
				v.add(sp.field+".require_approval", "the %q MCP server's tool calls need approval, which is asked only when agentd runs the server in its bridge, but mcp_strategy SERVER hands it to %s; use mcp_strategy AUTO or CLIENT, or set require_approval to NEVER",
					sp.name, provider)
			case len(gatedNames) > 0:
				remedy := "list the tools it may offer in allowed_tools"
				if len(sp.decl.GetAllowedTools()) > 0 {
					remedy = "remove " + sentence(gatedNames) + " from its allowed_tools"
				}
				v.add(sp.field, "requires_approval names %s, which the %q MCP server may offer, and approval is asked only when agentd runs the server in its bridge, but mcp_strategy SERVER hands it to %s; %s, or use mcp_strategy AUTO or CLIENT",
					sentence(gatedNames), sp.name, provider, remedy)
			default:
				sp.placement = agentdv1.Placement_PLACEMENT_PROVIDER
			}
		default: // AUTO
			if capable && !gatedByPolicy && !oauth && !samples && len(gatedNames) == 0 {
				sp.placement = agentdv1.Placement_PLACEMENT_PROVIDER
			}
		}
		if sp.placement == agentdv1.Placement_PLACEMENT_PROVIDER {
			providerSide++
		} else if sp.transport == agentdv1.Transport_TRANSPORT_CONNECTOR && why != "" {
			if strategy != agentdv1.MCPStrategy_MCP_STRATEGY_SERVER { // SERVER said so above
				v.add(sp.field+".url", "%s cannot serve the connector %q: %s", provider, sp.name, why)
			}
		} else if sp.transport == agentdv1.Transport_TRANSPORT_CONNECTOR {
			v.add(sp.field+".url", "mcp:// URLs name OpenAI connectors, which only a provider that serves connectors can reach; %s runs this server in agentd's bridge", provider)
		}
	}
	if limit := caps.MaxProviderServers; limit > 0 && providerSide > limit {
		v.add(mcpsField, "%s serves at most %d MCP servers per request, and %d would run there; use mcp_strategy CLIENT for some", provider, limit, providerSide)
	}
}

// unreachable says why a provider's cloud cannot reach a url server: a
// host that netaddr.PrivateHost names (localhost, or a loopback, private,
// shared, link-local or unspecified address) only resolves on agentd's
// side (X-H5). "" means nothing is known against it. The text names
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
