package store

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"strings"
	"time"
)

// sqliteThreads is the Threads of an SQLite database. Its writes are
// transactions of the store's committer, as the generations' are: one
// writer at a time, so a thread read and then written in one sees no
// other write between.
type sqliteThreads struct{ g sqliteGenerations }

// Threads returns the store's threads.
func (s *SQLite) Threads() Threads {
	return sqliteThreads{sqliteGenerations{s.db, s.stmts, s.commit, s.replicas, s.live}}
}

// sqliteThreadCols are a thread's columns as scanSQLiteThread reads them,
// its metadata as a JSON object, then its queue (as a JSON array, or
// NULL for a read that leaves it out).
const (
	sqliteThreadCols = `t.tenant, t.id, t.created_at, t.updated_at, t.expires_at, t.item_count, t.active,
		(SELECT json_group_object(m.key, m.value) FROM thread_metadata m WHERE m.tenant = t.tenant AND m.thread_id = t.id)`
	sqliteThreadQueue = `(SELECT json_group_array(g.id ORDER BY g.queue_pos) FROM generations g
		WHERE g.tenant = t.tenant AND g.thread_id = t.id AND g.thread_id <> '' AND g.queue_pos IS NOT NULL)`
	// sqliteThreadLive is the condition that t has not expired by the
	// parameter's time, or is held (Thread.ExpiresAt).
	sqliteThreadLive = `(t.expires_at IS NULL OR t.expires_at > ? OR t.active <> '')`
)

// qThreadItems reads a range of a thread's items, oldest first or newest
// first, from the thread's row (not expired by the third parameter) so
// that an expired thread's are not read.
var qThreadItems = [2]string{sqliteThreadItems("ASC"), sqliteThreadItems("DESC")}

func sqliteThreadItems(order string) string {
	return `
		SELECT i.n, i.item_id, i.generation_id, i.created_at, i.data
		FROM threads t JOIN thread_items i ON i.tenant = t.tenant AND i.thread_id = t.id
		WHERE t.tenant = ? AND t.id = ? AND ` + sqliteThreadLive + ` AND i.n > ? AND i.n < ?
		ORDER BY i.n ` + order + ` LIMIT ?`
}

// qInsertThreadItems[k-1] adds k items to a thread, as qInsertItems adds
// a generation's: ?1 to ?4 are the tenant, the thread, the generation
// that appends them and the time, then each item's number, id and data.
var qInsertThreadItems = func() (qs [maxEventRows]string) {
	for k := 1; k <= maxEventRows; k++ {
		var b strings.Builder
		b.WriteString(`INSERT INTO thread_items (tenant, thread_id, n, item_id, generation_id, created_at, data) VALUES (?1, ?2, ?5, ?6, ?3, ?4, ?7)`)
		for i := 1; i < k; i++ {
			fmt.Fprintf(&b, `, (?1, ?2, ?%d, ?%d, ?3, ?4, ?%d)`, 5+3*i, 6+3*i, 7+3*i)
		}
		qs[k-1] = b.String()
	}
	return qs
}()

func scanSQLiteThread(row interface{ Scan(...any) error }) (Thread, error) {
	var t Thread
	var created, updated int64
	var expires sql.NullInt64
	var metadata, queued []byte
	err := row.Scan(&t.Tenant, &t.ID, &created, &updated, &expires, &t.ItemCount, &t.Active, &metadata, &queued)
	if err != nil {
		return Thread{}, err
	}
	t.CreatedAt, t.UpdatedAt = time.UnixMilli(created), time.UnixMilli(updated)
	if expires.Valid {
		t.ExpiresAt = time.UnixMilli(expires.Int64)
	}
	return t, decodeThreadLists(&t, metadata, queued)
}

// nullMillis is t in unix milliseconds, or NULL for the zero time.
func nullMillis(t time.Time) any {
	if t.IsZero() {
		return nil
	}
	return t.UnixMilli()
}

