package server

import (
	"context"
	"encoding/json"
	"errors"
	"sync"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/proto"

	agentdv1 "github.com/agentd/agentd/gen/go/agentd/v1"
	"github.com/agentd/agentd/internal/fault"
	"github.com/agentd/agentd/internal/store"
)

// How a generation's events and checkpoints reach the store (X-G2, X-G3):
// in batches, flushed flushEvery after the first unwritten one or once
// flushBytes of events wait, whichever comes first, and at once when a
// tool call is about to start (write-ahead: await) or the generation
// ends, pauses or stops. A checkpoint goes in the same write as the
// events it covers. A client receives events once written, so they reach
// it in these batches. Until a checkpoint is written, a replica that
// adopts the generation continues from the one before, which is as safe:
// it holds less, and the log after it says what happened since.
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

// journal is a running generation's durable record (X-G3) and event log
// (X-G2), written under the lease its replica holds. Its keeper, owned by
// the journal and joined by its end, does every write while the
// generation runs: it renews the lease every third of generation.lease_ttl,
// records state changes, and appends events; a write the store refuses as
// unavailable is retried with backoff, and one it refuses with Conflict
// (the lease is lost: another replica took the generation over) stops the
// generation.
type journal struct {
	gens   store.Generations
	tenant string
	id     string
	owner  string
	ttl    time.Duration
	epoch  int64
	stop   func(error) // stops the generation: its lease is lost
	warn   func(msg string, err error)

	mu        sync.Mutex
	last      int64                        // the last sequence number assigned
	confirmed int64                        // the last sequence number in the store
	pending   []store.Event                // assigned, not yet confirmed, in order
	msgs      []*agentdv1.GenerateResponse // pending's events, decoded
	bytes     int                          // text deltas pending
	snap      []byte                       // the checkpoint to write, nil when written
	snapSeq   int64                        // the last sequence number snap covers
	snapN     int64                        // counts the checkpoints queued
	advanced  chan struct{}                // closed (and replaced) when confirmed grows
	ended     chan struct{}                // closed by end
	state     store.State                  // the state the record should have
	written   store.State                  // the state the record has
	lost      bool                         // a write was refused with Conflict: write nothing more
	uncertain bool                         // an append failed as unavailable: it may have taken
	keeper    keeper                       // does the writes and renewals (keeper.go)
	started   bool
	settled   bool // settle ran
	subs      map[*follower]struct{}
	forget    func() // removes the journal from Service.running
}

// follower is an attached stream following a generation of this replica
// in memory: it receives each event once it is in the store (never one
// the store may not have: a replica that adopts the generation after this
// one died numbers its own events from the store's last). One that falls
// more than followerBuffer events behind is dropped (its channel closed)
// and reads the rest from the store, as it does once the generation ends.
type follower struct {
	ch chan *agentdv1.GenerateResponse
}

// followerBuffer is how many events a follower may fall behind.
const followerBuffer = 256

func liveKey(tenant, id string) string { return tenant + "\x00" + id }

// follow subscribes f to the events stored after now. It returns the
// last sequence number in the store. ok is false once the journal is
// settled.
func (j *journal) follow() (f *follower, confirmed int64, ok bool) {
	j.mu.Lock()
	defer j.mu.Unlock()
	if j.settled || j.lost {
		return nil, 0, false
	}
	f = &follower{ch: make(chan *agentdv1.GenerateResponse, followerBuffer)}
	if j.subs == nil {
		j.subs = make(map[*follower]struct{})
	}
	j.subs[f] = struct{}{}
	return f, j.confirmed, true
}

// unfollow drops f, if it is still there.
func (j *journal) unfollow(f *follower) {
	j.mu.Lock()
	defer j.mu.Unlock()
	if _, ok := j.subs[f]; ok {
		delete(j.subs, f)
		close(f.ch)
	}
}

// dropFollowers closes every follower's channel; j.mu is held.
func (j *journal) dropFollowers() {
	for f := range j.subs {
		close(f.ch)
	}
	j.subs = nil
}

