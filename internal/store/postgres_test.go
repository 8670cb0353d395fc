package store

import (
	"context"
	"net"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/agentd/agentd/internal/fault"
	"github.com/agentd/agentd/internal/store/pgtest"
)

func openPostgres(t *testing.T, dsn string) *Postgres {
	t.Helper()
	p, err := OpenPostgres(t.Context(), dsn, 0)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = p.Close() })
	return p
}

// X-G1: replicas opening a new database together migrate it once (the
// advisory lock), and a database a newer agentd migrated is refused.
func TestPostgresMigrations(t *testing.T) {
	t.Parallel()
	dsn := pgtest.DSN(t)
	var wg sync.WaitGroup
	for range 4 {
		wg.Go(func() { openPostgres(t, dsn) })
	}
	wg.Wait()
	p := openPostgres(t, dsn)
	rows, err := p.pool.Query(t.Context(), `SELECT version FROM schema_migrations ORDER BY version`)
	if err != nil {
		t.Fatal(err)
	}
	applied, err := pgx.CollectRows(rows, pgx.RowTo[int])
	if err != nil {
		t.Fatal(err)
	}
	if want := []int{1, 2, 3, 4, 5, 6, 7, 8, 9}; !slices.Equal(applied, want) {
		t.Errorf("schema_migrations lists %v; want %v", applied, want)
	}

	if _, err := p.pool.Exec(t.Context(), `INSERT INTO schema_migrations VALUES (99, 'from_the_future', now())`); err != nil {
		t.Fatal(err)
	}
	if _, err := OpenPostgres(t.Context(), dsn, 0); fault.KindOf(err) != fault.FailedPrecondition {
		t.Errorf("opening a schema at version 99: %v; want FailedPrecondition", err)
	}
}

// X-G1: a store that cannot be reached is Unavailable, and no error says
// the DSN or any part of it (its password least of all); nor does one
// that does not parse.
func TestPostgresErrorsKeepTheDSN(t *testing.T) {
	t.Parallel()
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	closed := lis.Addr().String()
	lis.Close() // nothing listens there now
	const password = "canary-p4ssw0rd"
	for _, tt := range []struct {
		name, dsn string
		want      fault.Kind
	}{
		{"refused URL", "postgres://agentd-user:" + password + "@" + closed + "/agentd-db?connect_timeout=5", fault.Unavailable},
		{"refused key=value", "host=127.0.0.1 port=" + closed[strings.LastIndex(closed, ":")+1:] + " user=agentd-user password=" + password + " dbname=agentd-db", fault.Unavailable},
		{"unparsable", "postgres://agentd-user:" + password + "@[::1/agentd-db", fault.Invalid},
		{"bad parameter", "postgres://agentd-user:" + password + "@" + closed + "/agentd-db?pool_max_conns=many", fault.Invalid},
	} {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			_, err := OpenPostgres(t.Context(), tt.dsn, 0)
			if fault.KindOf(err) != tt.want {
				t.Errorf("OpenPostgres: %v; want %v", err, tt.want)
			}
			for _, secret := range []string{password, "agentd-user", "agentd-db", closed} {
				if err != nil && strings.Contains(err.Error(), secret) {
					t.Errorf("the error says %q: %v", secret, err)
				}
			}
			t.Log(err)
		})
	}
}

