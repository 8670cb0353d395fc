package server_test

import (
	"bytes"
	"context"
	"errors"
	"io"
	"iter"
	"log/slog"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/protobuf/proto"

	bridgev1 "github.com/agentd/agentd/gen/go/agentd/bridge/v1"
	statev1 "github.com/agentd/agentd/gen/go/agentd/state/v1"
	agentdv1 "github.com/agentd/agentd/gen/go/agentd/v1"
	"github.com/agentd/agentd/internal/config"
	"github.com/agentd/agentd/internal/fault"
	"github.com/agentd/agentd/internal/sealer"
	"github.com/agentd/agentd/internal/sealer/sealertest"
	"github.com/agentd/agentd/internal/store"
	"github.com/agentd/agentd/internal/testwait"
	"github.com/agentd/agentd/providers"
	"github.com/agentd/agentd/server"
)

// severable is a replica's view of the store that can be cut: once dead,
// every write (and every lease it would take) fails as unavailable, as if
// the replica had died: it renews nothing, logs nothing, adopts nothing.
// Reads still work.
type severable struct {
	store.Generations
	dead atomic.Bool
}

var errSevered = fault.New(fault.Unavailable, "severed from the store")

func (s *severable) Adopt(ctx context.Context, owner string, now, expires time.Time, limit int) ([]store.Generation, error) {
	if s.dead.Load() {
		return nil, errSevered
	}
	return s.Generations.Adopt(ctx, owner, now, expires, limit)
}

func (s *severable) Acquire(ctx context.Context, tenant, id, owner string, now, expires time.Time) (store.Generation, error) {
	if s.dead.Load() {
		return store.Generation{}, errSevered
	}
	return s.Generations.Acquire(ctx, tenant, id, owner, now, expires)
}

func (s *severable) Renew(ctx context.Context, tenant, id string, epoch int64, expires time.Time) error {
	if s.dead.Load() {
		return errSevered
	}
	return s.Generations.Renew(ctx, tenant, id, epoch, expires)
}

func (s *severable) Append(ctx context.Context, tenant, id string, epoch int64, events []store.Event) (int64, error) {
	if s.dead.Load() {
		return 0, errSevered
	}
	return s.Generations.Append(ctx, tenant, id, epoch, events)
}

func (s *severable) Checkpoint(ctx context.Context, tenant, id string, epoch int64, c store.Checkpoint) (int64, error) {
	if s.dead.Load() {
		return 0, errSevered
	}
	return s.Generations.Checkpoint(ctx, tenant, id, epoch, c)
}

func (s *severable) Finish(ctx context.Context, tenant, id string, epoch int64, o store.Outcome) (int64, error) {
	if s.dead.Load() {
		return 0, errSevered
	}
	return s.Generations.Finish(ctx, tenant, id, epoch, o)
}

func (s *severable) Release(ctx context.Context, tenant, id string, epoch int64, now time.Time) error {
	if s.dead.Load() {
		return errSevered
	}
	return s.Generations.Release(ctx, tenant, id, epoch, now)
}

// adoptReplica serves an AgentService named name on st (its durable record
// through gens) with a short lease and a busy adopter; the Service is
// closed when the test ends.
func adoptReplica(t *testing.T, name string, st store.Store, gens store.Generations, bridge server.Bridge, ps ...providers.Provider) agentdv1.AgentServiceClient {
	t.Helper()
	return sealingReplica(t, name, st, gens, bridge, nil, ps...)
}

// sealingReplica is adoptReplica sealing agents with key (nil: none).
func sealingReplica(t *testing.T, name string, st store.Store, gens store.Generations, bridge server.Bridge, key *sealer.Keyring, ps ...providers.Provider) agentdv1.AgentServiceClient {
	t.Helper()
	client, _ := replicaWith(t, name, st, gens, bridge, key, nil, ps...)
	return client
}

