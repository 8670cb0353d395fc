package store

import (
	"context"
	"database/sql"
	"errors"
	"slices"
	"sync"
	"sync/atomic"
)

// committer runs an SQLite store's write transactions (sqliteGenerations'
// inTx) on one goroutine of its own, and those that wait together in one
// SQLite transaction: a group commit. SQLite has one writer,
// and the store one connection, so concurrent writes queued for it
// anyway, each paying its own BEGIN and COMMIT (the WAL's frames and its
// index) and, under a caller's cancellable context, database/sql's and
// the driver's watcher goroutines; on the one goroutine, whose stack has
// grown to SQLite's depth once, the writes of many generations share a
// commit.
//
// A write's outcome is the one it would have had alone: it succeeds only
// once the transaction holding it has committed, and one that fails (a
// lost lease, a generation that exists) rolls back the transaction, gets
// its error, and the others run again, in their order, in the next one.
// Its statements run with its context's values but not its cancellation
// (statements take microseconds; the driver's interruption of a statement
// rolls back the whole transaction): a caller that gives up while its
// write waits to be taken gets its context's error and the write never
// runs; one whose write was taken waits for its outcome.
type committer struct {
	db *sql.DB

	mu      sync.Mutex
	queue   []*txWrite
	stopped bool
	wake    chan struct{} // buffered: a write was queued
	stop    chan struct{}
	done    chan struct{}
	commits atomic.Int64 // transactions committed, for tests
}

// maxBatch bounds the writes of one transaction.
const maxBatch = 64

// txWrite is one write waiting for the committer.
type txWrite struct {
	ctx   context.Context
	f     func(ctx context.Context, tx *sql.Tx) error
	state atomic.Int32 // writeQueued, writeTaken or writeAbandoned
	err   chan error   // its outcome, buffered
}

const (
	writeQueued int32 = iota
	writeTaken
	writeAbandoned
)

var errStoreClosed = errors.New("the store is closed")

func newCommitter(db *sql.DB) *committer {
	c := &committer{db: db, wake: make(chan struct{}, 1), stop: make(chan struct{}), done: make(chan struct{})}
	go c.run()
	return c
}

// do runs f in a transaction, perhaps with other writes, and returns its
// outcome.
func (c *committer) do(ctx context.Context, f func(ctx context.Context, tx *sql.Tx) error) error {
	if err := ctx.Err(); err != nil {
		return unavailable(err)
	}
	w := &txWrite{ctx: ctx, f: f, err: make(chan error, 1)}
	c.mu.Lock()
	if c.stopped {
		c.mu.Unlock()
		return unavailable(errStoreClosed)
	}
	c.queue = append(c.queue, w)
	c.more()
	c.mu.Unlock()
	select {
	case err := <-w.err:
		return err
	case <-ctx.Done():
		if w.state.CompareAndSwap(writeQueued, writeAbandoned) {
			return unavailable(ctx.Err())
		}
		return <-w.err
	}
}

// close fails the writes still queued, waits for the transaction under
// way, and stops the committer. Idempotent.
func (c *committer) close() {
	c.mu.Lock()
	if !c.stopped {
		c.stopped = true
		close(c.stop)
	}
	c.mu.Unlock()
	<-c.done
}

func (c *committer) run() {
	defer close(c.done)
	for {
		select {
		case <-c.wake:
			c.commit()
		case <-c.stop:
			c.failQueued()
			return
		}
	}
}

// failQueued fails the writes that were never taken.
func (c *committer) failQueued() {
	c.mu.Lock()
	queue := c.queue
	c.queue = nil
	c.mu.Unlock()
	for _, w := range queue {
		if w.state.CompareAndSwap(writeQueued, writeTaken) {
			w.err <- unavailable(errStoreClosed)
		}
	}
}

// take takes the queued writes that their callers still wait for, up to
// maxBatch, and leaves the rest queued.
func (c *committer) take() []*txWrite {
	c.mu.Lock()
	defer c.mu.Unlock()
	var batch []*txWrite
	n := 0
	for n < len(c.queue) && len(batch) < maxBatch {
		if w := c.queue[n]; w.state.CompareAndSwap(writeQueued, writeTaken) {
			batch = append(batch, w)
		}
		n++
	}
	c.queue = slices.Delete(c.queue, 0, n)
	if len(c.queue) > 0 {
		c.more()
	}
	return batch
}

// requeue puts taken writes back at the head of the queue, in their
// order, to run in the next transaction; their callers may give up on
// them again meanwhile.
func (c *committer) requeue(ws []*txWrite) {
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, w := range ws {
		w.state.Store(writeQueued)
	}
	c.queue = slices.Insert(c.queue, 0, ws...)
	c.more()
}

// more makes the loop come round again. c.mu is held.
func (c *committer) more() {
	select {
	case c.wake <- struct{}{}:
	default:
	}
}

// commit begins a transaction (waiting for SQLite's write lock), runs the
// queued writes in it, and commits it. A write that fails rolls it back:
// the others are queued again, at the head.
func (c *committer) commit() {
	tx, err := c.db.BeginTx(context.Background(), nil)
	if err != nil {
		for _, w := range c.take() {
			w.err <- unavailable(err)
		}
		return
	}
	batch := c.take()
	if len(batch) == 0 { // their callers gave up while SQLite was busy
		_ = tx.Rollback()
		return
	}
	for i, w := range batch {
		if err := w.f(context.WithoutCancel(w.ctx), tx); err != nil {
			_ = tx.Rollback()
			w.err <- err
			c.requeue(slices.Delete(batch, i, i+1))
			return
		}
	}
	err = tx.Commit()
	if err != nil {
		err = unavailable(err)
	} else {
		c.commits.Add(1)
	}
	for _, w := range batch {
		w.err <- err
	}
}
