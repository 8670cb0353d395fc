// Package providers is the contract between agentd's tool loop and the LLM
// provider adapters: a Provider streams one model turn for a neutral
// Request and yields neutral Events. Each adapter lives in its own package
// under providers/ and is registered explicitly, by providers/registry (see
// Registry); importing an adapter has no side effects.
//
// Messages, tools and provider-side MCP servers use the public agentd.v1
// types, so the loop hands the conversation to an adapter without copying
// it into yet another model.
package providers

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"iter"
	"net"
	"net/http"
	"slices"
	"time"

	agentdv1 "github.com/agentd/agentd/gen/go/agentd/v1"
)

// Provider is one LLM API.
type Provider interface {
	// Name is the name requests use in Agent.provider.
	Name() string

	// Capabilities says what the provider can do; constant for its life.
	Capabilities() Capabilities

	// Stream runs one model turn. It may be called concurrently, each call
	// independent. The sequence yields events in order and ends after a
	// Stop event, or with one non-nil error (classified with
	// internal/fault). Stopping the iteration early, or cancelling ctx,
	// abandons the request. Errors never contain credentials.
	Stream(ctx context.Context, req *Request) iter.Seq2[Event, error]
}

// OptionsValidator is implemented by providers whose options can be checked
// before a generation starts, so a bad option is an InvalidArgument up
// front rather than a failure mid-loop.
type OptionsValidator interface {
	// ValidateOptions describes each problem of the agent's provider
	// options; field paths are relative to provider_options. Safe for
	// concurrent use.
	ValidateOptions(options map[string]any) []Problem
}

// ModelValidator is implemented by providers that can tell up front that
// they cannot serve a model (the router, which needs to find its provider).
type ModelValidator interface {
	// ValidateModel describes why the model cannot be served; nil if it
	// can. Safe for concurrent use.
	ValidateModel(model string) error
}

// ConfigChecker is implemented by providers that cannot serve a request
// until agentd's configuration gives them something, an API key or a
// base URL: a request for one that lacks it is refused before its
// generation starts, rather than failing at its first model turn.
type ConfigChecker interface {
	// CheckConfig returns nil when the provider, as configured, can serve
	// model; else the FailedPrecondition error (internal/fault) that a
	// request for model fails with, naming what to set. Safe for
	// concurrent use.
	CheckConfig(model string) error
}

// Problem is one invalid provider option.
type Problem struct {
	Field       string // path below provider_options, e.g. "script.turns[2]"
	Description string
}

// Capabilities describes a provider.
type Capabilities struct {
	// ServesURLServers: the provider connects to url MCP servers itself
	// (Anthropic, OpenAI Responses). No provider runs command servers.
	ServesURLServers bool
	// ServesConnectors: the provider resolves "mcp://NAME" URLs to its own
	// connectors (OpenAI Responses).
	ServesConnectors bool
	// ServerProblem, when set, says why the provider cannot serve one
	// particular url or connector server itself although it serves that
	// kind (headers it cannot send, an unknown connector); "" means it
	// can. The text names no secret. A url server it cannot serve runs in
	// agentd's bridge under mcp_strategy AUTO; under SERVER, and for a
	// connector, the request is refused before any provider call.
	ServerProblem func(*agentdv1.MCPServer) string
	// ModelOptional: requests may leave Agent.model empty (mock, script).
	ModelOptional bool
	// MaxProviderServers caps the provider-side servers of one request
	// (0: no cap).
	MaxProviderServers int
	// ToolErrorFlag: tool results can be flagged as failed on the wire.
	ToolErrorFlag bool
	// MediaToolResults: tool results may carry images and other media.
	MediaToolResults bool
	// Output reports whether the provider takes an output schema
	// (Request.Output) in its API's own field for model, on a turn that
	// offers function tools (withTools) or on one that offers none. Where
	// it does not, the loop offers the model a final_answer tool whose
	// parameters are the schema instead. Nil: never. Safe for concurrent
	// use.
	Output func(model string, withTools bool) bool
}

// Output asks a model turn for its answer as JSON that fits a schema
// (Agent.output). An adapter sends it in its API's own field: a JSON
// Schema response format, a JSON mode with the schema in the
// instructions; the loop checks the answer against the schema whatever
// the API enforced.
type Output struct {
	// Name names the schema: 1 to 64 of a-z, A-Z, 0-9, _ and -.
	Name string
	// Description says what the answer is, for the model; may be empty.
	Description string
	// Schema is the JSON Schema of the answer, encoded: an object schema.
	Schema json.RawMessage
	// Strict asks the API to hold the answer to the schema exactly, where
	// it can (the loop has checked that the schema keeps the API's
	// restrictions).
	Strict bool
}

