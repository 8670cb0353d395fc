// Package grpcserver builds agentd's gRPC servers and client connections
// the same way on every hop: otelgrpc stats handlers (with the W3C
// propagator, so traces cross from server to bridge), slog logging with
// trace ids, panic recovery innermost, gRPC health and server reflection;
// and serves them until their context ends, then stops gracefully.
package grpcserver

import (
	"context"
	"errors"
	"log/slog"
	"net"
	"runtime"
	"runtime/debug"
	"time"

	"github.com/grpc-ecosystem/go-grpc-middleware/v2/interceptors/logging"
	"github.com/grpc-ecosystem/go-grpc-middleware/v2/interceptors/recovery"
	"go.opentelemetry.io/contrib/instrumentation/google.golang.org/grpc/otelgrpc"
	"go.opentelemetry.io/contrib/instrumentation/google.golang.org/grpc/otelgrpc/filters"
	"go.opentelemetry.io/otel/metric"
	"go.opentelemetry.io/otel/metric/noop"
	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/trace"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/health"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/grpc/keepalive"
	"google.golang.org/grpc/reflection"
	"google.golang.org/grpc/status"

	"github.com/agentd/agentd/internal/telemetry"
)

// Telemetry selects the tracer provider, meter provider and propagator of
// a server or connection. The zero value uses the global tracer provider,
// no metrics, and telemetry.Propagator().
type Telemetry struct {
	TracerProvider trace.TracerProvider
	// MeterProvider records otelgrpc's rpc.server.* and rpc.client.*
	// metrics; nil records none.
	MeterProvider metric.MeterProvider
	Propagator    propagation.TextMapPropagator
}

func (t Telemetry) options() []otelgrpc.Option {
	p := t.Propagator
	if p == nil {
		p = telemetry.Propagator()
	}
	opts := []otelgrpc.Option{
		otelgrpc.WithPropagators(p),
		otelgrpc.WithFilter(filters.Not(filters.HealthCheck())),
	}
	if t.TracerProvider != nil {
		opts = append(opts, otelgrpc.WithTracerProvider(t.TracerProvider))
	}
	mp := t.MeterProvider
	if mp == nil {
		mp = noop.NewMeterProvider() // not the global one: agentd passes its own
	}
	return append(opts, otelgrpc.WithMeterProvider(mp))
}

// Options configures New.
type Options struct {
	// Logger receives one line per finished call (at debug for gRPC
	// health's Check and Watch, whatever their code; grpc.time_ms a
	// number) and every recovered panic.
	Logger *slog.Logger
	// Telemetry selects tracing.
	Telemetry Telemetry
	// Unary and Stream are extra interceptors (auth), run after logging and
	// before recovery.
	Unary  []grpc.UnaryServerInterceptor
	Stream []grpc.StreamServerInterceptor
	// Creds secure the server's connections (TLS, internal/tlsconf). Nil:
	// plaintext.
	Creds credentials.TransportCredentials
	// QuietOK logs successful calls at debug rather than info: for an
	// internal hop whose every call is already logged by its caller.
	QuietOK bool
	// NoReflection leaves gRPC server reflection out (the configuration's
	// reflection: false); health is registered all the same.
	NoReflection bool
	// InMemory tunes the server for an in-memory listener: no write or
	// read buffering, since a write costs no system call there and
	// buffering only delays it, and fixed flow-control windows, since
	// there is no bandwidth to estimate (the estimator's pings would cost
	// a round trip of frames per call). Pair it with InMemoryDialOptions.
	InMemory bool
}

// inMemoryWindow is the flow-control window of in-memory connections.
const inMemoryWindow = 4 << 20

// InMemoryDialOptions are the client side of Options.InMemory.
func InMemoryDialOptions() []grpc.DialOption {
	return []grpc.DialOption{
		grpc.WithWriteBufferSize(0), grpc.WithReadBufferSize(0),
		grpc.WithInitialWindowSize(inMemoryWindow), grpc.WithInitialConnWindowSize(inMemoryWindow),
	}
}

