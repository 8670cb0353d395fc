// Package bridge is agentd's BridgeService: it owns every MCP connection
// and every child process agentd starts.
//
// A session serves one generation and lives exactly as long as its
// OpenSession stream: when the caller closes the session, cancels the
// stream or vanishes, every connection of the session closes and every
// process stops. Connections are made lazily, on the first ListTools or
// CallTool that needs the server, and reused within the session.
//
// A session belongs to its tenant (OpenSessionRequest.tenant): the
// tenant's policy decides which servers it may declare, and the processes
// started for a tenant never serve another tenant's sessions (pools).
//
// The bridge never imports the server or the providers: its contract is
// agentd.bridge.v1, whether it runs embedded in `agentd serve` or alone as
// `agentd bridge`.
package bridge

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"log/slog"
	"net/http"
	"net/url"
	"slices"
	"sync"
	"time"

	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/metric"
	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/trace"
	"google.golang.org/grpc"
	"google.golang.org/protobuf/proto"

	"github.com/agentd/agentd/bridge/internal/mcpconn"
	"github.com/agentd/agentd/bridge/internal/pool"
	"github.com/agentd/agentd/bridge/internal/schemacache"
	bridgev1 "github.com/agentd/agentd/gen/go/agentd/bridge/v1"
	"github.com/agentd/agentd/internal/config"
	"github.com/agentd/agentd/internal/fault"
	"github.com/agentd/agentd/internal/mcpdecl"
	"github.com/agentd/agentd/internal/policy"
	"github.com/agentd/agentd/internal/telemetry"
)

// Options configures a Service.
type Options struct {
	// Logger receives session events and the servers' stderr.
	Logger *slog.Logger
	// Config holds the registered servers, the allowed commands, the
	// network and environment policy, the pools and the cache.
	Config config.Bridge
	// Tenants returns a tenant's effective settings (config.Config's
	// ForTenant): the rules its sessions' declarations must follow and
	// the registered servers they may ref; false refuses its sessions.
	// Nil: every tenant has Config's rules and every registered server.
	Tenants func(tenant string) (config.TenantSettings, bool)
	// TracerProvider makes the spans of the MCP requests (initialize,
	// tools/list, tools/call); nil means the global one.
	TracerProvider trace.TracerProvider
	// Propagator reads the trace context that CallTools calls carry; nil
	// means telemetry.Propagator().
	Propagator propagation.TextMapPropagator
	// MeterProvider makes the bridge's OpenTelemetry metrics (its pools,
	// schema cache and MCP request durations); nil records none.
	MeterProvider metric.MeterProvider
}

// Service implements agentd.bridge.v1.BridgeService. Close stops every
// session and pool; the Service must not be used afterwards.
type Service struct {
	bridgev1.UnimplementedBridgeServiceServer

	log       *slog.Logger
	cfg       config.Bridge
	tenants   func(string) (config.TenantSettings, bool)
	cache     *schemacache.Cache
	pools     *pools
	transport *http.Transport // shared by HTTP connections that may not reach private addresses
	private   *http.Transport // shared by those of tenants that may

	telemetry  *mcpconn.Telemetry // MCP client spans and durations
	propagator propagation.TextMapPropagator
	receivers  sync.WaitGroup // CallTools receivers, done once their handlers return

	mu       sync.Mutex
	sessions map[string]*session
	closed   bool
}

// New returns a Service. The pools of the registered servers start their
// warm spares at once.
func New(opts Options) (*Service, error) {
	log := opts.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	c := opts.Config.Cache
	cache, err := schemacache.New(schemacache.Settings{Enabled: c.Enabled, TTL: c.TTL, MaxEntries: c.MaxEntries}, opts.MeterProvider)
	if err != nil {
		return nil, err
	}
	poolMetrics, err := pool.NewMetrics(opts.MeterProvider)
	if err != nil {
		_ = cache.Close()
		return nil, err
	}
	tp := opts.TracerProvider
	if tp == nil {
		tp = otel.GetTracerProvider()
	}
	prop := opts.Propagator
	if prop == nil {
		prop = telemetry.Propagator()
	}
	tel, err := mcpconn.NewTelemetry(tp, opts.MeterProvider)
	if err != nil {
		return nil, err
	}
	tenants := opts.Tenants
	if tenants == nil {
		rules := opts.Config.Rules()
		tenants = func(name string) (config.TenantSettings, bool) {
			return config.TenantSettings{Name: name, Rules: rules}, true
		}
	}
	return &Service{
		telemetry:  tel,
		propagator: prop,
		log:        log,
		cfg:        opts.Config,
		tenants:    tenants,
		cache:      cache,
		pools:      newPools(opts.Config, log, stdioDialer(log, prop, tel, cache), poolMetrics),
		transport:  mcpconn.NewTransport(false),
		private:    mcpconn.NewTransport(true),
		sessions:   make(map[string]*session),
	}, nil
}

