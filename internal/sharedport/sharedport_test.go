package sharedport_test

import (
	"context"
	"crypto/tls"
	"errors"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptrace"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"connectrpc.com/connect"
	"go.uber.org/goleak"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/health"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"

	"github.com/agentd/agentd/internal/sharedport"
	"github.com/agentd/agentd/internal/tlsconf"
	"github.com/agentd/agentd/internal/tlsconf/tlstest"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// port is a running Serve on loopback: a gRPC server with health, whose
// callers' certificates it records, and an HTTP handler that counts its
// requests and hands gRPC to the gRPC server.
type port struct {
	addr  string
	http  atomic.Int32 // requests the HTTP handler served
	block chan struct{}

	mu    sync.Mutex
	peers []string // the principals of the gRPC calls' client certificates, "" for none
	stop  func() error
}

func (p *port) seen(principal string) {
	p.mu.Lock()
	p.peers = append(p.peers, principal)
	p.mu.Unlock()
}

func (p *port) principals() []string {
	p.mu.Lock()
	defer p.mu.Unlock()
	return append([]string(nil), p.peers...)
}

// serve starts a port, over TLS when cfg is not nil, with grace.
func serve(t *testing.T, cfg *tls.Config, grace time.Duration) *port {
	t.Helper()
	p := &port{block: make(chan struct{})}
	opts := []grpc.ServerOption{grpc.UnaryInterceptor(func(ctx context.Context, req any, _ *grpc.UnaryServerInfo, h grpc.UnaryHandler) (any, error) {
		principal := ""
		if cert := tlsconf.PeerCertificate(ctx); cert != nil {
			principal = tlsconf.Principal(cert, tlsconf.PrincipalCN)
		}
		p.seen(principal)
		return h(ctx, req)
	})}
	if cfg != nil {
		opts = append(opts, grpc.Creds(sharedport.Credentials()))
	}
	srv := grpc.NewServer(opts...)
	hs := health.NewServer()
	healthpb.RegisterHealthServer(srv, hs)
	handler := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		p.http.Add(1)
		switch {
		case r.Header.Get("Content-Type") == "application/grpc":
			srv.ServeHTTP(w, r)
		case r.URL.Path == "/block":
			w.WriteHeader(http.StatusOK)
			w.(http.Flusher).Flush()
			select {
			case <-p.block:
			case <-r.Context().Done():
			}
		default:
			peer := ""
			if r.TLS != nil && len(r.TLS.PeerCertificates) > 0 {
				peer = tlsconf.Principal(r.TLS.PeerCertificates[0], tlsconf.PrincipalCN)
			}
			_, _ = io.WriteString(w, r.Proto+" "+peer)
		}
	})
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() {
		done <- sharedport.Serve(ctx, lis, sharedport.Options{
			GRPC: srv, Health: hs, HTTP: handler, TLS: cfg, Grace: grace, Logger: slog.New(slog.DiscardHandler),
		})
	}()
	var once sync.Once
	var serveErr error
	p.stop = func() error {
		once.Do(func() {
			cancel()
			serveErr = <-done
		})
		return serveErr
	}
	t.Cleanup(func() {
		if err := p.stop(); err != nil {
			t.Errorf("Serve: %v", err)
		}
	})
	p.addr = lis.Addr().String()
	return p
}

// check calls health over native gRPC.
func check(t *testing.T, addr string, creds credentials.TransportCredentials) error {
	t.Helper()
	conn, err := grpc.NewClient(addr, grpc.WithTransportCredentials(creds))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	_, err = healthpb.NewHealthClient(conn).Check(t.Context(), &healthpb.HealthCheckRequest{})
	return err
}

// h2c is an HTTP client that speaks HTTP/2 without TLS.
func h2c() *http.Client {
	var protocols http.Protocols
	protocols.SetUnencryptedHTTP2(true)
	return &http.Client{Transport: &http.Transport{Protocols: &protocols}}
}

