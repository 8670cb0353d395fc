package server

import (
	agentdv1 "github.com/agentd/agentd/gen/go/agentd/v1"

	"context"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/agentd/agentd/internal/auth"
	"github.com/agentd/agentd/internal/fault"
)

// CreateGeneration starts a generation detached, as Generate's start with
// detach does, for a caller that cannot stream a request body: it returns
// once the generation is recorded and its started event stored, with its
// id and that event's sequence number. It refuses what Generate refuses,
// alike. Without a durable record of generations it is
// FAILED_PRECONDITION, as a detached start and every read of the record
// are: nothing could follow or decide what it started.
func (s *Service) CreateGeneration(ctx context.Context, req *agentdv1.CreateGenerationRequest) (*agentdv1.CreateGenerationResponse, error) {
	if s.generations == nil {
		return nil, status.Error(codes.FailedPrecondition, "this agentd keeps no record of its generations (it has no state store), so it cannot start one to follow")
	}
	g, err := s.newGeneration(ctx, req.GetStart())
	if err != nil {
		return nil, fault.GRPC(err)
	}
	g.caller, _ = auth.Caller(ctx)
	res := &agentdv1.CreateGenerationResponse{GenerationId: g.id, ThreadId: g.threadID()}
	if g.thread != nil {
		q, err := s.startOnThread(ctx, g)
		if err != nil {
			g.release()
			return nil, fault.GRPC(err)
		}
		if q != nil {
			g.release()
			res.Queued = true
			return res, nil
		}
	}
	err = s.startDetached(ctx, g, func(ev *agentdv1.GenerateResponse) error {
		if ev.GetStarted() != nil {
			res.FirstSequence = ev.GetSequence()
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	return res, nil
}
