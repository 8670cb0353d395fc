package server_test

import (
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/durationpb"
	"google.golang.org/protobuf/types/known/structpb"

	agentdv1 "github.com/agentd/agentd/gen/go/agentd/v1"
	"github.com/agentd/agentd/providers"
	"github.com/agentd/agentd/providers/anthropic"
)

// TestPlacement proves where each MCP server runs (R-S1–R-S4, R-A2, R-A3):
// what the started event says, what reaches the provider's request, and
// what the bridge is asked to open.
// sampling gives s the sampling mode m (X-M5).
func sampling(s *agentdv1.MCPServer, m agentdv1.SamplingMode) *agentdv1.MCPServer {
	s.Sampling = &agentdv1.Sampling{Mode: m}
	return s
}

func TestPlacement(t *testing.T) {
	t.Parallel()
	const (
		provider = agentdv1.Placement_PLACEMENT_PROVIDER
		bridged  = agentdv1.Placement_PLACEMENT_BRIDGE
		http     = agentdv1.Transport_TRANSPORT_HTTP
		stdio    = agentdv1.Transport_TRANSPORT_STDIO
	)
	docs := func() *agentdv1.MCPServer { return urlServer("docs", "https://docs.example.com/mcp") }
	withPolicy := func(p *agentdv1.ApprovalPolicy) *agentdv1.MCPServer {
		s := docs()
		s.RequireApproval = p
		return s
	}
	allowing := func(tools ...string) *agentdv1.MCPServer {
		s := docs()
		s.AllowedTools = tools
		return s
	}
	names := func(ns ...string) *agentdv1.ToolNames { return &agentdv1.ToolNames{ToolNames: ns} }
	gatedDocs := urlServer("gated-docs", "https://docs.example.com/gated")
	gatedDocs.RequireApproval = &agentdv1.ApprovalPolicy{Mode: agentdv1.ApprovalMode_APPROVAL_MODE_ALWAYS}
	tests := []struct {
		name             string
		servesURL        bool
		strategy         agentdv1.MCPStrategy
		mcps             []*agentdv1.MCPServer
		tools            []string // the agent's own function tools
		requiresApproval []string
		want             []agentdv1.Placement // per declaration
	}{
		{name: "R-S2 AUTO default puts a url server at a provider that serves it", servesURL: true, mcps: []*agentdv1.MCPServer{docs()}, want: []agentdv1.Placement{provider}},
		{name: "R-S2 explicit AUTO", servesURL: true, strategy: agentdv1.MCPStrategy_MCP_STRATEGY_AUTO, mcps: []*agentdv1.MCPServer{docs()}, want: []agentdv1.Placement{provider}},
		{name: "R-S1 AUTO bridges a url server for a provider that serves none", mcps: []*agentdv1.MCPServer{docs()}, want: []agentdv1.Placement{bridged}},
		{name: "R-S1 command and ref servers always run in the bridge", servesURL: true, mcps: []*agentdv1.MCPServer{commandServer("", "/usr/bin/files-mcp"), refServer("", "demo")}, want: []agentdv1.Placement{bridged, bridged}},
		{name: "R-A2 require_approval ALWAYS keeps a url server in the bridge", servesURL: true, mcps: []*agentdv1.MCPServer{withPolicy(&agentdv1.ApprovalPolicy{Mode: agentdv1.ApprovalMode_APPROVAL_MODE_ALWAYS})}, want: []agentdv1.Placement{bridged}},
		{name: "R-A2 a non-empty always list keeps it in the bridge", servesURL: true, mcps: []*agentdv1.MCPServer{withPolicy(&agentdv1.ApprovalPolicy{Always: names("delete")})}, want: []agentdv1.Placement{bridged}},
		{name: "R-A2 a never list gates the rest, so it stays in the bridge", servesURL: true, mcps: []*agentdv1.MCPServer{withPolicy(&agentdv1.ApprovalPolicy{Never: names("read")})}, want: []agentdv1.Placement{bridged}},
		{name: "R-A2 an empty never list is present and gates everything", servesURL: true, mcps: []*agentdv1.MCPServer{withPolicy(&agentdv1.ApprovalPolicy{Never: names()})}, want: []agentdv1.Placement{bridged}},
		{name: "R-A1 always: [] gates nothing, so the provider serves it", servesURL: true, mcps: []*agentdv1.MCPServer{withPolicy(&agentdv1.ApprovalPolicy{Always: names()})}, want: []agentdv1.Placement{provider}},
		{name: "X-M5 sampling ALLOW keeps a url server in the bridge", servesURL: true, mcps: []*agentdv1.MCPServer{sampling(docs(), agentdv1.SamplingMode_SAMPLING_MODE_ALLOW)}, want: []agentdv1.Placement{bridged}},
		{name: "X-M5 sampling ASK keeps a url server in the bridge", servesURL: true, mcps: []*agentdv1.MCPServer{sampling(docs(), agentdv1.SamplingMode_SAMPLING_MODE_ASK)}, want: []agentdv1.Placement{bridged}},
		{name: "X-M5 sampling DENY leaves it at the provider", servesURL: true, mcps: []*agentdv1.MCPServer{sampling(docs(), agentdv1.SamplingMode_SAMPLING_MODE_DENY)}, want: []agentdv1.Placement{provider}},
		{name: "R-A1 require_approval NEVER leaves it at the provider", servesURL: true, mcps: []*agentdv1.MCPServer{withPolicy(&agentdv1.ApprovalPolicy{Mode: agentdv1.ApprovalMode_APPROVAL_MODE_NEVER})}, want: []agentdv1.Placement{provider}},
		{name: "R-A3 requires_approval naming a tool the server may offer bridges it", servesURL: true, requiresApproval: []string{"delete"}, mcps: []*agentdv1.MCPServer{docs()}, want: []agentdv1.Placement{bridged}},
		{name: "R-A3 requires_approval naming only agent tools leaves it at the provider", servesURL: true, tools: []string{"delete"}, requiresApproval: []string{"delete"}, mcps: []*agentdv1.MCPServer{docs()}, want: []agentdv1.Placement{provider}},
		{name: "R-A3 allowed_tools without the gated name leaves it at the provider", servesURL: true, requiresApproval: []string{"delete"}, mcps: []*agentdv1.MCPServer{allowing("read", "search")}, want: []agentdv1.Placement{provider}},
		{name: "R-A3 allowed_tools with the gated name bridges it", servesURL: true, requiresApproval: []string{"delete"}, mcps: []*agentdv1.MCPServer{allowing("read", "delete")}, want: []agentdv1.Placement{bridged}},
		{name: "R-S3 CLIENT bridges every server", servesURL: true, strategy: agentdv1.MCPStrategy_MCP_STRATEGY_CLIENT, mcps: []*agentdv1.MCPServer{docs(), commandServer("files", "/usr/bin/files-mcp")}, want: []agentdv1.Placement{bridged, bridged}},
		{name: "R-S4 SERVER puts an ungated url server at the provider", servesURL: true, strategy: agentdv1.MCPStrategy_MCP_STRATEGY_SERVER, requiresApproval: []string{"delete"}, mcps: []*agentdv1.MCPServer{allowing("read")}, want: []agentdv1.Placement{provider}},
		{name: "R-S2 AUTO bridges a server on localhost, which the provider cannot reach", servesURL: true, mcps: []*agentdv1.MCPServer{urlServer("local", "http://localhost:8080/mcp")}, want: []agentdv1.Placement{bridged}},
		{name: "R-S2 AUTO bridges a server on a private address", servesURL: true, mcps: []*agentdv1.MCPServer{urlServer("lan", "https://10.1.2.3/mcp"), urlServer("v6", "http://[::1]:9000/mcp")}, want: []agentdv1.Placement{bridged, bridged}},
		{name: "R-S2 AUTO bridges a server the provider cannot serve (its ServerProblem)", servesURL: true, mcps: []*agentdv1.MCPServer{withHeaders(docs())}, want: []agentdv1.Placement{bridged}},
		{
			name: "R-S2 mixed: provider-side and bridged side by side", servesURL: true,
			mcps: []*agentdv1.MCPServer{docs(), commandServer("files", "/usr/bin/files-mcp"), gatedDocs},
			want: []agentdv1.Placement{provider, bridged, bridged},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			bridge := &fakeBridge{}
			prov := plainProvider()
			if tt.servesURL {
				prov = urlProvider()
			}
			client := newClient(t, bridge, prov)
			agent := &agentdv1.Agent{Provider: prov.name, McpStrategy: tt.strategy, Mcps: tt.mcps, RequiresApproval: tt.requiresApproval}
			for _, name := range tt.tools {
				agent.Tools = append(agent.Tools, &agentdv1.FunctionTool{Name: name})
			}

			events, st := generate(t, client, &agentdv1.StartGeneration{Agent: agent, Messages: userSays("hi")}, nil)

			wantCode(t, st, codes.OK)
			var wantPlacements []*agentdv1.ServerPlacement
			var wantProvider, wantBridge []string
			for i, decl := range tt.mcps {
				name := decl.GetName()
				transport := http
				switch {
				case decl.GetCommand() != "":
					transport = stdio
					if name == "" {
						name = "command: files-mcp"
					}
				case decl.GetRef() != "":
					transport = stdio
					if name == "" {
						name = decl.GetRef()
					}
				}
				wantPlacements = append(wantPlacements, &agentdv1.ServerPlacement{Name: name, Placement: tt.want[i], Transport: transport})
				if tt.want[i] == provider {
					wantProvider = append(wantProvider, name)
				} else {
					wantBridge = append(wantBridge, name)
				}
			}
			if diff := protoDiff(wantPlacements, started(t, events).GetServers()); diff != "" {
				t.Errorf("started servers (-want +got):\n%s", diff)
			}
			reqs := prov.calls()
			if len(reqs) != 1 {
				t.Fatalf("provider called %d times; want 1", len(reqs))
			}
			var gotProvider []string
			for _, s := range reqs[0].MCPServers {
				gotProvider = append(gotProvider, s.GetName())
			}
			if diff := cmp.Diff(wantProvider, gotProvider); diff != "" {
				t.Errorf("Request.MCPServers (-want +got):\n%s", diff)
			}
			var gotBridge []string
			for _, r := range bridge.openRequests() {
				for _, s := range r.GetServers() {
					gotBridge = append(gotBridge, s.GetName())
				}
			}
			if diff := cmp.Diff(wantBridge, gotBridge); diff != "" {
				t.Errorf("servers sent to the bridge (-want +got):\n%s", diff)
			}
			if len(wantBridge) == 0 {
				wantCounts(t, bridge, bridgeCounts{})
			}
		})
	}
}

