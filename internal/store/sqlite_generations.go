package store

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"
)

// sqliteGenerations is the Generations of an SQLite database. SQLite has
// one writer at a time, across processes: each write below is one
// statement, or one transaction that takes the write lock as it begins,
// so writes never interleave and a sequence of reads and writes inside
// one sees no other's.
//
// A lease is held while its owner is not ”: Release and Finish clear it,
// so the writes that require it are refused on a finished generation too.
type sqliteGenerations struct {
	db     *sql.DB
	stmts  map[string]*sql.Stmt // the hot statements, prepared at open
	commit *committer           // runs the transactions (sqlite_commit.go)
	// replicas is the directory of the replicas' liveness files, live
	// the replicas attending through this store (sqlite_liveness.go).
	replicas string
	live     *attendances
}

// Generations returns the store's durable generations.
func (s *SQLite) Generations() Generations {
	return sqliteGenerations{s.db, s.stmts, s.commit, s.replicas, s.live}
}

// The statements every generation runs several times are prepared once,
// when the store opens (SQLite otherwise parses each again, a third of
// its work on a checkpoint).
const (
	qCreate = `
			INSERT INTO generations (tenant, id, state, owner, epoch, lease_expires, version, checkpoint,
				checkpoint_seq, last_seq, result, created_at, updated_at, finished_at, started_by, end_user, provider, model,
				trace_id, thread_id, thread_base, queue_pos)
			VALUES (?, ?, 'running', ?, ?, ?, 1, ?, ?, ?, NULL, ?, ?, NULL, ?, ?, ?, ?, ?, ?, ?, ?)
			ON CONFLICT (tenant, id) DO NOTHING`
	qRenew = `
		UPDATE generations SET lease_expires = ?
		WHERE tenant = ? AND id = ? AND epoch = ? AND owner <> ''`
	// A NULL checkpoint keeps the one stored, and what it covers.
	qCheckpoint = `
			UPDATE generations SET state = ?, checkpoint = coalesce(?, checkpoint), version = version + 1,
				last_seq = max(last_seq, ?) + ?,
				checkpoint_seq = CASE WHEN ? IS NULL THEN checkpoint_seq ELSE max(last_seq, ?) + ? END, updated_at = ?
			WHERE tenant = ? AND id = ? AND epoch = ? AND owner <> ''
			RETURNING last_seq`
	// qCheckpointSameState is qCheckpoint for a generation already in the
	// state: an UPDATE that sets state rewrites the row's entries in the
	// partial indexes whose condition reads state (generations_adoptable),
	// a page written to the WAL for nothing; most checkpoints keep the
	// state.
	qCheckpointSameState = `
			UPDATE generations SET checkpoint = coalesce(?, checkpoint), version = version + 1,
				last_seq = max(last_seq, ?) + ?,
				checkpoint_seq = CASE WHEN ? IS NULL THEN checkpoint_seq ELSE max(last_seq, ?) + ? END, updated_at = ?
			WHERE tenant = ? AND id = ? AND epoch = ? AND owner <> '' AND state = ?
			RETURNING last_seq`
	qFinish = `
			UPDATE generations SET state = ?, result = ?, checkpoint = x'', owner = '', lease_expires = ?,
				last_seq = max(last_seq, ?) + ?, updated_at = ?, finished_at = ?
			WHERE tenant = ? AND id = ? AND epoch = ? AND owner <> ''
			RETURNING last_seq, thread_id`
	qAppend = `
			UPDATE generations SET last_seq = max(last_seq, ?) + ?
			WHERE tenant = ? AND id = ? AND epoch = ? AND owner <> ''
			RETURNING last_seq`
)

// maxEventRows is the most events one INSERT logs: insertEvents writes a
// write's events in as few statements as that allows, since a statement's
// round through database/sql and the driver costs more than the row.
const maxEventRows = 8

// qInsertEvents[k-1] logs k events of one generation from the sequence
// number ?3: ?1 and ?2 are the tenant and the generation, then each
// event's kind and data.
var qInsertEvents = func() (qs [maxEventRows]string) {
	for k := 1; k <= maxEventRows; k++ {
		var b strings.Builder
		b.WriteString(`INSERT INTO generation_events (tenant, generation_id, seq, kind, data) VALUES (?1, ?2, ?3, ?4, ?5)`)
		for i := 1; i < k; i++ {
			fmt.Fprintf(&b, `, (?1, ?2, ?3 + %d, ?%d, ?%d)`, i, 4+2*i, 5+2*i)
		}
		qs[k-1] = b.String()
	}
	return qs
}()

