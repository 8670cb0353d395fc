package main

import (
	"context"
	"fmt"
	"io"
	"strings"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	agentdv1 "github.com/agentd/agentd/gen/go/agentd/v1"
)

const resumeUsage = `usage: agentd resume ID [flags]

Resumes a paused generation with an answer for everything it waits for:
--approve or --decline for each approval request, --result for each
function call, --authorize for each authorization and --input for each
input request. It then prints the generation's events as agentd
generate does, asking at the terminal for what the generation asks next.
agentd resumes the generation with the agent it stored; an agent whose
declarations hold secrets is stored only when agentd seals it
(store.encryption_key_file): without that, give the agent again, with
--request and the original request or with the flags that declared it.
A pause prints the command to type; agentd get ID shows what a paused
generation waits for.

examples:
  agentd resume gen_0193a5b2c4d6e8f0a1b2c3d4e5f60718 --approve approval_call_1_1
  agentd resume gen_0193a5b2c4d6e8f0a1b2c3d4e5f60718 --decline approval_call_1_1 --request examples/approval-start.json
  agentd resume gen_0193a5b2c4d6e8f0a1b2c3d4e5f60718 --result 'call_1_1={"temperature": 21}'
` + clientUsage

// resume runs `agentd resume`.
func resume(ctx context.Context, args []string, getenv func(string) string, stdin io.Reader, stdout, stderr io.Writer) error {
	var c clientFlags
	var a agentFlags
	var answers answerFlags
	fs := newFlagSet("agentd resume", resumeUsage)
	c.register(fs)
	a.register(fs)
	a.registerOutput(fs)
	answers.register(fs, "")
	id, err := c.parseWithID(fs, "generation", args, getenv, stdout)
	if err != nil {
		return err
	}
	return resumeWith(ctx, &c, &a, answers.resume(id, nil), stdin, stdout, stderr)
}

// resumeWith resumes r, with the agent of a when it declares one, and
// talks to the resumed generation as agentd generate does.
func resumeWith(ctx context.Context, c *clientFlags, a *agentFlags, r *agentdv1.ResumeGeneration, stdin io.Reader, stdout, stderr io.Writer) error {
	agent, err := a.agent()
	if err != nil {
		return err
	}
	r.Agent = agent
	p := c.printing(stdout, stderr)
	p.answerAlone(agent, stderr)
	return c.call(ctx, func(ctx context.Context, client agentdv1.AgentServiceClient) error {
		return resumeTalk(ctx, client, r, p, newLines(stdin, ctx.Done()), a.args(), stderr)
	})
}

// resumeTalk resumes r and talks to the generation until its stream ends;
// a new pause prints the command that resumes it, with agentArgs.
func resumeTalk(ctx context.Context, client agentdv1.AgentServiceClient, r *agentdv1.ResumeGeneration, p *printer, answers *lines, agentArgs []string, stderr io.Writer) error {
	first := &agentdv1.GenerateRequest{Kind: &agentdv1.GenerateRequest_Resume{Resume: r}}
	ended, err := talk(ctx, client, first, p, answers, stderr)
	if err != nil {
		return agentMissing(err, r)
	}
	p.ending(ended, agentArgs)
	return p.unanswered(ended)
}

// agentMissing says what to do when agentd needs the agent of a resume
// that brought none: it kept none for the generation.
func agentMissing(err error, r *agentdv1.ResumeGeneration) error {
	if r.GetAgent() != nil || status.Code(err) != codes.InvalidArgument || !strings.Contains(status.Convert(err).Message(), "resume.agent") {
		return err
	}
	return fmt.Errorf("the resume of %s needs its agent again: give --request with the original request's file, or the --provider, --model, --instructions "+
		"and --mcp flags it started with (agentd keeps an agent whose declarations hold secrets only when store.encryption_key_file seals it). agentd said: %s",
		r.GetGenerationId(), status.Convert(err).Message())
}