// violation is a field violation the test expects, and the facts its
// description must carry.
type violation struct {
	field string
	facts []string
}

// TestPlacementServerRefusals proves that mcp_strategy SERVER refuses,
// before any request, every server the provider would not serve, naming
// the server, what the provider can serve and the remedy (R-S4).
func TestPlacementServerRefusals(t *testing.T) {
	t.Parallel()
	gated := urlServer("gated", "https://gated.example.com/mcp")
	gated.RequireApproval = &agentdv1.ApprovalPolicy{Mode: agentdv1.ApprovalMode_APPROVAL_MODE_ALWAYS}
	allowsDelete := urlServer("firecrawl", "https://firecrawl.example.com/mcp")
	allowsDelete.AllowedTools = []string{"scrape", "delete"}
	tests := []struct {
		name             string
		servesURL        bool
		mcps             []*agentdv1.MCPServer
		requiresApproval []string
		want             []violation // in declaration order
	}{
		{
			name:      "R-S4 a command server: the provider serves url servers",
			servesURL: true,
			mcps:      []*agentdv1.MCPServer{commandServer("", "/usr/bin/files-mcp")},
			want:      []violation{{"start.agent.mcps[0]", []string{`"command: files-mcp"`, "urlprov", "command", "url servers", "AUTO"}}},
		},
		{
			name: "R-S4 a url server on a provider that serves none",
			mcps: []*agentdv1.MCPServer{urlServer("docs", "https://docs.example.com/mcp")},
			want: []violation{{"start.agent.mcps[0]", []string{`"docs"`, "plain", "none", "AUTO"}}},
		},
		{
			name:      "R-S4 a server on a loopback address",
			servesURL: true,
			mcps:      []*agentdv1.MCPServer{urlServer("local", "http://127.0.0.1:8080/secret-path")},
			want:      []violation{{"start.agent.mcps[0]", []string{`"local"`, "urlprov", "loopback, private", "AUTO"}}},
		},
		{
			name:      "R-S4 a server the provider cannot serve (its ServerProblem)",
			servesURL: true,
			mcps:      []*agentdv1.MCPServer{withHeaders(urlServer("docs", "https://docs.example.com/mcp"))},
			want:      []violation{{"start.agent.mcps[0]", []string{`"docs"`, "urlprov", "headers", "AUTO"}}},
		},
		{
			name:      "R-S4 R-A2 a server whose policy could gate a tool",
			servesURL: true,
			mcps:      []*agentdv1.MCPServer{gated},
			want:      []violation{{"start.agent.mcps[0].require_approval", []string{`"gated"`, "urlprov", "AUTO", "CLIENT", "NEVER"}}},
		},
		{
			name:      "R-S4 X-M5 a server that may sample",
			servesURL: true,
			mcps:      []*agentdv1.MCPServer{sampling(urlServer("asker", "https://asker.example.com/mcp"), agentdv1.SamplingMode_SAMPLING_MODE_ASK)},
			want:      []violation{{"start.agent.mcps[0].sampling", []string{`"asker"`, "urlprov", "AUTO", "CLIENT", "DENY"}}},
		},
		{
			name:             "R-S4 R-A3 requires_approval names a tool the server may offer",
			servesURL:        true,
			requiresApproval: []string{"delete", "purge"},
			mcps:             []*agentdv1.MCPServer{urlServer("firecrawl", "https://firecrawl.example.com/mcp")},
			want:             []violation{{"start.agent.mcps[0]", []string{"delete and purge", `"firecrawl"`, "list the tools it may offer in allowed_tools", "AUTO"}}},
		},
		{
			name:             "R-S4 R-A3 allowed_tools includes a gated name",
			servesURL:        true,
			requiresApproval: []string{"delete"},
			mcps:             []*agentdv1.MCPServer{allowsDelete},
			want:             []violation{{"start.agent.mcps[0]", []string{`"firecrawl"`, "remove delete from its allowed_tools"}}},
		},
		{
			name:      "R-S4 refusals come with the request's other problems",
			servesURL: true,
			mcps: []*agentdv1.MCPServer{
				{Name: "slow", Transport: &agentdv1.MCPServer_Url{Url: "https://slow.example.com/mcp"}, ReadTimeout: durationpb.New(-time.Second), RequireApproval: gated.RequireApproval},
				{Name: "none"},
			},
			want: []violation{
				{"start.agent.mcps[0].read_timeout", []string{"positive"}},
				{"start.agent.mcps[1]", []string{`"none"`, "url, a command or a ref"}},
				{"start.agent.mcps[0].require_approval", []string{`"slow"`}},
			},
		},
		{
			name:      "R-S4 every refusal at once",
			servesURL: true,
			mcps:      []*agentdv1.MCPServer{commandServer("files", "/usr/bin/files-mcp"), gated},
			want:      []violation{{"start.agent.mcps[0]", []string{`"files"`}}, {"start.agent.mcps[1].require_approval", []string{`"gated"`}}},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			bridge := &fakeBridge{}
			prov := plainProvider()
			if tt.servesURL {
				prov = urlProvider()
			}
			client := newClient(t, bridge, prov)
			agent := &agentdv1.Agent{Provider: prov.name, McpStrategy: agentdv1.MCPStrategy_MCP_STRATEGY_SERVER, Mcps: tt.mcps, RequiresApproval: tt.requiresApproval}

			_, st := generate(t, client, &agentdv1.StartGeneration{Agent: agent, Messages: userSays("hi")}, nil)

			wantCode(t, st, codes.InvalidArgument)
			var wantFields []string
			for _, v := range tt.want {
				wantFields = append(wantFields, v.field)
			}
			if diff := cmp.Diff(wantFields, violationFields(st)); diff != "" {
				t.Errorf("violated fields (-want +got):\n%s", diff)
			}
			for _, v := range tt.want {
				wantFacts(t, v.field, description(t, st, v.field), v.facts...)
				if d := description(t, st, v.field); strings.Contains(d, "secret-path") {
					t.Errorf("%s: %q shows the URL's path", v.field, d)
				}
			}
			wantCounts(t, bridge, bridgeCounts{})
			if n := len(prov.calls()); n != 0 {
				t.Errorf("provider called %d times; want 0", n)
			}
		})
	}
}

