package store

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"sync"
	"syscall"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/agentd/agentd/internal/fault"
)

// Postgres is the Store of a PostgreSQL database, shared by every
// replica that opens it: for replicas on several machines.
type Postgres struct {
	pool *pgxpool.Pool
	live *attendances // the replicas attending through this store
	stop chan struct{}
	done chan struct{}
	once sync.Once
}

var _ Store = (*Postgres)(nil)

// migrationLock is the key of the advisory lock that migrating holds, a
// constant of agentd's own: of several replicas starting at once, one
// migrates and the others wait for it.
const migrationLock int64 = 0x3f1c2a9b5d7e4c11

// OpenPostgres connects to the database that dsn names (a postgres:// URL
// or key=value pairs, as libpq reads them; pgxpool's pool_* parameters
// size the pool), migrates its schema (see migrations/postgres) and
// sweeps expired records every sweepEvery (0: never). ctx bounds
// connecting and migrating. dsn is a secret: no error says it, nor any
// part of it.
func OpenPostgres(ctx context.Context, dsn string, sweepEvery time.Duration) (*Postgres, error) {
	cfg, err := pgxpool.ParseConfig(dsn)
	if err != nil {
		// The parser's error quotes the string it could not parse.
		return nil, fault.New(fault.Invalid, "store.dsn: not a PostgreSQL connection string (a postgres:// URL, or key=value pairs)")
	}
	pool, err := pgxpool.NewWithConfig(ctx, cfg)
	if err != nil {
		return nil, fault.New(fault.Invalid, "store.dsn: %s", safeText(err))
	}
	if err := migratePostgres(ctx, pool); err != nil {
		pool.Close()
		return nil, openError(err)
	}
	p := &Postgres{pool: pool, live: newAttendances(), stop: make(chan struct{}), done: make(chan struct{})}
	go p.sweep(sweepEvery)
	return p, nil
}

// openError is a failure to open: classified as failures later are, but
// saying what went wrong, since the operator reads it (never the DSN).
func openError(err error) error {
	if _, ok := errors.AsType[*fault.Error](err); ok {
		return err
	}
	c := classify(err)
	if _, ok := errors.AsType[*pgconn.PgError](err); ok {
		return fault.Hide(c.Kind, err, "store (postgres): %s", safeText(err))
	}
	return fault.Hide(c.Kind, err, "store (postgres): %s: %s", c.Msg, safeText(err))
}

// migratePostgres applies the pending migrations in one transaction that
// first takes an advisory lock: the other replicas' transactions wait on
// it, then find nothing left to do. PostgreSQL's DDL is transactional, so
// a migration that fails leaves nothing behind.
func migratePostgres(ctx context.Context, pool *pgxpool.Pool) error {
	all, err := migrations("postgres")
	if err != nil {
		return err
	}
	tx, err := pool.Begin(ctx)
	if err != nil {
		return err
	}
	defer func() { _ = tx.Rollback(context.WithoutCancel(ctx)) }() // a no-op after Commit
	if _, err := tx.Exec(ctx, `SELECT pg_advisory_xact_lock($1)`, migrationLock); err != nil {
		return err
	}
	if _, err := tx.Exec(ctx, `CREATE TABLE IF NOT EXISTS schema_migrations (
		version    integer     PRIMARY KEY,
		name       text        NOT NULL,
		applied_at timestamptz NOT NULL
	)`); err != nil {
		return err
	}
	rows, err := tx.Query(ctx, `SELECT version FROM schema_migrations`)
	if err != nil {
		return err
	}
	applied, err := pgx.CollectRows(rows, pgx.RowTo[int])
	if err != nil {
		return err
	}
	todo, err := pending(all, applied)
	if err != nil {
		return err
	}
	for _, m := range todo {
		// Without arguments, Exec uses the simple protocol, which runs a
		// file of several statements.
		if _, err := tx.Exec(ctx, m.sql); err != nil {
			return fmt.Errorf("migration %04d_%s: %w", m.version, m.name, err)
		}
		if _, err := tx.Exec(ctx, `INSERT INTO schema_migrations (version, name, applied_at) VALUES ($1, $2, $3)`,
			m.version, m.name, time.Now()); err != nil {
			return err
		}
	}
	return tx.Commit(ctx)
}