// Register registers the service on registrar.
func (s *Service) Register(registrar grpc.ServiceRegistrar) {
	bridgev1.RegisterBridgeServiceServer(registrar, s)
}

// Close closes every open session and pool, stopping every process, and
// refuses new sessions. Idempotent.
func (s *Service) Close() {
	s.mu.Lock()
	s.closed = true
	sessions := make([]*session, 0, len(s.sessions))
	for _, sess := range s.sessions {
		sessions = append(sessions, sess)
	}
	s.mu.Unlock()
	var wg sync.WaitGroup
	for _, sess := range sessions {
		wg.Go(sess.close)
	}
	wg.Wait()
	s.receivers.Wait()
	s.pools.close()
	_ = s.cache.Close()
	s.transport.CloseIdleConnections()
	s.private.CloseIdleConnections()
}

// Sessions reports how many sessions are open.
func (s *Service) Sessions() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.sessions)
}

func (s *Service) OpenSession(req *bridgev1.OpenSessionRequest, stream grpc.ServerStreamingServer[bridgev1.OpenSessionResponse]) error {
	targets, err := s.resolve(req.GetServers(), req.GetTenant())
	if err != nil {
		return fault.GRPC(err)
	}
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		return fault.GRPC(fault.New(fault.Unavailable, "the bridge is shutting down"))
	}
	sess := s.newSession(stream.Context(), newID(), req, targets)
	s.sessions[sess.id] = sess
	s.mu.Unlock()
	defer func() {
		sess.close()
		s.mu.Lock()
		delete(s.sessions, sess.id)
		s.mu.Unlock()
	}()

	opened := &bridgev1.SessionOpened{SessionId: sess.id, Resumable: sess.resumable()}
	if req.GetListCachedTools() {
		if servers, ok := sess.cachedTools(req.GetKnownRevisions()); ok {
			opened.Tools = &bridgev1.ListToolsResponse{Servers: servers}
		}
	}
	if err := stream.Send(&bridgev1.OpenSessionResponse{Event: &bridgev1.OpenSessionResponse_Opened{Opened: opened}}); err != nil {
		return err
	}
	return sess.relay(stream)
}

// relay sends the session's events on its OpenSession stream, its
// servers' requests for agentd and their tools_changed, until the session
// closes or its caller goes away (the stream's owner then closes the
// session, stopping everything).
func (s *session) relay(stream grpc.ServerStreamingServer[bridgev1.OpenSessionResponse]) error {
	for {
		ev := &bridgev1.OpenSessionResponse{}
		select {
		case <-stream.Context().Done():
			return nil
		case <-s.done:
			return nil
		case r := <-s.asks:
			ev.Event = &bridgev1.OpenSessionResponse_Request{Request: r}
		case name := <-s.changes:
			ev.Event = &bridgev1.OpenSessionResponse_ToolsChanged{ToolsChanged: &bridgev1.ToolsChanged{ServerName: name}}
		}
		if err := stream.Send(ev); err != nil {
			return err
		}
	}
}

func (s *Service) CloseSession(_ context.Context, req *bridgev1.CloseSessionRequest) (*bridgev1.CloseSessionResponse, error) {
	s.mu.Lock()
	sess := s.sessions[req.GetSessionId()]
	s.mu.Unlock()
	if sess != nil {
		sess.close()
	}
	return &bridgev1.CloseSessionResponse{}, nil
}

func (s *Service) session(id string) (*session, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	sess := s.sessions[id]
	if sess == nil {
		return nil, fault.New(fault.NotFound, "no open bridge session %q", id)
	}
	return sess, nil
}

// AnswerServerRequest hands agentd's answer to the request of the session
// that waits for it; an answer that finds none waiting (the request ended
// meanwhile, or was answered already) changes nothing.
func (s *Service) AnswerServerRequest(_ context.Context, req *bridgev1.AnswerServerRequestRequest) (*bridgev1.AnswerServerRequestResponse, error) {
	sess, err := s.session(req.GetSessionId())
	if err != nil {
		return nil, fault.GRPC(err)
	}
	sess.answer(req)
	return &bridgev1.AnswerServerRequestResponse{}, nil
}

