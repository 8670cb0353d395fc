package bridge

import (
	"context"
	"encoding/json"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"google.golang.org/genproto/googleapis/rpc/errdetails"
	spb "google.golang.org/genproto/googleapis/rpc/status"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/structpb"

	"github.com/agentd/agentd/bridge/internal/mcpconn"
	bridgev1 "github.com/agentd/agentd/gen/go/agentd/bridge/v1"
	"github.com/agentd/agentd/internal/fault"
)

// maxAsks bounds the server requests of one session that wait for agentd
// at once.
const maxAsks = 16

// callIDKey holds, in a call's context, its CallTools id: a server request
// made during the call names it.
type callIDKey struct{}

func withCallID(ctx context.Context, id uint64) context.Context {
	return context.WithValue(ctx, callIDKey{}, id)
}

// ask sends r, a request of one of the session's servers that only agentd
// can answer, on the session's OpenSession stream, and waits for
// agentd's answer (AnswerServerRequest). It gives up when ctx ends (the
// request that asked is over) or the session closes.
func (s *session) ask(ctx context.Context, r *bridgev1.ServerRequest) (*bridgev1.AnswerServerRequestRequest, error) {
	answer := make(chan *bridgev1.AnswerServerRequestRequest, 1)
	s.askMu.Lock()
	if len(s.waiting) >= maxAsks {
		s.askMu.Unlock()
		// Each question may become a person's (an input request), so a
		// server that asks without end is refused rather than queued.
		return nil, fault.New(fault.Exhausted, "the MCP server %q asks more than %d questions at once of the session; this one is refused", r.GetServerName(), maxAsks)
	}
	s.lastAsk++
	r.Id = s.lastAsk
	s.waiting[r.Id] = answer
	s.askMu.Unlock()
	defer func() {
		s.askMu.Lock()
		delete(s.waiting, r.Id)
		s.askMu.Unlock()
	}()
	if id, ok := ctx.Value(callIDKey{}).(uint64); ok {
		r.CallId = id
	}
	select {
	case s.asks <- r:
	case <-ctx.Done():
		return nil, context.Cause(ctx)
	case <-s.done:
		return nil, errSessionClosed
	}
	select {
	case a := <-answer:
		return a, nil
	case <-ctx.Done():
		return nil, context.Cause(ctx)
	case <-s.done:
		return nil, errSessionClosed
	}
}

// answer hands a to the request waiting for it, if one still is.
func (s *session) answer(a *bridgev1.AnswerServerRequestRequest) {
	s.askMu.Lock()
	ch := s.waiting[a.GetId()]
	delete(s.waiting, a.GetId())
	s.askMu.Unlock()
	if ch != nil {
		ch <- a
	}
}

// authorize asks agentd, the OAuth client of a server declared with
// oauth, to resolve the refusal ch of the server serverName, and returns
// the authorization to send from now on.
func (s *session) authorize(ctx context.Context, serverName string, ch mcpconn.Challenge) (string, error) {
	a, err := s.ask(ctx, &bridgev1.ServerRequest{ServerName: serverName, Kind: &bridgev1.ServerRequest_Authorization{
		Authorization: &bridgev1.AuthorizationChallenge{Status: int32(ch.Status), WwwAuthenticate: ch.WWWAuthenticate, Presented: ch.Presented},
	}})
	if err != nil {
		return "", err
	}
	switch k := a.GetAnswer().(type) {
	case *bridgev1.AnswerServerRequestRequest_Authorization:
		if k.Authorization == "" {
			return "", fault.New(fault.Internal, "agentd answered the MCP server %q's authorization request with no authorization", serverName)
		}
		return mcpconn.AuthorizationHeader(k.Authorization), nil
	case *bridgev1.AnswerServerRequestRequest_Error:
		return "", answerError(k.Error)
	default:
		return "", fault.New(fault.Internal, "agentd answered the MCP server %q's authorization request with something else", serverName)
	}
}

