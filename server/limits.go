package server

import (
	statev1 "github.com/agentd/agentd/gen/go/agentd/state/v1"
	agentdv1 "github.com/agentd/agentd/gen/go/agentd/v1"

	"cmp"
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"google.golang.org/protobuf/types/known/durationpb"

	"github.com/agentd/agentd/internal/auth"
	"github.com/agentd/agentd/internal/fault"
	"github.com/agentd/agentd/internal/toolerror"
)

// A generation's limits bound what it uses: tool turns, tool calls,
// tokens, money and time (docs/limits.md). Each is the agent's, else
// its tenant's default, within its tenant's ceiling (plan.limits). They
// are checked at two points, so that a generation passes one by at most
// what one model call or one tool turn uses: before each model call
// (tokens, money, time) and before a tool turn's calls run (tool turns,
// tool calls, time). What reaching one does is the agent's on_limit:
// END completes the generation with the model's last message, FAIL fails
// it RESOURCE_EXHAUSTED, PAUSE asks whoever may decide whether it may
// use more, as an approval request whose limit is set, and pauses when
// nobody answers on its stream.

// limitKind is one of a generation's limits.
type limitKind int

const (
	limitToolTurns limitKind = iota
	limitToolCalls
	limitTokens
	limitCost
	limitDuration
	limitKinds // how many there are
)

// limitNames name each limit as the API does; limitUnits say what it
// counts (LimitReached.unit), max_cost's being its currency.
var (
	limitNames = [limitKinds]string{"max_tool_turns", "max_tool_calls", "max_total_tokens", "max_cost", "max_duration"}
	limitUnits = [limitKinds]string{"tool_turns", "tool_calls", "tokens", "", "milliseconds"}
)

// The limits each point checks, in the order they are checked.
var (
	modelCallLimits = []limitKind{limitTokens, limitCost, limitDuration}
	toolTurnLimits  = []limitKind{limitToolTurns, limitToolCalls, limitDuration}
)

// limitNamed is the limit the API names name.
func limitNamed(name string) (limitKind, bool) {
	for k, n := range limitNames {
		if n == name {
			return limitKind(k), true
		}
	}
	return 0, false
}

// limitSet is a generation's limits in effect as it starts: each value
// in its unit (durations in milliseconds, money in billionths of
// currency's unit), 0 for none; max_tool_turns always has one.
type limitSet struct {
	values, ceilings [limitKinds]int64
	currency         string
	onLimit          agentdv1.OnLimit
}

// limitRun is what a generation counts against its limits, across
// pauses and replicas (its checkpoints keep it): the tool turns are
// generation.toolTurns, the tokens and money its total usage.
type limitRun struct {
	toolCalls int
	before    time.Duration // how long its earlier runs ran
	// raised holds the values approvals raised limits to; 0 where none
	// did.
	raised [limitKinds]int64
	// reached is the limit the generation ended or failed at.
	reached *agentdv1.LimitReached
}

// restoreLimits takes up what checkpoint cp counted (the output schema's
// repair turns too).
func (g *generation) restoreLimits(cp *statev1.Checkpoint) {
	g.lim.toolCalls = int(cp.GetToolCalls())
	g.lim.before = cp.GetElapsed().AsDuration()
	g.outputRepairs = int(cp.GetOutputRepairs())
	for name, v := range cp.GetRaisedLimits() {
		if k, ok := limitNamed(name); ok {
			g.lim.raised[k] = v
		}
	}
}

// saveLimits puts what the generation counted in its checkpoint cp.
func (g *generation) saveLimits(cp *statev1.Checkpoint) {
	cp.ToolCalls = int32(g.lim.toolCalls)
	cp.Elapsed = durationpb.New(g.elapsed())
	cp.OutputRepairs = int32(g.outputRepairs)
	for k, v := range g.lim.raised {
		if v > 0 {
			if cp.RaisedLimits == nil {
				cp.RaisedLimits = make(map[string]int64)
			}
			cp.RaisedLimits[limitNames[k]] = v
		}
	}
}

// elapsed is how long the generation has run: its earlier runs, and
// this one so far.
func (g *generation) elapsed() time.Duration { return g.lim.before + time.Since(g.ran.began) }

// limit is the value of limit k now: as an approval raised it, else as
// the generation started with it; 0 for none.
func (g *generation) limit(k limitKind) int64 {
	return cmp.Or(g.lim.raised[k], g.plan.limits.values[k])
}

// used is what the generation used of limit k.
func (g *generation) used(k limitKind) int64 {
	switch k {
	case limitToolTurns:
		return int64(g.toolTurns)
	case limitToolCalls:
		return int64(g.lim.toolCalls)
	case limitTokens:
		u := g.total
		return u.GetInputTokens() + u.GetOutputTokens() + u.GetCacheReadInputTokens() + u.GetCacheWriteInputTokens()
	case limitCost:
		return g.total.GetCost().GetNanos()
	}
	return g.elapsed().Milliseconds()
}

