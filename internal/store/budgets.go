package store

import (
	"context"
	"time"

	"github.com/agentd/agentd/internal/fault"
)

// BudgetDef is a budget set through the admin API, as the store keeps it:
// its tenant and name, and its specification, which the store keeps as
// given and does not read (the server's encoding of an agentd.v1.Budget).
type BudgetDef struct {
	Tenant, Name string
	Spec         []byte
	UpdatedAt    time.Time
}

// Charge is a model call's spending against one budget's subject: its
// tenant, the budget's name, and the subject (an API key, an end user;
// "" for the tenant's whole). Bucket is the counter it adds to: the
// period's start for a calendar period, the hour for a rolling window.
// The budget's spending is the sum of its subject's buckets in [From,
// Bucket] (From == Bucket for a calendar period), with the reservations
// of calls under way that were made in that span. MaxTokens and MaxNanos
// are the budget's limits (0: not limited); Tokens and Nanos the amount
// (an estimate to reserve, or what the call used).
type Charge struct {
	Tenant, Budget, Subject string
	From, Bucket            time.Time
	MaxTokens, MaxNanos     int64
	Tokens, Nanos           int64
}

// Spent is a budget subject's spending in a span: counted, and reserved
// by calls under way.
type Spent struct {
	Tokens, Nanos                 int64
	ReservedTokens, ReservedNanos int64
}

// Refused says which charge of a reservation a budget refused, and what
// its subject had spent (reservations included) when it did.
type Refused struct {
	// Charge is the index of the refused charge in the reservation.
	Charge int
	Spent  Spent
}

// SubjectSpend is one subject's spending of a budget in one bucket.
type SubjectSpend struct {
	Subject string
	Spent
}

// UsageEntry is what the model calls of one tenant's API key and end
// user used in one hour, priced in one currency ("" when none was
// priced): a row of the usage ledger, added to what the row holds.
type UsageEntry struct {
	Tenant, APIKey, EndUser, Currency string
	// Hour is the hour's start (UTC, truncated to the hour).
	Hour                                        time.Time
	Calls, Input, Output, CacheRead, CacheWrite int64
	Nanos                                       int64
	// Unpriced counts calls whose cost was not wholly known.
	Unpriced int64
}

// UsageQuery selects the usage ledger's rows of a tenant in [From, To)
// (whole hours), summed by GroupBy: "" (the tenant's whole), "api_key"
// or "end_user", keeping only Subject's rows when it is set.
type UsageQuery struct {
	Tenant   string
	From, To time.Time
	GroupBy  string
	Subject  string
}

// UsageTotal is one group's sum: Subject is the key or end user ("" for
// the whole), one row per currency.
type UsageTotal struct {
	Subject, Currency                           string
	Calls, Input, Output, CacheRead, CacheWrite int64
	Nanos, Unpriced                             int64
}

// Budgets keeps what the tenants' budgets count, shared by every replica:
// the budgets set through the admin API, their subjects' spending per
// bucket with the reservations of model calls under way, and the hourly
// usage ledger. Safe for concurrent use.
type Budgets interface {
	// PutBudget creates or replaces the budget (Tenant, Name), updated
	// at UpdatedAt (now when zero).
	PutBudget(ctx context.Context, b BudgetDef) error
	// DeleteBudget deletes the budget with its counters and
	// reservations; false when there was none.
	DeleteBudget(ctx context.Context, tenant, name string) (bool, error)
	// ListBudgets returns every tenant's budgets, by tenant and name.
	ListBudgets(ctx context.Context) ([]BudgetDef, error)

	// Reserve checks each charge's budget subject, atomically with every
	// other Reserve and Settle: when its spending and live reservations
	// (those not expired at now) have reached either of its limits, the
	// charge is refused and nothing is reserved (the first refused is
	// returned, and the charges are left as they were). Otherwise Reserve
	// reserves for each charge at most its amount, no more than what is
	// left of its limits, and writes what it reserved back into the
	// charge: a dimension (tokens, nanos) without a limit is reserved
	// whole. The reservation lasts under id until expires. A caller may
	// so reserve a chunk of a budget at once and spend from it in memory:
	// callers that reserve at once are never granted together more than
	// is left, and pass a limit only by what they spend beyond their
	// grants. Each charge's grant is reckoned alone, from the other
	// reservations: two charges of one subject in one reservation could
	// each be granted what is left. id names the reservation in the whole
	// store, every tenant's (Settle ends it by id alone); a Reserve made
	// again under an id (a retry) replaces what the first reserved, and
	// its check leaves that out.
	Reserve(ctx context.Context, id string, charges []Charge, now, expires time.Time) (*Refused, error)
	// Settle ends reservation id (an unknown or expired one is no
	// error) and adds each charge's amount to its bucket, returning each
	// subject's spending after it, in the charges' order.
	Settle(ctx context.Context, id string, charges []Charge, now time.Time) ([]Spent, error)
	// BudgetSpends returns the subjects' spending of budget (tenant, name)
	// in [from, bucket] (as a Charge's span), the most tokens (counted
	// and reserved) first, then by subject, at most limit of them (every
	// one for 0).
	BudgetSpends(ctx context.Context, tenant, name string, from, bucket, now time.Time, limit int) ([]SubjectSpend, error)

	// AddUsage adds entries to the usage ledger.
	AddUsage(ctx context.Context, entries []UsageEntry) error
	// SumUsage sums the ledger's rows that q selects, the most money
	// first, then by subject and currency. A GroupBy of no column, or a
	// Subject without one, is Invalid.
	SumUsage(ctx context.Context, q UsageQuery) ([]UsageTotal, error)

	// SweepSpending deletes budget counters and ledger rows of hours
	// before before, and reservations expired at it, returning how many
	// rows it deleted.
	SweepSpending(ctx context.Context, before time.Time) (int64, error)
}

