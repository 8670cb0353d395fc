package sharedport

import (
	"context"
	"crypto/tls"
	"errors"
	"net"
	"net/http"
	"sync"

	"github.com/soheilhy/cmux"
	"google.golang.org/grpc/credentials"
)

// alpn are the protocols a TLS port offers: HTTP/2 for gRPC and every
// HTTP/2 client, HTTP/1.1 for the rest.
var alpn = []string{"h2", "http/1.1"}

// withALPN is cfg offering alpn, also in each configuration its
// GetConfigForClient serves a handshake with (internal/tlsconf's, which
// follows the files as they rotate).
func withALPN(cfg *tls.Config) *tls.Config {
	cfg = cfg.Clone()
	cfg.NextProtos = alpn
	if cfg.GetConfigForClient != nil {
		cfg.GetConfigForClient = (&alpnConfigs{get: cfg.GetConfigForClient}).forClient
	}
	return cfg
}

// alpnConfigs adds alpn to the configurations get returns, copying each
// once: get returns the same one until the files change.
type alpnConfigs struct {
	get func(*tls.ClientHelloInfo) (*tls.Config, error)

	mu       sync.Mutex
	from, to *tls.Config
}

func (a *alpnConfigs) forClient(hello *tls.ClientHelloInfo) (*tls.Config, error) {
	cfg, err := a.get(hello)
	if cfg == nil || err != nil {
		return cfg, err
	}
	a.mu.Lock()
	defer a.mu.Unlock()
	if cfg != a.from {
		a.from, a.to = cfg, cfg.Clone()
		a.to.NextProtos = alpn
	}
	return a.to, nil
}

// Credentials are the transport credentials of a gRPC server served by
// Serve with TLS: Serve has done the handshake already, so they pass the
// connection through, with the handshake's state as the peer's
// credentials.TLSInfo (what tlsconf.PeerCertificate reads).
func Credentials() credentials.TransportCredentials { return passthrough{} }

type passthrough struct{}

var errNotTLS = errors.New("sharedport: the connection is not one Serve terminated TLS on")

func (passthrough) ServerHandshake(c net.Conn) (net.Conn, credentials.AuthInfo, error) {
	tc := tlsConn(c)
	if tc == nil {
		return nil, nil, errNotTLS
	}
	return c, credentials.TLSInfo{
		State:          tc.ConnectionState(),
		CommonAuthInfo: credentials.CommonAuthInfo{SecurityLevel: credentials.PrivacyAndIntegrity},
	}, nil
}

func (passthrough) ClientHandshake(context.Context, string, net.Conn) (net.Conn, credentials.AuthInfo, error) {
	return nil, nil, errors.New("sharedport: Credentials serve, they do not dial")
}

func (passthrough) Info() credentials.ProtocolInfo {
	return credentials.ProtocolInfo{SecurityProtocol: "tls"}
}

func (p passthrough) Clone() credentials.TransportCredentials { return p }

func (passthrough) OverrideServerName(string) error { return nil }

// tlsConn is the TLS connection c wraps, or nil when it wraps none.
func tlsConn(c net.Conn) *tls.Conn {
	for {
		switch v := c.(type) {
		case *tls.Conn:
			return v
		case *cmux.MuxConn:
			c = v.Conn
		case interface{ NetConn() net.Conn }:
			c = v.NetConn()
		default:
			return nil
		}
	}
}

type tlsStateKey struct{}

// contextWithTLSState keeps the state of c's TLS, if it has any, for
// withTLSState: the HTTP server, given connections whose TLS ended before
// it, sets no request's TLS itself.
func contextWithTLSState(ctx context.Context, c net.Conn) context.Context {
	tc := tlsConn(c)
	if tc == nil {
		return ctx
	}
	st := tc.ConnectionState()
	return context.WithValue(ctx, tlsStateKey{}, &st)
}

// withTLSState gives h's requests their connection's TLS state, as
// grpc.Server.ServeHTTP reads it for the peer's credentials.TLSInfo.
func withTLSState(h http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if st, ok := r.Context().Value(tlsStateKey{}).(*tls.ConnectionState); ok && r.TLS == nil {
			withState := *r
			withState.TLS = st
			r = &withState
		}
		h.ServeHTTP(w, r)
	})
}
