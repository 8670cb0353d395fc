// Package oauthtest runs an OAuth 2.1 authorization server and an MCP
// server it protects, on loopback, for tests of agentd's MCP OAuth client.
//
// The authorization server publishes RFC 8414 metadata, approves every
// authorization request at once (redirecting with code, state and, when
// asked, iss), registers clients dynamically, and issues tokens for the
// authorization_code (PKCE S256 and the resource indicator checked),
// refresh_token (rotating), client_credentials and, beside an enterprise
// identity provider of its own (idp.go), JWT bearer grants, authenticating
// clients with client_secret_basic, client_secret_post, private_key_jwt or
// none. The MCP server publishes RFC 9728 metadata, refuses requests
// without a live token (401 with a Bearer challenge) and refuses the
// step-up tool to tokens without its scope (403 insufficient_scope), so a
// client has to step up. Tests can expire and revoke tokens, count the
// grants and list the secrets issued and received, to search a client's
// outputs for them.
package oauthtest

import (
	"bytes"
	"context"
	"crypto"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"io"
	"maps"
	"net/http"
	"net/http/httptest"
	"net/url"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/go-jose/go-jose/v4"
	"github.com/go-jose/go-jose/v4/jwt"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// Options configure a Server. The zero value is a server with a
// pre-registered client, dynamic registration, no client ID metadata
// documents, and one-hour tokens.
type Options struct {
	// TokenLifetime is the access tokens' lifetime; default one hour.
	// Tests make tokens expire with ExpireAll, not by waiting.
	TokenLifetime time.Duration
	// Scopes are the MCP server's scopes_supported and the scope of its
	// 401 challenge; default ["mcp:read"].
	Scopes []string
	// StepUpScope is the extra scope StepUpTool needs; default "mcp:admin".
	StepUpScope string
	// ChallengeScope puts Scopes in the 401 challenge's scope parameter;
	// without it the client has to take scopes_supported.
	ChallengeScope bool
	// CIMD advertises client ID metadata document support: any https
	// client_id with a path is accepted as a public client (its document
	// is not fetched: tests are offline).
	CIMD bool
	// NoDCR leaves out the registration endpoint.
	NoDCR bool
	// Iss advertises RFC 9207 and puts iss in every redirect.
	Iss bool
	// OfflineAccess adds offline_access to the authorization server's
	// scopes_supported.
	OfflineAccess bool
	// AuthMethods are the token endpoint authentication methods
	// advertised and accepted; default all of client_secret_basic,
	// client_secret_post, private_key_jwt (when PublicKey is set) and none.
	AuthMethods []string
	// PublicKey verifies the pre-registered client's private_key_jwt
	// assertions (RS256 or ES256).
	PublicKey crypto.PublicKey
	// IdentityProvider starts an enterprise identity provider beside the
	// authorization server (Server.IdP), whose identity assertion grants
	// the pre-registered client may present (RFC 7523 JWT bearer).
	IdentityProvider bool

	// StepUpNeverSucceeds refuses every call of StepUpTool for want of
	// StepUpScope, even with a token that has it (the conformance
	// suite's "scope upgrade will never succeed").
	StepUpNeverSucceeds bool
}

// Server is a running authorization server and MCP server. Its methods are
// safe for concurrent use.
type Server struct {
	// MCPURL is the protected MCP endpoint (the resource indicator).
	MCPURL string
	// Issuer is the authorization server's issuer identifier (its origin).
	Issuer string
	// MetadataURL is the MCP server's protected-resource metadata.
	MetadataURL string
	// ClientID and ClientSecret are the pre-registered confidential client.
	ClientID, ClientSecret string
	// StepUpTool is the tool that needs StepUpScope; "echo" needs the base
	// scopes only.
	StepUpTool  string
	StepUpScope string
	// IdP is the identity provider, with Options.IdentityProvider.
	IdP *IdentityProvider

	opts Options
	as   *httptest.Server
	rs   *httptest.Server

	mu       sync.Mutex
	clients  map[string]*client
	codes    map[string]*grant
	access   map[string]*grant
	refresh  map[string]*grant
	grants   map[string]int
	methods  map[string]int
	resource []string // every resource parameter received, in order
	deny     string
	issued   []string // every code, token and client secret issued, in order
	proofs   []string // every code verifier and client assertion received, in order
}

type client struct {
	secret    string
	method    string // "" accepts any secret method
	redirects []string
}

// grant is what a code or token stands for.
type grant struct {
	clientID  string
	scopes    []string
	resource  string
	redirect  string
	challenge string
	expiry    time.Time
}

// New starts a Server; t's cleanup stops it.
func New(t testing.TB, o Options) *Server {
	t.Helper()
	if o.TokenLifetime == 0 {
		o.TokenLifetime = time.Hour
	}
	if len(o.Scopes) == 0 {
		o.Scopes = []string{"mcp:read"}
	}
	if o.StepUpScope == "" {
		o.StepUpScope = "mcp:admin"
	}
	if len(o.AuthMethods) == 0 {
		o.AuthMethods = []string{"client_secret_basic", "client_secret_post", "none"}
		if o.PublicKey != nil {
			o.AuthMethods = append(o.AuthMethods, "private_key_jwt")
		}
	}
	s := &Server{
		ClientID:     "agentd-test-client",
		ClientSecret: rand.Text(),
		StepUpTool:   "admin_echo",
		StepUpScope:  o.StepUpScope,
		opts:         o,
		clients:      map[string]*client{},
		codes:        map[string]*grant{},
		access:       map[string]*grant{},
		refresh:      map[string]*grant{},
		grants:       map[string]int{},
		methods:      map[string]int{},
	}
	s.clients[s.ClientID] = &client{secret: s.ClientSecret}

	asMux := http.NewServeMux()
	asMux.HandleFunc("GET /.well-known/oauth-authorization-server", s.asMetadata)
	asMux.HandleFunc("GET /authorize", s.authorize)
	asMux.HandleFunc("POST /token", s.token)
	if !o.NoDCR {
		asMux.HandleFunc("POST /register", s.register)
	}
	s.as = httptest.NewServer(asMux)
	t.Cleanup(s.as.Close)
	s.Issuer = s.as.URL

	rsMux := http.NewServeMux()
	rsMux.HandleFunc("GET /.well-known/oauth-protected-resource/mcp", s.prm)
	mcpSrv := s.mcpServer()
	rsMux.Handle("/mcp", s.protect(mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return mcpSrv }, nil)))
	s.rs = httptest.NewServer(rsMux)
	t.Cleanup(s.rs.Close)
	t.Cleanup(func() {
		// Its sessions' goroutines end with them, not with the listener.
		for ss := range mcpSrv.Sessions() {
			_ = ss.Close()
		}
	})
	s.MCPURL = s.rs.URL + "/mcp"
	s.MetadataURL = s.rs.URL + "/.well-known/oauth-protected-resource/mcp"
	if o.IdentityProvider {
		s.IdP = s.startIdentityProvider(t)
	}
	return s
}