// TestProviderRequest proves that provider-side servers reach the
// provider's request (with their default names filled in) and never the
// bridge, and that agentd's own options never appear in Request.Options
// (R-S6).
func TestProviderRequest(t *testing.T) {
	t.Parallel()
	bridge := &fakeBridge{}
	prov := urlProvider()
	client := newClient(t, bridge, prov)
	cache := false
	opts, err := structpb.NewStruct(map[string]any{"temperature": 0.25, "metadata": map[string]any{"team": "docs"}})
	if err != nil {
		t.Fatal(err)
	}
	keyed := urlServer("", "https://mcp.example.com/v1/key-PATH-SECRET/mcp")
	keyed.Authorization = "sk-token"
	keyed.AllowedTools = []string{"search"}
	agent := &agentdv1.Agent{
		Provider:         "urlprov",
		Model:            "m-1",
		Instructions:     "Be brief.",
		Tools:            []*agentdv1.FunctionTool{{Name: "lookup"}},
		Mcps:             []*agentdv1.MCPServer{keyed},
		McpStrategy:      agentdv1.MCPStrategy_MCP_STRATEGY_AUTO,
		RequiresApproval: []string{"lookup"},
		McpCache:         &cache,
		ProviderOptions:  opts,
	}

	_, st := generate(t, client, &agentdv1.StartGeneration{Agent: agent, Messages: userSays("hi")}, nil)

	wantCode(t, st, codes.OK)
	reqs := prov.calls()
	if len(reqs) != 1 {
		t.Fatalf("provider called %d times; want 1", len(reqs))
	}
	got := reqs[0]
	if diff := cmp.Diff(opts.AsMap(), got.Options); diff != "" {
		t.Errorf("R-S6 Request.Options (-want +got):\n%s", diff)
	}
	wantServer := urlServer("mcp.example.com", keyed.GetUrl())
	wantServer.Authorization = "sk-token"
	wantServer.AllowedTools = []string{"search"}
	if diff := protoDiff([]*agentdv1.MCPServer{wantServer}, got.MCPServers); diff != "" {
		t.Errorf("Request.MCPServers (-want +got):\n%s", diff)
	}
	if diff := protoDiff([]*agentdv1.FunctionTool{{Name: "lookup"}}, got.Tools); diff != "" {
		t.Errorf("Request.Tools (-want +got):\n%s", diff)
	}
	if got.Model != "m-1" || got.Instructions != "Be brief." {
		t.Errorf("Request model, instructions = %q, %q; want m-1, Be brief.", got.Model, got.Instructions)
	}
	wantCounts(t, bridge, bridgeCounts{})
}

