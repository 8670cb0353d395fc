package app_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/testing/protocmp"
	"google.golang.org/protobuf/types/known/structpb"

	agentdv1 "github.com/agentd/agentd/gen/go/agentd/v1"
	"github.com/agentd/agentd/internal/config"
	"github.com/agentd/agentd/internal/store"
	"github.com/agentd/agentd/internal/store/pgtest"
)

// The proof of durable generations (X-G5): agentd replicas run as
// separate processes on one store, and one of them is SIGKILLed in the
// middle of a generation. The lease outlasts every test, and each replica
// looks for generations to adopt ten times a second: a dead replica's
// generations are adopted because the store saw its liveness end, never
// because a lease lapsed. (A cluster may set a shorter lease: one whose
// replica is stopped rather than killed.)
const (
	proofLeaseTTL      = time.Hour
	proofAdoptInterval = 100 * time.Millisecond
)

// proofCluster is a set of agentd replicas, child processes of the test
// sharing one store (a PostgreSQL database, or one SQLite file in a state
// directory they share), each with the counting MCP server registered as
// "files" (shared by its sessions, with the gate tool), and the test's
// own handle on that store, to watch the generations' records.
type proofCluster struct {
	driver      string
	dsn         string // PostgreSQL's
	dir         string
	counter     string // the counting server's calls, one line each
	pids        string // the counting servers' pids
	gates       string // the gate tool's directory
	providerURL string // the "openai" provider's base URL ("": none)
	replicas    int
	store       store.Store
	// leaseTTL is generation.lease_ttl of the replicas it starts.
	leaseTTL time.Duration
}

// proofReplica is one agentd replica of a proofCluster.
type proofReplica struct {
	*agentdProcess
	client agentdv1.AgentServiceClient
	// thread, when set, is the thread its starts run on.
	thread string
}

func newProofCluster(t *testing.T, driver, providerURL string) *proofCluster {
	t.Helper()
	dir := t.TempDir()
	c := &proofCluster{
		driver: driver, dir: dir, providerURL: providerURL, leaseTTL: proofLeaseTTL,
		counter: filepath.Join(dir, "calls"), pids: filepath.Join(dir, "pids"), gates: filepath.Join(dir, "gates"),
	}
	if err := os.Mkdir(c.gates, 0o700); err != nil {
		t.Fatal(err)
	}
	if driver == config.StorePostgres {
		c.dsn = pgtest.DSN(t)
	}
	// Registered before any replica starts, so it runs after they have
	// all been killed: their MCP servers must be gone too.
	t.Cleanup(func() { c.reapServers(t) })
	return c
}

// start starts a replica on the cluster's store, reaching PostgreSQL at
// dsn (the cluster's, or a proxy's in front of it).
func (c *proofCluster) start(t *testing.T, dsn string) *proofReplica {
	t.Helper()
	c.replicas++
	for range 3 {
		addr := freeAddr(t)
		if p, ok := tryStartChild(t, serveEnv, c.config(t, dsn, addr), addr); ok {
			if c.store == nil {
				c.openStore(t) // after the first replica has migrated it
			}
			return &proofReplica{agentdProcess: p, client: dialAgentd(t, addr)}
		}
	}
	t.Fatal("agentd exited before it served, three times")
	return nil
}

// config writes the configuration of the cluster's next replica, on addr
// and dsn, and returns its path.
func (c *proofCluster) config(t *testing.T, dsn, addr string) string {
	t.Helper()
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	storeYAML := fmt.Sprintf("state_dir: %q\nstore: {driver: sqlite}\n", filepath.Join(c.dir, "state"))
	if c.driver == config.StorePostgres {
		storeYAML = fmt.Sprintf("state_dir: %q\nstore: {driver: postgres, dsn: %q}\n", filepath.Join(c.dir, fmt.Sprintf("state-%d", c.replicas)), dsn)
	}
	providersYAML := ""
	if c.providerURL != "" {
		providersYAML = fmt.Sprintf("providers:\n  openai: {api_key: proof-key, base_url: %q, max_retries: -1}\n", c.providerURL)
	}
	yaml := fmt.Sprintf(`listen: %s
%sgeneration:
  lease_ttl: %s
  adopt_interval: %s
bridge:
  terminate_grace: 500ms
  servers:
    files:
      command: %q
      shared: true
      warm: 0
      env: {%s: %q, %s: %q, %s: %q}
%s`, addr, storeYAML, c.leaseTTL, proofAdoptInterval, exe,
		counterEnv, c.counter, counterPidsEnv, c.pids, counterGateEnv, c.gates, providersYAML)
	path := filepath.Join(c.dir, fmt.Sprintf("agentd-%d.yaml", c.replicas))
	if err := os.WriteFile(path, []byte(yaml), 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}

func (c *proofCluster) openStore(t *testing.T) {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), settle)
	defer cancel()
	s, err := store.Open(ctx, store.Options{Driver: c.driver, DSN: c.dsn, Path: filepath.Join(c.dir, "state", "agentd.db")})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	c.store = s
}

