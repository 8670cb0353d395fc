package app_test

import (
	"encoding/hex"
	"errors"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/durationpb"
	"google.golang.org/protobuf/types/known/structpb"

	agentdv1 "github.com/agentd/agentd/gen/go/agentd/v1"
	"github.com/agentd/agentd/internal/app"
	"github.com/agentd/agentd/internal/app/apptest"
	"github.com/agentd/agentd/internal/config"
	"github.com/agentd/agentd/internal/mcptest"
	"github.com/agentd/agentd/internal/oauthtest"
	"github.com/agentd/agentd/internal/testwait"
)

// waitingOn starts a generation of deleteAgent on client, on a stream
// that stays open at its approval request: the generation waits there,
// on this replica, and shows the request it waits for.
func waitingOn(t *testing.T, client agentdv1.AgentServiceClient) (agentdv1.AgentService_GenerateClient, string, *agentdv1.ApprovalRequest) {
	t.Helper()
	stream, id := startAndWait(t, client, deleteAgent(t))
	g, err := client.GetGeneration(t.Context(), &agentdv1.GetGenerationRequest{GenerationId: id})
	if err != nil || len(g.GetGeneration().GetApprovalRequests()) != 1 {
		t.Fatalf("GetGeneration of the waiting generation: %v, %v; want its approval request", g, err)
	}
	return stream, id, g.GetGeneration().GetApprovalRequests()[0]
}

// drain reads the stream to its end: the approval_decided events it
// sent, its final text, and how it ended.
func drain(t *testing.T, stream agentdv1.AgentService_GenerateClient) (decided []*agentdv1.ApprovalDecided, final string, err error) {
	t.Helper()
	for {
		ev, err := stream.Recv()
		if errors.Is(err, io.EOF) {
			return decided, final, nil
		}
		if err != nil {
			return decided, final, err
		}
		if d := ev.GetApprovalDecided(); d != nil {
			decided = append(decided, d)
		}
		if c := ev.GetCompleted(); c != nil {
			final = c.GetMessage().GetParts()[0].GetText()
		}
	}
}

// On both stores, two agentd replicas. A generation waits on
// a stream of replica A for an approval; it is decided on replica B, which
// does not run it: A takes the decision from the store (its pending
// request is listed on B), its stream shows it, and the call runs once.
// Decided on both replicas at once, exactly one decision is recorded,
// the other refused naming the first; the call runs as the winner
// decided.
func TestDecideAcrossReplicas(t *testing.T) {
	t.Parallel()
	for _, driver := range []string{config.StoreSQLite, config.StorePostgres} {
		t.Run(driver, func(t *testing.T) {
			t.Parallel()
			counter := filepath.Join(t.TempDir(), "calls")
			clients := twoReplicas(t, driver, counter)
			a, b := clients[0], clients[1]

			stream, id, req := waitingOn(t, a)
			inbox, err := b.ListPendingRequests(t.Context(), &agentdv1.ListPendingRequestsRequest{})
			if err != nil || len(inbox.GetRequests()) != 1 || inbox.GetRequests()[0].GetApproval().GetId() != req.GetId() {
				t.Fatalf("B's inbox: %v, %v; want A's waiting approval request", inbox.GetRequests(), err)
			}
			res, err := b.DecideRequests(t.Context(), &agentdv1.DecideRequestsRequest{GenerationId: id, ApprovalDecisions: []*agentdv1.ApprovalDecision{
				{RequestId: req.GetId(), Approved: true, Digest: req.GetDigest(), Reason: "from B"}}})
			if err != nil || len(res.GetDecisions()) != 1 {
				t.Fatalf("DecideRequests on B: %v, %v", res, err)
			}
			decided, final, err := drain(t, stream)
			if err != nil || final != "deleted draft.txt" || len(decided) != 1 || decided[0].GetReason() != "from B" || !decided[0].GetApproved() {
				t.Errorf("A's stream after B's decision: %v, %q, %v; want B's approval, then the call's result", err, final, decided)
			}
			if got := lines(t, counter); len(got) != 1 {
				t.Errorf("the MCP server saw %d calls; want 1", len(got))
			}

			decideOnBoth(t, a, b, counter)
		})
	}
}