// Request is one model turn.
type Request struct {
	// Model is Agent.model.
	Model string
	// Instructions is Agent.instructions.
	Instructions string
	// Messages is the conversation so far. Adapters must not modify it.
	Messages []*agentdv1.Message
	// Tools are the function tools offered: the agent's own and those of
	// bridged MCP servers, in that order.
	Tools []*agentdv1.FunctionTool
	// ToolParameters, when it has one entry per tool, holds Tools[i]'s
	// parameters as ToolParametersJSON encodes them (its output and nothing
	// else: adapters append the bytes to a body unchecked), encoded once by
	// the caller for all the turns that offer the same tools: a schema does not
	// change during a generation, and converting it from structpb and
	// encoding it again on every turn was a sixth of the bytes agentd
	// allocated. Otherwise (nil) adapters encode each tool's
	// parameters themselves. Adapters read it with Parameters and must not
	// modify it. With it, a tool's Parameters may be nil although it has
	// a schema (the caller keeps only the encoding), so adapters read
	// parameters with Parameters alone.
	ToolParameters []json.RawMessage
	// MCPServers are the servers the provider runs itself, to render in its
	// native format.
	MCPServers []*agentdv1.MCPServer
	// Options is Agent.provider_options, as a JSON object.
	Options map[string]any
	// MaxTokens, when positive, is the most tokens the answer may have:
	// each adapter sends it in its API's field, in place of any limit the
	// options set. 0: the options' limit, or the adapter's default.
	MaxTokens int
	// Output, when set, asks for the answer as JSON that fits a schema,
	// in the API's own field. The loop sets it only where
	// Capabilities.Output says the provider takes it for the turn.
	Output *Output
	// Sample: the turn answers an MCP server's sampling request,
	// not the agent's conversation. Adapters send it like any turn; the
	// script provider plays its script's sample turn.
	Sample bool
}

// ToolParametersJSON is a function tool's parameters as the JSON Schema
// object every adapter sends: the schema, or an object schema without
// properties when it has none. Its bytes are those json.Marshal
// gives the schema's map (keys sorted, HTML escaped), so a request body
// that splices them in is byte for byte the one that marshals the map.
func ToolParametersJSON(t *agentdv1.FunctionTool) json.RawMessage {
	// The map holds JSON values only (AsMap turns NaN and infinities into
	// strings), so encoding it cannot fail.
	data, _ := json.Marshal(toolParameters(t))
	return data
}

func toolParameters(t *agentdv1.FunctionTool) any {
	if p := t.GetParameters(); p != nil {
		return p.AsMap()
	}
	return map[string]any{"type": "object", "properties": map[string]any{}}
}

// Parameters is Tools[i]'s parameters for a JSON request body (which
// json.Marshal encodes): the bytes of ToolParameters when the caller
// encoded them, as a *CompactJSON into r.ToolParameters (a pointer, which
// an interface holds without allocating; the body only reads it), else
// the schema as a map, which encodes to the same bytes (as one turn of an
// adapter used alone would).
func (r *Request) Parameters(i int) any {
	if len(r.ToolParameters) == len(r.Tools) {
		return (*CompactJSON)(&r.ToolParameters[i])
	}
	return toolParameters(r.Tools[i])
}

// CompactJSON is JSON text that is valid and compact because json.Marshal
// made it (ToolParametersJSON's). json.Marshal encodes it as it is, after
// checking it again; the adapters' body encoder (httpc.Marshal) appends it
// without the check.
type CompactJSON []byte

// MarshalJSON returns j.
func (j CompactJSON) MarshalJSON() ([]byte, error) { return j, nil }

// Event is one item of a streamed model turn: *TextDelta, *Reasoning,
// *ToolCall, *ProviderToolCall, *Usage or *Stop.
type Event interface{ isEvent() }

// TextDelta is a piece of the model's text.
type TextDelta struct{ Text string }

// Reasoning is a piece of the model's reasoning: text as it streams, or a
// signature (opaque, returned to the provider on later turns). The loop
// keeps it in the assistant message; a signature ends a block.
type Reasoning struct {
	Text, Signature string
	// Redacted: the provider withheld this reasoning and Signature is all
	// of it, in encrypted form (Anthropic's redacted_thinking). It is a
	// block of its own.
	Redacted bool
	// Provider names the provider that produced the reasoning when it is
	// not the agent's provider (the router sets it); "" means the agent's.
	Provider string
}

// ToolCall is a complete call the model asks agentd to run. Its
// arguments follow CompactArguments' rule.
type ToolCall struct{ Call *agentdv1.ToolCall }

