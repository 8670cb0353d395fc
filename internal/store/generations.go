package store

import (
	"context"
	"crypto/sha256"
	"encoding/base64"
	"errors"
	"fmt"
	"io"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/agentd/agentd/internal/fault"
)

// State is where a durable generation is in its life.
type State string

// The states of a generation. Running, Waiting and Paused are live: their
// record takes checkpoints and events. Completed, Failed and Cancelled are
// finished: the record keeps its result and event log, unchanged, until it
// is swept.
const (
	// Running: its owner is working on it (a model turn, tool calls).
	Running State = "running"
	// Waiting: its owner waits on the client (an approval, a function
	// result) and keeps the lease meanwhile.
	Waiting State = "waiting"
	// Paused: nobody works on it; a resume acquires it. Adopt passes it
	// over; ExpirePaused cancels it once its pause has expired.
	Paused State = "paused"
	// Queued: it waits behind another generation that holds its thread
	// (ThreadStart, Enqueue or Interrupt); nobody may acquire or adopt it
	// until the store makes it Running, under a released lease, as the
	// one ahead ends.
	Queued State = "queued"
	// Completed, Failed, Cancelled: it has ended (Finish).
	Completed State = "completed"
	Failed    State = "failed"
	Cancelled State = "cancelled"
)

// Finished reports whether s is one of the states a generation ends in.
func (s State) Finished() bool {
	return s == Completed || s == Failed || s == Cancelled
}

func (s State) live() bool { return s == Running || s == Waiting || s == Paused }

// Lease is a replica's ownership of a generation: while it holds the
// lease, only it writes the generation's record and log.
type Lease struct {
	// Owner is the holder's replica id; "" once the lease is released
	// (Release, Finish).
	Owner string
	// Epoch is the fencing token: it grows by one on every acquisition
	// (Acquire, Adopt; Create's is 1), and every write names it. A write
	// that names an older epoch, or a released lease's, is refused.
	Epoch int64
	// Expires is when the lease lapses unless renewed; for a released
	// lease, when it was released.
	Expires time.Time
}

// Generation is the stored record of a durable generation.
type Generation struct {
	Tenant string
	ID     string
	State  State
	// Lease is the zero Lease while the generation is Queued; its epoch
	// is 0 until a replica first takes it (Adopt, Acquire) once it runs.
	Lease Lease
	// Checkpoint is the latest checkpoint, opaque to the store: nil in
	// List's results, and empty once the generation has finished.
	Checkpoint []byte
	// Version counts the checkpoints written: 1 after Create, one more
	// with each Checkpoint.
	Version int64
	// CheckpointSeq is the log's last sequence number when the checkpoint
	// was written (its own events included): events after it were
	// appended since, by a turn the checkpoint does not hold.
	CheckpointSeq int64
	// LastSeq is the sequence number of the log's last event (0: none).
	LastSeq int64
	// Result is the finished generation's summary, opaque to the store;
	// nil while it is live.
	Result    []byte
	CreatedAt time.Time
	// UpdatedAt is the time of the last Create, Checkpoint or Finish
	// (lease operations and Append leave it).
	UpdatedAt time.Time
	// FinishedAt is when Finish ended it; zero while it is live.
	FinishedAt time.Time
	// Thread is the thread Create put it on ("" for none), and ThreadBase
	// the number of the thread's items its conversation starts with: the
	// thread's ItemCount when it became active (0 while Queued).
	Thread     string
	ThreadBase int64
	// Interrupted says a start on its thread interrupted it: its owner
	// cancels it (Interrupted lists it).
	Interrupted bool
	// Origin is what Create recorded of its start.
	Origin Origin
}

// Event is one entry of a generation's event log. Its Kind and Data are
// the caller's: the store keeps them as given and never reads them.
//
// The log is append-only and is never rewritten: a model turn cut short
// by a crash, whose events a client may have seen in part, is withdrawn
// by appending an event that says so (of a kind the caller chooses, its
// data naming the first sequence number withdrawn, e.g. the adopted
// record's CheckpointSeq+1), so that a client replaying the log from any
// point sees the same thing as one that watched it live: the partial
// turn, then its withdrawal.
type Event struct {
	// Seq is the event's sequence number in its generation's log: 1, 2,
	// ..., assigned by the store. Ignored on append, but for the first
	// event of a write: a number beyond the log's next makes the log skip
	// to it (the numbers between are never used; see skipTo).
	Seq  int64
	Kind string
	Data []byte
}

