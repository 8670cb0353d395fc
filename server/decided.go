package server

import (
	agentdv1 "github.com/agentd/agentd/gen/go/agentd/v1"

	"cmp"
	"context"
	"fmt"
	"sync"
	"time"
	"unicode/utf8"

	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/agentd/agentd/internal/auth"
	"github.com/agentd/agentd/internal/fault"
	"github.com/agentd/agentd/internal/store"
)

// How a generation that runs here takes decisions. Whatever it waits for
// from a person is a pending request of its record (pendingSet), which
// DecideRequests may answer from any replica while the stream's holder
// may answer it inline: the first decision recorded wins
// (store.Generations.Decide), on every replica alike. The stream
// holder's answer is recorded when the generation takes it; one that
// comes second is refused with a warning on the stream, naming who
// decided first, and the first decision is taken instead. A decision
// made on this replica reaches the generation at once (deliver); one
// made on another, within decisionPollEvery (its watch). Every decision
// taken shows as approval_decided.

// startDeciding makes the generation, which runs here with a durable
// record, decidable: DecideRequests on this replica delivers to it, and
// its pending set watches the record for decisions made on others.
func (g *generation) startDeciding() {
	if g.journal == nil {
		return
	}
	g.pending.poll = g.pollDecisions()
	g.s.deciding.Store(generationKey(g.tenant, g.id), g)
}

// stopDeciding ends what startDeciding began, as the run ends.
func (g *generation) stopDeciding() {
	g.s.deciding.CompareAndDelete(generationKey(g.tenant, g.id), g)
	g.pending.clear()
}

// generationKey names tenant's generation id in the Service's maps of
// the generations this replica serves (deciding, blocks).
func generationKey(tenant, id string) string { return tenant + "\x00" + id }

// deciding returns tenant's generation id if it runs here; nil if not.
func (s *Service) decidingHere(tenant, id string) *generation {
	g, _ := s.deciding.Load(generationKey(tenant, id))
	gg, _ := g.(*generation)
	return gg
}

// pollDecisions is the pending set's poll: it reads the decisions of the
// requests ids from the record and delivers each, once, to the mailbox.
func (g *generation) pollDecisions() func(ctx context.Context, ids []string) {
	var mu sync.Mutex
	delivered := make(map[string]bool)
	return func(ctx context.Context, ids []string) {
		sctx, cancel := context.WithTimeout(ctx, store.Timeout)
		defer cancel()
		found, err := g.s.generations.Decisions(sctx, g.tenant, g.id, ids)
		if err != nil {
			if ctx.Err() == nil {
				g.s.log.WarnContext(ctx, "reading a waiting generation's decisions", "generation", g.id, "err", err)
			}
			return
		}
		for _, sd := range found {
			mu.Lock()
			seen := delivered[sd.RequestID]
			delivered[sd.RequestID] = true
			mu.Unlock()
			if seen {
				continue
			}
			d, err := decisionFrom(g.s.sealer, g.tenant, g.id, sd)
			if err != nil {
				g.s.log.WarnContext(ctx, "a waiting generation's decision cannot be read", "generation", g.id, "request", sd.RequestID, "err", err)
				continue
			}
			g.link.mail.deliver(d)
		}
	}
}

// waitingRequest is a new request of kind that the generation waits
// for on its stream, until its answer timeout.
func (g *generation) waitingRequest(kind agentdv1.PendingRequestKind) *agentdv1.PendingRequest {
	now := time.Now()
	return &agentdv1.PendingRequest{GenerationId: g.id, Kind: kind, State: agentdv1.GenerationState_GENERATION_STATE_WAITING,
		RequestedAt: timestamppb.New(now), ExpiresAt: timestamppb.New(now.Add(g.plan.answerTimeout))}
}

// addPending records that the generation waits for req, concerning
// server and tool, in its record too; call it before the event that asks
// it, so that the record has the request once anyone sees it.
func (g *generation) addPending(ctx context.Context, req *agentdv1.PendingRequest, server, tool string) {
	if g.journal == nil {
		return
	}
	e := newEntry(g.s.sealer, g.tenant, g.id, store.Waiting, req, server, tool)
	g.emitMu.Lock()
	defer g.emitMu.Unlock()
	g.journal.SetPending(g.pending.add(ctx, e))
}

// dropPending records that the generation no longer waits for request
// id.
func (g *generation) dropPending(id string) {
	if g.journal == nil {
		return
	}
	g.emitMu.Lock()
	defer g.emitMu.Unlock()
	if rows, ok := g.pending.remove(id); ok {
		g.journal.SetPending(rows)
	}
}

// takeDecision takes d, an answer to a request the generation waits for:
// it records the stream holder's (a decision recorded before it wins:
// the holder is warned, and that one is taken instead), drops the
// request from the pending ones, writes the audit line and emits
// approval_decided. It returns the decision taken.
func (g *generation) takeDecision(ctx context.Context, d *decision) (*decision, error) {
	taken, err := g.recordDecision(ctx, d)
	if err != nil {
		return nil, err
	}
	if taken != d {
		if err := g.warnDecided(ctx, d, taken); err != nil {
			return nil, err
		}
	}
	g.dropPending(d.requestID)
	g.auditDecision(ctx, taken)
	return taken, g.emit(ctx, &agentdv1.GenerateResponse{Event: &agentdv1.GenerateResponse_ApprovalDecided{ApprovalDecided: taken.event()}})
}

