package record

import (
	"context"
	"sync"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	agentdv1 "github.com/agentd/agentd/gen/go/agentd/v1"
	"github.com/agentd/agentd/internal/store"
)

// Live holds the journals of the generations this replica runs, for the
// streams that follow them in memory. The zero value is ready; a nil Live
// holds nothing. Safe for concurrent use.
type Live struct{ running sync.Map }

func liveKey(tenant, id string) string { return tenant + "\x00" + id }

func (l *Live) add(j *Journal) {
	if l != nil {
		l.running.Store(liveKey(j.o.Tenant, j.o.ID), j)
	}
}

func (l *Live) remove(j *Journal) {
	if l != nil {
		l.running.CompareAndDelete(liveKey(j.o.Tenant, j.o.ID), j)
	}
}

func (l *Live) get(tenant, id string) *Journal {
	if l == nil {
		return nil
	}
	j, _ := l.running.Load(liveKey(tenant, id))
	jj, _ := j.(*Journal)
	return jj
}

// feed is what a journal passes on to the streams that follow it in
// memory (j.mu guards it): its latest events, which each follower reads
// at its own pace, waking when the journal's advanced closes. A follower
// receives each event once it is in the store (never one the store may
// not have: a replica that adopts the generation after this one died
// numbers its own events from the store's last). One that falls more
// than followerBuffer events behind reads the rest from the store, as
// every follower does once the journal ends. One ring for all followers,
// rather than a channel each, is what lets a thousand of them follow one
// generation: a stored event costs the journal one slot, not a send to
// each, and a follower costs a counter.
type feed struct {
	recent *[followerBuffer]*agentdv1.GenerateResponse // the latest events, at their count modulo followerBuffer; nil while nobody follows
	passed int64                                       // the events passed on while followed
	subs   int                                         // the followers
	behind int                                         // the followers that have not read every event passed on
	ended  bool                                        // the journal ended: nothing more comes
}

// follower is a stream following a generation of this replica in memory:
// how many of its feed's events it has read.
type follower struct{ read int64 }

// followerBuffer is how many events a follower may fall behind.
const followerBuffer = 256

// follow subscribes a follower to the events stored after now. It
// returns the last sequence number in the store. ok is false once the
// journal is settled.
func (j *Journal) follow() (f *follower, confirmed int64, ok bool) {
	j.mu.Lock()
	defer j.mu.Unlock()
	fd := &j.feed
	if j.settled || j.lost || fd.ended {
		return nil, 0, false
	}
	if fd.recent == nil {
		fd.recent = new([followerBuffer]*agentdv1.GenerateResponse)
	}
	fd.subs++
	return &follower{read: fd.passed}, j.confirmed, true
}

// unfollow drops f.
func (j *Journal) unfollow(f *follower) {
	j.mu.Lock()
	defer j.mu.Unlock()
	fd := &j.feed
	fd.subs--
	if f.read < fd.passed {
		fd.caughtUp()
	}
	if fd.subs == 0 {
		fd.recent = nil
	}
}

// read copies into evs the events f has not read yet, as many as fit,
// and returns how many, and the channel that closes when more are
// stored. ok is false once f is to read the rest from the store: the
// journal ended and f has read every event it passed on, or f fell more
// than followerBuffer events behind.
func (j *Journal) read(f *follower, evs []*agentdv1.GenerateResponse) (n int, more <-chan struct{}, ok bool) {
	j.mu.Lock()
	defer j.mu.Unlock()
	fd := &j.feed
	unread := fd.passed - f.read
	switch {
	case unread > followerBuffer:
		return 0, nil, false
	case unread == 0:
		return 0, j.advanced, !fd.ended
	}
	for n < len(evs) && f.read < fd.passed {
		evs[n] = fd.recent[f.read%followerBuffer]
		f.read++
		n++
	}
	if f.read == fd.passed {
		fd.caughtUp()
	}
	return n, j.advanced, true
}

// caughtUp counts a follower that was behind as having read every event
// passed on: once none is behind, the ring lets go of them.
func (fd *feed) caughtUp() {
	fd.behind--
	if fd.behind == 0 && fd.recent != nil {
		clear(fd.recent[:])
	}
}

// passOn gives a stored event to the followers; j.mu is held.
func (j *Journal) passOn(ev *agentdv1.GenerateResponse) {
	fd := &j.feed
	if fd.subs == 0 {
		return
	}
	fd.recent[fd.passed%followerBuffer] = ev
	fd.passed++
	fd.behind = fd.subs
}