// reapServers requires every counting server the replicas started to
// have exited (its agentd is gone: its stdin is closed), and kills any
// left.
func (c *proofCluster) reapServers(t *testing.T) {
	for _, p := range lines(t, c.pids) {
		var pid int
		if _, err := fmt.Sscan(p, &pid); err != nil {
			continue
		}
		if !waitExit(pid) {
			t.Errorf("the counting MCP server %d outlived its agentd by %v", pid, settle)
			_ = syscall.Kill(pid, syscall.SIGKILL)
		}
	}
}

// kill SIGKILLs the replica and waits for it.
func (r *proofReplica) kill(t *testing.T) {
	t.Helper()
	if err := r.cmd.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	_ = r.wait()
}

// stream opens a Generate stream that gives up after settle.
func (r *proofReplica) stream(t *testing.T) agentdv1.AgentService_GenerateClient {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), settle)
	t.Cleanup(cancel)
	stream, err := r.client.Generate(ctx)
	if err != nil {
		t.Fatal(err)
	}
	return stream
}

func proofStart(agent *agentdv1.Agent, detach bool, thread string) *agentdv1.GenerateRequest {
	return &agentdv1.GenerateRequest{Kind: &agentdv1.GenerateRequest_Start{Start: &agentdv1.StartGeneration{
		Agent: agent, Detach: detach, ThreadId: thread,
		Messages: []*agentdv1.Message{{Role: agentdv1.Role_ROLE_USER, Parts: []*agentdv1.Part{textPart("go on")}}},
	}}}
}

// startDetached starts agent detached and half-closes: the stream ends
// after the started event. It returns the generation's id.
func (r *proofReplica) startDetached(t *testing.T, agent *agentdv1.Agent) string {
	t.Helper()
	stream := r.stream(t)
	if err := stream.Send(proofStart(agent, true, r.thread)); err != nil {
		t.Fatal(err)
	}
	if err := stream.CloseSend(); err != nil {
		t.Fatal(err)
	}
	var id string
	for {
		ev, err := stream.Recv()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			t.Fatalf("starting a detached generation: %v", err)
		}
		if s := ev.GetStarted(); s != nil {
			id = s.GetGenerationId()
		}
	}
	if id == "" {
		t.Fatal("the detached start's stream ended without a started event")
	}
	return id
}

// startAttached starts agent, half-closes (it answers nothing) and
// returns the stream, which follows the generation.
func (r *proofReplica) startAttached(t *testing.T, agent *agentdv1.Agent) agentdv1.AgentService_GenerateClient {
	t.Helper()
	stream := r.stream(t)
	if err := stream.Send(proofStart(agent, false, r.thread)); err != nil {
		t.Fatal(err)
	}
	if err := stream.CloseSend(); err != nil {
		t.Fatal(err)
	}
	return stream
}

// attach follows generation id from after sequence number after until
// its stream ends, and returns the events it sent.
func (r *proofReplica) attach(t *testing.T, id string, after int64) []*agentdv1.GenerateResponse {
	t.Helper()
	stream := r.stream(t)
	if err := stream.Send(&agentdv1.GenerateRequest{Kind: &agentdv1.GenerateRequest_Attach{Attach: &agentdv1.AttachGeneration{GenerationId: id, AfterSequence: after}}}); err != nil {
		t.Fatal(err)
	}
	if err := stream.CloseSend(); err != nil {
		t.Fatal(err)
	}
	var evs []*agentdv1.GenerateResponse
	for {
		ev, err := stream.Recv()
		if errors.Is(err, io.EOF) {
			return evs
		}
		if err != nil {
			t.Fatalf("attached after %d, having received %v: %v", after, kinds(evs), err)
		}
		evs = append(evs, ev)
	}
}

// recvUntil receives events until one satisfies done, and returns them.
func recvUntil(t *testing.T, stream agentdv1.AgentService_GenerateClient, what string, done func(*agentdv1.GenerateResponse) bool) []*agentdv1.GenerateResponse {
	t.Helper()
	var evs []*agentdv1.GenerateResponse
	for {
		ev, err := stream.Recv()
		if err != nil {
			t.Fatalf("waiting for %s, having received %v: %v", what, kinds(evs), err)
		}
		evs = append(evs, ev)
		if done(ev) {
			return evs
		}
	}
}

// broken receives what is left on the stream of a replica that was
// killed: it must end UNAVAILABLE.
func broken(t *testing.T, stream agentdv1.AgentService_GenerateClient) []*agentdv1.GenerateResponse {
	t.Helper()
	var evs []*agentdv1.GenerateResponse
	for {
		ev, err := stream.Recv()
		if err == nil {
			evs = append(evs, ev)
			continue
		}
		if status.Code(err) != codes.Unavailable {
			t.Errorf("the killed replica's stream ended with %v; want UNAVAILABLE", err)
		}
		return evs
	}
}

