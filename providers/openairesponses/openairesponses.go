// Package openairesponses is the adapter of OpenAI's Responses API
// ("openai-responses"): POST {base}/responses, streamed as named
// Server-Sent Events.
//
// # Stateless turns
//
// Every request sends "store": false and replays the whole conversation
// in "input"; previous_response_id is never used. A generation paused on
// one replica can then resume on another, and nothing of the conversation
// is kept at OpenAI between turns. The price is that reasoning can only
// travel back to the API in its encrypted form: when provider_options has
// "reasoning", the request asks for "include":
// ["reasoning.encrypted_content"], and the encrypted content of each
// reasoning item comes back as a Reasoning signature that later turns
// replay as a reasoning input item. Reasoning without a signature (no
// "reasoning" option, or another provider's) is not replayed.
//
// # Tools and MCP servers
//
// Function tools are sent flat ({"type": "function", "name", ...}) with
// "strict": false, because agentd's tools carry arbitrary MCP schemas that
// strict mode would reject. Provider-side MCP servers become "type": "mcp"
// tools with "require_approval": "never" (agentd hands this adapter only
// servers that no approval gates); a "mcp://NAME" URL names one of
// OpenAI's connectors (Dropbox, Gmail, Google Calendar and Drive,
// Microsoft Teams, Outlook Calendar and Email, SharePoint). The calls the
// API makes to them come back as ProviderToolCall events and are replayed
// as mcp_call input items, so the model sees what its tools did.
//
// # Options
//
// Settings.Options: "organization" and "project" set the OpenAI-Organization
// and OpenAI-Project headers. The agent's provider_options are merged into
// the body: the entries of "tools" and "include" are appended to agentd's
// own (a native "type": "mcp" tool passes untouched), other keys are copied
// when agentd did not set them.
//
// # Structured output
//
// An answer asked for as JSON that fits a schema (Request.Output) is
// asked for with text.format json_schema, beside the turn's tools; the
// options' other text settings (verbosity) are kept, their format is
// replaced: the agent's schema is the one agentd checks the answer
// against. A refusal (response.refusal.delta, streamed in place of the
// answer) reaches the user as text, and the turn stops with
// CONTENT_FILTER, so the loop never takes it for the answer.
//
// # Errors
//
// Responses has no error flag for tool results, so a failed result reaches
// the model as its {"error": ...} text. Error texts never carry the API key,
// an MCP server's authorization or its header values, even when the API
// echoes them.
package openairesponses

import (
	"context"
	"iter"
	"net/http"

	"github.com/agentd/agentd/providers"
	"github.com/agentd/agentd/providers/internal/httpc"
)

// name is the provider's registered name.
const name = "openai-responses"

const defaultBaseURL = "https://api.openai.com/v1"

type provider struct {
	client *httpc.Client
	s      providers.Settings // its APIKey is redacted from errors
}

// New returns the "openai-responses" provider. A missing API key is
// reported by every Stream call, so the service starts and the other
// providers keep working.
func New(s providers.Settings) providers.Provider {
	h := make(http.Header)
	h.Set("Accept", "text/event-stream")
	if s.APIKey != "" {
		h.Set("Authorization", "Bearer "+s.APIKey)
	}
	httpc.OpenAIHeaders(h, s)
	return &provider{
		client: httpc.New(name, s, defaultBaseURL, h),
		s:      s,
	}
}

// CloseIdleConnections closes the adapter's idle connections.
func (p *provider) CloseIdleConnections() { p.client.CloseIdleConnections() }

func (p *provider) Name() string { return name }

func (p *provider) Capabilities() providers.Capabilities {
	return providers.Capabilities{ServesURLServers: true, ServesConnectors: true, ServerProblem: serverProblem, Output: takesOutput}
}

// takesOutput reports that a turn's output schema always goes in the
// request (text.format), beside any tools.
func takesOutput(string, bool) bool { return true }

// keptAtOpenAI is why options that would make a turn depend on state kept
// at OpenAI, and so break resuming elsewhere, are refused.
const keptAtOpenAI = "keeps the conversation at OpenAI; agentd replays it every turn, so a generation can resume on any replica"

// ValidateOptions refuses options that would replace what agentd builds
// or keep the conversation at OpenAI, and list options that are not
// lists.
func (p *provider) ValidateOptions(options map[string]any) []providers.Problem {
	problems := append(httpc.ReservedOptions(options, httpc.SetByAgentd, "model", "input", "stream", "store"),
		httpc.ReservedOptions(options, keptAtOpenAI, "previous_response_id", "conversation")...)
	for _, k := range []string{"tools", "include"} {
		if v, ok := options[k]; ok {
			if _, isList := v.([]any); !isList {
				problems = append(problems, providers.Problem{Field: k, Description: "must be a list"})
			}
		}
	}
	return problems
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
		// OpenAI's own 401 quotes part of the key; gateways may quote more.
		yield = httpc.RedactErrors(yield, req, append(httpc.RequestSecrets(req), p.s.APIKey)...)
		body, err := buildBody(req)
		if err != nil {
			yield(nil, err)
			return
		}
		resp, err := p.client.Do(ctx, http.MethodPost, "/responses", body)
		if err != nil {
			yield(nil, err)
			return
		}
		defer httpc.Finish(ctx, resp.Body)
		read(ctx, resp.Body, yield)
	}
}