// TestProviderServerLimit proves that more provider-side servers than the
// provider takes are refused up front, at the request's mcps field.
func TestProviderServerLimit(t *testing.T) {
	t.Parallel()
	bridge := &fakeBridge{}
	prov := urlProvider()
	prov.caps.MaxProviderServers = 1
	client := newClient(t, bridge, prov)
	agent := &agentdv1.Agent{Provider: "urlprov", Mcps: []*agentdv1.MCPServer{
		urlServer("a", "https://a.example.com/mcp"),
		urlServer("b", "https://b.example.com/mcp"),
	}}

	_, st := generate(t, client, &agentdv1.StartGeneration{Agent: agent, Messages: userSays("hi")}, nil)

	wantCode(t, st, codes.InvalidArgument)
	if diff := cmp.Diff([]string{"start.agent.mcps"}, violationFields(st)); diff != "" {
		t.Errorf("violated fields (-want +got):\n%s", diff)
	}
	wantFacts(t, "start.agent.mcps", description(t, st, "start.agent.mcps"), "at most 1", "2", "CLIENT")
	wantCounts(t, bridge, bridgeCounts{})
	if n := len(prov.calls()); n != 0 {
		t.Errorf("provider called %d times; want 0", n)
	}
}

// withHeaders gives s a header, which urlProvider cannot send.
func withHeaders(s *agentdv1.MCPServer) *agentdv1.MCPServer {
	s.Headers = map[string]string{"X-Tenant": "acme"}
	return s
}

