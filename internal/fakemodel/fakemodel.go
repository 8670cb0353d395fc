// Package fakemodel stands in for hosted models where no key or network
// may be had: an HTTP server speaking, streamed, the wire formats of
// OpenAI Chat Completions, Anthropic Messages and Ollama's chat, and
// answering as a model that uses its tools would. Given tools and a
// conversation that ends with the user's message, it calls one tool (one
// whose name says it lists, else the first) with arguments made from the
// tool's input schema; given a tool's result, or no tools, it answers in
// text that quotes what it got. The documents' examples that need a real
// provider run against it (internal/docstest).
package fakemodel

import (
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"unicode/utf8"
)

// Paths it serves, under one origin: OpenAI's base URL is origin+"/v1",
// Anthropic's the origin, Ollama's host the origin's host:port.
const (
	openAIPath    = "/v1/chat/completions"
	anthropicPath = "/v1/messages"
	ollamaPath    = "/api/chat"
)

// Server is a running fake model.
type Server struct{ srv *httptest.Server }

// Start serves the fake model on a loopback port.
func Start() *Server {
	mux := http.NewServeMux()
	mux.HandleFunc("POST "+openAIPath, openAI)
	mux.HandleFunc("POST "+anthropicPath, anthropic)
	mux.HandleFunc("POST "+ollamaPath, ollama)
	return &Server{srv: httptest.NewServer(mux)}
}

// Addr is the server's host:port (Ollama's OLLAMA_HOST).
func (s *Server) Addr() string { return s.srv.Listener.Addr().String() }

// Origin is the server's http://host:port (Anthropic's base URL; OpenAI's
// is Origin()+"/v1").
func (s *Server) Origin() string { return "http://" + s.Addr() }

// Env is the environment that points agentd's providers at the fake:
// OpenAI (and OpenAI-compatible names), Anthropic and Ollama, with keys
// the fake accepts.
func (s *Server) Env() []string {
	return []string{
		"OPENAI_API_KEY=fake-openai-key", "OPENAI_BASE_URL=" + s.Origin() + "/v1",
		"ANTHROPIC_API_KEY=fake-anthropic-key", "ANTHROPIC_BASE_URL=" + s.Origin(),
		"OLLAMA_HOST=" + s.Addr(),
	}
}

// Close stops the server and waits for its requests to end.
func (s *Server) Close() { s.srv.Close() }

// tool is a tool the request offers.
type tool struct {
	name   string
	schema json.RawMessage
}

// turn is what the fake needs of a request: the tools offered, and what
// the conversation ends with.
type turn struct {
	tools []tool
	// result is the text of the tool results the conversation ends with;
	// empty when it ends with the user's message.
	result string
	// said is the user's last text.
	said string
	// answered says the conversation ends with tool results.
	answered bool
}

// reply is what the fake answers a turn with: a tool call, or text.
type reply struct {
	call *call
	text string
}

type call struct {
	id, name string
	args     map[string]any
}

// answer decides the reply to t.
func answer(t turn) reply {
	if len(t.tools) > 0 && !t.answered {
		tl := pick(t.tools)
		return reply{call: &call{id: "call_fake_1", name: tl.name, args: argsFor(tl.schema)}}
	}
	if t.answered {
		return reply{text: "The tool answered: " + clip(t.result, 400)}
	}
	return reply{text: "Hello from the fake model. You said: " + clip(t.said, 200)}
}

// pick is the tool a model asked to look around would call: one that
// lists, else the first.
func pick(tools []tool) tool {
	for _, t := range tools {
		if strings.HasPrefix(t.name, "list") || strings.Contains(t.name, "_list") {
			return t
		}
	}
	return tools[0]
}

// argsFor makes arguments that satisfy a schema's required properties:
// "." for paths and directories, "hello" for other strings, the first of
// an enum, 1 for numbers, true for booleans.
func argsFor(schema json.RawMessage) map[string]any {
	var s struct {
		Properties map[string]struct {
			Type string `json:"type"`
			Enum []any  `json:"enum"`
		} `json:"properties"`
		Required []string `json:"required"`
	}
	_ = json.Unmarshal(schema, &s)
	args := map[string]any{}
	for _, name := range s.Required {
		p := s.Properties[name]
		switch {
		case len(p.Enum) > 0:
			args[name] = p.Enum[0]
		case p.Type == "number" || p.Type == "integer":
			args[name] = 1
		case p.Type == "boolean":
			args[name] = true
		case strings.Contains(name, "path") || strings.Contains(name, "dir"):
			args[name] = "."
		default:
			args[name] = "hello"
		}
	}
	return args
}

// clip cuts s to at most n bytes, on a rune boundary.
func clip(s string, n int) string {
	s = strings.TrimSpace(s)
	if len(s) <= n {
		return s
	}
	for n > 0 && !utf8.RuneStart(s[n]) {
		n--
	}
	return s[:n] + "…"
}

// words splits text into the chunks it streams in.
func words(text string) []string {
	var out []string
	for len(text) > 0 {
		i := strings.IndexByte(text[1:], ' ')
		if i < 0 {
			out = append(out, text)
			break
		}
		out = append(out, text[:i+1])
		text = text[i+1:]
	}
	return out
}

// textOf is the text of a content that is a string or a list of parts
// with text.
func textOf(raw json.RawMessage) string {
	var s string
	if json.Unmarshal(raw, &s) == nil {
		return s
	}
	var parts []struct {
		Type    string          `json:"type"`
		Text    string          `json:"text"`
		Content json.RawMessage `json:"content"`
	}
	_ = json.Unmarshal(raw, &parts)
	var b strings.Builder
	for _, p := range parts {
		b.WriteString(p.Text)
		if len(p.Content) > 0 {
			b.WriteString(textOf(p.Content))
		}
	}
	return b.String()
}

// sse writes one server-sent event (event may be "") and flushes.
func sse(w http.ResponseWriter, event string, data any) {
	b, _ := json.Marshal(data)
	if event != "" {
		fmt.Fprintf(w, "event: %s\n", event)
	}
	fmt.Fprintf(w, "data: %s\n\n", b)
	if f, ok := w.(http.Flusher); ok {
		f.Flush()
	}
}

// decode reads the request's JSON body into v, or answers 400.
func decode(w http.ResponseWriter, r *http.Request, v any) bool {
	if err := json.NewDecoder(r.Body).Decode(v); err != nil {
		http.Error(w, `{"error":{"message":"the body is not JSON"}}`, http.StatusBadRequest)
		return false
	}
	return true
}
