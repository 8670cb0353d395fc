package server_test

import (
	"context"
	"errors"
	"io"
	"iter"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/durationpb"
	"google.golang.org/protobuf/types/known/structpb"

	bridgev1 "github.com/agentd/agentd/gen/go/agentd/bridge/v1"
	agentdv1 "github.com/agentd/agentd/gen/go/agentd/v1"
	"github.com/agentd/agentd/providers"
)

// noIO returns a bridge and a url-serving provider that fail the test if
// anything connects, lists, calls, closes or streams.
func noIO(t *testing.T) (*fakeBridge, *fakeProvider) {
	bridge := &fakeBridge{
		onOpen: func(context.Context, *bridgev1.OpenSessionRequest) error {
			t.Error("Preview opened a bridge session")
			return errors.New("no I/O")
		},
		onList: func(context.Context) ([]*bridgev1.ServerTools, error) {
			t.Error("Preview listed tools")
			return nil, errors.New("no I/O")
		},
		onCall: func(context.Context, string, string, string) (*bridgev1.CallToolResponse, error) {
			t.Error("Preview called a tool")
			return nil, errors.New("no I/O")
		},
		onClose: func(context.Context) { t.Error("Preview closed a session") },
	}
	prov := urlProvider()
	prov.stream = func(context.Context, *providers.Request) iter.Seq2[providers.Event, error] {
		t.Error("Preview called the provider")
		return turnOf()
	}
	return bridge, prov
}

// TestPreview proves that Preview performs no I/O and shows the declared
// tools and the provider-side servers, not the bridged ones (R-P1).
func TestPreview(t *testing.T) {
	t.Parallel()
	opts, err := structpb.NewStruct(map[string]any{"temperature": 0.5})
	if err != nil {
		t.Fatal(err)
	}
	gated := urlServer("gated", "https://gated.example.com/mcp")
	gated.RequireApproval = &agentdv1.ApprovalPolicy{Mode: agentdv1.ApprovalMode_APPROVAL_MODE_ALWAYS}
	weather := &agentdv1.FunctionTool{Name: "get_weather", Description: "Weather for a city"}
	seven := int32(7)
	tests := []struct {
		name  string
		agent *agentdv1.Agent
		want  *agentdv1.PreviewResponse
	}{
		{
			name: "R-P1 declared tools and provider-side servers only",
			agent: &agentdv1.Agent{
				Provider:        "urlprov",
				Model:           "m-1",
				Instructions:    "Be brief.",
				Tools:           []*agentdv1.FunctionTool{weather},
				Mcps:            []*agentdv1.MCPServer{urlServer("", "https://mcp.example.com/v1/key-PATH-SECRET"), commandServer("", "/usr/bin/files-mcp"), gated},
				ProviderOptions: opts,
			},
			want: &agentdv1.PreviewResponse{
				Provider:     "urlprov",
				Model:        "m-1",
				Instructions: "Be brief.",
				Tools:        []*agentdv1.FunctionTool{weather},
				ProviderServers: []*agentdv1.ServerPlacement{
					{Name: "mcp.example.com", Placement: agentdv1.Placement_PLACEMENT_PROVIDER, Transport: agentdv1.Transport_TRANSPORT_HTTP},
				},
				Messages:        userSays("hi"),
				ProviderOptions: opts,
				MaxToolTurns:    25,
				Limits:          &agentdv1.GenerationLimits{MaxDuration: durationpb.New(time.Hour), OnLimit: agentdv1.OnLimit_ON_LIMIT_END},
			},
		},
		{
			name:  "R-P1 R-S3 CLIENT leaves no provider-side server; max_tool_turns as set",
			agent: &agentdv1.Agent{Provider: "urlprov", McpStrategy: agentdv1.MCPStrategy_MCP_STRATEGY_CLIENT, MaxToolTurns: &seven, Mcps: []*agentdv1.MCPServer{urlServer("docs", "https://docs.example.com/mcp")}},
			want: &agentdv1.PreviewResponse{Provider: "urlprov", Messages: userSays("hi"), MaxToolTurns: 7,
				Limits: &agentdv1.GenerationLimits{MaxDuration: durationpb.New(time.Hour), OnLimit: agentdv1.OnLimit_ON_LIMIT_END}},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			bridge, prov := noIO(t)
			client := newClient(t, bridge, prov)

			got, err := client.Preview(t.Context(), &agentdv1.PreviewRequest{Agent: tt.agent, Messages: userSays("hi")})
			if err != nil {
				t.Fatalf("Preview: %v", err)
			}

			if diff := protoDiff(tt.want, got); diff != "" {
				t.Errorf("Preview (-want +got):\n%s", diff)
			}
			wantCounts(t, bridge, bridgeCounts{})
		})
	}
}

