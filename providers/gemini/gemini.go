// Package gemini is the adapter of Google's native Gemini API ("gemini"):
// POST {base}/v1beta/models/{model}:streamGenerateContent?alt=sse with the
// key in x-goog-api-key, answered by Server-Sent Events, one
// GenerateContentResponse per event, ending when the connection closes.
//
// Gemini runs no MCP server for agentd, so every MCP server of its agents
// runs in agentd's bridge. A failed tool result is flagged the way Gemini
// documents it: the functionResponse's response holds an "error" key
// instead of "result". Tool results carry no media.
//
// Gemini 3 validates the thought signatures of the function calls it
// made: each one arrives as a Reasoning signature just before its call,
// and goes back on that functionCall part when the turn is replayed.
//
// A request's Output goes in generationConfig as responseMimeType
// "application/json" and responseJsonSchema, replacing any schema the
// provider options set there: on Gemini 3 and later with function tools
// or without, on Gemini 2.x only in a request without them
// (Capabilities.Output). The answer streams as text; a safety stop
// (finishReason SAFETY and the like) is CONTENT_FILTER.
package gemini

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

const (
	name           = "gemini"
	defaultBaseURL = "https://generativelanguage.googleapis.com"
)

type provider struct {
	s      providers.Settings // its APIKey is redacted from errors
	client *httpc.Client
}

// New returns the "gemini" provider.
func New(s providers.Settings) providers.Provider {
	h := make(http.Header)
	h.Set("x-goog-api-key", s.APIKey)
	c := httpc.New(name, s, defaultBaseURL, h)
	c.Query = url.Values{"alt": {"sse"}}
	c.ErrorMessage, c.Retryable = errorMessage, retryable
	return &provider{s: s, client: c}
}

// retryable lists the statuses Gemini documents as transient: 429
// RESOURCE_EXHAUSTED, 500 INTERNAL, 503 UNAVAILABLE, 504 DEADLINE_EXCEEDED.
// Others, 409 among them, fail the same way when repeated.
func retryable(status int) bool {
	switch status {
	case http.StatusTooManyRequests, http.StatusInternalServerError, http.StatusServiceUnavailable, http.StatusGatewayTimeout:
		return true
	}
	return false
}

// errorMessage reads Gemini's {"error": {"code", "message", "status",
// "details"}}, alone or as the first element of an array (as the
// streaming endpoints send it, over HTTP and within the stream). An
// invalid key is a 400 whose details say API_KEY_INVALID; it is reported
// as an authentication error, which is what it is.
func errorMessage(body []byte) (message, errType string) {
	body = bytes.TrimSpace(body)
	if len(body) > 0 && body[0] == '[' {
		var arr []json.RawMessage
		if json.Unmarshal(body, &arr) == nil && len(arr) > 0 {
			body = arr[0]
		}
	}
	var e struct {
		Error json.RawMessage `json:"error"`
	}
	if json.Unmarshal(body, &e) != nil || len(e.Error) == 0 {
		return httpc.OpenAIError(body) // not JSON, or no error member: the body itself
	}
	return errorObject(e.Error)
}

// errorObject reads an "error" member, from a response body or a stream
// chunk: an invalid key (reason API_KEY_INVALID, whatever the status) is
// an authentication error.
func errorObject(raw json.RawMessage) (message, errType string) {
	message, errType = httpc.ErrorObject(raw)
	var e struct {
		Details []struct {
			Reason string `json:"reason"`
		} `json:"details"`
	}
	if json.Unmarshal(raw, &e) == nil {
		for _, d := range e.Details {
			if d.Reason == "API_KEY_INVALID" {
				return message, "authentication_error: " + d.Reason
			}
		}
	}
	return message, errType
}

// CloseIdleConnections closes the adapter's idle connections.
func (p *provider) CloseIdleConnections() { p.client.CloseIdleConnections() }

func (p *provider) Name() string { return name }

func (p *provider) Capabilities() providers.Capabilities {
	return providers.Capabilities{ToolErrorFlag: true, Output: takesOutput}
}

