package server_test

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/google/go-cmp/cmp"
	"google.golang.org/grpc/codes"

	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/durationpb"
	"google.golang.org/protobuf/types/known/timestamppb"

	bridgev1 "github.com/agentd/agentd/gen/go/agentd/bridge/v1"
	statev1 "github.com/agentd/agentd/gen/go/agentd/state/v1"
	agentdv1 "github.com/agentd/agentd/gen/go/agentd/v1"
	"github.com/agentd/agentd/internal/config"
	"github.com/agentd/agentd/internal/fault"
	"github.com/agentd/agentd/internal/sealer"
	"github.com/agentd/agentd/internal/store"
	"github.com/agentd/agentd/internal/store/pgtest"
	"github.com/agentd/agentd/internal/testwait"
	"github.com/agentd/agentd/providers"
	"github.com/agentd/agentd/server"
)

// pausable is an AgentService with a real store, so generations can
// pause and resume.
type pausable struct {
	client agentdv1.AgentServiceClient
	store  store.Store
}

// storeEnv picks the store of the package's tests: SQLite (unset), or
// "postgres", a new database on the PostgreSQL server that pgtest finds
// (make test runs this package's tests on both: every paused, durable
// and adopted generation's behaviour holds on either store, X-G1).
const storeEnv = "AGENTD_TEST_STORE"

// newStore opens a store of the test's own, sweeping every sweepEvery
// (0: never), closed when the test ends: SQLite in a directory of the
// test's own, or PostgreSQL (storeEnv).
func newStore(t *testing.T, sweepEvery time.Duration) store.Store {
	t.Helper()
	var st store.Store
	var err error
	if os.Getenv(storeEnv) == "postgres" {
		st, err = store.OpenPostgres(t.Context(), pgtest.DSN(t), sweepEvery)
	} else {
		st, err = store.OpenSQLite(filepath.Join(t.TempDir(), "agentd.db"), sweepEvery)
	}
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = st.Close() })
	return st
}

func newPausable(t *testing.T, bridge server.Bridge, edit func(*config.Generation), ps ...providers.Provider) *pausable {
	t.Helper()
	st := newStore(t, 0)
	reg, err := providers.NewRegistry(ps...)
	if err != nil {
		t.Fatal(err)
	}
	cfg := config.Default().Generation
	if edit != nil {
		edit(&cfg)
	}
	svc := server.New(server.Options{Providers: reg, Bridge: bridge, Config: cfg, Checkpoints: st, Generations: st.Generations(), Threads: st.Threads(), Replica: "replica-a"})
	return &pausable{client: agentdv1.NewAgentServiceClient(dial(t, svc.Register)), store: st}
}

