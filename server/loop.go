package server

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"regexp"
	"slices"
	"strings"
	"sync"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"google.golang.org/protobuf/types/known/durationpb"

	bridgev1 "github.com/agentd/agentd/gen/go/agentd/bridge/v1"
	agentdv1 "github.com/agentd/agentd/gen/go/agentd/v1"
	"github.com/agentd/agentd/internal/fault"
	"github.com/agentd/agentd/providers"
)

// declinedOutput is what the model gets for a call the user declined.
const declinedOutput = `{"error":"declined by user"}`

// generation is one run of the tool loop.
type generation struct {
	s       *Service
	id      string
	plan    *plan
	mail    *mailbox
	emitter *sender
	session BridgeSession // nil when no server runs in the bridge

	tools       []*agentdv1.FunctionTool // offered to the model, in order
	infos       []*agentdv1.ToolInfo
	owners      map[string]*toolOwner
	schemaBytes int64

	messages  []*agentdv1.Message // the whole conversation
	added     []*agentdv1.Message // what this generation added
	total     *agentdv1.Usage
	toolTurns int
	answered  map[string]bool // approval and function-call ids already answered; a repeat is ignored
}

// toolOwner says who runs a tool offered to the model.
type toolOwner struct {
	origin     agentdv1.ToolOrigin
	server     *serverPlan // MCP tools
	serverTool string      // the tool's name on its server
}

func (s *Service) newGeneration(start *agentdv1.StartGeneration) (*generation, error) {
	var timeout *durationValue
	if at := start.GetAnswerTimeout(); at != nil {
		timeout = &durationValue{field: "answer_timeout", d: at.AsDuration(), valid: at.CheckValid() == nil}
	}
	p, err := s.newPlan("start", start.GetAgent(), start.GetMessages(), timeout)
	if err != nil {
		return nil, err
	}
	return &generation{
		s:        s,
		id:       newGenerationID(),
		plan:     p,
		mail:     newMailbox(),
		owners:   make(map[string]*toolOwner),
		answered: make(map[string]bool),
		messages: slices.Clone(start.GetMessages()),
		total:    &agentdv1.Usage{},
	}, nil
}

func (g *generation) emit(ctx context.Context, ev *agentdv1.GenerateResponse) error {
	return g.emitter.emit(ctx, ev)
}

// run drives the generation to its end. Every bridge session it opened is
// closed before it returns, whatever happened.
func (g *generation) run(ctx context.Context) error {
	var serverTools []*bridgev1.ServerTools
	if bridged := g.plan.bridged(); len(bridged) > 0 {
		sess, err := g.s.bridge.OpenSession(ctx, g.openRequest(bridged))
		if err != nil {
			fields := make([]string, len(bridged))
			for i, sp := range bridged {
				fields[i] = sp.field
			}
			return relocateViolations(err, fields)
		}
		defer sess.Close(ctx)
		g.session = sess
		if serverTools, err = sess.ListTools(ctx); err != nil {
			return err
		}
	}
	if err := g.offerTools(serverTools); err != nil {
		return err
	}
	if err := g.emit(ctx, &agentdv1.GenerateResponse{Event: &agentdv1.GenerateResponse_Started{Started: &agentdv1.GenerationStarted{
		GenerationId: g.id,
		Servers:      g.plan.placements(agentdv1.Placement_PLACEMENT_UNSPECIFIED),
		Tools:        g.infos,
	}}}); err != nil {
		return err
	}
	for turn := 1; ; turn++ {
		assistant, calls, stop, err := g.modelTurn(ctx, turn)
		if err != nil {
			return err
		}
		if len(calls) == 0 {
			return g.emit(ctx, &agentdv1.GenerateResponse{Event: &agentdv1.GenerateResponse_Completed{Completed: &agentdv1.GenerationCompleted{
				GenerationId: g.id,
				Message:      assistant,
				Messages:     g.added,
				Usage:        g.total,
				StopReason:   stop,
				ToolTurns:    int32(g.toolTurns),
			}}})
		}
		if g.toolTurns >= g.plan.maxToolTurns {
			return fault.New(fault.Exhausted,
				"the generation used its %d tool turns (max_tool_turns) and the model still asked for tools; raise max_tool_turns if it needs more",
				g.plan.maxToolTurns).WithInfo("MAX_TOOL_TURNS", map[string]string{"max_tool_turns": fmt.Sprint(g.plan.maxToolTurns)})
		}
		g.toolTurns++
		results, err := g.runTools(ctx, g.toolTurns, calls)
		if err != nil {
			return err
		}
		parts := make([]*agentdv1.Part, len(results))
		for i, r := range results {
			parts[i] = &agentdv1.Part{Kind: &agentdv1.Part_ToolResult{ToolResult: r}}
		}
		g.appendMessage(&agentdv1.Message{Role: agentdv1.Role_ROLE_TOOL, Parts: parts})
	}
}