// over finds the first of kinds the generation has reached, calls tool
// calls being about to run: tool calls that would pass their limit, or
// anything else used up.
func (g *generation) over(kinds []limitKind, calls int) (limitKind, bool) {
	for _, k := range kinds {
		v, used := g.limit(k), g.used(k)
		switch {
		case v == 0:
		case k == limitToolCalls && used+int64(calls) > v:
			return k, true
		case k != limitToolCalls && used >= v:
			return k, true
		}
	}
	return 0, false
}

// reachedOf is limit k reached, with the figures.
func (g *generation) reachedOf(k limitKind) *agentdv1.LimitReached {
	unit := limitUnits[k]
	if k == limitCost {
		unit = g.plan.limits.currency
	}
	return &agentdv1.LimitReached{Name: limitNames[k], Value: g.limit(k), Used: g.used(k), Unit: unit, Ceiling: g.plan.limits.ceilings[k]}
}

// checkLimits goes on at a point that checks kinds: before a model call
// (r nil: the model's last turn stands for it), or before the calls of
// r's model turn run. While a limit is reached, the generation ends,
// fails or asks for more as on_limit says; it goes on once every limit
// allows it. done says the generation ended (paused included), with err.
func (g *generation) checkLimits(ctx context.Context, kinds []limitKind, r *reply) (done bool, err error) {
	for {
		k, over := g.over(kinds, len(r.pending()))
		if !over {
			return false, nil
		}
		if r == nil {
			r = g.lastReply()
		}
		lr := g.reachedOf(k)
		g.lim.reached = lr
		switch g.plan.limits.onLimit {
		case agentdv1.OnLimit_ON_LIMIT_FAIL:
			return true, limitError(lr)
		case agentdv1.OnLimit_ON_LIMIT_PAUSE:
			if raised, err := g.askMore(ctx, k, lr, r); !raised {
				return true, err
			}
		default:
			return true, g.endAtLimit(ctx, lr, r)
		}
	}
}

// pending are the calls of r that are to run; none for a nil r.
func (r *reply) pending() []*agentdv1.ToolCall {
	if r == nil {
		return nil
	}
	return r.calls
}

// lastReply is the model's last turn as the conversation holds it, with
// no call to run: its message (nil before the generation's first) and
// why it stopped.
func (g *generation) lastReply() *reply {
	for i := len(g.added) - 1; i >= 0; i-- {
		if m := g.added[i]; m.GetRole() == agentdv1.Role_ROLE_ASSISTANT {
			return &reply{message: m, stop: g.lastStop}
		}
	}
	return &reply{stop: g.lastStop}
}

// endAtLimit completes the generation at limit lr with the model's last
// turn r: the calls it asked for that did not run get a result saying
// so, so that the conversation (and its thread) stays whole.
func (g *generation) endAtLimit(ctx context.Context, lr *agentdv1.LimitReached, r *reply) error {
	g.lim.reached = lr
	if len(r.calls) > 0 {
		out := toolerror.JSON(fmt.Sprintf("not run: the generation reached its limit %s (%s)", lr.GetName(), figures(lr, len(r.calls))))
		parts := make([]*agentdv1.Part, len(r.calls))
		for i, c := range r.calls {
			parts[i] = &agentdv1.Part{Kind: &agentdv1.Part_ToolResult{ToolResult: &agentdv1.ToolResult{ToolCallId: c.GetId(), Name: c.GetName(), Output: out, IsError: true}}}
		}
		g.appendMessage(&agentdv1.Message{Role: agentdv1.Role_ROLE_TOOL, Parts: parts})
	}
	return g.complete(ctx, r)
}

// limitError fails a generation that reached lr with on_limit FAIL.
func limitError(lr *agentdv1.LimitReached) error {
	info := map[string]string{"limit": lr.GetName(), "value": fmt.Sprint(lr.GetValue()), "used": fmt.Sprint(lr.GetUsed()), "unit": lr.GetUnit()}
	if lr.GetName() == limitNames[limitToolTurns] {
		info["max_tool_turns"] = fmt.Sprint(lr.GetValue())
		return fault.New(fault.Exhausted,
			"the generation used its %d tool turns (max_tool_turns) and the model still asked for tools; raise max_tool_turns if it needs more",
			lr.GetValue()).WithInfo("MAX_TOOL_TURNS", info)
	}
	return fault.New(fault.Exhausted, "the generation reached its limit %s (%s); raise it if the generation needs more, or set on_limit END to complete it there",
		lr.GetName(), figures(lr, 0)).WithInfo(strings.ToUpper(lr.GetName()), info)
}

