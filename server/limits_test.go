package server_test

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/durationpb"

	bridgev1 "github.com/agentd/agentd/gen/go/agentd/bridge/v1"
	agentdv1 "github.com/agentd/agentd/gen/go/agentd/v1"
	"github.com/agentd/agentd/internal/config"
	agentdrecord "github.com/agentd/agentd/internal/record"
	"github.com/agentd/agentd/internal/store"
	"github.com/agentd/agentd/internal/testwait"
	"github.com/agentd/agentd/providers"
	"github.com/agentd/agentd/server"
)

// bounded is an AgentService with a store whose tenant has the
// generation limits gl (nil: the defaults), pricing every model but
// "unpriced" in euros (perToken), logging JSON lines.
type bounded struct {
	client agentdv1.AgentServiceClient
	store  store.Store
	log    *logLines
}

func newBounded(t *testing.T, bridge server.Bridge, gl *config.GenerationLimits, ps ...providers.Provider) *bounded {
	t.Helper()
	st := newStore(t, 0)
	reg, err := providers.NewRegistry(ps...)
	if err != nil {
		t.Fatal(err)
	}
	log := &logLines{}
	svc := server.New(server.Options{Providers: reg, Bridge: bridge, Config: config.Default().Generation,
		Checkpoints: st, Generations: st.Generations(), Threads: st.Threads(), Replica: "replica-a",
		Prices: perToken{}, Logger: log.logger(),
		Tenants: func(string) (*server.Tenant, bool) { return &server.Tenant{GenerationLimits: gl}, true }})
	conn := dial(t, svc.Register)
	t.Cleanup(svc.Close)
	return &bounded{client: agentdv1.NewAgentServiceClient(conn), store: st, log: log}
}

// echoing is an agent that calls the demo server's echo tool calls times
// a turn, for as many turns as its limits let it, each turn's tokens
// costing 20000 billionths of a euro (perToken: 10 input tokens and 5
// output).
func echoing(t *testing.T, limits *agentdv1.GenerationLimits, calls int) *agentdv1.Agent {
	t.Helper()
	list := strings.Repeat(`{"name": "echo"},`, calls)
	return &agentdv1.Agent{Provider: "script", Model: "m-1", Limits: limits, Mcps: []*agentdv1.MCPServer{refServer("", "demo")},
		ProviderOptions: script(t, `{"turns": [{"repeat": 100, "tool_calls": [`+strings.TrimSuffix(list, ",")+`], "usage": {"input_tokens": 10, "output_tokens": 5}}]}`)}
}

// completion is the completed event that ends events; nil when none
// does.
func completion(events []*agentdv1.GenerateResponse) *agentdv1.GenerationCompleted {
	if len(events) == 0 {
		return nil
	}
	return events[len(events)-1].GetCompleted()
}

// wantNotRun fails unless message holds a result for each of ids saying
// its call did not run for limit.
func wantNotRun(t *testing.T, message *agentdv1.Message, limit string, ids ...string) {
	t.Helper()
	parts := message.GetParts()
	if message.GetRole() != agentdv1.Role_ROLE_TOOL || len(parts) != len(ids) {
		t.Fatalf("the last message is %v; want the results of %v", message, ids)
	}
	for i, id := range ids {
		res := parts[i].GetToolResult()
		if res.GetToolCallId() != id || !res.GetIsError() || !strings.Contains(res.GetOutput(), "not run") || !strings.Contains(res.GetOutput(), limit) {
			t.Errorf("call %s's result is %v; want one saying it did not run, at %s", id, res, limit)
		}
	}
}

