// Package openaichat is the OpenAI Chat Completions codec and the
// providers that speak it: OpenAI itself ("openai"), Azure OpenAI
// ("azure"), DeepSeek ("deepseek"), OpenRouter ("openrouter") and Requesty
// ("requesty"). One codec serves them all; a Dialect says where each
// differs (base URL, path, authentication header, extra headers, echoing
// reasoning_content, stream quirks).
//
// None of them runs MCP servers itself, so every MCP server of their
// agents runs in agentd's bridge; tool results cannot be flagged as
// failed on this wire, so a failed result reaches the model as its
// {"error": ...} text.
package openaichat

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"io"
	"iter"
	"net/http"
	"net/url"
	"strings"

	agentdv1 "github.com/agentd/agentd/gen/go/agentd/v1"
	"github.com/agentd/agentd/internal/fault"
	"github.com/agentd/agentd/providers"
	"github.com/agentd/agentd/providers/internal/httpc"
	"github.com/agentd/agentd/providers/internal/sse"
)

// Dialect is what one provider does differently on the Chat Completions
// wire.
type Dialect struct {
	// Name is the provider's registered name.
	Name string
	// DefaultBaseURL is used when Settings.BaseURL is empty.
	DefaultBaseURL string
	// Path is the request path below the base URL; nil means
	// "/chat/completions".
	Path func(s providers.Settings, model string) (string, url.Values, error)
	// Auth sets the authentication headers; nil means
	// "Authorization: Bearer <key>".
	Auth func(h http.Header, key string)
	// Headers adds fixed headers (OpenRouter's attribution).
	Headers func(h http.Header, s providers.Settings)
	// EchoReasoning sends an assistant turn's reasoning back as
	// reasoning_content when the turn called tools (DeepSeek requires it).
	EchoReasoning bool
	// OmitModel leaves "model" out of the body (Azure's deployment URLs
	// choose the model).
	OmitModel bool
}

// provider is one dialect with its settings.
type provider struct {
	d      Dialect
	s      providers.Settings
	client *httpc.Client
	err    error // a configuration problem, reported on every call
}

// New returns the provider of dialect d.
func New(d Dialect, s providers.Settings) providers.Provider {
	h := make(http.Header)
	h.Set("Accept", "text/event-stream")
	if s.APIKey != "" {
		if d.Auth != nil {
			d.Auth(h, s.APIKey)
		} else {
			h.Set("Authorization", "Bearer "+s.APIKey)
		}
	}
	if d.Headers != nil {
		d.Headers(h, s)
	}
	p := &provider{d: d, s: s, client: httpc.New(d.Name, s, d.DefaultBaseURL, h)}
	if p.client.BaseURL == "" {
		p.err = fault.New(fault.FailedPrecondition, "%s: no base URL is configured: set providers.%s.base_url", d.Name, d.Name)
	}
	return p
}

// CloseIdleConnections closes the adapter's idle connections.
func (p *provider) CloseIdleConnections() { p.client.CloseIdleConnections() }

func (p *provider) Name() string { return p.d.Name }

func (p *provider) Capabilities() providers.Capabilities { return providers.Capabilities{} }

// ValidateOptions refuses options that would replace what the codec
// builds.
func (p *provider) ValidateOptions(options map[string]any) []providers.Problem {
	return httpc.ReservedOptions(options, httpc.SetByAgentd, "model", "messages", "stream", "stream_options")
}

func (p *provider) Stream(ctx context.Context, req *providers.Request) iter.Seq2[providers.Event, error] {
	return func(yield func(providers.Event, error) bool) {
		if p.err != nil {
			yield(nil, p.err)
			return
		}
		if p.s.APIKey == "" {
			yield(nil, httpc.MissingKey(p.d.Name, p.s))
			return
		}
		yield = httpc.RedactErrors(yield, p.s.APIKey)
		body, err := p.body(req)
		if err != nil {
			yield(nil, err)
			return
		}
		path, query := "/chat/completions", url.Values(nil)
		if p.d.Path != nil {
			if path, query, err = p.d.Path(p.s, req.Model); err != nil {
				yield(nil, err)
				return
			}
		}
		client := p.client
		if len(query) > 0 {
			c := *p.client
			c.Query = query
			client = &c
		}
		resp, err := client.Do(ctx, http.MethodPost, path, body)
		if err != nil {
			yield(nil, err)
			return
		}
		defer httpc.Finish(ctx, resp.Body)
		p.read(ctx, resp.Body, yield)
	}
}