// Grants counts the token responses given, by grant type.
func (s *Server) Grants() map[string]int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return maps.Clone(s.grants)
}

// AuthMethods counts the successful token requests by the client
// authentication method they used.
func (s *Server) AuthMethods() map[string]int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return maps.Clone(s.methods)
}

// Resources lists the resource parameter of every authorization and token
// request, in order ("" where there was none).
func (s *Server) Resources() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return slices.Clone(s.resource)
}

// Issued lists every authorization code, access token, refresh token and
// dynamically registered client secret the server issued, in order: the
// secrets a client must keep to itself.
func (s *Server) Issued() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return slices.Clone(s.issued)
}

// Proofs lists every PKCE code verifier and private_key_jwt client
// assertion that token requests carried, in order: the client's secrets,
// as Issued's are.
func (s *Server) Proofs() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return slices.Clone(s.proofs)
}

// ExpireAll makes every access token issued so far expired; refresh tokens
// still work.
func (s *Server) ExpireAll() {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, g := range s.access {
		g.expiry = time.Now().Add(-time.Second)
	}
}

// RevokeAll forgets every access and refresh token issued so far.
func (s *Server) RevokeAll() {
	s.mu.Lock()
	defer s.mu.Unlock()
	clear(s.access)
	clear(s.refresh)
}