// get GETs url with client and returns the body, and whether the request
// went on a connection an earlier request had opened.
func get(t *testing.T, client *http.Client, url string) (body string, reused bool) {
	t.Helper()
	ctx := httptrace.WithClientTrace(t.Context(), &httptrace.ClientTrace{GotConn: func(info httptrace.GotConnInfo) { reused = info.Reused }})
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		t.Fatal(err)
	}
	res, err := client.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	b, err := io.ReadAll(res.Body)
	if err != nil {
		t.Fatal(err)
	}
	return string(b), reused
}

// grpcOverHTTP calls health with connect-go's gRPC protocol over client.
func grpcOverHTTP(client *http.Client, baseURL string, ctx context.Context) error {
	check := connect.NewClient[healthpb.HealthCheckRequest, healthpb.HealthCheckResponse](client,
		baseURL+healthpb.Health_Check_FullMethodName, connect.WithGRPC())
	_, err := check.CallUnary(ctx, connect.NewRequest(&healthpb.HealthCheckRequest{}))
	return err
}

// Native gRPC goes to the gRPC server's own transport; HTTP/1.1 and
// HTTP/2 to the handler, which on a connection opened by another request
// still serves gRPC.
func TestSplit(t *testing.T) {
	t.Parallel()
	p := serve(t, nil, time.Second)
	if err := check(t, p.addr, insecure.NewCredentials()); err != nil || p.http.Load() != 0 {
		t.Fatalf("native gRPC: %v, with %d requests to the HTTP handler; want it served by the gRPC server", err, p.http.Load())
	}
	if body, _ := get(t, http.DefaultClient, "http://"+p.addr+"/"); body != "HTTP/1.1 " {
		t.Errorf("HTTP/1.1: %q", body)
	}
	client := h2c()
	defer client.CloseIdleConnections()
	if body, _ := get(t, client, "http://"+p.addr+"/"); body != "HTTP/2.0 " {
		t.Errorf("h2c: %q", body)
	}
	// Several requests on the connection: it survived the SETTINGS the
	// gRPC matcher sent.
	for range 3 {
		if body, reused := get(t, client, "http://"+p.addr+"/"); body != "HTTP/2.0 " || !reused {
			t.Errorf("h2c again: %q on a reused connection %v", body, reused)
		}
	}
	before := p.http.Load()
	if err := grpcOverHTTP(client, "http://"+p.addr, t.Context()); err != nil || p.http.Load() != before+1 {
		t.Errorf("gRPC on the h2c connection: %v, %d requests to the handler; want served through it", err, p.http.Load()-before)
	}
	// A new connection whose first request is gRPC goes to the gRPC server.
	fresh := h2c()
	defer fresh.CloseIdleConnections()
	before = p.http.Load()
	if err := grpcOverHTTP(fresh, "http://"+p.addr, t.Context()); err != nil || p.http.Load() != before {
		t.Errorf("gRPC first on a new h2c connection: %v, %d requests to the handler; want none", err, p.http.Load()-before)
	}
}

// A first request of content type application/grpc+proto (as
// Connect-ES's gRPC transport sends) goes to the gRPC server too.
func TestSplitGRPCWithCodec(t *testing.T) {
	t.Parallel()
	p := serve(t, nil, time.Second)
	client := h2c()
	defer client.CloseIdleConnections()
	// An empty HealthCheckRequest, framed as gRPC frames a message.
	req, err := http.NewRequestWithContext(t.Context(), http.MethodPost, "http://"+p.addr+healthpb.Health_Check_FullMethodName,
		strings.NewReader("\x00\x00\x00\x00\x00"))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/grpc+proto")
	req.Header.Set("Te", "trailers")
	res, err := client.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	if _, err := io.ReadAll(res.Body); err != nil {
		t.Fatal(err)
	}
	if got := res.Trailer.Get("Grpc-Status"); got != "0" || p.http.Load() != 0 {
		t.Errorf("grpc-status %q, %d requests to the handler; want 0 and none", got, p.http.Load())
	}
}

