package main

import (
	"context"
	"io"

	agentdv1 "github.com/agentd/agentd/gen/go/agentd/v1"
)

const attachUsage = `usage: agentd attach ID [flags]

Follows a generation, through any agentd that shares its store: prints
its events after --after (all of them by default), then the live ones,
until it completes, fails or pauses. Attaching sends nothing to the
generation. When it pauses, agentd attach asks at the terminal for what
it waits for (approvals y/n, function results, authorizations, input)
and resumes it with the answers, as agentd resume does, with the agent
agentd stored or the one --request or the agent flags declare. End the
input (Ctrl-D) instead of answering and it stays paused: the command
that resumes it is printed.

examples:
  agentd attach gen_0193a5b2c4d6e8f0a1b2c3d4e5f60718
  agentd attach gen_0193a5b2c4d6e8f0a1b2c3d4e5f60718 --after 12 --json
` + clientUsage

// attach runs `agentd attach`.
func attach(ctx context.Context, args []string, getenv func(string) string, stdin io.Reader, stdout, stderr io.Writer) error {
	var c clientFlags
	var a agentFlags
	var after int64
	fs := newFlagSet("agentd attach", attachUsage)
	c.register(fs)
	a.register(fs)
	a.registerOutput(fs)
	fs.Int64Var(&after, "after", 0, "print the events after sequence number `N` (0: every event)")
	id, err := c.parseWithID(fs, "generation", args, getenv, stdout)
	if err != nil {
		return err
	}
	agent, err := a.agent()
	if err != nil {
		return err
	}
	p := c.printing(stdout, stderr)
	p.answerAlone(agent, stderr)
	first := &agentdv1.GenerateRequest{Kind: &agentdv1.GenerateRequest_Attach{Attach: &agentdv1.AttachGeneration{GenerationId: id, AfterSequence: after}}}
	return c.call(ctx, func(ctx context.Context, client agentdv1.AgentServiceClient) error {
		ended, err := talk(ctx, client, first, p, nil, stderr)
		if err != nil {
			return err
		}
		if ended.paused == nil {
			return p.unanswered(ended)
		}
		answers := newLines(stdin, ctx.Done())
		r, ok := askPending(ctx, ended.paused, answers, stderr)
		if !ok {
			p.resumeHint(ended.paused.GetGenerationId(), pendingOf(ended.paused), a.args())
			return nil
		}
		r.Agent = agent
		return resumeTalk(ctx, client, r, p, answers, a.args(), stderr)
	})
}

// askPending asks the person for an answer to everything pz waits for:
// the resume that brings them. ok is false when the input ended first.
func askPending(ctx context.Context, pz *agentdv1.GenerationPaused, answers *lines, stderr io.Writer) (r *agentdv1.ResumeGeneration, ok bool) {
	r = &agentdv1.ResumeGeneration{GenerationId: pz.GetGenerationId()}
	if r.ApprovalDecisions, ok = askEach(pz.GetApprovalRequests(), func(q *agentdv1.ApprovalRequest) (*agentdv1.ApprovalDecision, bool) {
		d := askApproval(ctx, q, answers, stderr)
		return d, d != nil
	}); !ok {
		return nil, false
	}
	if r.FunctionResults, ok = askEach(pz.GetFunctionCalls(), func(c *agentdv1.FunctionCall) (*agentdv1.FunctionResult, bool) {
		res := askResult(ctx, c, answers, stderr)
		return res, res != nil
	}); !ok {
		return nil, false
	}
	if r.AuthorizationResponses, ok = askEach(pz.GetAuthorizationRequests(), func(q *agentdv1.AuthorizationRequest) (*agentdv1.AuthorizationResponse, bool) {
		res := askAuthorization(ctx, q, answers, stderr)
		return res, res != nil
	}); !ok {
		return nil, false
	}
	r.InputResponses, ok = askEach(pz.GetInputRequests(), func(q *agentdv1.InputRequest) (*agentdv1.InputResponse, bool) {
		return askInput(ctx, q, answers, stderr)
	})
	return r, ok
}

// askEach asks each question in turn, and stops at the first that gets no
// answer.
func askEach[Q, A any](questions []Q, ask func(Q) (A, bool)) ([]A, bool) {
	var answers []A
	for _, q := range questions {
		a, ok := ask(q)
		if !ok {
			return nil, false
		}
		answers = append(answers, a)
	}
	return answers, true
}