// body builds the request body, provider options merged in.
func (p *provider) body(req *providers.Request) (map[string]any, error) {
	msgs := make([]any, 0, len(req.Messages)+1)
	if req.Instructions != "" {
		msgs = append(msgs, &httpc.ChatMessage{Role: "system", Text: req.Instructions})
	}
	for _, m := range req.Messages {
		var err error
		if msgs, err = p.message(msgs, m); err != nil {
			return nil, err
		}
	}
	body := map[string]any{
		"messages":       msgs,
		"stream":         true,
		"stream_options": map[string]any{"include_usage": true},
	}
	if !p.d.OmitModel {
		body["model"] = req.Model
	}
	if len(req.Tools) > 0 {
		body["tools"] = httpc.FunctionTools(req)
	}
	httpc.MergeOptions(body, req.Options, "tools")
	if req.MaxTokens > 0 {
		// max_tokens is the field's deprecated name, which reasoning
		// models refuse; the two may not be sent together.
		delete(body, "max_tokens")
		body["max_completion_tokens"] = req.MaxTokens
	}
	return body, nil
}

// message appends one neutral message to msgs as chat messages: a tool
// message becomes one "tool" message per result.
func (p *provider) message(msgs []any, m *agentdv1.Message) ([]any, error) {
	switch m.GetRole() {
	case agentdv1.Role_ROLE_USER:
		var texts []string
		var media []any
		for _, part := range m.GetParts() {
			switch k := part.GetKind().(type) {
			case *agentdv1.Part_Text:
				texts = append(texts, k.Text)
			case *agentdv1.Part_Media:
				if url := mediaURL(k.Media); url != "" && strings.HasPrefix(k.Media.GetMimeType(), "image/") {
					media = append(media, map[string]any{"type": "image_url", "image_url": map[string]any{"url": url}})
				}
			}
		}
		if len(media) == 0 {
			return append(msgs, &httpc.ChatMessage{Role: "user", Text: strings.Join(texts, "\n")}), nil
		}
		content := make([]any, 0, len(texts)+len(media))
		for _, t := range texts {
			content = append(content, map[string]any{"type": "text", "text": t})
		}
		return append(msgs, &httpc.ChatMessage{Role: "user", Parts: append(content, media...)}), nil
	case agentdv1.Role_ROLE_ASSISTANT:
		msg := &httpc.ChatMessage{Role: "assistant"}
		var texts, reasoning []string
		for _, part := range m.GetParts() {
			switch k := part.GetKind().(type) {
			case *agentdv1.Part_Text:
				texts = append(texts, k.Text)
			case *agentdv1.Part_Reasoning:
				if k.Reasoning.GetProvider() == p.d.Name {
					reasoning = append(reasoning, k.Reasoning.GetText())
				}
			case *agentdv1.Part_ToolCall:
				msg.ToolCalls = append(msg.ToolCalls, httpc.ChatToolCall{ID: k.ToolCall.GetId(), Name: k.ToolCall.GetName(),
					Arguments: providers.CompactArguments([]byte(k.ToolCall.GetArguments()))})
			}
		}
		if len(texts) > 0 {
			msg.Text = strings.Join(texts, "")
		} else {
			msg.NullContent = true
		}
		if len(msg.ToolCalls) > 0 && p.d.EchoReasoning && len(reasoning) > 0 {
			msg.ReasoningContent, msg.HasReasoning = strings.Join(reasoning, ""), true
		}
		return append(msgs, msg), nil
	case agentdv1.Role_ROLE_TOOL:
		for _, part := range m.GetParts() {
			if r := part.GetToolResult(); r != nil {
				msgs = append(msgs, &httpc.ChatMessage{Role: "tool", HasToolCallID: true, ToolCallID: r.GetToolCallId(), Text: r.GetOutput()})
			}
		}
		return msgs, nil
	}
	return nil, fault.New(fault.Invalid, "%s: a message has no role", p.d.Name)
}

func mediaURL(m *agentdv1.Media) string {
	if u := m.GetUri(); u != "" {
		return u
	}
	if len(m.GetData()) > 0 {
		return "data:" + m.GetMimeType() + ";base64," + base64.StdEncoding.EncodeToString(m.GetData())
	}
	return ""
}

// chunk is one chat.completion.chunk (and the error chunks some providers
// send after a 200), as decodeChunk reads it.
type chunk struct {
	ID      string          `json:"id"`
	Model   string          `json:"model"`
	Choices []chunkChoice   `json:"choices"`
	Usage   *chunkUsage     `json:"usage"`
	Error   json.RawMessage `json:"error"`
}

