package server

import (
	"cmp"
	"maps"
	"slices"

	bridgev1 "github.com/agentd/agentd/gen/go/agentd/bridge/v1"
	statev1 "github.com/agentd/agentd/gen/go/agentd/state/v1"
	agentdv1 "github.com/agentd/agentd/gen/go/agentd/v1"

	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/trace"
	"google.golang.org/protobuf/types/known/durationpb"

	"github.com/agentd/agentd/internal/auth"
	"github.com/agentd/agentd/internal/bridgeclient"
	"github.com/agentd/agentd/internal/fault"
	"github.com/agentd/agentd/internal/store"
	"github.com/agentd/agentd/internal/telemetry"
	"github.com/agentd/agentd/internal/toolerror"
)

// turnRun is one tool turn's calls: their results, and what the calls
// that have none wait for from the client.
type turnRun struct {
	g       *generation
	turn    int
	calls   []*agentdv1.ToolCall
	results []*agentdv1.ToolResult // nil while a call has no result
	ctx     context.Context
	cancel  context.CancelCauseFunc
	wg      sync.WaitGroup
	// mu guards results, waits and begun against the MCP calls'
	// goroutines.
	mu sync.Mutex
	// mcpCalls counts the turn's MCP calls under way: while any is, the
	// session is in use and the wait does not park it.
	mcpCalls atomic.Int32

	// waits are what calls wait for from the client, by call index: the
	// approvals and function results it answers on the stream, and the
	// authorizations and inputs deferred to a resume (pause.go).
	waits   map[int]*wait
	started bool // an approved call was started
	// retries are the answers that calls run on a resume carry, by index.
	retries map[int]*inputRetry
	begun   map[string]bool // calls whose start was sent

	// waitSpan is the await_approval span while the turn waits on the
	// client, nil otherwise; approved and denied count the decisions
	// applied by this run.
	waitSpan         trace.Span
	approved, denied int
}

func (g *generation) newTurnRun(ctx context.Context, turn int, calls []*agentdv1.ToolCall) *turnRun {
	tctx, cancel := context.WithCancelCause(ctx)
	return &turnRun{
		g: g, turn: turn, calls: calls, ctx: tctx, cancel: cancel,
		results: make([]*agentdv1.ToolResult, len(calls)),
		waits:   make(map[int]*wait),
	}
}

// finish waits for the turn's running calls. It returns their results, a
// pause (*errPause, with every running call finished) or the error that
// failed the turn.
func (r *turnRun) finish(err error) ([]*agentdv1.ToolResult, error) {
	var pause *errPause
	if err != nil && !errors.As(err, &pause) {
		r.cancel(err)
	}
	r.wg.Wait()
	r.mu.Lock()
	for _, w := range r.waits { // unanswered: the turn paused or failed
		r.settle(w, false)
	}
	r.mu.Unlock()
	defer r.cancel(nil)
	if cause := context.Cause(r.ctx); cause != nil {
		return nil, cause // a call that failed the generation, or cancellation
	}
	if err != nil {
		return nil, err
	}
	return r.results, nil
}

// runTools runs one turn's calls and returns their results in call order.
// MCP calls run in parallel as soon as they may; gated calls wait for the
// client's decision and function calls for the client's result, on the
// open stream.
func (g *generation) runTools(ctx context.Context, turn int, calls []*agentdv1.ToolCall) (*turnRun, []*agentdv1.ToolResult, error) {
	r := g.newTurnRun(ctx, turn, calls)
	err := r.dispatch()
	if err == nil {
		err = r.awaitAnswers()
	}
	results, err := r.finish(err)
	g.foldSamples()
	return r, results, r.deferralPause(err)
}

func (r *turnRun) dispatch() error {
	for i := range r.calls {
		if err := r.dispatchCall(i); err != nil {
			return err
		}
	}
	return nil
}

// dispatchCall answers call i to a tool nobody offers, asks for its
// approval, or starts it.
func (r *turnRun) dispatchCall(i int) error {
	c := r.calls[i]
	owner := r.g.owners[c.GetName()]
	switch {
	case owner == nil:
		return r.unknownTool(i)
	case r.g.gated(c.GetName(), owner):
		return r.askApproval(i, owner)
	default:
		return r.start(i, owner)
	}
}

