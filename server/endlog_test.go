package server_test

import (
	"context"
	"encoding/json"
	"errors"
	"iter"
	"log/slog"
	"strings"
	"testing"

	"github.com/agentd/agentd/internal/logtest"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
	"google.golang.org/grpc/codes"

	agentdv1 "github.com/agentd/agentd/gen/go/agentd/v1"
	"github.com/agentd/agentd/internal/config"
	"github.com/agentd/agentd/internal/fault"
	"github.com/agentd/agentd/internal/store"
	"github.com/agentd/agentd/internal/testwait"
	"github.com/agentd/agentd/providers"
	"github.com/agentd/agentd/server"
)

// logLines is a JSON log written by concurrent goroutines.
type logLines struct{ logtest.Logs }

// logger writes JSON lines, from debug up, into l.
func (l *logLines) logger() *slog.Logger {
	return slog.New(slog.NewJSONHandler(l, &slog.HandlerOptions{Level: slog.LevelDebug}))
}

// named returns the lines whose message is msg, decoded.
func (l *logLines) named(t *testing.T, msg string) []map[string]any {
	t.Helper()
	var out []map[string]any
	for line := range strings.Lines(l.String()) {
		var m map[string]any
		if err := json.Unmarshal([]byte(line), &m); err != nil {
			t.Fatalf("a log line is not JSON: %q: %v", line, err)
		}
		if m["msg"] == msg {
			out = append(out, m)
		}
	}
	return out
}

// loggedService serves an AgentService logging JSON into the returned
// lines, with a durable record when withStore; the Service closes when
// the test ends, and close closes it sooner (idempotent).
func loggedService(t *testing.T, withStore bool, bridge server.Bridge, ps ...providers.Provider) (client agentdv1.AgentServiceClient, lines *logLines, st store.Store, close func()) {
	t.Helper()
	reg, err := providers.NewRegistry(ps...)
	if err != nil {
		t.Fatal(err)
	}
	lines = &logLines{}
	opts := server.Options{Providers: reg, Bridge: bridge, Config: config.Default().Generation, Logger: lines.logger()}
	if withStore {
		st = newStore(t, 0)
		opts.Checkpoints, opts.Generations, opts.Replica = st, st.Generations(), "replica-a"
	}
	svc := server.New(opts)
	client = agentdv1.NewAgentServiceClient(dial(t, svc.Register))
	t.Cleanup(svc.Close)
	return client, lines, st, svc.Close
}

// usageTurns is a provider named "fake" that asks for read, then answers
// "done"; each turn reports its usage.
func usageTurns() *fakeProvider {
	return &fakeProvider{name: "fake", stream: func(_ context.Context, req *providers.Request) iter.Seq2[providers.Event, error] {
		if len(req.Messages) == 1 {
			return turnOf(
				&providers.ToolCall{Call: &agentdv1.ToolCall{Id: "c1", Name: "read", Arguments: `{"path":"a.txt"}`}},
				&providers.Usage{Usage: &agentdv1.Usage{InputTokens: 10, OutputTokens: 5, CacheReadInputTokens: 3}},
			)
		}
		return turnOf(&providers.TextDelta{Text: "done"}, &providers.Usage{Usage: &agentdv1.Usage{InputTokens: 20, OutputTokens: 7}})
	}}
}

// failing is a provider named "fake" whose turn fails with err, or, when
// err is nil, waits for its context to end.
func failing(err error) *fakeProvider {
	return &fakeProvider{name: "fake", stream: func(ctx context.Context, _ *providers.Request) iter.Seq2[providers.Event, error] {
		return func(yield func(providers.Event, error) bool) {
			if err == nil {
				<-ctx.Done()
				yield(nil, context.Cause(ctx))
				return
			}
			yield(nil, err)
		}
	}}
}

// Secrets the end line must never carry.
const (
	secretAuthorization = "Bearer sk-live-do-not-log"
	secretPath          = "/tenant-7/private-path"
	secretText          = "my bank password is hunter2"
)

func secretAgent() *agentdv1.Agent {
	return &agentdv1.Agent{Provider: "fake", Model: "m-1", Mcps: []*agentdv1.MCPServer{{
		Name: "files", Transport: &agentdv1.MCPServer_Url{Url: "https://mcp.example.com" + secretPath}, Authorization: secretAuthorization,
	}}}
}

// endLine is the one "generation ended" line of generation id.
func endLine(t *testing.T, lines *logLines, id string) map[string]any {
	t.Helper()
	var found []map[string]any
	for _, l := range lines.named(t, "generation ended") {
		if l["generation"] == id {
			found = append(found, l)
		}
	}
	if len(found) != 1 {
		t.Fatalf("%d \"generation ended\" lines for %s; want exactly 1:\n%s", len(found), id, lines.String())
	}
	return found[0]
}

// ignoreVolatile leaves out what differs from run to run: the time, and
// the duration, whose type is checked apart.
var ignoreVolatile = cmpopts.IgnoreMapEntries(func(k string, _ any) bool { return k == "time" || k == "duration" })

