package openairesponses

import (
	"cmp"
	"encoding/base64"
	"fmt"
	"slices"
	"strings"

	agentdv1 "github.com/agentd/agentd/gen/go/agentd/v1"
	"github.com/agentd/agentd/internal/fault"
	"github.com/agentd/agentd/providers"
	"github.com/agentd/agentd/providers/internal/httpc"
)

// encryptedReasoning is the include value that makes the API return
// reasoning in the only form a stateless request can send back.
const encryptedReasoning = "reasoning.encrypted_content"

// buildBody builds the request body, provider options merged in.
func buildBody(req *providers.Request) (map[string]any, error) {
	input := []any{}
	for _, m := range req.Messages {
		items, err := inputItems(m)
		if err != nil {
			return nil, err
		}
		input = append(input, items...)
	}
	body := map[string]any{
		"model":  req.Model,
		"input":  input,
		"stream": true,
		"store":  false,
	}
	if req.Instructions != "" {
		body["instructions"] = req.Instructions
	}
	tools, err := requestTools(req)
	if err != nil {
		return nil, err
	}
	if len(tools) > 0 {
		body["tools"] = tools
	}
	if wantsEncryptedReasoning(req.Options) {
		body["include"] = []any{encryptedReasoning}
	}
	httpc.MergeOptions(body, req.Options, "tools", "include")
	if req.Output != nil {
		// Beside the options' other text settings (verbosity), in place
		// of their format.
		httpc.SetNested(body, "text", "format", textFormat(req.Output))
	}
	if req.MaxTokens > 0 {
		body["max_output_tokens"] = req.MaxTokens
	}
	return body, nil
}

// textFormat is the text.format that asks for the answer as JSON that
// fits o: the fields of a json_schema sit beside its type.
func textFormat(o *providers.Output) map[string]any {
	format := map[string]any{"type": "json_schema", "name": o.Name, "schema": o.Schema, "strict": o.Strict}
	if o.Description != "" {
		format["description"] = o.Description
	}
	return format
}

// requestTools renders req's function tools, then its provider-side MCP
// servers.
func requestTools(req *providers.Request) ([]any, error) {
	var tools []any
	for i, t := range req.Tools {
		tool := map[string]any{"type": "function", "name": t.GetName(), "parameters": req.Parameters(i), "strict": false}
		if t.GetDescription() != "" {
			tool["description"] = t.GetDescription()
		}
		tools = append(tools, tool)
	}
	for _, srv := range req.MCPServers {
		tool, err := mcpTool(srv)
		if err != nil {
			return nil, err
		}
		tools = append(tools, tool)
	}
	return tools, nil
}

// wantsEncryptedReasoning reports whether the options ask for reasoning
// without including its encrypted form, which agentd then includes.
func wantsEncryptedReasoning(options map[string]any) bool {
	if _, ok := options["reasoning"]; !ok {
		return false
	}
	given, _ := options["include"].([]any)
	return !slices.Contains(given, any(encryptedReasoning))
}

// inputItems converts one neutral message into input items.
func inputItems(m *agentdv1.Message) ([]any, error) {
	switch m.GetRole() {
	case agentdv1.Role_ROLE_USER:
		return userItems(m)
	case agentdv1.Role_ROLE_ASSISTANT:
		return assistantItems(m), nil
	case agentdv1.Role_ROLE_TOOL:
		return outputItems(m), nil
	}
	return nil, fault.New(fault.Invalid, "%s: a message has no role", name)
}

// outputItems converts a tool message: a function_call_output item per
// result. A failed result's output is already {"error": ...}: the wire
// has no flag to carry is_error.
func outputItems(m *agentdv1.Message) []any {
	var items []any
	for _, part := range m.GetParts() {
		if r := part.GetToolResult(); r != nil {
			items = append(items, map[string]any{"type": "function_call_output", "call_id": r.GetToolCallId(), "output": r.GetOutput()})
		}
	}
	return items
}

// userItems converts a user message: one item of its texts and media, or
// none when it has neither.
func userItems(m *agentdv1.Message) ([]any, error) {
	var content []any
	for _, part := range m.GetParts() {
		switch k := part.GetKind().(type) {
		case *agentdv1.Part_Text:
			content = append(content, map[string]any{"type": "input_text", "text": k.Text})
		case *agentdv1.Part_Media:
			c, err := mediaContent(k.Media)
			if err != nil {
				return nil, err
			}
			content = append(content, c)
		}
	}
	if len(content) == 0 {
		return nil, nil
	}
	return []any{map[string]any{"role": "user", "content": content}}, nil
}