// figures says what was used of lr, in its unit: "10 of 10 tool calls",
// with more calls about to run.
func figures(lr *agentdv1.LimitReached, more int) string {
	var s string
	switch k, _ := limitNamed(lr.GetName()); k {
	case limitCost:
		s = fmt.Sprintf("%s of %s %s", decimal(lr.GetUsed()), decimal(lr.GetValue()), lr.GetUnit())
	case limitDuration:
		s = fmt.Sprintf("%s of %s", time.Duration(lr.GetUsed())*time.Millisecond, time.Duration(lr.GetValue())*time.Millisecond)
	default:
		s = fmt.Sprintf("%d of %d %s", lr.GetUsed(), lr.GetValue(), strings.ReplaceAll(lr.GetUnit(), "_", " "))
	}
	if more > 0 {
		s += fmt.Sprintf(", and the model asks for %d more", more)
	}
	return s
}

// decimal writes nanos billionths of a unit as the shortest exact
// decimal of the unit: 2500000000 is "2.5".
func decimal(nanos int64) string {
	s := strings.TrimRight(amount(nanos), "0")
	return strings.TrimSuffix(s, ".")
}

// limitPrefix begins the ids of limit approval requests, whose
// decisions go to the request waiting for them, not to a tool turn's.
const limitPrefix = "limit_"

// askMore asks whoever may decide whether the generation may use more
// of limit k, which it reached at lr with r's calls to run: on its
// stream, within the answer timeout, else by pausing. raised says an
// approval raised the limit; otherwise the generation ended (declined:
// at the limit, as END) or paused, with err.
func (g *generation) askMore(ctx context.Context, k limitKind, lr *agentdv1.LimitReached, r *reply) (raised bool, err error) {
	answer, err := g.askAtLimit(ctx, lr, fmt.Sprintf("The generation reached %s (%s). Allow more?", lr.GetName(), figures(lr, len(r.calls))), r.calls)
	if answer == nil {
		return false, err
	}
	return g.applyRaise(ctx, k, answer, r)
}

// askAtLimit asks whoever may decide about the limit (or budget) reached
// at lr, with prompt, calls being the model's calls still to run: on
// the stream, within the answer timeout, else by pausing with them. It
// returns the decision; nil when there is none (the generation paused,
// or ended, with err).
func (g *generation) askAtLimit(ctx context.Context, lr *agentdv1.LimitReached, prompt string, calls []*agentdv1.ToolCall) (*decision, error) {
	req := &agentdv1.ApprovalRequest{Id: fmt.Sprintf("%s%d", limitPrefix, g.s.inputs.Add(1)), Prompt: prompt, Limit: lr}
	answer, none, err := g.ask(ctx, question{pausable: true, check: checkRaiseOn(lr), request: func() (string, *agentdv1.GenerateResponse) {
		g.s.log.InfoContext(ctx, "limit approval requested", "audit", true, "principal", g.caller, "tenant", g.tenant, "generation", g.id,
			"request", req.GetId(), "limit", lr.GetName(), "value", lr.GetValue(), "used", lr.GetUsed())
		return req.GetId(), &agentdv1.GenerateResponse{Event: &agentdv1.GenerateResponse_ApprovalRequest{ApprovalRequest: req}}
	}})
	switch {
	case err != nil:
		return nil, err
	case none != nil:
		turn := &statev1.PausedTurn{Turn: int32(g.toolTurns), Calls: calls, States: noStates(len(calls)), Limit: req}
		return nil, g.pause(ctx, turn, &errPause{why: none.why, expired: errors.Is(none.cause, errAnswerTimeout)})
	}
	return answer, nil
}

// applyRaise applies d, the decision of the approval of limit k reached
// with r's calls to run: an approval raises the limit, to raise_to or
// by its first value, within its ceiling (raised); a refusal ends the
// generation at the limit.
func (g *generation) applyRaise(ctx context.Context, k limitKind, d *decision, r *reply) (raised bool, err error) {
	a := d.approval
	g.answered.add(d.requestID)
	g.s.log.InfoContext(ctx, "limit approval decided", "audit", true, "principal", cmp.Or(d.by, auth.Anonymous), "tenant", g.tenant, "generation", g.id,
		"request", d.requestID, "limit", limitNames[k], "approved", a.GetApproved(), "raise_to", a.GetRaiseTo(), "reason", a.GetReason())
	if !a.GetApproved() {
		return false, g.endAtLimit(ctx, g.reachedOf(k), r)
	}
	to := a.GetRaiseTo()
	if to == 0 {
		to = g.limit(k) + g.plan.limits.values[k]
		if c := g.plan.limits.ceilings[k]; c > 0 {
			to = min(to, c)
		}
	}
	g.lim.raised[k] = to
	g.lim.reached = nil
	return true, nil
}

