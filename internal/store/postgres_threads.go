package store

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
)

// pgThreads is the Threads of a PostgreSQL database. A write that changes
// which generation holds a thread, or removes it, locks the thread's row
// first (SELECT ... FOR UPDATE), then writes in statements of their own,
// each reading a snapshot taken after the lock: under READ COMMITTED, a
// statement that waited for a lock would otherwise miss what the lock's
// holder wrote.
type pgThreads struct{ pool *pgxpool.Pool }

// Threads returns the store's threads.
func (p *Postgres) Threads() Threads { return pgThreads{p.pool} }

// threadsLock is the class of the advisory locks that serialize a
// tenant's thread creations while one counts its threads (max_threads).
const threadsLock int32 = 0x7468

// pgThreadCols are a thread's columns as scanPgThread reads them, its
// metadata as a JSON object, then its queue (as a JSON array, or NULL
// for a read that leaves it out).
const (
	pgThreadCols = `t.tenant, t.id, t.created_at, t.updated_at, t.expires_at, t.item_count, t.active,
		(SELECT jsonb_object_agg(m.key, m.value) FROM thread_metadata m WHERE m.tenant = t.tenant AND m.thread_id = t.id)`
	pgThreadQueue = `(SELECT jsonb_agg(g.id ORDER BY g.queue_pos) FROM generations g
		WHERE g.tenant = t.tenant AND g.thread_id = t.id AND g.thread_id <> '' AND g.queue_pos IS NOT NULL)`
)

// pgThreadLive is the condition that t has not expired by the time of
// parameter n, or is held (Thread.ExpiresAt).
func pgThreadLive(n int) string {
	return fmt.Sprintf(`(t.expires_at IS NULL OR t.expires_at > $%d OR t.active <> '')`, n)
}

func scanPgThread(row pgx.Row) (Thread, error) {
	var t Thread
	var expires *time.Time
	var metadata, queued []byte
	err := row.Scan(&t.Tenant, &t.ID, &t.CreatedAt, &t.UpdatedAt, &expires, &t.ItemCount, &t.Active, &metadata, &queued)
	if err != nil {
		return Thread{}, err
	}
	if expires != nil {
		t.ExpiresAt = *expires
	}
	return t, decodeThreadLists(&t, metadata, queued)
}

func collectPgThread(row pgx.CollectableRow) (Thread, error) { return scanPgThread(row) }

// nullTime is t to the millisecond, or NULL for the zero time.
func nullTime(t time.Time) *time.Time {
	if t.IsZero() {
		return nil
	}
	t = ms(t)
	return &t
}

// threadItemColumns splits the items that Finish appends into the columns
// the stores insert.
func threadItemColumns(a *ThreadAppend) (ids []string, data [][]byte) {
	ids, data = []string{}, [][]byte{}
	if a == nil {
		return ids, data
	}
	for _, it := range a.Items {
		ids, data = append(ids, it.ID), append(data, orEmpty(it.Data))
	}
	return ids, data
}