// startUntilApproval starts a generation on a stream of its own and reads
// its events up to its first approval request. It returns the
// generation's id, and vanish, which drops the stream as a client that
// goes away does.
func startUntilApproval(t *testing.T, a *pausable, start *agentdv1.StartGeneration) (id string, vanish context.CancelFunc) {
	t.Helper()
	ctx, vanish := context.WithCancel(t.Context())
	s, err := a.client.Generate(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Send(&agentdv1.GenerateRequest{Kind: &agentdv1.GenerateRequest_Start{Start: start}}); err != nil {
		t.Fatal(err)
	}
	for {
		ev, err := s.Recv()
		if err != nil {
			t.Fatalf("stream ended before the approval request: %v", err)
		}
		if st := ev.GetStarted(); st != nil {
			id = st.GetGenerationId()
		}
		if ev.GetApprovalRequest() != nil {
			return id, vanish
		}
	}
}

// wantCheckpoint fails unless the store holds paused generation id. In a
// synctest bubble, call it after synctest.Wait: every goroutine of the
// generation has then done what it could (X-H6: a state, not a delay).
func wantCheckpoint(t *testing.T, a *pausable, id string) {
	t.Helper()
	if _, err := a.store.Get(t.Context(), "", id); err != nil {
		t.Fatalf("no checkpoint: the generation did not pause: %v", err)
	}
}

// signal notes an event on ch (capacity 1) without ever blocking: a fake
// reports that a call began, even if it begins again.
func signal(ch chan<- struct{}) {
	select {
	case ch <- struct{}{}:
	default:
	}
}

// awaitCall waits until a fake bridge signals that a resume's call runs;
// that resume, running on a goroutine of its own, reports its end on
// ended, which fails the test if it comes first.
func awaitCall(t *testing.T, called <-chan struct{}, ended <-chan codes.Code) {
	t.Helper()
	select {
	case <-called:
	case code := <-ended:
		t.Fatalf("the resume ended (%v) before it ran the approved call", code)
	}
}

// filesAgent calls read (ungated) and delete (gated) in one turn, then
// answers with the results it got.
func filesAgent(t *testing.T) *agentdv1.Agent {
	t.Helper()
	return &agentdv1.Agent{
		Provider:         "script",
		RequiresApproval: []string{"delete"},
		Mcps:             []*agentdv1.MCPServer{refServer("files", "files")},
		ProviderOptions: script(t, `{"turns": [
			{"tool_calls": [{"name": "read", "arguments": {"path": "a.txt"}}, {"name": "delete", "arguments": {"path": "a.txt"}}]},
			{"text": "done: {{tool_outputs}}"}
		]}`),
	}
}

func resumeRequest(id string, agent *agentdv1.Agent, decisions ...*agentdv1.ApprovalDecision) *agentdv1.GenerateRequest {
	return &agentdv1.GenerateRequest{Kind: &agentdv1.GenerateRequest_Resume{Resume: &agentdv1.ResumeGeneration{
		GenerationId: id, Agent: agent, ApprovalDecisions: decisions,
	}}}
}

func pausedEvent(t *testing.T, events []*agentdv1.GenerateResponse) *agentdv1.GenerationPaused {
	t.Helper()
	if len(events) == 0 || events[len(events)-1].GetPaused() == nil {
		t.Fatalf("events = %v; want the stream to end with paused", kinds(events))
	}
	return events[len(events)-1].GetPaused()
}

// R-A6: a client that half-closes while an approval is pending pauses the
// generation: the checkpoint is stored, the stream ends with the pending
// requests, the bridge session closes; the ungated call of the turn ran.
// X-H6: on synctest's clock, the pause expires exactly pause_ttl after it
// was made.
func TestPauseOnHalfClose(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		bridge := &fakeBridge{onList: offering(serverTools("files", "read", "delete"))}
		a := newPausable(t, bridge, nil, recordingScript())
		pausedAt := time.Now() // the fake clock stands still while the generation runs
		events, st := generate(t, a.client, &agentdv1.StartGeneration{Agent: filesAgent(t), Messages: userSays("tidy")}, nil)
		wantCode(t, st, codes.OK)
		paused := pausedEvent(t, events)
		if len(paused.GetApprovalRequests()) != 1 || paused.GetApprovalRequests()[0].GetToolName() != "delete" || len(paused.GetFunctionCalls()) != 0 {
			t.Errorf("paused = %v; want the delete approval pending", paused)
		}
		if paused.GetGenerationId() != started(t, events).GetGenerationId() {
			t.Error("paused names another generation")
		}
		expires := pausedAt.Add(config.Default().Generation.PauseTTL)
		if exp := paused.GetExpiresAt().AsTime(); !exp.Equal(expires) {
			t.Errorf("expires_at = %v; want %v, the default pause_ttl after the pause", exp, expires)
		}
		wantCounts(t, bridge, bridgeCounts{Open: 1, List: 1, Call: 1, Close: 1})
		if bridge.callsTo("delete") != 0 {
			t.Error("the gated call ran")
		}
		rec, err := a.store.Get(t.Context(), "", paused.GetGenerationId())
		if err != nil {
			t.Fatalf("the checkpoint is not stored: %v", err)
		}
		cp := &statev1.Checkpoint{}
		if err := proto.Unmarshal(rec.Data, cp); err != nil {
			t.Fatal(err)
		}
		if got := cp.GetTurn().GetStates()[0].GetResult().GetOutput(); got != "read ok" {
			t.Errorf("the ungated call's result %q is not in the checkpoint", got)
		}
		if got, want := cp.GetPausedAt().AsTime(), pausedAt; !got.Equal(want) {
			t.Errorf("the checkpoint's paused_at = %v; want %v", got, want)
		}
		if got := cp.GetExpiresAt().AsTime(); !got.Equal(expires) {
			t.Errorf("the checkpoint's expires_at = %v; want %v", got, expires)
		}
	})
}

// R-A6: a client that keeps its stream open but does not answer pauses
// the generation after exactly answer_timeout; with zero, at once. X-H6:
// the wait runs on synctest's clock, exact whatever the machine's load.
func TestPauseOnAnswerTimeout(t *testing.T) {
	t.Parallel()
	for _, timeout := range []time.Duration{0, 30 * time.Second} {
		t.Run(timeout.String(), func(t *testing.T) {
			t.Parallel()
			synctest.Test(t, func(t *testing.T) {
				bridge := &fakeBridge{onList: offering(serverTools("files", "read", "delete"))}
				a := newPausable(t, bridge, nil, recordingScript())
				start := &agentdv1.StartGeneration{Agent: filesAgent(t), Messages: userSays("tidy"), AnswerTimeout: durationpb.New(timeout)}
				began := time.Now()
				events, st := generate(t, a.client, start, func(*agentdv1.GenerateResponse, stream) {})
				wantCode(t, st, codes.OK)
				pausedEvent(t, events)
				if waited := time.Since(began); waited != timeout {
					t.Errorf("the generation paused after %v; want answer_timeout, %v", waited, timeout)
				}
			})
		})
	}
}

// R-A6, X-L5: a client that vanishes while an approval is pending leaves
// a paused generation that a later resume continues. X-H6: in a synctest
// bubble, synctest.Wait returns once the disconnect has gone through
// bufconn and the generation has paused.
func TestPauseOnDisconnect(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		bridge := &fakeBridge{onList: offering(serverTools("files", "read", "delete"))}
		a := newPausable(t, bridge, nil, recordingScript())
		id, vanish := startUntilApproval(t, a, &agentdv1.StartGeneration{Agent: filesAgent(t), Messages: userSays("tidy")})
		vanish()
		synctest.Wait()
		wantCheckpoint(t, a, id)
		events, st := run(t, a.client, resumeRequest(id, filesAgent(t), &agentdv1.ApprovalDecision{RequestId: "approval_call_1_2", Approved: true}), nil)
		wantCode(t, st, codes.OK)
		if kinds(events)[len(events)-1] != "completed" || bridge.callsTo("delete") != 1 {
			t.Errorf("resume after a disconnect: %v, delete ran %d times", kinds(events), bridge.callsTo("delete"))
		}
	})
}