// qInsertItems[k-1] adds k items to a generation's conversation, as
// qInsertEvents logs events: ?1 and ?2 are the tenant and the generation,
// then each item's number and data. A retried write finds them there and
// leaves them.
var qInsertItems = func() (qs [maxEventRows]string) {
	for k := 1; k <= maxEventRows; k++ {
		var b strings.Builder
		b.WriteString(`INSERT INTO generation_items (tenant, generation_id, n, data) VALUES (?1, ?2, ?3, ?4)`)
		for i := 1; i < k; i++ {
			fmt.Fprintf(&b, `, (?1, ?2, ?%d, ?%d)`, 3+2*i, 4+2*i)
		}
		b.WriteString(` ON CONFLICT (tenant, generation_id, n) DO NOTHING`)
		qs[k-1] = b.String()
	}
	return qs
}()

// qDropAgent drops a finished generation's agent, qDropPending its
// pending requests.
const (
	qDropAgent   = `DELETE FROM generation_agents WHERE tenant = ? AND generation_id = ?`
	qDropPending = `DELETE FROM pending_requests WHERE tenant = ? AND generation_id = ?`
)

// qPutAgent writes a generation's agent.
const qPutAgent = `INSERT INTO generation_agents (tenant, generation_id, data) VALUES (?, ?, ?)
			ON CONFLICT (tenant, generation_id) DO UPDATE SET data = excluded.data`

// The reads of the streams that follow a generation (its record, its
// events, the conversation items they name) are as hot as the writes: a
// follow makes them as it begins and ends, and every 50 ms while it polls
// a generation that runs on another replica.
var (
	qGet    = `SELECT ` + sqliteGenerationCols + ` FROM generations WHERE tenant = ? AND id = ?`
	qExists = `SELECT 1 FROM generations WHERE tenant = ? AND id = ?`
	qRead   = `
		SELECT seq, kind, data FROM generation_events
		WHERE tenant = ? AND generation_id = ? AND seq > ?
		ORDER BY seq LIMIT ?`
	qItems = `
		SELECT n, data FROM generation_items
		WHERE tenant = ? AND generation_id = ? AND n > ?
		ORDER BY n LIMIT ?`
	qAgent = `SELECT data FROM generation_agents WHERE tenant = ? AND generation_id = ?`
)

var hotStatements = slices.Concat([]string{qCreate, qRenew, qCheckpoint, qCheckpointSameState, qFinish, qAppend, qPutAgent, qDropAgent, qDropPending,
	qGet, qExists, qRead, qItems, qAgent}, qInsertEvents[:], qInsertItems[:], qThreadItems[:], qInsertThreadItems[:], budgetStatements)

// prepareHot prepares the hot statements on db.
func prepareHot(db *sql.DB) (map[string]*sql.Stmt, error) {
	stmts := make(map[string]*sql.Stmt, len(hotStatements))
	for _, q := range hotStatements {
		st, err := db.Prepare(q)
		if err != nil {
			for _, st := range stmts {
				_ = st.Close()
			}
			return nil, err
		}
		stmts[q] = st
	}
	return stmts, nil
}

// in is hot statement q, prepared at open, for tx.
func (s sqliteGenerations) in(ctx context.Context, tx *sql.Tx, q string) *sql.Stmt {
	return tx.StmtContext(ctx, s.stmts[q])
}

var (
	sqliteGenerationCols = generationColumns("", "")
	sqliteSummaryCols    = generationColumns("", "NULL")
)

