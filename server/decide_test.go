package server_test

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/testing/protocmp"

	agentdv1 "github.com/agentd/agentd/gen/go/agentd/v1"
	"github.com/agentd/agentd/internal/auth"
	"github.com/agentd/agentd/internal/config"
	"github.com/agentd/agentd/internal/logtest"
	agentdrecord "github.com/agentd/agentd/internal/record"
	"github.com/agentd/agentd/internal/sealer"
	"github.com/agentd/agentd/internal/store"
	"github.com/agentd/agentd/internal/testwait"
	"github.com/agentd/agentd/providers"
	"github.com/agentd/agentd/server"
)

// The callers of a deciding service: alice starts generations (generate),
// bob only decides and reads them (approve), both of tenant acme; eve
// is of another tenant.
const (
	alice = "sk-alice"
	bob   = "sk-bob"
	eve   = "sk-eve"
)

// deciding is an AgentService with a store, behind authentication.
type deciding struct {
	client agentdv1.AgentServiceClient
	store  store.Store
	log    *logtest.Logs
}

// newDeciding serves an AgentService on a store of its own, with the
// callers alice, bob and eve, sealing with key (nil: none).
func newDeciding(t *testing.T, bridge server.Bridge, key *sealer.Keyring, ps ...providers.Provider) *deciding {
	t.Helper()
	st := newStore(t, 0)
	return decidingReplica(t, st, "replica-a", bridge, key, ps...)
}

// decidingReplica serves an AgentService, as replica name, on st.
func decidingReplica(t *testing.T, st store.Store, name string, bridge server.Bridge, key *sealer.Keyring, ps ...providers.Provider) *deciding {
	t.Helper()
	return servedReplica(t, st, name, bridge, key, nil, ps...)
}

// servedReplica is decidingReplica with its configuration edited by edit
// (nil: the default) and, when edit is not nil, its adopter started.
func servedReplica(t *testing.T, st store.Store, name string, bridge server.Bridge, key *sealer.Keyring, edit func(*config.Generation), ps ...providers.Provider) *deciding {
	t.Helper()
	authn, err := auth.New(config.Config{Auth: config.Auth{APIKeys: []config.APIKey{
		{Name: "alice", SHA256: auth.HashKey(alice), Tenant: "acme", Roles: []string{auth.RoleGenerate}},
		{Name: "bob", SHA256: auth.HashKey(bob), Tenant: "acme", Roles: []string{auth.RoleApprove}},
		{Name: "eve", SHA256: auth.HashKey(eve), Tenant: "globex", Roles: []string{auth.RoleGenerate}},
	}}}, slog.New(slog.DiscardHandler))
	if err != nil {
		t.Fatal(err)
	}
	reg, err := providers.NewRegistry(ps...)
	if err != nil {
		t.Fatal(err)
	}
	log := &logtest.Logs{}
	cfg := config.Default().Generation
	if edit != nil {
		edit(&cfg)
	}
	svc := server.New(server.Options{Providers: reg, Bridge: bridge, Config: cfg, Checkpoints: st, Generations: st.Generations(), Threads: st.Threads(),
		Replica: name, Sealer: key, Logger: slog.New(slog.NewTextHandler(log, nil))})
	if edit != nil {
		svc.StartAdopter()
	}
	conn := dial(t, svc.Register, grpc.ChainUnaryInterceptor(authn.UnaryInterceptor()), grpc.ChainStreamInterceptor(authn.StreamInterceptor()))
	t.Cleanup(svc.Close) // before the connection closes: cleanups run last first
	return &deciding{client: agentdv1.NewAgentServiceClient(conn), store: st, log: log}
}

// as is the test's context, calling with key.
func as(t *testing.T, key string) context.Context {
	return metadata.AppendToOutgoingContext(t.Context(), "authorization", "Bearer "+key)
}

// liveStream is a Generate stream whose events a test reads as they
// come.
type liveStream struct {
	s      grpc.BidiStreamingClient[agentdv1.GenerateRequest, agentdv1.GenerateResponse]
	events chan *agentdv1.GenerateResponse
	end    chan *status.Status
	seen   []*agentdv1.GenerateResponse
}

// start starts a generation on a stream of key's.
func (d *deciding) start(t *testing.T, key string, start *agentdv1.StartGeneration) *liveStream {
	t.Helper()
	s, err := d.client.Generate(as(t, key))
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Send(&agentdv1.GenerateRequest{Kind: &agentdv1.GenerateRequest_Start{Start: start}}); err != nil {
		t.Fatal(err)
	}
	l := &liveStream{s: s, events: make(chan *agentdv1.GenerateResponse, 256), end: make(chan *status.Status, 1)}
	go func() {
		for {
			ev, err := s.Recv()
			if err != nil {
				close(l.events)
				if errors.Is(err, io.EOF) {
					err = nil
				}
				l.end <- status.Convert(err)
				return
			}
			l.events <- ev
		}
	}()
	return l
}