// elicit asks agentd for a person's answer to the elicitation/create of
// the server serverName, and returns it for the server. The go-sdk checked the request
// before, and checks an accepted form's content after, filling in the
// schema's defaults (SEP-1034). ctx carries the id of the call during
// which the server asks, when that is known. An error answer fails the
// server's request with agentd's error.
//
// An elicitation that came as an input request of a 2026-07-28 tools/call
// result is deferrable: agentd may answer deferred, and the call
// then ends with input_required (mcpconn.ErrDeferred).
func (s *session) elicit(ctx context.Context, serverName string, p *mcp.ElicitParams) (*mcp.ElicitResult, error) {
	e, err := elicitation(serverName, p)
	if err != nil {
		return nil, err
	}
	deferrable := mcpconn.Deferrable(ctx)
	a, err := s.ask(ctx, &bridgev1.ServerRequest{ServerName: serverName, Kind: &bridgev1.ServerRequest_Elicitation{Elicitation: e}, Deferrable: deferrable})
	if err != nil {
		return nil, err
	}
	switch k := a.GetAnswer().(type) {
	case *bridgev1.AnswerServerRequestRequest_Deferred:
		if !deferrable {
			return nil, fault.New(fault.Internal, "agentd deferred the MCP server %q's elicitation, which cannot wait: it came during a 2025-11-25 call", serverName)
		}
		return nil, mcpconn.ErrDeferred
	case *bridgev1.AnswerServerRequestRequest_Elicitation:
		res := &mcp.ElicitResult{Action: k.Elicitation.GetAction()}
		switch res.Action {
		case "accept":
			if e.GetMode() == "form" {
				// Content, even empty, is what the go-sdk checks against
				// the schema and fills with its defaults.
				res.Content = k.Elicitation.GetContent().AsMap()
			}
		case "decline", "cancel":
		default:
			return nil, fault.New(fault.Internal, "agentd answered the MCP server %q's elicitation with the action %q", serverName, res.Action)
		}
		return res, nil
	case *bridgev1.AnswerServerRequestRequest_Error:
		return nil, answerError(k.Error)
	default:
		return nil, fault.New(fault.Internal, "agentd answered the MCP server %q's elicitation with something else", serverName)
	}
}

// elicitation is a server's elicitation as agentd sees it.
func elicitation(serverName string, p *mcp.ElicitParams) (*bridgev1.Elicitation, error) {
	e := &bridgev1.Elicitation{Mode: mcpconn.ElicitationMode(p), Message: p.Message, Url: p.URL, ElicitationId: p.ElicitationID}
	if p.RequestedSchema != nil {
		schema, err := toStruct(p.RequestedSchema)
		if err != nil {
			return nil, fault.Wrap(fault.Invalid, err, "the MCP server %q asked for input with a schema agentd cannot pass on", serverName)
		}
		e.RequestedSchema = schema
	}
	return e, nil
}

// inputRequired is the answer of a call whose input request agentd
// deferred: the server's elicitation requests and its request
// state, which the retry echoes.
func inputRequired(serverName string, ir *mcpconn.InputRequired) (*bridgev1.CallToolResponse, error) {
	out := &bridgev1.InputRequired{Requests: make(map[string]*bridgev1.Elicitation, len(ir.Requests)), RequestState: ir.RequestState}
	for id, p := range ir.Requests {
		e, err := elicitation(serverName, p)
		if err != nil {
			return nil, err
		}
		out.Requests[id] = e
	}
	return &bridgev1.CallToolResponse{InputRequired: out}, nil
}

// withRetry makes the call of ctx the retry of a call that ended with
// input_required: it carries agentd's answers and the server's request
// state.
func withRetry(ctx context.Context, answers map[string]*bridgev1.ElicitationResult, state string) context.Context {
	if len(answers) == 0 && state == "" {
		return ctx
	}
	responses := make(map[string]*mcp.ElicitResult, len(answers))
	for id, a := range answers {
		res := &mcp.ElicitResult{Action: a.GetAction()}
		if a.GetAction() == "accept" && a.GetContent() != nil {
			res.Content = a.GetContent().AsMap()
		}
		responses[id] = res
	}
	return mcpconn.WithRetry(ctx, responses, state)
}

// toStruct converts a JSON value that is an object, as the go-sdk decoded
// it, to a Struct.
func toStruct(v any) (*structpb.Struct, error) {
	data, err := json.Marshal(v)
	if err != nil {
		return nil, err
	}
	var m map[string]any
	if err := json.Unmarshal(data, &m); err != nil {
		return nil, err
	}
	return structpb.NewStruct(m)
}

// answerError is the fault agentd's error answer stands for: its code,
// message and reason, as agentd classified them.
func answerError(e *bridgev1.CallError) error {
	kind, ok := fault.KindOfCode(codes.Code(e.GetCode()))
	if !ok {
		kind = fault.Internal
	}
	f := fault.New(kind, "%s", e.GetMessage())
	for _, d := range status.FromProto(&spb.Status{Code: e.GetCode(), Message: e.GetMessage(), Details: e.GetDetails()}).Details() {
		if info, ok := d.(*errdetails.ErrorInfo); ok {
			f = f.WithInfo(info.GetReason(), info.GetMetadata())
		}
	}
	return f
}
