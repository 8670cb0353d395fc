package server_test

import (
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/durationpb"
	"google.golang.org/protobuf/types/known/structpb"

	bridgev1 "github.com/agentd/agentd/gen/go/agentd/bridge/v1"
	agentdv1 "github.com/agentd/agentd/gen/go/agentd/v1"
	"github.com/agentd/agentd/internal/policy"
	"github.com/agentd/agentd/providers/scripted"
	"github.com/agentd/agentd/server"
)

// TestGenerateValidation proves that a bad request is refused up front, as
// InvalidArgument listing every problem as a field violation, and that
// nothing reaches the bridge or the provider.
func TestGenerateValidation(t *testing.T) {
	t.Parallel()
	withTimeout := func(d time.Duration) *agentdv1.MCPServer {
		s := commandServer("files", "/usr/bin/files-mcp")
		s.ReadTimeout = durationpb.New(d)
		return s
	}
	turns := func(n int32) *int32 { return &n }
	tests := []struct {
		name     string
		agent    *agentdv1.Agent
		messages []*agentdv1.Message // default: one user message
		noMsgs   bool
		// wantFacts maps each violated field to facts its description
		// must carry.
		wantFacts map[string][]string
		// secrets must appear nowhere in the status.
		secrets []string
	}{
		{
			name: "R-D2 entry with no url, command or ref names it and lists the fields it set",
			agent: &agentdv1.Agent{Provider: "plain", Mcps: []*agentdv1.MCPServer{{
				Name:          "files",
				Authorization: "sk-live-SECRET-TOKEN-123",
				Headers:       map[string]string{"X-Api-Key": "HEADER-SECRET-456"},
				AllowedTools:  []string{"read"},
			}}},
			wantFacts: map[string][]string{
				"start.agent.mcps[0]": {`"files"`, "url", "command", "ref", "name", "authorization", "headers", "allowed_tools"},
			},
			secrets: []string{"SECRET-TOKEN-123", "HEADER-SECRET-456"},
		},
		{
			name: "R-D2 unnamed entry with no transport",
			agent: &agentdv1.Agent{Provider: "plain", Mcps: []*agentdv1.MCPServer{{
				Authorization: "Bearer sk-live-SECRET-TOKEN-789",
			}}},
			wantFacts: map[string][]string{"start.agent.mcps[0]": {"unnamed server", "authorization"}},
			secrets:   []string{"SECRET-TOKEN-789"},
		},
		{
			name: "R-D3 default url names are the host only, so two servers on one host clash",
			agent: &agentdv1.Agent{Provider: "plain", Mcps: []*agentdv1.MCPServer{
				urlServer("", "https://mcp.example.com/v1/key-PATH-SECRET/mcp"),
				urlServer("", "https://mcp.example.com:8443/mcp?api_key=QUERY-SECRET"),
			}},
			wantFacts: map[string][]string{"start.agent.mcps[1].name": {`"mcp.example.com"`, "mcps[0]"}},
			secrets:   []string{"PATH-SECRET", "QUERY-SECRET", "/v1", "/mcp"},
		},
		{
			name: "R-D3 default command names are the basename, and clash like any name",
			agent: &agentdv1.Agent{Provider: "plain", Mcps: []*agentdv1.MCPServer{
				commandServer("", "/opt/a/bin/mcp-server"),
				commandServer("", "/opt/b/bin/mcp-server"),
			}},
			wantFacts: map[string][]string{"start.agent.mcps[1].name": {`"command: mcp-server"`, "mcps[0]"}},
		},
		{
			name: "R-D3 duplicate explicit names",
			agent: &agentdv1.Agent{Provider: "plain", Mcps: []*agentdv1.MCPServer{
				commandServer("tools", "/usr/bin/a"),
				urlServer("tools", "https://tools.example.com/mcp"),
			}},
			wantFacts: map[string][]string{"start.agent.mcps[1].name": {`"tools"`, "mcps[0]"}},
		},
		{
			name: "X-M5 sampling: a negative max_tokens, an unknown mode",
			agent: &agentdv1.Agent{Provider: "plain", Mcps: []*agentdv1.MCPServer{{Name: "files", Transport: &agentdv1.MCPServer_Command{Command: "/usr/bin/files-mcp"},
				Sampling: &agentdv1.Sampling{Mode: 9, MaxTokens: -1}}}},
			wantFacts: map[string][]string{"start.agent.mcps[0].sampling.max_tokens": {"negative"}, "start.agent.mcps[0].sampling.mode": {"unknown"}},
		},
		{
			name:      "R-D6 read_timeout zero",
			agent:     &agentdv1.Agent{Provider: "plain", Mcps: []*agentdv1.MCPServer{withTimeout(0)}},
			wantFacts: map[string][]string{"start.agent.mcps[0].read_timeout": {"positive"}},
		},
		{
			name:      "R-D6 read_timeout negative",
			agent:     &agentdv1.Agent{Provider: "plain", Mcps: []*agentdv1.MCPServer{withTimeout(-time.Second)}},
			wantFacts: map[string][]string{"start.agent.mcps[0].read_timeout": {"positive"}},
		},
		{
			name:      "R-D6 read_timeout over an hour",
			agent:     &agentdv1.Agent{Provider: "plain", Mcps: []*agentdv1.MCPServer{withTimeout(time.Hour + time.Second)}},
			wantFacts: map[string][]string{"start.agent.mcps[0].read_timeout": {"1h"}},
		},
		{
			name:      "unknown provider lists the known ones",
			agent:     &agentdv1.Agent{Provider: "nope"},
			wantFacts: map[string][]string{"start.agent.provider": {`"nope"`, "plain", "script", "urlprov"}},
		},
		{
			name:      "missing provider",
			agent:     &agentdv1.Agent{},
			wantFacts: map[string][]string{"start.agent.provider": {"required", "plain"}},
		},
		{
			name:      "missing agent",
			wantFacts: map[string][]string{"start.agent": {"required"}},
		},
		{
			name:      "missing messages",
			agent:     &agentdv1.Agent{Provider: "plain"},
			noMsgs:    true,
			wantFacts: map[string][]string{"start.messages": {"at least one"}},
		},
		{
			name:      "unknown strategy number",
			agent:     &agentdv1.Agent{Provider: "plain", McpStrategy: agentdv1.MCPStrategy(7)},
			wantFacts: map[string][]string{"start.agent.mcp_strategy": {"7", "AUTO", "CLIENT", "SERVER"}},
		},
		{
			name:      "R-F3 max_tool_turns zero",
			agent:     &agentdv1.Agent{Provider: "plain", MaxToolTurns: turns(0)},
			wantFacts: map[string][]string{"start.agent.max_tool_turns": {"1..1000", "0"}},
		},
		{
			name:      "R-F3 max_tool_turns over the limit",
			agent:     &agentdv1.Agent{Provider: "plain", MaxToolTurns: turns(1001)},
			wantFacts: map[string][]string{"start.agent.max_tool_turns": {"1..1000", "1001"}},
		},
		{
			name:      "script provider without a script",
			agent:     &agentdv1.Agent{Provider: "script"},
			wantFacts: map[string][]string{"start.agent.provider_options.script": {"provider_options.script"}},
		},
		{
			name: "script provider with bad turns",
			agent: &agentdv1.Agent{Provider: "script", ProviderOptions: script(t, `{"turns": [
				{},
				{"error": {"kind": "oops", "message": "x"}}
			]}`)},
			wantFacts: map[string][]string{
				"start.agent.provider_options.script.turns[0]":            {"text, structured, tool_calls or error"},
				"start.agent.provider_options.script.turns[1].error.kind": {"unavailable"},
			},
		},
		{
			name: "every problem at once",
			agent: &agentdv1.Agent{
				Provider:     "nope",
				McpStrategy:  agentdv1.MCPStrategy(9),
				MaxToolTurns: turns(-1),
				Mcps: []*agentdv1.MCPServer{
					withTimeout(0),
					{Name: "empty", Authorization: "sk-live-SECRET-TOKEN-000"},
				},
			},
			noMsgs: true,
			wantFacts: map[string][]string{
				"start.agent.provider":             {`"nope"`},
				"start.messages":                   nil,
				"start.agent.mcp_strategy":         {"9"},
				"start.agent.max_tool_turns":       {"-1"},
				"start.agent.mcps[0].read_timeout": nil,
				"start.agent.mcps[1]":              {`"empty"`, "authorization"},
			},
			secrets: []string{"SECRET-TOKEN-000"},
		},
	}
	tests = append(tests, struct {
		name      string
		agent     *agentdv1.Agent
		messages  []*agentdv1.Message
		noMsgs    bool
		wantFacts map[string][]string
		secrets   []string
	}{
		name: "a function tool's parameters that are not a JSON Schema, each problem at its path",
		agent: &agentdv1.Agent{Provider: "plain", Tools: []*agentdv1.FunctionTool{
			{Name: "search", Parameters: parameters(t, `{"type":"object","properties":{"q":{"type":"no-such-type"}}}`)},
			{Name: "find", Parameters: parameters(t, `{"type":"object","required":"q"}`)},
			{Name: "fine", Parameters: parameters(t, `{"type":"object","properties":{"q":{"type":"string"}},"required":["q"]}`)},
		}},
		wantFacts: map[string][]string{
			"start.agent.tools[0].parameters.properties.q.type": {"not a JSON Schema", "'string'"},
			"start.agent.tools[1].parameters.required":          {"not a JSON Schema", "want array"},
		},
	})
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			bridge := &fakeBridge{}
			plain, url := plainProvider(), urlProvider()
			client := newClient(t, bridge, plain, url, scripted.Script())
			msgs := userSays("hi")
			if tt.noMsgs {
				msgs = nil
			}

			events, st := generate(t, client, &agentdv1.StartGeneration{Agent: tt.agent, Messages: msgs}, nil)

			wantCode(t, st, codes.InvalidArgument)
			if len(events) != 0 {
				t.Errorf("events = %v; want none", kinds(events))
			}
			var wantFields []string
			for f := range tt.wantFacts {
				wantFields = append(wantFields, f)
			}
			if diff := cmp.Diff(wantFields, violationFields(st), cmpopts.SortSlices(func(a, b string) bool { return a < b })); diff != "" {
				t.Errorf("violated fields (-want +got):\n%s", diff)
			}
			for field, facts := range tt.wantFacts {
				wantFacts(t, field, description(t, st, field), facts...)
			}
			for _, secret := range tt.secrets {
				if text := statusText(st); strings.Contains(text, secret) {
					t.Errorf("status carries %q:\n%s", secret, text)
				}
			}
			wantCounts(t, bridge, bridgeCounts{})
			if n := len(plain.calls()) + len(url.calls()); n != 0 {
				t.Errorf("provider called %d times; want 0", n)
			}
		})
	}
}

