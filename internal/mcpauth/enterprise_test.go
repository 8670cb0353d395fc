package mcpauth_test

import (
	"errors"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/agentd/agentd/internal/fault"
	"github.com/agentd/agentd/internal/mcpauth"
	"github.com/agentd/agentd/internal/oauthtest"
)

// enterpriseConfig is the pre-registered client of s with s's identity
// provider, found by its issuer or given its token endpoint, and idToken
// as the end user's.
func enterpriseConfig(s *oauthtest.Server, byIssuer bool, idToken string) mcpauth.Config {
	idp := &mcpauth.IdentityProvider{ClientID: s.IdP.ClientID, IDToken: func() (string, error) { return idToken, nil }}
	if byIssuer {
		idp.Issuer = s.IdP.Issuer
	} else {
		idp.TokenEndpoint = s.IdP.Issuer + "/token"
	}
	return mcpauth.Config{Grant: mcpauth.EnterpriseManaged, ClientID: s.ClientID, ClientSecret: s.ClientSecret, IdentityProvider: idp}
}

// X-M1: enterprise-managed authorization: the end user's ID token is
// exchanged at the identity provider (found by its issuer's metadata, or
// given its token endpoint) for an identity assertion grant addressed to
// the MCP server's authorization server and resource, which the
// pre-registered client presents there for a token the MCP server takes.
// No person is involved; a renewal is a new exchange.
func TestEnterpriseManaged(t *testing.T) {
	t.Parallel()
	for _, byIssuer := range []bool{true, false} {
		s := oauthtest.New(t, oauthtest.Options{IdentityProvider: true, ChallengeScope: true, AuthMethods: []string{mcpauth.MethodBasic}})
		cfg := enterpriseConfig(s, byIssuer, s.IdP.IDToken(t, "alice@example.com"))
		tok, err := cfg.EnterpriseManaged(t.Context(), s.MCPURL, post(t, s.MCPURL, nil, "tools/list", ""))
		if err != nil {
			t.Fatal(err)
		}
		if tok.Grant != mcpauth.EnterpriseManaged || tok.RefreshToken != "" || tok.AuthMethod != mcpauth.MethodBasic || tok.Resource != s.MCPURL {
			t.Errorf("token %+v", tok)
		}
		if diff := cmp.Diff([]string{"mcp:read"}, tok.Scopes); diff != "" {
			t.Errorf("scopes (-want +got):\n%s", diff)
		}
		callEcho(t, s.MCPURL, roundTrip(t, tok))
		want := map[string]int{"urn:ietf:params:oauth:grant-type:token-exchange": 1, "urn:ietf:params:oauth:grant-type:jwt-bearer": 1}
		if diff := cmp.Diff(want, s.Grants()); diff != "" {
			t.Errorf("grants (-want +got):\n%s", diff)
		}
		if _, err := cfg.Refresh(t.Context(), tok); fault.KindOf(err) != fault.Unauthenticated {
			t.Errorf("refreshing a token without a refresh token: %v, want Unauthenticated (a new exchange is due)", err)
		}
	}
}

// X-M1: what stops an enterprise-managed grant is classified and quiet:
// an ID token the identity provider did not issue is refused there
// (Unauthenticated), one that cannot be read is the reader's error, and
// a declaration without its clients is Invalid. No error names a token,
// a secret or the MCP server's path.
func TestEnterpriseManagedRefused(t *testing.T) {
	t.Parallel()
	s := oauthtest.New(t, oauthtest.Options{IdentityProvider: true})
	other := oauthtest.New(t, oauthtest.Options{IdentityProvider: true})
	forged := other.IdP.IDToken(t, "mallory@example.com")
	cfg := enterpriseConfig(s, true, forged)
	_, err := cfg.EnterpriseManaged(t.Context(), s.MCPURL, mcpauth.Challenge{})
	wantKind(t, err, fault.Unauthenticated)
	checkClean(t, err, forged, s.ClientSecret, "/mcp")

	unreadable := fault.New(fault.FailedPrecondition, "the ID token file cannot be read")
	cfg.IdentityProvider.IDToken = func() (string, error) { return "", unreadable }
	if _, err := cfg.EnterpriseManaged(t.Context(), s.MCPURL, mcpauth.Challenge{}); !errors.Is(err, unreadable) {
		t.Errorf("an unreadable ID token: %v, want its reader's error", err)
	}

	noClient := enterpriseConfig(s, true, "x")
	noClient.ClientID = ""
	_, err = noClient.EnterpriseManaged(t.Context(), s.MCPURL, mcpauth.Challenge{})
	wantKind(t, err, fault.Invalid)
	if len(s.Grants()) != 0 {
		t.Errorf("grants %v, want none", s.Grants())
	}
}