// dropFollowers ends the feed: each follower reads what it has not yet,
// then the rest from the store; j.mu is held.
func (j *Journal) dropFollowers() {
	j.feed.ended = true
}

// pollEvery is how often a stream following a generation that does not
// run here reads its log for events it has not sent yet.
const pollEvery = 50 * time.Millisecond

// Log reads generations' event logs for the streams that follow them:
// from the journal in memory while the generation runs on this replica,
// from the store otherwise.
type Log struct {
	Store store.Generations
	Live  *Live
	// Adopt takes tenant's generation id over for a stream that follows
	// it, once its owner's lease has lapsed or was released (its replica
	// died or stopped); it reports whether this replica now runs it.
	Adopt func(ctx context.Context, tenant, id string) bool
	// Stopping reports whether this agentd is stopping: it adopts
	// nothing more.
	Stopping func() bool
}

// Follow sends the events of tenant's generation id after sequence
// number after, each once and in order, as long as the generation runs
// (here, or on another replica), and returns how it ended: nil once it
// has completed or paused, its status if it failed or was cancelled. A
// generation whose owner's lease has lapsed is adopted here, at once.
func (l *Log) Follow(ctx context.Context, tenant, id string, after int64, out func(*agentdv1.GenerateResponse) error) error {
	return l.FollowTo(ctx, tenant, id, after, Sink{Send: out})
}

// Sink takes a followed generation's events, on the goroutine that
// follows it.
type Sink struct {
	// Send takes each event, once and in order.
	Send func(*agentdv1.GenerateResponse) error
	// Flush, when set, is called whenever every event at hand has been
	// sent and FollowTo is about to block, on the store or waiting for
	// more: a sink that gathers events writes them then. FollowTo does
	// not call it as it returns.
	Flush func() error
	// Idle, when set, is called whenever IdleEvery passes while FollowTo
	// waits, with nothing sent since it began waiting or last called
	// Idle; IdleEvery starts with FollowTo.
	Idle      func() error
	IdleEvery time.Duration
}

// FollowTo is Follow sending to sink, which may gather events and write
// them whenever it is flushed, and write something of its own when idle,
// all on the caller's goroutine.
func (l *Log) FollowTo(ctx context.Context, tenant, id string, after int64, sink Sink) error {
	c := &cursor{tenant: tenant, id: id, after: after, sink: sink, log: &logReader{gens: l.Store, tenant: tenant, id: id}}
	if sink.Idle != nil {
		c.idle = time.NewTimer(sink.IdleEvery)
		defer c.idle.Stop()
	}
	if err := l.followHere(ctx, c); err != nil {
		return err
	}
	// Not running here (or no longer, or this stream fell behind): the
	// store has the rest.
	return l.poll(ctx, c)
}

// poll follows a generation in the store, until it ends or this replica
// adopts it. A function of its own, so that its frame, the largest of
// following, is not on the stack on which a stream that follows in
// memory waits: the garbage collector halves a waiting goroutine's stack
// only while a quarter of it holds what it uses.
func (l *Log) poll(ctx context.Context, c *cursor) error {
	tick := time.NewTicker(pollEvery)
	defer tick.Stop()
	for {
		if err := c.flush(); err != nil {
			return err
		}
		rec, err := l.Store.Get(ctx, c.tenant, c.id)
		if err != nil {
			return orCause(ctx, err)
		}
		if err := l.sendStored(ctx, c, rec.LastSeq); err != nil {
			return err
		}
		if c.after >= rec.LastSeq && (rec.State.Finished() || rec.State == store.Paused) {
			return endStatus(rec)
		}
		adopted, err := l.adoptOrphan(ctx, rec, c)
		if err != nil {
			return err
		}
		if adopted {
			continue
		}
		if err := c.wait(ctx, nil, nil, tick.C); err != nil {
			return err
		}
	}
}

// cursor is where a stream following a generation stands: the last
// event it was sent.
type cursor struct {
	tenant, id string
	after      int64
	sink       Sink
	log        *logReader  // reads the stored events
	idle       *time.Timer // fires when the sink's Idle is due; nil without one
	sent       bool        // an event was sent since the last wait began
}

// send sends ev unless it was sent already.
func (c *cursor) send(ev *agentdv1.GenerateResponse) error {
	if ev.GetSequence() <= c.after {
		return nil
	}
	if err := c.sink.Send(ev); err != nil {
		return err
	}
	c.after = ev.GetSequence()
	c.sent = true
	return nil
}