func scanSQLiteGeneration(row interface{ Scan(...any) error }) (Generation, error) {
	var g Generation
	var state string
	var expires, created, updated int64
	var finished, queuePos sql.NullInt64
	err := row.Scan(&g.Tenant, &g.ID, &state, &g.Lease.Owner, &g.Lease.Epoch, &expires, &g.Version, &g.Checkpoint,
		&g.CheckpointSeq, &g.LastSeq, &g.Result, &created, &updated, &finished,
		&g.Thread, &g.ThreadBase, &queuePos, &g.Interrupted,
		&g.Origin.StartedBy, &g.Origin.EndUser, &g.Origin.Provider, &g.Origin.Model, &g.Origin.TraceID)
	if err != nil {
		return Generation{}, err
	}
	g.State = storedState(state, queuePos.Valid)
	if g.State != Queued {
		g.Lease.Expires = time.UnixMilli(expires)
	}
	g.CreatedAt, g.UpdatedAt = time.UnixMilli(created), time.UnixMilli(updated)
	if finished.Valid {
		g.FinishedAt = time.UnixMilli(finished.Int64)
	}
	return g, nil
}

// inTx runs f in a transaction (holding the write lock: _txlock), perhaps
// with other writes (committer), and returns once that has committed, or
// with f's error, f's work rolled back. f runs its statements with the ctx
// it is given: ctx's values, without its cancellation.
func (s sqliteGenerations) inTx(ctx context.Context, f func(ctx context.Context, tx *sql.Tx) error) error {
	return s.commit.do(ctx, f)
}

// insertEvents logs events with the sequence numbers from first.
func (s sqliteGenerations) insertEvents(ctx context.Context, tx *sql.Tx, tenant, id string, first int64, events []Event) error {
	if len(events) == 0 {
		return nil
	}
	args := make([]any, 0, 3+2*min(len(events), maxEventRows))
	for len(events) > 0 {
		batch := events[:min(len(events), maxEventRows)]
		args = append(args[:0], tenant, id, first)
		for _, e := range batch {
			args = append(args, e.Kind, orEmpty(e.Data))
		}
		if _, err := s.in(ctx, tx, qInsertEvents[len(batch)-1]).ExecContext(ctx, args...); err != nil {
			return unavailable(err)
		}
		events, first = events[len(batch):], first+int64(len(batch))
	}
	return nil
}

// putAgent writes the generation's agent, if there is one to write.
func (s sqliteGenerations) putAgent(ctx context.Context, tx *sql.Tx, tenant, id string, agent []byte) error {
	if agent == nil {
		return nil
	}
	if _, err := s.in(ctx, tx, qPutAgent).ExecContext(ctx, tenant, id, agent); err != nil {
		return unavailable(err)
	}
	return nil
}

// dropLive drops what a generation keeps only while it is live: its
// agent and its pending requests.
func (s sqliteGenerations) dropLive(ctx context.Context, tx *sql.Tx, tenant, id string) error {
	if _, err := s.in(ctx, tx, qDropAgent).ExecContext(ctx, tenant, id); err != nil {
		return unavailable(err)
	}
	if _, err := s.in(ctx, tx, qDropPending).ExecContext(ctx, tenant, id); err != nil {
		return unavailable(err)
	}
	return nil
}

// insertItems adds items to the conversation.
func (s sqliteGenerations) insertItems(ctx context.Context, tx *sql.Tx, tenant, id string, items []Item) error {
	args := make([]any, 0, 2+2*min(len(items), maxEventRows))
	for len(items) > 0 {
		batch := items[:min(len(items), maxEventRows)]
		args = append(args[:0], tenant, id)
		for _, it := range batch {
			args = append(args, it.N, orEmpty(it.Data))
		}
		if _, err := s.in(ctx, tx, qInsertItems[len(batch)-1]).ExecContext(ctx, args...); err != nil {
			return unavailable(err)
		}
		items = items[len(batch):]
	}
	return nil
}

func (s sqliteGenerations) Create(ctx context.Context, g NewGeneration) (Created, error) {
	var c Created
	err := s.inTx(ctx, func(ctx context.Context, tx *sql.Tx) error {
		p := running(g)
		if g.Thread != nil {
			var err error
			if p, err = sqlitePlace(ctx, tx, g); err != nil {
				return err
			}
		}
		n := int64(len(g.Events))
		now := g.Now.UnixMilli()
		res, err := s.in(ctx, tx, qCreate).ExecContext(ctx,
			g.Tenant, g.ID, p.owner, p.epoch, p.expires.UnixMilli(), orEmpty(g.Checkpoint), n, n, now, now,
			g.Origin.StartedBy, g.Origin.EndUser, g.Origin.Provider, g.Origin.Model, g.Origin.TraceID, p.thread, p.base, p.queuePos)
		if err != nil {
			return unavailable(err)
		}
		if n, err := res.RowsAffected(); err != nil {
			return unavailable(err)
		} else if n != 1 {
			return generationExists(g.ID)
		}
		if err := s.putAgent(ctx, tx, g.Tenant, g.ID, g.Agent); err != nil {
			return err
		}
		if err := s.insertItems(ctx, tx, g.Tenant, g.ID, g.Items); err != nil {
			return err
		}
		if g.Thread != nil {
			if err := sqliteInsertInput(ctx, tx, g.Tenant, g.ID, g.Thread.KeepInput); err != nil {
				return err
			}
		}
		c = p.created()
		return s.insertEvents(ctx, tx, g.Tenant, g.ID, 1, g.Events)
	})
	if err != nil {
		return Created{}, err
	}
	return c, nil
}