func (g *generation) appendMessage(m *agentdv1.Message) {
	g.messages = append(g.messages, m)
	g.added = append(g.added, m)
}

// openRequest describes the bridged servers to the bridge.
func (g *generation) openRequest(bridged []*serverPlan) *bridgev1.OpenSessionRequest {
	req := &bridgev1.OpenSessionRequest{GenerationId: g.id}
	if g.plan.agent.McpCache != nil {
		req.Cache = g.plan.agent.McpCache
	}
	for _, sp := range bridged {
		d := sp.decl
		spec := &bridgev1.ServerSpec{Name: sp.name, ReadTimeout: durationpb.New(sp.readTimeout), AllowedTools: d.GetAllowedTools()}
		switch t := d.GetTransport().(type) {
		case *agentdv1.MCPServer_Url:
			spec.Transport = &bridgev1.ServerSpec_Http{Http: &bridgev1.HTTPTarget{
				Url: t.Url, Authorization: d.GetAuthorization(), Headers: d.GetHeaders(), MaxReconnectionWait: d.GetMaxReconnectionWait(),
			}}
		case *agentdv1.MCPServer_Command:
			spec.Transport = &bridgev1.ServerSpec_Stdio{Stdio: &bridgev1.StdioTarget{
				Command: t.Command, Args: d.GetArgs(), Env: d.GetEnv(), UnsetEnv: d.GetUnsetEnv(),
			}}
		case *agentdv1.MCPServer_Ref:
			spec.Transport = &bridgev1.ServerSpec_Ref{Ref: t.Ref}
		}
		req.Servers = append(req.Servers, spec)
	}
	return req
}

