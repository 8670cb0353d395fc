package server_test

import (
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/protobuf/types/known/durationpb"

	bridgev1 "github.com/agentd/agentd/gen/go/agentd/bridge/v1"
	agentdv1 "github.com/agentd/agentd/gen/go/agentd/v1"
	"github.com/agentd/agentd/server"
)

// X-M1: a ref: to a url server registered under bridge.servers
// (Options.Registered) reaches the bridge as that url server, with the
// registration's url, headers and authorization and the request's name,
// read_timeout and allowed_tools; it stays in agentd's bridge even for a
// provider that serves url servers; the request may not replace what the
// registration says; a tenant limited to other registered servers may not
// use it. A ref to another name goes to the bridge as it is.
func TestRegisteredURLServerRefs(t *testing.T) {
	t.Parallel()
	const token = "sk-registered-7a1c"
	registered := map[string]*agentdv1.MCPServer{
		"docs": {
			Transport: &agentdv1.MCPServer_Url{Url: "https://docs.example/v1/mcp"}, Authorization: token,
			Headers: map[string]string{"X-Team": "blue"}, ReadTimeout: durationpb.New(90 * time.Second),
		},
	}
	bridge := &fakeBridge{onList: offering(serverTools("manual", "search"), serverTools("demo", "echo"))}
	clients := tenantClients(t, server.Options{
		Bridge: bridge, Registered: registered,
		Tenants: tenantsOf(map[string]*server.Tenant{
			"":     {},
			"acme": {Servers: []string{"demo"}, ServersSetting: "tenants.acme.servers"},
		}),
	}, urlProvider())

	docs := refServer("manual", "docs")
	docs.AllowedTools = []string{"search"}
	agent := &agentdv1.Agent{Provider: "urlprov", Mcps: []*agentdv1.MCPServer{docs, refServer("", "demo")}}
	events, st := generate(t, clients(""), &agentdv1.StartGeneration{Agent: agent, Messages: userSays("hi")}, nil)
	wantCode(t, st, codes.OK)
	want := []*bridgev1.OpenSessionRequest{{Servers: []*bridgev1.ServerSpec{
		{
			Name: "manual",
			Transport: &bridgev1.ServerSpec_Http{Http: &bridgev1.HTTPTarget{
				Url: "https://docs.example/v1/mcp", Authorization: token, Headers: map[string]string{"X-Team": "blue"}}},
			ReadTimeout:  durationpb.New(90 * time.Second),
			AllowedTools: []string{"search"},
		},
		{Name: "demo", Transport: &bridgev1.ServerSpec_Ref{Ref: "demo"}, ReadTimeout: durationpb.New(30 * time.Second)},
	}, ListCachedTools: true}}
	if diff := protoDiff(want, bridge.openRequests()); diff != "" {
		t.Errorf("OpenSession requests (-want +got):\n%s", diff)
	}
	wantServers := []*agentdv1.ServerPlacement{
		{Name: "manual", Placement: agentdv1.Placement_PLACEMENT_BRIDGE, Transport: agentdv1.Transport_TRANSPORT_HTTP},
		{Name: "demo", Placement: agentdv1.Placement_PLACEMENT_BRIDGE, Transport: agentdv1.Transport_TRANSPORT_STDIO},
	}
	if diff := protoDiff(wantServers, started(t, events).GetServers()); diff != "" {
		t.Errorf("started servers (-want +got):\n%s", diff)
	}

	ctx := t.Context()
	overriding := refServer("", "docs")
	overriding.Authorization, overriding.Headers = "sk-mine", map[string]string{"X-Team": "red"}
	st = preview(clients(""), ctx, &agentdv1.Agent{Provider: "urlprov", Mcps: []*agentdv1.MCPServer{overriding}})
	wantCode(t, st, codes.InvalidArgument)
	wantFacts(t, "a ref that overrides its registration", description(t, st, "agent.mcps[0]"), `"docs"`, "authorization and headers", "read_timeout")
	if strings.Contains(statusText(st), token) || strings.Contains(statusText(st), "sk-mine") {
		t.Errorf("the refusal shows a secret: %s", statusText(st))
	}

	server := &agentdv1.Agent{Provider: "urlprov", McpStrategy: agentdv1.MCPStrategy_MCP_STRATEGY_SERVER, Mcps: []*agentdv1.MCPServer{refServer("", "docs")}}
	st = preview(clients(""), ctx, server)
	wantCode(t, st, codes.InvalidArgument)
	wantFacts(t, "mcp_strategy SERVER", description(t, st, "agent.mcps[0]"), "bridge.servers")

	st = preview(clients("acme"), ctx, &agentdv1.Agent{Provider: "urlprov", Mcps: []*agentdv1.MCPServer{refServer("", "docs")}})
	wantCode(t, st, codes.PermissionDenied)
	wantFacts(t, "X-I7 a registered url server beyond the tenant's", description(t, st, "agent.mcps[0].ref"), `"docs"`, "tenants.acme.servers")
}
