// Package tlsconf builds the server side of TLS for agentd's listeners
// from config.TLS: it owns reading the certificate, key and client
// CA files, and reading them again when they change, so that they rotate
// without a restart. A changed set of files that cannot be used leaves
// the previous one serving, and the log says why. Dialling builds the
// client side from config.TLS the same way, for `agentd serve` dialling a
// remote bridge; Client builds it from files, for `agentd
// generate`.
//
// Errors and logs name a file by its setting (tls.key_file,
// bridge.tls.cert_file, admin.tls.client_ca_file; Client's by the flags of
// `agentd generate`, --tls-key), and say what is wrong with it, never
// its path nor its contents. A key's path says where a secret lies, and
// certificates and CA bundles usually lie beside it: every file is named
// the same way, so that no message needs to be judged on its own, and the
// operator finds the path in the setting named.
package tlsconf

import (
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"os"
	"sync"

	"github.com/agentd/agentd/internal/config"
)

// Server returns the TLS configuration of a listener from settings, the
// setting named setting ("tls", "bridge.tls" or "admin.tls"): its
// certificate and key, at least TLS 1.2 (1.3 if MinVersion says so), and
// with a client CA, a verified client certificate required of every
// client. The files are read now (an error names the setting of the file
// that cannot be used) and again at any handshake after one of them
// changed; connections already established keep the certificate they
// were served.
func Server(settings config.TLS, setting string, log *slog.Logger) (*tls.Config, error) {
	r := &reloader{settings: settings, setting: setting, log: log, minVersion: tls.VersionTLS12}
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
	setting    string
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
			// Logged once per change of the files, not per handshake.
			r.log.Error("TLS files changed but cannot be used; still serving the previous certificate", "setting", r.setting, "error", err)
		} else {
			r.current = cfg
			leaf := cfg.Certificates[0].Leaf
			r.log.Info("TLS certificate reloaded", "setting", r.setting, "serial", leaf.SerialNumber.String(), "not_after", leaf.NotAfter)
		}
	}
	return r.current, nil
}

func (r *reloader) stat() [3]stamp {
	return stat(r.settings.CertFile, r.settings.KeyFile, r.settings.ClientCAFile)
}

// stat stamps up to three files; an empty name stamps nothing.
func stat(names ...string) [3]stamp {
	var s [3]stamp
	for i, name := range names {
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
	cert, err := loadPair(r.setting+".cert_file", r.settings.CertFile, r.setting+".key_file", r.settings.KeyFile)
	if err != nil {
		return nil, err
	}
	cfg := &tls.Config{MinVersion: r.minVersion, Certificates: []tls.Certificate{*cert}}
	if name := r.settings.ClientCAFile; name != "" {
		if cfg.ClientCAs, err = loadPool(r.setting+".client_ca_file", name); err != nil {
			return nil, err
		}
		cfg.ClientAuth = tls.RequireAndVerifyClientCert
	}
	return cfg, nil
}

var errNoCertificate = errors.New("no PEM certificate in it")

// readFile reads the file at path, which the setting named setting gives.
// Its error names the setting and what went wrong, not the path.
func readFile(setting, path string) ([]byte, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		if pe, ok := errors.AsType[*fs.PathError](err); ok {
			err = pe.Err
		}
		return nil, fmt.Errorf("%s: %w", setting, err)
	}
	return data, nil
}

// loadPair loads a certificate and its key, each named in errors by its
// setting. crypto/tls's errors about the pair say what is wrong with it
// and quote neither file.
func loadPair(certSetting, certPath, keySetting, keyPath string) (*tls.Certificate, error) {
	certPEM, err := readFile(certSetting, certPath)
	if err != nil {
		return nil, err
	}
	keyPEM, err := readFile(keySetting, keyPath)
	if err != nil {
		return nil, err
	}
	cert, err := tls.X509KeyPair(certPEM, keyPEM)
	if err != nil {
		return nil, fmt.Errorf("%s with %s: %w", certSetting, keySetting, err)
	}
	return &cert, nil
}