// replicaWith is sealingReplica logging to log (nil: nowhere); it returns
// the Service too, to close sooner.
func replicaWith(t *testing.T, name string, st store.Store, gens store.Generations, bridge server.Bridge, key *sealer.Keyring, log *slog.Logger, ps ...providers.Provider) (agentdv1.AgentServiceClient, *server.Service) {
	t.Helper()
	reg, err := providers.NewRegistry(ps...)
	if err != nil {
		t.Fatal(err)
	}
	cfg := config.Default().Generation
	// Short enough to wait out, long enough for a busy machine (with the
	// race detector) to renew in time.
	cfg.LeaseTTL = time.Second
	cfg.AdoptInterval = 20 * time.Millisecond
	svc := server.New(server.Options{Providers: reg, Bridge: bridge, Config: cfg, Checkpoints: st, Generations: gens, Threads: st.Threads(), Replica: name, Sealer: key, Logger: log})
	svc.StartAdopter()
	client := agentdv1.NewAgentServiceClient(dial(t, svc.Register))
	t.Cleanup(svc.Close) // before the connection closes: cleanups run last first
	return client, svc
}

// startDetached starts a detached generation and returns its id: the
// stream ends after started.
func startDetached(t *testing.T, client agentdv1.AgentServiceClient, start *agentdv1.StartGeneration) string {
	t.Helper()
	start.Detach = true
	events, st := run(t, client, &agentdv1.GenerateRequest{Kind: &agentdv1.GenerateRequest_Start{Start: start}}, nil)
	if st.Code() != codes.OK || len(events) != 1 || events[0].GetStarted() == nil {
		t.Fatalf("a detached start sent %v and ended %v; want started, then OK", kinds(events), st)
	}
	return events[0].GetStarted().GetGenerationId()
}

func waitRecord(t *testing.T, gens store.Generations, id string, cond func(store.Generation) bool) store.Generation {
	t.Helper()
	var g store.Generation
	testwait.For(t, "the generation's record in the state awaited", func() bool {
		var err error
		g, err = gens.Get(t.Context(), "", id)
		return err == nil && cond(g)
	})
	return g
}

// X-G3: the replica running a generation dies in the middle of a tool turn,
// one call finished and one running. Another replica adopts it from its
// checkpoint once the lease lapses: the finished call is not run again
// (its result is kept), the running one reaches the model as of unknown
// outcome and is not run again either, and the generation completes. The
// dead replica, should it come back, writes nothing more (its lease is
// fenced). X-G2: a client attaching to it on the adopting replica sees
// every event once, in order, the adopted replica's after the dead one's.
// X-G4: the generation was detached: its stream ended after started.
func TestAdoptionContinuesFromTheCheckpoint(t *testing.T) {
	t.Parallel()
	st := newStore(t, 0)
	id, bridgeA, gensA, slowGate := diesMidTurn(t, st)
	defer close(slowGate)

	bridgeB := &fakeBridge{onList: offering(serverTools("files", "fast", "slow"))}
	b := adoptReplica(t, "replica-b", st, st.Generations(), bridgeB, recordingScript())
	events, status := attachTo(t, b, id, 0)
	if status.Code() != codes.OK {
		t.Fatalf("the attached stream ended %v after %v", status, kinds(events))
	}
	wantSequencesAdopted(t, events)
	if got := bridgeB.calls(); len(got) != 0 {
		t.Errorf("the adopting replica ran %v; no call may run twice", got)
	}
	var adopted, unknown bool
	for _, ev := range events {
		if s := ev.GetStarted(); s.GetAdopted() {
			adopted = true
		}
		if f := ev.GetToolCallFinished(); f.GetToolName() == "slow" && f.GetIsError() && strings.Contains(f.GetOutput(), "may or may not have run") {
			unknown = true
		}
	}
	last := events[len(events)-1].GetCompleted()
	if !adopted || !unknown || last == nil {
		t.Fatalf("events %v: want an adopted started, the slow call of unknown outcome, and completed", kinds(events))
	}
	wantFacts(t, "the final text", textOf(last.GetMessage()), "fast done", "may or may not have run")
	g, _ := record(t, &pausable{store: st}, id)
	if g.State != store.Completed || g.Lease.Epoch != 2 {
		t.Errorf("record %+v: want completed, by the second lease", g)
	}

	// replica-a comes back: its slow call ends, and its writes are refused.
	gensA.dead.Store(false)
	slowGate <- struct{}{}
	testwait.For(t, "a bridge session closed", func() bool { return bridgeA.counts().Close > 0 })
	if again, _ := record(t, &pausable{store: st}, id); again.LastSeq != g.LastSeq || again.State != store.Completed {
		t.Errorf("after replica-a came back the record is %+v; want it untouched (%+v)", again, g)
	}
}