// Each limit, reached with on_limit END, completes the generation: the
// completed event and the record name the limit with the figures, the
// model's last message is the message, the calls it asked for past the
// limit are answered as not run (and run nothing), the end line names
// the limit; with on_limit FAIL the generation fails RESOURCE_EXHAUSTED
// with an ErrorInfo naming the limit and the figures.
func TestLimitReached(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name   string
		limits *agentdv1.GenerationLimits
		want   *agentdv1.LimitReached
		reason string
		// What ran: model calls and tool calls; pending, the calls
		// answered as not run.
		models, calls int
		pending       []string
	}{
		{
			name:   "max_tool_calls",
			limits: &agentdv1.GenerationLimits{MaxToolCalls: new(int32(5))},
			want:   &agentdv1.LimitReached{Name: "max_tool_calls", Value: 5, Used: 4, Unit: "tool_calls", Ceiling: config.MaxToolCallsLimit},
			reason: "MAX_TOOL_CALLS", models: 3, calls: 4, pending: []string{"call_3_1", "call_3_2"},
		},
		{
			name:   "max_total_tokens",
			limits: &agentdv1.GenerationLimits{MaxTotalTokens: new(int64(40))},
			want:   &agentdv1.LimitReached{Name: "max_total_tokens", Value: 40, Used: 45, Unit: "tokens"},
			reason: "MAX_TOTAL_TOKENS", models: 3, calls: 6,
		},
		{
			name:   "max_cost",
			limits: &agentdv1.GenerationLimits{MaxCost: &agentdv1.Money{Currency: "EUR", Nanos: 50000}},
			want:   &agentdv1.LimitReached{Name: "max_cost", Value: 50000, Used: 60000, Unit: "EUR"},
			reason: "MAX_COST", models: 3, calls: 6,
		},
	} {
		t.Run(tc.name+" END", func(t *testing.T) {
			t.Parallel()
			bridge := &fakeBridge{onList: offering(serverTools("demo", "echo"))}
			prov := recordingScript()
			l := newBounded(t, bridge, nil, prov)

			events, st := generate(t, l.client, &agentdv1.StartGeneration{Agent: echoing(t, tc.limits, 2), Messages: userSays("go")}, nil)

			wantCode(t, st, codes.OK)
			done := completion(events)
			if diff := protoDiff(tc.want, done.GetLimit()); diff != "" {
				t.Errorf("completed.limit (-want +got):\n%s", diff)
			}
			if done.GetToolCalls() != int32(tc.calls) || len(prov.calls()) != tc.models || bridge.callsTo("echo") != tc.calls {
				t.Errorf("%d tool calls counted, %d model calls and %d tool calls made; want %d, %d and %d",
					done.GetToolCalls(), len(prov.calls()), bridge.callsTo("echo"), tc.calls, tc.models, tc.calls)
			}
			msgs := done.GetMessages()
			last := msgs[len(msgs)-1]
			if tc.pending != nil {
				wantNotRun(t, last, tc.name, tc.pending...)
				last = msgs[len(msgs)-2]
			} else {
				last = msgs[len(msgs)-2] // the results of its calls follow it
			}
			if diff := protoDiff(last, done.GetMessage()); diff != "" {
				t.Errorf("completed.message is not the model's last (-want +got):\n%s", diff)
			}
			res, err := l.client.GetGeneration(t.Context(), &agentdv1.GetGenerationRequest{GenerationId: started(t, events).GetGenerationId()})
			if err != nil {
				t.Fatal(err)
			}
			g := res.GetGeneration()
			if diff := protoDiff(tc.want, g.GetLimit()); diff != "" || g.GetState() != agentdv1.GenerationState_GENERATION_STATE_COMPLETED {
				t.Errorf("the record: %v, limit (-want +got):\n%s", g.GetState(), diff)
			}
			if lines := l.log.named(t, "generation ended"); len(lines) != 1 || lines[0]["limit"] != tc.name || lines[0]["outcome"] != "completed" {
				t.Errorf("end lines %v; want one, completed, naming %s", lines, tc.name)
			}
		})
		t.Run(tc.name+" FAIL", func(t *testing.T) {
			t.Parallel()
			bridge := &fakeBridge{onList: offering(serverTools("demo", "echo"))}
			l := newBounded(t, bridge, nil, recordingScript())
			limits := proto.CloneOf(tc.limits)
			limits.OnLimit = agentdv1.OnLimit_ON_LIMIT_FAIL

			_, st := generate(t, l.client, &agentdv1.StartGeneration{Agent: echoing(t, limits, 2), Messages: userSays("go")}, nil)

			wantCode(t, st, codes.ResourceExhausted)
			wantFacts(t, "status message", st.Message(), tc.name)
			info := errorInfo(st)
			if info.GetReason() != tc.reason || info.GetMetadata()["value"] != fmt.Sprint(tc.want.GetValue()) || info.GetMetadata()["used"] != fmt.Sprint(tc.want.GetUsed()) {
				t.Errorf("ErrorInfo = %v; want %s with value %d, used %d", info, tc.reason, tc.want.GetValue(), tc.want.GetUsed())
			}
			if n := bridge.callsTo("echo"); n != tc.calls {
				t.Errorf("%d tool calls made; want %d", n, tc.calls)
			}
		})
	}
}

