package main

import (
	"errors"
	"flag"
	"fmt"
	"strings"

	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/types/known/structpb"

	agentdv1 "github.com/agentd/agentd/gen/go/agentd/v1"
)

// answerFlags are the answers a resume brings: a decision for every
// pending approval, a result for every function call, and the answers to
// authorization and input requests.
type answerFlags struct {
	approve, decline idsFlag
	results          resultFlags
	authorizations   authorizeFlags
	inputs           inputFlags
}

// register adds the answer flags to fs; note ends each flag's usage.
func (a *answerFlags) register(fs *flag.FlagSet, note string) {
	fs.Var(&a.approve, "approve", "approve these approval requests: `ids`, comma-separated (repeatable)"+note)
	fs.Var(&a.decline, "decline", "decline these approval requests: `ids`, comma-separated (repeatable)"+note)
	fs.Var(&a.results, "result", "a function call's result, `CALL_ID=OUTPUT` (repeatable)"+note)
	fs.Var(&a.authorizations, "authorize", "an authorization's answer, `REQUEST_ID=REDIRECT_URL`, the URL the person's browser came back to (repeatable)"+note)
	fs.Var(&a.inputs, "input", "an input request's answer, `REQUEST_ID=accept:JSON_OBJECT` (a form), REQUEST_ID=accept (a web page), REQUEST_ID=decline or REQUEST_ID=cancel (repeatable)"+note)
}

// given reports whether any answer was given.
func (a *answerFlags) given() bool {
	return len(a.approve)+len(a.decline)+len(a.results)+len(a.authorizations)+len(a.inputs) > 0
}

// resume is the resume of generation id with these answers; agent nil
// leaves it to agentd to use the agent it stored.
func (a *answerFlags) resume(id string, agent *agentdv1.Agent) *agentdv1.ResumeGeneration {
	r := &agentdv1.ResumeGeneration{GenerationId: id, Agent: agent, FunctionResults: a.results,
		AuthorizationResponses: a.authorizations, InputResponses: a.inputs}
	for _, id := range a.approve {
		r.ApprovalDecisions = append(r.ApprovalDecisions, &agentdv1.ApprovalDecision{RequestId: id, Approved: true})
	}
	for _, id := range a.decline {
		r.ApprovalDecisions = append(r.ApprovalDecisions, &agentdv1.ApprovalDecision{RequestId: id})
	}
	return r
}

// idsFlag collects ids, comma-separated and repeatable.
type idsFlag []string

func (ids *idsFlag) String() string { return strings.Join(*ids, ",") }

func (ids *idsFlag) Set(v string) error {
	for _, id := range strings.Split(v, ",") {
		if id = strings.TrimSpace(id); id != "" {
			*ids = append(*ids, id)
		}
	}
	return nil
}

// authorizeFlags collects --authorize REQUEST_ID=REDIRECT_URL.
type authorizeFlags []*agentdv1.AuthorizationResponse

func (a *authorizeFlags) String() string { return "" }

func (a *authorizeFlags) Set(v string) error {
	id, redirect, ok := strings.Cut(v, "=")
	if !ok || id == "" || redirect == "" {
		return errors.New("want REQUEST_ID=REDIRECT_URL")
	}
	*a = append(*a, &agentdv1.AuthorizationResponse{RequestId: id, RedirectUrl: redirect})
	return nil
}

// inputFlags collects --input REQUEST_ID=accept:JSON|accept|decline|cancel.
type inputFlags []*agentdv1.InputResponse

func (in *inputFlags) String() string { return "" }

func (in *inputFlags) Set(v string) error {
	id, answer, ok := strings.Cut(v, "=")
	if !ok || id == "" {
		return errors.New("want REQUEST_ID=accept:JSON_OBJECT, REQUEST_ID=accept, REQUEST_ID=decline or REQUEST_ID=cancel")
	}
	r := &agentdv1.InputResponse{RequestId: id}
	action, refused := refusals[answer]
	switch {
	case refused:
		r.Action = action
	case answer == "accept": // a web page's request, which has no content
		r.Action = agentdv1.InputAction_INPUT_ACTION_ACCEPT
	case strings.HasPrefix(answer, "accept:"):
		content := &structpb.Struct{}
		if err := protojson.Unmarshal([]byte(strings.TrimPrefix(answer, "accept:")), content); err != nil {
			return fmt.Errorf("accept: want a JSON object: %v", err)
		}
		r.Action, r.Content = agentdv1.InputAction_INPUT_ACTION_ACCEPT, content
	default:
		return errors.New("want REQUEST_ID=accept:JSON_OBJECT, REQUEST_ID=accept, REQUEST_ID=decline or REQUEST_ID=cancel")
	}
	*in = append(*in, r)
	return nil
}

// refusals are the answers that refuse an input request, by their word.
var refusals = map[string]agentdv1.InputAction{
	"decline": agentdv1.InputAction_INPUT_ACTION_DECLINE,
	"cancel":  agentdv1.InputAction_INPUT_ACTION_CANCEL,
}

// resultFlags collects --result CALL_ID=OUTPUT.
type resultFlags []*agentdv1.FunctionResult

func (r *resultFlags) String() string { return "" }

func (r *resultFlags) Set(v string) error {
	id, out, ok := strings.Cut(v, "=")
	if !ok || id == "" {
		return errors.New("want CALL_ID=OUTPUT")
	}
	*r = append(*r, &agentdv1.FunctionResult{CallId: id, Output: out})
	return nil
}
