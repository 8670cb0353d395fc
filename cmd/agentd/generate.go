package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"strings"

	agentdv1 "github.com/agentd/agentd/gen/go/agentd/v1"
)

const generateUsage = `usage: agentd generate [flags]

Runs one generation on a running agentd and prints its events: the
model's text as it streams, each tool call and its result, the usage of
each turn. The agent comes from the flags (--provider, --model,
--instructions, and an --mcp for each MCP server) or from --request, a
StartGeneration in JSON. Tool calls of the --mcp servers wait for your
approval (y/n) unless --require-approval never; a function call asks for
its result; an MCP server's authorization request prints the URL to open
and reads back the URL the browser is sent to (on a loopback http
redirect, agentd generate catches it itself); a request for input asks
for a JSON answer, or Enter once a web page is done. End the input
(Ctrl-D) instead of answering and the generation pauses: the command
that resumes it is printed. --detach starts the generation and returns
at once, printing the command that follows it. With --output-schema (or
a --request whose agent has an output) the answer must be JSON that fits
the schema: stdout then carries that answer alone, indented, and the
events go to stderr; an answer the schema refuses prints a warning.

examples:
  agentd generate --provider openai --model gpt-4o-mini \
    --mcp 'files=npx -y @modelcontextprotocol/server-filesystem .' --prompt 'List the files'
  agentd generate --provider mock --mcp demo --prompt 'Hello'
  agentd generate --request examples/demo-start.json
  agentd generate --detach --request examples/approval-start.json
  agentd generate --request examples/structured-start.json --output-schema examples/ticket.schema.json
` + clientUsage

// generateFlags are agentd generate's flags.
type generateFlags struct {
	client  clientFlags
	agent   agentFlags
	prompt  string
	detach  bool
	resume  string
	answers answerFlags
}

// generate runs `agentd generate`; getenv gives the defaults of the
// client flags, which override them.
func generate(ctx context.Context, args []string, getenv func(string) string, stdin io.Reader, stdout, stderr io.Writer) error {
	f, err := parseGenerateFlags(args, getenv, stdout)
	if err != nil {
		return err
	}
	if f.resume != "" {
		fmt.Fprintf(stderr, "agentd generate --resume is deprecated: use %s\n", f.client.typed().command("resume", f.resume, "..."))
		return resumeWith(ctx, &f.client, &f.agent, f.answers.resume(f.resume, nil), stdin, stdout, stderr)
	}
	if f.answers.given() {
		return errors.New("--approve, --decline, --result, --authorize and --input answer a paused generation: give them to agentd resume")
	}
	start, err := f.agent.start(f.prompt)
	if err != nil {
		return err
	}
	start.Detach = start.Detach || f.detach
	first := &agentdv1.GenerateRequest{Kind: &agentdv1.GenerateRequest_Start{Start: start}}
	p := f.client.printing(stdout, stderr)
	p.answerAlone(start.GetAgent(), stderr)
	return f.client.call(ctx, func(ctx context.Context, client agentdv1.AgentServiceClient) error {
		ended, err := talk(ctx, client, first, p, newLines(stdin, ctx.Done()), stderr)
		switch {
		case err != nil:
			return err
		case start.GetDetach() && ended.id != "":
			p.detached(ended.id)
		default:
			p.ending(ended, f.agent.args())
		}
		return p.unanswered(ended)
	})
}

// parseGenerateFlags parses args; the client flags not given take their
// variables.
func parseGenerateFlags(args []string, getenv func(string) string, stdout io.Writer) (*generateFlags, error) {
	var f generateFlags
	fs := newFlagSet("agentd generate", generateUsage)
	f.client.register(fs)
	f.agent.register(fs)
	f.agent.registerOutput(fs)
	fs.StringVar(&f.prompt, "prompt", "", "the user's message")
	fs.BoolVar(&f.detach, "detach", false, "start the generation and return: it runs without this command, which prints how to follow it")
	fs.StringVar(&f.resume, "resume", "", "deprecated: agentd resume `ID` does this")
	f.answers.register(fs, " (deprecated, with --resume)")
	positional, err := parseFlags(fs, args, stdout)
	if err != nil {
		return nil, err
	}
	if len(positional) > 0 {
		return nil, fmt.Errorf("agentd generate takes flags only, not %q (\"agentd generate -h\" shows them)", positional[0])
	}
	f.client.fromEnv(fs, getenv)
	return &f, nil
}

// ended is how a Generate stream ended: the generation's id, its pause
// when it paused, its place in its thread's queue when it was queued, and
// its end when it completed.
type ended struct {
	id        string
	paused    *agentdv1.GenerationPaused
	queued    *agentdv1.GenerationQueued
	completed *agentdv1.GenerationCompleted
}

// saw notes what ev says of how the stream ends: its pause, queued and
// completed events are its last.
func (e *ended) saw(ev *agentdv1.GenerateResponse) {
	if s := ev.GetStarted(); s != nil {
		e.id = s.GetGenerationId()
	}
	e.paused, e.queued, e.completed = ev.GetPaused(), ev.GetQueued(), ev.GetCompleted()
}

