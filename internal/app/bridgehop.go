package app

import (
	"context"
	"log/slog"
	"slices"
	"strings"

	"google.golang.org/genproto/googleapis/rpc/errdetails"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/peer"
	"google.golang.org/grpc/resolver"
	"google.golang.org/grpc/resolver/manual"
	"google.golang.org/grpc/status"

	"github.com/agentd/agentd/internal/config"
	"github.com/agentd/agentd/internal/grpcserver"
	"github.com/agentd/agentd/internal/netaddr"
	"github.com/agentd/agentd/internal/sessionpin"
	"github.com/agentd/agentd/internal/tlsconf"
)

// The hop between `agentd serve` and a remote `agentd bridge`:
// agentd dials over TLS with its client certificate (bridge.tls), and a
// bridge with bridge.trusted_peers serves only the agentd instances whose
// verified certificates it lists, since their requests name the tenant.

// ErrorInfo reasons of the bridge's refusals of a peer.
const (
	reasonPeerCertificateRequired = "BRIDGE_PEER_CERTIFICATE_REQUIRED"
	reasonPeerNotTrusted          = "BRIDGE_PEER_NOT_TRUSTED"
)

// dialRemoteBridge connects to the remote bridge at bridge.address, over
// TLS when bridge.tls says so (plaintext, with a warning, beyond this
// machine otherwise). The address may resolve to several replicas, or list
// them; sessionpin balances them: each session's RPCs reach the
// replica that opened it. Errors of the hop that the bridge did not return
// itself name the bridge (bridgeHopErrors).
func dialRemoteBridge(o Options, extra ...grpc.DialOption) (*grpc.ClientConn, error) {
	b := o.Config.Bridge
	var creds credentials.TransportCredentials
	if b.TLS.Dials() {
		cfg, err := tlsconf.Dialling(b.TLS, "bridge.tls", o.Logger)
		if err != nil {
			return nil, err
		}
		creds = credentials.NewTLS(cfg)
	} else if !bridgeOnLoopback(b) {
		o.Logger.Warn("dialling the bridge in plaintext beyond this machine: set bridge.tls (cert_file, key_file, ca_file) for mutual TLS",
			"bridge", b.Address)
	}
	h := bridgeHopErrors{address: b.Address}
	target := b.Address
	if list := b.AddressList(); list != nil {
		target = bridgeListScheme + ":///bridges"
		extra = append(extra, grpc.WithResolvers(listResolver(list)))
	}
	// The service config is ours alone: one that a DNS TXT record offers
	// is not read.
	extra = append(extra, grpc.WithDefaultServiceConfig(sessionpin.ServiceConfig), grpc.WithDisableServiceConfig(),
		grpc.WithChainUnaryInterceptor(h.unary), grpc.WithChainStreamInterceptor(h.stream))
	return grpcserver.Dial(target, o.Telemetry, creds, extra...)
}

// bridgeListScheme is the resolver scheme of a bridge.address that lists
// its replicas.
const bridgeListScheme = "agentd-bridges"

// listResolver resolves to the replicas of a bridge.address list, each
// named as its entry says (the name its TLS certificate must carry, unless
// bridge.tls.server_name says otherwise), as a DNS target's addresses are
// named by the target.
func listResolver(list []string) *manual.Resolver {
	r := manual.NewBuilderWithScheme(bridgeListScheme)
	var state resolver.State
	for _, a := range list {
		state.Addresses = append(state.Addresses, resolver.Address{Addr: a, ServerName: a})
	}
	r.InitialState(state)
	return r
}

// bridgeOnLoopback reports whether every replica bridge.address names is
// on this machine: the entries of a list, or the endpoint of a target
// (dns:///localhost:7071).
func bridgeOnLoopback(b config.Bridge) bool {
	list := b.AddressList()
	if list == nil {
		endpoint := b.Address
		if _, rest, ok := strings.Cut(b.Address, "://"); ok {
			_, endpoint, _ = strings.Cut(rest, "/")
		}
		list = []string{endpoint}
	}
	for _, a := range list {
		if !netaddr.LoopbackListen(a) {
			return false
		}
	}
	return true
}

// bridgeHopErrors rewrites the errors of the hop to a remote bridge that
// say nothing about the request: a connection that cannot be made (the
// bridge down, its certificate not trusted, this agentd's refused in the
// handshake) and the bridge's refusal of this agentd as a peer. Both are
// Unavailable naming the bridge: the caller can do nothing about either,
// and the operator needs to know which hop failed. Everything else the
// bridge returns passes unchanged, to be translated by the server.
type bridgeHopErrors struct {
	address string
}

func (h bridgeHopErrors) unary(ctx context.Context, method string, req, reply any, cc *grpc.ClientConn, invoker grpc.UnaryInvoker, opts ...grpc.CallOption) error {
	var p peer.Peer
	err := invoker(ctx, method, req, reply, cc, append(opts[:len(opts):len(opts)], grpc.Peer(&p))...)
	if err != nil && p.Addr == nil {
		return h.unreachable(err)
	}
	return h.refused(err)
}

