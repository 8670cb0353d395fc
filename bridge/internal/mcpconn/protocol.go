package mcpconn

//lint:file-ignore SA1019 sampling and roots are deprecated from MCP 2026-07-28 (SEP-2577); servers still ask for them as input requests

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sync"

	"github.com/google/jsonschema-go/jsonschema"
	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// The MCP protocol versions agentd speaks: it offers the modern
// one and falls back to the classic handshake, as the go-sdk does.
const (
	// ModernVersion is the stateless revision: a server/discover probe
	// instead of initialize, subscriptions/listen for change
	// notifications, ttlMs cache hints, and the server's requests
	// (elicitation, sampling) as input requests inside a tools/call
	// result.
	ModernVersion = "2026-07-28"
	// ClassicVersion is the initialize handshake's version, offered to a
	// server known to be classic and after a failed probe.
	ClassicVersion = "2025-11-25"
)

// Modern reports whether a negotiated version is the stateless revision
// or later.
func Modern(version string) bool { return version >= ModernVersion }

// VersionMemory remembers which protocol version a server negotiated, so
// that the probe is paid once per server, not per connection.
// Implementations are safe for concurrent use.
type VersionMemory interface {
	// Version is the version the server negotiated last; "" if unknown.
	Version() string
	// Remember records a negotiated version.
	Remember(version string)
}

// offer is the version a connection offers: the classic one to a server
// known to be classic (no probe), the modern one (the probe, with the
// go-sdk's fallback) otherwise.
func offer(m VersionMemory) string {
	if m != nil {
		if v := m.Version(); v != "" && !Modern(v) {
			return ClassicVersion
		}
	}
	return ModernVersion
}

// remember records the version s negotiated.
func remember(m VersionMemory, s *mcp.ClientSession) {
	if m == nil || s == nil || s.InitializeResult() == nil {
		return
	}
	m.Remember(s.InitializeResult().ProtocolVersion)
}

// ProtocolVersion is the version the connection's session negotiated.
func (c *Conn) ProtocolVersion() string {
	if s := c.current(); s != nil && s.InitializeResult() != nil {
		return s.InitializeResult().ProtocolVersion
	}
	return ""
}

// ErrDeferred is what an Owner's Elicit returns when agentd will answer a
// deferrable request later (Deferrable): the call ends with
// *InputRequired, and is retried with the answer (WithRetry).
var ErrDeferred = errors.New("the input request was deferred")

// inputRequestKey marks, in the context of an elicitation, that it came as
// an input request in a 2026-07-28 tools/call result.
type inputRequestKey struct{}

// roundKey marks, in the context of any handler callRounds calls, that the
// request is an input request of the call of the context.
type roundKey struct{}

// Deferrable reports whether the elicitation of ctx may be deferred: it
// came as an input request of a 2026-07-28 tools/call result, which the
// call's retry can answer later, so nothing is lost if it is not answered
// now.
func Deferrable(ctx context.Context) bool {
	v, _ := ctx.Value(inputRequestKey{}).(bool)
	return v
}

// InputRequired is how a tools/call ends when agentd deferred one of its
// input requests: the server's elicitation requests by their ids, and its
// opaque request state, which the retry echoes (WithRetry). It is returned
// as CallTool's error. RequestState is the server's data: never log it.
type InputRequired struct {
	Requests     map[string]*mcp.ElicitParams
	RequestState string
}

func (e *InputRequired) Error() string {
	return fmt.Sprintf("the MCP server needs input (%d requests) that agentd deferred", len(e.Requests))
}

// retryKey holds the answers a retried call carries.
type retryKey struct{}

type retry struct {
	responses map[string]*mcp.ElicitResult
	state     string
}

// WithRetry makes the call of ctx the retry of a call that ended with
// *InputRequired: it carries the answers to its input requests, by id,
// and the request state as it came.
func WithRetry(ctx context.Context, responses map[string]*mcp.ElicitResult, state string) context.Context {
	if len(responses) == 0 && state == "" {
		return ctx
	}
	return context.WithValue(ctx, retryKey{}, retry{responses, state})
}