// ValidateOptions refuses options that would replace what agentd builds.
func (p *provider) ValidateOptions(options map[string]any) []providers.Problem {
	return httpc.ReservedOptions(options, httpc.SetByAgentd, "contents")
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
		model := strings.TrimPrefix(req.Model, "models/")
		if model == "" {
			yield(nil, fault.New(fault.Invalid, "gemini: a model is required, e.g. gemini-2.5-flash"))
			return
		}
		// Gemini does not echo keys, but proxies and gateways in front of
		// it have been seen to.
		yield = httpc.RedactErrors(yield, req, p.s.APIKey)
		body := buildBody(req)
		resp, err := p.client.Do(ctx, http.MethodPost, "/v1beta/models/"+url.PathEscape(model)+":streamGenerateContent", body)
		if err != nil {
			yield(nil, err)
			return
		}
		defer httpc.Finish(ctx, resp.Body)
		read(ctx, resp.Body, httpc.NewCallIDs(req.Messages), yield)
	}
}

// buildBody builds the GenerateContentRequest, provider options merged in
// ("generationConfig", "toolConfig", "safetySettings", more "tools", ...).
func buildBody(req *providers.Request) map[string]any {
	contents := []any{}
	for _, m := range req.Messages {
		if c := content(m); c != nil {
			contents = append(contents, c)
		}
	}
	body := map[string]any{"contents": contents}
	if req.Instructions != "" {
		body["systemInstruction"] = map[string]any{"parts": []any{map[string]any{"text": req.Instructions}}}
	}
	if len(req.Tools) > 0 {
		body["tools"] = []any{map[string]any{"functionDeclarations": functionDeclarations(req)}}
	}
	httpc.MergeOptions(body, req.Options, "tools")
	if req.MaxTokens > 0 {
		httpc.SetNested(body, "generationConfig", "maxOutputTokens", req.MaxTokens)
	}
	setOutput(body, req.Output)
	return body
}

// functionDeclarations declares req's function tools.
func functionDeclarations(req *providers.Request) []any {
	var decls []any
	for i, t := range req.Tools {
		// parametersJsonSchema takes full JSON Schema; "parameters"
		// takes only an OpenAPI subset that MCP tool schemas exceed.
		d := map[string]any{"name": t.GetName(), "parametersJsonSchema": req.Parameters(i)}
		if t.GetDescription() != "" {
			d["description"] = t.GetDescription()
		}
		decls = append(decls, d)
	}
	return decls
}

// content converts one neutral message into a Gemini content, or nil when
// nothing of it goes on the wire (Gemini refuses a content without parts).
func content(m *agentdv1.Message) map[string]any {
	var parts []any
	role := "user"
	switch m.GetRole() {
	case agentdv1.Role_ROLE_USER:
		parts = userParts(m.GetParts())
	case agentdv1.Role_ROLE_ASSISTANT:
		role = "model"
		parts = modelParts(m.GetParts())
	case agentdv1.Role_ROLE_TOOL:
		parts = responseParts(m.GetParts())
	}
	if len(parts) == 0 {
		return nil
	}
	return map[string]any{"role": role, "parts": parts}
}

// userParts converts a user message: text, and media by URI or inline.
func userParts(in []*agentdv1.Part) []any {
	var parts []any
	for _, part := range in {
		switch k := part.GetKind().(type) {
		case *agentdv1.Part_Text:
			parts = append(parts, map[string]any{"text": k.Text})
		case *agentdv1.Part_Media:
			parts = append(parts, mediaPart(k.Media))
		}
	}
	return parts
}

func mediaPart(m *agentdv1.Media) map[string]any {
	if u := m.GetUri(); u != "" {
		return map[string]any{"fileData": map[string]any{"mimeType": m.GetMimeType(), "fileUri": u}}
	}
	return map[string]any{"inlineData": map[string]any{
		"mimeType": m.GetMimeType(), "data": base64.StdEncoding.EncodeToString(m.GetData()),
	}}
}