// Item is one entry of a generation's conversation, as the caller
// encodes it: numbered by the caller from 0, written once with the write
// that adds it, never rewritten. A write that names an item the store has
// already (a retry of a write that took) leaves it as it is.
type Item struct {
	N    int64
	Data []byte
}

// NewGeneration is what Create records.
type NewGeneration struct {
	Tenant, ID string
	// Owner is the creating replica's id; it holds the first lease (epoch
	// 1) until Expires.
	Owner   string
	Expires time.Time
	// Checkpoint is the first checkpoint (version 1).
	Checkpoint []byte
	// Agent is the generation's agent.
	Agent []byte
	// Events start the log (sequence numbers from 1), in the same
	// transaction.
	Events []Event
	// Items start the conversation, in the same transaction.
	Items []Item
	// Origin says who started it, for whom, and on what.
	Origin Origin
	// Thread, when not nil, puts it on a thread of the tenant (NotFound if
	// there is none). If no generation holds the thread, it does now, and
	// Create returns the thread's ItemCount as the generation's base.
	// Otherwise Thread.Multitask decides: Reject fails with
	// FailedPrecondition (reason ThreadBusy, naming the active
	// generation); Enqueue and Interrupt record it Queued, without a
	// lease (Owner and Expires are ignored), and Create returns Queued.
	Thread *ThreadStart
	Now    time.Time
}

// Created is what Create returns: the state the generation was recorded
// in (Running, or Queued behind its thread's active generation), and its
// thread base when Running on a thread.
type Created struct {
	State      State
	ThreadBase int64
	// Behind, when Queued, is the generation that held the thread as
	// Create queued this one, read in the same transaction.
	Behind string
}

// Checkpoint is what a fenced Checkpoint writes, in one transaction.
type Checkpoint struct {
	// State is Running, Waiting or Paused.
	State State
	// Data, when not nil, replaces the checkpoint; nil keeps the one
	// stored, and its CheckpointSeq (a change of state alone).
	Data []byte
	// Agent, when not nil, replaces the generation's agent.
	Agent []byte
	// Events are appended with it; the checkpoint covers them.
	Events []Event
	// After are appended after Events, in the same transaction; the
	// checkpoint does not cover them (CheckpointSeq is Events' last).
	After []Event
	// Items are added to the conversation, in the same transaction.
	Items []Item
	// ReplacePending replaces the generation's pending requests with
	// Pending, in the same transaction; false leaves them as they are.
	ReplacePending bool
	Pending        []PendingRequest
	Now            time.Time
}

// Outcome is what Finish writes, in one transaction.
type Outcome struct {
	// State is Completed, Failed or Cancelled.
	State State
	// Result is kept until the generation is swept.
	Result []byte
	// Events close the log.
	Events []Event
	// Items end the conversation, in the same transaction.
	Items []Item
	// Thread is appended to the generation's thread, in the same
	// transaction, when the generation holds it (nil appends nothing,
	// whatever the generation's ThreadStart.KeepInput).
	// Whether or not it does, a generation that holds its thread gives it
	// up, and the first one queued becomes active. A retried Finish
	// appends nothing more.
	Thread *ThreadAppend
	Now    time.Time
}

// ListOptions selects a page of List: each filter given narrows it.
type ListOptions struct {
	// States keeps the generations in one of these states (empty: all),
	// Queued among them.
	States []State
	// Provider, Model, EndUser and Thread keep the generations whose
	// Origin (or thread) has exactly that value.
	Provider, Model, EndUser, Thread string
	// CreatedAfter and CreatedBefore keep the generations created at or
	// after the one and before the other (the zero time: no bound).
	CreatedAfter, CreatedBefore time.Time
	// PageSize is the most generations a page holds: DefaultPageSize
	// when 0 or less, at most MaxPageSize.
	PageSize int
	// PageToken continues from the page that returned it ("" for the
	// first page).
	PageToken string
}

// The bounds of a page of List and of one Read.
const (
	DefaultPageSize = 50
	MaxPageSize     = 1000
	MaxReadEvents   = 1000
)