// DenyNext makes the next authorization request end in a redirect with
// error=<code> (e.g. access_denied), as if the person refused.
func (s *Server) DenyNext(code string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.deny = code
}

// TokenScopes is the scopes of a live access token (nil if it is not
// live).
func (s *Server) TokenScopes(access string) []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	if g := s.live(access); g != nil {
		return slices.Clone(g.scopes)
	}
	return nil
}

// Issue mints a live access token and a refresh token for the
// pre-registered client with scopes, without a grant (not counted), for
// tests that start from a stored token.
func (s *Server) Issue(scopes ...string) (access, refresh string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	access, refresh = "at-"+rand.Text(), "rt-"+rand.Text()
	s.access[access] = &grant{clientID: s.ClientID, scopes: scopes, resource: s.MCPURL, expiry: time.Now().Add(s.opts.TokenLifetime)}
	s.refresh[refresh] = &grant{clientID: s.ClientID, scopes: scopes, resource: s.MCPURL}
	s.issued = append(s.issued, access, refresh)
	return access, refresh
}

// Approve acts as the person: it GETs authURL without following the
// redirect and returns where the authorization server sends the browser.
func (s *Server) Approve(ctx context.Context, authURL string) (string, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, authURL, nil)
	if err != nil {
		return "", err
	}
	c := &http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	resp, err := c.Do(req)
	if err != nil {
		return "", err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusFound {
		return "", fmt.Errorf("oauthtest: authorize answered HTTP %d, not a redirect", resp.StatusCode)
	}
	return resp.Header.Get("Location"), nil
}

func (s *Server) asMetadata(w http.ResponseWriter, _ *http.Request) {
	scopes := append(slices.Clone(s.opts.Scopes), s.opts.StepUpScope)
	if s.opts.OfflineAccess {
		scopes = append(scopes, "offline_access")
	}
	m := map[string]any{
		"issuer":                                s.Issuer,
		"authorization_endpoint":                s.Issuer + "/authorize",
		"token_endpoint":                        s.Issuer + "/token",
		"response_types_supported":              []string{"code"},
		"grant_types_supported":                 s.grantTypes(),
		"code_challenge_methods_supported":      []string{"S256"},
		"token_endpoint_auth_methods_supported": s.opts.AuthMethods,
		"scopes_supported":                      scopes,
	}
	if !s.opts.NoDCR {
		m["registration_endpoint"] = s.Issuer + "/register"
	}
	if s.opts.PublicKey != nil {
		m["token_endpoint_auth_signing_alg_values_supported"] = []string{"RS256", "ES256"}
	}
	if s.opts.CIMD {
		m["client_id_metadata_document_supported"] = true
	}
	if s.opts.Iss {
		m["authorization_response_iss_parameter_supported"] = true
	}
	writeJSON(w, http.StatusOK, m)
}

// grantTypes are the grant types the authorization server supports.
func (s *Server) grantTypes() []string {
	g := []string{"authorization_code", "refresh_token", "client_credentials"}
	if s.IdP != nil {
		g = append(g, jwtBearerGrant)
	}
	return g
}

func (s *Server) prm(w http.ResponseWriter, _ *http.Request) {
	writeJSON(w, http.StatusOK, map[string]any{
		"resource":              s.MCPURL,
		"authorization_servers": []string{s.Issuer},
		"scopes_supported":      s.opts.Scopes,
	})
}

