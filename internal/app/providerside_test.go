package app_test

import (
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/modelcontextprotocol/go-sdk/mcp"
	"google.golang.org/genproto/googleapis/rpc/errdetails"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/testing/protocmp"
	"google.golang.org/protobuf/types/known/structpb"

	agentdv1 "github.com/agentd/agentd/gen/go/agentd/v1"
	"github.com/agentd/agentd/internal/config"
	"github.com/agentd/agentd/internal/mcpdemo"
)

// recordingAPI answers every request with turn and records the requests.
type recordingAPI struct {
	turn func(w http.ResponseWriter, n int)

	mu      sync.Mutex
	bodies  []map[string]any
	headers []http.Header
}

func (a *recordingAPI) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	raw, _ := io.ReadAll(r.Body)
	var body map[string]any
	_ = json.Unmarshal(raw, &body)
	a.mu.Lock()
	a.bodies = append(a.bodies, body)
	a.headers = append(a.headers, r.Header.Clone())
	n := len(a.bodies)
	a.mu.Unlock()
	a.turn(w, n)
}

func (a *recordingAPI) requests() ([]map[string]any, []http.Header) {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.bodies, a.headers
}

// TestProviderSideMCP runs generations whose url MCP servers the provider
// serves itself (R-S1, R-S2, R-S7): under mcp_strategy AUTO Anthropic and
// OpenAI Responses get them in their native shapes, the calls they make
// come back as provider_tool_call events, and the conversation keeps
// them, and SERVER places them the same; a server on a loopback address,
// which no provider can reach, runs in agentd's bridge under AUTO, and
// CLIENT bridges any server.
func TestProviderSideMCP(t *testing.T) {
	const remote = "https://mcp.example.com/mcp"
	docs := &agentdv1.MCPServer{Name: "docs", Transport: &agentdv1.MCPServer_Url{Url: remote}, Authorization: "Bearer tok-docs", AllowedTools: []string{"search"}}
	providerCall := &agentdv1.ProviderToolCall{Id: "call_docs_1", ServerName: "docs", ToolName: "search", Arguments: `{"q":"design"}`, Output: "design.md"}

	t.Run("anthropic", func(t *testing.T) {
		api := &recordingAPI{turn: func(w http.ResponseWriter, _ int) {
			anthropicMessage(w, "end_turn",
				sseEvent("content_block_start", map[string]any{"type": "content_block_start", "index": 0, "content_block": map[string]any{"type": "mcp_tool_use", "id": "call_docs_1", "name": "search", "server_name": "docs", "input": map[string]any{"q": "design"}}}),
				sseEvent("content_block_stop", map[string]any{"type": "content_block_stop", "index": 0}),
				sseEvent("content_block_start", map[string]any{"type": "content_block_start", "index": 1, "content_block": map[string]any{"type": "mcp_tool_result", "tool_use_id": "call_docs_1", "is_error": false, "content": []any{map[string]any{"type": "text", "text": "design.md"}}}}),
				sseEvent("content_block_stop", map[string]any{"type": "content_block_stop", "index": 1}),
				sseEvent("content_block_start", map[string]any{"type": "content_block_start", "index": 2, "content_block": map[string]any{"type": "text", "text": "Found design.md"}}),
				sseEvent("content_block_stop", map[string]any{"type": "content_block_stop", "index": 2}))
		}}
		client := providerStack(t, "anthropic", "", api, nil)

		events := generate(t, client, startWith("anthropic", "claude-sonnet-4-5", docs))

		wantProviderSide(t, events, providerCall, "Found design.md")
		bodies, headers := api.requests()
		if len(bodies) != 1 {
			t.Fatalf("the provider got %d requests, want 1", len(bodies))
		}
		servers, _ := json.Marshal(bodies[0]["mcp_servers"])
		if want := `[{"authorization_token":"tok-docs","name":"docs","type":"url","url":"` + remote + `"}]`; string(servers) != want {
			t.Errorf("mcp_servers = %s, want %s", servers, want)
		}
		if beta := headers[0].Get("anthropic-beta"); !strings.Contains(beta, "mcp-client-") {
			t.Errorf("anthropic-beta = %q, want the MCP connector beta", beta)
		}
	})

	for _, strategy := range []agentdv1.MCPStrategy{agentdv1.MCPStrategy_MCP_STRATEGY_AUTO, agentdv1.MCPStrategy_MCP_STRATEGY_SERVER} {
		t.Run("openai-responses "+strategy.String(), func(t *testing.T) {
			api := &recordingAPI{turn: func(w http.ResponseWriter, _ int) {
				responsesMessage(w,
					map[string]any{"type": "mcp_call", "id": "call_docs_1", "server_label": "docs", "name": "search", "arguments": `{"q":"design"}`, "output": "design.md", "error": nil, "status": "completed"},
					responsesText("Found design.md"))
			}}
			client := providerStack(t, "openai-responses", "/v1", api, nil)
			start := startWith("openai-responses", "gpt-5-mini", docs)
			start.Agent.McpStrategy = strategy

			events := generate(t, client, start)

			wantProviderSide(t, events, providerCall, "Found design.md")
			bodies, _ := api.requests()
			if len(bodies) != 1 {
				t.Fatalf("the provider got %d requests, want 1", len(bodies))
			}
			tools, _ := json.Marshal(bodies[0]["tools"])
			if want := `[{"allowed_tools":["search"],"authorization":"tok-docs","require_approval":"never","server_label":"docs","server_url":"` + remote + `","type":"mcp"}]`; string(tools) != want {
				t.Errorf("tools = %s, want %s", tools, want)
			}
		})
	}

	// A loopback server no provider could reach runs in the bridge under
	// AUTO; CLIENT puts any server there.
	for _, tc := range []struct {
		provider, model, path string
		strategy              agentdv1.MCPStrategy
		turns                 func(http.ResponseWriter, int)
	}{
		{"anthropic", "claude-sonnet-4-5", "", agentdv1.MCPStrategy_MCP_STRATEGY_AUTO, anthropicTurns},
		{"openai-responses", "gpt-5-mini", "/v1", agentdv1.MCPStrategy_MCP_STRATEGY_CLIENT, responsesTurns},
	} {
		t.Run(tc.provider+" "+tc.strategy.String()+" bridges a loopback server", func(t *testing.T) {
			local := httptest.NewServer(mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return mcpdemo.NewServer() }, &mcp.StreamableHTTPOptions{Stateless: true}))
			t.Cleanup(local.Close)
			api := &fakeTurns{t: t, turn: tc.turns}
			client := providerStackWith(t, tc.provider, tc.path, api, nil, func(c *config.Config) { c.Bridge.AllowPrivateNetworks = true })
			start := startWith(tc.provider, tc.model, &agentdv1.MCPServer{Name: "local", Transport: &agentdv1.MCPServer_Url{Url: local.URL}})
			start.Agent.McpStrategy = tc.strategy

			events := generate(t, client, start)

			if got := events[0].GetStarted().GetServers(); len(got) != 1 || got[0].GetPlacement() != agentdv1.Placement_PLACEMENT_BRIDGE {
				t.Errorf("placements = %v, want local in the bridge", got)
			}
			var finished *agentdv1.ToolCallFinished
			for _, ev := range events {
				if f := ev.GetToolCallFinished(); f != nil {
					finished = f
				}
			}
			if finished == nil || finished.GetServerName() != "local" || finished.GetOutput() != echoResult {
				t.Errorf("tool call = %v; want echo on local returning %q", finished, echoResult)
			}
			for _, b := range api.bodies {
				if strings.Contains(b, "mcp_servers") || strings.Contains(b, `"type":"mcp"`) {
					t.Errorf("the provider was asked to serve the server itself: %s", b)
				}
			}
		})
	}
}

