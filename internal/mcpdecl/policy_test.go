package mcpdecl

import (
	"slices"
	"strings"
	"testing"

	agentdv1 "github.com/agentd/agentd/gen/go/agentd/v1"
	"github.com/agentd/agentd/internal/fault"
)

// FuzzApprovalPolicy proves that Gates follows the ApprovalPolicy
// doc (NEVER gates nothing, ALWAYS everything, otherwise the tools listed
// under always plus, when never is present, every tool it does not
// list), that CouldGate says exactly whether some tool is gated,
// and that validation refuses a mode combined with lists and an unknown
// mode. always and never are comma-separated tool names.
func FuzzApprovalPolicy(f *testing.F) {
	for _, seed := range []struct {
		mode                 int32
		hasAlways            bool
		always               string
		hasNever             bool
		never, tool          string
		wantGates, wantCould bool
	}{
		{0, false, "", false, "", "read", false, false},
		{1, false, "", false, "", "read", false, false},
		{2, false, "", false, "", "read", true, true},
		{0, true, "", false, "", "read", false, false},
		{0, true, "delete,write", false, "", "delete", true, true},
		{0, true, "delete,write", false, "", "read", false, true},
		{0, false, "", true, "", "read", true, true},
		{0, false, "", true, "read,list", "read", false, true},
		{0, false, "", true, "read,list", "delete", true, true},
		{0, true, "read", true, "read", "read", true, true},
		{0, true, "", true, "", "", true, true},
		{0, true, ",", false, "", "", true, true},
		{1, true, "read", false, "", "read", false, false},
		{2, false, "", true, "read", "read", true, true},
		{7, true, "read", false, "", "read", true, true},
		{-3, false, "", true, "x", "y", true, true},
	} {
		p := approvalPolicy(seed.mode, seed.hasAlways, seed.always, seed.hasNever, seed.never)
		if got := Gates(p, seed.tool); got != seed.wantGates {
			f.Fatalf("Gates(%v, %q) = %v, want %v", p, seed.tool, got, seed.wantGates)
		}
		if got := CouldGate(p); got != seed.wantCould {
			f.Fatalf("CouldGate(%v) = %v, want %v", p, got, seed.wantCould)
		}
		f.Add(seed.mode, seed.hasAlways, seed.always, seed.hasNever, seed.never, seed.tool)
	}
	f.Fuzz(func(t *testing.T, mode int32, hasAlways bool, always string, hasNever bool, never, tool string) {
		if Gates(nil, tool) || CouldGate(nil) {
			t.Fatal("no policy gates a tool")
		}
		p := approvalPolicy(mode, hasAlways, always, hasNever, never)
		alwaysList, neverList := p.GetAlways().GetToolNames(), p.GetNever().GetToolNames()
		var want bool
		switch p.GetMode() {
		case agentdv1.ApprovalMode_APPROVAL_MODE_ALWAYS:
			want = true
		case agentdv1.ApprovalMode_APPROVAL_MODE_NEVER:
			want = false
		default:
			want = slices.Contains(alwaysList, tool) || hasNever && !slices.Contains(neverList, tool)
		}
		if got := Gates(p, tool); got != want {
			t.Fatalf("Gates(%v, %q) = %v, want %v", p, tool, got, want)
		}

		// Some tool is gated if any is: the tool, one listed, or one
		// longer than every never name (so not among them).
		longest := 0
		for _, n := range neverList {
			longest = max(longest, len(n))
		}
		candidates := append([]string{tool, "", strings.Repeat("x", longest+1)}, alwaysList...)
		candidates = append(candidates, neverList...)
		gatesSome := slices.ContainsFunc(candidates, func(name string) bool { return Gates(p, name) })
		if could := CouldGate(p); could != gatesSome {
			t.Fatalf("CouldGate(%v) = %v, but some tool gated: %v", p, could, gatesSome)
		}

		_, v := Check(&agentdv1.MCPServer{Name: "s", Transport: &agentdv1.MCPServer_Ref{Ref: "demo"}, RequireApproval: p})
		_, known := agentdv1.ApprovalMode_name[mode]
		combined := mode != 0 && (hasAlways || hasNever)
		if got := hasViolation(v, "require_approval.mode"); got == known {
			t.Fatalf("mode %d: violations %v; want one on the mode: %v", mode, v, !known)
		}
		if got := hasViolation(v, "require_approval"); got != combined {
			t.Fatalf("mode %d, always %v, never %v: violations %v; want one on the combination: %v", mode, hasAlways, hasNever, v, combined)
		}
	})
}

// approvalPolicy builds a policy from comma-separated lists.
func approvalPolicy(mode int32, hasAlways bool, always string, hasNever bool, never string) *agentdv1.ApprovalPolicy {
	list := func(s string) []string {
		if s == "" {
			return nil
		}
		return strings.Split(s, ",")
	}
	p := &agentdv1.ApprovalPolicy{Mode: agentdv1.ApprovalMode(mode)}
	if hasAlways {
		p.Always = &agentdv1.ToolNames{ToolNames: list(always)}
	}
	if hasNever {
		p.Never = &agentdv1.ToolNames{ToolNames: list(never)}
	}
	return p
}

func hasViolation(p Problems, field string) bool {
	return slices.ContainsFunc(p, func(x fault.Violation) bool { return x.Field == field })
}