// next reads events until one that match accepts, and returns it.
func (l *liveStream) next(t *testing.T, what string, match func(*agentdv1.GenerateResponse) bool) *agentdv1.GenerateResponse {
	t.Helper()
	for ev := range l.events {
		l.seen = append(l.seen, ev)
		if match(ev) {
			return ev
		}
	}
	t.Fatalf("the stream ended (%v) before %s; it sent %v", <-l.end, what, kinds(l.seen))
	return nil
}

// rest reads the events left and how the stream ended; all is every
// event the stream sent.
func (l *liveStream) rest(t *testing.T) (all []*agentdv1.GenerateResponse, st *status.Status) {
	t.Helper()
	for ev := range l.events {
		l.seen = append(l.seen, ev)
	}
	return l.seen, <-l.end
}

// id is the generation's id, from its started event.
func (l *liveStream) id(t *testing.T) string {
	t.Helper()
	return started(t, l.seen).GetGenerationId()
}

func isApprovalRequest(ev *agentdv1.GenerateResponse) bool { return ev.GetApprovalRequest() != nil }
func isDecided(ev *agentdv1.GenerateResponse) bool         { return ev.GetApprovalDecided() != nil }

// pausedFor runs a generation of alice's whose stream half-closes at its
// first approval request: it pauses. It returns the paused event.
func (d *deciding) pausedFor(t *testing.T, start *agentdv1.StartGeneration) *agentdv1.GenerationPaused {
	t.Helper()
	l := d.start(t, alice, start)
	l.next(t, "an approval request or a function call", func(ev *agentdv1.GenerateResponse) bool {
		return ev.GetApprovalRequest() != nil || ev.GetFunctionCall() != nil
	})
	if err := l.s.CloseSend(); err != nil {
		t.Fatal(err)
	}
	events, st := l.rest(t)
	wantCode(t, st, codes.OK)
	return pausedEvent(t, events)
}

// decide calls DecideRequests as key.
func (d *deciding) decide(t *testing.T, key, id string, decisions ...*agentdv1.ApprovalDecision) (*agentdv1.DecideRequestsResponse, *status.Status) {
	t.Helper()
	res, err := d.client.DecideRequests(as(t, key), &agentdv1.DecideRequestsRequest{GenerationId: id, ApprovalDecisions: decisions})
	return res, status.Convert(err)
}

// waitState waits until acme's generation id's record is in state want
// (released, for a state that is not live).
func (d *deciding) waitState(t *testing.T, id string, want store.State) {
	t.Helper()
	testwait.For(t, "the generation is "+string(want), func() bool {
		g, err := d.store.Generations().Get(t.Context(), "acme", id)
		return err == nil && g.State == want && (want == store.Waiting || want == store.Running || g.Lease.Owner == "")
	})
}

// logged is acme's generation id's event log.
func (d *deciding) logged(t *testing.T, id string) []*agentdv1.GenerateResponse {
	t.Helper()
	evs, err := agentdrecord.ReadEvents(t.Context(), d.store.Generations(), "acme", id, 0)
	if err != nil {
		t.Fatal(err)
	}
	return evs
}

// decidedEvents are the approval_decided events among events.
func decidedEvents(events []*agentdv1.GenerateResponse) []*agentdv1.ApprovalDecided {
	var out []*agentdv1.ApprovalDecided
	for _, ev := range events {
		if d := ev.GetApprovalDecided(); d != nil {
			out = append(out, d)
		}
	}
	return out
}

// wantDecided compares approval_decided events, ignoring when.
func wantDecided(t *testing.T, what string, want, got []*agentdv1.ApprovalDecided) {
	t.Helper()
	for _, d := range got {
		if d.GetDecidedAt() == nil {
			t.Errorf("%s: %v has no decided_at", what, d)
		}
	}
	if diff := cmp.Diff(want, got, protocmp.Transform(), protocmp.IgnoreFields(&agentdv1.ApprovalDecided{}, "decided_at")); diff != "" {
		t.Errorf("%s (-want +got):\n%s", what, diff)
	}
}

// approvedBy is the approval_decided of request id.
func approvedBy(id, by, reason string, approved bool) *agentdv1.ApprovalDecided {
	return &agentdv1.ApprovalDecided{RequestId: id, Kind: agentdv1.PendingRequestKind_PENDING_REQUEST_KIND_APPROVAL, Approved: approved, DecidedBy: by, Reason: reason}
}