// Generations stores durable generations and their event logs. All
// methods are safe for concurrent use, by this process and
// by other replicas sharing the database. Times come from the caller and
// are kept to the millisecond; replicas that share a store compare their
// clocks through it (a lease one replica set expires by another's clock),
// so their clocks must agree to well within a lease's length.
//
// Every write to a live generation (Renew, Release, Checkpoint, Append,
// Finish) names the epoch of the lease it holds and is refused with
// Conflict when the generation is no longer under that lease: another
// replica acquired it since (a higher epoch), the lease was released, the
// generation finished, or there is no such generation of that tenant. A
// refused write changes nothing. The epoch alone fences: a lease that
// expired but that nobody has acquired since is still its holder's.
//
// An Unavailable error may follow a write that committed (the connection
// broke while the commit was under way). Finish is safe to retry; a
// retried Create fails with Conflict if the first took (Get tells); a
// writer that retries an Append, or a Checkpoint with events, logs them
// twice if the first took, unless it reads the log's tail first.
type Generations interface {
	// Create records a new running generation under a lease held by
	// g.Owner (epoch 1), with its first checkpoint, events and items, or
	// a queued one (NewGeneration.Thread). It fails with Conflict if the
	// tenant has a generation of that id.
	Create(ctx context.Context, g NewGeneration) (Created, error)

	// Acquire takes the lease of a live generation whose lease is
	// released or expired by now, for owner until expires, with the next
	// epoch, and returns the record so acquired. It fails with NotFound
	// if the tenant has no such generation, and with Conflict if another
	// holds a lease that has not expired, the generation has finished,
	// or it is Queued (reason GENERATION_QUEUED). Of concurrent Acquires (and Adopts) of one generation, exactly one
	// succeeds.
	Acquire(ctx context.Context, tenant, id, owner string, now, expires time.Time) (Generation, error)

	// Renew extends the lease of the given epoch to expires.
	Renew(ctx context.Context, tenant, id string, epoch int64, expires time.Time) error

	// Release gives up the lease of the given epoch at now, leaving the
	// state as it is: a running or waiting generation can be adopted at
	// once, a paused one acquired by a resume.
	Release(ctx context.Context, tenant, id string, epoch int64, now time.Time) error

	// Checkpoint replaces the state and checkpoint of a live generation
	// under the lease of the given epoch, appends c.Events, then c.After,
	// and adds c.Items, all or nothing. It returns the log's last sequence number
	// (the events are numbered up to it, in that order).
	Checkpoint(ctx context.Context, tenant, id string, epoch int64, c Checkpoint) (last int64, err error)

	// Finish ends a generation under the lease of the given epoch: it
	// sets o.State and o.Result, appends o.Events, adds o.Items, drops the checkpoint, the agent
	// and the pending requests and releases the lease, all or nothing. It returns the log's last
	// sequence number. Finishing again under the same epoch with the same
	// state (a retry) is no error and changes nothing.
	Finish(ctx context.Context, tenant, id string, epoch int64, o Outcome) (last int64, err error)

	// Get returns tenant's generation id, or NotFound: another tenant's
	// is not found either, with the same error.
	Get(ctx context.Context, tenant, id string) (Generation, error)

	// List returns a page of tenant's generations, newest first (by
	// creation, then by id), without their checkpoints, and the token of
	// the next page ("" after the last). Generations created after the
	// first page was read may be missing from the pages that follow; none
	// is returned twice. A token that List did not return is Invalid, and
	// so is one that List returned for other filters (o's fields but its
	// PageSize and PageToken).
	List(ctx context.Context, tenant string, o ListOptions) (page []Generation, next string, err error)

	// Adopt takes up to limit running or waiting generations, of any
	// tenant, whose leases are released or expired by now (their owners
	// died, or gave them up), or whose owner is known dead, for owner
	// until expires, each with its next epoch; the oldest expiries first.
	// It returns the records so acquired. Of adopters running at once, on
	// any replicas, each generation goes to exactly one.
	//
	// An owner is known dead, whatever its leases say, when it attended
	// (Attend) and its liveness is gone without its attendance closing:
	// its process ended (SIGKILL, OOM, the machine lost). Only an adopter
	// that attends itself, through this store, asks: from its second
	// Adopt on the same liveness (one taken up again after a store outage
	// waits one Adopt more, for the others to take theirs up too). A
	// replica that is alive keeps its liveness, stopped (SIGSTOP) or not,
	// and so do the generations of a replica that attends again under the
	// same id: they are adopted once their leases lapse, and their
	// owner's later writes are fenced by the epoch as always. Asking
	// costs one read of the replicas attending, and their locks; more
	// only when one of them died.
	Adopt(ctx context.Context, owner string, now, expires time.Time, limit int) ([]Generation, error)

	// Attend holds owner's liveness, for other replicas' Adopt to know
	// when owner dies, until the returned Closer's Close (which a replica
	// calls as it stops, after its generations are released; idempotent;
	// before the store's Close). Its process holds a lock that ends with
	// it (PostgreSQL: a session-level advisory lock, in a connection of
	// its own that is watched and, if it breaks, taken again; SQLite: a
	// file lock in the directory <database>.replicas), and the replicas
	// table lists owner. A replica attends before it creates or acquires
	// any generation. It fails with Conflict if owner attends already,
	// here or in a live process elsewhere, once ctx ends. Renewing a lease
	// costs nothing more for it.
	Attend(ctx context.Context, owner string) (io.Closer, error)

	// Append adds events to the log of a live generation under the lease
	// of the given epoch, all or nothing, with the next sequence numbers,
	// and returns the last (events[i] has last-len(events)+1+i; with no
	// events, the log's last). Concurrent appends are each given a run
	// of consecutive numbers, in their order.
	Append(ctx context.Context, tenant, id string, epoch int64, events []Event) (last int64, err error)

	// Agent returns the agent of tenant's live generation id as Create or
	// the last Checkpoint that gave one wrote it; none once it has
	// finished. An unknown generation, or another tenant's, is NotFound.
	Agent(ctx context.Context, tenant, id string) ([]byte, error)

	// Items returns up to limit items of tenant's generation id numbered
	// after after (-1 for the first), in order (limit: MaxReadEvents when
	// 0 or less, at most MaxReadEvents). An unknown generation, or
	// another tenant's, is NotFound.
	Items(ctx context.Context, tenant, id string, after int64, limit int) ([]Item, error)

	// Read returns up to limit events of tenant's generation id after
	// sequence number after, in order (limit: MaxReadEvents when 0 or
	// less, at most MaxReadEvents). Events become visible in order: a
	// Read never returns an event while one before it is missing. An
	// unknown generation, or another tenant's, is NotFound.
	Read(ctx context.Context, tenant, id string, after int64, limit int) ([]Event, error)

	// ExpirePaused ends the paused generations, of any tenant, whose pause
	// ran out unresumed, and returns how many. One ends when its lease is
	// released (no resume has acquired it) and its paused checkpoint in
	// the same database's Checkpoints, which decides whether a resume may
	// take it, has expired by now unclaimed, or is gone (swept). It
	// becomes Cancelled, finished at now with result, its checkpoint
	// dropped with its pending requests, its log and epoch kept: as Finish leaves a generation, so
	// that Sweep removes it after the retention. It takes no lease and
	// does not race a resume: of it and an Acquire of one generation,
	// exactly one takes effect (an Acquire after it finds the generation
	// finished, Conflict; one before it holds a lease, and the generation
	// is left). Replicas may run it at once; a generation ends once. One
	// that held its thread gives it up as Finish does, appending the
	// ThreadStart.KeepInput it was created with (nothing without), as its
	// own items (their Generation its id).
	ExpirePaused(ctx context.Context, now time.Time, result []byte) (int, error)

	// Cancel asks that tenant's generation id, which has not finished,
	// end Cancelled for reason, and returns its record as it is after. A
	// queued one ends at once, as Finish ends one (with result, at now,
	// its checkpoint, agent and pending requests dropped), leaving its
	// thread's queue: it never held the thread, which keeps nothing of it.
	// Any other is marked: Interrupted lists it, with the reason, to the
	// holder of its lease, or, paused under a released or lapsed lease,
	// to any replica, which cancels it. A second Cancel keeps the first's
	// reason. One that has finished is FailedPrecondition (reason
	// GENERATION_FINISHED); an unknown generation, or another tenant's,
	// NotFound.
	Cancel(ctx context.Context, tenant, id, reason string, result []byte, now time.Time) (Generation, error)

	// Sweep removes the generations, of any tenant, that finished at or
	// before before, with their logs, items and decisions, and returns how many. Replicas may
	// sweep at once.
	Sweep(ctx context.Context, before time.Time) (int, error)

	// ListPending returns a page of tenant's pending requests, of its
	// live generations, newest first (by the time they were asked, then
	// by generation and request id), each with its generation's Origin,
	// and the token of the next page ("" after the last). A token that
	// ListPending did not return is Invalid.
	ListPending(ctx context.Context, tenant string, o PendingOptions) (page []PendingRequest, next string, err error)

	// Decide records ds, decisions of requests of tenant's generation id,
	// all or none: only if each names a request that the generation's
	// pending requests list, and none has a decision yet. When some have,
	// it records nothing and returns theirs (the first decisions, in ds's
	// order); a request that is not pending (never was, or no longer is,
	// or another tenant's) is NotFound, and nothing is recorded. Of
	// concurrent Decides of one request, on any replicas, exactly one
	// records it; a decision, once recorded, stays until the generation
	// is swept, or its caller withdraws it (Undecide).
	Decide(ctx context.Context, tenant, id string, ds []Decision) (first []Decision, err error)

	// Undecide withdraws the decisions of tenant's generation id's requests
	// requestIDs, for a decision that could not be applied and left its
	// request waiting (an authorization whose code was refused): the
	// request may then be decided again. Withdrawing none is no error.
	Undecide(ctx context.Context, tenant, id string, requestIDs []string) error

	// Decisions returns the decisions recorded for tenant's generation id
	// of the requests requestIDs (every one of its decisions when nil),
	// by request id. An unknown generation has none.
	Decisions(ctx context.Context, tenant, id string, requestIDs []string) ([]Decision, error)
}