// openJournal records a new generation (Create), or takes the record of a
// resumed one (Acquire; Create for a paused generation that has none),
// and starts its keeper. A store that cannot record it fails it.
func (s *Service) openJournal(ctx context.Context, g *generation) (*journal, error) {
	j := s.newJournal(g)
	agent, err := g.sealAgent()
	if err != nil {
		return nil, err
	}
	g.agent = agent
	sctx, cancel := storeContext(ctx)
	defer cancel()
	now := time.Now()
	create := func() error {
		return s.generations.Create(sctx, store.NewGeneration{Tenant: g.tenant, ID: g.id, Owner: s.replica, Expires: now.Add(j.ttl), Now: now,
			Checkpoint: g.snapshot(nil)})
	}
	if g.resume == nil {
		if err := create(); err != nil {
			return nil, err
		}
	} else {
		// Its own bound: it may wait out a whole lease, longer than one
		// store call's.
		actx, acancel := context.WithTimeout(context.WithoutCancel(ctx), j.ttl+storeTimeout)
		rec, err := s.acquire(actx, g.tenant, g.id, j.ttl)
		acancel()
		switch {
		case fault.KindOf(err) == fault.NotFound:
			if err := create(); err != nil {
				return nil, err
			}
		case err != nil:
			return nil, err
		default:
			j.epoch, j.last, j.confirmed, j.written = rec.Lease.Epoch, rec.LastSeq, rec.LastSeq, rec.State
			// Until it is past its paused turn, the resume's claim on the
			// paused checkpoint decides what happens if it dies.
			j.snap, j.snapSeq = g.snapshot(nil), j.last
		}
	}
	s.keepJournal(g, j)
	return j, nil
}

// keepJournal registers a journal as running here and starts its keeper.
func (s *Service) keepJournal(g *generation, j *journal) {
	j.started = true
	key := liveKey(g.tenant, g.id)
	s.running.Store(key, j)
	j.forget = func() { s.running.CompareAndDelete(key, j) }
	j.keeper.start(j)
}

// newJournal returns g's journal, not started, for a record this replica
// creates (epoch 1).
func (s *Service) newJournal(g *generation) *journal {
	return &journal{
		gens: s.generations, tenant: g.tenant, id: g.id, owner: s.replica, ttl: s.cfg.LeaseTTL,
		stop:  func(err error) { g.link.cancel(err) },
		warn:  func(msg string, err error) { s.log.Warn(msg, "generation", g.id, "err", err) },
		state: store.Running, written: store.Running, epoch: 1,
		advanced: make(chan struct{}), ended: make(chan struct{}),
	}
}

