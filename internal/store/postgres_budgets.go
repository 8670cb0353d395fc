package store

import (
	"context"
	"errors"
	"fmt"
	"hash/fnv"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
)

// pgBudgets is the Budgets of a PostgreSQL database. Each operation is
// one round trip: one statement (data-modifying CTEs), or, for Reserve,
// two statements sent together that run in one implicit transaction.
//
// Reserves of one budget subject are serialized by a transaction-scoped
// advisory lock on the subject (its tenant, budget and subject, hashed):
// a Reserve takes its subjects' locks first, in the order of their keys
// (so that two never deadlock), in a statement of its own, and
// then sums and reserves in the next, whose snapshot (read committed) is
// taken once the locks are held and so sees every Reserve that held them
// before. The lock is the subject's, not a counter row's: a rolling
// window's Reserves in two hours sum overlapping spans under different
// buckets. Settle takes no lock: it moves an amount from the reservation
// to the counter in one commit, which a Reserve sees whole or not at
// all.
type pgBudgets struct{ pool *pgxpool.Pool }

// Budgets returns the store's budgets.
func (p *Postgres) Budgets() Budgets { return pgBudgets{p.pool} }

// chargeColumns are a charge's columns in the statements' charges (CTE
// c), each charge's parameters in this order, then its index n.
const chargeColumns = `tenant, budget, subject, span_from, bucket, max_tokens, max_nanos, tokens, nanos, n`

var chargeTypes = []string{"text", "text", "text", "timestamptz", "timestamptz", "bigint", "bigint", "bigint", "bigint"}

// pgChargeRows is CTE c: the charges, k of them, whose parameters begin
// at $first.
func pgChargeRows(k, first int) string {
	return `c (` + chargeColumns + `) AS (VALUES ` + pgValues(k, first, chargeTypes, true) + `)`
}

// pgValues is a VALUES list of k rows of parameters from $first, cast to
// types; with index, each row ends with its index from 0. A list of
// values, not arrays: PostgreSQL plans a statement over arrays afresh at
// every call (its generic plan, which does not know their lengths, looks
// dearer), and that planning was most of a Settle's time; over a list
// of k rows it keeps its generic plan after five calls.
func pgValues(k, first int, types []string, index bool) string {
	var b strings.Builder
	for i := range k {
		if i > 0 {
			b.WriteString(`, `)
		}
		b.WriteString(`(`)
		for j, t := range types {
			if j > 0 {
				b.WriteString(`, `)
			}
			fmt.Fprintf(&b, `$%d::%s`, first+len(types)*i+j, t)
		}
		if index {
			fmt.Fprintf(&b, `, %d`, i)
		}
		b.WriteString(`)`)
	}
	return b.String()
}

// chargeArgs appends the charges' parameters to args, in pgChargeRows'
// order.
func chargeArgs(args []any, charges []Charge) []any {
	for _, c := range charges {
		args = append(args, c.Tenant, c.Budget, c.Subject, ms(c.From), ms(c.Bucket), c.MaxTokens, c.MaxNanos, c.Tokens, c.Nanos)
	}
	return args
}

const (
	// pgCounted and pgReserved are charge c's subject's spending in its
	// span, counted and reserved (live at $2, other than reservation
	// $1's).
	pgCounted = `SELECT coalesce(sum(b.tokens), 0)::bigint AS tokens, coalesce(sum(b.nanos), 0)::bigint AS nanos
		FROM budget_counters b
		WHERE b.tenant = c.tenant AND b.budget = c.budget AND b.subject = c.subject AND b.bucket BETWEEN c.span_from AND c.bucket`
	pgReserved = `SELECT coalesce(sum(r.tokens), 0)::bigint AS tokens, coalesce(sum(r.nanos), 0)::bigint AS nanos
		FROM budget_reservations r
		WHERE r.tenant = c.tenant AND r.budget = c.budget AND r.subject = c.subject AND r.bucket BETWEEN c.span_from AND c.bucket
			AND r.expires_at > $2 AND r.id <> $1`

	// qPgLockSubjects takes the advisory locks of keys $1, in order.
	qPgLockSubjects = `SELECT pg_advisory_xact_lock(k) FROM unnest($1::bigint[]) AS k`
)

