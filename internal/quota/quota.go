// Package quota holds a tenant's generations to its limits: how
// many run at once (limits.max_concurrent_generations), how many start a
// minute (limits.generations_per_minute, a token bucket), and the error of
// any limit reached, paused generations included
// (limits.max_paused_generations, which the server checks against the
// store). Each limit is set globally (limits) or per tenant
// (tenants.<name>.limits), and each tenant is held to its own: one tenant
// at its limit never slows another.
//
// A limit reached is a fault.Exhausted error with the delay after which
// a retry may succeed (a google.rpc.RetryInfo) and the limit by its
// setting (a google.rpc.QuotaFailure whose subject is "tenant:<name>").
package quota

import (
	"fmt"
	"sync"
	"time"

	"github.com/agentd/agentd/internal/config"
	"github.com/agentd/agentd/internal/fault"
)

// ConcurrencyRetry is the retry delay given when a tenant runs as many
// generations as it may: when one ends cannot be known, so it is a hint.
const ConcurrencyRetry = time.Second

// Limit is one limit and the setting that sets it.
type Limit struct {
	// N is the limit; 0 is none.
	N int
	// Setting names where it is configured, e.g.
	// "tenants.acme.limits.generations_per_minute" or
	// "limits.generations_per_minute": a QuotaFailure names it.
	Setting string
}

// Limits are one tenant's limits.
type Limits struct {
	// Concurrent caps the generations running at once (new and resumed
	// alike; a paused one is not running).
	Concurrent Limit
	// PerMinute is the rate of new generations: a bucket of PerMinute
	// tokens that refills continuously, PerMinute a minute. A resume takes
	// no token: it continues a generation the rate already admitted.
	PerMinute Limit
	// Paused caps the stored paused generations. The Limiter does not
	// count them (the store does); Exceeded makes the error of a
	// generation that would pause beyond it.
	Paused Limit
	// Threads caps the tenant's threads, and ThreadItems the items of one
	// thread; the store counts them.
	Threads, ThreadItems Limit
}

// Configured returns the limits of a configured tenant: where own (its
// tenants.<tenant>.limits, nil if unset) sets a limit, that one, named
// by its setting; elsewhere the global one (limits.*). With tenant ""
// the global limits alone.
func Configured(global config.Limits, tenant string, own *config.Limits) Limits {
	pick := func(g int, o func(config.Limits) int, key string) Limit {
		if own != nil && o(*own) != 0 {
			return Limit{N: o(*own), Setting: "tenants." + tenant + ".limits." + key}
		}
		if g != 0 {
			return Limit{N: g, Setting: "limits." + key}
		}
		return Limit{}
	}
	return Limits{
		Concurrent:  pick(global.MaxConcurrentGenerations, func(l config.Limits) int { return l.MaxConcurrentGenerations }, "max_concurrent_generations"),
		PerMinute:   pick(global.GenerationsPerMinute, func(l config.Limits) int { return l.GenerationsPerMinute }, "generations_per_minute"),
		Paused:      pick(global.MaxPausedGenerations, func(l config.Limits) int { return l.MaxPausedGenerations }, "max_paused_generations"),
		Threads:     pick(global.MaxThreads, func(l config.Limits) int { return l.MaxThreads }, "max_threads"),
		ThreadItems: pick(global.MaxThreadItems, func(l config.Limits) int { return l.MaxThreadItems }, "max_thread_items"),
	}
}

// Exceeded is the error of tenant over limit l: Exhausted, saying msg,
// with retry as its RetryInfo and l's setting in a QuotaFailure.
func Exceeded(tenant string, l Limit, retry time.Duration, msg string) *fault.Error {
	return &fault.Error{
		Kind:       fault.Exhausted,
		Msg:        msg,
		RetryDelay: retry,
		Quota:      []fault.QuotaViolation{{Subject: "tenant:" + tenant, Description: l.Setting}},
	}
}

// Limiter admits generations within their tenant's limits. It keeps, per
// tenant, the generations running and the rate's bucket. Safe for
// concurrent use.
type Limiter struct {
	mu      sync.Mutex
	tenants map[string]*usage
	sweepAt int // sweep idle tenants when this many are kept
}

