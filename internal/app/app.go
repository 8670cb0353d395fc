// Package app wires agentd's services together: the public AgentService
// with its bridge (embedded over an in-memory gRPC listener, or remote),
// and the BridgeService on its own; each with the bridge's admin service
// beside it, or on a listener of its own (admin.listen). cmd/agentd and
// the end-to-end tests build the same stacks through it.
package app

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"reflect"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/health"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/grpc/test/bufconn"

	"github.com/agentd/agentd/bridge"
	bridgev1 "github.com/agentd/agentd/gen/go/agentd/bridge/v1"
	agentdv1 "github.com/agentd/agentd/gen/go/agentd/v1"
	"github.com/agentd/agentd/internal/auth"
	"github.com/agentd/agentd/internal/bridgeclient"
	"github.com/agentd/agentd/internal/config"
	"github.com/agentd/agentd/internal/grpcserver"
	"github.com/agentd/agentd/internal/netaddr"
	"github.com/agentd/agentd/internal/oauthclient"
	"github.com/agentd/agentd/internal/oauthtokens"
	"github.com/agentd/agentd/internal/sealer"
	"github.com/agentd/agentd/internal/store"
	"github.com/agentd/agentd/internal/tlsconf"
	"github.com/agentd/agentd/providers/registry"
	"github.com/agentd/agentd/server"
)

// Options configures a stack.
type Options struct {
	Config    config.Config
	Logger    *slog.Logger
	Telemetry grpcserver.Telemetry
	// Metrics serves GET /metrics on metrics.listen: the Handler
	// of the telemetry.Metrics whose MeterProvider Telemetry holds.
	// Required when metrics.listen is set; unused otherwise.
	Metrics http.Handler
	// Reloads, read by ServeAgent alone, delivers new configurations
	// while it serves: each is applied with Agent.Reload, and one that
	// cannot be is logged and changes nothing. Nil: none.
	Reloads <-chan config.Config

	// generations, for benchmarks only (set by export_test.go, never
	// configured), gives the AgentService wrap(the store's record of
	// generations) instead of the store's own: a wrapper that times the
	// store's calls, or nil to keep no record, as server.Options allows,
	// to measure what durability costs.
	generations func(store.Generations) store.Generations
}

// Bridge is a BridgeService and its admin service: beside it on one gRPC
// server, or on a server of its own when admin.listen is set.
type Bridge struct {
	Server  *grpc.Server
	Health  *health.Server
	Service *bridge.Service
	// Admin and AdminHealth serve the admin service for admin.listen; nil
	// when it is served beside the BridgeService.
	Admin       *grpc.Server
	AdminHealth *health.Server
}

// NewBridge builds a BridgeService server with health and reflection (unless
// reflection is off), over TLS when bridge.tls names a certificate, serving
// only the peers bridge.trusted_peers lists when it lists any, and
// the admin service: beside it, or with admin.listen set on a server of its
// own (newAdminServer). The registered servers' pools start their warm
// spares.
func NewBridge(o Options) (*Bridge, error) {
	return newBridge(o, false)
}

func newBridge(o Options, inMemory bool) (*Bridge, error) {
	log := o.Logger.With("component", "bridge")
	serverOpts := grpcserver.Options{Logger: log, Telemetry: o.Telemetry, QuietOK: true, InMemory: inMemory, NoReflection: !o.Config.Reflection}
	if !inMemory {
		creds, err := serverCreds(o.Config.Bridge.TLS, "bridge.tls", log)
		if err != nil {
			return nil, err
		}
		serverOpts.Creds = creds
		serverOpts.Unary, serverOpts.Stream = peerChecks(o.Config, log)
	}
	svc, err := bridge.New(bridge.Options{
		Logger: log, Config: o.Config.Bridge, Tenants: o.Config.ForTenant,
		TracerProvider: o.Telemetry.TracerProvider, Propagator: o.Telemetry.Propagator,
		MeterProvider: o.Telemetry.MeterProvider,
	})
	if err != nil {
		return nil, err
	}
	b := &Bridge{Service: svc}
	// The embedded bridge's admin service is agentd's to place (NewAgent).
	if !inMemory && o.Config.Admin.Listen != "" {
		authn, err := authenticator(o, log)
		if err == nil {
			b.Admin, b.AdminHealth, err = newAdminServer(o, svc, authn, nil)
		}
		if err != nil {
			svc.Close()
			return nil, err
		}
	}
	b.Server, b.Health = grpcserver.New(serverOpts)
	svc.Register(b.Server)
	b.Health.SetServingStatus(bridgev1.BridgeService_ServiceDesc.ServiceName, healthpb.HealthCheckResponse_SERVING)
	if !inMemory {
		// agentd bridge's probes: both SERVING until its shutdown.
		b.Health.SetServingStatus(HealthLiveness, healthpb.HealthCheckResponse_SERVING)
		b.Health.SetServingStatus(HealthReadiness, healthpb.HealthCheckResponse_SERVING)
	}
	if b.Admin == nil {
		svc.Admin().Register(b.Server)
		b.Health.SetServingStatus(bridgev1.BridgeAdminService_ServiceDesc.ServiceName, healthpb.HealthCheckResponse_SERVING)
	}
	return b, nil
}

