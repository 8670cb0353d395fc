package main

import (
	"bytes"
	"cmp"
	"encoding/json"
	"fmt"
	"io"
	"strings"
	"time"

	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/structpb"
	"mvdan.cc/sh/v3/syntax"

	agentdv1 "github.com/agentd/agentd/gen/go/agentd/v1"
)

// printer writes events and records for a person (text as it streams,
// everything else on lines of its own) or, asJSON, as JSON lines; notes,
// the commands to type next among them, go to notes, and a completed
// generation's structured answer, indented JSON, to answer (nil: w).
// quiet leaves out, for a person, the events a conversation does
// without: each generation's start, its turns' usage and its ordinary
// end.
type printer struct {
	w, notes, answer io.Writer
	asJSON, quiet    bool
	next             typed
	inText           bool
}

// answerAlone gives stdout, where the printer writes, to the structured
// answer alone when agent asks for one, and sends the events and notes to
// stderr instead: a script then reads the answer whole (agentd generate
// ... | jq .title) while a person still watches the generation. --json
// keeps its lines on stdout, the answer among them.
func (p *printer) answerAlone(agent *agentdv1.Agent, stderr io.Writer) {
	if agent.GetOutput() == nil || p.asJSON {
		return
	}
	p.answer, p.w, p.notes = p.w, stderr, stderr
}

// typed builds the commands a person is told to type next: this program,
// as they invoked it, and the --addr they gave, if any.
type typed struct {
	prog, addr string
}

// command is the command line of prog's subcommand sub with args,
// quoted for a POSIX shell.
func (t typed) command(sub string, args ...string) string {
	words := append([]string{t.prog, sub}, args...)
	if t.addr != "" {
		words = append(words, "--addr", t.addr)
	}
	for i, w := range words {
		if q, err := syntax.Quote(w, syntax.LangPOSIX); err == nil {
			words[i] = q
		}
	}
	return strings.Join(words, " ")
}

// show prints ev for a person or, asJSON, as one line of JSON.
func (p *printer) show(ev *agentdv1.GenerateResponse) {
	switch {
	case p.asJSON:
		p.json(ev)
		if o := ev.GetOutputInvalid(); o != nil {
			p.note("%s", outputInvalid(o))
		}
	case p.quiet && routine(ev):
	default:
		p.print(ev)
	}
}

// routine reports whether ev is one that quiet leaves out: a start, a
// turn's usage, or an end at the model's end of turn.
func routine(ev *agentdv1.GenerateResponse) bool {
	return ev.GetStarted() != nil || ev.GetUsage() != nil || ev.GetCompleted().GetStopReason() == agentdv1.StopReason_STOP_REASON_END_TURN
}

func (p *printer) json(m proto.Message) {
	b, _ := protojson.Marshal(m)
	fmt.Fprintln(p.w, string(b))
}

func (p *printer) line(format string, args ...any) {
	p.endText()
	fmt.Fprintf(p.w, format+"\n", args...)
}

// note prints a line for the person: among the output, or beside the
// JSON lines.
func (p *printer) note(format string, args ...any) {
	p.endText()
	fmt.Fprintf(p.notes, format+"\n", args...)
}

func (p *printer) endText() {
	if p.inText {
		fmt.Fprintln(p.w)
		p.inText = false
	}
}

