package server_test

import (
	"context"
	"errors"
	"io"
	"iter"
	"maps"
	"net"
	"slices"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/google/go-cmp/cmp"
	"google.golang.org/genproto/googleapis/rpc/errdetails"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"
	"google.golang.org/grpc/test/bufconn"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/testing/protocmp"
	"google.golang.org/protobuf/types/known/durationpb"

	agentdv1 "github.com/agentd/agentd/gen/go/agentd/v1"
	"github.com/agentd/agentd/internal/auth"
	"github.com/agentd/agentd/internal/config"
	"github.com/agentd/agentd/internal/fault"
	"github.com/agentd/agentd/internal/policy"
	"github.com/agentd/agentd/internal/quota"
	"github.com/agentd/agentd/internal/store"
	"github.com/agentd/agentd/providers"
	"github.com/agentd/agentd/server"
)

// tenantHeader carries a test caller's tenant: the interceptors of
// tenantClients stand in for authentication with it.
const tenantHeader = "x-test-tenant"

// withTenant is ctx with the principal of the tenant tenantHeader names,
// if any: "" is the caller without authentication.
func withTenant(ctx context.Context) context.Context {
	md, _ := metadata.FromIncomingContext(ctx)
	if v := md.Get(tenantHeader); len(v) == 1 {
		return auth.NewContext(ctx, auth.Principal{Name: v[0] + "-app", Tenant: v[0], Roles: []string{auth.RoleGenerate}})
	}
	return ctx
}

type tenantStream struct {
	grpc.ServerStream
	ctx context.Context
}

func (s tenantStream) Context() context.Context { return s.ctx }

// tenantClients serves an AgentService with opts (the providers ps unless
// opts sets some, the default configuration unless it sets one) and
// returns, for a tenant, a client that acts for it.
func tenantClients(t *testing.T, opts server.Options, ps ...providers.Provider) func(tenant string) agentdv1.AgentServiceClient {
	t.Helper()
	if opts.Providers == nil {
		opts.Providers = registryOf(t, ps...)
	}
	if opts.Config == (config.Generation{}) {
		opts.Config = config.Default().Generation
	}
	svc := server.New(opts)
	lis := bufconn.Listen(1 << 20)
	srv := grpc.NewServer(
		grpc.ChainUnaryInterceptor(func(ctx context.Context, req any, _ *grpc.UnaryServerInfo, handler grpc.UnaryHandler) (any, error) {
			return handler(withTenant(ctx), req)
		}),
		grpc.ChainStreamInterceptor(func(srv any, ss grpc.ServerStream, _ *grpc.StreamServerInfo, handler grpc.StreamHandler) error {
			return handler(srv, tenantStream{ss, withTenant(ss.Context())})
		}))
	svc.Register(srv)
	served := make(chan struct{})
	go func() {
		defer close(served)
		_ = srv.Serve(lis)
	}()
	t.Cleanup(func() {
		srv.Stop()
		<-served
	})
	var mu sync.Mutex
	clients := make(map[string]agentdv1.AgentServiceClient)
	return func(tenant string) agentdv1.AgentServiceClient {
		mu.Lock()
		defer mu.Unlock()
		if c, ok := clients[tenant]; ok {
			return c
		}
		as := func(ctx context.Context) context.Context {
			if tenant == "" {
				return ctx
			}
			return metadata.AppendToOutgoingContext(ctx, tenantHeader, tenant)
		}
		conn, err := grpc.NewClient("passthrough:///bufconn",
			grpc.WithContextDialer(func(ctx context.Context, _ string) (net.Conn, error) { return lis.DialContext(ctx) }),
			grpc.WithTransportCredentials(insecure.NewCredentials()),
			grpc.WithChainUnaryInterceptor(func(ctx context.Context, method string, req, reply any, cc *grpc.ClientConn, invoker grpc.UnaryInvoker, opts ...grpc.CallOption) error {
				return invoker(as(ctx), method, req, reply, cc, opts...)
			}),
			grpc.WithChainStreamInterceptor(func(ctx context.Context, desc *grpc.StreamDesc, cc *grpc.ClientConn, method string, streamer grpc.Streamer, opts ...grpc.CallOption) (grpc.ClientStream, error) {
				return streamer(as(ctx), desc, cc, method, opts...)
			}))
		if err != nil {
			t.Fatalf("grpc.NewClient: %v", err)
		}
		t.Cleanup(func() { _ = conn.Close() })
		clients[tenant] = agentdv1.NewAgentServiceClient(conn)
		return clients[tenant]
	}
}

