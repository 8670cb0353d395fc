package auth

import (
	"context"
	"crypto/ecdsa"
	"crypto/ed25519"
	"crypto/rsa"
	"crypto/sha256"
	"crypto/tls"
	"crypto/x509"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"net/http"
	"net/url"
	"os"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/coreos/go-oidc/v3/oidc"
	jose "github.com/go-jose/go-jose/v4"

	"github.com/agentd/agentd/internal/config"
)

const (
	// fetchTimeout bounds one fetch of an issuer's discovery document or
	// keys, whatever the deadline of the call that needed it.
	fetchTimeout = 10 * time.Second
	// maxFetchBytes bounds a discovery document or key set.
	maxFetchBytes = 1 << 20
	// maxCachedTokens bounds the tokens remembered as verified.
	maxCachedTokens = 10000
)

// oidcAuth verifies JWTs from the configured issuers, with
// coreos/go-oidc checking the signature, issuer, audience and algorithm,
// and remembers each token it verified until the token expires, so that a
// caller sending one token on every call pays a hash and a map look-up.
type oidcAuth struct {
	issuers map[string]*issuer // by issuer URL, as the iss claim gives it
	now     func() time.Time
	cache   tokenCache
}

// tokenRefusal is why a token was refused, for the log; unavailable when
// it could not be checked because its issuer's keys could not be fetched.
type tokenRefusal struct {
	reason      string
	unavailable bool
}

func (r *tokenRefusal) Error() string { return r.reason }

func refused(format string, args ...any) error {
	return &tokenRefusal{reason: fmt.Sprintf(format, args...)}
}

func newOIDC(issuers []config.OIDCIssuer, now func() time.Time) (*oidcAuth, error) {
	o := &oidcAuth{issuers: make(map[string]*issuer, len(issuers)), now: now, cache: tokenCache{entries: make(map[[sha256.Size]byte]cachedToken)}}
	var problems []error
	for i, c := range issuers {
		at := fmt.Sprintf("auth.oidc[%d]", i)
		is, err := newIssuer(c.WithDefaults(), at, now)
		if err != nil {
			problems = append(problems, err)
			continue
		}
		if _, dup := o.issuers[c.Issuer]; dup {
			problems = append(problems, fmt.Errorf("%s.issuer: configured twice", at))
		}
		o.issuers[c.Issuer] = is
	}
	return o, errors.Join(problems...)
}

// authenticate returns the principal of a token: the one remembered for
// it, else the one its verification gives.
func (o *oidcAuth) authenticate(ctx context.Context, token string) (Principal, error) {
	now := o.now()
	sum := sha256.Sum256([]byte(token))
	if p, ok := o.cache.get(sum, now); ok {
		return p, nil
	}
	iss, err := unverifiedIssuer(token)
	if err != nil {
		return Principal{}, err
	}
	is, ok := o.issuers[iss]
	if !ok {
		return Principal{}, refused("token from an issuer not in auth.oidc")
	}
	p, until, err := is.verify(ctx, token, now)
	if err != nil {
		return Principal{}, err
	}
	o.cache.put(sum, p, until, now)
	return p, nil
}

// unverifiedIssuer reads a token's iss claim, unverified, to choose the
// issuer that verifies it.
func unverifiedIssuer(token string) (string, error) {
	_, rest, _ := strings.Cut(token, ".")
	payload, _, _ := strings.Cut(rest, ".")
	raw, err := base64.RawURLEncoding.DecodeString(payload)
	if err != nil {
		return "", refused("malformed token: its claims are not base64url")
	}
	var claims struct {
		Issuer string `json:"iss"`
	}
	if err := json.Unmarshal(raw, &claims); err != nil {
		return "", refused("malformed token: its claims are not a JSON object with a string iss")
	}
	return claims.Issuer, nil
}