// kind is the name of an event's kind ("started", "text_delta", ...).
func kind(ev *agentdv1.GenerateResponse) string {
	fd := ev.ProtoReflect().WhichOneof(ev.ProtoReflect().Descriptor().Oneofs().ByName("event"))
	if fd == nil {
		return "none"
	}
	return string(fd.Name())
}

func kinds(evs []*agentdv1.GenerateResponse) []string {
	out := make([]string, len(evs))
	for i, ev := range evs {
		out[i] = fmt.Sprintf("%d:%s", ev.GetSequence(), kind(ev))
	}
	return out
}

// waitRecord polls generation id's record until ok, and returns it.
func (c *proofCluster) waitRecord(t *testing.T, id, what string, ok func(store.Generation) bool) store.Generation {
	t.Helper()
	deadline := time.Now().Add(settle)
	tick := time.NewTicker(20 * time.Millisecond)
	defer tick.Stop()
	for {
		rec, err := c.store.Generations().Get(t.Context(), "", id)
		if err == nil && ok(rec) {
			return rec
		}
		if time.Now().After(deadline) {
			t.Fatalf("generation %s: no %s after %v (record %+v, %v)", id, what, settle, rec, err)
		}
		<-tick.C
	}
}

// logged returns generation id's stored log, as stored: the record keeps
// some of what events carry once, elsewhere (a call's arguments in the
// model's message, the completed event's messages in the conversation),
// and fills it in when the log is read by a client; asLogged compares
// events without it. The record's own tests prove it reads back whole.
func (c *proofCluster) logged(t *testing.T, id string) []*agentdv1.GenerateResponse {
	t.Helper()
	var out []*agentdv1.GenerateResponse
	for after := int64(0); ; {
		evs, err := c.store.Generations().Read(t.Context(), "", id, after, 0)
		if err != nil {
			t.Fatal(err)
		}
		if len(evs) == 0 {
			return out
		}
		for _, e := range evs {
			ev := &agentdv1.GenerateResponse{}
			if err := proto.Unmarshal(e.Data, ev); err != nil {
				t.Fatal(err)
			}
			ev.Sequence = e.Seq
			out = append(out, ev)
		}
		after = evs[len(evs)-1].Seq
	}
}

// asLogged compares a client's events with the log's as logged returns
// them: without what the record stores once, elsewhere.
var asLogged = cmp.Options{
	protocmp.Transform(),
	protocmp.IgnoreFields(&agentdv1.ToolCallStarted{}, "arguments"),
	protocmp.IgnoreFields(&agentdv1.ApprovalRequest{}, "arguments"),
	protocmp.IgnoreFields(&agentdv1.FunctionCall{}, "arguments"),
	protocmp.IgnoreFields(&agentdv1.GenerationCompleted{}, "message", "messages"),
}

// waitLogged polls generation id's log until ok.
func (c *proofCluster) waitLogged(t *testing.T, id, what string, ok func([]*agentdv1.GenerateResponse) bool) {
	t.Helper()
	deadline := time.Now().Add(settle)
	tick := time.NewTicker(20 * time.Millisecond)
	defer tick.Stop()
	for {
		evs := c.logged(t, id)
		if ok(evs) {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("generation %s: no %s in its log after %v: %v", id, what, settle, kinds(evs))
		}
		<-tick.C
	}
}

// finishedText is the final text that a completed generation's record
// keeps.
func finishedText(t *testing.T, rec store.Generation) string {
	t.Helper()
	var r struct{ Text, Error string }
	if err := json.Unmarshal(rec.Result, &r); err != nil {
		t.Fatalf("generation %s's result %q: %v", rec.ID, rec.Result, err)
	}
	if rec.State != store.Completed {
		t.Fatalf("generation %s ended %s (%s); want completed", rec.ID, rec.State, r.Error)
	}
	return r.Text
}

// waitCompleted waits until generation id has finished and requires it
// completed; it returns its final text.
func (c *proofCluster) waitCompleted(t *testing.T, id string) string {
	t.Helper()
	return finishedText(t, c.waitRecord(t, id, "end", func(r store.Generation) bool { return r.State.Finished() }))
}

// count is how many of the counting server's lines are line.
func (c *proofCluster) count(t *testing.T, line string) int {
	t.Helper()
	n := 0
	for _, l := range lines(t, c.counter) {
		if l == line {
			n++
		}
	}
	return n
}

// openGate lets the gate calls of marker ("all": every one) pass.
func (c *proofCluster) openGate(t *testing.T, marker string) {
	t.Helper()
	if err := os.WriteFile(filepath.Join(c.gates, marker), nil, 0o600); err != nil {
		t.Fatal(err)
	}
}

// filesScriptAgent is a script agent of the counting server with these turns.
func filesScriptAgent(t *testing.T, turns ...any) *agentdv1.Agent {
	t.Helper()
	opts, err := structpb.NewStruct(map[string]any{"script": map[string]any{"turns": turns}})
	if err != nil {
		t.Fatal(err)
	}
	return &agentdv1.Agent{Provider: "script", Mcps: []*agentdv1.MCPServer{{Transport: &agentdv1.MCPServer_Ref{Ref: "files"}}}, ProviderOptions: opts}
}

