package store

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/agentd/agentd/internal/fault"
)

// classifyFault is err as it is when the store's own code classified it
// (a lost lease, a request not pending), classified otherwise.
func classifyFault(err error) error {
	if _, ok := errors.AsType[*fault.Error](err); ok {
		return err
	}
	return classify(err)
}

// pgReplacePending replaces the pending requests of tenant's generation
// id with reqs, in tx.
func pgReplacePending(ctx context.Context, tx pgx.Tx, tenant, id string, reqs []PendingRequest) error {
	if _, err := tx.Exec(ctx, `DELETE FROM pending_requests WHERE tenant = $1 AND generation_id = $2`, tenant, id); err != nil {
		return err
	}
	if len(reqs) == 0 {
		return nil
	}
	cols := make([][]any, 8)
	for _, r := range reqs {
		for i, v := range []any{r.RequestID, r.Kind, string(r.State), r.ServerName, r.ToolName, ms(r.RequestedAt), ms(r.ExpiresAt), orEmpty(r.Data)} {
			cols[i] = append(cols[i], v)
		}
	}
	_, err := tx.Exec(ctx, `
		INSERT INTO pending_requests (tenant, generation_id, request_id, kind, state, server_name, tool_name, requested_at, expires_at, data)
		SELECT $1, $2, r.* FROM unnest($3::text[], $4::text[], $5::text[], $6::text[], $7::text[], $8::timestamptz[], $9::timestamptz[], $10::bytea[])
			AS r(request_id, kind, state, server_name, tool_name, requested_at, expires_at, data)`,
		tenant, id, cols[0], cols[1], cols[2], cols[3], cols[4], cols[5], cols[6], cols[7])
	return err
}

func (p pgGenerations) ListPending(ctx context.Context, tenant string, o PendingOptions) ([]PendingRequest, string, error) {
	pos, after, err := parsePendingToken(o.PageToken)
	if err != nil {
		return nil, "", err
	}
	size := pageSize(o.PageSize)
	// As List's: each condition is in the statement only when it applies.
	q := pendingSelect + ` WHERE p.tenant = $1`
	args := []any{tenant}
	cols, vals := pendingFilters(o)
	for i, c := range cols {
		args = append(args, vals[i])
		q += fmt.Sprintf(` AND %s = $%d`, c, len(args))
	}
	if len(o.Kinds) > 0 {
		args = append(args, o.Kinds)
		q += fmt.Sprintf(` AND p.kind = ANY($%d)`, len(args))
	}
	if after {
		args = append(args, time.UnixMilli(pos.requested), pos.generation, pos.reqID)
		q += fmt.Sprintf(` AND (p.requested_at, p.generation_id, p.request_id) < ($%d, $%d, $%d)`, len(args)-2, len(args)-1, len(args))
	}
	args = append(args, size+1)
	q += fmt.Sprintf(` ORDER BY p.requested_at DESC, p.generation_id DESC, p.request_id DESC LIMIT $%d`, len(args))
	rows, err := p.pool.Query(ctx, q, args...)
	if err != nil {
		return nil, "", classify(err)
	}
	page, err := pgx.CollectRows(rows, func(row pgx.CollectableRow) (PendingRequest, error) {
		var r PendingRequest
		var state string
		err := row.Scan(&r.GenerationID, &r.RequestID, &r.Kind, &state, &r.ServerName, &r.ToolName, &r.RequestedAt, &r.ExpiresAt, &r.Data,
			&r.Origin.StartedBy, &r.Origin.EndUser, &r.Origin.Provider, &r.Origin.Model)
		r.State = State(state)
		return r, err
	})
	if err != nil {
		return nil, "", classify(err)
	}
	page, next := nextPendingToken(page, size)
	return page, next, nil
}

