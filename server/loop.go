package server

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"regexp"
	"slices"
	"sync"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/trace"
	"google.golang.org/protobuf/types/known/durationpb"

	bridgev1 "github.com/agentd/agentd/gen/go/agentd/bridge/v1"
	statev1 "github.com/agentd/agentd/gen/go/agentd/state/v1"
	agentdv1 "github.com/agentd/agentd/gen/go/agentd/v1"
	"github.com/agentd/agentd/internal/auth"
	"github.com/agentd/agentd/internal/bridgeclient"
	"github.com/agentd/agentd/internal/fault"
	"github.com/agentd/agentd/internal/record"
	"github.com/agentd/agentd/providers"
)

// generation is one run of the tool loop: a new one, or a paused one
// resumed.
type generation struct {
	s      *Service
	id     string
	tenant string
	caller string // who started or resumed it, for audit lines (auth.Caller)
	// endUser is whom it acts for: whose OAuth tokens its servers get
	// (X-M3). StartGeneration.end_user, else the authenticated principal
	// that started it, else "" (the tenant's shared tokens).
	endUser string
	plan    *plan
	link    *link                // the client's stream
	session bridgeclient.Session // nil when no server runs in the bridge
	release func()               // gives back its tenant's concurrency slot (quota); idempotent

	tools       []*agentdv1.FunctionTool // offered to the model, in order
	toolParams  []json.RawMessage        // tools' parameters, encoded (a server's shared, read-only: toolLists)
	infos       []*agentdv1.ToolInfo
	owners      map[string]*toolOwner
	schemaBytes int64

	messages  []*agentdv1.Message // the whole conversation
	added     []*agentdv1.Message // what this generation added
	total     *agentdv1.Usage
	toolTurns int
	answered  *answerSet // approval and function-call ids already answered; a repeat is ignored

	resume *resumption // set when the generation continues a pause
	// deferred are the authorizations this run left to a resume (X-M2).
	deferred deferrals
	// origin is the span context of the invoke_agent span of the
	// generation's start, kept in its checkpoints: the span of a resumed
	// or adopted run links to it (X-O2). Invalid when unknown.
	origin trace.SpanContext

	journal  *record.Journal     // its durable record; nil without Options.Generations
	agent    *record.SealedAgent // the agent as its checkpoints hold it
	detached bool                // it runs without a client (StartGeneration.detach)
	adopted  *adoption           // set when it continues a dead replica's generation
	// repeatTurn marks the next model turn's usage as repeated: an
	// earlier attempt was cut short.
	repeatTurn bool
	emitMu     sync.Mutex // numbers and queues events in one order
	pausedNow  bool       // it ended paused
	final      *agentdv1.Message
	ran        runStats // what this run used, for its end's log line (X-O4)
	// samples holds what the servers' samples used (X-M5) until the
	// loop adds it to total and ran (foldSamples): samples are answered
	// while tool calls run, on goroutines of their own.
	samples samplesUsage
}

// toolOwner says who runs a tool offered to the model.
type toolOwner struct {
	origin     agentdv1.ToolOrigin
	server     *serverPlan // MCP tools
	serverTool string      // the tool's name on its server
}

// tenantOf is the tenant of the caller in ctx: its API key's, or, without
// authentication, the one tenant every caller shares (""). A generation
// belongs to its tenant: another tenant's resume finds nothing, and its
// MCP servers' tool lists are cached apart.
func tenantOf(ctx context.Context) string {
	_, tenant := auth.Caller(ctx)
	return tenant
}

// maxEndUserBytes bounds StartGeneration.end_user.
const maxEndUserBytes = 256

