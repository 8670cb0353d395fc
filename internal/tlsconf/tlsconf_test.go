package tlsconf_test

import (
	"bytes"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"log/slog"
	"math/big"
	"net"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/agentd/agentd/internal/config"
	"github.com/agentd/agentd/internal/tlsconf"
	"github.com/agentd/agentd/internal/tlsconf/tlstest"
)

// handshake runs a TLS handshake between server and client over loopback
// TCP (whose buffers, unlike net.Pipe's, let both sides write an alert at
// once) and returns the server's error.
func handshake(t *testing.T, server, client *tls.Config) error {
	t.Helper()
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer lis.Close()
	done := make(chan struct{})
	go func() {
		defer close(done)
		c, err := net.Dial("tcp", lis.Addr().String())
		if err != nil {
			lis.Close() // and Accept fails
			return
		}
		cl := tls.Client(c, client)
		cl.HandshakeContext(t.Context()) // the server's error is the one that matters
		cl.Close()
	}()
	s, err := lis.Accept()
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	err = tls.Server(s, server).HandshakeContext(t.Context())
	<-done
	return err
}

// X-I4: the client CA file is read again when it changes, like the
// certificate: a client whose CA was not trusted is once the file names
// it; a client CA file without a certificate keeps the previous pool, and
// the log names its setting, not its path.
func TestClientCARotation(t *testing.T) {
	t.Parallel()
	ca, before, after := tlstest.NewCA(t), tlstest.NewCA(t), tlstest.NewCA(t)
	dir := t.TempDir()
	s := config.TLS{CertFile: filepath.Join(dir, "cert.pem"), KeyFile: filepath.Join(dir, "key.pem"), ClientCAFile: filepath.Join(dir, "ca.pem"), MinVersion: "1.3"}
	leaf := ca.Leaf(t, "server")
	mod := time.Now().Add(-time.Hour)
	leaf.WriteAs(t, s.CertFile, s.KeyFile, mod)
	tlstest.WriteFile(t, s.ClientCAFile, before.PEM, mod)
	var logs bytes.Buffer // written by the server's handshake, which handshake waits for
	server, err := tlsconf.Server(s, "admin.tls", slog.New(slog.NewTextHandler(&logs, nil)))
	if err != nil {
		t.Fatal(err)
	}
	client := &tls.Config{RootCAs: ca.Pool(), ServerName: "localhost", Certificates: []tls.Certificate{after.Leaf(t, "client").Certificate(t)}}
	if err := handshake(t, server, client); err == nil {
		t.Fatal("a client certificate from a CA not yet trusted was accepted")
	}
	tlstest.WriteFile(t, s.ClientCAFile, after.PEM, mod.Add(time.Minute))
	if err := handshake(t, server, client); err != nil {
		t.Fatalf("after the client CA file changed: %v", err)
	}
	tlstest.WriteFile(t, s.ClientCAFile, []byte("not a certificate"), mod.Add(2*time.Minute))
	if err := handshake(t, server, client); err != nil {
		t.Errorf("after a broken client CA file: %v; want the previous pool kept", err)
	}
	if log := logs.String(); !strings.Contains(log, "admin.tls.client_ca_file") || strings.Contains(log, dir) {
		t.Errorf("the log of the broken client CA file does not name admin.tls.client_ca_file, or names its directory:\n%s", log)
	}
	old := &tls.Config{RootCAs: ca.Pool(), ServerName: "localhost", MaxVersion: tls.VersionTLS12, Certificates: client.Certificates}
	if err := handshake(t, server, old); err == nil {
		t.Error("min_version 1.3 served TLS 1.2")
	}
}

