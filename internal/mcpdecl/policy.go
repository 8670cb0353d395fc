package mcpdecl

import (
	"slices"

	agentdv1 "github.com/agentd/agentd/gen/go/agentd/v1"
)

// CouldGate reports whether an approval policy could gate any tool.
// {always: []} gates nothing.
func CouldGate(p *agentdv1.ApprovalPolicy) bool {
	if gates, decided := byMode(p); decided {
		return gates
	}
	return len(p.GetAlways().GetToolNames()) > 0 || p.GetNever() != nil
}

// byMode is what p decides whatever the tool: decided, with gates, for no
// policy, and for the modes NEVER and ALWAYS; otherwise its lists decide.
func byMode(p *agentdv1.ApprovalPolicy) (gates, decided bool) {
	switch {
	case p == nil:
		return false, true
	case p.GetMode() == agentdv1.ApprovalMode_APPROVAL_MODE_ALWAYS:
		return true, true
	case p.GetMode() == agentdv1.ApprovalMode_APPROVAL_MODE_NEVER:
		return false, true
	}
	return false, false
}

// Gates reports whether p gates the tool: absent or NEVER gates nothing,
// ALWAYS everything, an always list the tools it names, a never list
// every tool it does not name, and both together the always tools plus
// everything outside never.
func Gates(p *agentdv1.ApprovalPolicy, tool string) bool {
	if gates, decided := byMode(p); decided {
		return gates
	}
	if slices.Contains(p.GetAlways().GetToolNames(), tool) {
		return true
	}
	return p.GetNever() != nil && !slices.Contains(p.GetNever().GetToolNames(), tool)
}

// SamplingMode is a server's sampling mode, DENY when unspecified.
func SamplingMode(decl *agentdv1.MCPServer) agentdv1.SamplingMode {
	if m := decl.GetSampling().GetMode(); m != agentdv1.SamplingMode_SAMPLING_MODE_UNSPECIFIED {
		return m
	}
	return agentdv1.SamplingMode_SAMPLING_MODE_DENY
}
