package record

import (
	"sync"
	"time"
)

// keeper does a journal's writes and lease renewals. It holds no
// goroutine of its own: timers mark what is due (the lease's renewal
// every third of its ttl, a flush flushEvery after the first unwritten
// event, a retry after a failed write) and start a worker, which does
// what is due, one write at a time, and ends when nothing is. So a
// generation that waits on its client for hours holds three stopped or
// pending timers, not a goroutine and its stack, and costs a worker's
// life each renewal. stop joins the worker under way; nothing starts
// after it.
type keeper struct {
	j *Journal

	mu       sync.Mutex
	renewDue bool // the lease is due for renewal
	writeDue bool // a write is due
	working  bool // a worker runs
	armed    bool // flush runs: a write is due within flushEvery
	retrying bool // retry runs: writes wait for it
	stopped  bool // stop ran, or the lease is lost: nothing more starts
	backoff  time.Duration
	renew    *time.Timer
	flush    *time.Timer
	retry    *time.Timer
	workers  sync.WaitGroup
}

// start arms the keeper's renewals for j.
func (k *keeper) start(j *Journal) {
	every := max(j.o.TTL/3, 10*time.Millisecond)
	k.mu.Lock()
	defer k.mu.Unlock()
	k.j = j
	k.backoff = retryMin
	k.flush = time.AfterFunc(time.Hour, k.flushed)
	k.flush.Stop()
	k.retry = time.AfterFunc(time.Hour, k.retried)
	k.retry.Stop()
	k.renew = time.AfterFunc(every, func() {
		k.mu.Lock()
		defer k.mu.Unlock()
		if k.stopped {
			return
		}
		k.renew.Reset(every)
		k.renewDue = true
		k.workLocked()
	})
}

// soon asks for a write within flushEvery: the flush timer runs only
// while something is pending. Before the keeper starts, soon and poke do
// nothing: the journal's first writes are its own (Create, Resume).
func (j *Journal) soon() {
	k := &j.keeper
	k.mu.Lock()
	defer k.mu.Unlock()
	if k.j != nil && !k.stopped && !k.armed {
		k.armed = true
		k.flush.Reset(flushEvery)
	}
}

// poke asks for a write now (unless a retry is due, which writes).
func (j *Journal) poke() {
	k := &j.keeper
	k.mu.Lock()
	defer k.mu.Unlock()
	if k.j == nil || k.stopped || k.retrying {
		return
	}
	k.writeDue = true
	k.workLocked()
}

func (k *keeper) flushed() {
	k.mu.Lock()
	defer k.mu.Unlock()
	k.armed = false
	if k.stopped || k.retrying {
		return
	}
	k.writeDue = true
	k.workLocked()
}

func (k *keeper) retried() {
	k.mu.Lock()
	defer k.mu.Unlock()
	k.retrying = false
	if k.stopped {
		return
	}
	k.writeDue = true
	k.workLocked()
}

// workLocked starts a worker unless one runs (it will see what is due).
// k.mu is held.
func (k *keeper) workLocked() {
	if k.working || k.stopped {
		return
	}
	k.working = true
	k.workers.Add(1)
	go k.work()
}

// work does what is due until nothing is: a renewal, then a write (a
// renewal brings the writes along, as they are due by then anyway).
func (k *keeper) work() {
	defer k.workers.Done()
	for {
		k.mu.Lock()
		renew, write := k.renewDue, k.writeDue || k.renewDue
		k.renewDue, k.writeDue = false, false
		if k.stopped || (!renew && !write) {
			k.working = false
			k.mu.Unlock()
			return
		}
		k.mu.Unlock()
		if renew {
			k.j.renew()
		}
		k.mu.Lock()
		write = write && !k.retrying
		k.mu.Unlock()
		if write {
			k.wrote(k.j.write())
		}
	}
}

// wrote schedules what follows a write: the flush for what came meanwhile,
// a retry with backoff after a failure, nothing more once the lease is
// lost.
func (k *keeper) wrote(err error) {
	var pending bool
	if err == nil {
		pending = k.j.pendingWrite()
	}
	lost := err != nil && k.j.Lost()
	k.mu.Lock()
	defer k.mu.Unlock()
	switch {
	case err == nil:
		k.backoff = retryMin
		if pending && !k.armed && !k.stopped {
			k.armed = true
			k.flush.Reset(flushEvery)
		}
	case lost:
		k.stopLocked()
	default:
		k.retrying = true
		k.retry.Reset(k.backoff)
		k.backoff = min(2*k.backoff, retryMax)
	}
}

// stopLocked stops the timers; nothing starts after it. k.mu is held.
func (k *keeper) stopLocked() {
	k.stopped = true
	k.renew.Stop()
	k.flush.Stop()
	k.retry.Stop()
}

// stop stops the keeper and joins the worker under way. Idempotent.
func (k *keeper) stop() {
	k.mu.Lock()
	k.stopLocked()
	k.mu.Unlock()
	k.workers.Wait()
}