// issuer is one configured issuer: its verifier, and the keys fetched from
// it. It is go-oidc's KeySet for its own verifier.
type issuer struct {
	cfg      config.OIDCIssuer
	at       string // the setting, auth.oidc[i]
	algs     []jose.SignatureAlgorithm
	client   *http.Client
	verifier *oidc.IDTokenVerifier
	now      func() time.Time

	// fetching holds one token while a fetch runs: one fetch at a time,
	// and calls that wait for it see its result.
	fetching chan struct{}

	mu        sync.Mutex
	jwksURL   string // from discovery; "" until discovered, and after a failed fetch
	keys      []jose.JSONWebKey
	fetched   bool      // whether a fetch was ever tried
	lastFetch time.Time // when the last fetch was tried
	lastErr   error     // its failure, or nil
}

func newIssuer(c config.OIDCIssuer, at string, now func() time.Time) (*issuer, error) {
	problems := issuerProblems(c, at)
	is := &issuer{cfg: c, at: at, now: now, fetching: make(chan struct{}, 1)}
	for _, alg := range c.Algorithms {
		is.algs = append(is.algs, jose.SignatureAlgorithm(alg))
	}
	transport, err := fetchTransport(c.CAFile)
	if err != nil {
		problems = append(problems, fmt.Errorf("%s.ca_file: %w", at, err))
	}
	if len(problems) > 0 {
		return nil, errors.Join(problems...)
	}
	is.client = &http.Client{Transport: limitedBody{transport}, Timeout: fetchTimeout, CheckRedirect: checkRedirect}
	is.verifier = oidc.NewVerifier(c.Issuer, is, &oidc.Config{
		ClientID:             c.Audience,
		SupportedSigningAlgs: c.Algorithms,
		// go-oidc checks exp without leeway and nbf with a fixed five
		// minutes: verify checks both, and iat, with clock_skew.
		SkipExpiryCheck: true,
	})
	return is, nil
}

// issuerProblems says what is wrong with the issuer at at: its URL, its
// audience, its algorithms, negative durations.
func issuerProblems(c config.OIDCIssuer, at string) []error {
	var problems []error
	if !config.OIDCURL(c.Issuer) {
		problems = append(problems, fmt.Errorf("%s.issuer: must be an https URL (or http to a loopback address)", at))
	}
	if c.Audience == "" {
		problems = append(problems, fmt.Errorf("%s.audience: must be set", at))
	}
	for _, alg := range c.Algorithms {
		if !slices.Contains(config.OIDCAlgorithms, alg) {
			problems = append(problems, fmt.Errorf("%s.algorithms: %q is not allowed; one of %s", at, alg, strings.Join(config.OIDCAlgorithms, ", ")))
		}
	}
	if c.ClockSkew < 0 || c.RefreshInterval < 0 {
		problems = append(problems, fmt.Errorf("%s: clock_skew and refresh_interval must not be negative", at))
	}
	return problems
}

// fetchTransport is the transport of an issuer's fetches, trusting the
// CA certificates in caFile when it is set. A fetch is rare (at most one
// per refresh_interval): an idle connection kept for the next would only
// hold a goroutine.
func fetchTransport(caFile string) (*http.Transport, error) {
	transport := http.DefaultTransport.(*http.Transport).Clone()
	transport.DisableKeepAlives = true
	if caFile == "" {
		return transport, nil
	}
	pem, err := os.ReadFile(caFile)
	pool := x509.NewCertPool()
	if err != nil || !pool.AppendCertsFromPEM(pem) {
		return nil, errors.New("cannot be read as PEM certificates")
	}
	transport.TLSClientConfig = &tls.Config{RootCAs: pool, MinVersion: tls.VersionTLS12}
	return transport, nil
}

// checkRedirect follows at most five redirects of a fetch, each to https
// or to http on loopback.
func checkRedirect(req *http.Request, via []*http.Request) error {
	if len(via) >= 5 || req.URL.Scheme != "https" && !config.OIDCURL(req.URL.Scheme+"://"+req.URL.Host) {
		return errors.New("redirected too often, or to neither https nor http on loopback")
	}
	return nil
}