func registryOf(t *testing.T, ps ...providers.Provider) *providers.Registry {
	t.Helper()
	reg, err := providers.NewRegistry(ps...)
	if err != nil {
		t.Fatalf("providers.NewRegistry: %v", err)
	}
	return reg
}

// tenantsOf is an Options.Tenants over a fixed map: a tenant not in it is
// not served.
func tenantsOf(m map[string]*server.Tenant) func(string) (*server.Tenant, bool) {
	return func(name string) (*server.Tenant, bool) {
		t, ok := m[name]
		return t, ok
	}
}

func preview(client agentdv1.AgentServiceClient, ctx context.Context, agent *agentdv1.Agent) *status.Status {
	_, err := client.Preview(ctx, &agentdv1.PreviewRequest{Agent: agent, Messages: userSays("hi")})
	return status.Convert(err)
}

// X-I7: a generation uses its tenant's settings, never another's: its
// provider adapters (configured with its keys), its rules for commands,
// and the registered servers it may ref: (a ref beyond them is
// PermissionDenied naming the server and the setting). The caller without
// authentication gets the global settings; a tenant the configuration
// does not serve is PermissionDenied, whatever the authenticator let
// through. X-I6: the bridge session is opened for the caller's tenant.
func TestTenantSettings(t *testing.T) {
	t.Parallel()
	acmeP, globexP, globalP := plainProvider(), plainProvider(), plainProvider()
	bridge := &fakeBridge{onList: offering(serverTools("files", "read"))}
	clients := tenantClients(t, server.Options{
		Bridge:    bridge,
		Providers: registryOf(t, globalP),
		Tenants: tenantsOf(map[string]*server.Tenant{
			"": {},
			"acme": {
				Providers: registryOf(t, acmeP),
				Rules:     &policy.Rules{AllowedCommands: []string{"/usr/bin/acme-mcp"}},
				Servers:   []string{"files"}, ServersSetting: "tenants.acme.servers",
			},
			"globex": {Providers: registryOf(t, globexP), Rules: &policy.Rules{}},
		}),
	})
	agent := &agentdv1.Agent{Provider: "plain"}
	served := map[*fakeProvider]int{}
	for _, tc := range []struct {
		tenant string
		by     *fakeProvider
	}{{"acme", acmeP}, {"globex", globexP}, {"", globalP}, {"acme", acmeP}} {
		_, st := generate(t, clients(tc.tenant), &agentdv1.StartGeneration{Agent: agent, Messages: userSays("hi")}, nil)
		wantCode(t, st, codes.OK)
		served[tc.by]++
		got := map[*fakeProvider]int{}
		for _, p := range []*fakeProvider{acmeP, globexP, globalP} {
			if n := len(p.calls()); n > 0 {
				got[p] = n
			}
		}
		if !maps.Equal(got, served) {
			t.Errorf("X-I7 after a generation of the tenant %q, the providers of acme, globex and the global settings served %d, %d, %d; want %d, %d, %d",
				tc.tenant, got[acmeP], got[globexP], got[globalP], served[acmeP], served[globexP], served[globalP])
		}
	}

	ctx := t.Context()
	acme, globex := clients("acme"), clients("globex")
	for _, tc := range []struct {
		name   string
		st     *status.Status
		code   codes.Code
		field  string
		saying []string
	}{
		{"X-I7 a ref among the tenant's servers", preview(acme, ctx, &agentdv1.Agent{Provider: "plain", Mcps: []*agentdv1.MCPServer{refServer("", "files")}}), codes.OK, "", nil},
		{"X-I7 a ref beyond them", preview(acme, ctx, &agentdv1.Agent{Provider: "plain", Mcps: []*agentdv1.MCPServer{refServer("", "payroll")}}),
			codes.PermissionDenied, "agent.mcps[0].ref", []string{`"payroll"`, "tenants.acme.servers"}},
		{"X-I7 another tenant may use every registered server", preview(globex, ctx, &agentdv1.Agent{Provider: "plain", Mcps: []*agentdv1.MCPServer{refServer("", "payroll")}}), codes.OK, "", nil},
		{"X-I7 a command the tenant's rules allow", preview(acme, ctx, &agentdv1.Agent{Provider: "plain", Mcps: []*agentdv1.MCPServer{commandServer("", "/usr/bin/acme-mcp")}}), codes.OK, "", nil},
		{"X-I7 the same command under another tenant's rules", preview(globex, ctx, &agentdv1.Agent{Provider: "plain", Mcps: []*agentdv1.MCPServer{commandServer("", "/usr/bin/acme-mcp")}}),
			codes.PermissionDenied, "agent.mcps[0].command", []string{"acme-mcp"}},
		{"X-I7 a tenant the configuration does not serve: Preview", preview(clients("initech"), ctx, agent), codes.PermissionDenied, "", []string{`"initech"`, "tenants.default"}},
	} {
		if tc.st.Code() != tc.code {
			t.Errorf("%s: %v %q; want %v", tc.name, tc.st.Code(), tc.st.Message(), tc.code)
			continue
		}
		if tc.field != "" {
			wantFacts(t, tc.name, description(t, tc.st, tc.field), tc.saying...)
		} else {
			wantFacts(t, tc.name, tc.st.Message(), tc.saying...)
		}
	}
	_, st := generate(t, clients("initech"), &agentdv1.StartGeneration{Agent: agent, Messages: userSays("hi")}, nil)
	if st.Code() != codes.PermissionDenied {
		t.Errorf("X-I7 a tenant the configuration does not serve: Generate %v %q; want PermissionDenied", st.Code(), st.Message())
	}

	_, st = generate(t, acme, &agentdv1.StartGeneration{Agent: &agentdv1.Agent{Provider: "plain", Mcps: []*agentdv1.MCPServer{refServer("", "files")}}, Messages: userSays("hi")}, nil)
	wantCode(t, st, codes.OK)
	if opens := bridge.openRequests(); len(opens) != 1 || opens[0].GetTenant() != "acme" {
		t.Errorf("X-I6 bridge sessions %v; want one, for the tenant acme", opens)
	}
}

