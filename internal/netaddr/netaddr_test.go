package netaddr

import (
	"net/netip"
	"testing"
)

// TestPrivate: X-H5, X-S2. The address classes that only agentd's network
// can reach, one definition for placement, the bridge's policy and its
// dialler.
func TestPrivate(t *testing.T) {
	t.Parallel()
	tests := []struct {
		addr string
		want bool
	}{
		// Loopback.
		{"127.0.0.1", true},
		{"127.255.1.2", true},
		{"::1", true},
		// RFC 1918.
		{"10.0.0.1", true},
		{"10.255.255.255", true},
		{"172.16.0.1", true},
		{"172.31.255.254", true},
		{"192.168.1.1", true},
		{"172.15.255.255", false},
		{"172.32.0.1", false},
		{"192.169.0.1", false},
		// Shared address space, 100.64.0.0/10 (X-H5).
		{"100.64.0.1", true},
		{"100.64.1.2", true},
		{"100.100.100.100", true},
		{"100.127.255.254", true},
		{"100.63.255.255", false},
		{"100.128.0.1", false},
		// Unique local, fc00::/7.
		{"fc00::1", true},
		{"fd12:3456:789a::1", true},
		{"fe00::1", false},
		// Link-local, unicast and multicast.
		{"169.254.169.254", true},
		{"fe80::1", true},
		{"fe80::1%eth0", true},
		{"224.0.0.251", true},
		{"ff02::1", true},
		// Unspecified.
		{"0.0.0.0", true},
		{"::", true},
		// Public.
		{"8.8.8.8", false},
		{"1.1.1.1", false},
		{"93.184.216.34", false},
		{"2606:4700:4700::1111", false},
		{"2001:4860:4860::8888", false},
		// IPv4-mapped IPv6 is judged by its IPv4 address.
		{"::ffff:127.0.0.1", true},
		{"::ffff:10.1.2.3", true},
		{"::ffff:192.168.0.1", true},
		{"::ffff:100.64.0.1", true},
		{"::ffff:169.254.169.254", true},
		{"::ffff:0.0.0.0", true},
		{"::ffff:8.8.8.8", false},
	}
	for _, tc := range tests {
		t.Run("X-H5 "+tc.addr, func(t *testing.T) {
			t.Parallel()
			a, err := netip.ParseAddr(tc.addr)
			if err != nil {
				t.Fatalf("bad test address %q: %v", tc.addr, err)
			}
			if got := Private(a); got != tc.want {
				t.Errorf("Private(%s) = %v, want %v", tc.addr, got, tc.want)
			}
		})
	}
}

// TestPrivateHost: X-H5. URL hosts: localhost names, literal addresses
// (IPv6 as url.URL.Hostname gives them, without brackets), and names,
// which are left to the dialler.
func TestPrivateHost(t *testing.T) {
	t.Parallel()
	tests := []struct {
		host string
		want bool
	}{
		{"localhost", true},
		{"LocalHost", true},
		{"localhost.", true},
		{"api.localhost", true},
		{"a.b.LOCALHOST", true},
		{"100.64.1.2", true},
		{"10.1.2.3", true},
		{"::1", true},
		{"::ffff:100.64.1.2", true},
		{"fe80::1%en0", true},
		{"8.8.8.8", false},
		{"2001:4860:4860::8888", false},
		{"mcp.example.com", false},
		{"localhost.example.com", false},
		{"notlocalhost", false},
		{"", false},
	}
	for _, tc := range tests {
		t.Run("X-H5 "+tc.host, func(t *testing.T) {
			t.Parallel()
			if got := PrivateHost(tc.host); got != tc.want {
				t.Errorf("PrivateHost(%q) = %v, want %v", tc.host, got, tc.want)
			}
		})
	}
}

// X-I1: only a loopback listen address keeps agentd to its own machine.
func TestLoopbackListen(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		addr string
		want bool
	}{
		{"127.0.0.1:7070", true},
		{"127.1.2.3:7070", true},
		{"[::1]:7070", true},
		{"localhost:7070", true},
		{"[::ffff:127.0.0.1]:0", true},
		{"0.0.0.0:7070", false},
		{"[::]:7070", false},
		{":7070", false},
		{"10.0.0.5:7070", false},
		{"agentd.internal:7070", false},
		{"127.0.0.1", false}, // no port: not a listen address
	} {
		t.Run("X-I1 "+tc.addr, func(t *testing.T) {
			t.Parallel()
			if got := LoopbackListen(tc.addr); got != tc.want {
				t.Errorf("LoopbackListen(%q) = %v, want %v", tc.addr, got, tc.want)
			}
		})
	}
}