// Bounds of a call's rounds of input requests, as the go-sdk's own
// middleware has them.
const (
	maxRounds     = 10
	maxEmptyRound = 3 // input_required with no requests: the server sheds load
)

// callRounds runs a tools/call and its rounds of input requests (the
// 2026-07-28 multi round-trip): each round's requests are fulfilled
// through the client's handlers and the call goes again with the answers.
// agentd's middleware does this instead of the go-sdk's so that an
// elicitation can be deferred: then the call ends with *InputRequired.
// On a classic session no result asks for input and this is one call.
func (c *core) callRounds(ctx context.Context, s *mcp.ClientSession, params *mcp.CallToolParams) (*mcp.CallToolResult, error) {
	applyRetry(ctx, params)
	empty := 0
	for round := 1; ; round++ {
		res, err := s.CallTool(ctx, params)
		if err != nil || !res.NeedsInput() {
			return res, err
		}
		if len(res.InputRequests) == 0 {
			empty++
		}
		if err := checkRounds(round, empty); err != nil {
			return nil, err
		}
		responses, deferred, err := c.fulfil(ctx, s, res.InputRequests)
		switch {
		case err != nil && ctx.Err() != nil:
			return nil, err
		case err != nil:
			// As on a classic session, where the server's request fails
			// and its tool with it: the call is the tool's failure.
			return &mcp.CallToolResult{IsError: true, Content: []mcp.Content{&mcp.TextContent{Text: err.Error()}}}, nil
		case deferred:
			return nil, inputRequired(res)
		}
		next := *params
		next.InputResponses, next.RequestState = responses, res.RequestState
		params = &next
	}
}

// applyRetry makes params the retry that ctx may carry (WithRetry): the
// answers to the input requests of the call it retries, and the server's
// request state.
func applyRetry(ctx context.Context, params *mcp.CallToolParams) {
	r, ok := ctx.Value(retryKey{}).(retry)
	if !ok {
		return
	}
	params.RequestState = r.state
	if len(r.responses) > 0 {
		params.InputResponses = make(mcp.InputResponseMap, len(r.responses))
		for id, res := range r.responses {
			params.InputResponses[id] = res
		}
	}
}

// checkRounds ends a call whose server still asks for input after
// maxRounds rounds, or maxEmptyRound times without saying what.
func checkRounds(round, empty int) error {
	if empty >= maxEmptyRound {
		return fmt.Errorf("the server asked for input %d times without saying what (it sheds load)", empty)
	}
	if round >= maxRounds {
		return fmt.Errorf("the server still asked for input after %d rounds", round)
	}
	return nil
}

// inputRequired is how a call whose round agentd deferred ends: the
// round's elicitations and the server's request state.
func inputRequired(res *mcp.CallToolResult) *InputRequired {
	ir := &InputRequired{Requests: make(map[string]*mcp.ElicitParams), RequestState: res.RequestState}
	for id, r := range res.InputRequests {
		if p, ok := r.(*mcp.ElicitParams); ok {
			ir.Requests[id] = p
		}
	}
	return ir
}

// fulfil answers one round's input requests at once, each through the
// client's handler for its kind. When agentd defers an elicitation the
// round is over: the requests not answered yet are abandoned, and deferred
// is true.
func (c *core) fulfil(ctx context.Context, s *mcp.ClientSession, reqs mcp.InputRequestMap) (mcp.InputResponseMap, bool, error) {
	ctx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	var (
		mu        sync.Mutex
		wg        sync.WaitGroup
		responses = make(mcp.InputResponseMap, len(reqs))
		firstErr  error
	)
	for id, r := range reqs {
		wg.Go(func() {
			res, err := c.fulfilOne(ctx, s, r)
			mu.Lock()
			defer mu.Unlock()
			if err != nil {
				if firstErr == nil || errors.Is(err, ErrDeferred) && !errors.Is(firstErr, ErrDeferred) {
					firstErr = err
				}
				cancel(err)
				return
			}
			responses[id] = res
		})
	}
	wg.Wait()
	if errors.Is(firstErr, ErrDeferred) {
		return nil, true, nil
	}
	if firstErr != nil {
		return nil, false, fmt.Errorf("answering the server's input request: %w", firstErr)
	}
	return responses, false, nil
}