// X-I6: a paused generation belongs to its tenant: another tenant's
// resume of it is NotFound, exactly as for an id that never existed, and
// its own tenant's resume continues it. Once it has completed, its own
// tenant's resume says so (FailedPrecondition); another's is still
// NotFound, alike.
func TestPausedGenerationsAreTenants(t *testing.T) {
	t.Parallel()
	st := newStore(t, 0)
	bridge := &fakeBridge{onList: offering(serverTools("files", "read", "delete"))}
	clients := tenantClients(t, server.Options{Bridge: bridge, Checkpoints: st, Generations: st.Generations(), Replica: "replica-a",
		Tenants: tenantsOf(map[string]*server.Tenant{"acme": {}, "globex": {}})}, recordingScript())
	events, _ := generate(t, clients("acme"), &agentdv1.StartGeneration{Agent: filesAgent(t), Messages: userSays("tidy")}, nil)
	paused := pausedEvent(t, events)
	decision := &agentdv1.ApprovalDecision{RequestId: paused.GetApprovalRequests()[0].GetId(), Approved: true}
	_, other := run(t, clients("globex"), resumeRequest(paused.GetGenerationId(), filesAgent(t), decision), nil)
	_, unknown := run(t, clients("globex"), resumeRequest("gen_00000000000000000000000000000000", filesAgent(t), decision), nil)
	if other.Code() != codes.NotFound || unknown.Code() != codes.NotFound ||
		strings.ReplaceAll(other.Message(), paused.GetGenerationId(), "ID") != strings.ReplaceAll(unknown.Message(), "gen_00000000000000000000000000000000", "ID") {
		t.Errorf("X-I6 another tenant's resume: %v %q; an unknown id's: %v %q; want both NotFound, alike", other.Code(), other.Message(), unknown.Code(), unknown.Message())
	}
	events, resumed := run(t, clients("acme"), resumeRequest(paused.GetGenerationId(), filesAgent(t), decision), nil)
	wantCode(t, resumed, codes.OK)
	if kinds(events)[len(events)-1] != "completed" {
		t.Errorf("X-I6 its own tenant's resume: %v; want it completed", kinds(events))
	}
	_, again := run(t, clients("acme"), resumeRequest(paused.GetGenerationId(), filesAgent(t), decision), nil)
	if again.Code() != codes.FailedPrecondition || !strings.Contains(again.Message(), "has ended, completed") {
		t.Errorf("X-I6 its own tenant's resume of it completed: %v %q; want FailedPrecondition saying it completed", again.Code(), again.Message())
	}
	_, other = run(t, clients("globex"), resumeRequest(paused.GetGenerationId(), filesAgent(t), decision), nil)
	if other.Code() != codes.NotFound ||
		strings.ReplaceAll(other.Message(), paused.GetGenerationId(), "ID") != strings.ReplaceAll(unknown.Message(), "gen_00000000000000000000000000000000", "ID") {
		t.Errorf("X-I6 another tenant's resume of it completed: %v %q; want NotFound, as for an unknown id", other.Code(), other.Message())
	}
}

