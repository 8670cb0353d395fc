package server

import (
	"context"
	"strconv"
	"sync"
	"time"

	"github.com/agentd/agentd/internal/store"
)

// allowanceShare is the part of a budget's limit a replica reserves at a
// time (at least what the call that asks may use): its calls then spend
// from that allowance without asking the store, which is asked again
// once it is spent. The store never grants more than what is left of
// the limit, so replicas pass a budget by at most one call each.
const allowanceShare = 10

// allowanceIdle is how long an allowance nobody spends from is kept
// before what it did not spend is given back, for other replicas.
const allowanceIdle = time.Second

// slotKey is one budget subject's span, as one budget sets it: a change
// of the budget's limits opens a new slot.
type slotKey struct {
	tenant, budget, subject string
	bucket                  time.Time
	maxTokens, maxNanos     int64
}

// slot holds a budget subject's allowance on this replica. Its mutex is
// held while the allowance is renewed, so that the subject's calls here
// ask the store one at a time.
type slot struct {
	mu   sync.Mutex
	cur  *allowance
	gone bool // forgotten by giveBack: a call that finds it takes the key's new slot
}

// allowance is what the store granted this replica of a budget subject's
// period (charge's amounts), and what its calls took of it: pending
// while they run (their estimates), used once they ended.
type allowance struct {
	slot    *slot
	id      string
	charge  store.Charge
	pending store.Spent
	used    store.Spent
	calls   int
	closed  bool // no call takes from it any more; given back after its last
	lastUse time.Time
	// renewBy is when it stops taking calls, well before its reservation
	// lapses (reservationTTL): what its calls used is counted by then.
	renewBy time.Time
}

// fits reports whether a call expected to use est fits in what is left,
// at now.
func (a *allowance) fits(est store.Spent, now time.Time) bool {
	if !now.Before(a.renewBy) {
		return false
	}
	left := func(granted, pending, used, want, max int64) bool { return max == 0 || pending+used+want <= granted }
	return left(a.charge.Tokens, a.pending.Tokens, a.used.Tokens, est.Tokens, a.charge.MaxTokens) &&
		left(a.charge.Nanos, a.pending.Nanos, a.used.Nanos, est.Nanos, a.charge.MaxNanos)
}

// taken is a call's part of an allowance: est, what it was expected to
// use.
type taken struct {
	a   *allowance
	est store.Spent
}

// budgetRefusal is a budget's refusal of a call: the subject's spending when
// the store refused.
type budgetRefusal struct {
	charge store.Charge
	spent  spentOf
}

// spentOf is a subject's spending as the store reported it.
type spentOf store.Spent

// reaches reports whether s, counted spending alone (not reservations),
// has reached either of c's limits: the budget is spent, not merely held
// by allowances.
func (s spentOf) reaches(c store.Charge) bool {
	return c.MaxTokens > 0 && s.Tokens >= c.MaxTokens || c.MaxNanos > 0 && s.Nanos >= c.MaxNanos
}

// take takes est from the allowance of the budget subject c (its key
// and limits) for one call, renewing it from the store when it cannot
// hold est: the spent allowance is given back (settled) with what its
// calls used, once they all ended, and a new one asked for. settled is
// the subject's spending the store reported when it settled one.
func (s *spending) take(ctx context.Context, c store.Charge, est store.Spent, idPrefix string) (t taken, settled *store.Spent, _ *budgetRefusal, _ error) {
	sl := s.lockedSlot(slotKey{c.Tenant, c.Budget, c.Subject, c.Bucket, c.MaxTokens, c.MaxNanos})
	defer sl.mu.Unlock()
	now := s.now()
	if a := sl.cur; a != nil && a.fits(est, now) {
		a.add(est, now)
		return taken{a, est}, nil, nil, nil
	}
	if a := sl.cur; a != nil {
		sl.cur, a.closed = nil, true
		if a.calls == 0 {
			spent, err := s.settle(ctx, a)
			if err != nil {
				return taken{}, nil, nil, err
			}
			settled = &spent
		}
	}
	want := c
	want.Tokens, want.Nanos = share(c.MaxTokens, est.Tokens), share(c.MaxNanos, est.Nanos)
	// Unique among this replica's reservations whatever the clock says
	// (a generation's id, then this replica's count).
	id := idPrefix + ":" + strconv.FormatUint(s.seq.Add(1), 36)
	charges := []store.Charge{want}
	rctx, cancel := store.WriteContext(ctx)
	defer cancel()
	refused, err := s.store.Reserve(rctx, id, charges, now, now.Add(reservationTTL))
	want = charges[0] // what the store granted
	if err != nil || refused != nil {
		var r *budgetRefusal
		if refused != nil {
			r = &budgetRefusal{charge: c, spent: spentOf(refused.Spent)}
		}
		return taken{}, settled, r, err
	}
	// The store granted at most what is left: the call runs even where
	// that is less than it may use (the one call a replica may pass the
	// budget by).
	a := &allowance{slot: sl, id: id, charge: want, renewBy: now.Add(reservationTTL / 2)}
	a.add(est, now)
	sl.cur = a
	return taken{a, est}, settled, nil, nil
}