// R-A8, R-A9: approved runs exactly once, results go to the model
// together in call order, and the same resume again finds nothing.
func TestResumeApproved(t *testing.T) {
	t.Parallel()
	bridge := &fakeBridge{onList: offering(serverTools("files", "read", "delete"))}
	prov := recordingScript()
	a := newPausable(t, bridge, nil, prov)
	events, _ := generate(t, a.client, &agentdv1.StartGeneration{Agent: filesAgent(t), Messages: userSays("tidy")}, nil)
	paused := pausedEvent(t, events)
	req := paused.GetApprovalRequests()[0]

	resume := resumeRequest(paused.GetGenerationId(), filesAgent(t), &agentdv1.ApprovalDecision{RequestId: req.GetId(), Approved: true, Digest: req.GetDigest()})
	events, st := run(t, a.client, resume, nil)
	wantCode(t, st, codes.OK)
	if got := kinds(events); got[0] != "started" || got[len(got)-1] != "completed" {
		t.Fatalf("resumed events = %v", got)
	}
	if !started(t, events).GetResumed() || started(t, events).GetGenerationId() != paused.GetGenerationId() {
		t.Errorf("started = %v; want the same generation, resumed", started(t, events))
	}
	if n := bridge.callsTo("delete"); n != 1 {
		t.Errorf("R-A8 delete ran %d times; want exactly once", n)
	}
	if n := bridge.callsTo("read"); n != 1 {
		t.Errorf("read ran %d times; the resume must reuse its stored result", n)
	}
	want := &agentdv1.Message{Role: agentdv1.Role_ROLE_TOOL, Parts: []*agentdv1.Part{
		resultPart("call_1_1", "read", "read ok", false),
		resultPart("call_1_2", "delete", "delete ok", false),
	}}
	if diff := protoDiff(want, toolResults(t, prov, len(prov.calls())-1)); diff != "" {
		t.Errorf("R-A9 results sent to the model, in call order (-want +got):\n%s", diff)
	}
	completed := events[len(events)-1].GetCompleted()
	if completed.GetToolTurns() != 1 || len(completed.GetMessages()) != 3 {
		t.Errorf("completed = %v; want the whole generation's messages and tool turns", completed)
	}
	// R-A8: the same resume again runs nothing, and says the generation
	// has completed.
	_, st = run(t, a.client, resume, nil)
	wantCode(t, st, codes.FailedPrecondition)
	wantFacts(t, "a repeated resume", st.Message(), paused.GetGenerationId(), "has ended, completed", "only a paused generation can be resumed")
	if info := errorInfo(st); info.GetReason() != "GENERATION_FINISHED" || info.GetMetadata()["state"] != "completed" {
		t.Errorf("a repeated resume's ErrorInfo = %v; want GENERATION_FINISHED, completed", info)
	}
	if n := bridge.callsTo("delete"); n != 1 {
		t.Errorf("a repeated resume ran delete again (%d)", n)
	}
}

// R-A7: a resume of the caller's own generation that is not paused says
// what it is instead, FailedPrecondition: failed, or running (waiting for
// its client's answers on its stream).
func TestResumeNotPaused(t *testing.T) {
	t.Parallel()
	bridge := &fakeBridge{onList: offering(serverTools("files", "read", "delete"))}
	down := failing(fault.New(fault.Unavailable, "the provider is down"))
	down.name = "plain"
	a := newPausable(t, bridge, nil, recordingScript(), down)
	events, st := generate(t, a.client, &agentdv1.StartGeneration{Agent: &agentdv1.Agent{Provider: "plain", Model: "m"}, Messages: userSays("hi")}, nil)
	wantCode(t, st, codes.Unavailable)
	failed := started(t, events).GetGenerationId()
	waiting, vanish := startUntilApproval(t, a, &agentdv1.StartGeneration{Agent: filesAgent(t), Messages: userSays("tidy")})
	defer vanish()
	for _, tc := range []struct {
		id, state, reason string
		saying            []string
	}{
		{failed, "failed", "GENERATION_FINISHED", []string{"has ended, failed", "GetGeneration"}},
		{waiting, "waiting", "GENERATION_RUNNING", []string{"is waiting, not paused", "attach"}},
	} {
		_, st := run(t, a.client, resumeRequest(tc.id, filesAgent(t), &agentdv1.ApprovalDecision{RequestId: "approval_call_1_2"}), nil)
		wantCode(t, st, codes.FailedPrecondition)
		wantFacts(t, "the resume of a generation "+tc.state, st.Message(), append(tc.saying, tc.id)...)
		if info := errorInfo(st); info.GetReason() != tc.reason || info.GetMetadata()["state"] != tc.state {
			t.Errorf("ErrorInfo = %v; want %s, %s", info, tc.reason, tc.state)
		}
	}
}

// R-A8: declined gets {"error":"declined by user"} without a call.
func TestResumeDeclined(t *testing.T) {
	t.Parallel()
	bridge := &fakeBridge{onList: offering(serverTools("files", "read", "delete"))}
	prov := recordingScript()
	a := newPausable(t, bridge, nil, prov)
	events, _ := generate(t, a.client, &agentdv1.StartGeneration{Agent: filesAgent(t), Messages: userSays("tidy")}, nil)
	paused := pausedEvent(t, events)
	_, st := run(t, a.client, resumeRequest(paused.GetGenerationId(), filesAgent(t), &agentdv1.ApprovalDecision{RequestId: "approval_call_1_2", Approved: false}), nil)
	wantCode(t, st, codes.OK)
	if bridge.callsTo("delete") != 0 {
		t.Error("a declined call ran")
	}
	got := toolResults(t, prov, len(prov.calls())-1).GetParts()[1].GetToolResult()
	if got.GetOutput() != `{"error":"declined by user"}` || !got.GetIsError() {
		t.Errorf("declined result = %v", got)
	}
}