// whyNotAcquired says why an Acquire matched no row, from the state that
// the generation has now (or the error of reading it).
func whyNotAcquired(id string, state State, err, noRows error, classify func(error) error) error {
	switch {
	case errors.Is(err, noRows):
		return noGeneration(id)
	case err != nil:
		return classify(err)
	case state.Finished():
		return generationFinished(id)
	case state == Queued:
		return generationQueued(id)
	}
	return leaseHeld(id)
}

// storedState is the State of a generation stored in state, queued or
// not: a queued generation is stored running, with its place in its
// thread's queue.
func storedState(state string, queued bool) State {
	if queued {
		return Queued
	}
	return State(state)
}

// queuedLease is the lease expiry a queued generation is stored with:
// the end of time, which no Adopt reaches.
var queuedLease = time.Date(9999, 12, 31, 0, 0, 0, 0, time.UTC)

// generationColumns lists a generation's columns, each after prefix, in
// the order that the stores scan them; with leave, the checkpoint is that
// expression (NULL) rather than the column, for List to leave it out.
func generationColumns(prefix, leave string) string {
	cols := []string{"tenant", "id", "state", "owner", "epoch", "lease_expires", "version", "checkpoint",
		"checkpoint_seq", "last_seq", "result", "created_at", "updated_at", "finished_at",
		"thread_id", "thread_base", "queue_pos", "interrupted",
		"started_by", "end_user", "provider", "model", "trace_id"}
	for i, c := range cols {
		if c == "checkpoint" && leave != "" {
			cols[i] = leave
			continue
		}
		cols[i] = prefix + c
	}
	return strings.Join(cols, ", ")
}

