// Package sharedport serves a gRPC server and an HTTP handler on one
// listener, and stops both gracefully. grpc-go serves its own transport
// (grpc.Server.Serve) faster than it serves through net/http
// (grpc.Server.ServeHTTP), so each connection goes whole to one of the
// two: one whose first HTTP/2 request is gRPC (content-type
// application/grpc) to grpc.Server.Serve, every other one (HTTP/1.1,
// HTTP/2 carrying Connect, gRPC-Web or JSON) to an http.Server. cmux
// reads the first request's headers to decide; the handler still serves
// gRPC through ServeHTTP, for a connection that carries both.
//
// With TLS, the port terminates it before the split, offering h2 and
// http/1.1: the gRPC server is given Credentials, which pass the
// handshaken connection through with its credentials.TLSInfo, and the
// HTTP handler sees the connection's state as r.TLS; a client
// certificate authenticates the same on both sides.
package sharedport

import (
	"context"
	"crypto/tls"
	"log/slog"
	"net"
	"net/http"
	"sync"
	"time"

	"github.com/soheilhy/cmux"
	"google.golang.org/grpc"
	"google.golang.org/grpc/health"
)

// firstRequestTimeout bounds how long a new connection may take to finish
// its TLS handshake and send its first request's headers, which decide
// where it goes; and an HTTP request's headers.
const firstRequestTimeout = 20 * time.Second

// grpcMatchers find a gRPC connection by its first request's content
// type: application/grpc (grpc-go, grpc-java, Python's grpcio) or
// application/grpc+codec (Connect-ES's gRPC transport), not gRPC-Web's. gRPC
// clients wait for the server's SETTINGS before they send their first
// request, so each matcher sends SETTINGS: every HTTP/2 connection
// that neither matches has had len(grpcMatchers) of them
// (settingsAckListener).
var grpcMatchers = []cmux.MatchWriter{
	cmux.HTTP2MatchHeaderFieldSendSettings("content-type", "application/grpc"),
	cmux.HTTP2MatchHeaderFieldPrefixSendSettings("content-type", "application/grpc+"),
}

// idleTimeout closes an HTTP connection that has carried no request for
// this long. gRPC's connections have keepalives of their own
// (internal/grpcserver).
const idleTimeout = 5 * time.Minute

// Options configures Serve.
type Options struct {
	// GRPC serves the gRPC connections; with TLS it must have been built
	// with Credentials.
	GRPC *grpc.Server
	// Health turns NOT_SERVING when the shutdown begins.
	Health *health.Server
	// HTTP serves every other connection.
	HTTP http.Handler
	// TLS, when not nil, is the port's TLS configuration: Serve adds the
	// ALPN protocols h2 and http/1.1 to it.
	TLS *tls.Config
	// Grace is how long running calls and requests get to finish once ctx
	// ends, before they are cut.
	Grace time.Duration
	// Logger receives the HTTP server's own errors.
	Logger *slog.Logger
}

// Serve serves lis until ctx ends, then stops gracefully: health turns
// NOT_SERVING, both servers stop accepting, running calls and requests
// get o.Grace to finish, and whatever is left is cut; a connection that
// never sent its first request is closed. It returns nil after a shutdown
// asked for by ctx, or the error of whichever part stopped first on its
// own, once every part has stopped.
func Serve(ctx context.Context, lis net.Listener, o Options) error {
	p := newPort(lis, o)
	errc := make(chan error, 3)
	go func() { errc <- p.mux.Serve() }()
	go func() { errc <- o.GRPC.Serve(p.grpcLis) }()
	go func() { errc <- p.http.Serve(p.httpLis) }()
	running := 3
	var err error
	select {
	case err = <-errc:
		running--
	case <-ctx.Done():
	}
	p.stop(o)
	for range running {
		<-errc // after a stop, each part's error only says it was stopped
	}
	return err
}

// port is one listener's split: the multiplexer, the listener of each side
// and the connections accepted.
type port struct {
	mux     cmux.CMux
	grpcLis net.Listener
	httpLis net.Listener
	http    *http.Server
	conns   *conns
}