// quotaDetails are the RetryInfo and QuotaFailure details of a status.
func quotaDetails(st *status.Status) []proto.Message {
	var out []proto.Message
	for _, d := range st.Details() {
		switch d := d.(type) {
		case *errdetails.RetryInfo, *errdetails.QuotaFailure:
			out = append(out, d.(proto.Message))
		}
	}
	return out
}

// wantExhausted fails unless st is ResourceExhausted, with a RetryInfo of
// retry and a QuotaFailure naming tenant and the setting.
func wantExhausted(t *testing.T, st *status.Status, retry time.Duration, tenant, setting string) {
	t.Helper()
	wantCode(t, st, codes.ResourceExhausted)
	want := []proto.Message{
		&errdetails.RetryInfo{RetryDelay: durationpb.New(retry)},
		&errdetails.QuotaFailure{Violations: []*errdetails.QuotaFailure_Violation{{Subject: "tenant:" + tenant, Description: setting}}},
	}
	if diff := cmp.Diff(want, quotaDetails(st), protocmp.Transform()); diff != "" {
		t.Errorf("details of %q (-want +got):\n%s", st.Message(), diff)
	}
	wantFacts(t, "message", st.Message(), setting)
}

func limited(edit func(*quota.Limits)) *server.Tenant {
	var l quota.Limits
	edit(&l)
	return &server.Tenant{Limits: l}
}

// X-I7: generations_per_minute is a token bucket per tenant: beyond it a
// start is ResourceExhausted with RetryInfo (when the next token comes)
// and a QuotaFailure naming the tenant and the setting; another tenant
// is not held by it; a request refused for what it says takes no token.
func TestRateLimit(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		perMinute := func(l *quota.Limits) {
			l.PerMinute = quota.Limit{N: 2, Setting: "tenants.acme.limits.generations_per_minute"}
		}
		clients := tenantClients(t, server.Options{Tenants: tenantsOf(map[string]*server.Tenant{
			"acme": limited(perMinute), "globex": limited(perMinute),
		})}, plainProvider())
		start := &agentdv1.StartGeneration{Agent: &agentdv1.Agent{Provider: "plain"}, Messages: userSays("hi")}
		acme := clients("acme")
		_, st := generate(t, acme, &agentdv1.StartGeneration{Agent: &agentdv1.Agent{Provider: "plain"}}, nil)
		wantCode(t, st, codes.InvalidArgument)
		for range 2 {
			_, st := generate(t, acme, start, nil)
			wantCode(t, st, codes.OK)
		}
		events, st := generate(t, acme, start, nil)
		wantExhausted(t, st, 30*time.Second, "acme", "tenants.acme.limits.generations_per_minute")
		if len(events) != 0 {
			t.Errorf("a refused start sent %v", kinds(events))
		}
		_, st = generate(t, clients("globex"), start, nil)
		wantCode(t, st, codes.OK)
		time.Sleep(20 * time.Second)
		_, st = generate(t, acme, start, nil)
		wantExhausted(t, st, 10*time.Second, "acme", "tenants.acme.limits.generations_per_minute")
		time.Sleep(10 * time.Second)
		_, st = generate(t, acme, start, nil)
		wantCode(t, st, codes.OK)
	})
}

