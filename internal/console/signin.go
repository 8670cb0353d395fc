package console

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"net/http"
	"net/url"
	"os"
	"sync"
	"time"

	"github.com/coreos/go-oidc/v3/oidc"

	"github.com/agentd/agentd/internal/config"
)

const (
	// discoveryTimeout bounds one read of the issuer's discovery
	// document, which a page load waits for.
	discoveryTimeout = 10 * time.Second
	// keepEndpoints is how long discovered endpoints are used before they
	// are read again; keepFailure, how long a failed read is answered
	// without trying again, so that page loads while the issuer is down
	// do not each wait for it.
	keepEndpoints = time.Hour
	keepFailure   = 10 * time.Second
)

// SignIn is how the page signs in with an OpenID Connect issuer
// (authorization code with PKCE, as a public client): what it sends its
// user to, what it exchanges the code at, and which token agentd then
// accepts. None of it is secret: the page needs it before anyone signs in.
type SignIn struct {
	// Issuer is the issuer as auth.oidc names it (and its tokens' iss).
	Issuer   string   `json:"issuer"`
	ClientID string   `json:"client_id"`
	Scopes   []string `json:"scopes"`
	// Token is the token the page sends agentd: "id_token" when the
	// issuer's audience in auth.oidc is the console's client id (an ID
	// token's audience is its client), "access_token" otherwise.
	Token string `json:"token"`
	// The endpoints, from the issuer's discovery document; empty, with
	// Error saying why, until it has been read.
	AuthorizationEndpoint string `json:"authorization_endpoint"`
	TokenEndpoint         string `json:"token_endpoint"`
	Error                 string `json:"error,omitempty"`

	// caFile verifies the issuer's certificate, as auth.oidc's ca_file.
	caFile string
}

// ConfigOf is the page's configuration as cfg gives it.
func ConfigOf(cfg config.Config) Config {
	c := Config{TraceURL: cfg.Console.TraceURL}
	if is, ok := cfg.SignInIssuer(); ok {
		token := "access_token"
		if is.Audience == cfg.Console.ClientID {
			token = "id_token"
		}
		c.OIDC = &SignIn{Issuer: is.Issuer, ClientID: cfg.Console.ClientID, Scopes: cfg.Console.SignInScopes(), Token: token, caFile: is.CAFile}
	}
	return c
}

// discovery finds the sign-in's endpoints in the issuer's discovery
// document, when a page first needs them, and keeps them (see
// keepEndpoints). Safe for concurrent use: one read at a time, and calls
// that wait for it get its result.
type discovery struct {
	base   SignIn
	client *http.Client
	now    func() time.Time

	mu     sync.Mutex
	found  SignIn
	expiry time.Time
}

func newDiscovery(base SignIn) *discovery {
	return &discovery{base: base, client: issuerClient(base.caFile), now: time.Now}
}

// resolve is the sign-in with its endpoints, or with the reason they are
// not known.
func (d *discovery) resolve(ctx context.Context) SignIn {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.now().Before(d.expiry) {
		return d.found
	}
	d.found = d.base
	authURL, tokenURL, err := d.read(ctx)
	if err != nil {
		d.found.Error = "agentd could not read the issuer's discovery document: " + err.Error()
		d.expiry = d.now().Add(keepFailure)
		return d.found
	}
	d.found.AuthorizationEndpoint, d.found.TokenEndpoint = authURL, tokenURL
	d.expiry = d.now().Add(keepEndpoints)
	return d.found
}

// read reads the endpoints, checked as web addresses the page may send
// its user to and call: https, or http on loopback (a local issuer).
func (d *discovery) read(ctx context.Context) (authURL, tokenURL string, err error) {
	if d.client == nil {
		return "", "", fmt.Errorf("auth.oidc's ca_file %q could not be read", d.base.caFile)
	}
	// A page load that gives up does not cut the read short: its result
	// serves the loads after it.
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), discoveryTimeout)
	defer cancel()
	p, err := oidc.NewProvider(oidc.ClientContext(ctx, d.client), d.base.Issuer)
	if err != nil {
		return "", "", err
	}
	ep := p.Endpoint()
	if !webEndpoint(ep.AuthURL) || !webEndpoint(ep.TokenURL) {
		return "", "", fmt.Errorf("its authorization_endpoint and token_endpoint must be https URLs (or http to a loopback address)")
	}
	return ep.AuthURL, ep.TokenURL, nil
}

// issuerClient reads the issuer over TLS verified by caFile's
// certificates (the system's without one); nil when caFile cannot be
// read, which the page is told. A read is rare (hourly at most): an idle
// connection kept for the next would only hold a goroutine.
func issuerClient(caFile string) *http.Client {
	transport := http.DefaultTransport.(*http.Transport).Clone()
	transport.DisableKeepAlives = true
	if caFile != "" {
		pem, err := os.ReadFile(caFile)
		pool := x509.NewCertPool()
		if err != nil || !pool.AppendCertsFromPEM(pem) {
			return nil
		}
		transport.TLSClientConfig = &tls.Config{RootCAs: pool, MinVersion: tls.VersionTLS12}
	}
	return &http.Client{Transport: transport, Timeout: discoveryTimeout}
}

// webEndpoint reports whether raw is an address the page may use: https,
// or http to a loopback host, with no credentials or fragment.
func webEndpoint(raw string) bool {
	u, err := url.Parse(raw)
	return err == nil && u.User == nil && u.Fragment == "" && config.OIDCURL(u.Scheme+"://"+u.Host)
}

// origin is raw's scheme, host and port, as a Content-Security-Policy
// source; "" when raw is not a web address.
func origin(raw string) string {
	u, err := url.Parse(raw)
	if err != nil || !webEndpoint(raw) {
		return ""
	}
	return u.Scheme + "://" + u.Host
}