// pgRelease is the statement that gives up the threads held by the
// generations that which selects (g) once they have finished: it appends
// to each thread t the items that items (a FROM item of rows item_id,
// data and o, from 1, for t) gives, added of them, numbered from the
// thread's count, appended by the generation at $1; then the first
// generation queued on each, if any, holds it, running under a lease
// released at $1, its conversation starting with every item of the
// thread.
func pgRelease(which, added, items string) string {
	return `
		WITH t AS (
			SELECT th.tenant, th.id, th.item_count, th.active, ` + added + ` AS added FROM threads th
			JOIN generations g ON g.tenant = th.tenant AND g.id = th.active AND g.thread_id = th.id
			WHERE ` + which + ` AND g.finished_at IS NOT NULL
		), i AS (
			INSERT INTO thread_items (tenant, thread_id, n, item_id, generation_id, created_at, data)
			SELECT t.tenant, t.id, t.item_count + i.o - 1, i.item_id, t.active, $1, i.data
			FROM t, ` + items + `
		), q AS (
			SELECT DISTINCT ON (g.tenant, g.thread_id) g.tenant, g.thread_id, g.id
			FROM generations g JOIN t ON g.tenant = t.tenant AND g.thread_id = t.id
			WHERE g.thread_id <> '' AND g.queue_pos IS NOT NULL
			ORDER BY g.tenant, g.thread_id, g.queue_pos
		), p AS (
			UPDATE generations g SET queue_pos = NULL, lease_expires = $1, thread_base = t.item_count + t.added
			FROM q JOIN t ON t.tenant = q.tenant AND t.id = q.thread_id
			WHERE g.tenant = q.tenant AND g.id = q.id
		)
		UPDATE threads th SET item_count = t.item_count + t.added, active = coalesce(q.id, ''), updated_at = $1
		FROM t LEFT JOIN q ON q.tenant = t.tenant AND q.thread_id = t.id
		WHERE th.tenant = t.tenant AND th.id = t.id`
}

// The release of Finish, of the generation $6 of the tenant $5, which
// appends the items $2 and $3 (their ids and data), $4 of them; and of
// ExpirePaused, of those it ended at $1, which appends the input each
// keeps (ThreadStart.KeepInput).
var (
	pgReleaseOne = pgRelease(`g.tenant = $5 AND g.id = $6`, `$4::bigint`,
		`unnest($2::text[], $3::bytea[]) WITH ORDINALITY AS i(item_id, data, o)`)
	pgReleaseEnded = pgRelease(`g.finished_at = $1 AND g.thread_id <> ''`,
		`(SELECT count(*) FROM thread_inputs ti WHERE ti.tenant = th.tenant AND ti.generation_id = th.active)`,
		`LATERAL (SELECT ti.item_id, ti.data, ti.n + 1 AS o FROM thread_inputs ti WHERE ti.tenant = t.tenant AND ti.generation_id = t.active) i`)
)

// pgPlace locks the thread that g starts on, in tx, decides where g goes,
// and records what that changes of the thread: that g holds it, or that
// the generation holding it is interrupted.
func pgPlace(ctx context.Context, tx pgx.Tx, g NewGeneration) (placement, error) {
	var items int64
	var active string
	err := tx.QueryRow(ctx, `SELECT item_count, active FROM threads t WHERE t.tenant = $1 AND t.id = $2 AND `+pgThreadLive(3)+` FOR UPDATE`,
		g.Tenant, g.Thread.ID, ms(g.Now)).Scan(&items, &active)
	if errors.Is(err, pgx.ErrNoRows) {
		return placement{}, noThread(g.Thread.ID)
	}
	if err != nil {
		return placement{}, err
	}
	p, err := place(g, items, active, func() (first, last int64, err error) {
		err = tx.QueryRow(ctx, `
			SELECT coalesce(min(queue_pos), 0), coalesce(max(queue_pos), 0) FROM generations
			WHERE tenant = $1 AND thread_id = $2 AND thread_id <> '' AND queue_pos IS NOT NULL`, g.Tenant, g.Thread.ID).Scan(&first, &last)
		return first, last, err
	})
	if err != nil {
		return placement{}, err
	}
	switch {
	case p.holds():
		_, err = tx.Exec(ctx, `UPDATE threads SET active = $3, updated_at = $4 WHERE tenant = $1 AND id = $2`,
			g.Tenant, g.Thread.ID, g.ID, ms(g.Now))
	case p.interrupts != "":
		_, err = tx.Exec(ctx, `UPDATE generations SET interrupted = true WHERE tenant = $1 AND id = $2`, g.Tenant, p.interrupts)
	}
	return p, err
}

