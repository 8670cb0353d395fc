package server_test

import (
	"context"
	"fmt"
	"iter"
	"log/slog"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"google.golang.org/genproto/googleapis/rpc/errdetails"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/structpb"

	agentdv1 "github.com/agentd/agentd/gen/go/agentd/v1"
	"github.com/agentd/agentd/internal/budget"
	"github.com/agentd/agentd/internal/config"
	"github.com/agentd/agentd/internal/store"
	"github.com/agentd/agentd/providers"
	"github.com/agentd/agentd/server"
)

// loopingTurns is a script that never ends by itself: every turn calls
// echo, and says it used 300 input and 100 output tokens.
const loopingTurns = `{"turns": [{"tool_calls": [{"name": "echo", "arguments": {}}], "usage": {"input_tokens": 300, "output_tokens": 100}, "repeat": 20}]}`

// dailyTokens is a day's budget of max tokens, of scope and subject.
func dailyTokens(t *testing.T, name string, scope agentdv1.BudgetScope, subject string, max int64) *budget.Budget {
	t.Helper()
	b, bad := budget.Parse(&agentdv1.Budget{Name: name, Scope: scope, Subject: subject, Period: agentdv1.BudgetPeriod_BUDGET_PERIOD_DAY, MaxTokens: max}, "budget")
	if bad != nil {
		t.Fatal(bad)
	}
	return b
}

// budgeted serves an AgentService on a store of its own whose every
// tenant has budgets, and returns a client per tenant and the store.
func budgeted(t *testing.T, budgets ...*budget.Budget) (func(string) agentdv1.AgentServiceClient, store.Store) {
	t.Helper()
	st := newStore(t, 0)
	tenant := &server.Tenant{Budgets: budgets}
	clients := tenantClients(t, server.Options{
		Bridge: &fakeBridge{onList: offering(serverTools("demo", "echo"))}, Prices: perToken{},
		Checkpoints: st, Generations: st.Generations(), Threads: st.Threads(), Replica: "replica-a", Budgets: st.Budgets(),
		Tenants: func(string) (*server.Tenant, bool) { return tenant, true },
	}, recordingScript())
	return clients, st
}

func loopingAgent(t *testing.T) *agentdv1.Agent {
	return &agentdv1.Agent{Provider: "script", Model: "m-1", Mcps: []*agentdv1.MCPServer{refServer("", "demo")}, ProviderOptions: script(t, loopingTurns)}
}

// usageEvents counts the usage events among events, and the warnings of
// code.
func usageEvents(events []*agentdv1.GenerateResponse, code string) (turns, warnings int) {
	for _, ev := range events {
		if ev.GetUsage() != nil {
			turns++
		}
		if ev.GetWarning().GetCode() == code {
			warnings++
		}
	}
	return turns, warnings
}

// wantBudgetRefusal fails unless st is RESOURCE_EXHAUSTED by the budget
// name of subject, with a RetryInfo until the period turns (within a
// month) and an ErrorInfo BUDGET_EXHAUSTED.
func wantBudgetRefusal(t *testing.T, st *status.Status, subject, name string) {
	t.Helper()
	wantCode(t, st, codes.ResourceExhausted)
	var quota, retry, reason bool
	for _, d := range st.Details() {
		switch d := d.(type) {
		case *errdetails.QuotaFailure:
			v := d.GetViolations()
			quota = len(v) == 1 && v[0].GetSubject() == subject && v[0].GetDescription() == "budget:"+name
		case *errdetails.RetryInfo:
			delay := d.GetRetryDelay().AsDuration()
			retry = delay > 0 && delay <= 31*24*time.Hour
		case *errdetails.ErrorInfo:
			reason = d.GetReason() == "BUDGET_EXHAUSTED" && d.GetMetadata()["budget"] == name
		}
	}
	if !quota || !retry || !reason {
		t.Errorf("refusal %q: QuotaFailure naming %s and budget:%s %v, RetryInfo within the month %v, ErrorInfo %v; details %v",
			st.Message(), subject, name, quota, retry, reason, st.Details())
	}
}