func (p *Postgres) sweep(every time.Duration) {
	defer close(p.done)
	if every <= 0 {
		<-p.stop
		return
	}
	t := time.NewTicker(every)
	defer t.Stop()
	for {
		select {
		case <-p.stop:
			return
		case <-t.C:
			// As in SQLite: a claimed record is kept a day past its last
			// claim or renewal, whatever its expiry. Several replicas
			// sweeping at once delete the same rows; that is harmless.
			ctx, cancel := context.WithTimeout(context.Background(), every)
			now := time.Now()
			_, _ = p.pool.Exec(ctx, `DELETE FROM paused_generations WHERE expires_at <= $1 AND (claimed_at IS NULL OR claimed_at < $2)`,
				ms(now), ms(now.Add(-claimKeep)))
			cancel()
		}
	}
}

// ms is t to the millisecond, the precision both stores keep.
func ms(t time.Time) time.Time { return time.UnixMilli(t.UnixMilli()) }

// passing are the SQLSTATE classes and codes of the server's errors that
// retrying may get past: the store is unavailable rather than agentd
// wrong.
var passing = map[string]bool{
	"08":    true, // connection exception
	"28":    true, // invalid authorization: a password changed under us
	"3D":    true, // invalid catalog name: the database is gone
	"53":    true, // insufficient resources: too many connections, disk full
	"57":    true, // operator intervention: shutting down, cannot connect now
	"58":    true, // system error: I/O
	"40001": true, // serialization failure
	"40P01": true, // deadlock detected
}

// classify is the fault of a failed operation. The cause is kept for
// errors.Is/As but never shown: a connection error's text names the
// user, database and address.
func classify(err error) *fault.Error {
	if pgErr, ok := errors.AsType[*pgconn.PgError](err); ok {
		if passing[pgErr.Code[:2]] || passing[pgErr.Code] {
			return fault.Hide(fault.Unavailable, err, "the state store is unavailable (SQLSTATE %s)", pgErr.Code)
		}
		return fault.Hide(fault.Internal, err, "the state store failed (SQLSTATE %s)", pgErr.Code)
	}
	switch {
	case errors.Is(err, context.Canceled):
		return fault.Hide(fault.Canceled, err, "the state store's operation was canceled")
	case errors.Is(err, context.DeadlineExceeded), pgconn.Timeout(err):
		return fault.Hide(fault.Unavailable, err, "the state store did not answer in time")
	}
	// Anything else failed on the way: dialling, a broken connection, a
	// closed pool.
	return fault.Hide(fault.Unavailable, err, "the state store cannot be reached")
}

// safeText says what went wrong without a word of the DSN: what the
// server's error code means (its message may name the user or the
// database), or the system's error (connection refused, ...).
func safeText(err error) string {
	if pgErr, ok := errors.AsType[*pgconn.PgError](err); ok {
		what, ok := serverErrors[pgErr.Code]
		if !ok {
			what = "the server refused"
		}
		return fmt.Sprintf("%s (SQLSTATE %s)", what, pgErr.Code)
	}
	if errno, ok := errors.AsType[syscall.Errno](err); ok {
		return errno.Error()
	}
	if dnsErr, ok := errors.AsType[*net.DNSError](err); ok && dnsErr.IsNotFound {
		return "no such host"
	}
	if errors.Is(err, os.ErrDeadlineExceeded) || errors.Is(err, context.DeadlineExceeded) {
		return "timed out"
	}
	return "the connection failed"
}

// serverErrors says what the server's errors likeliest at start mean.
var serverErrors = map[string]string{
	"28000": "authentication failed",
	"28P01": "authentication failed",
	"3D000": "the database does not exist",
	"42501": "permission denied (the role must be able to create tables in the database)",
	"53300": "too many connections",
	"57P01": "the server is shutting down",
	"57P03": "the server is starting up or shutting down",
}

func (p *Postgres) Save(ctx context.Context, tenant, id string, data []byte, expires time.Time, ifVersion int64) error {
	if ifVersion != 0 {
		tag, err := p.pool.Exec(ctx, `
			UPDATE paused_generations SET version = version + 1, data = $1, expires_at = $2, claimed_at = NULL
			WHERE tenant = $3 AND id = $4 AND version = $5`,
			data, ms(expires), tenant, id, ifVersion)
		return p.oneRow(tag, err, id)
	}
	_, err := p.pool.Exec(ctx, `
		INSERT INTO paused_generations (tenant, id, version, data, expires_at, claimed_at)
		VALUES ($1, $2, 1, $3, $4, NULL)
		ON CONFLICT (tenant, id) DO UPDATE SET
			version = paused_generations.version + 1, data = excluded.data,
			expires_at = excluded.expires_at, claimed_at = NULL`,
		tenant, id, data, ms(expires))
	if err != nil {
		return classify(err)
	}
	return nil
}