// R-A8, X-A10: a paused MCP call whose tool is no longer offered by its
// server, or is now offered by another server, gets an error without a
// call.
func TestResumeToolGone(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name  string
		after []*bridgev1.ServerTools
	}{
		{"R-A8 the tool is gone", []*bridgev1.ServerTools{serverTools("files", "read"), serverTools("other")}},
		{"X-A10 another server now offers it", []*bridgev1.ServerTools{serverTools("files", "read"), serverTools("other", "delete")}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			var mu sync.Mutex
			lists := 0
			bridge := &fakeBridge{onList: func(context.Context) ([]*bridgev1.ServerTools, error) {
				mu.Lock()
				defer mu.Unlock()
				lists++
				if lists == 1 {
					return []*bridgev1.ServerTools{serverTools("files", "read", "delete"), serverTools("other")}, nil
				}
				return tc.after, nil
			}}
			prov := recordingScript()
			a := newPausable(t, bridge, nil, prov)
			agent := filesAgent(t)
			agent.Mcps = append(agent.Mcps, refServer("other", "other"))
			events, _ := generate(t, a.client, &agentdv1.StartGeneration{Agent: agent, Messages: userSays("tidy")}, nil)
			paused := pausedEvent(t, events)
			_, st := run(t, a.client, resumeRequest(paused.GetGenerationId(), agent, &agentdv1.ApprovalDecision{RequestId: "approval_call_1_2", Approved: true}), nil)
			wantCode(t, st, codes.OK)
			if n := bridge.callsTo("delete"); n != 0 {
				t.Errorf("delete was called %d times", n)
			}
			got := toolResults(t, prov, len(prov.calls())-1).GetParts()[1].GetToolResult()
			if got.GetOutput() != `{"error":"delete is no longer offered by its MCP server"}` || !got.GetIsError() {
				t.Errorf("result = %v", got)
			}
		})
	}
}

// R-A7: a resume is validated before anything runs: every request
// answered, no unknown ids, the same provider and model.
func TestResumeValidation(t *testing.T) {
	t.Parallel()
	bridge := &fakeBridge{onList: offering(serverTools("files", "read", "delete"))}
	a := newPausable(t, bridge, nil, recordingScript(), plainProvider())
	events, _ := generate(t, a.client, &agentdv1.StartGeneration{Agent: filesAgent(t), Messages: userSays("tidy")}, nil)
	id := pausedEvent(t, events).GetGenerationId()
	// The paused run's session closes after its stream ended.
	testwait.For(t, "the paused run's session closed", func() bool { return bridge.counts().Close == 1 })
	before := bridge.counts()
	other := filesAgent(t)
	other.Provider = "plain"
	for _, tc := range []struct {
		name    string
		req     *agentdv1.GenerateRequest
		code    codes.Code
		message string
	}{
		{"unknown generation", resumeRequest("gen_nope", filesAgent(t), &agentdv1.ApprovalDecision{RequestId: "approval_call_1_2"}), codes.NotFound, "gen_nope"},
		{"missing answer", resumeRequest(id, filesAgent(t)), codes.InvalidArgument, "missing answers for approval_call_1_2"},
		{"unknown id", resumeRequest(id, filesAgent(t), &agentdv1.ApprovalDecision{RequestId: "approval_call_1_2"}, &agentdv1.ApprovalDecision{RequestId: "approval_x"}), codes.InvalidArgument, "approval_x"},
		{"wrong digest", resumeRequest(id, filesAgent(t), &agentdv1.ApprovalDecision{RequestId: "approval_call_1_2", Digest: "00"}), codes.InvalidArgument, "digest"},
		{"other provider", resumeRequest(id, other, &agentdv1.ApprovalDecision{RequestId: "approval_call_1_2"}), codes.InvalidArgument, "cannot resume on plain"},
		{"no id", resumeRequest("", filesAgent(t), &agentdv1.ApprovalDecision{RequestId: "approval_call_1_2"}), codes.InvalidArgument, "resume.generation_id"},
		{"no agent, and a missing answer", resumeRequest(id, nil), codes.InvalidArgument, "missing answers for approval_call_1_2"},
	} {
		_, st := run(t, a.client, tc.req, nil)
		wantCode(t, st, tc.code)
		if !strings.Contains(st.Message(), tc.message) {
			t.Errorf("%s: %q does not mention %q", tc.name, st.Message(), tc.message)
		}
	}
	if diff := cmp.Diff(before, bridge.counts()); diff != "" {
		t.Errorf("R-A7 a refused resume touched the bridge (-before +after):\n%s", diff)
	}
	// The generation is still paused and resumes normally.
	_, st := run(t, a.client, resumeRequest(id, filesAgent(t), &agentdv1.ApprovalDecision{RequestId: "approval_call_1_2", Approved: true}), nil)
	wantCode(t, st, codes.OK)
}