// diesMidTurn starts a detached generation on replica-a whose tool turn
// calls fast and slow, and kills replica-a (its store writes fail) once
// fast's result is checkpointed and slow runs. slowGate, once sent to,
// lets slow end; closed, it lets the test end.
func diesMidTurn(t *testing.T, st store.Store) (id string, bridgeA *fakeBridge, gensA *severable, slowGate chan struct{}) {
	t.Helper()
	slowGate = make(chan struct{})
	bridgeA = &fakeBridge{onList: offering(serverTools("files", "fast", "slow")), onCall: func(ctx context.Context, _, tool, _ string) (*bridgev1.CallToolResponse, error) {
		if tool == "slow" {
			select {
			case <-slowGate:
			case <-ctx.Done():
				return nil, ctx.Err()
			}
		}
		return &bridgev1.CallToolResponse{Output: tool + " done"}, nil
	}}
	gensA = &severable{Generations: st.Generations()}
	a := adoptReplica(t, "replica-a", st, gensA, bridgeA, recordingScript())
	agent := &agentdv1.Agent{Provider: "script", Mcps: []*agentdv1.MCPServer{commandServer("files", "files-server")}, ProviderOptions: script(t, `{"turns": [
		{"tool_calls": [{"name": "fast", "arguments": {}}, {"name": "slow", "arguments": {}}]},
		{"text": "results: {{tool_outputs}}"}]}`)}
	id = startDetached(t, a, &agentdv1.StartGeneration{Agent: agent, Messages: userSays("go")})

	// The fast call finished (its result checkpointed) and the slow one runs.
	testwait.For(t, "the call to slow", func() bool { return bridgeA.callsTo("slow") == 1 })
	waitRecord(t, st.Generations(), id, func(g store.Generation) bool {
		cp := &statev1.Checkpoint{}
		_ = proto.Unmarshal(g.Checkpoint, cp)
		states := cp.GetTurn().GetStates()
		finished := func(st *statev1.CallState) bool { return st.GetResult() != nil || st.GetLoggedResult() > 0 }
		return len(states) == 2 && finished(states[0]) && !finished(states[1])
	})
	gensA.dead.Store(true) // replica-a dies
	return id, bridgeA, gensA, slowGate
}

// X-G3: a call that had started when its replica died, to a tool the
// adopting replica's servers no longer offer, reaches the model as of
// unknown outcome, naming no server, and the generation completes.
func TestAdoptionOfACallToAToolNoLongerOffered(t *testing.T) {
	t.Parallel()
	st := newStore(t, 0)
	id, _, _, slowGate := diesMidTurn(t, st)
	defer close(slowGate)
	bridgeB := &fakeBridge{onList: offering(serverTools("files", "fast"))}
	b := adoptReplica(t, "replica-b", st, st.Generations(), bridgeB, recordingScript())
	events, status := attachTo(t, b, id, 0)
	if status.Code() != codes.OK {
		t.Fatalf("the attached stream ended %v after %v", status, kinds(events))
	}
	var unknown *agentdv1.ToolCallFinished
	for _, ev := range events {
		if f := ev.GetToolCallFinished(); f.GetToolName() == "slow" && strings.Contains(f.GetOutput(), "may or may not have run") {
			unknown = f
		}
	}
	if unknown == nil || !unknown.GetIsError() || unknown.GetServerName() != "" || events[len(events)-1].GetCompleted() == nil {
		t.Fatalf("events %v (slow: %v): want slow of unknown outcome, naming no server, and completed", kinds(events), unknown)
	}
	if got := bridgeB.calls(); len(got) != 0 {
		t.Errorf("the adopting replica ran %v; no call may run twice", got)
	}
}