func (p pgThreads) CreateThread(ctx context.Context, t NewThread) (Thread, error) {
	if t.MaxItems > 0 && int64(len(t.Items)) > t.MaxItems {
		return Thread{}, tooManyItems(t.Tenant, t.ID, t.MaxItems)
	}
	err := pgx.BeginFunc(ctx, p.pool, func(tx pgx.Tx) error {
		if err := pgInsertThread(ctx, tx, t.Tenant, t.ID, t.ExpiresAt, int64(len(t.Items)), t.MaxThreads, t.Now); err != nil {
			return err
		}
		if err := pgPutMetadata(ctx, tx, t.Tenant, t.ID, t.Metadata); err != nil || len(t.Items) == 0 {
			return err
		}
		ids, data := threadItemColumns(&ThreadAppend{Items: t.Items})
		_, err := tx.Exec(ctx, `
			INSERT INTO thread_items (tenant, thread_id, n, item_id, generation_id, created_at, data)
			SELECT $1, $2, i.o - 1, i.item_id, '', $3, i.data
			FROM unnest($4::text[], $5::bytea[]) WITH ORDINALITY AS i(item_id, data, o)`,
			t.Tenant, t.ID, ms(t.Now), ids, data)
		return err
	})
	if err != nil {
		return Thread{}, classifyFault(err)
	}
	return newThread(t), nil
}

// pgInsertThread records a thread of count items, none of them written
// yet, unless the tenant has one of that id, or maxThreads (when above 0)
// of them: then the tenant's creations wait for one another, each until
// the one before has committed.
func pgInsertThread(ctx context.Context, tx pgx.Tx, tenant, id string, expires time.Time, count, maxThreads int64, now time.Time) error {
	if maxThreads > 0 {
		var n int64
		if _, err := tx.Exec(ctx, `SELECT pg_advisory_xact_lock($1, hashtext($2))`, threadsLock, tenant); err != nil {
			return err
		}
		err := tx.QueryRow(ctx, `SELECT count(*) FROM threads t WHERE t.tenant = $1 AND `+pgThreadLive(2), tenant, ms(now)).Scan(&n)
		if err != nil {
			return err
		}
		if n >= maxThreads {
			return tooManyThreads(tenant, maxThreads)
		}
	}
	tag, err := tx.Exec(ctx, `
		INSERT INTO threads (tenant, id, created_at, updated_at, expires_at, item_count, active) VALUES ($1, $2, $3, $3, $4, $5, '')
		ON CONFLICT (tenant, id) DO NOTHING`,
		tenant, id, ms(now), nullTime(expires), count)
	if err != nil {
		return err
	}
	if tag.RowsAffected() != 1 {
		return threadExists(id)
	}
	return nil
}

// pgPutMetadata sets entries of a thread's metadata, and removes those of
// an empty value.
func pgPutMetadata(ctx context.Context, tx pgx.Tx, tenant, id string, m map[string]string) error {
	if len(m) == 0 {
		return nil
	}
	var gone []string
	for k, v := range m {
		if v == "" {
			gone = append(gone, k)
		}
	}
	keys, values := entries(m)
	_, err := tx.Exec(ctx, `
		WITH d AS (
			DELETE FROM thread_metadata WHERE tenant = $1 AND thread_id = $2 AND key = ANY($3::text[])
		)
		INSERT INTO thread_metadata (tenant, thread_id, key, value)
		SELECT $1, $2, e.key, e.value FROM unnest($4::text[], $5::text[]) AS e(key, value)
		ON CONFLICT (tenant, thread_id, key) DO UPDATE SET value = excluded.value`,
		tenant, id, gone, keys, values)
	return err
}

func (p pgThreads) GetThread(ctx context.Context, tenant, id string) (Thread, error) {
	return pgGetThread(ctx, p.pool, tenant, id, time.Now())
}

// pgGetThread reads tenant's thread id, with its queue, unless it expired
// by now.
func pgGetThread(ctx context.Context, q pgRower, tenant, id string, now time.Time) (Thread, error) {
	t, err := scanPgThread(q.QueryRow(ctx, `SELECT `+pgThreadCols+`, `+pgThreadQueue+`
		FROM threads t WHERE t.tenant = $1 AND t.id = $2 AND `+pgThreadLive(3), tenant, id, ms(now)))
	if errors.Is(err, pgx.ErrNoRows) {
		return Thread{}, noThread(id)
	}
	if err != nil {
		return Thread{}, classify(err)
	}
	return t, nil
}