// TestProviderSideRefusals proves the refusals made before any provider
// request: mcp_strategy SERVER with a command server (R-S4), and a
// connector the provider does not know.
func TestProviderSideRefusals(t *testing.T) {
	for _, tc := range []struct {
		name, provider, model string
		strategy              agentdv1.MCPStrategy
		decl                  *agentdv1.MCPServer
		facts                 []string
	}{
		{"SERVER with a command server", "anthropic", "claude-sonnet-4-5", agentdv1.MCPStrategy_MCP_STRATEGY_SERVER,
			&agentdv1.MCPServer{Name: "files", Transport: &agentdv1.MCPServer_Command{Command: "files-mcp"}},
			[]string{`"files"`, "anthropic", "url servers", "AUTO"}},
		{"SERVER with headers Anthropic cannot send", "anthropic", "claude-sonnet-4-5", agentdv1.MCPStrategy_MCP_STRATEGY_SERVER,
			&agentdv1.MCPServer{Name: "docs", Transport: &agentdv1.MCPServer_Url{Url: "https://mcp.example.com/mcp"}, Headers: map[string]string{"X-Key": "hdr-secret-1"}},
			[]string{`"docs"`, "headers", "AUTO"}},
		{"an unknown connector", "openai-responses", "gpt-5-mini", agentdv1.MCPStrategy_MCP_STRATEGY_AUTO,
			&agentdv1.MCPServer{Name: "gh", Transport: &agentdv1.MCPServer_Url{Url: "mcp://github"}, Authorization: "Bearer tok-secret-1"},
			[]string{`"gh"`, "not an OpenAI connector", "dropbox"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			api := &recordingAPI{turn: func(w http.ResponseWriter, _ int) { w.WriteHeader(http.StatusInternalServerError) }}
			client := providerStack(t, tc.provider, "", api, nil)
			start := startWith(tc.provider, tc.model, tc.decl)
			start.Agent.McpStrategy = tc.strategy

			stream, err := client.Generate(t.Context())
			if err != nil {
				t.Fatal(err)
			}
			if err := stream.Send(&agentdv1.GenerateRequest{Kind: &agentdv1.GenerateRequest_Start{Start: start}}); err != nil {
				t.Fatal(err)
			}
			_, err = stream.Recv()
			st := status.Convert(err)
			if st.Code() != codes.InvalidArgument {
				t.Fatalf("status %v %q, want InvalidArgument", st.Code(), st.Message())
			}
			text := st.Message() + " " + strings.Join(detailTexts(st), " ")
			for _, f := range tc.facts {
				if !strings.Contains(text, f) {
					t.Errorf("the refusal does not say %q: %s", f, text)
				}
			}
			for _, secret := range []string{"hdr-secret-1", "tok-secret-1"} {
				if strings.Contains(text, secret) {
					t.Errorf("the refusal shows a secret: %s", text)
				}
			}
			if bodies, _ := api.requests(); len(bodies) != 0 {
				t.Errorf("the provider got %d requests, want none", len(bodies))
			}
		})
	}
}