func (s *Service) ListTools(ctx context.Context, req *bridgev1.ListToolsRequest) (*bridgev1.ListToolsResponse, error) {
	sess, err := s.session(req.GetSessionId())
	if err != nil {
		return nil, fault.GRPC(err)
	}
	servers, err := sess.listTools(ctx, req.GetServerNames())
	if err != nil {
		return nil, fault.GRPC(err)
	}
	return &bridgev1.ListToolsResponse{Servers: servers}, nil
}

func (s *Service) CallTool(ctx context.Context, req *bridgev1.CallToolRequest) (*bridgev1.CallToolResponse, error) {
	sess, err := s.session(req.GetSessionId())
	if err != nil {
		return nil, fault.GRPC(err)
	}
	ctx = withRetry(ctx, req.GetInputResponses(), req.GetRequestState())
	res, err := sess.callTool(ctx, req.GetServerName(), req.GetToolName(), req.GetArguments())
	if err != nil {
		return nil, fault.GRPC(err)
	}
	return res, nil
}

// target is a validated server of a session.
type target struct {
	name         string
	readTimeout  time.Duration
	allowedTools []string
	key          schemacache.Key // its tool list's cache key
	serverKey    schemacache.Key // the key its negotiated protocol version is remembered under
	stdio        *mcpconn.StdioSpec
	ref          string // registered server name, for stdio targets by ref
	http         *mcpconn.HTTPSpec
	oauth        bool // http: agentd, the server's OAuth client, resolves its refusals
}

// scope is what resolves a session's servers: its tenant's settings, and
// the problems found.
type scope struct {
	tenant config.TenantSettings
	problems
}

// resolve validates a session's servers, resolving refs against the
// registered servers that the tenant may use and checking commands,
// environments and addresses against the tenant's rules. Every
// problem is reported at once, by policy.Refusal: InvalidArgument if any
// declaration is invalid, and PermissionDenied, naming each setting
// (the tenant's own, or the global one it keeps), if the configuration's
// rules are all that refuse it. A tenant that the configuration does not
// know is PermissionDenied.
func (s *Service) resolve(specs []*bridgev1.ServerSpec, tenant string) ([]*target, error) {
	ts, ok := s.tenants(tenant)
	if !ok {
		return nil, fault.New(fault.Permission,
			"the tenant %q is not configured: add it under tenants, or add tenants.default to serve every tenant not listed", tenant)
	}
	sc := &scope{tenant: ts}
	seen := make(map[string]bool)
	targets := make([]*target, 0, len(specs))
	for i, spec := range specs {
		f := fmt.Sprintf("servers[%d]", i)
		t := &target{name: spec.GetName(), readTimeout: spec.GetReadTimeout().AsDuration(), allowedTools: spec.GetAllowedTools()}
		switch {
		case t.name == "":
			sc.bad(f+".name", "must not be empty")
		case seen[t.name]:
			sc.bad(f+".name", "%q is used twice", t.name)
		}
		seen[t.name] = true
		if t.readTimeout <= 0 {
			sc.bad(f+".read_timeout", "must be positive")
		}
		parts := schemacache.KeyParts{Tenant: tenant, AllowedTools: t.allowedTools}
		switch tr := spec.GetTransport().(type) {
		case *bridgev1.ServerSpec_Http:
			s.resolveHTTP(sc, f+".http", t, tr.Http, &parts)
		case *bridgev1.ServerSpec_Stdio:
			s.resolveStdio(sc, f+".stdio", t, tr.Stdio, &parts)
		case *bridgev1.ServerSpec_Ref:
			s.resolveRef(sc, f+".ref", t, tr.Ref, &parts)
		default:
			sc.bad(f, "needs http, stdio or ref")
		}
		t.key, t.serverKey = schemacache.NewKey(parts), schemacache.ServerKey(parts)
		targets = append(targets, t)
	}
	if err := policy.Refusal(sc.invalid, sc.denied); err != nil {
		return nil, err
	}
	return targets, nil
}

// problems collects what refuses a session's servers: invalid
// declarations, and what the configuration does not allow.
type problems struct {
	invalid, denied []fault.Violation
}