func (r *turnRun) setResult(i int, res *agentdv1.ToolResult) {
	r.mu.Lock()
	r.results[i] = res
	r.mu.Unlock()
}

// unknownTool answers a call to a tool nobody offers with an error the
// model can recover from; the client sees the call too.
func (r *turnRun) unknownTool(i int) error {
	c := r.calls[i]
	out := toolerror.JSON(fmt.Sprintf("no tool named %q is offered", c.GetName()))
	res := &agentdv1.ToolResult{ToolCallId: c.GetId(), Name: c.GetName(), IsError: true, Output: out}
	if err := r.g.emit(r.ctx, &agentdv1.GenerateResponse{Event: &agentdv1.GenerateResponse_ToolCallStarted{ToolCallStarted: &agentdv1.ToolCallStarted{
		CallId: c.GetId(), ToolName: c.GetName(), Arguments: c.GetArguments(), Turn: int32(r.turn),
	}}}); err != nil {
		return err
	}
	return r.finishCall(i, res, &agentdv1.ToolCallFinished{
		CallId: c.GetId(), ToolName: c.GetName(), Duration: durationpb.New(0), IsError: true, Output: out, Turn: int32(r.turn),
	})
}

// finishCall gives call i its result and sends its tool_call_finished
// event, and, with a durable record, checkpoints the turn with that result
// in the same step: a replica that adopts the generation later
// does not run the call again.
func (r *turnRun) finishCall(i int, res *agentdv1.ToolResult, finished *agentdv1.ToolCallFinished) error {
	g := r.g
	g.countToolCall(r.ctx, r.calls[i], res.GetIsError())
	ev := &agentdv1.GenerateResponse{Event: &agentdv1.GenerateResponse_ToolCallFinished{ToolCallFinished: finished}}
	if g.journal == nil {
		r.setResult(i, res)
		g.ran.toolCalls.Add(1)
		return g.link.out.emit(r.ctx, ev)
	}
	g.emitMu.Lock()
	defer g.emitMu.Unlock()
	if r.ctx.Err() != nil {
		return context.Cause(r.ctx)
	}
	r.setResult(i, res)
	g.ran.toolCalls.Add(1)
	g.journal.RecordCheckpoint(ev, g.snapshot(r.runningState()))
	return g.link.out.emit(r.ctx, ev)
}

// start runs call i: an MCP call in its own goroutine, a function call by
// asking the client.
func (r *turnRun) start(i int, owner *toolOwner) error {
	c := r.calls[i]
	started := &agentdv1.ToolCallStarted{CallId: c.GetId(), ToolName: c.GetName(), ServerName: owner.serverName(), Origin: owner.origin, Arguments: c.GetArguments(), Turn: int32(r.turn)}
	r.mu.Lock()
	if r.begun == nil {
		r.begun = make(map[string]bool)
	}
	r.begun[c.GetId()] = true
	r.mu.Unlock()
	if err := r.g.emit(r.ctx, &agentdv1.GenerateResponse{Event: &agentdv1.GenerateResponse_ToolCallStarted{ToolCallStarted: started}}); err != nil {
		return err
	}
	if owner.origin == agentdv1.ToolOrigin_TOOL_ORIGIN_FUNCTION {
		return r.askFunction(i)
	}
	r.mcpCalls.Add(1)
	r.wg.Go(func() {
		defer r.mcpCalls.Add(-1)
		// Write-ahead: the call runs once its start is in the
		// store, so that a replica adopting the generation knows it may
		// have run. Calls started together wait for one write.
		if j := r.g.journal; j != nil {
			if err := j.Await(r.ctx); err != nil {
				r.cancel(err)
				return
			}
		}
		ctx := r.ctx
		if rt := r.retries[i]; rt != nil {
			ctx = bridgeclient.WithInputRetry(ctx, rt.responses, rt.state)
		}
		res, finished, err := r.g.callMCP(ctx, r.turn, c, owner)
		if err != nil && (r.waitAuthorization(i, owner, err) || r.waitInput(i, err)) {
			return
		}
		if err != nil {
			r.cancel(err)
			return
		}
		if err := r.finishCall(i, res, finished); err != nil {
			r.cancel(err)
		}
	})
	return nil
}