// newGeneration validates a start with the tenant's settings, then admits
// it within the tenant's limits (X-I7): a request refused for what it
// says takes nothing of them.
func (s *Service) newGeneration(ctx context.Context, start *agentdv1.StartGeneration) (*generation, error) {
	endUser := start.GetEndUser()
	if len(endUser) > maxEndUserBytes {
		return nil, fault.InvalidRequest([]fault.Violation{{Field: "start.end_user", Description: fmt.Sprintf("must be at most %d bytes", maxEndUserBytes)}})
	}
	if endUser == "" {
		if p, ok := auth.FromContext(ctx); ok {
			endUser = p.Name
		}
	}
	var timeout *durationValue
	if at := start.GetAnswerTimeout(); at != nil {
		timeout = &durationValue{field: "answer_timeout", d: at.AsDuration(), valid: at.CheckValid() == nil}
	}
	name, tenant, err := s.tenant(ctx)
	if err != nil {
		return nil, err
	}
	p, err := s.newPlan("start", tenant, start.GetAgent(), start.GetMessages(), timeout)
	if err != nil {
		return nil, err
	}
	release, err := s.limiter.Start(name, tenant.Limits)
	if err != nil {
		return nil, err
	}
	return &generation{
		s:        s,
		id:       newGenerationID(),
		tenant:   name,
		endUser:  endUser,
		release:  release,
		plan:     p,
		owners:   make(map[string]*toolOwner),
		answered: &answerSet{},
		messages: slices.Clone(start.GetMessages()),
		total:    &agentdv1.Usage{},
		ran:      runStats{began: time.Now()},
	}, nil
}

// emit sends ev to the client and, with a durable record, numbers it and
// logs it (X-G2): the client's sequence numbers are the log's.
func (g *generation) emit(ctx context.Context, ev *agentdv1.GenerateResponse) error {
	if g.journal == nil {
		return g.link.out.emit(ctx, ev)
	}
	g.emitMu.Lock()
	defer g.emitMu.Unlock()
	if ctx.Err() != nil {
		return context.Cause(ctx)
	}
	g.journal.Record(ev)
	return g.link.out.emit(ctx, ev)
}

// emitProgress sends a tool call's progress (X-M6) to the client. Progress
// is ephemeral: it is neither numbered nor stored, even with a durable
// record, so it takes no part in the order emitMu keeps. It goes through
// the sender all the same, whose queue keeps it behind the call's
// tool_call_started (the sender holds a numbered event until it is stored,
// and sends an unnumbered one as it comes), and ahead of its
// tool_call_finished, which the call queues after its last report. A
// client that attaches to the generation later gets the stored events
// only. Failures are the sender's: a client gone is the stream's concern.
func (g *generation) emitProgress(ctx context.Context, p *agentdv1.ToolProgress) {
	_ = g.link.out.emit(ctx, &agentdv1.GenerateResponse{Event: &agentdv1.GenerateResponse_ToolProgress{ToolProgress: p}})
}