type chunkChoice struct {
	Index        int        `json:"index"`
	Delta        chunkDelta `json:"delta"`
	FinishReason *string    `json:"finish_reason"`
}

type chunkDelta struct {
	Content          *string         `json:"content"`
	ReasoningContent *string         `json:"reasoning_content"` // DeepSeek
	Reasoning        *string         `json:"reasoning"`         // OpenRouter, Ollama's /v1
	ToolCalls        []chunkToolCall `json:"tool_calls"`
}

type chunkToolCall struct {
	Index    int    `json:"index"`
	ID       string `json:"id"`
	Function struct {
		Name      string `json:"name"`
		Arguments string `json:"arguments"`
	} `json:"function"`
}

type chunkUsage struct {
	PromptTokens         int64              `json:"prompt_tokens"`
	CompletionTokens     int64              `json:"completion_tokens"`
	PromptTokensDetails  *chunkTokenDetails `json:"prompt_tokens_details"`
	PromptCacheHitTokens int64              `json:"prompt_cache_hit_tokens"` // DeepSeek
}

type chunkTokenDetails struct {
	CachedTokens int64 `json:"cached_tokens"`
}

type pendingCall struct {
	id, name string
	args     strings.Builder
}

// read parses the SSE stream of one turn and yields its events.
func (p *provider) read(ctx context.Context, body io.Reader, yield func(providers.Event, error) bool) {
	r := sse.NewReader(body)
	defer r.Close() // its buffer goes back to the pool; no event shares it
	// The calls in the order they began; byIndex holds the one each wire
	// index is filling. A fragment with a new id at a used index begins
	// another call: some compatible servers send every parallel call at
	// index 0.
	var calls []*pendingCall
	byIndex := make(map[int]*pendingCall)
	var usage *agentdv1.Usage
	stop := agentdv1.StopReason_STOP_REASON_UNSPECIFIED
	var info providers.Response // every chunk repeats the id and model
	finished := false
	for {
		ev, err := r.Next()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			yield(nil, httpc.StreamError(ctx, p.d.Name, err))
			return
		}
		data := bytes.TrimSpace(ev.Data)
		if string(data) == "[DONE]" {
			finished = true
			break
		}
		var c chunk
		if err := decodeChunk(data, &c); err != nil {
			yield(nil, fault.Wrap(fault.Unavailable, err, "%s: the response stream holds invalid JSON", p.d.Name))
			return
		}
		if len(c.Error) > 0 && string(c.Error) != "null" {
			msg, typ := httpc.ErrorObject(c.Error)
			yield(nil, httpc.Classify(p.d.Name, 0, typ, msg))
			return
		}
		if c.ID != "" {
			info.ID = c.ID
		}
		if c.Model != "" {
			info.Model = c.Model
		}
		for _, ch := range c.Choices {
			d := ch.Delta
			if d.ReasoningContent != nil && *d.ReasoningContent != "" {
				if !yield(&providers.Reasoning{Text: *d.ReasoningContent}, nil) {
					return
				}
			} else if d.Reasoning != nil && *d.Reasoning != "" {
				if !yield(&providers.Reasoning{Text: *d.Reasoning}, nil) {
					return
				}
			}
			if d.Content != nil && *d.Content != "" {
				if !yield(&providers.TextDelta{Text: *d.Content}, nil) {
					return
				}
			}
			for _, tc := range d.ToolCalls {
				pc := byIndex[tc.Index]
				if pc == nil || tc.ID != "" && pc.id != "" && tc.ID != pc.id {
					pc = &pendingCall{}
					byIndex[tc.Index] = pc
					calls = append(calls, pc)
				}
				if tc.ID != "" {
					pc.id = tc.ID
				}
				if tc.Function.Name != "" {
					pc.name = tc.Function.Name
				}
				pc.args.WriteString(tc.Function.Arguments)
			}
			if ch.FinishReason != nil {
				stop = stopReason(*ch.FinishReason)
				info.FinishReason = *ch.FinishReason
				if *ch.FinishReason == "error" {
					yield(nil, httpc.Classify(p.d.Name, 0, "", "the provider ended the response with an error"))
					return
				}
			}
		}
		if c.Usage != nil {
			// prompt_tokens includes the cached ones; input_tokens counts
			// those billed at the full rate.
			usage = &agentdv1.Usage{OutputTokens: c.Usage.CompletionTokens}
			if c.Usage.PromptTokensDetails != nil {
				usage.CacheReadInputTokens = c.Usage.PromptTokensDetails.CachedTokens
			}
			if c.Usage.PromptCacheHitTokens > 0 {
				usage.CacheReadInputTokens = c.Usage.PromptCacheHitTokens
			}
			usage.InputTokens = max(c.Usage.PromptTokens-usage.CacheReadInputTokens, 0)
		}
	}
	if !finished {
		yield(nil, httpc.StreamError(ctx, p.d.Name, io.ErrUnexpectedEOF))
		return
	}
	for _, pc := range calls {
		call := &agentdv1.ToolCall{Id: pc.id, Name: pc.name, Arguments: providers.CompactArguments([]byte(pc.args.String()))}
		if !yield(&providers.ToolCall{Call: call}, nil) {
			return
		}
	}
	if usage != nil && !yield(&providers.Usage{Usage: usage}, nil) {
		return
	}
	yield(&providers.Stop{Reason: stop, Response: info}, nil)
}

