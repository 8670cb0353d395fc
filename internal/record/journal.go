// Package record keeps each generation's durable record in the state
// store: from its start, a record under the lease of the replica that
// runs it, with its events numbered and logged and its checkpoints (the
// journal); the encoding of those checkpoints, with the agent sealed; the
// paused checkpoints that resumes claim; following a generation's log for
// an attached stream; and the sweeper that ends expired pauses and removes
// finished generations after their retention. It depends on the store's
// contract and on callbacks of its caller, never on the service that runs
// the generations.
package record

import (
	"bytes"
	"context"
	"errors"
	"slices"
	"sync"
	"time"

	"google.golang.org/protobuf/proto"

	statev1 "github.com/agentd/agentd/gen/go/agentd/state/v1"
	agentdv1 "github.com/agentd/agentd/gen/go/agentd/v1"
	"github.com/agentd/agentd/internal/fault"
	"github.com/agentd/agentd/internal/store"
)

// How a generation's events and checkpoints reach the store: in batches,
// flushed flushEvery after the first unwritten one or once flushBytes of
// events wait, whichever comes first, and at once when a tool call is
// about to start (write-ahead: Await) or the generation ends, pauses or
// stops. A checkpoint goes in the same write as the events it covers. A
// client receives events once written, so they reach it in these batches.
// Until a checkpoint is written, a replica that adopts the generation
// continues from the one before, which is as safe: it holds less, and the
// log after it says what happened since.
const (
	flushEvery = 50 * time.Millisecond
	flushBytes = 4 << 10
)

// A store write that failed as unavailable is retried, backing off from
// retryMin to retryMax; a generation that runs keeps running meanwhile.
const (
	retryMin = 50 * time.Millisecond
	retryMax = 2 * time.Second
)

// Options say whose record a journal writes, and what it tells its
// generation.
type Options struct {
	Store  store.Generations
	Tenant string
	ID     string
	// Owner is this replica: the holder of the record's lease.
	Owner string
	// TTL is how long the lease holds without a renewal
	// (generation.lease_ttl); the journal renews it every third of it.
	TTL time.Duration
	// Stop stops the generation: its lease is lost (another replica took
	// it over), or its log no longer ends where this replica numbered it.
	Stop func(error)
	// Warn logs a store failure that the journal retries or gives up on.
	Warn func(msg string, err error)
	// Live lists the journal while it runs, for attached streams to
	// follow in memory; nil lists it nowhere.
	Live *Live
	// Origin is recorded with a generation the journal creates.
	Origin store.Origin
	// Thread puts a generation the journal creates on a thread
	// (store.NewGeneration.Thread).
	Thread *store.ThreadStart
	// ThreadAppend, when not nil, says what the generation's thread keeps
	// of it as the journal finishes its record in state: the store
	// appends it with the generation's end, once.
	ThreadAppend func(state store.State) *store.ThreadAppend
}

// Journal is a running generation's durable record and event log,
// written under the lease its replica holds. Its keeper, owned by the
// journal and joined by its end, does every write while the generation
// runs: it renews the lease every third of Options.TTL, records state
// changes, and appends events; a write the store refuses as unavailable
// is retried with backoff, and one it refuses with Conflict (the lease is
// lost: another replica took the generation over) stops the generation.
//
// Record, RecordCheckpoint, Checkpoint and SetState number and queue what
// the generation does: the caller serializes them, in the order its
// client is sent the events. Await, AwaitSeq and Lost are safe for
// concurrent use.
type Journal struct {
	o     Options
	epoch int64

	mu        sync.Mutex
	last      int64                        // the last sequence number assigned
	held      int64                        // the last one its client is sent only once stored
	confirmed int64                        // the last sequence number in the store
	pending   []store.Event                // assigned, not yet confirmed, in order
	msgs      []*agentdv1.GenerateResponse // pending's events, decoded
	bytes     int                          // the bytes pending's events will hold in the log
	snap      []byte                       // the checkpoint to write, nil when written
	items     []store.Item                 // the conversation's items to write with it
	agentDue  []byte                       // the agent to write with it, nil when the store has it
	// requests replace the generation's pending requests with the next
	// write when requestsDue; requestsN counts the replacements queued.
	requests    []store.PendingRequest
	requestsDue bool
	requestsN   int64
	agent       []byte       // the agent the store has, as this run wrote it
	conv        conversation // what is stored once, and where
	snapSeq     int64        // the last sequence number snap covers
	snapN       int64        // counts the checkpoints queued
	// finalItems are the final answer's items, for the end's write alone
	// (Final); the events after finalSeq (the completed event, which names
	// them) wait for that write too.
	finalItems []store.Item
	finalSeq   int64
	advanced   chan struct{} // closed (and replaced) when confirmed grows
	ended      chan struct{} // closed by end
	state      store.State   // the state the record should have
	written    store.State   // the state the record has
	lost       bool          // a write was refused with Conflict: write nothing more
	uncertain  bool          // an append failed as unavailable: it may have taken
	keeper     keeper        // does the writes and renewals
	started    bool
	settled    bool // Settle ran
	feed       feed // what the streams following in memory read (live.go)
}

