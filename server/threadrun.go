package server

import (
	agentdv1 "github.com/agentd/agentd/gen/go/agentd/v1"

	"context"
	"errors"
	"sync/atomic"
	"time"

	"github.com/agentd/agentd/internal/fault"
	"github.com/agentd/agentd/internal/quota"
	"github.com/agentd/agentd/internal/record"
	"github.com/agentd/agentd/internal/store"
)

// threadRun is the thread a generation runs on. Its conversation is the
// thread's first base items, then its own messages (the request's, then
// what it adds); the record stores only its own, and the thread gets
// them, once, with the generation's end (threadAppend).
type threadRun struct {
	id        string
	multitask store.Multitask
	onFailure agentdv1.OnFailure
	maxItems  quota.Limit
	base      int64
	// interrupted says a newer start on the thread interrupted the
	// generation: it stops at its next safe point, and the thread keeps
	// what it completed. stop is closed then, for a turn that waits for
	// answers to stop waiting.
	interrupted atomic.Bool
	stop        chan struct{}
}

func newThreadRun(id string, onFailure agentdv1.OnFailure) *threadRun {
	return &threadRun{id: id, onFailure: onFailure, stop: make(chan struct{})}
}

var multitasks = map[agentdv1.Multitask]store.Multitask{
	agentdv1.Multitask_MULTITASK_UNSPECIFIED: store.Reject,
	agentdv1.Multitask_MULTITASK_REJECT:      store.Reject,
	agentdv1.Multitask_MULTITASK_ENQUEUE:     store.Enqueue,
	agentdv1.Multitask_MULTITASK_INTERRUPT:   store.Interrupt,
}

// threadID is the id of g's thread; "" for none.
func (g *generation) threadID() string {
	if g.thread == nil {
		return ""
	}
	return g.thread.id
}

// withThreadViolations adds what is wrong with start's thread fields to
// err, the error of validating the rest of start: every problem of a
// request is reported at once.
func withThreadViolations(err error, start *agentdv1.StartGeneration) error {
	var v violations
	checkThreadStart(&v, start)
	if len(v) == 0 {
		return err
	}
	var fe *fault.Error
	switch {
	case err == nil:
		return fault.InvalidRequest(v)
	case errors.As(err, &fe) && fe.Kind == fault.Invalid:
		fe.Violations = append(fe.Violations, v...)
	}
	return err
}

// checkThreadStart adds what is wrong with start's thread fields to v.
func checkThreadStart(v *violations, start *agentdv1.StartGeneration) {
	onThread := start.GetThreadId() != "" || start.GetPreviousGenerationId() != ""
	if start.GetThreadId() != "" && start.GetPreviousGenerationId() != "" {
		v.add("start.previous_generation_id", "cannot be set with thread_id")
	}
	if _, ok := multitasks[start.GetMultitask()]; !ok {
		v.add("start.multitask", "must be REJECT, ENQUEUE or INTERRUPT, got %d", start.GetMultitask())
	} else if start.GetMultitask() != agentdv1.Multitask_MULTITASK_UNSPECIFIED && !onThread {
		v.add("start.multitask", "needs thread_id or previous_generation_id")
	}
	switch start.GetOnFailure() {
	case agentdv1.OnFailure_ON_FAILURE_UNSPECIFIED:
	case agentdv1.OnFailure_ON_FAILURE_DISCARD, agentdv1.OnFailure_ON_FAILURE_KEEP_INPUT:
		if !onThread {
			v.add("start.on_failure", "needs thread_id or previous_generation_id")
		}
	default:
		v.add("start.on_failure", "must be DISCARD or KEEP_INPUT, got %d", start.GetOnFailure())
	}
}

// startThread is the thread start runs on: thread_id, or the thread that
// previous_generation_id leads to (threadAfter); nil for none.
func (s *Service) startThread(ctx context.Context, tenant string, start *agentdv1.StartGeneration) (*threadRun, error) {
	if start.GetThreadId() == "" && start.GetPreviousGenerationId() == "" {
		return nil, nil
	}
	_, limits, err := s.threadsOf(ctx)
	if err != nil {
		return nil, err
	}
	id := start.GetThreadId()
	if id == "" {
		if id, err = s.threadAfter(ctx, tenant, limits, start.GetPreviousGenerationId()); err != nil {
			return nil, err
		}
	}
	t := newThreadRun(id, start.GetOnFailure())
	t.multitask, t.maxItems = multitasks[start.GetMultitask()], limits.items
	return t, nil
}

