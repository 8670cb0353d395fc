package app_test

import (
	"context"
	"crypto/tls"
	"errors"
	"io"
	"log/slog"
	"net"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/agentd/agentd/internal/logtest"

	"github.com/google/go-cmp/cmp"
	"google.golang.org/genproto/googleapis/rpc/errdetails"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/testing/protocmp"
	"google.golang.org/protobuf/types/known/structpb"

	bridgev1 "github.com/agentd/agentd/gen/go/agentd/bridge/v1"
	agentdv1 "github.com/agentd/agentd/gen/go/agentd/v1"
	"github.com/agentd/agentd/internal/app"
	"github.com/agentd/agentd/internal/auth"
	"github.com/agentd/agentd/internal/config"
	"github.com/agentd/agentd/internal/mcptest"
	"github.com/agentd/agentd/internal/tlsconf/tlstest"
)

// The API keys of TestIdentity: a caller of each tenant (generate), an
// observer, and a tenant_admin of each tenant.
const (
	keyAcme      = "sk-acme-app"
	keyBravo     = "sk-bravo-app"
	keyWatch     = "sk-watch"
	keyAcmeOps   = "sk-acme-ops"
	keyBravoOps  = "sk-bravo-ops"
	unknownGenID = "gen_00000000000000000000000000000000"
)

// apiKey is an API key as per-RPC credentials: every call on a connection
// dialled with it sends it as the bearer.
type apiKey string

func (k apiKey) GetRequestMetadata(context.Context, ...string) (map[string]string, error) {
	return map[string]string{"authorization": "Bearer " + string(k)}, nil
}

func (apiKey) RequireTransportSecurity() bool { return true }

// toolsAgent is a scripted agent that calls the registered server
// "tools" (mcptest.Tools) once, tool with args, and then says what the
// tool answered; with gated, the call needs approval.
func toolsAgent(t *testing.T, tool string, args map[string]any, gated bool) *agentdv1.Agent {
	t.Helper()
	opts, err := structpb.NewStruct(map[string]any{"script": map[string]any{"turns": []any{
		map[string]any{"tool_calls": []any{map[string]any{"name": tool, "arguments": args}}},
		map[string]any{"text": "{{tool_outputs}}"},
	}}})
	if err != nil {
		t.Fatal(err)
	}
	a := &agentdv1.Agent{
		Provider:        "script",
		Mcps:            []*agentdv1.MCPServer{{Transport: &agentdv1.MCPServer_Ref{Ref: "tools"}, AllowedTools: []string{tool}}},
		ProviderOptions: opts,
	}
	if gated {
		a.RequiresApproval = []string{tool}
	}
	return a
}

// startGeneration opens a Generate stream on client and starts agent on it.
func startGeneration(ctx context.Context, client agentdv1.AgentServiceClient, agent *agentdv1.Agent) (agentdv1.AgentService_GenerateClient, error) {
	stream, err := client.Generate(ctx)
	if err != nil {
		return nil, err
	}
	err = stream.Send(&agentdv1.GenerateRequest{Kind: &agentdv1.GenerateRequest_Start{Start: &agentdv1.StartGeneration{
		Agent: proto.Clone(agent).(*agentdv1.Agent), Messages: []*agentdv1.Message{{Role: agentdv1.Role_ROLE_USER, Parts: []*agentdv1.Part{textPart("go")}}},
	}}})
	if err != nil && !errors.Is(err, io.EOF) { // io.EOF: Recv has the status
		return nil, err
	}
	return stream, nil
}

// finish reads stream to its end and returns the completed generation's
// final text, or the status the stream ended with.
func finish(stream agentdv1.AgentService_GenerateClient) (string, error) {
	var final string
	for {
		ev, err := stream.Recv()
		if errors.Is(err, io.EOF) {
			return final, nil
		}
		if err != nil {
			return final, err
		}
		if c := ev.GetCompleted(); c != nil {
			final = c.GetMessage().GetParts()[0].GetText()
		}
	}
}

// runGeneration starts agent on client, half-closes and returns the final
// text.
func runGeneration(ctx context.Context, client agentdv1.AgentServiceClient, agent *agentdv1.Agent) (string, error) {
	stream, err := startGeneration(ctx, client, agent)
	if err != nil {
		return "", err
	}
	if err := stream.CloseSend(); err != nil {
		return "", err
	}
	return finish(stream)
}

