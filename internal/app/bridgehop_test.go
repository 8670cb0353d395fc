package app_test

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"io"
	"log/slog"
	"net"
	"net/url"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/agentd/agentd/internal/logtest"

	"google.golang.org/grpc/codes"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/grpc/status"

	bridgev1 "github.com/agentd/agentd/gen/go/agentd/bridge/v1"
	agentdv1 "github.com/agentd/agentd/gen/go/agentd/v1"
	"github.com/agentd/agentd/internal/app"
	"github.com/agentd/agentd/internal/app/apptest"
	"github.com/agentd/agentd/internal/config"
	"github.com/agentd/agentd/internal/tlsconf/tlstest"
)

// agentdPrincipal is the principal of the agentd certificates these tests
// trust: a URI SAN, which tlsconf.Principal prefers to the DNS SAN and CN
// every tlstest leaf also has.
const agentdPrincipal = "spiffe://agentd.test/agentd"

// peerLeaf is a leaf of ca with principal as its URI SAN and CN name.
func peerLeaf(t *testing.T, ca *tlstest.CA, name, principal string) tlstest.Pair {
	t.Helper()
	u, err := url.Parse(principal)
	if err != nil {
		t.Fatal(err)
	}
	return ca.LeafWith(t, name, func(c *x509.Certificate) { c.URIs = []*url.URL{u} })
}

// mtlsBridge serves `agentd bridge` on loopback with its certificate from
// ca, requiring client certificates from ca, and trusting the listed
// peers; it returns the bridge's address.
func mtlsBridge(t *testing.T, ca *tlstest.CA, logs *logtest.Logs, edit func(*config.Config), trusted ...string) string {
	t.Helper()
	cfg := demoConfig(t, 0)
	cfg.Bridge.TLS = tlsFiles(t, ca.Leaf(t, "bridge"), ca, time.Now())
	cfg.Bridge.TrustedPeers = trusted
	if edit != nil {
		edit(&cfg)
	}
	if err := cfg.Validate(); err != nil {
		t.Fatal(err)
	}
	o := app.Options{Config: cfg, Logger: slog.New(slog.NewTextHandler(logs, nil))}
	b, err := app.NewBridge(o)
	if err != nil {
		t.Fatal(err)
	}
	return serveTCP(t, func(ctx context.Context, lis net.Listener) error { return b.Serve(ctx, lis, o) })
}

// hopTLS is agentd's side of bridge.tls: trusting ca (if not nil), with
// pair (if not empty) as its client certificate.
func hopTLS(t *testing.T, ca *tlstest.CA, pair tlstest.Pair) config.TLS {
	t.Helper()
	dir := t.TempDir()
	s := config.TLS{MinVersion: "1.2"}
	if ca != nil {
		s.CAFile = filepath.Join(dir, "bridge-ca.pem")
		tlstest.WriteFile(t, s.CAFile, ca.PEM, time.Now())
	}
	if pair.CertPEM != nil {
		s.CertFile, s.KeyFile = filepath.Join(dir, "agentd.pem"), filepath.Join(dir, "agentd-key.pem")
		pair.WriteAs(t, s.CertFile, s.KeyFile, time.Now())
	}
	return s
}

// agentdVia serves agentd using the remote bridge at addr, dialled with
// settings as bridge.tls.
func agentdVia(t *testing.T, addr string, settings config.TLS) agentdv1.AgentServiceClient {
	t.Helper()
	cfg := demoConfig(t, 0)
	cfg.Bridge.Address = addr
	cfg.Bridge.TLS = settings
	if err := cfg.Validate(); err != nil {
		t.Fatal(err)
	}
	conn, _ := apptest.Serve(t, app.Options{Config: cfg, Logger: slog.New(slog.DiscardHandler)})
	return agentdv1.NewAgentServiceClient(conn)
}

// generateErr runs a generation to its end and returns how it failed.
func generateErr(ctx context.Context, client agentdv1.AgentServiceClient, start *agentdv1.StartGeneration) (string, error) {
	stream, err := client.Generate(ctx)
	if err != nil {
		return "", err
	}
	if err := stream.Send(&agentdv1.GenerateRequest{Kind: &agentdv1.GenerateRequest_Start{Start: start}}); err != nil {
		return "", err
	}
	var final string
	for {
		ev, err := stream.Recv()
		if err != nil {
			return final, err
		}
		for _, p := range ev.GetCompleted().GetMessage().GetParts() {
			final += p.GetText()
		}
	}
}

