package config

import (
	"cmp"
	"fmt"
	"maps"
	"slices"
	"strings"

	agentdv1 "github.com/agentd/agentd/gen/go/agentd/v1"
	"github.com/agentd/agentd/internal/budget"
)

// Budget caps what a tenant, each of its API keys or each of its end
// users spends on model calls in a period: tokens, money or both. Budgets
// written here apply on every replica and cannot be changed through the
// admin API, which sets budgets of its own beside them (docs/budgets.md).
type Budget struct {
	// Name identifies the budget within its tenant: 1 to 64 of a-z, 0-9,
	// "-" and "_".
	Name string `yaml:"name"`
	// Scope is whose spending it counts: the tenant's whole, or each API
	// key's or each end user's.
	Scope string `yaml:"scope" enum:",tenant,api_key,end_user" default:"tenant"`
	// Subject holds only this API key (by its name) or end user to the
	// budget; empty: each of them, separately.
	Subject string `yaml:"subject"`
	// Period is when its count starts again: each calendar day or month
	// in time_zone, or a window of rolling_hours.
	Period string `yaml:"period" enum:"day,month,rolling"`
	// RollingHours is a rolling period's window, 1..744.
	RollingHours int `yaml:"rolling_hours"`
	// TimeZone is the IANA time zone a day or month begins in; empty:
	// UTC.
	TimeZone string `yaml:"time_zone"`
	// MaxTokens caps the tokens (input, output, cache reads and writes
	// together); 0: not limited.
	MaxTokens int64 `yaml:"max_tokens"`
	// MaxCost caps the money at agentd's price table; absent: not
	// limited.
	MaxCost *Money `yaml:"max_cost"`
	// WarnPercent is the soft threshold, a percentage of each limit,
	// past which a generation gets a warning event; 0: 80.
	WarnPercent int `yaml:"warn_percent"`
	// Action is what a generation does when the budget refuses its next
	// model call: fail RESOURCE_EXHAUSTED, or pause until a person
	// resumes it once the budget allows.
	Action string `yaml:"action" enum:",fail,pause" default:"fail"`
}

// Spec is the budget as the admin API shows it, for tenant.
func (b Budget) Spec(tenant string) *agentdv1.Budget {
	spec := &agentdv1.Budget{
		Name: b.Name, Tenant: tenant, Subject: b.Subject, RollingHours: int32(b.RollingHours), TimeZone: b.TimeZone,
		MaxTokens: b.MaxTokens, WarnPercent: int32(b.WarnPercent), FromConfig: true,
		Scope:  agentdv1.BudgetScope(agentdv1.BudgetScope_value["BUDGET_SCOPE_"+strings.ToUpper(cmp.Or(b.Scope, "tenant"))]),
		Period: agentdv1.BudgetPeriod(agentdv1.BudgetPeriod_value["BUDGET_PERIOD_"+strings.ToUpper(b.Period)]),
		Action: agentdv1.BudgetAction(agentdv1.BudgetAction_value["BUDGET_ACTION_"+strings.ToUpper(b.Action)]),
	}
	if m := b.MaxCost; m != nil {
		nanos, _ := m.Nanos() // checked at load
		spec.MaxCost = &agentdv1.Money{Currency: m.Currency, Nanos: nanos}
	}
	return spec
}

// Budgets parses budgets, the budgets of tenant written at key (e.g.
// "tenants.acme.budgets"), each problem named by its key.
func Budgets(budgets []Budget, tenant, key string) ([]*budget.Budget, []string) {
	var out []*budget.Budget
	var bad []string
	seen := make(map[string]bool, len(budgets))
	for i, b := range budgets {
		at := fmt.Sprintf("%s[%d]", key, i)
		if m := b.MaxCost; m != nil {
			if problems := m.problems(at + ".max_cost"); len(problems) > 0 {
				bad = append(bad, problems...)
				continue
			}
		}
		parsed, problems := budget.Parse(b.Spec(tenant), at)
		for _, v := range problems {
			bad = append(bad, v.Field+": "+v.Description)
		}
		if seen[b.Name] {
			bad = append(bad, fmt.Sprintf("%s.name: %q names two budgets", at, b.Name))
		}
		seen[b.Name] = true
		if parsed != nil {
			out = append(out, parsed)
		}
	}
	return out, bad
}

// validateBudgets reports the problems of every budget written.
func (c *Config) validateBudgets(bad func(string, ...any)) {
	report := func(problems []string) {
		for _, p := range problems {
			bad("%s", p)
		}
	}
	_, problems := Budgets(c.Budgets, "", "budgets")
	report(problems)
	for _, name := range slices.Sorted(maps.Keys(c.Tenants)) {
		_, problems := Budgets(c.Tenants[name].Budgets, name, "tenants."+name+".budgets")
		report(problems)
	}
}