// responseParts converts a tool message. One content answers every call
// of the previous turn: Gemini refuses a turn whose response count
// differs from its call count.
func responseParts(in []*agentdv1.Part) []any {
	var parts []any
	for _, part := range in {
		if r := part.GetToolResult(); r != nil {
			parts = append(parts, map[string]any{"functionResponse": map[string]any{
				"id": r.GetToolCallId(), "name": r.GetName(), "response": response(r),
			}})
		}
	}
	return parts
}

// modelParts converts an assistant message. The tool loop keeps a turn's
// reasoning ahead of its text and calls, so a signature waits for the
// next functionCall part, the part Gemini attached it to; one with no call
// after it (a text-only turn) goes on the last part, where Gemini puts
// such signatures. Thought text is not sent back: Gemini needs only the
// signatures.
func modelParts(in []*agentdv1.Part) []any {
	var parts []any
	var pending []string
	for _, part := range in {
		switch k := part.GetKind().(type) {
		case *agentdv1.Part_Reasoning:
			if k.Reasoning.GetProvider() == name && k.Reasoning.GetSignature() != "" {
				pending = append(pending, k.Reasoning.GetSignature())
			}
		case *agentdv1.Part_Text:
			parts = append(parts, map[string]any{"text": k.Text})
		case *agentdv1.Part_ToolCall:
			p := map[string]any{"functionCall": map[string]any{
				"id": k.ToolCall.GetId(), "name": k.ToolCall.GetName(), "args": httpc.ArgumentsObject(k.ToolCall.GetArguments()),
			}}
			if len(pending) > 0 {
				p["thoughtSignature"] = pending[0]
				pending = pending[1:]
			}
			parts = append(parts, p)
		}
	}
	signLast(parts, pending)
	return parts
}

// signLast puts the last of the signatures no call took on the last part,
// unless that part has one.
func signLast(parts []any, pending []string) {
	if len(pending) == 0 || len(parts) == 0 {
		return
	}
	last := parts[len(parts)-1].(map[string]any)
	if _, ok := last["thoughtSignature"]; !ok {
		last["thoughtSignature"] = pending[len(pending)-1]
	}
}

// response is a functionResponse's response object: {"result": output}
// or, for a failed call, {"error": message}, the output parsed when it is
// JSON so the model sees structure rather than an escaped string.
func response(r *agentdv1.ToolResult) map[string]any {
	out := parseJSON(r.GetOutput())
	if !r.GetIsError() {
		return map[string]any{"result": out}
	}
	if obj, ok := out.(map[string]any); ok {
		if _, has := obj["error"]; has {
			return obj
		}
	}
	return map[string]any{"error": out}
}

// parseJSON parses s, or returns it as a string when it is not JSON.
func parseJSON(s string) any {
	dec := json.NewDecoder(strings.NewReader(s))
	dec.UseNumber() // large integers pass through exactly
	var v any
	if dec.Decode(&v) != nil || dec.More() {
		return s
	}
	return v
}

// chunk is one GenerateContentResponse of the stream, or an error.
type chunk struct {
	Candidates []struct {
		Content struct {
			Parts []chunkPart `json:"parts"`
		} `json:"content"`
		FinishReason  string `json:"finishReason"`
		FinishMessage string `json:"finishMessage"`
	} `json:"candidates"`
	PromptFeedback *promptFeedback `json:"promptFeedback"`
	UsageMetadata  *usageMetadata  `json:"usageMetadata"`
	ResponseID     string          `json:"responseId"`
	ModelVersion   string          `json:"modelVersion"`
	Error          json.RawMessage `json:"error"`
}

type chunkPart struct {
	Text             string `json:"text"`
	Thought          bool   `json:"thought"`
	ThoughtSignature string `json:"thoughtSignature"`
	FunctionCall     *struct {
		ID   string          `json:"id"`
		Name string          `json:"name"`
		Args json.RawMessage `json:"args"`
	} `json:"functionCall"`
}