// X-I8: agentd reaches a remote bridge over mutual TLS, presenting
// bridge.tls's certificate and verifying the bridge's with its ca_file;
// the demo generation runs through it. An agentd the bridge does not
// accept (no certificate, one not among trusted_peers), or that does not
// trust the bridge's certificate, fails the generation Unavailable naming
// the bridge.
func TestRemoteBridgeMTLS(t *testing.T) {
	t.Parallel()
	ca, other := tlstest.NewCA(t), tlstest.NewCA(t)
	var logs logtest.Logs
	addr := mtlsBridge(t, ca, &logs, nil, agentdPrincipal)
	// Grouped, so that the checks after the group see every case done.
	t.Run("cases", func(t *testing.T) {
		for _, tc := range []struct {
			name     string
			settings config.TLS
			code     codes.Code
			says     string // what the error says, besides the bridge's address (under TLS 1.3, the bridge's alert may lose the race with agentd's first write)
		}{
			{"X-I8 agentd over mutual TLS, a trusted peer", hopTLS(t, ca, peerLeaf(t, ca, "agentd", agentdPrincipal)), codes.OK, ""},
			{"X-I8 agentd without a client certificate", hopTLS(t, ca, tlstest.Pair{}), codes.Unavailable, "unavailable"},
			{"X-I8 agentd with a certificate not among trusted_peers", hopTLS(t, ca, peerLeaf(t, ca, "intruder", "spiffe://agentd.test/intruder")), codes.Unavailable, "bridge.trusted_peers"},
			{"X-I8 agentd trusting another CA for the bridge", hopTLS(t, other, peerLeaf(t, ca, "agentd", agentdPrincipal)), codes.Unavailable, "certificate"},
		} {
			t.Run(tc.name, func(t *testing.T) {
				t.Parallel()
				final, err := generateErr(t.Context(), agentdVia(t, addr, tc.settings), demoStart(t))
				if tc.code == codes.OK {
					if !errors.Is(err, io.EOF) || !strings.Contains(final, "hello from agentd") {
						t.Fatalf("generation ended with %v, answer %q; want the demo answer", err, final)
					}
					return
				}
				if status.Code(err) != tc.code || !strings.Contains(err.Error(), "bridge at "+addr) || !strings.Contains(err.Error(), tc.says) {
					t.Errorf("generation failed with %v; want %v naming the bridge at %s and saying %q", err, tc.code, addr, tc.says)
				}
			})
		}
	})
	log := logs.String()
	if !strings.Contains(log, `principal=spiffe://agentd.test/intruder`) {
		t.Errorf("the bridge's log does not name the refused principal:\n%s", log)
	}
	if strings.Contains(log, "principal="+agentdPrincipal) {
		t.Errorf("the bridge's log refuses the trusted agentd:\n%s", log)
	}
}

// X-I8: with bridge.trusted_peers, every call on the bridge's listener
// (BridgeService and the admin service) needs a verified client
// certificate whose principal is listed (auth.mtls.principal_from
// selects which): a peer without a certificate is refused in the
// handshake, one from the right CA but not listed is PermissionDenied;
// health stays open to any peer the handshake admits.
func TestBridgeTrustedPeers(t *testing.T) {
	t.Parallel()
	ca, other := tlstest.NewCA(t), tlstest.NewCA(t)
	var logs, cnLogs logtest.Logs
	addr := mtlsBridge(t, ca, &logs, nil, agentdPrincipal)
	byCN := mtlsBridge(t, ca, &cnLogs, func(c *config.Config) { c.Auth.MTLS.PrincipalFrom = "cn" }, "agentd-by-name")
	trusted := peerLeaf(t, ca, "agentd", agentdPrincipal).Certificate(t)
	stranger := peerLeaf(t, ca, "stranger", "spiffe://agentd.test/stranger").Certificate(t)
	// Grouped, so that the checks after the group see every case done.
	t.Run("cases", func(t *testing.T) {
		for _, tc := range []struct {
			name         string
			addr         string
			certs        []tls.Certificate
			bridge, adm  codes.Code // of ListTools (of an unknown session) and GetCacheStats
			healthServed bool
		}{
			{"X-I8 a peer without a certificate is refused in the handshake", addr, nil, codes.Unavailable, codes.Unavailable, false},
			{"X-I8 a peer with a certificate from another CA is refused in the handshake", addr, []tls.Certificate{peerLeaf(t, other, "agentd", agentdPrincipal).Certificate(t)}, codes.Unavailable, codes.Unavailable, false},
			{"X-I8 a peer from the CA but not among trusted_peers is PermissionDenied", addr, []tls.Certificate{stranger}, codes.PermissionDenied, codes.PermissionDenied, true},
			{"X-I8 a trusted peer is served", addr, []tls.Certificate{trusted}, codes.NotFound, codes.OK, true},
			{"X-I8 principal_from cn: the URI SAN is not the principal", byCN, []tls.Certificate{trusted}, codes.PermissionDenied, codes.PermissionDenied, true},
			{"X-I8 principal_from cn: the common name is", byCN, []tls.Certificate{peerLeaf(t, ca, "agentd-by-name", agentdPrincipal).Certificate(t)}, codes.NotFound, codes.OK, true},
		} {
			t.Run(tc.name, func(t *testing.T) {
				t.Parallel()
				conn := dialTLS(t, tc.addr, &tls.Config{RootCAs: ca.Pool(), Certificates: tc.certs})
				_, err := bridgev1.NewBridgeServiceClient(conn).ListTools(t.Context(), &bridgev1.ListToolsRequest{SessionId: "no-such-session"})
				if status.Code(err) != tc.bridge {
					t.Errorf("ListTools = %v, want %v", err, tc.bridge)
				}
				_, err = bridgev1.NewBridgeAdminServiceClient(conn).GetCacheStats(t.Context(), &bridgev1.GetCacheStatsRequest{})
				if status.Code(err) != tc.adm {
					t.Errorf("GetCacheStats = %v, want %v", err, tc.adm)
				}
				_, err = healthpb.NewHealthClient(conn).Check(t.Context(), &healthpb.HealthCheckRequest{})
				if (err == nil) != tc.healthServed {
					t.Errorf("health Check = %v, want served: %v", err, tc.healthServed)
				}
			})
		}
	})
	if !strings.Contains(logs.String(), "principal=spiffe://agentd.test/stranger") {
		t.Errorf("the bridge's log does not name the refused principal:\n%s", logs.String())
	}
	if !strings.Contains(cnLogs.String(), "principal=agentd") {
		t.Errorf("the bridge's log (principal_from cn) does not name the refused principal by its CN:\n%s", cnLogs.String())
	}
}