func (p pgThreads) ListThreads(ctx context.Context, tenant string, o ThreadListOptions) ([]Thread, string, error) {
	pos, after, err := parsePageToken(o.PageToken)
	if err != nil {
		return nil, "", err
	}
	size := pageSize(o.PageSize)
	q := `SELECT ` + pgThreadCols + `, NULL::jsonb FROM threads t WHERE t.tenant = $1 AND ` + pgThreadLive(2)
	args := []any{tenant, ms(time.Now())}
	keys, values := entries(o.Metadata)
	for i, k := range keys {
		args = append(args, k, values[i])
		q += fmt.Sprintf(` AND t.id IN (SELECT m.thread_id FROM thread_metadata m WHERE m.tenant = t.tenant AND m.key = $%d AND m.value = $%d)`,
			len(args)-1, len(args))
	}
	if after {
		args = append(args, time.UnixMilli(pos.created), pos.id)
		q += fmt.Sprintf(` AND (t.created_at, t.id) < ($%d, $%d)`, len(args)-1, len(args))
	}
	args = append(args, size+1)
	q += fmt.Sprintf(` ORDER BY t.created_at DESC, t.id DESC LIMIT $%d`, len(args))
	rows, err := p.pool.Query(ctx, q, args...)
	if err != nil {
		return nil, "", classify(err)
	}
	page, err := pgx.CollectRows(rows, collectPgThread)
	if err != nil {
		return nil, "", classify(err)
	}
	page, next := nextToken(page, size, threadPos)
	return page, next, nil
}

// pgThreadItems reads a range of a thread's items, oldest first or newest
// first, as pgPage reads a page.
var pgThreadItems = [2]string{pgThreadItemsIn("ASC"), pgThreadItemsIn("DESC")}

func pgThreadItemsIn(order string) string {
	return `
		SELECT i.n, i.item_id, i.generation_id, i.created_at, i.data FROM threads t
		LEFT JOIN LATERAL (
			SELECT n, item_id, generation_id, created_at, data FROM thread_items
			WHERE tenant = t.tenant AND thread_id = t.id AND n > $4 AND n < $5
			ORDER BY n ` + order + ` LIMIT $6
		) i ON true
		WHERE t.tenant = $1 AND t.id = $2 AND ` + pgThreadLive(3) + `
		ORDER BY i.n ` + order
}

func (p pgThreads) ThreadItems(ctx context.Context, tenant, id string, r ItemRange) ([]ThreadItem, error) {
	after, before, limit := r.bounds()
	q := pgThreadItems[0]
	if r.Desc {
		q = pgThreadItems[1]
	}
	return pgPage(ctx, p.pool, noThread(id), q, []any{tenant, id, ms(time.Now()), after, before, limit},
		func(rows pgx.Rows) (ThreadItem, bool, error) {
			var n *int64
			var it ThreadItem
			var itemID, gen *string
			var created *time.Time
			if err := rows.Scan(&n, &itemID, &gen, &created, &it.Data); err != nil || n == nil {
				return ThreadItem{}, false, err
			}
			it.N, it.ID, it.Generation, it.CreatedAt = *n, *itemID, *gen, *created
			return it, true, nil
		})
}