// A limit reached with on_limit PAUSE and nobody on the stream pauses
// the generation with an approval whose limit names it, listed with
// the pending requests; DecideRequests refuses a raise_to beyond the
// tenant's ceiling or not above what was used, and one within resumes
// the generation where it stopped: the calls it stopped before run,
// and it completes.
func TestLimitPauseRaised(t *testing.T) {
	t.Parallel()
	bridge := &fakeBridge{onList: offering(serverTools("demo", "echo"))}
	l := newBounded(t, bridge, &config.GenerationLimits{Ceilings: config.LimitValues{MaxToolCalls: 6}}, recordingScript())
	agent := &agentdv1.Agent{Provider: "script", Model: "m-1", Mcps: []*agentdv1.MCPServer{refServer("", "demo")},
		Limits:          &agentdv1.GenerationLimits{MaxToolCalls: new(int32(2)), OnLimit: agentdv1.OnLimit_ON_LIMIT_PAUSE},
		ProviderOptions: script(t, `{"turns": [{"repeat": 4, "tool_calls": [{"name": "echo"}]}, {"text": "done"}]}`)}

	events, st := generate(t, l.client, &agentdv1.StartGeneration{Agent: agent, Messages: userSays("go")}, nil)

	wantCode(t, st, codes.OK)
	paused := pausedEvent(t, events)
	reqs := paused.GetApprovalRequests()
	want := &agentdv1.LimitReached{Name: "max_tool_calls", Value: 2, Used: 2, Unit: "tool_calls", Ceiling: 6}
	if len(reqs) != 1 || !strings.HasPrefix(reqs[0].GetPrompt(), "The generation reached max_tool_calls (2 of 2 tool calls") || reqs[0].GetToolCallId() != "" {
		t.Fatalf("paused with %v; want the approval of max_tool_calls", reqs)
	}
	if diff := protoDiff(want, reqs[0].GetLimit()); diff != "" {
		t.Errorf("the approval's limit (-want +got):\n%s", diff)
	}
	id, req := paused.GetGenerationId(), reqs[0].GetId()
	pending, err := l.client.ListPendingRequests(t.Context(), &agentdv1.ListPendingRequestsRequest{Kinds: []agentdv1.PendingRequestKind{agentdv1.PendingRequestKind_PENDING_REQUEST_KIND_APPROVAL}})
	if err != nil {
		t.Fatal(err)
	}
	if rs := pending.GetRequests(); len(rs) != 1 || rs[0].GetApproval().GetId() != req || rs[0].GetApproval().GetLimit().GetName() != "max_tool_calls" {
		t.Errorf("pending requests %v; want the limit's approval", rs)
	}
	for _, raise := range []int64{7, 2} {
		_, err := l.client.DecideRequests(t.Context(), &agentdv1.DecideRequestsRequest{GenerationId: id,
			ApprovalDecisions: []*agentdv1.ApprovalDecision{{RequestId: req, Approved: true, RaiseTo: raise}}})
		st := status.Convert(err)
		wantCode(t, st, codes.InvalidArgument)
		if !strings.Contains(description(t, st, "approval_decisions[0].raise_to"), map[int64]string{7: "ceiling", 2: "above"}[raise]) {
			t.Errorf("raise_to %d: %v", raise, st)
		}
	}
	if _, err := l.client.DecideRequests(t.Context(), &agentdv1.DecideRequestsRequest{GenerationId: id,
		ApprovalDecisions: []*agentdv1.ApprovalDecision{{RequestId: req, Approved: true, RaiseTo: 4}}}); err != nil {
		t.Fatal(err)
	}

	waitFinished(t, l, id)
	logged, err := agentdrecord.ReadEvents(t.Context(), l.store.Generations(), "", id, 0)
	if err != nil {
		t.Fatal(err)
	}
	done := completion(logged)
	if done.GetLimit() != nil || done.GetToolCalls() != 4 || done.GetMessage().GetParts()[0].GetText() != "done" {
		t.Errorf("completed = %v; want it done, after 4 tool calls", done)
	}
	if n := bridge.callsTo("echo"); n != 4 {
		t.Errorf("echo ran %d times; want 4", n)
	}
	if d := decidedEvents(logged); len(d) != 1 || d[0].GetRequestId() != req || !d[0].GetApproved() {
		t.Errorf("approval_decided %v; want the limit's", d)
	}
}

