// Package store keeps generations durably: paused generations, so that a
// resume works on any replica and after a restart, exactly once (Checkpoints);
// and every generation from its start, with the lease of the replica that runs
// it, its checkpoints and its event log, so that another replica can adopt it
// when that one dies, and the requests it waits for with their decisions, each
// recorded once whichever replica decides (Generations); the OAuth tokens agentd holds for MCP
// servers, per tenant, end user and server, sealed by their caller (Tokens); threads, the
// conversations that generations append to (Threads); and budgets, with what their subjects
// have spent and reserved and the hourly usage ledger (Budgets).
//
// Store is the contract, with two implementations: OpenSQLite, the default, an
// embedded SQLite database in one file (pure Go, no set-up; replicas on one
// machine may share it), and OpenPostgres, a PostgreSQL database that replicas
// on several machines share. Open picks one by driver. One conformance suite
// (storetest) runs against both.
//
// Each opens its schema by applying the migrations embedded in the binary
// (migrations/<dialect>/NNNN_name.sql) that the database's schema_migrations
// table does not list yet; replicas starting together are safe, one migrates
// and the others wait.
//
// Records are scoped to a tenant (the caller's identity): one tenant never
// sees another's. Times are kept to the millisecond. Errors are classified
// with internal/fault: NotFound for an unknown or expired generation, Conflict
// for a claim that another resume won or a write under a lease that was lost,
// Invalid for arguments the contract refuses (a state where another is due, a
// page token of no List), Unavailable for a store that cannot be reached or
// failed (retry may help); their messages never carry the store's DSN or any
// part of it.
package store

import (
	"context"
	"fmt"
	"time"

	"github.com/agentd/agentd/internal/fault"
)

// Record is a stored paused generation.
type Record struct {
	// Data is the checkpoint, opaque to the store.
	Data []byte
	// Version changes on every write; Claim compares it.
	Version int64
	// Claimed says a resume has taken the generation, at ClaimedAt.
	Claimed   bool
	ClaimedAt time.Time
}

// Checkpoints stores paused generations. All methods are safe for
// concurrent use, by this process and by others sharing the database.
type Checkpoints interface {
	// Save stores tenant's paused generation id, unclaimed, replacing any
	// earlier record of it. With ifVersion 0 it always does; otherwise
	// only if the record still has that version (the writer's claim), and
	// fails with Conflict if not. It returns once the record is durable.
	Save(ctx context.Context, tenant, id string, data []byte, expires time.Time, ifVersion int64) error

	// Get returns the record, or NotFound when there is none or it has
	// expired.
	Get(ctx context.Context, tenant, id string) (Record, error)

	// Claim takes the generation for one resume, replacing its data with
	// data (which records the claim). It succeeds only if the record still
	// has the given version and is unclaimed, or was claimed before
	// staleBefore (a resume that died); otherwise it fails with Conflict.
	// Of concurrent claims on one version, exactly one succeeds. The
	// claimed record's version is version+1.
	Claim(ctx context.Context, tenant, id string, version int64, data []byte, now, staleBefore time.Time) error

	// Renew keeps a claim alive: it sets the claim's time to now and, if
	// data is not nil, replaces the data, keeping the version. It fails
	// with Conflict if the record no longer has that version and a claim
	// (another resume took it over, or it is gone). A claimed record
	// outlives its expiry while its claim is renewed: a resume that runs
	// past the pause's expiry keeps it.
	Renew(ctx context.Context, tenant, id string, version int64, data []byte, now time.Time) error

	// Count returns how many paused generations tenant has stored that
	// have not expired (those claimed by a running resume included: they
	// keep their place until the resume settles them), and the earliest
	// time one of them expires (zero when there is none).
	Count(ctx context.Context, tenant string) (n int, nextExpiry time.Time, err error)

	// Delete removes the record: with ifVersion 0 whatever it holds,
	// otherwise only if it still has that version. Removing a missing
	// record is no error.
	Delete(ctx context.Context, tenant, id string, ifVersion int64) error

	// Close releases the store. Idempotent.
	Close() error
}

// Store is what agentd opens and owns: the Checkpoints of paused
// generations, the Generations of durable ones, the OAuth Tokens, the
// Threads and the Budgets (on the same database), and a Ping that its
// health reports.
type Store interface {
	Checkpoints
	// Generations returns the store's durable generations, valid until
	// Close.
	Generations() Generations
	// Tokens returns the store's OAuth tokens, valid until Close.
	Tokens() Tokens
	// Threads returns the store's threads, valid until Close.
	Threads() Threads
	// Budgets returns the store's budgets, their spending and the usage
	// ledger, valid until Close.
	Budgets() Budgets
	Usage
	// Ping reports whether the store can be used now: nil, or an
	// Unavailable error. Safe for concurrent use.
	Ping(ctx context.Context) error
}

// Timeout bounds one store operation.
const Timeout = 10 * time.Second

// WriteContext bounds one store write by Timeout, whatever becomes of ctx
// meanwhile: a write that records what happened must not be cut short by
// the end of what it records (a generation, a grant).
func WriteContext(ctx context.Context) (context.Context, context.CancelFunc) {
	return context.WithTimeout(context.WithoutCancel(ctx), Timeout)
}

// The drivers that Open knows.
const (
	DriverSQLite   = "sqlite"
	DriverPostgres = "postgres"
)

// Options says which store Open opens.
type Options struct {
	// Driver is DriverSQLite (also when empty) or DriverPostgres.
	Driver string
	// Path is the SQLite database file.
	Path string
	// DSN is the PostgreSQL connection string. Secret.
	DSN string
	// SweepEvery is how often expired records are swept (0: never).
	SweepEvery time.Duration
}

// Open opens the store that o names; ctx bounds connecting and migrating.
func Open(ctx context.Context, o Options) (Store, error) {
	switch o.Driver {
	case "", DriverSQLite:
		return OpenSQLite(o.Path, o.SweepEvery)
	case DriverPostgres:
		return OpenPostgres(ctx, o.DSN, o.SweepEvery)
	}
	return nil, fmt.Errorf("store: unknown driver %q: want %s or %s", o.Driver, DriverSQLite, DriverPostgres)
}

func notFound(id string) error {
	return fault.New(fault.NotFound, "no paused generation %q", id)
}

func takenOver(id string) error {
	return fault.New(fault.Conflict, "the paused generation %q was taken over by another resume, or is gone", id).
		WithInfo("GENERATION_TAKEN_OVER", map[string]string{"generation_id": id})
}

func claimedBefore(id string) error {
	return fault.New(fault.Conflict, "the paused generation %q is being resumed by another request, or was resumed", id).
		WithInfo("GENERATION_CLAIMED", map[string]string{"generation_id": id})
}
