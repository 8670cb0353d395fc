package app

import (
	"context"
	"crypto/tls"
	"log/slog"
	"net/http"
	"time"

	"google.golang.org/grpc"

	"github.com/agentd/agentd/internal/config"
	"github.com/agentd/agentd/internal/console"
	"github.com/agentd/agentd/internal/grpcserver"
	"github.com/agentd/agentd/internal/httpapi"
	"github.com/agentd/agentd/internal/netaddr"
	"github.com/agentd/agentd/internal/sharedport"
	"github.com/agentd/agentd/internal/tlsconf"
)

// port is what a listener of agentd's public services serves beside their
// gRPC server (internal/sharedport): the same services over HTTP
// (internal/httpapi), and the TLS the port ends before it hands a
// connection to either side.
type port struct {
	web http.Handler
	tls *tls.Config // nil: plaintext
}

// configure prepares opts, a public service's gRPC server, for p: its
// errors give HTTP clients their Retry-After, and with a certificate in
// settings (the setting named setting) p ends TLS and the server takes
// the handshaken connections as they come.
func (p *port) configure(opts *grpcserver.Options, settings config.TLS, setting string, log *slog.Logger) error {
	opts.Unary = append([]grpc.UnaryServerInterceptor{httpapi.UnaryRetryAfter}, opts.Unary...)
	opts.Stream = append([]grpc.StreamServerInterceptor{httpapi.StreamRetryAfter}, opts.Stream...)
	if !settings.Enabled() {
		return nil
	}
	cfg, err := tlsconf.Server(settings, setting, log)
	if err != nil {
		return err
	}
	p.tls, opts.Creds = cfg, sharedport.Credentials()
	return nil
}

// serveHTTP makes p's HTTP side for srv, whose services are registered,
// with the web console when withConsole.
func (p *port) serveHTTP(srv *grpc.Server, cfg config.Config, withConsole bool) error {
	o := httpapi.Options{CORS: cfg.HTTP.CORS}
	if withConsole {
		o.Console = console.Handler(console.Config{TraceURL: cfg.Console.TraceURL})
	}
	var err error
	p.web, err = httpapi.New(srv, o)
	return err
}

// serve serves ep until ctx ends: on a port shared with HTTP, or gRPC
// alone.
func (ep endpoint) serve(ctx context.Context, grace time.Duration, log *slog.Logger) error {
	if ep.port == nil {
		return grpcserver.Serve(ctx, ep.srv, ep.hs, ep.lis, grace)
	}
	return sharedport.Serve(ctx, ep.lis, sharedport.Options{
		GRPC: ep.srv, Health: ep.hs, HTTP: ep.port.web, TLS: ep.port.tls, Grace: grace, Logger: log,
	})
}

// serveHTTP serves the public services over HTTP beside gRPC: on listen,
// and on admin.listen when the AdminService is there.
func (a *Agent) serveHTTP(cfg config.Config) error {
	withConsole := cfg.Console.Serve(cfg.Auth.Enabled(), netaddr.LoopbackListen(cfg.Listen))
	if err := a.web.serveHTTP(a.Server, cfg, withConsole); err != nil {
		return err
	}
	if a.Admin != nil {
		return a.adminWeb.serveHTTP(a.Admin, cfg, false)
	}
	return nil
}
