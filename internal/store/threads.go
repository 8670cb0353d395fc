package store

import (
	"context"
	"encoding/json"
	"maps"
	"math"
	"slices"
	"time"

	"github.com/agentd/agentd/internal/fault"
)

// Thread is a stored conversation: metadata, and an ordered list of items
// that generations append to, each exactly once, as they end.
//
// At most one generation holds a thread at a time (Active): the one
// running, waiting or paused on it. Others started on it meanwhile wait in
// its queue (Queued), which the store keeps: when the active generation
// ends (Finish, ExpirePaused), the first queued one becomes active in the
// same transaction, running under a released lease, for any replica's
// Adopt to take.
type Thread struct {
	Tenant, ID string
	// Metadata is nil when it has no entry; an entry is never of an
	// empty value (a write of one removes its key, or writes none).
	Metadata  map[string]string
	CreatedAt time.Time
	// UpdatedAt is the time of the last append, UpdateThread, or change
	// of the active generation.
	UpdatedAt time.Time
	// ExpiresAt is when the thread expires whatever its retention; zero
	// for none (SweepThreads' idleBefore applies instead). Expiry takes
	// effect once the thread is free: while a generation holds it (and
	// so while any wait in its queue, which only a held thread has), it
	// is found, read, written and started on as before, for those
	// generations to load it and end on it; once free, it is NotFound and
	// swept.
	ExpiresAt time.Time
	// ItemCount is how many items it holds: the next item's N.
	ItemCount int64
	// Active is the generation that holds it; "" for none.
	Active string
	// Queued are the generations waiting for it, in the order they will
	// run (Get only; nil in List's results).
	Queued []string
}

// ThreadItem is one message of a thread, as the caller encodes it (sealed):
// written once, never rewritten.
type ThreadItem struct {
	// ID identifies the item for the caller (and binds its seal): a fork
	// copies it unchanged, as it copies Generation and CreatedAt.
	ID string
	// N is its position, from 0.
	N int64
	// Generation is the generation that appended it; "" for an item given
	// to CreateThread or copied by a fork from one.
	Generation string
	Data       []byte
	CreatedAt  time.Time
}

// NewThread is what CreateThread records.
type NewThread struct {
	Tenant, ID string
	Metadata   map[string]string
	ExpiresAt  time.Time
	// Items start the thread, numbered from 0.
	Items []ThreadItem
	// MaxThreads, when above 0, refuses the thread with Exhausted if the
	// tenant has that many already. MaxItems, when above 0, refuses Items
	// longer than it with Exhausted.
	MaxThreads, MaxItems int64
	Now                  time.Time
}

// ThreadUpdate is what UpdateThread changes.
type ThreadUpdate struct {
	// Metadata replaces the thread's metadata when Replace; otherwise its
	// entries are merged in, an empty value removing its key.
	Metadata map[string]string
	Replace  bool
	// ExpiresAt, when SetExpiry, replaces the expiry (zero: none).
	ExpiresAt time.Time
	SetExpiry bool
	Now       time.Time
}

// ThreadListOptions selects a page of ListThreads.
type ThreadListOptions struct {
	// Metadata keeps the threads whose metadata has every one of these
	// entries.
	Metadata  map[string]string
	PageSize  int
	PageToken string
}

// ItemRange selects a page of ThreadItems: the items numbered after
// After (-1: from the first; the zero value starts after item 0) and
// before Before (0 or less: to the last), up to Limit of them
// (MaxReadEvents when 0 or less, at most MaxReadEvents), oldest first, or
// newest first when Desc (the last ones of the range).
type ItemRange struct {
	After, Before int64
	Limit         int
	Desc          bool
}

// Multitask says what a start on a thread that another generation holds
// does (ThreadStart).
type Multitask int

// The multitask strategies.
const (
	// Reject refuses the start: FailedPrecondition, ThreadBusy.
	Reject Multitask = iota
	// Enqueue queues it behind the active generation and those queued.
	Enqueue
	// Interrupt marks the active generation interrupted (its owner
	// cancels it: Interrupted) and queues the start ahead of the others.
	Interrupt
)

// ThreadStart puts a generation that Create records on a thread.
type ThreadStart struct {
	ID        string
	Multitask Multitask
	// MaxItems, when above 0, refuses the start with Exhausted if the
	// thread holds that many items already.
	MaxItems int64
	// KeepInput is what the thread keeps of the generation when its
	// pause runs out while it holds the thread (ExpirePaused), as
	// on_failure KEEP_INPUT keeps its input however it ends: the
	// request's messages, as thread items the caller sealed, in order
	// (their N ignored, as ThreadAppend's). Create stores them with the
	// generation, which keeps them until it is removed; Finish does not
	// read them (its Outcome.Thread is what it appends). Empty: nothing.
	KeepInput []ThreadItem
}

// ThreadAppend is what Finish appends to the thread of the generation it
// ends (when the generation holds it): Items, numbered by the store from
// the thread's ItemCount on, their N ignored.
type ThreadAppend struct {
	Items []ThreadItem
}