// talk opens a Generate stream with first, prints its events and answers
// those that ask, from answers, until the stream ends. answers nil
// answers nothing, as an attached stream must not.
func talk(ctx context.Context, client agentdv1.AgentServiceClient, first *agentdv1.GenerateRequest, p *printer, answers *lines, stderr io.Writer) (ended, error) {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	stream, err := client.Generate(ctx)
	if err != nil {
		return ended{}, err
	}
	if err := send(stream, first); err != nil {
		return ended{}, err
	}
	if answers == nil {
		if err := stream.CloseSend(); err != nil {
			return ended{}, err
		}
	}
	return converse(ctx, stream, p, answers, stderr)
}

// send sends the stream's first message. A stream that ended before it
// took the message (a refused credential, say) says why in the status
// Recv returns.
func send(stream agentdv1.AgentService_GenerateClient, first *agentdv1.GenerateRequest) error {
	err := stream.Send(first)
	if errors.Is(err, io.EOF) {
		if _, rerr := stream.Recv(); rerr != nil && !errors.Is(rerr, io.EOF) {
			err = rerr
		}
	}
	return err
}

// converse prints the stream's events and answers those that ask, from
// answers (nil: none), until the stream ends. When the input ends it
// answers nothing more, so the generation pauses.
func converse(ctx context.Context, stream agentdv1.AgentService_GenerateClient, p *printer, answers *lines, stderr io.Writer) (ended, error) {
	var e ended
	for {
		ev, err := stream.Recv()
		if errors.Is(err, io.EOF) {
			return e, nil
		}
		if err != nil {
			return e, err
		}
		p.show(ev)
		e.saw(ev)
		if answers == nil {
			continue
		}
		switch answer := answerFor(ctx, ev, answers, stderr); {
		case answer != nil:
			err = stream.Send(answer)
		case needsAnswer(ev):
			err = stream.CloseSend()
		}
		if err != nil {
			return e, err
		}
	}
}

// answerFor asks the person for the answer to ev; nil when ev asks for
// none, or the input has ended.
func answerFor(ctx context.Context, ev *agentdv1.GenerateResponse, answers *lines, stderr io.Writer) *agentdv1.GenerateRequest {
	switch k := ev.GetEvent().(type) {
	case *agentdv1.GenerateResponse_ApprovalRequest:
		if d := askApproval(ctx, k.ApprovalRequest, answers, stderr); d != nil {
			return &agentdv1.GenerateRequest{Kind: &agentdv1.GenerateRequest_ApprovalDecision{ApprovalDecision: d}}
		}
	case *agentdv1.GenerateResponse_FunctionCall:
		if r := askResult(ctx, k.FunctionCall, answers, stderr); r != nil {
			return &agentdv1.GenerateRequest{Kind: &agentdv1.GenerateRequest_FunctionResult{FunctionResult: r}}
		}
	case *agentdv1.GenerateResponse_AuthorizationRequest:
		if r := askAuthorization(ctx, k.AuthorizationRequest, answers, stderr); r != nil {
			return &agentdv1.GenerateRequest{Kind: &agentdv1.GenerateRequest_AuthorizationResponse{AuthorizationResponse: r}}
		}
	case *agentdv1.GenerateResponse_InputRequest:
		if resp, ok := askInput(ctx, k.InputRequest, answers, stderr); ok {
			return &agentdv1.GenerateRequest{Kind: &agentdv1.GenerateRequest_InputResponse{InputResponse: resp}}
		}
	}
	return nil
}

// askApproval asks the person to approve r: y or yes approves, anything
// else declines; nil when the input has ended.
func askApproval(ctx context.Context, r *agentdv1.ApprovalRequest, answers *lines, stderr io.Writer) *agentdv1.ApprovalDecision {
	line, ok := ask(ctx, answers, stderr, fmt.Sprintf("%s %s [y/N] ", r.GetPrompt(), r.GetArguments()))
	if !ok {
		return nil
	}
	approved := strings.EqualFold(line, "y") || strings.EqualFold(line, "yes")
	return &agentdv1.ApprovalDecision{RequestId: r.GetId(), Approved: approved, Digest: r.GetDigest()}
}

// askResult asks the person for the result of function call c; nil when
// the input has ended.
func askResult(ctx context.Context, c *agentdv1.FunctionCall, answers *lines, stderr io.Writer) *agentdv1.FunctionResult {
	line, ok := ask(ctx, answers, stderr, fmt.Sprintf("result of %s(%s): ", c.GetName(), c.GetArguments()))
	if !ok {
		return nil
	}
	return &agentdv1.FunctionResult{CallId: c.GetCallId(), Output: line}
}

// askAuthorization asks the person to authorize at the URL of r; nil when
// the input has ended.
func askAuthorization(ctx context.Context, r *agentdv1.AuthorizationRequest, answers *lines, stderr io.Writer) *agentdv1.AuthorizationResponse {
	redirect, ok := authorize(ctx, r, answers, stderr)
	if !ok {
		return nil
	}
	return &agentdv1.AuthorizationResponse{RequestId: r.GetId(), RedirectUrl: redirect}
}

// ask prompts for one line; ok is false when the input has ended.
func ask(ctx context.Context, in *lines, w io.Writer, prompt string) (string, bool) {
	fmt.Fprint(w, prompt)
	select {
	case ln := <-in.next():
		if !ln.ok {
			fmt.Fprintln(w)
		}
		return ln.text, ln.ok
	case <-ctx.Done():
		return "", false
	}
}

func needsAnswer(ev *agentdv1.GenerateResponse) bool {
	return ev.GetApprovalRequest() != nil || ev.GetFunctionCall() != nil || ev.GetAuthorizationRequest() != nil || ev.GetInputRequest() != nil
}