// acquire takes the record of a paused generation for its resume. The
// resume already holds the pause's claim, which makes it the only one:
// if the record is still under a lease (its owner is releasing it as the
// pause settles, or died between pausing and releasing it), it tries
// again every 50 ms until the lease is released or lapses, for at most
// one lease_ttl.
func (s *Service) acquire(ctx context.Context, tenant, id string, ttl time.Duration) (store.Generation, error) {
	deadline := time.Now().Add(ttl)
	for {
		now := time.Now()
		rec, err := s.generations.Acquire(ctx, tenant, id, s.replica, now, now.Add(ttl))
		if fault.KindOf(err) != fault.Conflict {
			return rec, err
		}
		held, gerr := s.generations.Get(ctx, tenant, id)
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

// record assigns ev the next sequence number and queues it for the log.
// The caller serializes its calls in the order the events are sent.
func (j *journal) record(ev *agentdv1.GenerateResponse) {
	j.mu.Lock()
	due := j.recordLocked(ev)
	j.mu.Unlock()
	if due {
		j.poke()
	} else {
		j.soon()
	}
}

// recordCheckpoint records ev and queues data as the checkpoint covering
// it in one step, so that the keeper writes them in one write: a tool
// call's tool_call_finished event is never in the log without the
// checkpoint that holds the call's result (X-G3). The caller serializes
// it with record.
func (j *journal) recordCheckpoint(ev *agentdv1.GenerateResponse, data []byte) {
	j.mu.Lock()
	j.recordLocked(ev)
	j.snap, j.snapSeq = data, j.last
	j.snapN++
	j.mu.Unlock()
	j.soon()
}

// recordLocked is record with j.mu held; it reports whether a write is
// due now.
func (j *journal) recordLocked(ev *agentdv1.GenerateResponse) bool {
	j.last++
	ev.Sequence = j.last
	data, _ := proto.Marshal(ev)
	kind := "event"
	if fd := ev.ProtoReflect().WhichOneof(ev.ProtoReflect().Descriptor().Oneofs().ByName("event")); fd != nil {
		kind = string(fd.Name())
	}
	j.pending = append(j.pending, store.Event{Seq: j.last, Kind: kind, Data: data})
	j.msgs = append(j.msgs, ev)
	j.bytes += len(data) // the bytes the log will hold
	return j.bytes >= flushBytes
}

// checkpoint queues data as the generation's checkpoint, covering every
// event numbered so far; it replaces one not yet written. The caller
// serializes it with record.
func (j *journal) checkpoint(data []byte) {
	j.mu.Lock()
	j.snap, j.snapSeq = data, j.last
	j.snapN++
	j.mu.Unlock()
	j.soon()
}

// await returns once the events numbered so far are in the store (and
// the checkpoints queued before them): what a tool call's start waits for,
// so that another replica adopting the generation knows the call may
// have run. It fails once the lease is lost, or with ctx.
func (j *journal) await(ctx context.Context) error {
	j.mu.Lock()
	seq := j.last
	j.mu.Unlock()
	j.poke()
	return j.awaitSeq(ctx, seq)
}

// errUnstored: the journal ended without storing the event waited for
// (the store was down as the generation ended).
var errUnstored = errors.New("the generation ended before the event was stored")

// awaitSeq returns once event seq is in the store; errLost once the lease
// is lost (the event never will be), errUnstored once the journal ended
// without it.
func (j *journal) awaitSeq(ctx context.Context, seq int64) error {
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
			j.mu.Lock()
			confirmed = j.confirmed
			j.mu.Unlock()
			if confirmed >= seq {
				return nil
			}
			return errUnstored
		case <-ctx.Done():
			return context.Cause(ctx)
		}
	}
}

// setState records that the generation runs or waits on its client, with
// data, the checkpoint of that moment: the record's state changes only
// with a checkpoint, so that its checkpoint always covers exactly the
// events before it. The caller serializes it with record.
func (j *journal) setState(s store.State, data []byte) {
	j.mu.Lock()
	j.state = s
	j.snap, j.snapSeq = data, j.last
	j.snapN++
	j.mu.Unlock()
	j.poke()
}

// pendingWrite reports whether events or a checkpoint wait to be written.
func (j *journal) pendingWrite() bool {
	j.mu.Lock()
	defer j.mu.Unlock()
	return len(j.pending) > 0 || j.snap != nil
}

func (j *journal) renew() {
	if j.isLost() {
		return
	}
	sctx, cancel := context.WithTimeout(context.Background(), storeTimeout)
	defer cancel()
	err := j.gens.Renew(sctx, j.tenant, j.id, j.epoch, time.Now().Add(j.ttl))
	j.check(err, "renewing a generation's lease")
}

func (j *journal) isLost() bool {
	j.mu.Lock()
	defer j.mu.Unlock()
	return j.lost
}

// check classifies a write's error: a Conflict loses the lease and stops
// the generation; anything else is logged (the write is retried).
func (j *journal) check(err error, what string) error {
	if err == nil {
		return nil
	}
	if fault.KindOf(err) == fault.Conflict {
		j.mu.Lock()
		j.lost = true
		j.mu.Unlock()
		j.stop(fault.Wrap(fault.Conflict, err, "the generation's lease was lost: another replica took it over; this one stops").
			WithInfo("GENERATION_LEASE_LOST", map[string]string{"generation_id": j.id}))
		return err
	}
	j.warn(what, err)
	return err
}

