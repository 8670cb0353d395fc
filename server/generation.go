package server

import (
	"google.golang.org/protobuf/types/known/structpb"

	statev1 "github.com/agentd/agentd/gen/go/agentd/state/v1"
	agentdv1 "github.com/agentd/agentd/gen/go/agentd/v1"

	"context"
	"crypto/rand"
	"encoding/binary"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"maps"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"go.opentelemetry.io/otel/trace"

	"github.com/agentd/agentd/internal/auth"
	"github.com/agentd/agentd/internal/bridgeclient"
	"github.com/agentd/agentd/internal/fault"
	"github.com/agentd/agentd/internal/mcpauth"
	"github.com/agentd/agentd/internal/record"
)

// generation is one run of the tool loop: a new one, or a paused one
// resumed.
type generation struct {
	s      *Service
	id     string
	tenant string
	caller string // who started or resumed it, for audit lines (auth.Caller)
	// startedBy names the principal that started it ("" without
	// authentication), for its record.
	startedBy string
	// endUser is whom it acts for: whose OAuth tokens its servers get.
	// StartGeneration.end_user, else the authenticated principal that started
	// it, else "" (the tenant's shared tokens).
	endUser string
	plan    *plan
	link    *link                // the client's stream
	session bridgeclient.Session // nil when no server runs in the bridge
	release func()               // gives back its tenant's concurrency slot (quota); idempotent

	tools       []*agentdv1.FunctionTool // offered to the model, in order
	toolParams  []json.RawMessage        // tools' parameters, encoded (a server's shared, read-only: toolLists)
	infos       []*agentdv1.ToolInfo
	omitted     []*agentdv1.Warning // the servers' tools left out: their schemas are not JSON Schemas
	owners      map[string]*toolOwner
	schemaBytes int64

	messages  []*agentdv1.Message // the whole conversation
	added     []*agentdv1.Message // what this generation added
	total     *agentdv1.Usage
	toolTurns int
	lim       limitRun            // what it counts against its limits
	lastStop  agentdv1.StopReason // why its last model turn stopped
	answered  *answerSet          // approval and function-call ids already answered; a repeat is ignored
	stepUps   stepUps             // the step-ups a person was asked for
	pending   pendingSet          // what it waits for from whoever may answer

	resume *resumption // set when the generation continues a pause
	thread *threadRun  // the thread it runs on; nil for none
	// deferred are the authorizations this run left to a resume.
	deferred deferrals
	// origin is the span context of the invoke_agent span of the
	// generation's start, kept in its checkpoints: the span of a resumed
	// or adopted run links to it. Invalid when unknown.
	origin trace.SpanContext

	journal  *record.Journal     // its durable record; nil without Options.Generations
	agent    *record.SealedAgent // the agent as its checkpoints hold it
	detached bool                // it runs without a client (StartGeneration.detach)
	first    *firstEvents        // a detached start's, until its started event is recorded
	adopted  *adoption           // set when it continues a dead replica's generation
	// repeatTurn marks the next model turn's usage as repeated: an
	// earlier attempt was cut short.
	repeatTurn bool
	emitMu     sync.Mutex // numbers and queues events in one order
	pausedNow  bool       // it ended paused
	final      *agentdv1.Message
	ran        runStats // what this run used, for its end's log line
	// samples holds what the servers' samples used until the
	// loop adds it to total and ran (foldSamples): samples are answered
	// while tool calls run, on goroutines of their own.
	samples samplesUsage
	// structured is the answer the output schema accepted;
	// outputRepairs counts the repair turns it gave answers it refused,
	// across pauses (the checkpoint keeps it).
	structured    *structpb.Value
	outputRepairs int
	// budgetWarned are the budgets (with subject and period) this run
	// warned of: once each.
	budgetWarned warnedSet
}

// toolOwner says who runs a tool offered to the model.
type toolOwner struct {
	origin     agentdv1.ToolOrigin
	server     *serverPlan // MCP tools
	serverTool string      // the tool's name on its server
}

