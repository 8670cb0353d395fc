// Command devcerts writes certificates for trying agentd's TLS on one
// machine: a CA, a server certificate for 127.0.0.1 and localhost, and a
// client certificate, all signed by that CA, ECDSA P-256, valid for a
// day (-valid).
//
//	go run ./scripts/devcerts [-valid 24h] [-client-uri spiffe://agentd.dev/client] DIR
//
// It writes, in DIR: ca.pem, server.pem and server-key.pem, client.pem and
// client-key.pem (keys readable by their owner alone). They are for
// development and tests: a real deployment's certificates come from its
// own CA.
package main

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"errors"
	"flag"
	"fmt"
	"math/big"
	"net"
	"net/url"
	"os"
	"path/filepath"
	"time"
)

func main() {
	valid := flag.Duration("valid", 24*time.Hour, "how long the certificates are valid")
	clientURI := flag.String("client-uri", "spiffe://agentd.dev/client", "the client certificate's URI SAN, its principal (empty: none, and its CN, \"client\", is)")
	flag.Usage = func() {
		fmt.Fprintln(flag.CommandLine.Output(), "usage: go run ./scripts/devcerts [flags] DIR")
		flag.PrintDefaults()
	}
	flag.Parse()
	if flag.NArg() != 1 {
		flag.Usage()
		os.Exit(2)
	}
	if err := run(flag.Arg(0), *valid, *clientURI); err != nil {
		fmt.Fprintln(os.Stderr, "devcerts:", err)
		os.Exit(1)
	}
}

func run(dir string, valid time.Duration, clientURI string) error {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	notBefore := time.Now().Add(-time.Hour) // a little clock skew between machines
	notAfter := time.Now().Add(valid)
	ca, caKey, err := writeCA(dir, notBefore, notAfter)
	if err != nil {
		return err
	}
	server := &x509.Certificate{
		Subject:     pkix.Name{CommonName: "localhost"},
		DNSNames:    []string{"localhost"},
		IPAddresses: []net.IP{net.IPv4(127, 0, 0, 1), net.IPv6loopback},
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
	}
	client := &x509.Certificate{
		Subject:     pkix.Name{CommonName: "client"},
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth},
	}
	if clientURI != "" {
		u, err := url.Parse(clientURI)
		if err != nil {
			return fmt.Errorf("-client-uri: %w", err)
		}
		client.URIs = []*url.URL{u}
	}
	for name, tmpl := range map[string]*x509.Certificate{"server": server, "client": client} {
		tmpl.NotBefore, tmpl.NotAfter = notBefore, notAfter
		tmpl.KeyUsage = x509.KeyUsageDigitalSignature
		if err := writeLeaf(dir, name, tmpl, ca, caKey); err != nil {
			return err
		}
	}
	return nil
}

// writeCA makes the development CA, valid from notBefore to notAfter, and
// writes its certificate to dir/ca.pem.
func writeCA(dir string, notBefore, notAfter time.Time) (*x509.Certificate, *ecdsa.PrivateKey, error) {
	caKey, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, nil, err
	}
	caTmpl := &x509.Certificate{
		Subject:               pkix.Name{CommonName: "agentd development CA"},
		NotBefore:             notBefore,
		NotAfter:              notAfter,
		IsCA:                  true,
		BasicConstraintsValid: true,
		KeyUsage:              x509.KeyUsageCertSign,
	}
	caDER, err := sign(caTmpl, caTmpl, &caKey.PublicKey, caKey)
	if err != nil {
		return nil, nil, err
	}
	ca, err := x509.ParseCertificate(caDER)
	if err != nil {
		return nil, nil, err
	}
	return ca, caKey, writePEM(filepath.Join(dir, "ca.pem"), "CERTIFICATE", caDER, 0o644)
}

// writeLeaf makes a key and tmpl's certificate, signed by the CA, and
// writes them to dir/name.pem and dir/name-key.pem.
func writeLeaf(dir, name string, tmpl, ca *x509.Certificate, caKey *ecdsa.PrivateKey) error {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return err
	}
	der, err := sign(tmpl, ca, &key.PublicKey, caKey)
	if err != nil {
		return err
	}
	keyDER, err := x509.MarshalPKCS8PrivateKey(key)
	if err != nil {
		return err
	}
	return errors.Join(
		writePEM(filepath.Join(dir, name+".pem"), "CERTIFICATE", der, 0o644),
		writePEM(filepath.Join(dir, name+"-key.pem"), "PRIVATE KEY", keyDER, 0o600),
	)
}

// sign makes tmpl a certificate that parent's key signs, with a random
// serial number.
func sign(tmpl, parent *x509.Certificate, pub *ecdsa.PublicKey, parentKey *ecdsa.PrivateKey) ([]byte, error) {
	serial, err := rand.Int(rand.Reader, new(big.Int).Lsh(big.NewInt(1), 128))
	if err != nil {
		return nil, err
	}
	tmpl.SerialNumber = serial
	return x509.CreateCertificate(rand.Reader, tmpl, parent, pub, parentKey)
}

func writePEM(name, kind string, der []byte, perm os.FileMode) error {
	return os.WriteFile(name, pem.EncodeToMemory(&pem.Block{Type: kind, Bytes: der}), perm)
}