// A tenant's budget of 1,000 tokens lets each model call run while the
// tenant has spent less, and refuses the first call once it has spent it
// all: a generation that loops runs three calls (400 tokens each: the
// third passes the budget) and fails the fourth RESOURCE_EXHAUSTED,
// having been warned once at 80 % (after the second). The next
// generation of the tenant is refused at once; the budget's spending is
// what the calls used.
func TestBudgetRefusesTheFirstCallPastIt(t *testing.T) {
	t.Parallel()
	clients, st := budgeted(t, dailyTokens(t, "daily", agentdv1.BudgetScope_BUDGET_SCOPE_TENANT, "", 1000))
	events, end := generate(t, clients("acme"), &agentdv1.StartGeneration{Agent: loopingAgent(t), Messages: userSays("loop")}, nil)
	wantBudgetRefusal(t, end, "tenant:acme", "daily")
	if turns, warnings := usageEvents(events, "BUDGET_WARNING"); turns != 3 || warnings != 1 {
		t.Errorf("%d model turns and %d budget warnings; want 3 and 1", turns, warnings)
	}
	events, end = generate(t, clients("acme"), &agentdv1.StartGeneration{Agent: loopingAgent(t), Messages: userSays("again")}, nil)
	wantBudgetRefusal(t, end, "tenant:acme", "daily")
	if turns, _ := usageEvents(events, ""); turns != 0 {
		t.Errorf("the next generation ran %d model turns; want none", turns)
	}
	b := dailyTokens(t, "daily", agentdv1.BudgetScope_BUDGET_SCOPE_TENANT, "", 1000)
	span := b.SpanAt(time.Now())
	spends, err := st.Budgets().BudgetSpends(t.Context(), "acme", "daily", span.From, span.Bucket, time.Now(), 10)
	if err != nil {
		t.Fatal(err)
	}
	if len(spends) != 1 || spends[0].Tokens != 1200 || spends[0].ReservedTokens != 0 {
		t.Errorf("the budget's spending = %+v; want 1200 tokens, nothing reserved", spends)
	}
}

// An end user's budget holds each end user to it apart, and not calls
// made for nobody (without authentication and without end_user); an API
// key's holds the calls of that key, whoever they are for.
func TestBudgetOfEndUsersAndKeys(t *testing.T) {
	t.Parallel()
	clients, _ := budgeted(t,
		dailyTokens(t, "per-user", agentdv1.BudgetScope_BUDGET_SCOPE_END_USER, "", 500),
		dailyTokens(t, "app-key", agentdv1.BudgetScope_BUDGET_SCOPE_API_KEY, "globex-app", 300))
	short := func(endUser string) *agentdv1.StartGeneration {
		agent := loopingAgent(t)
		agent.ProviderOptions = script(t, `{"turns": [
			{"tool_calls": [{"name": "echo", "arguments": {}}], "usage": {"input_tokens": 300, "output_tokens": 100}},
			{"tool_calls": [{"name": "echo", "arguments": {}}], "usage": {"input_tokens": 300, "output_tokens": 100}},
			{"text": "done", "usage": {"input_tokens": 300, "output_tokens": 100}}]}`)
		return &agentdv1.StartGeneration{Agent: agent, Messages: userSays("go"), EndUser: endUser}
	}
	_, end := generate(t, clients("acme"), short("ada"), nil)
	wantBudgetRefusal(t, end, "end_user:ada", "per-user")
	_, end = generate(t, clients("acme"), short("bob"), nil)
	wantBudgetRefusal(t, end, "end_user:bob", "per-user")
	_, end = generate(t, clients(""), short(""), nil)
	wantCode(t, end, codes.OK)
	_, end = generate(t, clients("globex"), short("carol"), nil)
	wantBudgetRefusal(t, end, "api_key:globex-app", "app-key")
}

// The usage ledger counts every model call, by tenant, API key and end
// user, written every second and at Close; GetUsage sums it.
func TestUsageLedger(t *testing.T) {
	t.Parallel()
	st := newStore(t, 0)
	svc := server.New(server.Options{Providers: registryOf(t, recordingScript()), Bridge: &fakeBridge{onList: offering(serverTools("demo", "echo"))},
		Prices: perToken{}, Checkpoints: st, Generations: st.Generations(), Replica: "replica-a", Budgets: st.Budgets(), Config: config.Default().Generation})
	svc.StartLedger()
	client := agentdv1.NewAgentServiceClient(dial(t, svc.Register))
	agent := loopingAgent(t)
	agent.ProviderOptions = script(t, `{"turns": [
		{"tool_calls": [{"name": "echo", "arguments": {}}], "usage": {"input_tokens": 10, "output_tokens": 3}},
		{"text": "done", "usage": {"input_tokens": 20, "output_tokens": 4}}]}`)
	for _, who := range []string{"ada", "ada", "bob"} {
		_, end := generate(t, client, &agentdv1.StartGeneration{Agent: agent, Messages: userSays("hi"), EndUser: who}, nil)
		wantCode(t, end, codes.OK)
	}
	svc.Close()
	adm := serveAdminService(t, server.NewAdmin(nil, slog.New(slog.DiscardHandler), server.AdminOptions{Budgets: st.Budgets()}))
	got, err := adm.GetUsage(t.Context(), &agentdv1.GetUsageRequest{GroupBy: agentdv1.BudgetScope_BUDGET_SCOPE_END_USER})
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]string{"ada": "4 calls 60+14 tokens 88000 nanos EUR", "bob": "2 calls 30+7 tokens 44000 nanos EUR"}
	if len(got.GetRows()) != 2 {
		t.Fatalf("rows = %v", got.GetRows())
	}
	for _, r := range got.GetRows() {
		if line := usageLine(r); line != want[r.GetSubject()] {
			t.Errorf("%s: %s; want %s", r.GetSubject(), line, want[r.GetSubject()])
		}
	}
}