// Serve serves the bridge on lis until ctx ends, then stops gracefully and
// stops every MCP server process. With admin.listen set, use
// ServeWithAdmin.
func (b *Bridge) Serve(ctx context.Context, lis net.Listener, o Options) error {
	return b.ServeWithAdmin(ctx, lis, nil, o)
}

// ServeWithAdmin serves the bridge on lis and its admin service on admin
// (admin.listen) until ctx ends or either fails, then stops both
// gracefully and stops every MCP server process.
func (b *Bridge) ServeWithAdmin(ctx context.Context, lis, admin net.Listener, o Options) error {
	err := serveAll(ctx, o.Config.ShutdownGrace, o.Logger,
		endpoint{b.Server, b.Health, lis, nil}, endpoint{b.Admin, b.AdminHealth, admin, nil})
	b.Service.Close()
	return err
}

// newAdminServer builds the server of admin.listen: svc's admin service,
// with health and reflection (unless reflection is off), over admin.tls
// when it names a certificate, its callers authenticated by authn under
// the same roles as beside the AgentService. With web, the listener is a
// port shared with HTTP (agentd serve's, where the AdminService joins it),
// which web is configured for.
func newAdminServer(o Options, svc *bridge.Service, authn *auth.Authenticator, web *port) (*grpc.Server, *health.Server, error) {
	log := o.Logger.With("component", "admin")
	opts := grpcserver.Options{Logger: log, Telemetry: o.Telemetry, NoReflection: !o.Config.Reflection}
	var err error
	if web != nil {
		err = web.configure(&opts, o.Config.Admin.TLS, "admin.tls", log)
	} else {
		opts.Creds, err = serverCreds(o.Config.Admin.TLS, "admin.tls", log)
	}
	if err != nil {
		return nil, nil, err
	}
	withAuth(&opts, authn)
	srv, hs := grpcserver.New(opts)
	svc.Admin().Register(srv)
	hs.SetServingStatus(bridgev1.BridgeAdminService_ServiceDesc.ServiceName, healthpb.HealthCheckResponse_SERVING)
	return srv, hs, nil
}

// authenticator returns the authenticator of the configured auth, logging
// to log; with no method configured, it lets every call through.
func authenticator(o Options, log *slog.Logger) (*auth.Authenticator, error) {
	return auth.New(o.Config, log)
}

// withAuth adds authn's interceptors to opts. They are there even without
// authentication, letting every call pass, so that a reload can turn it
// on.
func withAuth(opts *grpcserver.Options, authn *auth.Authenticator) {
	opts.Unary = append(opts.Unary, authn.UnaryInterceptor())
	opts.Stream = append(opts.Stream, authn.StreamInterceptor())
}

// endpoint is a gRPC server and the listener it serves, shared with HTTP
// when port is not nil; srv and lis both nil for a server that is not
// there (no admin.listen).
type endpoint struct {
	srv  *grpc.Server
	hs   *health.Server
	lis  net.Listener
	port *port
}

// errAdminListener is a listener for the admin service given where
// admin.listen gives it none, or none given where it does.
var errAdminListener = errors.New("the admin service's listener does not match admin.listen: serve with ServeWithAdmin and a listener exactly when admin.listen is set")