func (s sqliteThreads) CreateThread(ctx context.Context, t NewThread) (Thread, error) {
	if t.MaxItems > 0 && int64(len(t.Items)) > t.MaxItems {
		return Thread{}, tooManyItems(t.Tenant, t.ID, t.MaxItems)
	}
	err := s.g.inTx(ctx, func(ctx context.Context, tx *sql.Tx) error {
		if err := sqliteInsertThread(ctx, tx, t.Tenant, t.ID, t.ExpiresAt, int64(len(t.Items)), t.MaxThreads, t.Now); err != nil {
			return err
		}
		if err := sqlitePutMetadata(ctx, tx, t.Tenant, t.ID, t.Metadata); err != nil {
			return err
		}
		return s.g.insertThreadItems(ctx, tx, t.Tenant, t.ID, 0, "", t.Items, t.Now)
	})
	if err != nil {
		return Thread{}, err
	}
	return newThread(t), nil
}

// newThread is the thread that CreateThread recorded, as GetThread reads
// it.
func newThread(t NewThread) Thread {
	now := time.UnixMilli(t.Now.UnixMilli())
	out := Thread{Tenant: t.Tenant, ID: t.ID, Metadata: metadataOf(t.Metadata), CreatedAt: now, UpdatedAt: now, ItemCount: int64(len(t.Items))}
	if !t.ExpiresAt.IsZero() {
		out.ExpiresAt = time.UnixMilli(t.ExpiresAt.UnixMilli())
	}
	return out
}

// sqliteInsertThread records a thread of count items, none of them
// written yet, unless the tenant has one of that id, or maxThreads (when
// above 0) of them.
func sqliteInsertThread(ctx context.Context, tx *sql.Tx, tenant, id string, expires time.Time, count, maxThreads int64, now time.Time) error {
	if maxThreads > 0 {
		var n int64
		err := tx.QueryRowContext(ctx, `SELECT count(*) FROM threads t WHERE t.tenant = ? AND `+sqliteThreadLive, tenant, now.UnixMilli()).Scan(&n)
		if err != nil {
			return unavailable(err)
		}
		if n >= maxThreads {
			return tooManyThreads(tenant, maxThreads)
		}
	}
	res, err := tx.ExecContext(ctx, `
		INSERT INTO threads (tenant, id, created_at, updated_at, expires_at, item_count, active) VALUES (?, ?, ?, ?, ?, ?, '')
		ON CONFLICT (tenant, id) DO NOTHING`,
		tenant, id, now.UnixMilli(), now.UnixMilli(), nullMillis(expires), count)
	if n, err := affected(res, err); err != nil {
		return err
	} else if n != 1 {
		return threadExists(id)
	}
	return nil
}

// sqlitePutMetadata sets entries of a thread's metadata, and removes
// those of an empty value.
func sqlitePutMetadata(ctx context.Context, tx *sql.Tx, tenant, id string, m map[string]string) error {
	for k, v := range m {
		var err error
		if v == "" {
			_, err = tx.ExecContext(ctx, `DELETE FROM thread_metadata WHERE tenant = ? AND thread_id = ? AND key = ?`, tenant, id, k)
		} else {
			_, err = tx.ExecContext(ctx, `
				INSERT INTO thread_metadata (tenant, thread_id, key, value) VALUES (?, ?, ?, ?)
				ON CONFLICT (tenant, thread_id, key) DO UPDATE SET value = excluded.value`, tenant, id, k, v)
		}
		if err != nil {
			return unavailable(err)
		}
	}
	return nil
}

// insertThreadItems adds items to a thread, numbered from first, appended
// by gen ("" for none) at now.
func (s sqliteGenerations) insertThreadItems(ctx context.Context, tx *sql.Tx, tenant, thread string, first int64, gen string, items []ThreadItem, now time.Time) error {
	args := make([]any, 0, 4+3*min(len(items), maxEventRows))
	for len(items) > 0 {
		batch := items[:min(len(items), maxEventRows)]
		args = append(args[:0], tenant, thread, gen, now.UnixMilli())
		for i, it := range batch {
			args = append(args, first+int64(i), it.ID, orEmpty(it.Data))
		}
		if _, err := s.in(ctx, tx, qInsertThreadItems[len(batch)-1]).ExecContext(ctx, args...); err != nil {
			return unavailable(err)
		}
		items, first = items[len(batch):], first+int64(len(batch))
	}
	return nil
}

func (s sqliteThreads) GetThread(ctx context.Context, tenant, id string) (Thread, error) {
	return sqliteGetThread(ctx, s.g.db, tenant, id, time.Now())
}

