package app_test

import (
	"context"
	"crypto/tls"
	"log/slog"
	"math/big"
	"net"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/agentd/agentd/internal/logtest"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/credentials/insecure"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/grpc/peer"
	"google.golang.org/grpc/status"

	agentdv1 "github.com/agentd/agentd/gen/go/agentd/v1"
	"github.com/agentd/agentd/internal/app"
	"github.com/agentd/agentd/internal/config"
	"github.com/agentd/agentd/internal/tlsconf/tlstest"
)

// serveTCP serves what serve serves on a loopback TCP port until the test
// ends, and returns its address.
func serveTCP(t *testing.T, serve func(context.Context, net.Listener) error) string {
	t.Helper()
	addr, _ := startTCP(t, serve)
	return addr
}

// startTCP is serveTCP that also returns stop, which ends serve and waits
// for it, reporting its error; stop is idempotent and also runs when the
// test ends.
func startTCP(t testing.TB, serve func(context.Context, net.Listener) error) (addr string, stop func()) {
	t.Helper()
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- serve(ctx, lis) }()
	var once sync.Once
	stop = func() {
		once.Do(func() {
			cancel()
			if err := <-done; err != nil {
				t.Errorf("Serve: %v", err)
			}
		})
	}
	t.Cleanup(stop)
	return lis.Addr().String(), stop
}

// tlsFiles writes pair (and, if ca is not nil, the CA) into a new
// directory with modification time mod, and returns the settings naming
// them.
func tlsFiles(t *testing.T, pair tlstest.Pair, ca *tlstest.CA, mod time.Time) config.TLS {
	t.Helper()
	dir := t.TempDir()
	s := config.TLS{CertFile: filepath.Join(dir, "cert.pem"), KeyFile: filepath.Join(dir, "key.pem"), MinVersion: "1.2"}
	pair.WriteAs(t, s.CertFile, s.KeyFile, mod)
	if ca != nil {
		s.ClientCAFile = filepath.Join(dir, "client-ca.pem")
		tlstest.WriteFile(t, s.ClientCAFile, ca.PEM, mod)
	}
	return s
}

// tlsAgent serves agentd over TLS with settings, logging to logs.
func tlsAgent(t *testing.T, settings config.TLS, logs *logtest.Logs) string {
	t.Helper()
	cfg := testConfig(t)
	cfg.TLS = settings
	o := app.Options{Config: cfg, Logger: slog.New(slog.NewTextHandler(logs, nil))}
	a, err := app.NewAgent(o)
	if err != nil {
		t.Fatal(err)
	}
	return serveTCP(t, func(ctx context.Context, lis net.Listener) error { return a.Serve(ctx, lis, o) })
}

// dialTLS opens a new connection (so a new handshake) to addr.
func dialTLS(t *testing.T, addr string, c *tls.Config) *grpc.ClientConn {
	t.Helper()
	return dial(t, addr, grpc.WithTransportCredentials(credentials.NewTLS(c)))
}

