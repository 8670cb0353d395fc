package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"strings"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/metadata"
	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/types/known/structpb"

	agentdv1 "github.com/agentd/agentd/gen/go/agentd/v1"
	"github.com/agentd/agentd/internal/grpcserver"
	"github.com/agentd/agentd/internal/tlsconf"
)

const generateUsage = `usage: agentd generate [flags]

Runs one generation against a running agentd and prints its events.
Approval requests are asked on the terminal (y/n); function calls ask for
their result. An MCP server's authorization request prints the URL to open
and reads back the URL the browser is sent to after authorizing; when that
is a loopback http address (http://127.0.0.1:PORT/...), agentd generate
also listens there and takes the browser's redirect itself. A server's
request for input asks for a JSON answer (or, for a web page, Enter once
done). End the input (Ctrl-D) instead of answering, and the generation
pauses; resume it later with --resume, answering every pending
request with --approve, --decline, --result, --authorize and --input.

  agentd generate --request examples/demo-start.json
  agentd generate --provider mock --prompt "Hello"
  agentd generate --request examples/approval-start.json --resume gen_... --approve approval_call_1_1
  agentd generate --tls-ca ca.pem --tls-cert client.pem --tls-key client-key.pem --prompt "Hello"

--token, --tls-ca, --tls-cert and --tls-key default to AGENTD_TOKEN,
AGENTD_TLS_CA, AGENTD_TLS_CERT and AGENTD_TLS_KEY, as in the examples.
`

// generate runs `agentd generate`; getenv gives the defaults of --token
// and the TLS flags, which override them.
func generate(ctx context.Context, args []string, getenv func(string) string, stdin io.Reader, stdout, stderr io.Writer) error {
	f, err := parseGenerateFlags(args, getenv, stderr)
	if err != nil {
		return err
	}
	first, err := f.firstRequest()
	if err != nil {
		return err
	}
	conn, err := f.dial()
	if err != nil {
		return err
	}
	defer conn.Close()
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	if f.token != "" {
		ctx = metadata.AppendToOutgoingContext(ctx, "authorization", "Bearer "+f.token)
	}
	stream, err := agentdv1.NewAgentServiceClient(conn).Generate(ctx)
	if err != nil {
		return err
	}
	if err := send(stream, first); err != nil {
		return err
	}
	return converse(ctx, stream, f.asJSON, newLines(stdin, ctx.Done()), stdout, stderr)
}

// generateFlags are agentd generate's flags.
type generateFlags struct {
	addr, token                           string
	tlsCA, tlsCert, tlsKey, tlsServerName string
	requestFile, provider, model, prompt  string
	asJSON                                bool
	resume, approve, decline              string
	results                               resultFlags
	authorizations                        authorizeFlags
	inputs                                inputFlags
}