// oneRow is the outcome of a conditional write: Conflict if it matched no
// row.
func (p *Postgres) oneRow(tag pgconn.CommandTag, err error, id string) error {
	if err != nil {
		return classify(err)
	}
	if tag.RowsAffected() != 1 {
		return takenOver(id)
	}
	return nil
}

func (p *Postgres) Get(ctx context.Context, tenant, id string) (Record, error) {
	var r Record
	var claimed *time.Time
	err := p.pool.QueryRow(ctx, `
		SELECT data, version, claimed_at FROM paused_generations
		WHERE tenant = $1 AND id = $2 AND expires_at > $3`,
		tenant, id, ms(time.Now())).Scan(&r.Data, &r.Version, &claimed)
	if errors.Is(err, pgx.ErrNoRows) {
		return Record{}, notFound(id)
	}
	if err != nil {
		return Record{}, classify(err)
	}
	if claimed != nil {
		r.Claimed, r.ClaimedAt = true, *claimed
	}
	return r, nil
}

// Claim is one UPDATE: of concurrent claims on one version, the first
// takes the row's lock; the others wait for it, then re-check their WHERE
// against the row it wrote, whose version no longer matches.
func (p *Postgres) Claim(ctx context.Context, tenant, id string, version int64, data []byte, now, staleBefore time.Time) error {
	tag, err := p.pool.Exec(ctx, `
		UPDATE paused_generations SET version = version + 1, data = $1, claimed_at = $2
		WHERE tenant = $3 AND id = $4 AND version = $5 AND expires_at > $2
			AND (claimed_at IS NULL OR claimed_at < $6)`,
		data, ms(now), tenant, id, version, ms(staleBefore))
	if err != nil {
		return classify(err)
	}
	if tag.RowsAffected() != 1 {
		return claimedBefore(id)
	}
	return nil
}

func (p *Postgres) Renew(ctx context.Context, tenant, id string, version int64, data []byte, now time.Time) error {
	// COALESCE keeps the data when data is nil (NULL).
	tag, err := p.pool.Exec(ctx, `
		UPDATE paused_generations SET claimed_at = $1, data = COALESCE($2, data)
		WHERE tenant = $3 AND id = $4 AND version = $5 AND claimed_at IS NOT NULL`,
		ms(now), data, tenant, id, version)
	return p.oneRow(tag, err, id)
}

func (p *Postgres) Count(ctx context.Context, tenant string) (int, time.Time, error) {
	var n int
	var next *time.Time
	err := p.pool.QueryRow(ctx, `
		SELECT count(*), min(expires_at) FROM paused_generations
		WHERE tenant = $1 AND expires_at > $2`,
		tenant, ms(time.Now())).Scan(&n, &next)
	if err != nil {
		return 0, time.Time{}, classify(err)
	}
	if next == nil {
		return 0, time.Time{}, nil
	}
	return n, *next, nil
}

// countPaused counts, by tenant, the paused generations that Count
// counts (for the paused gauge, Instrument).
func (p *Postgres) countPaused(ctx context.Context, now time.Time) (map[string]int, error) {
	rows, err := p.pool.Query(ctx, `
		SELECT tenant, count(*) FROM paused_generations
		WHERE expires_at > $1 GROUP BY tenant`, ms(now))
	if err != nil {
		return nil, classify(err)
	}
	defer rows.Close()
	counts := make(map[string]int)
	for rows.Next() {
		var tenant string
		var n int
		if err := rows.Scan(&tenant, &n); err != nil {
			return nil, classify(err)
		}
		counts[tenant] = n
	}
	if err := rows.Err(); err != nil {
		return nil, classify(err)
	}
	return counts, nil
}

func (p *Postgres) Delete(ctx context.Context, tenant, id string, ifVersion int64) error {
	var err error
	if ifVersion != 0 {
		_, err = p.pool.Exec(ctx, `DELETE FROM paused_generations WHERE tenant = $1 AND id = $2 AND version = $3`, tenant, id, ifVersion)
	} else {
		_, err = p.pool.Exec(ctx, `DELETE FROM paused_generations WHERE tenant = $1 AND id = $2`, tenant, id)
	}
	if err != nil {
		return classify(err)
	}
	return nil
}

// Ping reports whether the database answers, over a connection of the
// pool (a new one if none is idle).
func (p *Postgres) Ping(ctx context.Context) error {
	if err := p.pool.Ping(ctx); err != nil {
		return classify(err)
	}
	return nil
}

// Close stops the sweeper and closes the pool, waiting for the
// connections in use to come back. Idempotent.
func (p *Postgres) Close() error {
	p.once.Do(func() {
		close(p.stop)
		<-p.done
		p.pool.Close()
	})
	return nil
}