func TestPrincipal(t *testing.T) {
	t.Parallel()
	spiffe, _ := url.Parse("spiffe://example.org/app")
	tests := []struct {
		name string
		cert *x509.Certificate
		from string
		want string
	}{
		{"auto: URI SAN first", &x509.Certificate{URIs: []*url.URL{spiffe}, DNSNames: []string{"a.example"}, Subject: pkix.Name{CommonName: "cn"}}, tlsconf.PrincipalAuto, "spiffe://example.org/app"},
		{"auto: else DNS SAN", &x509.Certificate{DNSNames: []string{"a.example", "b.example"}, Subject: pkix.Name{CommonName: "cn"}}, tlsconf.PrincipalAuto, "a.example"},
		{"auto: else CN", &x509.Certificate{Subject: pkix.Name{CommonName: "cn"}}, tlsconf.PrincipalAuto, "cn"},
		{"cn chosen", &x509.Certificate{URIs: []*url.URL{spiffe}, Subject: pkix.Name{CommonName: "cn"}}, tlsconf.PrincipalCN, "cn"},
		{"dns chosen, none there", &x509.Certificate{URIs: []*url.URL{spiffe}, Subject: pkix.Name{CommonName: "cn"}}, tlsconf.PrincipalDNS, ""},
		{"uri chosen", &x509.Certificate{URIs: []*url.URL{spiffe}, DNSNames: []string{"a.example"}}, tlsconf.PrincipalURI, "spiffe://example.org/app"},
	}
	for _, tt := range tests {
		if got := tlsconf.Principal(tt.cert, tt.from); got != tt.want {
			t.Errorf("%s: Principal = %q, want %q", tt.name, got, tt.want)
		}
	}
}

// X-I8: the client side of the bridge hop presents bridge.tls's
// certificate and reads it again when the files change; a changed pair
// that cannot be used keeps the previous one presented, logged once,
// naming the key's setting, never a file's path. A key that cannot be read
// at start is an error naming its setting, not its path.
func TestDiallingRotation(t *testing.T) {
	t.Parallel()
	ca, clients := tlstest.NewCA(t), tlstest.NewCA(t)
	first, second := clients.Leaf(t, "first"), clients.Leaf(t, "second")
	dir := t.TempDir()
	s := config.TLS{CertFile: filepath.Join(dir, "client.pem"), KeyFile: filepath.Join(dir, "client-key.pem"), CAFile: filepath.Join(dir, "ca.pem"), ServerName: "localhost", MinVersion: "1.2"}
	mod := time.Now().Add(-time.Hour)
	tlstest.WriteFile(t, s.CAFile, ca.PEM, mod)
	first.WriteAs(t, s.CertFile, s.KeyFile, mod)
	var logs bytes.Buffer // written by the client's handshake, which handshake waits for
	client, err := tlsconf.Dialling(s, "bridge.tls", slog.New(slog.NewTextHandler(&logs, nil)))
	if err != nil {
		t.Fatal(err)
	}
	var presented *big.Int
	server := &tls.Config{
		Certificates: []tls.Certificate{ca.Leaf(t, "bridge").Certificate(t)},
		ClientCAs:    clients.Pool(),
		ClientAuth:   tls.RequireAndVerifyClientCert,
		VerifyConnection: func(cs tls.ConnectionState) error {
			presented = cs.PeerCertificates[0].SerialNumber
			return nil
		},
	}
	want := func(name string, pair tlstest.Pair) {
		t.Helper()
		presented = nil
		if err := handshake(t, server, client); err != nil {
			t.Fatalf("%s: handshake: %v", name, err)
		}
		if presented.Cmp(pair.Serial) != 0 {
			t.Errorf("%s: presented %x, want %x", name, presented, pair.Serial)
		}
	}
	want("at start", first)

	second.WriteAs(t, s.CertFile, s.KeyFile, mod.Add(time.Minute))
	want("after rotation", second)
	if !strings.Contains(logs.String(), "TLS client certificate reloaded") {
		t.Errorf("the log does not record the reload:\n%s", logs.String())
	}

	tlstest.WriteFile(t, s.KeyFile, []byte("-----BEGIN PRIVATE KEY-----\ngarbage\n-----END PRIVATE KEY-----\n"), mod.Add(2*time.Minute))
	want("after a broken key", second)
	want("again after a broken key", second)
	log := logs.String()
	if n := strings.Count(log, "cannot be used"); n != 1 || !strings.Contains(log, "bridge.tls.key_file") {
		t.Errorf("the log says %d times that the pair cannot be used (want once, naming bridge.tls.key_file):\n%s", n, log)
	}
	if strings.Contains(log, dir) || strings.Contains(log, "garbage") {
		t.Errorf("the log names a file's path or quotes the key:\n%s", log)
	}

	s.KeyFile = filepath.Join(dir, "missing-key.pem")
	_, err = tlsconf.Dialling(s, "bridge.tls", slog.New(slog.DiscardHandler))
	if err == nil || !strings.Contains(err.Error(), "bridge.tls.key_file") || strings.Contains(err.Error(), dir) {
		t.Errorf("Dialling with a missing key = %v, want an error naming bridge.tls.key_file and not its path", err)
	}
}

