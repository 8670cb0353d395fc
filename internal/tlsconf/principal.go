package tlsconf

import (
	"context"
	"crypto/x509"

	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/peer"
)

// Where a certificate's principal comes from (config.MTLS.PrincipalFrom).
const (
	PrincipalAuto = ""    // the first URI SAN, else the first DNS SAN, else the CN
	PrincipalURI  = "uri" // the first URI SAN
	PrincipalDNS  = "dns" // the first DNS SAN
	PrincipalCN   = "cn"  // the subject's common name
)

// Principal is the identity of cert as from selects it, or "" when cert
// carries none of that kind.
func Principal(cert *x509.Certificate, from string) string {
	uri := func() string {
		if len(cert.URIs) > 0 {
			return cert.URIs[0].String()
		}
		return ""
	}
	dns := func() string {
		if len(cert.DNSNames) > 0 {
			return cert.DNSNames[0]
		}
		return ""
	}
	switch from {
	case PrincipalURI:
		return uri()
	case PrincipalDNS:
		return dns()
	case PrincipalCN:
		return cert.Subject.CommonName
	}
	if p := uri(); p != "" {
		return p
	}
	if p := dns(); p != "" {
		return p
	}
	return cert.Subject.CommonName
}

// PeerCertificate is the verified client certificate of the gRPC call in
// ctx: nil without TLS, or when the client presented none that a client
// CA verified.
func PeerCertificate(ctx context.Context) *x509.Certificate {
	p, ok := peer.FromContext(ctx)
	if !ok {
		return nil
	}
	info, ok := p.AuthInfo.(credentials.TLSInfo)
	if !ok || len(info.State.VerifiedChains) == 0 || len(info.State.VerifiedChains[0]) == 0 {
		return nil
	}
	return info.State.VerifiedChains[0][0]
}