// startWith starts a generation of provider and model with one server.
func startWith(provider, model string, decl *agentdv1.MCPServer) *agentdv1.StartGeneration {
	return &agentdv1.StartGeneration{
		Agent:    &agentdv1.Agent{Provider: provider, Model: model, Mcps: []*agentdv1.MCPServer{decl}},
		Messages: []*agentdv1.Message{{Role: agentdv1.Role_ROLE_USER, Parts: []*agentdv1.Part{{Kind: &agentdv1.Part_Text{Text: "find the design doc"}}}}},
	}
}

// wantProviderSide checks a generation whose one server the provider ran:
// placed there, its call reported as an event and kept in the message.
func wantProviderSide(t *testing.T, events []*agentdv1.GenerateResponse, call *agentdv1.ProviderToolCall, text string) {
	t.Helper()
	if got := events[0].GetStarted().GetServers(); len(got) != 1 || got[0].GetPlacement() != agentdv1.Placement_PLACEMENT_PROVIDER {
		t.Errorf("placements = %v, want the server at the provider", got)
	}
	var reported *agentdv1.ProviderToolCall
	for _, ev := range events {
		if c := ev.GetProviderToolCall(); c != nil {
			reported = c
		}
	}
	if diff := cmp.Diff(call, reported, protocmp.Transform()); diff != "" {
		t.Errorf("provider_tool_call event (-want +got):\n%s", diff)
	}
	done := events[len(events)-1].GetCompleted()
	if done == nil {
		t.Fatalf("events end with %v; want completed", events[len(events)-1])
	}
	want := []*agentdv1.Part{{Kind: &agentdv1.Part_ProviderToolCall{ProviderToolCall: call}}, {Kind: &agentdv1.Part_Text{Text: text}}}
	if diff := cmp.Diff(want, done.GetMessage().GetParts(), protocmp.Transform()); diff != "" {
		t.Errorf("assistant message (-want +got):\n%s", diff)
	}
}