func stopReason(r string) agentdv1.StopReason {
	switch r {
	case "stop", "tool_calls", "function_call":
		return agentdv1.StopReason_STOP_REASON_END_TURN
	case "length":
		return agentdv1.StopReason_STOP_REASON_MAX_TOKENS
	case "content_filter":
		return agentdv1.StopReason_STOP_REASON_CONTENT_FILTER
	}
	return agentdv1.StopReason_STOP_REASON_UNSPECIFIED
}

// The dialects.

// OpenAI is OpenAI's Chat Completions API ("openai"). Options:
// "organization" and "project" set OpenAI-Organization and OpenAI-Project.
func OpenAI(s providers.Settings) providers.Provider {
	return New(Dialect{
		Name: "openai", DefaultBaseURL: "https://api.openai.com/v1",
		Headers: func(h http.Header, s providers.Settings) {
			if v := s.Options["organization"]; v != "" {
				h.Set("OpenAI-Organization", v)
			}
			if v := s.Options["project"]; v != "" {
				h.Set("OpenAI-Project", v)
			}
		},
	}, s)
}

// Azure is Azure OpenAI ("azure"): BaseURL is the resource's endpoint
// (https://<resource>.openai.azure.com), the key goes in the api-key
// header. Options: "deployment" (default: the agent's model) and
// "api_version" (default 2024-10-21) for deployment URLs; "api": "v1" uses
// the v1 API (/openai/v1/chat/completions, the model names the
// deployment) instead.
func Azure(s providers.Settings) providers.Provider {
	v1 := s.Options["api"] == "v1"
	return New(Dialect{
		Name: "azure", OmitModel: !v1,
		Auth: func(h http.Header, key string) { h.Set("api-key", key) },
		Path: func(s providers.Settings, model string) (string, url.Values, error) {
			if v1 {
				return "/openai/v1/chat/completions", nil, nil
			}
			deployment := s.Options["deployment"]
			if deployment == "" {
				deployment = model
			}
			if deployment == "" {
				return "", nil, fault.New(fault.Invalid, "azure: no deployment: set the agent's model or providers.azure.options.deployment")
			}
			version := s.Options["api_version"]
			if version == "" {
				version = "2024-10-21"
			}
			return "/openai/deployments/" + url.PathEscape(deployment) + "/chat/completions", url.Values{"api-version": {version}}, nil
		},
	}, s)
}

// DeepSeek is DeepSeek's API ("deepseek"). Its thinking mode requires an
// assistant turn that called tools to carry its reasoning_content back.
func DeepSeek(s providers.Settings) providers.Provider {
	return New(Dialect{
		Name: "deepseek", DefaultBaseURL: "https://api.deepseek.com",
		EchoReasoning: true,
	}, s)
}

// OpenRouter is OpenRouter ("openrouter"). Options "referer" and "title"
// set its attribution headers (HTTP-Referer, X-Title).
func OpenRouter(s providers.Settings) providers.Provider {
	return New(Dialect{
		Name: "openrouter", DefaultBaseURL: "https://openrouter.ai/api/v1",
		Headers: func(h http.Header, s providers.Settings) {
			if v := s.Options["referer"]; v != "" {
				h.Set("HTTP-Referer", v)
			}
			if v := s.Options["title"]; v != "" {
				h.Set("X-Title", v)
			}
		},
	}, s)
}

// Requesty is Requesty's router ("requesty"); models are named
// "<provider>/<model>".
func Requesty(s providers.Settings) providers.Provider {
	return New(Dialect{Name: "requesty", DefaultBaseURL: "https://router.requesty.ai/v1"}, s)
}