// parseGenerateFlags parses args; the token and TLS flags not given take
// their variables.
func parseGenerateFlags(args []string, getenv func(string) string, stderr io.Writer) (*generateFlags, error) {
	var f generateFlags
	fs := flag.NewFlagSet("agentd generate", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.Usage = func() { fmt.Fprint(stderr, generateUsage); fs.PrintDefaults() }
	fs.StringVar(&f.addr, "addr", "127.0.0.1:7070", "agentd address")
	// Not defaulted from the environment in the flag set: the flag package
	// prints a default in the usage, and the token and the key's path must
	// never be printed. A flag not given takes its variable after parsing.
	fs.StringVar(&f.token, "token", "", "API key or token sent as \"authorization: Bearer\" (default: env AGENTD_TOKEN); none: no credential")
	fs.StringVar(&f.tlsCA, "tls-ca", "", "dial with TLS, trusting the CA certificates in this PEM file (default: env AGENTD_TLS_CA; TLS with none: the system's roots)")
	fs.StringVar(&f.tlsCert, "tls-cert", "", "dial with TLS, presenting this PEM client certificate (with --tls-key) to a server that requires one (default: env AGENTD_TLS_CERT)")
	fs.StringVar(&f.tlsKey, "tls-key", "", "the PEM private key of --tls-cert (default: env AGENTD_TLS_KEY)")
	fs.StringVar(&f.tlsServerName, "tls-server-name", "", "dial with TLS, checking the server's certificate for this name (default: the host of --addr)")
	fs.StringVar(&f.requestFile, "request", "", "StartGeneration as JSON (proto JSON mapping)")
	fs.StringVar(&f.provider, "provider", "mock", "provider, when --request is not given")
	fs.StringVar(&f.model, "model", "", "model, when --request is not given")
	fs.StringVar(&f.prompt, "prompt", "", "user message, when --request is not given")
	fs.BoolVar(&f.asJSON, "json", false, "print each event as one line of JSON")
	fs.StringVar(&f.resume, "resume", "", "resume this paused generation (its agent comes from --request)")
	fs.StringVar(&f.approve, "approve", "", "with --resume: approval request ids to approve, comma-separated")
	fs.StringVar(&f.decline, "decline", "", "with --resume: approval request ids to decline, comma-separated")
	fs.Var(&f.results, "result", "with --resume: a function result, CALL_ID=OUTPUT (repeatable)")
	fs.Var(&f.authorizations, "authorize", "with --resume: an authorization's answer, REQUEST_ID=REDIRECT_URL, the URL the person's browser came back to (repeatable)")
	fs.Var(&f.inputs, "input", "with --resume: an input request's answer, REQUEST_ID=accept:JSON_OBJECT, REQUEST_ID=decline or REQUEST_ID=cancel (repeatable)")
	if err := fs.Parse(args); err != nil {
		return nil, err
	}
	for _, d := range []struct {
		flag, env string
		v         *string
	}{{"token", "AGENTD_TOKEN", &f.token}, {"tls-ca", "AGENTD_TLS_CA", &f.tlsCA}, {"tls-cert", "AGENTD_TLS_CERT", &f.tlsCert}, {"tls-key", "AGENTD_TLS_KEY", &f.tlsKey}} {
		if !flagSet(fs, d.flag) {
			*d.v = getenv(d.env)
		}
	}
	return &f, nil
}

// firstRequest is the stream's first message: the start, or with
// --resume the resume of that generation with the answers given.
func (f *generateFlags) firstRequest() (*agentdv1.GenerateRequest, error) {
	start, err := startRequest(f.requestFile, f.provider, f.model, f.prompt)
	if err != nil {
		return nil, err
	}
	if f.resume == "" {
		return &agentdv1.GenerateRequest{Kind: &agentdv1.GenerateRequest_Start{Start: start}}, nil
	}
	r := &agentdv1.ResumeGeneration{GenerationId: f.resume, Agent: start.GetAgent(), FunctionResults: f.results,
		AuthorizationResponses: f.authorizations, InputResponses: f.inputs}
	for _, id := range splitIDs(f.approve) {
		r.ApprovalDecisions = append(r.ApprovalDecisions, &agentdv1.ApprovalDecision{RequestId: id, Approved: true})
	}
	for _, id := range splitIDs(f.decline) {
		r.ApprovalDecisions = append(r.ApprovalDecisions, &agentdv1.ApprovalDecision{RequestId: id})
	}
	return &agentdv1.GenerateRequest{Kind: &agentdv1.GenerateRequest_Resume{Resume: r}}, nil
}

// dial connects to --addr, over TLS when a TLS flag is given.
func (f *generateFlags) dial() (*grpc.ClientConn, error) {
	creds, err := f.credentials()
	if err != nil {
		return nil, err
	}
	return grpcserver.Dial(f.addr, grpcserver.Telemetry{}, creds)
}

// credentials are TLS's when any TLS flag is given; nil dials in
// plaintext.
func (f *generateFlags) credentials() (credentials.TransportCredentials, error) {
	if f.tlsCA == "" && f.tlsCert == "" && f.tlsKey == "" && f.tlsServerName == "" {
		return nil, nil
	}
	cfg, err := tlsconf.Client(f.tlsCA, f.tlsCert, f.tlsKey, f.tlsServerName)
	if err != nil {
		return nil, err
	}
	return credentials.NewTLS(cfg), nil
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

// converse prints the stream's events (as JSON lines with asJSON) and
// answers those that ask, from answers, until the stream ends. When the
// input ends it answers nothing more, so the generation pauses.
func converse(ctx context.Context, stream agentdv1.AgentService_GenerateClient, asJSON bool, answers *lines, stdout, stderr io.Writer) error {
	p := printer{w: stdout}
	for {
		ev, err := stream.Recv()
		if errors.Is(err, io.EOF) {
			return nil
		}
		if err != nil {
			return err
		}
		p.show(ev, asJSON)
		switch answer := answerFor(ctx, ev, answers, stderr); {
		case answer != nil:
			err = stream.Send(answer)
		case needsAnswer(ev):
			err = stream.CloseSend()
		}
		if err != nil {
			return err
		}
	}
}

// answerFor asks the person for the answer to ev; nil when ev asks for
// none, or the input has ended.
func answerFor(ctx context.Context, ev *agentdv1.GenerateResponse, answers *lines, stderr io.Writer) *agentdv1.GenerateRequest {
	switch k := ev.GetEvent().(type) {
	case *agentdv1.GenerateResponse_ApprovalRequest:
		return askApproval(ctx, k.ApprovalRequest, answers, stderr)
	case *agentdv1.GenerateResponse_FunctionCall:
		return askResult(ctx, k.FunctionCall, answers, stderr)
	case *agentdv1.GenerateResponse_AuthorizationRequest:
		r := k.AuthorizationRequest
		if redirect, ok := authorize(ctx, r, answers, stderr); ok {
			return &agentdv1.GenerateRequest{Kind: &agentdv1.GenerateRequest_AuthorizationResponse{AuthorizationResponse: &agentdv1.AuthorizationResponse{
				RequestId: r.GetId(), RedirectUrl: redirect,
			}}}
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
func askApproval(ctx context.Context, r *agentdv1.ApprovalRequest, answers *lines, stderr io.Writer) *agentdv1.GenerateRequest {
	line, ok := ask(ctx, answers, stderr, fmt.Sprintf("%s %s [y/N] ", r.GetPrompt(), r.GetArguments()))
	if !ok {
		return nil
	}
	approved := strings.EqualFold(line, "y") || strings.EqualFold(line, "yes")
	return &agentdv1.GenerateRequest{Kind: &agentdv1.GenerateRequest_ApprovalDecision{ApprovalDecision: &agentdv1.ApprovalDecision{
		RequestId: r.GetId(), Approved: approved, Digest: r.GetDigest(),
	}}}
}

// askResult asks the person for the result of function call c; nil when
// the input has ended.
func askResult(ctx context.Context, c *agentdv1.FunctionCall, answers *lines, stderr io.Writer) *agentdv1.GenerateRequest {
	line, ok := ask(ctx, answers, stderr, fmt.Sprintf("result of %s(%s): ", c.GetName(), c.GetArguments()))
	if !ok {
		return nil
	}
	return &agentdv1.GenerateRequest{Kind: &agentdv1.GenerateRequest_FunctionResult{FunctionResult: &agentdv1.FunctionResult{
		CallId: c.GetCallId(), Output: line,
	}}}
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

func splitIDs(s string) []string {
	var ids []string
	for _, id := range strings.Split(s, ",") {
		if id = strings.TrimSpace(id); id != "" {
			ids = append(ids, id)
		}
	}
	return ids
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

// inputFlags collects --input REQUEST_ID=accept:JSON|decline|cancel.
type inputFlags []*agentdv1.InputResponse

func (in *inputFlags) String() string { return "" }

func (in *inputFlags) Set(v string) error {
	id, answer, ok := strings.Cut(v, "=")
	if !ok || id == "" {
		return errors.New("want REQUEST_ID=accept:JSON_OBJECT, REQUEST_ID=decline or REQUEST_ID=cancel")
	}
	r := &agentdv1.InputResponse{RequestId: id}
	action, refused := refusals[answer]
	switch {
	case refused:
		r.Action = action
	case strings.HasPrefix(answer, "accept:"):
		content := &structpb.Struct{}
		if err := protojson.Unmarshal([]byte(strings.TrimPrefix(answer, "accept:")), content); err != nil {
			return fmt.Errorf("accept: want a JSON object: %v", err)
		}
		r.Action, r.Content = agentdv1.InputAction_INPUT_ACTION_ACCEPT, content
	default:
		return errors.New("want REQUEST_ID=accept:JSON_OBJECT, REQUEST_ID=decline or REQUEST_ID=cancel")
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

// startRequest is the generation's start: --request's file, else the
// prompt to the provider and model given.
func startRequest(file, provider, model, prompt string) (*agentdv1.StartGeneration, error) {
	if file != "" {
		return readStartRequest(file)
	}
	if prompt == "" {
		return nil, errors.New("give --request FILE, or --prompt (with --provider and --model)")
	}
	return &agentdv1.StartGeneration{
		Agent:    &agentdv1.Agent{Provider: provider, Model: model},
		Messages: []*agentdv1.Message{{Role: agentdv1.Role_ROLE_USER, Parts: []*agentdv1.Part{{Kind: &agentdv1.Part_Text{Text: prompt}}}}},
	}, nil
}

// readStartRequest reads a StartGeneration, in the proto JSON mapping,
// from file.
func readStartRequest(file string) (*agentdv1.StartGeneration, error) {
	data, err := os.ReadFile(file)
	if err != nil {
		return nil, err
	}
	start := &agentdv1.StartGeneration{}
	if err := protojson.Unmarshal(data, start); err != nil {
		return nil, fmt.Errorf("%s: %w", file, err)
	}
	return start, nil
}

// printer writes events for a person: text as it streams, everything else
// on lines of its own.
type printer struct {
	w      io.Writer
	inText bool
}

// show prints ev for a person or, asJSON, as one line of JSON.
func (p *printer) show(ev *agentdv1.GenerateResponse, asJSON bool) {
	if asJSON {
		b, _ := protojson.Marshal(ev)
		fmt.Fprintln(p.w, string(b))
		return
	}
	p.print(ev)
}

func (p *printer) line(format string, args ...any) {
	if p.inText {
		fmt.Fprintln(p.w)
		p.inText = false
	}
	fmt.Fprintf(p.w, format+"\n", args...)
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
	default:
		p.toolCall(ev)
	}
}

// toolCall prints the events of a tool call: its start and end, the
// approval it waits for, a function call for the client, and a call the
// provider made itself.
func (p *printer) toolCall(ev *agentdv1.GenerateResponse) {
	switch k := ev.GetEvent().(type) {
	case *agentdv1.GenerateResponse_ToolCallStarted:
		t := k.ToolCallStarted
		p.line("tool call %s %s%s", t.GetToolName(), t.GetArguments(), onServer(t.GetServerName()))
	case *agentdv1.GenerateResponse_ToolCallFinished:
		t := k.ToolCallFinished
		status := "ok"
		if t.GetIsError() {
			status = "error"
		}
		p.line("tool done %s (%s, %s): %s", t.GetToolName(), status, t.GetDuration().AsDuration().Round(1000), t.GetOutput())
	case *agentdv1.GenerateResponse_ApprovalRequest:
		p.line("approval requested: %s%s", k.ApprovalRequest.GetToolName(), onServer(k.ApprovalRequest.GetServerName()))
	case *agentdv1.GenerateResponse_FunctionCall:
		p.line("function call %s %s", k.FunctionCall.GetName(), k.FunctionCall.GetArguments())
	case *agentdv1.GenerateResponse_ProviderToolCall:
		c := k.ProviderToolCall
		p.line("provider tool call %s%s: %s", c.GetToolName(), onServer(c.GetServerName()), c.GetOutput())
	}
}

// enumWord is an enum value's name in lower case, without its prefix.
func enumWord(name, prefix string) string {
	return strings.ToLower(strings.TrimPrefix(name, prefix))
}

// started prints the generation's id, where its servers run and its
// tools.
func (p *printer) started(s *agentdv1.GenerationStarted) {
	p.line("started %s", s.GetGenerationId())
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

// paused prints what a paused generation waits for, and how to resume it.
func (p *printer) paused(pz *agentdv1.GenerationPaused) {
	p.line("paused %s until %s, waiting for: %s", pz.GetGenerationId(), pz.GetExpiresAt().AsTime().Format("2006-01-02 15:04:05 MST"), strings.Join(pendingIDs(pz), ", "))
	for _, r := range pz.GetAuthorizationRequests() {
		p.line("  authorize %s at: %s", r.GetServerName(), r.GetUrl())
	}
	for _, r := range pz.GetInputRequests() {
		p.line("  %s asks: %s", r.GetServerName(), r.GetMessage())
	}
	p.line("resume it: agentd generate --request <the same request> --resume %s --approve <ids> --decline <ids> --result <call_id>=<output> --authorize <id>=<redirect url> --input <id>=accept:<json>|decline|cancel", pz.GetGenerationId())
}

// pendingIDs names what a paused generation waits for: its approvals',
// function calls', authorizations' and input requests' ids.
func pendingIDs(pz *agentdv1.GenerationPaused) []string {
	var ids []string
	for _, r := range pz.GetApprovalRequests() {
		ids = append(ids, r.GetId())
	}
	for _, c := range pz.GetFunctionCalls() {
		ids = append(ids, c.GetCallId()+" (function)")
	}
	for _, r := range pz.GetAuthorizationRequests() {
		ids = append(ids, r.GetId()+" (authorization of "+r.GetServerName()+")")
	}
	for _, r := range pz.GetInputRequests() {
		ids = append(ids, r.GetId()+" (input for "+r.GetServerName()+")")
	}
	return ids
}

func onServer(name string) string {
	if name == "" {
		return ""
	}
	return " on " + name
}

// flagSet reports whether the command line set the flag name.
func flagSet(fs *flag.FlagSet, name string) bool {
	set := false
	fs.Visit(func(f *flag.Flag) { set = set || f.Name == name })
	return set
}
