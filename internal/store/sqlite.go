package store

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"modernc.org/sqlite" // the pure-Go SQLite driver, registered as "sqlite"
	sqlite3 "modernc.org/sqlite/lib"

	"github.com/agentd/agentd/internal/fault"
)

// SQLite is the Store of one SQLite database file.
type SQLite struct {
	db    *sql.DB
	conns *sqliteConnector     // counts the connections, for Close
	stmts map[string]*sql.Stmt // prepareHot's
	// commit runs the write transactions of durable generations.
	commit *committer
	stop   chan struct{}
	done   chan struct{}
	once   sync.Once

	// replicas is the directory of the replicas' liveness files, live the
	// replicas attending through this store (sqlite_liveness.go).
	replicas string
	live     *attendances
}

var _ Store = (*SQLite)(nil)

// OpenSQLite opens (creating if needed) the database at path, in WAL mode
// with synchronous=NORMAL: a commit is in the WAL before it is
// acknowledged, so it survives a crash of the process (a SIGKILLed
// replica, the failure replicas sharing one host face), but not
// necessarily a crash of the machine (power loss may lose the last
// commits; PostgreSQL is the store for machine loss). A commit costs no
// fsync: a generation's record writes several per turn. It migrates the
// schema (see
// migrations/sqlite). Expired records are swept every sweepEvery (0:
// never; Get ignores them anyway).
func OpenSQLite(path string, sweepEvery time.Duration) (*SQLite, error) {
	if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
		return nil, fmt.Errorf("store: %w", err)
	}
	q := url.Values{}
	// busy_timeout first: a replica opening the file while another
	// switches it to WAL, or migrates it, waits instead of failing.
	// temp_store MEMORY keeps statement journals (the undo of a statement
	// that fails inside a transaction) off disk: durability is the WAL's,
	// and the temporary file's writes were a tenth of a checkpoint's cost.
	for _, p := range []string{"busy_timeout(10000)", "journal_mode(WAL)", "synchronous(NORMAL)", "foreign_keys(1)", "temp_store(MEMORY)"} {
		q.Add("_pragma", p)
	}
	// A transaction takes the write lock when it begins: one that read
	// first could not take it later if another process wrote meanwhile.
	// Only writes use transactions.
	q.Set("_txlock", "immediate")
	registered, err := sql.Open("sqlite", "")
	if err != nil {
		return nil, fmt.Errorf("store: %w", err)
	}
	conns := &sqliteConnector{driver: registered.Driver(), dsn: "file:" + uriPath(path) + "?" + q.Encode()}
	_ = registered.Close() // it opened nothing: it only names the driver
	db := sql.OpenDB(conns)
	// One connection: SQLite serializes writers anyway, and a single
	// connection avoids busy retries inside this process.
	db.SetMaxOpenConns(1)
	if err := openingMigrate(db); err != nil {
		_ = db.Close()
		return nil, fmt.Errorf("store: %s: %w", filepath.Base(path), err)
	}
	if err := os.Chmod(path, 0o600); err != nil {
		_ = db.Close()
		return nil, fmt.Errorf("store: %w", err)
	}
	stmts, err := prepareHot(db)
	if err != nil {
		_ = db.Close()
		return nil, fmt.Errorf("store: %s: %w", filepath.Base(path), err)
	}
	s := &SQLite{db: db, conns: conns, stmts: stmts, commit: newCommitter(db), replicas: replicasDir(path), live: newAttendances(),
		stop: make(chan struct{}), done: make(chan struct{})}
	go s.sweep(sweepEvery)
	return s, nil
}

// openingMigrate migrates db, trying again while SQLite answers busy at
// once, for up to the busy timeout. A replica's first connection switches
// a file still in rollback mode to WAL, which needs the file to itself:
// when several open it together, SQLite refuses some of them at once
// rather than letting them wait (waiting could deadlock), so the wait is
// ours.
func openingMigrate(db *sql.DB) error {
	deadline := time.Now().Add(10 * time.Second)
	for pause := 5 * time.Millisecond; ; pause = min(2*pause, 200*time.Millisecond) {
		err := migrateSQLite(context.Background(), db)
		var se *sqlite.Error
		if err == nil || !errors.As(err, &se) || se.Code()&0xff != sqlite3.SQLITE_BUSY || time.Now().After(deadline) {
			return err
		}
		time.Sleep(pause)
	}
}

// uriPath escapes a file path for an SQLite URI filename, where "?"
// starts the parameters, "#" a fragment, and "%" an escape.
func uriPath(path string) string {
	return strings.NewReplacer("%", "%25", "?", "%3f", "#", "%23").Replace(path)
}

// claimKeep is how long the sweeper keeps an expired record after the last
// claim or renewal of a resume.
const claimKeep = 24 * time.Hour