// Reserve's and Settle's statements are built once for each count of
// charges up to maxRows (each a statement of its own, prepared once per
// connection), and at each call for more.
var (
	qPgReserve = rowStatements(pgReserveStatement)
	qPgSettle  = rowStatements(pgSettleStatement)
)

// forRows is qs's statement for k rows, or build's for more.
func forRows(qs *[maxRows]string, build func(k int) string, k int) string {
	if k <= maxRows {
		return qs[k-1]
	}
	return build(k)
}

// pgReserveStatement is Reserve's statement for k charges (from $4): it
// returns the first charge refused, or reserves as reservation $1 until
// $3 what each charge is granted (its amount, no more than what is left
// of its limits) and returns that; a Reserve made again under its id
// replaces what the first reserved. Reservations that expired are left
// to SweepSpending: they count for nothing. Each row it returns is a
// charge's index, whether it was refused, then the subject's spending
// (a refusal's: counted, then reserved) or the amounts granted (then
// zeros).
func pgReserveStatement(k int) string {
	return `
		WITH ` + pgChargeRows(k, 4) + `,
		s AS (
			SELECT c.*, k.tokens AS spent_tokens, k.nanos AS spent_nanos, r.tokens AS reserved_tokens, r.nanos AS reserved_nanos
			FROM c, LATERAL (` + pgCounted + `) k, LATERAL (` + pgReserved + `) r
		),
		refused AS (
			SELECT n, spent_tokens, spent_nanos, reserved_tokens, reserved_nanos FROM s
			WHERE (max_tokens > 0 AND spent_tokens + reserved_tokens >= max_tokens)
				OR (max_nanos > 0 AND spent_nanos + reserved_nanos >= max_nanos)
			ORDER BY n LIMIT 1
		),
		reserved AS (
			INSERT INTO budget_reservations (id, n, tenant, budget, subject, bucket, tokens, nanos, expires_at)
			SELECT $1, n, tenant, budget, subject, bucket,
				` + pgGrant("tokens") + `,
				` + pgGrant("nanos") + `,
				$3
			FROM s WHERE NOT EXISTS (SELECT FROM refused)
			ON CONFLICT (id, n) DO UPDATE SET tenant = excluded.tenant, budget = excluded.budget, subject = excluded.subject,
				bucket = excluded.bucket, tokens = excluded.tokens, nanos = excluded.nanos, expires_at = excluded.expires_at
			RETURNING n, tokens, nanos
		)
		SELECT n, true, spent_tokens, spent_nanos, reserved_tokens, reserved_nanos FROM refused
		UNION ALL
		SELECT n, false, tokens, nanos, 0, 0 FROM reserved`
}

// pgGrant is what a charge of pgReserveStatement's s is granted of its
// dimension dim (tokens or nanos): its amount, or what is left of its
// limit when that is less (as grant).
func pgGrant(dim string) string {
	return `CASE WHEN max_` + dim + ` > 0 THEN LEAST(` + dim + `, max_` + dim + ` - spent_` + dim + ` - reserved_` + dim + `) ELSE ` + dim + ` END`
}