// run drives the generation to its end: completed, failed, or paused
// (stored, with a paused event). Every bridge session it opened is closed
// once it returns, whatever happened: on a goroutine of the Service's, so
// that the stream ends without waiting for the session's processes to
// stop (sessionLife).
func (g *generation) run(ctx context.Context) (err error) {
	g.s.meters.runStarted(ctx, g.tenant)
	ctx, span := g.s.tracer.Start(ctx, "invoke_agent", g.invokeSpanOptions()...)
	if sc := span.SpanContext(); sc.IsSampled() && g.resume == nil && g.adopted == nil {
		g.origin = sc // a span that is not recorded is no link's target
	}
	defer func() {
		_, outcome := g.outcome(ctx, err)
		g.s.meters.runEnded(ctx, g.tenant, outcome)
		endInvokeSpan(span, g, outcome, err)
	}()
	if g.s.generations != nil && g.journal == nil {
		j, err := g.s.openJournal(ctx, g)
		if err != nil {
			return err
		}
		g.journal = j
	}
	if g.link.out.stream != nil {
		g.link.out.journal = g.journal
	}
	if g.resume != nil {
		g.keepClaim(ctx)
		defer g.resume.claim.Stop()
	}
	if g.resume != nil && len(g.resume.authorizations) > 0 {
		// The person's authorizations first: their tokens go with the
		// servers' first requests.
		if err := g.completeAuthorizations(ctx); err != nil {
			return err
		}
	}
	var serverTools []serverList
	if bridged := g.plan.bridged(); len(bridged) > 0 {
		// The session is closed once the generation is over, after its
		// stream has ended (sessionLife).
		life := g.newSessionLife(ctx)
		sess, err := g.s.bridge.OpenSession(life.ctx, g.openRequest(ctx, bridged), life)
		defer func() { life.end(sess) }()
		if err != nil && g.deferredWhy() != "" {
			return g.pauseBeforeTools(ctx)
		}
		if err != nil {
			fields := make([]string, len(bridged))
			for i, sp := range bridged {
				fields[i] = sp.field
			}
			return bridgeclient.RelocateViolations(err, fields)
		}
		g.session = sess
		if serverTools, err = g.listTools(ctx, sess); err != nil {
			if g.deferredWhy() != "" {
				return g.pauseBeforeTools(ctx)
			}
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
		Resumed:      g.resume != nil,
		Adopted:      g.adopted != nil,
	}}}); err != nil {
		return err
	}
	if g.resume != nil {
		// The paused turn first: its answers arrived with the resume. A
		// generation paused before its first model turn has none.
		if len(g.resume.checkpoint.GetTurn().GetCalls()) > 0 {
			r, results, err := g.resumeTurn(ctx)
			if done, err := g.endTurn(ctx, r, results, err); done {
				return err
			}
		}
		if err := g.progress(ctx); err != nil {
			return err
		}
		// Past its paused turn, its pause can no longer be resumed: its
		// record must say so (not resuming) before it goes on, or a
		// replica adopting it would pause it again for good.
		g.checkpoint(nil)
		if g.journal != nil {
			if err := g.journal.Await(ctx); err != nil {
				return err
			}
		}
	}
	if g.adopted != nil {
		// A dead replica's generation: from its last checkpoint.
		if done, err := g.continueAdopted(ctx); done {
			return err
		}
		if g.adopted.turn != nil {
			g.checkpoint(nil)
		}
	}
	for turn := g.toolTurns + 1; ; turn++ { // model turns continue across a pause
		r, err := g.modelTurn(ctx, turn)
		if err != nil {
			return err
		}
		if r.paused && len(r.calls) == 0 {
			// The provider ran tools of its own and paused; sending the
			// conversation back lets it continue.
			if err := g.spendToolTurn(); err != nil {
				return err
			}
			g.checkpoint(nil)
			continue
		}
		if len(r.calls) == 0 {
			g.final = r.message
			g.finished(ctx)
			return g.emitLast(ctx, &agentdv1.GenerateResponse{Event: &agentdv1.GenerateResponse_Completed{Completed: &agentdv1.GenerationCompleted{
				GenerationId: g.id,
				Message:      r.message,
				Messages:     g.added,
				Usage:        g.total,
				StopReason:   r.stop,
				ToolTurns:    int32(g.toolTurns),
			}}})
		}
		if err := g.spendToolTurn(); err != nil {
			return err
		}
		// The model's turn is done: its calls are checkpointed before any
		// runs, and each one's result as it comes (finishCall).
		g.checkpoint(&statev1.PausedTurn{Turn: int32(g.toolTurns), Calls: r.calls, States: noStates(len(r.calls))})
		tr, results, err := g.runTools(ctx, g.toolTurns, r.calls)
		if done, err := g.endTurn(ctx, tr, results, err); done {
			return err
		}
		g.checkpoint(nil) // the turn boundary: a model turn comes next
	}
}

// pauseBeforeTools pauses a generation whose servers' tools could not be
// listed for want of authorizations deferred to a resume (X-M2): it has
// no turn to finish, and continues, once they are answered, by listing
// them again.
func (g *generation) pauseBeforeTools(ctx context.Context) error {
	turn := &statev1.PausedTurn{Turn: int32(g.toolTurns), Authorizations: g.pendingAuthorizations()}
	return g.pause(ctx, turn, &errPause{why: g.deferredWhy()})
}

// noStates is the states of n calls none of which has a result yet.
func noStates(n int) []*statev1.CallState {
	states := make([]*statev1.CallState, n)
	for i := range states {
		states[i] = &statev1.CallState{}
	}
	return states
}

// spendToolTurn counts a tool turn against max_tool_turns.
func (g *generation) spendToolTurn() error {
	if g.toolTurns >= g.plan.maxToolTurns {
		return fault.New(fault.Exhausted,
			"the generation used its %d tool turns (max_tool_turns) and the model still asked for tools; raise max_tool_turns if it needs more",
			g.plan.maxToolTurns).WithInfo("MAX_TOOL_TURNS", map[string]string{"max_tool_turns": fmt.Sprint(g.plan.maxToolTurns)})
	}
	g.toolTurns++
	return nil
}