func (s *SQLite) sweep(every time.Duration) {
	defer close(s.done)
	if every <= 0 {
		<-s.stop
		return
	}
	t := time.NewTicker(every)
	defer t.Stop()
	for {
		select {
		case <-s.stop:
			return
		case <-t.C:
			now := time.Now()
			// A claimed record is kept a day past its last claim or renewal
			// whatever its expiry: its resume may still be running (it
			// renews its claim), and a running resume must not lose it.
			_, _ = s.db.Exec(`DELETE FROM paused_generations WHERE expires_at <= ? AND (claimed_at IS NULL OR claimed_at < ?)`,
				now.UnixMilli(), now.Add(-claimKeep).UnixMilli())
		}
	}
}

// migrateSQLite applies the pending migrations in one transaction that
// takes SQLite's write lock at once (BEGIN IMMEDIATE): of several
// processes opening the file together, one migrates and the others wait
// for it (busy_timeout), then find nothing left to do.
func migrateSQLite(ctx context.Context, db *sql.DB) (err error) {
	all, err := migrations("sqlite")
	if err != nil {
		return err
	}
	conn, err := db.Conn(ctx)
	if err != nil {
		return err
	}
	defer conn.Close()
	if _, err := conn.ExecContext(ctx, "BEGIN IMMEDIATE"); err != nil {
		return err
	}
	defer func() {
		if err != nil {
			_, _ = conn.ExecContext(context.WithoutCancel(ctx), "ROLLBACK")
		}
	}()
	if _, err := conn.ExecContext(ctx, `CREATE TABLE IF NOT EXISTS schema_migrations (
		version    INTEGER PRIMARY KEY,
		name       TEXT    NOT NULL,
		applied_at INTEGER NOT NULL -- unix milliseconds
	)`); err != nil {
		return err
	}
	rows, err := conn.QueryContext(ctx, `SELECT version FROM schema_migrations`)
	if err != nil {
		return err
	}
	var applied []int
	for rows.Next() {
		var v int
		if err := rows.Scan(&v); err != nil {
			rows.Close()
			return err
		}
		applied = append(applied, v)
	}
	if err := errors.Join(rows.Err(), rows.Close()); err != nil {
		return err
	}
	todo, err := pending(all, applied)
	if err != nil {
		return err
	}
	for _, m := range todo {
		if _, err := conn.ExecContext(ctx, m.sql); err != nil {
			return fmt.Errorf("migration %04d_%s: %w", m.version, m.name, err)
		}
		if _, err := conn.ExecContext(ctx, `INSERT INTO schema_migrations (version, name, applied_at) VALUES (?, ?, ?)`,
			m.version, m.name, time.Now().UnixMilli()); err != nil {
			return err
		}
	}
	_, err = conn.ExecContext(ctx, "COMMIT")
	return err
}

func unavailable(err error) error {
	return fault.Hide(fault.Unavailable, err, "the state store failed")
}

func (s *SQLite) Save(ctx context.Context, tenant, id string, data []byte, expires time.Time, ifVersion int64) error {
	if ifVersion != 0 {
		res, err := s.db.ExecContext(ctx, `
			UPDATE paused_generations SET version = version + 1, data = ?, expires_at = ?, claimed_at = NULL
			WHERE tenant = ? AND id = ? AND version = ?`,
			data, expires.UnixMilli(), tenant, id, ifVersion)
		return oneRow(res, err, id)
	}
	_, err := s.db.ExecContext(ctx, `
		INSERT INTO paused_generations (tenant, id, version, data, expires_at, claimed_at)
		VALUES (?, ?, 1, ?, ?, NULL)
		ON CONFLICT (tenant, id) DO UPDATE SET
			version = paused_generations.version + 1, data = excluded.data,
			expires_at = excluded.expires_at, claimed_at = NULL`,
		tenant, id, data, expires.UnixMilli())
	if err != nil {
		return unavailable(err)
	}
	return nil
}

// oneRow is the outcome of a conditional write: Conflict if it matched no
// row.
func oneRow(res sql.Result, err error, id string) error {
	if err != nil {
		return unavailable(err)
	}
	if n, err := res.RowsAffected(); err != nil {
		return unavailable(err)
	} else if n != 1 {
		return takenOver(id)
	}
	return nil
}

func (s *SQLite) Get(ctx context.Context, tenant, id string) (Record, error) {
	var r Record
	var claimed sql.NullInt64
	err := s.db.QueryRowContext(ctx, `
		SELECT data, version, claimed_at FROM paused_generations
		WHERE tenant = ? AND id = ? AND expires_at > ?`,
		tenant, id, time.Now().UnixMilli()).Scan(&r.Data, &r.Version, &claimed)
	if errors.Is(err, sql.ErrNoRows) {
		return Record{}, notFound(id)
	}
	if err != nil {
		return Record{}, unavailable(err)
	}
	if claimed.Valid {
		r.Claimed, r.ClaimedAt = true, time.UnixMilli(claimed.Int64)
	}
	return r, nil
}