// newJournal returns a journal, not started, for a record this replica
// creates (epoch 1).
func newJournal(o Options) *Journal {
	return &Journal{
		o: o, epoch: 1, state: store.Running, written: store.Running,
		advanced: make(chan struct{}), ended: make(chan struct{}),
	}
}

// Create records a new generation, with its first checkpoint, and starts
// its journal. A store that cannot record it fails it. The checkpoints
// that the journal is given, here and after, hold the generation's whole
// conversation; the journal takes them over, and stores each message once
// (items.go).
//
// On a thread (Options.Thread), cp holds the generation's own messages,
// and the store says how it was recorded: running, holding the thread
// (the journal runs; the caller gives it the thread's first
// Created.ThreadBase items with SetThreadBase before its next
// checkpoint), or queued behind the generation that holds it (no journal:
// the generation runs once the store makes it running, wherever it is
// adopted).
func Create(ctx context.Context, o Options, cp *statev1.Checkpoint) (*Journal, store.Created, error) {
	j := newJournal(o)
	created, err := j.create(ctx, cp)
	if err != nil || created.State == store.Queued {
		return nil, created, err
	}
	j.start()
	return j, created, nil
}

func (j *Journal) create(ctx context.Context, cp *statev1.Checkpoint) (store.Created, error) {
	items := j.conv.itemize(cp)
	j.takeAgent(cp)
	sctx, cancel := store.WriteContext(ctx)
	defer cancel()
	now := time.Now()
	created, err := j.o.Store.Create(sctx, store.NewGeneration{Tenant: j.o.Tenant, ID: j.o.ID, Owner: j.o.Owner, Expires: now.Add(j.o.TTL), Now: now,
		Checkpoint: Encode(cp), Agent: j.agentDue, Items: items, Origin: j.o.Origin, Thread: j.o.Thread})
	j.agentDue = nil
	return created, err
}

// SetThreadBase says that the conversation of the checkpoints to come
// starts with n items of the generation's thread, which the record does
// not hold again: its own items follow them.
func (j *Journal) SetThreadBase(n int64) {
	j.mu.Lock()
	defer j.mu.Unlock()
	j.conv.base = n
}

// takeAgent moves cp's agent out of it: the record keeps it beside the
// checkpoint, written when it changes (a generation's run seals it once),
// not with every checkpoint.
func (j *Journal) takeAgent(cp *statev1.Checkpoint) {
	a := cp.GetAgent()
	if len(a) == 0 {
		return
	}
	if !bytes.Equal(a, j.agent) {
		j.agentDue, j.agent = a, a
	}
	cp.Agent = nil
}

// Resume takes the record of a paused generation for its resume, or
// records it afresh if it has none (one paused before agentd kept
// records), and starts its journal with checkpoint queued: until it is
// past its paused turn, the resume's claim on the paused checkpoint
// decides what happens if it dies.
func Resume(ctx context.Context, o Options, cp *statev1.Checkpoint) (*Journal, error) {
	j := newJournal(o)
	// Its own bound: it may wait out a whole lease, longer than one store
	// call's.
	actx, cancel := context.WithTimeout(context.WithoutCancel(ctx), o.TTL+store.Timeout)
	rec, err := j.acquire(actx)
	cancel()
	switch {
	case fault.KindOf(err) == fault.NotFound:
		if _, err := j.create(ctx, cp); err != nil {
			return nil, err
		}
	case err != nil:
		return nil, err
	default:
		j.continueFrom(rec, storedCheckpoint(rec).GetConversation().GetCount())
		j.queueLocked(cp)
	}
	j.start()
	return j, nil
}