// A generation that waits on alice's stream for an approval is
// decided by bob, who holds only approve: it goes on at once, on alice's
// stream, which sees who decided, with the reason; the call runs once,
// the inbox empties, and the audit line names bob and his decision.
func TestDecideWhileWaiting(t *testing.T) {
	t.Parallel()
	bridge := &fakeBridge{onList: offering(serverTools("files", "read", "delete"))}
	d := newDeciding(t, bridge, nil, recordingScript())
	l := d.start(t, alice, &agentdv1.StartGeneration{Agent: filesAgent(t), Messages: userSays("tidy")})
	req := l.next(t, "the approval request", isApprovalRequest).GetApprovalRequest()
	id := l.id(t)

	inbox, err := d.client.ListPendingRequests(as(t, bob), &agentdv1.ListPendingRequestsRequest{})
	if err != nil {
		t.Fatal(err)
	}
	if got := inbox.GetRequests(); len(got) != 1 || got[0].GetState() != agentdv1.GenerationState_GENERATION_STATE_WAITING ||
		got[0].GetApproval().GetId() != req.GetId() || got[0].GetStartedBy() != "alice" || got[0].GetExpiresAt() == nil {
		t.Fatalf("bob's inbox: %v; want alice's waiting approval request", got)
	}

	res, st := d.decide(t, bob, id, &agentdv1.ApprovalDecision{RequestId: req.GetId(), Approved: true, Digest: req.GetDigest(), Reason: "looks fine"})
	wantCode(t, st, codes.OK)
	wantDecided(t, "DecideRequests' decisions", []*agentdv1.ApprovalDecided{approvedBy(req.GetId(), "bob", "looks fine", true)}, res.GetDecisions())
	events, st := l.rest(t)
	wantCode(t, st, codes.OK)
	if kinds(events)[len(events)-1] != "completed" || bridge.callsTo("delete") != 1 {
		t.Errorf("alice's stream: %v, delete ran %d times; want completed, once", kinds(events), bridge.callsTo("delete"))
	}
	wantDecided(t, "alice's stream", []*agentdv1.ApprovalDecided{approvedBy(req.GetId(), "bob", "looks fine", true)}, decidedEvents(events))
	wantDecided(t, "the generation's log", decidedEvents(events), decidedEvents(d.logged(t, id)))
	if inbox, err := d.client.ListPendingRequests(as(t, bob), &agentdv1.ListPendingRequestsRequest{}); err != nil || len(inbox.GetRequests()) != 0 {
		t.Errorf("bob's inbox after: %v, %v; want empty", inbox.GetRequests(), err)
	}
	wantFacts(t, "the log", d.log.String(), `msg="decision recorded" audit=true principal=bob tenant=acme generation=`+id,
		"request="+req.GetId()+" kind=approval approved=true", `reason="looks fine"`)
}

// twoDeletes gates two calls of delete, a.txt's and b.txt's, in one turn.
func twoDeletes(t *testing.T) *agentdv1.Agent {
	t.Helper()
	return &agentdv1.Agent{
		Provider: "script", RequiresApproval: []string{"delete"}, Mcps: []*agentdv1.MCPServer{refServer("files", "files")},
		ProviderOptions: script(t, `{"turns": [
			{"tool_calls": [{"name": "delete", "arguments": {"path": "a.txt"}}, {"name": "delete", "arguments": {"path": "b.txt"}}]},
			{"text": "done"}
		]}`),
	}
}

// deletesOf counts the calls of delete on path.
func deletesOf(b *fakeBridge, path string) int {
	n := 0
	for _, c := range b.calls() {
		if c.Tool == "delete" && strings.Contains(c.Arguments, path) {
			n++
		}
	}
	return n
}

// The stream's holder and DecideRequests decide one request: the
// first recorded wins, once. Whichever comes second is refused, naming
// who decided first: DecideRequests with FAILED_PRECONDITION, the
// stream's answer with a warning on the stream; the call runs as the
// first decided, and nothing of the second is taken. (The turn's other
// request keeps the generation waiting meanwhile.)
func TestDecideRace(t *testing.T) {
	t.Parallel()
	for _, order := range []string{"inline first", "DecideRequests first", "together"} {
		t.Run(order, func(t *testing.T) {
			t.Parallel()
			bridge := &fakeBridge{onList: offering(serverTools("files", "delete"))}
			d := newDeciding(t, bridge, nil, recordingScript())
			l := d.start(t, alice, &agentdv1.StartGeneration{Agent: twoDeletes(t), Messages: userSays("tidy")})
			req := l.next(t, "the approval request", isApprovalRequest).GetApprovalRequest()
			last := l.next(t, "the second approval request", isApprovalRequest).GetApprovalRequest()
			id := l.id(t)
			inline := func() { _ = l.s.Send(approve(req.GetId(), "", true)) }
			decide := func() *status.Status {
				_, st := d.decide(t, bob, id, &agentdv1.ApprovalDecision{RequestId: req.GetId(), Approved: false, Reason: "no"})
				return st
			}
			var st *status.Status
			switch order {
			case "inline first":
				inline()
				l.next(t, "alice's decision", isDecided)
				st = decide()
			case "DecideRequests first":
				st = decide()
				l.next(t, "bob's decision", isDecided)
				inline()
				l.next(t, "the warning", func(ev *agentdv1.GenerateResponse) bool { return ev.GetWarning() != nil })
			default:
				var wg sync.WaitGroup
				wg.Go(inline)
				st = decide()
				wg.Wait()
			}
			_ = l.s.Send(approve(last.GetId(), "", true))
			_ = l.s.CloseSend()
			events, end := l.rest(t)
			wantCode(t, end, codes.OK)
			checkRace(t, order, req.GetId(), st, events, bridge)
		})
	}
}