// R-A8: of two concurrent resumes, one runs; the other gets a clear error.
func TestConcurrentResumes(t *testing.T) {
	t.Parallel()
	release := make(chan struct{})
	deleting := make(chan struct{}, 1)
	bridge := &fakeBridge{
		onList: offering(serverTools("files", "read", "delete")),
		onCall: func(_ context.Context, _, tool, _ string) (*bridgev1.CallToolResponse, error) {
			if tool == "delete" {
				signal(deleting)
				<-release
			}
			return &bridgev1.CallToolResponse{Output: tool + " ok"}, nil
		},
	}
	a := newPausable(t, bridge, nil, recordingScript())
	events, _ := generate(t, a.client, &agentdv1.StartGeneration{Agent: filesAgent(t), Messages: userSays("tidy")}, nil)
	id := pausedEvent(t, events).GetGenerationId()
	resume := resumeRequest(id, filesAgent(t), &agentdv1.ApprovalDecision{RequestId: "approval_call_1_2", Approved: true})
	first := make(chan codes.Code, 1)
	go func() {
		_, st := run(t, a.client, resume, nil)
		first <- st.Code()
	}()
	// X-H6: the second resume comes while the first runs delete, as the
	// fake bridge reports, however long the first took to get there.
	awaitCall(t, deleting, first)
	_, st := run(t, a.client, resume, nil)
	wantCode(t, st, codes.Aborted)
	close(release)
	if code := <-first; code != codes.OK {
		t.Errorf("the first resume ended with %v", code)
	}
	if n := bridge.callsTo("delete"); n != 1 {
		t.Errorf("delete ran %d times", n)
	}
}

// R-A9: the tool-turn budget carries across a pause: the resumed
// generation completes at max_tool_turns, the call past it not run.
func TestResumeKeepsToolTurnBudget(t *testing.T) {
	t.Parallel()
	bridge := &fakeBridge{onList: offering(serverTools("files", "read", "delete"))}
	a := newPausable(t, bridge, nil, recordingScript())
	agent := filesAgent(t)
	one := int32(1)
	agent.MaxToolTurns = &one
	agent.ProviderOptions = script(t, `{"turns": [
		{"tool_calls": [{"name": "delete", "arguments": {"path": "a.txt"}}]},
		{"tool_calls": [{"name": "read", "arguments": {"path": "b.txt"}}]},
		{"text": "never"}
	]}`)
	events, _ := generate(t, a.client, &agentdv1.StartGeneration{Agent: agent, Messages: userSays("tidy")}, nil)
	id := pausedEvent(t, events).GetGenerationId()
	events, st := run(t, a.client, resumeRequest(id, agent, &agentdv1.ApprovalDecision{RequestId: "approval_call_1_1", Approved: true}), nil)
	wantCode(t, st, codes.OK)
	done := events[len(events)-1].GetCompleted()
	if l := done.GetLimit(); l.GetName() != "max_tool_turns" || l.GetUsed() != 1 || l.GetValue() != 1 || done.GetToolTurns() != 1 {
		t.Errorf("completed = %v; want it at max_tool_turns, 1 of 1 used", done)
	}
	if n := bridge.callsTo("read"); n != 0 {
		t.Errorf("read ran %d times past the limit", n)
	}
}

// X-F1: a function call pauses like an approval, and the resume brings
// its result.
func TestPauseOnFunctionCall(t *testing.T) {
	t.Parallel()
	prov := recordingScript()
	a := newPausable(t, &fakeBridge{}, nil, prov)
	agent := &agentdv1.Agent{
		Provider: "script",
		Tools:    []*agentdv1.FunctionTool{{Name: "lookup"}},
		ProviderOptions: script(t, `{"turns": [
			{"tool_calls": [{"name": "lookup", "arguments": {"q": "x"}}]},
			{"text": "got {{tool_outputs}}"}
		]}`),
	}
	events, _ := generate(t, a.client, &agentdv1.StartGeneration{Agent: agent, Messages: userSays("go")}, nil)
	paused := pausedEvent(t, events)
	if len(paused.GetFunctionCalls()) != 1 || paused.GetFunctionCalls()[0].GetCallId() != "call_1_1" {
		t.Fatalf("paused = %v", paused)
	}
	resume := &agentdv1.GenerateRequest{Kind: &agentdv1.GenerateRequest_Resume{Resume: &agentdv1.ResumeGeneration{
		GenerationId: paused.GetGenerationId(), Agent: agent,
		FunctionResults: []*agentdv1.FunctionResult{{CallId: "call_1_1", Output: "42"}},
	}}}
	events, st := run(t, a.client, resume, nil)
	wantCode(t, st, codes.OK)
	final := events[len(events)-1].GetCompleted().GetMessage().GetParts()[0].GetText()
	if final != "got 42" {
		t.Errorf("final text = %q", final)
	}
}

// A resume that died after claiming is taken over once its claim is
// older than resume_stale_after, not before; the calls it approved are
// reported as of unknown outcome, never run twice. X-H6: on synctest's
// clock the claim's age is exact.
func TestStaleClaimTakeover(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		bridge := &fakeBridge{onList: offering(serverTools("files", "read", "delete"))}
		prov := recordingScript()
		a := newPausable(t, bridge, nil, prov)
		stale := config.Default().Generation.ResumeStaleAfter
		events, _ := generate(t, a.client, &agentdv1.StartGeneration{Agent: filesAgent(t), Messages: userSays("tidy")}, nil)
		id := pausedEvent(t, events).GetGenerationId()
		deadClaim(t, a, id, time.Now())
		resume := resumeRequest(id, filesAgent(t), &agentdv1.ApprovalDecision{RequestId: "approval_call_1_2", Approved: true})

		// A millisecond short of resume_stale_after, the claim may be live.
		time.Sleep(stale - time.Millisecond)
		_, st := run(t, a.client, resume, nil)
		wantCode(t, st, codes.Aborted)
		// A millisecond past it, the resume that made it is presumed dead.
		time.Sleep(2 * time.Millisecond)
		_, st = run(t, a.client, resume, nil)
		wantCode(t, st, codes.OK)
		if n := bridge.callsTo("delete"); n != 0 {
			t.Errorf("delete ran %d times after a takeover; it may already have run", n)
		}
		got := toolResults(t, prov, len(prov.calls())-1).GetParts()[1].GetToolResult()
		if !got.GetIsError() || !strings.Contains(got.GetOutput(), "may have run") {
			t.Errorf("result = %v", got)
		}
	})
}

