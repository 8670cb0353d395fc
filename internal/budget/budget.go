// Package budget says what a tenant's budgets are and when their periods
// turn. It checks a budget's specification (an agentd.v1.Budget), says
// whose spending a budget counts for a model call (the tenant's, an API
// key's, an end user's), and gives the span of counters that spending sums
// at a moment: a calendar day's or month's in the budget's time zone, or a
// window of whole hours. It keeps no state: the store counts, the server
// enforces.
package budget

import (
	"cmp"
	"regexp"
	"time"

	"golang.org/x/text/currency"

	agentdv1 "github.com/agentd/agentd/gen/go/agentd/v1"
	"github.com/agentd/agentd/internal/fault"
)

// MaxRollingHours is the longest rolling window: 31 days.
const MaxRollingHours = 744

// DefaultWarnPercent is the soft threshold of a budget that sets none.
const DefaultWarnPercent = 80

// Budget is a checked budget, never changed: safe for concurrent use.
type Budget struct {
	spec *agentdv1.Budget
	loc  *time.Location
}

// Span is the spending a budget counts at a moment: its subject's
// counters from From to Bucket (the bucket a call now adds to), until End,
// when the period turns (a rolling window: when its oldest hour leaves
// it).
type Span struct {
	From, Bucket, End time.Time
}

var namePattern = regexp.MustCompile(`^[a-z0-9_-]{1,64}$`)

// Parse checks spec, reporting each problem under field (e.g. "budget" or
// "tenants.acme.budgets[0]") followed by the field's name. It keeps spec.
func Parse(spec *agentdv1.Budget, field string) (*Budget, []fault.Violation) {
	var bad []fault.Violation
	add := func(name, desc string) {
		bad = append(bad, fault.Violation{Field: field + "." + name, Description: desc})
	}
	if !namePattern.MatchString(spec.GetName()) {
		add("name", "must be 1 to 64 of a-z, 0-9, - and _")
	}
	checkScope(spec, add)
	loc := checkPeriod(spec, add)
	checkLimits(spec, add)
	if len(bad) > 0 {
		return nil, bad
	}
	return &Budget{spec: spec, loc: loc}, nil
}

func checkScope(spec *agentdv1.Budget, add func(string, string)) {
	switch spec.GetScope() {
	case agentdv1.BudgetScope_BUDGET_SCOPE_TENANT:
		if spec.GetSubject() != "" {
			add("subject", "a tenant's budget has no subject")
		}
	case agentdv1.BudgetScope_BUDGET_SCOPE_API_KEY, agentdv1.BudgetScope_BUDGET_SCOPE_END_USER:
	default:
		add("scope", "must be TENANT, API_KEY or END_USER")
	}
}

// checkPeriod checks the period and returns the location its days begin
// in.
func checkPeriod(spec *agentdv1.Budget, add func(string, string)) *time.Location {
	switch spec.GetPeriod() {
	case agentdv1.BudgetPeriod_BUDGET_PERIOD_DAY, agentdv1.BudgetPeriod_BUDGET_PERIOD_MONTH:
		if spec.GetRollingHours() != 0 {
			add("rolling_hours", "only a ROLLING budget has a window")
		}
		loc, err := time.LoadLocation(cmp.Or(spec.GetTimeZone(), "UTC"))
		if err != nil || spec.GetTimeZone() == "Local" {
			add("time_zone", "must be an IANA time zone, e.g. Europe/Paris or UTC")
			return time.UTC
		}
		return loc
	case agentdv1.BudgetPeriod_BUDGET_PERIOD_ROLLING:
		if h := spec.GetRollingHours(); h < 1 || h > MaxRollingHours {
			add("rolling_hours", "a ROLLING budget's window must be 1..744 hours")
		}
		if spec.GetTimeZone() != "" {
			add("time_zone", "a ROLLING budget counts whole hours and has no time zone")
		}
	default:
		add("period", "must be DAY, MONTH or ROLLING")
	}
	return time.UTC
}