// parameters is a function tool's parameters, from JSON.
func parameters(t *testing.T, schema string) *structpb.Struct {
	t.Helper()
	var m map[string]any
	if err := json.Unmarshal([]byte(schema), &m); err != nil {
		t.Fatal(err)
	}
	p, err := structpb.NewStruct(m)
	if err != nil {
		t.Fatal(err)
	}
	return p
}

// TestGenerateDeclarations proves what valid declarations become: an
// empty list is fine (R-D1), default names (R-D3), and read_timeout's
// default and explicit values (R-D6) as the bridge receives them.
func TestGenerateDeclarations(t *testing.T) {
	t.Parallel()
	t.Run("R-D1 empty mcps opens no bridge session", func(t *testing.T) {
		t.Parallel()
		bridge := &fakeBridge{}
		client := newClient(t, bridge, scripted.Mock())

		events, st := generate(t, client, &agentdv1.StartGeneration{Agent: &agentdv1.Agent{Provider: "mock"}, Messages: userSays("hi")}, nil)

		wantCode(t, st, codes.OK)
		last := events[len(events)-1].GetCompleted()
		if got, want := last.GetMessage().GetParts()[0].GetText(), "Mock response to: hi"; got != want {
			t.Errorf("completed text = %q; want %q", got, want)
		}
		wantCounts(t, bridge, bridgeCounts{})
	})

	t.Run("R-D3 R-D6 R-S5 names and read timeouts reach the bridge; mock calls no tool", func(t *testing.T) {
		t.Parallel()
		bridge := &fakeBridge{onList: offering(serverTools("mcp.example.com", "search"))}
		client := newClient(t, bridge, scripted.Mock())
		keyed := urlServer("", "https://mcp.example.com/v1/key-PATH-SECRET/mcp?token=QUERY-SECRET")
		keyed.Authorization = "sk-token"
		cmd := commandServer("", "/opt/bin/mcp-server")
		cmd.Args = []string{"--root", "/srv"}
		ref := refServer("", "demo")
		ref.ReadTimeout = durationpb.New(time.Hour)
		agent := &agentdv1.Agent{Provider: "mock", Mcps: []*agentdv1.MCPServer{keyed, cmd, ref}}

		events, st := generate(t, client, &agentdv1.StartGeneration{Agent: agent, Messages: userSays("hi")}, nil)

		wantCode(t, st, codes.OK)
		want := []*bridgev1.OpenSessionRequest{{Servers: []*bridgev1.ServerSpec{
			{
				Name:        "mcp.example.com",
				Transport:   &bridgev1.ServerSpec_Http{Http: &bridgev1.HTTPTarget{Url: keyed.GetUrl(), Authorization: "sk-token"}},
				ReadTimeout: durationpb.New(30 * time.Second),
			},
			{
				Name:        "command: mcp-server",
				Transport:   &bridgev1.ServerSpec_Stdio{Stdio: &bridgev1.StdioTarget{Command: "/opt/bin/mcp-server", Args: []string{"--root", "/srv"}}},
				ReadTimeout: durationpb.New(30 * time.Second),
			},
			{
				Name:        "demo",
				Transport:   &bridgev1.ServerSpec_Ref{Ref: "demo"},
				ReadTimeout: durationpb.New(time.Hour),
			},
		}, ListCachedTools: true}}
		if diff := protoDiff(want, bridge.openRequests()); diff != "" {
			t.Errorf("OpenSession requests (-want +got):\n%s", diff)
		}
		wantServers := []*agentdv1.ServerPlacement{
			{Name: "mcp.example.com", Placement: agentdv1.Placement_PLACEMENT_BRIDGE, Transport: agentdv1.Transport_TRANSPORT_HTTP},
			{Name: "command: mcp-server", Placement: agentdv1.Placement_PLACEMENT_BRIDGE, Transport: agentdv1.Transport_TRANSPORT_STDIO},
			{Name: "demo", Placement: agentdv1.Placement_PLACEMENT_BRIDGE, Transport: agentdv1.Transport_TRANSPORT_STDIO},
		}
		if diff := protoDiff(wantServers, started(t, events).GetServers()); diff != "" {
			t.Errorf("started servers (-want +got):\n%s", diff)
		}
		wantCounts(t, bridge, bridgeCounts{Open: 1, List: 1, Close: 1})
	})
}