// serveAll serves every endpoint until ctx ends or one of them stops on
// its own (a failed listener), then stops them all gracefully; log
// receives the HTTP servers' own errors.
func serveAll(ctx context.Context, grace time.Duration, log *slog.Logger, eps ...endpoint) error {
	for _, ep := range eps {
		if (ep.srv == nil) != (ep.lis == nil) {
			for _, ep := range eps {
				closeAll(ep.lis)
			}
			return errAdminListener
		}
	}
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	errc := make(chan error, len(eps))
	n := 0
	for _, ep := range eps {
		if ep.srv == nil {
			continue
		}
		n++
		go func() {
			err := ep.serve(ctx, grace, log)
			cancel() // one server stopping stops the others
			errc <- err
		}()
	}
	var err error
	for range n {
		err = errors.Join(err, <-errc)
	}
	return err
}

// Agent is the public AgentService, the bridge it uses and its store of
// paused generations.
type Agent struct {
	Server *grpc.Server
	Health *health.Server
	// Admin and AdminHealth serve the embedded bridge's admin service for
	// admin.listen; nil when it is served beside the AgentService, or
	// when the bridge is remote (and its admin service is its own).
	Admin       *grpc.Server
	AdminHealth *health.Server

	// web and adminWeb share listen and admin.listen with HTTP.
	web, adminWeb port

	providers  *registry.Tenants
	authn      *auth.Authenticator
	log        *slog.Logger
	mu         sync.Mutex
	config     config.Config // as last applied, for Reload
	store      store.Store
	attendance io.Closer          // this replica's liveness in the store, for adopters to see it die
	tokens     oauthtokens.Store  // the OAuth tokens of MCP servers, in store or in memory
	storeDown  atomic.Bool        // the last ping of the store failed
	ready      *readiness         // the AgentService's health and readiness
	stopWatch  context.CancelFunc // stops watchStore and watchBridge; nil when they are not running
	watches    sync.WaitGroup
	svc        *server.Service
	bridgeConn *grpc.ClientConn
	embedded   *Bridge // nil with a remote bridge
	bridgeLis  *bufconn.Listener
	bridgeDone chan error
	cancel     context.CancelFunc
	metrics    *metricsServer // nil without metrics.listen
	debug      *debugServer   // nil without debug.listen
}

// NewAgent builds the AgentService, over TLS when tls names a
// certificate. With Config.Bridge.Address empty, it
// starts an embedded BridgeService on an in-memory listener, so the
// boundary is always a real gRPC hop, and serves its admin service beside
// the AgentService, or with admin.listen set on a server of its own
// (Admin); otherwise it dials that address, over TLS as bridge.tls says,
// balancing the bridge's replicas with each session pinned to its own, and
// admin.listen is the remote bridge's business. Close releases what NewAgent
// started if Serve is never called.
func NewAgent(o Options) (*Agent, error) {
	regs, err := registry.NewTenants(&o.Config)
	if err != nil {
		return nil, err
	}
	a := &Agent{providers: regs, config: o.Config, log: o.Logger}
	if a.metrics, err = serveMetrics(o); err != nil {
		return nil, err
	}
	if err := a.build(o); err != nil {
		a.Close()
		return nil, err
	}
	return a, nil
}

// build starts the rest of the agent, in order: the debug endpoint, the
// store, the bridge (or the connection to a remote one), the servers with
// their authentication, the AgentService, the admin services, and the
// watches of the store and the remote bridge. Close stops what it started.
func (a *Agent) build(o Options) error {
	var err error
	if a.debug, err = serveDebug(o); err != nil {
		return err
	}
	if a.store, err = openStore(o.Config, o.Telemetry.MeterProvider); err != nil {
		return err
	}
	if err := a.connectBridge(o); err != nil {
		return err
	}
	log := o.Logger.With("component", "agent")
	if err := a.newServers(o, log); err != nil {
		return err
	}
	if err := a.startService(o, log); err != nil {
		return err
	}
	a.serveAdmin(log)
	if err := a.serveHTTP(o.Config); err != nil {
		return err
	}
	watchCtx, stopWatch := context.WithCancel(context.Background())
	a.stopWatch = stopWatch
	a.watchStore(watchCtx, o.Config.Store.PingInterval, storeName(o.Config), log)
	if a.embedded == nil {
		// The embedded bridge lives and dies with this process; a remote
		// one is watched as the store is, at the same interval.
		a.watchBridge(watchCtx, o.Config.Store.PingInterval, o.Config.Bridge.Address, log)
	}
	return nil
}