// flush has the sink write what it gathered: Follow is about to block,
// on the store or waiting for events.
func (c *cursor) flush() error {
	if c.sink.Flush == nil {
		return nil
	}
	return c.sink.Flush()
}

// wait flushes the sink, then waits until more or ended closes, tick
// ticks, or ctx ends, calling the sink's Idle each time it is due
// meanwhile. A nil channel is not waited for.
func (c *cursor) wait(ctx context.Context, more, ended <-chan struct{}, tick <-chan time.Time) error {
	if err := c.flush(); err != nil {
		return err
	}
	var idle <-chan time.Time
	if c.idle != nil {
		if c.sent {
			c.idle.Reset(c.sink.IdleEvery)
		}
		idle = c.idle.C
	}
	c.sent = false
	for {
		select {
		case <-ctx.Done():
			return context.Cause(ctx)
		case <-more:
			return nil
		case <-ended:
			return nil
		case <-tick:
			return nil
		case <-idle:
			c.idle.Reset(c.sink.IdleEvery)
			if err := c.sink.Idle(); err != nil {
				return err
			}
		}
	}
}

// followHere follows the generation in memory if it runs here.
func (l *Log) followHere(ctx context.Context, c *cursor) error {
	if j := l.Live.get(c.tenant, c.id); j != nil {
		return l.followLive(ctx, j, c)
	}
	return nil
}

// adoptOrphan takes over a running generation whose lease lapsed or was
// released (its replica died or stopped), unless another replica does
// first, and follows it here. It reports whether it did. A queued one
// waits for its thread: nobody may take it.
func (l *Log) adoptOrphan(ctx context.Context, rec store.Generation, c *cursor) (bool, error) {
	if rec.State.Finished() || rec.State == store.Paused || rec.State == store.Queued || (rec.Lease.Owner != "" && !time.Now().After(rec.Lease.Expires)) {
		return false, nil
	}
	if l.Adopt(ctx, c.tenant, c.id) {
		return true, l.followHere(ctx, c)
	}
	if l.Stopping() {
		return false, status.Errorf(codes.Unavailable, "generation %q is not running on any replica and this agentd is stopping; attach to another", c.id)
	}
	return false, nil
}

// sendStored reads and sends the stored events after the cursor, up to
// last.
func (l *Log) sendStored(ctx context.Context, c *cursor, last int64) error {
	for c.after < last {
		if err := c.flush(); err != nil {
			return err
		}
		evs, err := l.Store.Read(ctx, c.tenant, c.id, c.after, 0)
		if err != nil {
			return orCause(ctx, err)
		}
		if len(evs) == 0 {
			return nil
		}
		if err := c.sendEvents(ctx, evs); err != nil {
			return err
		}
	}
	return nil
}

// followLive follows a generation that this replica runs: the stored
// events up to what the store has, then each new one as it is stored,
// until the generation ends here or the stream falls too far behind; then
// the caller reads the rest from the store.
func (l *Log) followLive(ctx context.Context, j *Journal, c *cursor) error {
	f, confirmed, ok := j.follow()
	if !ok {
		return nil
	}
	defer j.unfollow(f)
	if err := l.sendStored(ctx, c, confirmed); err != nil {
		return err
	}
	var evs [liveBatch]*agentdv1.GenerateResponse
	for {
		n, more, ok := j.read(f, evs[:])
		if !ok {
			return nil
		}
		err := c.sendAll(evs[:n])
		clear(evs[:n]) // this stack would hold them while it waits
		if err != nil {
			return err
		}
		if n > 0 {
			continue
		}
		if err := c.wait(ctx, more, j.ended, nil); err != nil {
			return err
		}
	}
}

// liveBatch is how many events a follower takes from its journal at a
// time.
const liveBatch = 16

// sendAll sends evs.
func (c *cursor) sendAll(evs []*agentdv1.GenerateResponse) error {
	for _, ev := range evs {
		if err := c.send(ev); err != nil {
			return err
		}
	}
	return nil
}

// sendEvents decodes stored events and sends them.
func (c *cursor) sendEvents(ctx context.Context, evs []store.Event) error {
	for _, e := range evs {
		if e.Seq <= c.after {
			continue
		}
		ev, err := c.log.event(ctx, e)
		if err != nil {
			return err
		}
		if err := c.send(ev); err != nil {
			return err
		}
	}
	return nil
}

// orCause is err, or why ctx ended if it did.
func orCause(ctx context.Context, err error) error {
	if ctx.Err() != nil {
		return context.Cause(ctx)
	}
	return err
}