// offerTools builds the tool list the model sees: the agent's tools, then
// each bridged server's, in declaration order. Clashing names are refused,
// naming the tool and both owners, unless the agent asked for prefixing.
func (g *generation) offerTools(serverTools []*bridgev1.ServerTools) error {
	agent := g.plan.agent
	for _, t := range agent.GetTools() {
		g.tools = append(g.tools, t)
		g.owners[t.GetName()] = &toolOwner{origin: agentdv1.ToolOrigin_TOOL_ORIGIN_FUNCTION}
		g.infos = append(g.infos, &agentdv1.ToolInfo{Name: t.GetName(), Origin: agentdv1.ToolOrigin_TOOL_ORIGIN_FUNCTION})
	}
	byName := make(map[string]*serverPlan)
	for _, sp := range g.plan.bridged() {
		byName[sp.name] = sp
	}
	prefix := agent.GetToolNameConflict() == agentdv1.ToolNameConflict_TOOL_NAME_CONFLICT_PREFIX
	var v violations
	for _, st := range serverTools {
		sp := byName[st.GetServerName()]
		if sp == nil {
			return fault.New(fault.Internal, "the bridge listed tools of an unknown server")
		}
		for _, t := range st.GetTools() {
			name := t.GetName()
			if prefix {
				name = prefixedName(sp.name, name)
			}
			if prev, clash := g.owners[name]; clash {
				if prev.origin == agentdv1.ToolOrigin_TOOL_ORIGIN_FUNCTION {
					v.add(sp.field, "a tool named %q is declared by the agent and also offered by the MCP server %q, so the model cannot choose between them; rename one, or restrict the server with allowed_tools",
						name, sp.name)
				} else {
					v.add(sp.field, "two declared MCP servers offer a tool named %q: %q and %q; the model cannot choose between them, so rename one, restrict one with allowed_tools, or set tool_name_conflict to PREFIX",
						name, prev.server.name, sp.name)
				}
				continue
			}
			g.owners[name] = &toolOwner{origin: agentdv1.ToolOrigin_TOOL_ORIGIN_MCP, server: sp, serverTool: t.GetName()}
			g.tools = append(g.tools, &agentdv1.FunctionTool{Name: name, Description: t.GetDescription(), Parameters: t.GetInputSchema()})
			g.infos = append(g.infos, &agentdv1.ToolInfo{Name: name, Origin: agentdv1.ToolOrigin_TOOL_ORIGIN_MCP, ServerName: sp.name, ServerToolName: t.GetName()})
		}
	}
	if len(v) > 0 {
		return fault.InvalidRequest(v)
	}
	for _, t := range g.tools {
		params, _ := json.Marshal(t.GetParameters().AsMap())
		g.schemaBytes += int64(len(t.GetName()) + len(t.GetDescription()) + len(params))
	}
	return nil
}

var unsafeNameChars = regexp.MustCompile(`[^a-zA-Z0-9_-]`)

// prefixedName is "<server>__<tool>", made of characters every provider
// accepts, and kept within 64 characters by a stable hash of the whole.
func prefixedName(server, tool string) string {
	full := unsafeNameChars.ReplaceAllString(server, "_") + "__" + unsafeNameChars.ReplaceAllString(tool, "_")
	if len(full) <= toolNameMaxLen {
		return full
	}
	sum := sha256.Sum256([]byte(server + "\x00" + tool))
	return full[:toolNameMaxLen-9] + "_" + hex.EncodeToString(sum[:4])
}