// Decide locks the requests' pending rows (FOR SHARE) before it inserts:
// their owner's replacement of them waits for it to commit, so that a
// decision is never recorded for a request its owner has let go of
// meanwhile. Of two Decides of one request, the second's insert waits for
// the first to commit, then finds its row.
func (p pgGenerations) Decide(ctx context.Context, tenant, id string, ds []Decision) ([]Decision, error) {
	if err := checkDecisions(ds); err != nil || len(ds) == 0 {
		return nil, err
	}
	var first []Decision
	err := pgx.BeginFunc(ctx, p.pool, func(tx pgx.Tx) error {
		ids := decisionIDs(ds)
		if err := pgLockPending(ctx, tx, tenant, id, ids); err != nil {
			return err
		}
		kinds, by, at, data := make([]string, len(ds)), make([]string, len(ds)), make([]any, len(ds)), make([][]byte, len(ds))
		for i, d := range ds {
			kinds[i], by[i], at[i], data[i] = d.Kind, d.DecidedBy, ms(d.DecidedAt), orEmpty(d.Data)
		}
		rows, err := tx.Query(ctx, `
			INSERT INTO generation_decisions (tenant, generation_id, request_id, kind, decided_by, decided_at, data)
			SELECT $1, $2, d.* FROM unnest($3::text[], $4::text[], $5::text[], $6::timestamptz[], $7::bytea[])
				AS d(request_id, kind, decided_by, decided_at, data)
			ON CONFLICT (tenant, generation_id, request_id) DO NOTHING
			RETURNING request_id`,
			tenant, id, ids, kinds, by, at, data)
		if err != nil {
			return err
		}
		inserted, err := pgx.CollectRows(rows, pgx.RowTo[string])
		if err != nil || len(inserted) == len(ds) {
			return err
		}
		// Some had a decision: record none, and say whose.
		found, err := pgDecisions(ctx, tx, tenant, id, slices.DeleteFunc(ids, func(r string) bool { return slices.Contains(inserted, r) }))
		if err == nil {
			first, err = firstOf(ds, found), errRecordNone
		}
		return err
	})
	if errors.Is(err, errRecordNone) {
		return first, nil
	}
	if err != nil {
		return nil, classifyFault(err)
	}
	return nil, nil
}

// errRecordNone rolls back a Decide that found decisions recorded.
var errRecordNone = errors.New("some of the requests were decided already")

// pgLockPending locks the pending rows of the requests ids, shared, and
// fails with notPending for one that has none.
func pgLockPending(ctx context.Context, tx pgx.Tx, tenant, id string, ids []string) error {
	rows, err := tx.Query(ctx, `
		SELECT request_id FROM pending_requests
		WHERE tenant = $1 AND generation_id = $2 AND request_id = ANY($3)
		FOR SHARE`, tenant, id, ids)
	if err != nil {
		return err
	}
	locked, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil {
		return err
	}
	have := make(map[string]bool, len(locked))
	for _, r := range locked {
		have[r] = true
	}
	for _, r := range ids {
		if !have[r] {
			return notPending(id, r)
		}
	}
	return nil
}

func (p pgGenerations) Undecide(ctx context.Context, tenant, id string, requestIDs []string) error {
	if len(requestIDs) == 0 {
		return nil
	}
	_, err := p.pool.Exec(ctx, `DELETE FROM generation_decisions WHERE tenant = $1 AND generation_id = $2 AND request_id = ANY($3)`, tenant, id, requestIDs)
	if err != nil {
		return classify(err)
	}
	return nil
}

func (p pgGenerations) Decisions(ctx context.Context, tenant, id string, requestIDs []string) ([]Decision, error) {
	if requestIDs != nil && len(requestIDs) == 0 {
		return nil, nil
	}
	out, err := pgDecisions(ctx, p.pool, tenant, id, requestIDs)
	if err != nil {
		return nil, classify(err)
	}
	return out, nil
}

// pgQuerier runs a query: the pool, or a transaction.
type pgQuerier interface {
	Query(ctx context.Context, sql string, args ...any) (pgx.Rows, error)
}

// pgDecisions reads the decisions of tenant's generation id of the
// requests ids (all when nil), by request id.
func pgDecisions(ctx context.Context, q pgQuerier, tenant, id string, ids []string) ([]Decision, error) {
	rows, err := q.Query(ctx, `
		SELECT request_id, kind, decided_by, decided_at, data FROM generation_decisions
		WHERE tenant = $1 AND generation_id = $2 AND ($3::text[] IS NULL OR request_id = ANY($3))
		ORDER BY request_id`, tenant, id, ids)
	if err != nil {
		return nil, err
	}
	return pgx.CollectRows(rows, func(row pgx.CollectableRow) (Decision, error) {
		var d Decision
		err := row.Scan(&d.RequestID, &d.Kind, &d.DecidedBy, &d.DecidedAt, &d.Data)
		return d, err
	})
}