func (p *problems) bad(field, format string, args ...any) {
	p.invalid = append(p.invalid, fault.Violation{Field: field, Description: fmt.Sprintf(format, args...)})
}

func (p *problems) deny(field, format string, args ...any) {
	p.denied = append(p.denied, fault.Violation{Field: field, Description: fmt.Sprintf(format, args...)})
}

// resolveHTTP resolves an HTTP server, declared at field f: an http or
// https URL that, unless the tenant's allow_private_networks, names no
// private address (and, dialled, reaches none).
func (s *Service) resolveHTTP(sc *scope, f string, t *target, h *bridgev1.HTTPTarget, parts *schemacache.KeyParts) {
	rules := sc.tenant.Rules
	if u, err := url.Parse(h.GetUrl()); err != nil || !mcpdecl.HTTPURL(h.GetUrl()) {
		sc.bad(f+".url", "must be an http or https URL")
	} else if why := rules.AddressRefusal(u.Hostname()); why != "" {
		sc.deny(f+".url", "MCP server %q: %s", t.name, why)
	}
	transport := s.transport
	if rules.AllowPrivateNetworks {
		transport = s.private
	}
	t.http = &mcpconn.HTTPSpec{
		Name: t.name, URL: h.GetUrl(), Authorization: h.GetAuthorization(), Headers: h.GetHeaders(),
		MaxReconnectionWait: h.GetMaxReconnectionWait().AsDuration(), Transport: transport, NetworksSetting: rules.NetworksSetting(),
	}
	t.oauth = h.GetOauth()
	parts.URL, parts.Authorization, parts.Headers = h.GetUrl(), h.GetAuthorization(), h.GetHeaders()
}

// resolveStdio resolves a server started by a request's command, declared
// at field f: a command that the tenant's allowed_commands lists, and no
// env variable that steers programs unless its allowed_env lists it.
func (s *Service) resolveStdio(sc *scope, f string, t *target, st *bridgev1.StdioTarget, parts *schemacache.KeyParts) {
	rules := sc.tenant.Rules
	cmd := st.GetCommand()
	if why := rules.CommandRefusal(cmd); why != "" {
		sc.deny(f+".command", "MCP server %q: %s", t.name, why)
	}
	for _, why := range rules.EnvRefusals(st.GetEnv()) {
		sc.deny(f+".env", "MCP server %q: %s", t.name, why)
	}
	t.stdio = &mcpconn.StdioSpec{Name: t.name, Command: cmd, Args: st.GetArgs(), Env: st.GetEnv(), Unset: st.GetUnsetEnv(), TerminateGrace: s.cfg.TerminateGrace}
	parts.Command, parts.Args, parts.Env, parts.Unset = cmd, st.GetArgs(), st.GetEnv(), st.GetUnsetEnv()
}

// resolveRef resolves a server registered under bridge.servers, declared
// at field f, that the tenant may use (tenants.<name>.servers).
func (s *Service) resolveRef(sc *scope, f string, t *target, ref string, parts *schemacache.KeyParts) {
	reg, ok := s.cfg.Servers[ref]
	if !ok {
		sc.bad(f, "no server named %q is registered under bridge.servers", ref)
		return
	}
	if ts := sc.tenant; ts.Servers != nil && !slices.Contains(ts.Servers, ref) {
		sc.deny(f, "MCP server %q: the registered server %q is not among %s.servers, the registered servers the tenant may use", t.name, ref, ts.Entry)
	}
	if reg.URL != "" {
		// agentd resolves these (it is their OAuth client) and sends
		// their url; a ref reaches here from an agentd whose own
		// configuration lacks the registration.
		sc.bad(f, "the registered server %q is a url server, which agentd serve resolves from its own bridge.servers; register it in agentd serve's configuration too", ref)
		return
	}
	t.ref = ref
	t.stdio = &mcpconn.StdioSpec{Name: t.name, Command: reg.Command, Args: reg.Args, Env: reg.Env, TerminateGrace: s.cfg.TerminateGrace}
	parts.Command, parts.Args, parts.Env = "ref:"+ref, reg.Args, reg.Env
}

func newID() string {
	var b [12]byte
	_, _ = rand.Read(b[:])
	return hex.EncodeToString(b[:])
}

func cloneSpec(s *bridgev1.ServerSpec) *bridgev1.ServerSpec {
	return proto.Clone(s).(*bridgev1.ServerSpec)
}