// connectBridge dials the remote bridge bridge.address names, or starts
// the embedded one on an in-memory listener and dials that.
func (a *Agent) connectBridge(o Options) error {
	// A tool result may be as large as the bridge lets it be (up to
	// config.MaxMessageBytes), more than gRPC's default 4 MiB.
	bridgeResults := grpc.WithDefaultCallOptions(grpc.MaxCallRecvMsgSize(config.MaxMessageBytes + 1<<20))
	var err error
	if o.Config.Bridge.Address != "" {
		a.bridgeConn, err = dialRemoteBridge(o, bridgeResults)
		return err
	}
	if a.embedded, err = newBridge(o, true); err != nil {
		return err
	}
	a.bridgeLis = bufconn.Listen(1 << 20)
	ctx, cancel := context.WithCancel(context.Background())
	a.cancel = cancel
	a.bridgeDone = make(chan error, 1)
	go func() { a.bridgeDone <- a.embedded.Serve(ctx, a.bridgeLis, o) }()
	a.bridgeConn, err = grpcserver.Dial("passthrough:///agentd-bridge", o.Telemetry, nil,
		append(grpcserver.InMemoryDialOptions(), bridgeResults,
			grpc.WithContextDialer(func(ctx context.Context, _ string) (net.Conn, error) { return a.bridgeLis.DialContext(ctx) }))...)
	return err
}

// newServers makes the agent's gRPC server, with its TLS and its
// callers' authentication, and the admin server when admin.listen sets one
// for the embedded bridge.
func (a *Agent) newServers(o Options, log *slog.Logger) error {
	serverOpts := grpcserver.Options{Logger: log, Telemetry: o.Telemetry, NoReflection: !o.Config.Reflection}
	var err error
	if err = a.web.configure(&serverOpts, o.Config.TLS, "tls", log); err != nil {
		return err
	}
	if a.authn, err = authenticator(o, log); err != nil {
		return err
	}
	withAuth(&serverOpts, a.authn)
	if a.embedded != nil && o.Config.Admin.Listen != "" {
		if a.Admin, a.AdminHealth, err = newAdminServer(o, a.embedded.Service, a.authn, &a.adminWeb); err != nil {
			return err
		}
	}
	// After authentication: a caller learns the store is down only once
	// it is let in.
	serverOpts.Stream = append(serverOpts.Stream, a.storeGate(o.Config.Store.PingInterval))
	a.Server, a.Health = grpcserver.New(serverOpts)
	return nil
}

// startService makes the AgentService, with its bridge client, its
// sealer and the OAuth tokens it keeps, starts its background work and
// registers it.
func (a *Agent) startService(o Options, log *slog.Logger) error {
	bridge := bridgeclient.New(a.bridgeConn)
	if a.embedded == nil {
		bridge = bridgeclient.NewReplicated(a.bridgeConn, log)
	}
	var seal *sealer.Keyring
	if f := o.Config.Store.EncryptionKeyFile; f != "" {
		var err error
		if seal, err = sealer.LoadKeyring(f, o.Config.Store.PreviousEncryptionKeyFiles); err != nil {
			return err
		}
	}
	// The OAuth tokens of MCP servers: sealed in the store with the
	// key, or without one only in this process's memory, never in the
	// clear.
	a.tokens = oauthtokens.NewMemory()
	if seal != nil {
		a.tokens = oauthtokens.NewSealed(a.store.Tokens(), seal)
	}
	gens := a.store.Generations()
	if o.generations != nil {
		gens = o.generations(gens)
	}
	registered, err := registeredURLServers(o.Config.Bridge.Servers)
	if err != nil {
		return err
	}
	idp, err := identityProvider(o.Config.OAuth.IdentityProvider)
	if err != nil {
		return err
	}
	prices, err := o.Config.Pricing.Table()
	if err != nil {
		return err
	}
	replica := newReplicaID()
	if a.attendance, err = attend(a.store, replica); err != nil {
		return err
	}
	a.svc = server.New(server.Options{
		Prices:          prices,
		Registered:      registered,
		Sealer:          seal,
		Tenants:         newTenants(&o.Config, a.providers, a.embedded != nil).lookup,
		Logger:          log,
		Providers:       a.providers.Global(),
		Bridge:          bridge,
		Config:          o.Config.Generation,
		TracerProvider:  o.Telemetry.TracerProvider,
		MeterProvider:   o.Telemetry.MeterProvider,
		Checkpoints:     a.store,
		Generations:     gens,
		Threads:         a.store.Threads(),
		Budgets:         a.store.Budgets(),
		ThreadRetention: o.Config.Threads.Retention,
		Replica:         replica,
		OAuth: oauthclient.Options{
			Tokens:            a.tokens,
			RedirectURL:       o.Config.OAuth.RedirectURL,
			ClientMetadataURL: o.Config.OAuth.ClientMetadataURL,
			ClientName:        o.Config.OAuth.ClientName,
			IdentityProvider:  idp,
		},
	})
	a.svc.StartAdopter()
	a.svc.StartSweeper()
	a.svc.StartLedger()
	a.svc.Register(a.Server)
	return nil
}

