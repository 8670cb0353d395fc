package app_test

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"strings"
	"testing"

	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/durationpb"
	"google.golang.org/protobuf/types/known/structpb"

	agentdv1 "github.com/agentd/agentd/gen/go/agentd/v1"
	"github.com/agentd/agentd/internal/app"
	"github.com/agentd/agentd/internal/app/apptest"
	"github.com/agentd/agentd/internal/mcptest"
)

// elicitRun runs a generation whose script calls the elicit tool of the
// server at url (mode "form" or "url"), answering each input request
// with answer (nil: half-close at once, answering nothing).
func elicitRun(t *testing.T, client agentdv1.AgentServiceClient, url, mode string, policy agentdv1.ElicitationPolicy,
	answer func(*agentdv1.InputRequest) *agentdv1.InputResponse) (requests []*agentdv1.InputRequest, output string, callID string) {
	t.Helper()
	opts, err := structpb.NewStruct(map[string]any{"script": map[string]any{"turns": []any{
		map[string]any{"tool_calls": []any{map[string]any{"name": "elicit", "arguments": map[string]any{"mode": mode}}}},
		map[string]any{"text": "done"},
	}}})
	if err != nil {
		t.Fatal(err)
	}
	agent := &agentdv1.Agent{Provider: "script", ProviderOptions: opts, McpCache: proto.Bool(false), Elicitation: policy,
		Mcps: []*agentdv1.MCPServer{{Name: "asker", Transport: &agentdv1.MCPServer_Url{Url: url}}}}
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
	if answer == nil {
		_ = stream.CloseSend()
	}
	for {
		ev, err := stream.Recv()
		if errors.Is(err, io.EOF) {
			return requests, output, callID
		}
		if err != nil {
			t.Fatalf("Recv: %v", err)
		}
		if s := ev.GetToolCallStarted(); s != nil {
			callID = s.GetCallId()
		}
		if r := ev.GetInputRequest(); r != nil {
			requests = append(requests, r)
			if answer != nil {
				a := answer(r)
				a.RequestId = r.GetId()
				if err := stream.Send(&agentdv1.GenerateRequest{Kind: &agentdv1.GenerateRequest_InputResponse{InputResponse: a}}); err != nil {
					t.Fatal(err)
				}
			}
		}
		if f := ev.GetToolCallFinished(); f != nil {
			output = f.GetOutput()
		}
	}
}

// TestElicitationThroughAgentd: X-M4 from the client's side. A server's
// elicitation during a tool call reaches the Generate client as an
// input_request naming the server and the tool call, with the message and
// the schema (form) or the URL (url); the answer goes back, completed
// with the schema's defaults. A client that answers nothing cancels the
// request; the DENY policy declines it without asking.
func TestElicitationThroughAgentd(t *testing.T) {
	t.Parallel()
	srv := mcptest.NewHTTP(t, mcptest.HTTPOptions{Mode: mcptest.Streamable})
	cfg := testConfig(t)
	cfg.Bridge.AllowPrivateNetworks = true
	conn, _ := apptest.Serve(t, app.Options{Config: cfg, Logger: slog.New(slog.DiscardHandler)})
	client := agentdv1.NewAgentServiceClient(conn)

	t.Run("form", func(t *testing.T) {
		content, _ := structpb.NewStruct(map[string]any{"name": "Grace"})
		reqs, out, callID := elicitRun(t, client, srv.URL, "form", agentdv1.ElicitationPolicy_ELICITATION_POLICY_UNSPECIFIED, func(*agentdv1.InputRequest) *agentdv1.InputResponse {
			return &agentdv1.InputResponse{Action: agentdv1.InputAction_INPUT_ACTION_ACCEPT, Content: content}
		})
		if len(reqs) != 1 {
			t.Fatalf("%d input requests, want 1", len(reqs))
		}
		r := reqs[0]
		if r.GetServerName() != "asker" || r.GetToolCallId() != callID || r.GetMode() != agentdv1.InputMode_INPUT_MODE_FORM ||
			r.GetMessage() != mcptest.ElicitForm.Message || r.GetRequestedSchema().GetFields()["properties"] == nil {
			t.Errorf("input request = %v, want asker's form for call %s", r, callID)
		}
		for _, want := range []string{`"action":"accept"`, `"name":"Grace"`, `"age":36`, `"color":"green"`} {
			if !strings.Contains(out, want) {
				t.Errorf("the server got %s, missing %s", out, want)
			}
		}
	})

	t.Run("url", func(t *testing.T) {
		reqs, out, _ := elicitRun(t, client, srv.URL, "url", agentdv1.ElicitationPolicy_ELICITATION_POLICY_ASK, func(*agentdv1.InputRequest) *agentdv1.InputResponse {
			return &agentdv1.InputResponse{Action: agentdv1.InputAction_INPUT_ACTION_ACCEPT}
		})
		if len(reqs) != 1 || reqs[0].GetMode() != agentdv1.InputMode_INPUT_MODE_URL || reqs[0].GetUrl() != mcptest.ElicitURL.URL ||
			reqs[0].GetElicitationId() != mcptest.ElicitURL.ElicitationID {
			t.Fatalf("input requests = %v, want the url one", reqs)
		}
		if !strings.Contains(out, `"action":"accept"`) {
			t.Errorf("the server got %s, want accept", out)
		}
	})

	t.Run("nobody answers", func(t *testing.T) {
		reqs, out, _ := elicitRun(t, client, srv.URL, "form", agentdv1.ElicitationPolicy_ELICITATION_POLICY_ASK, nil)
		if len(reqs) != 1 || !strings.Contains(out, `"action":"cancel"`) {
			t.Errorf("requests %d, the server got %s; want one request, cancelled", len(reqs), out)
		}
	})

	t.Run("deny", func(t *testing.T) {
		reqs, out, _ := elicitRun(t, client, srv.URL, "form", agentdv1.ElicitationPolicy_ELICITATION_POLICY_DENY, nil)
		if len(reqs) != 0 || !strings.Contains(out, `"action":"decline"`) {
			t.Errorf("requests %d, the server got %s; want none, declined", len(reqs), out)
		}
	})
}