// pgSettleStatement is Settle's statement for k charges (from $3): it ends
// reservation $1, adds the charges to their counters (in the counters'
// order, as every Settle does, so that two never deadlock) and
// returns each charge's spending after it: its snapshot's counters (from
// before the statement) with the charges added.
func pgSettleStatement(k int) string {
	return `
		WITH ` + pgChargeRows(k, 3) + `,
		ended AS (DELETE FROM budget_reservations WHERE id = $1),
		added AS (
			INSERT INTO budget_counters AS b (tenant, budget, subject, bucket, tokens, nanos)
			SELECT tenant, budget, subject, bucket, sum(tokens), sum(nanos) FROM c
			GROUP BY tenant, budget, subject, bucket HAVING sum(tokens) <> 0 OR sum(nanos) <> 0
			ORDER BY tenant, budget, subject, bucket
			ON CONFLICT (tenant, budget, subject, bucket) DO UPDATE SET tokens = b.tokens + excluded.tokens, nanos = b.nanos + excluded.nanos
		)
		SELECT k.tokens + a.tokens, k.nanos + a.nanos, r.tokens, r.nanos
		FROM c, LATERAL (` + pgCounted + `) k, LATERAL (` + pgReserved + `) r,
			LATERAL (SELECT coalesce(sum(a.tokens), 0)::bigint AS tokens, coalesce(sum(a.nanos), 0)::bigint AS nanos FROM c a
				WHERE a.tenant = c.tenant AND a.budget = c.budget AND a.subject = c.subject AND a.bucket BETWEEN c.span_from AND c.bucket) a
		ORDER BY c.n`
}

func (p pgBudgets) PutBudget(ctx context.Context, d BudgetDef) error {
	_, err := p.pool.Exec(ctx, `
		INSERT INTO budgets (tenant, name, spec, updated_at) VALUES ($1, $2, $3, $4)
		ON CONFLICT (tenant, name) DO UPDATE SET spec = excluded.spec, updated_at = excluded.updated_at`,
		d.Tenant, d.Name, orEmpty(d.Spec), ms(d.updated()))
	if err != nil {
		return classify(err)
	}
	return nil
}

func (p pgBudgets) DeleteBudget(ctx context.Context, tenant, name string) (bool, error) {
	var n int
	err := p.pool.QueryRow(ctx, `
		WITH b AS (DELETE FROM budgets WHERE tenant = $1 AND name = $2 RETURNING 1),
		c AS (DELETE FROM budget_counters WHERE tenant = $1 AND budget = $2),
		r AS (DELETE FROM budget_reservations WHERE tenant = $1 AND budget = $2)
		SELECT count(*) FROM b`, tenant, name).Scan(&n)
	if err != nil {
		return false, classify(err)
	}
	return n == 1, nil
}

func (p pgBudgets) ListBudgets(ctx context.Context) ([]BudgetDef, error) {
	rows, err := p.pool.Query(ctx, `SELECT tenant, name, spec, updated_at FROM budgets ORDER BY tenant, name`)
	return pgCollect(rows, err, func(row rowScanner) (BudgetDef, error) {
		var d BudgetDef
		err := row.Scan(&d.Tenant, &d.Name, &d.Spec, &d.UpdatedAt)
		return d, err
	})
}

func (p pgBudgets) Reserve(ctx context.Context, id string, charges []Charge, now, expires time.Time) (*Refused, error) {
	if len(charges) == 0 {
		return nil, nil
	}
	b := &pgx.Batch{}
	b.Queue(qPgLockSubjects, subjectLocks(charges))
	b.Queue(forRows(&qPgReserve, pgReserveStatement, len(charges)), chargeArgs([]any{id, ms(now), ms(expires)}, charges)...)
	br := p.pool.SendBatch(ctx, b)
	refused, granted, err := readReserve(br, len(charges))
	if err := errors.Join(err, br.Close()); err != nil {
		return nil, classify(err)
	}
	for i, g := range granted {
		charges[i].Tokens, charges[i].Nanos = g.Tokens, g.Nanos
	}
	return refused, nil
}

// reserveAnswer is a row of Reserve's statement: a charge's index, and
// its refusal's spending or, when it was not refused, its grant (Spent's
// Tokens and Nanos).
type reserveAnswer struct {
	n       int
	refused bool
	s       Spent
}