func (p *printer) print(ev *agentdv1.GenerateResponse) {
	switch k := ev.GetEvent().(type) {
	case *agentdv1.GenerateResponse_Started:
		p.started(k.Started)
	case *agentdv1.GenerateResponse_TextDelta:
		fmt.Fprint(p.w, k.TextDelta.GetText())
		p.inText = true
	case *agentdv1.GenerateResponse_AuthorizationRequest:
		p.authorizationRequest(k.AuthorizationRequest)
	case *agentdv1.GenerateResponse_InputRequest:
		r := k.InputRequest
		p.line("input requested by server %s: %s", r.GetServerName(), r.GetMessage())
		if r.GetUrl() != "" {
			p.line("  %s", r.GetUrl())
		}
	case *agentdv1.GenerateResponse_Usage:
		u := k.Usage
		p.line("usage turn %d: %d input, %d output tokens, %d bytes of tool schemas", u.GetTurn(), u.GetInputTokens(), u.GetOutputTokens(), u.GetToolSchemaBytes())
	case *agentdv1.GenerateResponse_Paused:
		p.paused(k.Paused)
	case *agentdv1.GenerateResponse_Completed:
		c := k.Completed
		p.line("completed (%s, %d tool turns)", enumWord(c.GetStopReason().String(), "STOP_REASON_"), c.GetToolTurns())
		p.structured(c.GetStructured())
	default:
		p.other(ev)
	}
}

// other prints the events of a tool call (its start and end, the
// approval it waits for and who decided it, a function call for the
// client, a call the provider made itself), warnings and withdrawn turns.
func (p *printer) other(ev *agentdv1.GenerateResponse) {
	switch k := ev.GetEvent().(type) {
	case *agentdv1.GenerateResponse_ToolCallStarted:
		t := k.ToolCallStarted
		p.line("tool call %s %s%s", t.GetToolName(), t.GetArguments(), onServer(t.GetServerName()))
	case *agentdv1.GenerateResponse_ToolCallFinished:
		t := k.ToolCallFinished
		p.line("tool done %s (%s, %s): %s", t.GetToolName(), outcome(t.GetIsError()), t.GetDuration().AsDuration().Round(time.Microsecond), t.GetOutput())
	case *agentdv1.GenerateResponse_ApprovalRequest:
		p.line("approval requested: %s%s", k.ApprovalRequest.GetToolName(), onServer(k.ApprovalRequest.GetServerName()))
	case *agentdv1.GenerateResponse_FunctionCall:
		p.line("function call %s %s", k.FunctionCall.GetName(), k.FunctionCall.GetArguments())
	case *agentdv1.GenerateResponse_ProviderToolCall:
		c := k.ProviderToolCall
		p.line("provider tool call %s%s: %s", c.GetToolName(), onServer(c.GetServerName()), c.GetOutput())
	case *agentdv1.GenerateResponse_Warning:
		p.line("warning: %s", k.Warning.GetMessage())
	case *agentdv1.GenerateResponse_OutputInvalid:
		p.line("%s", outputInvalid(k.OutputInvalid))
	case *agentdv1.GenerateResponse_ApprovalDecided:
		p.line("%s", decided(k.ApprovalDecided))
	case *agentdv1.GenerateResponse_TurnWithdrawn:
		p.line("turn %d withdrawn, it is asked again: %s", k.TurnWithdrawn.GetTurn(), k.TurnWithdrawn.GetReason())
	case *agentdv1.GenerateResponse_Queued:
		q := k.Queued
		p.line("queued %s on thread %s behind %s", q.GetGenerationId(), q.GetThreadId(), q.GetBehindGenerationId())
	}
}

// structured prints a structured answer, if any, as indented JSON.
func (p *printer) structured(v *structpb.Value) {
	if v == nil {
		return
	}
	p.endText()
	var b bytes.Buffer
	_ = json.Indent(&b, jsonOf(v), "", "  ") // jsonOf's is valid JSON
	fmt.Fprintln(cmp.Or(p.answer, p.w), b.String())
}

// jsonOf is v as JSON on one line. encoding/json writes it rather than
// protojson, whose spacing varies from build to build on purpose: a
// script may compare what it reads.
func jsonOf(v *structpb.Value) []byte {
	b, _ := json.Marshal(v.AsInterface()) // a Value's interface is JSON's
	return b
}

