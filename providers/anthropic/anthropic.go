// Package anthropic is the adapter of Anthropic's Messages API
// ("anthropic"): streamed turns over POST /v1/messages, tool results
// flagged with is_error, image and document content, extended thinking
// returned with its signature on later turns, provider-side MCP servers
// through the MCP connector beta, and prompt caching.
//
// # Settings
//
//   - APIKey is sent as x-api-key. Required.
//   - BaseURL replaces https://api.anthropic.com.
//   - Options["version"] is the anthropic-version header, default
//     "2023-06-01". Version "2026-10-21" rejects temperature, top_p and
//     top_k, so agents on it must not set them in their provider options.
//   - Options["beta"] lists betas (comma-separated) sent on every request
//     in the anthropic-beta header.
//   - Options["mcp_beta"] is the MCP connector beta added to that header
//     when a request has mcp_servers, default "mcp-client-2025-11-20".
//
// # Provider options
//
// The agent's provider_options are merged into the request body: keys the
// adapter does not set (temperature, thinking, tool_choice, max_tokens,
// ...) are copied, and entries of "tools" and "mcp_servers" are appended
// after the adapter's own, untouched, so Anthropic's native MCP connector
// shapes can be given directly. max_tokens defaults to 4096.
//
// # Provider-side MCP servers
//
// Each server becomes an mcp_servers entry (type url, url, name, and its
// bearer token as authorization_token) plus one mcp_toolset in tools; an
// allowed_tools list becomes the connector's allowlist (default_config
// disabled, each listed tool enabled). At most MaxServers servers per
// request. The connector's mcp_tool_use and mcp_tool_result blocks are
// reported as ProviderToolCall events and sent back as those blocks on
// later turns.
//
// # Prompt caching
//
// A tool loop sends the same prefix (tools, system, conversation so far)
// on every turn, so the adapter marks cache breakpoints where that prefix
// ends: on the last content block of the last message, on the last tool
// definition, and on the system prompt, in that order of priority, within
// the API's limit of four breakpoints per request (breakpoints given in
// the provider options count too).
//
// # Structured output
//
// On Claude 4.5 and later (Capabilities.Output; the table in output.go),
// a request's Output goes in output_config.format as {"type":
// "json_schema", "schema": ...}, merged into any output_config of the
// provider options, with tools or without: the schema constrains the
// model's text, not its tool calls. The answer streams as text; a
// refusal (stop_reason "refusal") stops with CONTENT_FILTER.
package anthropic

import (
	"context"
	"encoding/json"
	"iter"
	"net/http"
	"slices"
	"strings"

	"github.com/agentd/agentd/providers"
	"github.com/agentd/agentd/providers/internal/httpc"
)

const (
	name           = "anthropic"
	defaultBaseURL = "https://api.anthropic.com"
	defaultVersion = "2023-06-01"
	defaultMCPBeta = "mcp-client-2025-11-20"

	// MaxServers caps the provider-side MCP servers of one request. The
	// connector documents 20 for agent definitions and states no number
	// for /v1/messages, so 20 is the bound known to be safe.
	MaxServers = 20
)

// provider is the adapter with its settings applied.
type provider struct {
	s providers.Settings // its APIKey is redacted from errors
	// plain sends requests without MCP servers; mcp adds the connector
	// beta to anthropic-beta. The header is fixed per httpc.Client, and a
	// request needs one of exactly these two.
	plain, mcp *httpc.Client
}

// New returns the "anthropic" provider.
func New(s providers.Settings) providers.Provider {
	version := s.Options["version"]
	if version == "" {
		version = defaultVersion
	}
	mcpBeta := s.Options["mcp_beta"]
	if mcpBeta == "" {
		mcpBeta = defaultMCPBeta
	}
	betas := splitList(s.Options["beta"])
	if s.HTTP == nil { // one connection pool for both clients
		s.HTTP = httpc.NewHTTPClient(s)
	}
	client := func(betas []string) *httpc.Client {
		h := make(http.Header)
		h.Set("x-api-key", s.APIKey)
		h.Set("anthropic-version", version)
		if len(betas) > 0 {
			h.Set("anthropic-beta", strings.Join(betas, ","))
		}
		c := httpc.New(name, s, defaultBaseURL, h)
		c.ErrorMessage, c.Retryable = errorMessage, retryable
		return c
	}
	return &provider{
		s:     s,
		plain: client(betas),
		mcp:   client(appendNew([]string{mcpBeta}, betas...)),
	}
}

// CloseIdleConnections closes the adapter's idle connections (both
// clients share one pool).
func (p *provider) CloseIdleConnections() { p.plain.CloseIdleConnections() }

func (p *provider) Name() string { return name }

func (p *provider) Capabilities() providers.Capabilities {
	return providers.Capabilities{
		ServesURLServers:   true,
		MaxProviderServers: MaxServers,
		ServerProblem:      serverProblem,
		ToolErrorFlag:      true,
		MediaToolResults:   true,
		Output:             takesOutput,
	}
}

// CheckConfig reports a missing key.
func (p *provider) CheckConfig(string) error {
	if p.s.APIKey == "" {
		return httpc.MissingKey(name, p.s)
	}
	return nil
}

func (p *provider) Stream(ctx context.Context, req *providers.Request) iter.Seq2[providers.Event, error] {
	return func(yield func(providers.Event, error) bool) {
		if err := p.CheckConfig(req.Model); err != nil {
			yield(nil, err)
			return
		}
		yield = httpc.RedactErrors(yield, req, append(httpc.RequestSecrets(req), p.s.APIKey)...)
		body, err := requestBody(req)
		if err != nil {
			yield(nil, err)
			return
		}
		client := p.plain
		if _, ok := body["mcp_servers"]; ok {
			client = p.mcp
		}
		resp, err := client.Do(ctx, http.MethodPost, "/v1/messages", body)
		if err != nil {
			yield(nil, err)
			return
		}
		defer httpc.Finish(ctx, resp.Body)
		readStream(ctx, resp.Body, yield)
	}
}

// errorMessage reads Anthropic's error body,
// {"type": "error", "error": {"type": "...", "message": "..."}}; a body
// of another shape (a gateway's) is read the common way.
func errorMessage(body []byte) (message, errType string) {
	var e struct {
		Error *apiError `json:"error"`
	}
	if json.Unmarshal(body, &e) == nil && e.Error != nil && e.Error.Message != "" {
		return e.Error.Message, e.Error.Type
	}
	return httpc.OpenAIError(body)
}

// apiError is the error object of an error body or an error event.
type apiError struct {
	Type    string `json:"type"`
	Message string `json:"message"`
}

// retryable is httpc's rule (408, 409, 429, 5xx), with Anthropic's 529
// overloaded_error named because it is the retry that matters most.
func retryable(status int) bool {
	switch status {
	case http.StatusRequestTimeout, http.StatusConflict, http.StatusTooManyRequests, 529:
		return true
	}
	return status >= 500
}

// splitList splits a comma-separated setting, dropping blanks.
func splitList(s string) []string {
	var out []string
	for _, v := range strings.Split(s, ",") {
		if v = strings.TrimSpace(v); v != "" {
			out = appendNew(out, v)
		}
	}
	return out
}

// appendNew appends the values not already in list, so a beta named in
// two settings is sent once.
func appendNew(list []string, values ...string) []string {
	for _, v := range values {
		if !slices.Contains(list, v) {
			list = append(list, v)
		}
	}
	return list
}