func textOf(m *agentdv1.Message) string {
	var s string
	for _, p := range m.GetParts() {
		s += p.GetText()
	}
	return s
}

// halfTurn streams a partial answer, then hangs until its request ends:
// a model turn cut short by its replica's death.
func halfTurn() *fakeProvider {
	return &fakeProvider{name: "plain", caps: providers.Capabilities{ModelOptional: true}, stream: func(ctx context.Context, _ *providers.Request) iter.Seq2[providers.Event, error] {
		return func(yield func(providers.Event, error) bool) {
			if !yield(&providers.TextDelta{Text: "half an ans"}, nil) {
				return
			}
			<-ctx.Done()
			yield(nil, ctx.Err())
		}
	}}
}

// X-G2: a model turn in flight when its replica dies, whose partial text
// the client saw, is withdrawn by a turn_withdrawn event naming its first
// event before the adopting replica asks the turn again, and that turn's
// usage says it was repeated. X-G3: the generation completes there.
func TestAdoptionWithdrawsTheCutShortTurn(t *testing.T) {
	t.Parallel()
	st := newStore(t, 0)
	gensA := &severable{Generations: st.Generations()}
	a := adoptReplica(t, "replica-a", st, gensA, &fakeBridge{}, halfTurn())
	// Back before replica-a closes: its last writes are refused at once
	// (fenced) rather than retried until they time out.
	t.Cleanup(func() { gensA.dead.Store(false) })
	id := startDetached(t, a, &agentdv1.StartGeneration{Agent: &agentdv1.Agent{Provider: "plain"}, Messages: userSays("hi")})
	// The partial text is in the log (deltas are flushed within 50 ms).
	var partial int64
	testwait.For(t, "the partial text in the log", func() bool {
		for _, ev := range storedEvents(t, &pausable{store: st}, id) {
			if ev.GetTextDelta() != nil {
				partial = ev.GetSequence()
				return true
			}
		}
		return false
	})
	gensA.dead.Store(true)

	b := adoptReplica(t, "replica-b", st, st.Generations(), &fakeBridge{}, plainProvider())
	events, status := attachTo(t, b, id, 0)
	if status.Code() != codes.OK {
		t.Fatalf("the attached stream ended %v after %v", status, kinds(events))
	}
	wantSequencesAdopted(t, events)
	var withdrawn *agentdv1.TurnWithdrawn
	var text string
	var repeated bool
	for _, ev := range events {
		switch {
		case ev.GetTurnWithdrawn() != nil:
			withdrawn = ev.GetTurnWithdrawn()
			text = "" // what a client does: the turn's text is discarded
		case ev.GetTextDelta() != nil:
			text += ev.GetTextDelta().GetText()
		case ev.GetUsage() != nil:
			repeated = ev.GetUsage().GetRepeated()
		}
	}
	if withdrawn == nil || withdrawn.GetFromSequence() != partial || withdrawn.GetTurn() != 1 {
		t.Fatalf("withdrawn %v; want turn 1 from sequence %d (events %v)", withdrawn, partial, kinds(events))
	}
	if !repeated || text != "ok" || textOf(events[len(events)-1].GetCompleted().GetMessage()) != "ok" {
		t.Errorf("after the withdrawal: text %q, usage repeated %v, events %v; want the turn asked again, repeated, completed with ok", text, repeated, kinds(events))
	}
}