// X-G1, X-G3: a store whose server goes away fails Unavailable, at once
// rather than when some timeout expires, for paused and durable
// generations alike; once it is back the same store works again, and
// what it acknowledged before is there.
func TestPostgresOutage(t *testing.T) {
	t.Parallel()
	proxy, dsn := pgtest.NewProxy(t, pgtest.DSN(t))
	p := openPostgres(t, dsn)
	ctx := t.Context()
	later := time.Now().Add(time.Hour)
	if err := p.Save(ctx, "acme", "before", []byte("acknowledged"), later, 0); err != nil {
		t.Fatal(err)
	}
	g := p.Generations()
	now := time.Now()
	if _, err := g.Create(ctx, NewGeneration{Tenant: "acme", ID: "running", Owner: "r", Expires: later,
		Checkpoint: []byte("acknowledged"), Events: []Event{{Kind: "started"}}, Now: now}); err != nil {
		t.Fatal(err)
	}

	proxy.Down()
	for name, op := range map[string]func(context.Context) error{
		"Ping": p.Ping,
		"Save": func(ctx context.Context) error { return p.Save(ctx, "acme", "during", []byte("x"), later, 0) },
		"Get":  func(ctx context.Context) error { _, err := p.Get(ctx, "acme", "before"); return err },
		"Count": func(ctx context.Context) error {
			_, _, err := p.Count(ctx, "acme")
			return err
		},
		"Generations.Get": func(ctx context.Context) error { _, err := g.Get(ctx, "acme", "running"); return err },
		"Generations.Checkpoint": func(ctx context.Context) error {
			_, err := g.Checkpoint(ctx, "acme", "running", 1, Checkpoint{State: Running, Data: []byte("x"), Now: now})
			return err
		},
		"Generations.Append": func(ctx context.Context) error {
			_, err := g.Append(ctx, "acme", "running", 1, []Event{{Kind: "delta"}})
			return err
		},
		"Generations.Adopt": func(ctx context.Context) error { _, err := g.Adopt(ctx, "r2", now, later, 10); return err },
		"Generations.Read":  func(ctx context.Context) error { _, err := g.Read(ctx, "acme", "running", 0, 0); return err },
	} {
		ctx, cancel := context.WithTimeout(ctx, 20*time.Second)
		err := op(ctx)
		late := ctx.Err()
		cancel()
		if fault.KindOf(err) != fault.Unavailable || late != nil {
			t.Errorf("%s while the server is away: %v; want Unavailable before the deadline", name, err)
		}
	}

	proxy.Up()
	if err := p.Ping(ctx); err != nil {
		t.Fatalf("Ping once the server is back: %v", err)
	}
	if r, err := p.Get(ctx, "acme", "before"); err != nil || string(r.Data) != "acknowledged" {
		t.Errorf("the record acknowledged before the outage: %+v, %v", r, err)
	}
	if err := p.Save(ctx, "acme", "after", []byte("x"), later, 0); err != nil {
		t.Errorf("Save once the server is back: %v", err)
	}
	if r, err := g.Get(ctx, "acme", "running"); err != nil || string(r.Checkpoint) != "acknowledged" || r.LastSeq != 1 {
		t.Errorf("the generation acknowledged before the outage: %+v, %v", r, err)
	}
	if last, err := g.Append(ctx, "acme", "running", 1, []Event{{Kind: "delta"}}); err != nil || last != 2 {
		t.Errorf("Append once the server is back: %d, %v; want 2", last, err)
	}
}

// X-G1: the server's refusals at start say what failed (a missing
// database, an unknown role) but not the names that the DSN gave.
func TestPostgresServerRefusals(t *testing.T) {
	t.Parallel()
	server := pgtest.ServerDSN(t)
	missingDB, err := pgtest.WithDatabase(server, "agentd_canary_missing_db")
	if err != nil {
		t.Fatal(err)
	}
	unknownRole, err := pgtest.WithUser(pgtest.DSN(t), "agentd_canary_role")
	if err != nil {
		t.Fatal(err)
	}
	for _, tt := range []struct{ name, dsn, want, secret string }{
		{"missing database", missingDB, "the database does not exist (SQLSTATE 3D000)", "agentd_canary_missing_db"},
		{"unknown role", unknownRole, "authentication failed (SQLSTATE 28000)", "agentd_canary_role"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			_, err := OpenPostgres(t.Context(), tt.dsn, 0)
			if fault.KindOf(err) != fault.Unavailable || !strings.Contains(err.Error(), tt.want) {
				t.Errorf("OpenPostgres: %v; want Unavailable saying %q", err, tt.want)
			}
			if err != nil && strings.Contains(err.Error(), tt.secret) {
				t.Errorf("the error names %q: %v", tt.secret, err)
			}
		})
	}
}