// checkRace checks a race of alice's approval on her stream and bob's
// refusal through DecideRequests, which ended with st: exactly one won.
func checkRace(t *testing.T, order, request string, st *status.Status, events []*agentdv1.GenerateResponse, bridge *fakeBridge) {
	t.Helper()
	var decided []*agentdv1.ApprovalDecided
	for _, d := range decidedEvents(events) {
		if d.GetRequestId() == request {
			decided = append(decided, d)
		}
	}
	var warnings []string
	for _, ev := range events {
		if w := ev.GetWarning(); w != nil && w.GetCode() == "REQUEST_DECIDED" {
			warnings = append(warnings, w.GetMessage())
		}
	}
	switch st.Code() {
	case codes.OK: // bob first: alice's answer is refused on her stream
		wantDecided(t, order, []*agentdv1.ApprovalDecided{approvedBy(request, "bob", "no", false)}, decided)
		if len(warnings) != 1 || !strings.Contains(warnings[0], `"bob" decided it first`) || deletesOf(bridge, "a.txt") != 0 {
			t.Errorf("%s: bob decided first, but alice's stream was warned %q and a.txt's delete ran %d times; want one warning naming bob, no call", order, warnings, deletesOf(bridge, "a.txt"))
		}
	case codes.FailedPrecondition: // alice first
		wantDecided(t, order, []*agentdv1.ApprovalDecided{approvedBy(request, "alice", "", true)}, decided)
		if info := errorInfo(st); info.GetReason() != "REQUEST_DECIDED" || info.GetMetadata()["decided_by"] != "alice" || info.GetMetadata()["decided_at"] == "" {
			t.Errorf("%s: bob's refusal %v; want REQUEST_DECIDED by alice, and when", order, info)
		}
		wantFacts(t, order, st.Message(), "decided already", `"alice"`)
		if len(warnings) != 0 || deletesOf(bridge, "a.txt") != 1 {
			t.Errorf("%s: alice decided first, but her stream was warned %q and a.txt's delete ran %d times; want none, once", order, warnings, deletesOf(bridge, "a.txt"))
		}
	default:
		t.Fatalf("%s: DecideRequests ended %v %q; want OK or FAILED_PRECONDITION", order, st.Code(), st.Message())
	}
	if order == "inline first" && st.Code() != codes.FailedPrecondition || order == "DecideRequests first" && st.Code() != codes.OK {
		t.Errorf("%s: DecideRequests ended %v; the order says who was first", order, st.Code())
	}
	if deletesOf(bridge, "b.txt") != 1 {
		t.Errorf("%s: b.txt's delete ran %d times; want once", order, deletesOf(bridge, "b.txt"))
	}
}

// A paused generation whose every request bob decides resumes at
// once, detached, on the agent its record keeps: once, though bob and
// alice decide its two requests at once, each its own; each call runs as
// decided, the log shows who decided what, and a second decision of a
// request is refused naming the first.
func TestDecidePausedResumesOnce(t *testing.T) {
	t.Parallel()
	bridge := &fakeBridge{onList: offering(serverTools("files", "delete"))}
	prov := recordingScript()
	d := newDeciding(t, bridge, nil, prov)
	agent := twoDeletes(t)
	paused := d.pausedFor(t, &agentdv1.StartGeneration{Agent: agent, Messages: userSays("tidy")})
	id, reqs := paused.GetGenerationId(), paused.GetApprovalRequests()
	if len(reqs) != 2 {
		t.Fatalf("paused for %v; want two approvals", reqs)
	}
	var wg sync.WaitGroup
	sts := make([]*status.Status, 2)
	gens := make([]*agentdv1.Generation, 2)
	for i, key := range []string{bob, alice} {
		wg.Go(func() {
			res, st := d.decide(t, key, id, &agentdv1.ApprovalDecision{RequestId: reqs[i].GetId(), Approved: i == 0, Reason: "decided by " + key})
			sts[i], gens[i] = st, res.GetGeneration()
		})
	}
	wg.Wait()
	running := 0
	for i, st := range sts {
		wantCode(t, st, codes.OK)
		if gens[i].GetState() == agentdv1.GenerationState_GENERATION_STATE_RUNNING {
			running++
		}
	}
	if running == 0 {
		t.Errorf("neither decision's response shows the generation running: %v", gens)
	}
	d.waitState(t, id, store.Completed)
	if n := bridge.callsTo("delete"); n != 1 {
		t.Errorf("delete ran %d times; want once (a.txt approved, b.txt declined)", n)
	}
	want := &agentdv1.Message{Role: agentdv1.Role_ROLE_TOOL, Parts: []*agentdv1.Part{
		resultPart("call_1_1", "delete", "delete ok", false),
		resultPart("call_1_2", "delete", `{"error":"declined by user: decided by sk-alice"}`, true),
	}}
	if diff := protoDiff(want, toolResults(t, prov, 1)); diff != "" {
		t.Errorf("the tool results the model got (-want +got):\n%s", diff)
	}
	log := d.logged(t, id)
	resumes := 0
	for _, ev := range log {
		if ev.GetStarted().GetResumed() {
			resumes++
		}
	}
	wantDecided(t, "the log", []*agentdv1.ApprovalDecided{
		approvedBy(reqs[0].GetId(), "bob", "decided by "+bob, true), approvedBy(reqs[1].GetId(), "alice", "decided by "+alice, false),
	}, decidedEvents(log))
	if resumes != 1 || kinds(log)[len(log)-1] != "completed" {
		t.Errorf("the log: %v, resumed %d times; want one resume, completed", kinds(log), resumes)
	}
	_, st := d.decide(t, bob, id, &agentdv1.ApprovalDecision{RequestId: reqs[1].GetId(), Approved: true})
	wantCode(t, st, codes.FailedPrecondition)
	wantFacts(t, "a second decision, once the generation completed", st.Message(), "decided already", `"alice"`)
}