// loadPool reads a PEM bundle of CA certificates, named in errors by its
// setting.
func loadPool(setting, path string) (*x509.CertPool, error) {
	data, err := readFile(setting, path)
	if err != nil {
		return nil, err
	}
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(data) {
		return nil, fmt.Errorf("%s: %w", setting, errNoCertificate)
	}
	return pool, nil
}

// Client returns the TLS configuration of a client: it trusts the CAs in
// caFile (empty: the system's roots), presents certFile and keyFile (both
// or neither) to a server that asks for a client certificate, and checks
// the server's certificate for serverName (empty: the host dialled). Its
// errors name the files by the flags of `agentd generate` that give them
// (--tls-ca, --tls-cert, --tls-key).
func Client(caFile, certFile, keyFile, serverName string) (*tls.Config, error) {
	cfg := &tls.Config{MinVersion: tls.VersionTLS12, ServerName: serverName}
	if caFile != "" {
		var err error
		if cfg.RootCAs, err = loadPool("--tls-ca", caFile); err != nil {
			return nil, err
		}
	}
	if (certFile == "") != (keyFile == "") {
		return nil, errors.New("a client certificate (--tls-cert) needs its key (--tls-key), and a key its certificate")
	}
	if certFile != "" {
		cert, err := loadPair("--tls-cert", certFile, "--tls-key", keyFile)
		if err != nil {
			return nil, err
		}
		cfg.Certificates = []tls.Certificate{*cert}
	}
	return cfg, nil
}

// Dialling returns the TLS configuration with which `agentd serve` dials
// a remote bridge, from settings (the setting named setting, bridge.tls):
// it trusts the CAs in CAFile (empty: the system's roots), checks the
// bridge's certificate for ServerName (empty: the host dialled), accepts
// MinVersion or newer, and presents CertFile and KeyFile, when set, to a
// bridge that asks for a client certificate. CAFile is read now; the
// certificate and key now (an error names the setting of the file that
// cannot be used) and again at any handshake after one of them changed. A
// changed pair that cannot be used keeps the previous one presented, and
// the log says why, once.
func Dialling(settings config.TLS, setting string, log *slog.Logger) (*tls.Config, error) {
	cfg := &tls.Config{MinVersion: tls.VersionTLS12, ServerName: settings.ServerName}
	if settings.MinVersion == "1.3" {
		cfg.MinVersion = tls.VersionTLS13
	}
	if name := settings.CAFile; name != "" {
		var err error
		if cfg.RootCAs, err = loadPool(setting+".ca_file", name); err != nil {
			return nil, err
		}
	}
	if settings.CertFile == "" {
		return cfg, nil
	}
	c := &clientCert{certFile: settings.CertFile, keyFile: settings.KeyFile, setting: setting, log: log}
	c.stamps = stat(c.certFile, c.keyFile)
	cert, err := c.read()
	if err != nil {
		return nil, err
	}
	c.current = cert
	cfg.GetClientCertificate = c.get
	return cfg, nil
}

// clientCert is the client certificate a dialling side presents, read
// again when its files change.
type clientCert struct {
	certFile, keyFile string
	setting           string
	log               *slog.Logger

	mu      sync.Mutex
	stamps  [3]stamp // of cert and key when last read, whether or not they could be used
	current *tls.Certificate
}

// get presents the current certificate. Like configForClient, it looks at
// the files at every handshake rather than watching them.
func (c *clientCert) get(*tls.CertificateRequestInfo) (*tls.Certificate, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if s := stat(c.certFile, c.keyFile); s != c.stamps {
		c.stamps = s
		cert, err := c.read()
		if err != nil {
			c.log.Error("TLS client certificate files changed but cannot be used; still presenting the previous certificate", "setting", c.setting, "error", err)
		} else {
			c.current = cert
			c.log.Info("TLS client certificate reloaded", "setting", c.setting, "serial", cert.Leaf.SerialNumber.String(), "not_after", cert.Leaf.NotAfter)
		}
	}
	return c.current, nil
}

func (c *clientCert) read() (*tls.Certificate, error) {
	return loadPair(c.setting+".cert_file", c.certFile, c.setting+".key_file", c.keyFile)
}