func (o *toolOwner) serverName() string {
	if o == nil || o.server == nil {
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

// maxEndUserBytes bounds StartGeneration.end_user.
const maxEndUserBytes = 256

// newGeneration validates a start with the tenant's settings, then admits
// it within the tenant's limits: a request refused for what it
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
	if err := withThreadViolations(err, start); err != nil {
		return nil, err
	}
	release, err := s.limiter.Start(name, tenant.Limits)
	if err != nil {
		return nil, err
	}
	thread, err := s.startThread(ctx, name, start)
	if err != nil {
		release()
		return nil, err
	}
	return &generation{
		thread:    thread,
		s:         s,
		id:        newGenerationID(),
		tenant:    name,
		startedBy: principalName(ctx),
		endUser:   endUser,
		release:   release,
		plan:      p,
		owners:    make(map[string]*toolOwner),
		answered:  &answerSet{},
		messages:  slices.Clone(start.GetMessages()),
		total:     &agentdv1.Usage{},
		ran:       runStats{began: time.Now()},
	}, nil
}

// continued is tenant's generation as checkpoint cp left it: its
// conversation, usage, tool turns and answers, with nothing to run yet.
func (s *Service) continued(tenant string, cp *statev1.Checkpoint) *generation {
	g := &generation{
		s: s, id: cp.GetGenerationId(), tenant: tenant, release: func() {},
		owners:    make(map[string]*toolOwner),
		answered:  &answerSet{},
		messages:  cp.GetMessages(),
		added:     cp.GetAdded(),
		total:     cp.GetUsage(),
		toolTurns: int(cp.GetToolTurns()),
		ran:       runStats{began: time.Now()},
		origin:    record.Origin(cp),
		endUser:   cp.GetEndUser(),
	}
	if cp.GetThreadId() != "" {
		g.thread = newThreadRun(cp.GetThreadId(), cp.GetOnFailure())
		g.thread.base = cp.GetThreadBase()
	}
	if g.total == nil {
		g.total = &agentdv1.Usage{}
	}
	g.restoreLimits(cp)
	// It did not complete: its last model turn asked for tools.
	g.lastStop = agentdv1.StopReason_STOP_REASON_TOOL_USE
	for _, id := range cp.GetAnswered() {
		g.answered.add(id)
	}
	g.stepUps.restore(cp)
	return g
}

// newGenerationID is "gen_" and 32 hex digits: the time in milliseconds
// (48 bits), then 80 random bits. Ids made later sort later, so a store's
// indexes on them (every event of the log is keyed by its generation) take
// new entries at one end instead of at random pages all over, and stay
// in the cache as they grow; 80 random bits keep an id unguessable.
func newGenerationID() string { return generationID(time.Now()) }

func generationID(now time.Time) string { return timeOrderedID("gen_", now) }

// timeOrderedID is prefix and 32 hex digits: now in milliseconds (48
// bits), then 80 random bits.
func timeOrderedID(prefix string, now time.Time) string {
	var b [16]byte
	binary.BigEndian.PutUint64(b[:8], uint64(now.UnixMilli())<<16)
	_, _ = rand.Read(b[6:])
	return prefix + hex.EncodeToString(b[:])
}

// emit sends ev to the client and, with a durable record, numbers it and
// logs it: the client's sequence numbers are the log's.
func (g *generation) emit(ctx context.Context, ev *agentdv1.GenerateResponse) error {
	return g.emitRecorded(ctx, ev, nil)
}

// emitRecorded is emit, with settle, when not nil, run once ev is logged
// and before the client is sent it: the end of the generation's record,
// which its last event must not reach the client before. The numbering
// and the queueing are one step under emitMu, so that the client's order
// is the log's.
func (g *generation) emitRecorded(ctx context.Context, ev *agentdv1.GenerateResponse, settle func()) error {
	if g.journal == nil {
		return g.link.out.emit(ctx, ev)
	}
	g.emitMu.Lock()
	defer g.emitMu.Unlock()
	if ctx.Err() != nil {
		return context.Cause(ctx)
	}
	g.journal.Record(ev)
	g.recordedFirst(ev)
	if settle == nil {
		return g.link.out.emit(ctx, ev)
	}
	settle()
	// The generation has ended as its record says, whether or not its
	// client still takes the event (it may have gone, or agentd be
	// stopping, meanwhile): its run ends without an error.
	_ = g.link.out.emit(ctx, ev)
	return nil
}

// emitProgress sends a tool call's progress to the client. Progress
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

func (g *generation) appendMessage(m *agentdv1.Message) {
	g.messages = append(g.messages, m)
	g.added = append(g.added, m)
}

func addUsage(total, u *agentdv1.Usage) {
	total.InputTokens += u.GetInputTokens()
	total.OutputTokens += u.GetOutputTokens()
	total.CacheReadInputTokens += u.GetCacheReadInputTokens()
	total.CacheWriteInputTokens += u.GetCacheWriteInputTokens()
	total.ToolSchemaBytes += u.GetToolSchemaBytes()
	addCost(total, u.GetCost())
}

// result is what the generation's record keeps of its end: with the
// limit it completed at, if it did.
func (g *generation) result(final *agentdv1.Message, err error) []byte {
	switch {
	case g.lim.reached != nil && err == nil:
		return record.EncodeLimited(final, g.total, g.lim.reached)
	case g.structured != nil && err == nil:
		return record.EncodeStructured(final, g.total, g.structured)
	}
	return record.EncodeResult(final, g.total, err)
}

// allowPrivate reports whether the generation's tenant may reach private
// addresses: its authorization servers may be there too.
func (g *generation) allowPrivate() bool {
	r := g.s.rules
	if t := g.plan.tenant; t != nil && t.Rules != nil {
		r = t.Rules
	}
	return r != nil && r.AllowPrivateNetworks
}

// answerSet holds the approval and function-call ids a generation has had
// answered: a repeated answer is ignored. Safe for concurrent use (a
// checkpoint lists them while a call's goroutine finishes).
type answerSet struct {
	mu  sync.Mutex
	ids map[string]bool
}

func (a *answerSet) add(id string) {
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.ids == nil {
		a.ids = make(map[string]bool)
	}
	a.ids[id] = true
}

func (a *answerSet) has(id string) bool {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.ids[id]
}

// list returns the ids, sorted.
func (a *answerSet) list() []string {
	a.mu.Lock()
	defer a.mu.Unlock()
	return slices.Sorted(maps.Keys(a.ids))
}

// runStats is what one run of a generation (from its start, its resume or
// its adoption to its end on this replica) used, for the line its end
// logs. A resumed generation's line counts only what the resume
// used, so that adding up the lines of a generation counts nothing twice.
type runStats struct {
	began                time.Time
	input, output, cache int64 // tokens; cache: cache reads
	turns                int   // model turns asked
	// spent sums the calls' costs (its Cost), nil without a price table.
	spent agentdv1.Usage
	// toolCalls counts the calls that got a result (finishCall): MCP
	// calls, function results, calls to unknown tools, adopted calls of
	// unknown outcome; a call declined by approval ran nothing and is not
	// counted. MCP calls finish on goroutines of their own.
	toolCalls atomic.Int64
}

// modelTurn notes one model turn and its usage.
func (s *runStats) modelTurn(u *agentdv1.Usage) {
	s.input += u.GetInputTokens()
	s.output += u.GetOutputTokens()
	s.cache += u.GetCacheReadInputTokens()
	addCost(&s.spent, u.GetCost())
}

// samplesUsage accumulates what the servers' samples used. Safe for
// concurrent use.
type samplesUsage struct {
	mu    sync.Mutex
	usage *agentdv1.Usage
}

func (s *samplesUsage) add(u *agentdv1.Usage) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.usage == nil {
		s.usage = &agentdv1.Usage{}
	}
	addUsage(s.usage, u)
}

