package server_test

import (
	"context"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.opentelemetry.io/otel/trace"
	grpccodes "google.golang.org/grpc/codes"
	"google.golang.org/protobuf/types/known/durationpb"

	bridgev1 "github.com/agentd/agentd/gen/go/agentd/bridge/v1"
	agentdv1 "github.com/agentd/agentd/gen/go/agentd/v1"
	"github.com/agentd/agentd/internal/config"
	"github.com/agentd/agentd/internal/store"
	"github.com/agentd/agentd/internal/testwait"
	"github.com/agentd/agentd/providers"
	"github.com/agentd/agentd/server"
)

// observed is an AgentService with a store whose spans and metrics the
// test reads.
type observed struct {
	client agentdv1.AgentServiceClient
	spans  *tracetest.SpanRecorder
	reader *sdkmetric.ManualReader
}

func newObserved(t *testing.T) *observed {
	t.Helper()
	o := &observed{spans: tracetest.NewSpanRecorder(), reader: sdkmetric.NewManualReader()}
	tp := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(o.spans))
	mp := sdkmetric.NewMeterProvider(sdkmetric.WithReader(o.reader))
	t.Cleanup(func() { _ = mp.Shutdown(context.Background()) })
	st := newStore(t, 0)
	bridge := &fakeBridge{onList: offering(serverTools("files", "read", "delete"))}
	o.client = newClientWith(t, server.Options{Bridge: bridge, TracerProvider: tp, MeterProvider: mp,
		Checkpoints: st, Generations: st.Generations(), Replica: "replica-a", Config: config.Default().Generation}, recordingScript())
	return o
}

// ended returns the ended spans named name.
func (o *observed) ended(name string) []sdktrace.ReadOnlySpan {
	var out []sdktrace.ReadOnlySpan
	for _, s := range o.spans.Ended() {
		if s.Name() == name {
			out = append(out, s)
		}
	}
	return out
}

// attrs returns the span's attributes as strings (slices in JSON).
func attrs(s sdktrace.ReadOnlySpan) map[string]string {
	out := map[string]string{}
	for _, kv := range s.Attributes() {
		out[string(kv.Key)] = kv.Value.String()
	}
	return out
}