// outputInvalid says that an answer did not fit the output schema, why,
// and what follows.
func outputInvalid(o *agentdv1.OutputInvalid) string {
	next := "a repair turn follows"
	if !o.GetRepair() {
		next = "no repair turn is left"
	}
	return fmt.Sprintf("warning: the answer of turn %d does not fit the output schema (%s): %s", o.GetTurn(), next, strings.Join(o.GetErrors(), "; "))
}

// outcome is how a tool call ended, in a word.
func outcome(isError bool) string {
	if isError {
		return "error"
	}
	return "ok"
}

// decided says what was decided of a request, by whom and why.
func decided(d *agentdv1.ApprovalDecided) string {
	what := "answered"
	switch d.GetKind() {
	case agentdv1.PendingRequestKind_PENDING_REQUEST_KIND_APPROVAL:
		what = "declined"
		if d.GetApproved() {
			what = "approved"
		}
	case agentdv1.PendingRequestKind_PENDING_REQUEST_KIND_INPUT:
		what = "answered (" + enumWord(d.GetAction().String(), "INPUT_ACTION_") + ")"
	}
	line := fmt.Sprintf("%s %s", d.GetRequestId(), what)
	if by := d.GetDecidedBy(); by != "" {
		line += " by " + by
	}
	if r := d.GetReason(); r != "" {
		line += ": " + r
	}
	return line
}

// enumWord is an enum value's name in lower case, without its prefix.
func enumWord(name, prefix string) string {
	return strings.ToLower(strings.TrimPrefix(name, prefix))
}

// started prints the generation's id, where its servers run and its
// tools.
func (p *printer) started(s *agentdv1.GenerationStarted) {
	verb := "started"
	switch {
	case s.GetResumed():
		verb = "resumed"
	case s.GetAdopted():
		verb = "adopted (its replica was lost)"
	}
	p.line("%s %s", verb, s.GetGenerationId())
	for _, srv := range s.GetServers() {
		p.line("  server %s: %s, %s", srv.GetName(), enumWord(srv.GetPlacement().String(), "PLACEMENT_"),
			enumWord(srv.GetTransport().String(), "TRANSPORT_"))
	}
	var tools []string
	for _, t := range s.GetTools() {
		tools = append(tools, t.GetName())
	}
	if len(tools) > 0 {
		p.line("  tools: %s", strings.Join(tools, ", "))
	}
}

// authorizationRequest prints why a server asks for authorization, the
// scopes it asks for and the URL to open.
func (p *printer) authorizationRequest(r *agentdv1.AuthorizationRequest) {
	why := strings.ReplaceAll(enumWord(r.GetReason().String(), "AUTHORIZATION_REASON_"), "_", " ")
	scopes := strings.Join(r.GetScopes(), " ")
	if scopes == "" {
		scopes = "(none named)"
	}
	p.line("authorization requested by server %s (%s), scopes: %s", r.GetServerName(), why, scopes)
	p.line("  %s", r.GetUrl())
}

// paused prints what a paused generation waits for.
func (p *printer) paused(pz *agentdv1.GenerationPaused) {
	p.line("paused %s until %s, waiting for: %s", pz.GetGenerationId(), localTime(pz.GetExpiresAt().AsTime()), strings.Join(pendingOf(pz).ids(), ", "))
	for _, r := range pz.GetAuthorizationRequests() {
		p.line("  authorize %s at: %s", r.GetServerName(), r.GetUrl())
	}
	for _, r := range pz.GetInputRequests() {
		p.line("  %s asks: %s", r.GetServerName(), r.GetMessage())
	}
}

// detached tells the person how to follow a detached generation.
func (p *printer) detached(id string) {
	p.note("detached %s; follow it: %s", id, p.next.command("attach", id))
}

