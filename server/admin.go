package server

import (
	agentdv1 "github.com/agentd/agentd/gen/go/agentd/v1"

	"context"
	"log/slog"
	"net/url"

	"google.golang.org/grpc"

	"github.com/agentd/agentd/internal/auth"
	"github.com/agentd/agentd/internal/fault"
	"github.com/agentd/agentd/internal/oauthtokens"
)

// Admin implements agentd.v1.AdminService: what agentd keeps for
// tenants, managed by their administrators.
//
// Under authentication, internal/auth admits its calls from principals
// holding admin, or tenant_admin; a call that names another tenant than
// the principal's own needs admin. Without authentication, every call
// passes, and the caller's own tenant is the default tenant ("").
type Admin struct {
	agentdv1.UnimplementedAdminServiceServer
	tokens oauthtokens.Store
	log    *slog.Logger
}

// NewAdmin returns the AdminService over tokens, logging an audit line
// for each change to log (nil: slog's default).
func NewAdmin(tokens oauthtokens.Store, log *slog.Logger) *Admin {
	if log == nil {
		log = slog.Default()
	}
	return &Admin{tokens: tokens, log: log}
}

// Register registers the service on srv.
func (a *Admin) Register(srv grpc.ServiceRegistrar) {
	agentdv1.RegisterAdminServiceServer(srv, a)
}

// RevokeTokens deletes the stored OAuth tokens of the request's tenant
// (the caller's own by default), narrowed to an end user and to the
// server at a URL (by its key, oauthtokens.ServerKey), and says how many.
// The URL is neither logged nor repeated in an error.
func (a *Admin) RevokeTokens(ctx context.Context, req *agentdv1.RevokeTokensRequest) (*agentdv1.RevokeTokensResponse, error) {
	tenant := req.GetTenant()
	if p, ok := auth.FromContext(ctx); ok {
		if tenant == "" {
			tenant = p.Tenant
		}
		if tenant != p.Tenant && !p.Has(auth.RoleAdmin) {
			return nil, fault.GRPC(fault.New(fault.Permission,
				"revoking another tenant's tokens needs the role %q; %q revokes its own tenant's only", auth.RoleAdmin, auth.RoleTenantAdmin))
		}
	}
	server := ""
	if raw := req.GetServerUrl(); raw != "" {
		if u, err := url.Parse(raw); err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
			return nil, fault.GRPC(fault.InvalidRequest([]fault.Violation{{Field: "server_url", Description: "must be the http or https URL of an MCP server"}}))
		}
		server = oauthtokens.ServerKey(raw)
	}
	n, err := a.tokens.Delete(ctx, tenant, req.GetEndUser(), server)
	if err != nil {
		return nil, fault.GRPC(err)
	}
	who, own := auth.Caller(ctx)
	// The server by its key: its URL's path may carry a secret.
	a.log.Info("admin change", "audit", true, "principal", who, "tenant", own, "method", "RevokeTokens",
		"tokens_tenant", tenant, "end_user", req.GetEndUser(), "server_key", server, "revoked", n)
	return &agentdv1.RevokeTokensResponse{Revoked: n}, nil
}