// checkRaiseOn is the check of a decision of the approval of limit lr
// that its generation's stream brings: INVALID_ARGUMENT where raise_to
// cannot raise it (raiseRefusal).
func checkRaiseOn(lr *agentdv1.LimitReached) func(*decision) error {
	return func(d *decision) error {
		if why := raiseRefusal(lr, d.approval); why != "" {
			return fault.InvalidRequest([]fault.Violation{{Field: "approval_decision.raise_to", Description: why}})
		}
		return nil
	}
}

// raiseRefusal says why approval a cannot raise limit lr; "" when it
// can, or declines. raise_to must be above what was used and within the
// ceiling; 0 (by the limit's first value) needs room below the ceiling.
func raiseRefusal(lr *agentdv1.LimitReached, a *agentdv1.ApprovalDecision) string {
	to, ceiling := a.GetRaiseTo(), lr.GetCeiling()
	switch {
	case !a.GetApproved() || lr == nil:
		return ""
	case isBudget(lr) && to != 0:
		return fmt.Sprintf("an approval does not raise %s: approve without raise_to to go on once the budget allows, got %d", lr.GetName(), to)
	case to < 0:
		return fmt.Sprintf("must not be negative, got %d", to)
	case to > 0 && to <= lr.GetUsed():
		return fmt.Sprintf("must be above what the generation used of %s, %d %s, got %d", lr.GetName(), lr.GetUsed(), lr.GetUnit(), to)
	case to > 0 && ceiling > 0 && to > ceiling:
		return fmt.Sprintf("must be at most the tenant's ceiling of %s, %d %s (generation_limits.ceilings), got %d", lr.GetName(), ceiling, lr.GetUnit(), to)
	case to == 0 && ceiling > 0 && (lr.GetValue() >= ceiling || lr.GetUsed() >= ceiling):
		return fmt.Sprintf("%s is at the tenant's ceiling, %d %s (generation_limits.ceilings): it cannot be raised; decline to complete the generation", lr.GetName(), ceiling, lr.GetUnit())
	}
	return ""
}

// resumeAtLimit continues a generation resumed at the limit its paused
// turn t waits for the approval of: the resume's decision raises it and
// the generation goes on where it stopped (the turn's calls run, or the
// model call happens), or ends it there. done says the generation ended,
// with err.
func (g *generation) resumeAtLimit(ctx context.Context, t *statev1.PausedTurn) (done bool, err error) {
	req := t.GetLimit()
	k, ok := limitNamed(req.GetLimit().GetName())
	if !ok && !isBudget(req.GetLimit()) {
		return true, fault.New(fault.FailedPrecondition, "the generation paused at a limit this agentd does not know, %q", req.GetLimit().GetName())
	}
	i := slices.IndexFunc(g.resume.decided, func(d *decision) bool { return d.requestID == req.GetId() })
	if i < 0 {
		return true, fault.New(fault.Internal, "the resume has no decision of %q", req.GetId())
	}
	d := g.resume.decided[i]
	d.recorded = true // checked and recorded as the resume began
	taken, err := g.takeDecision(ctx, d)
	if err != nil {
		return true, err
	}
	if !ok {
		return g.resumeAtBudget(ctx, t, taken)
	}
	r := g.lastReply()
	r.calls = t.GetCalls()
	if raised, err := g.applyRaise(ctx, k, taken, r); !raised {
		return true, err
	}
	if err := g.progress(ctx); err != nil {
		return true, err
	}
	g.clearPaused()
	if len(r.calls) == 0 {
		return false, g.awaitCheckpoint(ctx)
	}
	return g.toolTurn(ctx, r)
}

// proto is l as the API shows the limits in effect
// (PreviewResponse.limits): max_tool_turns aside, it being the agent's
// own field.
func (l *limitSet) proto() *agentdv1.GenerationLimits {
	out := &agentdv1.GenerationLimits{OnLimit: cmp.Or(l.onLimit, agentdv1.OnLimit_ON_LIMIT_END)}
	if v := l.values[limitToolCalls]; v > 0 {
		out.MaxToolCalls = new(int32(v))
	}
	if v := l.values[limitTokens]; v > 0 {
		out.MaxTotalTokens = new(v)
	}
	if v := l.values[limitCost]; v > 0 {
		out.MaxCost = &agentdv1.Money{Currency: l.currency, Nanos: v}
	}
	if v := l.values[limitDuration]; v > 0 {
		out.MaxDuration = durationpb.New(time.Duration(v) * time.Millisecond)
	}
	return out
}