// wantNumber fails unless line's key is a JSON number.
func wantNumber(t *testing.T, line map[string]any, key string) {
	t.Helper()
	if _, ok := line[key].(float64); !ok {
		t.Errorf("%s = %#v; want a JSON number", key, line[key])
	}
}

// X-O4: a generation's end is one "generation ended" line with its id,
// tenant, provider, model, this run's tokens (cache reads as
// cached_tokens), tool calls and model turns, its duration in
// milliseconds as a number, and its outcome: completed, failed (warn,
// or error when INTERNAL) or cancelled, with the gRPC code of the last
// two. The line never carries the agent's credentials, its servers' URL
// paths or the conversation's text.
func TestGenerationEndLine(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name     string
		provider *fakeProvider
		respond  func(*agentdv1.GenerateResponse, stream)
		code     codes.Code
		want     map[string]any
	}{{
		name:     "completed",
		provider: usageTurns(),
		code:     codes.OK,
		want: map[string]any{
			"level": "INFO", "outcome": "completed",
			"input_tokens": 30.0, "output_tokens": 12.0, "cached_tokens": 3.0, "tool_calls": 1.0, "turns": 2.0,
		},
	}, {
		name:     "failed",
		provider: failing(fault.New(fault.Unavailable, "the provider is down")),
		code:     codes.Unavailable,
		want: map[string]any{
			"level": "WARN", "outcome": "failed", "code": "UNAVAILABLE", "err": "the provider is down",
			"input_tokens": 0.0, "output_tokens": 0.0, "cached_tokens": 0.0, "tool_calls": 0.0, "turns": 1.0,
		},
	}, {
		name:     "failed inside agentd",
		provider: failing(errors.New("a bug")),
		code:     codes.Internal,
		want: map[string]any{
			"level": "ERROR", "outcome": "failed", "code": "INTERNAL", "err": "a bug",
			"input_tokens": 0.0, "output_tokens": 0.0, "cached_tokens": 0.0, "tool_calls": 0.0, "turns": 1.0,
		},
	}, {
		name:     "cancelled",
		provider: failing(nil),
		respond: func(ev *agentdv1.GenerateResponse, s stream) {
			if ev.GetStarted() != nil {
				_ = s.Send(cancelRequest())
			}
		},
		code: codes.Canceled,
		want: map[string]any{
			"level": "INFO", "outcome": "cancelled", "code": "CANCELLED",
			"input_tokens": 0.0, "output_tokens": 0.0, "cached_tokens": 0.0, "tool_calls": 0.0, "turns": 1.0,
		},
	}}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			bridge := &fakeBridge{onList: offering(serverTools("files", "read"))}
			client, lines, _, _ := loggedService(t, false, bridge, tt.provider)
			events, st := generate(t, client, &agentdv1.StartGeneration{Agent: secretAgent(), Messages: userSays(secretText)}, tt.respond)
			wantCode(t, st, tt.code)
			id := started(t, events).GetGenerationId()
			got := endLine(t, lines, id)
			want := map[string]any{"msg": "generation ended", "generation": id, "tenant": "", "provider": "fake", "model": "m-1"}
			for k, v := range tt.want {
				want[k] = v
			}
			if diff := cmp.Diff(want, got, ignoreVolatile); diff != "" {
				t.Errorf("the end line differs (-want +got):\n%s", diff)
			}
			wantNumber(t, got, "duration")
			for _, secret := range []string{secretAuthorization, "sk-live", secretPath, "hunter2"} {
				if strings.Contains(lines.String(), secret) {
					t.Errorf("the log holds %q:\n%s", secret, lines.String())
				}
			}
		})
	}
}