// Decisions of a paused generation that needs what its record
// does not keep (a function result here) wait for its next resume, which
// takes them as its answers; a resume that answers a decided request
// otherwise is refused, naming who decided it.
func TestDecisionsWaitForTheResume(t *testing.T) {
	t.Parallel()
	bridge := &fakeBridge{onList: offering(serverTools("files", "delete"))}
	prov := recordingScript()
	d := newDeciding(t, bridge, nil, prov)
	agent := &agentdv1.Agent{
		Provider: "script", RequiresApproval: []string{"delete"}, Mcps: []*agentdv1.MCPServer{refServer("files", "files")},
		Tools: []*agentdv1.FunctionTool{{Name: "ask"}},
		ProviderOptions: script(t, `{"turns": [
			{"tool_calls": [{"name": "delete", "arguments": {"path": "a.txt"}}, {"name": "ask"}]},
			{"text": "done"}
		]}`),
	}
	paused := d.pausedFor(t, &agentdv1.StartGeneration{Agent: agent, Messages: userSays("tidy")})
	id, req := paused.GetGenerationId(), paused.GetApprovalRequests()[0]
	fc := paused.GetFunctionCalls()[0]

	_, st := d.decide(t, bob, id, &agentdv1.ApprovalDecision{RequestId: fc.GetCallId(), Approved: true})
	wantCode(t, st, codes.InvalidArgument)
	wantFacts(t, "deciding a function call", statusText(st), "function call", "only the generation's client")

	res, st := d.decide(t, bob, id, &agentdv1.ApprovalDecision{RequestId: req.GetId(), Approved: true, Reason: "ok"})
	wantCode(t, st, codes.OK)
	if res.GetGeneration().GetState() != agentdv1.GenerationState_GENERATION_STATE_PAUSED {
		t.Errorf("after the decision: %v; want paused (it needs a function result)", res.GetGeneration().GetState())
	}
	resume := func(decisions ...*agentdv1.ApprovalDecision) ([]*agentdv1.GenerateResponse, *status.Status) {
		s, err := d.client.Generate(as(t, alice))
		if err != nil {
			t.Fatal(err)
		}
		r := resumeRequest(id, agent, decisions...)
		r.GetResume().FunctionResults = []*agentdv1.FunctionResult{{CallId: fc.GetCallId(), Output: "42"}}
		if err := s.Send(r); err != nil || s.CloseSend() != nil {
			t.Fatal(err)
		}
		var events []*agentdv1.GenerateResponse
		for {
			ev, err := s.Recv()
			if err != nil {
				if errors.Is(err, io.EOF) {
					err = nil
				}
				return events, status.Convert(err)
			}
			events = append(events, ev)
		}
	}
	_, st = resume(&agentdv1.ApprovalDecision{RequestId: req.GetId(), Approved: false})
	wantCode(t, st, codes.FailedPrecondition)
	wantFacts(t, "a resume that answers otherwise", st.Message(), "decided already", `"bob"`)
	events, st := resume()
	wantCode(t, st, codes.OK)
	if kinds(events)[len(events)-1] != "completed" || bridge.callsTo("delete") != 1 {
		t.Errorf("the resume that takes bob's decision: %v, delete ran %d times", kinds(events), bridge.callsTo("delete"))
	}
	wantDecided(t, "the resume's stream", []*agentdv1.ApprovalDecided{approvedBy(req.GetId(), "bob", "ok", true)}, decidedEvents(events))
}