func (s *Server) authorize(w http.ResponseWriter, r *http.Request) {
	q := r.URL.Query()
	s.mu.Lock()
	defer s.mu.Unlock()
	s.resource = append(s.resource, q.Get("resource"))
	id, redirect := q.Get("client_id"), q.Get("redirect_uri")
	if problem := s.authorizeProblem(q); problem != "" {
		http.Error(w, problem, http.StatusBadRequest)
		return
	}
	u, err := url.Parse(redirect)
	if err != nil {
		http.Error(w, "bad redirect_uri", http.StatusBadRequest)
		return
	}
	rq := u.Query()
	if s.deny != "" {
		rq.Set("error", s.deny)
		s.deny = ""
	} else {
		rq.Set("code", s.newCode(id, redirect, q))
	}
	if st := q.Get("state"); st != "" {
		rq.Set("state", st)
	}
	if s.opts.Iss {
		rq.Set("iss", s.Issuer)
	}
	u.RawQuery = rq.Encode()
	http.Redirect(w, r, u.String(), http.StatusFound)
}

// authorizeProblem says why an authorization request is refused: an
// unknown client, a redirect it did not register, no code flow, no PKCE
// S256, or a resource other than the MCP server; "" when it is not.
func (s *Server) authorizeProblem(q url.Values) string {
	c, redirect := s.clientLocked(q.Get("client_id")), q.Get("redirect_uri")
	switch {
	case c == nil:
		return "unknown client"
	case redirect == "" || (len(c.redirects) > 0 && !slices.Contains(c.redirects, redirect)):
		return "redirect_uri not registered"
	case q.Get("response_type") != "code":
		return "response_type must be code"
	case q.Get("code_challenge") == "" || q.Get("code_challenge_method") != "S256":
		return "PKCE S256 required"
	case q.Get("resource") != s.MCPURL:
		return "resource must be the MCP server"
	}
	return ""
}

// newCode issues an authorization code of client id for the request q.
func (s *Server) newCode(id, redirect string, q url.Values) string {
	code := rand.Text()
	s.codes[code] = &grant{
		clientID:  id,
		scopes:    strings.Fields(q.Get("scope")),
		resource:  q.Get("resource"),
		redirect:  redirect,
		challenge: q.Get("code_challenge"),
	}
	s.issued = append(s.issued, code)
	return code
}

// clientLocked is a known client: registered, or a CIMD URL when those are
// on.
func (s *Server) clientLocked(id string) *client {
	if c := s.clients[id]; c != nil {
		return c
	}
	if u, err := url.Parse(id); s.opts.CIMD && err == nil && u.Scheme == "https" && strings.Trim(u.Path, "/") != "" {
		return &client{method: "none"}
	}
	return nil
}

func (s *Server) token(w http.ResponseWriter, r *http.Request) {
	if err := r.ParseForm(); err != nil {
		tokenErr(w, http.StatusBadRequest, "invalid_request")
		return
	}
	f := r.PostForm
	s.mu.Lock()
	defer s.mu.Unlock()
	s.resource = append(s.resource, f.Get("resource"))
	for _, p := range []string{f.Get("code_verifier"), f.Get("client_assertion")} {
		if p != "" {
			s.proofs = append(s.proofs, p)
		}
	}
	id, method, ok := s.authenticate(r)
	if !ok {
		tokenErr(w, http.StatusUnauthorized, "invalid_client")
		return
	}
	gt := f.Get("grant_type")
	g, status, code := s.grantOf(gt, f, id, method)
	if g == nil {
		tokenErr(w, status, code)
		return
	}
	s.grants[gt]++
	s.methods[method]++
	g.expiry = time.Now().Add(s.opts.TokenLifetime)
	access := "at-" + rand.Text()
	s.access[access] = g
	s.issued = append(s.issued, access)
	resp := map[string]any{
		"access_token": access,
		"token_type":   "Bearer",
		"expires_in":   int(s.opts.TokenLifetime / time.Second),
		"scope":        strings.Join(g.scopes, " "),
	}
	if gt != "client_credentials" && gt != jwtBearerGrant {
		rt := "rt-" + rand.Text()
		s.refresh[rt] = &grant{clientID: id, scopes: g.scopes, resource: g.resource}
		resp["refresh_token"] = rt
		s.issued = append(s.issued, rt)
	}
	w.Header().Set("Cache-Control", "no-store")
	writeJSON(w, http.StatusOK, resp)
}

