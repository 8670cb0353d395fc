package store

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
)

// pgGenerations is the Generations of a PostgreSQL database. Each
// operation is one statement (data-modifying CTEs write a generation and
// its events together), so one round trip and one transaction. A write
// under a lease updates the generation's row first and so holds its lock
// until it commits: writes to one generation are serialized, and its
// events commit in sequence order.
type pgGenerations struct {
	pool *pgxpool.Pool
	live *attendances // the replicas attending through this store
}

// Generations returns the store's durable generations.
func (p *Postgres) Generations() Generations { return pgGenerations{p.pool, p.live} }

var (
	pgGenerationCols = generationColumns("", "")
	pgSummaryCols    = generationColumns("", "NULL::bytea")
	// For Adopt's UPDATE ... FROM, whose columns are ambiguous unqualified.
	pgAdoptedCols = generationColumns("g.", "")
)

func scanPgGeneration(row pgx.Row) (Generation, error) {
	var g Generation
	var state string
	var finished *time.Time
	var queuePos *int64
	err := row.Scan(&g.Tenant, &g.ID, &state, &g.Lease.Owner, &g.Lease.Epoch, &g.Lease.Expires, &g.Version, &g.Checkpoint,
		&g.CheckpointSeq, &g.LastSeq, &g.Result, &g.CreatedAt, &g.UpdatedAt, &finished,
		&g.Thread, &g.ThreadBase, &queuePos, &g.Interrupted,
		&g.Origin.StartedBy, &g.Origin.EndUser, &g.Origin.Provider, &g.Origin.Model, &g.Origin.TraceID)
	if err != nil {
		return Generation{}, err
	}
	g.State = storedState(state, queuePos != nil)
	if g.State == Queued {
		g.Lease.Expires = time.Time{}
	}
	if finished != nil {
		g.FinishedAt = *finished
	}
	return g, nil
}

func collectPgGeneration(row pgx.CollectableRow) (Generation, error) { return scanPgGeneration(row) }

// pgEvents is the CTE that logs a write's events, whose kinds and data
// are the parameters kinds and data, after the generation's row that CTE g
// returned ($1, $2), whose last_seq counts them (parameter n).
func pgEvents(n, kinds, data string) string {
	return `e AS (
		INSERT INTO generation_events (tenant, generation_id, seq, kind, data)
		SELECT $1, $2, g.last_seq - ` + n + ` + e.o, e.kind, e.data
		FROM g, unnest(` + kinds + `::text[], ` + data + `::bytea[]) WITH ORDINALITY AS e(kind, data, o)
	)`
}

// pgItems is the CTE that adds a write's items, whose numbers and data are
// the parameters ns and data, once CTE g has returned the generation's row
// (nothing is added when the write is refused); an item there already (a
// retried write) is left.
func pgItems(ns, data string) string {
	return `i AS (
		INSERT INTO generation_items (tenant, generation_id, n, data)
		SELECT $1, $2, i.n, i.data
		FROM g, unnest(` + ns + `::bigint[], ` + data + `::bytea[]) AS i(n, data)
		ON CONFLICT (tenant, generation_id, n) DO NOTHING
	)`
}

// pgAgent is the CTE that writes a generation's agent, the parameter
// agent (NULL: none to write), once CTE g has returned its row.
func pgAgent(agent string) string {
	return `a AS (
		INSERT INTO generation_agents (tenant, generation_id, data)
		SELECT $1, $2, ` + agent + `::bytea FROM g WHERE ` + agent + `::bytea IS NOT NULL
		ON CONFLICT (tenant, generation_id) DO UPDATE SET data = excluded.data
	)`
}