func usageLine(r *agentdv1.UsageRow) string {
	line := fmt.Sprintf("%d calls %d+%d tokens", r.GetModelCalls(), r.GetInputTokens(), r.GetOutputTokens())
	for _, c := range r.GetCost() {
		line += fmt.Sprintf(" %d nanos %s", c.GetNanos(), c.GetCurrency())
	}
	return line
}

// A day's budget starts again when the day turns: refused at the end of
// one day with a RetryInfo of exactly the time left in it (the fake clock
// stands still while the generation runs), the tenant's next generation
// runs again the next day.
func TestBudgetDayTurns(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		time.Sleep(23 * time.Hour) // 23:00 on the bubble's first day
		clients, _ := budgeted(t, dailyTokens(t, "daily", agentdv1.BudgetScope_BUDGET_SCOPE_TENANT, "", 1000))
		events, end := generate(t, clients("acme"), &agentdv1.StartGeneration{Agent: loopingAgent(t), Messages: userSays("loop")}, nil)
		wantBudgetRefusal(t, end, "tenant:acme", "daily")
		if turns, _ := usageEvents(events, ""); turns != 3 {
			t.Errorf("%d model turns on the first day; want 3", turns)
		}
		for _, d := range end.Details() {
			if r, ok := d.(*errdetails.RetryInfo); ok && r.GetRetryDelay().AsDuration() != time.Hour {
				t.Errorf("RetryInfo %v; want the hour left in the day", r.GetRetryDelay().AsDuration())
			}
		}
		time.Sleep(time.Hour)
		events, end = generate(t, clients("acme"), &agentdv1.StartGeneration{Agent: loopingAgent(t), Messages: userSays("next day")}, nil)
		wantBudgetRefusal(t, end, "tenant:acme", "daily")
		if turns, _ := usageEvents(events, ""); turns != 3 {
			t.Errorf("%d model turns on the next day; want 3 again", turns)
		}
	})
}

// toolLoop is a provider that calls echo on every turn, using tokens
// (input and output halved) by its own count.
func toolLoop(tokens int64) *fakeProvider {
	return &fakeProvider{name: "plain", caps: providers.Capabilities{ModelOptional: true}, stream: func(context.Context, *providers.Request) iter.Seq2[providers.Event, error] {
		return func(yield func(providers.Event, error) bool) {
			_ = yield(&providers.ToolCall{Call: &agentdv1.ToolCall{Name: "echo", Arguments: "{}"}}, nil) &&
				yield(&providers.Usage{Usage: &agentdv1.Usage{InputTokens: tokens / 2, OutputTokens: tokens - tokens/2}}, nil) &&
				yield(&providers.Stop{Reason: agentdv1.StopReason_STOP_REASON_TOOL_USE}, nil)
		}
	}}
}