// Adopted starts the journal of a generation whose record this replica
// has just acquired (store.Generations.Adopt or Acquire): it goes on
// after the record's last event, running.
func Adopted(o Options, rec store.Generation) *Journal {
	j := newJournal(o)
	j.continueFrom(rec, storedCheckpoint(rec).GetConversation().GetCount())
	if FirstRun(rec) {
		j.start()
		return j
	}
	// The dead replica may have shown its clients text it had not stored
	// (ShowEarly): no number it may have shown is used again.
	j.last += ShowWindow
	j.start()
	return j
}

// FirstRun reports whether rec, just acquired, has never run: a
// generation queued on its thread, taken for the first time, whose log
// is empty. (One that ran under an earlier lease has a higher epoch.)
func FirstRun(rec store.Generation) bool {
	return rec.Lease.Epoch == 1 && rec.LastSeq == 0
}

// continueFrom takes up rec, acquired under a new lease, whose
// conversation has items stored.
func (j *Journal) continueFrom(rec store.Generation, items int64) {
	j.epoch, j.last, j.confirmed, j.written = rec.Lease.Epoch, rec.LastSeq, rec.LastSeq, rec.State
	j.conv.items, j.conv.base = items, rec.ThreadBase
}

// storedCheckpoint is rec's checkpoint as stored (empty if it cannot be
// read). Its conversation's count is how many items are stored: none when
// it holds its conversation itself, or cannot be read (the journal then
// stores them all, and those stored are left).
func storedCheckpoint(rec store.Generation) *statev1.Checkpoint {
	cp := &statev1.Checkpoint{}
	if proto.Unmarshal(rec.Checkpoint, cp) != nil {
		return &statev1.Checkpoint{}
	}
	return cp
}

// acquire takes the record of a paused generation for its resume. The
// resume already holds the pause's claim, which makes it the only one:
// if the record is still under a lease (its owner is releasing it as the
// pause settles, or died between pausing and releasing it), it tries
// again every 50 ms until the lease is released or lapses, for at most
// one lease TTL.
func (j *Journal) acquire(ctx context.Context) (store.Generation, error) {
	deadline := time.Now().Add(j.o.TTL)
	for {
		now := time.Now()
		rec, err := j.o.Store.Acquire(ctx, j.o.Tenant, j.o.ID, j.o.Owner, now, now.Add(j.o.TTL))
		if fault.KindOf(err) != fault.Conflict {
			return rec, err
		}
		held, gerr := j.o.Store.Get(ctx, j.o.Tenant, j.o.ID)
		if gerr != nil || held.State.Finished() || now.After(deadline) {
			return rec, err
		}
		t := time.NewTimer(min(50*time.Millisecond, time.Until(deadline)+time.Millisecond))
		select {
		case <-ctx.Done():
			t.Stop()
			return rec, err
		case <-t.C:
		}
	}
}

// start lists the journal as running here and starts its keeper.
func (j *Journal) start() {
	j.started = true
	j.o.Live.add(j)
	j.keeper.start(j)
}

// Record assigns ev the next sequence number and queues it for the log.
func (j *Journal) Record(ev *agentdv1.GenerateResponse) {
	j.mu.Lock()
	due := j.recordLocked(ev)
	j.mu.Unlock()
	if due {
		j.poke()
	} else {
		j.soon()
	}
}

// RecordCheckpoint records ev and queues cp as the checkpoint covering
// it in one step, so that the keeper writes them in one write: a tool
// call's tool_call_finished event is never in the log without the
// checkpoint that holds the call's result, and a replica that adopts the
// generation does not run the call again.
func (j *Journal) RecordCheckpoint(ev *agentdv1.GenerateResponse, cp *statev1.Checkpoint) {
	j.mu.Lock()
	j.recordLocked(ev)
	j.queueLocked(cp)
	j.mu.Unlock()
	j.soon()
}