// Paused generations expire exactly pause_ttl after they paused: a resume
// a millisecond before is heard (here refused for a missing answer, which
// leaves the pause as it was), one at the expiry is told the pause
// expired, and runs nothing. X-H6: the times are synctest's, exact.
func TestPausedGenerationExpires(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		bridge := &fakeBridge{onList: offering(serverTools("files", "read", "delete"))}
		a := newPausable(t, bridge, func(g *config.Generation) { g.PauseTTL = time.Hour }, recordingScript())
		pausedAt := time.Now()
		events, _ := generate(t, a.client, &agentdv1.StartGeneration{Agent: filesAgent(t), Messages: userSays("tidy")}, nil)
		paused := pausedEvent(t, events)
		if exp := paused.GetExpiresAt().AsTime(); !exp.Equal(pausedAt.Add(time.Hour)) {
			t.Fatalf("expires_at = %v; want an hour after the pause, %v", exp, pausedAt.Add(time.Hour))
		}
		id := paused.GetGenerationId()

		time.Sleep(time.Hour - time.Millisecond)
		_, st := run(t, a.client, resumeRequest(id, filesAgent(t)), nil)
		wantCode(t, st, codes.InvalidArgument)
		time.Sleep(time.Millisecond)
		_, st = run(t, a.client, resumeRequest(id, filesAgent(t), &agentdv1.ApprovalDecision{RequestId: "approval_call_1_2", Approved: true}), nil)
		wantCode(t, st, codes.FailedPrecondition)
		wantFacts(t, "a resume at the expiry", st.Message(), "expired (generation.pause_ttl)")
		if n := bridge.callsTo("delete"); n != 0 {
			t.Errorf("delete ran %d times", n)
		}
	})
}

// deadClaim records, as a resume that then died would have, a claim made
// at claimedAt that approved delete.
func deadClaim(t *testing.T, a *pausable, id string, claimedAt time.Time) {
	t.Helper()
	rec, err := a.store.Get(t.Context(), "", id)
	if err != nil {
		t.Fatal(err)
	}
	cp := &statev1.Checkpoint{}
	if err := proto.Unmarshal(rec.Data, cp); err != nil {
		t.Fatal(err)
	}
	cp.Claim = &statev1.Claim{ApprovalDecisions: []*agentdv1.ApprovalDecision{{RequestId: "approval_call_1_2", Approved: true}}, ClaimedAt: timestamppb.New(claimedAt)}
	data, _ := proto.Marshal(cp)
	if err := a.store.Claim(t.Context(), "", id, rec.Version, data, claimedAt, claimedAt); err != nil {
		t.Fatal(err)
	}
}

// A takeover that fails before running anything gives the generation back
// with what the dead resume approved still marked as possibly run: the
// next resume does not run it either.
func TestFailedTakeoverKeepsInterrupted(t *testing.T) {
	t.Parallel()
	var opens atomic.Int32
	bridge := &fakeBridge{
		onList: offering(serverTools("files", "read", "delete")),
		onOpen: func(context.Context, *bridgev1.OpenSessionRequest) error {
			if opens.Add(1) == 2 { // the takeover's session
				return fault.New(fault.Unavailable, "bridge restarting")
			}
			return nil
		},
	}
	prov := recordingScript()
	a := newPausable(t, bridge, func(g *config.Generation) { g.ResumeStaleAfter = time.Minute }, prov)
	events, _ := generate(t, a.client, &agentdv1.StartGeneration{Agent: filesAgent(t), Messages: userSays("tidy")}, nil)
	id := pausedEvent(t, events).GetGenerationId()
	deadClaim(t, a, id, time.Now().Add(-time.Hour)) // stale: resume_stale_after is a minute
	approve := &agentdv1.ApprovalDecision{RequestId: "approval_call_1_2", Approved: true}

	_, st := run(t, a.client, resumeRequest(id, filesAgent(t), approve), nil)
	wantCode(t, st, codes.Unavailable)
	_, st = run(t, a.client, resumeRequest(id, filesAgent(t), approve), nil)
	wantCode(t, st, codes.OK)
	if n := bridge.callsTo("delete"); n != 0 {
		t.Errorf("delete ran %d times; the dead resume may already have run it", n)
	}
	got := toolResults(t, prov, len(prov.calls())-1).GetParts()[1].GetToolResult()
	if !got.GetIsError() || !strings.Contains(got.GetOutput(), "may have run") {
		t.Errorf("result = %v", got)
	}
}