// ending tells the person what to type after a stream that ended as e
// says: the command that resumes its pause, with agentArgs, the agent's
// flags as they declared it, or the one that follows it once queued.
func (p *printer) ending(e ended, agentArgs []string) {
	switch {
	case e.paused != nil:
		p.resumeHint(e.paused.GetGenerationId(), pendingOf(e.paused), agentArgs)
	case e.queued != nil:
		p.note("it runs once the thread is free; follow it: %s", p.next.command("attach", e.queued.GetGenerationId()))
	}
}

// unanswered is the error of a generation that completed without the
// structured answer that has stdout to itself (it stopped at a limit):
// a script reading the answer from stdout finds nothing there, so the
// exit status must say so.
func (p *printer) unanswered(e ended) error {
	if p.answer == nil || e.completed == nil || e.completed.GetStructured() != nil {
		return nil
	}
	why := enumWord(e.completed.GetStopReason().String(), "STOP_REASON_")
	if l := e.completed.GetLimit(); l != nil {
		why = "at its limit " + l.GetName()
	}
	return fmt.Errorf("generation %s completed without a structured answer (%s)", e.completed.GetGenerationId(), why)
}

// resumeHint tells the person the command that resumes a generation
// waiting for w, with agentArgs, the agent's flags as they declared it.
func (p *printer) resumeHint(id string, w pending, agentArgs []string) {
	p.note("resume it: %s", p.next.command("resume", append(append([]string{id}, w.answerArgs()...), agentArgs...)...))
	if len(w.approvals) > 0 {
		p.note("  (--decline in place of --approve refuses)")
	}
}

func onServer(name string) string {
	if name == "" {
		return ""
	}
	return " on " + name
}

// localTime is t for a person: to the second, in the local time zone.
func localTime(t time.Time) string {
	return t.Local().Format("2006-01-02 15:04:05 MST")
}

// pending is what a paused generation waits for.
type pending struct {
	approvals      []*agentdv1.ApprovalRequest
	calls          []*agentdv1.FunctionCall
	authorizations []*agentdv1.AuthorizationRequest
	inputs         []*agentdv1.InputRequest
}

func pendingOf(pz *agentdv1.GenerationPaused) pending {
	return pending{pz.GetApprovalRequests(), pz.GetFunctionCalls(), pz.GetAuthorizationRequests(), pz.GetInputRequests()}
}

// ids name what is pending: the approvals', function calls',
// authorizations' and input requests' ids, each with what it is.
func (w pending) ids() []string {
	var ids []string
	for _, r := range w.approvals {
		ids = append(ids, r.GetId()+" ("+cmp.Or(r.GetToolName(), "sampling")+onServer(r.GetServerName())+")")
	}
	for _, c := range w.calls {
		ids = append(ids, c.GetCallId()+" (function "+c.GetName()+")")
	}
	for _, r := range w.authorizations {
		ids = append(ids, r.GetId()+" (authorization of "+r.GetServerName()+")")
	}
	for _, r := range w.inputs {
		ids = append(ids, r.GetId()+" (input for "+r.GetServerName()+")")
	}
	return ids
}

// answerArgs answer everything pending as resume's flags: every approval
// approved, and what only the person knows (a function's result, the URL
// the browser came back to, a form's answer) as a placeholder in <>.
func (w pending) answerArgs() []string {
	var args []string
	if len(w.approvals) > 0 {
		ids := make([]string, len(w.approvals))
		for i, r := range w.approvals {
			ids[i] = r.GetId()
		}
		args = append(args, "--approve", strings.Join(ids, ","))
	}
	for _, c := range w.calls {
		args = append(args, "--result", c.GetCallId()+"=<output of "+c.GetName()+">")
	}
	for _, r := range w.authorizations {
		args = append(args, "--authorize", r.GetId()+"=<the URL the browser is sent back to>")
	}
	for _, r := range w.inputs {
		answer := "accept"
		if r.GetMode() != agentdv1.InputMode_INPUT_MODE_URL {
			answer = "accept:<a JSON object>"
		}
		args = append(args, "--input", r.GetId()+"="+answer)
	}
	return args
}