// verify verifies a token and returns its principal and until when it
// may be remembered as verified.
func (is *issuer) verify(ctx context.Context, token string, now time.Time) (Principal, time.Time, error) {
	var outcome fetchOutcome
	idt, err := is.verifier.Verify(context.WithValue(ctx, fetchOutcomeKey{}, &outcome), token)
	if err != nil {
		if outcome.err != nil {
			return Principal{}, time.Time{}, &tokenRefusal{reason: fmt.Sprintf("the keys of %s cannot be fetched: %v", is.at, outcome.err), unavailable: true}
		}
		return Principal{}, time.Time{}, refused("token refused (%s): %v", is.at, err)
	}
	var claims map[string]json.RawMessage
	if err := idt.Claims(&claims); err != nil {
		return Principal{}, time.Time{}, refused("token claims: %v", err)
	}
	until, err := is.checkTimes(claims, now)
	if err != nil {
		return Principal{}, time.Time{}, err
	}
	p, err := is.principal(claims)
	return p, until, err
}

// checkTimes checks the token's exp, nbf and iat against now, with
// clock_skew, and returns until when it may be remembered as verified.
func (is *issuer) checkTimes(claims map[string]json.RawMessage, now time.Time) (time.Time, error) {
	skew := is.cfg.ClockSkew
	exp, ok, err := numericDate(claims, "exp")
	switch {
	case err != nil:
		return time.Time{}, err
	case !ok:
		return time.Time{}, refused("token has no exp")
	case now.After(exp.Add(skew)):
		return time.Time{}, refused("token expired")
	}
	for _, c := range []struct{ name, refusal string }{{"nbf", "token not valid yet (nbf)"}, {"iat", "token issued in the future (iat)"}} {
		t, ok, err := numericDate(claims, c.name)
		if err != nil {
			return time.Time{}, err
		}
		if ok && now.Add(skew).Before(t) {
			return time.Time{}, refused("%s", c.refusal)
		}
	}
	return exp.Add(skew), nil
}

// principal is the token's principal: its name, tenant and roles claims.
func (is *issuer) principal(claims map[string]json.RawMessage) (Principal, error) {
	p := Principal{Name: stringClaim(claims, is.cfg.PrincipalClaim), Tenant: stringClaim(claims, is.cfg.TenantClaim)}
	if p.Name == "" || p.Tenant == "" {
		return Principal{}, refused("token lacks a string %s claim (%s.principal_claim) or %s claim (%s.tenant_claim)", is.cfg.PrincipalClaim, is.at, is.cfg.TenantClaim, is.at)
	}
	p.Roles = rolesClaim(claims[is.cfg.RolesClaim])
	return p, nil
}

// numericDate reads a NumericDate claim (seconds since the epoch, perhaps
// with a fraction).
func numericDate(claims map[string]json.RawMessage, name string) (time.Time, bool, error) {
	raw, ok := claims[name]
	if !ok || string(raw) == "null" {
		return time.Time{}, false, nil
	}
	var secs float64
	if err := json.Unmarshal(raw, &secs); err != nil || math.IsNaN(secs) || math.Abs(secs) > 1e11 {
		return time.Time{}, false, refused("token claim %s is not a date", name)
	}
	whole, frac := math.Modf(secs)
	return time.Unix(int64(whole), int64(frac*1e9)), true, nil
}

func stringClaim(claims map[string]json.RawMessage, name string) string {
	var s string
	if json.Unmarshal(claims[name], &s) != nil {
		return ""
	}
	return s
}

// rolesClaim reads roles given as an array of strings or as one string of
// space-separated roles (as OAuth's scope is). Roles agentd does not know
// are left out: an issuer's tokens often carry roles meant for other
// services.
func rolesClaim(raw json.RawMessage) []string {
	var list []string
	if json.Unmarshal(raw, &list) != nil {
		var s string
		if json.Unmarshal(raw, &s) != nil {
			return nil
		}
		list = strings.Fields(s)
	}
	return slices.DeleteFunc(list, func(r string) bool { return !slices.Contains(roles, r) })
}

// fetchOutcome carries, from VerifySignature back through go-oidc (which
// keeps only its errors' text), a failure to fetch the issuer's keys.
type fetchOutcome struct{ err error }