// X-O2: the wait for an approval is an await_approval span (INTERNAL)
// under the generation's invoke_agent span, naming the requests it waits
// for, with each decision as an event, and ending with how the wait
// ended: the decision, or the pause (paused, or expired for the answer
// timeout), which is not an error. X-O1: the requests, the decisions and
// the requests pending are counted, by server and tool.
func TestAwaitApprovalSpan(t *testing.T) {
	t.Parallel()
	const request = "approval_call_1_2"
	tests := []struct {
		name     string
		timeout  time.Duration // the answer timeout; 0: the default
		respond  func(*agentdv1.GenerateResponse, stream)
		decision string // the span's agentd.approval.decision
		events   []string
		paused   bool
		metrics  map[string]float64
	}{
		{
			name: "approved",
			respond: func(ev *agentdv1.GenerateResponse, s stream) {
				if r := ev.GetApprovalRequest(); r != nil {
					_ = s.Send(approve(r.GetId(), r.GetDigest(), true))
				}
			},
			decision: "approved",
			events:   []string{"approval decided " + request + " approved"},
			metrics: map[string]float64{
				"agentd.approvals.decided{decision=approved,server=files,tenant=,tool=delete}": 1,
			},
		},
		{
			name: "denied",
			respond: func(ev *agentdv1.GenerateResponse, s stream) {
				if r := ev.GetApprovalRequest(); r != nil {
					_ = s.Send(approve(r.GetId(), r.GetDigest(), false))
				}
			},
			decision: "denied",
			events:   []string{"approval decided " + request + " denied"},
			metrics: map[string]float64{
				"agentd.approvals.decided{decision=denied,server=files,tenant=,tool=delete}": 1,
			},
		},
		{
			name:     "paused: the client half-closed",
			decision: "paused",
			paused:   true,
		},
		{
			name:     "expired: the answer timeout ran out",
			timeout:  time.Nanosecond,
			respond:  func(*agentdv1.GenerateResponse, stream) {},
			decision: "expired",
			paused:   true,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			o := newObserved(t)
			start := &agentdv1.StartGeneration{Agent: filesAgent(t), Messages: userSays("tidy")}
			if tt.timeout > 0 {
				start.AnswerTimeout = durationpb.New(tt.timeout)
			}
			respond, pendingSeen := tt.respond, -1.0
			if respond != nil {
				respond = func(ev *agentdv1.GenerateResponse, s stream) {
					if ev.GetApprovalRequest() != nil {
						pendingSeen = collect(t, o.reader)["agentd.approvals.pending{tenant=}"]
					}
					tt.respond(ev, s)
				}
			}
			events, st := generate(t, o.client, start, respond)
			if respond != nil && tt.timeout == 0 && pendingSeen != 1 { // (an expired one may be over before the client reads it)
				t.Errorf("agentd.approvals.pending while the client had the request: %v; want 1", pendingSeen)
			}
			wantCode(t, st, grpccodes.OK)
			if got := events[len(events)-1].GetPaused() != nil; got != tt.paused {
				t.Fatalf("events %v; paused: %v, want %v", kinds(events), got, tt.paused)
			}

			invoke := runsEnded(t, o.spans, 1)
			waits := o.ended("await_approval")
			if len(waits) != 1 || len(invoke) != 1 {
				t.Fatalf("%d await_approval and %d invoke_agent spans; want one each", len(waits), len(invoke))
			}
			w := waits[0]
			if w.SpanKind() != trace.SpanKindInternal || w.Parent().SpanID() != invoke[0].SpanContext().SpanID() {
				t.Errorf("await_approval: kind %v, parent %v; want INTERNAL under invoke_agent", w.SpanKind(), w.Parent().SpanID())
			}
			if w.Status().Code == codes.Error {
				t.Errorf("await_approval ended as an error: %v", w.Status())
			}
			want := map[string]string{"agentd.approval.request_ids": `["` + request + `"]`, "agentd.approval.decision": tt.decision}
			if diff := cmp.Diff(want, attrs(w)); diff != "" {
				t.Errorf("await_approval attributes (-want +got):\n%s", diff)
			}
			var got []string
			for _, ev := range w.Events() {
				a := map[attribute.Key]string{}
				for _, kv := range ev.Attributes {
					a[kv.Key] = kv.Value.String()
				}
				got = append(got, ev.Name+" "+a["agentd.approval.request_id"]+" "+a["agentd.approval.decision"])
			}
			if diff := cmp.Diff(tt.events, got); diff != "" {
				t.Errorf("await_approval events (-want +got):\n%s", diff)
			}

			wantMetrics := map[string]float64{
				"agentd.approvals.requested{server=files,tenant=,tool=delete}": 1,
				"agentd.approvals.pending{tenant=}":                            0,
			}
			for k, v := range tt.metrics {
				wantMetrics[k] = v
			}
			gotMetrics := map[string]float64{}
			for k, v := range collect(t, o.reader) {
				if strings.HasPrefix(k, "agentd.approvals.") {
					gotMetrics[k] = v
				}
			}
			if diff := cmp.Diff(wantMetrics, gotMetrics); diff != "" {
				t.Errorf("approval metrics (-want +got):\n%s", diff)
			}
		})
	}
}