func (s sqliteGenerations) Acquire(ctx context.Context, tenant, id, owner string, now, expires time.Time) (Generation, error) {
	g, err := scanSQLiteGeneration(s.db.QueryRowContext(ctx, `
		UPDATE generations SET owner = ?, epoch = epoch + 1, lease_expires = ?
		WHERE tenant = ? AND id = ? AND state IN ('running', 'waiting', 'paused') AND queue_pos IS NULL
			AND (owner = '' OR lease_expires <= ?)
		RETURNING `+sqliteGenerationCols,
		owner, expires.UnixMilli(), tenant, id, now.UnixMilli()))
	if errors.Is(err, sql.ErrNoRows) {
		var state string
		var queued bool
		err := s.db.QueryRowContext(ctx, `SELECT state, queue_pos IS NOT NULL FROM generations WHERE tenant = ? AND id = ?`, tenant, id).Scan(&state, &queued)
		return Generation{}, whyNotAcquired(id, storedState(state, queued), err, sql.ErrNoRows, unavailable)
	}
	if err != nil {
		return Generation{}, unavailable(err)
	}
	return g, nil
}

// fenced is the outcome of a write under a lease: Conflict if it matched
// no row.
func fenced(res sql.Result, err error, id string) error {
	if err != nil {
		return unavailable(err)
	}
	if n, err := res.RowsAffected(); err != nil {
		return unavailable(err)
	} else if n != 1 {
		return leaseLost(id)
	}
	return nil
}

func (s sqliteGenerations) Renew(ctx context.Context, tenant, id string, epoch int64, expires time.Time) error {
	res, err := s.stmts[qRenew].ExecContext(ctx, expires.UnixMilli(), tenant, id, epoch)
	return fenced(res, err, id)
}

func (s sqliteGenerations) Release(ctx context.Context, tenant, id string, epoch int64, now time.Time) error {
	res, err := s.db.ExecContext(ctx, `
		UPDATE generations SET owner = '', lease_expires = ?
		WHERE tenant = ? AND id = ? AND epoch = ? AND owner <> ''`,
		now.UnixMilli(), tenant, id, epoch)
	return fenced(res, err, id)
}

func (s sqliteGenerations) Checkpoint(ctx context.Context, tenant, id string, epoch int64, c Checkpoint) (int64, error) {
	if err := checkCheckpoint(c); err != nil {
		return 0, err
	}
	var last int64
	events := append(slices.Clip(c.Events), c.After...)
	err := s.inTx(ctx, func(ctx context.Context, tx *sql.Tx) error {
		n, covered, skip := int64(len(events)), int64(len(c.Events)), skipTo(events)
		data := orNull(c.Data)
		err := s.in(ctx, tx, qCheckpointSameState).QueryRowContext(ctx,
			data, skip, n, data, skip, covered, c.Now.UnixMilli(), tenant, id, epoch, string(c.State)).Scan(&last)
		if errors.Is(err, sql.ErrNoRows) {
			// Another state, or the lease lost.
			err = s.in(ctx, tx, qCheckpoint).QueryRowContext(ctx,
				string(c.State), data, skip, n, data, skip, covered, c.Now.UnixMilli(), tenant, id, epoch).Scan(&last)
		}
		if errors.Is(err, sql.ErrNoRows) {
			return leaseLost(id)
		}
		if err != nil {
			return unavailable(err)
		}
		if err := s.putAgent(ctx, tx, tenant, id, c.Agent); err != nil {
			return err
		}
		if err := s.insertItems(ctx, tx, tenant, id, c.Items); err != nil {
			return err
		}
		if c.ReplacePending {
			if err := s.replacePending(ctx, tx, tenant, id, c.Pending); err != nil {
				return err
			}
		}
		return s.insertEvents(ctx, tx, tenant, id, last-n+1, events)
	})
	return last, err
}