// serveAdmin registers the AdminService where the admin service is: on
// admin.listen when it is set, else beside the AgentService, and the
// embedded bridge's admin API beside it.
func (a *Agent) serveAdmin(log *slog.Logger) {
	// The bridge's admin API over the bridge's own connection: the
	// embedded bridge serves it on its in-memory listener, a remote one
	// beside its BridgeService (unless its admin.listen moves it away).
	cfg := a.config
	admin := server.NewAdmin(a.tokens, log, server.AdminOptions{Config: &cfg, Usage: a.store, Budgets: a.store.Budgets(), BudgetsChanged: a.svc.BudgetsChanged, Bridge: bridgev1.NewBridgeAdminServiceClient(a.bridgeConn)})
	if a.Admin != nil {
		admin.Register(a.Admin)
		a.AdminHealth.SetServingStatus(agentdv1.AdminService_ServiceDesc.ServiceName, healthpb.HealthCheckResponse_SERVING)
	} else {
		admin.Register(a.Server)
	}
	a.ready = newReadiness(a.Health)
	if a.embedded != nil && a.Admin == nil {
		// The embedded bridge has no address of its own: without
		// admin.listen, its admin API is served beside the AgentService.
		a.embedded.Service.Admin().Register(a.Server)
		a.Health.SetServingStatus(bridgev1.BridgeAdminService_ServiceDesc.ServiceName, healthpb.HealthCheckResponse_SERVING)
	}
}

// Reload applies cfg's auth (which credentials are accepted, and as which
// tenant and roles) to the calls that start after it returns. Nothing else
// of cfg is applied: tenants' settings (their providers, rules and limits)
// and every other setting are built at start, and a change there is logged
// as needing a restart. An invalid cfg, or one turning authentication off,
// changes nothing, and the error says why. Safe for concurrent use.
func (a *Agent) Reload(cfg config.Config) error {
	a.mu.Lock()
	defer a.mu.Unlock()
	if err := cfg.Validate(); err != nil {
		return fmt.Errorf("config reload: %w", err)
	}
	// The tenants stay those of the start, which the rest of agentd was
	// built for: a key may not name a tenant they do not serve.
	applied := a.config
	applied.Auth = cfg.Auth
	if err := applied.Validate(); err != nil {
		return fmt.Errorf("config reload: %w (tenants apply at the next start)", err)
	}
	if err := a.authn.Reload(applied); err != nil {
		return fmt.Errorf("config reload: %w", err)
	}
	if !reflect.DeepEqual(applied, cfg) {
		a.log.Warn("config reload: settings other than auth changed; they apply at the next start")
	}
	a.config = applied
	a.log.Info("config reloaded: auth applied", "api_keys", len(cfg.Auth.APIKeys), "oidc_issuers", len(cfg.Auth.OIDC),
		"mtls_principals", len(cfg.Auth.MTLS.Principals))
	return nil
}

// Serve serves the AgentService on lis until ctx ends, stops it gracefully,
// then stops the bridge (and every MCP server process it runs). With
// admin.listen set, use ServeWithAdmin.
func (a *Agent) Serve(ctx context.Context, lis net.Listener, o Options) error {
	return a.ServeWithAdmin(ctx, lis, nil, o)
}

