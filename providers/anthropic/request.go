package anthropic

import (
	"cmp"
	"encoding/base64"
	"slices"
	"strconv"
	"strings"

	agentdv1 "github.com/agentd/agentd/gen/go/agentd/v1"
	"github.com/agentd/agentd/internal/fault"
	"github.com/agentd/agentd/providers"
	"github.com/agentd/agentd/providers/internal/httpc"
)

// block is one JSON object of a request: a message, a content block, a
// tool, a server. Maps rather than structs, so that httpc.MergeOptions can
// merge the agent's provider options into the body, and cache breakpoints
// can be placed once the merge shows how many the options took.
type block = map[string]any

const (
	defaultMaxTokens = 4096
	// maxBreakpoints is the API's limit of cache_control marks per request.
	maxBreakpoints = 4
)

// requestBody renders a turn as a Messages API request body.
func requestBody(req *providers.Request) (map[string]any, error) {
	body := map[string]any{"model": req.Model, "stream": true}
	var system block
	if req.Instructions != "" {
		// A list of blocks, not a string, so the system prompt can take a
		// cache breakpoint.
		system = block{"type": "text", "text": req.Instructions}
		body["system"] = []any{system}
	}
	msgs := messages(req.Messages)
	body["messages"] = msgs
	tools := functionTools(req)
	servers, toolsets, err := mcpServers(req.MCPServers)
	if err != nil {
		return nil, err
	}
	tools = append(tools, toolsets...)
	if len(tools) > 0 {
		body["tools"] = tools
	}
	if len(servers) > 0 {
		body["mcp_servers"] = servers
	}
	httpc.MergeOptions(body, req.Options, "tools", "mcp_servers")
	setMaxTokens(body, req.MaxTokens)
	setOutput(body, req.Output)
	if err := checkServerCount(body, len(servers)); err != nil {
		return nil, err
	}
	var lastTool block
	if len(tools) > 0 {
		lastTool = tools[len(tools)-1].(block)
	}
	markBreakpoints(body, lastCacheable(msgs), lastTool, system)
	return body, nil
}

// checkServerCount refuses a body with more servers than the MCP
// connector serves, ours (provider-side) and the options' together.
func checkServerCount(body map[string]any, ours int) error {
	if all, _ := body["mcp_servers"].([]any); len(all) > MaxServers {
		return fault.New(fault.Invalid,
			"anthropic: %d MCP servers in one request (%d provider-side, %d in provider_options.mcp_servers); Anthropic's MCP connector serves at most %d; use mcp_strategy CLIENT for some",
			len(all), ours, len(all)-ours, MaxServers)
	}
	return nil
}

// setMaxTokens sets max_tokens, which the API requires: the request's
// cap, else the options', else defaultMaxTokens.
func setMaxTokens(body map[string]any, capTokens int) {
	if _, ok := body["max_tokens"]; !ok {
		body["max_tokens"] = defaultMaxTokens
	}
	if capTokens > 0 {
		body["max_tokens"] = capTokens
	}
}

// markBreakpoints puts cache breakpoints on the blocks given, in order of
// priority, as far as the limit allows once the breakpoints of the
// provider options are counted. The options' own entries are never
// marked: they pass untouched.
func markBreakpoints(body map[string]any, blocks ...block) {
	budget := maxBreakpoints - optionBreakpoints(body)
	for _, b := range blocks {
		if b != nil && budget > 0 {
			b["cache_control"] = block{"type": "ephemeral"}
			budget--
		}
	}
}

// optionBreakpoints counts the breakpoints of the provider options' tools
// and system blocks.
func optionBreakpoints(body map[string]any) int {
	n := 0
	for _, key := range []string{"tools", "system"} {
		list, _ := body[key].([]any)
		for _, e := range list {
			if m, ok := e.(map[string]any); ok && m["cache_control"] != nil {
				n++
			}
		}
	}
	return n
}

// lastCacheable is the last block of the last message that can carry a
// breakpoint (thinking blocks cannot).
func lastCacheable(msgs []any) block {
	if len(msgs) == 0 {
		return nil
	}
	content := msgs[len(msgs)-1].(block)["content"].([]any)
	for i := len(content) - 1; i >= 0; i-- {
		b := content[i].(block)
		if t := b["type"]; t != "thinking" && t != "redacted_thinking" {
			return b
		}
	}
	return nil
}

