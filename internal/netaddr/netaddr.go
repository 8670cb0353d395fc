// Package netaddr is agentd's one definition of the addresses that only
// agentd's own network can reach (and, for its listeners, of those that
// only its own machine can reach): loopback, private (RFC 1918, RFC 4193),
// shared (RFC 6598, 100.64.0.0/10), link-local (unicast and multicast) and
// unspecified addresses, and the names "localhost" and "*.localhost"
// (RFC 6761).
//
// Three places ask the same question and must agree: placement (a
// provider's cloud cannot reach such a url server, so it runs in the
// bridge), the bridge's policy (a request may not name such an address
// unless bridge.allow_private_networks) and the bridge's dialler (the
// address actually dialled, after name resolution, so that DNS rebinding
// cannot get around the policy). Transport is that dialler, for the
// bridge's MCP connections and agentd's requests to authorization
// servers alike.
package netaddr

import (
	"errors"
	"net"
	"net/http"
	"net/netip"
	"strings"
	"syscall"
	"time"
)

// shared is the shared address space of carrier-grade NAT (RFC 6598),
// which netip.Addr.IsPrivate does not cover.
var shared = netip.MustParsePrefix("100.64.0.0/10")

// Private reports whether a is a loopback, private, shared, link-local or
// unspecified address. An IPv4-mapped IPv6 address (::ffff:10.1.2.3) is
// judged by its IPv4 address.
func Private(a netip.Addr) bool {
	a = a.Unmap()
	return a.IsLoopback() || a.IsPrivate() || shared.Contains(a) ||
		a.IsLinkLocalUnicast() || a.IsLinkLocalMulticast() || a.IsUnspecified()
}

// PrivateHost reports whether host, a URL's host name without port or
// brackets (url.URL.Hostname), is "localhost", a name under ".localhost"
// or a literal Private address. Other names are not resolved: they are
// judged by the address they resolve to when dialled.
func PrivateHost(host string) bool {
	name := strings.TrimSuffix(strings.ToLower(host), ".")
	if name == "localhost" || strings.HasSuffix(name, ".localhost") {
		return true
	}
	a, err := netip.ParseAddr(host)
	return err == nil && Private(a)
}

// LoopbackListen reports whether a listen address (host:port) accepts
// connections from this machine alone: its host is "localhost" or a
// loopback literal. An empty host, an unspecified address (0.0.0.0, ::)
// or any other name or address listens beyond the machine.
func LoopbackListen(addr string) bool {
	host, _, err := net.SplitHostPort(addr)
	if err != nil {
		return false
	}
	if strings.EqualFold(strings.TrimSuffix(host, "."), "localhost") {
		return true
	}
	a, err := netip.ParseAddr(host)
	return err == nil && a.Unmap().IsLoopback()
}

// ErrNotAllowed is the cause of a refused connection to an address only
// agentd's own network reaches.
var ErrNotAllowed = errors.New("the address is loopback, private, shared (100.64/10) or link-local")

// Transport returns an HTTP transport for addresses that requests name
// (MCP servers, their authorization servers). Unless allowPrivate, it
// refuses to connect to the addresses Private names; the check runs on
// the address actually dialled, after name resolution, so a name that
// resolves to such an address later (DNS rebinding) is refused too. It
// never goes through HTTP(S)_PROXY: the check must see the peer's
// address, not a proxy's.
func Transport(allowPrivate bool) *http.Transport {
	t := http.DefaultTransport.(*http.Transport).Clone()
	dialer := &net.Dialer{Timeout: 30 * time.Second, KeepAlive: 30 * time.Second}
	if !allowPrivate {
		dialer.Control = refusePrivate
	}
	t.DialContext = dialer.DialContext
	t.Proxy = nil
	return t
}

// refusePrivate is a dialer's Control: it refuses to connect to a Private
// address.
func refusePrivate(_, address string, _ syscall.RawConn) error {
	host, _, err := net.SplitHostPort(address)
	if err != nil {
		return err
	}
	if a, err := netip.ParseAddr(host); err != nil || Private(a) {
		return ErrNotAllowed
	}
	return nil
}
