package config

import (
	"strconv"
)

// TLS configures TLS on a listener, or on `agentd serve`'s side of the
// hop to a remote bridge. The certificate, key and client CA files are
// re-read when they change, so they can be rotated without a restart.
// TLS alone authenticates no caller: without auth, the listener still
// stays on loopback.
type TLS struct {
	// CertFile is the PEM certificate chain this side presents, leaf
	// first: a listener's server certificate, or the client certificate
	// of `agentd serve` dialling a remote bridge (bridge.tls). Without
	// it, the listener serves plaintext.
	CertFile string `yaml:"cert_file" env:"CERT_FILE"`
	// KeyFile is the PEM private key of cert_file's leaf, required with
	// cert_file and only with it.
	KeyFile string `yaml:"key_file" env:"KEY_FILE"`
	// ClientCAFile is a PEM bundle of CA certificates that every client
	// must present a certificate verified by (mutual TLS). Needs
	// cert_file. Without it, no client certificate is asked for.
	ClientCAFile string `yaml:"client_ca_file" env:"CLIENT_CA_FILE"`
	// MinVersion is the lowest TLS version served (or, dialling,
	// accepted).
	MinVersion string `yaml:"min_version" env:"MIN_VERSION" enum:"1.2,1.3"`
	// CAFile is a PEM bundle of CA certificates that verifies the peer's
	// certificate when this side dials: `agentd serve` dialling a remote
	// bridge (bridge.tls).
	CAFile string `yaml:"ca_file" env:"CA_FILE,dial" default:"the system's roots"`
	// ServerName is the name the dialled peer's certificate must carry.
	ServerName string `yaml:"server_name" env:"SERVER_NAME,dial" default:"the host of the address dialled"`
}

// Enabled reports whether the listener serves TLS.
func (t TLS) Enabled() bool { return t.CertFile != "" }

// Dials reports whether the side that dials with these settings (`agentd
// serve` dialling bridge.address) uses TLS: when they name a client
// certificate, a CA or a server name.
func (t TLS) Dials() bool { return t.CertFile != "" || t.CAFile != "" || t.ServerName != "" }

func (t TLS) validate(setting string, bad func(string, ...any)) {
	if (t.CertFile == "") != (t.KeyFile == "") {
		bad("%s: cert_file and key_file must be set together", setting)
	}
	if t.ClientCAFile != "" && t.CertFile == "" {
		bad("%s.client_ca_file: needs cert_file and key_file", setting)
	}
}

// Admin places the bridge's admin service (BridgeAdminService).
type Admin struct {
	// Listen, when set, serves the admin service (with health and
	// reflection) on its own address instead of beside the AgentService.
	// `agentd serve` with its embedded bridge serves it there and no
	// longer on listen; `agentd bridge` serves it there and no longer on
	// bridge.listen; `agentd serve` with a remote bridge (bridge.address)
	// has no admin service and leaves it to that bridge. Under
	// authentication its calls need the observer (reads) or admin
	// (writes) role, or tenant_admin for the caller's own tenant's cache
	// entries; without, it listens only on loopback unless insecure.
	Listen string `yaml:"listen" env:"AGENTD_ADMIN_LISTEN"`
	// TLS serves the admin listener over TLS. It needs admin.listen:
	// beside the AgentService, the admin service is served over tls.
	TLS TLS `yaml:"tls" env:"AGENTD_ADMIN_TLS_"`
}

// validateListeners checks where agentd listens, and over what.
func (c *Config) validateListeners(bad func(string, ...any)) {
	if c.Listen == "" {
		bad("listen: must not be empty")
	}
	if c.Bridge.Listen == "" {
		bad("bridge.listen: must not be empty")
	}
	for _, l := range c.listenAddresses() {
		if isPort(l.addr) {
			bad("%s: %q has no host; write 127.0.0.1:%s", l.key, l.addr, l.addr)
		}
	}
	c.validateTLS(bad)
}

// validateTLS checks the three TLS blocks.
func (c *Config) validateTLS(bad func(string, ...any)) {
	c.TLS.validate("tls", bad)
	c.Bridge.TLS.validate("bridge.tls", bad)
	c.Admin.TLS.validate("admin.tls", bad)
	if c.Admin.Listen == "" && (c.Admin.TLS.CertFile != "" || c.Admin.TLS.ClientCAFile != "") {
		bad("admin.tls: needs admin.listen (without it, the admin service is served beside the main service, over its tls)")
	}
}

// A listenAddress is an address agentd may listen on, and its key.
type listenAddress struct{ key, addr string }

// listenAddresses are the addresses agentd listens on.
func (c *Config) listenAddresses() []listenAddress {
	return []listenAddress{
		{"listen", c.Listen}, {"bridge.listen", c.Bridge.Listen}, {"admin.listen", c.Admin.Listen},
		{"metrics.listen", c.Metrics.Listen}, {"debug.listen", c.Debug.Listen},
	}
}

// isPort reports whether addr is a bare port number, which net.Listen
// would refuse as an address.
func isPort(addr string) bool {
	_, err := strconv.ParseUint(addr, 10, 16)
	return err == nil
}