// ServeWithAdmin serves the AgentService on lis and the admin service on
// admin (admin.listen) until ctx ends or either fails, stops both
// gracefully, then stops the bridge (and every MCP server process it
// runs). When ctx ends, readiness and the AgentService's health turn
// NOT_SERVING first, and both keep serving for shutdown_drain before the
// graceful stop.
func (a *Agent) ServeWithAdmin(ctx context.Context, lis, admin net.Listener, o Options) error {
	// From the moment agentd starts stopping, a generation that ends
	// because of it is handed to another replica rather than cancelled.
	stop := context.AfterFunc(ctx, a.svc.Drain)
	defer stop()
	// First the drain: health turns, the listeners still accept.
	serving, stopDrain := a.drainThenStop(ctx, o.Config.ShutdownDrain, o.Logger)
	defer stopDrain()
	// Each step of the shutdown is logged.
	logged := make(chan struct{})
	stopping := context.AfterFunc(serving, func() {
		o.Logger.Info("stopping: the listeners accept nothing more; running calls have shutdown_grace to finish", "shutdown_grace", o.Config.ShutdownGrace)
		close(logged)
	})
	err := serveAll(serving, o.Config.ShutdownGrace, o.Logger,
		endpoint{a.Server, a.Health, lis, &a.web}, endpoint{a.Admin, a.AdminHealth, admin, &a.adminWeb})
	if !stopping() {
		// The step's line is on its way on a goroutine of its own: the
		// steps are logged in order, so the next waits for it.
		<-logged
	}
	o.Logger.Info("stopping: the listeners have stopped")
	err = errors.Join(err, a.close(o.Logger))
	o.Logger.Info("agentd stopped")
	return err
}

// Close stops the gRPC servers (at once; Serve has stopped them
// gracefully already), the store's watch and sweeper and the embedded
// bridge, closes the bridge connection and the store, and closes the
// providers' idle connections. Idempotent.
func (a *Agent) Close() error { return a.close(nil) }

// close is Close, logging its steps to log unless it is nil.
func (a *Agent) close(log *slog.Logger) error {
	step := func(msg string, args ...any) {
		if log != nil {
			log.Info(msg, args...)
		}
	}
	if a.stopWatch != nil {
		a.stopWatch()
		a.watches.Wait()
		a.stopWatch = nil
	}
	for _, srv := range []*grpc.Server{a.Server, a.Admin} {
		if srv != nil {
			srv.Stop()
		}
	}
	if a.svc != nil {
		// Its background generations release their leases, and close their
		// bridge sessions, before the bridge goes.
		a.svc.Close()
		a.svc = nil
	}
	var err error
	if a.cancel != nil {
		step("stopping: the embedded bridge stops, and its MCP server processes")
		a.cancel()
		err = <-a.bridgeDone
		a.cancel = nil
	}
	if a.bridgeConn != nil {
		step("stopping: closing the connection to the bridge")
		err = errors.Join(err, a.bridgeConn.Close())
		a.bridgeConn = nil
	}
	if a.attendance != nil {
		// Once its generations are released: another replica that found
		// this one gone sooner would adopt what it still runs.
		err = errors.Join(err, a.attendance.Close())
		a.attendance = nil
	}
	if a.store != nil {
		if log != nil {
			a.mu.Lock() // a reload may be under way
			name := storeName(a.config)
			a.mu.Unlock()
			step("stopping: closing the state store", "store", name)
		}
		err = errors.Join(err, a.store.Close())
		a.store = nil
	}
	a.providers.CloseIdleConnections()
	a.metrics.stop()
	a.metrics = nil
	a.debug.stop()
	a.debug = nil
	return err
}

// MetricsAddr is the address of the Prometheus endpoint (metrics.listen);
// "" when there is none.
func (a *Agent) MetricsAddr() string { return a.metrics.addr() }

// BridgeSessions is how many sessions the embedded bridge holds open; -1
// with a remote bridge.
func (a *Agent) BridgeSessions() int {
	if a.embedded == nil {
		return -1
	}
	return a.embedded.Service.Sessions()
}

// DebugAddr is the address of the profiling endpoint (debug.listen); ""
// when there is none.
func (a *Agent) DebugAddr() string { return a.debug.addr() }