// X-G4: a detached generation's stream ends after started even if the
// client stays (it attaches to follow it); one that needs an approval
// pauses at once (nobody is there to answer), and a resume continues it.
func TestDetachedGenerations(t *testing.T) {
	t.Parallel()
	st := newStore(t, 0)
	bridge := &fakeBridge{onList: offering(serverTools("files", "read", "delete"))}
	a := adoptReplica(t, "replica-a", st, st.Generations(), bridge, recordingScript())

	t.Run("the client stays, and attaches", func(t *testing.T) {
		stream, err := a.Generate(t.Context())
		if err != nil {
			t.Fatal(err)
		}
		if err := stream.Send(&agentdv1.GenerateRequest{Kind: &agentdv1.GenerateRequest_Start{Start: &agentdv1.StartGeneration{
			Agent: textAgent(t, "done"), Messages: userSays("hi"), Detach: true}}}); err != nil {
			t.Fatal(err)
		}
		var got []*agentdv1.GenerateResponse
		for {
			var ev *agentdv1.GenerateResponse
			if ev, err = stream.Recv(); err != nil {
				break
			}
			got = append(got, ev)
		}
		if !errors.Is(err, io.EOF) || len(got) != 1 || got[0].GetStarted() == nil {
			t.Fatalf("the stream sent %v and ended %v; want started, then OK", kinds(got), err)
		}
		events, status := attachTo(t, a, got[0].GetStarted().GetGenerationId(), 1)
		if status.Code() != codes.OK || events[len(events)-1].GetCompleted() == nil {
			t.Fatalf("attached: %v, %v; want the rest, to completed", kinds(events), status)
		}
		wantSequences(t, events, 2)
	})

	t.Run("an approval pauses it", func(t *testing.T) {
		agent := filesAgent(t)
		id := startDetached(t, a, &agentdv1.StartGeneration{Agent: agent, Messages: userSays("tidy")})
		g := waitRecord(t, st.Generations(), id, func(g store.Generation) bool { return g.State == store.Paused && g.Lease.Owner == "" })
		events, status := attachTo(t, a, id, 0)
		if status.Code() != codes.OK || events[len(events)-1].GetPaused() == nil || int64(len(events)) != g.LastSeq {
			t.Fatalf("attached: %v, %v; want the log up to paused", kinds(events), status)
		}
		paused := events[len(events)-1].GetPaused()
		if len(paused.GetApprovalRequests()) == 0 {
			t.Fatalf("paused without approval requests: %v", paused)
		}
		var decisions []*agentdv1.ApprovalDecision
		for _, r := range paused.GetApprovalRequests() {
			decisions = append(decisions, &agentdv1.ApprovalDecision{RequestId: r.GetId(), Approved: true})
		}
		resumed, status := run(t, a, &agentdv1.GenerateRequest{Kind: &agentdv1.GenerateRequest_Resume{Resume: &agentdv1.ResumeGeneration{
			GenerationId: id, Agent: agent, ApprovalDecisions: decisions}}}, nil)
		if status.Code() != codes.OK || resumed[len(resumed)-1].GetCompleted() == nil {
			t.Fatalf("resumed: %v, %v", kinds(resumed), status)
		}
	})
}

