package server

import (
	"context"
	"slices"
	"time"

	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/timestamppb"

	agentdv1 "github.com/agentd/agentd/gen/go/agentd/v1"
	"github.com/agentd/agentd/internal/auth"
	"github.com/agentd/agentd/internal/budget"
	"github.com/agentd/agentd/internal/config"
	"github.com/agentd/agentd/internal/fault"
	"github.com/agentd/agentd/internal/store"
)

// maxSpendsShown bounds the subjects ListBudgets shows of one budget.
const maxSpendsShown = 100

// errNoBudgets is the error of a budget call on an agentd without a store.
var errNoBudgets = fault.New(fault.FailedPrecondition, "this agentd keeps no records (it has no state store), so it keeps no budgets and no usage ledger")

// ListBudgets returns a tenant's budgets, those of the configuration
// first, then those set through SetBudget, each with its subjects'
// spending in the current period.
func (a *Admin) ListBudgets(ctx context.Context, req *agentdv1.ListBudgetsRequest) (*agentdv1.ListBudgetsResponse, error) {
	tenant, err := a.readTenant(ctx, req.GetTenant())
	if err != nil {
		return nil, err
	}
	budgets, err := a.budgetsOf(ctx, tenant)
	if err != nil {
		return nil, fault.GRPC(err)
	}
	now := time.Now()
	out := &agentdv1.ListBudgetsResponse{}
	for _, b := range budgets {
		st, err := a.status(ctx, tenant, b, now)
		if err != nil {
			return nil, fault.GRPC(err)
		}
		out.Budgets = append(out.Budgets, st)
	}
	return out, nil
}

// readTenant is the tenant a read is for: the request's, else the
// caller's own; a tenant_admin reaches its own alone.
func (a *Admin) readTenant(ctx context.Context, tenant string) (string, error) {
	if a.o.Budgets == nil {
		return "", fault.GRPC(errNoBudgets)
	}
	all, own := readReach(ctx)
	if tenant == "" {
		return own, nil
	}
	if !all && tenant != own {
		return "", fault.GRPC(fault.New(fault.Permission, "%q reaches its own tenant only", auth.RoleTenantAdmin))
	}
	return tenant, nil
}

// budgetsOf are tenant's budgets: the configuration's, then the store's.
func (a *Admin) budgetsOf(ctx context.Context, tenant string) ([]*budget.Budget, error) {
	out := a.configured(tenant)
	defs, err := a.o.Budgets.ListBudgets(ctx)
	if err != nil {
		return nil, err
	}
	return append(out, parseStored(defs)[tenant]...), nil
}

// configured are tenant's budgets written in the configuration.
func (a *Admin) configured(tenant string) []*budget.Budget {
	ts, ok := a.o.Config.ForTenant(tenant)
	if !ok {
		return nil
	}
	budgets, _ := config.Budgets(ts.Budgets, tenant, ts.BudgetsKey) // checked at load
	return budgets
}

// status is b with its subjects' spending in the period of now.
func (a *Admin) status(ctx context.Context, tenant string, b *budget.Budget, now time.Time) (*agentdv1.BudgetStatus, error) {
	span := b.SpanAt(now)
	spends, err := a.o.Budgets.BudgetSpends(ctx, tenant, b.Name(), span.From, span.Bucket, now, maxSpendsShown)
	if err != nil {
		return nil, err
	}
	spec := proto.CloneOf(b.Spec())
	spec.Tenant = tenant
	st := &agentdv1.BudgetStatus{Budget: spec}
	_, _, currency := b.Limits()
	for _, s := range spends {
		st.Spends = append(st.Spends, &agentdv1.BudgetSpend{
			Subject: s.Subject, PeriodStart: timestamppb.New(span.From), PeriodEnd: timestamppb.New(span.End),
			Tokens: s.Tokens, Cost: money(currency, s.Nanos), ReservedTokens: s.ReservedTokens, ReservedCost: money(currency, s.ReservedNanos),
		})
	}
	return st, nil
}

// money is nanos of currency; nil for a budget that limits no money.
func money(currency string, nanos int64) *agentdv1.Money {
	if currency == "" {
		return nil
	}
	return &agentdv1.Money{Currency: currency, Nanos: nanos}
}

// SetBudget creates or replaces a budget of the store; only admin may,
// for any tenant (a tenant_admin may not raise its own).
func (a *Admin) SetBudget(ctx context.Context, req *agentdv1.SetBudgetRequest) (*agentdv1.SetBudgetResponse, error) {
	spec := proto.CloneOf(req.GetBudget())
	if spec == nil {
		spec = &agentdv1.Budget{}
	}
	tenant, err := a.budgetWrite(ctx, spec.GetTenant(), spec.GetName(), "setting a budget")
	if err != nil {
		return nil, err
	}
	spec.Tenant, spec.FromConfig = tenant, false
	if _, bad := budget.Parse(spec, "budget"); bad != nil {
		return nil, fault.GRPC(fault.InvalidRequest(bad))
	}
	data, err := proto.Marshal(spec)
	if err != nil {
		return nil, fault.GRPC(fault.Wrap(fault.Internal, err, "encoding the budget"))
	}
	if err := a.o.Budgets.PutBudget(ctx, store.BudgetDef{Tenant: tenant, Name: spec.GetName(), Spec: data, UpdatedAt: time.Now()}); err != nil {
		return nil, fault.GRPC(err)
	}
	a.audit(ctx, "SetBudget", "budget_tenant", tenant, "budget", spec.GetName())
	a.budgetsChanged()
	return &agentdv1.SetBudgetResponse{Budget: spec}, nil
}