// recordLocked is Record with j.mu held; it reports whether a write is
// due now: flushBytes of events wait, or the model's text, which its
// client is sent as it comes (ShowEarly), would wait behind an event that
// is sent only once stored.
func (j *Journal) recordLocked(ev *agentdv1.GenerateResponse) bool {
	j.last++
	ev.Sequence = j.last
	text := ev.GetTextDelta() != nil
	blocked := text && j.held > j.confirmed
	if !text {
		j.held = j.last
	}
	kind := "event"
	if fd := ev.ProtoReflect().WhichOneof(ev.ProtoReflect().Descriptor().Oneofs().ByName("event")); fd != nil {
		kind = string(fd.Name())
	}
	kind, logged := j.conv.noteEvent(j.last, ev, kind)
	data, _ := proto.Marshal(logged)
	// The first pending event's number tells the store where the log
	// goes on, past numbers skipped (Adopted).
	j.pending = append(j.pending, store.Event{Seq: j.last, Kind: kind, Data: data})
	j.msgs = append(j.msgs, ev)
	j.bytes += len(data)
	return j.bytes >= flushBytes || blocked
}

// SetPending queues reqs to replace the generation's pending requests
// with its next write, in the same write as the events recorded so far
// (at the latest): an event that asks a request reaches the log, and so
// the generation's client, no sooner than the request's row, which
// another replica's decision needs. The caller serializes it with Record.
func (j *Journal) SetPending(reqs []store.PendingRequest) {
	j.mu.Lock()
	j.requests, j.requestsDue = reqs, true
	j.requestsN++
	j.mu.Unlock()
	j.soon()
}

// Checkpoint queues cp as the generation's checkpoint, covering every
// event numbered so far; it replaces one not yet written (the items of
// both are written).
func (j *Journal) Checkpoint(cp *statev1.Checkpoint) {
	j.mu.Lock()
	j.queueLocked(cp)
	j.mu.Unlock()
	j.soon()
}

// Final takes cp, the generation's last checkpoint, whose conversation
// ends with its final answer, so that the completed event may name the
// answer's items rather than carry it. Those items are written with the
// end (Settle) and never before: a record holding the final answer
// without the completed event after it would make the replica that
// adopts it ask the model again, past the answer. cp itself is not
// written (the end has no checkpoint), and one queued before it still
// is, with the events it covers.
func (j *Journal) Final(cp *statev1.Checkpoint) {
	j.mu.Lock()
	j.finalItems, j.finalSeq = j.conv.itemize(cp), j.last
	j.mu.Unlock()
}

// SetState records that the generation runs or waits on its client, with
// cp, the checkpoint of that moment: the record's state changes only
// with a checkpoint, so that its checkpoint always covers exactly the
// events before it.
func (j *Journal) SetState(s store.State, cp *statev1.Checkpoint) {
	j.mu.Lock()
	j.state = s
	j.queueLocked(cp)
	j.mu.Unlock()
	j.poke()
}

// queueLocked queues cp, covering every event numbered so far, with the
// conversation's new items. j.mu is held.
func (j *Journal) queueLocked(cp *statev1.Checkpoint) {
	j.items = append(j.items, j.conv.itemize(cp)...)
	j.takeAgent(cp)
	j.snap, j.snapSeq = Encode(cp), j.last
	j.snapN++
}

// ShowWindow bounds how far beyond the stored log a generation's client
// may be shown text: a text_delta numbered at most ShowWindow past the
// last stored event may reach the client before it is stored (ShowEarly).
// A replica that adopts the generation numbers its events past that
// window, and withdraws the turn.
const ShowWindow = 256

// ShowEarly reports whether event seq, a text_delta, may be shown to the
// client before it is stored: it is within ShowWindow of the stored log,
// and the lease holds. Should this replica die before storing it, the one
// that adopts the generation withdraws what it said.
func (j *Journal) ShowEarly(seq int64) bool {
	j.mu.Lock()
	defer j.mu.Unlock()
	return !j.lost && seq <= j.confirmed+ShowWindow
}