// Create is one statement for a generation on no thread. One on a thread
// is a transaction that locks the thread's row first, as every write that
// changes which generation holds a thread does (Finish, ExpirePaused,
// DeleteThread), before the row of any generation: a start that
// interrupts the generation holding the thread then writes that row too.
func (p pgGenerations) Create(ctx context.Context, g NewGeneration) (Created, error) {
	if g.Thread == nil {
		pl := running(g)
		if err := pgCreate(ctx, p.pool, g, pl); err != nil {
			return Created{}, err
		}
		return pl.created(), nil
	}
	var c Created
	err := pgx.BeginFunc(ctx, p.pool, func(tx pgx.Tx) error {
		pl, err := pgPlace(ctx, tx, g)
		if err != nil {
			return err
		}
		c = pl.created()
		if err := pgCreate(ctx, tx, g, pl); err != nil || len(g.Thread.KeepInput) == 0 {
			return err
		}
		ids, data := threadItemColumns(&ThreadAppend{Items: g.Thread.KeepInput})
		_, err = tx.Exec(ctx, `
			INSERT INTO thread_inputs (tenant, generation_id, n, item_id, data)
			SELECT $1, $2, i.o - 1, i.item_id, i.data FROM unnest($3::text[], $4::bytea[]) WITH ORDINALITY AS i(item_id, data, o)`,
			g.Tenant, g.ID, ids, data)
		return err
	})
	if err != nil {
		return Created{}, classifyFault(err)
	}
	return c, nil
}

// pgCreate records g, placed at pl, on q.
func pgCreate(ctx context.Context, q pgRower, g NewGeneration, pl placement) error {
	kinds, data := eventColumns(g.Events)
	ns, items := itemColumns(g.Items)
	var n int
	err := q.QueryRow(ctx, `
		WITH g AS (
			INSERT INTO generations (tenant, id, state, owner, epoch, lease_expires, version, checkpoint,
				checkpoint_seq, last_seq, result, created_at, updated_at, finished_at, started_by, end_user, provider, model,
				thread_id, thread_base, queue_pos, trace_id)
			VALUES ($1, $2, 'running', $3, $17, $4, 1, $5, $6, $6, NULL, $7, $7, NULL, $13, $14, $15, $16, $18, $19, $20, $21)
			ON CONFLICT (tenant, id) DO NOTHING
			RETURNING last_seq
		), `+pgEvents("$6", "$8", "$9")+`, `+pgItems("$10", "$11")+`, `+pgAgent("$12")+`
		SELECT count(*) FROM g`,
		g.Tenant, g.ID, pl.owner, ms(pl.expires), orEmpty(g.Checkpoint), int64(len(g.Events)), ms(g.Now), kinds, data, ns, items, orNull(g.Agent),
		g.Origin.StartedBy, g.Origin.EndUser, g.Origin.Provider, g.Origin.Model, pl.epoch, pl.thread, pl.base, pl.queuePos, g.Origin.TraceID).Scan(&n)
	if err != nil {
		return classify(err)
	}
	if n != 1 {
		return generationExists(g.ID)
	}
	return nil
}

func (p pgGenerations) Acquire(ctx context.Context, tenant, id, owner string, now, expires time.Time) (Generation, error) {
	g, err := scanPgGeneration(p.pool.QueryRow(ctx, `
		UPDATE generations SET owner = $3, epoch = epoch + 1, lease_expires = $5
		WHERE tenant = $1 AND id = $2 AND state IN ('running', 'waiting', 'paused') AND queue_pos IS NULL
			AND (owner = '' OR lease_expires <= $4)
		RETURNING `+pgGenerationCols,
		tenant, id, owner, ms(now), ms(expires)))
	if errors.Is(err, pgx.ErrNoRows) {
		var state string
		var queued bool
		err := p.pool.QueryRow(ctx, `SELECT state, queue_pos IS NOT NULL FROM generations WHERE tenant = $1 AND id = $2`, tenant, id).Scan(&state, &queued)
		return Generation{}, whyNotAcquired(id, storedState(state, queued), err, pgx.ErrNoRows, func(err error) error { return classify(err) })
	}
	if err != nil {
		return Generation{}, classify(err)
	}
	return g, nil
}