func callsTurn(calls ...any) map[string]any { return map[string]any{"tool_calls": calls} }

func toolCall(name, arg, value string) map[string]any {
	return map[string]any{"name": name, "arguments": map[string]any{arg: value}}
}

var outputsTurn = map[string]any{"text": "{{tool_outputs}}"}

// unknownOutcome reports whether a tool output is the error of a call
// that may or may not have run.
func unknownOutcome(output string) bool {
	var out struct{ Error string }
	return json.Unmarshal([]byte(output), &out) == nil && strings.Contains(out.Error, "may or may not have run")
}

// checkRun checks a generation's log for what every run of it must show,
// however many replicas it ran on (X-G2, X-G3): its events numbered from
// 1, one more each, but where an adopting replica numbered past the show
// window (wantAdoptedNumbering); each tool call started at most once (a
// call in flight on a replica that died is never started again) and
// finished once; and it ends completed. It returns how often the
// generation was adopted.
func checkRun(t *testing.T, id string, evs []*agentdv1.GenerateResponse) (adopted int) {
	t.Helper()
	started, finished := map[string]int{}, map[string]int{}
	if len(evs) > 0 && evs[0].GetSequence() != 1 {
		t.Errorf("generation %s: its log begins at %d", id, evs[0].GetSequence())
	}
	wantAdoptedNumbering(t, evs)
	for _, ev := range evs {
		switch {
		case ev.GetStarted().GetAdopted():
			adopted++
		case ev.GetToolCallStarted() != nil:
			started[ev.GetToolCallStarted().GetCallId()]++
		case ev.GetToolCallFinished() != nil:
			finished[ev.GetToolCallFinished().GetCallId()]++
		}
	}
	for call, n := range started {
		if n != 1 {
			t.Errorf("X-G3 generation %s: call %s started %d times; want once", id, call, n)
		}
	}
	for call, n := range finished {
		if n != 1 {
			t.Errorf("generation %s: call %s finished %d times; want once", id, call, n)
		}
	}
	if len(evs) == 0 || evs[len(evs)-1].GetCompleted() == nil {
		t.Errorf("generation %s: its log ends %v; want completed", id, kinds(evs))
	}
	return adopted
}

// adoptedOnce returns generation id's log, checked by checkRun and
// required to hold one adoption, and the index of its adopted started
// event.
func (c *proofCluster) adoptedOnce(t *testing.T, id string) ([]*agentdv1.GenerateResponse, int) {
	t.Helper()
	logged := c.logged(t, id)
	if adopted := checkRun(t, id, logged); adopted != 1 {
		t.Errorf("X-G3 the log has %d started events with adopted set; want 1: %v", adopted, kinds(logged))
	}
	return logged, slices.IndexFunc(logged, func(ev *agentdv1.GenerateResponse) bool { return ev.GetStarted().GetAdopted() })
}

// X-G5 (with X-G3, X-G2): two agentd replicas, separate processes on one
// store, and a generation whose tool turn has two calls: "delete", which
// finishes at once, and "gate", which runs until the test lets it pass.
// With the fast call's result stored and the slow call in flight, the
// replica running the generation is SIGKILLed. Detached, the other
// replica's adopter takes the generation over, long before the killed
// replica's lease would have lapsed: the store saw its liveness end;
// attached, the client reattaches on the other replica with the last
// sequence number it saw, and receives every later event exactly once, in
// order. Either way the generation completes; the fast call keeps its
// result and is not run again; the slow call reaches the model as of
// unknown outcome ("may or may not have run") and is not run again: the
// counting server saw each call exactly once. The log holds exactly what
// the clients were sent. On PostgreSQL, and on SQLite with both replicas
// sharing one file.
func TestProofReplicaKilledMidTool(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		driver   string
		attached bool
	}{
		{config.StorePostgres, false},
		{config.StorePostgres, true},
		{config.StoreSQLite, false},
		{config.StoreSQLite, true},
	} {
		name := tc.driver + "/detached"
		if tc.attached {
			name = tc.driver + "/attached"
		}
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			killMidTool(t, tc.driver, tc.attached)
		})
	}
}

