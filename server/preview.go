package server

import (
	agentdv1 "github.com/agentd/agentd/gen/go/agentd/v1"

	"context"

	"github.com/agentd/agentd/internal/fault"
)

// Preview resolves a request without any I/O: it never calls the
// bridge or the provider.
func (s *Service) Preview(ctx context.Context, req *agentdv1.PreviewRequest) (*agentdv1.PreviewResponse, error) {
	_, tenant, err := s.tenant(ctx)
	if err != nil {
		return nil, fault.GRPC(err)
	}
	p, err := s.newPlan("", tenant, req.GetAgent(), req.GetMessages(), nil)
	if err != nil {
		return nil, fault.GRPC(err)
	}
	return &agentdv1.PreviewResponse{
		Provider:        req.GetAgent().GetProvider(),
		Model:           req.GetAgent().GetModel(),
		Instructions:    req.GetAgent().GetInstructions(),
		Tools:           req.GetAgent().GetTools(),
		ProviderServers: p.placements(agentdv1.Placement_PLACEMENT_PROVIDER),
		Messages:        req.GetMessages(),
		ProviderOptions: req.GetAgent().GetProviderOptions(),
		MaxToolTurns:    int32(p.limits.values[limitToolTurns]),
		Limits:          p.limits.proto(),
		Output:          p.outputPreview(),
	}, nil
}
