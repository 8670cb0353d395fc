package server

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"slices"

	"github.com/google/jsonschema-go/jsonschema"
	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/types/known/structpb"

	bridgev1 "github.com/agentd/agentd/gen/go/agentd/bridge/v1"
	statev1 "github.com/agentd/agentd/gen/go/agentd/state/v1"
	agentdv1 "github.com/agentd/agentd/gen/go/agentd/v1"
)

// On MCP 2026-07-28 a server asks for input inside a tools/call result
// (input requests, with an opaque request state), and gets the answers
// when the client calls again: no MCP session has to outlive the
// question. So when nobody answers an input request on the stream,
// agentd defers it (X-M4): the call ends without a result, the
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

// waitInput reports whether call i's failure err is its server asking
// for deferred input; the call then waits for the resume's answers.
func (r *turnRun) waitInput(i int, err error) bool {
	var ir *errInputRequired
	if !errors.As(err, &ir) || r.ctx.Err() != nil {
		return false
	}
	w := &statev1.InputWait{ToolCallId: ir.callID, RequestState: ir.required.GetRequestState()}
	for _, key := range slices.Sorted(maps.Keys(ir.required.GetRequests())) {
		w.Inputs = append(w.Inputs, &statev1.PendingInput{Key: key, Request: r.g.inputRequest(ir.server, ir.callID, ir.required.GetRequests()[key])})
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.inputWaits == nil {
		r.inputWaits = make(map[int]*statev1.InputWait)
	}
	r.inputWaits[i] = w
	return true
}

// pendingInputs lists the input requests a paused turn waits for, in
// call order.
func pendingInputs(t *statev1.PausedTurn) []*agentdv1.InputRequest {
	var out []*agentdv1.InputRequest
	for _, st := range t.GetStates() {
		for _, in := range st.GetInput().GetInputs() {
			out = append(out, in.GetRequest())
		}
	}
	return out
}

// checkInputAnswers requires exactly one answer for every input request
// the paused turn waits for (R-A7), with an action, and an accepted form
// that its schema takes.
func checkInputAnswers(v *violations, turn *statev1.PausedTurn, r *agentdv1.ResumeGeneration) {
	requests := make(map[string]*agentdv1.InputRequest)
	var pending []string
	for _, req := range pendingInputs(turn) {
		requests[req.GetId()] = req
		pending = append(pending, req.GetId())
	}
	matchAnswers(v, "input_responses", "input", pending, r.GetInputResponses(), func(field string, a *agentdv1.InputResponse) {
		if a.GetAction() == agentdv1.InputAction_INPUT_ACTION_UNSPECIFIED {
			v.add(field+".action", "is required: ACCEPT, DECLINE or CANCEL")
		}
		if req := requests[a.GetRequestId()]; req != nil && a.GetAction() == agentdv1.InputAction_INPUT_ACTION_ACCEPT {
			if _, err := formContent(req.GetRequestedSchema(), a.GetContent()); err != nil {
				v.add(field+".content", "%s", err.Error())
			}
		}
	})
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