// readReserve reads what Reserve's batch of k charges answered: the
// locks, then the charge refused if one was, else each charge's grant.
func readReserve(br pgx.BatchResults, k int) (*Refused, []Charge, error) {
	if _, err := br.Exec(); err != nil {
		return nil, nil, err
	}
	rows, err := br.Query()
	if err != nil {
		return nil, nil, err
	}
	answers, err := pgx.CollectRows(rows, func(row pgx.CollectableRow) (reserveAnswer, error) {
		var a reserveAnswer
		err := row.Scan(&a.n, &a.refused, &a.s.Tokens, &a.s.Nanos, &a.s.ReservedTokens, &a.s.ReservedNanos)
		return a, err
	})
	if err != nil {
		return nil, nil, err
	}
	refused, granted := reserveOutcome(answers, k)
	return refused, granted, nil
}

// reserveOutcome is the refusal among answers, or the grants of the k
// charges (their Tokens and Nanos).
func reserveOutcome(answers []reserveAnswer, k int) (*Refused, []Charge) {
	granted := make([]Charge, k)
	for _, a := range answers {
		if a.refused {
			return &Refused{Charge: a.n, Spent: a.s}, nil
		}
		granted[a.n].Tokens, granted[a.n].Nanos = a.s.Tokens, a.s.Nanos
	}
	return nil, granted
}

// subjectLocks are the advisory lock keys of the charges' subjects, in
// order, each once.
func subjectLocks(charges []Charge) []int64 {
	keys := make([]int64, 0, len(charges))
	for _, c := range charges {
		h := fnv.New64a()
		for _, s := range []string{c.Tenant, c.Budget, c.Subject} {
			_, _ = h.Write([]byte(s))
			_, _ = h.Write([]byte{0})
		}
		keys = append(keys, int64(h.Sum64()))
	}
	slices.Sort(keys)
	return slices.Compact(keys)
}

func (p pgBudgets) Settle(ctx context.Context, id string, charges []Charge, now time.Time) ([]Spent, error) {
	if len(charges) == 0 {
		_, err := p.pool.Exec(ctx, `DELETE FROM budget_reservations WHERE id = $1`, id)
		if err != nil {
			return nil, classify(err)
		}
		return nil, nil
	}
	rows, err := p.pool.Query(ctx, forRows(&qPgSettle, pgSettleStatement, len(charges)), chargeArgs([]any{id, ms(now)}, charges)...)
	return pgCollect(rows, err, func(row rowScanner) (Spent, error) {
		var s Spent
		err := row.Scan(&s.Tokens, &s.Nanos, &s.ReservedTokens, &s.ReservedNanos)
		return s, err
	})
}

func (p pgBudgets) BudgetSpends(ctx context.Context, tenant, name string, from, bucket, now time.Time, limit int) ([]SubjectSpend, error) {
	var lim any // NULL: none
	if limit > 0 {
		lim = limit
	}
	rows, err := p.pool.Query(ctx, `
		SELECT subject, sum(t)::bigint, sum(n)::bigint, sum(rt)::bigint, sum(rn)::bigint FROM (
			SELECT subject, tokens AS t, nanos AS n, 0::bigint AS rt, 0::bigint AS rn FROM budget_counters
			WHERE tenant = $1 AND budget = $2 AND bucket BETWEEN $3 AND $4
			UNION ALL
			SELECT subject, 0, 0, tokens, nanos FROM budget_reservations
			WHERE tenant = $1 AND budget = $2 AND bucket BETWEEN $3 AND $4 AND expires_at > $5) s
		GROUP BY subject ORDER BY sum(t) + sum(rt) DESC, subject LIMIT $6`,
		tenant, name, ms(from), ms(bucket), ms(now), lim)
	return pgCollect(rows, err, scanSubjectSpend)
}

var (
	usageTypes  = []string{"text", "text", "timestamptz", "text", "text", "bigint", "bigint", "bigint", "bigint", "bigint", "bigint", "bigint"}
	qPgAddUsage = rowStatements(pgAddUsageStatement)
)