// X-O2: a resumed generation's invoke_agent span is in a trace of its
// own, with the same gen_ai.conversation.id as its start's, and links to
// the start's invoke_agent span; a resume's decisions, which came with it,
// are counted (X-O1) but it waits for nothing, so it has no
// await_approval span.
func TestResumeLinksToStart(t *testing.T) {
	t.Parallel()
	o := newObserved(t)
	events, st := generate(t, o.client, &agentdv1.StartGeneration{Agent: filesAgent(t), Messages: userSays("tidy")}, nil)
	wantCode(t, st, grpccodes.OK)
	paused := pausedEvent(t, events)
	req := paused.GetApprovalRequests()[0]
	events, st = run(t, o.client, resumeRequest(paused.GetGenerationId(), filesAgent(t),
		&agentdv1.ApprovalDecision{RequestId: req.GetId(), Approved: true, Digest: req.GetDigest()}), nil)
	wantCode(t, st, grpccodes.OK)
	if k := kinds(events); k[len(k)-1] != "completed" {
		t.Fatalf("resumed events %v; want completed", k)
	}

	runs := runsEnded(t, o.spans, 2)
	if len(runs) != 2 {
		t.Fatalf("%d invoke_agent spans; want the start's and the resume's", len(runs))
	}
	first, resumed := runs[0], runs[1]
	if first.SpanContext().TraceID() == resumed.SpanContext().TraceID() {
		t.Error("the resume ran in the start's trace; want a trace of its own, linked")
	}
	for _, s := range runs {
		if got := attrs(s)["gen_ai.conversation.id"]; got != paused.GetGenerationId() {
			t.Errorf("gen_ai.conversation.id %q; want the generation's id %q", got, paused.GetGenerationId())
		}
	}
	if got := attrs(first)["agentd.run"] + " " + attrs(resumed)["agentd.run"]; got != "start resume" {
		t.Errorf("agentd.run of the two runs: %q; want start, resume", got)
	}
	if len(first.Links()) != 0 {
		t.Errorf("the start's span has links %v; want none", first.Links())
	}
	links := resumed.Links()
	if len(links) != 1 || links[0].SpanContext.TraceID() != first.SpanContext().TraceID() || links[0].SpanContext.SpanID() != first.SpanContext().SpanID() {
		t.Fatalf("the resume's links %v; want one, to the start's invoke_agent span %v", links, first.SpanContext())
	}
	if n := len(o.ended("await_approval")); n != 1 {
		t.Errorf("%d await_approval spans; want the start's only", n)
	}
	got := collect(t, o.reader)
	if got["agentd.approvals.decided{decision=approved,server=files,tenant=,tool=delete}"] != 1 || got["agentd.approvals.pending{tenant=}"] != 0 {
		t.Errorf("approval metrics after the resume: %v; want one approved, none pending", got)
	}
}

// X-O2, X-O1: the wait for a function's result is an await_approval span
// too, naming the call and ending answered; the function's execution is
// recorded in gen_ai.execute_tool.duration as a function tool, from the
// request to the client until its result.
func TestAwaitFunctionResult(t *testing.T) {
	t.Parallel()
	o := newObserved(t)
	agent := &agentdv1.Agent{Provider: "script", Tools: []*agentdv1.FunctionTool{{Name: "ask"}},
		ProviderOptions: script(t, `{"turns": [{"tool_calls": [{"name": "ask", "id": "c1"}]}, {"text": "done"}]}`)}
	_, st := generate(t, o.client, &agentdv1.StartGeneration{Agent: agent, Messages: userSays("go")}, func(ev *agentdv1.GenerateResponse, s stream) {
		if fc := ev.GetFunctionCall(); fc != nil {
			_ = s.Send(functionResult(fc.GetCallId(), "answered"))
		}
	})
	wantCode(t, st, grpccodes.OK)
	waits := o.ended("await_approval")
	if len(waits) != 1 {
		t.Fatalf("%d await_approval spans; want 1", len(waits))
	}
	want := map[string]string{"agentd.function.call_ids": `["c1"]`, "agentd.approval.decision": "answered"}
	if diff := cmp.Diff(want, attrs(waits[0])); diff != "" {
		t.Errorf("await_approval attributes (-want +got):\n%s", diff)
	}
	if evs := waits[0].Events(); len(evs) != 1 || evs[0].Name != "function result" {
		t.Errorf("await_approval events %v; want one function result", evs)
	}
	const key = "gen_ai.execute_tool.duration{gen_ai.tool.name=ask,gen_ai.tool.type=function,server=,tenant=}#count"
	if got := collect(t, o.reader)[key]; got != 1 {
		t.Errorf("%s = %v; want 1", key, got)
	}
}

