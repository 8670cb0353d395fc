// Package app wires agentd's services together: the public AgentService
// with its bridge (embedded over an in-memory gRPC listener, or remote),
// and the BridgeService on its own. cmd/agentd and the end-to-end tests
// build the same stacks through it.
package app

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"path/filepath"
	"reflect"
	"sync"
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
	"github.com/agentd/agentd/internal/config"
	"github.com/agentd/agentd/internal/grpcserver"
	"github.com/agentd/agentd/internal/netaddr"
	"github.com/agentd/agentd/internal/policy"
	"github.com/agentd/agentd/internal/store"
	"github.com/agentd/agentd/internal/tlsconf"
	"github.com/agentd/agentd/providers"
	"github.com/agentd/agentd/providers/registry"
	"github.com/agentd/agentd/server"
)

// Options configures a stack.
type Options struct {
	Config    config.Config
	Logger    *slog.Logger
	Telemetry grpcserver.Telemetry
	// Reloads, read by ServeAgent alone, delivers new configurations
	// while it serves: each is applied with Agent.Reload, and one that
	// cannot be is logged and changes nothing. Nil: none.
	Reloads <-chan config.Config
}

// Bridge is a BridgeService and its admin service on their own gRPC
// server.
type Bridge struct {
	Server  *grpc.Server
	Health  *health.Server
	Service *bridge.Service
}

// NewBridge builds a BridgeService server with the admin service, health
// and reflection, over TLS when bridge.tls names a certificate. The
// registered servers' pools start their warm spares.
func NewBridge(o Options) (*Bridge, error) {
	return newBridge(o, false)
}

func newBridge(o Options, inMemory bool) (*Bridge, error) {
	log := o.Logger.With("component", "bridge")
	serverOpts := grpcserver.Options{Logger: log, Telemetry: o.Telemetry, QuietOK: true, InMemory: inMemory}
	if !inMemory {
		creds, err := serverCreds(o.Config.Bridge.TLS, log)
		if err != nil {
			return nil, err
		}
		serverOpts.Creds = creds
	}
	svc, err := bridge.New(bridge.Options{Logger: log, Config: o.Config.Bridge, TracerProvider: o.Telemetry.TracerProvider, Propagator: o.Telemetry.Propagator})
	if err != nil {
		return nil, err
	}
	srv, hs := grpcserver.New(serverOpts)
	svc.Register(srv)
	svc.Admin().Register(srv)
	for _, name := range []string{bridgev1.BridgeService_ServiceDesc.ServiceName, bridgev1.BridgeAdminService_ServiceDesc.ServiceName} {
		hs.SetServingStatus(name, healthpb.HealthCheckResponse_SERVING)
	}
	return &Bridge{Server: srv, Health: hs, Service: svc}, nil
}

// Serve serves the bridge on lis until ctx ends, then stops gracefully and
// stops every MCP server process.
func (b *Bridge) Serve(ctx context.Context, lis net.Listener, o Options) error {
	err := grpcserver.Serve(ctx, b.Server, b.Health, lis, o.Config.ShutdownGrace)
	b.Service.Close()
	return err
}

// Agent is the public AgentService, the bridge it uses and its store of
// paused generations.
type Agent struct {
	Server *grpc.Server
	Health *health.Server

	providers  *providers.Registry
	authn      *auth.Authenticator
	log        *slog.Logger
	mu         sync.Mutex
	config     config.Config // as last applied, for Reload
	store      *store.SQLite
	bridgeConn *grpc.ClientConn
	embedded   *Bridge // nil with a remote bridge
	bridgeLis  *bufconn.Listener
	bridgeDone chan error
	cancel     context.CancelFunc
}

// NewAgent builds the AgentService, over TLS when tls names a
// certificate. With Config.Bridge.Address empty, it
// starts an embedded BridgeService on an in-memory listener, so the
// boundary is always a real gRPC hop; otherwise it dials that address.
// Close releases what NewAgent started if Serve is never called.
func NewAgent(o Options) (*Agent, error) {
	reg, err := registry.New(o.Config.Providers)
	if err != nil {
		return nil, err
	}
	a := &Agent{providers: reg, config: o.Config, log: o.Logger}
	if a.store, err = store.OpenSQLite(filepath.Join(o.Config.StateDir, "agentd.db"), time.Minute); err != nil {
		return nil, err
	}
	// A tool result may be as large as the bridge lets it be (up to
	// config.MaxMessageBytes), more than gRPC's default 4 MiB.
	bridgeResults := grpc.WithDefaultCallOptions(grpc.MaxCallRecvMsgSize(config.MaxMessageBytes + 1<<20))
	if addr := o.Config.Bridge.Address; addr != "" {
		a.bridgeConn, err = grpcserver.Dial(addr, o.Telemetry, bridgeResults)
	} else {
		if a.embedded, err = newBridge(o, true); err != nil {
			a.Close()
			return nil, err
		}
		a.bridgeLis = bufconn.Listen(1 << 20)
		ctx, cancel := context.WithCancel(context.Background())
		a.cancel = cancel
		a.bridgeDone = make(chan error, 1)
		go func() { a.bridgeDone <- a.embedded.Serve(ctx, a.bridgeLis, o) }()
		a.bridgeConn, err = grpcserver.Dial("passthrough:///agentd-bridge", o.Telemetry,
			append(grpcserver.InMemoryDialOptions(), bridgeResults,
				grpc.WithContextDialer(func(ctx context.Context, _ string) (net.Conn, error) { return a.bridgeLis.DialContext(ctx) }))...)
	}
	if err != nil {
		a.Close()
		return nil, err
	}
	log := o.Logger.With("component", "agent")
	serverOpts := grpcserver.Options{Logger: log, Telemetry: o.Telemetry}
	if serverOpts.Creds, err = serverCreds(o.Config.TLS, log); err != nil {
		a.Close()
		return nil, err
	}
	// The interceptors are there even without authentication, letting
	// every call pass, so that a reload can turn it on.
	if a.authn, err = auth.New(o.Config, log); err != nil {
		a.Close()
		return nil, err
	}
	serverOpts.Unary = append(serverOpts.Unary, a.authn.UnaryInterceptor())
	serverOpts.Stream = append(serverOpts.Stream, a.authn.StreamInterceptor())
	a.Server, a.Health = grpcserver.New(serverOpts)
	var rules *policy.Rules
	if a.embedded != nil {
		r := o.Config.Bridge.Rules()
		rules = &r
	}
	svc := server.New(server.Options{
		Rules:          rules,
		Logger:         log,
		Providers:      reg,
		Bridge:         server.NewBridgeClient(a.bridgeConn),
		Config:         o.Config.Generation,
		TracerProvider: o.Telemetry.TracerProvider,
		Checkpoints:    a.store,
	})
	svc.Register(a.Server)
	a.Health.SetServingStatus(agentdv1.AgentService_ServiceDesc.ServiceName, healthpb.HealthCheckResponse_SERVING)
	if a.embedded != nil {
		// The embedded bridge has no address of its own: its admin API is
		// served beside the AgentService.
		a.embedded.Service.Admin().Register(a.Server)
		a.Health.SetServingStatus(bridgev1.BridgeAdminService_ServiceDesc.ServiceName, healthpb.HealthCheckResponse_SERVING)
	}
	return a, nil
}

