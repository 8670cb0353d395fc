package store_test

import (
	"database/sql"
	"path/filepath"
	"testing"
	"time"

	"github.com/agentd/agentd/internal/store"
	"github.com/agentd/agentd/internal/store/storetest"
)

// X-G1: the conformance suite on SQLite, each test on a database file of
// its own.
func TestSQLite(t *testing.T) {
	t.Parallel()
	storetest.Run(t, func(t *testing.T) storetest.DB {
		path := filepath.Join(t.TempDir(), "agentd.db")
		return storetest.DB{
			Open: func(sweepEvery time.Duration) (store.Store, error) { return store.OpenSQLite(path, sweepEvery) },
			Stored: func(tenant, id string) (bool, error) {
				db, err := sql.Open("sqlite", path)
				if err != nil {
					return false, err
				}
				defer db.Close()
				var n int
				err = db.QueryRow(`SELECT count(*) FROM paused_generations WHERE tenant = ? AND id = ?`, tenant, id).Scan(&n)
				return n == 1, err
			},
		}
	})
}
