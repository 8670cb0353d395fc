package server

import (
	agentdv1 "github.com/agentd/agentd/gen/go/agentd/v1"

	"context"
	"errors"

	"google.golang.org/grpc"
	"google.golang.org/grpc/status"

	"github.com/agentd/agentd/internal/fault"
)

// FollowGeneration streams the events of one of the caller's tenant's
// generations after a sequence number, as Generate's attach does, each in
// a FollowGenerationResponse: every event once and in order, the stored
// ones first, on any replica that shares the store, until the generation
// completes or pauses (OK, after that event), or fails or is cancelled
// (its status). Another tenant's generation is NOT_FOUND, like one that
// never existed.
func (s *Service) FollowGeneration(req *agentdv1.FollowGenerationRequest, stream grpc.ServerStreamingServer[agentdv1.FollowGenerationResponse]) error {
	id, after := req.GetGenerationId(), req.GetAfterSequence()
	tenant, err := s.followed(stream.Context(), followFields{"generation_id", "after_sequence"}, id, after)
	if err != nil {
		return fault.GRPC(err)
	}
	return followStatus(s.events.Follow(stream.Context(), tenant, id, after, func(ev *agentdv1.GenerateResponse) error {
		return stream.Send(&agentdv1.FollowGenerationResponse{Event: ev})
	}))
}

// followFields name a follow request's fields in its violations: the
// generation's id, and the sequence number to follow after.
type followFields struct{ id, after string }

// followed checks a request to follow generation id after sequence number
// after, and returns the caller's tenant, whose generation it must be. It
// reads nothing: the follow finds another tenant's generation not found,
// with the same error as one that never existed, before it sends
// anything (in memory when the generation runs here, else in the store).
func (s *Service) followed(ctx context.Context, f followFields, id string, after int64) (string, error) {
	var v violations
	if id == "" {
		v.add(f.id, "is required")
	}
	if after < 0 {
		v.add(f.after, "must not be negative, got %d", after)
	}
	if len(v) > 0 {
		return "", fault.InvalidRequest(v)
	}
	tenant, _, err := s.tenant(ctx)
	if err != nil {
		return "", err
	}
	if s.generations == nil {
		return "", fault.New(fault.FailedPrecondition, "this agentd keeps no record of its generations, so there is nothing to follow")
	}
	return tenant, nil
}

// stored returns nil if tenant's generation id is in the store, else why
// not: for a stream that must know before it sends its first bytes.
func (s *Service) stored(ctx context.Context, tenant, id string) error {
	if _, err := s.generations.Get(ctx, tenant, id); err != nil {
		if ctx.Err() != nil {
			return context.Cause(ctx)
		}
		return err
	}
	return nil
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