// Await returns once the events numbered so far are in the store (and
// the checkpoints queued before them): what a tool call's start waits
// for, so that another replica adopting the generation knows the call may
// have run. It fails once the lease is lost, or with ctx.
func (j *Journal) Await(ctx context.Context) error {
	j.mu.Lock()
	seq := j.last
	j.mu.Unlock()
	j.poke()
	return j.AwaitSeq(ctx, seq)
}

// ErrUnstored says the journal ended without storing the event waited for
// (the store was down as the generation ended).
var ErrUnstored = errors.New("the generation ended before the event was stored")

var errLost = fault.New(fault.Conflict, "the generation's lease was lost")

// AwaitSeq returns once event seq is in the store; a Conflict once the
// lease is lost (the event never will be), ErrUnstored once the journal
// ended without it.
func (j *Journal) AwaitSeq(ctx context.Context, seq int64) error {
	for {
		j.mu.Lock()
		confirmed, lost, advanced := j.confirmed, j.lost, j.advanced
		j.mu.Unlock()
		switch {
		case confirmed >= seq:
			return nil
		case lost:
			return errLost
		}
		select {
		case <-advanced:
		case <-j.ended:
			// A lease lost ends the journal too (its generation stops),
			// and wakes nothing else: the refused event must not reach
			// the client as merely unstored.
			j.mu.Lock()
			confirmed, lost = j.confirmed, j.lost
			j.mu.Unlock()
			switch {
			case confirmed >= seq:
				return nil
			case lost:
				return errLost
			}
			return ErrUnstored
		case <-ctx.Done():
			return context.Cause(ctx)
		}
	}
}

// Lost reports whether the store refused a write with Conflict: another
// replica holds the lease now.
func (j *Journal) Lost() bool {
	j.mu.Lock()
	defer j.mu.Unlock()
	return j.lost
}

// pendingWrite reports whether events or a checkpoint wait to be written.
func (j *Journal) pendingWrite() bool {
	j.mu.Lock()
	defer j.mu.Unlock()
	return len(j.pending) > 0 || j.snap != nil || j.requestsDue
}

func (j *Journal) renew() {
	if j.Lost() {
		return
	}
	sctx, cancel := context.WithTimeout(context.Background(), store.Timeout)
	defer cancel()
	err := j.o.Store.Renew(sctx, j.o.Tenant, j.o.ID, j.epoch, time.Now().Add(j.o.TTL))
	j.check(err, "renewing a generation's lease")
}

// check classifies a write's error: a Conflict loses the lease and stops
// the generation; anything else is logged (the write is retried).
func (j *Journal) check(err error, what string) error {
	if err == nil {
		return nil
	}
	if fault.KindOf(err) == fault.Conflict {
		j.mu.Lock()
		j.lost = true
		j.mu.Unlock()
		j.o.Stop(fault.Wrap(fault.Conflict, err, "the generation's lease was lost: another replica took it over; this one stops").
			WithInfo("GENERATION_LEASE_LOST", map[string]string{"generation_id": j.o.ID}))
		return err
	}
	j.o.Warn(what, err)
	return err
}

// write appends the pending events and records the state.
func (j *Journal) write() error {
	d, err := j.due()
	if err != nil {
		return err
	}
	written := d.written
	if len(d.batch) > 0 || d.snap.data != nil || d.snap.replace {
		// One write: the checkpoint (and the pending requests) with the
		// events it covers, then the later ones.
		st, err := j.appendEvents(d)
		if err != nil {
			return err
		}
		written = j.wrote(d, st)
	}
	// A generation that pauses changes state alone, keeping its last
	// checkpoint, which says how its agent is kept (StoredAgent). Running
	// and waiting change with a checkpoint (SetState), and wait for one
	// otherwise.
	if d.state != written && d.state == store.Paused {
		return j.writeState(d.state)
	}
	return nil
}

// dueWrite is what a write takes from the journal: the pending events,
// the checkpoint queued (with its items, agent and pending requests) and
// the state.
type dueWrite struct {
	batch          []store.Event
	state, written store.State
	snap           pendingSnap
	snapSeq, snapN int64
	pendingN       int64
}