// modelTurn streams one provider turn, forwarding text as it comes, and
// appends the assistant message to the conversation.
func (g *generation) modelTurn(ctx context.Context, turn int) (*agentdv1.Message, []*agentdv1.ToolCall, agentdv1.StopReason, error) {
	model := g.plan.agent.GetModel()
	ctx, span := g.s.tracer.Start(ctx, strings.TrimSpace("chat "+model))
	defer span.End()
	span.SetAttributes(
		attribute.String("gen_ai.operation.name", "chat"),
		attribute.String("gen_ai.provider.name", g.plan.agent.GetProvider()),
		attribute.String("gen_ai.request.model", model),
	)
	req := &providers.Request{
		Model:        model,
		Instructions: g.plan.agent.GetInstructions(),
		Messages:     g.messages,
		Tools:        g.tools,
		MCPServers:   g.plan.providerServers(),
		Options:      g.plan.options,
	}
	var text strings.Builder
	var parts []*agentdv1.Part
	var calls []*agentdv1.ToolCall
	usage := &agentdv1.Usage{}
	stop := agentdv1.StopReason_STOP_REASON_UNSPECIFIED
	seen := make(map[string]bool)
	for ev, err := range g.plan.provider.Stream(ctx, req) {
		if err != nil {
			span.SetStatus(codes.Error, fault.KindOf(err).String())
			return nil, nil, 0, err
		}
		switch ev := ev.(type) {
		case *providers.TextDelta:
			text.WriteString(ev.Text)
			if err := g.emit(ctx, &agentdv1.GenerateResponse{Event: &agentdv1.GenerateResponse_TextDelta{TextDelta: &agentdv1.TextDelta{Text: ev.Text}}}); err != nil {
				return nil, nil, 0, err
			}
		case *providers.ToolCall:
			c := ev.Call
			if c.GetId() == "" {
				c.Id = fmt.Sprintf("call_%d_%d", turn, len(calls)+1)
			}
			if seen[c.GetId()] {
				return nil, nil, 0, fault.New(fault.Internal, "the provider returned two tool calls with the id %q", c.GetId())
			}
			seen[c.GetId()] = true
			calls = append(calls, c)
		case *providers.ProviderToolCall:
			parts = append(parts, &agentdv1.Part{Kind: &agentdv1.Part_ProviderToolCall{ProviderToolCall: ev.Call}})
			if err := g.emit(ctx, &agentdv1.GenerateResponse{Event: &agentdv1.GenerateResponse_ProviderToolCall{ProviderToolCall: ev.Call}}); err != nil {
				return nil, nil, 0, err
			}
		case *providers.Usage:
			usage = ev.Usage
		case *providers.Stop:
			stop = ev.Reason
		}
	}
	usage.ToolSchemaBytes = g.schemaBytes
	usage.Turn = int32(turn)
	addUsage(g.total, usage)
	span.SetAttributes(attribute.Int64("gen_ai.usage.input_tokens", usage.GetInputTokens()), attribute.Int64("gen_ai.usage.output_tokens", usage.GetOutputTokens()))
	if err := g.emit(ctx, &agentdv1.GenerateResponse{Event: &agentdv1.GenerateResponse_Usage{Usage: usage}}); err != nil {
		return nil, nil, 0, err
	}
	var content []*agentdv1.Part
	if text.Len() > 0 {
		content = append(content, &agentdv1.Part{Kind: &agentdv1.Part_Text{Text: text.String()}})
	}
	content = append(content, parts...)
	for _, c := range calls {
		content = append(content, &agentdv1.Part{Kind: &agentdv1.Part_ToolCall{ToolCall: c}})
	}
	assistant := &agentdv1.Message{Role: agentdv1.Role_ROLE_ASSISTANT, Parts: content}
	g.appendMessage(assistant)
	return assistant, calls, stop, nil
}

func addUsage(total, u *agentdv1.Usage) {
	total.InputTokens += u.GetInputTokens()
	total.OutputTokens += u.GetOutputTokens()
	total.CacheReadInputTokens += u.GetCacheReadInputTokens()
	total.CacheWriteInputTokens += u.GetCacheWriteInputTokens()
	total.ToolSchemaBytes += u.GetToolSchemaBytes()
}

// gated reports whether a call to name waits for approval (R-A1, R-A4):
// requires_approval names it (by the name offered to the model or, for a
// prefixed MCP tool, its server's name for it), or its server's policy
// gates it.
func (g *generation) gated(name string, owner *toolOwner) bool {
	names := g.plan.agent.GetRequiresApproval()
	if slices.Contains(names, name) || slices.Contains(names, owner.toolName(name)) {
		return true
	}
	return owner.origin == agentdv1.ToolOrigin_TOOL_ORIGIN_MCP && policyGates(owner.server.decl.GetRequireApproval(), owner.serverTool)
}

// approvalDigest binds an approval to (server, tool, arguments): the
// arguments are canonicalized, so key order and spacing do not matter.
func approvalDigest(server, tool, arguments string) string {
	canonical := arguments
	var v any
	if json.Unmarshal([]byte(arguments), &v) == nil {
		if b, err := json.Marshal(v); err == nil {
			canonical = string(b)
		}
	}
	sum := sha256.Sum256([]byte(server + "\x00" + tool + "\x00" + canonical))
	return hex.EncodeToString(sum[:])
}

