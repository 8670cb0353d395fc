package server_test

import (
	"log/slog"
	"testing"
	"testing/synctest"
	"time"

	"github.com/google/go-cmp/cmp"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/testing/protocmp"

	agentdv1 "github.com/agentd/agentd/gen/go/agentd/v1"
	"github.com/agentd/agentd/internal/auth"
	"github.com/agentd/agentd/internal/config"
	"github.com/agentd/agentd/internal/store"
	"github.com/agentd/agentd/server"
)

// budgetAdmin serves an AdminService over the budgets of st for the
// caller p (nil: no authentication), with the configuration cfg.
func budgetAdmin(t *testing.T, st store.Store, cfg *config.Config, p *auth.Principal) agentdv1.AdminServiceClient {
	t.Helper()
	return serveAdminService(t, server.NewAdmin(nil, slog.New(slog.DiscardHandler), server.AdminOptions{Config: cfg, Budgets: st.Budgets()}), calledBy(p))
}

func tokensBudget(name, tenant string, max int64) *agentdv1.Budget {
	return &agentdv1.Budget{Name: name, Tenant: tenant, Scope: agentdv1.BudgetScope_BUDGET_SCOPE_TENANT,
		Period: agentdv1.BudgetPeriod_BUDGET_PERIOD_MONTH, MaxTokens: max}
}

// Budgets set through the admin API are kept in the store beside those
// of the configuration, which the API lists but may not change: admin
// sets and deletes any tenant's; a tenant_admin reads its own tenant's
// and changes none; an observer reads any. A budget that does not parse
// is INVALID_ARGUMENT naming its fields.
func TestBudgetsThroughTheAdminAPI(t *testing.T) {
	t.Parallel()
	st := newStore(t, 0)
	cfg := &config.Config{Tenants: map[string]config.Tenant{
		"acme":   {Budgets: []config.Budget{{Name: "daily", Period: "day", MaxTokens: 5000, MaxCost: &config.Money{Currency: "USD", Amount: "2.50"}}}},
		"globex": {},
	}}
	admin := budgetAdmin(t, st, cfg, &auth.Principal{Name: "root", Tenant: "ops", Roles: []string{auth.RoleAdmin}})
	tenantAdmin := budgetAdmin(t, st, cfg, &auth.Principal{Name: "boss", Tenant: "acme", Roles: []string{auth.RoleTenantAdmin}})
	observer := budgetAdmin(t, st, cfg, &auth.Principal{Name: "watch", Tenant: "ops", Roles: []string{auth.RoleObserver}})

	set, err := admin.SetBudget(t.Context(), &agentdv1.SetBudgetRequest{Budget: tokensBudget("monthly", "acme", 100000)})
	if err != nil {
		t.Fatal(err)
	}
	if set.GetBudget().GetTenant() != "acme" || set.GetBudget().GetFromConfig() {
		t.Errorf("SetBudget kept %v", set.GetBudget())
	}
	want := []*agentdv1.BudgetStatus{
		{Budget: &agentdv1.Budget{Name: "daily", Tenant: "acme", Scope: agentdv1.BudgetScope_BUDGET_SCOPE_TENANT, Period: agentdv1.BudgetPeriod_BUDGET_PERIOD_DAY,
			MaxTokens: 5000, MaxCost: &agentdv1.Money{Currency: "USD", Nanos: 2_500_000_000}, FromConfig: true}},
		{Budget: tokensBudget("monthly", "acme", 100000)},
	}
	for name, c := range map[string]agentdv1.AdminServiceClient{"admin": admin, "tenant_admin": tenantAdmin, "observer": observer} {
		got, err := c.ListBudgets(t.Context(), &agentdv1.ListBudgetsRequest{Tenant: "acme"})
		if err != nil {
			t.Fatalf("%s: ListBudgets: %v", name, err)
		}
		if diff := cmp.Diff(want, got.GetBudgets(), protocmp.Transform()); diff != "" {
			t.Errorf("%s: ListBudgets (-want +got):\n%s", name, diff)
		}
	}
	refusals := []struct {
		name string
		call func() error
		code codes.Code
	}{
		{"a tenant_admin sets its own tenant's", func() error {
			_, err := tenantAdmin.SetBudget(t.Context(), &agentdv1.SetBudgetRequest{Budget: tokensBudget("more", "", 1)})
			return err
		}, codes.PermissionDenied},
		{"a tenant_admin reads another tenant's", func() error {
			_, err := tenantAdmin.ListBudgets(t.Context(), &agentdv1.ListBudgetsRequest{Tenant: "globex"})
			return err
		}, codes.PermissionDenied},
		{"an observer sets one", func() error {
			_, err := observer.SetBudget(t.Context(), &agentdv1.SetBudgetRequest{Budget: tokensBudget("more", "acme", 1)})
			return err
		}, codes.PermissionDenied},
		{"admin replaces the configuration's", func() error {
			_, err := admin.SetBudget(t.Context(), &agentdv1.SetBudgetRequest{Budget: tokensBudget("daily", "acme", 1)})
			return err
		}, codes.FailedPrecondition},
		{"admin deletes the configuration's", func() error {
			_, err := admin.DeleteBudget(t.Context(), &agentdv1.DeleteBudgetRequest{Tenant: "acme", Name: "daily"})
			return err
		}, codes.FailedPrecondition},
		{"admin deletes none", func() error {
			_, err := admin.DeleteBudget(t.Context(), &agentdv1.DeleteBudgetRequest{Tenant: "globex", Name: "monthly"})
			return err
		}, codes.NotFound},
	}
	for _, r := range refusals {
		if got := status.Code(r.call()); got != r.code {
			t.Errorf("%s: %v; want %v", r.name, got, r.code)
		}
	}
	_, err = admin.SetBudget(t.Context(), &agentdv1.SetBudgetRequest{Budget: &agentdv1.Budget{Name: "No Such", Tenant: "acme", Period: agentdv1.BudgetPeriod_BUDGET_PERIOD_ROLLING}})
	var fields []string
	for _, v := range fieldViolations(status.Convert(err)) {
		fields = append(fields, v.GetField())
	}
	if diff := cmp.Diff([]string{"budget.name", "budget.scope", "budget.rolling_hours", "budget.max_tokens"}, fields); status.Code(err) != codes.InvalidArgument || diff != "" {
		t.Errorf("a bad budget: %v; fields (-want +got):\n%s", err, diff)
	}
	if _, err := admin.DeleteBudget(t.Context(), &agentdv1.DeleteBudgetRequest{Tenant: "acme", Name: "monthly"}); err != nil {
		t.Fatal(err)
	}
	got, err := observer.ListBudgets(t.Context(), &agentdv1.ListBudgetsRequest{Tenant: "acme"})
	if err != nil || len(got.GetBudgets()) != 1 {
		t.Errorf("after the delete: %v, %v; want the configuration's alone", got, err)
	}
}