type promptFeedback struct {
	BlockReason        string `json:"blockReason"`
	BlockReasonMessage string `json:"blockReasonMessage"`
}

type usageMetadata struct {
	PromptTokenCount        int64 `json:"promptTokenCount"`
	CandidatesTokenCount    int64 `json:"candidatesTokenCount"`
	ThoughtsTokenCount      int64 `json:"thoughtsTokenCount"`
	CachedContentTokenCount int64 `json:"cachedContentTokenCount"`
	ToolUsePromptTokenCount int64 `json:"toolUsePromptTokenCount"`
}

// read parses the SSE stream of one turn and yields its events; ids names
// its tool calls.
func read(ctx context.Context, body io.Reader, ids *httpc.CallIDs, yield func(providers.Event, error) bool) {
	r := sse.NewReader(body)
	defer r.Close() // its buffer goes back to the pool; no event shares it
	t := turn{ids: ids}
	for {
		ev, err := r.Next()
		if errors.Is(err, io.EOF) {
			t.end(ctx, yield)
			return
		}
		if err != nil {
			yield(nil, httpc.StreamError(ctx, name, err))
			return
		}
		data := bytes.TrimSpace(ev.Data)
		if len(data) > 0 && !t.chunk(data, yield) {
			return
		}
	}
}

// turn is what read gathers of one turn's chunks: the usage, the
// response's id and model, and how the turn finished.
type turn struct {
	ids                   *httpc.CallIDs
	usage                 *agentdv1.Usage
	info                  providers.Response // every chunk repeats the id and model
	finish, finishMessage string
}

// chunk takes in one chunk, yielding its parts' events; false when the
// turn ends there, failed or no longer wanted.
func (t *turn) chunk(data []byte, yield func(providers.Event, error) bool) bool {
	var c chunk
	if err := decodeChunk(data, &c); err != nil {
		yield(nil, err)
		return false
	}
	t.info.ID = cmp.Or(c.ResponseID, t.info.ID)
	t.info.Model = cmp.Or(c.ModelVersion, t.info.Model)
	if u := c.UsageMetadata; u != nil {
		t.usage = u.usage()
	}
	if len(c.Candidates) == 0 {
		return true
	}
	cand := &c.Candidates[0]
	for i := range cand.Content.Parts {
		if !t.part(&cand.Content.Parts[i], yield) {
			return false
		}
	}
	if cand.FinishReason != "" {
		t.finish, t.finishMessage = cand.FinishReason, cand.FinishMessage
	}
	return true
}

// decodeChunk decodes one event's data into c; an error the stream
// carries (array-wrapped as on the HTTP error path, or in an error
// member) and a blocked prompt are the errors returned.
func decodeChunk(data []byte, c *chunk) error {
	if data[0] == '[' {
		msg, typ := errorMessage(data)
		return httpc.Classify(name, 0, typ, msg)
	}
	if err := json.Unmarshal(data, c); err != nil {
		return fault.Wrap(fault.Unavailable, err, "gemini: the response stream holds invalid JSON")
	}
	if len(c.Error) > 0 && string(c.Error) != "null" {
		msg, typ := errorObject(c.Error)
		return httpc.Classify(name, 0, typ, msg)
	}
	return c.PromptFeedback.err()
}

// err is the error of a prompt Gemini blocked; nil when it did not.
func (pf *promptFeedback) err() error {
	if pf == nil || pf.BlockReason == "" {
		return nil
	}
	msg := cmp.Or(pf.BlockReasonMessage, "the prompt was blocked")
	return fault.New(fault.Invalid, "gemini: %s (%s)", msg, pf.BlockReason).
		WithInfo("PROVIDER_PROMPT_BLOCKED", map[string]string{"provider": name, "block_reason": pf.BlockReason})
}