// Two replicas spending one tenant's budget at once, each running
// several generations, pass it by at most one model call each: each call
// reserves what it may use (its request's tokens and its max_tokens)
// before it runs, and is refused once the spending and the reservations
// of calls under way have reached the budget. Run on PostgreSQL by make
// test (AGENTD_TEST_STORE), as on SQLite.
func TestBudgetSharedByReplicas(t *testing.T) {
	t.Parallel()
	const limit, perCall = 2000, 100
	st := newStore(t, 0)
	tenant := &server.Tenant{Budgets: []*budget.Budget{dailyTokens(t, "tight", agentdv1.BudgetScope_BUDGET_SCOPE_TENANT, "", limit)}}
	var replicas []func(string) agentdv1.AgentServiceClient
	for _, name := range []string{"replica-a", "replica-b"} {
		replicas = append(replicas, tenantClients(t, server.Options{
			Bridge: &fakeBridge{onList: offering(serverTools("demo", "echo"))}, Config: config.Default().Generation,
			Checkpoints: st, Generations: st.Generations(), Replica: name, Budgets: st.Budgets(),
			Tenants: func(string) (*server.Tenant, bool) { return tenant, true },
		}, toolLoop(perCall)))
	}
	opts, err := structpb.NewStruct(map[string]any{"max_tokens": perCall})
	if err != nil {
		t.Fatal(err)
	}
	agent := &agentdv1.Agent{Provider: "plain", Mcps: []*agentdv1.MCPServer{refServer("", "demo")}, ProviderOptions: opts, MaxToolTurns: proto.Int32(1000)}
	var wg sync.WaitGroup
	for i := range 6 {
		client := replicas[i%2]("acme")
		wg.Go(func() {
			_, end := generate(t, client, &agentdv1.StartGeneration{Agent: agent, Messages: userSays("spend")}, nil)
			wantBudgetRefusal(t, end, "tenant:acme", "tight")
		})
	}
	wg.Wait()
	span := tenant.Budgets[0].SpanAt(time.Now())
	spends, err := st.Budgets().BudgetSpends(t.Context(), "acme", "tight", span.From, span.Bucket, time.Now(), 10)
	if err != nil {
		t.Fatal(err)
	}
	if len(spends) != 1 || spends[0].Tokens < limit || spends[0].Tokens > limit+2*perCall || spends[0].ReservedTokens != 0 {
		t.Errorf("spent %+v of %d; want the budget spent, passed by at most one call (%d tokens) per replica, nothing left reserved", spends, limit, perCall)
	}
}

// countingBudgets counts the store's Reserves.
type countingBudgets struct {
	store.Budgets
	reserves atomic.Int64
}

func (c *countingBudgets) Reserve(ctx context.Context, id string, charges []store.Charge, now, expires time.Time) (*store.Refused, error) {
	c.reserves.Add(1)
	return c.Budgets.Reserve(ctx, id, charges, now, expires)
}

// A replica reserves a tenth of a budget at a time (at least what a call
// may use) and spends from it without asking the store: twenty calls of
// a loop, each expected to use about 4,100 tokens, take one reservation
// of a budget of a million tokens. What the allowance did not spend is
// given back when the replica stops, and the budget counts what was used.
func TestBudgetAllowanceSparesTheStore(t *testing.T) {
	t.Parallel()
	st := newStore(t, 0)
	counting := &countingBudgets{Budgets: st.Budgets()}
	b := dailyTokens(t, "large", agentdv1.BudgetScope_BUDGET_SCOPE_TENANT, "", 1_000_000)
	tenant := &server.Tenant{Budgets: []*budget.Budget{b}}
	svc := server.New(server.Options{Providers: registryOf(t, recordingScript()), Bridge: &fakeBridge{onList: offering(serverTools("demo", "echo"))},
		Checkpoints: st, Generations: st.Generations(), Replica: "replica-a", Budgets: counting, Config: config.Default().Generation,
		Tenants: func(string) (*server.Tenant, bool) { return tenant, true }})
	svc.StartLedger()
	client := agentdv1.NewAgentServiceClient(dial(t, svc.Register))
	agent := loopingAgent(t)
	agent.MaxToolTurns = proto.Int32(19)
	_, end := generate(t, client, &agentdv1.StartGeneration{Agent: agent, Messages: userSays("loop")}, nil)
	wantCode(t, end, codes.OK) // completed at max_tool_turns after its 20th call
	if n := counting.reserves.Load(); n != 1 {
		t.Errorf("%d reservations for 20 calls; want 1", n)
	}
	svc.Close()
	span := b.SpanAt(time.Now())
	spends, err := st.Budgets().BudgetSpends(t.Context(), "", "large", span.From, span.Bucket, time.Now(), 10)
	if err != nil {
		t.Fatal(err)
	}
	if len(spends) != 1 || spends[0].Tokens != 20*400 || spends[0].ReservedTokens != 0 {
		t.Errorf("the budget's spending = %+v; want 8000 tokens, nothing reserved", spends)
	}
}

// pausingBudget sets, through the admin API, the tenant acme's daily
// budget of max tokens whose refusal pauses a generation.
func pausingBudget(t *testing.T, admin agentdv1.AdminServiceClient, max int64) {
	t.Helper()
	if _, err := admin.SetBudget(t.Context(), &agentdv1.SetBudgetRequest{Budget: &agentdv1.Budget{Name: "daily", Tenant: "acme",
		Scope: agentdv1.BudgetScope_BUDGET_SCOPE_TENANT, Period: agentdv1.BudgetPeriod_BUDGET_PERIOD_DAY, MaxTokens: max,
		Action: agentdv1.BudgetAction_BUDGET_ACTION_PAUSE}}); err != nil {
		t.Fatal(err)
	}
}