// decideOnBoth has A approve and B decline one waiting request at once:
// exactly one is recorded, and the call runs as it decided.
func decideOnBoth(t *testing.T, a, b agentdv1.AgentServiceClient, counter string) {
	t.Helper()
	before := len(lines(t, counter))
	stream, id, req := waitingOn(t, a)
	var wg sync.WaitGroup
	codesOf := make([]codes.Code, 2)
	for i, c := range []agentdv1.AgentServiceClient{a, b} {
		wg.Go(func() {
			_, err := c.DecideRequests(t.Context(), &agentdv1.DecideRequestsRequest{GenerationId: id, ApprovalDecisions: []*agentdv1.ApprovalDecision{
				{RequestId: req.GetId(), Approved: i == 0, Reason: []string{"from A", "from B"}[i]}}})
			codesOf[i] = status.Code(err)
		})
	}
	wg.Wait()
	decided, _, err := drain(t, stream)
	if err != nil || len(decided) != 1 {
		t.Fatalf("the stream: %v, decided %v; want one decision", err, decided)
	}
	winner := map[string]int{"from A": 0, "from B": 1}[decided[0].GetReason()]
	if codesOf[winner] != codes.OK || codesOf[1-winner] != codes.FailedPrecondition {
		t.Errorf("decided on both at once: %v, and the stream took %q; want the one it took OK, the other FAILED_PRECONDITION", codesOf, decided[0].GetReason())
	}
	calls := len(lines(t, counter)) - before
	if want := map[bool]int{true: 1, false: 0}[decided[0].GetApproved()]; calls != want {
		t.Errorf("the call ran %d times after %q won; want %d", calls, decided[0].GetReason(), want)
	}
}

// elicitAgent calls elicit (form) on the MCP server at url, then answers
// with what it returned.
func elicitAgent(t *testing.T, url string) *agentdv1.Agent {
	t.Helper()
	opts, err := structpb.NewStruct(map[string]any{"script": map[string]any{"turns": []any{
		map[string]any{"tool_calls": []any{map[string]any{"name": "elicit", "arguments": map[string]any{"mode": "form"}}}},
		map[string]any{"text": "done: {{tool_outputs}}"},
	}}})
	if err != nil {
		t.Fatal(err)
	}
	return &agentdv1.Agent{Provider: "script", ProviderOptions: opts, McpCache: proto.Bool(false),
		Mcps: []*agentdv1.MCPServer{{Name: "asker", Transport: &agentdv1.MCPServer_Url{Url: url}}}}
}