func (p pgGenerations) Renew(ctx context.Context, tenant, id string, epoch int64, expires time.Time) error {
	tag, err := p.pool.Exec(ctx, `
		UPDATE generations SET lease_expires = $4
		WHERE tenant = $1 AND id = $2 AND epoch = $3 AND owner <> ''`,
		tenant, id, epoch, ms(expires))
	if err != nil {
		return classify(err)
	}
	if tag.RowsAffected() != 1 {
		return leaseLost(id)
	}
	return nil
}

func (p pgGenerations) Release(ctx context.Context, tenant, id string, epoch int64, now time.Time) error {
	tag, err := p.pool.Exec(ctx, `
		UPDATE generations SET owner = '', lease_expires = $4
		WHERE tenant = $1 AND id = $2 AND epoch = $3 AND owner <> ''`,
		tenant, id, epoch, ms(now))
	if err != nil {
		return classify(err)
	}
	if tag.RowsAffected() != 1 {
		return leaseLost(id)
	}
	return nil
}

func (p pgGenerations) Checkpoint(ctx context.Context, tenant, id string, epoch int64, c Checkpoint) (int64, error) {
	if err := checkCheckpoint(c); err != nil {
		return 0, err
	}
	if !c.ReplacePending {
		return pgCheckpoint(ctx, p.pool, tenant, id, epoch, c)
	}
	// The pending requests are replaced in the same transaction, after the
	// generation's row: its lock, which the checkpoint holds, serializes
	// the writes of one generation.
	var last int64
	err := pgx.BeginFunc(ctx, p.pool, func(tx pgx.Tx) error {
		var err error
		if last, err = pgCheckpoint(ctx, tx, tenant, id, epoch, c); err != nil {
			return err
		}
		return pgReplacePending(ctx, tx, tenant, id, c.Pending)
	})
	if err != nil {
		return 0, classifyFault(err)
	}
	return last, nil
}

// pgRower runs a statement that returns a row: the pool, or a
// transaction.
type pgRower interface {
	QueryRow(ctx context.Context, sql string, args ...any) pgx.Row
}

// pgCheckpoint is Checkpoint's statement, on q.
func pgCheckpoint(ctx context.Context, q pgRower, tenant, id string, epoch int64, c Checkpoint) (int64, error) {
	events := append(slices.Clip(c.Events), c.After...)
	kinds, data := eventColumns(events)
	ns, items := itemColumns(c.Items)
	var last int64
	err := q.QueryRow(ctx, `
		WITH g AS (
			UPDATE generations SET state = $4, checkpoint = COALESCE($5::bytea, checkpoint), version = version + 1,
				last_seq = GREATEST(last_seq, $13) + $6,
				checkpoint_seq = CASE WHEN $5::bytea IS NULL THEN checkpoint_seq ELSE GREATEST(last_seq, $13) + $10 END, updated_at = $7
			WHERE tenant = $1 AND id = $2 AND epoch = $3 AND owner <> ''
			RETURNING last_seq
		), `+pgEvents("$6", "$8", "$9")+`, `+pgItems("$11", "$12")+`, `+pgAgent("$14")+`
		SELECT last_seq FROM g`,
		tenant, id, epoch, string(c.State), orNull(c.Data), int64(len(events)), ms(c.Now), kinds, data, int64(len(c.Events)), ns, items, skipTo(events), orNull(c.Agent)).Scan(&last)
	if errors.Is(err, pgx.ErrNoRows) {
		return 0, leaseLost(id)
	}
	if err != nil {
		return 0, classify(err)
	}
	return last, nil
}

// pgLockThreadOf locks the thread of the generation $2 of the tenant $1,
// if it has one: the first statement of every write that may change the
// thread's queue or which generation holds it.
const pgLockThreadOf = `
	SELECT 1 FROM threads WHERE tenant = $1
		AND id = (SELECT thread_id FROM generations WHERE tenant = $1 AND id = $2 AND thread_id <> '')
	FOR UPDATE`