// CompactArguments is the one rule for a tool call's arguments, the text
// a ToolCall or ProviderToolCall carries, whatever the API sent (an
// object, or text streamed in fragments), and what goes back to an API
// that takes them as text:
//
//   - none (empty, blank, JSON null): "{}", a call without arguments;
//   - JSON: the same value, compacted;
//   - anything else: the text exactly as the model wrote it.
//
// Invalid arguments are kept rather than replaced by "{}" because "{}"
// would run the tool with arguments the model never gave (and show them
// in an approval prompt), whereas the bridge refuses arguments that are
// not a JSON object as a failed tool result, which tells the model
// its mistake so it can correct it.
func CompactArguments(raw []byte) string {
	t := bytes.TrimSpace(raw)
	if len(t) == 0 || string(t) == "null" {
		return "{}"
	}
	var b bytes.Buffer
	if json.Compact(&b, t) != nil {
		return string(raw)
	}
	return b.String()
}

// ProviderToolCall is a call the provider made itself to a provider-side
// MCP server.
type ProviderToolCall struct{ Call *agentdv1.ProviderToolCall }

// Usage reports the turn's token counts.
type Usage struct{ Usage *agentdv1.Usage }

// Stop ends the turn.
type Stop struct {
	Reason agentdv1.StopReason
	// Paused: the provider paused a long turn of its own while it ran
	// provider-side tools (Anthropic's pause_turn). The loop sends the
	// conversation back, this turn included, so that it continues; the
	// continuation counts as a tool turn.
	Paused bool
	// Response describes the provider's answer, for telemetry: what the
	// API said of it, each field "" when it did not say.
	Response Response
}

// Response is what a provider's answer says of itself, as the API wrote
// it: for traces (the GenAI conventions' gen_ai.response.* attributes),
// never for the loop's decisions.
type Response struct {
	// ID identifies the answer at the provider ("msg_...", "chatcmpl-...").
	ID string
	// Model is the model that answered, which may be more precise than
	// the one asked for ("gpt-4o-2024-08-06").
	Model string
	// FinishReason is the provider's own word for why the answer ended
	// ("end_turn", "tool_calls", "STOP"), where Reason is agentd's.
	FinishReason string
}

func (*TextDelta) isEvent()        {}
func (*Reasoning) isEvent()        {}
func (*ToolCall) isEvent()         {}
func (*ProviderToolCall) isEvent() {}
func (*Usage) isEvent()            {}
func (*Stop) isEvent()             {}

// Registry maps provider names to providers. It is built once at start-up
// and read-only afterwards, so it is safe for concurrent use.
type Registry struct {
	byName map[string]Provider
}

// NewRegistry registers the given providers; names must be unique.
func NewRegistry(ps ...Provider) (*Registry, error) {
	r := &Registry{byName: make(map[string]Provider, len(ps))}
	for _, p := range ps {
		if _, dup := r.byName[p.Name()]; dup {
			return nil, fmt.Errorf("providers: %q registered twice", p.Name())
		}
		r.byName[p.Name()] = p
	}
	return r, nil
}

// Lookup returns the provider registered under name.
func (r *Registry) Lookup(name string) (Provider, bool) {
	p, ok := r.byName[name]
	return p, ok
}

// CloseIdleConnections closes the idle connections of every provider that
// keeps some (those with a CloseIdleConnections method), when the service
// stops.
func (r *Registry) CloseIdleConnections() {
	for _, p := range r.byName {
		if c, ok := p.(interface{ CloseIdleConnections() }); ok {
			c.CloseIdleConnections()
		}
	}
}

// Names lists the registered names, sorted.
func (r *Registry) Names() []string {
	names := make([]string, 0, len(r.byName))
	for n := range r.byName {
		names = append(names, n)
	}
	slices.Sort(names)
	return names
}

// Settings configure an HTTP provider adapter. The zero value of each field
// means the adapter's default.
type Settings struct {
	// APIKey authenticates the requests. Secret: it appears in no error,
	// log or trace.
	APIKey string
	// KeyEnv names the environment variable the API key is read from,
	// for the error of a request made without one (providers/registry
	// sets it).
	KeyEnv string
	// BaseURL replaces the API's base URL (proxies, gateways, fakes).
	BaseURL string
	// Timeout bounds the wait for a response to begin and every wait for
	// more of a streamed response. Default 5 minutes.
	Timeout time.Duration
	// MaxRetries is how often a retryable failure (connection, 408, 409,
	// 429, 5xx, provider overload) is retried. Default 2; negative: none.
	MaxRetries int
	// Options are provider-specific settings, documented by each adapter
	// (Azure's api_version, Anthropic's version and betas, ...).
	Options map[string]string
	// HTTP replaces the HTTP client (tests).
	HTTP *http.Client
	// Dial replaces how the adapter's own HTTP client connects, under its
	// timeouts (tests: an in-memory network). Ignored when HTTP is set.
	Dial func(ctx context.Context, network, addr string) (net.Conn, error)
}

// Retries is MaxRetries with its default applied.
func (s Settings) Retries() int {
	switch {
	case s.MaxRetries < 0:
		return 0
	case s.MaxRetries == 0:
		return 2
	}
	return s.MaxRetries
}