// An MCP server's input request is decided through DecideRequests
// like an approval, and checked as a resume's answer is: while the
// generation waits for it on a stream (2025-11-25, in the server's
// session), the answer reaches the call that asked; once it paused
// (2026-07-28, in the call's result), the generation, whose record keeps
// its agent sealed, resumes with it. Either way the stream or the log
// shows who decided, and the server gets the answer.
func TestDecideInput(t *testing.T) {
	t.Parallel()
	for _, mode := range []mcptest.HTTPMode{mcptest.Streamable, mcptest.Stateless} {
		t.Run(mode.String(), func(t *testing.T) {
			t.Parallel()
			srv := mcptest.NewHTTP(t, mcptest.HTTPOptions{Mode: mode})
			cfg := testConfig(t)
			cfg.Bridge.AllowPrivateNetworks = true
			cfg.Store.EncryptionKeyFile = filepath.Join(t.TempDir(), "store.key")
			if err := os.WriteFile(cfg.Store.EncryptionKeyFile, []byte(hex.EncodeToString(randomBytes(t, 32))), 0o600); err != nil {
				t.Fatal(err)
			}
			conn, _ := apptest.Serve(t, app.Options{Config: cfg, Logger: slog.New(slog.DiscardHandler)})
			client := agentdv1.NewAgentServiceClient(conn)
			stream, err := client.Generate(t.Context())
			if err != nil {
				t.Fatal(err)
			}
			if err := stream.Send(&agentdv1.GenerateRequest{Kind: &agentdv1.GenerateRequest_Start{Start: &agentdv1.StartGeneration{
				Agent: elicitAgent(t, srv.URL), AnswerTimeout: durationpb.New(roomyAnswer),
				Messages: []*agentdv1.Message{{Role: agentdv1.Role_ROLE_USER, Parts: []*agentdv1.Part{textPart("go")}}},
			}}}); err != nil {
				t.Fatal(err)
			}
			id, req := inputRequested(t, stream, mode == mcptest.Stateless)
			decideInput(t, client, id, req)
			decided, final, err := drain(t, stream)
			if mode == mcptest.Stateless {
				// It paused: its resume runs detached, and the log has the rest.
				decided, final = followToEnd(t, client, id)
			}
			if err != nil || len(decided) != 1 || decided[0].GetKind() != agentdv1.PendingRequestKind_PENDING_REQUEST_KIND_INPUT ||
				decided[0].GetAction() != agentdv1.InputAction_INPUT_ACTION_ACCEPT {
				t.Fatalf("after the decision: %v, %v; want the input decided, accepted", err, decided)
			}
			for _, want := range []string{`"action":"accept"`, `"name":"Ada"`, `"color":"green"`} {
				if !strings.Contains(final, want) {
					t.Errorf("the final answer %q: the server did not get %s", final, want)
				}
			}
		})
	}
}

// inputRequested reads the stream to its input request: on the stream,
// or, when paused (the stream half-closed at the call's start), in its
// paused event.
func inputRequested(t *testing.T, stream agentdv1.AgentService_GenerateClient, paused bool) (string, *agentdv1.InputRequest) {
	t.Helper()
	if paused {
		_ = stream.CloseSend()
	}
	var id string
	for {
		ev, err := stream.Recv()
		if err != nil {
			t.Fatalf("before the input request: %v", err)
		}
		if s := ev.GetStarted(); s != nil {
			id = s.GetGenerationId()
		}
		if r := ev.GetInputRequest(); r != nil && !paused {
			return id, r
		}
		if p := ev.GetPaused(); p != nil && len(p.GetInputRequests()) == 1 {
			return id, p.GetInputRequests()[0]
		}
	}
}

// decideInput answers req through DecideRequests: a form its schema
// refuses first, which records nothing, then one it takes.
func decideInput(t *testing.T, client agentdv1.AgentServiceClient, id string, req *agentdv1.InputRequest) {
	t.Helper()
	g, err := client.GetGeneration(t.Context(), &agentdv1.GetGenerationRequest{GenerationId: id})
	if err != nil || len(g.GetGeneration().GetInputRequests()) != 1 {
		t.Fatalf("GetGeneration: %v, %v; want its input request", g, err)
	}
	answer := func(fields map[string]any) error {
		content, _ := structpb.NewStruct(fields)
		_, err := client.DecideRequests(t.Context(), &agentdv1.DecideRequestsRequest{GenerationId: id, InputResponses: []*agentdv1.InputResponse{
			{RequestId: req.GetId(), Action: agentdv1.InputAction_INPUT_ACTION_ACCEPT, Content: content}}})
		return err
	}
	if err := answer(map[string]any{"name": "Ada", "age": "old"}); status.Code(err) != codes.InvalidArgument {
		t.Errorf("an answer the schema refuses: %v; want INVALID_ARGUMENT", err)
	}
	if err := answer(map[string]any{"name": "Ada", "age": 36}); err != nil {
		t.Fatalf("DecideRequests: %v", err)
	}
}