func killMidTool(t *testing.T, driver string, attached bool) {
	c := newProofCluster(t, driver, "")
	a, b := c.start(t, c.dsn), c.start(t, c.dsn)
	// On a thread, which gets the generation's items once, from the
	// replica that ends it.
	th, err := a.client.CreateThread(t.Context(), &agentdv1.CreateThreadRequest{})
	if err != nil {
		t.Fatal(err)
	}
	a.thread = th.GetThread().GetThreadId()
	agent := filesScriptAgent(t, callsTurn(toolCall("delete", "path", "fast"), toolCall("gate", "marker", "slow")), outputsTurn)
	const fast, slow = "call_1_1", "call_1_2"

	var id string
	var seen []*agentdv1.GenerateResponse // what the attached client saw
	var stream agentdv1.AgentService_GenerateClient
	if attached {
		stream = a.startAttached(t, agent)
		seen = recvUntil(t, stream, "the fast call's result", func(ev *agentdv1.GenerateResponse) bool {
			return ev.GetToolCallFinished().GetCallId() == fast
		})
		id = seen[0].GetStarted().GetGenerationId()
	} else {
		id = a.startDetached(t, agent)
	}
	waitLine(t, c.counter, "gate:slow")
	// The fast call's result is stored, in the write that checkpoints it:
	// the attached client has seen nothing the log lacks. (agentd may
	// send an event before its log has it; TestProofTurnWithdrawn's
	// second case kills a replica in that window.)
	c.waitLogged(t, id, "result of the fast call", func(evs []*agentdv1.GenerateResponse) bool {
		return slices.ContainsFunc(evs, func(ev *agentdv1.GenerateResponse) bool { return ev.GetToolCallFinished().GetCallId() == fast })
	})
	leased := c.waitRecord(t, id, "A's lease", func(r store.Generation) bool { return r.Lease.Epoch == 1 }).Lease
	a.kill(t)
	killed := time.Now()

	var fromB []*agentdv1.GenerateResponse
	if attached {
		seen = append(seen, broken(t, stream)...)
		fromB = b.attach(t, id, seen[len(seen)-1].GetSequence())
	} else {
		c.waitRecord(t, id, "adoption", func(r store.Generation) bool { return r.Lease.Epoch > 1 })
		if !time.Now().Before(leased.Expires) {
			t.Errorf("X-G5 the other replica adopted the generation once the killed replica's lease (%v) had lapsed; want it adopted because that replica died", leased.Expires)
		}
		t.Logf("adopted %v after the kill", time.Since(killed).Round(time.Millisecond))
	}
	text := c.waitCompleted(t, id)

	if got := strings.Split(text, "\n"); len(got) != 2 || got[0] != "deleted fast" || !unknownOutcome(got[1]) {
		t.Errorf("X-G3 the model's last turn saw %q; want the fast call's result, then the slow one's as may or may not have run", text)
	}
	if n, m := c.count(t, "fast"), c.count(t, "gate:slow"); n != 1 || m != 1 {
		t.Errorf("X-G5 the counting server saw the fast call %d times and the slow one %d times; want each once", n, m)
	}
	items, err := b.client.ListThreadItems(t.Context(), &agentdv1.ListThreadItemsRequest{ThreadId: a.thread})
	if err != nil {
		t.Fatal(err)
	}
	// The request's message, the model's calls, their results, the answer.
	if got := items.GetItems(); len(got) != 4 || got[0].GetGenerationId() != id || got[3].GetGenerationId() != id {
		t.Errorf("the thread holds %d items (%v); want the generation's 4, once", len(got), got)
	}

	logged, adoptedAt := c.adoptedOnce(t, id)
	for i, ev := range logged {
		switch {
		case ev.GetTurnWithdrawn() != nil && (i != adoptedAt+1 || ev.GetTurnWithdrawn().GetFromSequence() <= logged[adoptedAt-1].GetSequence()):
			// The adopter withdraws, first thing, what the dead replica
			// may have shown unstored: nothing the log holds, as no model
			// turn was in flight.
			t.Errorf("X-G2 the log withdraws a turn (%v) at %d, taking back what it holds, but no model turn was in flight: %v", ev, i, kinds(logged))
		case ev.GetToolCallFinished().GetCallId() == fast && i > adoptedAt:
			t.Errorf("X-G3 the fast call finished after the adoption (%v); it had finished before", ev)
		case ev.GetToolCallFinished().GetCallId() == slow:
			if f := ev.GetToolCallFinished(); i < adoptedAt || !f.GetIsError() || !unknownOutcome(f.GetOutput()) {
				t.Errorf("X-G3 the slow call finished as %v at %d (adopted at %d); want, after the adoption, an error saying it may or may not have run", f, i, adoptedAt)
			}
		case ev.GetUsage().GetRepeated():
			t.Errorf("X-G3 usage %v is marked repeated; the model turn before the crash had ended", ev.GetUsage())
		}
	}

	// The client saw the log: the attached one across both replicas, a
	// late one attaching from the start on the replica left.
	view := append(seen, fromB...)
	if !attached {
		view = b.attach(t, id, 0)
	}
	if diff := cmp.Diff(logged, view, asLogged); diff != "" {
		t.Errorf("X-G2 the client's events differ from the log (-log +client):\n%s", diff)
	}
	if attached && (len(fromB) == 0 || !fromB[0].GetStarted().GetAdopted()) {
		t.Errorf("X-G2 the reattached client's events begin %v; want the adopting replica's started event", kinds(fromB))
	}
}

// stallingModel is an OpenAI Chat Completions server whose first answer
// in each conversation says a few words and then stalls until its
// connection drops (its replica died) or the test ends; asked again, it
// answers in full.
type stallingModel struct {
	partial, full []string
	arrived       chan struct{} // a conversation's first request came
	proceed       chan struct{} // closed: the first answer says its words
	release       chan struct{} // closed when the test ends

	mu    sync.Mutex
	asked map[string][]string // each request's messages, by conversation (its user's text)
}