// TestGenerateValidationPolicy: X-D9. What the embedded bridge's rules
// refuse (env variables that steer how programs are found or loaded unless
// bridge.allowed_env lists them, commands bridge.allowed_commands does not
// list, private addresses without bridge.allow_private_networks) is refused
// up front, every one of them, with every other problem of the request:
// any other problem makes it InvalidArgument; refusals alone make it
// PermissionDenied, still listing each as a field violation. Values never
// show, and nothing reaches the bridge or the provider.
func TestGenerateValidationPolicy(t *testing.T) {
	t.Parallel()
	withEnv := func(env map[string]string, timeout time.Duration) *agentdv1.MCPServer {
		s := commandServer("files", "/usr/bin/files-mcp")
		s.Env = env
		if timeout != 0 {
			s.ReadTimeout = durationpb.New(timeout)
		}
		return s
	}
	type violation struct{ Field, Has string }
	const env = "start.agent.mcps[0].env"
	rules := func(allowedEnv ...string) policy.Rules {
		return policy.Rules{AllowedCommands: []string{"/usr/bin/files-mcp", "/usr/bin/py-mcp", "/usr/bin/other"}, AllowedEnv: allowedEnv}
	}
	tests := []struct {
		name       string
		allowedEnv []string
		mcps       []*agentdv1.MCPServer
		wantCode   codes.Code
		want       []violation // in order
	}{
		{
			name:     "X-D9 two refused variables and a bad read_timeout, all at once",
			mcps:     []*agentdv1.MCPServer{withEnv(map[string]string{"NODE_OPTIONS": "--require=/tmp/VALUE-SECRET-1.js", "LD_PRELOAD": "/tmp/VALUE-SECRET-2.so", "FILES_TOKEN": "VALUE-SECRET-3"}, -time.Second)},
			wantCode: codes.InvalidArgument,
			want: []violation{
				{"start.agent.mcps[0].read_timeout", "positive"},
				{env, "LD_PRELOAD"},
				{env, "NODE_OPTIONS"},
			},
		},
		{
			name: "X-D9 refused variables alone are PermissionDenied, every one named, on every server",
			mcps: []*agentdv1.MCPServer{
				withEnv(map[string]string{"NODE_OPTIONS": "VALUE-SECRET-1", "LD_PRELOAD": "VALUE-SECRET-2"}, 0),
				{Name: "py", Transport: &agentdv1.MCPServer_Command{Command: "/usr/bin/py-mcp"}, Env: map[string]string{"pythonpath": "VALUE-SECRET-3", "GIT_SSH_COMMAND": "VALUE-SECRET-4"}},
			},
			wantCode: codes.PermissionDenied,
			want: []violation{
				{env, "LD_PRELOAD"},
				{env, "NODE_OPTIONS"},
				{"start.agent.mcps[1].env", "GIT_SSH_COMMAND"},
				{"start.agent.mcps[1].env", "pythonpath"},
			},
		},
		{
			name:       "X-D9 bridge.allowed_env lets a variable through; the others are still refused",
			allowedEnv: []string{"NODE_OPTIONS"},
			mcps:       []*agentdv1.MCPServer{withEnv(map[string]string{"NODE_OPTIONS": "VALUE-SECRET-1", "LD_PRELOAD": "VALUE-SECRET-2"}, 0)},
			wantCode:   codes.PermissionDenied,
			want:       []violation{{env, "LD_PRELOAD"}},
		},
		{
			name: "X-D9 a command, an address and variables refused together, every one named",
			mcps: []*agentdv1.MCPServer{
				withEnv(map[string]string{"LD_PRELOAD": "VALUE-SECRET-1"}, 0),
				commandServer("shell", "/bin/sh"),
				{Name: "lan", Transport: &agentdv1.MCPServer_Url{Url: "https://100.64.1.2/mcp/VALUE-SECRET-2"}},
			},
			wantCode: codes.PermissionDenied,
			want: []violation{
				{env, "LD_PRELOAD"},
				{"start.agent.mcps[1].command", "bridge.allowed_commands"},
				{"start.agent.mcps[2].url", "bridge.allow_private_networks"},
			},
		},
		{
			name: "X-D9 a problem of the agent makes refused variables InvalidArgument too",
			mcps: []*agentdv1.MCPServer{withEnv(map[string]string{"PATH": "VALUE-SECRET-1"}, 0), commandServer("files", "/usr/bin/other")},
			want: []violation{
				{"start.agent.mcps[1].name", `"files"`},
				{env, "PATH"},
			},
			wantCode: codes.InvalidArgument,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			bridge := &fakeBridge{}
			plain := plainProvider()
			r := rules(tt.allowedEnv...)
			client := newClientWith(t, server.Options{Bridge: bridge, Rules: &r}, plain)

			events, st := generate(t, client, &agentdv1.StartGeneration{Agent: &agentdv1.Agent{Provider: "plain", Mcps: tt.mcps}, Messages: userSays("hi")}, nil)

			wantCode(t, st, tt.wantCode)
			if len(events) != 0 {
				t.Errorf("events = %v; want none", kinds(events))
			}
			var got []violation
			for _, v := range fieldViolations(st) {
				got = append(got, violation{v.GetField(), v.GetDescription()})
			}
			if len(got) != len(tt.want) {
				t.Fatalf("violations = %v; want %v", got, tt.want)
			}
			for i, w := range tt.want {
				if got[i].Field != w.Field || !strings.Contains(got[i].Has, w.Has) {
					t.Errorf("violation %d = %v; want field %s saying %q", i, got[i], w.Field, w.Has)
				}
				if strings.HasSuffix(w.Field, ".env") {
					wantFacts(t, w.Field, got[i].Has, "bridge.allowed_env")
				}
			}
			if text := statusText(st); strings.Contains(text, "VALUE-SECRET") {
				t.Errorf("status carries an env value:\n%s", text)
			}
			wantCounts(t, bridge, bridgeCounts{})
			if n := len(plain.calls()); n != 0 {
				t.Errorf("provider called %d times; want 0", n)
			}
		})
	}
	t.Run("X-D9 allowed variables and others reach the bridge", func(t *testing.T) {
		t.Parallel()
		bridge := &fakeBridge{onList: offering(serverTools("files"))}
		r := rules("NODE_OPTIONS")
		client := newClientWith(t, server.Options{Bridge: bridge, Rules: &r}, scripted.Mock())
		decl := withEnv(map[string]string{"NODE_OPTIONS": "--no-warnings", "FILES_TOKEN": "t"}, 0)

		_, st := generate(t, client, &agentdv1.StartGeneration{Agent: &agentdv1.Agent{Provider: "mock", Mcps: []*agentdv1.MCPServer{decl}}, Messages: userSays("hi")}, nil)

		wantCode(t, st, codes.OK)
		if reqs := bridge.openRequests(); len(reqs) != 1 || len(reqs[0].GetServers()[0].GetStdio().GetEnv()) != 2 {
			t.Errorf("OpenSession requests = %v; want one with both variables", reqs)
		}
	})
	t.Run("X-D9 Preview refuses alike", func(t *testing.T) {
		t.Parallel()
		bridge, prov := noIO(t)
		r := rules()
		client := newClientWith(t, server.Options{Bridge: bridge, Rules: &r}, prov)
		agent := &agentdv1.Agent{Provider: prov.name, Mcps: []*agentdv1.MCPServer{withEnv(map[string]string{"LD_PRELOAD": "VALUE-SECRET", "NODE_OPTIONS": "VALUE-SECRET"}, 0)}}

		_, err := client.Preview(t.Context(), &agentdv1.PreviewRequest{Agent: agent, Messages: userSays("hi")})

		st := status.Convert(err)
		wantCode(t, st, codes.PermissionDenied)
		if diff := cmp.Diff([]string{"agent.mcps[0].env", "agent.mcps[0].env"}, violationFields(st)); diff != "" {
			t.Errorf("violated fields (-want +got):\n%s", diff)
		}
	})
	t.Run("X-D9 with a remote bridge, whose rules agentd does not know, the bridge decides", func(t *testing.T) {
		t.Parallel()
		bridge := &fakeBridge{onList: offering(serverTools("files"))}
		client := newClientWith(t, server.Options{Bridge: bridge}, scripted.Mock())
		decl := withEnv(map[string]string{"PYTHONPATH": "/opt/lib"}, 0)

		_, st := generate(t, client, &agentdv1.StartGeneration{Agent: &agentdv1.Agent{Provider: "mock", Mcps: []*agentdv1.MCPServer{decl}}, Messages: userSays("hi")}, nil)

		wantCode(t, st, codes.OK)
		if reqs := bridge.openRequests(); len(reqs) != 1 {
			t.Errorf("OpenSession requests = %v; want the declaration sent to the bridge", reqs)
		}
	})
}
