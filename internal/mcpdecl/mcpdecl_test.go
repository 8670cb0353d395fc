package mcpdecl

import (
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"google.golang.org/protobuf/types/known/durationpb"

	agentdv1 "github.com/agentd/agentd/gen/go/agentd/v1"
	"github.com/agentd/agentd/internal/fault"
)

// R-D3: a server that sets no name is named after its url's host (never
// its path or query), its command's base name, or its ref; its read
// timeout is its own or the default.
func TestCheckNamesAndTransports(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		decl *agentdv1.MCPServer
		want Server
	}{
		{&agentdv1.MCPServer{Transport: &agentdv1.MCPServer_Url{Url: "https://mcp.example.com/k3y?token=s"}},
			Server{Name: "mcp.example.com", Transport: agentdv1.Transport_TRANSPORT_HTTP, ReadTimeout: DefaultReadTimeout}},
		{&agentdv1.MCPServer{Transport: &agentdv1.MCPServer_Url{Url: "mcp://connector"}},
			Server{Name: "connector", Transport: agentdv1.Transport_TRANSPORT_CONNECTOR, ReadTimeout: DefaultReadTimeout}},
		{&agentdv1.MCPServer{Transport: &agentdv1.MCPServer_Command{Command: "/usr/bin/files-mcp"}, ReadTimeout: durationpb.New(5 * time.Second)},
			Server{Name: "command: files-mcp", Transport: agentdv1.Transport_TRANSPORT_STDIO, ReadTimeout: 5 * time.Second}},
		{&agentdv1.MCPServer{Name: "mine", Transport: &agentdv1.MCPServer_Ref{Ref: "demo"}},
			Server{Name: "mine", Transport: agentdv1.Transport_TRANSPORT_STDIO, ReadTimeout: DefaultReadTimeout}},
		{&agentdv1.MCPServer{},
			Server{Name: unnamed, ReadTimeout: DefaultReadTimeout}},
	} {
		got, _ := Check(tc.decl)
		if diff := cmp.Diff(tc.want, got); diff != "" {
			t.Errorf("Check(%v) (-want +got):\n%s", tc.decl, diff)
		}
	}
}

// R-D6: the problems of a declaration name its fields, relative to it,
// and Under places them at the declaration's path.
func TestCheckProblems(t *testing.T) {
	t.Parallel()
	_, p := Check(&agentdv1.MCPServer{
		Transport:   &agentdv1.MCPServer_Url{Url: "https://a.example/mcp"},
		Args:        []string{"x"},
		ReadTimeout: durationpb.New(2 * time.Hour),
		Oauth:       &agentdv1.OAuthClient{TokenEndpointAuthMethod: "private_key_jwt"},
	})
	want := []fault.Violation{
		{Field: "start.agent.mcps[0].args", Description: "applies to command servers only"},
		{Field: "start.agent.mcps[0].oauth.token_endpoint_auth_method", Description: "private_key_jwt needs private_key"},
		{Field: "start.agent.mcps[0].read_timeout", Description: "must be a positive duration of at most 1h0m0s"},
	}
	if diff := cmp.Diff(want, p.Under("start.agent.mcps[0]")); diff != "" {
		t.Errorf("problems (-want +got):\n%s", diff)
	}
}

// A registered server's credentials are named in its settings' words, and
// a key its file holds counts as set without being read.
func TestCheckOAuthInTerms(t *testing.T) {
	t.Parallel()
	terms := Terms{Secret: "a client secret", SecretSetting: "client_secret or client_secret_file", Key: "private_key_file", CredentialsGrant: "the client_credentials grant", Files: true}
	var p Problems
	CheckOAuth(&p, &agentdv1.MCPServer{Oauth: &agentdv1.OAuthClient{
		Grant: agentdv1.GrantType_GRANT_TYPE_CLIENT_CREDENTIALS, ClientSecret: FromFile, PrivateKey: FromFile, TokenEndpointAuthMethod: "client_secret_post",
	}}, terms)
	want := Problems{
		{Field: "oauth", Description: "a client secret and private_key_file exclude each other"},
		{Field: "oauth.client_id", Description: "must be set with a client secret or private_key_file"},
		{Field: "oauth.client_id", Description: "is required with the client_credentials grant"},
	}
	if diff := cmp.Diff(want, p); diff != "" {
		t.Errorf("problems (-want +got):\n%s", diff)
	}
}

// A request's secret is never taken to be in a file: FromFile, in a
// request, is a key like any other, and not a valid one.
func TestRequestKeysAreParsed(t *testing.T) {
	t.Parallel()
	_, p := Check(&agentdv1.MCPServer{Transport: &agentdv1.MCPServer_Url{Url: "https://a.example/mcp"},
		Oauth: &agentdv1.OAuthClient{ClientId: "c", PrivateKey: FromFile}})
	if !hasViolation(p, "oauth.private_key") {
		t.Errorf("problems %v; want the key refused", p)
	}
}

// X-M1: the enterprise-managed grant's declaration: the client at the
// authorization server, an identity provider only with that grant, one
// way to its token endpoint, and URLs.
func TestCheckIdentityProvider(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name  string
		oauth *agentdv1.OAuthClient
		want  Problems
	}{
		{name: "whole", oauth: &agentdv1.OAuthClient{Grant: agentdv1.GrantType_GRANT_TYPE_ENTERPRISE_MANAGED, ClientId: "c",
			IdentityProvider: &agentdv1.IdentityProvider{Issuer: "https://idp.example", ClientId: "i", IdToken: "t"}}},
		{name: "no client", oauth: &agentdv1.OAuthClient{Grant: agentdv1.GrantType_GRANT_TYPE_ENTERPRISE_MANAGED},
			want: Problems{{Field: "oauth.client_id", Description: "is required with the ENTERPRISE_MANAGED grant: the client registered at the MCP server's authorization server"}}},
		{name: "another grant", oauth: &agentdv1.OAuthClient{IdentityProvider: &agentdv1.IdentityProvider{}},
			want: Problems{{Field: "oauth.identity_provider", Description: "applies to the ENTERPRISE_MANAGED grant only"}}},
		{name: "both endpoints, not URLs", oauth: &agentdv1.OAuthClient{Grant: agentdv1.GrantType_GRANT_TYPE_ENTERPRISE_MANAGED, ClientId: "c",
			IdentityProvider: &agentdv1.IdentityProvider{Issuer: "idp.example", TokenEndpoint: "ftp://idp.example/token"}},
			want: Problems{
				{Field: "oauth.identity_provider", Description: "issuer and token_endpoint exclude each other"},
				{Field: "oauth.identity_provider.issuer", Description: "must be an absolute http or https URL"},
				{Field: "oauth.identity_provider.token_endpoint", Description: "must be an absolute http or https URL"},
			}},
	} {
		var p Problems
		CheckOAuth(&p, &agentdv1.MCPServer{Oauth: tc.oauth}, requestTerms)
		if diff := cmp.Diff(tc.want, p); diff != "" {
			t.Errorf("%s: problems (-want +got):\n%s", tc.name, diff)
		}
	}
}
