package mcpauth

import (
	"cmp"
	"context"
	"crypto"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/rsa"
	"crypto/x509"
	"encoding/pem"
	"errors"
	"net/url"
	"time"

	"github.com/go-jose/go-jose/v4"
	"github.com/go-jose/go-jose/v4/jwt"
	"golang.org/x/oauth2"
	"golang.org/x/oauth2/clientcredentials"

	"github.com/agentd/agentd/internal/fault"
)

// assertionType is RFC 7523's client_assertion_type for a JWT.
const assertionType = "urn:ietf:params:oauth:client-assertion-type:jwt-bearer"

// assertionLifetime bounds a private_key_jwt assertion; it is used at once.
const assertionLifetime = 5 * time.Minute

// tokenConfig is the oauth2 configuration and the extra token request
// parameters that authenticate cl at tokenURL.
func (c *Config) tokenConfig(cl clientAuth, tokenURL, issuer string) (*oauth2.Config, url.Values, error) {
	oc := &oauth2.Config{ClientID: cl.id, Endpoint: oauth2.Endpoint{TokenURL: tokenURL}}
	params := url.Values{}
	switch cl.method {
	case MethodBasic:
		oc.ClientSecret = cl.secret
		oc.Endpoint.AuthStyle = oauth2.AuthStyleInHeader
	case MethodPost:
		oc.ClientSecret = cl.secret
		oc.Endpoint.AuthStyle = oauth2.AuthStyleInParams
	case MethodNone:
		// In params without a secret: just client_id.
		oc.Endpoint.AuthStyle = oauth2.AuthStyleInParams
	case MethodPrivateKeyJWT:
		a, err := c.assertion(cl.id, audience(issuer, tokenURL))
		if err != nil {
			return nil, nil, err
		}
		oc.Endpoint.AuthStyle = oauth2.AuthStyleInParams
		params.Set("client_assertion_type", assertionType)
		params.Set("client_assertion", a)
	default:
		return nil, nil, fault.New(fault.Invalid, "mcpauth: unknown token endpoint authentication method %q", safeCode(cl.method))
	}
	return oc, params, nil
}

// audience is the aud of private_key_jwt assertions: the authorization
// server's issuer identifier, as RFC 7523bis settles it (and as the MCP
// conformance suite checks), else the token endpoint.
func audience(issuer, tokenURL string) string {
	return cmp.Or(issuer, tokenURL)
}

// ccConfig is a client credentials request with oc's client and params;
// params may override grant_type, which Refresh relies on.
func ccConfig(oc *oauth2.Config, params url.Values, scopes []string) *clientcredentials.Config {
	return &clientcredentials.Config{
		ClientID:       oc.ClientID,
		ClientSecret:   oc.ClientSecret,
		TokenURL:       oc.Endpoint.TokenURL,
		AuthStyle:      oc.Endpoint.AuthStyle,
		Scopes:         scopes,
		EndpointParams: params,
	}
}

// assertion is an RFC 7523 client authentication JWT signed with the
// configured private key.
func (c *Config) assertion(clientID, aud string) (string, error) {
	if c.PrivateKey == nil {
		return "", fault.New(fault.Invalid, "mcpauth: private_key_jwt needs a private key")
	}
	alg, err := signingAlgorithm(c.PrivateKey)
	if err != nil {
		return "", err
	}
	signer, err := jose.NewSigner(jose.SigningKey{Algorithm: alg, Key: jose.JSONWebKey{Key: c.PrivateKey, KeyID: c.KeyID}},
		(&jose.SignerOptions{}).WithType("JWT"))
	if err != nil {
		return "", fault.Hide(fault.Invalid, err, "mcpauth: cannot sign with the private key")
	}
	now := time.Now()
	s, err := jwt.Signed(signer).Claims(jwt.Claims{
		Issuer:   clientID,
		Subject:  clientID,
		Audience: jwt.Audience{aud},
		ID:       rand.Text(),
		IssuedAt: jwt.NewNumericDate(now),
		Expiry:   jwt.NewNumericDate(now.Add(assertionLifetime)),
	}).Serialize()
	if err != nil {
		return "", fault.Hide(fault.Invalid, err, "mcpauth: cannot sign with the private key")
	}
	return s, nil
}

// ParsePrivateKey reads a PEM private key (PKCS #8, PKCS #1 RSA or SEC 1 EC)
// for private_key_jwt. Its errors never quote the key.
func ParsePrivateKey(pemText string) (crypto.Signer, error) {
	block, _ := pem.Decode([]byte(pemText))
	if block == nil {
		return nil, fault.New(fault.Invalid, "mcpauth: the private key is not PEM")
	}
	parse, ok := keyParsers[block.Type]
	if !ok {
		return nil, fault.New(fault.Invalid, "mcpauth: the private key's PEM type must be PRIVATE KEY, RSA PRIVATE KEY or EC PRIVATE KEY")
	}
	key, err := parse(block.Bytes)
	if err != nil {
		return nil, fault.New(fault.Invalid, "mcpauth: the private key's %s block does not parse", block.Type)
	}
	if _, err := signingAlgorithm(key); err != nil {
		return nil, err
	}
	return key.(crypto.Signer), nil
}

// keyParsers parse a private key's DER, by its PEM block's type.
var keyParsers = map[string]func([]byte) (any, error){
	"PRIVATE KEY":     x509.ParsePKCS8PrivateKey,
	"RSA PRIVATE KEY": func(der []byte) (any, error) { return x509.ParsePKCS1PrivateKey(der) },
	"EC PRIVATE KEY":  func(der []byte) (any, error) { return x509.ParseECPrivateKey(der) },
}

// signingAlgorithm is the algorithm of private_key_jwt assertions signed
// with key: RS256 for an RSA key, ES256 for a P-256 EC key; no other key
// is supported.
func signingAlgorithm(key any) (jose.SignatureAlgorithm, error) {
	switch k := key.(type) {
	case *rsa.PrivateKey:
		return jose.RS256, nil
	case *ecdsa.PrivateKey:
		if k.Curve != elliptic.P256() {
			return "", fault.New(fault.Invalid, "mcpauth: private_key_jwt supports P-256 EC keys only")
		}
		return jose.ES256, nil
	}
	return "", fault.New(fault.Invalid, "mcpauth: private_key_jwt needs an RSA or P-256 EC key")
}

// tokenError classifies a failed token request without repeating the
// response, which may echo what was sent.
func tokenError(err error, tokenURL string) error {
	host := hostOf(tokenURL)
	var re *oauth2.RetrieveError
	switch {
	case errors.Is(err, context.Canceled), errors.Is(err, context.DeadlineExceeded):
		return ctxError(err, host)
	case errors.As(err, &re) && re.Response != nil && re.Response.StatusCode >= 500:
		return fault.Hide(fault.Unavailable, err, "mcpauth: authorization server %s failed (HTTP %d)", host, re.Response.StatusCode)
	case errors.As(err, &re):
		code := cmp.Or(safeCode(re.ErrorCode), "no error code")
		return fault.Hide(fault.Unauthenticated, err, "mcpauth: authorization server %s refused the token request (%s)", host, code).
			WithInfo("OAUTH_REFUSED", map[string]string{"error": code})
	}
	return fault.Hide(fault.Unavailable, err, "mcpauth: authorization server %s could not be reached", host)
}