func noGeneration(id string) error {
	return fault.New(fault.NotFound, "no generation %q", id)
}

func leaseLost(id string) error {
	return fault.New(fault.Conflict, "the generation %q is no longer under this lease (another replica took it over, or it was released, finished or is gone)", id).
		WithInfo("GENERATION_LEASE_LOST", map[string]string{"generation_id": id})
}

func leaseHeld(id string) error {
	return fault.New(fault.Conflict, "the generation %q is held by another replica", id).
		WithInfo("GENERATION_LEASED", map[string]string{"generation_id": id})
}

func generationFinished(id string) error {
	return fault.New(fault.Conflict, "the generation %q has finished", id).
		WithInfo("GENERATION_FINISHED", map[string]string{"generation_id": id})
}

// generationEnded refuses to cancel a generation that has finished.
func generationEnded(id string) error {
	return fault.New(fault.FailedPrecondition, "the generation %q has ended", id).
		WithInfo("GENERATION_FINISHED", map[string]string{"generation_id": id})
}

func generationQueued(id string) error {
	return fault.New(fault.Conflict, "the generation %q is queued behind the generation that holds its thread", id).
		WithInfo("GENERATION_QUEUED", map[string]string{"generation_id": id})
}

func generationExists(id string) error {
	return fault.New(fault.Conflict, "a generation %q exists already", id).
		WithInfo("GENERATION_EXISTS", map[string]string{"generation_id": id})
}