// messages renders the conversation. Tool messages become user messages,
// and consecutive messages of one role are merged, because the API wants
// user and assistant to alternate and all results of one assistant turn
// in a single user message, before any text.
func messages(msgs []*agentdv1.Message) []any {
	turns := alternate(msgs)
	out := make([]any, len(turns))
	for i, t := range turns {
		if t.role == "user" {
			slices.SortStableFunc(t.content, func(a, b any) int {
				return resultRank(a) - resultRank(b)
			})
		}
		out[i] = block{"role": t.role, "content": t.content}
	}
	return out
}

// turn is one message of the request: a role and its content blocks.
type turn struct {
	role    string
	content []any
}

// alternate renders msgs as turns, dropping empty ones and merging
// consecutive ones of one role.
func alternate(msgs []*agentdv1.Message) []*turn {
	var turns []*turn
	for _, m := range msgs {
		role, content := "user", userContent(m)
		if m.GetRole() == agentdv1.Role_ROLE_ASSISTANT {
			role, content = "assistant", assistantContent(m)
		}
		if len(content) == 0 {
			continue // the API refuses empty messages
		}
		if n := len(turns); n > 0 && turns[n-1].role == role {
			turns[n-1].content = append(turns[n-1].content, content...)
			continue
		}
		turns = append(turns, &turn{role: role, content: content})
	}
	return turns
}

func resultRank(b any) int {
	if b.(block)["type"] == "tool_result" {
		return 0
	}
	return 1
}

// userContent renders the parts of a user or tool message.
func userContent(m *agentdv1.Message) []any {
	var out []any
	for _, p := range m.GetParts() {
		switch k := p.GetKind().(type) {
		case *agentdv1.Part_Text:
			if k.Text != "" { // the API refuses empty text blocks
				out = append(out, textBlock(k.Text))
			}
		case *agentdv1.Part_Media:
			out = append(out, mediaBlock(k.Media))
		case *agentdv1.Part_ToolResult:
			out = append(out, toolResult(k.ToolResult))
		}
	}
	return out
}

// assistantContent renders the parts of an assistant message.
func assistantContent(m *agentdv1.Message) []any {
	var out []any
	for _, p := range m.GetParts() {
		switch k := p.GetKind().(type) {
		case *agentdv1.Part_Reasoning:
			if b := thinkingBlock(k.Reasoning); b != nil {
				out = append(out, b)
			}
		case *agentdv1.Part_Text:
			if k.Text != "" {
				out = append(out, textBlock(k.Text))
			}
		case *agentdv1.Part_ToolCall:
			c := k.ToolCall
			out = append(out, block{"type": "tool_use", "id": c.GetId(), "name": c.GetName(), "input": httpc.ArgumentsObject(c.GetArguments())})
		case *agentdv1.Part_ProviderToolCall:
			out = append(out, connectorBlocks(k.ProviderToolCall)...)
		}
	}
	return out
}

// thinkingBlock renders reasoning as a thinking or redacted_thinking
// block; nil for any but Anthropic's own, signed: the API verifies the
// signature and refuses a block without one.
func thinkingBlock(r *agentdv1.Reasoning) block {
	switch {
	case r.GetProvider() != name || r.GetSignature() == "":
		return nil
	case r.GetRedacted():
		return block{"type": "redacted_thinking", "data": r.GetSignature()}
	}
	return block{"type": "thinking", "thinking": r.GetText(), "signature": r.GetSignature()}
}

// connectorBlocks renders a call of the MCP connector as the mcp_tool_use
// and mcp_tool_result blocks the API sent: they stay in the conversation
// so that the model sees what it already did.
func connectorBlocks(c *agentdv1.ProviderToolCall) []any {
	use := block{
		"type": "mcp_tool_use", "id": c.GetId(), "name": c.GetToolName(),
		"server_name": c.GetServerName(), "input": httpc.ArgumentsObject(c.GetArguments()),
	}
	result := block{"type": "mcp_tool_result", "tool_use_id": c.GetId(), "is_error": c.GetIsError()}
	if c.GetOutput() != "" {
		result["content"] = []any{textBlock(c.GetOutput())}
	}
	return []any{use, result}
}

// toolResult renders a tool's result: its text, then its attachments
// (images, audio and resource links), flagged when the call failed.
func toolResult(r *agentdv1.ToolResult) block {
	b := block{"type": "tool_result", "tool_use_id": r.GetToolCallId()}
	var content []any
	if r.GetOutput() != "" {
		content = append(content, textBlock(r.GetOutput()))
	}
	for _, a := range r.GetAttachments() {
		content = append(content, mediaBlock(a))
	}
	if len(content) > 0 {
		b["content"] = content
	}
	if r.GetIsError() {
		b["is_error"] = true
	}
	return b
}

func textBlock(s string) block { return block{"type": "text", "text": s} }