type fetchOutcomeKey struct{}

// VerifySignature implements oidc.KeySet: it verifies jwt's signature
// with the cached key of its kid (any cached key, without a kid). A kid
// not cached makes it fetch the issuer's keys again, at most once per
// refresh_interval, so that tokens naming unknown keys cannot make agentd
// hammer the issuer; a known kid whose signature fails fetches nothing.
// go-oidc has checked the algorithm against the allow-list before.
func (is *issuer) VerifySignature(ctx context.Context, jwt string) ([]byte, error) {
	jws, err := jose.ParseSignedCompact(jwt, is.algs)
	if err != nil {
		return nil, err
	}
	if len(jws.Signatures) != 1 {
		return nil, errors.New("not one signature")
	}
	if payload, known, err := is.verifyWith(jws); known {
		return payload, err
	}
	if err := is.refresh(ctx); err != nil {
		if out, ok := ctx.Value(fetchOutcomeKey{}).(*fetchOutcome); ok {
			out.err = err
		}
		return nil, err
	}
	if payload, known, err := is.verifyWith(jws); known {
		return payload, err
	}
	return nil, errors.New("no key of the issuer has the token's key id")
}

// verifyWith verifies jws with the cached keys; known reports whether a
// key of its kid is cached (without a kid: whether one verifies it).
func (is *issuer) verifyWith(jws *jose.JSONWebSignature) (payload []byte, known bool, err error) {
	is.mu.Lock()
	keys := is.keys
	is.mu.Unlock()
	header := jws.Signatures[0].Header
	for i := range keys {
		k := &keys[i]
		if header.KeyID != "" && k.KeyID != header.KeyID || k.Algorithm != "" && k.Algorithm != header.Algorithm {
			continue
		}
		known = header.KeyID != ""
		if payload, err := jws.Verify(k); err == nil {
			return payload, true, nil
		}
	}
	if known {
		return nil, true, errors.New("the signature does not verify")
	}
	return nil, false, nil
}

// refresh fetches the issuer's keys, unless a fetch was tried less than
// refresh_interval ago: then it returns that fetch's failure, or nil.
func (is *issuer) refresh(ctx context.Context) error {
	select {
	case is.fetching <- struct{}{}:
	case <-ctx.Done():
		return fmt.Errorf("waiting for a fetch of the keys: %w", ctx.Err())
	}
	defer func() { <-is.fetching }()
	is.mu.Lock()
	due := !is.fetched || !is.now().Before(is.lastFetch.Add(is.cfg.RefreshInterval))
	jwksURL, lastErr := is.jwksURL, is.lastErr
	is.mu.Unlock()
	if !due {
		return lastErr
	}
	// A caller that gives up does not cut the fetch short: its result
	// serves the calls after it.
	fctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), fetchTimeout)
	defer cancel()
	keys, jwksURL, err := is.fetch(fctx, jwksURL)
	is.mu.Lock()
	defer is.mu.Unlock()
	is.fetched, is.lastFetch, is.lastErr = true, is.now(), err
	if err != nil {
		// Discover again next time: the keys may have moved.
		is.jwksURL = ""
		return err
	}
	is.jwksURL, is.keys = jwksURL, keys
	return nil
}

// fetch reads the issuer's discovery document (unless jwksURL is known
// already) and then its keys. Its errors name neither URL: an issuer's
// path may be something only its users should know.
func (is *issuer) fetch(ctx context.Context, jwksURL string) ([]jose.JSONWebKey, string, error) {
	if jwksURL == "" {
		var err error
		if jwksURL, err = is.discover(ctx); err != nil {
			return nil, "", err
		}
	}
	keys, err := is.fetchKeys(ctx, jwksURL)
	return keys, jwksURL, err
}