// Interruption is a generation that a start on its thread interrupted
// (Multitask Interrupt), as Interrupted lists it.
type Interruption struct {
	Tenant, ID string
	State      State
	// Owner holds its lease, or held it until it lapsed; "" when
	// released.
	Owner string
	// Cancel says it was asked to cancel (Generations.Cancel), for
	// Reason, rather than interrupted by a start on its thread.
	Cancel bool
	Reason string
}

// Threads stores threads and their items. All methods are safe for
// concurrent use, by this process and by other replicas sharing the
// database. Threads are scoped to a tenant: another tenant's thread is
// NotFound, like one that does not exist, and so is an expired one that
// no generation holds (Thread.ExpiresAt): expired by the time the write
// says (Now), or by the store's clock for the reads and DeleteThread,
// which take no time.
type Threads interface {
	// CreateThread records a new thread with its first items. Conflict if
	// the tenant has a thread of that id.
	CreateThread(ctx context.Context, t NewThread) (Thread, error)

	// GetThread returns the thread, with its queue.
	GetThread(ctx context.Context, tenant, id string) (Thread, error)

	// ListThreads returns a page of tenant's threads, newest first (by
	// creation, then id), and the next page's token ("" after the last);
	// a token it did not return is Invalid.
	ListThreads(ctx context.Context, tenant string, o ThreadListOptions) (page []Thread, next string, err error)

	// ThreadItems returns the items of the range, in its order.
	ThreadItems(ctx context.Context, tenant, id string, r ItemRange) ([]ThreadItem, error)

	// UpdateThread changes the thread's metadata or expiry and returns it
	// as updated.
	UpdateThread(ctx context.Context, tenant, id string, u ThreadUpdate) (Thread, error)

	// DeleteThread removes the thread, its items and metadata, and its
	// generations (every one Create put on it, live or finished, queued
	// or not) with their logs, items, agents, requests, decisions and
	// paused checkpoints, and returns how many items and generations it
	// removed. A live generation's owner finds its next write refused
	// (Conflict).
	DeleteThread(ctx context.Context, tenant, id string) (items, generations int64, err error)

	// ForkThread records a new thread, newID, with metadata (the forked
	// thread's when it has no entry) and the items of thread id numbered
	// up to upTo, that one included (-1: all of them), copied with their
	// ids, data, generations and times; it has no expiry and holds no
	// generation. Conflict if the tenant has a thread newID. The
	// tenant's maxThreads applies as in CreateThread.
	ForkThread(ctx context.Context, tenant, id, newID string, upTo int64, metadata map[string]string, maxThreads int64, now time.Time) (Thread, error)

	// Interrupted returns up to limit live generations, of any tenant,
	// that a start on their thread interrupted, or that were asked to
	// cancel (Generations.Cancel), and that owner is to cancel: those
	// whose lease it holds, and the Paused ones whose lease is released,
	// or has lapsed by the store's clock, which any replica may take
	// (Acquire) to cancel. Those that another replica is to
	// cancel are left out, never filling owner's page; the page is in
	// the order of their lease's expiry, then tenant and id. One is
	// listed until it has finished.
	Interrupted(ctx context.Context, owner string, limit int) ([]Interruption, error)

	// SweepThreads removes, as DeleteThread does, the threads that expired
	// by now, and, when idleBefore is not zero, those without an expiry
	// unchanged since before idleBefore, unless a generation holds them,
	// and returns how many. It removes them in transactions of at most
	// SweepBatch threads each, until none is left or ctx ends: a backlog
	// larger than one sweep can remove is removed over several, each
	// keeping what the ones before it removed. When ctx ends first it
	// returns how many it removed with ctx's error. Replicas may sweep at
	// once.
	SweepThreads(ctx context.Context, now, idleBefore time.Time) (int, error)
}

// SweepBatch is the most threads that one of SweepThreads' transactions
// removes, with their items and generations: few enough that one ends in
// well under Timeout.
const SweepBatch = 100

// sweepBatches removes, with sweep, batches of threads until one is not
// full, or ctx ends, and returns how many it removed.
func sweepBatches(ctx context.Context, sweep func() (int, error)) (int, error) {
	total := 0
	for {
		n, err := sweep()
		total += n
		if err != nil || n < SweepBatch {
			return total, err
		}
		if err := ctx.Err(); err != nil {
			return total, fault.Hide(fault.Unavailable, err, "the state store's sweep of threads ran out of time")
		}
	}
}

// ThreadBusy is the ErrorInfo reason of a start refused because another
// generation holds the thread; its metadata names the generation.
const ThreadBusy = "THREAD_BUSY"

func noThread(id string) error {
	return fault.New(fault.NotFound, "no thread %q", id)
}

func threadBusy(thread, gen string) error {
	return fault.New(fault.FailedPrecondition, "the thread %q is held by the generation %q; start with multitask enqueue or interrupt, or wait for it to end", thread, gen).
		WithInfo(ThreadBusy, map[string]string{"thread_id": thread, "generation_id": gen})
}