// sqliteGetThread reads tenant's thread id, with its queue, unless it
// expired by now.
func sqliteGetThread(ctx context.Context, q interface {
	QueryRowContext(ctx context.Context, query string, args ...any) *sql.Row
}, tenant, id string, now time.Time) (Thread, error) {
	t, err := scanSQLiteThread(q.QueryRowContext(ctx, `SELECT `+sqliteThreadCols+`, `+sqliteThreadQueue+`
		FROM threads t WHERE t.tenant = ? AND t.id = ? AND `+sqliteThreadLive, tenant, id, now.UnixMilli()))
	if errors.Is(err, sql.ErrNoRows) {
		return Thread{}, noThread(id)
	}
	if err != nil {
		return Thread{}, unavailable(err)
	}
	return t, nil
}

func (s sqliteThreads) ListThreads(ctx context.Context, tenant string, o ThreadListOptions) ([]Thread, string, error) {
	pos, after, err := parsePageToken(o.PageToken)
	if err != nil {
		return nil, "", err
	}
	size := pageSize(o.PageSize)
	q := `SELECT ` + sqliteThreadCols + `, NULL FROM threads t WHERE t.tenant = ? AND ` + sqliteThreadLive
	args := []any{tenant, time.Now().UnixMilli()}
	keys, values := entries(o.Metadata)
	for i, k := range keys {
		q += ` AND t.id IN (SELECT m.thread_id FROM thread_metadata m WHERE m.tenant = t.tenant AND m.key = ? AND m.value = ?)`
		args = append(args, k, values[i])
	}
	if after {
		q += ` AND (t.created_at, t.id) < (?, ?)`
		args = append(args, pos.created, pos.id)
	}
	q += ` ORDER BY t.created_at DESC, t.id DESC LIMIT ?`
	args = append(args, size+1)
	rows, err := s.g.db.QueryContext(ctx, q, args...)
	if err != nil {
		return nil, "", unavailable(err)
	}
	defer rows.Close()
	var page []Thread
	for rows.Next() {
		t, err := scanSQLiteThread(rows)
		if err != nil {
			return nil, "", unavailable(err)
		}
		page = append(page, t)
	}
	if err := rows.Err(); err != nil {
		return nil, "", unavailable(err)
	}
	page, next := nextToken(page, size, threadPos)
	return page, next, nil
}

func (s sqliteThreads) ThreadItems(ctx context.Context, tenant, id string, r ItemRange) ([]ThreadItem, error) {
	after, before, limit := r.bounds()
	q := qThreadItems[0]
	if r.Desc {
		q = qThreadItems[1]
	}
	now := time.Now()
	rows, err := s.g.stmts[q].QueryContext(ctx, tenant, id, now.UnixMilli(), after, before, limit)
	if err != nil {
		return nil, unavailable(err)
	}
	defer rows.Close()
	var out []ThreadItem
	for rows.Next() {
		var it ThreadItem
		var created int64
		if err := rows.Scan(&it.N, &it.ID, &it.Generation, &created, &it.Data); err != nil {
			return nil, unavailable(err)
		}
		it.CreatedAt = time.UnixMilli(created)
		out = append(out, it)
	}
	if err := rows.Err(); err != nil {
		return nil, unavailable(err)
	}
	if len(out) == 0 {
		_, err := sqliteGetThread(ctx, s.g.db, tenant, id, now)
		return nil, err
	}
	return out, nil
}

func (s sqliteThreads) UpdateThread(ctx context.Context, tenant, id string, u ThreadUpdate) (Thread, error) {
	var t Thread
	err := s.g.inTx(ctx, func(ctx context.Context, tx *sql.Tx) error {
		now := u.Now.UnixMilli()
		res, err := tx.ExecContext(ctx, `
			UPDATE threads AS t SET updated_at = ?, expires_at = CASE WHEN ? THEN ? ELSE expires_at END
			WHERE t.tenant = ? AND t.id = ? AND `+sqliteThreadLive,
			now, u.SetExpiry, nullMillis(u.ExpiresAt), tenant, id, now)
		if n, err := affected(res, err); err != nil {
			return err
		} else if n != 1 {
			return noThread(id)
		}
		if u.Replace {
			if _, err := tx.ExecContext(ctx, `DELETE FROM thread_metadata WHERE tenant = ? AND thread_id = ?`, tenant, id); err != nil {
				return unavailable(err)
			}
		}
		if err := sqlitePutMetadata(ctx, tx, tenant, id, u.Metadata); err != nil {
			return err
		}
		t, err = sqliteGetThread(ctx, tx, tenant, id, u.Now)
		return err
	})
	return t, err
}

