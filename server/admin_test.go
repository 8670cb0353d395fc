package server_test

import (
	"context"
	"log/slog"
	"net"
	"strconv"
	"strings"
	"testing"

	"github.com/agentd/agentd/internal/logtest"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"
	"google.golang.org/grpc/test/bufconn"

	agentdv1 "github.com/agentd/agentd/gen/go/agentd/v1"
	"github.com/agentd/agentd/internal/auth"
	"github.com/agentd/agentd/internal/config"
	"github.com/agentd/agentd/internal/oauthtokens"
	"github.com/agentd/agentd/server"
)

// serveAdmin serves an AdminService over tokens behind authn's
// interceptors (nil: none), logging to log, until the test ends.
func serveAdmin(t *testing.T, tokens oauthtokens.Store, authn *auth.Authenticator, log *logtest.Logs) agentdv1.AdminServiceClient {
	t.Helper()
	var opts []grpc.ServerOption
	if authn != nil {
		opts = append(opts, grpc.ChainUnaryInterceptor(authn.UnaryInterceptor()))
	}
	return serveAdminService(t, server.NewAdmin(tokens, slog.New(slog.NewTextHandler(log, nil)), server.AdminOptions{}), opts...)
}

// serveAdminService serves adm with opts over an in-memory listener
// until the test ends.
func serveAdminService(t *testing.T, adm *server.Admin, opts ...grpc.ServerOption) agentdv1.AdminServiceClient {
	t.Helper()
	srv := grpc.NewServer(opts...)
	adm.Register(srv)
	lis := bufconn.Listen(1 << 16)
	served := make(chan struct{})
	go func() {
		defer close(served)
		_ = srv.Serve(lis)
	}()
	conn, err := grpc.NewClient("passthrough:///admin", grpc.WithTransportCredentials(insecure.NewCredentials()),
		grpc.WithContextDialer(func(ctx context.Context, _ string) (net.Conn, error) { return lis.DialContext(ctx) }))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = conn.Close()
		srv.Stop()
		<-served
	})
	return agentdv1.NewAdminServiceClient(conn)
}

// calledBy makes every call p's, as internal/auth's interceptor would once it
// admitted the call (nil: no principal, as without authentication): the
// roles that admit each method are internal/auth's to test.
func calledBy(p *auth.Principal) grpc.ServerOption {
	return grpc.ChainUnaryInterceptor(func(ctx context.Context, req any, _ *grpc.UnaryServerInfo, handler grpc.UnaryHandler) (any, error) {
		if p != nil {
			ctx = auth.NewContext(ctx, *p)
		}
		return handler(ctx, req)
	})
}

const (
	urlA = "https://mcp-a.example.com/v1/cnry-url-path-secret"
	urlB = "https://mcp-b.example.com/mcp"
)

// seedTokens stores a token for each of acme's end users ann and bob at
// servers A and B, and one for globex's ann at A.
func seedTokens(t *testing.T, s oauthtokens.Store) {
	t.Helper()
	for _, k := range []oauthtokens.Key{
		{Tenant: "acme", EndUser: "ann", Server: oauthtokens.ServerKey(urlA)},
		{Tenant: "acme", EndUser: "ann", Server: oauthtokens.ServerKey(urlB)},
		{Tenant: "acme", EndUser: "bob", Server: oauthtokens.ServerKey(urlA)},
		{Tenant: "acme", EndUser: "bob", Server: oauthtokens.ServerKey(urlB)},
		{Tenant: "globex", EndUser: "ann", Server: oauthtokens.ServerKey(urlA)},
	} {
		if err := s.Put(context.Background(), k, []byte("token")); err != nil {
			t.Fatal(err)
		}
	}
}