// A paused generation whose agent declared secrets, which its
// record does not keep without store.encryption_key_file, keeps the
// decisions for its next resume, which brings the agent.
func TestDecisionsWaitForTheAgent(t *testing.T) {
	t.Parallel()
	bridge := &fakeBridge{onList: offering(serverTools("files", "read", "delete"))}
	d := newDeciding(t, bridge, nil, recordingScript())
	paused := d.pausedFor(t, &agentdv1.StartGeneration{Agent: envSecretAgent(t), Messages: userSays("tidy")})
	id, req := paused.GetGenerationId(), paused.GetApprovalRequests()[0]
	res, st := d.decide(t, bob, id, &agentdv1.ApprovalDecision{RequestId: req.GetId(), Approved: true})
	wantCode(t, st, codes.OK)
	if res.GetGeneration().GetState() != agentdv1.GenerationState_GENERATION_STATE_PAUSED || bridge.callsTo("delete") != 0 {
		t.Errorf("after the decision: %v, delete ran %d times; want paused, waiting for its agent", res.GetGeneration().GetState(), bridge.callsTo("delete"))
	}
	s, err := d.client.Generate(as(t, alice))
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Send(resumeRequest(id, envSecretAgent(t))); err != nil || s.CloseSend() != nil {
		t.Fatal(err)
	}
	for {
		if _, err := s.Recv(); err != nil {
			if !errors.Is(err, io.EOF) {
				t.Fatalf("the resume with the agent alone: %v", err)
			}
			break
		}
	}
	if bridge.callsTo("delete") != 1 {
		t.Errorf("delete ran %d times; want once, as bob decided", bridge.callsTo("delete"))
	}
}

// A declined call's reason reaches the model with the refusal, on
// the stream as through DecideRequests.
func TestDeclineReasonReachesTheModel(t *testing.T) {
	t.Parallel()
	for _, via := range []string{"stream", "DecideRequests"} {
		t.Run(via, func(t *testing.T) {
			t.Parallel()
			bridge := &fakeBridge{onList: offering(serverTools("files", "read", "delete"))}
			prov := recordingScript()
			d := newDeciding(t, bridge, nil, prov)
			l := d.start(t, alice, &agentdv1.StartGeneration{Agent: filesAgent(t), Messages: userSays("tidy")})
			req := l.next(t, "the approval request", isApprovalRequest).GetApprovalRequest()
			decision := &agentdv1.ApprovalDecision{RequestId: req.GetId(), Reason: "not on Fridays"}
			if via == "stream" {
				_ = l.s.Send(&agentdv1.GenerateRequest{Kind: &agentdv1.GenerateRequest_ApprovalDecision{ApprovalDecision: decision}})
			} else {
				_, st := d.decide(t, bob, l.id(t), decision)
				wantCode(t, st, codes.OK)
			}
			_ = l.s.CloseSend()
			events, st := l.rest(t)
			wantCode(t, st, codes.OK)
			if kinds(events)[len(events)-1] != "completed" {
				t.Fatalf("events %v; want completed", kinds(events))
			}
			got := toolResults(t, prov, 1).GetParts()[1].GetToolResult()
			if got.GetOutput() != `{"error":"declined by user: not on Fridays"}` || !got.GetIsError() || bridge.callsTo("delete") != 0 {
				t.Errorf("the model got %v, delete ran %d times; want the refusal with its reason, no call", got, bridge.callsTo("delete"))
			}
		})
	}
}

// Bob, who holds only approve, lists, reads and decides his
// tenant's generations, and may not start or resume one, nor preview.
func TestApproveRole(t *testing.T) {
	t.Parallel()
	d := newDeciding(t, &fakeBridge{onList: offering(serverTools("files", "read", "delete"))}, nil, recordingScript())
	paused := d.pausedFor(t, &agentdv1.StartGeneration{Agent: filesAgent(t), Messages: userSays("tidy")})
	id := paused.GetGenerationId()
	ctx := as(t, bob)
	for name, call := range map[string]func() error{
		"Generate": func() error {
			s, err := d.client.Generate(ctx)
			if err == nil {
				_, err = s.Recv()
			}
			return err
		},
		"CreateGeneration": func() error {
			_, err := d.client.CreateGeneration(ctx, &agentdv1.CreateGenerationRequest{Start: &agentdv1.StartGeneration{Agent: filesAgent(t), Messages: userSays("x")}})
			return err
		},
		"Preview": func() error {
			_, err := d.client.Preview(ctx, &agentdv1.PreviewRequest{Agent: filesAgent(t), Messages: userSays("x")})
			return err
		},
	} {
		if st := status.Convert(call()); st.Code() != codes.PermissionDenied || !strings.Contains(st.Message(), `"generate"`) {
			t.Errorf("bob's %s: %v %q; want PERMISSION_DENIED naming generate", name, st.Code(), st.Message())
		}
	}
	if _, err := d.client.GetGeneration(ctx, &agentdv1.GetGenerationRequest{GenerationId: id}); err != nil {
		t.Errorf("bob's GetGeneration: %v", err)
	}
	if _, err := d.client.ListGenerations(ctx, &agentdv1.ListGenerationsRequest{}); err != nil {
		t.Errorf("bob's ListGenerations: %v", err)
	}
	if res, err := d.client.ListPendingRequests(as(t, alice), &agentdv1.ListPendingRequestsRequest{}); err != nil || len(res.GetRequests()) != 1 {
		t.Errorf("alice's ListPendingRequests (generate holds approve): %v, %v", res.GetRequests(), err)
	}
	_, st := d.decide(t, alice, id, &agentdv1.ApprovalDecision{RequestId: paused.GetApprovalRequests()[0].GetId(), Approved: true})
	wantCode(t, st, codes.OK)
}