// X-O2: a generation adopted from a replica that died runs in a trace of
// its own, its invoke_agent span (agentd.run adoption) linking to the
// span of the generation's start on the dead replica.
func TestAdoptionLinksToStart(t *testing.T) {
	t.Parallel()
	spans := tracetest.NewSpanRecorder()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(spans))
	st := newStore(t, 0)
	replica := func(name string, gens store.Generations, bridge server.Bridge) agentdv1.AgentServiceClient {
		reg, err := providers.NewRegistry(recordingScript())
		if err != nil {
			t.Fatal(err)
		}
		cfg := config.Default().Generation
		cfg.LeaseTTL = time.Second // as adoptReplica's
		cfg.AdoptInterval = 20 * time.Millisecond
		svc := server.New(server.Options{Providers: reg, Bridge: bridge, Config: cfg, Checkpoints: st, Generations: gens, Replica: name, TracerProvider: tp})
		svc.StartAdopter()
		client := agentdv1.NewAgentServiceClient(dial(t, svc.Register))
		t.Cleanup(svc.Close)
		return client
	}
	hung := make(chan struct{})
	bridgeA := &fakeBridge{onList: offering(serverTools("files", "slow")), onCall: func(ctx context.Context, _, _, _ string) (*bridgev1.CallToolResponse, error) {
		select {
		case <-hung:
			return nil, errSevered
		case <-ctx.Done():
			return nil, context.Cause(ctx)
		}
	}}
	gensA := &severable{Generations: st.Generations()}
	a := replica("replica-a", gensA, bridgeA)
	agent := &agentdv1.Agent{Provider: "script", Mcps: []*agentdv1.MCPServer{commandServer("files", "files-server")}, ProviderOptions: script(t, `{"turns": [
		{"tool_calls": [{"name": "slow", "arguments": {}}]}, {"text": "done"}]}`)}
	id := startDetached(t, a, &agentdv1.StartGeneration{Agent: agent, Messages: userSays("go")})
	testwait.For(t, "the call to slow", func() bool { return bridgeA.callsTo("slow") == 1 }) // checkpointed before it ran
	gensA.dead.Store(true)                                                                   // replica-a dies

	b := replica("replica-b", st.Generations(), &fakeBridge{onList: offering(serverTools("files", "slow"))})
	events, status := attachTo(t, b, id, 0)
	if status.Code() != grpccodes.OK || events[len(events)-1].GetCompleted() == nil {
		t.Fatalf("the attached stream sent %v and ended %v; want completed", kinds(events), status)
	}
	close(hung) // replica-a's call ends, and its run with it
	// Both runs' spans end after their work: the adoption's once its run
	// returns, which may be after the attached stream has its completed
	// event; the start's once its hung call has ended.
	var start, adopted sdktrace.ReadOnlySpan
	testwait.For(t, "the runs' invoke_agent spans ended", func() bool {
		for _, s := range spans.Ended() {
			if s.Name() == "invoke_agent" {
				switch attrs(s)["agentd.run"] {
				case "start":
					start = s
				case "adoption":
					adopted = s
				}
			}
		}
		return start != nil && adopted != nil
	})
	// replica-a comes back: its record's writes are refused at once
	// (fenced), rather than retried until they time out.
	gensA.dead.Store(false)
	if got := attrs(adopted)["gen_ai.conversation.id"]; got != id {
		t.Errorf("the adoption's gen_ai.conversation.id %q; want %q", got, id)
	}
	links := adopted.Links()
	if len(links) != 1 || links[0].SpanContext.SpanID() != start.SpanContext().SpanID() || links[0].SpanContext.TraceID() != start.SpanContext().TraceID() {
		t.Errorf("the adoption's links %v; want one, to the start's span %v", links, start.SpanContext())
	}
	if adopted.SpanContext().TraceID() == start.SpanContext().TraceID() {
		t.Error("the adoption ran in the start's trace; want a trace of its own, linked")
	}
	// Each run's started event names its run's trace.
	var traces []string
	for _, ev := range events {
		if s := ev.GetStarted(); s != nil {
			traces = append(traces, s.GetTraceId())
		}
	}
	if want := []string{start.SpanContext().TraceID().String(), adopted.SpanContext().TraceID().String()}; !slices.Equal(traces, want) {
		t.Errorf("the started events' trace ids %v; want the start's, then the adoption's: %v", traces, want)
	}
}