// write appends the pending events and records the state.
func (j *journal) write() error {
	j.mu.Lock()
	if j.lost {
		j.mu.Unlock()
		return errLost
	}
	batch := j.pending
	state, written := j.state, j.written
	snap, snapSeq, snapN := j.snap, j.snapSeq, j.snapN
	if snap != nil && snapSeq < j.confirmed {
		// Events after it are stored already: it can no longer go before
		// them. The next one will (an adopter continues from the one
		// before, which is as safe).
		j.snap, snap = nil, nil
	}
	j.mu.Unlock()
	if len(batch) > 0 || snap != nil {
		// One write: the checkpoint with the events it covers, then the
		// later ones.
		k := 0
		for snap != nil && k < len(batch) && batch[k].Seq <= snapSeq {
			k++
		}
		wrote, err := j.appendEvents(batch, k, snap, state)
		if err != nil {
			return err
		}
		if wrote {
			j.mu.Lock()
			if j.snapN == snapN {
				j.snap = nil // not replaced meanwhile
			}
			j.written = state
			written = state
			j.mu.Unlock()
		}
	}
	// A generation that pauses changes state alone: a paused record's
	// checkpoint is not read (its pause has its own). Running and waiting
	// change with a checkpoint (setState), and wait for one otherwise.
	if state != written && state == store.Paused {
		sctx, cancel := context.WithTimeout(context.Background(), storeTimeout)
		_, err := j.gens.Checkpoint(sctx, j.tenant, j.id, j.epoch, store.Checkpoint{State: state, Now: time.Now()})
		cancel()
		if err := j.check(err, "recording a generation's state"); err != nil {
			return err
		}
		j.mu.Lock()
		j.written = state
		j.mu.Unlock()
	}
	return nil
}

var errLost = fault.New(fault.Conflict, "the generation's lease was lost")

// appendEvents appends batch, the first pending events, and, when snap
// is not nil, writes it (with state) as the checkpoint covering the first
// covered of them, all in one write. After a write that failed as
// unavailable it reads the log's tail first: if that write took after
// all, the events are not logged twice (and snap, if events after it took,
// is not written: wrote is false).
func (j *journal) appendEvents(batch []store.Event, covered int, snap []byte, state store.State) (wrote bool, _ error) {
	sctx, cancel := context.WithTimeout(context.Background(), storeTimeout)
	defer cancel()
	if len(batch) == 0 {
		// A checkpoint alone.
		_, err := j.gens.Checkpoint(sctx, j.tenant, j.id, j.epoch, store.Checkpoint{State: state, Data: snap, Now: time.Now()})
		return true, j.check(err, "writing a generation's checkpoint")
	}
	first := batch[0].Seq
	var tail []store.Event
	j.mu.Lock()
	uncertain := j.uncertain
	j.mu.Unlock()
	if uncertain {
		var err error
		if tail, err = j.gens.Read(sctx, j.tenant, j.id, first-1, len(batch)); err != nil {
			j.warn("reading a generation's log", err)
			return false, err
		}
	}
	if len(tail) > covered {
		snap = nil // events after it took: see write
	}
	rest := batch[len(tail):]
	last := first - 1 + int64(len(tail))
	if len(rest) > 0 || snap != nil {
		var err error
		if snap != nil {
			c := covered - len(tail)
			last, err = j.gens.Checkpoint(sctx, j.tenant, j.id, j.epoch, store.Checkpoint{State: state, Data: snap, Events: rest[:c], After: rest[c:], Now: time.Now()})
		} else {
			last, err = j.gens.Append(sctx, j.tenant, j.id, j.epoch, rest)
		}
		if err := j.check(err, "appending to a generation's log"); err != nil {
			if fault.KindOf(err) != fault.Conflict {
				j.mu.Lock()
				j.uncertain = true
				j.mu.Unlock()
			}
			return false, err
		}
	}
	if want := batch[len(batch)-1].Seq; last != want {
		err := fault.New(fault.Internal, "the generation's log ends at %d, not at %d as this replica numbered its events", last, want)
		j.mu.Lock()
		j.lost = true
		j.mu.Unlock()
		j.stop(err)
		return false, err
	}
	j.confirm(len(batch), last)
	return snap != nil, nil
}

