package connect

import (
	"net"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	agentdv1 "github.com/agentd/agentd/gen/go/agentd/v1"
	"github.com/agentd/agentd/internal/tlsconf/tlstest"
)

// The options pick the transport: plaintext without TLS options, TLS with
// any; a broken option is an error that names the key's flag, never its
// path.
func TestTransport(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	ca := tlstest.NewCA(t)
	caFile := ca.WriteFile(t, dir, "ca")
	cert, key := ca.Leaf(t, "example").WriteFiles(t, dir, "client")
	missingKey := filepath.Join(dir, "secret-key-path.pem")

	for _, tc := range []struct {
		name     string
		o        Options
		protocol string // SecurityProtocol of the transport
		err      string // what the error says; empty: none
	}{
		{"no options: plaintext", Options{}, "insecure", ""},
		{"a CA", Options{TLSCA: caFile}, "tls", ""},
		{"a client certificate: the system's roots", Options{TLSCert: cert, TLSKey: key}, "tls", ""},
		{"mutual", Options{TLSCA: caFile, TLSCert: cert, TLSKey: key}, "tls", ""},
		{"a certificate without its key", Options{TLSCA: caFile, TLSCert: cert}, "", "--tls-cert and --tls-key go together"},
		{"a key without its certificate", Options{TLSKey: key}, "", "--tls-cert and --tls-key go together"},
		{"a CA file with no certificate", Options{TLSCA: key}, "", "no PEM certificate"},
		{"a missing key file", Options{TLSCert: cert, TLSKey: missingKey}, "", "--tls-key: no such file"},
		{"a key that is not the certificate's", Options{TLSCert: cert, TLSKey: caFile}, "", "--tls-cert with --tls-key"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			creds, err := tc.o.transport()
			if tc.err != "" {
				if err == nil || !strings.Contains(err.Error(), tc.err) {
					t.Fatalf("transport: %v; want an error saying %q", err, tc.err)
				}
				if strings.Contains(err.Error(), tc.o.TLSKey) && tc.o.TLSKey != "" {
					t.Errorf("transport: %v names the key's path", err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if got := creds.Info().SecurityProtocol; got != tc.protocol {
				t.Errorf("transport: %s; want %s", got, tc.protocol)
			}
		})
	}
}

// The token goes with every call as "authorization: Bearer", over
// plaintext too (an agentd on loopback).
func TestBearer(t *testing.T) {
	t.Parallel()
	b := bearer("sk-example")
	md, err := b.GetRequestMetadata(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(map[string]string{"authorization": "Bearer sk-example"}, md); diff != "" {
		t.Errorf("metadata (-want +got):\n%s", diff)
	}
	if b.RequireTransportSecurity() {
		t.Error("the token needs TLS; want it sent over plaintext too")
	}
}

// A call to an address where nothing listens fails with a line that says
// so and how to fix it; other failures are left as they are.
func TestExplain(t *testing.T) {
	t.Parallel()
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	o := Options{Address: lis.Addr().String()}
	if err := lis.Close(); err != nil {
		t.Fatal(err)
	}
	conn, err := o.Dial()
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	_, err = agentdv1.NewAgentServiceClient(conn).GetGeneration(t.Context(), &agentdv1.GetGenerationRequest{GenerationId: "gen_1"})
	want := "agentd is not listening at " + o.Address + ": start it (make run) or set AGENTD_ADDR"
	if got := o.Explain(err); got == nil || got.Error() != want {
		t.Errorf("Explain(%v) = %v; want %q", err, got, want)
	}
	other := status.Error(codes.Unavailable, "the replica stopped")
	if got := o.Explain(other); got != other {
		t.Errorf("Explain(%v) = %v; want it unchanged", other, got)
	}
}