// share is what an allowance asks of a limit, for a call that may use
// est: a tenth of the limit, or est where that is more; est alone where
// nothing limits it.
func share(limit, est int64) int64 {
	if limit == 0 {
		return est
	}
	return max(limit/allowanceShare, est)
}

func (a *allowance) add(est store.Spent, now time.Time) {
	a.pending.Tokens += est.Tokens
	a.pending.Nanos += est.Nanos
	a.calls++
	a.lastUse = now
}

// release ends t's call, which used used: it counts in its allowance,
// and an allowance closed meanwhile is given back once its last call
// ended. settled is then the subject's spending the store reported.
func (s *spending) release(ctx context.Context, t taken, used store.Spent) (settled *store.Spent, _ error) {
	a := t.a
	a.slot.mu.Lock()
	a.pending.Tokens -= t.est.Tokens
	a.pending.Nanos -= t.est.Nanos
	a.used.Tokens += used.Tokens
	a.used.Nanos += used.Nanos
	a.calls--
	last := a.closed && a.calls == 0
	a.slot.mu.Unlock()
	if !last {
		return nil, nil
	}
	spent, err := s.settle(ctx, a)
	return &spent, err
}

// settle gives back what a closed allowance did not spend: the store
// counts what its calls used, and its reservation ends.
func (s *spending) settle(ctx context.Context, a *allowance) (store.Spent, error) {
	c := a.charge
	c.Tokens, c.Nanos = a.used.Tokens, a.used.Nanos
	ctx, cancel := store.WriteContext(ctx)
	defer cancel()
	spent, err := s.store.Settle(ctx, a.id, []store.Charge{c}, s.now())
	if err != nil || len(spent) == 0 {
		return store.Spent{}, err
	}
	return spent[0], nil
}

// lockedSlot returns k's slot, locked.
func (s *spending) lockedSlot(k slotKey) *slot {
	for {
		s.mu.Lock()
		sl := s.slots[k]
		if sl == nil {
			sl = &slot{}
			s.slots[k] = sl
		}
		s.mu.Unlock()
		sl.mu.Lock()
		if !sl.gone {
			return sl
		}
		sl.mu.Unlock()
	}
}

// giveBack gives back the allowances nobody spent from for allowanceIdle,
// or that reached their renewBy (all of them with all); a busy one
// among those takes no more calls, and its last call to end gives it
// back. It forgets the slots left empty.
func (s *spending) giveBack(ctx context.Context, all bool) error {
	s.mu.Lock()
	slots := make([]*slot, 0, len(s.slots))
	for _, sl := range s.slots {
		slots = append(slots, sl)
	}
	s.mu.Unlock()
	now := s.now()
	var firstErr error
	for _, sl := range slots {
		sl.mu.Lock()
		a := sl.cur
		switch {
		case a == nil:
		case a.calls == 0 && (all || now.Sub(a.lastUse) >= allowanceIdle || !now.Before(a.renewBy)):
			sl.cur, a.closed = nil, true
			if _, err := s.settle(ctx, a); err != nil && firstErr == nil {
				firstErr = err
			}
		case all || !now.Before(a.renewBy):
			// Busy: its last call to end gives it back.
			sl.cur, a.closed = nil, true
		}
		sl.mu.Unlock()
	}
	s.forgetEmpty()
	return firstErr
}

// forgetEmpty forgets the slots without an allowance.
func (s *spending) forgetEmpty() {
	s.mu.Lock()
	defer s.mu.Unlock()
	for k, sl := range s.slots {
		if !sl.mu.TryLock() {
			continue // renewing: not empty
		}
		if sl.cur == nil {
			sl.gone = true
			delete(s.slots, k)
		}
		sl.mu.Unlock()
	}
}