// askFunction asks the client for the result of call i, a function
// tool's: the call waits for it, under an execute_tool span that ends
// when the result comes.
func (r *turnRun) askFunction(i int) error {
	c := r.calls[i]
	_, span := r.g.toolSpan(r.ctx, c, "function")
	r.setWait(i, &wait{kind: waitsForResult, id: c.GetId(), asked: time.Now(), span: span})
	fc := &agentdv1.FunctionCall{CallId: c.GetId(), Name: c.GetName(), Arguments: c.GetArguments()}
	req := r.g.waitingRequest(agentdv1.PendingRequestKind_PENDING_REQUEST_KIND_FUNCTION_CALL)
	req.Request = &agentdv1.PendingRequest_FunctionCall{FunctionCall: fc}
	r.g.addPending(r.ctx, req, "", "")
	return r.g.emit(r.ctx, &agentdv1.GenerateResponse{Event: &agentdv1.GenerateResponse_FunctionCall{FunctionCall: fc}})
}

// setWait records that call i waits for w.
func (r *turnRun) setWait(i int, w *wait) {
	r.mu.Lock()
	r.waits[i] = w
	r.mu.Unlock()
}

// waitingFor finds the call that waits for the request id, of kind; ok
// is false when none does.
func (r *turnRun) waitingFor(kind waitKind, id string) (i int, w *wait, ok bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.findWait(kind, id)
}

// findWait is waitingFor with r.mu held.
func (r *turnRun) findWait(kind waitKind, id string) (int, *wait, bool) {
	for i, w := range r.waits {
		if w.kind == kind && w.id == id {
			return i, w, true
		}
	}
	return 0, nil, false
}

// answered takes the wait of kind for the request id off the turn, now
// that the client answered it; ok is false when no call waits for it.
func (r *turnRun) answered(kind waitKind, id string, isError bool) (i int, w *wait, ok bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if i, w, ok = r.findWait(kind, id); ok {
		delete(r.waits, i)
		r.settle(w, isError)
	}
	return i, w, ok
}

// settle ends what a wait kept open while it waited: a function call's
// span (flagged as a tool error when its result is), an approval's
// place in agentd.approvals.pending. r.mu is held.
func (r *turnRun) settle(w *wait, isError bool) {
	if w.span != nil {
		if isError {
			toolErrored(w.span)
		}
		w.span.End()
		w.span = nil
	}
	if w.counted {
		w.counted = false
		r.g.s.approvals.settled(r.ctx, r.g.tenant)
	}
}

// onStream counts the calls that wait for an answer on the stream.
func (r *turnRun) onStream() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	n := 0
	for _, w := range r.waits {
		if w.onStream() {
			n++
		}
	}
	return n
}