// A budget set through the admin API applies on a replica within a
// second: the replica reads the budgets again once those it holds are a
// second old. Its spending shows in ListBudgets.
func TestBudgetSetAppliesWithinASecond(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		clients, st := budgeted(t)
		admin := budgetAdmin(t, st, &config.Config{}, nil)
		short := &agentdv1.StartGeneration{Agent: loopingAgent(t), Messages: userSays("go")}
		short.Agent.ProviderOptions = script(t, `{"turns": [{"text": "done", "usage": {"input_tokens": 300, "output_tokens": 100}}]}`)
		_, end := generate(t, clients("acme"), short, nil)
		wantCode(t, end, codes.OK)
		if _, err := admin.SetBudget(t.Context(), &agentdv1.SetBudgetRequest{Budget: tokensBudget("monthly", "acme", 100)}); err != nil {
			t.Fatal(err)
		}
		_, end = generate(t, clients("acme"), short, nil)
		wantCode(t, end, codes.OK) // the replica holds the budgets it read a moment ago
		time.Sleep(time.Second)
		_, end = generate(t, clients("acme"), short, nil)
		wantCode(t, end, codes.OK) // the budget counts from now: nothing spent yet
		_, end = generate(t, clients("acme"), short, nil)
		wantBudgetRefusal(t, end, "tenant:acme", "monthly")
		got, err := admin.ListBudgets(t.Context(), &agentdv1.ListBudgetsRequest{Tenant: "acme"})
		if err != nil {
			t.Fatal(err)
		}
		spends := got.GetBudgets()[0].GetSpends()
		if len(spends) != 1 || spends[0].GetTokens() != 400 || !spends[0].GetPeriodStart().AsTime().Equal(time.Date(2000, 1, 1, 0, 0, 0, 0, time.UTC)) {
			t.Errorf("spends = %v; want 400 tokens in the month begun 2000-01-01", spends)
		}
	})
}