// followToEnd attaches to generation id from its start until it ends, and
// returns its approval_decided events and its final text.
func followToEnd(t *testing.T, client agentdv1.AgentServiceClient, id string) ([]*agentdv1.ApprovalDecided, string) {
	t.Helper()
	for {
		stream, err := client.Generate(t.Context())
		if err != nil {
			t.Fatal(err)
		}
		if err := stream.Send(&agentdv1.GenerateRequest{Kind: &agentdv1.GenerateRequest_Attach{Attach: &agentdv1.AttachGeneration{GenerationId: id}}}); err != nil {
			t.Fatal(err)
		}
		decided, final, err := drain(t, stream)
		if err != nil {
			t.Fatalf("attached: %v", err)
		}
		if final != "" {
			return decided, final
		}
		// It ended paused: the resume had not begun. Follow again.
		g, err := client.GetGeneration(t.Context(), &agentdv1.GetGenerationRequest{GenerationId: id})
		if err != nil {
			t.Fatal(err)
		}
		if st := g.GetGeneration().GetState(); st != agentdv1.GenerationState_GENERATION_STATE_PAUSED && st != agentdv1.GenerationState_GENERATION_STATE_RUNNING && st != agentdv1.GenerationState_GENERATION_STATE_COMPLETED {
			t.Fatalf("the decided generation is %v", st)
		}
	}
}

// An authorization a paused generation waits for is decided
// through DecideRequests, and the generation, whose record keeps its agent
// sealed, resumes with the person's redirect. A redirect whose code the
// authorization server refuses (another state) fails that resume with
// nothing run: its decision is withdrawn, the generation is paused
// again, and the person's next answer resumes it.
func TestDecideAuthorization(t *testing.T) {
	t.Parallel()
	as := oauthtest.New(t, oauthtest.Options{ChallengeScope: true, OfflineAccess: true})
	conn, _ := apptest.Serve(t, app.Options{Config: pausingConfig(t), Logger: slog.New(slog.DiscardHandler)})
	client := agentdv1.NewAgentServiceClient(conn)
	agent := oauthAgent(t, as.MCPURL, &agentdv1.OAuthClient{ClientId: as.ClientID, ClientSecret: as.ClientSecret}, "echo")
	run := oauthGenerate(t, client, agent, "dana", nil)
	if run.err != nil || run.paused == nil || len(run.paused.GetAuthorizationRequests()) != 1 {
		t.Fatalf("nobody answers: err %v, paused %v; want a pause for one authorization", run.err, run.paused)
	}
	id, req := run.paused.GetGenerationId(), run.paused.GetAuthorizationRequests()[0]
	good := oauthAnswer(t, as, req)
	forged := &agentdv1.AuthorizationResponse{RequestId: req.GetId(), RedirectUrl: strings.Replace(good.GetRedirectUrl(), "state=", "state=x", 1)}
	decide := func(a *agentdv1.AuthorizationResponse) error {
		_, err := client.DecideRequests(t.Context(), &agentdv1.DecideRequestsRequest{GenerationId: id, AuthorizationResponses: []*agentdv1.AuthorizationResponse{a}})
		return err
	}
	if err := decide(forged); err != nil {
		t.Fatalf("DecideRequests with a forged redirect: %v (it is recorded, then refused when exchanged)", err)
	}
	testwait.For(t, "the forged redirect's resume fails and the decision is withdrawn", func() bool {
		found, err := client.ListPendingRequests(t.Context(), &agentdv1.ListPendingRequestsRequest{})
		return err == nil && len(found.GetRequests()) == 1 && found.GetRequests()[0].GetState() == agentdv1.GenerationState_GENERATION_STATE_PAUSED &&
			decide(good) == nil
	})
	decided, final := followToEnd(t, client, id)
	if !strings.Contains(final, "hi") {
		t.Errorf("the resumed generation ended with %q; want the tool's output", final)
	}
	if n := len(decided); n == 0 || decided[n-1].GetKind() != agentdv1.PendingRequestKind_PENDING_REQUEST_KIND_AUTHORIZATION {
		t.Errorf("approval_decided events %v; want the authorization's", decided)
	}
}