// ServeAgent listens on the configured address (and admin.listen, with an
// embedded bridge) and serves the AgentService (and the admin service)
// until ctx ends (what `agentd serve` does once configured).
func ServeAgent(ctx context.Context, o Options) error {
	lis, err := listen(o.Config.Listen, "listen", o.Config.Auth.Enabled(), o)
	if err != nil {
		return err
	}
	var adminLis net.Listener
	if o.Config.Admin.Listen != "" && o.Config.Bridge.Address != "" {
		o.Logger.Info("admin.listen is left to the remote bridge: with bridge.address set, agentd serve has no admin service to serve", "bridge", o.Config.Bridge.Address)
	} else if adminLis, err = listenAdmin(o); err != nil {
		lis.Close()
		return err
	}
	a, err := NewAgent(o)
	if err != nil {
		closeAll(lis, adminLis)
		return err
	}
	// What it serves first, then where: what a newcomer reads last, at
	// the foot of the start, is the address.
	logProviders(o.Logger, &o.Config, a.providers.Global())
	logServers(o.Logger, o.Config.Bridge, o.Config.Bridge.Address != "")
	if b := o.Config.Bridge; b.Address != "" {
		hop := "plaintext"
		switch {
		case b.TLS.CertFile != "":
			hop = "mutual TLS"
		case b.TLS.Dials():
			hop = "TLS"
		}
		o.Logger.Info("agentd serving", "address", lis.Addr().String(), "bridge", b.Address, "bridge_tls", hop, "store", storeName(o.Config))
	} else {
		o.Logger.Info("agentd serving", "address", lis.Addr().String(), "bridge", "embedded", "admin", adminAddr(lis, adminLis), "store", storeName(o.Config))
	}
	if m := a.MetricsAddr(); m != "" {
		o.Logger.Info("metrics serving", "address", "http://"+m+"/metrics")
	}
	if d := a.DebugAddr(); d != "" {
		o.Logger.Warn("debug serving: profiles may reveal memory contents", "address", "http://"+d+"/debug/pprof/")
	}
	if o.Reloads == nil {
		return a.ServeWithAdmin(ctx, lis, adminLis, o)
	}
	reloadCtx, stopReloads := context.WithCancel(ctx)
	reloading := make(chan struct{})
	go func() {
		defer close(reloading)
		for {
			select {
			case <-reloadCtx.Done():
				return
			case cfg := <-o.Reloads:
				if err := a.Reload(cfg); err != nil {
					o.Logger.Error("configuration not reloaded; the running one stays", "error", err)
				}
			}
		}
	}()
	err = a.ServeWithAdmin(ctx, lis, adminLis, o)
	stopReloads()
	<-reloading
	return err
}

// ServeBridge listens on bridge.listen (and admin.listen) and serves the
// BridgeService (and its admin service, beside it or on admin.listen)
// until ctx ends (what `agentd bridge` does once configured).
func ServeBridge(ctx context.Context, o Options) error {
	// A bridge that serves only verified, listed peers authenticates its
	// callers.
	lis, err := listen(o.Config.Bridge.Listen, "bridge.listen", o.Config.Bridge.VerifiesPeers(), o)
	if errors.Is(err, ErrExposed) {
		return fmt.Errorf("%w; or serve only the agentd instances listed in bridge.trusted_peers, with bridge.tls.client_ca_file", err)
	}
	if err != nil {
		return err
	}
	adminLis, err := listenAdmin(o)
	if err != nil {
		lis.Close()
		return err
	}
	metrics, err := serveMetrics(o)
	if err != nil {
		closeAll(lis, adminLis)
		return err
	}
	defer metrics.stop()
	debug, err := serveDebug(o)
	if err != nil {
		closeAll(lis, adminLis)
		return err
	}
	defer debug.stop()
	b, err := NewBridge(o)
	if err != nil {
		closeAll(lis, adminLis)
		return err
	}
	logServers(o.Logger, o.Config.Bridge, false)
	o.Logger.Info("agentd bridge serving", "address", lis.Addr().String(), "admin", adminAddr(lis, adminLis),
		"tls", o.Config.Bridge.TLS.Enabled(), "trusted_peers", len(o.Config.Bridge.TrustedPeers))
	if m := metrics.addr(); m != "" {
		o.Logger.Info("metrics serving", "address", "http://"+m+"/metrics")
	}
	if d := debug.addr(); d != "" {
		o.Logger.Warn("debug serving: profiles may reveal memory contents", "address", "http://"+d+"/debug/pprof/")
	}
	return b.ServeWithAdmin(ctx, lis, adminLis, o)
}

// listenAdmin listens on admin.listen, under the rule of listen: beyond
// loopback only with authentication. Nil when it is not set.
func listenAdmin(o Options) (net.Listener, error) {
	if o.Config.Admin.Listen == "" {
		return nil, nil
	}
	return listen(o.Config.Admin.Listen, "admin.listen", o.Config.Auth.Enabled(), o)
}