// dial is a client of addr with opts, closed when the test ends.
func dial(t *testing.T, addr string, opts ...grpc.DialOption) *grpc.ClientConn {
	t.Helper()
	conn, err := grpc.NewClient(addr, opts...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	return conn
}

// previewTLS runs Preview (provider mock) on conn and returns the serial
// number of the certificate the server presented on that connection.
func previewTLS(ctx context.Context, conn *grpc.ClientConn) (*big.Int, error) {
	var p peer.Peer
	_, err := agentdv1.NewAgentServiceClient(conn).Preview(ctx, &agentdv1.PreviewRequest{
		Agent:    &agentdv1.Agent{Provider: "mock"},
		Messages: []*agentdv1.Message{{Role: agentdv1.Role_ROLE_USER, Parts: []*agentdv1.Part{{Kind: &agentdv1.Part_Text{Text: "hi"}}}}},
	}, grpc.Peer(&p))
	if err != nil {
		return nil, err
	}
	return p.AuthInfo.(credentials.TLSInfo).State.PeerCertificates[0].SerialNumber, nil
}

// X-I4: with tls set, agentd serves over TLS: a client that trusts the CA
// runs Preview, one that does not is refused. Replacing the certificate
// and key mid-run serves new connections the new certificate while an
// existing one keeps working; a broken new pair keeps the previous
// certificate serving and the log says why, once, naming the setting
// (tls.key_file), never the files' paths.
func TestTLSRotation(t *testing.T) {
	t.Parallel()
	ca := tlstest.NewCA(t)
	first, second, third := ca.Leaf(t, "first"), ca.Leaf(t, "second"), ca.Leaf(t, "third")
	mod := time.Now().Add(-time.Hour)
	settings := tlsFiles(t, first, nil, mod)
	var logs logtest.Logs
	addr := tlsAgent(t, settings, &logs)
	trusting := &tls.Config{RootCAs: ca.Pool()}
	wantSerial := func(t *testing.T, name string, conn *grpc.ClientConn, want tlstest.Pair) {
		t.Helper()
		got, err := previewTLS(t.Context(), conn)
		if err != nil {
			t.Fatalf("%s: Preview: %v", name, err)
		}
		if got.Cmp(want.Serial) != 0 {
			t.Errorf("%s: served certificate %x, want %x", name, got, want.Serial)
		}
	}

	existing := dialTLS(t, addr, trusting)
	wantSerial(t, "X-I4 a client with the CA", existing, first)

	_, err := previewTLS(t.Context(), dialTLS(t, addr, &tls.Config{}))
	if status.Code(err) != codes.Unavailable || !strings.Contains(err.Error(), "certificate") {
		t.Errorf("X-I4 a client without the CA: Preview = %v, want Unavailable (certificate not trusted)", err)
	}
	_, err = previewTLS(t.Context(), dialTLS(t, addr, &tls.Config{RootCAs: tlstest.NewCA(t).Pool()}))
	if status.Code(err) != codes.Unavailable {
		t.Errorf("X-I4 a client trusting another CA: Preview = %v, want Unavailable", err)
	}

	second.WriteAs(t, settings.CertFile, settings.KeyFile, mod.Add(time.Minute))
	wantSerial(t, "X-I4 the existing connection after rotation", existing, first)
	wantSerial(t, "X-I4 a new connection after rotation", dialTLS(t, addr, trusting), second)
	if !strings.Contains(logs.String(), "TLS certificate reloaded") {
		t.Errorf("the log does not record the reload:\n%s", logs.String())
	}

	tlstest.WriteFile(t, settings.CertFile, third.CertPEM, mod.Add(2*time.Minute))
	tlstest.WriteFile(t, settings.KeyFile, []byte("-----BEGIN PRIVATE KEY-----\ngarbage\n-----END PRIVATE KEY-----\n"), mod.Add(2*time.Minute))
	wantSerial(t, "X-I4 a new connection after a broken pair", dialTLS(t, addr, trusting), second)
	wantSerial(t, "X-I4 another new connection after a broken pair", dialTLS(t, addr, trusting), second)
	wantSerial(t, "X-I4 the existing connection after a broken pair", existing, first)
	log := logs.String()
	if n := strings.Count(log, "cannot be used"); n != 1 || !strings.Contains(log, "tls.key_file") {
		t.Errorf("the log says %d times that the broken pair cannot be used (want once, naming tls.key_file):\n%s", n, log)
	}
	if strings.Contains(log, filepath.Dir(settings.KeyFile)) || strings.Contains(log, "garbage") {
		t.Errorf("the log names the files' paths or quotes the key file's contents:\n%s", log)
	}
}

// X-I4: with tls.client_ca_file, a client must present a certificate that
// CA signed: none, or one from another CA, is refused.
func TestMutualTLS(t *testing.T) {
	t.Parallel()
	ca, clients, other := tlstest.NewCA(t), tlstest.NewCA(t), tlstest.NewCA(t)
	var logs logtest.Logs
	addr := tlsAgent(t, tlsFiles(t, ca.Leaf(t, "agentd"), clients, time.Now()), &logs)
	for _, tc := range []struct {
		name  string
		certs []tls.Certificate
		code  codes.Code
	}{
		{"X-I4 a client without a certificate is refused", nil, codes.Unavailable},
		{"X-I4 a client with a certificate from another CA is refused", []tls.Certificate{other.Leaf(t, "stranger").Certificate(t)}, codes.Unavailable},
		{"X-I4 a client with a certificate from the client CA is served", []tls.Certificate{clients.Leaf(t, "app").Certificate(t)}, codes.OK},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			conn := dialTLS(t, addr, &tls.Config{RootCAs: ca.Pool(), Certificates: tc.certs})
			if _, err := previewTLS(t.Context(), conn); status.Code(err) != tc.code {
				t.Errorf("Preview = %v, want %v", err, tc.code)
			}
		})
	}
}

// X-I4: bridge.tls serves `agentd bridge` over TLS; a plaintext client is
// refused.
func TestBridgeTLS(t *testing.T) {
	t.Parallel()
	ca := tlstest.NewCA(t)
	cfg := testConfig(t)
	cfg.Bridge.TLS = tlsFiles(t, ca.Leaf(t, "bridge"), nil, time.Now())
	o := app.Options{Config: cfg, Logger: slog.New(slog.DiscardHandler)}
	b, err := app.NewBridge(o)
	if err != nil {
		t.Fatal(err)
	}
	addr := serveTCP(t, func(ctx context.Context, lis net.Listener) error { return b.Serve(ctx, lis, o) })
	check := func(conn *grpc.ClientConn) error {
		_, err := healthpb.NewHealthClient(conn).Check(t.Context(), &healthpb.HealthCheckRequest{})
		return err
	}
	if err := check(dialTLS(t, addr, &tls.Config{RootCAs: ca.Pool()})); err != nil {
		t.Errorf("X-I4 health over TLS: %v", err)
	}
	if err := check(dial(t, addr, grpc.WithTransportCredentials(insecure.NewCredentials()))); status.Code(err) != codes.Unavailable {
		t.Errorf("X-I4 health in plaintext = %v, want Unavailable", err)
	}
}

// X-I4: a certificate that cannot be read refuses to start, naming its
// setting, not its path.
func TestTLSBrokenAtStart(t *testing.T) {
	t.Parallel()
	cfg := testConfig(t)
	cfg.TLS = config.TLS{CertFile: filepath.Join(t.TempDir(), "missing.pem"), KeyFile: "key.pem", MinVersion: "1.2"}
	_, err := app.NewAgent(app.Options{Config: cfg, Logger: slog.New(slog.DiscardHandler)})
	if err == nil || !strings.Contains(err.Error(), "tls.cert_file: no such file or directory") || strings.Contains(err.Error(), "missing.pem") {
		t.Errorf("NewAgent = %v, want an error naming tls.cert_file and not its path", err)
	}
}
