package budget_test

import (
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	agentdv1 "github.com/agentd/agentd/gen/go/agentd/v1"
	"github.com/agentd/agentd/internal/budget"
	"github.com/agentd/agentd/internal/fault"
)

func at(s string) time.Time {
	t, err := time.Parse(time.RFC3339, s)
	if err != nil {
		panic(err)
	}
	return t
}

func mustParse(t *testing.T, spec *agentdv1.Budget) *budget.Budget {
	t.Helper()
	b, bad := budget.Parse(spec, "budget")
	if bad != nil {
		t.Fatalf("Parse: %v", bad)
	}
	return b
}

// TestSpanAt: a period's counters are a run of whole hours: a calendar
// day or month begins at the hour at or before its local midnight, a
// rolling window is its last hours, and each ends when it turns.
func TestSpanAt(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name string
		spec *agentdv1.Budget
		now  string
		want budget.Span
	}{
		{"a UTC day", &agentdv1.Budget{Period: agentdv1.BudgetPeriod_BUDGET_PERIOD_DAY},
			"2026-12-06T13:45:00Z", budget.Span{From: at("2026-12-06T00:00:00Z"), Bucket: at("2026-12-06T00:00:00Z"), End: at("2026-12-07T00:00:00Z")}},
		{"a day in Paris", &agentdv1.Budget{Period: agentdv1.BudgetPeriod_BUDGET_PERIOD_DAY, TimeZone: "Europe/Paris"},
			"2026-12-06T23:30:00Z", budget.Span{From: at("2026-12-06T23:00:00Z"), Bucket: at("2026-12-06T23:00:00Z"), End: at("2026-12-07T23:00:00Z")}},
		{"a day in Kolkata begins at the hour before its midnight", &agentdv1.Budget{Period: agentdv1.BudgetPeriod_BUDGET_PERIOD_DAY, TimeZone: "Asia/Kolkata"},
			"2026-12-06T12:00:00Z", budget.Span{From: at("2026-12-05T18:00:00Z"), Bucket: at("2026-12-05T18:00:00Z"), End: at("2026-12-06T18:00:00Z")}},
		{"and the next one begins there, before the local midnight", &agentdv1.Budget{Period: agentdv1.BudgetPeriod_BUDGET_PERIOD_DAY, TimeZone: "Asia/Kolkata"},
			"2026-12-06T18:15:00Z", budget.Span{From: at("2026-12-06T18:00:00Z"), Bucket: at("2026-12-06T18:00:00Z"), End: at("2026-12-07T18:00:00Z")}},
		{"the day summer time begins in New York has 23 hours", &agentdv1.Budget{Period: agentdv1.BudgetPeriod_BUDGET_PERIOD_DAY, TimeZone: "America/New_York"},
			"2026-03-08T12:00:00Z", budget.Span{From: at("2026-03-08T05:00:00Z"), Bucket: at("2026-03-08T05:00:00Z"), End: at("2026-03-09T04:00:00Z")}},
		{"a month", &agentdv1.Budget{Period: agentdv1.BudgetPeriod_BUDGET_PERIOD_MONTH},
			"2026-12-31T23:59:59Z", budget.Span{From: at("2026-12-01T00:00:00Z"), Bucket: at("2026-12-01T00:00:00Z"), End: at("2027-01-01T00:00:00Z")}},
		{"a rolling day", &agentdv1.Budget{Period: agentdv1.BudgetPeriod_BUDGET_PERIOD_ROLLING, RollingHours: 24},
			"2026-12-06T13:45:00Z", budget.Span{From: at("2026-12-05T14:00:00Z"), Bucket: at("2026-12-06T13:00:00Z"), End: at("2026-12-06T14:00:00Z")}},
		{"a rolling hour", &agentdv1.Budget{Period: agentdv1.BudgetPeriod_BUDGET_PERIOD_ROLLING, RollingHours: 1},
			"2026-12-06T13:45:00Z", budget.Span{From: at("2026-12-06T13:00:00Z"), Bucket: at("2026-12-06T13:00:00Z"), End: at("2026-12-06T14:00:00Z")}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			tc.spec.Name, tc.spec.Scope, tc.spec.MaxTokens = "b", agentdv1.BudgetScope_BUDGET_SCOPE_TENANT, 1
			got := mustParse(t, tc.spec).SpanAt(at(tc.now))
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("SpanAt(%s) (-want +got):\n%s", tc.now, diff)
			}
		})
	}
}

