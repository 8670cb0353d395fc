package server

import (
	bridgev1 "github.com/agentd/agentd/gen/go/agentd/bridge/v1"
	statev1 "github.com/agentd/agentd/gen/go/agentd/state/v1"
	agentdv1 "github.com/agentd/agentd/gen/go/agentd/v1"

	"context"
	"encoding/json"
	"fmt"

	"github.com/google/jsonschema-go/jsonschema"
	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/types/known/structpb"

	"github.com/agentd/agentd/internal/bridgeclient"
	"github.com/agentd/agentd/internal/fault"
)

// elicit relays a server's elicitation to the client as an input
// request and returns the client's answer for the server. The agent's
// elicitation policy DENY declines at once. A client that is not there,
// or does not answer in time, cancels the request: on protocol
// 2025-11-25 the server's request lives in its MCP session, which cannot
// outlast a pause. A deferrable request (a 2026-07-28 input request, in
// a tools/call result) needs no session: with a state store it is
// deferred instead (deferred true), and the generation pauses for it
// like an approval.
func (g *generation) elicit(ctx context.Context, server string, e *bridgev1.Elicitation, deferrable bool) (_ *bridgev1.ElicitationResult, deferred bool) {
	if g.plan.agent.GetElicitation() == agentdv1.ElicitationPolicy_ELICITATION_POLICY_DENY {
		return &bridgev1.ElicitationResult{Action: "decline"}, false
	}
	cancelled := &bridgev1.ElicitationResult{Action: "cancel"}
	canDefer := deferrable && g.s.checkpoints != nil
	var req *agentdv1.InputRequest
	answer, none, err := g.ask(ctx, question{pausable: canDefer, request: func() (string, *agentdv1.GenerateResponse) {
		callID, _ := ctx.Value(toolCallKey{}).(string)
		req = g.inputRequest(server, callID, e)
		return req.GetId(), &agentdv1.GenerateResponse{Event: &agentdv1.GenerateResponse_InputRequest{InputRequest: req}}
	}})
	switch {
	case err != nil:
		return cancelled, false // the call, or the generation, ended
	case none != nil && canDefer:
		g.deferInput(ctx, server, none.why)
		return nil, true
	case none != nil:
		if none.cause != nil {
			g.s.log.InfoContext(ctx, "input request cancelled: the client did not answer", "tenant", g.tenant, "generation", g.id, "server", server, "request", req.GetId(), "why", none.cause)
		}
		return cancelled, false
	}
	return elicitationResult(answer.input), false
}

// inputRequest is the input request, with a new id, that shows the
// client server's elicitation e during tool call callID.
func (g *generation) inputRequest(server, callID string, e *bridgev1.Elicitation) *agentdv1.InputRequest {
	req := &agentdv1.InputRequest{
		Id:              fmt.Sprintf("input_%d", g.s.inputs.Add(1)),
		ServerName:      server,
		ToolCallId:      callID,
		Message:         e.GetMessage(),
		Mode:            agentdv1.InputMode_INPUT_MODE_FORM,
		RequestedSchema: e.GetRequestedSchema(),
	}
	if e.GetMode() == "url" {
		req.Mode, req.Url, req.ElicitationId, req.RequestedSchema = agentdv1.InputMode_INPUT_MODE_URL, e.GetUrl(), e.GetElicitationId(), nil
	}
	return req
}

// elicitationResult is the server's answer made of the client's r.
func elicitationResult(r *agentdv1.InputResponse) *bridgev1.ElicitationResult {
	switch r.GetAction() {
	case agentdv1.InputAction_INPUT_ACTION_ACCEPT:
		content := r.GetContent()
		if content == nil {
			content = &structpb.Struct{}
		}
		return &bridgev1.ElicitationResult{Action: "accept", Content: content}
	case agentdv1.InputAction_INPUT_ACTION_DECLINE:
		return &bridgev1.ElicitationResult{Action: "decline"}
	default:
		return &bridgev1.ElicitationResult{Action: "cancel"}
	}
}