// A resumed generation that fails after it went past its paused turn is
// over: replaying it would repeat the calls made since. A resume then
// says it failed, and why.
func TestResumeFailsAfterProgress(t *testing.T) {
	t.Parallel()
	bridge := &fakeBridge{onList: offering(serverTools("files", "read", "delete", "write"))}
	a := newPausable(t, bridge, nil, recordingScript())
	agent := filesAgent(t)
	agent.ProviderOptions = script(t, `{"turns": [
		{"tool_calls": [{"name": "read", "arguments": {"path": "a.txt"}}, {"name": "delete", "arguments": {"path": "a.txt"}}]},
		{"tool_calls": [{"name": "write", "arguments": {"path": "log.txt"}}]},
		{"error": {"kind": "unavailable", "message": "overloaded"}}
	]}`)
	events, _ := generate(t, a.client, &agentdv1.StartGeneration{Agent: agent, Messages: userSays("tidy")}, nil)
	id := pausedEvent(t, events).GetGenerationId()
	decline := &agentdv1.ApprovalDecision{RequestId: "approval_call_1_2", Approved: false}

	_, st := run(t, a.client, resumeRequest(id, agent, decline), nil)
	wantCode(t, st, codes.Unavailable)
	_, st = run(t, a.client, resumeRequest(id, agent, decline), nil)
	wantCode(t, st, codes.FailedPrecondition)
	wantFacts(t, "a resume of the failed generation", st.Message(), "has ended, failed: script provider: overloaded")
	if n := bridge.callsTo("write"); n != 1 {
		t.Errorf("write ran %d times; want once", n)
	}
}

// A live resume keeps its claim: it renews it every third of
// resume_stale_after, so a second resume while the first still runs an
// approved call, longer than resume_stale_after, is refused, and the call
// runs once. X-H6: on synctest's clock the renewals come at exact times.
func TestLiveClaimIsKept(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		bridge, deleting, release := holdingDelete()
		const stale = 90 * time.Second // renewed every 30s
		a := newPausable(t, bridge, func(g *config.Generation) { g.ResumeStaleAfter = stale }, recordingScript())
		events, _ := generate(t, a.client, &agentdv1.StartGeneration{Agent: filesAgent(t), Messages: userSays("tidy")}, nil)
		id := pausedEvent(t, events).GetGenerationId()
		approve := &agentdv1.ApprovalDecision{RequestId: "approval_call_1_2", Approved: true}

		claimed := time.Now()
		first := make(chan codes.Code, 1)
		go func() {
			_, st := run(t, a.client, resumeRequest(id, filesAgent(t), approve), nil)
			first <- st.Code()
		}()
		awaitCall(t, deleting, first)
		time.Sleep(stale + 10*time.Second) // only renewal keeps the claim now
		rec, err := a.store.Get(t.Context(), "", id)
		if err != nil {
			t.Fatal(err)
		}
		if want := claimed.Add(stale); !rec.Claimed || !rec.ClaimedAt.Equal(want) {
			t.Errorf("claim = %v at %v; want renewed last at %v (claimed at %v, every %v)", rec.Claimed, rec.ClaimedAt, want, claimed, stale/3)
		}

		_, st := run(t, a.client, resumeRequest(id, filesAgent(t), approve), nil)
		wantCode(t, st, codes.Aborted)
		close(release)
		if code := <-first; code != codes.OK {
			t.Errorf("the first resume ended %v; want OK", code)
		}
		if n := bridge.callsTo("delete"); n != 1 {
			t.Errorf("delete ran %d times; want once", n)
		}
	})
}

// R-A6: a generation that decided to pause (its client did not answer in
// time) while an ungated call of the turn still runs still pauses, with
// that call's result, when the client vanishes before the call finishes.
// X-H6: each step waits, with synctest.Wait, for the state the previous
// one leads to, not for a while.
func TestPauseSurvivesDisconnectWhileCallsFinish(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		release := make(chan struct{})
		reading := make(chan struct{}, 1)
		bridge := &fakeBridge{
			onList: offering(serverTools("files", "read", "delete")),
			onCall: func(_ context.Context, _, tool, _ string) (*bridgev1.CallToolResponse, error) {
				if tool == "read" {
					reading <- struct{}{}
					<-release
				}
				return &bridgev1.CallToolResponse{Output: tool + " ok"}, nil
			},
		}
		prov := recordingScript()
		a := newPausable(t, bridge, nil, prov)
		id, vanish := startUntilApproval(t, a, &agentdv1.StartGeneration{Agent: filesAgent(t), Messages: userSays("tidy"), AnswerTimeout: durationpb.New(0)})
		<-reading
		// With answer_timeout zero the generation decides to pause and
		// waits for read; the client vanishes meanwhile.
		synctest.Wait()
		vanish()
		synctest.Wait()
		close(release)
		synctest.Wait()
		wantCheckpoint(t, a, id)
		_, st := run(t, a.client, resumeRequest(id, filesAgent(t), &agentdv1.ApprovalDecision{RequestId: "approval_call_1_2", Approved: true}), nil)
		wantCode(t, st, codes.OK)
		if r, d := bridge.callsTo("read"), bridge.callsTo("delete"); r != 1 || d != 1 {
			t.Errorf("read ran %d times, delete %d; want once each", r, d)
		}
		got := toolResults(t, prov, len(prov.calls())-1).GetParts()[0].GetToolResult()
		if got.GetOutput() != "read ok" {
			t.Errorf("read's result after the resume = %v", got)
		}
	})
}

// A resume that starts a millisecond before pause_ttl ends runs to its
// end: the store's sweeper keeps a claimed record its resume still renews.
// X-H6: on synctest's clock the resume starts exactly then, and runs ten
// minutes, ten sweeps, past the expiry.
func TestResumeAcrossExpiry(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		bridge, deleting, release := holdingDelete()
		st := newStore(t, time.Minute) // as agentd sweeps
		reg, _ := providers.NewRegistry(recordingScript())
		cfg := config.Default().Generation
		cfg.PauseTTL = time.Hour
		cfg.ResumeStaleAfter = 90 * time.Second
		svc := server.New(server.Options{Providers: reg, Bridge: bridge, Config: cfg, Checkpoints: st})
		client := agentdv1.NewAgentServiceClient(dial(t, svc.Register))

		events, _ := generate(t, client, &agentdv1.StartGeneration{Agent: filesAgent(t), Messages: userSays("tidy")}, nil)
		paused := pausedEvent(t, events)
		time.Sleep(time.Until(paused.GetExpiresAt().AsTime()) - time.Millisecond)
		first := make(chan codes.Code, 1)
		go func() {
			_, s := run(t, client, resumeRequest(paused.GetGenerationId(), filesAgent(t), &agentdv1.ApprovalDecision{RequestId: "approval_call_1_2", Approved: true}), nil)
			first <- s.Code()
		}()
		awaitCall(t, deleting, first)
		time.Sleep(10 * time.Minute)
		close(release)
		if code := <-first; code != codes.OK {
			t.Errorf("the resume that ran past the pause's expiry ended %v; want OK", code)
		}
	})
}