// endTurn gives a tool turn's results to the conversation, or ends the
// generation: paused (stored) when the turn needs answers the client is
// not giving, failed otherwise. done says the generation ended.
func (g *generation) endTurn(ctx context.Context, r *turnRun, results []*agentdv1.ToolResult, err error) (done bool, _ error) {
	var pause *errPause
	switch {
	case errors.As(err, &pause):
		return true, g.pause(ctx, r.state(), pause)
	case err != nil:
		return true, err
	}
	parts := make([]*agentdv1.Part, len(results))
	for i, res := range results {
		parts[i] = &agentdv1.Part{Kind: &agentdv1.Part_ToolResult{ToolResult: res}}
	}
	g.appendMessage(&agentdv1.Message{Role: agentdv1.Role_ROLE_TOOL, Parts: parts})
	return false, nil
}

func (g *generation) appendMessage(m *agentdv1.Message) {
	g.messages = append(g.messages, m)
	g.added = append(g.added, m)
}

// openRequest describes the bridged servers to the bridge.
func (g *generation) openRequest(ctx context.Context, bridged []*serverPlan) *bridgev1.OpenSessionRequest {
	// The tools come with the session when the cache has them all: the
	// ListTools call that follows the open is answered without a call.
	req := &bridgev1.OpenSessionRequest{GenerationId: g.id, Tenant: g.tenant, ListCachedTools: true}
	if g.plan.agent.McpCache != nil {
		req.Cache = g.plan.agent.McpCache
	}
	for _, sp := range bridged {
		d := sp.decl
		spec := &bridgev1.ServerSpec{Name: sp.name, ReadTimeout: durationpb.New(sp.readTimeout), AllowedTools: d.GetAllowedTools()}
		switch t := d.GetTransport().(type) {
		case *agentdv1.MCPServer_Url:
			h := &bridgev1.HTTPTarget{
				Url: t.Url, Authorization: d.GetAuthorization(), Headers: d.GetHeaders(), MaxReconnectionWait: d.GetMaxReconnectionWait(),
			}
			if d.GetOauth() != nil {
				// The token agentd keeps for the end user goes with the
				// first request; a refusal comes back to agentd (X-M1).
				h.Oauth, h.Authorization = true, g.storedAuthorization(ctx, sp)
			}
			spec.Transport = &bridgev1.ServerSpec_Http{Http: h}
		case *agentdv1.MCPServer_Command:
			spec.Transport = &bridgev1.ServerSpec_Stdio{Stdio: &bridgev1.StdioTarget{
				Command: t.Command, Args: d.GetArgs(), Env: d.GetEnv(), UnsetEnv: d.GetUnsetEnv(),
			}}
		case *agentdv1.MCPServer_Ref:
			spec.Transport = &bridgev1.ServerSpec_Ref{Ref: t.Ref}
		}
		req.Servers = append(req.Servers, spec)
	}
	// The lists agentd has made already need not come again (toolLists).
	req.KnownRevisions = g.s.toolLists.known(g.tenant, req.GetServers())
	return req
}

// serverList is a bridged server's tools, as offered to the model.
type serverList struct {
	server string
	tools  offeredList
}

// listTools lists the session's tools, each server's list made for the
// model once per revision (toolLists): a list the session brought as
// unchanged is the one made before, unless that has been forgotten since,
// when the session lists them all again.
func (g *generation) listTools(ctx context.Context, sess bridgeclient.Session) ([]serverList, error) {
	for range 2 {
		listed, err := sess.ListTools(ctx)
		if err != nil {
			return nil, err
		}
		lists, ok := g.s.toolLists.offered(g.tenant, listed)
		if !ok {
			continue // ListTools, called again, lists every tool
		}
		out := make([]serverList, len(listed))
		for i, st := range listed {
			out[i] = serverList{server: st.GetServerName(), tools: lists[i]}
		}
		return out, nil
	}
	return nil, fault.New(fault.Internal, "the bridge listed a server's tools as unchanged in answer to ListTools")
}