// Finish is one batch of statements, one round trip and one
// (implicit) transaction: it locks the generation's thread first, if it
// has one, then ends the generation, then gives up the thread if the
// generation held it. Each statement reads a snapshot of its own, taken
// once the ones before it have their locks: the last sees every start
// queued on the thread before the lock.
func (p pgGenerations) Finish(ctx context.Context, tenant, id string, epoch int64, o Outcome) (int64, error) {
	if err := checkFinished(o.State); err != nil {
		return 0, err
	}
	kinds, data := eventColumns(o.Events)
	ns, items := itemColumns(o.Items)
	var last int64
	ended := true
	b := &pgx.Batch{}
	b.Queue(pgLockThreadOf, tenant, id)
	b.Queue(`
		WITH g AS (
			UPDATE generations SET state = $4, result = $5, checkpoint = '', owner = '', lease_expires = $7,
				last_seq = GREATEST(last_seq, $12) + $6, updated_at = $7, finished_at = $7
			WHERE tenant = $1 AND id = $2 AND epoch = $3 AND owner <> ''
			RETURNING last_seq
		), `+pgEvents("$6", "$8", "$9")+`, `+pgItems("$10", "$11")+`, a AS (
			DELETE FROM generation_agents WHERE tenant = $1 AND generation_id = $2 AND EXISTS (SELECT 1 FROM g)
		), p AS (
			DELETE FROM pending_requests WHERE tenant = $1 AND generation_id = $2 AND EXISTS (SELECT 1 FROM g)
		)
		SELECT last_seq FROM g`,
		tenant, id, epoch, string(o.State), orEmpty(o.Result), int64(len(o.Events)), ms(o.Now), kinds, data, ns, items, skipTo(o.Events)).
		QueryRow(func(row pgx.Row) error {
			err := row.Scan(&last)
			if errors.Is(err, pgx.ErrNoRows) {
				ended = false
				return nil
			}
			return err
		})
	ids, texts := threadItemColumns(o.Thread)
	b.Queue(pgReleaseOne, ms(o.Now), ids, texts, int64(len(ids)), tenant, id)
	err := p.pool.SendBatch(ctx, b).Close()
	if err == nil && !ended {
		// A retry of a Finish that committed finds it done.
		var state string
		var was int64
		err := p.pool.QueryRow(ctx, `SELECT state, epoch, last_seq FROM generations WHERE tenant = $1 AND id = $2`,
			tenant, id).Scan(&state, &was, &last)
		if err == nil && was == epoch && State(state) == o.State {
			return last, nil
		}
		if err != nil && !errors.Is(err, pgx.ErrNoRows) {
			return 0, classify(err)
		}
		return 0, leaseLost(id)
	}
	if err != nil {
		return 0, classify(err)
	}
	return last, nil
}

func (p pgGenerations) Get(ctx context.Context, tenant, id string) (Generation, error) {
	g, err := scanPgGeneration(p.pool.QueryRow(ctx,
		`SELECT `+pgGenerationCols+` FROM generations WHERE tenant = $1 AND id = $2`, tenant, id))
	if errors.Is(err, pgx.ErrNoRows) {
		return Generation{}, noGeneration(id)
	}
	if err != nil {
		return Generation{}, classify(err)
	}
	return g, nil
}

func (p pgGenerations) List(ctx context.Context, tenant string, o ListOptions) ([]Generation, string, error) {
	if err := checkListStates(o.States); err != nil {
		return nil, "", err
	}
	pos, after, err := parseListToken(o)
	if err != nil {
		return nil, "", err
	}
	size := pageSize(o.PageSize)
	// The conditions are in the statement only when they apply, so that
	// each of its (few) forms has a plan of its own that seeks the page's
	// start in the index rather than filtering the pages before it.
	args := []any{tenant}
	q := `SELECT ` + pgSummaryCols + ` FROM generations WHERE tenant = $1` + listConditions(o, pos, after, func(v any) string {
		args = append(args, v)
		return fmt.Sprintf("$%d", len(args))
	}, func(ms int64) any { return time.UnixMilli(ms) })
	args = append(args, size+1)
	q += fmt.Sprintf(` ORDER BY created_at DESC, id DESC LIMIT $%d`, len(args))
	rows, err := p.pool.Query(ctx, q, args...)
	if err != nil {
		return nil, "", classify(err)
	}
	page, err := pgx.CollectRows(rows, collectPgGeneration)
	if err != nil {
		return nil, "", classify(err)
	}
	page, next := nextListPage(page, size, o)
	return page, next, nil
}