// checkState refuses s unless ok, saying which states are wanted.
func checkState(s State, ok bool, want string) error {
	if !ok {
		return fault.New(fault.Invalid, "store: state %q: want %s", s, want)
	}
	return nil
}

func checkLive(s State) error {
	return checkState(s, s.live(), "running, waiting or paused")
}

// checkCheckpoint refuses a Checkpoint the contract refuses: a state not
// live, or pending requests it refuses.
func checkCheckpoint(c Checkpoint) error {
	if err := checkLive(c.State); err != nil {
		return err
	}
	return checkPending(c.Pending)
}

func checkFinished(s State) error {
	return checkState(s, s.Finished(), "completed, failed or cancelled")
}

func checkListStates(states []State) error {
	for _, s := range states {
		if err := checkState(s, s.live() || s.Finished() || s == Queued, "a generation's state"); err != nil {
			return err
		}
	}
	return nil
}

// stateCondition is List's condition on the states (not empty), each
// state's value bound by param, which returns its placeholder: Running
// and Queued are stored alike, told apart by the place in the queue.
func stateCondition(states []State, param func(v any) string) string {
	or := make([]string, len(states))
	for i, s := range states {
		switch s {
		case Running:
			or[i] = "(state = 'running' AND queue_pos IS NULL)"
		case Queued:
			or[i] = "queue_pos IS NOT NULL"
		default:
			or[i] = "state = " + param(string(s))
		}
	}
	return "(" + strings.Join(or, " OR ") + ")"
}

// pageSize is o's page size within bounds.
func pageSize(n int) int {
	switch {
	case n <= 0:
		return DefaultPageSize
	case n > MaxPageSize:
		return MaxPageSize
	}
	return n
}

// readLimit is Read's limit within bounds.
func readLimit(n int) int {
	if n <= 0 || n > MaxReadEvents {
		return MaxReadEvents
	}
	return n
}

// A page token is the position of the page's last generation in List's
// order: its creation (unix milliseconds) and id.
type pagePos struct {
	created int64
	id      string
}

func (p pagePos) token() string {
	return base64.RawURLEncoding.EncodeToString(fmt.Appendf(nil, "%d.%s", p.created, p.id))
}

func parsePageToken(tok string) (pos pagePos, ok bool, err error) {
	if tok == "" {
		return pagePos{}, false, nil
	}
	invalid := fault.New(fault.Invalid, "store: the page token is not one that the list returned")
	b, err := base64.RawURLEncoding.DecodeString(tok)
	if err != nil {
		return pagePos{}, false, invalid
	}
	ms, id, found := strings.Cut(string(b), ".")
	created, err := strconv.ParseInt(ms, 10, 64)
	if !found || err != nil {
		return pagePos{}, false, invalid
	}
	return pagePos{created, id}, true, nil
}

// nextToken is the token after page, of which the store read one more row
// than size to know whether another page follows; it trims page to size.
// pos is a row's place in the order.
func nextToken[T any](page []T, size int, pos func(T) pagePos) ([]T, string) {
	if len(page) <= size {
		return page, ""
	}
	page = page[:size]
	return page, pos(page[size-1]).token()
}

// generationPos is a generation's place in List's order.
func generationPos(g Generation) pagePos { return pagePos{g.CreatedAt.UnixMilli(), g.ID} }

// A page token of List is bound to the filters it was made with: the
// position's token, then, when o has filters, a dot and their digest, so
// that a token used with other filters is refused rather than continuing
// a list it is no place in.

// filterDigest names o's filters (its states in any order); "" for none.
func (o ListOptions) filterDigest() string {
	f := o.filters()
	if f == noFilters {
		return ""
	}
	sum := sha256.Sum256([]byte(f))
	return base64.RawURLEncoding.EncodeToString(sum[:9])
}

// filters writes o's filters out, the same for the same filters.
func (o ListOptions) filters() string {
	states := make([]string, len(o.States))
	for i, st := range o.States {
		states[i] = string(st)
	}
	slices.Sort(states)
	return fmt.Sprintf("%q %q %q %q %q %d %d", states, o.Provider, o.Model, o.EndUser, o.Thread, unixMilli(o.CreatedAfter), unixMilli(o.CreatedBefore))
}