// discover reads the issuer's discovery document for its jwks_uri.
func (is *issuer) discover(ctx context.Context) (string, error) {
	p, err := oidc.NewProvider(oidc.ClientContext(ctx, is.client), is.cfg.Issuer)
	if err != nil {
		return "", fmt.Errorf("discovery: %s", describe(err))
	}
	var doc struct {
		JWKSURL string `json:"jwks_uri"`
	}
	if err := p.Claims(&doc); err != nil || !config.OIDCURL(doc.JWKSURL) {
		return "", errors.New("discovery: jwks_uri is not an https URL (or http to a loopback address)")
	}
	return doc.JWKSURL, nil
}

// fetchKeys reads the key set at jwksURL.
func (is *issuer) fetchKeys(ctx context.Context, jwksURL string) ([]jose.JSONWebKey, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, jwksURL, nil)
	if err != nil {
		return nil, errors.New("keys: jwks_uri is not a URL")
	}
	req.Header.Set("Accept", "application/json")
	resp, err := is.client.Do(req)
	if err != nil {
		return nil, fmt.Errorf("keys: %s", describe(err))
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("keys: HTTP %d", resp.StatusCode)
	}
	var set struct {
		Keys []json.RawMessage `json:"keys"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&set); err != nil {
		return nil, fmt.Errorf("keys: not a JSON key set: %v", err)
	}
	var keys []jose.JSONWebKey
	for _, raw := range set.Keys {
		if k, ok := signingKey(raw); ok {
			keys = append(keys, k)
		}
	}
	return keys, nil
}

// signingKey reads one key of the set. A key of a type or algorithm
// go-jose does not know is left out, not the whole set (RFC 7517 §5); so
// is any key that is not an asymmetric public signing key.
func signingKey(raw json.RawMessage) (jose.JSONWebKey, bool) {
	var k jose.JSONWebKey
	if json.Unmarshal(raw, &k) != nil || !k.Valid() || !k.IsPublic() || k.Use != "" && k.Use != "sig" {
		return k, false
	}
	switch k.Key.(type) {
	case *rsa.PublicKey, *ecdsa.PublicKey, ed25519.PublicKey:
		return k, true
	}
	return k, false
}

// describe is err without the URL an HTTP client's error quotes, and cut
// short (go-oidc quotes a failed response's body).
func describe(err error) string {
	if ue, ok := errors.AsType[*url.Error](err); ok {
		err = ue.Err
	}
	s := err.Error()
	if len(s) > 200 {
		s = strings.ToValidUTF8(s[:200], "") + "..."
	}
	return s
}

// limitedBody bounds every response body it carries to maxFetchBytes: a
// longer document fails to decode.
type limitedBody struct{ base http.RoundTripper }

func (l limitedBody) RoundTrip(req *http.Request) (*http.Response, error) {
	resp, err := l.base.RoundTrip(req)
	if err == nil {
		resp.Body = struct {
			io.Reader
			io.Closer
		}{io.LimitReader(resp.Body, maxFetchBytes), resp.Body}
	}
	return resp, err
}

// tokenCache remembers verified tokens by their SHA-256, never the tokens
// themselves, each until it expires, at most maxCachedTokens of them.
type tokenCache struct {
	mu      sync.RWMutex
	entries map[[sha256.Size]byte]cachedToken
}

type cachedToken struct {
	p     Principal
	until time.Time
}

func (c *tokenCache) get(sum [sha256.Size]byte, now time.Time) (Principal, bool) {
	c.mu.RLock()
	e, ok := c.entries[sum]
	c.mu.RUnlock()
	return e.p, ok && now.Before(e.until)
}

// put remembers a token. When full, it forgets the expired tokens, and
// if that is not enough an eighth of the others, whichever the map
// yields first.
func (c *tokenCache) put(sum [sha256.Size]byte, p Principal, until, now time.Time) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if len(c.entries) >= maxCachedTokens {
		for k, e := range c.entries {
			if !now.Before(e.until) {
				delete(c.entries, k)
			}
		}
		for k := range c.entries {
			if len(c.entries) < maxCachedTokens*7/8 {
				break
			}
			delete(c.entries, k)
		}
	}
	c.entries[sum] = cachedToken{p: p, until: until}
}