// usage is one tenant's: its running generations and its bucket.
type usage struct {
	running   int
	perMinute int64 // the bucket's size and rate when last taken from; 0: none yet
	// tokens are in the bucket at filled, in units of a minute's
	// nanoseconds: refilling perMinute tokens a minute adds perMinute
	// units a nanosecond, so the arithmetic is exact.
	tokens int64
	filled time.Time // when tokens was last brought up to date
}

// token is one token in the bucket's units.
const token = int64(time.Minute)

// minSweep is the fewest tenants kept before idle ones are swept.
const minSweep = 64

// New returns a Limiter with no generation running.
func New() *Limiter {
	return &Limiter{tenants: make(map[string]*usage), sweepAt: minSweep}
}

// Start admits a new generation of tenant within lim: it takes one of the
// tenant's concurrency slots and one token of its rate, or neither and
// returns the error of the first limit reached. release gives the slot
// back when the generation ends, however it ends (completed, failed,
// cancelled or paused); it is idempotent.
func (l *Limiter) Start(tenant string, lim Limits) (release func(), _ error) {
	return l.admit(tenant, lim, true)
}

// Resume admits a resumed generation of tenant: a concurrency slot, but
// no token of the rate (see Limits.PerMinute). release is as Start's.
func (l *Limiter) Resume(tenant string, lim Limits) (release func(), _ error) {
	return l.admit(tenant, lim, false)
}

func (l *Limiter) admit(tenant string, lim Limits, rated bool) (func(), error) {
	if lim.Concurrent.N <= 0 && (!rated || lim.PerMinute.N <= 0) {
		return func() {}, nil
	}
	now := time.Now()
	l.mu.Lock()
	defer l.mu.Unlock()
	u := l.tenants[tenant]
	if u == nil {
		l.sweep(now)
		u = &usage{tokens: int64(lim.PerMinute.N) * token, filled: now}
		l.tenants[tenant] = u
	}
	if c := lim.Concurrent; c.N > 0 && u.running >= c.N {
		return nil, Exceeded(tenant, c, ConcurrencyRetry, fmt.Sprintf(
			"%s runs %d generations, as many as %s allows; retry when one ends", Who(tenant), u.running, c.Setting))
	}
	if r := lim.PerMinute; rated && r.N > 0 {
		u.refill(now, int64(r.N))
		if u.tokens < token {
			wait := time.Duration((token - u.tokens + int64(r.N) - 1) / int64(r.N))
			return nil, Exceeded(tenant, r, wait, fmt.Sprintf(
				"%s starts generations as fast as %s allows (%d a minute); retry in %s", Who(tenant), r.Setting, r.N, wait.Round(time.Millisecond)))
		}
		u.tokens -= token
	}
	u.running++
	var once sync.Once
	return func() {
		once.Do(func() {
			l.mu.Lock()
			u.running--
			l.mu.Unlock()
		})
	}, nil
}

// refill brings the bucket up to now at perMinute tokens a minute, up to
// perMinute.
func (u *usage) refill(now time.Time, perMinute int64) {
	u.perMinute = perMinute
	// A minute refills any bucket: longer is the same, and cannot overflow.
	elapsed := min(max(now.Sub(u.filled), 0), time.Minute)
	u.tokens = min(u.tokens+int64(elapsed)*perMinute, perMinute*token)
	u.filled = now
}

// sweep forgets the tenants with nothing running and a full bucket (a
// tenant met anew starts with one), once the kept tenants have doubled
// since the last sweep: each admission costs amortized constant time, and
// not every tenant ever seen is kept.
func (l *Limiter) sweep(now time.Time) {
	if len(l.tenants) < l.sweepAt {
		return
	}
	for name, u := range l.tenants {
		if u.running == 0 && u.full(now) {
			delete(l.tenants, name)
		}
	}
	l.sweepAt = max(minSweep, 2*len(l.tenants))
}

// full reports whether the bucket would be full at now.
func (u *usage) full(now time.Time) bool {
	return u.perMinute == 0 || u.tokens+int64(min(now.Sub(u.filled), time.Minute))*u.perMinute >= u.perMinute*token
}

// Who names tenant in a message: `the tenant "acme"`, or for "", the one
// tenant of unauthenticated callers, "this agentd's callers".
func Who(tenant string) string {
	if tenant == "" {
		return "this agentd's callers"
	}
	return fmt.Sprintf("the tenant %q", tenant)
}
