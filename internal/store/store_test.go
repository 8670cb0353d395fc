package store_test

import (
	"context"
	"database/sql"
	"path/filepath"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/agentd/agentd/internal/store"
	"github.com/agentd/agentd/internal/store/pgtest"
	"github.com/agentd/agentd/internal/store/storetest"
)

// X-G1, X-G2, X-G3: the conformance suite on SQLite, each test on a
// database file of its own.
func TestSQLite(t *testing.T) {
	t.Parallel()
	storetest.Run(t, func(t *testing.T) storetest.DB {
		path := filepath.Join(t.TempDir(), "agentd.db")
		return storetest.DB{
			Open:            func(sweepEvery time.Duration) (store.Store, error) { return store.OpenSQLite(path, sweepEvery) },
			Stored:          sqliteStored(path),
			AttendElsewhere: attendElsewhere(store.Options{Driver: store.DriverSQLite, Path: path}),
		}
	})
}

// sqliteStored reports whether the SQLite database at path holds a row of
// the paused generation.
func sqliteStored(path string) func(tenant, id string) (bool, error) {
	return func(tenant, id string) (bool, error) {
		db, err := sql.Open("sqlite", path)
		if err != nil {
			return false, err
		}
		defer db.Close()
		var n int
		err = db.QueryRow(`SELECT count(*) FROM paused_generations WHERE tenant = ? AND id = ?`, tenant, id).Scan(&n)
		return n == 1, err
	}
}

// X-G1, X-G2, X-G3: the conformance suite on PostgreSQL, each test on a
// database of its own on the server that make test starts (pgtest).
func TestPostgres(t *testing.T) {
	t.Parallel()
	pgtest.ServerDSN(t) // skips once, not in each test
	storetest.Run(t, func(t *testing.T) storetest.DB {
		dsn := pgtest.DSN(t)
		return storetest.DB{
			Open: func(sweepEvery time.Duration) (store.Store, error) {
				ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
				defer cancel()
				return store.OpenPostgres(ctx, dsn, sweepEvery)
			},
			Stored: func(tenant, id string) (bool, error) {
				ctx := context.Background()
				conn, err := pgx.Connect(ctx, dsn)
				if err != nil {
					return false, err
				}
				defer conn.Close(ctx)
				var n int
				err = conn.QueryRow(ctx, `SELECT count(*) FROM paused_generations WHERE tenant = $1 AND id = $2`, tenant, id).Scan(&n)
				return n == 1, err
			},
			AttendElsewhere: attendElsewhere(store.Options{Driver: store.DriverPostgres, DSN: dsn}),
		}
	})
}