// heldProvider's turns wait for a word on proceed: nil answers "ok", an
// error fails the turn. A cancelled generation stops waiting.
func heldProvider(proceed <-chan error) *fakeProvider {
	return &fakeProvider{name: "held", caps: providers.Capabilities{ModelOptional: true},
		stream: func(ctx context.Context, _ *providers.Request) iter.Seq2[providers.Event, error] {
			return func(yield func(providers.Event, error) bool) {
				select {
				case err := <-proceed:
					if err != nil {
						yield(nil, err)
						return
					}
					for ev := range turnOf(&providers.TextDelta{Text: "ok"}) {
						if !yield(ev, nil) {
							return
						}
					}
				case <-ctx.Done():
					yield(nil, context.Cause(ctx))
				}
			}
		}}
}

type genStream = grpc.BidiStreamingClient[agentdv1.GenerateRequest, agentdv1.GenerateResponse]

// openUntil opens a generation stream with first and reads its events
// until one that until accepts.
func openUntil(t *testing.T, client agentdv1.AgentServiceClient, first *agentdv1.GenerateRequest, until func(*agentdv1.GenerateResponse) bool) genStream {
	t.Helper()
	s, err := client.Generate(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Send(first); err != nil {
		t.Fatal(err)
	}
	for {
		ev, err := s.Recv()
		if err != nil {
			t.Fatalf("the stream ended before the awaited event: %v", err)
		}
		if until(ev) {
			return s
		}
	}
}

// finish reads a stream to its end: the last event it reads ("" for
// none) and the status.
func finish(s genStream) (last string, _ *status.Status) {
	for {
		ev, err := s.Recv()
		if errors.Is(err, io.EOF) {
			return last, status.New(codes.OK, "")
		}
		if err != nil {
			return last, status.Convert(err)
		}
		last = kinds([]*agentdv1.GenerateResponse{ev})[0]
	}
}

func startRequest(start *agentdv1.StartGeneration) *agentdv1.GenerateRequest {
	return &agentdv1.GenerateRequest{Kind: &agentdv1.GenerateRequest_Start{Start: start}}
}

// X-I7: max_concurrent_generations counts running generations: beyond it
// a start is ResourceExhausted (RetryInfo 1s, QuotaFailure naming the
// setting), and the slot comes back however the generation ends:
// completed, failed, cancelled, or paused (a paused generation does not
// run). Each case waits for the generation's end (its status), then
// starts another.
func TestConcurrencyLimit(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name    string
		agent   func(t *testing.T) *agentdv1.Agent
		running func(*agentdv1.GenerateResponse) bool
		end     func(s genStream, proceed chan<- error)
		last    string
		code    codes.Code
	}{
		{
			name:    "X-I7 completed",
			agent:   func(*testing.T) *agentdv1.Agent { return &agentdv1.Agent{Provider: "held"} },
			running: func(ev *agentdv1.GenerateResponse) bool { return ev.GetStarted() != nil },
			end: func(_ genStream, proceed chan<- error) {
				proceed <- nil
			},
			last: "completed", code: codes.OK,
		},
		{
			name:    "X-I7 failed",
			agent:   func(*testing.T) *agentdv1.Agent { return &agentdv1.Agent{Provider: "held"} },
			running: func(ev *agentdv1.GenerateResponse) bool { return ev.GetStarted() != nil },
			end: func(_ genStream, proceed chan<- error) {
				proceed <- fault.New(fault.Unavailable, "the provider is down")
			},
			last: "", code: codes.Unavailable,
		},
		{
			name:    "X-I7 cancelled",
			agent:   func(*testing.T) *agentdv1.Agent { return &agentdv1.Agent{Provider: "held"} },
			running: func(ev *agentdv1.GenerateResponse) bool { return ev.GetStarted() != nil },
			end: func(s genStream, _ chan<- error) {
				_ = s.Send(cancelRequest())
			},
			last: "", code: codes.Canceled,
		},
		{
			name:    "X-I7 paused",
			agent:   filesAgent,
			running: func(ev *agentdv1.GenerateResponse) bool { return ev.GetApprovalRequest() != nil },
			end: func(s genStream, _ chan<- error) {
				_ = s.CloseSend()
			},
			last: "paused", code: codes.OK,
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			st := newStore(t, 0)
			proceed := make(chan error, 1)
			one := limited(func(l *quota.Limits) {
				l.Concurrent = quota.Limit{N: 1, Setting: "tenants.acme.limits.max_concurrent_generations"}
			})
			clients := tenantClients(t, server.Options{
				Bridge: &fakeBridge{onList: offering(serverTools("files", "read", "delete"))}, Checkpoints: st,
				Tenants: tenantsOf(map[string]*server.Tenant{"acme": one, "globex": one}),
			}, heldProvider(proceed), recordingScript(), plainProvider())
			acme := clients("acme")
			quick := &agentdv1.StartGeneration{Agent: &agentdv1.Agent{Provider: "plain"}, Messages: userSays("hi")}

			s := openUntil(t, acme, startRequest(&agentdv1.StartGeneration{Agent: tc.agent(t), Messages: userSays("work")}), tc.running)
			_, refused := generate(t, acme, quick, nil)
			wantExhausted(t, refused, quota.ConcurrencyRetry, "acme", "tenants.acme.limits.max_concurrent_generations")
			_, other := generate(t, clients("globex"), quick, nil)
			wantCode(t, other, codes.OK)

			tc.end(s, proceed)
			last, ended := finish(s)
			if last != tc.last || ended.Code() != tc.code {
				t.Fatalf("the first generation ended with %s, %v %q; want %s, %v", last, ended.Code(), ended.Message(), tc.last, tc.code)
			}
			_, after := generate(t, acme, quick, nil)
			wantCode(t, after, codes.OK)
		})
	}
}