// grantOf is what a token request of grant type gt by client id (which
// authenticated with method) is granted; nil with the refusal's status
// and error code when it is refused.
func (s *Server) grantOf(gt string, f url.Values, id, method string) (*grant, int, string) {
	switch gt {
	case "authorization_code":
		return s.codeGrant(f, id)
	case "refresh_token":
		return s.refreshGrant(f, id)
	case "client_credentials":
		if method == "none" {
			return nil, http.StatusUnauthorized, "unauthorized_client"
		}
		if res := f.Get("resource"); res != "" && res != s.MCPURL {
			return nil, http.StatusBadRequest, "invalid_target"
		}
		return &grant{clientID: id, scopes: strings.Fields(f.Get("scope")), resource: s.MCPURL}, 0, ""
	case jwtBearerGrant:
		return s.jagGrant(f, id, method)
	}
	return nil, http.StatusBadRequest, "unsupported_grant_type"
}

// codeGrant exchanges an authorization code, once: it must be id's, with
// the redirect, PKCE verifier and resource of its authorization.
func (s *Server) codeGrant(f url.Values, id string) (*grant, int, string) {
	c := s.codes[f.Get("code")]
	delete(s.codes, f.Get("code"))
	switch {
	case c == nil || c.clientID != id:
		return nil, http.StatusBadRequest, "invalid_grant"
	case f.Get("redirect_uri") != c.redirect:
		return nil, http.StatusBadRequest, "invalid_grant"
	case challenge(f.Get("code_verifier")) != c.challenge:
		return nil, http.StatusBadRequest, "invalid_grant"
	case f.Get("resource") != c.resource:
		return nil, http.StatusBadRequest, "invalid_target"
	}
	return &grant{clientID: id, scopes: c.scopes, resource: c.resource}, 0, ""
}

// refreshGrant spends a refresh token of id's (they rotate) for the same
// scopes and resource.
func (s *Server) refreshGrant(f url.Values, id string) (*grant, int, string) {
	old := s.refresh[f.Get("refresh_token")]
	switch {
	case old == nil || old.clientID != id:
		return nil, http.StatusBadRequest, "invalid_grant"
	case f.Get("resource") != "" && f.Get("resource") != old.resource:
		return nil, http.StatusBadRequest, "invalid_target"
	}
	delete(s.refresh, f.Get("refresh_token")) // rotation: the old one is spent
	return &grant{clientID: id, scopes: old.scopes, resource: old.resource}, 0, ""
}

// authenticate finds the client of a token request and the method it
// authenticated with.
func (s *Server) authenticate(r *http.Request) (id, method string, ok bool) {
	f := r.PostForm
	allowed := func(m string) bool { return slices.Contains(s.opts.AuthMethods, m) }
	if u, p, has := r.BasicAuth(); has {
		id, _ = url.QueryUnescape(u)
		secret, _ := url.QueryUnescape(p)
		c := s.clients[id]
		return id, "client_secret_basic", allowed("client_secret_basic") && c.hasSecret(secret, "client_secret_basic")
	}
	if a := f.Get("client_assertion"); a != "" {
		id, ok := s.verifyAssertion(a, f.Get("client_assertion_type"))
		return id, "private_key_jwt", ok && allowed("private_key_jwt") && (f.Get("client_id") == "" || f.Get("client_id") == id)
	}
	id = f.Get("client_id")
	c := s.clientLocked(id)
	if c == nil {
		return id, "", false
	}
	if secret := f.Get("client_secret"); secret != "" {
		return id, "client_secret_post", allowed("client_secret_post") && c.hasSecret(secret, "client_secret_post")
	}
	return id, "none", allowed("none") && c.secret == ""
}