// turnRun is the state of one tool turn's calls.
type turnRun struct {
	g       *generation
	turn    int
	calls   []*agentdv1.ToolCall
	results []*agentdv1.ToolResult
	ctx     context.Context
	cancel  context.CancelCauseFunc
	wg      sync.WaitGroup

	approvals map[string]int       // approval request id → call index
	functions map[string]time.Time // function call id → when it was asked
}

// runTools runs one turn's calls and returns their results in call order.
// MCP calls run in parallel as soon as they may; gated calls wait for the
// client's decision and function calls for the client's result, on the
// open stream (X-F1, X-F2, R-A4, R-A5).
func (g *generation) runTools(ctx context.Context, turn int, calls []*agentdv1.ToolCall) ([]*agentdv1.ToolResult, error) {
	tctx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	r := &turnRun{
		g: g, turn: turn, calls: calls, ctx: tctx, cancel: cancel,
		results:   make([]*agentdv1.ToolResult, len(calls)),
		approvals: make(map[string]int),
		functions: make(map[string]time.Time),
	}
	err := r.dispatch()
	if err == nil {
		err = r.awaitAnswers()
	}
	if err != nil {
		cancel(err)
	}
	r.wg.Wait()
	if err == nil {
		err = context.Cause(tctx) // a call that failed the generation
	}
	if err != nil {
		return nil, err
	}
	return r.results, nil
}

func (r *turnRun) dispatch() error {
	g := r.g
	for i, c := range r.calls {
		owner := g.owners[c.GetName()]
		switch {
		case owner == nil:
			if err := r.unknownTool(i); err != nil {
				return err
			}
		case g.gated(c.GetName(), owner):
			req := &agentdv1.ApprovalRequest{
				Id:         "approval_" + c.GetId(),
				ToolCallId: c.GetId(),
				ServerName: owner.serverName(),
				ToolName:   c.GetName(),
				Arguments:  c.GetArguments(),
				Prompt:     fmt.Sprintf("Allow %s to run?", c.GetName()),
				Digest:     approvalDigest(owner.serverName(), owner.toolName(c.GetName()), c.GetArguments()),
			}
			r.approvals[req.GetId()] = i
			if err := g.emit(r.ctx, &agentdv1.GenerateResponse{Event: &agentdv1.GenerateResponse_ApprovalRequest{ApprovalRequest: req}}); err != nil {
				return err
			}
		default:
			if err := r.start(i, owner); err != nil {
				return err
			}
		}
	}
	return nil
}

// unknownTool answers a call to a tool nobody offers with an error the
// model can recover from (R-T3); the client sees the call too.
func (r *turnRun) unknownTool(i int) error {
	c := r.calls[i]
	out := errorJSON(fmt.Sprintf("no tool named %q is offered", c.GetName()))
	r.results[i] = &agentdv1.ToolResult{ToolCallId: c.GetId(), Name: c.GetName(), IsError: true, Output: out}
	if err := r.g.emit(r.ctx, &agentdv1.GenerateResponse{Event: &agentdv1.GenerateResponse_ToolCallStarted{ToolCallStarted: &agentdv1.ToolCallStarted{
		CallId: c.GetId(), ToolName: c.GetName(), Arguments: c.GetArguments(), Turn: int32(r.turn),
	}}}); err != nil {
		return err
	}
	return r.g.emit(r.ctx, &agentdv1.GenerateResponse{Event: &agentdv1.GenerateResponse_ToolCallFinished{ToolCallFinished: &agentdv1.ToolCallFinished{
		CallId: c.GetId(), ToolName: c.GetName(), Duration: durationpb.New(0), IsError: true, Output: out, Turn: int32(r.turn),
	}}})
}

func (o *toolOwner) serverName() string {
	if o.server == nil {
		return ""
	}
	return o.server.name
}

func (o *toolOwner) toolName(offered string) string {
	if o.serverTool != "" {
		return o.serverTool
	}
	return offered
}