// TestPreviewValidation proves that Preview validates like Generate, with
// field paths relative to the PreviewRequest, and still performs no I/O.
func TestPreviewValidation(t *testing.T) {
	t.Parallel()
	bridge, prov := noIO(t)
	client := newClient(t, bridge, prov)
	agent := &agentdv1.Agent{
		Provider:    "urlprov",
		McpStrategy: agentdv1.MCPStrategy_MCP_STRATEGY_SERVER,
		Mcps:        []*agentdv1.MCPServer{commandServer("files", "/usr/bin/files-mcp")},
		Tools:       []*agentdv1.FunctionTool{{Name: "search", Parameters: parameters(t, `{"type":"object","properties":{"q":{"type":"no-such-type"}}}`)}},
	}

	_, err := client.Preview(t.Context(), &agentdv1.PreviewRequest{Agent: agent, Messages: userSays("hi")})

	st := status.Convert(err)
	wantCode(t, st, codes.InvalidArgument)
	if diff := cmp.Diff([]string{"agent.tools[0].parameters.properties.q.type", "agent.mcps[0]"}, violationFields(st)); diff != "" {
		t.Errorf("violated fields (-want +got):\n%s", diff)
	}
	wantFacts(t, "agent.mcps[0]", description(t, st, "agent.mcps[0]"), `"files"`, "url servers", "AUTO")
	wantFacts(t, "agent.tools[0].parameters.properties.q.type", description(t, st, "agent.tools[0].parameters.properties.q.type"), "not a JSON Schema")
	wantCounts(t, bridge, bridgeCounts{})
}

// TestResume proves what resuming means in this version, which never
// pauses: an empty id is invalid and any other id is unknown. Neither
// reaches the bridge or the provider.
func TestResume(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name      string
		id        string
		wantCode  codes.Code
		wantField string
		wantMsg   string
	}{
		{name: "empty generation id", wantCode: codes.InvalidArgument, wantField: "resume.generation_id"},
		{name: "unknown generation", id: "gen_0123456789abcdef", wantCode: codes.NotFound, wantMsg: `"gen_0123456789abcdef"`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			bridge, prov := noIO(t)
			client := newClient(t, bridge, prov)

			events, st := run(t, client, &agentdv1.GenerateRequest{Kind: &agentdv1.GenerateRequest_Resume{Resume: &agentdv1.ResumeGeneration{
				GenerationId: tt.id,
				Agent:        &agentdv1.Agent{Provider: "urlprov"},
			}}}, nil)

			wantCode(t, st, tt.wantCode)
			if tt.wantField != "" {
				if diff := cmp.Diff([]string{tt.wantField}, violationFields(st)); diff != "" {
					t.Errorf("violated fields (-want +got):\n%s", diff)
				}
			}
			wantFacts(t, "status message", st.Message(), tt.wantMsg)
			if len(events) != 0 {
				t.Errorf("events = %v; want none", kinds(events))
			}
			wantCounts(t, bridge, bridgeCounts{})
		})
	}
}

// TestFirstMessage proves that a stream must open with start or resume.
func TestFirstMessage(t *testing.T) {
	t.Parallel()
	t.Run("an answer before start", func(t *testing.T) {
		t.Parallel()
		bridge, prov := noIO(t)
		client := newClient(t, bridge, prov)

		_, st := run(t, client, approve("approval_call_1_1", "", true), nil)

		wantCode(t, st, codes.InvalidArgument)
		if diff := cmp.Diff([]string{"kind"}, violationFields(st)); diff != "" {
			t.Errorf("violated fields (-want +got):\n%s", diff)
		}
	})
	t.Run("a stream that ends before start", func(t *testing.T) {
		t.Parallel()
		bridge, prov := noIO(t)
		client := newClient(t, bridge, prov)
		s, err := client.Generate(t.Context())
		if err != nil {
			t.Fatal(err)
		}
		if err := s.CloseSend(); err != nil {
			t.Fatal(err)
		}

		_, err = s.Recv()

		if errors.Is(err, io.EOF) {
			t.Fatal("Recv = EOF; want InvalidArgument")
		}
		st := status.Convert(err)
		wantCode(t, st, codes.InvalidArgument)
		if diff := cmp.Diff([]string{"start"}, violationFields(st)); diff != "" {
			t.Errorf("violated fields (-want +got):\n%s", diff)
		}
	})
}