// What DecideRequests refuses, and how: another tenant's
// generation is NOT_FOUND, as an unknown one; an unknown request, a
// request of another generation, another call's digest, a long reason, a
// request answered twice are INVALID_ARGUMENT; a finished generation is
// FAILED_PRECONDITION. Nothing is recorded of a refused call.
func TestDecideRefusals(t *testing.T) {
	t.Parallel()
	d := newDeciding(t, &fakeBridge{onList: offering(serverTools("files", "read", "delete"))}, nil, recordingScript())
	one := d.pausedFor(t, &agentdv1.StartGeneration{Agent: filesAgent(t), Messages: userSays("one")})
	id, req := one.GetGenerationId(), one.GetApprovalRequests()[0]
	l := d.start(t, alice, &agentdv1.StartGeneration{Agent: textAgent(t, "hi"), Messages: userSays("hi")})
	done, st := l.rest(t)
	wantCode(t, st, codes.OK)
	finished := started(t, done).GetGenerationId()
	for _, tc := range []struct {
		name  string
		key   string
		id    string
		d     []*agentdv1.ApprovalDecision
		code  codes.Code
		facts []string
	}{
		{"another tenant's", eve, id, []*agentdv1.ApprovalDecision{{RequestId: req.GetId(), Approved: true}}, codes.NotFound, nil},
		{"an unknown generation", bob, "gen_nobody", []*agentdv1.ApprovalDecision{{RequestId: req.GetId(), Approved: true}}, codes.NotFound, nil},
		{"no generation", bob, "", []*agentdv1.ApprovalDecision{{RequestId: req.GetId(), Approved: true}}, codes.InvalidArgument, []string{"generation_id"}},
		{"no decision", bob, id, nil, codes.InvalidArgument, []string{"approval_decisions"}},
		{"an unknown request, or another generation's", bob, id, []*agentdv1.ApprovalDecision{{RequestId: "approval_call_9", Approved: true}}, codes.InvalidArgument, []string{"no pending request"}},
		{"a finished generation", bob, finished, []*agentdv1.ApprovalDecision{{RequestId: "approval_x", Approved: true}}, codes.FailedPrecondition, []string{"has ended"}},
		{"another call's digest", bob, id, []*agentdv1.ApprovalDecision{{RequestId: req.GetId(), Approved: true, Digest: strings.Repeat("0", 64)}}, codes.InvalidArgument, []string{"digest"}},
		{"a long reason", bob, id, []*agentdv1.ApprovalDecision{{RequestId: req.GetId(), Reason: strings.Repeat("x", 1001)}}, codes.InvalidArgument, []string{"at most 1000"}},
		{"a request twice", bob, id, []*agentdv1.ApprovalDecision{{RequestId: req.GetId()}, {RequestId: req.GetId()}}, codes.InvalidArgument, []string{"answered twice"}},
	} {
		_, st := d.decide(t, tc.key, tc.id, tc.d...)
		if st.Code() != tc.code {
			t.Errorf("%s: %v %q; want %v", tc.name, st.Code(), st.Message(), tc.code)
			continue
		}
		wantFacts(t, tc.name, statusText(st), tc.facts...)
	}
	if found, err := d.store.Generations().Decisions(t.Context(), "acme", id, nil); err != nil || len(found) != 0 {
		t.Errorf("decisions recorded after refusals: %v, %v", found, err)
	}
}