// adminAddr is where the admin service is served: on admin, or beside
// the main service on lis.
func adminAddr(lis, admin net.Listener) string {
	if admin != nil {
		return admin.Addr().String()
	}
	return lis.Addr().String()
}

func closeAll(listeners ...net.Listener) {
	for _, lis := range listeners {
		if lis != nil {
			lis.Close()
		}
	}
}

// serverCreds are the TLS credentials of a listener from settings,
// the setting named setting (which errors and logs name instead of the
// files' paths), or nil for plaintext when settings name no certificate.
func serverCreds(settings config.TLS, setting string, log *slog.Logger) (credentials.TransportCredentials, error) {
	if !settings.Enabled() {
		return nil, nil
	}
	cfg, err := tlsconf.Server(settings, setting, log)
	if err != nil {
		return nil, err
	}
	return credentials.NewTLS(cfg), nil
}

// ErrExposed refuses to serve beyond this machine without authentication.
var ErrExposed = errors.New("not a loopback address, and no caller is authenticated there (auth.api_keys, auth.oidc or auth.mtls)")

// listen listens on addr, the setting named setting. Unless the listener
// authenticates its callers (TLS alone does not: a verified client
// certificate gives a principal only through auth.mtls), an address other
// than loopback would let anyone who reaches it use agentd (run
// generations on the configured provider keys, or the bridge's MCP
// servers): it is refused, naming the setting, unless the
// configuration says insecure, which then logs a warning at every start.
// A reload cannot turn authentication off (auth.Authenticator.Reload), so
// what was decided here holds while agentd serves.
func listen(addr, setting string, authenticated bool, o Options) (net.Listener, error) {
	if !authenticated && !netaddr.LoopbackListen(addr) {
		if !o.Config.Insecure {
			return nil, fmt.Errorf("%s %s: %w; listen on 127.0.0.1 (or localhost), or start with --insecure (AGENTD_INSECURE=1, insecure: true) to serve unauthenticated callers from the network", setting, addr, ErrExposed)
		}
		o.Logger.Warn("serving unauthenticated callers beyond this machine (insecure): anyone who reaches this address can run generations on the configured provider keys",
			"setting", setting, "address", addr)
	}
	return listenTCP(addr, setting)
}

// listenerSettings say, for each listener's setting, what else sets it:
// its variable, and the flags (and make variable) that do.
var listenerSettings = map[string]string{
	"listen":         "AGENTD_LISTEN, --listen, or make run LISTEN=host:port",
	"admin.listen":   "AGENTD_ADMIN_LISTEN or --admin-listen",
	"bridge.listen":  "AGENTD_BRIDGE_LISTEN, or agentd bridge --listen",
	"metrics.listen": "AGENTD_METRICS_LISTEN",
	"debug.listen":   "AGENTD_DEBUG_LISTEN",
}

// listenTCP listens on addr, the setting named setting. An address in use
// is the first thing a second agentd on one machine meets: the error
// names the setting and every way to set it.
func listenTCP(addr, setting string) (net.Listener, error) {
	lis, err := net.Listen("tcp", addr)
	if errors.Is(err, syscall.EADDRINUSE) {
		return nil, fmt.Errorf("%s: %w: another agentd, or another program, listens there; stop it, or set %s (%s) to a free address",
			setting, err, setting, listenerSettings[setting])
	}
	if err != nil {
		return nil, fmt.Errorf("%s: %w", setting, err)
	}
	return lis, nil
}

// attend holds replica's liveness in s, so that the other replicas adopt
// its generations as soon as it dies, rather than once their leases lapse.
func attend(s store.Store, replica string) (io.Closer, error) {
	ctx, cancel := context.WithTimeout(context.Background(), store.Timeout)
	defer cancel()
	return s.Generations().Attend(ctx, replica)
}

// newReplicaID names this agentd process among the replicas sharing its
// store: its host name and a random suffix, new at every start, so that a
// restarted agentd never mistakes its predecessor's leases for its own.
func newReplicaID() string {
	host, err := os.Hostname()
	if err != nil || host == "" {
		host = "agentd"
	}
	var b [6]byte
	_, _ = rand.Read(b[:])
	return host + "-" + hex.EncodeToString(b[:])
}
