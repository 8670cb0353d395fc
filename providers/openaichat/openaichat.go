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
//
// # Structured output
//
// An answer asked for as JSON that fits a schema (Request.Output) is
// asked for with response_format json_schema, beside the turn's tools,
// in place of any response_format the options set: the agent's schema is
// the one agentd checks the answer against. OpenRouter's request also
// sets provider.require_parameters, in a copy of the options' routing
// object, so that no endpoint that ignores the format serves it. DeepSeek
// takes no schema, only JSON mode: a turn without tools gets
// response_format json_object and the schema in its system message; a
// turn with tools gets the loop's final_answer tool instead. A refusal
// (delta.refusal, which OpenAI streams in place of the answer) reaches
// the user as text, and the turn stops with CONTENT_FILTER, so the loop
// never takes it for the answer.
package openaichat

import (
	"bytes"
	"cmp"
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
	// JSONMode: the API takes no JSON Schema for the answer, only JSON
	// mode (response_format json_object), which it does not document
	// beside tools (DeepSeek). The schema goes into the system message; a
	// turn with tools gets the loop's final_answer tool instead.
	JSONMode bool
	// RequireParameters: a request with a response format also asks the
	// router for endpoints that take every parameter it sends
	// (OpenRouter's provider.require_parameters): one that did not would
	// drop the format silently.
	RequireParameters bool
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
	p := &provider{d: d, s: s, client: httpc.New(d.Name, s, d.DefaultBaseURL, d.header(s))}
	if p.client.BaseURL == "" {
		p.err = fault.New(fault.FailedPrecondition, "%s: no base URL is configured: set providers.%s.base_url", d.Name, d.Name)
	}
	return p
}

// header is what every request of the dialect sends: the key, as the
// dialect authenticates, and its fixed headers.
func (d Dialect) header(s providers.Settings) http.Header {
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
	return h
}

// CloseIdleConnections closes the adapter's idle connections.
func (p *provider) CloseIdleConnections() { p.client.CloseIdleConnections() }

func (p *provider) Name() string { return p.d.Name }

func (p *provider) Capabilities() providers.Capabilities {
	return providers.Capabilities{Output: p.d.takesOutput}
}

// takesOutput reports whether a turn's output schema goes in the
// request: always, but in JSON mode only on a turn without tools.
func (d Dialect) takesOutput(_ string, withTools bool) bool { return !d.JSONMode || !withTools }

// ValidateOptions refuses options that would replace what the codec
// builds.
func (p *provider) ValidateOptions(options map[string]any) []providers.Problem {
	return httpc.ReservedOptions(options, httpc.SetByAgentd, "model", "messages", "stream", "stream_options")
}

// CheckConfig reports a missing base URL, then a missing key.
func (p *provider) CheckConfig(string) error {
	if p.err != nil {
		return p.err
	}
	if p.s.APIKey == "" {
		return httpc.MissingKey(p.d.Name, p.s)
	}
	return nil
}

func (p *provider) Stream(ctx context.Context, req *providers.Request) iter.Seq2[providers.Event, error] {
	return func(yield func(providers.Event, error) bool) {
		if err := p.CheckConfig(req.Model); err != nil {
			yield(nil, err)
			return
		}
		p.stream(ctx, req, httpc.RedactErrors(yield, req, p.s.APIKey))
	}
}

// stream sends req and yields the events of its response.
func (p *provider) stream(ctx context.Context, req *providers.Request, yield func(providers.Event, error) bool) {
	body, err := p.body(req)
	if err != nil {
		yield(nil, err)
		return
	}
	client, path, err := p.route(req.Model)
	if err != nil {
		yield(nil, err)
		return
	}
	resp, err := client.Do(ctx, http.MethodPost, path, body)
	if err != nil {
		yield(nil, err)
		return
	}
	defer httpc.Finish(ctx, resp.Body)
	p.read(ctx, resp.Body, yield)
}

// route returns the client and path of model's requests: the dialect's
// path, and a copy of the client with the query that path needs.
func (p *provider) route(model string) (*httpc.Client, string, error) {
	if p.d.Path == nil {
		return p.client, "/chat/completions", nil
	}
	path, query, err := p.d.Path(p.s, model)
	if err != nil || len(query) == 0 {
		return p.client, path, err
	}
	c := *p.client
	c.Query = query
	return &c, path, nil
}