func (s sqliteThreads) DeleteThread(ctx context.Context, tenant, id string) (items, gens int64, err error) {
	err = s.g.inTx(ctx, func(ctx context.Context, tx *sql.Tx) error {
		var live int
		err := tx.QueryRowContext(ctx, `SELECT 1 FROM threads t WHERE t.tenant = ? AND t.id = ? AND `+sqliteThreadLive,
			tenant, id, time.Now().UnixMilli()).Scan(&live)
		if errors.Is(err, sql.ErrNoRows) {
			return noThread(id)
		}
		if err != nil {
			return unavailable(err)
		}
		items, gens, err = sqliteDeleteThread(ctx, tx, tenant, id)
		return err
	})
	return items, gens, err
}

// sqliteDeleteThread removes tenant's thread id, its items and metadata
// (ON DELETE CASCADE), and its generations with theirs and their paused
// checkpoints, and returns how many items and generations it removed.
func sqliteDeleteThread(ctx context.Context, tx *sql.Tx, tenant, id string) (items, gens int64, err error) {
	if _, err := tx.ExecContext(ctx, `
		DELETE FROM paused_generations WHERE tenant = ? AND id IN (
			SELECT id FROM generations WHERE tenant = ? AND thread_id = ? AND thread_id <> '')`, tenant, tenant, id); err != nil {
		return 0, 0, unavailable(err)
	}
	res, err := tx.ExecContext(ctx, `DELETE FROM generations WHERE tenant = ? AND thread_id = ? AND thread_id <> ''`, tenant, id)
	n, err := affected(res, err)
	if err != nil {
		return 0, 0, err
	}
	err = tx.QueryRowContext(ctx, `DELETE FROM threads WHERE tenant = ? AND id = ? RETURNING item_count`, tenant, id).Scan(&items)
	if err != nil {
		return 0, 0, unavailable(err)
	}
	return items, int64(n), nil
}

func (s sqliteThreads) ForkThread(ctx context.Context, tenant, id, newID string, upTo int64, metadata map[string]string, maxThreads int64, now time.Time) (Thread, error) {
	var t Thread
	err := s.g.inTx(ctx, func(ctx context.Context, tx *sql.Tx) error {
		var count int64
		err := tx.QueryRowContext(ctx, `SELECT item_count FROM threads t WHERE t.tenant = ? AND t.id = ? AND `+sqliteThreadLive,
			tenant, id, now.UnixMilli()).Scan(&count)
		if errors.Is(err, sql.ErrNoRows) {
			return noThread(id)
		}
		if err != nil {
			return unavailable(err)
		}
		count = forkCount(count, upTo)
		if err := sqliteInsertThread(ctx, tx, tenant, newID, time.Time{}, count, maxThreads, now); err != nil {
			return err
		}
		if err := sqliteForkLists(ctx, tx, tenant, id, newID, count, metadata); err != nil {
			return err
		}
		t, err = sqliteGetThread(ctx, tx, tenant, newID, now)
		return err
	})
	return t, err
}

// sqliteForkLists copies to the thread newID the first count items of the
// thread id, and its metadata unless metadata has entries.
func sqliteForkLists(ctx context.Context, tx *sql.Tx, tenant, id, newID string, count int64, metadata map[string]string) error {
	if _, err := tx.ExecContext(ctx, `
		INSERT INTO thread_items (tenant, thread_id, n, item_id, generation_id, created_at, data)
		SELECT tenant, ?, n, item_id, generation_id, created_at, data FROM thread_items
		WHERE tenant = ? AND thread_id = ? AND n < ?`, newID, tenant, id, count); err != nil {
		return unavailable(err)
	}
	if keys, _ := entries(metadata); len(keys) > 0 {
		return sqlitePutMetadata(ctx, tx, tenant, newID, metadata)
	}
	if _, err := tx.ExecContext(ctx, `
		INSERT INTO thread_metadata (tenant, thread_id, key, value)
		SELECT tenant, ?, key, value FROM thread_metadata WHERE tenant = ? AND thread_id = ?`, newID, tenant, id); err != nil {
		return unavailable(err)
	}
	return nil
}