// start runs call i: an MCP call in its own goroutine, a function call by
// asking the client.
func (r *turnRun) start(i int, owner *toolOwner) error {
	c := r.calls[i]
	started := &agentdv1.ToolCallStarted{CallId: c.GetId(), ToolName: c.GetName(), ServerName: owner.serverName(), Origin: owner.origin, Arguments: c.GetArguments(), Turn: int32(r.turn)}
	if err := r.g.emit(r.ctx, &agentdv1.GenerateResponse{Event: &agentdv1.GenerateResponse_ToolCallStarted{ToolCallStarted: started}}); err != nil {
		return err
	}
	if owner.origin == agentdv1.ToolOrigin_TOOL_ORIGIN_FUNCTION {
		r.functions[c.GetId()] = time.Now()
		return r.g.emit(r.ctx, &agentdv1.GenerateResponse{Event: &agentdv1.GenerateResponse_FunctionCall{FunctionCall: &agentdv1.FunctionCall{
			CallId: c.GetId(), Name: c.GetName(), Arguments: c.GetArguments(),
		}}})
	}
	r.wg.Go(func() {
		res, err := r.g.callMCP(r.ctx, r.turn, c, owner)
		if err != nil {
			r.cancel(err)
			return
		}
		r.results[i] = res
	})
	return nil
}

// callMCP runs one MCP tool call through the bridge.
func (g *generation) callMCP(ctx context.Context, turn int, c *agentdv1.ToolCall, owner *toolOwner) (*agentdv1.ToolResult, error) {
	ctx, span := g.s.tracer.Start(ctx, "execute_tool "+c.GetName())
	defer span.End()
	span.SetAttributes(
		attribute.String("gen_ai.operation.name", "execute_tool"),
		attribute.String("gen_ai.tool.name", c.GetName()),
		attribute.String("gen_ai.tool.call.id", c.GetId()),
		attribute.String("mcp.server.name", owner.server.name),
	)
	began := time.Now()
	res, err := g.session.CallTool(ctx, owner.server.name, owner.serverTool, c.GetArguments())
	if err != nil {
		span.SetStatus(codes.Error, fault.KindOf(err).String())
		return nil, err
	}
	if res.GetIsError() {
		span.SetStatus(codes.Error, "tool error")
	}
	out := &agentdv1.ToolResult{ToolCallId: c.GetId(), Name: c.GetName(), Output: res.GetOutput(), IsError: res.GetIsError(), Attachments: attachments(res.GetAttachments())}
	err = g.emit(ctx, &agentdv1.GenerateResponse{Event: &agentdv1.GenerateResponse_ToolCallFinished{ToolCallFinished: &agentdv1.ToolCallFinished{
		CallId: c.GetId(), ToolName: c.GetName(), ServerName: owner.server.name, Origin: owner.origin,
		Duration: durationpb.New(time.Since(began)), IsError: out.GetIsError(), Output: out.GetOutput(), Turn: int32(turn),
	}}})
	return out, err
}

func attachments(cs []*bridgev1.Content) []*agentdv1.Media {
	var out []*agentdv1.Media
	for _, c := range cs {
		m := &agentdv1.Media{MimeType: c.GetMimeType(), Name: c.GetName()}
		if c.GetUri() != "" {
			m.Source = &agentdv1.Media_Uri{Uri: c.GetUri()}
		} else {
			m.Source = &agentdv1.Media_Data{Data: c.GetData()}
		}
		out = append(out, m)
	}
	return out
}