// threadAfter is the thread that continues tenant's completed generation
// prev: its thread when prev was the last to append to it; a fork of it
// up to prev's last item when others appended since; a new thread
// holding prev's whole conversation when prev ran on none.
func (s *Service) threadAfter(ctx context.Context, tenant string, limits threadLimits, prev string) (string, error) {
	ctx, cancel := store.WriteContext(ctx)
	defer cancel()
	rec, err := s.generations.Get(ctx, tenant, prev)
	if err != nil {
		return "", err
	}
	if rec.State != store.Completed {
		return "", fault.New(fault.FailedPrecondition, "the generation %q has not completed (it is %s): only a completed generation can be continued", prev, rec.State).
			WithInfo("GENERATION_NOT_COMPLETED", map[string]string{"generation_id": prev})
	}
	if rec.Thread == "" {
		msgs, err := record.StoredConversation(ctx, s.generations, tenant, prev)
		if err != nil {
			return "", err
		}
		t, err := s.newThread(ctx, tenant, limits, nil, time.Time{}, msgs)
		if err != nil {
			return "", err
		}
		return t.GetThreadId(), nil
	}
	last, err := s.lastItemOf(ctx, tenant, rec.Thread, prev)
	if err != nil {
		return "", err
	}
	if last.N == -1 {
		return rec.Thread, nil
	}
	t, err := s.threads.ForkThread(ctx, tenant, rec.Thread, newThreadID(), last.N, nil, int64(limits.threads.N), time.Now())
	if err != nil {
		return "", limits.named(err)
	}
	return t.ID, nil
}

// lastItemOf finds the last item that generation gen appended to tenant's
// thread: N -1 when it is the thread's last item (the thread continues
// from gen as it is), else that item.
func (s *Service) lastItemOf(ctx context.Context, tenant, thread, gen string) (store.ThreadItem, error) {
	r := store.ItemRange{After: -1, Limit: store.MaxReadEvents, Desc: true}
	for first := true; ; first = false {
		items, err := s.threads.ThreadItems(ctx, tenant, thread, r)
		if err != nil {
			return store.ThreadItem{}, err
		}
		for i, it := range items {
			if it.Generation == gen {
				if first && i == 0 {
					return store.ThreadItem{N: -1}, nil
				}
				return it, nil
			}
		}
		if len(items) < r.Limit {
			return store.ThreadItem{}, fault.New(fault.FailedPrecondition, "the generation %q added nothing to its thread %q", gen, thread)
		}
		r.Before = items[len(items)-1].N
	}
}

// startOnThread records g, a new generation on a thread, which takes the
// thread or, per its multitask, waits in the thread's queue. Taking it, g
// gets the thread's items, which its conversation starts with, and its
// journal. Queued, it returns the event that says so: the generation
// runs later, wherever the store's queue makes it adoptable.
func (s *Service) startOnThread(ctx context.Context, g *generation) (*agentdv1.GenerationQueued, error) {
	j, created, err := s.createJournal(ctx, g)
	if err != nil {
		return nil, threadLimits{items: g.thread.maxItems}.named(err)
	}
	if created.State == store.Queued {
		q := &agentdv1.GenerationQueued{GenerationId: g.id, ThreadId: g.thread.id, BehindGenerationId: created.Behind}
		s.log.InfoContext(ctx, "generation queued", "audit", true, "principal", g.caller, "tenant", g.tenant, "generation", g.id,
			"thread", g.thread.id, "behind", q.GetBehindGenerationId())
		return q, nil
	}
	g.journal = j
	if err := g.joinThread(ctx, created.ThreadBase); err != nil {
		j.Settle(ctx, store.Failed, g.result(nil, err))
		return nil, err
	}
	return nil, nil
}

// joinThread puts the thread's first base items before g's conversation.
func (g *generation) joinThread(ctx context.Context, base int64) error {
	rctx, cancel := context.WithTimeout(ctx, store.Timeout)
	defer cancel()
	prefix, err := record.ThreadMessages(rctx, g.s.threads, g.s.sealer, g.tenant, g.thread.id, base)
	if err != nil {
		return err
	}
	g.thread.base = base
	g.messages = append(prefix, g.messages...)
	if g.journal != nil {
		g.journal.SetThreadBase(base)
	}
	return nil
}

// threadAppend is what g's thread keeps of it as its record ends in
// state: everything, once it completed; what it completed (its input and
// its whole tool turns) when a newer start interrupted it; its input
// alone when it failed or was cancelled with on_failure KEEP_INPUT;
// nothing otherwise. Nil without a thread, or with nothing to keep (the
// thread is given up all the same).
func (g *generation) threadAppend(state store.State) *store.ThreadAppend {
	if g.thread == nil || int64(len(g.messages)) < g.thread.base {
		return nil
	}
	own := g.messages[g.thread.base:]
	var keep []*agentdv1.Message
	switch {
	case state == store.Completed:
		keep = own
	case g.thread.interrupted.Load():
		keep = completedTurns(own)
	case g.thread.onFailure == agentdv1.OnFailure_ON_FAILURE_KEEP_INPUT:
		keep = own[:max(len(own)-len(g.added), 0)]
	}
	if len(keep) == 0 {
		return nil
	}
	return &store.ThreadAppend{Items: record.ThreadItems(g.s.sealer, g.tenant, g.id, keep, time.Now())}
}

// completedTurns is the longest start of msgs that ends with no tool call
// waiting for its result: a call is never kept without its result.
func completedTurns(msgs []*agentdv1.Message) []*agentdv1.Message {
	open := make(map[string]bool)
	n := 0
	for i, m := range msgs {
		for _, p := range m.GetParts() {
			if tc := p.GetToolCall(); tc != nil {
				open[tc.GetId()] = true
			}
			if tr := p.GetToolResult(); tr != nil {
				delete(open, tr.GetToolCallId())
			}
		}
		if len(open) == 0 {
			n = i + 1
		}
	}
	return msgs[:n]
}