func (s sqliteThreads) Interrupted(ctx context.Context, owner string, limit int) ([]Interruption, error) {
	if limit <= 0 {
		return nil, nil
	}
	rows, err := s.g.db.QueryContext(ctx, `
		SELECT tenant, id, state, owner, cancel_reason IS NOT NULL, coalesce(cancel_reason, '') FROM generations
		WHERE (interrupted = 1 OR cancel_reason IS NOT NULL) AND finished_at IS NULL
			AND ((owner <> '' AND owner = ?) OR (state = 'paused' AND (owner = '' OR lease_expires <= ?)))
		ORDER BY lease_expires, tenant, id LIMIT ?`, owner, time.Now().UnixMilli(), limit)
	if err != nil {
		return nil, unavailable(err)
	}
	defer rows.Close()
	var out []Interruption
	for rows.Next() {
		var in Interruption
		var state string
		if err := rows.Scan(&in.Tenant, &in.ID, &state, &in.Owner, &in.Cancel, &in.Reason); err != nil {
			return nil, unavailable(err)
		}
		in.State = State(state)
		out = append(out, in)
	}
	if err := rows.Err(); err != nil {
		return nil, unavailable(err)
	}
	return out, nil
}

func (s sqliteThreads) SweepThreads(ctx context.Context, now, idleBefore time.Time) (int, error) {
	q := `SELECT tenant, id FROM threads WHERE expires_at <= ? AND active = ''`
	args := []any{now.UnixMilli()}
	if !idleBefore.IsZero() {
		q += ` UNION ALL SELECT tenant, id FROM threads WHERE expires_at IS NULL AND updated_at < ? AND active = ''`
		args = append(args, idleBefore.UnixMilli())
	}
	q += ` LIMIT ?`
	args = append(args, SweepBatch)
	return sweepBatches(ctx, func() (swept int, err error) {
		err = s.g.inTx(ctx, func(ctx context.Context, tx *sql.Tx) error {
			rows, err := tx.QueryContext(ctx, q, args...)
			if err != nil {
				return unavailable(err)
			}
			keys, err := scanPairs(rows)
			if err != nil {
				return unavailable(err)
			}
			for _, k := range keys {
				if _, _, err := sqliteDeleteThread(ctx, tx, k[0], k[1]); err != nil {
					return err
				}
			}
			swept = len(keys)
			return nil
		})
		return swept, err
	})
}

// scanPairs reads rows of two strings, and closes them.
func scanPairs(rows *sql.Rows) ([][2]string, error) {
	defer rows.Close()
	var out [][2]string
	for rows.Next() {
		var k [2]string
		if err := rows.Scan(&k[0], &k[1]); err != nil {
			return nil, err
		}
		out = append(out, k)
	}
	return out, rows.Err()
}

// sqlitePlace reads the thread that g starts on, in tx, decides where g
// goes, and records what that changes of the thread: that g holds it, or
// that the generation holding it is interrupted.
func sqlitePlace(ctx context.Context, tx *sql.Tx, g NewGeneration) (placement, error) {
	var items int64
	var active string
	err := tx.QueryRowContext(ctx, `SELECT item_count, active FROM threads t WHERE t.tenant = ? AND t.id = ? AND `+sqliteThreadLive,
		g.Tenant, g.Thread.ID, g.Now.UnixMilli()).Scan(&items, &active)
	if errors.Is(err, sql.ErrNoRows) {
		return placement{}, noThread(g.Thread.ID)
	}
	if err != nil {
		return placement{}, unavailable(err)
	}
	p, err := place(g, items, active, func() (first, last int64, err error) {
		err = tx.QueryRowContext(ctx, `
			SELECT coalesce(min(queue_pos), 0), coalesce(max(queue_pos), 0) FROM generations
			WHERE tenant = ? AND thread_id = ? AND thread_id <> '' AND queue_pos IS NOT NULL`, g.Tenant, g.Thread.ID).Scan(&first, &last)
		if err != nil {
			return 0, 0, unavailable(err)
		}
		return first, last, nil
	})
	if err != nil {
		return placement{}, err
	}
	switch {
	case p.holds():
		_, err = tx.ExecContext(ctx, `UPDATE threads SET active = ?, updated_at = ? WHERE tenant = ? AND id = ?`,
			g.ID, g.Now.UnixMilli(), g.Tenant, g.Thread.ID)
	case p.interrupts != "":
		_, err = tx.ExecContext(ctx, `UPDATE generations SET interrupted = 1 WHERE tenant = ? AND id = ?`, g.Tenant, p.interrupts)
	}
	if err != nil {
		return placement{}, unavailable(err)
	}
	return p, nil
}