// Adopt picks its generations with FOR UPDATE SKIP LOCKED: adopters
// running at once lock disjoint rows rather than queue behind each other,
// and a row that another adopter took meanwhile no longer matches (its
// lease is fresh) when this one comes to lock it. A generation of a dead
// owner is taken only while its owner's lock can be held, shared, until
// the adoption commits: a replica attending again under that id cannot
// write one meanwhile.
func (p pgGenerations) Adopt(ctx context.Context, owner string, now, expires time.Time, limit int) ([]Generation, error) {
	if limit <= 0 {
		return nil, nil
	}
	dead, err := p.deadOwners(ctx, owner)
	if err != nil {
		return nil, err
	}
	q, args := pgAdoptLapsed, []any{owner, ms(now), ms(expires), limit}
	if len(dead) > 0 {
		q, args = pgAdoptLapsedOrDead, append(args, dead, livenessClass)
	}
	rows, err := p.pool.Query(ctx, q, args...)
	if err != nil {
		return nil, classify(err)
	}
	out, err := pgx.CollectRows(rows, collectPgGeneration)
	if err != nil {
		return nil, classify(err)
	}
	if len(dead) > 0 && len(out) < limit {
		p.forgetDead(ctx, dead)
	}
	return out, nil
}

// Adopt's statements: of the generations whose leases lapsed, or also of
// those whose owners ($5) are dead.
var (
	pgAdoptLapsed       = pgAdopt(`lease_expires <= $2`)
	pgAdoptLapsedOrDead = pgAdopt(`(lease_expires <= $2 OR (owner = ANY($5) AND pg_try_advisory_xact_lock_shared($6, hashtext(owner))))`)
)

func pgAdopt(due string) string {
	return `
		WITH c AS (
			SELECT tenant, id FROM generations
			WHERE state IN ('running', 'waiting') AND ` + due + `
			ORDER BY lease_expires LIMIT $4
			FOR UPDATE SKIP LOCKED
		)
		UPDATE generations g SET owner = $1, epoch = g.epoch + 1, lease_expires = $3
		FROM c WHERE g.tenant = c.tenant AND g.id = c.id
		RETURNING ` + pgAdoptedCols
}

func (p pgGenerations) Append(ctx context.Context, tenant, id string, epoch int64, events []Event) (int64, error) {
	kinds, data := eventColumns(events)
	var last int64
	err := p.pool.QueryRow(ctx, `
		WITH g AS (
			UPDATE generations SET last_seq = GREATEST(last_seq, $7) + $4
			WHERE tenant = $1 AND id = $2 AND epoch = $3 AND owner <> ''
			RETURNING last_seq
		), `+pgEvents("$4", "$5", "$6")+`
		SELECT last_seq FROM g`,
		tenant, id, epoch, int64(len(events)), kinds, data, skipTo(events)).Scan(&last)
	if errors.Is(err, pgx.ErrNoRows) {
		return 0, leaseLost(id)
	}
	if err != nil {
		return 0, classify(err)
	}
	return last, nil
}