// With TLS, the port terminates it, offering h2 and http/1.1, and a
// verified client certificate is the peer's on either side, gRPC served
// natively or through the handler.
func TestTLS(t *testing.T) {
	t.Parallel()
	ca := tlstest.NewCA(t)
	server := ca.Leaf(t, "127.0.0.1").Certificate(t)
	client := ca.Leaf(t, "alice").Certificate(t)
	p := serve(t, &tls.Config{
		MinVersion: tls.VersionTLS12, Certificates: []tls.Certificate{server},
		ClientCAs: ca.Pool(), ClientAuth: tls.RequireAndVerifyClientCert,
	}, time.Second)
	clientTLS := func() *tls.Config {
		return &tls.Config{MinVersion: tls.VersionTLS12, RootCAs: ca.Pool(), Certificates: []tls.Certificate{client}, ServerName: "127.0.0.1"}
	}
	if err := check(t, p.addr, credentials.NewTLS(clientTLS())); err != nil || p.http.Load() != 0 {
		t.Fatalf("native gRPC over TLS: %v, %d requests to the handler", err, p.http.Load())
	}
	h1 := &http.Client{Transport: &http.Transport{TLSClientConfig: clientTLS()}}
	defer h1.CloseIdleConnections()
	if body, _ := get(t, h1, "https://"+p.addr+"/"); body != "HTTP/1.1 alice" {
		t.Errorf("HTTP/1.1 over TLS: %q; want the client certificate's principal", body)
	}
	h2 := &http.Client{Transport: &http.Transport{TLSClientConfig: clientTLS(), ForceAttemptHTTP2: true}}
	defer h2.CloseIdleConnections()
	if body, _ := get(t, h2, "https://"+p.addr+"/"); body != "HTTP/2.0 alice" {
		t.Errorf("HTTP/2 over TLS: %q; want h2 (ALPN) and the client certificate's principal", body)
	}
	if err := grpcOverHTTP(h2, "https://"+p.addr, t.Context()); err != nil {
		t.Errorf("gRPC through the handler over TLS: %v", err)
	}
	if got := p.principals(); len(got) != 2 || got[0] != "alice" || got[1] != "alice" {
		t.Errorf("the gRPC calls' peers: %q; want alice natively and through the handler", got)
	}
	anonymous := clientTLS()
	anonymous.Certificates = nil
	if err := check(t, p.addr, credentials.NewTLS(anonymous)); err == nil {
		t.Error("a client without a certificate was served")
	}
}

// The shutdown gives running calls and requests the grace, then
// cuts them; a connection that never sent a request does not hold it up.
func TestShutdownCutsAfterGrace(t *testing.T) {
	t.Parallel()
	p := serve(t, nil, 50*time.Millisecond)
	silent, err := net.Dial("tcp", p.addr)
	if err != nil {
		t.Fatal(err)
	}
	defer silent.Close()
	conn, err := grpc.NewClient(p.addr, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	watch, err := healthpb.NewHealthClient(conn).Watch(t.Context(), &healthpb.HealthCheckRequest{})
	if err == nil {
		_, err = watch.Recv() // SERVING: the stream runs
	}
	if err != nil {
		t.Fatal(err)
	}
	res, err := http.Get("http://" + p.addr + "/block")
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	if err := p.stop(); err != nil {
		t.Errorf("Serve: %v", err)
	}
	for {
		if _, err := watch.Recv(); err != nil {
			break
		}
	}
	if _, err := io.ReadAll(res.Body); err == nil {
		t.Error("the blocked request ended well; want it cut")
	}
}

// A listener that fails ends Serve with its error.
func TestListenerFailure(t *testing.T) {
	t.Parallel()
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := grpc.NewServer()
	done := make(chan error, 1)
	go func() {
		done <- sharedport.Serve(context.Background(), lis, sharedport.Options{
			GRPC: srv, Health: health.NewServer(), HTTP: http.NotFoundHandler(), Grace: time.Second, Logger: slog.New(slog.DiscardHandler),
		})
	}()
	lis.Close()
	if err := <-done; err == nil || !errors.Is(err, net.ErrClosed) {
		t.Errorf("Serve: %v; want the listener's error", err)
	}
}
