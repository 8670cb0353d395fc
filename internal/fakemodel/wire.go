package fakemodel

import (
	"encoding/json"
	"net/http"
	"time"
)

// chatRequest is what the fake reads of a request in the shape OpenAI's
// Chat Completions and Ollama's chat share: messages with roles, tool
// results as "tool" messages, and function tools.
type chatRequest struct {
	Model    string `json:"model"`
	Messages []struct {
		Role    string          `json:"role"`
		Content json.RawMessage `json:"content"`
	} `json:"messages"`
	Tools []struct {
		Function struct {
			Name       string          `json:"name"`
			Parameters json.RawMessage `json:"parameters"`
		} `json:"function"`
	} `json:"tools"`
}

// turn is what the request asks of the fake.
func (req *chatRequest) turn() turn {
	var t turn
	for _, tl := range req.Tools {
		t.tools = append(t.tools, tool{name: tl.Function.Name, schema: tl.Function.Parameters})
	}
	for _, m := range req.Messages {
		switch m.Role {
		case "user":
			t.said, t.answered, t.result = textOf(m.Content), false, ""
		case "tool":
			t.answered, t.result = true, t.result+textOf(m.Content)
		}
	}
	return t
}

// openAI answers a Chat Completions request, streamed.
func openAI(w http.ResponseWriter, r *http.Request) {
	var req chatRequest
	if !decode(w, r, &req) {
		return
	}
	t := req.turn()
	w.Header().Set("Content-Type", "text/event-stream")
	chunk := func(delta map[string]any, finish any) map[string]any {
		return map[string]any{"id": "chatcmpl-fake", "object": "chat.completion.chunk", "created": time.Now().Unix(), "model": req.Model,
			"choices": []any{map[string]any{"index": 0, "delta": delta, "finish_reason": finish}}}
	}
	rep, finish := answer(t), "stop"
	if c := rep.call; c != nil {
		args, _ := json.Marshal(c.args)
		sse(w, "", chunk(map[string]any{"role": "assistant", "tool_calls": []any{map[string]any{
			"index": 0, "id": c.id, "type": "function", "function": map[string]any{"name": c.name, "arguments": string(args)}}}}, nil))
		finish = "tool_calls"
	}
	for _, word := range words(rep.text) {
		sse(w, "", chunk(map[string]any{"content": word}, nil))
	}
	sse(w, "", chunk(map[string]any{}, finish))
	sse(w, "", map[string]any{"id": "chatcmpl-fake", "object": "chat.completion.chunk", "model": req.Model, "choices": []any{},
		"usage": map[string]any{"prompt_tokens": 20, "completion_tokens": 10, "total_tokens": 30}})
	_, _ = w.Write([]byte("data: [DONE]\n\n"))
}

// anthropic answers a Messages request, streamed.
func anthropic(w http.ResponseWriter, r *http.Request) {
	var req struct {
		Model    string `json:"model"`
		Messages []struct {
			Role    string          `json:"role"`
			Content json.RawMessage `json:"content"`
		} `json:"messages"`
		Tools []struct {
			Name        string          `json:"name"`
			InputSchema json.RawMessage `json:"input_schema"`
		} `json:"tools"`
	}
	if !decode(w, r, &req) {
		return
	}
	var t turn
	for _, tl := range req.Tools {
		t.tools = append(t.tools, tool{name: tl.Name, schema: tl.InputSchema})
	}
	if n := len(req.Messages); n > 0 {
		last := req.Messages[n-1]
		var parts []struct {
			Type string `json:"type"`
		}
		_ = json.Unmarshal(last.Content, &parts)
		t.answered = len(parts) > 0 && parts[0].Type == "tool_result"
		if t.answered {
			t.result = textOf(last.Content)
		} else {
			t.said = textOf(last.Content)
		}
	}
	w.Header().Set("Content-Type", "text/event-stream")
	sse(w, "message_start", map[string]any{"type": "message_start", "message": map[string]any{"id": "msg_fake", "type": "message", "role": "assistant",
		"model": req.Model, "content": []any{}, "stop_reason": nil, "usage": map[string]any{"input_tokens": 20, "output_tokens": 1}}})
	rep, stop := answer(t), "end_turn"
	if c := rep.call; c != nil {
		args, _ := json.Marshal(c.args)
		sse(w, "content_block_start", map[string]any{"type": "content_block_start", "index": 0,
			"content_block": map[string]any{"type": "tool_use", "id": "toolu_fake_1", "name": c.name, "input": map[string]any{}}})
		sse(w, "content_block_delta", map[string]any{"type": "content_block_delta", "index": 0,
			"delta": map[string]any{"type": "input_json_delta", "partial_json": string(args)}})
		stop = "tool_use"
	} else {
		sse(w, "content_block_start", map[string]any{"type": "content_block_start", "index": 0, "content_block": map[string]any{"type": "text", "text": ""}})
		for _, word := range words(rep.text) {
			sse(w, "content_block_delta", map[string]any{"type": "content_block_delta", "index": 0, "delta": map[string]any{"type": "text_delta", "text": word}})
		}
	}
	sse(w, "content_block_stop", map[string]any{"type": "content_block_stop", "index": 0})
	sse(w, "message_delta", map[string]any{"type": "message_delta", "delta": map[string]any{"stop_reason": stop, "stop_sequence": nil},
		"usage": map[string]any{"output_tokens": 10}})
	sse(w, "message_stop", map[string]any{"type": "message_stop"})
}

// ollama answers a chat request, streamed as NDJSON.
func ollama(w http.ResponseWriter, r *http.Request) {
	var req chatRequest
	if !decode(w, r, &req) {
		return
	}
	t := req.turn()
	w.Header().Set("Content-Type", "application/x-ndjson")
	enc := json.NewEncoder(w)
	line := func(msg map[string]any, done bool) {
		v := map[string]any{"model": req.Model, "created_at": time.Now().UTC().Format(time.RFC3339Nano), "message": msg, "done": done}
		if done {
			v["done_reason"], v["prompt_eval_count"], v["eval_count"] = "stop", 20, 10
		}
		_ = enc.Encode(v)
		if f, ok := w.(http.Flusher); ok {
			f.Flush()
		}
	}
	rep := answer(t)
	if c := rep.call; c != nil {
		line(map[string]any{"role": "assistant", "content": "", "tool_calls": []any{map[string]any{"function": map[string]any{"name": c.name, "arguments": c.args}}}}, false)
	}
	for _, word := range words(rep.text) {
		line(map[string]any{"role": "assistant", "content": word}, false)
	}
	line(map[string]any{"role": "assistant", "content": ""}, true)
}