// confirm records that the first n pending events are in the store, the
// log ending at last, and passes them to the followers.
func (j *journal) confirm(n int, last int64) {
	j.mu.Lock()
	defer j.mu.Unlock()
	j.confirmed = last
	close(j.advanced)
	j.advanced = make(chan struct{})
	j.uncertain = false
	for _, ev := range j.msgs[:n] {
		for f := range j.subs {
			select {
			case f.ch <- ev:
			default: // too far behind: it reads the rest from the store
				delete(j.subs, f)
				close(f.ch)
			}
		}
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
		j.bytes += len(e.Data) // as record counts it
	}
}

// end drops the followers, which read what is left from the store, and
// removes the journal from the running ones.
func (j *journal) end() {
	j.mu.Lock()
	j.dropFollowers()
	select {
	case <-j.ended:
	default:
		close(j.ended)
	}
	j.mu.Unlock()
	if j.forget != nil {
		j.forget()
	}
}

// halt stops the keeper and joins its write under way. Idempotent.
func (j *journal) halt() {
	j.mu.Lock()
	started := j.started
	j.started = false
	j.mu.Unlock()
	if started {
		j.keeper.stop()
	}
}

// settle ends the record once the generation has: finished (completed,
// failed or cancelled, with its result), or paused (released, for a
// resume to acquire). Its writes are retried, with backoff, within
// storeTimeout; a failure is logged: the generation has ended either way.
func (j *journal) settle(ctx context.Context, state store.State, result []byte) {
	j.halt()
	j.mu.Lock()
	settled := j.settled
	j.settled = true
	j.mu.Unlock()
	if settled {
		return
	}
	defer j.end()
	deadline := time.Now().Add(storeTimeout)
	backoff := retryMin
	try := func(what string, f func(context.Context) error) bool {
		for {
			if j.isLost() {
				return false
			}
			sctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), storeTimeout)
			err := f(sctx)
			cancel()
			if err == nil {
				return true
			}
			if fault.KindOf(err) == fault.Conflict || errors.Is(err, errLost) || time.Now().Add(backoff).After(deadline) {
				if !errors.Is(err, errLost) && fault.KindOf(err) != fault.Conflict {
					j.warn(what, err)
				}
				return false
			}
			time.Sleep(backoff)
			backoff = min(2*backoff, retryMax)
		}
	}
	if state == store.Paused || state == store.Running {
		// Paused: released for a resume to acquire. Running: agentd is
		// stopping, and releases the generation for another replica to
		// adopt at once.
		what := "a paused generation"
		j.mu.Lock()
		if state == store.Paused {
			j.state = store.Paused
		} else {
			what = "a generation handed over"
			j.state = j.written
		}
		j.mu.Unlock()
		if !try("recording "+what, func(context.Context) error { return j.write() }) {
			return
		}
		try("releasing "+what+"'s lease", func(sctx context.Context) error {
			return j.gens.Release(sctx, j.tenant, j.id, j.epoch, time.Now())
		})
		return
	}
	// The events still pending close the log, with the outcome: in the
	// same write, unless an earlier append may have taken (then they are
	// written first, as any). A checkpoint still pending is not written:
	// the end drops it.
	j.mu.Lock()
	j.state = j.written // no state change before the end
	fold := !j.uncertain
	if fold {
		j.snap = nil
	}
	j.mu.Unlock()
	if !fold && !try("writing a generation's last events", func(context.Context) error { return j.write() }) {
		return
	}
	j.mu.Lock()
	last := j.pending
	j.mu.Unlock()
	try("recording a generation's end", func(sctx context.Context) error {
		end, err := j.gens.Finish(sctx, j.tenant, j.id, j.epoch, store.Outcome{State: state, Result: result, Events: last, Now: time.Now()})
		if err == nil {
			j.confirm(len(last), end)
		}
		return err
	})
}