// assistantItems converts an assistant message into one item per part,
// in the order of its parts, with consecutive texts joined into one
// message item.
func assistantItems(m *agentdv1.Message) []any {
	var b assistantItemsBuilder
	for _, part := range m.GetParts() {
		switch k := part.GetKind().(type) {
		case *agentdv1.Part_Text:
			if k.Text != "" {
				b.text = append(b.text, k.Text)
			}
		case *agentdv1.Part_Reasoning:
			r := k.Reasoning
			if r.GetProvider() == name && r.GetSignature() != "" { // else nothing the API could use: store is false, so only the encrypted form counts
				b.add(map[string]any{"type": "reasoning", "encrypted_content": r.GetSignature(), "summary": []any{}})
			}
		case *agentdv1.Part_ToolCall:
			c := k.ToolCall
			b.add(map[string]any{"type": "function_call", "call_id": c.GetId(), "name": c.GetName(), "arguments": providers.CompactArguments([]byte(c.GetArguments()))})
		case *agentdv1.Part_ProviderToolCall:
			b.add(mcpCallItem(k.ProviderToolCall))
		}
	}
	b.flush()
	return b.items
}

// assistantItemsBuilder gathers an assistant message's items, holding its
// texts until an item of another kind (or the end) closes them.
type assistantItemsBuilder struct {
	items []any
	text  []string
}

// add appends an item after the texts before it.
func (b *assistantItemsBuilder) add(item map[string]any) {
	b.flush()
	b.items = append(b.items, item)
}

// flush appends the texts held as one message item.
func (b *assistantItemsBuilder) flush() {
	if len(b.text) > 0 {
		b.items = append(b.items, map[string]any{"role": "assistant", "content": []any{
			map[string]any{"type": "output_text", "text": strings.Join(b.text, "")},
		}})
		b.text = nil
	}
}

// mcpCallItem renders a provider-side call as the mcp_call item the API
// sent.
func mcpCallItem(c *agentdv1.ProviderToolCall) map[string]any {
	item := map[string]any{"type": "mcp_call", "id": c.GetId(), "server_label": c.GetServerName(), "name": c.GetToolName(), "arguments": providers.CompactArguments([]byte(c.GetArguments()))}
	if c.GetIsError() {
		item["error"] = c.GetOutput()
	} else {
		item["output"] = c.GetOutput()
	}
	return item
}

// mediaContent renders a user's media part: images as input_image, other
// documents as input_file, inline data as a data URL.
func mediaContent(m *agentdv1.Media) (map[string]any, error) {
	ref := m.GetUri()
	if ref == "" {
		ref = "data:" + m.GetMimeType() + ";base64," + base64.StdEncoding.EncodeToString(m.GetData())
	}
	if strings.HasPrefix(m.GetMimeType(), "image/") {
		return map[string]any{"type": "input_image", "image_url": ref, "detail": "auto"}, nil
	}
	if m.GetMimeType() == "application/pdf" {
		file := map[string]any{"type": "input_file"}
		if m.GetUri() != "" {
			file["file_url"] = ref
		} else {
			file["file_data"] = ref
			file["filename"] = cmp.Or(m.GetName(), "document.pdf")
		}
		return file, nil
	}
	return nil, fault.New(fault.Invalid, "%s: user messages may carry images and PDF documents; %q is neither", name, m.GetMimeType())
}

// connectors maps the accepted spellings of a mcp://NAME service to the
// id suffix of OpenAI's connector.
var connectors = map[string]string{
	"dropbox":          "dropbox",
	"gmail":            "gmail",
	"googlecalendar":   "googlecalendar",
	"google_calendar":  "googlecalendar",
	"googledrive":      "googledrive",
	"google_drive":     "googledrive",
	"microsoftteams":   "microsoftteams",
	"microsoft_teams":  "microsoftteams",
	"teams":            "microsoftteams",
	"outlookcalendar":  "outlookcalendar",
	"outlook_calendar": "outlookcalendar",
	"outlookemail":     "outlookemail",
	"outlook_email":    "outlookemail",
	"outlook":          "outlookemail",
	"sharepoint":       "sharepoint",
}