// TestParseRefuses: each problem of a specification is named by its
// field.
func TestParseRefuses(t *testing.T) {
	t.Parallel()
	_, bad := budget.Parse(&agentdv1.Budget{
		Name: "Daily!", Scope: agentdv1.BudgetScope_BUDGET_SCOPE_TENANT, Subject: "ada",
		Period: agentdv1.BudgetPeriod_BUDGET_PERIOD_DAY, TimeZone: "Mars/Olympus", RollingHours: 3,
		MaxCost: &agentdv1.Money{Currency: "usd", Nanos: 5}, WarnPercent: 120,
	}, "budget")
	var fields []string
	for _, v := range bad {
		fields = append(fields, v.Field)
	}
	want := []string{"budget.name", "budget.subject", "budget.rolling_hours", "budget.time_zone", "budget.max_cost.currency", "budget.warn_percent"}
	if diff := cmp.Diff(want, fields); diff != "" {
		t.Errorf("fields refused (-want +got):\n%s", diff)
	}
	_, bad = budget.Parse(&agentdv1.Budget{Name: "x", Scope: agentdv1.BudgetScope_BUDGET_SCOPE_API_KEY,
		Period: agentdv1.BudgetPeriod_BUDGET_PERIOD_ROLLING}, "b")
	want = []string{"b.rolling_hours", "b.max_tokens"}
	if diff := cmp.Diff(want, fieldsOf(bad)); diff != "" {
		t.Errorf("a window and a limit missing (-want +got):\n%s", diff)
	}
}

func fieldsOf(bad []fault.Violation) []string {
	var out []string
	for _, v := range bad {
		out = append(out, v.Field)
	}
	return out
}

// TestSubject: a tenant's budget counts every call; a key's or end
// user's counts each subject apart, or only the one it names, and a call
// without an end user is not counted by an end user's budget.
func TestSubject(t *testing.T) {
	t.Parallel()
	spec := func(scope agentdv1.BudgetScope, subject string) *budget.Budget {
		return mustParse(t, &agentdv1.Budget{Name: "b", Scope: scope, Subject: subject, Period: agentdv1.BudgetPeriod_BUDGET_PERIOD_DAY, MaxTokens: 1})
	}
	tests := []struct {
		name            string
		b               *budget.Budget
		apiKey, endUser string
		want            string
		applies         bool
	}{
		{"tenant", spec(agentdv1.BudgetScope_BUDGET_SCOPE_TENANT, ""), "k", "u", "", true},
		{"each key", spec(agentdv1.BudgetScope_BUDGET_SCOPE_API_KEY, ""), "k", "u", "k", true},
		{"another key", spec(agentdv1.BudgetScope_BUDGET_SCOPE_API_KEY, "j"), "k", "u", "", false},
		{"its end user", spec(agentdv1.BudgetScope_BUDGET_SCOPE_END_USER, "u"), "k", "u", "u", true},
		{"no end user", spec(agentdv1.BudgetScope_BUDGET_SCOPE_END_USER, ""), "k", "", "", false},
	}
	for _, tc := range tests {
		got, ok := tc.b.Subject(tc.apiKey, tc.endUser)
		if got != tc.want || ok != tc.applies {
			t.Errorf("%s: Subject = %q, %v; want %q, %v", tc.name, got, ok, tc.want, tc.applies)
		}
	}
}