// covered is how many of the batch's events the checkpoint covers.
func (d dueWrite) covered() int {
	k := 0
	for d.snap.data != nil && k < len(d.batch) && d.batch[k].Seq <= d.snapSeq {
		k++
	}
	return k
}

// stateWith is the state a write with checkpoint data (nil: none)
// records: the state due, which changes with a checkpoint, or by itself
// for a pause; otherwise the state the record has.
func (d dueWrite) stateWith(data []byte) store.State {
	if data != nil || d.state == store.Paused {
		return d.state
	}
	return d.written
}

// due takes what is to be written.
func (j *Journal) due() (dueWrite, error) {
	j.mu.Lock()
	defer j.mu.Unlock()
	if j.lost {
		return dueWrite{}, errLost
	}
	if j.snap != nil && j.snapSeq < j.confirmed {
		// Events after it are stored already: a write that may have
		// failed took them, and it with them (with its items and agent).
		// It can no longer go before them.
		j.snap, j.items, j.agentDue = nil, nil, nil
	}
	batch := j.pending
	if j.finalItems != nil {
		k := 0
		for k < len(batch) && batch[k].Seq <= j.finalSeq {
			k++
		}
		batch = batch[:k]
	}
	return dueWrite{
		batch: batch, state: j.state, written: j.written,
		snap:    pendingSnap{data: j.snap, items: j.items, agent: j.agentDue, replace: j.requestsDue, requests: j.requests},
		snapSeq: j.snapSeq, snapN: j.snapN, pendingN: j.requestsN,
	}, nil
}

// wrote records that d was written, having recorded the state st ("":
// none, and no checkpoint); its checkpoint too if st was recorded with
// it (else events after it were stored already, by a write that may have
// failed, and it with them). It returns the state the record has.
func (j *Journal) wrote(d dueWrite, st store.State) store.State {
	j.mu.Lock()
	defer j.mu.Unlock()
	j.items = j.items[len(d.snap.items):]
	if d.snap.data != nil && bytes.Equal(j.agentDue, d.snap.agent) {
		j.agentDue = nil
	}
	if st != "" && d.snap.replace && j.requestsN == d.pendingN {
		j.requestsDue, j.requests = false, nil // not replaced meanwhile
	}
	if st == d.state && d.snap.data != nil && j.snapN == d.snapN {
		j.snap = nil // not replaced meanwhile
	}
	if st != "" {
		j.written = st
	}
	return j.written
}

// writeState records the record's state alone.
func (j *Journal) writeState(state store.State) error {
	sctx, cancel := context.WithTimeout(context.Background(), store.Timeout)
	_, err := j.o.Store.Checkpoint(sctx, j.o.Tenant, j.o.ID, j.epoch, store.Checkpoint{State: state, Now: time.Now()})
	cancel()
	if err := j.check(err, "recording a generation's state"); err != nil {
		return err
	}
	j.mu.Lock()
	j.written = state
	j.mu.Unlock()
	return nil
}

// pendingSnap is a checkpoint to write (nil when none) and what goes
// with it: the conversation's items, the agent, and the pending requests
// when they are to be replaced.
type pendingSnap struct {
	data     []byte
	items    []store.Item
	agent    []byte // nil: the store has it
	replace  bool   // the pending requests are replaced with requests
	requests []store.PendingRequest
}

// checkpoint is what a Checkpoint of s writes, in state st.
func (s pendingSnap) checkpoint(st store.State, events, after []store.Event) store.Checkpoint {
	return store.Checkpoint{State: st, Data: s.data, Agent: s.agent, Items: s.items, ReplacePending: s.replace, Pending: s.requests,
		Events: events, After: after, Now: time.Now()}
}

