package server

import (
	agentdv1 "github.com/agentd/agentd/gen/go/agentd/v1"

	"context"
	"errors"
)

// toolCallKey holds, in an MCP tool call's context, the call's id: a
// server's request during the call names it.
type toolCallKey struct{}

func withToolCall(ctx context.Context, id string) context.Context {
	return context.WithValue(ctx, toolCallKey{}, id)
}

// A question is what the generation asks its client while one of its
// calls runs, because the call's MCP server asked agentd: a person's
// authorization of the server (authorization.go), the input it asks for
// (input.go), or the approval of a sample of the agent's model
// (sample.go). It goes on the stream, and its answer comes from it, keyed
// by the question's id. When nobody answers, a pausable question waits for
// a resume (the generation pauses once the turn's calls are done, with
// the call waiting for it: pause.go); any other is refused, and the
// server's request with it.
type question struct {
	// request makes the question when it is about to be asked: its id and
	// the event that asks it.
	request  func() (id string, ev *agentdv1.GenerateResponse)
	pausable bool
	// check, when set, refuses an answer of the stream's holder that the
	// question cannot take, before it is recorded: the error ends the
	// generation, as an invalid answer on the stream does. A decision
	// made through DecideRequests was checked there.
	check func(*decision) error
}

// noAnswer says why nobody answered a question, in words that follow "the
// client"; cause is the mailbox's error when the client was asked and let
// it be (errUnanswered, errAnswerTimeout), nil when it was not there to
// ask.
type noAnswer struct {
	why   string
	cause error
}

// ask asks q and waits for its answer, at most the answer timeout: the
// stream holder's, or a decision made through DecideRequests, whichever
// is recorded first (takeDecision). No answer is nobody's: none says
// why, and err is nil. err is the generation's end, or the call's, which
// stops the wait. The request is pending meanwhile, and after, when a
// pausable one waits for a resume.
func (g *generation) ask(ctx context.Context, q question) (answer *decision, none *noAnswer, err error) {
	if g.link.clientless {
		return nil, &noAnswer{why: whyNotAttached}, nil
	}
	id, ev := q.request()
	if q.pausable {
		// Losing the client while it waits pauses the generation, as
		// during an approval; the pause keeps it marked waiting.
		if gone := g.link.waiting(true); gone {
			return nil, &noAnswer{why: whyGone}, nil
		}
	}
	g.link.mail.expect(id)
	req, server := g.pendingAsked(ev)
	g.addPending(ctx, req, server, "")
	if err := g.emit(ctx, ev); err != nil {
		g.dropPending(id)
		return nil, nil, err
	}
	answer, none, err = g.awaitAnswer(ctx, id, q.check)
	if none == nil || !q.pausable {
		g.dropPending(id)
	}
	if err != nil || none != nil {
		return nil, none, err
	}
	if q.pausable && g.link.waiting(false) {
		// The client went away as the answer came: losing it now stops
		// the generation, as it would have outside the wait.
		g.link.cancel(g.link.gone())
	}
	return answer, nil, nil
}

// awaitAnswer waits for the answer to request id, checks it with check
// (when set) and takes it.
func (g *generation) awaitAnswer(ctx context.Context, id string, check func(*decision) error) (*decision, *noAnswer, error) {
	answer, err := g.link.mail.await(ctx, id, g.plan.answerTimeout)
	switch {
	case errors.Is(err, errUnanswered):
		return nil, &noAnswer{why: whyEnded, cause: err}, nil
	case errors.Is(err, errAnswerTimeout):
		return nil, &noAnswer{why: whyTimedOut(g.plan.answerTimeout), cause: err}, nil
	case err != nil:
		return nil, nil, err
	}
	if check != nil && !answer.recorded {
		if err := check(answer); err != nil {
			return nil, nil, err
		}
	}
	taken, err := g.takeDecision(ctx, answer)
	return taken, nil, err
}

// pendingAsked is the request that ev, an event that asks a question,
// makes pending, and the server it concerns.
func (g *generation) pendingAsked(ev *agentdv1.GenerateResponse) (*agentdv1.PendingRequest, string) {
	var req *agentdv1.PendingRequest
	switch e := ev.GetEvent().(type) {
	case *agentdv1.GenerateResponse_ApprovalRequest:
		req = g.waitingRequest(agentdv1.PendingRequestKind_PENDING_REQUEST_KIND_APPROVAL)
		req.Request = &agentdv1.PendingRequest_Approval{Approval: e.ApprovalRequest}
		return req, e.ApprovalRequest.GetServerName()
	case *agentdv1.GenerateResponse_AuthorizationRequest:
		req = g.waitingRequest(agentdv1.PendingRequestKind_PENDING_REQUEST_KIND_AUTHORIZATION)
		req.Request = &agentdv1.PendingRequest_Authorization{Authorization: e.AuthorizationRequest}
		return req, e.AuthorizationRequest.GetServerName()
	}
	req = g.waitingRequest(agentdv1.PendingRequestKind_PENDING_REQUEST_KIND_INPUT)
	req.Request = &agentdv1.PendingRequest_Input{Input: ev.GetInputRequest()}
	return req, ev.GetInputRequest().GetServerName()
}