func (s sqliteGenerations) Finish(ctx context.Context, tenant, id string, epoch int64, o Outcome) (int64, error) {
	if err := checkFinished(o.State); err != nil {
		return 0, err
	}
	var last int64
	err := s.inTx(ctx, func(ctx context.Context, tx *sql.Tx) error {
		n := int64(len(o.Events))
		now := o.Now.UnixMilli()
		var thread string
		err := s.in(ctx, tx, qFinish).QueryRowContext(ctx,
			string(o.State), orEmpty(o.Result), now, skipTo(o.Events), n, now, now, tenant, id, epoch).Scan(&last, &thread)
		if errors.Is(err, sql.ErrNoRows) {
			// A retry of a Finish that committed finds it done.
			var state string
			var was int64
			err := tx.QueryRowContext(ctx, `SELECT state, epoch, last_seq FROM generations WHERE tenant = ? AND id = ?`,
				tenant, id).Scan(&state, &was, &last)
			if err == nil && was == epoch && State(state) == o.State {
				return nil
			}
			if err != nil && !errors.Is(err, sql.ErrNoRows) {
				return unavailable(err)
			}
			return leaseLost(id)
		}
		if err != nil {
			return unavailable(err)
		}
		if err := s.insertItems(ctx, tx, tenant, id, o.Items); err != nil {
			return err
		}
		if err := s.dropLive(ctx, tx, tenant, id); err != nil {
			return err
		}
		if err := s.releaseThread(ctx, tx, tenant, thread, id, o.Thread, o.Now); err != nil {
			return err
		}
		return s.insertEvents(ctx, tx, tenant, id, last-n+1, o.Events)
	})
	return last, err
}

func (s sqliteGenerations) Get(ctx context.Context, tenant, id string) (Generation, error) {
	g, err := scanSQLiteGeneration(s.stmts[qGet].QueryRowContext(ctx, tenant, id))
	if errors.Is(err, sql.ErrNoRows) {
		return Generation{}, noGeneration(id)
	}
	if err != nil {
		return Generation{}, unavailable(err)
	}
	return g, nil
}

func (s sqliteGenerations) List(ctx context.Context, tenant string, o ListOptions) ([]Generation, string, error) {
	if err := checkListStates(o.States); err != nil {
		return nil, "", err
	}
	pos, after, err := parseListToken(o)
	if err != nil {
		return nil, "", err
	}
	size := pageSize(o.PageSize)
	args := []any{tenant}
	q := `SELECT ` + sqliteSummaryCols + ` FROM generations WHERE tenant = ?` + listConditions(o, pos, after, func(v any) string {
		args = append(args, v)
		return "?"
	}, func(ms int64) any { return ms })
	q += ` ORDER BY created_at DESC, id DESC LIMIT ?`
	args = append(args, size+1)
	rows, err := s.db.QueryContext(ctx, q, args...)
	if err != nil {
		return nil, "", unavailable(err)
	}
	defer rows.Close()
	var page []Generation
	for rows.Next() {
		g, err := scanSQLiteGeneration(rows)
		if err != nil {
			return nil, "", unavailable(err)
		}
		page = append(page, g)
	}
	if err := rows.Err(); err != nil {
		return nil, "", unavailable(err)
	}
	page, next := nextListPage(page, size, o)
	return page, next, nil
}

// Adopt takes the generations of dead owners while it holds their files
// locked, shared: a replica attending again under one of their ids cannot
// write one meanwhile.
func (s sqliteGenerations) Adopt(ctx context.Context, owner string, now, expires time.Time, limit int) ([]Generation, error) {
	if limit <= 0 {
		return nil, nil
	}
	dead, err := s.deadOwners(ctx, owner)
	if err != nil {
		return nil, err
	}
	defer dead.release()
	rows, err := s.sqliteAdopt(ctx, owner, now, expires, limit, dead)
	if err != nil {
		return nil, unavailable(err)
	}
	defer rows.Close()
	var out []Generation
	for rows.Next() {
		g, err := scanSQLiteGeneration(rows)
		if err != nil {
			return nil, unavailable(err)
		}
		out = append(out, g)
	}
	if err := rows.Err(); err != nil {
		return nil, unavailable(err)
	}
	if len(dead) > 0 && len(out) < limit {
		s.forgetDead(ctx, dead)
	}
	return out, nil
}