// New returns a server with the standard interceptors, gRPC health (the
// returned health server starts SERVING for "") and, unless
// o.NoReflection, reflection registered.
// The caller registers its services and marks them SERVING.
func New(o Options) (*grpc.Server, *health.Server) {
	log := o.Logger
	logger := logging.LoggerFunc(func(ctx context.Context, lvl logging.Level, msg string, fields ...any) {
		level := slog.Level(lvl)
		if level > slog.LevelDebug && healthCall(fields) {
			// Probes call every few seconds: at info they would drown
			// the calls that matter.
			level = slog.LevelDebug
		}
		log.Log(ctx, level, msg, fields...)
	})
	logOpts := []logging.Option{logging.WithLogOnEvents(logging.FinishCall), logging.WithDurationField(durationField)}
	if o.QuietOK {
		logOpts = append(logOpts, logging.WithLevels(func(code codes.Code) logging.Level {
			if code == codes.OK {
				return logging.LevelDebug
			}
			return logging.DefaultServerCodeToLevel(code)
		}))
	}
	recoverOpt := recovery.WithRecoveryHandlerContext(func(ctx context.Context, p any) error {
		log.ErrorContext(ctx, "panic recovered", "panic", p, "stack", string(debug.Stack()))
		return status.Error(codes.Internal, "internal error")
	})
	unary := append([]grpc.UnaryServerInterceptor{logging.UnaryServerInterceptor(logger, logOpts...)}, o.Unary...)
	unary = append(unary, recovery.UnaryServerInterceptor(recoverOpt))
	stream := append([]grpc.StreamServerInterceptor{logging.StreamServerInterceptor(logger, logOpts...)}, o.Stream...)
	stream = append(stream, recovery.StreamServerInterceptor(recoverOpt))

	opts := []grpc.ServerOption{
		grpc.NumStreamWorkers(uint32(runtime.NumCPU())), // reused handler goroutines: no stack growth per call
		// Idle connections are pinged, so a dead peer or a NAT that dropped
		// the connection is noticed in a minute and a half, not hours; the
		// pings of Dial's clients (every 30 s) are welcome.
		grpc.KeepaliveParams(keepalive.ServerParameters{Time: time.Minute, Timeout: 20 * time.Second}),
		grpc.KeepaliveEnforcementPolicy(keepalive.EnforcementPolicy{MinTime: 20 * time.Second, PermitWithoutStream: true}),
		grpc.StatsHandler(otelgrpc.NewServerHandler(o.Telemetry.options()...)),
		grpc.ChainUnaryInterceptor(unary...),
		grpc.ChainStreamInterceptor(stream...),
	}
	if o.Creds != nil {
		opts = append(opts, grpc.Creds(o.Creds))
	}
	if o.InMemory {
		opts = append(opts, grpc.WriteBufferSize(0), grpc.ReadBufferSize(0),
			grpc.InitialWindowSize(inMemoryWindow), grpc.InitialConnWindowSize(inMemoryWindow))
	}
	srv := grpc.NewServer(opts...)
	hs := health.NewServer()
	healthpb.RegisterHealthServer(srv, hs)
	if !o.NoReflection {
		reflection.Register(srv)
	}
	return srv, hs
}

// healthCall reports whether a call's log fields are those of a gRPC
// health call (Check or Watch).
func healthCall(fields []any) bool {
	for i := 0; i+1 < len(fields); i += 2 {
		if fields[i] == logging.ServiceFieldKey {
			return fields[i+1] == healthpb.Health_ServiceDesc.ServiceName
		}
	}
	return false
}

// durationField is a call's duration as grpc.time_ms, a number of
// milliseconds (to the microsecond); the middleware's default formats it
// as a string, which a JSON log then quotes.
func durationField(d time.Duration) logging.Fields {
	return logging.Fields{"grpc.time_ms", float64(d.Microseconds()) / 1000}
}

// Serve serves srv on lis until ctx ends, then stops gracefully: health
// turns NOT_SERVING, running calls get grace to finish, and whatever is
// left is cut. It returns nil after a shutdown asked for by ctx.
func Serve(ctx context.Context, srv *grpc.Server, hs *health.Server, lis net.Listener, grace time.Duration) error {
	errc := make(chan error, 1)
	go func() { errc <- srv.Serve(lis) }()
	select {
	case err := <-errc:
		return err
	case <-ctx.Done():
	}
	hs.Shutdown()
	stopped := make(chan struct{})
	go func() {
		srv.GracefulStop()
		close(stopped)
	}()
	timer := time.NewTimer(grace)
	defer timer.Stop()
	select {
	case <-stopped:
	case <-timer.C:
		srv.Stop()
		<-stopped
	}
	if err := <-errc; err != nil && !errors.Is(err, grpc.ErrServerStopped) {
		return err
	}
	return nil
}

// Dial opens a client connection with otelgrpc tracing, secured by creds
// (credentials.NewTLS for TLS; nil: plaintext), with the extra options
// last (a bufconn dialer, for the embedded bridge).
func Dial(target string, tel Telemetry, creds credentials.TransportCredentials, extra ...grpc.DialOption) (*grpc.ClientConn, error) {
	if creds == nil {
		creds = insecure.NewCredentials()
	}
	opts := append([]grpc.DialOption{
		grpc.WithTransportCredentials(creds),
		// A remote bridge that vanished (or a NAT that dropped the idle
		// connection of a long approval wait) is noticed within 40 s.
		grpc.WithKeepaliveParams(keepalive.ClientParameters{Time: 30 * time.Second, Timeout: 10 * time.Second, PermitWithoutStream: true}),
		grpc.WithStatsHandler(otelgrpc.NewClientHandler(tel.options()...)),
	}, extra...)
	return grpc.NewClient(target, opts...)
}
