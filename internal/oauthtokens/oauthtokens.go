// Package oauthtokens keeps the OAuth tokens that agentd obtains for MCP
// servers: one per tenant, end user and server, reused by later
// generations until it is replaced or revoked. A server is known by
// ServerKey, a hash of its URL, so that no part of the URL (whose path
// may carry a secret) is stored or shown.
//
// NewSealed keeps them in agentd's store (store.Tokens), sealed with
// AES-256-GCM under store.encryption_key_file and bound to their tenant,
// end user and server, so that a sealed token moved to another's row
// does not open; a token sealed under a previous key
// (store.previous_encryption_key_files) is sealed again under the current
// one when it is read. Without a key, NewMemory keeps them in the
// process's memory only: they are never written anywhere in the clear,
// and a restart forgets them.
//
// The token's bytes are the caller's (the go-sdk's oauth2.Token, encoded
// as it likes); this package never reads them, logs them or names them in
// an error.
package oauthtokens

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"net"
	"net/url"
	"strings"
)

// Key names one token: the tenant it belongs to, the end user it acts for
// (StartGeneration.end_user, or the principal that stood for one; "" for
// callers that name none), and the server it is for (ServerKey).
type Key struct {
	Tenant, EndUser, Server string
}

// Store keeps tokens by Key. All methods are safe for concurrent use.
type Store interface {
	// Get returns the token of k, or nil, nil when there is none. A
	// stored token that cannot be opened (sealed under a key that this
	// agentd no longer has, or altered) is an error that matches
	// ErrUnreadable: the caller treats it as none (the end user
	// authorizes again, and Put replaces it) and may log it.
	Get(ctx context.Context, k Key) ([]byte, error)
	// Put stores token as k's, replacing any earlier one.
	Put(ctx context.Context, k Key, token []byte) error
	// Delete deletes tenant's tokens, only endUser's when it is not empty
	// and only server's (a ServerKey) when it is not empty, and returns
	// how many it deleted.
	Delete(ctx context.Context, tenant, endUser, server string) (int64, error)
}

// defaultPorts are the ports a URL of each scheme has when it names none.
var defaultPorts = map[string]string{"http": "80", "https": "443"}

// ServerKey is the key of the MCP server at rawURL: the SHA-256, in hex,
// of its canonical form: scheme and host lower-cased, the scheme's
// default port dropped, an empty path made "/", the path and query kept
// as written, the fragment and any user information dropped (neither is
// part of the server's identity as OAuth sees it, the resource). Two
// spellings of one URL give one key; no part of the URL can be read back
// from it. A string that does not parse as a URL is hashed as it is.
func ServerKey(rawURL string) string {
	sum := sha256.Sum256([]byte(canonical(rawURL)))
	return hex.EncodeToString(sum[:])
}

// canonical is rawURL's canonical form (ServerKey).
func canonical(rawURL string) string {
	u, err := url.Parse(rawURL)
	if err != nil || u.Host == "" {
		return rawURL
	}
	scheme := strings.ToLower(u.Scheme)
	host, port := strings.ToLower(u.Hostname()), u.Port()
	if port == defaultPorts[scheme] {
		port = ""
	}
	if port != "" || strings.Contains(host, ":") {
		// JoinHostPort brackets an IPv6 address; without a port, the
		// brackets alone.
		host = net.JoinHostPort(host, port)
		if port == "" {
			host = strings.TrimSuffix(host, ":")
		}
	}
	c := url.URL{Scheme: scheme, Host: host, RawPath: u.RawPath, Path: u.Path, RawQuery: u.RawQuery, ForceQuery: u.ForceQuery}
	if c.Path == "" {
		c.Path = "/"
	}
	return c.String()
}