// Errors name a file by its setting (or, for Client, by the flag of
// `agentd generate` that gives it) and say what is wrong with it, never
// its path nor its contents: a key's path is where a secret lies, and the
// other files lie beside it.
func TestErrorsNameSettings(t *testing.T) {
	t.Parallel()
	ca := tlstest.NewCA(t)
	leaf := ca.Leaf(t, "server")
	dir := filepath.Join(t.TempDir(), "where-the-keys-are")
	if err := os.Mkdir(dir, 0o700); err != nil {
		t.Fatal(err)
	}
	write := func(name string, data []byte) string {
		path := filepath.Join(dir, name)
		tlstest.WriteFile(t, path, data, time.Now())
		return path
	}
	cert, key, caFile := write("cert.pem", leaf.CertPEM), write("key.pem", leaf.KeyPEM), write("ca.pem", ca.PEM)
	garbage := write("garbage.pem", []byte("-----BEGIN PRIVATE KEY-----\nZ2FyYmFnZQ==\n-----END PRIVATE KEY-----\nthe-contents\n"))
	missing := filepath.Join(dir, "missing.pem")
	discard := slog.New(slog.DiscardHandler)
	server := func(s config.TLS) error {
		s.MinVersion = "1.2"
		_, err := tlsconf.Server(s, "tls", discard)
		return err
	}
	dialling := func(s config.TLS) error {
		_, err := tlsconf.Dialling(s, "bridge.tls", discard)
		return err
	}
	client := func(caFile, cert, key string) error {
		_, err := tlsconf.Client(caFile, cert, key, "")
		return err
	}
	for _, tc := range []struct {
		name string
		err  error
		want string
	}{
		{"server: certificate missing", server(config.TLS{CertFile: missing, KeyFile: key}), "tls.cert_file: no such file or directory"},
		{"server: key missing", server(config.TLS{CertFile: cert, KeyFile: missing}), "tls.key_file: no such file or directory"},
		{"server: key a directory", server(config.TLS{CertFile: cert, KeyFile: dir}), "tls.key_file: is a directory"},
		{"server: key broken", server(config.TLS{CertFile: cert, KeyFile: garbage}), "tls.cert_file with tls.key_file: "},
		{"server: key of another certificate", server(config.TLS{CertFile: cert, KeyFile: write("other-key.pem", ca.Leaf(t, "other").KeyPEM)}), "tls.cert_file with tls.key_file: tls: private key does not match public key"},
		{"server: client CA missing", server(config.TLS{CertFile: cert, KeyFile: key, ClientCAFile: missing}), "tls.client_ca_file: no such file or directory"},
		{"server: client CA without a certificate", server(config.TLS{CertFile: cert, KeyFile: key, ClientCAFile: garbage}), "tls.client_ca_file: no PEM certificate in it"},
		{"dialling: CA missing", dialling(config.TLS{CAFile: missing}), "bridge.tls.ca_file: no such file or directory"},
		{"dialling: key missing", dialling(config.TLS{CAFile: caFile, CertFile: cert, KeyFile: missing}), "bridge.tls.key_file: no such file or directory"},
		{"dialling: key broken", dialling(config.TLS{CAFile: caFile, CertFile: cert, KeyFile: garbage}), "bridge.tls.cert_file with bridge.tls.key_file: "},
		{"client: CA missing", client(missing, "", ""), "--tls-ca: no such file or directory"},
		{"client: key missing", client(caFile, cert, missing), "--tls-key: no such file or directory"},
		{"client: key broken", client(caFile, cert, garbage), "--tls-cert with --tls-key: "},
		{"client: certificate without key", client(caFile, cert, ""), "--tls-cert) needs its key (--tls-key)"},
	} {
		if tc.err == nil {
			t.Errorf("%s: no error", tc.name)
			continue
		}
		msg := tc.err.Error()
		if !strings.Contains(msg, tc.want) {
			t.Errorf("%s: %q, want it to say %q", tc.name, msg, tc.want)
		}
		if strings.Contains(msg, "where-the-keys-are") || strings.Contains(msg, "the-contents") || strings.Contains(msg, "Z2FyYmFnZQ") {
			t.Errorf("%s: %q names a path or quotes a file", tc.name, msg)
		}
	}
}