// appendEvents appends d's batch, the first pending events, and, when its
// snap has data, writes it as the checkpoint covering the first covered
// of them, with the pending requests when they are due, all in one write.
// After a write that failed as unavailable it reads the log's tail first:
// if that write took after all, the events are not logged twice (and the
// checkpoint, if events after it took, is not written). It returns the
// state the write recorded: "" when it recorded none (an append alone).
func (j *Journal) appendEvents(d dueWrite) (store.State, error) {
	sctx, cancel := context.WithTimeout(context.Background(), store.Timeout)
	defer cancel()
	batch, covered, snap := d.batch, d.covered(), d.snap
	if len(batch) == 0 {
		// A checkpoint alone, or the pending requests.
		st := d.stateWith(snap.data)
		_, err := j.o.Store.Checkpoint(sctx, j.o.Tenant, j.o.ID, j.epoch, snap.checkpoint(st, nil, nil))
		return st, j.check(err, "writing a generation's checkpoint")
	}
	tail, err := j.tookAlready(sctx, batch)
	if err != nil {
		return "", err
	}
	if len(tail) > covered {
		// Events after it took: see write. The pending requests are
		// written again all the same: a replacement may repeat.
		snap.data, snap.items, snap.agent, covered = nil, nil, nil, len(tail)
	}
	first, rest := batch[0].Seq, batch[len(tail):]
	last := first - 1 + int64(len(tail))
	st := store.State("")
	if len(rest) > 0 || snap.data != nil || snap.replace {
		if snap.data != nil || snap.replace {
			st = d.stateWith(snap.data)
		}
		if last, err = j.appendRest(sctx, rest, covered-len(tail), snap, st); err != nil {
			return "", err
		}
	}
	if want := batch[len(batch)-1].Seq; last != want {
		err := fault.New(fault.Internal, "the generation's log ends at %d, not at %d as this replica numbered its events", last, want)
		j.mu.Lock()
		j.lost = true
		j.mu.Unlock()
		j.o.Stop(err)
		return "", err
	}
	j.confirm(len(batch), last)
	return st, nil
}

// tookAlready returns the events of batch that the store has already:
// after an append that failed as unavailable, which may have taken.
func (j *Journal) tookAlready(ctx context.Context, batch []store.Event) ([]store.Event, error) {
	j.mu.Lock()
	uncertain := j.uncertain
	j.mu.Unlock()
	if !uncertain {
		return nil, nil
	}
	tail, err := j.o.Store.Read(ctx, j.o.Tenant, j.o.ID, batch[0].Seq-1, len(batch))
	if err != nil {
		j.o.Warn("reading a generation's log", err)
	}
	return tail, err
}

// appendRest writes rest, with snap (when it has data, or pending
// requests to replace) as the checkpoint covering its first covered
// events, recorded in state st, and returns the log's last sequence
// number.
func (j *Journal) appendRest(ctx context.Context, rest []store.Event, covered int, snap pendingSnap, st store.State) (int64, error) {
	var last int64
	var err error
	if snap.data != nil || snap.replace {
		covered = max(min(covered, len(rest)), 0)
		if snap.data == nil {
			covered = 0 // no checkpoint covers them
		}
		last, err = j.o.Store.Checkpoint(ctx, j.o.Tenant, j.o.ID, j.epoch, snap.checkpoint(st, rest[:covered], rest[covered:]))
	} else {
		last, err = j.o.Store.Append(ctx, j.o.Tenant, j.o.ID, j.epoch, rest)
	}
	if err := j.check(err, "appending to a generation's log"); err != nil {
		if fault.KindOf(err) != fault.Conflict {
			j.mu.Lock()
			j.uncertain = true
			j.mu.Unlock()
		}
		return 0, err
	}
	return last, nil
}

// confirm records that the first n pending events are in the store, the
// log ending at last, and passes them to the followers.
func (j *Journal) confirm(n int, last int64) {
	j.mu.Lock()
	defer j.mu.Unlock()
	j.confirmed = last
	close(j.advanced)
	j.advanced = make(chan struct{})
	j.uncertain = false
	for _, ev := range j.msgs[:n] {
		j.passOn(ev)
	}
	// The confirmed events are let go of: the arrays' first n places
	// would otherwise hold them (their messages and encodings) for as
	// long as the generation waits.
	clear(j.msgs[:n])
	clear(j.pending[:n])
	j.msgs = j.msgs[n:]
	j.pending = j.pending[n:]
	j.bytes = 0
	for _, e := range j.pending {
		j.bytes += len(e.Data) // as recordLocked counts it
	}
}

// end drops the followers, which read what is left from the store, and
// removes the journal from the running ones.
func (j *Journal) end() {
	j.mu.Lock()
	j.dropFollowers()
	select {
	case <-j.ended:
	default:
		close(j.ended)
	}
	j.mu.Unlock()
	j.o.Live.remove(j)
}