// waitFinished waits until the record of l's generation id has ended.
func waitFinished(t *testing.T, l *bounded, id string) {
	t.Helper()
	testwait.For(t, "the generation ends", func() bool {
		g, err := l.store.Generations().Get(t.Context(), "", id)
		return err == nil && g.State.Finished()
	})
}

// A limit's approval that a resume declines completes the paused
// generation at the limit: the calls it stopped before never run and
// are answered as not run.
func TestLimitPauseDeclined(t *testing.T) {
	t.Parallel()
	bridge := &fakeBridge{onList: offering(serverTools("demo", "echo"))}
	l := newBounded(t, bridge, nil, recordingScript())
	agent := echoing(t, &agentdv1.GenerationLimits{MaxToolCalls: new(int32(2)), OnLimit: agentdv1.OnLimit_ON_LIMIT_PAUSE}, 1)
	events, _ := generate(t, l.client, &agentdv1.StartGeneration{Agent: agent, Messages: userSays("go")}, nil)
	paused := pausedEvent(t, events)
	req := paused.GetApprovalRequests()[0].GetId()

	events, st := run(t, l.client, resumeRequest(paused.GetGenerationId(), agent, &agentdv1.ApprovalDecision{RequestId: req, Approved: false}), nil)

	wantCode(t, st, codes.OK)
	done := completion(events)
	want := &agentdv1.LimitReached{Name: "max_tool_calls", Value: 2, Used: 2, Unit: "tool_calls", Ceiling: config.MaxToolCallsLimit}
	if diff := protoDiff(want, done.GetLimit()); diff != "" {
		t.Errorf("completed.limit (-want +got):\n%s", diff)
	}
	msgs := done.GetMessages()
	wantNotRun(t, msgs[len(msgs)-1], "max_tool_calls", "call_3_1")
	if n := bridge.callsTo("echo"); n != 2 {
		t.Errorf("echo ran %d times; want 2", n)
	}
	pending, err := l.client.ListPendingRequests(t.Context(), &agentdv1.ListPendingRequestsRequest{})
	if err != nil || len(pending.GetRequests()) != 0 {
		t.Errorf("pending requests %v, %v; want none", pending.GetRequests(), err)
	}
}