// X-I7: max_paused_generations: a generation that would pause beyond it
// fails instead, ResourceExhausted, with RetryInfo (until the tenant's
// first paused generation expires) and a QuotaFailure naming the setting.
// Another tenant's pauses do not count; a resumed generation that pauses
// again keeps its place; a resume that completes frees one.
func TestPausedLimit(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		st := newStore(t, 0)
		one := limited(func(l *quota.Limits) {
			l.Paused = quota.Limit{N: 1, Setting: "limits.max_paused_generations"}
		})
		clients := tenantClients(t, server.Options{
			Bridge: &fakeBridge{onList: offering(serverTools("files", "read", "delete"))}, Checkpoints: st,
			Tenants: tenantsOf(map[string]*server.Tenant{"acme": one, "globex": one}),
		}, recordingScript())
		acme := clients("acme")
		twice := &agentdv1.Agent{
			Provider: "script", RequiresApproval: []string{"delete"}, Mcps: []*agentdv1.MCPServer{refServer("files", "files")},
			ProviderOptions: script(t, `{"turns": [
				{"tool_calls": [{"name": "delete", "arguments": {"path": "a.txt"}}]},
				{"tool_calls": [{"name": "delete", "arguments": {"path": "b.txt"}}]},
				{"text": "done"}
			]}`),
		}
		events, s := generate(t, acme, &agentdv1.StartGeneration{Agent: twice, Messages: userSays("tidy")}, nil)
		wantCode(t, s, codes.OK)
		first := pausedEvent(t, events)

		events, s = generate(t, acme, &agentdv1.StartGeneration{Agent: filesAgent(t), Messages: userSays("tidy")}, nil)
		wantExhausted(t, s, config.Default().Generation.PauseTTL, "acme", "limits.max_paused_generations")
		wantFacts(t, "message", s.Message(), "cannot pause", `the tenant "acme" has 1 paused generations`)
		if k := kinds(events); slices.Contains(k, "paused") {
			t.Errorf("the refused pause's events: %v", k)
		}
		if n, _, _ := st.Count(t.Context(), "acme"); n != 1 {
			t.Errorf("acme has %d paused generations stored; want 1", n)
		}
		events, s = generate(t, clients("globex"), &agentdv1.StartGeneration{Agent: filesAgent(t), Messages: userSays("tidy")}, nil)
		wantCode(t, s, codes.OK)
		pausedEvent(t, events)

		approve := func(p *agentdv1.GenerationPaused) *agentdv1.ApprovalDecision {
			return &agentdv1.ApprovalDecision{RequestId: p.GetApprovalRequests()[0].GetId(), Approved: true}
		}
		events, s = run(t, acme, resumeRequest(first.GetGenerationId(), twice, approve(first)), nil)
		wantCode(t, s, codes.OK)
		again := pausedEvent(t, events)
		events, s = run(t, acme, resumeRequest(again.GetGenerationId(), twice, approve(again)), nil)
		wantCode(t, s, codes.OK)
		if k := kinds(events); k[len(k)-1] != "completed" {
			t.Fatalf("the second resume: %v", k)
		}
		events, s = generate(t, acme, &agentdv1.StartGeneration{Agent: filesAgent(t), Messages: userSays("tidy")}, nil)
		wantCode(t, s, codes.OK)
		pausedEvent(t, events)
	})
}