// callMCP runs one MCP tool call through the bridge and returns its
// result and the event that reports it.
func (g *generation) callMCP(ctx context.Context, turn int, c *agentdv1.ToolCall, owner *toolOwner) (*agentdv1.ToolResult, *agentdv1.ToolCallFinished, error) {
	began := time.Now()
	ctx, span := g.toolSpan(ctx, c, "extension")
	defer span.End()
	span.SetAttributes(attribute.String("agentd.mcp.server", owner.server.name))
	ctx = withToolCall(ctx, c.GetId())
	ctx = bridgeclient.WithProgress(ctx, func(p *bridgev1.ToolProgress) {
		g.emitProgress(ctx, &agentdv1.ToolProgress{CallId: c.GetId(), Progress: p.GetProgress(), Total: p.GetTotal(), Message: p.GetMessage()})
	})
	res, err := g.session.CallTool(ctx, owner.server.name, owner.serverTool, c.GetArguments())
	if err != nil {
		span.SetStatus(codes.Error, fault.KindOf(err).String())
		g.s.approvals.toolExecuted(ctx, g.tenant, owner.server.name, c.GetName(), "extension", telemetry.ErrorType(err), time.Since(began))
		return nil, nil, err
	}
	if ir := res.GetInputRequired(); ir != nil {
		// No result: the server waits for input agentd deferred.
		span.AddEvent("input required", trace.WithAttributes(attribute.Int("agentd.input_requests", len(ir.GetRequests()))))
		return nil, nil, &errInputRequired{server: owner.server.name, callID: c.GetId(), required: ir}
	}
	errType := ""
	if res.GetIsError() {
		toolErrored(span)
		errType = "tool_error"
	}
	g.s.approvals.toolExecuted(ctx, g.tenant, owner.server.name, c.GetName(), "extension", errType, time.Since(began))
	out := &agentdv1.ToolResult{ToolCallId: c.GetId(), Name: c.GetName(), Output: res.GetOutput(), IsError: res.GetIsError(), Attachments: attachments(res.GetAttachments())}
	return out, &agentdv1.ToolCallFinished{
		CallId: c.GetId(), ToolName: c.GetName(), ServerName: owner.server.name, Origin: owner.origin,
		Duration: durationpb.New(time.Since(began)), IsError: out.GetIsError(), Output: out.GetOutput(), Turn: int32(turn),
	}, nil
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

// parker is a bridge session that can close its idle tool-call stream
// while the generation waits for its client; the next call opens another.
type parker interface{ Park() }

// awaitAnswers waits on the stream for a decision on every approval
// request and a result for every function call of the turn. If the client
// half-closes, goes away, or does not answer within the answer timeout,
// it returns an *errPause.
func (r *turnRun) awaitAnswers() (err error) {
	if r.onStream() == 0 {
		return nil
	}
	g := r.g
	r.waitSpan = r.awaitSpan()
	approved, denied := r.approved, r.denied
	defer func() {
		endAwaitSpan(r.waitSpan, r.approved-approved, r.denied-denied, err)
		r.waitSpan = nil
	}()
	if gone := g.link.waiting(true); gone {
		if g.link.clientless {
			return &errPause{why: whyNotAttached}
		}
		return &errPause{why: whyGone}
	}
	if g.journal != nil {
		g.setState(store.Waiting, r)
		defer g.setState(store.Running, r)
	}
	if p, ok := g.session.(parker); ok && r.mcpCalls.Load() == 0 {
		// A person may take hours: the session holds no idle stream
		// meanwhile. While calls of the turn run (they may not have
		// reached the session yet), it is in use: parking it would only
		// make them open another.
		p.Park()
	}
	defer func() {
		// A pause keeps the link waiting: if the client goes away while
		// the turn's running calls finish, the generation still pauses
		// with their results rather than stop and lose its requests.
		var pause *errPause
		if !errors.As(err, &pause) && g.link.waiting(false) {
			// The client went away while the last answers came: losing
			// it now stops the generation, as it would have outside the
			// wait.
			g.link.cancel(g.link.gone())
		}
	}()
	return r.takeAnswers()
}

// takeAnswers applies the client's answers as they arrive until no call
// waits on the stream. It fails on an answer that answers nothing, and
// pauses (*errPause) when the client half-closes, goes away or lets the
// answer timeout pass.
func (r *turnRun) takeAnswers() error {
	mail := r.g.link.mail
	stop := r.g.interrupts()
	timer := time.NewTimer(r.g.plan.answerTimeout)
	defer timer.Stop()
	for {
		if done, err := r.applyMail(); done {
			return err
		}
		select {
		case <-mail.notify:
		case <-timer.C:
			return &errPause{why: whyTimedOut(r.g.plan.answerTimeout), expired: true}
		case <-stop:
			r.interruptWaits()
			stop = nil
		case <-r.ctx.Done():
			return context.Cause(r.ctx)
		}
	}
}

// applyMail applies what the client sent since the last time. done says
// the wait is over: every call has its answer (err nil), or not, with err.
func (r *turnRun) applyMail() (done bool, err error) {
	decisions, results, ended, err := r.g.link.mail.take()
	if err != nil {
		return true, err
	}
	for _, d := range decisions {
		if err := r.decide(d); err != nil {
			return true, err
		}
	}
	for _, fr := range results {
		if err := r.functionResult(fr); err != nil {
			return true, err
		}
	}
	switch {
	case r.onStream() == 0:
		return true, nil
	case r.ctx.Err() != nil:
		return true, context.Cause(r.ctx) // cancelled (a cancel message also ends the mailbox)
	case ended:
		return true, &errPause{why: whyEnded}
	}
	return false, nil
}

// functionResult takes the client's result of a function call, once: a
// repeated one is ignored, and one for no call that waits is invalid.
func (r *turnRun) functionResult(fr *agentdv1.FunctionResult) error {
	g := r.g
	i, w, ok := r.answered(waitsForResult, fr.GetCallId(), fr.GetIsError())
	if !ok && g.answered.has(fr.GetCallId()) {
		return nil // a repeated answer
	}
	if !ok {
		return fault.InvalidRequest([]fault.Violation{{Field: "function_result.call_id", Description: fmt.Sprintf("%q is not a pending function call", fr.GetCallId())}})
	}
	g.answered.add(fr.GetCallId())
	g.dropPending(fr.GetCallId())
	c := r.calls[i]
	errType := ""
	if fr.GetIsError() {
		errType = "tool_error"
	}
	g.s.approvals.toolExecuted(r.ctx, g.tenant, "", c.GetName(), "function", errType, time.Since(w.asked))
	if r.waitSpan != nil {
		r.waitSpan.AddEvent("function result", trace.WithAttributes(attribute.String("gen_ai.tool.call.id", fr.GetCallId())))
	}
	return r.finishCall(i, &agentdv1.ToolResult{ToolCallId: c.GetId(), Name: c.GetName(), Output: fr.GetOutput(), IsError: fr.GetIsError()}, &agentdv1.ToolCallFinished{
		CallId: c.GetId(), ToolName: c.GetName(), Origin: agentdv1.ToolOrigin_TOOL_ORIGIN_FUNCTION,
		Duration: durationpb.New(time.Since(w.asked)), IsError: fr.GetIsError(), Output: fr.GetOutput(), Turn: int32(r.turn),
	})
}

// state records where each call stands, for a paused checkpoint: its
// result, or what it waits for.
func (r *turnRun) state() *statev1.PausedTurn {
	t := &statev1.PausedTurn{Turn: int32(r.turn), Calls: r.calls, Authorizations: r.g.pendingAuthorizations()}
	r.mu.Lock()
	defer r.mu.Unlock()
	for i, c := range r.calls {
		st := &statev1.CallState{}
		switch w := r.waits[i]; {
		case r.results[i] != nil:
			st.State = &statev1.CallState_Result{Result: r.results[i]}
		case w != nil:
			st = w.state(c)
		default:
			st.State = &statev1.CallState_FunctionCall{FunctionCall: &agentdv1.FunctionCall{CallId: c.GetId(), Name: c.GetName(), Arguments: c.GetArguments()}}
		}
		t.States = append(t.States, st)
	}
	return t
}

// runningState is a tool turn's calls and the results it has, for a
// running generation's checkpoint: a call without a result has no state.
func (r *turnRun) runningState() *statev1.PausedTurn {
	t := &statev1.PausedTurn{Turn: int32(r.turn), Calls: r.calls, States: make([]*statev1.CallState, len(r.calls))}
	r.mu.Lock()
	defer r.mu.Unlock()
	for i, c := range r.calls {
		st := &statev1.CallState{}
		if res := r.results[i]; res != nil {
			st.State = &statev1.CallState_Result{Result: res}
		} else if r.begun[c.GetId()] {
			t.Started = append(t.Started, c.GetId())
		}
		t.States[i] = st
	}
	return t
}

// waitAuthorization reports whether call i's failure err is its server's
// refusal for want of an authorization deferred to a resume; the call
// then waits for it, to run again.
func (r *turnRun) waitAuthorization(i int, owner *toolOwner, err error) bool {
	d := r.g.deferredFor(owner.serverName())
	if d == nil || fault.KindOf(err) != fault.Unauthenticated || r.ctx.Err() != nil {
		return false
	}
	r.setWait(i, &wait{kind: waitsForAuthorization, id: d.request.GetId()})
	return true
}

// waitInput reports whether call i's failure err is its server asking
// for deferred input; the call then waits for the resume's answers.
func (r *turnRun) waitInput(i int, err error) bool {
	var ir *errInputRequired
	if !errors.As(err, &ir) || r.ctx.Err() != nil {
		return false
	}
	w := &statev1.InputWait{ToolCallId: ir.callID, RequestState: ir.required.GetRequestState()}
	for _, key := range slices.Sorted(maps.Keys(ir.required.GetRequests())) {
		w.Inputs = append(w.Inputs, &statev1.PendingInput{Key: key, Request: r.g.inputRequest(ir.server, ir.callID, ir.required.GetRequests()[key])})
	}
	r.setWait(i, &wait{kind: waitsForInput, input: w})
	return true
}

// deferralPause is the end of a turn whose calls otherwise ended with
// err: a pause when authorizations or input requests were deferred (and
// nothing else failed it), err otherwise.
func (r *turnRun) deferralPause(err error) error {
	var pause *errPause
	if err != nil && !errors.As(err, &pause) {
		return err
	}
	why := r.g.pauseWhy()
	if why == "" && r.forResume() > 0 {
		why = "did not answer the MCP servers' requests" // the bridge deferred them itself
	}
	if why == "" {
		return err
	}
	if err == nil {
		return &errPause{why: why}
	}
	return err
}

// forResume counts the calls that wait for a resume's answers.
func (r *turnRun) forResume() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	n := 0
	for _, w := range r.waits {
		if !w.onStream() {
			n++
		}
	}
	return n
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

// setState records that the generation, in tool turn r, waits on its
// client or runs again, with the turn's checkpoint.
func (g *generation) setState(st store.State, r *turnRun) {
	g.emitMu.Lock()
	defer g.emitMu.Unlock()
	g.journal.SetState(st, g.snapshot(r.runningState()))
}

// askApproval asks the client whether call i may run: an approval request
// whose digest binds the decision to the call's server, tool and arguments.
func (r *turnRun) askApproval(i int, owner *toolOwner) error {
	c := r.calls[i]
	req := &agentdv1.ApprovalRequest{
		Id:         r.approvalID(c.GetId()),
		ToolCallId: c.GetId(),
		ServerName: owner.serverName(),
		ToolName:   c.GetName(),
		Arguments:  c.GetArguments(),
		Prompt:     fmt.Sprintf("Allow %s to run?", c.GetName()),
		Digest:     approvalDigest(owner.serverName(), owner.toolName(c.GetName()), c.GetArguments()),
	}
	r.setWait(i, &wait{kind: waitsForApproval, id: req.GetId(), approval: req, counted: true})
	g := r.g
	g.s.approvals.asked(r.ctx, g.tenant, owner.serverName(), owner.toolName(c.GetName()))
	g.s.log.InfoContext(r.ctx, "approval requested", "audit", true, "principal", g.caller, "tenant", g.tenant, "generation", g.id,
		"request", req.GetId(), "tool", c.GetName(), "server", req.GetServerName(), "digest", req.GetDigest())
	pr := g.waitingRequest(agentdv1.PendingRequestKind_PENDING_REQUEST_KIND_APPROVAL)
	pr.Request = &agentdv1.PendingRequest_Approval{Approval: req}
	g.addPending(r.ctx, pr, owner.serverName(), owner.toolName(c.GetName()))
	return r.g.emit(r.ctx, &agentdv1.GenerateResponse{Event: &agentdv1.GenerateResponse_ApprovalRequest{ApprovalRequest: req}})
}

// approvalID is the id of the approval request of call callID: once in
// its generation, for its decision is recorded by it. A provider may use
// a call id again in a later turn; that call's request is told apart by
// a number.
func (r *turnRun) approvalID(callID string) string {
	id := "approval_" + callID
	for n := 2; r.g.answered.has(id) || r.asksFor(id); n++ {
		id = fmt.Sprintf("approval_%s.%d", callID, n)
	}
	return id
}

// asksFor reports whether a call of the turn waits for approval id.
func (r *turnRun) asksFor(id string) bool {
	_, _, ok := r.waitingFor(waitsForApproval, id)
	return ok
}

// decide takes an approval decision, the stream holder's or one
// recorded elsewhere, for a call that waits for it (takeDecision) and
// applies the decision taken. One for a call that no longer waits is the
// holder's late answer (or a recorded decision delivered twice, ignored).
func (r *turnRun) decide(d *decision) error {
	g := r.g
	_, w, ok := r.waitingFor(waitsForApproval, d.requestID)
	switch {
	case !ok && (d.recorded || g.answered.has(d.requestID)):
		// Answered: the call runs at most once. (Pending requests come
		// first: a provider may reuse a call id in a later turn.)
		return g.lateAnswer(r.ctx, d)
	case !ok:
		return fault.InvalidRequest([]fault.Violation{{Field: "approval_decision.request_id", Description: fmt.Sprintf("%q is not a pending approval request", d.requestID)}})
	case d.approval.GetDigest() != "" && d.approval.GetDigest() != w.approval.GetDigest():
		return fault.InvalidRequest([]fault.Violation{{Field: "approval_decision.digest", Description: "does not match the approval request"}})
	}
	taken, err := g.takeDecision(r.ctx, d)
	if err != nil {
		return err
	}
	return r.applyDecision(taken)
}

// applyDecision applies the decision taken for an approval request:
// declined calls get {"error": "declined by user"} (with the reason, if
// one was given) without running; approved ones run once, on the server
// the approval is bound to — if its tool is no longer offered there, they
// get an error instead, without a call.
func (r *turnRun) applyDecision(taken *decision) error {
	g, d := r.g, taken.approval
	i, w, ok := r.answered(waitsForApproval, d.GetRequestId(), false)
	if !ok {
		return nil // taken meanwhile by another answer
	}
	req := w.approval
	g.answered.add(d.GetRequestId())
	g.link.mail.finish(d.GetRequestId())
	c := r.calls[i]
	decision := decisionDenied
	if d.GetApproved() {
		decision = decisionApproved
		r.approved++
	} else {
		r.denied++
	}
	tool := c.GetName() // a tool no longer offered: the name it had
	if owner := g.owners[c.GetName()]; owner != nil {
		tool = owner.toolName(c.GetName())
	}
	g.s.approvals.decision(r.ctx, g.tenant, req.GetServerName(), tool, decision)
	if r.waitSpan != nil {
		r.waitSpan.AddEvent("approval decided", trace.WithAttributes(attrApprovalRequestID.String(d.GetRequestId()), attrApprovalDecision.String(decision)))
	}
	g.s.log.Info("approval decided", "audit", true, "principal", cmp.Or(taken.by, auth.Anonymous), "tenant", g.tenant, "generation", g.id,
		"request", d.GetRequestId(), "tool", c.GetName(), "server", req.GetServerName(), "digest", req.GetDigest(), "approved", d.GetApproved(), "reason", d.GetReason())
	if !d.GetApproved() {
		r.setResult(i, &agentdv1.ToolResult{ToolCallId: c.GetId(), Name: c.GetName(), Output: declinedOutput(d.GetReason()), IsError: true})
		g.checkpoint(r.runningState())
		return nil
	}
	owner := g.owners[c.GetName()]
	if owner == nil || approvalDigest(owner.serverName(), owner.toolName(c.GetName()), c.GetArguments()) != req.GetDigest() {
		what := "is no longer offered"
		if req.GetServerName() != "" {
			what = "is no longer offered by its MCP server"
		}
		r.setResult(i, &agentdv1.ToolResult{ToolCallId: c.GetId(), Name: c.GetName(), IsError: true,
			Output: toolerror.JSON(fmt.Sprintf("%s %s", c.GetName(), what))})
		g.checkpoint(r.runningState())
		return nil
	}
	r.started = true
	return r.start(i, owner)
}

// awaitSpan starts the await_approval span of the turn's wait for its
// client: INTERNAL, under the invoke_agent span, naming the approval
// requests and function calls it waits for.
func (r *turnRun) awaitSpan() trace.Span {
	var approvals, functions []string
	r.mu.Lock()
	for _, w := range r.waits {
		switch w.kind {
		case waitsForApproval:
			approvals = append(approvals, w.id)
		case waitsForResult:
			functions = append(functions, w.id)
		}
	}
	r.mu.Unlock()
	var attrs []attribute.KeyValue
	if len(approvals) > 0 {
		attrs = append(attrs, attrApprovalRequestIDs.StringSlice(slices.Sorted(slices.Values(approvals))))
	}
	if len(functions) > 0 {
		attrs = append(attrs, attrFunctionCallIDs.StringSlice(slices.Sorted(slices.Values(functions))))
	}
	_, span := r.g.s.tracer.Start(r.ctx, "await_approval", trace.WithSpanKind(trace.SpanKindInternal), trace.WithAttributes(attrs...))
	return span
}

// countToolCall counts call c answered, as an error or not.
func (g *generation) countToolCall(ctx context.Context, c *agentdv1.ToolCall, isError bool) {
	owner := g.owners[c.GetName()]
	if owner == nil {
		g.s.meters.toolCall(ctx, g.tenant, "", "", toolUnknown)
		return
	}
	outcome := toolOK
	if isError {
		outcome = toolError
	}
	g.s.meters.toolCall(ctx, g.tenant, owner.serverName(), owner.toolName(c.GetName()), outcome)
}
