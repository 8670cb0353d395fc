package record

import (
	"testing"

	"github.com/google/go-cmp/cmp"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/testing/protocmp"

	agentdv1 "github.com/agentd/agentd/gen/go/agentd/v1"
)

// An agent stored without a key keeps none of its declarations' secrets:
// a server's authorization, headers' and env values, its URL's path, its
// oauth block's client secret and private key, and its identity
// provider's client secret and the end user's ID token; it says it had
// some.
func TestWithoutSecrets(t *testing.T) {
	t.Parallel()
	agent := &agentdv1.Agent{Mcps: []*agentdv1.MCPServer{{
		Name:      "s",
		Transport: &agentdv1.MCPServer_Url{Url: "https://mcp.example/k/secret-path"},
		Headers:   map[string]string{"X-Key": "header-secret"},
		Oauth: &agentdv1.OAuthClient{
			Grant: agentdv1.GrantType_GRANT_TYPE_ENTERPRISE_MANAGED, ClientId: "c", ClientSecret: "client-secret",
			IdentityProvider: &agentdv1.IdentityProvider{Issuer: "https://idp.example", ClientId: "i", ClientSecret: "idp-secret", IdToken: "id-token"},
		},
	}}}
	before := proto.CloneOf(agent)
	got, withheld := withoutSecrets(agent)
	want := &agentdv1.Agent{Mcps: []*agentdv1.MCPServer{{
		Name:      "s",
		Transport: &agentdv1.MCPServer_Url{Url: "https://mcp.example"},
		Headers:   map[string]string{"X-Key": ""},
		Oauth: &agentdv1.OAuthClient{
			Grant: agentdv1.GrantType_GRANT_TYPE_ENTERPRISE_MANAGED, ClientId: "c",
			IdentityProvider: &agentdv1.IdentityProvider{Issuer: "https://idp.example", ClientId: "i"},
		},
	}}}
	if diff := cmp.Diff(want, got, protocmp.Transform()); diff != "" || !withheld {
		t.Errorf("withoutSecrets (withheld %v) (-want +got):\n%s", withheld, diff)
	}
	if diff := cmp.Diff(before, agent, protocmp.Transform()); diff != "" {
		t.Errorf("the agent given was changed:\n%s", diff)
	}
}