// offerTools builds the tool list the model sees: the agent's tools, then
// each bridged server's, in declaration order. Clashing names are refused,
// naming the tool and both owners, unless the agent asked for prefixing.
func (g *generation) offerTools(serverTools []serverList) error {
	agent := g.plan.agent
	// Each schema is encoded once, for every turn of the generation
	// (providers.Request.ToolParameters); a server's, once per revision
	// of its list (toolLists).
	for _, t := range agent.GetTools() {
		g.tools = append(g.tools, t)
		g.owners[t.GetName()] = &toolOwner{origin: agentdv1.ToolOrigin_TOOL_ORIGIN_FUNCTION}
		g.infos = append(g.infos, &agentdv1.ToolInfo{Name: t.GetName(), Origin: agentdv1.ToolOrigin_TOOL_ORIGIN_FUNCTION})
		params := providers.ToolParametersJSON(t)
		g.toolParams = append(g.toolParams, params)
		g.countSchema(t.GetName(), t.GetDescription(), params, t.GetParameters() == nil)
	}
	byName := make(map[string]*serverPlan)
	for _, sp := range g.plan.bridged() {
		byName[sp.name] = sp
	}
	prefix := agent.GetToolNameConflict() == agentdv1.ToolNameConflict_TOOL_NAME_CONFLICT_PREFIX
	var v violations
	for _, st := range serverTools {
		sp := byName[st.server]
		if sp == nil {
			return fault.New(fault.Internal, "the bridge listed tools of an unknown server")
		}
		for _, t := range st.tools {
			name := t.name
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
			g.owners[name] = &toolOwner{origin: agentdv1.ToolOrigin_TOOL_ORIGIN_MCP, server: sp, serverTool: t.name}
			// The schema is offered encoded alone: the adapters read
			// ToolParameters, and the generation holds no decoded copy of
			// the bridge's list while it waits (issue 15).
			g.tools = append(g.tools, &agentdv1.FunctionTool{Name: name, Description: t.description})
			g.toolParams = append(g.toolParams, t.params)
			g.countSchema(name, t.description, t.params, t.absent)
			g.infos = append(g.infos, &agentdv1.ToolInfo{Name: name, Origin: agentdv1.ToolOrigin_TOOL_ORIGIN_MCP, ServerName: sp.name, ServerToolName: t.name})
		}
	}
	if len(v) > 0 {
		return fault.InvalidRequest(v)
	}
	return nil
}