// DeleteBudget deletes a budget of the store with what it counted.
func (a *Admin) DeleteBudget(ctx context.Context, req *agentdv1.DeleteBudgetRequest) (*agentdv1.DeleteBudgetResponse, error) {
	tenant, err := a.budgetWrite(ctx, req.GetTenant(), req.GetName(), "deleting a budget")
	if err != nil {
		return nil, err
	}
	found, err := a.o.Budgets.DeleteBudget(ctx, tenant, req.GetName())
	if err != nil {
		return nil, fault.GRPC(err)
	}
	if !found {
		return nil, fault.GRPC(fault.New(fault.NotFound, "the tenant has no budget %q", req.GetName()))
	}
	a.audit(ctx, "DeleteBudget", "budget_tenant", tenant, "budget", req.GetName())
	a.budgetsChanged()
	return &agentdv1.DeleteBudgetResponse{}, nil
}

// budgetWrite is the tenant a budget write (what) is for, checking that
// the caller holds admin and that the configuration does not write a
// budget by name.
func (a *Admin) budgetWrite(ctx context.Context, tenant, name, what string) (string, error) {
	if a.o.Budgets == nil {
		return "", fault.GRPC(errNoBudgets)
	}
	if p, ok := auth.FromContext(ctx); ok && !p.Has(auth.RoleAdmin) {
		return "", fault.GRPC(fault.New(fault.Permission, "%s needs the role %q: a %q reads its tenant's budgets but may not change them", what, auth.RoleAdmin, auth.RoleTenantAdmin))
	}
	tenant, err := writeTenant(ctx, tenant, what)
	if err != nil {
		return "", err
	}
	if slices.ContainsFunc(a.configured(tenant), func(b *budget.Budget) bool { return b.Name() == name }) {
		return "", fault.GRPC(fault.New(fault.FailedPrecondition, "the budget %q is written in the configuration; change it there", name))
	}
	return tenant, nil
}

// GetUsage sums the usage ledger's rows of a tenant in a span of whole
// hours, in all or by API key or end user.
func (a *Admin) GetUsage(ctx context.Context, req *agentdv1.GetUsageRequest) (*agentdv1.GetUsageResponse, error) {
	tenant, err := a.readTenant(ctx, req.GetTenant())
	if err != nil {
		return nil, err
	}
	end := time.Now()
	if req.GetEnd() != nil {
		end = req.GetEnd().AsTime()
	}
	start := end.Add(-24 * time.Hour)
	if req.GetStart() != nil {
		start = req.GetStart().AsTime()
	}
	// Whole hours: from the hour start falls in to the end of the hour
	// end falls in, so that the hour under way is counted.
	start, end = start.UTC().Truncate(time.Hour), hourAfter(end.UTC())
	if !end.After(start) {
		end = start.Add(time.Hour)
	}
	totals, err := a.o.Budgets.SumUsage(ctx, store.UsageQuery{Tenant: tenant, From: start, To: end, GroupBy: groupBy(req.GetGroupBy()), Subject: req.GetSubject()})
	if err != nil {
		return nil, fault.GRPC(err)
	}
	return &agentdv1.GetUsageResponse{Start: timestamppb.New(start), End: timestamppb.New(end), Rows: usageRows(totals)}, nil
}

// hourAfter is the end of the hour t falls in (t itself when it begins
// one).
func hourAfter(t time.Time) time.Time {
	if h := t.Truncate(time.Hour); !h.Equal(t) {
		return h.Add(time.Hour)
	}
	return t
}

// groupBy is the ledger's column a scope groups by.
func groupBy(s agentdv1.BudgetScope) string {
	switch s {
	case agentdv1.BudgetScope_BUDGET_SCOPE_API_KEY:
		return "api_key"
	case agentdv1.BudgetScope_BUDGET_SCOPE_END_USER:
		return "end_user"
	}
	return ""
}

// usageRows are totals, one row per subject with a cost per currency, in
// the order their subjects first come.
func usageRows(totals []store.UsageTotal) []*agentdv1.UsageRow {
	var rows []*agentdv1.UsageRow
	bySubject := make(map[string]*agentdv1.UsageRow)
	for _, t := range totals {
		r := bySubject[t.Subject]
		if r == nil {
			r = &agentdv1.UsageRow{Subject: t.Subject}
			bySubject[t.Subject] = r
			rows = append(rows, r)
		}
		r.ModelCalls += t.Calls
		r.InputTokens += t.Input
		r.OutputTokens += t.Output
		r.CacheReadInputTokens += t.CacheRead
		r.CacheWriteInputTokens += t.CacheWrite
		r.UnpricedCalls += t.Unpriced
		if t.Currency != "" {
			r.Cost = append(r.Cost, &agentdv1.Money{Currency: t.Currency, Nanos: t.Nanos})
		}
	}
	return rows
}

func (a *Admin) budgetsChanged() {
	if a.o.BudgetsChanged != nil {
		a.o.BudgetsChanged()
	}
}
