package server

import (
	agentdv1 "github.com/agentd/agentd/gen/go/agentd/v1"

	"context"
	"slices"

	"github.com/agentd/agentd/internal/auth"
)

// GetCaller says who the caller is to agentd: the principal its
// credential names, its tenant and its roles, as configured. Without
// authentication it is the anonymous caller, of the one tenant every
// caller shares (""), who holds every role.
func (s *Service) GetCaller(ctx context.Context, _ *agentdv1.GetCallerRequest) (*agentdv1.GetCallerResponse, error) {
	if p, ok := auth.FromContext(ctx); ok {
		return &agentdv1.GetCallerResponse{Name: p.Name, Tenant: p.Tenant, Roles: slices.Clone(p.Roles)}, nil
	}
	return &agentdv1.GetCallerResponse{Name: auth.Anonymous, Roles: auth.EveryRole()}, nil
}
