package app_test

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"log/slog"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/testing/protocmp"
	"google.golang.org/protobuf/types/known/durationpb"
	"google.golang.org/protobuf/types/known/structpb"

	agentdv1 "github.com/agentd/agentd/gen/go/agentd/v1"
	"github.com/agentd/agentd/internal/app"
	"github.com/agentd/agentd/internal/app/apptest"
	"github.com/agentd/agentd/internal/grpcserver"
	"github.com/agentd/agentd/internal/mcptest"
	"github.com/agentd/agentd/internal/telemetry"
)

// sampleRun runs a generation whose script calls the sample tool of the
// server at url with args, each turn and the sample counting the usage
// given, deciding each sampling approval request with decide (nil:
// half-close at once, answering nothing). It returns the approval
// requests, the tool call's output and id, and the generation's usage.
func sampleRun(t *testing.T, client agentdv1.AgentServiceClient, url string, sampling *agentdv1.Sampling, args map[string]any,
	decide func(*agentdv1.ApprovalRequest) bool) (approvals []*agentdv1.ApprovalRequest, output, callID string, usage *agentdv1.Usage) {
	t.Helper()
	one := map[string]any{"input_tokens": 1, "output_tokens": 1}
	opts, err := structpb.NewStruct(map[string]any{"script": map[string]any{
		"turns": []any{
			map[string]any{"tool_calls": []any{map[string]any{"name": "sample", "arguments": args}}, "usage": one},
			map[string]any{"text": "done", "usage": one},
		},
		"sample": map[string]any{"text": "You said: {{prompt}}", "usage": map[string]any{"input_tokens": 100, "output_tokens": 10}},
	}})
	if err != nil {
		t.Fatal(err)
	}
	agent := &agentdv1.Agent{Provider: "script", ProviderOptions: opts, McpCache: proto.Bool(false),
		Mcps: []*agentdv1.MCPServer{{Name: "asker", Transport: &agentdv1.MCPServer_Url{Url: url}, Sampling: sampling}}}
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	stream, err := client.Generate(ctx)
	if err != nil {
		t.Fatal(err)
	}
	start := &agentdv1.StartGeneration{Agent: agent, AnswerTimeout: durationpb.New(roomyAnswer),
		Messages: []*agentdv1.Message{{Role: agentdv1.Role_ROLE_USER, Parts: []*agentdv1.Part{textPart("go")}}}}
	if err := stream.Send(&agentdv1.GenerateRequest{Kind: &agentdv1.GenerateRequest_Start{Start: start}}); err != nil {
		t.Fatal(err)
	}
	if decide == nil {
		_ = stream.CloseSend()
	}
	for {
		ev, err := stream.Recv()
		if errors.Is(err, io.EOF) {
			return approvals, output, callID, usage
		}
		if err != nil {
			t.Fatalf("Recv: %v", err)
		}
		if s := ev.GetToolCallStarted(); s != nil {
			callID = s.GetCallId()
		}
		if r := ev.GetApprovalRequest(); r != nil {
			approvals = append(approvals, r)
			if decide != nil {
				d := &agentdv1.ApprovalDecision{RequestId: r.GetId(), Approved: decide(r)}
				if err := stream.Send(&agentdv1.GenerateRequest{Kind: &agentdv1.GenerateRequest_ApprovalDecision{ApprovalDecision: d}}); err != nil {
					t.Fatal(err)
				}
			}
		}
		if f := ev.GetToolCallFinished(); f != nil {
			output = f.GetOutput()
		}
		if c := ev.GetCompleted(); c != nil {
			usage = c.GetUsage()
		}
	}
}

// sampled is what the sample tool reported of the model's answer.
func sampled(t *testing.T, output string) mcptest.SampleOutput {
	t.Helper()
	var out mcptest.SampleOutput
	if err := json.Unmarshal([]byte(output), &out); err != nil || out.Role == "" {
		t.Fatalf("the sample tool answered %s, want the model's answer", output)
	}
	return out
}