// On an attached stream a limit's approval is asked inline: approved
// without raise_to, the limit grows by its first value, as often as it
// is reached; a raise_to not above what was used ends the generation
// INVALID_ARGUMENT, naming it.
func TestLimitAskedInline(t *testing.T) {
	t.Parallel()
	agent := func(t *testing.T) *agentdv1.Agent {
		return &agentdv1.Agent{Provider: "script", Model: "m-1", Mcps: []*agentdv1.MCPServer{refServer("", "demo")},
			Limits:          &agentdv1.GenerationLimits{MaxToolCalls: new(int32(2)), OnLimit: agentdv1.OnLimit_ON_LIMIT_PAUSE},
			ProviderOptions: script(t, `{"turns": [{"repeat": 5, "tool_calls": [{"name": "echo"}]}, {"text": "done"}]}`)}
	}
	answer := func(raise int64) func(*agentdv1.GenerateResponse, stream) {
		return func(ev *agentdv1.GenerateResponse, s stream) {
			if req := ev.GetApprovalRequest(); req.GetLimit() != nil {
				_ = s.Send(&agentdv1.GenerateRequest{Kind: &agentdv1.GenerateRequest_ApprovalDecision{ApprovalDecision: &agentdv1.ApprovalDecision{
					RequestId: req.GetId(), Approved: true, RaiseTo: raise}}})
			}
		}
	}
	t.Run("by its first value", func(t *testing.T) {
		t.Parallel()
		bridge := &fakeBridge{onList: offering(serverTools("demo", "echo"))}
		l := newBounded(t, bridge, nil, recordingScript())

		events, st := generate(t, l.client, &agentdv1.StartGeneration{Agent: agent(t), Messages: userSays("go")}, answer(0))

		wantCode(t, st, codes.OK)
		var asked []int64
		for _, ev := range events {
			if lr := ev.GetApprovalRequest().GetLimit(); lr != nil {
				asked = append(asked, lr.GetValue())
			}
		}
		if len(asked) != 2 || asked[0] != 2 || asked[1] != 4 {
			t.Errorf("asked at %v tool calls; want at 2, then at 4", asked)
		}
		if done := completion(events); done.GetToolCalls() != 5 || done.GetLimit() != nil || len(decidedEvents(events)) != 2 {
			t.Errorf("completed = %v; want it done after 5 tool calls, two approvals decided", done)
		}
	})
	t.Run("raise_to refused", func(t *testing.T) {
		t.Parallel()
		bridge := &fakeBridge{onList: offering(serverTools("demo", "echo"))}
		l := newBounded(t, bridge, nil, recordingScript())

		_, st := generate(t, l.client, &agentdv1.StartGeneration{Agent: agent(t), Messages: userSays("go")}, answer(1))

		wantCode(t, st, codes.InvalidArgument)
		wantFacts(t, "violation", description(t, st, "approval_decision.raise_to"), "above", "2")
		if n := bridge.callsTo("echo"); n != 2 {
			t.Errorf("echo ran %d times; want 2", n)
		}
	})
}