func (p pgThreads) UpdateThread(ctx context.Context, tenant, id string, u ThreadUpdate) (Thread, error) {
	var t Thread
	err := pgx.BeginFunc(ctx, p.pool, func(tx pgx.Tx) error {
		tag, err := tx.Exec(ctx, `
			UPDATE threads t SET updated_at = $3, expires_at = CASE WHEN $4 THEN $5 ELSE t.expires_at END
			WHERE t.tenant = $1 AND t.id = $2 AND `+pgThreadLive(3),
			tenant, id, ms(u.Now), u.SetExpiry, nullTime(u.ExpiresAt))
		if err != nil {
			return err
		}
		if tag.RowsAffected() != 1 {
			return noThread(id)
		}
		if u.Replace {
			if _, err := tx.Exec(ctx, `DELETE FROM thread_metadata WHERE tenant = $1 AND thread_id = $2`, tenant, id); err != nil {
				return err
			}
		}
		if err := pgPutMetadata(ctx, tx, tenant, id, u.Metadata); err != nil {
			return err
		}
		t, err = pgGetThread(ctx, tx, tenant, id, u.Now)
		return err
	})
	if err != nil {
		return Thread{}, classifyFault(err)
	}
	return t, nil
}

func (p pgThreads) DeleteThread(ctx context.Context, tenant, id string) (items, gens int64, err error) {
	err = pgx.BeginFunc(ctx, p.pool, func(tx pgx.Tx) error {
		var one int
		err := tx.QueryRow(ctx, `SELECT 1 FROM threads t WHERE t.tenant = $1 AND t.id = $2 AND `+pgThreadLive(3)+` FOR UPDATE`,
			tenant, id, ms(time.Now())).Scan(&one)
		if errors.Is(err, pgx.ErrNoRows) {
			return noThread(id)
		}
		if err != nil {
			return err
		}
		items, gens, err = pgDeleteThreads(ctx, tx, []string{tenant}, []string{id})
		return err
	})
	if err != nil {
		return 0, 0, classifyFault(err)
	}
	return items, gens, nil
}

// pgDeleteThreads removes the threads (tenants[i], ids[i]), locked by tx,
// their items and metadata (ON DELETE CASCADE), and their generations
// with theirs and their paused checkpoints, and returns how many items and
// generations it removed.
func pgDeleteThreads(ctx context.Context, tx pgx.Tx, tenants, ids []string) (items, gens int64, err error) {
	err = tx.QueryRow(ctx, `
		WITH d AS (
			SELECT * FROM unnest($1::text[], $2::text[]) AS d(tenant, id)
		), g AS (
			DELETE FROM generations gg USING d WHERE gg.tenant = d.tenant AND gg.thread_id = d.id AND gg.thread_id <> ''
			RETURNING gg.tenant, gg.id
		), p AS (
			DELETE FROM paused_generations pg USING g WHERE pg.tenant = g.tenant AND pg.id = g.id
		), t AS (
			DELETE FROM threads th USING d WHERE th.tenant = d.tenant AND th.id = d.id
			RETURNING th.item_count
		)
		SELECT (SELECT coalesce(sum(item_count), 0) FROM t)::bigint, (SELECT count(*) FROM g)`,
		tenants, ids).Scan(&items, &gens)
	return items, gens, err
}

// ForkThread locks the thread it forks, shared, until it commits, so
// that the items it copies, in a statement of its own, are those its
// count says: a DeleteThread that committed between the two would leave
// a fork counting items it does not have. Forks of one thread share the
// lock; a write to the thread (a start, a Finish, a deletion) waits for
// it, and a sweep passes the thread over.
func (p pgThreads) ForkThread(ctx context.Context, tenant, id, newID string, upTo int64, metadata map[string]string, maxThreads int64, now time.Time) (Thread, error) {
	var t Thread
	err := pgx.BeginFunc(ctx, p.pool, func(tx pgx.Tx) error {
		var count int64
		err := tx.QueryRow(ctx, `SELECT item_count FROM threads t WHERE t.tenant = $1 AND t.id = $2 AND `+pgThreadLive(3)+` FOR SHARE`,
			tenant, id, ms(now)).Scan(&count)
		if errors.Is(err, pgx.ErrNoRows) {
			return noThread(id)
		}
		if err != nil {
			return err
		}
		count = forkCount(count, upTo)
		if err := pgInsertThread(ctx, tx, tenant, newID, time.Time{}, count, maxThreads, now); err != nil {
			return err
		}
		if err := pgForkLists(ctx, tx, tenant, id, newID, count, metadata); err != nil {
			return err
		}
		t, err = pgGetThread(ctx, tx, tenant, newID, now)
		return err
	})
	if err != nil {
		return Thread{}, classifyFault(err)
	}
	return t, nil
}

