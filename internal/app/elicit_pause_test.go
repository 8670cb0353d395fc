package app_test

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"strings"
	"testing"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/durationpb"
	"google.golang.org/protobuf/types/known/structpb"

	agentdv1 "github.com/agentd/agentd/gen/go/agentd/v1"
	"github.com/agentd/agentd/internal/app"
	"github.com/agentd/agentd/internal/app/apptest"
	"github.com/agentd/agentd/internal/mcptest"
)

// elicitPauseRun is what one stream of TestElicitationPause saw.
type elicitPauseRun struct {
	requests []*agentdv1.InputRequest
	started  []string // tool calls started
	output   string   // the last tool call's output
	paused   *agentdv1.GenerationPaused
	final    string
	err      error
}

// elicitPauseStream sends first on a new stream, half-closes, and reads
// the stream to its end.
func elicitPauseStream(t *testing.T, client agentdv1.AgentServiceClient, first *agentdv1.GenerateRequest) elicitPauseRun {
	t.Helper()
	var run elicitPauseRun
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	stream, err := client.Generate(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if err := stream.Send(first); err != nil {
		t.Fatal(err)
	}
	_ = stream.CloseSend()
	for {
		ev, err := stream.Recv()
		if errors.Is(err, io.EOF) {
			return run
		}
		if err != nil {
			run.err = err
			return run
		}
		switch {
		case ev.GetInputRequest() != nil:
			run.requests = append(run.requests, ev.GetInputRequest())
		case ev.GetToolCallStarted() != nil:
			run.started = append(run.started, ev.GetToolCallStarted().GetCallId())
		case ev.GetToolCallFinished() != nil:
			run.output = ev.GetToolCallFinished().GetOutput()
		case ev.GetPaused() != nil:
			run.paused = ev.GetPaused()
		case ev.GetCompleted() != nil:
			for _, p := range ev.GetCompleted().GetMessage().GetParts() {
				run.final += p.GetText()
			}
		}
	}
}

// TestElicitationPause: X-M4 on protocol 2026-07-28, where a server asks
// for input inside its tools/call result. A client that answers nothing
// pauses the generation like an approval: the paused event lists the
// input request (server, tool call, message, schema); a resume without
// its answer is refused; the resume's answer goes to the server with the
// call again and its request state, and the generation completes. On
// 2025-11-25 the same client cancels the request instead
// (TestElicitationThroughAgentd).
func TestElicitationPause(t *testing.T) {
	t.Parallel()
	srv := mcptest.NewHTTP(t, mcptest.HTTPOptions{Mode: mcptest.Stateless})
	cfg := testConfig(t)
	cfg.Bridge.AllowPrivateNetworks = true
	conn, _ := apptest.Serve(t, app.Options{Config: cfg, Logger: slog.New(slog.DiscardHandler)})
	client := agentdv1.NewAgentServiceClient(conn)

	opts, err := structpb.NewStruct(map[string]any{"script": map[string]any{"turns": []any{
		map[string]any{"tool_calls": []any{map[string]any{"name": "elicit", "arguments": map[string]any{"mode": "form"}}}},
		map[string]any{"text": "done: {{tool_outputs}}"},
	}}})
	if err != nil {
		t.Fatal(err)
	}
	agent := &agentdv1.Agent{Provider: "script", ProviderOptions: opts, McpCache: proto.Bool(false),
		Mcps: []*agentdv1.MCPServer{{Name: "asker", Transport: &agentdv1.MCPServer_Url{Url: srv.URL}}}}
	start := &agentdv1.StartGeneration{Agent: agent, AnswerTimeout: durationpb.New(roomyAnswer),
		Messages: []*agentdv1.Message{{Role: agentdv1.Role_ROLE_USER, Parts: []*agentdv1.Part{textPart("go")}}}}

	run := elicitPauseStream(t, client, &agentdv1.GenerateRequest{Kind: &agentdv1.GenerateRequest_Start{Start: start}})
	if run.err != nil || run.paused == nil || len(run.paused.GetInputRequests()) != 1 {
		t.Fatalf("nobody answers on 2026-07-28: err %v, paused %v; want a pause with one input request", run.err, run.paused)
	}
	req := run.paused.GetInputRequests()[0]
	if req.GetServerName() != "asker" || len(run.started) != 1 || req.GetToolCallId() != run.started[0] ||
		req.GetMessage() != mcptest.ElicitForm.Message || req.GetRequestedSchema().GetFields()["properties"] == nil {
		t.Errorf("paused input request = %v, want asker's form for call %v", req, run.started)
	}
	if run.output != "" {
		t.Errorf("the call finished (%q) before the answer", run.output)
	}

	resume := func(answers ...*agentdv1.InputResponse) elicitPauseRun {
		return elicitPauseStream(t, client, &agentdv1.GenerateRequest{Kind: &agentdv1.GenerateRequest_Resume{Resume: &agentdv1.ResumeGeneration{
			GenerationId: run.paused.GetGenerationId(), Agent: agent, InputResponses: answers,
		}}})
	}
	if r := resume(); status.Code(r.err) != codes.InvalidArgument {
		t.Errorf("resume without the answer: %v, want InvalidArgument", r.err)
	}
	// An answer the request's schema refuses is refused before anything
	// runs; the pause stays.
	wrong, _ := structpb.NewStruct(map[string]any{"name": "Ada", "age": "old"})
	if r := resume(&agentdv1.InputResponse{RequestId: req.GetId(), Action: agentdv1.InputAction_INPUT_ACTION_ACCEPT, Content: wrong}); status.Code(r.err) != codes.InvalidArgument {
		t.Errorf("resume with content the schema refuses: %v, want InvalidArgument", r.err)
	}
	content, _ := structpb.NewStruct(map[string]any{"name": "Ada", "age": 36})
	r := resume(&agentdv1.InputResponse{RequestId: req.GetId(), Action: agentdv1.InputAction_INPUT_ACTION_ACCEPT, Content: content})
	if r.err != nil || r.paused != nil || !strings.Contains(r.final, "done") {
		t.Fatalf("resume with the answer: err %v, paused %v, final %q; want completed", r.err, r.paused, r.final)
	}
	// The schema's defaults fill what the person left out (SEP-1034).
	for _, want := range []string{`"action":"accept"`, `"name":"Ada"`, `"color":"green"`} {
		if !strings.Contains(r.output, want) {
			t.Errorf("the server got %s, missing %s", r.output, want)
		}
	}
}