// X-M3: RevokeTokens deletes a tenant's stored OAuth tokens, the caller's
// own tenant's by default, narrowed by end user and by server URL (the
// server's key: another spelling of the URL names the same server), and
// says how many. tenant_admin revokes its own tenant's tokens and is
// refused another's; admin revokes any tenant's; generate may not call it.
// Each revocation is an audit line naming the principal, the tenants, the
// end user and the count, never the URL.
func TestRevokeTokens(t *testing.T) {
	t.Parallel()
	authn, err := auth.New(config.Config{Auth: config.Auth{APIKeys: []config.APIKey{
		{Name: "acme-ops", SHA256: auth.HashKey("sk-acme-ops"), Tenant: "acme", Roles: []string{auth.RoleTenantAdmin}},
		{Name: "root", SHA256: auth.HashKey("sk-root"), Tenant: "ops", Roles: []string{auth.RoleAdmin}},
		{Name: "app", SHA256: auth.HashKey("sk-app"), Tenant: "acme", Roles: []string{auth.RoleGenerate}},
	}}}, slog.New(slog.DiscardHandler))
	if err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name    string
		key     string
		req     *agentdv1.RevokeTokensRequest
		want    codes.Code
		revoked int64
		left    int
	}{
		{name: "own tenant, by default", key: "sk-acme-ops", req: &agentdv1.RevokeTokensRequest{}, revoked: 4, left: 1},
		{name: "own tenant, named", key: "sk-acme-ops", req: &agentdv1.RevokeTokensRequest{Tenant: "acme"}, revoked: 4, left: 1},
		{name: "one end user", key: "sk-acme-ops", req: &agentdv1.RevokeTokensRequest{EndUser: "ann"}, revoked: 2, left: 3},
		{name: "one server", key: "sk-acme-ops", req: &agentdv1.RevokeTokensRequest{ServerUrl: urlA}, revoked: 2, left: 3},
		{name: "one server, spelled otherwise", key: "sk-acme-ops", req: &agentdv1.RevokeTokensRequest{ServerUrl: strings.Replace(urlA, "https://mcp-a.example.com", "HTTPS://MCP-A.example.com:443", 1) + "#x"}, revoked: 2, left: 3},
		{name: "one end user's of one server", key: "sk-acme-ops", req: &agentdv1.RevokeTokensRequest{EndUser: "bob", ServerUrl: urlB}, revoked: 1, left: 4},
		{name: "nothing matches", key: "sk-acme-ops", req: &agentdv1.RevokeTokensRequest{EndUser: "zed"}, revoked: 0, left: 5},
		{name: "another tenant, without admin", key: "sk-acme-ops", req: &agentdv1.RevokeTokensRequest{Tenant: "globex"}, want: codes.PermissionDenied, left: 5},
		{name: "another tenant, as admin", key: "sk-root", req: &agentdv1.RevokeTokensRequest{Tenant: "globex"}, revoked: 1, left: 4},
		{name: "admin's own tenant, which has none", key: "sk-root", req: &agentdv1.RevokeTokensRequest{}, revoked: 0, left: 5},
		{name: "the generate role", key: "sk-app", req: &agentdv1.RevokeTokensRequest{}, want: codes.PermissionDenied, left: 5},
		{name: "no credential", req: &agentdv1.RevokeTokensRequest{}, want: codes.Unauthenticated, left: 5},
		{name: "not a URL", key: "sk-acme-ops", req: &agentdv1.RevokeTokensRequest{ServerUrl: "mcp-a/cnry-url-path-secret"}, want: codes.InvalidArgument, left: 5},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			tokens := oauthtokens.NewMemory()
			seedTokens(t, tokens)
			var log logtest.Logs
			client := serveAdmin(t, tokens, authn, &log)
			ctx := t.Context()
			if tt.key != "" {
				ctx = metadata.AppendToOutgoingContext(ctx, "authorization", "Bearer "+tt.key)
			}
			res, err := client.RevokeTokens(ctx, tt.req)
			if status.Code(err) != tt.want || res.GetRevoked() != tt.revoked {
				t.Fatalf("X-M3 RevokeTokens = %d, %v; want %d, %v", res.GetRevoked(), err, tt.revoked, tt.want)
			}
			if strings.Contains(status.Convert(err).Message(), "cnry") {
				t.Errorf("the error repeats the URL: %v", err)
			}
			left, _ := tokens.Delete(t.Context(), "acme", "", "")
			more, _ := tokens.Delete(t.Context(), "globex", "", "")
			if int(left+more) != tt.left {
				t.Errorf("%d tokens left; want %d", left+more, tt.left)
			}
			lines := log.String()
			if strings.Contains(lines, "cnry") || strings.Contains(lines, "example.com") {
				t.Errorf("the log holds the server's URL:\n%s", lines)
			}
			if tt.want == codes.OK {
				who := map[string]string{"sk-acme-ops": "principal=acme-ops tenant=acme", "sk-root": "principal=root tenant=ops"}[tt.key]
				for _, want := range []string{`msg="admin change" audit=true ` + who + " method=RevokeTokens", "end_user=" + tt.req.GetEndUser(), "revoked=" + strconv.FormatInt(tt.revoked, 10)} {
					if !strings.Contains(lines, want) {
						t.Errorf("the audit line lacks %q:\n%s", want, lines)
					}
				}
			} else if lines != "" {
				t.Errorf("a refused revocation logged a change:\n%s", lines)
			}
		})
	}
}

// X-M3: without authentication, RevokeTokens reaches any tenant, the
// default tenant ("") by default.
func TestRevokeTokensUnauthenticated(t *testing.T) {
	t.Parallel()
	tokens := oauthtokens.NewMemory()
	seedTokens(t, tokens)
	if err := tokens.Put(t.Context(), oauthtokens.Key{EndUser: "ann", Server: oauthtokens.ServerKey(urlA)}, []byte("token")); err != nil {
		t.Fatal(err)
	}
	var log logtest.Logs
	client := serveAdmin(t, tokens, nil, &log)
	for _, tc := range []struct {
		tenant string
		want   int64
	}{{"", 1}, {"globex", 1}, {"acme", 4}} {
		res, err := client.RevokeTokens(t.Context(), &agentdv1.RevokeTokensRequest{Tenant: tc.tenant})
		if err != nil || res.GetRevoked() != tc.want {
			t.Errorf("X-M3 RevokeTokens(tenant %q) = %d, %v; want %d", tc.tenant, res.GetRevoked(), err, tc.want)
		}
	}
	if !strings.Contains(log.String(), "principal="+auth.Anonymous) {
		t.Errorf("the audit line does not name the anonymous caller:\n%s", log.String())
	}
}