func (s sqliteGenerations) Append(ctx context.Context, tenant, id string, epoch int64, events []Event) (int64, error) {
	var last int64
	if len(events) == 0 {
		err := s.db.QueryRowContext(ctx, `SELECT last_seq FROM generations WHERE tenant = ? AND id = ? AND epoch = ? AND owner <> ''`,
			tenant, id, epoch).Scan(&last)
		if errors.Is(err, sql.ErrNoRows) {
			return 0, leaseLost(id)
		}
		if err != nil {
			return 0, unavailable(err)
		}
		return last, nil
	}
	err := s.inTx(ctx, func(ctx context.Context, tx *sql.Tx) error {
		n := int64(len(events))
		err := s.in(ctx, tx, qAppend).QueryRowContext(ctx, skipTo(events), n, tenant, id, epoch).Scan(&last)
		if errors.Is(err, sql.ErrNoRows) {
			return leaseLost(id)
		}
		if err != nil {
			return unavailable(err)
		}
		return s.insertEvents(ctx, tx, tenant, id, last-n+1, events)
	})
	return last, err
}

func (s sqliteGenerations) Read(ctx context.Context, tenant, id string, after int64, limit int) ([]Event, error) {
	rows, err := s.stmts[qRead].QueryContext(ctx, tenant, id, after, readLimit(limit))
	if err != nil {
		return nil, unavailable(err)
	}
	defer rows.Close()
	var out []Event
	for rows.Next() {
		var e Event
		if err := rows.Scan(&e.Seq, &e.Kind, &e.Data); err != nil {
			return nil, unavailable(err)
		}
		out = append(out, e)
	}
	if err := rows.Err(); err != nil {
		return nil, unavailable(err)
	}
	if len(out) == 0 {
		return nil, s.exists(ctx, tenant, id)
	}
	return out, nil
}

func (s sqliteGenerations) Agent(ctx context.Context, tenant, id string) ([]byte, error) {
	var agent []byte
	err := s.stmts[qAgent].QueryRowContext(ctx, tenant, id).Scan(&agent)
	if errors.Is(err, sql.ErrNoRows) {
		return nil, s.exists(ctx, tenant, id)
	}
	if err != nil {
		return nil, unavailable(err)
	}
	return agent, nil
}

func (s sqliteGenerations) Items(ctx context.Context, tenant, id string, after int64, limit int) ([]Item, error) {
	rows, err := s.stmts[qItems].QueryContext(ctx, tenant, id, after, readLimit(limit))
	if err != nil {
		return nil, unavailable(err)
	}
	defer rows.Close()
	var out []Item
	for rows.Next() {
		var it Item
		if err := rows.Scan(&it.N, &it.Data); err != nil {
			return nil, unavailable(err)
		}
		out = append(out, it)
	}
	if err := rows.Err(); err != nil {
		return nil, unavailable(err)
	}
	if len(out) == 0 {
		return nil, s.exists(ctx, tenant, id)
	}
	return out, nil
}

// exists is nil if tenant has generation id, NotFound if not.
func (s sqliteGenerations) exists(ctx context.Context, tenant, id string) error {
	var one int
	err := s.stmts[qExists].QueryRowContext(ctx, tenant, id).Scan(&one)
	if errors.Is(err, sql.ErrNoRows) {
		return noGeneration(id)
	}
	if err != nil {
		return unavailable(err)
	}
	return nil
}