func threadExists(id string) error {
	return fault.New(fault.Conflict, "a thread %q exists already", id).
		WithInfo("THREAD_EXISTS", map[string]string{"thread_id": id})
}

// tooManyThreads and tooManyItems refuse what a tenant's limits do not
// allow.
func tooManyThreads(tenant string, limit int64) error {
	e := fault.New(fault.Exhausted, "the tenant has %d threads, its limit (max_threads); delete some first", limit)
	e.Quota = []fault.QuotaViolation{{Subject: "tenant:" + tenant, Description: "limits.max_threads"}}
	return e
}

func tooManyItems(tenant, thread string, limit int64) error {
	e := fault.New(fault.Exhausted, "the thread %q holds %d items or more, its limit (max_thread_items); fork or start a new thread", thread, limit)
	e.Quota = []fault.QuotaViolation{{Subject: "tenant:" + tenant, Description: "limits.max_thread_items"}}
	return e
}

// placement is where Create records a generation: running under its
// creator's lease (on its thread, or on none), or queued on its thread.
type placement struct {
	owner   string
	epoch   int64
	expires time.Time
	thread  string
	base    int64
	// queuePos is its place in the thread's queue; nil when it runs.
	queuePos *int64
	// behind is the generation that holds the thread, when it queues.
	behind string
	// interrupts is the active generation that it interrupts; "" for
	// none.
	interrupts string
}

// running is g's placement when it is on no thread.
func running(g NewGeneration) placement {
	return placement{owner: g.Owner, epoch: 1, expires: g.Expires}
}

// holds says whether the generation placed holds its thread from now.
func (p placement) holds() bool { return p.thread != "" && p.queuePos == nil }

func (p placement) created() Created {
	if p.queuePos != nil {
		return Created{State: Queued, Behind: p.behind}
	}
	return Created{State: Running, ThreadBase: p.base}
}

// place decides where g goes on its thread, which holds items items and is
// held by active ("" for none), under the thread's lock. queueEnds reads
// the first and last places of the thread's queue (0 when it is empty),
// asked only when g queues.
func place(g NewGeneration, items int64, active string, queueEnds func() (first, last int64, err error)) (placement, error) {
	ts := g.Thread
	if ts.MaxItems > 0 && items >= ts.MaxItems {
		return placement{}, tooManyItems(g.Tenant, ts.ID, ts.MaxItems)
	}
	if active == "" {
		p := running(g)
		p.thread, p.base = ts.ID, items
		return p, nil
	}
	if ts.Multitask != Enqueue && ts.Multitask != Interrupt {
		return placement{}, threadBusy(ts.ID, active)
	}
	first, last, err := queueEnds()
	if err != nil {
		return placement{}, err
	}
	p := placement{expires: queuedLease, thread: ts.ID, behind: active}
	pos := last + 1
	if ts.Multitask == Interrupt {
		pos, p.interrupts = first-1, active
	}
	p.queuePos = &pos
	return p, nil
}

// bounds is the range's numbers within bounds: the items numbered after
// after and before before, up to limit of them.
func (r ItemRange) bounds() (after, before int64, limit int) {
	after, before = max(r.After, -1), r.Before
	if before <= 0 {
		before = math.MaxInt64
	}
	return after, before, readLimit(r.Limit)
}

// forkCount is how many of a thread's count items a fork up to upTo
// copies.
func forkCount(count, upTo int64) int64 {
	if upTo < 0 {
		return count
	}
	return min(count, upTo+1)
}

// threadPos is a thread's place in ListThreads' order.
func threadPos(t Thread) pagePos { return pagePos{t.CreatedAt.UnixMilli(), t.ID} }

// entries are a metadata map's entries, by key, without those of an empty
// value (which is no entry).
func entries(m map[string]string) (keys, values []string) {
	for _, k := range slices.Sorted(maps.Keys(m)) {
		if m[k] != "" {
			keys, values = append(keys, k), append(values, m[k])
		}
	}
	return keys, values
}

// metadataOf is m without its empty values; nil when it has none.
func metadataOf(m map[string]string) map[string]string {
	keys, values := entries(m)
	if len(keys) == 0 {
		return nil
	}
	out := make(map[string]string, len(keys))
	for i, k := range keys {
		out[k] = values[i]
	}
	return out
}

// decodeThreadLists decodes the metadata (a JSON object) and queue (a
// JSON array; nil for none) that the stores read with a thread, each nil
// when empty.
func decodeThreadLists(t *Thread, metadata, queued []byte) error {
	if len(metadata) > 0 {
		if err := json.Unmarshal(metadata, &t.Metadata); err != nil {
			return err
		}
	}
	if len(queued) > 0 {
		if err := json.Unmarshal(queued, &t.Queued); err != nil {
			return err
		}
	}
	t.Metadata = metadataOf(t.Metadata)
	if len(t.Queued) == 0 {
		t.Queued = nil
	}
	return nil
}
