package store

import (
	"database/sql"
	"os"
	"path/filepath"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/agentd/agentd/internal/fault"
)

func open(t *testing.T, path string) *SQLite {
	t.Helper()
	s, err := OpenSQLite(path, 10*time.Millisecond)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = s.Close() })
	return s
}

// A state directory may hold the characters that SQLite URIs give a
// meaning ("?", "#", "%"): the database is still the file at that path.
func TestPathWithURICharacters(t *testing.T) {
	t.Parallel()
	path := filepath.Join(t.TempDir(), "a#b?c%20d", "agentd.db")
	s := open(t, path)
	if err := s.Save(t.Context(), "", "g", []byte("x"), time.Now().Add(time.Hour), 0); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(path); err != nil {
		t.Errorf("the database is not at its path: %v", err)
	}
}

// X-G1: an agentd.db written before the store had migrations (its schema
// made by CREATE TABLE IF NOT EXISTS at every open, no schema_migrations)
// opens: its first migration finds the table in place, its records stay,
// and the migration is recorded once, also when several replicas open it
// at once.
func TestLegacyDatabase(t *testing.T) {
	t.Parallel()
	path := filepath.Join(t.TempDir(), "agentd.db")
	legacy, err := sql.Open("sqlite", path)
	if err != nil {
		t.Fatal(err)
	}
	// The schema exactly as agentd created it before migrations.
	_, err = legacy.Exec(`
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
INSERT INTO paused_generations VALUES ('acme', 'g', 3, x'6b657074', ?, NULL);`, time.Now().Add(time.Hour).UnixMilli())
	if err != nil {
		t.Fatal(err)
	}
	if err := legacy.Close(); err != nil {
		t.Fatal(err)
	}

	var wg sync.WaitGroup
	for range 4 {
		wg.Go(func() { open(t, path) })
	}
	wg.Wait()
	s := open(t, path)
	r, err := s.Get(t.Context(), "acme", "g")
	if err != nil || string(r.Data) != "kept" || r.Version != 3 {
		t.Fatalf("the record written before migrations: %+v, %v", r, err)
	}
	if got, want := appliedSQLite(t, s.db), []int{1, 2, 3, 4, 5, 6, 7, 8, 9}; !slices.Equal(got, want) {
		t.Errorf("schema_migrations lists %v; want %v", got, want)
	}
}

func appliedSQLite(t *testing.T, db *sql.DB) []int {
	t.Helper()
	rows, err := db.Query(`SELECT version FROM schema_migrations ORDER BY version`)
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	var out []int
	for rows.Next() {
		var v int
		if err := rows.Scan(&v); err != nil {
			t.Fatal(err)
		}
		out = append(out, v)
	}
	return out
}

// A database that a newer agentd migrated further is refused, naming
// both versions, rather than used by code that does not know its schema.
func TestNewerSchemaRefused(t *testing.T) {
	t.Parallel()
	path := filepath.Join(t.TempDir(), "agentd.db")
	s, err := OpenSQLite(path, 0)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.db.Exec(`INSERT INTO schema_migrations VALUES (99, 'from_the_future', 0)`); err != nil {
		t.Fatal(err)
	}
	s.Close()
	_, err = OpenSQLite(path, 0)
	if fault.KindOf(err) != fault.FailedPrecondition {
		t.Fatalf("opening a schema at version 99: %v; want FailedPrecondition", err)
	}
	t.Log(err)
}

// X-G1: the two stores' migrations stay in step: the same numbers and
// names in both dialects, so that a schema change is made to both.
func TestMigrationsInStep(t *testing.T) {
	t.Parallel()
	names := func(dialect string) []string {
		ms, err := migrations(dialect)
		if err != nil {
			t.Fatal(err)
		}
		var out []string
		for _, m := range ms {
			out = append(out, m.name)
		}
		return out
	}
	sqlite, postgres := names("sqlite"), names("postgres")
	if len(sqlite) == 0 {
		t.Fatal("no migrations embedded")
	}
	if diff := cmp.Diff(sqlite, postgres); diff != "" {
		t.Errorf("migrations/sqlite and migrations/postgres differ (-sqlite +postgres):\n%s", diff)
	}
}
