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
package gemini

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
	return providers.Capabilities{ToolErrorFlag: true}
}

// ValidateOptions refuses options that would replace what agentd builds.
func (p *provider) ValidateOptions(options map[string]any) []providers.Problem {
	return httpc.ReservedOptions(options, httpc.SetByAgentd, "contents")
}

func (p *provider) Stream(ctx context.Context, req *providers.Request) iter.Seq2[providers.Event, error] {
	return func(yield func(providers.Event, error) bool) {
		if p.s.APIKey == "" {
			yield(nil, httpc.MissingKey(name, p.s))
			return
		}
		model := strings.TrimPrefix(req.Model, "models/")
		if model == "" {
			yield(nil, fault.New(fault.Invalid, "gemini: a model is required, e.g. gemini-2.5-flash"))
			return
		}
		// Gemini does not echo keys, but proxies and gateways in front of
		// it have been seen to.
		yield = httpc.RedactErrors(yield, p.s.APIKey)
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
		body["tools"] = []any{map[string]any{"functionDeclarations": decls}}
	}
	httpc.MergeOptions(body, req.Options, "tools")
	if req.MaxTokens > 0 {
		httpc.SetNested(body, "generationConfig", "maxOutputTokens", req.MaxTokens)
	}
	return body
}

// content converts one neutral message into a Gemini content, or nil when
// nothing of it goes on the wire (Gemini refuses a content without parts).
func content(m *agentdv1.Message) map[string]any {
	var parts []any
	role := "user"
	switch m.GetRole() {
	case agentdv1.Role_ROLE_USER:
		for _, part := range m.GetParts() {
			switch k := part.GetKind().(type) {
			case *agentdv1.Part_Text:
				parts = append(parts, map[string]any{"text": k.Text})
			case *agentdv1.Part_Media:
				if u := k.Media.GetUri(); u != "" {
					parts = append(parts, map[string]any{"fileData": map[string]any{"mimeType": k.Media.GetMimeType(), "fileUri": u}})
				} else {
					parts = append(parts, map[string]any{"inlineData": map[string]any{
						"mimeType": k.Media.GetMimeType(), "data": base64.StdEncoding.EncodeToString(k.Media.GetData()),
					}})
				}
			}
		}
	case agentdv1.Role_ROLE_ASSISTANT:
		role = "model"
		parts = modelParts(m.GetParts())
	case agentdv1.Role_ROLE_TOOL:
		// One content answers every call of the previous turn: Gemini
		// refuses a turn whose response count differs from its call count.
		for _, part := range m.GetParts() {
			if r := part.GetToolResult(); r != nil {
				parts = append(parts, map[string]any{"functionResponse": map[string]any{
					"id": r.GetToolCallId(), "name": r.GetName(), "response": response(r),
				}})
			}
		}
	}
	if len(parts) == 0 {
		return nil
	}
	return map[string]any{"role": role, "parts": parts}
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
	if len(pending) > 0 && len(parts) > 0 {
		last := parts[len(parts)-1].(map[string]any)
		if _, ok := last["thoughtSignature"]; !ok {
			last["thoughtSignature"] = pending[len(pending)-1]
		}
	}
	return parts
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
			Parts []struct {
				Text             string `json:"text"`
				Thought          bool   `json:"thought"`
				ThoughtSignature string `json:"thoughtSignature"`
				FunctionCall     *struct {
					ID   string          `json:"id"`
					Name string          `json:"name"`
					Args json.RawMessage `json:"args"`
				} `json:"functionCall"`
			} `json:"parts"`
		} `json:"content"`
		FinishReason  string `json:"finishReason"`
		FinishMessage string `json:"finishMessage"`
	} `json:"candidates"`
	PromptFeedback *struct {
		BlockReason        string `json:"blockReason"`
		BlockReasonMessage string `json:"blockReasonMessage"`
	} `json:"promptFeedback"`
	UsageMetadata *struct {
		PromptTokenCount        int64 `json:"promptTokenCount"`
		CandidatesTokenCount    int64 `json:"candidatesTokenCount"`
		ThoughtsTokenCount      int64 `json:"thoughtsTokenCount"`
		CachedContentTokenCount int64 `json:"cachedContentTokenCount"`
		ToolUsePromptTokenCount int64 `json:"toolUsePromptTokenCount"`
	} `json:"usageMetadata"`
	ResponseID   string          `json:"responseId"`
	ModelVersion string          `json:"modelVersion"`
	Error        json.RawMessage `json:"error"`
}