// result is the summary a finished generation's record keeps: its final
// text, its usage, and why it failed.
type result struct {
	Text  string          `json:"text,omitempty"`
	Usage json.RawMessage `json:"usage,omitempty"`
	Error string          `json:"error,omitempty"`
	// Code is the gRPC code of Error.
	Code codes.Code `json:"code,omitempty"`
	// Message is the final message (protojson), for GetGeneration.
	Message json.RawMessage `json:"message,omitempty"`
}

// PauseExpiredResult is the result a paused generation's record keeps
// when its pause expired before a resume took it (X-G4): cancelled by no
// client, DEADLINE_EXCEEDED tells it from one a client cancelled. The
// sweeper that ends such generations writes it; GetGeneration and an
// attached stream read it like any other.
func PauseExpiredResult() []byte {
	b, _ := json.Marshal(result{Error: "the pause expired (generation.pause_ttl) before a resume", Code: codes.DeadlineExceeded})
	return b
}

func (g *generation) result(final *agentdv1.Message, err error) []byte {
	r := result{Text: textOf(final)}
	if final != nil {
		r.Message, _ = protojson.Marshal(final)
	}
	if u, merr := protojson.Marshal(g.total); merr == nil {
		r.Usage = u
	}
	if err != nil {
		st := status.Convert(fault.GRPC(err))
		r.Error, r.Code = st.Message(), st.Code()
	}
	b, _ := json.Marshal(r)
	return b
}

func textOf(m *agentdv1.Message) string {
	var s string
	for _, p := range m.GetParts() {
		s += p.GetText()
	}
	return s
}

// emitLast sends the generation's last event, paused or completed, once
// its record says so (X-G3): a client that has seen it finds the record
// paused (a resume can take it at once) or completed.
func (g *generation) emitLast(ctx context.Context, ev *agentdv1.GenerateResponse) error {
	if g.journal == nil {
		return g.link.out.emit(ctx, ev)
	}
	g.emitMu.Lock()
	defer g.emitMu.Unlock()
	if ctx.Err() != nil {
		return context.Cause(ctx)
	}
	g.journal.record(ev)
	if ev.GetPaused() != nil {
		g.journal.settle(ctx, store.Paused, nil)
	} else {
		g.journal.settle(ctx, store.Completed, g.result(g.final, nil))
	}
	// The generation has ended as its record says, whether or not its
	// client still takes the event (it may have gone, or agentd be
	// stopping, meanwhile): its run ends without an error.
	_ = g.link.out.emit(ctx, ev)
	return nil
}

// settleJournal ends the generation's record after run returned err.
func (g *generation) settleJournal(ctx context.Context, err error) {
	j := g.journal
	if j == nil {
		return
	}
	if err != nil && fault.KindOf(err) == fault.Conflict && j.isLost() {
		j.halt()
		j.end()
		return
	}
	state, _ := g.outcome(ctx, err)
	j.settle(ctx, state, g.result(g.final, err))
}

// outcome is how this replica's run of the generation ended, after run
// returned err: the state its record settles in, and the outcome of
// agentd.generations.ended (X-O1).
func (g *generation) outcome(ctx context.Context, err error) (store.State, string) {
	switch {
	case err == nil && g.pausedNow:
		return store.Paused, outcomePaused
	case err == nil:
		return store.Completed, outcomeCompleted
	case fault.KindOf(err) == fault.Conflict && g.journal != nil && g.journal.isLost():
		// Its lease went to another replica, which runs it now.
		return store.Running, outcomeReleased
	case g.s.stopping.Load() && (errors.Is(err, errStopping) || errors.Is(context.Cause(ctx), errStopping) || g.link.gone() != nil):
		// agentd stops under it: another replica adopts it.
		return store.Running, outcomeReleased
	case g.resume != nil && !g.resume.progressed:
		// A resume that failed within its paused turn leaves the pause to
		// resume again (failed): the record stays paused too.
		return store.Paused, outcomePaused
	case errors.Is(err, errClientCancelled) || g.link.gone() != nil || fault.KindOf(err) == fault.Canceled:
		return store.Cancelled, outcomeCancelled
	default:
		return store.Failed, outcomeFailed
	}
}