// Reload applies cfg's auth and tenants (which callers are authenticated,
// as what, and which tenants are served) to the calls that start after it
// returns. The rest of cfg is not applied: a change there is logged as
// needing a restart. An invalid cfg, or one turning authentication off,
// changes nothing, and the error says why. Safe for concurrent use.
func (a *Agent) Reload(cfg config.Config) error {
	a.mu.Lock()
	defer a.mu.Unlock()
	if err := cfg.Validate(); err != nil {
		return fmt.Errorf("config reload: %w", err)
	}
	if err := a.authn.Reload(cfg); err != nil {
		return fmt.Errorf("config reload: %w", err)
	}
	before, after := a.config, cfg
	before.Auth, before.Tenants, after.Auth, after.Tenants = config.Auth{}, nil, config.Auth{}, nil
	if !reflect.DeepEqual(before, after) {
		a.log.Warn("config reload: settings other than auth and tenants changed; they apply at the next start")
	}
	a.config.Auth, a.config.Tenants = cfg.Auth, cfg.Tenants
	a.log.Info("config reloaded: auth and tenants applied", "api_keys", len(cfg.Auth.APIKeys), "oidc_issuers", len(cfg.Auth.OIDC),
		"mtls_principals", len(cfg.Auth.MTLS.Principals), "tenants", len(cfg.Tenants))
	return nil
}

// Serve serves the AgentService on lis until ctx ends, stops it gracefully,
// then stops the bridge (and every MCP server process it runs).
func (a *Agent) Serve(ctx context.Context, lis net.Listener, o Options) error {
	err := grpcserver.Serve(ctx, a.Server, a.Health, lis, o.Config.ShutdownGrace)
	return errors.Join(err, a.Close())
}

// Close stops the embedded bridge, closes the bridge connection and the
// store, and closes the providers' idle connections. Idempotent.
func (a *Agent) Close() error {
	var err error
	if a.cancel != nil {
		a.cancel()
		err = <-a.bridgeDone
		a.cancel = nil
	}
	if a.bridgeConn != nil {
		err = errors.Join(err, a.bridgeConn.Close())
		a.bridgeConn = nil
	}
	if a.store != nil {
		err = errors.Join(err, a.store.Close())
		a.store = nil
	}
	a.providers.CloseIdleConnections()
	return err
}

// ServeAgent listens on the configured address and serves the
// AgentService until ctx ends (what `agentd serve` does once configured).
func ServeAgent(ctx context.Context, o Options) error {
	lis, err := listen(o.Config.Listen, "listen", o.Config.Auth.Enabled(), o)
	if err != nil {
		return err
	}
	a, err := NewAgent(o)
	if err != nil {
		lis.Close()
		return err
	}
	bridgeMode := "embedded"
	if o.Config.Bridge.Address != "" {
		bridgeMode = o.Config.Bridge.Address
	}
	o.Logger.Info("agentd serving", "address", lis.Addr().String(), "bridge", bridgeMode, "state", o.Config.StateDir)
	if o.Reloads == nil {
		return a.Serve(ctx, lis, o)
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
	err = a.Serve(ctx, lis, o)
	stopReloads()
	<-reloading
	return err
}

// ServeBridge listens on bridge.listen and serves the BridgeService alone
// until ctx ends (what `agentd bridge` does once configured).
func ServeBridge(ctx context.Context, o Options) error {
	lis, err := listen(o.Config.Bridge.Listen, "bridge.listen", false, o)
	if err != nil {
		return err
	}
	b, err := NewBridge(o)
	if err != nil {
		lis.Close()
		return err
	}
	o.Logger.Info("agentd bridge serving", "address", lis.Addr().String())
	return b.Serve(ctx, lis, o)
}

// serverCreds are the TLS credentials of a listener (X-I4), or nil for
// plaintext when settings name no certificate.
func serverCreds(settings config.TLS, log *slog.Logger) (credentials.TransportCredentials, error) {
	if !settings.Enabled() {
		return nil, nil
	}
	cfg, err := tlsconf.Server(settings, log)
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
// servers) (X-I1): it is refused, naming the setting, unless the
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
	return net.Listen("tcp", addr)
}