// The tenant's ceilings bound what an agent may set, each refused at
// its field naming the ceiling; its defaults (a ceiling without one
// standing for it) are what an agent that sets none gets, as Preview
// shows; a limit of money needs the model priced, in its currency.
func TestLimitSettings(t *testing.T) {
	t.Parallel()
	gl := &config.GenerationLimits{
		Defaults: config.LimitValues{MaxToolCalls: 10, MaxDuration: 30 * time.Minute},
		Ceilings: config.LimitValues{MaxToolTurns: 50, MaxToolCalls: 20, MaxTotalTokens: 1000, MaxCost: &config.Money{Currency: "EUR", Amount: "0.5"}},
	}
	l := newBounded(t, &fakeBridge{}, gl, recordingScript())
	preview := func(agent *agentdv1.Agent) (*agentdv1.PreviewResponse, *status.Status) {
		res, err := l.client.Preview(t.Context(), &agentdv1.PreviewRequest{Agent: agent, Messages: userSays("hi")})
		return res, status.Convert(err)
	}

	res, st := preview(&agentdv1.Agent{Provider: "script", Model: "m-1"})
	wantCode(t, st, codes.OK)
	want := &agentdv1.GenerationLimits{MaxToolCalls: new(int32(10)), MaxTotalTokens: new(int64(1000)), MaxCost: &agentdv1.Money{Currency: "EUR", Nanos: 500_000_000},
		MaxDuration: durationpb.New(30 * time.Minute), OnLimit: agentdv1.OnLimit_ON_LIMIT_END}
	if diff := protoDiff(want, res.GetLimits()); diff != "" || res.GetMaxToolTurns() != 25 {
		t.Errorf("the limits in effect, %d tool turns (-want +got):\n%s", res.GetMaxToolTurns(), diff)
	}
	own := &agentdv1.GenerationLimits{MaxToolCalls: new(int32(20)), MaxCost: &agentdv1.Money{Currency: "EUR", Nanos: 1000}, OnLimit: agentdv1.OnLimit_ON_LIMIT_PAUSE}
	res, st = preview(&agentdv1.Agent{Provider: "script", Model: "m-1", Limits: own})
	wantCode(t, st, codes.OK)
	if got := res.GetLimits(); got.GetMaxToolCalls() != 20 || got.GetMaxCost().GetNanos() != 1000 || got.GetOnLimit() != agentdv1.OnLimit_ON_LIMIT_PAUSE || got.GetMaxTotalTokens() != 1000 {
		t.Errorf("the agent's own limits in effect: %v", got)
	}

	_, st = preview(&agentdv1.Agent{Provider: "script", Model: "m-1", MaxToolTurns: new(int32(51)), Limits: &agentdv1.GenerationLimits{
		MaxToolCalls: new(int32(21)), MaxTotalTokens: new(int64(1001)), MaxCost: &agentdv1.Money{Currency: "EUR", Nanos: 500_000_001},
		MaxDuration: durationpb.New(-time.Second), OnLimit: 9}})
	wantCode(t, st, codes.InvalidArgument)
	for field, facts := range map[string][]string{
		"agent.max_tool_turns":          {"ceiling", "50", "generation_limits.ceilings.max_tool_turns", "51"},
		"agent.limits.max_tool_calls":   {"ceiling", "20", "21"},
		"agent.limits.max_total_tokens": {"ceiling", "1000", "1001"},
		"agent.limits.max_cost.nanos":   {"ceiling", "0.5 EUR", "0.500000001"},
		"agent.limits.max_duration":     {"valid duration"},
		"agent.limits.on_limit":         {"END, PAUSE, FAIL"},
	} {
		wantFacts(t, field, description(t, st, field), facts...)
	}
	_, st = preview(&agentdv1.Agent{Provider: "script", Model: "m-1", Limits: &agentdv1.GenerationLimits{MaxCost: &agentdv1.Money{Currency: "USD", Nanos: 1}}})
	wantCode(t, st, codes.InvalidArgument)
	wantFacts(t, "a ceiling's currency", description(t, st, "agent.limits.max_cost.currency"), "EUR")

	// The tenant's max_cost (its ceiling standing for its default) holds
	// every generation: one whose model has no price cannot start.
	_, st = preview(&agentdv1.Agent{Provider: "script", Model: "unpriced"})
	wantCode(t, st, codes.FailedPrecondition)
	wantFacts(t, "an unpriced model", description(t, st, "agent.limits.max_cost"), "no price", "unpriced", "pricing.models")

	free := newBounded(t, &fakeBridge{}, nil, recordingScript())
	_, err := free.client.Preview(t.Context(), &agentdv1.PreviewRequest{Messages: userSays("hi"), Agent: &agentdv1.Agent{Provider: "script", Model: "m-1",
		Limits: &agentdv1.GenerationLimits{MaxCost: &agentdv1.Money{Currency: "USD", Nanos: 1}}}})
	st = status.Convert(err)
	wantCode(t, st, codes.InvalidArgument)
	wantFacts(t, "another currency than the price's", description(t, st, "agent.limits.max_cost.currency"), "EUR", "m-1")
	_, err = free.client.Preview(t.Context(), &agentdv1.PreviewRequest{Messages: userSays("hi"), Agent: &agentdv1.Agent{Provider: "script", Model: "unpriced",
		Limits: &agentdv1.GenerationLimits{MaxCost: &agentdv1.Money{Currency: "EUR", Nanos: 1}}}})
	wantCode(t, status.Convert(err), codes.FailedPrecondition)
}

