package server

import (
	agentdv1 "github.com/agentd/agentd/gen/go/agentd/v1"

	"context"
	"log/slog"
	"net/url"

	"google.golang.org/grpc"

	bridgev1 "github.com/agentd/agentd/gen/go/agentd/bridge/v1"
	"github.com/agentd/agentd/internal/auth"
	"github.com/agentd/agentd/internal/config"
	"github.com/agentd/agentd/internal/fault"
	"github.com/agentd/agentd/internal/oauthtokens"
	"github.com/agentd/agentd/internal/store"
)

// Admin implements agentd.v1.AdminService: what agentd keeps for
// tenants, managed by their administrators.
//
// Under authentication, internal/auth admits its calls by role; here a
// principal that holds only tenant_admin reaches its own tenant alone: its
// reads (List*) show that tenant's part, and a write that names another
// tenant than its own needs admin. Without authentication, every call
// passes, reaches every tenant, and the caller's own tenant is the
// default tenant ("").
type Admin struct {
	agentdv1.UnimplementedAdminServiceServer
	tokens oauthtokens.Store
	log    *slog.Logger
	o      AdminOptions
}

// AdminOptions is what the AdminService reads beside the OAuth tokens.
type AdminOptions struct {
	// Config is the configuration agentd started with: its tenants, limits
	// and registered MCP servers (bridge.servers). It is read, never
	// changed.
	Config *config.Config
	// Usage reads the tenants' usage from the store every replica shares;
	// nil when agentd keeps no records, and ListTenants is then
	// FAILED_PRECONDITION, as the other reads of records are.
	Usage store.Usage
	// Budgets keeps the budgets set through the admin API, their spending
	// and the usage ledger; nil when agentd keeps no records, and the
	// budget calls are then FAILED_PRECONDITION.
	Budgets store.Budgets
	// BudgetsChanged, when set, is told of every budget set or deleted
	// here, so that this replica applies it at once (the others read the
	// store again within a second).
	BudgetsChanged func()
	// Bridge is the admin API of the bridge agentd uses, embedded or
	// remote; nil when there is none to ask, and the calls that need it
	// are UNAVAILABLE.
	Bridge BridgeAdmin
}

// BridgeAdmin is what the AdminService asks of the bridge's admin API
// (agentd.bridge.v1.BridgeAdminService): a client of the embedded bridge
// or of the remote one. Its calls are reads but for
// InvalidateCacheEntries; all are safe for concurrent use and to retry.
// It reaches every tenant: the AdminService scopes what it shows.
type BridgeAdmin interface {
	GetPoolStats(ctx context.Context, in *bridgev1.GetPoolStatsRequest, opts ...grpc.CallOption) (*bridgev1.GetPoolStatsResponse, error)
	GetCacheStats(ctx context.Context, in *bridgev1.GetCacheStatsRequest, opts ...grpc.CallOption) (*bridgev1.GetCacheStatsResponse, error)
	ListCacheEntries(ctx context.Context, in *bridgev1.ListCacheEntriesRequest, opts ...grpc.CallOption) (*bridgev1.ListCacheEntriesResponse, error)
	InvalidateCacheEntries(ctx context.Context, in *bridgev1.InvalidateCacheEntriesRequest, opts ...grpc.CallOption) (*bridgev1.InvalidateCacheEntriesResponse, error)
}

// NewAdmin returns the AdminService over tokens and o, logging an audit
// line for each change to log (nil: slog's default). A nil o.Config is an
// empty configuration.
func NewAdmin(tokens oauthtokens.Store, log *slog.Logger, o AdminOptions) *Admin {
	if log == nil {
		log = slog.Default()
	}
	if o.Config == nil {
		o.Config = &config.Config{}
	}
	return &Admin{tokens: tokens, log: log, o: o}
}

// Register registers the service on srv.
func (a *Admin) Register(srv grpc.ServiceRegistrar) {
	agentdv1.RegisterAdminServiceServer(srv, a)
}

// readReach says which tenants a read reaches for the caller in ctx:
// every one without authentication or with observer (which admin holds);
// otherwise (tenant_admin, which internal/auth admitted) its own alone.
func readReach(ctx context.Context) (all bool, own string) {
	p, ok := auth.FromContext(ctx)
	if !ok || p.Has(auth.RoleObserver) {
		return true, p.Tenant
	}
	return false, p.Tenant
}

// writeTenant is the tenant a write is for: the request's, else the
// caller's own; another tenant's needs admin, what says what the write
// does in the error.
func writeTenant(ctx context.Context, tenant, what string) (string, error) {
	p, ok := auth.FromContext(ctx)
	if !ok {
		return tenant, nil
	}
	if tenant == "" {
		tenant = p.Tenant
	}
	if tenant != p.Tenant && !p.Has(auth.RoleAdmin) {
		return "", fault.GRPC(fault.New(fault.Permission,
			"%s of another tenant needs the role %q; %q reaches its own tenant only", what, auth.RoleAdmin, auth.RoleTenantAdmin))
	}
	return tenant, nil
}

// RevokeTokens deletes the stored OAuth tokens of the request's tenant
// (the caller's own by default), narrowed to an end user and to the
// server at a URL (by its key, oauthtokens.ServerKey), and says how many.
// The URL is neither logged nor repeated in an error.
func (a *Admin) RevokeTokens(ctx context.Context, req *agentdv1.RevokeTokensRequest) (*agentdv1.RevokeTokensResponse, error) {
	tenant, err := writeTenant(ctx, req.GetTenant(), "revoking the tokens")
	if err != nil {
		return nil, err
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
	// The server by its key: its URL's path may carry a secret.
	a.audit(ctx, "RevokeTokens", "tokens_tenant", tenant, "end_user", req.GetEndUser(), "server_key", server, "revoked", n)
	return &agentdv1.RevokeTokensResponse{Revoked: n}, nil
}

// audit logs a change in a line marked audit=true: who made it (the
// principal and its tenant), and what it changed.
func (a *Admin) audit(ctx context.Context, method string, changed ...any) {
	who, own := auth.Caller(ctx)
	a.log.Info("admin change", append([]any{"audit", true, "principal", who, "tenant", own, "method", method}, changed...)...)
}
