package server

import (
	agentdv1 "github.com/agentd/agentd/gen/go/agentd/v1"

	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"io"
	"slices"
	"strings"

	"github.com/agentd/agentd/internal/mcpdecl"
	"github.com/agentd/agentd/internal/toolerror"
)

// declinedOutput is what the model gets for a call the user declined,
// and why, when the decision said.
func declinedOutput(reason string) string {
	if reason == "" {
		return toolerror.JSON("declined by user")
	}
	return toolerror.JSON("declined by user: " + reason)
}

// gated reports whether a call to name waits for approval:
// requires_approval names it (by the name offered to the model or, for a
// prefixed MCP tool, its server's name for it), or its server's policy
// gates it.
func (g *generation) gated(name string, owner *toolOwner) bool {
	names := g.plan.agent.GetRequiresApproval()
	if slices.Contains(names, name) || slices.Contains(names, owner.toolName(name)) {
		return true
	}
	return owner.origin == agentdv1.ToolOrigin_TOOL_ORIGIN_MCP && mcpdecl.Gates(owner.server.decl.GetRequireApproval(), owner.serverTool)
}

// approvalDigest binds an approval to (server, tool, arguments): the
// arguments are canonicalized, so key order and spacing do not matter.
func approvalDigest(server, tool, arguments string) string {
	canonical := arguments
	// Numbers stay as written (UseNumber): as float64, integers beyond 2^53
	// that differ would digest alike.
	dec := json.NewDecoder(strings.NewReader(arguments))
	dec.UseNumber()
	var v any
	if dec.Decode(&v) == nil && !dec.More() {
		if _, err := dec.Token(); errors.Is(err, io.EOF) {
			if b, err := json.Marshal(v); err == nil {
				canonical = string(b)
			}
		}
	}
	sum := sha256.Sum256([]byte(server + "\x00" + tool + "\x00" + canonical))
	return hex.EncodeToString(sum[:])
}