// X-O4: a pause is logged ("generation paused": its pending approvals and
// function calls, and why) and ends its run with a paused end line; the
// resume is logged ("generation resumed") and its own end line counts
// what the resume did, not what the first run did.
func TestPauseAndResumeLines(t *testing.T) {
	t.Parallel()
	bridge := &fakeBridge{onList: offering(serverTools("files", "read", "delete"))}
	client, lines, _, _ := loggedService(t, true, bridge, recordingScript())
	agent := filesAgent(t)
	events, st := generate(t, client, &agentdv1.StartGeneration{Agent: agent, Messages: userSays("tidy")}, func(ev *agentdv1.GenerateResponse, s stream) {
		if ev.GetApprovalRequest() != nil {
			_ = s.CloseSend()
		}
	})
	wantCode(t, st, codes.OK)
	id := started(t, events).GetGenerationId()
	paused := pausedEvent(t, events)

	pauses := lines.named(t, "generation paused")
	if len(pauses) != 1 {
		t.Fatalf("%d \"generation paused\" lines; want 1:\n%s", len(pauses), lines.String())
	}
	wantPause := map[string]any{
		"level": "INFO", "msg": "generation paused", "generation": id, "tenant": "",
		"pending_approvals": 1.0, "pending_functions": 0.0, "pending_authorizations": 0.0, "pending_inputs": 0.0, "why": "the client half-closed the stream or went away",
	}
	if diff := cmp.Diff(wantPause, pauses[0], ignoreVolatile); diff != "" {
		t.Errorf("the pause line differs (-want +got):\n%s", diff)
	}
	first := endLine(t, lines, id)
	if first["outcome"] != "paused" || first["tool_calls"] != 1.0 || first["turns"] != 1.0 || first["level"] != "INFO" {
		t.Errorf("the paused run's end line = %v; want outcome paused, 1 tool call (read), 1 turn, at info", first)
	}

	var decisions []*agentdv1.ApprovalDecision
	for _, r := range paused.GetApprovalRequests() {
		decisions = append(decisions, &agentdv1.ApprovalDecision{RequestId: r.GetId(), Approved: true})
	}
	resumed, st := run(t, client, resumeRequest(id, agent, decisions...), nil)
	wantCode(t, st, codes.OK)
	if resumed[len(resumed)-1].GetCompleted() == nil {
		t.Fatalf("the resume ended %v; want completed", kinds(resumed))
	}
	if n := len(lines.named(t, "generation resumed")); n != 1 {
		t.Errorf("%d \"generation resumed\" lines; want 1", n)
	}
	var ends []map[string]any
	for _, l := range lines.named(t, "generation ended") {
		if l["generation"] == id {
			ends = append(ends, l)
		}
	}
	if len(ends) != 2 {
		t.Fatalf("%d end lines for %s; want one per run (paused, then completed)", len(ends), id)
	}
	if last := ends[1]; last["outcome"] != "completed" || last["tool_calls"] != 1.0 || last["turns"] != 1.0 {
		t.Errorf("the resume's end line = %v; want outcome completed, 1 tool call (delete), 1 turn", last)
	}
}

// X-O4: a detached generation, which ends with no client, logs its end
// once too.
func TestDetachedGenerationEndLine(t *testing.T) {
	t.Parallel()
	client, lines, st, closeService := loggedService(t, true, &fakeBridge{}, recordingScript())
	id := startDetached(t, client, &agentdv1.StartGeneration{Agent: textAgent(t, "done"), Messages: userSays("hi")})
	waitRecord(t, st.Generations(), id, func(g store.Generation) bool { return g.State == store.Completed })
	closeService() // joins the generation's goroutine: its line is written
	got := endLine(t, lines, id)
	if got["outcome"] != "completed" || got["provider"] != "script" || got["turns"] != 1.0 {
		t.Errorf("the detached generation's end line = %v; want completed, provider script, 1 turn", got)
	}
}

// X-O4: a generation adopted from a dead replica logs its end once, on the
// replica that adopted it: completed when it continues, failed
// (FAILED_PRECONDITION, at warn) when it cannot, its agent's secrets
// being out of reach; the dead replica's run logs no end.
func TestAdoptedGenerationEndLine(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name   string
		secret bool
		want   map[string]any
	}{
		{name: "it continues", want: map[string]any{"outcome": "completed", "level": "INFO", "provider": "plain", "turns": 1.0}},
		{name: "it cannot continue", secret: true, want: map[string]any{"outcome": "failed", "level": "WARN", "code": "FAILED_PRECONDITION"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			st := newStore(t, 0)
			gensA := &severable{Generations: st.Generations()}
			linesA, linesB := &logLines{}, &logLines{}
			a, svcA := replicaWith(t, "replica-a", st, gensA, &fakeBridge{}, nil, linesA.logger(), halfTurn())
			t.Cleanup(func() { gensA.dead.Store(false) })
			files := commandServer("files", "files-server")
			if tc.secret {
				files.Env = map[string]string{"TOKEN": "cnry-sealed-secret"}
			}
			id := startDetached(t, a, &agentdv1.StartGeneration{Agent: &agentdv1.Agent{Provider: "plain", Mcps: []*agentdv1.MCPServer{files}}, Messages: userSays("hi")})
			testwait.For(t, "two events in the log", func() bool { return len(storedEvents(t, &pausable{store: st}, id)) >= 2 })
			gensA.dead.Store(true)

			b, svcB := replicaWith(t, "replica-b", st, st.Generations(), &fakeBridge{}, nil, linesB.logger(), plainProvider())
			attachTo(t, b, id, 0)
			svcB.Close()
			gensA.dead.Store(false)
			svcA.Close() // its run of the generation has ended: it would have logged
			got := endLine(t, linesB, id)
			for k, v := range tc.want {
				if got[k] != v {
					t.Errorf("the adopting replica's end line has %s = %v; want %v (line %v)", k, got[k], v, got)
				}
			}
			for _, l := range linesA.named(t, "generation ended") {
				if l["generation"] == id {
					t.Errorf("the dead replica logged an end: %v", l)
				}
			}
			if strings.Contains(linesA.String()+linesB.String(), "cnry-sealed-secret") {
				t.Error("a log holds the agent's secret")
			}
		})
	}
}
