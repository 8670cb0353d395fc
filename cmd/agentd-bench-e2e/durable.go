package main

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"net/url"
	"sync/atomic"

	"github.com/jackc/pgx/v5/pgxpool"
	_ "modernc.org/sqlite" // agentd's SQLite driver, registered as "sqlite"
)

// steps is the durable floor's record: one append-only table, written
// as the smallest program would write it. Each step is one INSERT
// committed in a transaction of its own before the generation goes on.
type steps interface {
	// commit appends one step and returns once it has committed. Safe for
	// concurrent use.
	commit(ctx context.Context, generation int64, seq int, payload []byte) error
	Close() error
}

// stepsInsert appends a step. The table has no index (SQLite's rowid,
// PostgreSQL's heap): steps are only ever added, and reading a
// generation back, which a recovery does, may scan.
const stepsInsert = `INSERT INTO floor_steps (generation, seq, payload) VALUES ($1, $2, $3)`

// sqlitePragmas are agentd's SQLite store's (internal/store/sqlite.go),
// copied rather than imported so that the harness measures the same
// settings without depending on the store's internals: WAL, and
// synchronous=NORMAL (a commit is in the WAL, not fsynced).
var sqlitePragmas = []string{"busy_timeout(10000)", "journal_mode(WAL)", "synchronous(NORMAL)", "foreign_keys(1)", "temp_store(MEMORY)"}

// sqliteSteps is the record in an SQLite database file.
type sqliteSteps struct {
	db     *sql.DB
	insert *sql.Stmt
}

// openSQLiteSteps creates the database at path, opened as agentd's store
// opens its own: the same driver and pragmas, transactions that take the
// write lock when they begin, one connection.
func openSQLiteSteps(path string) (*sqliteSteps, error) {
	q := url.Values{}
	for _, p := range sqlitePragmas {
		q.Add("_pragma", p)
	}
	q.Set("_txlock", "immediate")
	db, err := sql.Open("sqlite", "file:"+path+"?"+q.Encode())
	if err != nil {
		return nil, err
	}
	db.SetMaxOpenConns(1)
	s := &sqliteSteps{db: db}
	if _, err := db.Exec(`CREATE TABLE floor_steps (generation INTEGER NOT NULL, seq INTEGER NOT NULL, payload BLOB NOT NULL)`); err != nil {
		db.Close()
		return nil, fmt.Errorf("the durable floor's database: %w", err)
	}
	if s.insert, err = db.Prepare(stepsInsert); err != nil {
		db.Close()
		return nil, fmt.Errorf("the durable floor's database: %w", err)
	}
	return s, nil
}

func (s *sqliteSteps) commit(ctx context.Context, generation int64, seq int, payload []byte) error {
	tx, err := s.db.BeginTx(ctx, nil)
	if err != nil {
		return err
	}
	if _, err := tx.StmtContext(ctx, s.insert).ExecContext(ctx, generation, seq, payload); err != nil {
		return errors.Join(err, tx.Rollback())
	}
	return tx.Commit()
}

func (s *sqliteSteps) Close() error { return s.db.Close() }

// pgSteps is the record in a PostgreSQL database, on a pool opened as
// agentd's store opens its own (pgxpool, the same DSN).
type pgSteps struct{ pool *pgxpool.Pool }

// openPostgresSteps creates the table in the database dsn names; Close
// drops it.
func openPostgresSteps(ctx context.Context, dsn string) (*pgSteps, error) {
	pool, err := pgxpool.New(ctx, dsn)
	if err != nil {
		return nil, err
	}
	if _, err := pool.Exec(ctx, `CREATE TABLE floor_steps (generation bigint NOT NULL, seq integer NOT NULL, payload bytea NOT NULL)`); err != nil {
		pool.Close()
		return nil, fmt.Errorf("the durable floor's database: %w", err)
	}
	return &pgSteps{pool: pool}, nil
}

// commit runs the INSERT alone, as its own transaction: one round trip,
// as agentd's PostgreSQL store makes each of its writes.
func (p *pgSteps) commit(ctx context.Context, generation int64, seq int, payload []byte) error {
	_, err := p.pool.Exec(ctx, stepsInsert, generation, seq, payload)
	return err
}

func (p *pgSteps) Close() error {
	_, err := p.pool.Exec(context.Background(), `DROP TABLE floor_steps`)
	p.pool.Close()
	return err
}

// openSteps opens the durable floor's record on the store agentd uses:
// the PostgreSQL database pgDSN names, or an SQLite file at sqlitePath.
func openSteps(ctx context.Context, pgDSN, sqlitePath string) (steps, error) {
	if pgDSN != "" {
		return openPostgresSteps(ctx, pgDSN)
	}
	return openSQLiteSteps(sqlitePath)
}

// record is one generation's steps, numbered from 1: the start, a
// write-ahead before each tool call, the end. With no steps (the floor)
// it records nothing.
type record struct {
	steps steps
	id    int64
	seq   int
}

// stepData is what a write-ahead or the end adds to the record: the
// previous tool call's result, if any, and the model's answer: the call
// about to run, or the final text.
type stepData struct {
	Result    string          `json:"result,omitempty"`
	Tool      string          `json:"tool,omitempty"`
	Arguments json.RawMessage `json:"arguments,omitempty"`
	Text      string          `json:"text,omitempty"`
}

// ids numbers the durable floor's generations.
var ids atomic.Int64

func newRecord(s steps) *record { return &record{steps: s, id: ids.Add(1)} }

// start commits the generation's request as agentd receives it.
func (r *record) start(ctx context.Context, request []byte) error {
	return r.commit(ctx, request)
}

// step commits a write-ahead or the end.
func (r *record) step(ctx context.Context, d stepData) error {
	if r.steps == nil {
		return nil
	}
	data, err := json.Marshal(d)
	if err != nil {
		return err
	}
	return r.commit(ctx, data)
}

// commit commits the next step. A step is never given up halfway: its
// context's cancellation would only cost database/sql and the drivers a
// watcher goroutine per transaction and statement.
func (r *record) commit(ctx context.Context, payload []byte) error {
	if r.steps == nil {
		return nil
	}
	r.seq++
	if err := r.steps.commit(context.WithoutCancel(ctx), r.id, r.seq, payload); err != nil {
		return fmt.Errorf("the durable floor's step %d: %w", r.seq, err)
	}
	return nil
}