// X-I4, X-I5, X-I6, X-I7, end to end, the proof of tenants and
// identities: one agentd over real TLS on a loopback TCP port, two tenants
// with API keys, and, in order on it:
//
//  1. bravo cannot resume, see or clear anything of acme's: its resume of
//     acme's paused generation is NotFound exactly as for an unknown id;
//     its tenant_admin's cache stats count none of acme's entries and its
//     ClearCache leaves them; acme resumes its own generation;
//  2. acme's processes of a registered `shared: true` server never serve
//     bravo: the tool "pid" answers each tenant's generations from a
//     process of its own (acme's twice from the same one);
//  3. bravo's generations_per_minute: 1 refuses its second start with
//     RESOURCE_EXHAUSTED, RetryInfo and QuotaFailure;
//  4. an observer reads the stats but cannot configure the cache;
//  5. replacing the certificate mid-run: a new connection gets the new
//     one, while a stream open across the rotation, waiting on an
//     approval, keeps its connection and completes once answered.
//
// No API key reaches the log, and every MCP server process is gone once
// agentd stops.
func TestIdentity(t *testing.T) {
	t.Parallel()
	ca := tlstest.NewCA(t)
	first, second := ca.Leaf(t, "agentd-first"), ca.Leaf(t, "agentd-second")
	mod := time.Now().Add(-time.Hour)
	settings := tlsFiles(t, first, nil, mod)
	pidFile := filepath.Join(t.TempDir(), "pids")
	// Registered before agentd starts, so it runs after agentd stopped.
	t.Cleanup(func() {
		for _, pid := range mcptest.Pids(t, pidFile) {
			mcptest.WaitGone(t, pid)
		}
	})

	exe, env := mcptest.Command(t, mcptest.Tools)
	env[mcptest.PidFileEnv] = pidFile
	zero := 0
	cfg := testConfig(t)
	cfg.Bridge.Servers = map[string]config.Server{"tools": {Command: exe, Env: env, Shared: config.SharedPerTenant, Warm: &zero}}
	cfg.TLS = settings
	cfg.Auth.APIKeys = []config.APIKey{
		{Name: "acme-app", SHA256: auth.HashKey(keyAcme), Tenant: "acme", Roles: []string{auth.RoleGenerate}},
		{Name: "bravo-app", SHA256: auth.HashKey(keyBravo), Tenant: "bravo", Roles: []string{auth.RoleGenerate}},
		{Name: "watch", SHA256: auth.HashKey(keyWatch), Tenant: "acme", Roles: []string{auth.RoleObserver}},
		{Name: "acme-ops", SHA256: auth.HashKey(keyAcmeOps), Tenant: "acme", Roles: []string{auth.RoleTenantAdmin}},
		{Name: "bravo-ops", SHA256: auth.HashKey(keyBravoOps), Tenant: "bravo", Roles: []string{auth.RoleTenantAdmin}},
	}
	cfg.Tenants = map[string]config.Tenant{
		"acme":  {},
		"bravo": {Limits: &config.Limits{GenerationsPerMinute: 1}},
	}
	if err := cfg.Validate(); err != nil {
		t.Fatal(err)
	}
	var logs logtest.Logs
	o := app.Options{Config: cfg, Logger: slog.New(slog.NewTextHandler(&logs, nil))}
	a, err := app.NewAgent(o)
	if err != nil {
		t.Fatal(err)
	}
	addr := serveTCP(t, func(ctx context.Context, lis net.Listener) error { return a.Serve(ctx, lis, o) })

	trusting := &tls.Config{RootCAs: ca.Pool()}
	dialAs := func(key string) *grpc.ClientConn {
		return dial(t, addr, grpc.WithTransportCredentials(credentials.NewTLS(trusting)), grpc.WithPerRPCCredentials(apiKey(key)))
	}
	acmeConn := dialAs(keyAcme)
	acme, bravo := agentdv1.NewAgentServiceClient(acmeConn), agentdv1.NewAgentServiceClient(dialAs(keyBravo))
	admin := bridgev1.NewBridgeAdminServiceClient(dialTLS(t, addr, trusting)) // with bearer(ctx, key) per call
	cacheSize := func(t *testing.T, key string) int64 {
		t.Helper()
		res, err := admin.GetCacheStats(bearer(t.Context(), key), &bridgev1.GetCacheStatsRequest{})
		if err != nil {
			t.Fatalf("GetCacheStats as %s: %v", key, err)
		}
		return res.GetSize()
	}
	gated := toolsAgent(t, "echo", map[string]any{"text": "acme's secret plan"}, true)
	pidAgent := toolsAgent(t, "pid", map[string]any{}, false)

	t.Run("X-I6 bravo cannot resume, see or clear anything of acme's", func(t *testing.T) {
		paused := startAndPause(t, acme, gated)
		resumeErr := func(p *agentdv1.GenerationPaused) *status.Status {
			_, err := finish(sendResume(t, bravo, p, gated, true))
			return status.Convert(err)
		}
		other := resumeErr(paused)
		unknown := resumeErr(&agentdv1.GenerationPaused{GenerationId: unknownGenID, ApprovalRequests: paused.GetApprovalRequests()})
		if other.Code() != codes.NotFound || unknown.Code() != codes.NotFound ||
			strings.ReplaceAll(other.Message(), paused.GetGenerationId(), "ID") != strings.ReplaceAll(unknown.Message(), unknownGenID, "ID") {
			t.Errorf("bravo's resume of acme's generation: %v %q; of an unknown id: %v %q; want both NotFound, alike",
				other.Code(), other.Message(), unknown.Code(), unknown.Message())
		}

		acmeEntries := cacheSize(t, keyAcmeOps)
		if acmeEntries == 0 {
			t.Fatal("acme's generation left no entry in the schema cache")
		}
		if n := cacheSize(t, keyBravoOps); n != 0 {
			t.Errorf("X-I5 bravo's tenant_admin sees %d cache entries; want none (acme's are not its own)", n)
		}
		if _, err := admin.ClearCache(bearer(t.Context(), keyBravoOps), &bridgev1.ClearCacheRequest{}); err != nil {
			t.Fatalf("bravo's tenant_admin's ClearCache: %v", err)
		}
		if n := cacheSize(t, keyAcmeOps); n != acmeEntries {
			t.Errorf("X-I5 after bravo's ClearCache acme has %d cache entries; want its %d", n, acmeEntries)
		}
		if n := cacheSize(t, keyWatch); n != acmeEntries {
			t.Errorf("the observer sees %d cache entries; want acme's %d", n, acmeEntries)
		}

		if final := resume(t, acme, paused, gated, true); final != "acme's secret plan" {
			t.Errorf("acme's resume of its own generation ended with %q", final)
		}
	})

	t.Run("X-I6 acme's processes of a shared server never serve bravo", func(t *testing.T) {
		var pids []string
		for _, caller := range []struct {
			name   string
			client agentdv1.AgentServiceClient
		}{{"acme", acme}, {"bravo", bravo}, {"acme again", acme}} {
			pid, err := runGeneration(t.Context(), caller.client, pidAgent)
			if err != nil {
				t.Fatalf("%s's generation: %v", caller.name, err)
			}
			if _, err := strconv.Atoi(pid); err != nil {
				t.Fatalf("%s's tool pid answered %q", caller.name, pid)
			}
			pids = append(pids, pid)
		}
		acmePid, bravoPid := pids[0], pids[1]
		if acmePid == bravoPid {
			t.Errorf("acme's and bravo's generations were served by the same process %s", acmePid)
		}
		if pids[2] != acmePid {
			t.Errorf("acme's generations were served by %s and %s; want one process per tenant (shared: true)", acmePid, pids[2])
		}
		var started []string
		for _, pid := range mcptest.Pids(t, pidFile) {
			started = append(started, strconv.Itoa(pid))
		}
		slices.Sort(started)
		want := []string{acmePid, bravoPid}
		slices.Sort(want)
		if diff := cmp.Diff(want, started); diff != "" {
			t.Errorf("the server's processes (-acme's and bravo's +started):\n%s", diff)
		}

		res, err := admin.GetPoolStats(bearer(t.Context(), keyWatch), &bridgev1.GetPoolStatsRequest{})
		if err != nil {
			t.Fatalf("the observer's GetPoolStats: %v", err)
		}
		type pool struct {
			Server, Tenant string
			Shared         bool
			Spawned        int64
		}
		var pools []pool
		for _, p := range res.GetPools() {
			pools = append(pools, pool{p.GetServerName(), p.GetTenant(), p.GetShared(), p.GetSpawned()})
		}
		slices.SortFunc(pools, func(a, b pool) int { return strings.Compare(a.Tenant, b.Tenant) })
		if diff := cmp.Diff([]pool{{"tools", "acme", true, 1}, {"tools", "bravo", true, 1}}, pools); diff != "" {
			t.Errorf("pool stats (-want +got):\n%s", diff)
		}
	})

	t.Run("X-I7 over bravo's generations_per_minute: RESOURCE_EXHAUSTED with RetryInfo", func(t *testing.T) {
		// bravo's one generation of the minute ran above.
		_, err := runGeneration(t.Context(), bravo, pidAgent)
		st := status.Convert(err)
		if st.Code() != codes.ResourceExhausted {
			t.Fatalf("bravo's second generation in a minute of 1: %v; want ResourceExhausted", err)
		}
		var retry *errdetails.RetryInfo
		var quota []*errdetails.QuotaFailure
		for _, d := range st.Details() {
			switch d := d.(type) {
			case *errdetails.RetryInfo:
				retry = d
			case *errdetails.QuotaFailure:
				quota = append(quota, d)
			}
		}
		if d := retry.GetRetryDelay().AsDuration(); retry == nil || d <= 0 || d > time.Minute {
			t.Errorf("RetryInfo %v; want a delay within the minute", retry)
		}
		wantQuota := []*errdetails.QuotaFailure{{Violations: []*errdetails.QuotaFailure_Violation{{
			Subject: "tenant:bravo", Description: "tenants.bravo.limits.generations_per_minute",
		}}}}
		if diff := cmp.Diff(wantQuota, quota, protocmp.Transform()); diff != "" {
			t.Errorf("QuotaFailure (-want +got):\n%s", diff)
		}
	})

	t.Run("X-I5 an observer reads the stats but cannot configure the cache", func(t *testing.T) {
		off := false
		_, err := admin.ConfigureCache(bearer(t.Context(), keyWatch), &bridgev1.ConfigureCacheRequest{Enabled: &off})
		if st := status.Convert(err); st.Code() != codes.PermissionDenied || !strings.Contains(st.Message(), `"admin"`) {
			t.Errorf("the observer's ConfigureCache: %v; want PermissionDenied naming \"admin\"", err)
		}
		res, err := admin.GetCacheStats(bearer(t.Context(), keyWatch), &bridgev1.GetCacheStatsRequest{})
		if err != nil {
			t.Fatalf("the observer's GetCacheStats: %v", err)
		}
		if !res.GetSettings().GetEnabled() || res.GetSize() == 0 {
			t.Errorf("the cache after the observer's refused ConfigureCache: %v; want it enabled, its entries kept", res)
		}
	})

	t.Run("X-I4 certificate rotation keeps open streams and serves new connections the new certificate", func(t *testing.T) {
		wantSerial := func(name string, ctx context.Context, conn *grpc.ClientConn, want tlstest.Pair) {
			t.Helper()
			got, err := previewTLS(ctx, conn)
			if err != nil {
				t.Fatalf("%s: Preview: %v", name, err)
			}
			if got.Cmp(want.Serial) != 0 {
				t.Errorf("%s: served certificate %x, want %x", name, got, want.Serial)
			}
		}
		wantSerial("the connection before rotation", t.Context(), acmeConn, first)

		open, err := startGeneration(t.Context(), acme, gated)
		if err != nil {
			t.Fatal(err)
		}
		var req *agentdv1.ApprovalRequest
		for req == nil {
			ev, err := open.Recv()
			if err != nil {
				t.Fatalf("before the approval request: %v", err)
			}
			req = ev.GetApprovalRequest()
		}

		second.WriteAs(t, settings.CertFile, settings.KeyFile, mod.Add(time.Minute))
		wantSerial("a new connection after rotation", bearer(t.Context(), keyAcme), dialTLS(t, addr, trusting), second)
		wantSerial("the open stream's connection after rotation", t.Context(), acmeConn, first)

		if err := open.Send(&agentdv1.GenerateRequest{Kind: &agentdv1.GenerateRequest_ApprovalDecision{ApprovalDecision: &agentdv1.ApprovalDecision{
			RequestId: req.GetId(), Approved: true, Digest: req.GetDigest(),
		}}}); err != nil {
			t.Fatalf("answering the approval on the open stream: %v", err)
		}
		if err := open.CloseSend(); err != nil {
			t.Fatal(err)
		}
		if final, err := finish(open); err != nil || final != "acme's secret plan" {
			t.Errorf("the stream open across the rotation ended with %q, %v; want it completed", final, err)
		}
		if !strings.Contains(logs.String(), "TLS certificate reloaded") {
			t.Errorf("the log does not record the reload:\n%s", logs.String())
		}
	})

	for _, key := range []string{keyAcme, keyBravo, keyWatch, keyAcmeOps, keyBravoOps} {
		if strings.Contains(logs.String(), key) {
			t.Errorf("the log quotes the API key %s", key)
		}
	}
}