// detailTexts are the field violations of a status, as "field: text".
func detailTexts(st *status.Status) []string {
	var out []string
	for _, d := range st.Details() {
		if br, ok := d.(*errdetails.BadRequest); ok {
			for _, v := range br.GetFieldViolations() {
				out = append(out, v.GetField()+": "+v.GetDescription())
			}
		}
	}
	return out
}

// TestNativeMCPShapes proves R-S8 end to end: MCP servers given in the
// provider's own shape in the agent's provider options (Anthropic's
// mcp_servers, an OpenAI Responses type: mcp tool) reach the provider
// exactly as given, and nothing of agentd sees them: no placement in the
// started event, no bridge session, and no approval, even for a tool the
// agent gates, when the provider calls it.
func TestNativeMCPShapes(t *testing.T) {
	native := map[string]struct {
		model, path string
		key         string // the options key that holds the native shapes
		shape       []any
		turn        func(http.ResponseWriter, int)
	}{
		"anthropic": {
			model: "claude-sonnet-4-5", key: "mcp_servers",
			shape: []any{map[string]any{"type": "url", "url": "https://native.example.com/mcp", "name": "native", "authorization_token": "tok-native"}},
			turn: func(w http.ResponseWriter, _ int) {
				anthropicMessage(w, "end_turn",
					sseEvent("content_block_start", map[string]any{"type": "content_block_start", "index": 0, "content_block": map[string]any{"type": "mcp_tool_use", "id": "call_n_1", "name": "search", "server_name": "native", "input": map[string]any{}}}),
					sseEvent("content_block_stop", map[string]any{"type": "content_block_stop", "index": 0}),
					sseEvent("content_block_start", map[string]any{"type": "content_block_start", "index": 1, "content_block": map[string]any{"type": "mcp_tool_result", "tool_use_id": "call_n_1", "is_error": false, "content": []any{map[string]any{"type": "text", "text": "found"}}}}),
					sseEvent("content_block_stop", map[string]any{"type": "content_block_stop", "index": 1}),
					sseEvent("content_block_start", map[string]any{"type": "content_block_start", "index": 2, "content_block": map[string]any{"type": "text", "text": "done"}}),
					sseEvent("content_block_stop", map[string]any{"type": "content_block_stop", "index": 2}))
			},
		},
		"openai-responses": {
			model: "gpt-5-mini", path: "/v1", key: "tools",
			shape: []any{map[string]any{"type": "mcp", "server_label": "native", "server_url": "https://native.example.com/mcp", "require_approval": "never"}},
			turn: func(w http.ResponseWriter, _ int) {
				responsesMessage(w,
					map[string]any{"type": "mcp_call", "id": "call_n_1", "server_label": "native", "name": "search", "arguments": `{}`, "output": "found", "error": nil, "status": "completed"},
					responsesText("done"))
			},
		},
	}
	for provider, tc := range native {
		t.Run(provider, func(t *testing.T) {
			api := &recordingAPI{turn: tc.turn}
			client := providerStack(t, provider, tc.path, api, nil)
			options, err := structpb.NewStruct(map[string]any{tc.key: tc.shape})
			if err != nil {
				t.Fatal(err)
			}
			start := &agentdv1.StartGeneration{
				Agent:    &agentdv1.Agent{Provider: provider, Model: tc.model, ProviderOptions: options, RequiresApproval: []string{"search"}},
				Messages: []*agentdv1.Message{{Role: agentdv1.Role_ROLE_USER, Parts: []*agentdv1.Part{{Kind: &agentdv1.Part_Text{Text: "search"}}}}},
			}

			events := generate(t, client, start)

			if got := events[0].GetStarted().GetServers(); len(got) != 0 {
				t.Errorf("placements = %v; native shapes are not agentd's servers", got)
			}
			for _, ev := range events {
				if ev.GetApprovalRequest() != nil || ev.GetToolCallStarted() != nil {
					t.Errorf("agentd handled the provider's own call: %v", ev)
				}
			}
			if last := events[len(events)-1]; last.GetCompleted() == nil {
				t.Fatalf("last event = %v, want completed", last)
			}
			bodies, _ := api.requests()
			if len(bodies) != 1 {
				t.Fatalf("the provider got %d requests, want 1", len(bodies))
			}
			got, _ := json.Marshal(bodies[0][tc.key])
			want, _ := json.Marshal(tc.shape)
			if string(got) != string(want) {
				t.Errorf("%s = %s, want it untouched: %s", tc.key, got, want)
			}
		})
	}
}