func newStallingModel(t *testing.T) (*stallingModel, string) {
	m := &stallingModel{
		partial: []string{"Once", " upon"},
		full:    []string{"Hello", " there,", " friend."},
		arrived: make(chan struct{}, 1), proceed: make(chan struct{}), release: make(chan struct{}),
		asked: make(map[string][]string),
	}
	srv := httptest.NewServer(m)
	t.Cleanup(srv.Close)
	t.Cleanup(func() { close(m.release) }) // first: srv.Close waits for the stalled handler
	return m, srv.URL + "/v1"
}

func (m *stallingModel) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	var req struct {
		Messages []json.RawMessage `json:"messages"`
	}
	if r.URL.Path != "/v1/chat/completions" || json.NewDecoder(r.Body).Decode(&req) != nil {
		http.Error(w, `{"error":{"message":"not a chat completion"}}`, http.StatusBadRequest)
		return
	}
	var msgs []string
	conversation := ""
	for _, raw := range req.Messages {
		msgs = append(msgs, string(raw))
		var msg struct {
			Role    string          `json:"role"`
			Content json.RawMessage `json:"content"`
		}
		if json.Unmarshal(raw, &msg) == nil && msg.Role == "user" {
			conversation = string(msg.Content)
		}
	}
	m.mu.Lock()
	m.asked[conversation] = append(m.asked[conversation], strings.Join(msgs, "\n"))
	first := len(m.asked[conversation]) == 1
	m.mu.Unlock()

	w.Header().Set("Content-Type", "text/event-stream")
	flusher := w.(http.Flusher)
	send := func(data string) {
		fmt.Fprintf(w, "data: %s\n\n", data)
		flusher.Flush()
	}
	delta := func(text string) {
		b, _ := json.Marshal(text)
		send(fmt.Sprintf(`{"id":"c","object":"chat.completion.chunk","choices":[{"index":0,"delta":{"content":%s}}]}`, b))
	}
	if first {
		m.arrived <- struct{}{}
		select {
		case <-m.proceed:
		case <-r.Context().Done():
			return
		}
		for _, w := range m.partial {
			delta(w)
		}
		select {
		case <-r.Context().Done():
		case <-m.release:
		}
		return
	}
	for _, w := range m.full {
		delta(w)
	}
	send(`{"id":"c","object":"chat.completion.chunk","choices":[{"index":0,"delta":{},"finish_reason":"stop"}]}`)
	send(`{"id":"c","object":"chat.completion.chunk","choices":[],"usage":{"prompt_tokens":12,"completion_tokens":3}}`)
	send("[DONE]")
}

// requests returns the messages of each request of the one conversation.
func (m *stallingModel) requests() [][]string {
	m.mu.Lock()
	defer m.mu.Unlock()
	var out [][]string
	for _, reqs := range m.asked {
		out = append(out, reqs)
	}
	return out
}

// X-G5 (with X-G2, X-G3): a model turn cut short. A client attached on
// replica A has seen the first words of a model turn when A is SIGKILLed
// (the model, a fake Chat Completions server, stalls there). The client
// reattaches on replica B with the last sequence number it saw: B takes
// the generation over, withdraws the turn (turn_withdrawn, from the
// sequence number of its first word), asks the model again (the turn's
// usage marked repeated), and completes. The client's text, without what
// was withdrawn, is the final message; the model was asked the same
// conversation twice (nothing of the cut turn kept in it); and the
// client saw exactly the generation's log, each event once, in order.
//
// "partial turn logged": A is killed once its log holds the words the
// client saw. "partial turn not yet logged": A's store is cut off (a
// proxy stops forwarding) before the words come: A numbers them and
// cannot store them, but shows them all the same (the model's text
// reaches the client as it comes, within the show window); B numbers its
// own events past that window and withdraws the turn from the first word,
// so the client's events are the log's and, withdrawn, the words it was
// shown unstored.
func TestProofTurnWithdrawn(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name   string
		logged bool
	}{
		{"partial turn logged", true},
		{"partial turn not yet logged", false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			withdrawnTurn(t, tc.logged)
		})
	}
}

