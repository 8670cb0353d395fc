package app_test

import (
	"errors"
	"io"
	"log/slog"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/agentd/agentd/internal/logtest"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/structpb"

	agentdv1 "github.com/agentd/agentd/gen/go/agentd/v1"
	"github.com/agentd/agentd/internal/app"
	"github.com/agentd/agentd/internal/app/apptest"
)

// scriptAgent is the script provider playing turns, with the function
// tool "lookup".
func scriptAgent(t *testing.T, turns ...any) *agentdv1.Agent {
	t.Helper()
	opts, err := structpb.NewStruct(map[string]any{"script": map[string]any{"turns": turns}})
	if err != nil {
		t.Fatal(err)
	}
	return &agentdv1.Agent{Provider: "script", Tools: []*agentdv1.FunctionTool{{Name: "lookup"}}, ProviderOptions: opts}
}

// runToEnd starts a generation of agent, half-closed at once, and returns
// its id once its stream has ended.
func runToEnd(t *testing.T, client agentdv1.AgentServiceClient, agent *agentdv1.Agent) string {
	t.Helper()
	stream, err := client.Generate(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	if err := stream.Send(&agentdv1.GenerateRequest{Kind: &agentdv1.GenerateRequest_Start{Start: &agentdv1.StartGeneration{
		Agent: agent, Messages: []*agentdv1.Message{{Role: agentdv1.Role_ROLE_USER, Parts: []*agentdv1.Part{textPart("hi")}}},
	}}}); err != nil {
		t.Fatal(err)
	}
	if err := stream.CloseSend(); err != nil {
		t.Fatal(err)
	}
	var id string
	for {
		ev, err := stream.Recv()
		if errors.Is(err, io.EOF) {
			return id
		}
		if err != nil {
			t.Fatalf("the generation ended with %v", err)
		}
		if s := ev.GetStarted(); s != nil {
			id = s.GetGenerationId()
		}
	}
}

// stateOf is generation id's state, or the code GetGeneration failed with.
func stateOf(t *testing.T, client agentdv1.AgentServiceClient, id string) (agentdv1.GenerationState, codes.Code) {
	t.Helper()
	res, err := client.GetGeneration(t.Context(), &agentdv1.GetGenerationRequest{GenerationId: id})
	return res.GetGeneration().GetState(), status.Code(err)
}

// X-G4: agentd sweeps the generations that finished longer ago than
// generation.retention, on its own, and keeps the live ones however old:
// a completed generation is gone (NOT_FOUND) once its retention has
// passed, while a paused one, started before it, is still there.
func TestRetentionSweepsFinishedGenerations(t *testing.T) {
	t.Parallel()
	cfg := testConfig(t)
	cfg.Generation.Retention = 300 * time.Millisecond
	var logs logtest.Logs
	conn, _ := apptest.Serve(t, app.Options{Config: cfg, Logger: slog.New(slog.NewTextHandler(&logs, &slog.HandlerOptions{Level: slog.LevelDebug}))})
	client := agentdv1.NewAgentServiceClient(conn)

	// It calls a function tool, and its client is gone: it pauses.
	paused := runToEnd(t, client, scriptAgent(t,
		map[string]any{"tool_calls": []any{map[string]any{"name": "lookup", "arguments": map[string]any{}}}},
		map[string]any{"text": "found"}))
	if st, code := stateOf(t, client, paused); st != agentdv1.GenerationState_GENERATION_STATE_PAUSED {
		t.Fatalf("the generation waiting for its function result: %v, %v; want paused", st, code)
	}
	completed := runToEnd(t, client, scriptAgent(t, map[string]any{"text": "done"}))
	if st, code := stateOf(t, client, completed); st != agentdv1.GenerationState_GENERATION_STATE_COMPLETED {
		t.Fatalf("the generation that answered: %v, %v; want completed", st, code)
	}

	tick := time.NewTicker(20 * time.Millisecond)
	defer tick.Stop()
	for {
		st, code := stateOf(t, client, completed)
		if code == codes.NotFound {
			break
		}
		if code != codes.OK || st != agentdv1.GenerationState_GENERATION_STATE_COMPLETED {
			t.Fatalf("the completed generation before its sweep: %v, %v", st, code)
		}
		select {
		case <-t.Context().Done():
			t.Fatal("the completed generation was never swept")
		case <-tick.C:
		}
	}
	// Swept once it had finished retention ago: the paused generation,
	// older still, is live and stays.
	if st, code := stateOf(t, client, paused); st != agentdv1.GenerationState_GENERATION_STATE_PAUSED {
		t.Errorf("the paused generation after the sweep: %v, %v; want still paused", st, code)
	}
	if !strings.Contains(logs.String(), "swept finished generations") {
		t.Errorf("the log does not say what was swept:\n%s", logs.String())
	}
}

// X-G4: a paused generation whose pause expired (generation.pause_ttl)
// before a resume ends: GetGeneration and ListGenerations show it
// cancelled, finished, with DEADLINE_EXCEEDED and why, nothing pending;
// an attached stream replays its log and ends with that status; a resume
// of it is FAILED_PRECONDITION saying it was cancelled because its pause
// expired (NOT_FOUND once it is swept); and it is swept once it finished
// generation.retention ago, like any finished generation.
func TestExpiredPauseIsCancelledThenSwept(t *testing.T) {
	t.Parallel()
	cfg := testConfig(t)
	cfg.Generation.PauseTTL = 300 * time.Millisecond
	cfg.Generation.Retention = time.Second
	var logs logtest.Logs
	conn, _ := apptest.Serve(t, app.Options{Config: cfg, Logger: slog.New(slog.NewTextHandler(&logs, nil))})
	client := agentdv1.NewAgentServiceClient(conn)

	// It calls a function tool, and its client is gone: it pauses.
	agent := scriptAgent(t,
		map[string]any{"tool_calls": []any{map[string]any{"name": "lookup", "arguments": map[string]any{}}}},
		map[string]any{"text": "found"})
	id := runToEnd(t, client, agent)

	// waitState polls GetGeneration until the generation is no longer in
	// one of the states from; it returns the generation, or nil once it
	// is not found.
	waitState := func(from ...agentdv1.GenerationState) *agentdv1.Generation {
		t.Helper()
		tick := time.NewTicker(20 * time.Millisecond)
		defer tick.Stop()
		for {
			res, err := client.GetGeneration(t.Context(), &agentdv1.GetGenerationRequest{GenerationId: id})
			switch {
			case status.Code(err) == codes.NotFound:
				return nil
			case err != nil:
				t.Fatalf("GetGeneration: %v", err)
			case !slices.Contains(from, res.GetGeneration().GetState()):
				return res.GetGeneration()
			}
			select {
			case <-t.Context().Done():
				t.Fatalf("the generation stayed %v", res.GetGeneration().GetState())
			case <-tick.C:
			}
		}
	}
	g := waitState(agentdv1.GenerationState_GENERATION_STATE_RUNNING, agentdv1.GenerationState_GENERATION_STATE_PAUSED)
	if g == nil {
		t.Fatal("the generation whose pause expired was swept before it was seen cancelled")
	}
	if g.GetState() != agentdv1.GenerationState_GENERATION_STATE_CANCELLED ||
		codes.Code(g.GetErrorCode()) != codes.DeadlineExceeded || !strings.Contains(g.GetErrorMessage(), "pause expired") ||
		g.GetFinishedAt() == nil || len(g.GetFunctionCalls()) != 0 || g.GetExpiresAt() != nil {
		t.Fatalf("the generation whose pause expired: %v; want cancelled, finished, DEADLINE_EXCEEDED saying the pause expired, nothing pending", g)
	}
	list, err := client.ListGenerations(t.Context(), &agentdv1.ListGenerationsRequest{
		States: []agentdv1.GenerationState{agentdv1.GenerationState_GENERATION_STATE_CANCELLED},
	})
	if err != nil || len(list.GetGenerations()) != 1 || list.GetGenerations()[0].GetGenerationId() != id {
		t.Errorf("ListGenerations of the cancelled: %v, %v; want %s", list, err, id)
	}

	stream, err := client.Generate(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	if err := stream.Send(&agentdv1.GenerateRequest{Kind: &agentdv1.GenerateRequest_Attach{Attach: &agentdv1.AttachGeneration{GenerationId: id}}}); err != nil {
		t.Fatal(err)
	}
	var last *agentdv1.GenerateResponse
	for {
		ev, err := stream.Recv()
		if err != nil {
			if status.Code(err) != codes.DeadlineExceeded || !strings.Contains(status.Convert(err).Message(), "pause expired") {
				t.Errorf("an attached stream ended with %v; want DEADLINE_EXCEEDED, the pause expired", err)
			}
			break
		}
		last = ev
	}
	if last.GetPaused() == nil {
		t.Errorf("an attached stream's last event: %v; want the pause", last)
	}

	stream, err = client.Generate(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	if err := stream.Send(&agentdv1.GenerateRequest{Kind: &agentdv1.GenerateRequest_Resume{Resume: &agentdv1.ResumeGeneration{GenerationId: id, Agent: agent}}}); err != nil {
		t.Fatal(err)
	}
	_, err = stream.Recv()
	switch st := status.Convert(err); {
	case st.Code() == codes.NotFound:
		// Swept meanwhile: GetGeneration does not find it either.
		if g, code := stateOf(t, client, id); code != codes.NotFound {
			t.Errorf("a resume of the expired pause: %v, though the generation is there, %v", err, g)
		}
	case st.Code() != codes.FailedPrecondition || !strings.Contains(st.Message(), "has ended, cancelled: the pause expired"):
		t.Errorf("a resume of the expired pause: %v; want FAILED_PRECONDITION, cancelled as the pause expired", err)
	}

	if g := waitState(agentdv1.GenerationState_GENERATION_STATE_CANCELLED); g != nil {
		t.Fatalf("the cancelled generation became %v", g)
	}
	if !strings.Contains(logs.String(), "cancelled paused generations whose pause expired") {
		t.Errorf("the log does not say what was cancelled:\n%s", logs.String())
	}
}
