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

	_ "modernc.org/sqlite" // the pure-Go SQLite driver, registered as "sqlite"

	"github.com/agentd/agentd/internal/fault"
)

const schema = `
CREATE TABLE IF NOT EXISTS paused_generations (
	tenant     TEXT    NOT NULL,
	id         TEXT    NOT NULL,
	version    INTEGER NOT NULL,
	data       BLOB    NOT NULL,
	expires_at INTEGER NOT NULL, -- unix milliseconds
	claimed_at INTEGER,          -- unix milliseconds; NULL while unclaimed
	PRIMARY KEY (tenant, id)
);
CREATE INDEX IF NOT EXISTS paused_generations_expiry ON paused_generations (expires_at);
`

// SQLite is the Checkpoints of one SQLite database file.
type SQLite struct {
	db   *sql.DB
	stop chan struct{}
	done chan struct{}
	once sync.Once
}

var _ Checkpoints = (*SQLite)(nil)

// OpenSQLite opens (creating if needed) the database at path, in WAL mode
// with full synchronous commits, so a record that Save acknowledged
// survives a crash of the process. Expired records are swept every
// sweepEvery (0: never; Get ignores them anyway).
func OpenSQLite(path string, sweepEvery time.Duration) (*SQLite, error) {
	if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
		return nil, fmt.Errorf("store: %w", err)
	}
	q := url.Values{}
	for _, p := range []string{"journal_mode(WAL)", "synchronous(FULL)", "busy_timeout(10000)", "foreign_keys(1)"} {
		q.Add("_pragma", p)
	}
	db, err := sql.Open("sqlite", "file:"+uriPath(path)+"?"+q.Encode())
	if err != nil {
		return nil, fmt.Errorf("store: %w", err)
	}
	// One connection: SQLite serializes writers anyway, and a single
	// connection avoids busy retries inside this process.
	db.SetMaxOpenConns(1)
	if _, err := db.Exec(schema); err != nil {
		_ = db.Close()
		return nil, fmt.Errorf("store: %s: %w", filepath.Base(path), err)
	}
	if err := os.Chmod(path, 0o600); err != nil {
		_ = db.Close()
		return nil, fmt.Errorf("store: %w", err)
	}
	s := &SQLite{db: db, stop: make(chan struct{}), done: make(chan struct{})}
	go s.sweep(sweepEvery)
	return s, nil
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
		return fault.New(fault.Conflict, "the paused generation %q was taken over by another resume, or is gone", id).
			WithInfo("GENERATION_TAKEN_OVER", map[string]string{"generation_id": id})
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
		return Record{}, fault.New(fault.NotFound, "no paused generation %q", id)
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
		return fault.New(fault.Conflict, "the paused generation %q is being resumed by another request, or was resumed", id).
			WithInfo("GENERATION_CLAIMED", map[string]string{"generation_id": id})
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

// Close stops the sweeper and closes the database. Idempotent.
func (s *SQLite) Close() error {
	var err error
	s.once.Do(func() {
		close(s.stop)
		<-s.done
		err = s.db.Close()
	})
	return err
}