func checkLimits(spec *agentdv1.Budget, add func(string, string)) {
	cost := spec.GetMaxCost()
	switch {
	case spec.GetMaxTokens() < 0:
		add("max_tokens", "must not be negative")
	case cost.GetNanos() < 0:
		add("max_cost.nanos", "must not be negative")
	case spec.GetMaxTokens() == 0 && cost.GetNanos() == 0:
		add("max_tokens", "a budget limits tokens (max_tokens), money (max_cost) or both")
	}
	if cost.GetNanos() > 0 {
		if u, err := currency.ParseISO(cost.GetCurrency()); err != nil || u.String() != cost.GetCurrency() {
			add("max_cost.currency", "must be an ISO 4217 currency code, e.g. USD")
		}
	}
	if p := spec.GetWarnPercent(); p < 0 || p > 100 {
		add("warn_percent", "must be 0..100 (0: 80)")
	}
	if a := spec.GetAction(); a < agentdv1.BudgetAction_BUDGET_ACTION_UNSPECIFIED || a > agentdv1.BudgetAction_BUDGET_ACTION_PAUSE {
		add("action", "must be FAIL or PAUSE")
	}
}

// Spec is the budget's specification.
func (b *Budget) Spec() *agentdv1.Budget { return b.spec }

// Name is the budget's name.
func (b *Budget) Name() string { return b.spec.GetName() }

// Pauses says a refused generation pauses rather than fails.
func (b *Budget) Pauses() bool {
	return b.spec.GetAction() == agentdv1.BudgetAction_BUDGET_ACTION_PAUSE
}

// Subject is whose spending the budget counts for a call by the API key
// apiKey on behalf of endUser, and false when the budget does not apply
// to it: a key's or end user's budget applies to its subject (every one
// when it names none), and a call with no end user has none to count.
func (b *Budget) Subject(apiKey, endUser string) (string, bool) {
	var who string
	switch b.spec.GetScope() {
	case agentdv1.BudgetScope_BUDGET_SCOPE_TENANT:
		return "", true
	case agentdv1.BudgetScope_BUDGET_SCOPE_API_KEY:
		who = apiKey
	default:
		who = endUser
	}
	if who == "" || b.spec.GetSubject() != "" && b.spec.GetSubject() != who {
		return "", false
	}
	return who, true
}

// Limits are the budget's limits: tokens and billionths of currency (0:
// not limited).
func (b *Budget) Limits() (tokens, nanos int64, currency string) {
	return b.spec.GetMaxTokens(), b.spec.GetMaxCost().GetNanos(), b.spec.GetMaxCost().GetCurrency()
}

// WarnPercent is the soft threshold, a percentage of each limit.
func (b *Budget) WarnPercent() int64 {
	return int64(cmp.Or(b.spec.GetWarnPercent(), DefaultWarnPercent))
}

// SpanAt is the span the budget counts at now. A calendar period begins
// at the whole hour at or before its local midnight, so that every
// period is a run of the hours the usage ledger counts by.
func (b *Budget) SpanAt(now time.Time) Span {
	switch b.spec.GetPeriod() {
	case agentdv1.BudgetPeriod_BUDGET_PERIOD_ROLLING:
		bucket := now.UTC().Truncate(time.Hour)
		from := bucket.Add(-time.Duration(b.spec.GetRollingHours()-1) * time.Hour)
		return Span{From: from, Bucket: bucket, End: bucket.Add(time.Hour)}
	case agentdv1.BudgetPeriod_BUDGET_PERIOD_MONTH:
		local := now.In(b.loc)
		return calendarAt(now, time.Date(local.Year(), local.Month(), 1, 0, 0, 0, 0, b.loc), func(t time.Time) time.Time { return t.AddDate(0, 1, 0) })
	default:
		local := now.In(b.loc)
		return calendarAt(now, time.Date(local.Year(), local.Month(), local.Day(), 0, 0, 0, 0, b.loc), func(t time.Time) time.Time { return t.AddDate(0, 0, 1) })
	}
}

// calendarAt is the span at now of the calendar period that begins at
// start (local time) and ends at next(start), or of the one after it
// where now has passed its end: in a time zone whose offset is not whole
// hours, the next period begins at the hour before its local midnight,
// before this one's local end.
func calendarAt(now, start time.Time, next func(time.Time) time.Time) Span {
	s := calendar(start, next(start))
	if !now.Before(s.End) {
		s = calendar(next(start), next(next(start)))
	}
	return s
}

// calendar is the span of the period [start, end) of local times.
func calendar(start, end time.Time) Span {
	from := start.UTC().Truncate(time.Hour)
	return Span{From: from, Bucket: from, End: end.UTC().Truncate(time.Hour)}
}