// X-G3: a generation's agent, with its secrets, reaches the adopting
// replica only sealed under a key both replicas have: without a key the
// checkpoint holds no secret, and a generation whose agent had one cannot
// be adopted; a replica with another key, or none, cannot open a sealed
// agent. Either way it fails FAILED_PRECONDITION, saying why, and nothing
// runs.
func TestAdoptionNeedsTheAgentsSecrets(t *testing.T) {
	t.Parallel()
	keyOf := func(b byte, previous ...byte) *sealer.Keyring {
		return keyring(t, b, previous...)
	}
	for _, tc := range []struct {
		name   string
		a, b   *sealer.Keyring
		secret bool
		want   codes.Code
		facts  []string
	}{
		{name: "one key", a: keyOf(1), b: keyOf(1), secret: true, want: codes.OK},
		{name: "a rotated key", a: keyOf(1), b: keyOf(2, 1), secret: true, want: codes.OK},
		{name: "no key, no secret", want: codes.OK},
		{name: "no key, a secret", secret: true, want: codes.FailedPrecondition, facts: []string{"store.encryption_key_file", "secrets"}},
		{name: "another key", a: keyOf(1), b: keyOf(2, 3), secret: true, want: codes.FailedPrecondition, facts: []string{keyOf(1).ID(), keyOf(2).ID(), keyOf(3).ID()}},
		{name: "no key to open it", a: keyOf(1), secret: true, want: codes.FailedPrecondition, facts: []string{keyOf(1).ID(), "has none"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			st := newStore(t, 0)
			gensA := &severable{Generations: st.Generations()}
			a := sealingReplica(t, "replica-a", st, gensA, &fakeBridge{}, tc.a, halfTurn())
			t.Cleanup(func() { gensA.dead.Store(false) })
			files := commandServer("files", "files-server")
			if tc.secret {
				files.Env = map[string]string{"TOKEN": "cnry-sealed-secret"}
			}
			id := startDetached(t, a, &agentdv1.StartGeneration{Agent: &agentdv1.Agent{Provider: "plain", Mcps: []*agentdv1.MCPServer{files}}, Messages: userSays("hi")})
			testwait.For(t, "two events in the log", func() bool { return len(storedEvents(t, &pausable{store: st}, id)) >= 2 })
			rec, _ := record(t, &pausable{store: st}, id)
			if bytes.Contains(rec.Checkpoint, []byte("cnry-sealed-secret")) {
				t.Fatal("the checkpoint holds the secret in the clear")
			}
			gensA.dead.Store(true)

			bridgeB := &fakeBridge{}
			b := sealingReplica(t, "replica-b", st, st.Generations(), bridgeB, tc.b, plainProvider())
			events, status := attachTo(t, b, id, 0)
			if status.Code() != tc.want {
				t.Fatalf("the attached stream ended %v after %v; want %v", status, kinds(events), tc.want)
			}
			wantFacts(t, "the status", status.Message(), tc.facts...)
			if tc.want != codes.OK && bridgeB.counts().Open != 0 {
				t.Errorf("a generation that cannot be adopted opened a bridge session")
			}
			if tc.want == codes.OK && tc.secret {
				if env := bridgeB.openRequests()[0].GetServers()[0].GetStdio().GetEnv(); env["TOKEN"] != "cnry-sealed-secret" {
					t.Errorf("the adopting replica's session has env %v; want the sealed secret", env)
				}
			}
		})
	}
}

// keyring is a ring of the keys made of bytes b (current) and previous.
func keyring(t *testing.T, b byte, previous ...byte) *sealer.Keyring {
	return sealertest.Keyring(t, b, previous...)
}