func (p pgGenerations) Read(ctx context.Context, tenant, id string, after int64, limit int) ([]Event, error) {
	return pgPage(ctx, p.pool, noGeneration(id), `
		SELECT e.seq, e.kind, e.data FROM generations g
		LEFT JOIN LATERAL (
			SELECT seq, kind, data FROM generation_events
			WHERE tenant = g.tenant AND generation_id = g.id AND seq > $3
			ORDER BY seq LIMIT $4
		) e ON true
		WHERE g.tenant = $1 AND g.id = $2
		ORDER BY e.seq`, []any{tenant, id, after, readLimit(limit)},
		func(rows pgx.Rows) (Event, bool, error) {
			var seq *int64
			var kind *string
			var data []byte
			if err := rows.Scan(&seq, &kind, &data); err != nil || seq == nil {
				return Event{}, false, err
			}
			return Event{Seq: *seq, Kind: *kind, Data: data}, true, nil
		})
}

// pgPage runs q, a page of a generation's (or a thread's) rows in one
// statement, one snapshot: the rows, and whether the generation exists,
// as a row of NULLs when it has none in the page, for which scan reports
// false. One that does not exist is missing.
func pgPage[T any](ctx context.Context, pool *pgxpool.Pool, missing error, q string, args []any, scan func(pgx.Rows) (T, bool, error)) ([]T, error) {
	rows, err := pool.Query(ctx, q, args...)
	if err != nil {
		return nil, classify(err)
	}
	defer rows.Close()
	found := false
	var out []T
	for rows.Next() {
		found = true
		v, ok, err := scan(rows)
		if err != nil {
			return nil, classify(err)
		}
		if !ok {
			break
		}
		out = append(out, v)
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		return nil, classify(err)
	}
	if !found {
		return nil, missing
	}
	return out, nil
}

func (p pgGenerations) Agent(ctx context.Context, tenant, id string) ([]byte, error) {
	var found bool
	var agent []byte
	err := p.pool.QueryRow(ctx, `
		SELECT true, a.data FROM generations g
		LEFT JOIN generation_agents a ON a.tenant = g.tenant AND a.generation_id = g.id
		WHERE g.tenant = $1 AND g.id = $2`, tenant, id).Scan(&found, &agent)
	if errors.Is(err, pgx.ErrNoRows) {
		return nil, noGeneration(id)
	}
	if err != nil {
		return nil, classify(err)
	}
	return agent, nil
}

func (p pgGenerations) Items(ctx context.Context, tenant, id string, after int64, limit int) ([]Item, error) {
	return pgPage(ctx, p.pool, noGeneration(id), `
		SELECT i.n, i.data FROM generations g
		LEFT JOIN LATERAL (
			SELECT n, data FROM generation_items
			WHERE tenant = g.tenant AND generation_id = g.id AND n > $3
			ORDER BY n LIMIT $4
		) i ON true
		WHERE g.tenant = $1 AND g.id = $2
		ORDER BY i.n`, []any{tenant, id, after, readLimit(limit)},
		func(rows pgx.Rows) (Item, bool, error) {
			var n *int64
			var data []byte
			if err := rows.Scan(&n, &data); err != nil || n == nil {
				return Item{}, false, err
			}
			return Item{N: *n, Data: data}, true, nil
		})
}