// TestSamplingThroughAgentd: X-M5 from the client's side. A server's
// sampling request during a tool call is answered by the agent's own
// provider (the script's sample turn) under the server's policy: ALLOW
// answers at once, capped by max_tokens; ASK sends an approval request
// ("Allow asker to ask the model?") naming the call, with the messages
// and the tokens asked and granted, and answers once approved; a refusal,
// a client that answers nothing and DENY (the default) refuse it with an
// error the server reads. The sample's tokens count in the generation's
// usage (the turns count 1 and 1 each, the sample 100 and 10), and the
// model call has a span of its own, "sampling asker", below the tool
// call's, with the GenAI attributes of a chat.
func TestSamplingThroughAgentd(t *testing.T) {
	t.Parallel()
	srv := mcptest.NewHTTP(t, mcptest.HTTPOptions{Mode: mcptest.Streamable})
	cfg := testConfig(t)
	cfg.Bridge.AllowPrivateNetworks = true
	spans := tracetest.NewSpanRecorder()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(spans))
	conn, _ := apptest.Serve(t, app.Options{Config: cfg, Logger: slog.New(slog.DiscardHandler),
		Telemetry: grpcserver.Telemetry{TracerProvider: tp, Propagator: telemetry.Propagator()}})
	client := agentdv1.NewAgentServiceClient(conn)
	allow := &agentdv1.Sampling{Mode: agentdv1.SamplingMode_SAMPLING_MODE_ALLOW}
	ask := &agentdv1.Sampling{Mode: agentdv1.SamplingMode_SAMPLING_MODE_ASK}
	sampledUsage := &agentdv1.Usage{InputTokens: 102, OutputTokens: 12}
	unsampledUsage := &agentdv1.Usage{InputTokens: 2, OutputTokens: 2}

	t.Run("allow", func(t *testing.T) {
		approvals, out, _, usage := sampleRun(t, client, srv.URL, allow, map[string]any{"prompt": "ping", "max_tokens": 50}, nil)
		if len(approvals) != 0 {
			t.Errorf("approval requests %v, want none", approvals)
		}
		if diff := cmp.Diff(mcptest.SampleOutput{Role: "assistant", Text: "You said: ping", Model: "script", StopReason: "endTurn"}, sampled(t, out)); diff != "" {
			t.Errorf("the server got (-want +got):\n%s", diff)
		}
		if diff := cmp.Diff(sampledUsage, usage, protocmp.Transform(), protocmp.IgnoreFields(&agentdv1.Usage{}, "tool_schema_bytes", "cost")); diff != "" {
			t.Errorf("usage (-want +got):\n%s", diff)
		}
		var sample, tool sdktrace.ReadOnlySpan
		for _, s := range spans.Ended() {
			switch s.Name() {
			case "sampling asker":
				sample = s
			case "execute_tool sample":
				tool = s
			}
		}
		if sample == nil || tool == nil {
			t.Fatalf("no sampling span below a tool span among %d spans", len(spans.Ended()))
		}
		if sample.Parent().SpanID() != tool.SpanContext().SpanID() {
			t.Errorf("the sampling span's parent is not the tool call's span")
		}
		attrs := map[string]any{}
		for _, kv := range sample.Attributes() {
			attrs[string(kv.Key)] = kv.Value.AsInterface()
		}
		for k, v := range map[string]any{"gen_ai.operation.name": "chat", "gen_ai.request.max_tokens": int64(50), "agentd.mcp.server": "asker",
			"gen_ai.usage.input_tokens": int64(100), "gen_ai.usage.output_tokens": int64(10)} {
			if attrs[k] != v {
				t.Errorf("the sampling span's %s = %v, want %v", k, attrs[k], v)
			}
		}
	})

	t.Run("max_tokens capped", func(t *testing.T) {
		t.Parallel()
		capped := &agentdv1.Sampling{Mode: agentdv1.SamplingMode_SAMPLING_MODE_ALLOW, MaxTokens: 2}
		_, out, _, _ := sampleRun(t, client, srv.URL, capped, map[string]any{"prompt": "ping", "max_tokens": 500}, nil)
		if got := sampled(t, out); got.Text != "You said" || got.StopReason != "maxTokens" {
			t.Errorf("the server got %+v, want the answer cut at 2 tokens", got)
		}
	})

	t.Run("ask approved", func(t *testing.T) {
		t.Parallel()
		approvals, out, callID, usage := sampleRun(t, client, srv.URL, ask, map[string]any{"prompt": "ping", "max_tokens": 50, "system": "Be brief."},
			func(*agentdv1.ApprovalRequest) bool { return true })
		if len(approvals) != 1 {
			t.Fatalf("approval requests %v, want 1", approvals)
		}
		want := &agentdv1.ApprovalRequest{Id: approvals[0].GetId(), ToolCallId: callID, ServerName: "asker", Prompt: "Allow asker to ask the model?",
			Sampling: &agentdv1.SamplingApproval{ServerName: "asker", Messages: []*agentdv1.SamplingMessage{{Role: "user", Text: "ping"}},
				SystemPrompt: "Be brief.", MaxTokensRequested: 50, MaxTokensGranted: 50}}
		if diff := cmp.Diff(want, approvals[0], protocmp.Transform()); diff != "" {
			t.Errorf("approval request (-want +got):\n%s", diff)
		}
		if got := sampled(t, out); got.Text != "You said: ping" {
			t.Errorf("the server got %+v, want the model's answer", got)
		}
		if diff := cmp.Diff(sampledUsage, usage, protocmp.Transform(), protocmp.IgnoreFields(&agentdv1.Usage{}, "tool_schema_bytes", "cost")); diff != "" {
			t.Errorf("usage (-want +got):\n%s", diff)
		}
	})

	refused := []struct {
		name     string
		sampling *agentdv1.Sampling
		decide   func(*agentdv1.ApprovalRequest) bool
		asked    int
		want     string
	}{
		{"ask declined", ask, func(*agentdv1.ApprovalRequest) bool { return false }, 1, "the user declined the sampling request"},
		{"nobody answers", ask, nil, 1, "the client did not give in time"},
		{"deny by default", nil, nil, 0, "sampling is not allowed for the MCP server"},
	}
	for _, tt := range refused {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			approvals, out, _, usage := sampleRun(t, client, srv.URL, tt.sampling, map[string]any{"prompt": "ping"}, tt.decide)
			if len(approvals) != tt.asked || !strings.Contains(out, tt.want) {
				t.Errorf("%d approval requests, the server got %s; want %d, and %q", len(approvals), out, tt.asked, tt.want)
			}
			if diff := cmp.Diff(unsampledUsage, usage, protocmp.Transform(), protocmp.IgnoreFields(&agentdv1.Usage{}, "tool_schema_bytes", "cost")); diff != "" {
				t.Errorf("usage (-want +got):\n%s", diff)
			}
		})
	}
}