// X-I8 with X-I1: a bridge that serves only verified, listed peers may
// listen beyond loopback without --insecure, and without a warning; with
// mutual TLS but no trusted_peers it still refuses to, saying how.
func TestBridgeTrustedPeersListen(t *testing.T) {
	t.Parallel()
	ca := tlstest.NewCA(t)
	options := func(trusted []string, logs *logtest.Logs) app.Options {
		cfg := demoConfig(t, 0)
		cfg.Bridge.Listen = "0.0.0.0:0"
		cfg.Bridge.TLS = tlsFiles(t, ca.Leaf(t, "bridge"), ca, time.Now())
		cfg.Bridge.TrustedPeers = trusted
		return app.Options{Config: cfg, Logger: slog.New(slog.NewTextHandler(logs, nil))}
	}

	var refused logtest.Logs
	err := app.ServeBridge(t.Context(), options(nil, &refused))
	if !errors.Is(err, app.ErrExposed) || !strings.Contains(err.Error(), "bridge.trusted_peers") {
		t.Errorf("X-I8 mutual TLS without trusted_peers beyond loopback: ServeBridge = %v, want ErrExposed naming bridge.trusted_peers", err)
	}

	var logs logtest.Logs
	serveUntilLogged(t, "X-I8 ServeBridge", &logs, "agentd bridge serving", func(ctx context.Context) error {
		return app.ServeBridge(ctx, options([]string{agentdPrincipal}, &logs))
	})
	if strings.Contains(logs.String(), "unauthenticated") {
		t.Errorf("X-I8 a bridge with trusted peers warned that it serves unauthenticated callers:\n%s", logs.String())
	}
}

// X-I8: agentd dialling a bridge beyond this machine in plaintext says so
// at start; over TLS, or on loopback, it does not.
func TestRemoteBridgePlaintextWarns(t *testing.T) {
	t.Parallel()
	ca := tlstest.NewCA(t)
	for _, tc := range []struct {
		name     string
		address  string
		settings config.TLS
		warn     bool
	}{
		{"X-I8 plaintext beyond this machine warns", "bridge.internal:7071", config.TLS{MinVersion: "1.2"}, true},
		{"X-I8 TLS beyond this machine does not", "bridge.internal:7071", hopTLS(t, ca, peerLeaf(t, ca, "agentd", agentdPrincipal)), false},
		{"X-I8 plaintext on loopback does not", "127.0.0.1:7071", config.TLS{MinVersion: "1.2"}, false},
		{"X-G6 X-I8 plaintext to a DNS target beyond this machine warns", "dns:///bridge.agentd.svc:7071", config.TLS{MinVersion: "1.2"}, true},
		{"X-G6 X-I8 plaintext to a DNS target on loopback does not", "dns:///localhost:7071", config.TLS{MinVersion: "1.2"}, false},
		{"X-G6 X-I8 plaintext to a list with one replica beyond this machine warns", "127.0.0.1:7071,10.0.0.2:7071", config.TLS{MinVersion: "1.2"}, true},
		{"X-G6 X-I8 plaintext to a list of replicas on loopback does not", "127.0.0.1:7071, [::1]:7072", config.TLS{MinVersion: "1.2"}, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			var logs logtest.Logs
			cfg := demoConfig(t, 0)
			cfg.Bridge.Address, cfg.Bridge.TLS = tc.address, tc.settings
			a, err := app.NewAgent(app.Options{Config: cfg, Logger: slog.New(slog.NewTextHandler(&logs, nil))})
			if err != nil {
				t.Fatal(err)
			}
			if err := a.Close(); err != nil {
				t.Errorf("Close: %v", err)
			}
			if warned := strings.Contains(logs.String(), "dialling the bridge in plaintext"); warned != tc.warn {
				t.Errorf("warned: %v, want %v; log:\n%s", warned, tc.warn, logs.String())
			}
		})
	}
}
