package oauthtest

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/go-jose/go-jose/v4"
	"github.com/go-jose/go-jose/v4/jwt"
)

// The token types and grants of enterprise-managed authorization.
const (
	tokenExchangeGrant = "urn:ietf:params:oauth:grant-type:token-exchange"
	jwtBearerGrant     = "urn:ietf:params:oauth:grant-type:jwt-bearer"
	idTokenType        = "urn:ietf:params:oauth:token-type:id_token"
	idJAGType          = "urn:ietf:params:oauth:token-type:id-jag"
	idJAGTyp           = "oauth-id-jag+jwt"
)

// IdentityProvider is an enterprise identity provider beside the
// authorization server (Options.IdentityProvider): it publishes OpenID
// Connect discovery metadata, issues ID tokens to its client (IDToken),
// and exchanges them at its token endpoint (RFC 8693) for identity
// assertion grants (ID-JAG) that the authorization server accepts as RFC
// 7523 JWT bearer grants from the pre-registered client.
type IdentityProvider struct {
	// Issuer is its issuer identifier (its origin).
	Issuer string
	// ClientID is agentd's client at the identity provider: the ID
	// tokens' audience.
	ClientID string

	s   *Server
	key *ecdsa.PrivateKey
	srv *httptest.Server
}

// startIdentityProvider starts s's identity provider.
func (s *Server) startIdentityProvider(t testing.TB) *IdentityProvider {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	p := &IdentityProvider{ClientID: "agentd-at-idp", s: s, key: key}
	mux := http.NewServeMux()
	mux.HandleFunc("GET /.well-known/openid-configuration", func(w http.ResponseWriter, _ *http.Request) {
		writeJSON(w, http.StatusOK, map[string]any{
			"issuer":                 p.Issuer,
			"authorization_endpoint": p.Issuer + "/authorize",
			"token_endpoint":         p.Issuer + "/token",
			"grant_types_supported":  []string{tokenExchangeGrant},
		})
	})
	mux.HandleFunc("POST /token", p.exchange)
	p.srv = httptest.NewServer(mux)
	t.Cleanup(p.srv.Close)
	p.Issuer = p.srv.URL
	return p
}

// IDToken issues an ID token of subject for the identity provider's
// client, valid for an hour; it counts as issued (Server.Issued).
func (p *IdentityProvider) IDToken(t testing.TB, subject string) string {
	t.Helper()
	tok, err := p.sign(jwt.Claims{Issuer: p.Issuer, Subject: subject, Audience: jwt.Audience{p.ClientID}}, "JWT", time.Hour, nil)
	if err != nil {
		t.Fatal(err)
	}
	p.s.mu.Lock()
	p.s.issued = append(p.s.issued, tok)
	p.s.mu.Unlock()
	return tok
}

// sign signs claims (and extra ones) with the identity provider's key.
func (p *IdentityProvider) sign(c jwt.Claims, typ string, life time.Duration, extra map[string]any) (string, error) {
	signer, err := jose.NewSigner(jose.SigningKey{Algorithm: jose.ES256, Key: p.key}, (&jose.SignerOptions{}).WithType(jose.ContentType(typ)))
	if err != nil {
		return "", err
	}
	now := time.Now()
	c.IssuedAt, c.Expiry, c.ID = jwt.NewNumericDate(now), jwt.NewNumericDate(now.Add(life)), rand.Text()
	b := jwt.Signed(signer).Claims(c)
	if extra != nil {
		b = b.Claims(extra)
	}
	return b.Serialize()
}

// exchange is the identity provider's token endpoint: an ID token it
// issued, for an ID-JAG addressed to the authorization server (audience)
// for the MCP server (resource), as SEP-990 profiles RFC 8693.
func (p *IdentityProvider) exchange(w http.ResponseWriter, r *http.Request) {
	if err := r.ParseForm(); err != nil {
		tokenErr(w, http.StatusBadRequest, "invalid_request")
		return
	}
	f := r.PostForm
	switch {
	case f.Get("grant_type") != tokenExchangeGrant:
		tokenErr(w, http.StatusBadRequest, "unsupported_grant_type")
		return
	case f.Get("client_id") != p.ClientID:
		tokenErr(w, http.StatusUnauthorized, "invalid_client")
		return
	case f.Get("subject_token_type") != idTokenType || f.Get("requested_token_type") != idJAGType ||
		f.Get("audience") != p.s.Issuer || f.Get("resource") != p.s.MCPURL:
		tokenErr(w, http.StatusBadRequest, "invalid_request")
		return
	}
	var id jwt.Claims
	if !p.verify(f.Get("subject_token"), "", &id) || id.ValidateWithLeeway(jwt.Expected{Issuer: p.Issuer, AnyAudience: jwt.Audience{p.ClientID}, Time: time.Now()}, time.Minute) != nil {
		tokenErr(w, http.StatusBadRequest, "invalid_grant")
		return
	}
	jag, err := p.sign(jwt.Claims{Issuer: p.Issuer, Subject: id.Subject, Audience: jwt.Audience{p.s.Issuer}}, idJAGTyp, 5*time.Minute,
		map[string]any{"client_id": p.s.ClientID, "resource": f.Get("resource"), "scope": f.Get("scope")})
	if err != nil {
		tokenErr(w, http.StatusInternalServerError, "server_error")
		return
	}
	p.s.mu.Lock()
	p.s.grants[tokenExchangeGrant]++
	p.s.issued = append(p.s.issued, jag)
	p.s.mu.Unlock()
	writeJSON(w, http.StatusOK, map[string]any{"access_token": jag, "issued_token_type": idJAGType, "token_type": "N_A", "expires_in": 300})
}

// verify checks a JWT the identity provider signed, of header type typ
// when typ is set, and reads its claims into c (and into extra, if set).
func (p *IdentityProvider) verify(raw, typ string, c *jwt.Claims, extra ...any) bool {
	tok, err := jwt.ParseSigned(raw, []jose.SignatureAlgorithm{jose.ES256})
	if err != nil || len(tok.Headers) != 1 || typ != "" && tok.Headers[0].ExtraHeaders[jose.HeaderType] != typ {
		return false
	}
	return tok.Claims(&p.key.PublicKey, append([]any{c}, extra...)...) == nil
}

// jagGrant is what the authorization server grants for an ID-JAG that
// client id presents (RFC 7523): the grant must come from the identity
// provider, be addressed to this authorization server and name id and
// the MCP server.
func (s *Server) jagGrant(f map[string][]string, id, method string) (*grant, int, string) {
	p := s.IdP
	if p == nil || method == "none" {
		return nil, http.StatusBadRequest, "unsupported_grant_type"
	}
	var c jwt.Claims
	var extra struct {
		ClientID string `json:"client_id"`
		Resource string `json:"resource"`
	}
	assertion := first(f["assertion"])
	s.proofs = append(s.proofs, assertion)
	if !p.verify(assertion, idJAGTyp, &c, &extra) ||
		c.ValidateWithLeeway(jwt.Expected{Issuer: p.Issuer, AnyAudience: jwt.Audience{s.Issuer}, Time: time.Now()}, time.Minute) != nil ||
		extra.ClientID != id || extra.Resource != s.MCPURL {
		return nil, http.StatusBadRequest, "invalid_grant"
	}
	return &grant{clientID: id, scopes: strings.Fields(first(f["scope"])), resource: s.MCPURL}, 0, ""
}

func first(v []string) string {
	if len(v) == 0 {
		return ""
	}
	return v[0]
}