func withdrawnTurn(t *testing.T, logged bool) {
	model, url := newStallingModel(t)
	c := newProofCluster(t, config.StorePostgres, url)
	dsnA := c.dsn
	var proxy *pgtest.Proxy
	if !logged {
		proxy, dsnA = pgtest.NewProxy(t, c.dsn)
	}
	a, b := c.start(t, dsnA), c.start(t, c.dsn)

	stream := a.startAttached(t, &agentdv1.Agent{Provider: "openai", Model: "gpt-4o-mini"})
	seen := recvUntil(t, stream, "started", func(ev *agentdv1.GenerateResponse) bool { return ev.GetStarted() != nil })
	id := seen[0].GetStarted().GetGenerationId()
	select {
	case <-model.arrived:
	case <-time.After(settle):
		t.Fatalf("the model was not asked within %v", settle)
	}
	if !logged {
		c.waitRecord(t, id, "started event logged", func(r store.Generation) bool { return r.LastSeq >= 1 })
		proxy.Down()
	}
	close(model.proceed)
	words := 0
	seen = append(seen, recvUntil(t, stream, "the partial turn", func(ev *agentdv1.GenerateResponse) bool {
		if ev.GetTextDelta() != nil {
			words++
		}
		return words == len(model.partial)
	})...)
	if logged {
		last := seen[len(seen)-1].GetSequence()
		c.waitRecord(t, id, "partial turn logged", func(r store.Generation) bool { return r.LastSeq >= last })
	}
	a.kill(t)
	seen = append(seen, broken(t, stream)...)
	fromB := b.attach(t, id, seen[len(seen)-1].GetSequence())
	all := append(slices.Clone(seen), fromB...)

	wantAdoptedNumbering(t, all)
	withdrawn := slices.IndexFunc(fromB, func(ev *agentdv1.GenerateResponse) bool { return ev.GetTurnWithdrawn() != nil })
	firstSeen := slices.IndexFunc(seen, func(ev *agentdv1.GenerateResponse) bool { return ev.GetTextDelta() != nil })
	if firstSeen < 0 {
		t.Fatalf("the client saw no word before the kill: %v", kinds(seen))
	}
	firstWord := seen[firstSeen].GetSequence()
	if withdrawn < 0 {
		t.Errorf("X-G2 the reattached client got no turn_withdrawn, having seen the cut turn's words from %d: %v", firstWord, kinds(all))
	} else {
		w := fromB[withdrawn].GetTurnWithdrawn()
		if w.GetTurn() != 1 || w.GetFromSequence() != firstWord || slices.ContainsFunc(fromB[:withdrawn], func(ev *agentdv1.GenerateResponse) bool { return ev.GetTextDelta() != nil }) {
			t.Errorf("X-G2 turn_withdrawn %v at %d of %v; want turn 1 withdrawn from %d, before any new word", w, withdrawn, kinds(fromB), firstWord)
		}
	}
	if i := slices.IndexFunc(fromB, func(ev *agentdv1.GenerateResponse) bool { return ev.GetUsage() != nil }); i < 0 || !fromB[i].GetUsage().GetRepeated() || fromB[i].GetUsage().GetTurn() != 1 {
		t.Errorf("X-G3 the asked-again turn's usage is not marked repeated: %v", kinds(fromB))
	}
	final := all[len(all)-1].GetCompleted()
	if final == nil {
		t.Fatalf("the reattached client's events end %v; want completed", kinds(all))
	}
	if got, want := clientText(all), textOf(final.GetMessage()); got != want || want != strings.Join(model.full, "") {
		t.Errorf("X-G2 the client's text without what was withdrawn is %q; the final message's is %q (want %q)", got, want, strings.Join(model.full, ""))
	}
	if reqs := model.requests(); len(reqs) != 1 || len(reqs[0]) != 2 || reqs[0][0] != reqs[0][1] {
		t.Errorf("X-G3 the model was asked %v; want the one conversation twice, the same both times", reqs)
	}
	log := c.logged(t, id)
	if got, want := log, storedOf(t, all, log, logged); !cmp.Equal(got, want, asLogged) {
		t.Errorf("X-G2 the client saw events the log does not hold, or missed some (-log +client):\n%s", cmp.Diff(got, want, asLogged))
	}
	if n := len(lines(t, c.counter)); n != 0 {
		t.Errorf("the counting server saw %d calls; want none", n)
	}
}

// wantAdoptedNumbering fails unless events are numbered from 1, one more
// each, but for the adopting replica's started, numbered past the dead
// replica's last stored event (by its show window: server's tests check
// how far).
func wantAdoptedNumbering(t *testing.T, events []*agentdv1.GenerateResponse) {
	t.Helper()
	for i := 1; i < len(events); i++ {
		prev, seq := events[i-1].GetSequence(), events[i].GetSequence()
		if seq == prev+1 || (events[i].GetStarted().GetAdopted() && seq > prev) {
			continue
		}
		t.Fatalf("X-G2 the client's events %v: event %d numbered %d after %d", kinds(events), i, seq, prev)
	}
}

// storedOf is what of a client's events all the log should hold: all of
// them, but the words that a replica showed before storing them and died
// (only when the partial turn was not logged), which a turn_withdrawn took
// back.
func storedOf(t *testing.T, all, log []*agentdv1.GenerateResponse, logged bool) []*agentdv1.GenerateResponse {
	t.Helper()
	inLog := make(map[int64]bool, len(log))
	for _, ev := range log {
		inLog[ev.GetSequence()] = true
	}
	var out []*agentdv1.GenerateResponse
	for _, ev := range all {
		if inLog[ev.GetSequence()] {
			out = append(out, ev)
			continue
		}
		if logged || ev.GetTextDelta() == nil {
			t.Errorf("X-G2 the client saw %v, which the log does not hold", ev)
		}
	}
	return out
}