// body builds the request body, provider options merged in.
func (p *provider) body(req *providers.Request) (map[string]any, error) {
	msgs, err := p.messages(req)
	if err != nil {
		return nil, err
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
	if req.Output != nil {
		p.responseFormat(body, req.Output)
	}
	if req.MaxTokens > 0 {
		// max_tokens is the field's deprecated name, which reasoning
		// models refuse; the two may not be sent together.
		delete(body, "max_tokens")
		body["max_completion_tokens"] = req.MaxTokens
	}
	return body, nil
}

// responseFormat asks for the answer as JSON that fits o, in place of
// any response_format the options set.
func (p *provider) responseFormat(body map[string]any, o *providers.Output) {
	if p.d.JSONMode {
		body["response_format"] = map[string]any{"type": "json_object"}
	} else {
		body["response_format"] = map[string]any{"type": "json_schema", "json_schema": schemaFormat(o)}
	}
	if p.d.RequireParameters {
		httpc.SetNested(body, "provider", "require_parameters", true)
	}
}

// schemaFormat is the json_schema of a response_format.
func schemaFormat(o *providers.Output) map[string]any {
	format := map[string]any{"name": o.Name, "schema": o.Schema, "strict": o.Strict}
	if o.Description != "" {
		format["description"] = o.Description
	}
	return format
}

// messages renders the conversation: the instructions as a system
// message, then each of req's messages.
func (p *provider) messages(req *providers.Request) ([]any, error) {
	msgs := make([]any, 0, len(req.Messages)+1)
	system, err := p.system(req)
	if err != nil {
		return nil, err
	}
	if system != "" {
		msgs = append(msgs, &httpc.ChatMessage{Role: "system", Text: system})
	}
	for _, m := range req.Messages {
		var err error
		if msgs, err = p.message(msgs, m); err != nil {
			return nil, err
		}
	}
	return msgs, nil
}

// system is the system message's text: the instructions, and in JSON
// mode what the answer must be.
func (p *provider) system(req *providers.Request) (string, error) {
	if !p.d.JSONMode || req.Output == nil {
		return req.Instructions, nil
	}
	var schema bytes.Buffer
	if err := json.Compact(&schema, req.Output.Schema); err != nil {
		return "", fault.Wrap(fault.Invalid, err, "%s: the output schema %q is not JSON", p.d.Name, req.Output.Name)
	}
	output := jsonModeInstructions(req.Output.Description, schema.Bytes())
	if req.Instructions == "" {
		return output, nil
	}
	return req.Instructions + "\n\n" + output, nil
}

// jsonModeInstructions tell the model what JSON mode cannot: the schema
// its answer must fit (the API holds it only to some JSON, and refuses a
// request whose prompt does not say "json").
func jsonModeInstructions(description string, schema []byte) string {
	text := "Answer with one JSON object, and nothing else, that fits the JSON Schema below.\n"
	if description != "" {
		text += description + "\n"
	}
	return text + string(schema)
}

// message appends one neutral message to msgs as chat messages: a tool
// message becomes one "tool" message per result.
func (p *provider) message(msgs []any, m *agentdv1.Message) ([]any, error) {
	switch m.GetRole() {
	case agentdv1.Role_ROLE_USER:
		return append(msgs, userMessage(m)), nil
	case agentdv1.Role_ROLE_ASSISTANT:
		return append(msgs, p.assistantMessage(m)), nil
	case agentdv1.Role_ROLE_TOOL:
		return toolMessages(msgs, m), nil
	}
	return nil, fault.New(fault.Invalid, "%s: a message has no role", p.d.Name)
}

// toolMessages appends a "tool" message for each of m's tool results.
func toolMessages(msgs []any, m *agentdv1.Message) []any {
	for _, part := range m.GetParts() {
		if r := part.GetToolResult(); r != nil {
			msgs = append(msgs, &httpc.ChatMessage{Role: "tool", HasToolCallID: true, ToolCallID: r.GetToolCallId(), Text: r.GetOutput()})
		}
	}
	return msgs
}

// userMessage renders a user message: its texts joined by newlines, or,
// when it holds images, a list of parts with the texts first.
func userMessage(m *agentdv1.Message) *httpc.ChatMessage {
	var texts []string
	var media []any
	for _, part := range m.GetParts() {
		switch k := part.GetKind().(type) {
		case *agentdv1.Part_Text:
			texts = append(texts, k.Text)
		case *agentdv1.Part_Media:
			if img := imagePart(k.Media); img != nil {
				media = append(media, img)
			}
		}
	}
	if len(media) == 0 {
		return &httpc.ChatMessage{Role: "user", Text: strings.Join(texts, "\n")}
	}
	content := make([]any, 0, len(texts)+len(media))
	for _, t := range texts {
		content = append(content, map[string]any{"type": "text", "text": t})
	}
	return &httpc.ChatMessage{Role: "user", Parts: append(content, media...)}
}

// assistantMessage renders an assistant message: its text (null content
// when it has none) and its tool calls, with this dialect's own reasoning
// echoed beside calls when the dialect asks for it back.
func (p *provider) assistantMessage(m *agentdv1.Message) *httpc.ChatMessage {
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
	msg.Text, msg.NullContent = strings.Join(texts, ""), len(texts) == 0
	if len(msg.ToolCalls) > 0 && p.d.EchoReasoning && len(reasoning) > 0 {
		msg.ReasoningContent, msg.HasReasoning = strings.Join(reasoning, ""), true
	}
	return msg
}

// imagePart renders an image as an image_url part; nil for other media,
// and for an image with neither a URI nor data.
func imagePart(m *agentdv1.Media) any {
	url := mediaURL(m)
	if url == "" || !strings.HasPrefix(m.GetMimeType(), "image/") {
		return nil
	}
	return map[string]any{"type": "image_url", "image_url": map[string]any{"url": url}}
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
	Refusal          *string         `json:"refusal"`
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
	t := turn{name: p.d.Name, byIndex: make(map[int]*pendingCall)}
	for {
		ev, err := r.Next()
		if errors.Is(err, io.EOF) {
			err = io.ErrUnexpectedEOF // the stream ended before [DONE]
		}
		if err != nil {
			yield(nil, httpc.StreamError(ctx, p.d.Name, err))
			return
		}
		data := bytes.TrimSpace(ev.Data)
		if string(data) == "[DONE]" {
			t.finish(yield)
			return
		}
		if !t.chunk(data, yield) {
			return
		}
	}
}

// turn is what read gathers of one turn's chunks: the tool calls, yielded
// whole once the stream is done, the usage, the stop reason and the
// response's id and model.
type turn struct {
	name string // the dialect's, for errors
	// The calls in the order they began; byIndex holds the one each wire
	// index is filling. A fragment with a new id at a used index begins
	// another call: some compatible servers send every parallel call at
	// index 0.
	calls   []*pendingCall
	byIndex map[int]*pendingCall
	usage   *agentdv1.Usage
	stop    agentdv1.StopReason
	refused bool               // the model refused: the turn stops as filtered
	info    providers.Response // every chunk repeats the id and model
}

// chunk takes in one chunk, yielding its deltas; false when the turn
// ends there, failed or no longer wanted.
func (t *turn) chunk(data []byte, yield func(providers.Event, error) bool) bool {
	var c chunk
	if err := decodeChunk(data, &c); err != nil {
		yield(nil, fault.Wrap(fault.Unavailable, err, "%s: the response stream holds invalid JSON", t.name))
		return false
	}
	if len(c.Error) > 0 && string(c.Error) != "null" {
		msg, typ := httpc.ErrorObject(c.Error)
		yield(nil, httpc.Classify(t.name, 0, typ, msg))
		return false
	}
	t.info.ID = cmp.Or(c.ID, t.info.ID)
	t.info.Model = cmp.Or(c.Model, t.info.Model)
	for i := range c.Choices {
		if !t.choice(&c.Choices[i], yield) {
			return false
		}
	}
	if c.Usage != nil {
		t.usage = usage(c.Usage)
	}
	return true
}

// choice yields a choice's reasoning and text, gathers its tool call
// fragments and notes its finish reason.
func (t *turn) choice(ch *chunkChoice, yield func(providers.Event, error) bool) bool {
	d := &ch.Delta
	if !t.texts(d, yield) {
		return false
	}
	for i := range d.ToolCalls {
		t.toolCall(&d.ToolCalls[i])
	}
	return ch.FinishReason == nil || t.finishReason(*ch.FinishReason, yield)
}

// texts yields a delta's reasoning, text and refusal. A refusal is what
// the model says in place of an answer: the user reads it as text, and
// the turn stops as filtered, so that it is never taken for the answer.
func (t *turn) texts(d *chunkDelta, yield func(providers.Event, error) bool) bool {
	if text := d.reasoning(); text != "" && !yield(&providers.Reasoning{Text: text}, nil) {
		return false
	}
	if d.Content != nil && *d.Content != "" && !yield(&providers.TextDelta{Text: *d.Content}, nil) {
		return false
	}
	if d.Refusal == nil || *d.Refusal == "" {
		return true
	}
	t.refused = true
	return yield(&providers.TextDelta{Text: *d.Refusal}, nil)
}

// finishReason notes the reason a choice finished; "error" fails the turn.
func (t *turn) finishReason(reason string, yield func(providers.Event, error) bool) bool {
	t.stop = stopReasons[reason]
	t.info.FinishReason = reason
	if reason == "error" {
		yield(nil, httpc.Classify(t.name, 0, "", "the provider ended the response with an error"))
		return false
	}
	return true
}

// reasoning is the delta's reasoning text: DeepSeek's reasoning_content
// when it has some, else OpenRouter's and Ollama's reasoning.
func (d *chunkDelta) reasoning() string {
	if d.ReasoningContent != nil && *d.ReasoningContent != "" {
		return *d.ReasoningContent
	}
	if d.Reasoning != nil {
		return *d.Reasoning
	}
	return ""
}

// toolCall adds a fragment to the call its index is filling, or begins
// a call.
func (t *turn) toolCall(tc *chunkToolCall) {
	pc := t.byIndex[tc.Index]
	if pc == nil || tc.ID != "" && pc.id != "" && tc.ID != pc.id {
		pc = &pendingCall{}
		t.byIndex[tc.Index] = pc
		t.calls = append(t.calls, pc)
	}
	pc.id = cmp.Or(tc.ID, pc.id)
	pc.name = cmp.Or(tc.Function.Name, pc.name)
	pc.args.WriteString(tc.Function.Arguments)
}

// usage converts a chunk's usage. prompt_tokens includes the cached
// ones; input_tokens counts those billed at the full rate.
func usage(u *chunkUsage) *agentdv1.Usage {
	usage := &agentdv1.Usage{OutputTokens: u.CompletionTokens}
	if u.PromptTokensDetails != nil {
		usage.CacheReadInputTokens = u.PromptTokensDetails.CachedTokens
	}
	if u.PromptCacheHitTokens > 0 {
		usage.CacheReadInputTokens = u.PromptCacheHitTokens
	}
	usage.InputTokens = max(u.PromptTokens-usage.CacheReadInputTokens, 0)
	return usage
}

// finish yields what the turn gathered once its stream is done: the tool
// calls, the usage, then the stop.
func (t *turn) finish(yield func(providers.Event, error) bool) {
	for _, pc := range t.calls {
		call := &agentdv1.ToolCall{Id: pc.id, Name: pc.name, Arguments: providers.CompactArguments([]byte(pc.args.String()))}
		if !yield(&providers.ToolCall{Call: call}, nil) {
			return
		}
	}
	if t.usage != nil && !yield(&providers.Usage{Usage: t.usage}, nil) {
		return
	}
	stop := t.stop
	if t.refused {
		stop = agentdv1.StopReason_STOP_REASON_CONTENT_FILTER
	}
	yield(&providers.Stop{Reason: stop, Response: t.info}, nil)
}

// stopReasons maps a choice's finish_reason to the turn's stop reason;
// any other is unspecified.
var stopReasons = map[string]agentdv1.StopReason{
	"stop":           agentdv1.StopReason_STOP_REASON_END_TURN,
	"tool_calls":     agentdv1.StopReason_STOP_REASON_END_TURN,
	"function_call":  agentdv1.StopReason_STOP_REASON_END_TURN,
	"length":         agentdv1.StopReason_STOP_REASON_MAX_TOKENS,
	"content_filter": agentdv1.StopReason_STOP_REASON_CONTENT_FILTER,
}

// The dialects.

// OpenAI is OpenAI's Chat Completions API ("openai"). Options:
// "organization" and "project" set OpenAI-Organization and OpenAI-Project.
func OpenAI(s providers.Settings) providers.Provider {
	return New(Dialect{
		Name: "openai", DefaultBaseURL: "https://api.openai.com/v1",
		Headers: httpc.OpenAIHeaders,
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
			deployment := cmp.Or(s.Options["deployment"], model)
			if deployment == "" {
				return "", nil, fault.New(fault.Invalid, "azure: no deployment: set the agent's model or providers.azure.options.deployment")
			}
			version := cmp.Or(s.Options["api_version"], "2024-10-21")
			return "/openai/deployments/" + url.PathEscape(deployment) + "/chat/completions", url.Values{"api-version": {version}}, nil
		},
	}, s)
}

// DeepSeek is DeepSeek's API ("deepseek"). Its thinking mode requires an
// assistant turn that called tools to carry its reasoning_content back;
// it has JSON mode, not JSON Schemas.
func DeepSeek(s providers.Settings) providers.Provider {
	return New(Dialect{
		Name: "deepseek", DefaultBaseURL: "https://api.deepseek.com",
		EchoReasoning: true, JSONMode: true,
	}, s)
}

// OpenRouter is OpenRouter ("openrouter"). Options "referer" and "title"
// set its attribution headers (HTTP-Referer, X-Title).
func OpenRouter(s providers.Settings) providers.Provider {
	return New(Dialect{
		Name: "openrouter", DefaultBaseURL: "https://openrouter.ai/api/v1",
		RequireParameters: true,
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