// TestPlacementSharedAddress: X-H5. On Anthropic, which serves url
// servers, AUTO keeps a server on the shared address space (100.64.0.0/10,
// which Anthropic's cloud cannot reach and the bridge's policy refuses
// alike) in the bridge, as it does any private address, while a public
// server goes to Anthropic; SERVER refuses it, saying why.
func TestPlacementSharedAddress(t *testing.T) {
	t.Parallel()
	bridge, _ := noIO(t)
	client := newClient(t, bridge, anthropic.New(providers.Settings{APIKey: "sk-test"}))
	t.Cleanup(func() { wantCounts(t, bridge, bridgeCounts{}) })
	public := urlServer("public", "https://mcp.example.com/mcp")
	for _, raw := range []string{"https://100.64.1.2/mcp", "https://[::ffff:100.64.1.2]/mcp", "https://100.127.0.9:8443/mcp"} {
		t.Run("X-H5 "+raw, func(t *testing.T) {
			t.Parallel()
			shared := urlServer("shared", raw)
			agent := &agentdv1.Agent{Provider: "anthropic", Model: "claude-sonnet-4-5", Mcps: []*agentdv1.MCPServer{shared, public}}

			got, err := client.Preview(t.Context(), &agentdv1.PreviewRequest{Agent: agent, Messages: userSays("hi")})
			if err != nil {
				t.Fatalf("Preview: %v", err)
			}
			want := []*agentdv1.ServerPlacement{{Name: "public", Placement: agentdv1.Placement_PLACEMENT_PROVIDER, Transport: agentdv1.Transport_TRANSPORT_HTTP}}
			if diff := protoDiff(want, got.GetProviderServers()); diff != "" {
				t.Errorf("X-H5 servers at Anthropic under AUTO (-want +got):\n%s", diff)
			}

			agent.McpStrategy = agentdv1.MCPStrategy_MCP_STRATEGY_SERVER
			_, err = client.Preview(t.Context(), &agentdv1.PreviewRequest{Agent: agent, Messages: userSays("hi")})
			st := status.Convert(err)
			wantCode(t, st, codes.InvalidArgument)
			if diff := cmp.Diff([]string{"agent.mcps[0]"}, violationFields(st)); diff != "" {
				t.Errorf("X-H5 violated fields under SERVER (-want +got):\n%s", diff)
			}
			wantFacts(t, "agent.mcps[0]", description(t, st, "agent.mcps[0]"), `"shared"`, "shared", "AUTO")
		})
	}
}
