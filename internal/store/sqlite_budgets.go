package store

import (
	"context"
	"database/sql"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"
)

// sqliteBudgets is the Budgets of an SQLite database. Its writes of more
// than one statement are transactions of the store's committer, as the
// generations' are: one writer at a time, across processes, so that a
// Reserve's check and its reservation see no other write between them.
type sqliteBudgets struct{ g sqliteGenerations }

// Budgets returns the store's budgets.
func (s *SQLite) Budgets() Budgets {
	return sqliteBudgets{sqliteGenerations{s.db, s.stmts, s.commit, s.replicas, s.live}}
}

// qSpent[k-1] sums the spending of k charges' subjects in their spans,
// a row for each, with its index among them: ?1 is the time at which
// reservations count while live, ?2 a reservation whose own do not (one
// that Reserve replaces), then each charge's tenant, budget and subject
// and its span's first and last buckets.
var qSpent = rowStatements(func(k int) string {
	var b strings.Builder
	for i := range k {
		if i > 0 {
			b.WriteString(` UNION ALL `)
		}
		fmt.Fprintf(&b, `
			SELECT %[1]d, coalesce(sum(t), 0), coalesce(sum(n), 0), coalesce(sum(rt), 0), coalesce(sum(rn), 0) FROM (
				SELECT tokens AS t, nanos AS n, 0 AS rt, 0 AS rn FROM budget_counters
				WHERE tenant = ?%[2]d AND budget = ?%[3]d AND subject = ?%[4]d AND bucket BETWEEN ?%[5]d AND ?%[6]d
				UNION ALL
				SELECT 0, 0, tokens, nanos FROM budget_reservations
				WHERE tenant = ?%[2]d AND budget = ?%[3]d AND subject = ?%[4]d AND bucket BETWEEN ?%[5]d AND ?%[6]d
					AND expires_at > ?1 AND id <> ?2)`, i, 3+5*i, 4+5*i, 5+5*i, 6+5*i, 7+5*i)
	}
	return b.String()
})

// qReserve[k-1] reserves k charges as reservation ?1 until ?2: each
// charge's index, tenant, budget, subject, bucket, tokens and nanos. A
// Reserve made again under its id replaces what the first reserved.
var qReserve = rowStatements(func(k int) string {
	return `INSERT INTO budget_reservations (id, expires_at, n, tenant, budget, subject, bucket, tokens, nanos) VALUES ` +
		chargeValues(k, 3, 7, "?1, ?2, ") + `
		ON CONFLICT (id, n) DO UPDATE SET tenant = excluded.tenant, budget = excluded.budget, subject = excluded.subject,
			bucket = excluded.bucket, tokens = excluded.tokens, nanos = excluded.nanos, expires_at = excluded.expires_at`
})

// qAddSpending[k-1] adds k amounts to their counters: each one's tenant,
// budget, subject, bucket, tokens and nanos. (Rows of one counter add up:
// SQLite writes the rows of an upsert one after the other.)
var qAddSpending = rowStatements(func(k int) string {
	return `INSERT INTO budget_counters (tenant, budget, subject, bucket, tokens, nanos) VALUES ` + chargeValues(k, 1, 6, "") + `
		ON CONFLICT (tenant, budget, subject, bucket) DO UPDATE SET tokens = tokens + excluded.tokens, nanos = nanos + excluded.nanos`
})

// chargeValues is a VALUES list of k rows of width parameters each, from
// ?first, each row after prefix.
func chargeValues(k, first, width int, prefix string) string {
	var b strings.Builder
	for i := range k {
		if i > 0 {
			b.WriteString(`, `)
		}
		b.WriteString(`(` + prefix)
		for j := range width {
			if j > 0 {
				b.WriteString(`, `)
			}
			fmt.Fprintf(&b, `?%d`, first+width*i+j)
		}
		b.WriteString(`)`)
	}
	return b.String()
}