// clientText is the text a client shows from events: every word, less
// those that a turn_withdrawn took back.
func clientText(evs []*agentdv1.GenerateResponse) string {
	type word struct {
		seq  int64
		text string
	}
	var words []word
	for _, ev := range evs {
		switch {
		case ev.GetTextDelta() != nil:
			words = append(words, word{ev.GetSequence(), ev.GetTextDelta().GetText()})
		case ev.GetTurnWithdrawn() != nil:
			from := ev.GetTurnWithdrawn().GetFromSequence()
			words = slices.DeleteFunc(words, func(w word) bool { return w.seq >= from })
		}
	}
	var b strings.Builder
	for _, w := range words {
		b.WriteString(w.text)
	}
	return b.String()
}

func textOf(m *agentdv1.Message) string {
	var b strings.Builder
	for _, p := range m.GetParts() {
		b.WriteString(p.GetText())
	}
	return b.String()
}

// X-G5 (with X-G3): many at once. 50 detached generations on two
// replicas sharing one PostgreSQL database, 25 started on each; each
// calls "gate", then "delete" (its own path), then answers with the
// last result. With every gate call in flight, a quarter of replica A's
// generations are let through; then A is SIGKILLed and every gate
// opens. Every generation ends completed, proven by the store: exactly
// the 50 records, none lost and none made twice. The counting server saw
// each call at most once: every gate call exactly once (the ones in
// flight on A reach the model as of unknown outcome, and are not run
// again), every delete at most once, and exactly once where the model
// saw its result. A's generations whose gate was still closed at the
// kill were adopted by B, which ran their delete.
func TestProofManyGenerations(t *testing.T) {
	t.Parallel()
	const n = 50
	c := newProofCluster(t, config.StorePostgres, "")
	a, b := c.start(t, c.dsn), c.start(t, c.dsn)
	replicas := []*proofReplica{a, b}
	markers, ids := make([]string, n), make([]string, n)
	for i := range n {
		markers[i] = fmt.Sprintf("g%02d", i)
		agent := filesScriptAgent(t, callsTurn(toolCall("gate", "marker", markers[i])), callsTurn(toolCall("delete", "path", "del-"+markers[i])), outputsTurn)
		ids[i] = replicas[i%2].startDetached(t, agent)
	}
	for _, m := range markers {
		waitLine(t, c.counter, "gate:"+m)
	}
	for i := 0; i < n; i += 4 {
		c.openGate(t, markers[i])
	}
	waitLine(t, c.counter, "del-"+markers[0]) // A went on with one at least
	a.kill(t)
	c.openGate(t, "all")

	adopted, unknown := 0, 0
	for i, id := range ids {
		text := c.waitCompleted(t, id)
		m := markers[i]
		logged := c.logged(t, id)
		if checkRun(t, id, logged) > 0 {
			adopted++
		}
		gateOut := "(none)"
		if i := slices.IndexFunc(logged, func(ev *agentdv1.GenerateResponse) bool { return ev.GetToolCallFinished().GetToolName() == "gate" }); i >= 0 {
			gateOut = logged[i].GetToolCallFinished().GetOutput()
		}
		gateUnknown := unknownOutcome(gateOut)
		if gateUnknown {
			unknown++
		}
		if got := c.count(t, "gate:"+m); got != 1 {
			t.Errorf("X-G5 %s: the counting server saw its gate call %d times; want once", m, got)
		}
		switch dels := c.count(t, "del-"+m); {
		case dels > 1:
			t.Errorf("X-G5 %s: the counting server saw its delete %d times; want at most once", m, dels)
		case text == "deleted del-"+m && dels != 1:
			t.Errorf("X-G5 %s: the model saw its delete's result, and the counting server saw the call %d times; want once", m, dels)
		case text != "deleted del-"+m && !unknownOutcome(text):
			t.Errorf("%s: the model's last turn saw %q; want its delete's result, or that it may or may not have run", m, text)
		}
		if i%4 == 2 && (!gateUnknown || text != "deleted del-"+m) { // on A, gate closed at the kill
			t.Errorf("X-G3 %s: in flight on the killed replica, it ended with its gate call's result %q and the last turn seeing %q; want the gate call of unknown outcome and the delete run by the adopter", m, gateOut, text)
		}
	}

	var all []string
	for token := ""; ; {
		page, next, err := c.store.Generations().List(t.Context(), "", store.ListOptions{PageToken: token, PageSize: 20})
		if err != nil {
			t.Fatal(err)
		}
		for _, g := range page {
			all = append(all, g.ID)
			if g.State != store.Completed {
				t.Errorf("X-G5 generation %s is %s in the store; want completed", g.ID, g.State)
			}
		}
		if token = next; token == "" {
			break
		}
	}
	slices.Sort(all)
	want := slices.Sorted(slices.Values(ids))
	if diff := cmp.Diff(want, all); diff != "" {
		t.Errorf("X-G5 the store's generations differ from the 50 started (-started +stored):\n%s", diff)
	}
	t.Logf("%d generations adopted, %d with a gate call of unknown outcome", adopted, unknown)
}