// holdingDelete is a bridge offering files' read and delete whose delete
// calls signal deleting, then hold until release closes (or the call is
// cancelled): a resume can be caught while it runs an approved call.
func holdingDelete() (bridge *fakeBridge, deleting chan struct{}, release chan struct{}) {
	release = make(chan struct{})
	deleting = make(chan struct{}, 1)
	bridge = &fakeBridge{
		onList: offering(serverTools("files", "read", "delete")),
		onCall: func(ctx context.Context, _, tool, _ string) (*bridgev1.CallToolResponse, error) {
			if tool == "delete" {
				signal(deleting)
				select {
				case <-release:
				case <-ctx.Done():
				}
			}
			return &bridgev1.CallToolResponse{Output: tool + " ok"}, nil
		},
	}
	return bridge, deleting, release
}

// envSecretAgent is filesAgent with its server a command whose env holds a
// secret, which agentd stores only sealed.
func envSecretAgent(t *testing.T) *agentdv1.Agent {
	t.Helper()
	agent := filesAgent(t)
	files := commandServer("files", "files-server")
	files.Env = map[string]string{"TOKEN": "cnry-resume-secret"}
	agent.Mcps = []*agentdv1.MCPServer{files}
	return agent
}

// R-A7, X-G3: a resume may leave the agent out when the generation's
// record keeps it whole: sealed under store.encryption_key_file, secrets
// and all, or, without a key, when it declared no secret. It then runs
// with the agent it started with, secrets included, and the record drops
// the agent once the generation ends. Otherwise resume.agent is required,
// InvalidArgument saying why (its secrets were not stored; it is sealed
// under a key this agentd lacks; no record is kept), and the pause stays
// as it was: a resume that gives the agent goes on.
func TestResumeWithoutAgent(t *testing.T) {
	t.Parallel()
	approve := &agentdv1.ApprovalDecision{RequestId: "approval_call_1_2", Approved: true}
	for _, tc := range []struct {
		name         string
		agent        func(*testing.T) *agentdv1.Agent
		key, resumer *sealer.Keyring
		noRecord     bool
		facts        []string // of the refusal; none: the resume runs
	}{
		{name: "R-A7 no key, no secret", agent: filesAgent},
		{name: "X-G3 a key, a secret", agent: envSecretAgent, key: keyring(t, 1), resumer: keyring(t, 1)},
		{name: "X-G3 a rotated key", agent: envSecretAgent, key: keyring(t, 1), resumer: keyring(t, 2, 1)},
		{name: "X-G3 no key, a secret", agent: envSecretAgent, facts: []string{"declared secrets", "store.encryption_key_file", "give the agent again"}},
		{name: "X-G3 sealed under a key the resuming agentd lacks", agent: envSecretAgent, key: keyring(t, 1),
			facts: []string{"sealed under the encryption key " + keyring(t, 1).ID(), "has none"}},
		{name: "R-A7 no record of generations", agent: filesAgent, noRecord: true, facts: []string{"keeps no record"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			st := newStore(t, 0)
			var gens store.Generations
			if !tc.noRecord {
				gens = st.Generations()
			}
			bridge := &fakeBridge{onList: offering(serverTools("files", "read", "delete"))}
			starter := sealingReplica(t, "replica-a", st, gens, bridge, tc.key, recordingScript())
			resumer := sealingReplica(t, "replica-b", st, gens, bridge, tc.resumer, recordingScript())
			events, _ := generate(t, starter, &agentdv1.StartGeneration{Agent: tc.agent(t), Messages: userSays("tidy")}, nil)
			id := pausedEvent(t, events).GetGenerationId()

			events, status := run(t, resumer, resumeRequest(id, nil, approve), nil)
			if len(tc.facts) > 0 {
				wantCode(t, status, codes.InvalidArgument)
				wantFacts(t, "resume.agent", description(t, status, "resume.agent"), tc.facts...)
				events, status = run(t, resumer, resumeRequest(id, tc.agent(t), approve), nil)
			}
			wantCode(t, status, codes.OK)
			if kinds(events)[len(events)-1] != "completed" || bridge.callsTo("delete") != 1 {
				t.Fatalf("the resume: %v, delete ran %d times", kinds(events), bridge.callsTo("delete"))
			}
			opens := bridge.openRequests()
			if diff := protoDiff(opens[0].GetServers(), opens[len(opens)-1].GetServers()); diff != "" {
				t.Errorf("the resumed session's servers are not those of the start (-start +resume):\n%s", diff)
			}
			if gens != nil {
				if agent, err := gens.Agent(t.Context(), "", id); err != nil || len(agent) != 0 {
					t.Errorf("the record of the ended generation keeps its agent: %d bytes, %v", len(agent), err)
				}
			}
		})
	}
}
