// Package tlstest makes certificates for tests: a CA and the leaves it
// signs, ECDSA P-256, valid for 127.0.0.1 and localhost as servers and as
// clients, and writes them as PEM files.
package tlstest

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"math/big"
	"net"
	"os"
	"path/filepath"
	"testing"
	"time"
)

// CA is a certificate authority.
type CA struct {
	Cert *x509.Certificate
	// PEM is Cert, PEM-encoded.
	PEM []byte
	key *ecdsa.PrivateKey
}

// NewCA makes a CA valid for a day.
func NewCA(t testing.TB) *CA {
	t.Helper()
	key := newKey(t)
	tmpl := &x509.Certificate{
		SerialNumber:          serial(t),
		Subject:               pkix.Name{CommonName: "agentd test CA"},
		NotBefore:             time.Now().Add(-time.Hour),
		NotAfter:              time.Now().Add(24 * time.Hour),
		IsCA:                  true,
		BasicConstraintsValid: true,
		KeyUsage:              x509.KeyUsageCertSign,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	cert, err := x509.ParseCertificate(der)
	if err != nil {
		t.Fatal(err)
	}
	return &CA{Cert: cert, PEM: pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}), key: key}
}

// Pool is a pool holding the CA alone.
func (ca *CA) Pool() *x509.CertPool {
	p := x509.NewCertPool()
	p.AddCert(ca.Cert)
	return p
}

// Pair is a leaf certificate and its key.
type Pair struct {
	CertPEM, KeyPEM []byte
	Serial          *big.Int
}

// Leaf makes a leaf that the CA signs, for 127.0.0.1 and localhost, named
// name, usable by a server and by a client.
func (ca *CA) Leaf(t testing.TB, name string) Pair {
	return ca.LeafWith(t, name, nil)
}

// LeafWith is Leaf with edit applied to the certificate's template before
// it is signed (to set URI SANs, other DNS names, validity).
func (ca *CA) LeafWith(t testing.TB, name string, edit func(*x509.Certificate)) Pair {
	t.Helper()
	key := newKey(t)
	tmpl := &x509.Certificate{
		SerialNumber: serial(t),
		Subject:      pkix.Name{CommonName: name},
		DNSNames:     []string{"localhost"},
		IPAddresses:  []net.IP{net.IPv4(127, 0, 0, 1)},
		NotBefore:    time.Now().Add(-time.Hour),
		NotAfter:     time.Now().Add(24 * time.Hour),
		KeyUsage:     x509.KeyUsageDigitalSignature,
		ExtKeyUsage:  []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth, x509.ExtKeyUsageClientAuth},
	}
	if edit != nil {
		edit(tmpl)
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, ca.Cert, &key.PublicKey, ca.key)
	if err != nil {
		t.Fatal(err)
	}
	keyDER, err := x509.MarshalPKCS8PrivateKey(key)
	if err != nil {
		t.Fatal(err)
	}
	return Pair{
		CertPEM: pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}),
		KeyPEM:  pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: keyDER}),
		Serial:  tmpl.SerialNumber,
	}
}

// Certificate is the pair for a tls.Config.
func (p Pair) Certificate(t testing.TB) tls.Certificate {
	t.Helper()
	c, err := tls.X509KeyPair(p.CertPEM, p.KeyPEM)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// WriteFile writes data to name and sets its modification time to mod, so
// that a reader comparing modification times sees a change whatever the
// file system's timestamp granularity.
func WriteFile(t testing.TB, name string, data []byte, mod time.Time) {
	t.Helper()
	if err := os.WriteFile(name, data, 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Chtimes(name, mod, mod); err != nil {
		t.Fatal(err)
	}
}

// WriteFile writes the CA's certificate as name.pem in dir and returns
// the file's path.
func (ca *CA) WriteFile(t testing.TB, dir, name string) string {
	t.Helper()
	file := filepath.Join(dir, name+".pem")
	WriteFile(t, file, ca.PEM, time.Now())
	return file
}

// WriteFiles writes the pair as name.pem (the certificate) and
// name-key.pem (the key) in dir and returns the files' paths.
func (p Pair) WriteFiles(t testing.TB, dir, name string) (certFile, keyFile string) {
	t.Helper()
	certFile, keyFile = filepath.Join(dir, name+".pem"), filepath.Join(dir, name+"-key.pem")
	p.WriteAs(t, certFile, keyFile, time.Now())
	return certFile, keyFile
}

// WriteAs writes the certificate to certFile and the key to keyFile, each
// with modification time mod (see WriteFile): a pair rotated in, when mod
// is later than the files' last.
func (p Pair) WriteAs(t testing.TB, certFile, keyFile string, mod time.Time) {
	t.Helper()
	WriteFile(t, certFile, p.CertPEM, mod)
	WriteFile(t, keyFile, p.KeyPEM, mod)
}

func newKey(t testing.TB) *ecdsa.PrivateKey {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	return key
}

func serial(t testing.TB) *big.Int {
	t.Helper()
	n, err := rand.Int(rand.Reader, new(big.Int).Lsh(big.NewInt(1), 128))
	if err != nil {
		t.Fatal(err)
	}
	return n
}