func (s *samplesUsage) take() *agentdv1.Usage {
	s.mu.Lock()
	defer s.mu.Unlock()
	u := s.usage
	s.usage = nil
	return u
}

// An authorization code grant that nobody answers on the stream (the
// client half-closed, went away, let answer_timeout pass, or was never
// attached) pauses the generation like an approval: the grant's
// request waits in the checkpoint, sealed, and the resume brings the
// person's redirect. The calls the server refused for want of it did not
// run (a 401 is the server's refusal to run them), so they run once the
// resume has exchanged the code; an authorization asked while the
// servers' tools were listed pauses the generation before its first
// model turn. Pausing needs a state store and store.encryption_key_file:
// the request holds the PKCE verifier and the client's credentials,
// which, like tokens, are kept only sealed. Without them the generation
// ends UNAUTHENTICATED as before.

// deferredAuth is an authorization request of the generation that waits
// for the resume.
type deferredAuth struct {
	server  string
	request *agentdv1.AuthorizationRequest
	pending *mcpauth.Pending
}

// deferrals are a generation's deferred authorizations, one per server:
// every later refusal of that server in this run waits for the same one.
type deferrals struct {
	mu     sync.Mutex
	why    string // why the first was deferred: the client's absence
	byName map[string]*deferredAuth
	inputs int // input requests deferred (protocol 2026-07-28)
}

// resumption is what a resumed generation continues from.
type resumption struct {
	checkpoint *statev1.Checkpoint
	// claim holds the paused checkpoint for this resume: every later write
	// of it is fenced by the claim. Nil for an adopted generation whose
	// resume died.
	claim     *record.Claim
	decisions []*agentdv1.ApprovalDecision
	results   []*agentdv1.FunctionResult
	// interrupted holds the approval requests that an earlier resume,
	// since gone, had approved: they may have run.
	interrupted map[string]bool
	// authorizations are the resume's answers to the authorizations the
	// paused turn waits for; interruptedAuth, that an earlier
	// resume, since gone, had brought answers too.
	authorizations  []*agentdv1.AuthorizationResponse
	interruptedAuth bool
	inputs          []*agentdv1.InputResponse // answers to a 2026-07-28 server's input requests
	// decided are its answers as decisions (approvals, authorizations,
	// inputs), recorded: who decided each, and when. refused are those of
	// its authorizations whose codes were refused: withdrawn once the
	// pause is given back, they may be decided again.
	decided    []*decision
	refused    []string
	started    bool // an approved call was started
	progressed bool // the paused turn is done and the generation went on
}

// adoption is what an adopted generation continues from: the tool turn
// its checkpoint was taken in (nil at a turn boundary: a model turn comes
// next), and what its log says happened after the checkpoint.
type adoption struct {
	turn *statev1.PausedTurn
	record.Since
}

// errPause says the turn cannot finish without answers the client is not
// giving on this stream: the generation pauses. expired: the answer
// timeout ran out.
type errPause struct {
	why     string
	expired bool
}

func (e *errPause) Error() string { return "the generation pauses: the client " + e.why }