// X-G3: after a key rotation, a replica that adopts a generation whose
// agent is sealed under the previous key opens it and seals it again under
// the current key in its checkpoints, so that a replica that no longer
// has the previous key can adopt it in turn.
func TestAdoptionResealsUnderTheCurrentKey(t *testing.T) {
	t.Parallel()
	st := newStore(t, 0)
	// slow runs until its replica dies: each replica in turn writes a
	// checkpoint (its model turn's calls), then hangs in slow.
	newBridge := func() *fakeBridge {
		return &fakeBridge{onList: offering(serverTools("files", "fast", "slow")), onCall: func(ctx context.Context, _, tool, _ string) (*bridgev1.CallToolResponse, error) {
			if tool == "slow" {
				<-ctx.Done()
				return nil, ctx.Err()
			}
			return &bridgev1.CallToolResponse{Output: tool + " done"}, nil
		}}
	}
	files := commandServer("files", "files-server")
	files.Env = map[string]string{"TOKEN": "cnry-sealed-secret"}
	agent := &agentdv1.Agent{Provider: "script", Mcps: []*agentdv1.MCPServer{files}, ProviderOptions: script(t, `{"turns": [
		{"tool_calls": [{"name": "fast", "arguments": {}}, {"name": "slow", "arguments": {}}]},
		{"tool_calls": [{"name": "slow", "arguments": {}}]},
		{"text": "done"}]}`)}
	keyID := func(g store.Generation) string {
		cp := &statev1.Checkpoint{}
		if err := proto.Unmarshal(g.Checkpoint, cp); err != nil {
			t.Fatal(err)
		}
		return cp.GetKeyId()
	}
	// slowStarts counts the slow calls whose start is in the store: a
	// replica cut off before its slow call's start was stored would leave
	// the call to the next one, which would run it and hang in it.
	slowStarts := func(id string) int {
		n := 0
		for _, ev := range storedEvents(t, &pausable{store: st}, id) {
			if ev.GetToolCallStarted().GetToolName() == "slow" {
				n++
			}
		}
		return n
	}

	gensA := &severable{Generations: st.Generations()}
	a := sealingReplica(t, "replica-a", st, gensA, newBridge(), keyring(t, 1), recordingScript())
	t.Cleanup(func() { gensA.dead.Store(false) })
	id := startDetached(t, a, &agentdv1.StartGeneration{Agent: agent, Messages: userSays("go")})
	waitRecord(t, st.Generations(), id, func(g store.Generation) bool { return keyID(g) == keyring(t, 1).ID() })
	testwait.For(t, "the first call to slow", func() bool { return slowStarts(id) == 1 })
	gensA.dead.Store(true)

	// replica-b rotated: key 2 is current, key 1 previous. It adopts the
	// generation and checkpoints its second model turn.
	gensB := &severable{Generations: st.Generations()}
	sealingReplica(t, "replica-b", st, gensB, newBridge(), keyring(t, 2, 1), recordingScript())
	t.Cleanup(func() { gensB.dead.Store(false) })
	waitRecord(t, st.Generations(), id, func(g store.Generation) bool {
		return g.Lease.Owner == "replica-b" && keyID(g) == keyring(t, 2).ID()
	})
	testwait.For(t, "the second call to slow", func() bool { return slowStarts(id) == 2 }) // its second turn's
	gensB.dead.Store(true)

	// replica-c has dropped key 1.
	bridgeC := newBridge()
	c := sealingReplica(t, "replica-c", st, st.Generations(), bridgeC, keyring(t, 2), recordingScript())
	events, status := attachTo(t, c, id, 0)
	if status.Code() != codes.OK || events[len(events)-1].GetCompleted() == nil {
		t.Fatalf("the attached stream ended %v after %v; want it completed", status, kinds(events))
	}
	if env := bridgeC.openRequests()[0].GetServers()[0].GetStdio().GetEnv(); env["TOKEN"] != "cnry-sealed-secret" {
		t.Errorf("replica-c's session has env %v; want the sealed secret", env)
	}
}

// X-G3: a replica that stops (Close, as agentd serve does on SIGTERM)
// releases the generations it runs without a client rather than record
// them cancelled: another replica adopts them at once, without waiting for
// a lease to lapse, and they complete there.
func TestStoppingReplicaHandsItsGenerationsOver(t *testing.T) {
	t.Parallel()
	st := newStore(t, 0)
	reg, err := providers.NewRegistry(halfTurn())
	if err != nil {
		t.Fatal(err)
	}
	cfg := config.Default().Generation
	cfg.LeaseTTL = time.Hour // a lapse would never come: only the release hands it over
	svcA := server.New(server.Options{Providers: reg, Bridge: &fakeBridge{}, Config: cfg, Checkpoints: st, Generations: st.Generations(), Replica: "replica-a"})
	a := agentdv1.NewAgentServiceClient(dial(t, svcA.Register))
	id := startDetached(t, a, &agentdv1.StartGeneration{Agent: &agentdv1.Agent{Provider: "plain"}, Messages: userSays("hi")})
	testwait.For(t, "two events in the log", func() bool { return len(storedEvents(t, &pausable{store: st}, id)) >= 2 })
	svcA.Close()
	g, _ := record(t, &pausable{store: st}, id)
	if g.State != store.Running || g.Lease.Owner != "" {
		t.Fatalf("after replica-a stopped the record is %s owned by %q; want running and released", g.State, g.Lease.Owner)
	}
	b := adoptReplica(t, "replica-b", st, st.Generations(), &fakeBridge{}, plainProvider())
	events, status := attachTo(t, b, id, 0)
	if status.Code() != codes.OK || events[len(events)-1].GetCompleted() == nil {
		t.Fatalf("attached on replica-b: %v, %v; want it completed there", kinds(events), status)
	}
}

