package config

import (
	"testing"

	"github.com/google/go-cmp/cmp"
)

// TestBudgetsProblems: each problem of a written budget is named by its
// key, the tenant's budgets as well as the global ones.
func TestBudgetsProblems(t *testing.T) {
	t.Parallel()
	file := `budgets:
  - {name: daily, scope: tenant, period: day, max_tokens: 1000, max_cost: {currency: USD, amount: "2.50"}}
  - {name: daily, scope: tenant, period: day, time_zone: Atlantis/Deep, max_tokens: 1}
tenants:
  acme:
    budgets:
      - {name: keys, scope: api_key, period: rolling, rolling_hours: 0, max_cost: {currency: usd, amount: lots}}
      - {name: users, scope: end_user, period: month, action: stop, max_tokens: 5}
`
	_, got := loadFile(t, file, nil)
	want := []string{
		`agentd.yaml:8: tenants.acme.budgets[1].action: "stop" is not one of fail, pause, or unset`,
		"agentd.yaml:3: budgets[1].time_zone: must be an IANA time zone, e.g. Europe/Paris or UTC",
		`agentd.yaml:3: budgets[1].name: "daily" names two budgets`,
		`agentd.yaml:7: tenants.acme.budgets[0].max_cost.currency: "usd" is not an ISO 4217 currency code; write its three capital letters, e.g. USD or EUR`,
		`agentd.yaml:7: tenants.acme.budgets[0].max_cost.amount: "lots" is not an amount: write a decimal of the currency's unit, e.g. 3 or 0.075`,
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("problems (-want +got):\n%s", diff)
	}
}