// usage converts the usage metadata. promptTokenCount includes the cached
// tokens; input_tokens counts those billed at the full rate.
func (u *usageMetadata) usage() *agentdv1.Usage {
	return &agentdv1.Usage{
		InputTokens:          u.PromptTokenCount - u.CachedContentTokenCount + u.ToolUsePromptTokenCount,
		OutputTokens:         u.CandidatesTokenCount + u.ThoughtsTokenCount,
		CacheReadInputTokens: u.CachedContentTokenCount,
	}
}

// part yields a part's events: a function call after the signature it
// carries, a thought, or text after a signature.
func (t *turn) part(p *chunkPart, yield func(providers.Event, error) bool) bool {
	switch {
	case p.FunctionCall != nil:
		return yieldSignature(p.ThoughtSignature, yield) && yield(&providers.ToolCall{Call: &agentdv1.ToolCall{
			Id: t.ids.Next(p.FunctionCall.ID), Name: p.FunctionCall.Name, Arguments: providers.CompactArguments(p.FunctionCall.Args),
		}}, nil)
	case p.Thought:
		return p.Text == "" && p.ThoughtSignature == "" ||
			yield(&providers.Reasoning{Text: p.Text, Signature: p.ThoughtSignature}, nil)
	}
	return yieldSignature(p.ThoughtSignature, yield) && (p.Text == "" || yield(&providers.TextDelta{Text: p.Text}, nil))
}

// yieldSignature yields a thought signature as Reasoning, if there is one.
func yieldSignature(sig string, yield func(providers.Event, error) bool) bool {
	return sig == "" || yield(&providers.Reasoning{Signature: sig}, nil)
}

// end yields the turn's end once the stream is done: its usage and stop,
// or the error of a stream cut short or of a call the model botched.
func (t *turn) end(ctx context.Context, yield func(providers.Event, error) bool) {
	if t.finish == "" {
		yield(nil, httpc.StreamError(ctx, name, io.ErrUnexpectedEOF))
		return
	}
	if badToolCall[t.finish] {
		// The turn produced no usable call; ending it as an answer would
		// hand the user an empty reply. Asking again may well work.
		msg := cmp.Or(t.finishMessage, "the model's function call could not be used")
		yield(nil, fault.New(fault.Unavailable, "gemini: %s (%s)", msg, t.finish).
			WithInfo("PROVIDER_BAD_TOOL_CALL", map[string]string{"provider": name, "finish_reason": t.finish}))
		return
	}
	if t.usage != nil && !yield(&providers.Usage{Usage: t.usage}, nil) {
		return
	}
	t.info.FinishReason = t.finish
	yield(&providers.Stop{Reason: stopReasons[t.finish], Response: t.info}, nil)
}

// badToolCall are the finish reasons of a turn whose call cannot be used.
var badToolCall = map[string]bool{"MALFORMED_FUNCTION_CALL": true, "UNEXPECTED_TOOL_CALL": true, "TOO_MANY_TOOL_CALLS": true}

// stopReasons maps Gemini's finish reasons; any other is unspecified.
var stopReasons = map[string]agentdv1.StopReason{
	"STOP":                     agentdv1.StopReason_STOP_REASON_END_TURN,
	"MAX_TOKENS":               agentdv1.StopReason_STOP_REASON_MAX_TOKENS,
	"SAFETY":                   agentdv1.StopReason_STOP_REASON_CONTENT_FILTER,
	"RECITATION":               agentdv1.StopReason_STOP_REASON_CONTENT_FILTER,
	"BLOCKLIST":                agentdv1.StopReason_STOP_REASON_CONTENT_FILTER,
	"PROHIBITED_CONTENT":       agentdv1.StopReason_STOP_REASON_CONTENT_FILTER,
	"SPII":                     agentdv1.StopReason_STOP_REASON_CONTENT_FILTER,
	"IMAGE_SAFETY":             agentdv1.StopReason_STOP_REASON_CONTENT_FILTER,
	"IMAGE_PROHIBITED_CONTENT": agentdv1.StopReason_STOP_REASON_CONTENT_FILTER,
	"IMAGE_RECITATION":         agentdv1.StopReason_STOP_REASON_CONTENT_FILTER,
}