const (
	qEndReservation = `DELETE FROM budget_reservations WHERE id = ?`
	qAddUsage       = `
		INSERT INTO usage_ledger (tenant, api_key, hour, end_user, currency, calls, input, output, cache_read, cache_write, nanos, unpriced)
		VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)
		ON CONFLICT (tenant, api_key, hour, end_user, currency) DO UPDATE SET
			calls = calls + excluded.calls, input = input + excluded.input, output = output + excluded.output,
			cache_read = cache_read + excluded.cache_read, cache_write = cache_write + excluded.cache_write,
			nanos = nanos + excluded.nanos, unpriced = unpriced + excluded.unpriced`
)

// budgetStatements are the statements of a model call's Reserve, Settle
// and usage, prepared at open with the generations' (hotStatements).
var budgetStatements = slices.Concat(qSpent[:], qReserve[:], qAddSpending[:], []string{qEndReservation, qAddUsage})

func (b sqliteBudgets) PutBudget(ctx context.Context, d BudgetDef) error {
	_, err := b.g.db.ExecContext(ctx, `
		INSERT INTO budgets (tenant, name, spec, updated_at) VALUES (?, ?, ?, ?)
		ON CONFLICT (tenant, name) DO UPDATE SET spec = excluded.spec, updated_at = excluded.updated_at`,
		d.Tenant, d.Name, orEmpty(d.Spec), d.updated().UnixMilli())
	if err != nil {
		return unavailable(err)
	}
	return nil
}

func (b sqliteBudgets) DeleteBudget(ctx context.Context, tenant, name string) (bool, error) {
	var found bool
	err := b.g.inTx(ctx, func(ctx context.Context, tx *sql.Tx) error {
		n, err := affected(tx.ExecContext(ctx, `DELETE FROM budgets WHERE tenant = ? AND name = ?`, tenant, name))
		if err != nil {
			return err
		}
		found = n == 1
		for _, q := range []string{
			`DELETE FROM budget_counters WHERE tenant = ? AND budget = ?`,
			`DELETE FROM budget_reservations WHERE tenant = ? AND budget = ?`,
		} {
			if _, err := tx.ExecContext(ctx, q, tenant, name); err != nil {
				return unavailable(err)
			}
		}
		return nil
	})
	return found, err
}

func (b sqliteBudgets) ListBudgets(ctx context.Context) ([]BudgetDef, error) {
	rows, err := b.g.db.QueryContext(ctx, `SELECT tenant, name, spec, updated_at FROM budgets ORDER BY tenant, name`)
	return sqliteCollect(rows, err, func(row rowScanner) (BudgetDef, error) {
		var d BudgetDef
		var updated int64
		err := row.Scan(&d.Tenant, &d.Name, &d.Spec, &updated)
		d.UpdatedAt = time.UnixMilli(updated)
		return d, err
	})
}

func (b sqliteBudgets) Reserve(ctx context.Context, id string, charges []Charge, now, expires time.Time) (*Refused, error) {
	if len(charges) == 0 {
		return nil, nil
	}
	var refused *Refused
	var granted []Charge
	err := b.g.inTx(ctx, func(ctx context.Context, tx *sql.Tx) error {
		var err error
		refused, granted, err = b.reserve(ctx, tx, id, charges, now, expires)
		return err
	})
	if err != nil {
		return nil, err
	}
	// Written back only once committed: the committer may run reserve
	// again, which must see the amounts asked.
	copy(charges, granted)
	return refused, nil
}