// elicitAnswer is the bridge's answer to an elicitation.
func (g *generation) elicitAnswer(ctx context.Context, r *bridgev1.ServerRequest) *bridgev1.AnswerServerRequestRequest {
	if r.GetElicitation() == nil {
		return bridgeclient.Refusal(fault.New(fault.Invalid, "an elicitation request without its elicitation"))
	}
	res, deferred := g.elicit(ctx, r.GetServerName(), r.GetElicitation(), r.GetDeferrable())
	if deferred {
		return &bridgev1.AnswerServerRequestRequest{Answer: &bridgev1.AnswerServerRequestRequest_Deferred{Deferred: &bridgev1.Deferred{}}}
	}
	return &bridgev1.AnswerServerRequestRequest{Answer: &bridgev1.AnswerServerRequestRequest_Elicitation{Elicitation: res}}
}

// On MCP 2026-07-28 a server asks for input inside a tools/call result
// (input requests, with an opaque request state), and gets the answers
// when the client calls again: no MCP session has to outlive the
// question. So when nobody answers an input request on the stream,
// agentd defers it: the call ends without a result, the
// generation pauses like an approval, the paused event lists the input
// requests, and the resume's answers go to the server with the call
// again, with its request state. 2025-11-25 requests still cancel.

// deferInput records that an input request of server was deferred
// because the client why.
func (g *generation) deferInput(ctx context.Context, server, why string) {
	d := &g.deferred
	d.mu.Lock()
	if d.why == "" {
		d.why = why
	}
	d.inputs++
	d.mu.Unlock()
	g.s.log.InfoContext(ctx, "input request deferred to a resume", "tenant", g.tenant, "generation", g.id, "server", server, "why", "the client "+why)
}

// errInputRequired is a call that ended asking for input agentd deferred.
type errInputRequired struct {
	server, callID string
	required       *bridgev1.InputRequired
}

func (e *errInputRequired) Error() string {
	return fmt.Sprintf("the MCP server %q asks for input before it completes the call %s", e.server, e.callID)
}

// inputRetry is what a call that waited for input carries when it runs
// again: the answers by the server's ids, and its request state.
type inputRetry struct {
	responses map[string]*bridgev1.ElicitationResult
	state     string
}

// retryFor builds the retry of the call waiting in w from the resume's
// answers.
func retryFor(w *statev1.InputWait, answers map[string]*agentdv1.InputResponse) *inputRetry {
	rt := &inputRetry{responses: make(map[string]*bridgev1.ElicitationResult), state: w.GetRequestState()}
	for _, in := range w.GetInputs() {
		res := elicitationResult(answers[in.GetRequest().GetId()])
		if res.GetAction() == "accept" {
			// Checked when the resume was; the schema's defaults fill in
			// what the person left out (SEP-1034), as on the stream.
			res.Content, _ = formContent(in.GetRequest().GetRequestedSchema(), res.GetContent())
		}
		rt.responses[in.GetKey()] = res
	}
	return rt
}

// formContent checks an accepted form's content against the requested
// schema and fills in the schema's defaults for what it leaves out
// (SEP-1034), as the bridge does for an answer on the stream. Without a
// schema (a URL request) the content is taken as it is.
func formContent(schema, content *structpb.Struct) (*structpb.Struct, error) {
	if content == nil {
		content = &structpb.Struct{}
	}
	if schema == nil {
		return content, nil
	}
	data, err := protojson.Marshal(schema)
	if err != nil {
		return nil, fmt.Errorf("the request's schema cannot be read")
	}
	var js jsonschema.Schema
	if err := json.Unmarshal(data, &js); err != nil {
		return nil, fmt.Errorf("the request's schema cannot be read")
	}
	resolved, err := js.Resolve(nil)
	if err != nil {
		return nil, fmt.Errorf("the request's schema cannot be read")
	}
	m := content.AsMap()
	if err := resolved.Validate(m); err != nil {
		return nil, fmt.Errorf("does not match the input request's schema: %v", err)
	}
	if err := resolved.ApplyDefaults(&m); err != nil {
		return nil, fmt.Errorf("the schema's defaults cannot be applied: %v", err)
	}
	return structpb.NewStruct(m)
}