// pgForkLists copies to the thread newID the first count items of the
// thread id, and its metadata unless metadata has entries.
func pgForkLists(ctx context.Context, tx pgx.Tx, tenant, id, newID string, count int64, metadata map[string]string) error {
	if _, err := tx.Exec(ctx, `
		INSERT INTO thread_items (tenant, thread_id, n, item_id, generation_id, created_at, data)
		SELECT tenant, $3, n, item_id, generation_id, created_at, data FROM thread_items
		WHERE tenant = $1 AND thread_id = $2 AND n < $4`, tenant, id, newID, count); err != nil {
		return err
	}
	if keys, _ := entries(metadata); len(keys) > 0 {
		return pgPutMetadata(ctx, tx, tenant, newID, metadata)
	}
	_, err := tx.Exec(ctx, `
		INSERT INTO thread_metadata (tenant, thread_id, key, value)
		SELECT tenant, $3, key, value FROM thread_metadata WHERE tenant = $1 AND thread_id = $2`, tenant, id, newID)
	return err
}

func (p pgThreads) Interrupted(ctx context.Context, owner string, limit int) ([]Interruption, error) {
	if limit <= 0 {
		return nil, nil
	}
	rows, err := p.pool.Query(ctx, `
		SELECT tenant, id, state, owner, cancel_reason IS NOT NULL, coalesce(cancel_reason, '') FROM generations
		WHERE (interrupted OR cancel_reason IS NOT NULL) AND finished_at IS NULL
			AND ((owner <> '' AND owner = $1) OR (state = 'paused' AND (owner = '' OR lease_expires <= $2)))
		ORDER BY lease_expires, tenant, id LIMIT $3`, owner, ms(time.Now()), limit)
	if err != nil {
		return nil, classify(err)
	}
	out, err := pgx.CollectRows(rows, func(row pgx.CollectableRow) (Interruption, error) {
		var in Interruption
		var state string
		err := row.Scan(&in.Tenant, &in.ID, &state, &in.Owner, &in.Cancel, &in.Reason)
		in.State = State(state)
		return in, err
	})
	if err != nil {
		return nil, classify(err)
	}
	return out, nil
}

// SweepThreads locks the threads it removes, passing over those another
// transaction holds (a start, a Finish, a fork: the next sweep sees them
// again).
func (p pgThreads) SweepThreads(ctx context.Context, now, idleBefore time.Time) (int, error) {
	q := `SELECT tenant, id FROM threads WHERE active = '' AND (expires_at <= $1`
	args := []any{ms(now), SweepBatch}
	if !idleBefore.IsZero() {
		q += ` OR (expires_at IS NULL AND updated_at < $3)`
		args = append(args, ms(idleBefore))
	}
	q += `) LIMIT $2 FOR UPDATE SKIP LOCKED`
	return sweepBatches(ctx, func() (int, error) {
		var tenants, ids []string
		err := pgx.BeginFunc(ctx, p.pool, func(tx pgx.Tx) error {
			rows, err := tx.Query(ctx, q, args...)
			if err != nil {
				return err
			}
			var tenant, id string
			if _, err := pgx.ForEachRow(rows, []any{&tenant, &id}, func() error {
				tenants, ids = append(tenants, tenant), append(ids, id)
				return nil
			}); err != nil || len(ids) == 0 {
				return err
			}
			_, _, err = pgDeleteThreads(ctx, tx, tenants, ids)
			return err
		})
		if err != nil {
			return 0, classifyFault(err)
		}
		return len(ids), nil
	})
}