func newPort(lis net.Listener, o Options) *port {
	p := &port{conns: &conns{open: make(map[*trackedConn]struct{})}}
	var root net.Listener = &trackingListener{Listener: lis, conns: p.conns}
	if o.TLS != nil {
		root = tls.NewListener(root, withALPN(o.TLS))
	}
	p.mux = cmux.New(root)
	p.mux.SetReadTimeout(firstRequestTimeout)
	// Both sides' Close stop the multiplexer and the listener once: the
	// servers close their listener as they stop, in any order.
	closer := &onceCloser{close: func() { p.mux.Close(); root.Close() }}
	p.grpcLis = closingListener{p.mux.MatchWithWriters(grpcMatchers...), closer}
	p.httpLis = settingsAckListener{closingListener{p.mux.Match(cmux.Any()), closer}}
	var protocols http.Protocols
	protocols.SetHTTP1(true)
	// HTTP/2 arrives here as plaintext: TLS, when there is any, ended
	// before the split.
	protocols.SetUnencryptedHTTP2(true)
	p.http = &http.Server{
		Handler:           withTLSState(o.HTTP),
		Protocols:         &protocols,
		ConnContext:       contextWithTLSState,
		ReadHeaderTimeout: firstRequestTimeout,
		IdleTimeout:       idleTimeout,
		ErrorLog:          slog.NewLogLogger(o.Logger.Handler(), slog.LevelWarn),
	}
	return p
}

// stop stops both servers gracefully, cuts them after o.Grace, then
// closes the connections neither took: those still to send their first
// request, which the multiplexer waits for.
func (p *port) stop(o Options) {
	o.Health.Shutdown()
	ctx, cancel := context.WithTimeout(context.Background(), o.Grace)
	defer cancel()
	httpDone := make(chan struct{})
	go func() {
		defer close(httpDone)
		if p.http.Shutdown(ctx) != nil {
			p.http.Close()
		}
	}()
	grpcDone := make(chan struct{})
	go func() {
		o.GRPC.GracefulStop()
		close(grpcDone)
	}()
	select {
	case <-grpcDone:
	case <-ctx.Done():
		o.GRPC.Stop()
		<-grpcDone
	}
	<-httpDone
	p.mux.Close()
	p.conns.closeAll()
}

// closingListener is one side's listener, whose Close stops the whole
// port's accepting.
type closingListener struct {
	net.Listener
	closer *onceCloser
}

func (l closingListener) Close() error {
	l.closer.do()
	return nil
}

type onceCloser struct {
	once  sync.Once
	close func()
}

func (c *onceCloser) do() { c.once.Do(c.close) }

// conns are the connections a port accepted and nobody closed yet.
type conns struct {
	mu   sync.Mutex
	open map[*trackedConn]struct{}
}

func (s *conns) add(c *trackedConn) {
	s.mu.Lock()
	s.open[c] = struct{}{}
	s.mu.Unlock()
}

func (s *conns) remove(c *trackedConn) {
	s.mu.Lock()
	delete(s.open, c)
	s.mu.Unlock()
}

func (s *conns) closeAll() {
	s.mu.Lock()
	open := make([]*trackedConn, 0, len(s.open))
	for c := range s.open {
		open = append(open, c)
	}
	s.mu.Unlock()
	for _, c := range open {
		c.Close()
	}
}

// trackingListener accepts connections into conns.
type trackingListener struct {
	net.Listener
	conns *conns
}

func (l *trackingListener) Accept() (net.Conn, error) {
	c, err := l.Listener.Accept()
	if err != nil {
		return nil, err
	}
	tc := &trackedConn{Conn: c, conns: l.conns}
	l.conns.add(tc)
	return tc, nil
}

// trackedConn leaves its conns when it closes.
type trackedConn struct {
	net.Conn
	conns *conns
	once  sync.Once
}

func (c *trackedConn) Close() error {
	c.once.Do(func() { c.conns.remove(c) })
	return c.Conn.Close()
}

// NetConn is the connection accepted.
func (c *trackedConn) NetConn() net.Conn { return c.Conn }
