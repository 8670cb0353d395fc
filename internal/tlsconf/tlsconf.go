// Package tlsconf builds the server side of TLS for agentd's listeners
// from config.TLS (X-I4): it owns reading the certificate, key and client
// CA files, and reading them again when they change, so that they rotate
// without a restart. A changed set of files that cannot be used leaves
// the previous one serving, and the log says why. Client builds the
// client side from files, for `agentd generate`.
package tlsconf

import (
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"sync"

	"github.com/agentd/agentd/internal/config"
)

// Server returns the TLS configuration of a listener: its certificate and
// key, at least TLS 1.2 (1.3 if MinVersion says so), and with a client CA,
// a verified client certificate required of every client. The files are
// read now (an error names the file that cannot be used) and again at any
// handshake after one of them changed; connections already established
// keep the certificate they were served.
func Server(settings config.TLS, log *slog.Logger) (*tls.Config, error) {
	r := &reloader{settings: settings, log: log, minVersion: tls.VersionTLS12}
	if settings.MinVersion == "1.3" {
		r.minVersion = tls.VersionTLS13
	}
	r.stamps = r.stat()
	cfg, err := r.read()
	if err != nil {
		return nil, err
	}
	r.current = cfg
	return &tls.Config{MinVersion: r.minVersion, GetConfigForClient: r.configForClient}, nil
}

// stamp tells whether a file changed: its modification time and size, or
// that it could not be read.
type stamp struct {
	mod     int64
	size    int64
	missing bool
}

type reloader struct {
	settings   config.TLS
	log        *slog.Logger
	minVersion uint16

	mu      sync.Mutex
	stamps  [3]stamp    // of cert, key and client CA when last read, whether or not they could be used
	current *tls.Config // what handshakes are served with
}

// configForClient serves each handshake with the current files. They are
// looked at on every handshake rather than watched or polled: three stats
// cost microseconds against the milliseconds of a handshake's
// cryptography, a rotation is seen by the first handshake after it, and no
// goroutine needs an owner.
func (r *reloader) configForClient(*tls.ClientHelloInfo) (*tls.Config, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	// Stat before reading: a file that changes while it is read is read
	// again at the next handshake.
	if s := r.stat(); s != r.stamps {
		r.stamps = s
		cfg, err := r.read()
		if err != nil {
			// Logged once per change of the files, not per handshake. The
			// error names files and what is wrong with them, never their
			// contents.
			r.log.Error("TLS files changed but cannot be used; still serving the previous certificate", "error", err)
		} else {
			r.current = cfg
			leaf := cfg.Certificates[0].Leaf
			r.log.Info("TLS certificate reloaded", "cert_file", r.settings.CertFile, "serial", leaf.SerialNumber.String(), "not_after", leaf.NotAfter)
		}
	}
	return r.current, nil
}

func (r *reloader) stat() [3]stamp {
	var s [3]stamp
	for i, name := range []string{r.settings.CertFile, r.settings.KeyFile, r.settings.ClientCAFile} {
		if name == "" {
			continue
		}
		fi, err := os.Stat(name)
		if err != nil {
			s[i].missing = true
			continue
		}
		s[i] = stamp{mod: fi.ModTime().UnixNano(), size: fi.Size()}
	}
	return s
}

// read builds the configuration one handshake is served with.
func (r *reloader) read() (*tls.Config, error) {
	cert, err := tls.LoadX509KeyPair(r.settings.CertFile, r.settings.KeyFile)
	if err != nil {
		return nil, fmt.Errorf("tls: certificate %s with key %s: %w", r.settings.CertFile, r.settings.KeyFile, err)
	}
	cfg := &tls.Config{MinVersion: r.minVersion, Certificates: []tls.Certificate{cert}}
	if name := r.settings.ClientCAFile; name != "" {
		data, err := os.ReadFile(name)
		if err != nil {
			return nil, fmt.Errorf("tls: client CA: %w", err)
		}
		pool := x509.NewCertPool()
		if !pool.AppendCertsFromPEM(data) {
			return nil, fmt.Errorf("tls: client CA %s: %w", name, errNoCertificate)
		}
		cfg.ClientCAs = pool
		cfg.ClientAuth = tls.RequireAndVerifyClientCert
	}
	return cfg, nil
}

var errNoCertificate = errors.New("no PEM certificate in it")

// Client returns the TLS configuration of a client: it trusts the CAs in
// caFile (empty: the system's roots), presents certFile and keyFile (both
// or neither) to a server that asks for a client certificate, and checks
// the server's certificate for serverName (empty: the host dialled).
func Client(caFile, certFile, keyFile, serverName string) (*tls.Config, error) {
	cfg := &tls.Config{MinVersion: tls.VersionTLS12, ServerName: serverName}
	if caFile != "" {
		data, err := os.ReadFile(caFile)
		if err != nil {
			return nil, fmt.Errorf("tls: CA: %w", err)
		}
		cfg.RootCAs = x509.NewCertPool()
		if !cfg.RootCAs.AppendCertsFromPEM(data) {
			return nil, fmt.Errorf("tls: CA %s: %w", caFile, errNoCertificate)
		}
	}
	if (certFile == "") != (keyFile == "") {
		return nil, errors.New("tls: a client certificate needs its key, and a key its certificate")
	}
	if certFile != "" {
		cert, err := tls.LoadX509KeyPair(certFile, keyFile)
		if err != nil {
			return nil, fmt.Errorf("tls: certificate %s with key %s: %w", certFile, keyFile, err)
		}
		cfg.Certificates = []tls.Certificate{cert}
	}
	return cfg, nil
}