// halt stops the keeper and joins its write under way. Idempotent.
func (j *Journal) halt() {
	j.mu.Lock()
	started := j.started
	j.started = false
	j.mu.Unlock()
	if started {
		j.keeper.stop()
	}
}

// Abandon ends the journal of a generation whose lease was lost: it
// writes nothing more, and the replica that took the generation over
// settles its record.
func (j *Journal) Abandon() {
	j.halt()
	j.end()
}

// Settle ends the record once the generation has: finished (completed,
// failed or cancelled, with its result), paused (released, for a resume
// to acquire), or running (agentd is stopping: released for another
// replica to adopt at once). Its writes are retried, with backoff, within
// store.Timeout; a failure is logged: the generation has ended either way.
// Only the first call does anything.
func (j *Journal) Settle(ctx context.Context, state store.State, result []byte) {
	j.halt()
	j.mu.Lock()
	settled := j.settled
	j.settled = true
	j.mu.Unlock()
	if settled {
		return
	}
	defer j.end()
	r := &retrier{j: j, ctx: ctx, deadline: time.Now().Add(store.Timeout), backoff: retryMin}
	if state == store.Paused || state == store.Running {
		j.release(r, state)
		return
	}
	j.finish(r, state, result)
}

// release records a pause, or the hand-over of a generation as agentd
// stops, and releases the lease.
func (j *Journal) release(r *retrier, state store.State) {
	what := "a paused generation"
	j.mu.Lock()
	if state == store.Paused {
		j.state = store.Paused
	} else {
		what = "a generation handed over"
		j.state = j.written
	}
	j.mu.Unlock()
	if !r.try("recording "+what, func(context.Context) error { return j.write() }) {
		return
	}
	r.try("releasing "+what+"'s lease", func(sctx context.Context) error {
		return j.o.Store.Release(sctx, j.o.Tenant, j.o.ID, j.epoch, time.Now())
	})
}

// finish closes the log with the events still pending and the outcome:
// in the same write, unless an earlier append may have taken (then they
// are written first, as any). A checkpoint still pending is not written:
// the end drops it.
func (j *Journal) finish(r *retrier, state store.State, result []byte) {
	j.mu.Lock()
	j.state = j.written // no state change before the end
	fold := !j.uncertain
	if fold {
		j.snap = nil
	}
	j.mu.Unlock()
	if !fold && !r.try("writing a generation's last events", func(context.Context) error { return j.write() }) {
		return
	}
	j.mu.Lock()
	last, items := j.pending, append(slices.Clip(j.items), j.finalItems...)
	j.mu.Unlock()
	var thread *store.ThreadAppend
	if j.o.ThreadAppend != nil {
		thread = j.o.ThreadAppend(state)
	}
	r.try("recording a generation's end", func(sctx context.Context) error {
		end, err := j.o.Store.Finish(sctx, j.o.Tenant, j.o.ID, j.epoch, store.Outcome{State: state, Result: result, Events: last, Items: items, Thread: thread, Now: time.Now()})
		if err == nil {
			j.confirm(len(last), end)
		}
		return err
	})
}

// retrier retries the writes that settle a record, backing off, until
// its deadline.
type retrier struct {
	j        *Journal
	ctx      context.Context
	deadline time.Time
	backoff  time.Duration
}

// try runs f until it succeeds, the lease is lost, or the deadline
// passes; it reports whether f succeeded.
func (r *retrier) try(what string, f func(context.Context) error) bool {
	for {
		if r.j.Lost() {
			return false
		}
		sctx, cancel := context.WithTimeout(context.WithoutCancel(r.ctx), store.Timeout)
		err := f(sctx)
		cancel()
		if err == nil {
			return true
		}
		conflict := fault.KindOf(err) == fault.Conflict || errors.Is(err, errLost)
		if conflict || time.Now().Add(r.backoff).After(r.deadline) {
			if !conflict {
				r.j.o.Warn(what, err)
			}
			return false
		}
		time.Sleep(r.backoff)
		r.backoff = min(2*r.backoff, retryMax)
	}
}