func (s sqliteGenerations) ExpirePaused(ctx context.Context, now time.Time, result []byte) (int, error) {
	// One transaction, holding the write lock from its start, so an
	// Acquire comes wholly before it (and holds a lease, which it
	// leaves) or after it (and finds the generation finished). A claimed
	// checkpoint is a resume's, on its way to Acquire; the store's
	// sweeper removes it once the claim is a day stale. The agents of
	// the generations it ends go with their end, as Finish's do, and so
	// do their pending requests.
	t := now.UnixMilli()
	var ended [][3]string
	err := s.inTx(ctx, func(ctx context.Context, tx *sql.Tx) error {
		ended = ended[:0]
		rows, err := tx.QueryContext(ctx, `
			UPDATE generations SET state = 'cancelled', result = ?, checkpoint = x'', updated_at = ?, finished_at = ?
			WHERE state = 'paused' AND owner = ''
				AND NOT EXISTS (SELECT 1 FROM paused_generations p
					WHERE p.tenant = generations.tenant AND p.id = generations.id
						AND (p.expires_at > ? OR p.claimed_at IS NOT NULL))
			RETURNING tenant, id, thread_id`,
			orEmpty(result), t, t, t)
		if err != nil {
			return unavailable(err)
		}
		if ended, err = scanEnded(rows); err != nil {
			return unavailable(err)
		}
		for _, k := range ended {
			if err := s.dropLive(ctx, tx, k[0], k[1]); err != nil {
				return err
			}
			if err := s.releaseExpired(ctx, tx, k[0], k[2], k[1], now); err != nil {
				return err
			}
		}
		return nil
	})
	return len(ended), err
}

// scanEnded reads rows of tenant, id and thread, and closes them.
func scanEnded(rows *sql.Rows) ([][3]string, error) {
	defer rows.Close()
	var out [][3]string
	for rows.Next() {
		var k [3]string
		if err := rows.Scan(&k[0], &k[1], &k[2]); err != nil {
			return nil, err
		}
		out = append(out, k)
	}
	return out, rows.Err()
}

func (s sqliteGenerations) Cancel(ctx context.Context, tenant, id, reason string, result []byte, now time.Time) (Generation, error) {
	var g Generation
	err := s.inTx(ctx, func(ctx context.Context, tx *sql.Tx) error {
		t := now.UnixMilli()
		var err error
		g, err = scanSQLiteGeneration(tx.QueryRowContext(ctx, `
			UPDATE generations SET state = 'cancelled', result = ?, checkpoint = x'', owner = '', lease_expires = ?,
				queue_pos = NULL, updated_at = ?, finished_at = ?
			WHERE tenant = ? AND id = ? AND queue_pos IS NOT NULL
			RETURNING `+sqliteSummaryCols, orEmpty(result), t, t, t, tenant, id))
		if err == nil {
			return s.dropLive(ctx, tx, tenant, id)
		}
		if !errors.Is(err, sql.ErrNoRows) {
			return unavailable(err)
		}
		g, err = scanSQLiteGeneration(tx.QueryRowContext(ctx, `
			UPDATE generations SET cancel_reason = coalesce(cancel_reason, ?)
			WHERE tenant = ? AND id = ? AND finished_at IS NULL
			RETURNING `+sqliteSummaryCols, reason, tenant, id))
		if errors.Is(err, sql.ErrNoRows) {
			return sqliteNotCancelled(ctx, tx, tenant, id)
		}
		if err != nil {
			return unavailable(err)
		}
		return nil
	})
	return g, err
}

// sqliteNotCancelled says why Cancel found no live generation id: it has
// finished, or there is none.
func sqliteNotCancelled(ctx context.Context, tx *sql.Tx, tenant, id string) error {
	var one int
	err := tx.QueryRowContext(ctx, `SELECT 1 FROM generations WHERE tenant = ? AND id = ?`, tenant, id).Scan(&one)
	switch {
	case errors.Is(err, sql.ErrNoRows):
		return noGeneration(id)
	case err != nil:
		return unavailable(err)
	}
	return generationEnded(id)
}

func (s sqliteGenerations) Sweep(ctx context.Context, before time.Time) (int, error) {
	// The events and items go with their generation (ON DELETE CASCADE).
	res, err := s.db.ExecContext(ctx, `DELETE FROM generations WHERE finished_at IS NOT NULL AND finished_at <= ?`, before.UnixMilli())
	return affected(res, err)
}

// affected is how many rows a statement changed.
func affected(res sql.Result, err error) (int, error) {
	if err != nil {
		return 0, unavailable(err)
	}
	n, err := res.RowsAffected()
	if err != nil {
		return 0, unavailable(err)
	}
	return int(n), nil
}