// read parses the SSE stream of one turn and yields its events; ids names
// its tool calls.
func read(ctx context.Context, body io.Reader, ids *httpc.CallIDs, yield func(providers.Event, error) bool) {
	r := sse.NewReader(body)
	defer r.Close() // its buffer goes back to the pool; no event shares it
	var usage *agentdv1.Usage
	var info providers.Response // every chunk repeats the id and model
	finish, finishMessage := "", ""
	for {
		ev, err := r.Next()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			yield(nil, httpc.StreamError(ctx, name, err))
			return
		}
		data := bytes.TrimSpace(ev.Data)
		if len(data) == 0 {
			continue
		}
		if data[0] == '[' { // an error, array-wrapped as on the HTTP error path
			msg, typ := errorMessage(data)
			yield(nil, httpc.Classify(name, 0, typ, msg))
			return
		}
		var c chunk
		if err := json.Unmarshal(data, &c); err != nil {
			yield(nil, fault.Wrap(fault.Unavailable, err, "gemini: the response stream holds invalid JSON"))
			return
		}
		if len(c.Error) > 0 && string(c.Error) != "null" {
			msg, typ := errorObject(c.Error)
			yield(nil, httpc.Classify(name, 0, typ, msg))
			return
		}
		if pf := c.PromptFeedback; pf != nil && pf.BlockReason != "" {
			msg := pf.BlockReasonMessage
			if msg == "" {
				msg = "the prompt was blocked"
			}
			yield(nil, fault.New(fault.Invalid, "gemini: %s (%s)", msg, pf.BlockReason).
				WithInfo("PROVIDER_PROMPT_BLOCKED", map[string]string{"provider": name, "block_reason": pf.BlockReason}))
			return
		}
		if c.ResponseID != "" {
			info.ID = c.ResponseID
		}
		if c.ModelVersion != "" {
			info.Model = c.ModelVersion
		}
		if u := c.UsageMetadata; u != nil {
			// promptTokenCount includes the cached tokens; input_tokens
			// counts those billed at the full rate.
			usage = &agentdv1.Usage{
				InputTokens:          u.PromptTokenCount - u.CachedContentTokenCount + u.ToolUsePromptTokenCount,
				OutputTokens:         u.CandidatesTokenCount + u.ThoughtsTokenCount,
				CacheReadInputTokens: u.CachedContentTokenCount,
			}
		}
		if len(c.Candidates) == 0 {
			continue
		}
		cand := c.Candidates[0]
		for _, part := range cand.Content.Parts {
			var events []providers.Event
			switch {
			case part.FunctionCall != nil:
				if part.ThoughtSignature != "" {
					events = append(events, &providers.Reasoning{Signature: part.ThoughtSignature})
				}
				events = append(events, &providers.ToolCall{Call: &agentdv1.ToolCall{
					Id: ids.Next(part.FunctionCall.ID), Name: part.FunctionCall.Name, Arguments: providers.CompactArguments(part.FunctionCall.Args),
				}})
			case part.Thought:
				if part.Text != "" || part.ThoughtSignature != "" {
					events = append(events, &providers.Reasoning{Text: part.Text, Signature: part.ThoughtSignature})
				}
			default:
				if part.ThoughtSignature != "" {
					events = append(events, &providers.Reasoning{Signature: part.ThoughtSignature})
				}
				if part.Text != "" {
					events = append(events, &providers.TextDelta{Text: part.Text})
				}
			}
			for _, e := range events {
				if !yield(e, nil) {
					return
				}
			}
		}
		if cand.FinishReason != "" {
			finish, finishMessage = cand.FinishReason, cand.FinishMessage
		}
	}
	if finish == "" {
		yield(nil, httpc.StreamError(ctx, name, io.ErrUnexpectedEOF))
		return
	}
	switch finish {
	case "MALFORMED_FUNCTION_CALL", "UNEXPECTED_TOOL_CALL", "TOO_MANY_TOOL_CALLS":
		// The turn produced no usable call; ending it as an answer would
		// hand the user an empty reply. Asking again may well work.
		msg := finishMessage
		if msg == "" {
			msg = "the model's function call could not be used"
		}
		yield(nil, fault.New(fault.Unavailable, "gemini: %s (%s)", msg, finish).
			WithInfo("PROVIDER_BAD_TOOL_CALL", map[string]string{"provider": name, "finish_reason": finish}))
		return
	}
	if usage != nil && !yield(&providers.Usage{Usage: usage}, nil) {
		return
	}
	info.FinishReason = finish
	yield(&providers.Stop{Reason: stopReason(finish), Response: info}, nil)
}

func stopReason(r string) agentdv1.StopReason {
	switch r {
	case "STOP":
		return agentdv1.StopReason_STOP_REASON_END_TURN
	case "MAX_TOKENS":
		return agentdv1.StopReason_STOP_REASON_MAX_TOKENS
	case "SAFETY", "RECITATION", "BLOCKLIST", "PROHIBITED_CONTENT", "SPII",
		"IMAGE_SAFETY", "IMAGE_PROHIBITED_CONTENT", "IMAGE_RECITATION":
		return agentdv1.StopReason_STOP_REASON_CONTENT_FILTER
	}
	return agentdv1.StopReason_STOP_REASON_UNSPECIFIED
}