var noFilters = ListOptions{}.filters()

// unixMilli is t in unix milliseconds; 0 for the zero time.
func unixMilli(t time.Time) int64 {
	if t.IsZero() {
		return 0
	}
	return t.UnixMilli()
}

// parseListToken reads a token of List made with o's filters.
func parseListToken(o ListOptions) (pos pagePos, ok bool, err error) {
	if o.PageToken == "" {
		return pagePos{}, false, nil
	}
	tok, digest, _ := strings.Cut(o.PageToken, ".")
	if digest != o.filterDigest() {
		return pagePos{}, false, fault.New(fault.Invalid, "store: the page token was made for other filters")
	}
	return parsePageToken(tok)
}

// nextListPage is nextToken for a page of List made with o's filters.
func nextListPage(page []Generation, size int, o ListOptions) ([]Generation, string) {
	page, next := nextToken(page, size, generationPos)
	if d := o.filterDigest(); next != "" && d != "" {
		next += "." + d
	}
	return page, next
}

// listConditions are List's conditions beyond the tenant, each preceded
// by AND, for a store to write in its dialect: param binds a value and
// returns its placeholder, at converts a time (unix milliseconds) to the
// store's. A page after the first (after) starts after pos.
func listConditions(o ListOptions, pos pagePos, after bool, param func(v any) string, at func(ms int64) any) string {
	var conds []string
	if len(o.States) > 0 {
		conds = append(conds, stateCondition(o.States, param))
	}
	conds = append(conds, originConditions(o, param)...)
	if !o.CreatedAfter.IsZero() {
		conds = append(conds, "created_at >= "+param(at(o.CreatedAfter.UnixMilli())))
	}
	if !o.CreatedBefore.IsZero() {
		conds = append(conds, "created_at < "+param(at(o.CreatedBefore.UnixMilli())))
	}
	if after {
		conds = append(conds, "(created_at, id) < ("+param(at(pos.created))+", "+param(pos.id)+")")
	}
	var b strings.Builder
	for _, c := range conds {
		b.WriteString(" AND " + c)
	}
	return b.String()
}

// originConditions are List's exact matches: each column given a value.
func originConditions(o ListOptions, param func(v any) string) []string {
	var conds []string
	for _, f := range [...]struct{ col, v string }{
		{"provider", o.Provider}, {"model", o.Model}, {"end_user", o.EndUser}, {"thread_id", o.Thread},
	} {
		if f.v != "" {
			conds = append(conds, f.col+" = "+param(f.v))
		}
	}
	if o.Thread != "" {
		// Said outright, for SQLite to use the thread's partial index:
		// it cannot tell that a parameter is never ''.
		conds = append(conds, "thread_id <> ''")
	}
	return conds
}

// eventColumns splits events into the columns the stores insert.
func eventColumns(events []Event) (kinds []string, data [][]byte) {
	kinds = make([]string, len(events))
	data = make([][]byte, len(events))
	for i, e := range events {
		kinds[i] = e.Kind
		data[i] = e.Data
		if data[i] == nil {
			data[i] = []byte{}
		}
	}
	return kinds, data
}

// skipTo is the sequence number that a write's events follow at least:
// one before its first event's Seq. A replica that adopts a generation
// numbers its events past those that the dead one may have shown its
// clients before storing them, so that no client has seen a number of the
// log for another event.
func skipTo(events []Event) int64 {
	if len(events) == 0 || events[0].Seq <= 0 {
		return 0
	}
	return events[0].Seq - 1
}

// itemColumns splits items into the columns the stores insert.
func itemColumns(items []Item) (ns []int64, data [][]byte) {
	ns = make([]int64, len(items))
	data = make([][]byte, len(items))
	for i, it := range items {
		ns[i], data[i] = it.N, orEmpty(it.Data)
	}
	return ns, data
}

// orNull is b, or NULL for nil: a write that leaves a column as it is.
func orNull(b []byte) any {
	if b == nil {
		return nil
	}
	return b
}

// orEmpty is b, or an empty slice for nil: the stores' columns are NOT
// NULL.
func orEmpty(b []byte) []byte {
	if b == nil {
		return []byte{}
	}
	return b
}