// maxRows is the most rows (charges, usage entries) that the statements
// built once are built for, 1 to maxRows: a statement's round through the
// driver (SQLite's) or its planning (PostgreSQL's) costs more than a
// row. More rows take several statements (SQLite) or one built for them
// (PostgreSQL).
const maxRows = 8

// rowStatements builds a statement for each count of rows, 1 to maxRows.
func rowStatements(build func(k int) string) (qs [maxRows]string) {
	for k := 1; k <= maxRows; k++ {
		qs[k-1] = build(k)
	}
	return qs
}

// reached reports whether s has reached either of c's limits, so that
// the charge is refused.
func (c Charge) reached(s Spent) bool {
	return c.MaxTokens > 0 && s.Tokens+s.ReservedTokens >= c.MaxTokens ||
		c.MaxNanos > 0 && s.Nanos+s.ReservedNanos >= c.MaxNanos
}

// granted is c with the amounts that Reserve grants it once its subject
// has spent s (its limits not reached): each limited one no more than
// what is left of its limit.
func (c Charge) granted(s Spent) Charge {
	c.Tokens = grant(c.Tokens, c.MaxTokens, s.Tokens+s.ReservedTokens)
	c.Nanos = grant(c.Nanos, c.MaxNanos, s.Nanos+s.ReservedNanos)
	return c
}

// grant is amount, or what is left of limit once used when that is less
// (a limit of 0 is none).
func grant(amount, limit, used int64) int64 {
	if limit > 0 {
		return min(amount, limit-used)
	}
	return amount
}

// usageGroupColumns are the ledger's columns that SumUsage groups by, by
// UsageQuery.GroupBy ("": none, the tenant's whole).
var usageGroupColumns = map[string]string{"": "", "api_key": "api_key", "end_user": "end_user"}

// usageGroup is the column that q groups by ("" for none), or Invalid: a
// GroupBy of no column, or a Subject without one (whose key or end user
// would it be?).
func usageGroup(q UsageQuery) (string, error) {
	col, ok := usageGroupColumns[q.GroupBy]
	if !ok {
		return "", fault.New(fault.Invalid, "store: usage grouped by %q: want \"\", \"api_key\" or \"end_user\"", q.GroupBy)
	}
	if col == "" && q.Subject != "" {
		return "", fault.New(fault.Invalid, "store: usage of a subject needs a GroupBy that says whether it is an API key or an end user")
	}
	return col, nil
}

// sumUsageQuery is SumUsage's statement for the group column col ("" for
// none), narrowed to one subject or not: param(i) is the dialect's i-th
// parameter (the tenant, the span's start and end, the subject), and
// sum(column) its sum as an integer. One row per subject and currency,
// the most spent first.
func sumUsageQuery(col string, narrowed bool, param func(int) string, sum func(string) string) string {
	subject, groups := "''", "currency"
	if col != "" {
		subject, groups = col, col+", currency"
	}
	q := `SELECT ` + subject + `, currency, ` + sum("calls") + `, ` + sum("input") + `, ` + sum("output") + `, ` +
		sum("cache_read") + `, ` + sum("cache_write") + `, ` + sum("nanos") + `, ` + sum("unpriced") + `
		FROM usage_ledger WHERE tenant = ` + param(1) + ` AND hour >= ` + param(2) + ` AND hour < ` + param(3)
	if narrowed {
		q += ` AND ` + col + ` = ` + param(4)
	}
	return q + ` GROUP BY ` + groups + ` ORDER BY 8 DESC, 1, 2`
}

// updated is when d was set: its UpdatedAt, or now when it says none.
func (d BudgetDef) updated() time.Time {
	if d.UpdatedAt.IsZero() {
		return time.Now()
	}
	return d.UpdatedAt
}

// hour is e's hour, truncated to its start: entries of one hour add to
// one row whatever the times their callers took.
func (e UsageEntry) hour() time.Time { return e.Hour.Truncate(time.Hour) }

// rowScanner is a row of either store's results.
type rowScanner interface{ Scan(dest ...any) error }

func scanSubjectSpend(row rowScanner) (SubjectSpend, error) {
	var s SubjectSpend
	err := row.Scan(&s.Subject, &s.Tokens, &s.Nanos, &s.ReservedTokens, &s.ReservedNanos)
	return s, err
}

func scanUsageTotal(row rowScanner) (UsageTotal, error) {
	var u UsageTotal
	err := row.Scan(&u.Subject, &u.Currency, &u.Calls, &u.Input, &u.Output, &u.CacheRead, &u.CacheWrite, &u.Nanos, &u.Unpriced)
	return u, err
}