// knownConnectors is the list given in errors.
const knownConnectors = "dropbox, gmail, googlecalendar, googledrive, microsoftteams, outlookcalendar, outlookemail, sharepoint"

// connectorID is the connector a "mcp://NAME" URL names ("" when NAME is
// not one); ok says the URL is a connector URL at all (its scheme is mcp,
// in any case, as the plan reads it).
func connectorID(url string) (id string, ok bool) {
	name, ok := connectorName(url)
	if !ok {
		return "", false
	}
	return connectors[strings.ReplaceAll(strings.ToLower(name), "-", "_")], true
}

// connectorName is the NAME of a "mcp://NAME" URL: its host, without the
// user information, port, path, query or fragment that may follow or
// precede it (and may hold a key).
func connectorName(url string) (string, bool) {
	scheme, rest, found := strings.Cut(url, "://")
	if !found || !strings.EqualFold(scheme, "mcp") {
		return "", false
	}
	if i := strings.IndexAny(rest, "/?#"); i >= 0 {
		rest = rest[:i]
	}
	if i := strings.LastIndexByte(rest, '@'); i >= 0 {
		rest = rest[i+1:]
	}
	name, _, _ := strings.Cut(rest, ":")
	return name, true
}

// serverProblem says why a connector cannot be used: an unknown name, or
// no token (the API requires the user's OAuth token). Every url server
// can be: headers and any authorization scheme can be sent.
func serverProblem(srv *agentdv1.MCPServer) string {
	id, ok := connectorID(srv.GetUrl())
	if !ok {
		return ""
	}
	if id == "" {
		name, _ := connectorName(srv.GetUrl()) // only the name: the rest may hold a key
		return fmt.Sprintf("mcp://%s is not an OpenAI connector; known: %s", name, knownConnectors)
	}
	if token, _ := splitAuthorization(srv.GetAuthorization()); token == "" {
		return fmt.Sprintf("the %s connector needs authorization: the user's OAuth access token for it", id)
	}
	return ""
}

// mcpTool renders a provider-side MCP server as a "type": "mcp" tool.
// require_approval is "never" because the API's default ("always") would
// end the turn waiting for approvals that agentd never sends: servers with
// gated tools stay in agentd's bridge.
func mcpTool(srv *agentdv1.MCPServer) (map[string]any, error) {
	tool := map[string]any{"type": "mcp", "server_label": srv.GetName(), "require_approval": "never"}
	token, header := splitAuthorization(srv.GetAuthorization())
	headers := map[string]any{}
	for k, v := range srv.GetHeaders() {
		headers[k] = v
	}
	if id, ok := connectorID(srv.GetUrl()); ok {
		if problem := serverProblem(srv); problem != "" {
			return nil, fault.New(fault.Invalid, "%s: MCP server %q: %s", name, srv.GetName(), problem)
		}
		tool["connector_id"] = "connector_" + id
	} else {
		tool["server_url"] = srv.GetUrl()
		if header != "" {
			// The authorization field takes only a bearer token; another
			// scheme ("Basic ...") goes to the server as its header.
			headers["Authorization"] = header
		}
	}
	if token != "" {
		tool["authorization"] = token
	}
	if len(headers) > 0 {
		tool["headers"] = headers
	}
	if names := srv.GetAllowedTools(); len(names) > 0 {
		tool["allowed_tools"] = allowedTools(names)
	}
	return tool, nil
}

func allowedTools(names []string) []any {
	allowed := make([]any, len(names))
	for i, n := range names {
		allowed[i] = n
	}
	return allowed
}

// splitAuthorization reads an MCPServer's authorization the way the bridge
// sends it: a bare token or "Bearer <token>" is a bearer token (returned
// without the scheme, as the API wants it); a value naming another scheme
// ("Basic abc") is a header value.
func splitAuthorization(v string) (token, header string) {
	scheme, rest, ok := strings.Cut(v, " ")
	if !ok || rest == "" || !isToken(scheme) {
		return v, ""
	}
	if strings.EqualFold(scheme, "bearer") {
		return strings.TrimSpace(rest), ""
	}
	return "", v
}

// isToken reports whether s is an HTTP auth-scheme token.
func isToken(s string) bool {
	return s != "" && strings.IndexFunc(s, notTokenChar) < 0
}

// notTokenChar reports whether r cannot be in an HTTP token.
func notTokenChar(r rune) bool {
	return !(r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || strings.ContainsRune("!#$%&'*+-.^_`|~", r))
}