// reserve checks every charge, then reserves what each is granted,
// returned, or none when one is refused (a refusal is no error: the
// transaction wrote nothing).
func (b sqliteBudgets) reserve(ctx context.Context, tx *sql.Tx, id string, charges []Charge, now, expires time.Time) (*Refused, []Charge, error) {
	spent, err := b.spent(ctx, tx, id, charges, now)
	if err != nil {
		return nil, nil, err
	}
	granted := make([]Charge, len(charges))
	for i, c := range charges {
		if c.reached(spent[i]) {
			return &Refused{Charge: i, Spent: spent[i]}, nil, nil
		}
		granted[i] = c.granted(spent[i])
	}
	err = b.execRows(ctx, tx, &qReserve, []any{id, expires.UnixMilli()}, len(granted), func(args []any, i int) []any {
		c := granted[i]
		return append(args, i, c.Tenant, c.Budget, c.Subject, c.Bucket.UnixMilli(), c.Tokens, c.Nanos)
	})
	if err != nil {
		return nil, nil, err
	}
	return nil, granted, nil
}

// spent is the spending of each charge's subject in its span at now, but
// for reservation id's.
func (b sqliteBudgets) spent(ctx context.Context, tx *sql.Tx, id string, charges []Charge, now time.Time) ([]Spent, error) {
	out := make([]Spent, len(charges))
	for first := 0; first < len(charges); first += maxRows {
		chunk := charges[first:min(len(charges), first+maxRows)]
		args := make([]any, 0, 2+5*len(chunk))
		args = append(args, now.UnixMilli(), id)
		for _, c := range chunk {
			args = append(args, c.Tenant, c.Budget, c.Subject, c.From.UnixMilli(), c.Bucket.UnixMilli())
		}
		rows, err := b.g.in(ctx, tx, qSpent[len(chunk)-1]).QueryContext(ctx, args...)
		if err != nil {
			return nil, unavailable(err)
		}
		if err := scanSpent(rows, out[first:]); err != nil {
			return nil, unavailable(err)
		}
	}
	return out, nil
}

// scanSpent reads qSpent's rows into out, each at its index.
func scanSpent(rows *sql.Rows, out []Spent) error {
	defer rows.Close()
	for rows.Next() {
		var i int
		var s Spent
		if err := rows.Scan(&i, &s.Tokens, &s.Nanos, &s.ReservedTokens, &s.ReservedNanos); err != nil {
			return err
		}
		out[i] = s
	}
	return rows.Err()
}

// execRows runs qs[k-1] for each k rows (at most maxRows at a
// time) of the n that row appends the parameters of, after head's.
func (b sqliteBudgets) execRows(ctx context.Context, tx *sql.Tx, qs *[maxRows]string, head []any, n int, row func(args []any, i int) []any) error {
	for first := 0; first < n; first += maxRows {
		k := min(n-first, maxRows)
		args := slices.Clone(head)
		for i := first; i < first+k; i++ {
			args = row(args, i)
		}
		if _, err := b.g.in(ctx, tx, qs[k-1]).ExecContext(ctx, args...); err != nil {
			return unavailable(err)
		}
	}
	return nil
}

func (b sqliteBudgets) Settle(ctx context.Context, id string, charges []Charge, now time.Time) ([]Spent, error) {
	var out []Spent
	err := b.g.inTx(ctx, func(ctx context.Context, tx *sql.Tx) error {
		var err error
		out, err = b.settle(ctx, tx, id, charges, now)
		return err
	})
	if err != nil {
		return nil, err
	}
	return out, nil
}

// settle ends the reservation and adds every charge before it sums any,
// so that each sum has them all.
func (b sqliteBudgets) settle(ctx context.Context, tx *sql.Tx, id string, charges []Charge, now time.Time) ([]Spent, error) {
	if _, err := b.g.in(ctx, tx, qEndReservation).ExecContext(ctx, id); err != nil {
		return nil, unavailable(err)
	}
	spending := slices.DeleteFunc(slices.Clone(charges), func(c Charge) bool { return c.Tokens == 0 && c.Nanos == 0 })
	err := b.execRows(ctx, tx, &qAddSpending, nil, len(spending), func(args []any, i int) []any {
		c := spending[i]
		return append(args, c.Tenant, c.Budget, c.Subject, c.Bucket.UnixMilli(), c.Tokens, c.Nanos)
	})
	if err != nil {
		return nil, err
	}
	return b.spent(ctx, tx, id, charges, now)
}

