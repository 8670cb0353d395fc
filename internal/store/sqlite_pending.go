package store

import (
	"context"
	"database/sql"
	"strings"
	"time"
)

// replacePending replaces the pending requests of tenant's generation id
// with reqs, in tx.
func (s sqliteGenerations) replacePending(ctx context.Context, tx *sql.Tx, tenant, id string, reqs []PendingRequest) error {
	if _, err := s.in(ctx, tx, qDropPending).ExecContext(ctx, tenant, id); err != nil {
		return unavailable(err)
	}
	for _, r := range reqs {
		if _, err := tx.ExecContext(ctx, `
			INSERT INTO pending_requests (tenant, generation_id, request_id, kind, state, server_name, tool_name, requested_at, expires_at, data)
			VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)`,
			tenant, id, r.RequestID, r.Kind, string(r.State), r.ServerName, r.ToolName,
			r.RequestedAt.UnixMilli(), r.ExpiresAt.UnixMilli(), orEmpty(r.Data)); err != nil {
			return unavailable(err)
		}
	}
	return nil
}

func (s sqliteGenerations) ListPending(ctx context.Context, tenant string, o PendingOptions) ([]PendingRequest, string, error) {
	pos, after, err := parsePendingToken(o.PageToken)
	if err != nil {
		return nil, "", err
	}
	size := pageSize(o.PageSize)
	q := pendingSelect + ` WHERE p.tenant = ?`
	args := []any{tenant}
	cols, vals := pendingFilters(o)
	for i, c := range cols {
		q += ` AND ` + c + ` = ?`
		args = append(args, vals[i])
	}
	if len(o.Kinds) > 0 {
		q += ` AND p.kind IN (?` + strings.Repeat(", ?", len(o.Kinds)-1) + `)`
		for _, k := range o.Kinds {
			args = append(args, k)
		}
	}
	if after {
		q += ` AND (p.requested_at, p.generation_id, p.request_id) < (?, ?, ?)`
		args = append(args, pos.requested, pos.generation, pos.reqID)
	}
	q += ` ORDER BY p.requested_at DESC, p.generation_id DESC, p.request_id DESC LIMIT ?`
	args = append(args, size+1)
	rows, err := s.db.QueryContext(ctx, q, args...)
	if err != nil {
		return nil, "", unavailable(err)
	}
	defer rows.Close()
	var page []PendingRequest
	for rows.Next() {
		var r PendingRequest
		var state string
		var requested, expires int64
		if err := rows.Scan(&r.GenerationID, &r.RequestID, &r.Kind, &state, &r.ServerName, &r.ToolName, &requested, &expires, &r.Data,
			&r.Origin.StartedBy, &r.Origin.EndUser, &r.Origin.Provider, &r.Origin.Model); err != nil {
			return nil, "", unavailable(err)
		}
		r.State, r.RequestedAt, r.ExpiresAt = State(state), time.UnixMilli(requested), time.UnixMilli(expires)
		page = append(page, r)
	}
	if err := rows.Err(); err != nil {
		return nil, "", unavailable(err)
	}
	page, next := nextPendingToken(page, size)
	return page, next, nil
}

// Decide checks and records in one transaction, which holds the write
// lock from its start: no other Decide, nor the owner's replacement of
// the requests, comes between.
func (s sqliteGenerations) Decide(ctx context.Context, tenant, id string, ds []Decision) ([]Decision, error) {
	if err := checkDecisions(ds); err != nil || len(ds) == 0 {
		return nil, err
	}
	var first []Decision
	err := s.inTx(ctx, func(ctx context.Context, tx *sql.Tx) error {
		first = nil // the committer may run this again
		found, err := sqliteDecisions(ctx, tx, tenant, id, decisionIDs(ds))
		if err != nil || len(found) > 0 {
			first = firstOf(ds, found)
			return err
		}
		for _, d := range ds {
			res, err := tx.ExecContext(ctx, `
				INSERT INTO generation_decisions (tenant, generation_id, request_id, kind, decided_by, decided_at, data)
				SELECT ?, ?, ?, ?, ?, ?, ? WHERE EXISTS (
					SELECT 1 FROM pending_requests WHERE tenant = ? AND generation_id = ? AND request_id = ?)`,
				tenant, id, d.RequestID, d.Kind, d.DecidedBy, d.DecidedAt.UnixMilli(), orEmpty(d.Data), tenant, id, d.RequestID)
			if n, err := affected(res, err); err != nil {
				return err
			} else if n != 1 {
				return notPending(id, d.RequestID)
			}
		}
		return nil
	})
	return first, err
}

func (s sqliteGenerations) Undecide(ctx context.Context, tenant, id string, requestIDs []string) error {
	if len(requestIDs) == 0 {
		return nil
	}
	args := []any{tenant, id}
	for _, r := range requestIDs {
		args = append(args, r)
	}
	_, err := s.db.ExecContext(ctx, `DELETE FROM generation_decisions WHERE tenant = ? AND generation_id = ? AND request_id IN (?`+
		strings.Repeat(", ?", len(requestIDs)-1)+`)`, args...)
	if err != nil {
		return unavailable(err)
	}
	return nil
}

func (s sqliteGenerations) Decisions(ctx context.Context, tenant, id string, requestIDs []string) ([]Decision, error) {
	if requestIDs != nil && len(requestIDs) == 0 {
		return nil, nil
	}
	return sqliteDecisions(ctx, s.db, tenant, id, requestIDs)
}

// querier is what reads: a database, or a transaction.
type querier interface {
	QueryContext(ctx context.Context, query string, args ...any) (*sql.Rows, error)
}

// sqliteDecisions reads the decisions of tenant's generation id of the
// requests ids (all when nil), by request id.
func sqliteDecisions(ctx context.Context, db querier, tenant, id string, ids []string) ([]Decision, error) {
	q := `SELECT request_id, kind, decided_by, decided_at, data FROM generation_decisions WHERE tenant = ? AND generation_id = ?`
	args := []any{tenant, id}
	if ids != nil {
		q += ` AND request_id IN (?` + strings.Repeat(", ?", len(ids)-1) + `)`
		for _, r := range ids {
			args = append(args, r)
		}
	}
	rows, err := db.QueryContext(ctx, q+` ORDER BY request_id`, args...)
	if err != nil {
		return nil, unavailable(err)
	}
	defer rows.Close()
	var out []Decision
	for rows.Next() {
		var d Decision
		var at int64
		if err := rows.Scan(&d.RequestID, &d.Kind, &d.DecidedBy, &at, &d.Data); err != nil {
			return nil, unavailable(err)
		}
		d.DecidedAt = time.UnixMilli(at)
		out = append(out, d)
	}
	if err := rows.Err(); err != nil {
		return nil, unavailable(err)
	}
	return out, nil
}