func (h bridgeHopErrors) stream(ctx context.Context, desc *grpc.StreamDesc, cc *grpc.ClientConn, method string, streamer grpc.Streamer, opts ...grpc.CallOption) (grpc.ClientStream, error) {
	s, err := streamer(ctx, desc, cc, method, opts...)
	if err != nil {
		// No stream: the bridge never saw the call.
		return nil, h.unreachable(err)
	}
	return &hopStream{ClientStream: s, h: h}, nil
}

// unreachable names the bridge in an Unavailable error of the connection.
func (h bridgeHopErrors) unreachable(err error) error {
	st, ok := status.FromError(err)
	if !ok || st.Code() != codes.Unavailable {
		return err
	}
	return status.Errorf(codes.Unavailable, "the bridge at %s is unavailable: %s", h.address, st.Message())
}

// refused turns the bridge's refusal of this agentd as a peer into
// Unavailable naming the bridge.
func (h bridgeHopErrors) refused(err error) error {
	st, ok := status.FromError(err)
	if !ok || st.Code() != codes.Unauthenticated && st.Code() != codes.PermissionDenied {
		return err
	}
	for _, d := range st.Details() {
		if info, ok := d.(*errdetails.ErrorInfo); ok && (info.GetReason() == reasonPeerNotTrusted || info.GetReason() == reasonPeerCertificateRequired) {
			return status.Errorf(codes.Unavailable, "the bridge at %s refuses this agentd: %s", h.address, st.Message())
		}
	}
	return err
}

// hopStream rewrites the bridge's refusal, which a stream receives.
type hopStream struct {
	grpc.ClientStream
	h bridgeHopErrors
}

func (s *hopStream) RecvMsg(m any) error { return s.h.refused(s.ClientStream.RecvMsg(m)) }

// openMethods are served to every peer: health and reflection.
var openMethods = []string{"/grpc.health.v1.Health/", "/grpc.reflection.v1.ServerReflection/", "/grpc.reflection.v1alpha.ServerReflection/"}

// trustedPeers admits to every service but health and reflection only
// peers whose verified client certificate's principal (as from selects
// it, tlsconf.Principal) is among list: the tenant a request names is
// believed only from them. A refusal is logged with the principal and
// nothing else of the certificate.
type trustedPeers struct {
	list []string
	from string
	log  *slog.Logger
}

func (t trustedPeers) check(ctx context.Context, method string) error {
	if slices.ContainsFunc(openMethods, func(prefix string) bool { return strings.HasPrefix(method, prefix) }) {
		return nil
	}
	cert := tlsconf.PeerCertificate(ctx)
	if cert == nil {
		t.log.Warn("bridge peer refused: no verified client certificate", "audit", true, "method", method)
		return refusal(codes.Unauthenticated, reasonPeerCertificateRequired, "the bridge serves only peers with a verified client certificate")
	}
	principal := tlsconf.Principal(cert, t.from)
	if !slices.Contains(t.list, principal) {
		t.log.Warn("bridge peer refused: not among bridge.trusted_peers", "audit", true, "principal", principal, "method", method)
		return refusal(codes.PermissionDenied, reasonPeerNotTrusted, "this peer's certificate is not among the bridge's trusted peers (bridge.trusted_peers)")
	}
	return nil
}

func refusal(code codes.Code, reason, msg string) error {
	st, err := status.New(code, msg).WithDetails(&errdetails.ErrorInfo{Reason: reason, Domain: "agentd"})
	if err != nil {
		return status.Error(code, msg)
	}
	return st.Err()
}

func (t trustedPeers) unary(ctx context.Context, req any, info *grpc.UnaryServerInfo, handler grpc.UnaryHandler) (any, error) {
	if err := t.check(ctx, info.FullMethod); err != nil {
		return nil, err
	}
	return handler(ctx, req)
}

func (t trustedPeers) stream(srv any, ss grpc.ServerStream, info *grpc.StreamServerInfo, handler grpc.StreamHandler) error {
	if err := t.check(ss.Context(), info.FullMethod); err != nil {
		return err
	}
	return handler(srv, ss)
}

// peerChecks are the interceptors of bridge.trusted_peers on the bridge's
// listener, or none without it.
func peerChecks(cfg config.Config, log *slog.Logger) ([]grpc.UnaryServerInterceptor, []grpc.StreamServerInterceptor) {
	if len(cfg.Bridge.TrustedPeers) == 0 {
		return nil, nil
	}
	t := trustedPeers{list: cfg.Bridge.TrustedPeers, from: cfg.Auth.MTLS.PrincipalFrom, log: log}
	return []grpc.UnaryServerInterceptor{t.unary}, []grpc.StreamServerInterceptor{t.stream}
}