func (b sqliteBudgets) BudgetSpends(ctx context.Context, tenant, name string, from, bucket, now time.Time, limit int) ([]SubjectSpend, error) {
	if limit <= 0 {
		limit = -1 // SQLite's none
	}
	rows, err := b.g.db.QueryContext(ctx, `
		SELECT subject, sum(t), sum(n), sum(rt), sum(rn) FROM (
			SELECT subject, tokens AS t, nanos AS n, 0 AS rt, 0 AS rn FROM budget_counters
			WHERE tenant = ?1 AND budget = ?2 AND bucket BETWEEN ?3 AND ?4
			UNION ALL
			SELECT subject, 0, 0, tokens, nanos FROM budget_reservations
			WHERE tenant = ?1 AND budget = ?2 AND bucket BETWEEN ?3 AND ?4 AND expires_at > ?5)
		GROUP BY subject ORDER BY sum(t) + sum(rt) DESC, subject LIMIT ?6`,
		tenant, name, from.UnixMilli(), bucket.UnixMilli(), now.UnixMilli(), limit)
	return sqliteCollect(rows, err, scanSubjectSpend)
}

func (b sqliteBudgets) AddUsage(ctx context.Context, entries []UsageEntry) error {
	if len(entries) == 0 {
		return nil
	}
	return b.g.inTx(ctx, func(ctx context.Context, tx *sql.Tx) error {
		for _, e := range entries {
			if _, err := b.g.in(ctx, tx, qAddUsage).ExecContext(ctx, e.Tenant, e.APIKey, e.hour().UnixMilli(), e.EndUser, e.Currency,
				e.Calls, e.Input, e.Output, e.CacheRead, e.CacheWrite, e.Nanos, e.Unpriced); err != nil {
				return unavailable(err)
			}
		}
		return nil
	})
}

func (b sqliteBudgets) SumUsage(ctx context.Context, q UsageQuery) ([]UsageTotal, error) {
	col, err := usageGroup(q)
	if err != nil {
		return nil, err
	}
	args := []any{q.Tenant, q.From.UnixMilli(), q.To.UnixMilli()}
	if q.Subject != "" {
		args = append(args, q.Subject)
	}
	query := sumUsageQuery(col, q.Subject != "",
		func(i int) string { return "?" + strconv.Itoa(i) },
		func(c string) string { return "sum(" + c + ")" })
	rows, err := b.g.db.QueryContext(ctx, query, args...)
	return sqliteCollect(rows, err, scanUsageTotal)
}

func (b sqliteBudgets) SweepSpending(ctx context.Context, before time.Time) (int64, error) {
	var deleted int64
	err := b.g.inTx(ctx, func(ctx context.Context, tx *sql.Tx) error {
		deleted = 0
		for _, q := range []string{
			`DELETE FROM budget_counters WHERE bucket < ?`,
			`DELETE FROM usage_ledger WHERE hour < ?`,
			`DELETE FROM budget_reservations WHERE expires_at <= ?`,
		} {
			n, err := affected(tx.ExecContext(ctx, q, before.UnixMilli()))
			if err != nil {
				return err
			}
			deleted += int64(n)
		}
		return nil
	})
	return deleted, err
}

// sqliteCollect reads rows (the outcome of a query that failed with err,
// or not) with scan.
func sqliteCollect[T any](rows *sql.Rows, err error, scan func(rowScanner) (T, error)) ([]T, error) {
	if err != nil {
		return nil, unavailable(err)
	}
	defer rows.Close()
	var out []T
	for rows.Next() {
		v, err := scan(rows)
		if err != nil {
			return nil, unavailable(err)
		}
		out = append(out, v)
	}
	if err := rows.Err(); err != nil {
		return nil, unavailable(err)
	}
	return out, nil
}
