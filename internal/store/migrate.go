package store

import (
	"embed"
	"fmt"
	"io/fs"
	"path"
	"regexp"
	"strconv"

	"github.com/agentd/agentd/internal/fault"
)

// The schema of each implementation is a sequence of migrations, embedded
// in the binary: migrations/<dialect>/NNNN_<name>.sql, numbered from 0001
// without gaps, each applied once, in order, in one transaction with the
// row that records it in schema_migrations. A change to the schema is a
// new file with the next number, in both dialects (the two sequences stay
// in step: TestMigrationsInStep); an applied file is never edited.
//
//go:embed migrations
var migrationFiles embed.FS

// migration is one numbered step of a schema.
type migration struct {
	version int
	name    string // the file's name without its number and extension
	sql     string
}

var migrationName = regexp.MustCompile(`^(\d{4})_([a-z0-9_]+)\.sql$`)

// migrations returns dialect's migrations in order, checking that they are
// numbered 1, 2, ... without gaps.
func migrations(dialect string) ([]migration, error) {
	dir := path.Join("migrations", dialect)
	entries, err := fs.ReadDir(migrationFiles, dir)
	if err != nil {
		return nil, err
	}
	var out []migration
	for _, e := range entries { // ReadDir sorts by name
		m := migrationName.FindStringSubmatch(e.Name())
		if m == nil {
			return nil, fmt.Errorf("store: migration %s/%s: not named NNNN_name.sql", dialect, e.Name())
		}
		v, _ := strconv.Atoi(m[1])
		if v != len(out)+1 {
			return nil, fmt.Errorf("store: migration %s/%s: want number %04d", dialect, e.Name(), len(out)+1)
		}
		data, err := fs.ReadFile(migrationFiles, path.Join(dir, e.Name()))
		if err != nil {
			return nil, err
		}
		out = append(out, migration{version: v, name: m[2], sql: string(data)})
	}
	return out, nil
}

// pending returns the migrations of all that applied (the versions
// schema_migrations records) lacks. A database migrated by a newer agentd,
// with versions this one does not know, is refused: this agentd would not
// keep the records those versions added as the newer one expects.
func pending(all []migration, applied []int) ([]migration, error) {
	done := make(map[int]bool, len(applied))
	for _, v := range applied {
		if v > len(all) {
			return nil, fault.New(fault.FailedPrecondition,
				"the state store's schema is at version %d, newer than this agentd knows (%d): run an agentd at least as new as the one that migrated it", v, len(all))
		}
		done[v] = true
	}
	var out []migration
	for _, m := range all {
		if !done[m.version] {
			out = append(out, m)
		}
	}
	return out, nil
}