// A budget whose action is PAUSE pauses the generation it refuses, with
// an approval naming the budget: an approval given while the budget
// still refuses pauses it again; one given once the budget allows (an
// administrator raised it) goes on, and the generation completes. An
// approval does not raise a budget: raise_to is refused.
func TestBudgetPause(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		clients, st := budgeted(t)
		admin := budgetAdmin(t, st, &config.Config{}, nil)
		pausingBudget(t, admin, 1000)
		client := clients("acme")
		agent := loopingAgent(t)
		agent.ProviderOptions = script(t, `{"turns": [
			{"tool_calls": [{"name": "echo", "arguments": {}}], "usage": {"input_tokens": 300, "output_tokens": 100}, "repeat": 3},
			{"text": "done", "usage": {"input_tokens": 300, "output_tokens": 100}}]}`)
		events, end := generate(t, client, &agentdv1.StartGeneration{Agent: agent, Messages: userSays("go")}, nil)
		wantCode(t, end, codes.OK)
		paused := pausedEvent(t, events)
		id := paused.GetGenerationId()
		approve := func(raise int64) error {
			t.Helper()
			g, err := client.GetGeneration(t.Context(), &agentdv1.GetGenerationRequest{GenerationId: id})
			if err != nil {
				t.Fatal(err)
			}
			reqs := g.GetGeneration().GetApprovalRequests()
			if len(reqs) != 1 || reqs[0].GetLimit().GetName() != "budget:daily" || reqs[0].GetLimit().GetUnit() != "tokens" {
				t.Fatalf("pending approvals %v; want the budget's", reqs)
			}
			_, err = client.DecideRequests(t.Context(), &agentdv1.DecideRequestsRequest{GenerationId: id,
				ApprovalDecisions: []*agentdv1.ApprovalDecision{{RequestId: reqs[0].GetId(), Approved: true, RaiseTo: raise}}})
			synctest.Wait()
			return err
		}
		if st := status.Convert(approve(5000)); st.Code() != codes.InvalidArgument {
			t.Errorf("raising a budget by an approval: %v; want InvalidArgument", st)
		}
		if err := approve(0); err != nil {
			t.Fatal(err)
		}
		wantState(t, client, id, agentdv1.GenerationState_GENERATION_STATE_PAUSED) // the budget still refuses
		pausingBudget(t, admin, 100_000)
		time.Sleep(time.Second) // the replica reads the budgets again
		if err := approve(0); err != nil {
			t.Fatal(err)
		}
		wantState(t, client, id, agentdv1.GenerationState_GENERATION_STATE_COMPLETED)
	})
}

// A budget's approval that is declined completes the generation at the
// budget, its completed event naming it.
func TestBudgetPauseDeclined(t *testing.T) {
	t.Parallel()
	clients, st := budgeted(t)
	pausingBudget(t, budgetAdmin(t, st, &config.Config{}, nil), 1000)
	events, _ := generate(t, clients("acme"), &agentdv1.StartGeneration{Agent: loopingAgent(t), Messages: userSays("go")}, nil)
	paused := pausedEvent(t, events)
	req := paused.GetApprovalRequests()[0]
	events, end := run(t, clients("acme"), resumeRequest(paused.GetGenerationId(), loopingAgent(t), &agentdv1.ApprovalDecision{RequestId: req.GetId()}), nil)
	wantCode(t, end, codes.OK)
	want := &agentdv1.LimitReached{Name: "budget:daily", Value: 1000, Used: 1200, Unit: "tokens"}
	if diff := protoDiff(want, completion(events).GetLimit()); diff != "" {
		t.Errorf("completed.limit (-want +got):\n%s", diff)
	}
}

// wantState fails unless generation id is in state want.
func wantState(t *testing.T, client agentdv1.AgentServiceClient, id string, want agentdv1.GenerationState) {
	t.Helper()
	g, err := client.GetGeneration(t.Context(), &agentdv1.GetGenerationRequest{GenerationId: id})
	if err != nil {
		t.Fatal(err)
	}
	if got := g.GetGeneration().GetState(); got != want {
		t.Errorf("state %v; want %v (%v)", got, want, g.GetGeneration())
	}
}