// pgAddUsageStatement adds k entries (their parameters in usageTypes'
// order) to the ledger, those of one row summed first (a statement writes
// a row once), in the rows' order, as every AddUsage does, so that two
// never deadlock.
func pgAddUsageStatement(k int) string {
	return `
		INSERT INTO usage_ledger AS u (tenant, api_key, hour, end_user, currency, calls, input, output, cache_read, cache_write, nanos, unpriced)
		SELECT tenant, api_key, hour, end_user, currency,
			sum(calls), sum(input), sum(output), sum(cache_read), sum(cache_write), sum(nanos), sum(unpriced)
		FROM (VALUES ` + pgValues(k, 1, usageTypes, false) + `)
			AS e(tenant, api_key, hour, end_user, currency, calls, input, output, cache_read, cache_write, nanos, unpriced)
		GROUP BY tenant, api_key, hour, end_user, currency
		ORDER BY tenant, api_key, hour, end_user, currency
		ON CONFLICT (tenant, api_key, hour, end_user, currency) DO UPDATE SET
			calls = u.calls + excluded.calls, input = u.input + excluded.input, output = u.output + excluded.output,
			cache_read = u.cache_read + excluded.cache_read, cache_write = u.cache_write + excluded.cache_write,
			nanos = u.nanos + excluded.nanos, unpriced = u.unpriced + excluded.unpriced`
}

// AddUsage adds the entries in one statement.
func (p pgBudgets) AddUsage(ctx context.Context, entries []UsageEntry) error {
	if len(entries) == 0 {
		return nil
	}
	args := make([]any, 0, len(usageTypes)*len(entries))
	for _, e := range entries {
		args = append(args, e.Tenant, e.APIKey, ms(e.hour()), e.EndUser, e.Currency,
			e.Calls, e.Input, e.Output, e.CacheRead, e.CacheWrite, e.Nanos, e.Unpriced)
	}
	if _, err := p.pool.Exec(ctx, forRows(&qPgAddUsage, pgAddUsageStatement, len(entries)), args...); err != nil {
		return classify(err)
	}
	return nil
}

func (p pgBudgets) SumUsage(ctx context.Context, q UsageQuery) ([]UsageTotal, error) {
	col, err := usageGroup(q)
	if err != nil {
		return nil, err
	}
	args := []any{q.Tenant, ms(q.From), ms(q.To)}
	if q.Subject != "" {
		args = append(args, q.Subject)
	}
	query := sumUsageQuery(col, q.Subject != "",
		func(i int) string { return "$" + strconv.Itoa(i) },
		func(c string) string { return "sum(" + c + ")::bigint" })
	rows, err := p.pool.Query(ctx, query, args...)
	return pgCollect(rows, err, scanUsageTotal)
}

func (p pgBudgets) SweepSpending(ctx context.Context, before time.Time) (int64, error) {
	var n int64
	err := p.pool.QueryRow(ctx, `
		WITH c AS (DELETE FROM budget_counters WHERE bucket < $1 RETURNING 1),
		u AS (DELETE FROM usage_ledger WHERE hour < $1 RETURNING 1),
		r AS (DELETE FROM budget_reservations WHERE expires_at <= $1 RETURNING 1)
		SELECT (SELECT count(*) FROM c) + (SELECT count(*) FROM u) + (SELECT count(*) FROM r)`, ms(before)).Scan(&n)
	if err != nil {
		return 0, classify(err)
	}
	return n, nil
}

// pgCollect reads rows (the outcome of a query that failed with err, or
// not) with scan.
func pgCollect[T any](rows pgx.Rows, err error, scan func(rowScanner) (T, error)) ([]T, error) {
	if err != nil {
		return nil, classify(err)
	}
	out, err := pgx.CollectRows(rows, func(row pgx.CollectableRow) (T, error) { return scan(row) })
	if err != nil {
		return nil, classify(err)
	}
	return out, nil
}