// countSchema adds an offered tool to the generation's schema bytes
// (Usage.tool_schema_bytes): its name, description and encoded parameters,
// an absent schema counting as "{}", as it always did.
func (g *generation) countSchema(name, description string, params json.RawMessage, absent bool) {
	size := len(params)
	if absent {
		size = len("{}")
	}
	g.schemaBytes += int64(len(name) + len(description) + size)
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

// reply is what one model turn produced.
type reply struct {
	message *agentdv1.Message
	calls   []*agentdv1.ToolCall
	stop    agentdv1.StopReason
	// paused: the provider paused its own turn and continues when the
	// conversation is sent back (providers.Stop.Paused).
	paused bool
}

// modelTurn streams one provider turn, forwarding text as it comes, and
// appends the assistant message to the conversation.
func (g *generation) modelTurn(ctx context.Context, turn int) (_ *reply, err error) {
	model := g.plan.agent.GetModel()
	g.ran.turns++
	g.foldSamples() // those of calls a pause cut short, or asked between calls
	ctx, chat := g.startChat(ctx, model)
	var streamed *agentdv1.Usage // the turn's usage, once the provider's stream has ended
	var providerErr error        // the provider's stream failed
	defer func() { chat.end(ctx, streamed, providerErr, err) }()
	req := &providers.Request{
		Model:          model,
		Instructions:   g.plan.agent.GetInstructions(),
		Messages:       g.messages,
		Tools:          g.tools,
		ToolParameters: g.toolParams,
		MCPServers:     g.plan.providerServers(),
		Options:        g.plan.options(),
	}
	msg := &content{agentProvider: g.plan.agent.GetProvider()}
	var calls []*agentdv1.ToolCall
	usage := &agentdv1.Usage{}
	stop := agentdv1.StopReason_STOP_REASON_UNSPECIFIED
	paused := false
	reported := false // the provider gave the turn's usage
	seen := make(map[string]bool)
	for ev, err := range g.plan.provider.Stream(ctx, req) {
		if err != nil {
			providerErr = err
			return nil, err
		}
		chat.chunk()
		switch ev := ev.(type) {
		case *providers.TextDelta:
			msg.addText(ev.Text)
			if err := g.emit(ctx, &agentdv1.GenerateResponse{Event: &agentdv1.GenerateResponse_TextDelta{TextDelta: &agentdv1.TextDelta{Text: ev.Text}}}); err != nil {
				return nil, err
			}
		case *providers.Reasoning:
			msg.addReasoning(ev)
		case *providers.ToolCall:
			c := ev.Call
			if c.GetId() == "" {
				c.Id = fmt.Sprintf("call_%d_%d", turn, len(calls)+1)
			}
			if seen[c.GetId()] {
				return nil, fault.New(fault.Internal, "the provider returned two tool calls with the id %q", c.GetId())
			}
			seen[c.GetId()] = true
			calls = append(calls, c)
			msg.add(&agentdv1.Part{Kind: &agentdv1.Part_ToolCall{ToolCall: c}})
		case *providers.ProviderToolCall:
			msg.add(&agentdv1.Part{Kind: &agentdv1.Part_ProviderToolCall{ProviderToolCall: ev.Call}})
			if err := g.emit(ctx, &agentdv1.GenerateResponse{Event: &agentdv1.GenerateResponse_ProviderToolCall{ProviderToolCall: ev.Call}}); err != nil {
				return nil, err
			}
		case *providers.Usage:
			usage = ev.Usage
			reported = true
		case *providers.Stop:
			stop, paused = ev.Reason, ev.Paused
			chat.response = ev.Response
		}
	}
	if reported {
		streamed = usage
	}
	usage.ToolSchemaBytes = g.schemaBytes
	usage.Turn = int32(turn)
	usage.Repeated = g.repeatTurn
	g.repeatTurn = false
	addUsage(g.total, usage)
	g.ran.modelTurn(usage)
	if err := g.emit(ctx, &agentdv1.GenerateResponse{Event: &agentdv1.GenerateResponse_Usage{Usage: usage}}); err != nil {
		return nil, err
	}
	assistant := &agentdv1.Message{Role: agentdv1.Role_ROLE_ASSISTANT, Parts: msg.done()}
	g.appendMessage(assistant)
	return &reply{message: assistant, calls: calls, stop: stop, paused: paused}, nil
}

func addUsage(total, u *agentdv1.Usage) {
	total.InputTokens += u.GetInputTokens()
	total.OutputTokens += u.GetOutputTokens()
	total.CacheReadInputTokens += u.GetCacheReadInputTokens()
	total.CacheWriteInputTokens += u.GetCacheWriteInputTokens()
	total.ToolSchemaBytes += u.GetToolSchemaBytes()
}

// invokeSpanOptions are the options of a run's invoke_agent span (X-O2):
// a run that continues the generation (a resume, an adoption) links to
// its start, whose trace it is not in.
func (g *generation) invokeSpanOptions() []trace.SpanStartOption {
	opts := []trace.SpanStartOption{trace.WithSpanKind(trace.SpanKindInternal), trace.WithAttributes(
		attribute.String("gen_ai.operation.name", "invoke_agent"),
		attribute.String("gen_ai.provider.name", providers.GenAIName(g.plan.agent.GetProvider())),
		attribute.String("gen_ai.request.model", g.plan.agent.GetModel()),
		attribute.String("gen_ai.conversation.id", g.id),
	)}
	run := "start"
	switch {
	case g.resume != nil:
		run = "resume"
	case g.adopted != nil:
		run = "adoption"
	}
	opts = append(opts, trace.WithAttributes(attribute.String("agentd.run", run)))
	if run != "start" && g.origin.IsValid() {
		opts = append(opts, trace.WithLinks(trace.Link{SpanContext: g.origin, Attributes: []attribute.KeyValue{
			attribute.String("agentd.link", "generation start"),
		}}))
	}
	return opts
}

// endInvokeSpan ends a run's invoke_agent span (X-O2) with what the run
// used and how it ended: an error status (and error.type) only for a
// failure; a pause, a cancellation by the client and a hand-over to
// another replica are not errors.
func endInvokeSpan(span trace.Span, g *generation, outcome string, err error) {
	span.SetAttributes(
		attribute.Int64("gen_ai.usage.input_tokens", g.ran.input),
		attribute.Int64("gen_ai.usage.output_tokens", g.ran.output),
		attribute.String("agentd.outcome", outcome),
	)
	if outcome == outcomeFailed && err != nil {
		kind := fault.KindOf(err).String()
		span.SetAttributes(attribute.String("error.type", kind))
		span.SetStatus(codes.Error, kind)
	}
	span.End()
}