func (s *SQLite) Claim(ctx context.Context, tenant, id string, version int64, data []byte, now, staleBefore time.Time) error {
	res, err := s.db.ExecContext(ctx, `
		UPDATE paused_generations SET version = version + 1, data = ?, claimed_at = ?
		WHERE tenant = ? AND id = ? AND version = ? AND expires_at > ?
			AND (claimed_at IS NULL OR claimed_at < ?)`,
		data, now.UnixMilli(), tenant, id, version, now.UnixMilli(), staleBefore.UnixMilli())
	if err != nil {
		return unavailable(err)
	}
	if n, err := res.RowsAffected(); err != nil {
		return unavailable(err)
	} else if n != 1 {
		return claimedBefore(id)
	}
	return nil
}

func (s *SQLite) Renew(ctx context.Context, tenant, id string, version int64, data []byte, now time.Time) error {
	if data == nil {
		res, err := s.db.ExecContext(ctx, `
			UPDATE paused_generations SET claimed_at = ?
			WHERE tenant = ? AND id = ? AND version = ? AND claimed_at IS NOT NULL`,
			now.UnixMilli(), tenant, id, version)
		return oneRow(res, err, id)
	}
	res, err := s.db.ExecContext(ctx, `
		UPDATE paused_generations SET claimed_at = ?, data = ?
		WHERE tenant = ? AND id = ? AND version = ? AND claimed_at IS NOT NULL`,
		now.UnixMilli(), data, tenant, id, version)
	return oneRow(res, err, id)
}

func (s *SQLite) Count(ctx context.Context, tenant string) (int, time.Time, error) {
	var n int
	var next sql.NullInt64
	err := s.db.QueryRowContext(ctx, `
		SELECT COUNT(*), MIN(expires_at) FROM paused_generations
		WHERE tenant = ? AND expires_at > ?`,
		tenant, time.Now().UnixMilli()).Scan(&n, &next)
	if err != nil {
		return 0, time.Time{}, unavailable(err)
	}
	if !next.Valid {
		return 0, time.Time{}, nil
	}
	return n, time.UnixMilli(next.Int64), nil
}

// countPaused counts, by tenant, the paused generations that Count
// counts (for the paused gauge, Instrument).
func (s *SQLite) countPaused(ctx context.Context, now time.Time) (map[string]int, error) {
	rows, err := s.db.QueryContext(ctx, `
		SELECT tenant, COUNT(*) FROM paused_generations
		WHERE expires_at > ? GROUP BY tenant`, now.UnixMilli())
	if err != nil {
		return nil, unavailable(err)
	}
	defer rows.Close()
	counts := make(map[string]int)
	for rows.Next() {
		var tenant string
		var n int
		if err := rows.Scan(&tenant, &n); err != nil {
			return nil, unavailable(err)
		}
		counts[tenant] = n
	}
	if err := rows.Err(); err != nil {
		return nil, unavailable(err)
	}
	return counts, nil
}

func (s *SQLite) Delete(ctx context.Context, tenant, id string, ifVersion int64) error {
	var err error
	if ifVersion != 0 {
		_, err = s.db.ExecContext(ctx, `DELETE FROM paused_generations WHERE tenant = ? AND id = ? AND version = ?`, tenant, id, ifVersion)
	} else {
		_, err = s.db.ExecContext(ctx, `DELETE FROM paused_generations WHERE tenant = ? AND id = ?`, tenant, id)
	}
	if err != nil {
		return unavailable(err)
	}
	return nil
}

// Ping reports whether the database can be used.
func (s *SQLite) Ping(ctx context.Context) error {
	if err := s.db.PingContext(ctx); err != nil {
		return unavailable(err)
	}
	return nil
}

// closeWait bounds how long Close waits for connections still in use.
const closeWait = 10 * time.Second

// Close stops the sweeper and the committer (failing the writes that
// wait for it) and closes the database, returning once SQLite has closed
// the file (or after closeWait, if a connection is still in use then).
// Idempotent.
func (s *SQLite) Close() error {
	var err error
	s.once.Do(func() {
		close(s.stop)
		<-s.done
		s.commit.close()
		for _, st := range s.stmts {
			_ = st.Close()
		}
		err = s.db.Close()
		if !s.conns.wait(closeWait) && err == nil {
			err = fmt.Errorf("store: a connection was still in use %s after the store closed", closeWait)
		}
	})
	return err
}
