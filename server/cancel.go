package server

import (
	agentdv1 "github.com/agentd/agentd/gen/go/agentd/v1"

	"cmp"
	"context"
	"fmt"
	"time"
	"unicode/utf8"

	"github.com/agentd/agentd/internal/auth"
	"github.com/agentd/agentd/internal/fault"
	"github.com/agentd/agentd/internal/record"
	"github.com/agentd/agentd/internal/store"
)

// How CancelGeneration reaches a generation wherever it is. The store
// ends a queued one at once (it runs nowhere) and marks any other live
// one (store.Generations.Cancel); the replica that runs it finds the mark
// with the interrupts it polls for (interruptDue) and cancels it, as its
// client's cancel would. This replica cancels at once what runs here, and
// ends a paused one that nobody runs itself (cancelPaused); a paused one
// that a resume holds is the resume's to cancel, through the mark. The
// mark outlives a run that does not end the generation (a hand-over as
// agentd stops, a resume cancelled within its paused turn): whoever runs
// it next cancels it.

// CancelGeneration cancels one of the caller's tenant's generations that
// has not ended, on whichever replica runs it: it ends CANCELLED, with
// the reason (or, without one, who cancelled it) as its error message; a
// queued or paused one at once, a running or waiting one at its replica's
// next safe point. Its thread keeps nothing of it but its input with
// on_failure KEEP_INPUT (a queued one, which never held its thread,
// nothing). A generation that has ended is FAILED_PRECONDITION; another
// tenant's is NOT_FOUND, as one that never existed. The response is the
// generation as it is after: CANCELLED, or still RUNNING or WAITING until
// its replica stops it.
func (s *Service) CancelGeneration(ctx context.Context, req *agentdv1.CancelGenerationRequest) (*agentdv1.CancelGenerationResponse, error) {
	g, err := s.cancelGeneration(ctx, req)
	if err != nil {
		return nil, fault.GRPC(err)
	}
	return &agentdv1.CancelGenerationResponse{Generation: g}, nil
}

func (s *Service) cancelGeneration(ctx context.Context, req *agentdv1.CancelGenerationRequest) (*agentdv1.Generation, error) {
	var v violations
	if req.GetGenerationId() == "" {
		v.add("generation_id", "is required")
	}
	if n := utf8.RuneCountInString(req.GetReason()); n > maxReasonChars {
		v.add("reason", "must be at most %d characters, got %d", maxReasonChars, n)
	}
	if len(v) > 0 {
		return nil, fault.InvalidRequest(v)
	}
	tenant, err := s.recordsOf(ctx)
	if err != nil {
		return nil, err
	}
	id, by := req.GetGenerationId(), cmp.Or(principalName(ctx), auth.Anonymous)
	reason := cancelReason(req.GetReason(), by)
	rec, err := s.markCancelled(ctx, tenant, id, reason)
	s.auditCancel(ctx, tenant, id, by, req.GetReason(), err)
	if err != nil {
		return nil, err
	}
	switch g := s.decidingHere(tenant, id); {
	case g != nil:
		g.cancelBy(reason)
	case rec.State == store.Paused:
		if !s.cancelPaused(store.Interruption{Tenant: tenant, ID: id, State: rec.State, Cancel: true, Reason: reason}) {
			s.awaitEnd(ctx, tenant, id)
		}
	}
	return s.getGeneration(ctx, &agentdv1.GetGenerationRequest{GenerationId: id})
}

// pausedCancelWait bounds how long CancelGeneration waits for another
// replica that took the paused generation it cancels (its interrupter
// found the mark first) to end it.
const pausedCancelWait = 2 * time.Second

// awaitEnd waits, at most pausedCancelWait, until tenant's generation id
// has ended: another replica is ending it.
func (s *Service) awaitEnd(ctx context.Context, tenant, id string) {
	ctx, cancel := context.WithTimeout(ctx, pausedCancelWait)
	defer cancel()
	tick := time.NewTicker(20 * time.Millisecond)
	defer tick.Stop()
	for {
		if rec, err := s.generations.Get(ctx, tenant, id); err != nil || rec.State.Finished() {
			return
		}
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		}
	}
}

// cancelReason is the error message a cancelled generation keeps: the
// reason given, or who cancelled it.
func cancelReason(reason, by string) string {
	if reason != "" {
		return reason
	}
	return fmt.Sprintf("%s cancelled the generation (CancelGeneration)", by)
}

// errCancelled is the cause of a generation cancelled by CancelGeneration
// for reason.
func errCancelled(reason string) *fault.Error { return fault.New(fault.Canceled, "%s", reason) }

// markCancelled has the store end tenant's generation id if it is queued,
// or mark it for its owner to cancel, and returns its record after.
func (s *Service) markCancelled(ctx context.Context, tenant, id, reason string) (store.Generation, error) {
	// Its write ends what it begins, whatever becomes of the call.
	ctx, cancel := store.WriteContext(ctx)
	defer cancel()
	return s.generations.Cancel(ctx, tenant, id, reason, record.EncodeResult(nil, nil, errCancelled(reason)), time.Now())
}

// cancelBy cancels g, which runs here, for reason, as its client's cancel
// would; again, it changes nothing (the poll repeats it until g has
// ended). Its end's log line says it was cancelled, the audit line who
// asked.
func (g *generation) cancelBy(reason string) { g.link.cancel(errCancelled(reason)) }

// auditCancel writes the audit line of a CancelGeneration: who cancelled
// which generation, why, and whether it took (err nil) or was refused.
func (s *Service) auditCancel(ctx context.Context, tenant, id, by, reason string, err error) {
	attrs := []any{"audit", true, "principal", by, "tenant", tenant, "generation", id, "reason", reason}
	if err != nil {
		s.log.InfoContext(ctx, "cancel refused", append(attrs, "err", err.Error())...)
		return
	}
	s.log.InfoContext(ctx, "cancel requested", attrs...)
}