// imageTypes are the image formats the API accepts.
var imageTypes = []string{"image/jpeg", "image/png", "image/gif", "image/webp"}

// mediaBlock renders media as an image or document block where the API
// accepts it, and otherwise as a text note, so the model still learns that
// the content exists.
func mediaBlock(m *agentdv1.Media) block {
	mt, data := m.GetMimeType(), m.GetData()
	source := mediaSource(m)
	switch {
	case source != nil && slices.Contains(imageTypes, mt):
		return block{"type": "image", "source": source}
	case source != nil && mt == "application/pdf":
		return block{"type": "document", "source": source}
	case len(data) > 0 && mt == "text/plain":
		return block{"type": "document", "source": block{"type": "text", "media_type": mt, "data": string(data)}}
	}
	return textBlock(describe(m))
}

// mediaSource is where the API can read media from: its data, or its
// URI when that is a web address; nil when neither.
func mediaSource(m *agentdv1.Media) block {
	if data := m.GetData(); len(data) > 0 {
		return block{"type": "base64", "media_type": m.GetMimeType(), "data": base64.StdEncoding.EncodeToString(data)}
	}
	if uri := m.GetUri(); strings.HasPrefix(uri, "https://") || strings.HasPrefix(uri, "http://") {
		return block{"type": "url", "url": uri}
	}
	return nil
}

// describe names media the API cannot take.
func describe(m *agentdv1.Media) string {
	var b strings.Builder
	b.WriteString("[attachment")
	if n := m.GetName(); n != "" {
		b.WriteString(" " + strconv.Quote(n))
	}
	b.WriteString(" (" + cmp.Or(m.GetMimeType(), "unknown type") + ")")
	if u := m.GetUri(); u != "" {
		b.WriteString(" at " + u)
	}
	b.WriteString(": not sent, the Anthropic API does not accept it]")
	return b.String()
}

// functionTools renders req's function tools; a missing schema is an
// empty object schema.
func functionTools(req *providers.Request) []any {
	var out []any
	for i, t := range req.Tools {
		b := block{"name": t.GetName(), "input_schema": req.Parameters(i)}
		if d := t.GetDescription(); d != "" {
			b["description"] = d
		}
		out = append(out, b)
	}
	return out
}

// mcpServers renders provider-side servers for the MCP connector:
// the server list, and the one toolset per server that the API requires.
func mcpServers(servers []*agentdv1.MCPServer) (list, toolsets []any, err error) {
	for _, s := range servers {
		if problem := serverProblem(s); problem != "" {
			return nil, nil, fault.New(fault.Invalid, "anthropic: provider-side MCP server %q: %s", s.GetName(), problem)
		}
		token, _ := bearerToken(s.GetAuthorization())
		srv := block{"type": "url", "url": s.GetUrl(), "name": s.GetName()}
		if token != "" {
			srv["authorization_token"] = token
		}
		list = append(list, srv)
		toolset := block{"type": "mcp_toolset", "mcp_server_name": s.GetName()}
		if allowed := s.GetAllowedTools(); len(allowed) > 0 {
			configs := block{}
			for _, t := range allowed {
				configs[t] = block{"enabled": true}
			}
			toolset["default_config"] = block{"enabled": false}
			toolset["configs"] = configs
		}
		toolsets = append(toolsets, toolset)
	}
	return list, toolsets, nil
}

// serverProblem says why Anthropic's MCP connector cannot serve a server
// (Capabilities.ServerProblem): it reaches https URLs only, sends no
// headers, and takes only a bearer token. The text names no secret.
func serverProblem(s *agentdv1.MCPServer) string {
	switch {
	case s.GetName() == "":
		return "it has no name"
	case !strings.HasPrefix(strings.ToLower(s.GetUrl()), "https://"):
		return "Anthropic's MCP connector reaches https URLs only"
	case len(s.GetHeaders()) > 0:
		return "it has headers, which Anthropic's MCP connector cannot send"
	}
	if _, ok := bearerToken(s.GetAuthorization()); !ok {
		return "its authorization is not a bearer token, the only kind Anthropic's MCP connector sends"
	}
	return ""
}

// bearerToken is the token of an authorization value: a bare token, or
// one after "Bearer ". Any other scheme cannot be sent (ok is false).
func bearerToken(auth string) (token string, ok bool) {
	auth = strings.TrimSpace(auth)
	scheme, rest, found := strings.Cut(auth, " ")
	if !found {
		return auth, true
	}
	if strings.EqualFold(scheme, "Bearer") {
		return strings.TrimSpace(rest), true
	}
	return "", false
}