// X-I7: a resume runs, so it takes a concurrency slot (refused beyond
// the limit, leaving the pause resumable), but no token of the rate: it
// continues a generation the rate admitted.
func TestResumeLimits(t *testing.T) {
	t.Parallel()
	st := newStore(t, 0)
	proceed := make(chan error, 1)
	clients := tenantClients(t, server.Options{
		Bridge: &fakeBridge{onList: offering(serverTools("files", "read", "delete"))}, Checkpoints: st,
		Tenants: tenantsOf(map[string]*server.Tenant{"acme": limited(func(l *quota.Limits) {
			l.Concurrent = quota.Limit{N: 1, Setting: "limits.max_concurrent_generations"}
			l.PerMinute = quota.Limit{N: 2, Setting: "limits.generations_per_minute"}
		})}),
	}, heldProvider(proceed), recordingScript())
	acme := clients("acme")
	events, s := generate(t, acme, &agentdv1.StartGeneration{Agent: filesAgent(t), Messages: userSays("tidy")}, nil)
	wantCode(t, s, codes.OK)
	paused := pausedEvent(t, events)
	resume := resumeRequest(paused.GetGenerationId(), filesAgent(t), &agentdv1.ApprovalDecision{RequestId: paused.GetApprovalRequests()[0].GetId(), Approved: true})

	held := openUntil(t, acme, startRequest(&agentdv1.StartGeneration{Agent: &agentdv1.Agent{Provider: "held"}, Messages: userSays("hi")}),
		func(ev *agentdv1.GenerateResponse) bool { return ev.GetStarted() != nil })
	_, s = run(t, acme, resume, nil)
	wantExhausted(t, s, quota.ConcurrencyRetry, "acme", "limits.max_concurrent_generations")
	proceed <- nil
	if last, s := finish(held); last != "completed" || s.Code() != codes.OK {
		t.Fatalf("the held generation: %s, %v", last, s)
	}

	events, s = run(t, acme, resume, nil)
	wantCode(t, s, codes.OK)
	if k := kinds(events); k[len(k)-1] != "completed" {
		t.Errorf("the resume once a slot was free: %v", k)
	}
	_, s = generate(t, acme, &agentdv1.StartGeneration{Agent: &agentdv1.Agent{Provider: "held"}, Messages: userSays("hi")}, nil)
	if s.Code() != codes.ResourceExhausted || !strings.Contains(s.Message(), "limits.generations_per_minute") {
		t.Errorf("a third start in a minute of 2: %v %q; want the rate's ResourceExhausted (the resume took no token)", s.Code(), s.Message())
	}
}