func (p pgGenerations) ExpirePaused(ctx context.Context, now time.Time, result []byte) (int, error) {
	// Each row is updated under its lock: an Acquire that took it first
	// set an owner, and the recheck of the WHERE leaves it; an Acquire
	// that waited on the lock finds the generation finished. Likewise a
	// replica expiring at once ends none twice. A claimed checkpoint is a
	// resume's, on its way to Acquire; the store's sweeper removes it
	// once the claim is a day stale. The agents of the generations it
	// ends go with their end, as Finish's do, and so do their pending
	// requests. As in Finish, one batch locks the threads of those it is
	// to end first, in one order (expirers running at once wait for one
	// another rather than deadlock), then ends them, then gives up the
	// threads they held.
	var n int
	b := &pgx.Batch{}
	b.Queue(`
		SELECT 1 FROM threads th WHERE (th.tenant, th.id) IN (
			SELECT tenant, thread_id FROM generations WHERE `+pgExpiredPause+` AND thread_id <> '')
		ORDER BY th.tenant, th.id FOR UPDATE`, ms(now))
	b.Queue(`
		WITH e AS (
			UPDATE generations SET state = 'cancelled', result = $2, checkpoint = '', updated_at = $1, finished_at = $1
			WHERE `+pgExpiredPause+`
			RETURNING tenant, id
		), a AS (
			DELETE FROM generation_agents ga USING e WHERE ga.tenant = e.tenant AND ga.generation_id = e.id
		), p AS (
			DELETE FROM pending_requests pr USING e WHERE pr.tenant = e.tenant AND pr.generation_id = e.id
		)
		SELECT count(*) FROM e`,
		ms(now), orEmpty(result)).QueryRow(func(row pgx.Row) error { return row.Scan(&n) })
	b.Queue(pgReleaseEnded, ms(now))
	if err := p.pool.SendBatch(ctx, b).Close(); err != nil {
		return 0, classify(err)
	}
	return n, nil
}

// pgExpiredPause is the condition on a generation that ExpirePaused ends
// it by the time $1.
const pgExpiredPause = `state = 'paused' AND owner = ''
	AND NOT EXISTS (SELECT 1 FROM paused_generations pg
		WHERE pg.tenant = generations.tenant AND pg.id = generations.id
			AND (pg.expires_at > $1 OR pg.claimed_at IS NOT NULL))`

// Cancel is one batch, one (implicit) transaction: it locks the
// generation's thread first, as every write that changes a thread's queue
// does, then ends the generation if it is queued, or else marks it. Each
// statement reads a snapshot of its own, taken after the ones before it:
// the mark sees the end, and leaves the generation it ended.
func (p pgGenerations) Cancel(ctx context.Context, tenant, id, reason string, result []byte, now time.Time) (Generation, error) {
	var g Generation
	found := false
	keep := func(row pgx.Row) error {
		r, err := scanPgGeneration(row)
		if errors.Is(err, pgx.ErrNoRows) {
			return nil
		}
		g, found = r, err == nil
		return err
	}
	b := &pgx.Batch{}
	b.Queue(pgLockThreadOf, tenant, id)
	b.Queue(`
		WITH g AS (
			UPDATE generations SET state = 'cancelled', result = $3, checkpoint = '', owner = '', lease_expires = $4,
				queue_pos = NULL, updated_at = $4, finished_at = $4
			WHERE tenant = $1 AND id = $2 AND queue_pos IS NOT NULL
			RETURNING `+pgSummaryCols+`
		), a AS (
			DELETE FROM generation_agents WHERE tenant = $1 AND generation_id = $2 AND EXISTS (SELECT 1 FROM g)
		), p AS (
			DELETE FROM pending_requests WHERE tenant = $1 AND generation_id = $2 AND EXISTS (SELECT 1 FROM g)
		)
		SELECT * FROM g`, tenant, id, orEmpty(result), ms(now)).QueryRow(keep)
	b.Queue(`
		UPDATE generations SET cancel_reason = coalesce(cancel_reason, $3)
		WHERE tenant = $1 AND id = $2 AND finished_at IS NULL
		RETURNING `+pgSummaryCols, tenant, id, reason).QueryRow(keep)
	if err := p.pool.SendBatch(ctx, b).Close(); err != nil {
		return Generation{}, classify(err)
	}
	if found {
		return g, nil
	}
	if _, err := p.Get(ctx, tenant, id); err != nil {
		return Generation{}, err
	}
	return Generation{}, generationEnded(id)
}

func (p pgGenerations) Sweep(ctx context.Context, before time.Time) (int, error) {
	// The events and items go with their generation (ON DELETE CASCADE).
	tag, err := p.pool.Exec(ctx, `DELETE FROM generations WHERE finished_at IS NOT NULL AND finished_at <= $1`, ms(before))
	if err != nil {
		return 0, classify(err)
	}
	return int(tag.RowsAffected()), nil
}