// sqliteInsertInput stores the input that the thread keeps of the
// generation id when its pause runs out (ThreadStart.KeepInput): few
// messages, one statement each.
func sqliteInsertInput(ctx context.Context, tx *sql.Tx, tenant, id string, input []ThreadItem) error {
	for n, it := range input {
		if _, err := tx.ExecContext(ctx, `INSERT INTO thread_inputs (tenant, generation_id, n, item_id, data) VALUES (?, ?, ?, ?, ?)`,
			tenant, id, n, it.ID, orEmpty(it.Data)); err != nil {
			return unavailable(err)
		}
	}
	return nil
}

// releaseExpired gives up tenant's thread, if gen holds it, as
// ExpirePaused ends gen at now, appending the input it keeps, as Finish
// appends its items.
func (s sqliteGenerations) releaseExpired(ctx context.Context, tx *sql.Tx, tenant, thread, gen string, now time.Time) error {
	return s.giveUpThread(ctx, tx, tenant, thread, gen, now, func(count int64) (int64, error) {
		res, err := tx.ExecContext(ctx, `
			INSERT INTO thread_items (tenant, thread_id, n, item_id, generation_id, created_at, data)
			SELECT tenant, ?, ? + n, item_id, generation_id, ?, data FROM thread_inputs WHERE tenant = ? AND generation_id = ?`,
			thread, count, now.UnixMilli(), tenant, gen)
		n, err := affected(res, err)
		return int64(n), err
	})
}

// releaseThread gives up tenant's thread, if gen holds it, as gen ends at
// now, appending add's items (nil: none).
func (s sqliteGenerations) releaseThread(ctx context.Context, tx *sql.Tx, tenant, thread, gen string, add *ThreadAppend, now time.Time) error {
	return s.giveUpThread(ctx, tx, tenant, thread, gen, now, func(count int64) (int64, error) {
		if add == nil {
			return 0, nil
		}
		return int64(len(add.Items)), s.insertThreadItems(ctx, tx, tenant, thread, count, gen, add.Items, now)
	})
}

// giveUpThread gives up tenant's thread, if gen holds it, as gen ends at
// now: appendFrom appends gen's items, numbered from the thread's count,
// and returns how many; then the first generation queued, if any, holds
// the thread, running under a lease released at now, its conversation
// starting with every item of the thread.
func (s sqliteGenerations) giveUpThread(ctx context.Context, tx *sql.Tx, tenant, thread, gen string, now time.Time, appendFrom func(count int64) (int64, error)) error {
	if thread == "" {
		return nil
	}
	var count int64
	err := tx.QueryRowContext(ctx, `SELECT item_count FROM threads WHERE tenant = ? AND id = ? AND active = ?`, tenant, thread, gen).Scan(&count)
	if errors.Is(err, sql.ErrNoRows) {
		return nil
	}
	if err != nil {
		return unavailable(err)
	}
	added, err := appendFrom(count)
	if err != nil {
		return err
	}
	count += added
	var next string
	err = tx.QueryRowContext(ctx, `
		UPDATE generations SET queue_pos = NULL, lease_expires = ?, thread_base = ?
		WHERE tenant = ? AND id = (SELECT id FROM generations
			WHERE tenant = ? AND thread_id = ? AND thread_id <> '' AND queue_pos IS NOT NULL ORDER BY queue_pos LIMIT 1)
		RETURNING id`, now.UnixMilli(), count, tenant, tenant, thread).Scan(&next)
	if err != nil && !errors.Is(err, sql.ErrNoRows) {
		return unavailable(err)
	}
	if _, err := tx.ExecContext(ctx, `UPDATE threads SET item_count = ?, active = ?, updated_at = ? WHERE tenant = ? AND id = ?`,
		count, next, now.UnixMilli(), tenant, thread); err != nil {
		return unavailable(err)
	}
	return nil
}