// keylessProvider is plainProvider, which agentd's configuration gives no
// API key.
type keylessProvider struct{ *fakeProvider }

func (keylessProvider) CheckConfig(string) error {
	return fault.New(fault.FailedPrecondition, "plain: no API key is configured: set PLAIN_API_KEY or providers.plain.api_key")
}

// R-P1, X-D9, X-I7: what agentd's configuration lacks for a request (its
// provider's API key) is found with the request's other problems, before
// anything runs or is recorded: alone, it is FailedPrecondition naming the
// provider, the setting and, for a configured tenant, its own; beside an
// invalid problem the request is InvalidArgument, beside a refused one
// PermissionDenied, every problem listed. Preview says the same.
func TestUnconfiguredProvider(t *testing.T) {
	t.Parallel()
	prov := keylessProvider{plainProvider()}
	bridge, _ := noIO(t)
	st := newStore(t, 0)
	clients := tenantClients(t, server.Options{
		Bridge: bridge, Checkpoints: st, Generations: st.Generations(), Replica: "replica-a",
		Providers: registryOf(t, prov),
		Tenants: tenantsOf(map[string]*server.Tenant{
			"":     {Rules: &policy.Rules{}},
			"acme": {Rules: &policy.Rules{}, ProvidersSetting: "tenants.acme.providers"},
		}),
	})
	zero := int32(0)
	for _, tc := range []struct {
		name   string
		tenant string
		agent  *agentdv1.Agent
		code   codes.Code
		others []string // the other fields violated
		saying []string
	}{
		{"R-P1 no key", "", &agentdv1.Agent{Provider: "plain"}, codes.FailedPrecondition, nil,
			[]string{"plain: no API key is configured: set PLAIN_API_KEY or providers.plain.api_key"}},
		{"X-I7 no key, for a configured tenant", "acme", &agentdv1.Agent{Provider: "plain"}, codes.FailedPrecondition, nil,
			[]string{"set PLAIN_API_KEY or providers.plain.api_key, or under tenants.acme.providers for this tenant alone"}},
		{"X-D9 no key and an invalid setting", "", &agentdv1.Agent{Provider: "plain", MaxToolTurns: &zero}, codes.InvalidArgument,
			[]string{"agent.max_tool_turns"}, []string{"PLAIN_API_KEY"}},
		{"X-D9 no key and a command the rules refuse", "", &agentdv1.Agent{Provider: "plain", Mcps: []*agentdv1.MCPServer{commandServer("", "/usr/bin/files-mcp")}},
			codes.PermissionDenied, []string{"agent.mcps[0].command"}, []string{"PLAIN_API_KEY"}},
	} {
		client := clients(tc.tenant)
		pst := preview(client, t.Context(), tc.agent)
		events, gst := generate(t, client, &agentdv1.StartGeneration{Agent: tc.agent, Messages: userSays("hi")}, nil)
		if len(events) != 0 {
			t.Errorf("%s: the refused start sent %v", tc.name, kinds(events))
		}
		for _, c := range []struct {
			what, root string
			st         *status.Status
		}{{"Preview", "", pst}, {"Generate", "start.", gst}} {
			if c.st.Code() != tc.code {
				t.Errorf("%s: %s %v %q; want %v", tc.name, c.what, c.st.Code(), c.st.Message(), tc.code)
				continue
			}
			wantFacts(t, tc.name+": "+c.what, description(t, c.st, c.root+"agent.provider"), tc.saying...)
			for _, f := range tc.others {
				description(t, c.st, c.root+f)
			}
		}
	}
	if n := len(prov.calls()); n != 0 {
		t.Errorf("the provider was asked %d turns", n)
	}
	if page, _, err := st.Generations().List(t.Context(), "", store.ListOptions{}); err != nil || len(page) != 0 {
		t.Errorf("the refused starts were recorded: %v, %v", page, err)
	}
}