// ListPendingRequests lists the tenant's waiting and paused
// generations' requests, newest first, each with its generation's state,
// times, end user, starter, provider and model; narrowed by kind, server,
// tool and end user; in pages; another tenant's are not listed.
func TestListPendingRequests(t *testing.T) {
	t.Parallel()
	bridge := &fakeBridge{onList: offering(serverTools("files", "read", "delete"), serverTools("notes", "erase"))}
	d := newDeciding(t, bridge, nil, recordingScript())
	gated := func(tool string) *agentdv1.Agent {
		return &agentdv1.Agent{Provider: "script", RequiresApproval: []string{tool}, Mcps: []*agentdv1.MCPServer{refServer("files", "files"), refServer("notes", "notes")},
			ProviderOptions: script(t, `{"turns": [{"tool_calls": [{"name": "`+tool+`"}]}, {"text": "done"}]}`)}
	}
	function := &agentdv1.Agent{Provider: "script", Tools: []*agentdv1.FunctionTool{{Name: "ask"}},
		ProviderOptions: script(t, `{"turns": [{"tool_calls": [{"name": "ask"}]}, {"text": "done"}]}`)}
	var ids []string
	for _, start := range []*agentdv1.StartGeneration{
		{Agent: gated("delete"), Messages: userSays("1"), EndUser: "ann"},
		{Agent: function, Messages: userSays("2"), EndUser: "ben"},
		{Agent: gated("erase"), Messages: userSays("3"), EndUser: "ann"},
	} {
		ids = append(ids, d.pausedFor(t, start).GetGenerationId())
	}
	list := func(key string, req *agentdv1.ListPendingRequestsRequest) []*agentdv1.PendingRequest {
		t.Helper()
		var out []*agentdv1.PendingRequest
		for {
			res, err := d.client.ListPendingRequests(as(t, key), req)
			if err != nil {
				t.Fatalf("ListPendingRequests(%v): %v", req, err)
			}
			out = append(out, res.GetRequests()...)
			if res.GetNextPageToken() == "" {
				return out
			}
			req.PageToken = res.GetNextPageToken()
		}
	}
	gens := func(reqs []*agentdv1.PendingRequest) []string {
		var out []string
		for _, r := range reqs {
			out = append(out, r.GetGenerationId())
		}
		return out
	}
	all := list(bob, &agentdv1.ListPendingRequestsRequest{PageSize: 1})
	if diff := cmp.Diff([]string{ids[2], ids[1], ids[0]}, gens(all)); diff != "" {
		t.Fatalf("every request, in pages of one, newest first (-want +got):\n%s", diff)
	}
	first := all[2]
	if first.GetKind() != agentdv1.PendingRequestKind_PENDING_REQUEST_KIND_APPROVAL || first.GetState() != agentdv1.GenerationState_GENERATION_STATE_PAUSED ||
		first.GetEndUser() != "ann" || first.GetStartedBy() != "alice" || first.GetProvider() != "script" ||
		first.GetApproval().GetToolName() != "delete" || first.GetRequestedAt() == nil || !first.GetExpiresAt().AsTime().After(time.Now()) {
		t.Errorf("the first generation's request: %v", first)
	}
	if all[1].GetFunctionCall().GetName() != "ask" || all[1].GetKind() != agentdv1.PendingRequestKind_PENDING_REQUEST_KIND_FUNCTION_CALL {
		t.Errorf("the function call: %v", all[1])
	}
	for name, tc := range map[string]struct {
		req  *agentdv1.ListPendingRequestsRequest
		want []string
	}{
		"approvals":       {&agentdv1.ListPendingRequestsRequest{Kinds: []agentdv1.PendingRequestKind{agentdv1.PendingRequestKind_PENDING_REQUEST_KIND_APPROVAL}}, []string{ids[2], ids[0]}},
		"a server":        {&agentdv1.ListPendingRequestsRequest{ServerName: "notes"}, []string{ids[2]}},
		"a tool":          {&agentdv1.ListPendingRequestsRequest{ToolName: "delete"}, []string{ids[0]}},
		"an end user":     {&agentdv1.ListPendingRequestsRequest{EndUser: "ann"}, []string{ids[2], ids[0]}},
		"end user, kind":  {&agentdv1.ListPendingRequestsRequest{EndUser: "ben", Kinds: []agentdv1.PendingRequestKind{agentdv1.PendingRequestKind_PENDING_REQUEST_KIND_FUNCTION_CALL}}, []string{ids[1]}},
		"nobody's inputs": {&agentdv1.ListPendingRequestsRequest{Kinds: []agentdv1.PendingRequestKind{agentdv1.PendingRequestKind_PENDING_REQUEST_KIND_INPUT}}, nil},
	} {
		if diff := cmp.Diff(tc.want, gens(list(bob, tc.req))); diff != "" {
			t.Errorf("%s (-want +got):\n%s", name, diff)
		}
	}
	if got := list(eve, &agentdv1.ListPendingRequestsRequest{}); len(got) != 0 {
		t.Errorf("another tenant's inbox: %v; want empty", got)
	}
	for name, req := range map[string]*agentdv1.ListPendingRequestsRequest{
		"a bad token": {PageToken: "nope"},
		"a bad kind":  {Kinds: []agentdv1.PendingRequestKind{agentdv1.PendingRequestKind_PENDING_REQUEST_KIND_UNSPECIFIED}},
		"a big page":  {PageSize: 1001},
	} {
		if _, err := d.client.ListPendingRequests(as(t, bob), req); status.Code(err) != codes.InvalidArgument {
			t.Errorf("%s: %v; want INVALID_ARGUMENT", name, err)
		}
	}
}