// fulfilOne answers one input request through the client's own handler
// for its kind, as the go-sdk's middleware would: elicitation (checked
// before and after, as the go-sdk checks elicitation/create), sampling
// (which the go-sdk decodes with its tools, if any), roots.
func (c *core) fulfilOne(ctx context.Context, s *mcp.ClientSession, r mcp.InputRequest) (mcp.InputResponse, error) {
	ctx = context.WithValue(ctx, roundKey{}, true)
	switch p := r.(type) {
	case *mcp.ElicitParams:
		return c.elicitInput(context.WithValue(ctx, inputRequestKey{}, true), s, p)
	case *mcp.CreateMessageWithToolsParams:
		return c.sample(ctx, &mcp.CreateMessageWithToolsRequest{Session: s, Params: p})
	case *mcp.ListRootsParams:
		return &mcp.ListRootsResult{Roots: []*mcp.Root{}}, nil // agentd declares no roots
	default:
		return nil, fmt.Errorf("unknown input request %T", r)
	}
}

// elicitInput answers an elicitation input request through the client's
// elicitation handler (elicit), with the checks the go-sdk makes of an
// elicitation/create: a form's schema before, an accepted form's content
// against it after, its defaults filled in (SEP-1034).
func (c *core) elicitInput(ctx context.Context, s *mcp.ClientSession, p *mcp.ElicitParams) (*mcp.ElicitResult, error) {
	schema, err := checkElicitation(p)
	if err != nil {
		return nil, err
	}
	res, err := c.elicit(ctx, &mcp.ElicitRequest{Session: s, Params: p})
	if err != nil {
		return nil, err
	}
	if res.Action == "accept" && schema != nil && res.Content != nil {
		if err := schema.Validate(res.Content); err != nil {
			return nil, invalidParams("elicitation result content does not match requested schema: %v", err)
		}
		if err := schema.ApplyDefaults(&res.Content); err != nil {
			return nil, invalidParams("failed to apply schema defaults to elicitation result: %v", err)
		}
	}
	return res, nil
}

// ElicitationMode is an elicitation's mode: its own, or, when it names
// none, "url" for one that gives a URL and "form" otherwise.
func ElicitationMode(p *mcp.ElicitParams) string {
	switch {
	case p.Mode != "":
		return p.Mode
	case p.URL != "":
		return "url"
	}
	return "form"
}

// checkElicitation checks an elicitation as the go-sdk checks an
// elicitation/create before it asks, and returns a form's schema,
// resolved (nil for a form without one, and for a URL elicitation).
func checkElicitation(p *mcp.ElicitParams) (*jsonschema.Resolved, error) {
	switch mode := ElicitationMode(p); mode {
	case "form":
		if p.URL != "" {
			return nil, invalidParams("URL must not be set for form elicitation")
		}
		return resolveSchema(p.RequestedSchema)
	case "url":
		if p.RequestedSchema != nil || p.URL == "" {
			return nil, invalidParams("a URL elicitation needs a URL and no schema")
		}
		return nil, nil
	default:
		return nil, invalidParams("unsupported elicitation mode: %q", mode)
	}
}

// resolveSchema resolves a form's requested schema, as the go-sdk
// decoded it; nil for none.
func resolveSchema(requested any) (*jsonschema.Resolved, error) {
	if requested == nil {
		return nil, nil
	}
	data, err := json.Marshal(requested)
	if err != nil {
		return nil, invalidParams("invalid requested schema: %v", err)
	}
	var js jsonschema.Schema
	if err := json.Unmarshal(data, &js); err != nil {
		return nil, invalidParams("invalid requested schema: %v", err)
	}
	schema, err := js.Resolve(nil)
	if err != nil {
		return nil, invalidParams("invalid requested schema: %v", err)
	}
	return schema, nil
}

// invalidParams is a JSON-RPC invalid-params error, which the server
// reads.
func invalidParams(format string, args ...any) error {
	return &jsonrpc.Error{Code: jsonrpc.CodeInvalidParams, Message: fmt.Sprintf(format, args...)}
}