// recordDecision records d unless it is recorded already, and returns
// the decision of its request: d, or the one recorded first. Without a
// durable record, or for a request the record does not list (nobody
// else could decide it either), d stands as it is.
func (g *generation) recordDecision(ctx context.Context, d *decision) (*decision, error) {
	if d.recorded || g.journal == nil {
		return d, nil
	}
	if err := checkReason("approval_decision.reason", d); err != nil {
		return nil, err
	}
	// The request's row is in the record once the event that asked it
	// is (addPending).
	if err := g.journal.Await(ctx); err != nil {
		return nil, err
	}
	sctx, cancel := store.WriteContext(ctx)
	defer cancel()
	first, err := g.s.generations.Decide(sctx, g.tenant, g.id, []store.Decision{d.stored(g.s.sealer, g.tenant, g.id)})
	switch {
	case fault.KindOf(err) == fault.NotFound:
		return d, nil
	case err != nil:
		return nil, err
	case len(first) > 0:
		return decisionFrom(g.s.sealer, g.tenant, g.id, first[0])
	}
	d.recorded = true
	return d, nil
}

// undecide withdraws the decisions of the requests ids, which could not
// be applied (authorizations whose codes were refused): they may be
// decided again.
func (g *generation) undecide(ctx context.Context, ids []string) {
	if g.s.generations == nil || len(ids) == 0 {
		return
	}
	sctx, cancel := store.WriteContext(ctx)
	defer cancel()
	if err := g.s.generations.Undecide(sctx, g.tenant, g.id, ids); err != nil {
		g.s.log.WarnContext(ctx, "withdrawing decisions that could not be applied", "generation", g.id, "requests", ids, "err", err)
	}
}

// decideAll records ds as decisions of tenant's generation id, all or
// none (store.Generations.Decide): a request decided already refuses
// them, naming who decided it; one not pending is the store's NotFound.
func (s *Service) decideAll(ctx context.Context, tenant, id string, ds []*decision) error {
	stored := make([]store.Decision, len(ds))
	for i, d := range ds {
		stored[i] = d.stored(s.sealer, tenant, id)
	}
	first, err := s.generations.Decide(ctx, tenant, id, stored)
	switch {
	case err != nil:
		return err
	case len(first) > 0:
		d, err := decisionFrom(s.sealer, tenant, id, first[0])
		if err != nil {
			return err
		}
		return decidedAlready(id, d)
	}
	for _, d := range ds {
		d.recorded = true
	}
	return nil
}

// checkReason refuses a decision whose reason, at field, is longer than
// maxReasonChars.
func checkReason(field string, d *decision) error {
	if n := utf8.RuneCountInString(d.approval.GetReason()); n > maxReasonChars {
		return fault.InvalidRequest([]fault.Violation{{Field: field, Description: fmt.Sprintf("must be at most %d characters, got %d", maxReasonChars, n)}})
	}
	return nil
}

// warnDecided tells the stream's holder that its answer d was not taken:
// first decided the request before it.
func (g *generation) warnDecided(ctx context.Context, d, first *decision) error {
	return g.emit(ctx, &agentdv1.GenerateResponse{Event: &agentdv1.GenerateResponse_Warning{Warning: &agentdv1.Warning{
		Code: "REQUEST_DECIDED",
		Message: fmt.Sprintf("the answer to %s was not taken: %s decided it first, at %s",
			d.requestID, first.who(), first.at.UTC().Format(time.RFC3339Nano)),
	}}})
}

// lateAnswer handles the stream holder's answer d to a request the
// generation no longer waits for: one that repeats the decision taken is
// ignored; one that differs from it, or that another decided, is
// refused with a warning naming who decided first.
func (g *generation) lateAnswer(ctx context.Context, d *decision) error {
	if d.recorded || g.journal == nil {
		return nil
	}
	sctx, cancel := context.WithTimeout(ctx, store.Timeout)
	defer cancel()
	found, err := g.s.generations.Decisions(sctx, g.tenant, g.id, []string{d.requestID})
	if err != nil || len(found) == 0 {
		return nil // nothing to say who decided: a repeat, as before
	}
	first, err := decisionFrom(g.s.sealer, g.tenant, g.id, found[0])
	if err != nil || (first.by == d.by && first.same(d)) {
		return nil
	}
	return g.warnDecided(ctx, d, first)
}

// auditDecision writes the audit line of an authorization or input
// decision the generation takes; an approval's is its call's ("approval
// decided") or its sample's.
func (g *generation) auditDecision(ctx context.Context, d *decision) {
	if d.approval != nil {
		return
	}
	attrs := []any{"audit", true, "principal", cmp.Or(d.by, auth.Anonymous), "tenant", g.tenant, "generation", g.id,
		"request", d.requestID, "kind", kindName(d.kind)}
	if d.input != nil {
		attrs = append(attrs, "action", d.input.GetAction().String())
	}
	g.s.log.InfoContext(ctx, "request decided", attrs...)
}
