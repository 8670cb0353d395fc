// Package oidctest is an OpenID Connect issuer for tests: an httptest
// server on loopback serving a discovery document and a key set (JWKS)
// whose keys a test adds, rotates and removes, counting the fetches, and
// that can be taken down; and it signs tokens with those keys, or with
// keys it does not publish.
package oidctest

import (
	"crypto"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/rsa"
	"encoding/json"
	"encoding/pem"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"sync"
	"testing"

	jose "github.com/go-jose/go-jose/v4"
)

// Audience is the audience Claims gives tokens.
const Audience = "agentd"

// Issuer is a running test issuer. Its methods are safe for concurrent
// use.
type Issuer struct {
	// URL is the issuer URL, as its tokens' iss claim gives it.
	URL string
	// CAFile names a PEM file holding the certificate of an issuer made
	// by NewTLS (for auth.oidc's ca_file); "" for one made by New.
	CAFile string

	srv *httptest.Server

	mu        sync.Mutex
	published []Key
	down      bool
	discovery int
	jwks      int
}

// Key is a signing key and its key id.
type Key struct {
	ID        string
	Algorithm jose.SignatureAlgorithm
	Private   crypto.Signer
}

// Public is the key's public half.
func (k Key) Public() crypto.PublicKey { return k.Private.Public() }

// New starts an issuer on a loopback http URL, stopped when the test
// ends.
func New(t testing.TB) *Issuer {
	t.Helper()
	return start(t, httptest.NewServer)
}

// NewTLS starts an issuer on an https URL whose certificate CAFile holds.
func NewTLS(t testing.TB) *Issuer {
	t.Helper()
	is := start(t, httptest.NewTLSServer)
	is.CAFile = filepath.Join(t.TempDir(), "issuer-ca.pem")
	cert := pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: is.srv.Certificate().Raw})
	if err := os.WriteFile(is.CAFile, cert, 0o600); err != nil {
		t.Fatal(err)
	}
	return is
}

// start starts an issuer on the server newServer makes, stopped when the
// test ends.
func start(t testing.TB, newServer func(http.Handler) *httptest.Server) *Issuer {
	t.Helper()
	is := &Issuer{}
	is.srv = newServer(http.HandlerFunc(is.serve))
	is.URL = is.srv.URL
	t.Cleanup(is.srv.Close)
	return is
}

func (is *Issuer) serve(w http.ResponseWriter, r *http.Request) {
	is.mu.Lock()
	defer is.mu.Unlock()
	if is.down {
		http.Error(w, "down", http.StatusServiceUnavailable)
		return
	}
	var body any
	switch r.URL.Path {
	case "/.well-known/openid-configuration":
		is.discovery++
		body = map[string]any{
			"issuer":                                is.URL,
			"jwks_uri":                              is.URL + "/keys",
			"authorization_endpoint":                is.URL + "/authorize",
			"token_endpoint":                        is.URL + "/token",
			"id_token_signing_alg_values_supported": []string{"RS256", "ES256"},
		}
	case "/keys":
		is.jwks++
		var set jose.JSONWebKeySet
		for _, k := range is.published {
			set.Keys = append(set.Keys, jose.JSONWebKey{Key: k.Public(), KeyID: k.ID, Algorithm: string(k.Algorithm), Use: "sig"})
		}
		body = set
	default:
		http.NotFound(w, r)
		return
	}
	w.Header().Set("Content-Type", "application/json")
	_ = json.NewEncoder(w).Encode(body)
}

// NewKey makes a key of alg (RS256 or ES256) with id, not published.
func NewKey(t testing.TB, id string, alg jose.SignatureAlgorithm) Key {
	t.Helper()
	var (
		priv crypto.Signer
		err  error
	)
	switch alg {
	case jose.RS256, jose.PS256:
		priv, err = rsa.GenerateKey(rand.Reader, 2048)
	case jose.ES256:
		priv, err = ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	default:
		t.Fatalf("oidctest: no keys for %s", alg)
	}
	if err != nil {
		t.Fatal(err)
	}
	return Key{ID: id, Algorithm: alg, Private: priv}
}

// Publish adds keys to the key set the issuer serves.
func (is *Issuer) Publish(keys ...Key) {
	is.mu.Lock()
	defer is.mu.Unlock()
	is.published = append(is.published, keys...)
}

// PublishNewKey makes a key as NewKey does and publishes it.
func (is *Issuer) PublishNewKey(t testing.TB, id string, alg jose.SignatureAlgorithm) Key {
	t.Helper()
	k := NewKey(t, id, alg)
	is.Publish(k)
	return k
}

// Unpublish removes the key of id from the key set.
func (is *Issuer) Unpublish(id string) {
	is.mu.Lock()
	defer is.mu.Unlock()
	for i, k := range is.published {
		if k.ID == id {
			is.published = append(is.published[:i:i], is.published[i+1:]...)
			return
		}
	}
}

// SetDown makes the issuer answer every request 503 (down) or serve again.
func (is *Issuer) SetDown(down bool) {
	is.mu.Lock()
	defer is.mu.Unlock()
	is.down = down
}

// Fetches are the discovery and key set requests the issuer has served.
func (is *Issuer) Fetches() (discovery, jwks int) {
	is.mu.Lock()
	defer is.mu.Unlock()
	return is.discovery, is.jwks
}

// Claims are a token's claims.
type Claims map[string]any

// Sign signs claims with key into a compact JWT, its header naming the
// key's id (unless the id is empty).
func Sign(t testing.TB, key Key, claims Claims) string {
	t.Helper()
	return sign(t, jose.SigningKey{Algorithm: key.Algorithm, Key: jose.JSONWebKey{Key: key.Private, KeyID: key.ID}}, claims)
}

// SignHMAC signs claims with HS256 keyed by secret, its header naming kid:
// the token an attacker makes from a public key, hoping it is taken for a
// secret.
func SignHMAC(t testing.TB, kid string, secret []byte, claims Claims) string {
	t.Helper()
	return sign(t, jose.SigningKey{Algorithm: jose.HS256, Key: jose.JSONWebKey{Key: secret, KeyID: kid}}, claims)
}

func sign(t testing.TB, key jose.SigningKey, claims Claims) string {
	t.Helper()
	signer, err := jose.NewSigner(key, (&jose.SignerOptions{}).WithType("JWT"))
	if err != nil {
		t.Fatal(err)
	}
	payload, err := json.Marshal(claims)
	if err != nil {
		t.Fatal(err)
	}
	jws, err := signer.Sign(payload)
	if err != nil {
		t.Fatal(err)
	}
	token, err := jws.CompactSerialize()
	if err != nil {
		t.Fatal(err)
	}
	return token
}

// Claims returns the claims of a valid token from this issuer for
// Audience at the Unix time now (valid for an hour), for subject sub of
// tenant with roles, with edits applied (a nil value deletes a claim).
func (is *Issuer) Claims(now int64, sub, tenant string, roles []string, edits Claims) Claims {
	c := Claims{"iss": is.URL, "aud": Audience, "sub": sub, "tenant": tenant, "roles": roles, "iat": now, "nbf": now, "exp": now + 3600}
	for k, v := range edits {
		if v == nil {
			delete(c, k)
		} else {
			c[k] = v
		}
	}
	return c
}
