package server

import (
	"context"
	"errors"
	"io"

	"google.golang.org/grpc/status"

	agentdv1 "github.com/agentd/agentd/gen/go/agentd/v1"
	"github.com/agentd/agentd/internal/fault"
)

// attach follows a generation from its stored log (X-G2): every event
// after a.after_sequence, in order, each once, then the later ones as its
// owner, on this replica or another, appends them, until the generation
// has paused or finished. The stream is read-only.
func (s *Service) attach(stream generateStream, a *agentdv1.AttachGeneration) error {
	return followStatus(s.attachStream(stream, a))
}

// followStatus is how a followed stream ends after err: nil, or a status
// already (the generation's, or the stream's), as it is; a fault as its
// status.
func followStatus(err error) error {
	var fe *fault.Error
	if _, ok := status.FromError(err); ok && !errors.As(err, &fe) {
		return err
	}
	return fault.GRPC(err)
}

// readOnly watches the client's side of a stream that only follows a
// generation: its context ends when the client goes away, or, with
// INVALID_ARGUMENT (misuse), when it sends anything; a half-close is no
// end (the client still reads).
func readOnly(stream generateStream, misuse string) (context.Context, context.CancelCauseFunc) {
	ctx, cancel := context.WithCancelCause(stream.Context())
	go func() { // returns when the handler has returned, at the latest
		_, err := stream.Recv()
		switch {
		case errors.Is(err, io.EOF): // half-closed: the client still reads
		case err != nil:
			cancel(err)
		default:
			cancel(fault.InvalidRequest([]fault.Violation{{Field: "kind", Description: misuse}}))
		}
	}()
	return ctx, cancel
}

func (s *Service) attachStream(stream generateStream, a *agentdv1.AttachGeneration) error {
	var v violations
	if a.GetGenerationId() == "" {
		v.add("attach.generation_id", "is required")
	}
	if a.GetAfterSequence() < 0 {
		v.add("attach.after_sequence", "must not be negative, got %d", a.GetAfterSequence())
	}
	if len(v) > 0 {
		return fault.InvalidRequest(v)
	}
	tenant, _, err := s.tenant(stream.Context())
	if err != nil {
		return err
	}
	if s.generations == nil {
		return fault.New(fault.FailedPrecondition, "this agentd keeps no record of its generations, so there is nothing to attach to")
	}
	ctx, cancel := readOnly(stream, "an attached stream is read-only: answer on the generation's own stream, or resume it once it has paused")
	defer cancel(nil)
	id, after := a.GetGenerationId(), a.GetAfterSequence()
	if _, err := s.generations.Get(ctx, tenant, id); err != nil {
		if ctx.Err() != nil {
			return context.Cause(ctx)
		}
		return err // another tenant's is not found either
	}
	return s.events.Follow(ctx, tenant, id, after, func(ev *agentdv1.GenerateResponse) error { return stream.Send(ev) })
}