// hasSecret reports whether c is a client with secret, registered for
// method (or for none in particular).
func (c *client) hasSecret(secret, method string) bool {
	return c != nil && c.secret != "" && c.secret == secret && (c.method == "" || c.method == method)
}

// verifyAssertion checks an RFC 7523 client assertion of the
// pre-registered client: signed by PublicKey, iss = sub = client_id, aud
// the issuer or the token endpoint, not expired.
func (s *Server) verifyAssertion(a, typ string) (string, bool) {
	if s.opts.PublicKey == nil || typ != "urn:ietf:params:oauth:client-assertion-type:jwt-bearer" {
		return "", false
	}
	tok, err := jwt.ParseSigned(a, []jose.SignatureAlgorithm{jose.RS256, jose.ES256})
	if err != nil {
		return "", false
	}
	var c jwt.Claims
	if err := tok.Claims(s.opts.PublicKey, &c); err != nil {
		return "", false
	}
	err = c.ValidateWithLeeway(jwt.Expected{
		Issuer:      s.ClientID,
		Subject:     s.ClientID,
		AnyAudience: jwt.Audience{s.Issuer, s.Issuer + "/token"},
		Time:        time.Now(),
	}, time.Minute)
	if err != nil || c.Expiry == nil || c.ID == "" || c.Expiry.Time().After(time.Now().Add(10*time.Minute)) {
		return "", false
	}
	return c.Issuer, true
}

func (s *Server) register(w http.ResponseWriter, r *http.Request) {
	var m struct {
		RedirectURIs            []string `json:"redirect_uris"`
		TokenEndpointAuthMethod string   `json:"token_endpoint_auth_method"`
		ClientName              string   `json:"client_name"`
		GrantTypes              []string `json:"grant_types"`
	}
	if err := json.NewDecoder(r.Body).Decode(&m); err != nil || len(m.RedirectURIs) == 0 {
		writeJSON(w, http.StatusBadRequest, map[string]string{"error": "invalid_client_metadata"})
		return
	}
	method := m.TokenEndpointAuthMethod
	if method == "" {
		method = "client_secret_basic"
	}
	if !slices.Contains(s.opts.AuthMethods, method) || method == "private_key_jwt" {
		writeJSON(w, http.StatusBadRequest, map[string]string{"error": "invalid_client_metadata"})
		return
	}
	c := &client{method: method, redirects: m.RedirectURIs}
	if method != "none" {
		c.secret = rand.Text()
	}
	id := "dcr-" + rand.Text()
	s.mu.Lock()
	s.clients[id] = c
	if c.secret != "" {
		s.issued = append(s.issued, c.secret)
	}
	s.mu.Unlock()
	resp := map[string]any{
		"client_id":                  id,
		"redirect_uris":              m.RedirectURIs,
		"token_endpoint_auth_method": method,
		"client_name":                m.ClientName,
		"grant_types":                m.GrantTypes,
	}
	if c.secret != "" {
		resp["client_secret"] = c.secret
	}
	writeJSON(w, http.StatusCreated, resp)
}

// live is the grant of an unexpired access token, or nil.
func (s *Server) live(access string) *grant {
	g := s.access[access]
	if g == nil || time.Now().After(g.expiry) {
		return nil
	}
	return g
}

// protect refuses requests without a live token with the base scopes, and
// calls of the step-up tool without StepUpScope.
func (s *Server) protect(h http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		access, _ := strings.CutPrefix(r.Header.Get("Authorization"), "Bearer ")
		s.mu.Lock()
		g := s.live(access)
		var scopes []string
		if g != nil {
			scopes = slices.Clone(g.scopes)
		}
		s.mu.Unlock()
		if g == nil {
			w.Header().Set("WWW-Authenticate", s.bearerChallenge(access != ""))
			http.Error(w, "unauthorized", http.StatusUnauthorized)
			return
		}
		if !containsAll(scopes, s.opts.Scopes) {
			s.insufficient(w, union(scopes, s.opts.Scopes))
			return
		}
		if r.Method == http.MethodPost && s.needsStepUp(scopes) {
			stepUp, err := s.callsStepUpTool(r)
			if err != nil {
				http.Error(w, "bad body", http.StatusBadRequest)
				return
			}
			if stepUp {
				// The challenge names the scopes this call needs; the client
				// keeps what it was granted besides (SEP-2350).
				s.insufficient(w, append(slices.Clone(s.opts.Scopes), s.opts.StepUpScope))
				return
			}
		}
		h.ServeHTTP(w, r)
	})
}