// awaitAnswers waits on the stream for a decision on every approval
// request and a result for every function call of the turn.
func (r *turnRun) awaitAnswers() error {
	g := r.g
	timer := time.NewTimer(g.plan.answerTimeout)
	defer timer.Stop()
	for len(r.approvals)+len(r.functions) > 0 {
		decisions, results, ended, err := g.mail.take()
		if err != nil {
			return err
		}
		for _, d := range decisions {
			if err := r.decide(d); err != nil {
				return err
			}
		}
		for _, fr := range results {
			if err := r.functionResult(fr); err != nil {
				return err
			}
		}
		pending := len(r.approvals) + len(r.functions)
		if pending == 0 {
			return nil
		}
		if ended {
			// A cancel message also ends the mailbox, after cancelling.
			if r.ctx.Err() != nil {
				return context.Cause(r.ctx)
			}
			return r.unanswered("half-closed the stream")
		}
		select {
		case <-g.mail.notify:
		case <-timer.C:
			return r.unanswered(fmt.Sprintf("did not answer within %s", g.plan.answerTimeout))
		case <-r.ctx.Done():
			return context.Cause(r.ctx)
		}
	}
	return nil
}

func (r *turnRun) unanswered(how string) error {
	n := len(r.approvals) + len(r.functions)
	return fault.New(fault.FailedPrecondition,
		"the generation waits for %d answers (approval decisions or function results) and the client %s; this agentd keeps no state store, so it cannot pause the generation",
		n, how).WithInfo("ANSWERS_MISSING", map[string]string{"pending": fmt.Sprint(n)})
}

func (r *turnRun) decide(d *agentdv1.ApprovalDecision) error {
	if r.g.answered[d.GetRequestId()] {
		return nil // a repeated answer: the call runs at most once
	}
	i, ok := r.approvals[d.GetRequestId()]
	if !ok {
		return fault.InvalidRequest([]fault.Violation{{Field: "approval_decision.request_id", Description: fmt.Sprintf("%q is not a pending approval request", d.GetRequestId())}})
	}
	c := r.calls[i]
	owner := r.g.owners[c.GetName()]
	if d.GetDigest() != "" && d.GetDigest() != approvalDigest(owner.serverName(), owner.toolName(c.GetName()), c.GetArguments()) {
		return fault.InvalidRequest([]fault.Violation{{Field: "approval_decision.digest", Description: "does not match the approval request"}})
	}
	delete(r.approvals, d.GetRequestId())
	r.g.answered[d.GetRequestId()] = true
	if !d.GetApproved() {
		r.results[i] = &agentdv1.ToolResult{ToolCallId: c.GetId(), Name: c.GetName(), Output: declinedOutput, IsError: true}
		return nil
	}
	return r.start(i, owner)
}

func (r *turnRun) functionResult(fr *agentdv1.FunctionResult) error {
	if r.g.answered[fr.GetCallId()] {
		return nil
	}
	asked, ok := r.functions[fr.GetCallId()]
	if !ok {
		return fault.InvalidRequest([]fault.Violation{{Field: "function_result.call_id", Description: fmt.Sprintf("%q is not a pending function call", fr.GetCallId())}})
	}
	delete(r.functions, fr.GetCallId())
	r.g.answered[fr.GetCallId()] = true
	i := slices.IndexFunc(r.calls, func(c *agentdv1.ToolCall) bool { return c.GetId() == fr.GetCallId() })
	c := r.calls[i]
	r.results[i] = &agentdv1.ToolResult{ToolCallId: c.GetId(), Name: c.GetName(), Output: fr.GetOutput(), IsError: fr.GetIsError()}
	return r.g.emit(r.ctx, &agentdv1.GenerateResponse{Event: &agentdv1.GenerateResponse_ToolCallFinished{ToolCallFinished: &agentdv1.ToolCallFinished{
		CallId: c.GetId(), ToolName: c.GetName(), Origin: agentdv1.ToolOrigin_TOOL_ORIGIN_FUNCTION,
		Duration: durationpb.New(time.Since(asked)), IsError: fr.GetIsError(), Output: fr.GetOutput(), Turn: int32(r.turn),
	}}})
}

// errorJSON renders {"error": msg} for the model.
func errorJSON(msg string) string {
	b, _ := json.Marshal(map[string]string{"error": msg})
	return string(b)
}