// max_duration counts the time the generation runs, on synctest's clock
// exactly: two tool calls of 20 minutes each pass a limit of 30
// minutes, and the generation ends before its third model call. X-H6.
func TestLimitDuration(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		bridge := &fakeBridge{onList: offering(serverTools("demo", "echo")), onCall: func(context.Context, string, string, string) (*bridgev1.CallToolResponse, error) {
			time.Sleep(20 * time.Minute)
			return &bridgev1.CallToolResponse{Output: "slow"}, nil
		}}
		prov := recordingScript()
		l := newBounded(t, bridge, &config.GenerationLimits{Defaults: config.LimitValues{MaxDuration: 30 * time.Minute}}, prov)

		events, st := generate(t, l.client, &agentdv1.StartGeneration{Agent: echoing(t, nil, 1), Messages: userSays("go")}, nil)

		wantCode(t, st, codes.OK)
		want := &agentdv1.LimitReached{Name: "max_duration", Value: (30 * time.Minute).Milliseconds(), Used: (40 * time.Minute).Milliseconds(), Unit: "milliseconds"}
		if diff := protoDiff(want, completion(events).GetLimit()); diff != "" {
			t.Errorf("completed.limit (-want +got):\n%s", diff)
		}
		if n := len(prov.calls()); n != 2 {
			t.Errorf("the model was called %d times; want 2", n)
		}
	})
}

// What a generation counts against its limits holds across a pause: the
// tool calls made before it, and the time it ran, but not the time it
// waited paused. X-H6: on synctest's clock.
func TestLimitsAcrossPause(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		bridge := &fakeBridge{onList: offering(serverTools("files", "read", "delete")), onCall: func(_ context.Context, _, tool, _ string) (*bridgev1.CallToolResponse, error) {
			if tool == "read" {
				time.Sleep(20 * time.Minute)
			}
			return &bridgev1.CallToolResponse{Output: tool + " ok"}, nil
		}}
		l := newBounded(t, bridge, nil, recordingScript())
		agent := func(limits *agentdv1.GenerationLimits) *agentdv1.Agent {
			return &agentdv1.Agent{Provider: "script", Model: "m-1", RequiresApproval: []string{"delete"}, Limits: limits,
				Mcps: []*agentdv1.MCPServer{refServer("files", "files")},
				ProviderOptions: script(t, `{"turns": [
					{"tool_calls": [{"name": "read"}, {"name": "delete"}]},
					{"repeat": 5, "tool_calls": [{"name": "read"}]}
				]}`)}
		}
		for _, tc := range []struct {
			limits *agentdv1.GenerationLimits
			want   *agentdv1.LimitReached
		}{
			{&agentdv1.GenerationLimits{MaxToolCalls: new(int32(3))},
				&agentdv1.LimitReached{Name: "max_tool_calls", Value: 3, Used: 3, Unit: "tool_calls", Ceiling: config.MaxToolCallsLimit}},
			{&agentdv1.GenerationLimits{MaxDuration: durationpb.New(30 * time.Minute)},
				&agentdv1.LimitReached{Name: "max_duration", Value: (30 * time.Minute).Milliseconds(), Used: (40 * time.Minute).Milliseconds(), Unit: "milliseconds"}},
		} {
			a := agent(tc.limits)
			events, _ := generate(t, l.client, &agentdv1.StartGeneration{Agent: a, Messages: userSays("tidy")}, nil)
			paused := pausedEvent(t, events)
			time.Sleep(5 * time.Hour) // paused: not counted

			events, st := run(t, l.client, resumeRequest(paused.GetGenerationId(), a, &agentdv1.ApprovalDecision{RequestId: "approval_call_1_2", Approved: true}), nil)

			wantCode(t, st, codes.OK)
			if diff := protoDiff(tc.want, completion(events).GetLimit()); diff != "" {
				t.Errorf("%s: completed.limit (-want +got):\n%s", tc.want.GetName(), diff)
			}
		}
	})
}