// needsStepUp reports whether a token with scopes is refused the step-up
// tool.
func (s *Server) needsStepUp(scopes []string) bool {
	return !slices.Contains(scopes, s.opts.StepUpScope) || s.opts.StepUpNeverSucceeds
}

// bearerChallenge is the WWW-Authenticate of a request without a live token:
// the metadata's URL, the scopes when the options name them, and
// invalid_token when the request had a token.
func (s *Server) bearerChallenge(hadToken bool) string {
	ch := fmt.Sprintf(`Bearer resource_metadata=%q`, s.MetadataURL)
	if s.opts.ChallengeScope {
		ch += fmt.Sprintf(`, scope=%q`, strings.Join(s.opts.Scopes, " "))
	}
	if hadToken {
		ch += `, error="invalid_token"`
	}
	return ch
}

// callsStepUpTool reports whether r is a tools/call of the step-up tool;
// its body is put back for the next handler.
func (s *Server) callsStepUpTool(r *http.Request) (bool, error) {
	body, err := readBody(r)
	if err != nil {
		return false, err
	}
	var msg struct {
		Method string `json:"method"`
		Params struct {
			Name string `json:"name"`
		} `json:"params"`
	}
	return json.Unmarshal(body, &msg) == nil && msg.Method == "tools/call" && msg.Params.Name == s.StepUpTool, nil
}

func (s *Server) insufficient(w http.ResponseWriter, need []string) {
	w.Header().Set("WWW-Authenticate", fmt.Sprintf(`Bearer error="insufficient_scope", scope=%q, resource_metadata=%q`, strings.Join(need, " "), s.MetadataURL))
	http.Error(w, "insufficient scope", http.StatusForbidden)
}

func union(a, b []string) []string {
	out := slices.Clone(a)
	for _, x := range b {
		if !slices.Contains(out, x) {
			out = append(out, x)
		}
	}
	return out
}

type echoIn struct {
	Text string `json:"text"`
}

func (s *Server) mcpServer() *mcp.Server {
	srv := mcp.NewServer(&mcp.Implementation{Name: "oauthtest", Version: "1"}, nil)
	echo := func(_ context.Context, _ *mcp.CallToolRequest, in echoIn) (*mcp.CallToolResult, any, error) {
		return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: in.Text}}}, nil, nil
	}
	mcp.AddTool(srv, &mcp.Tool{Name: "echo", Description: "echoes text"}, echo)
	mcp.AddTool(srv, &mcp.Tool{Name: s.StepUpTool, Description: "echoes text; needs " + s.opts.StepUpScope}, echo)
	return srv
}

func challenge(verifier string) string {
	sum := sha256.Sum256([]byte(verifier))
	return base64.RawURLEncoding.EncodeToString(sum[:])
}

func containsAll(have, want []string) bool {
	for _, w := range want {
		if !slices.Contains(have, w) {
			return false
		}
	}
	return true
}

// readBody reads r's body and puts it back for the next handler.
func readBody(r *http.Request) ([]byte, error) {
	b, err := io.ReadAll(io.LimitReader(r.Body, 1<<20))
	if err != nil {
		return nil, err
	}
	r.Body = io.NopCloser(bytes.NewReader(b))
	return b, nil
}

func tokenErr(w http.ResponseWriter, status int, code string) {
	writeJSON(w, status, map[string]string{"error": code})
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(v)
}