// X-G3: the replica running a generation dies while the generation waits
// for its client's approval (the read call done, the delete call gated).
// The replica that adopts it has no client to ask: it asks again and
// pauses, with the same approval request; the read call is not run
// again; a resume there runs the approved call once and completes.
func TestAdoptingAWaitingGeneration(t *testing.T) {
	t.Parallel()
	st := newStore(t, 0)
	gensA := &severable{Generations: st.Generations()}
	bridgeA := &fakeBridge{onList: offering(serverTools("files", "read", "delete"))}
	var linesA logLines
	a, _ := replicaWith(t, "replica-a", st, gensA, bridgeA, nil, linesA.logger(), recordingScript())
	t.Cleanup(func() { gensA.dead.Store(false) })
	agent := filesAgent(t)
	id, vanish := startUntilApproval(t, &pausable{client: a, store: st}, &agentdv1.StartGeneration{Agent: agent, Messages: userSays("tidy")})
	defer vanish()
	waitRecord(t, st.Generations(), id, func(g store.Generation) bool { return g.State == store.Waiting })
	gensA.dead.Store(true)

	bridgeB := &fakeBridge{onList: offering(serverTools("files", "read", "delete"))}
	b := adoptReplica(t, "replica-b", st, st.Generations(), bridgeB, recordingScript())
	events, status := attachTo(t, b, id, 0)
	if status.Code() != codes.OK {
		t.Fatalf("attached: %v after %v", status, kinds(events))
	}
	paused := events[len(events)-1].GetPaused()
	if paused == nil || len(paused.GetApprovalRequests()) != 1 || paused.GetApprovalRequests()[0].GetToolName() != "delete" {
		t.Fatalf("events %v; want the generation paused for the delete call's approval", kinds(events))
	}
	if bridgeB.callsTo("read") != 0 || bridgeB.callsTo("delete") != 0 {
		t.Fatalf("the adopting replica ran %v before any approval", bridgeB.calls())
	}
	req := paused.GetApprovalRequests()[0]
	resumed, status := run(t, b, &agentdv1.GenerateRequest{Kind: &agentdv1.GenerateRequest_Resume{Resume: &agentdv1.ResumeGeneration{
		GenerationId: id, Agent: agent, ApprovalDecisions: []*agentdv1.ApprovalDecision{{RequestId: req.GetId(), Approved: true}}}}}, nil)
	if status.Code() != codes.OK || resumed[len(resumed)-1].GetCompleted() == nil {
		t.Fatalf("resumed: %v, %v", kinds(resumed), status)
	}
	if bridgeA.callsTo("read") != 1 || bridgeB.callsTo("read") != 0 || bridgeB.callsTo("delete") != 1 || bridgeA.callsTo("delete") != 0 {
		t.Errorf("calls: replica-a %v, replica-b %v; want read once on a, delete once on b", bridgeA.calls(), bridgeB.calls())
	}
	// replica-a's client goes; replica-a, back, finds its lease taken and
	// ends its generation (its stream's handler is not the Service's to
	// join).
	gensA.dead.Store(false)
	vanish()
	testwait.For(t, "a bridge session closed", func() bool { return bridgeA.counts().Close > 0 })
	// Its run is over, store writes and all, once it logged its end
	// (taken over, or ended with its client gone): only then may the
	// test's cleanups close the store.
	testwait.For(t, "the replica's end of the generation logged", func() bool {
		return len(linesA.named(t, "generation taken over: another replica holds its lease"))+len(linesA.named(t, "generation ended")) > 0
	})
}
