// Package pool keeps warm stdio MCP server processes for the bridge, the
// way database/sql keeps connections: Acquire prefers a process that is
// already spawned and initialized, spawns one below the limit (and takes
// whichever process is ready first, that one or a spare), and otherwise
// waits; Release retires a process (or, for a shared pool, gives it back).
// A retired process counts against the limit until it has exited.
//
// By default a process serves one session and is then retired, so no state
// leaks from one generation to the next; a filler goroutine keeps Warm
// spares ready, so a generation's first call does not wait for process
// start and handshake. A shared pool runs one process that serves every
// session at once. Idle spares beyond Warm are retired after IdleTimeout,
// any process after MaxLifetime, and a spare that exits on its own is
// counted as crashed and replaced. Given Metrics, a pool records these
// events, its waits and its processes by state as OpenTelemetry metrics.
package pool

import (
	"context"
	"log/slog"
	"slices"
	"sync"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/metric"

	"github.com/agentd/agentd/internal/fault"
)

// Config is one pool's settings.
type Config struct {
	// Warm is how many initialized processes are kept ready.
	Warm int
	// MaxProcesses caps the processes alive at once (at least 1).
	MaxProcesses int
	// IdleTimeout retires a spare beyond Warm that has waited this long.
	IdleTimeout time.Duration
	// MaxLifetime retires a process this old: a spare at once, a busy one
	// when it is released.
	MaxLifetime time.Duration
	// StartTimeout bounds spawning and initializing a spare.
	StartTimeout time.Duration
	// Shared: one process serves every session at once, and lives on
	// between sessions.
	Shared bool
	// Metrics records the pool's events and processes, each
	// measurement with Attributes; nil records nothing.
	Metrics    *Metrics
	Attributes attribute.Set
}

// Conn is a pooled process's MCP connection, as the pool uses it (the
// bridge's is *mcpconn.Conn).
type Conn interface {
	// Exited is closed once the process has exited. Safe for concurrent
	// use.
	Exited() <-chan struct{}
	// Close stops the process, ending the exchanges it still runs, and
	// waits for it. Idempotent; safe for concurrent use.
	Close() error
	// Pid is the process's id, for logs.
	Pid() int
}

// Dialer spawns a process and initializes its MCP session within timeout.
type Dialer[C Conn] func(ctx context.Context, timeout time.Duration) (C, error)

// Stats is a snapshot of a pool.
type Stats struct {
	Warm, Busy, Starting, MaxProcesses int
	Stopping                           int // retired, still exiting
	Spawned, Retired, Crashed, Waits   int64
	Shared                             bool
}

// proc is one process of the pool.
type proc[C Conn] struct {
	conn      C
	born      time.Time
	idleSince time.Time
	users     int  // sessions holding it
	gone      bool // retired while sessions still held it (shared, or the pool closed)
}

func (pr *proc[C]) exited() bool {
	select {
	case <-pr.conn.Exited():
		return true
	default:
		return false
	}
}

// Pool is the process pool of one stdio server configuration. It is safe
// for concurrent use; Close stops every process and joins every goroutine.
type Pool[C Conn] struct {
	name string
	cfg  Config
	dial Dialer[C]
	log  *slog.Logger
	m    *meters

	ctx    context.Context // the pool's lifetime, for spares
	cancel context.CancelFunc
	wg     sync.WaitGroup

	mu       sync.Mutex
	idle     []*proc[C] // initialized, nobody holds them (LIFO)
	busy     map[*proc[C]]struct{}
	starting int
	stopping int           // retired processes still exiting: they count against MaxProcesses
	queue    []*waiting    // sessions waiting for a process, oldest first
	changed  chan struct{} // closed and replaced on every change
	closed   bool
	stats    Stats
	// failures counts the spares in a row that failed to start or died
	// young; the filler starts none before retryAt, so a server that
	// cannot run is retried with back-off, not in a tight loop.
	failures int
	retryAt  time.Time
}

// Back-off between failed spares: doubling from minBackoff to maxBackoff.
// A spare that dies within healthyAge of its birth counts as failed.
const (
	minBackoff = 100 * time.Millisecond
	maxBackoff = 30 * time.Second
	healthyAge = time.Second
)

// spareFailedLocked counts a failed spare and pushes the next start back.
// p.mu is held.
func (p *Pool[C]) spareFailedLocked() {
	p.failures++
	d := maxBackoff
	if p.failures < 20 {
		d = min(minBackoff<<(p.failures-1), maxBackoff)
	}
	p.retryAt = time.Now().Add(d)
}

// New starts a pool and its filler. The name is for logs and errors.
func New[C Conn](name string, cfg Config, dial Dialer[C], log *slog.Logger) *Pool[C] {
	cfg.MaxProcesses = max(cfg.MaxProcesses, 1)
	if cfg.Shared {
		cfg.MaxProcesses = 1
		cfg.Warm = min(cfg.Warm, 1)
	}
	cfg.Warm = min(max(cfg.Warm, 0), cfg.MaxProcesses)
	ctx, cancel := context.WithCancel(context.Background())
	p := &Pool[C]{
		name: name, cfg: cfg, dial: dial, log: log.With("pool", name),
		ctx: ctx, cancel: cancel,
		m:       newMeters(cfg.Metrics, cfg.Attributes),
		busy:    make(map[*proc[C]]struct{}),
		changed: make(chan struct{}),
	}
	p.m.m.add(p)
	p.wg.Go(p.fill)
	return p
}

// signal wakes everyone waiting for a change. p.mu is held.
func (p *Pool[C]) signal() {
	close(p.changed)
	p.changed = make(chan struct{})
}

func (p *Pool[C]) live() int { return len(p.idle) + len(p.busy) + p.starting + p.stopping }

// waiting is one Acquire in the queue, known by its address. p.mu guards
// its fields.
type waiting struct {
	// spawning: a process it started is on its way (spawnFor). It goes to
	// whoever is first in line when it is ready, which need not be this
	// Acquire: a spare readied meanwhile may have served it first.
	spawning bool
	// err is why the process it started failed, while it still waits.
	err error
}

// leave removes w from the queue and wakes the others: the next in line
// may now take its turn. p.mu is held.
func (p *Pool[C]) leave(w *waiting) {
	if i := slices.Index(p.queue, w); i >= 0 {
		p.queue = slices.Delete(p.queue, i, i+1)
		p.signal()
	}
}

// Lease is a process held by one session.
type Lease[C Conn] struct {
	p    *Pool[C]
	pr   *proc[C]
	once sync.Once
}

// Conn is the leased process's connection.
func (l *Lease[C]) Conn() C { return l.pr.conn }

// Release gives the process back: it is retired unless the pool is shared
// and the process is sound. broken says the process failed (a timeout
// killed it, it crashed) and must go whatever the pool. Release returns
// once a retired process has stopped. Idempotent.
func (l *Lease[C]) Release(broken bool) {
	l.once.Do(func() { l.p.release(l.pr, broken) })
}

// Acquire returns a process for one session: a warm spare if there is one,
// else a new process (initialized within timeout) if the pool is below
// MaxProcesses, else the first to become available within timeout.
// Sessions that must wait are served in the order they came, as
// database/sql serves its connection requests, so none waits longer than
// its turn.
func (p *Pool[C]) Acquire(ctx context.Context, timeout time.Duration) (*Lease[C], error) {
	began := time.Now()
	l, err := p.acquire(ctx, timeout)
	p.m.acquired(ctx, began, err)
	return l, err
}

func (p *Pool[C]) acquire(ctx context.Context, timeout time.Duration) (*Lease[C], error) {
	// The wait is bounded by timeout; a spawn bounds its own handshake.
	wctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	w := &waiting{}
	p.mu.Lock()
	p.queue = append(p.queue, w)
	defer func() {
		p.mu.Lock()
		p.leave(w)
		p.mu.Unlock()
	}()
	waited := false
	for {
		if p.closed {
			p.mu.Unlock()
			return nil, fault.New(fault.Unavailable, "the bridge is shutting down")
		}
		if p.queue[0] == w { // its turn
			if pr := p.takeLocked(); pr != nil {
				p.leave(w)
				p.mu.Unlock()
				return &Lease[C]{p: p, pr: pr}, nil
			}
		}
		if err := w.err; err != nil {
			p.mu.Unlock()
			return nil, err
		}
		// Below the limit it starts a process, but does not wait for that
		// one alone: a spare that is readied first (the filler's
		// replacement, started earlier) serves it sooner, and its own then
		// serves whoever is next.
		if !w.spawning && p.live() < p.cfg.MaxProcesses {
			w.spawning = true
			p.starting++
			p.wg.Add(1) // under mu, not closed: Close joins the spawn
			go p.spawnFor(ctx, timeout, w)
		}
		if !waited && !w.spawning {
			waited = true
			p.stats.Waits++
			p.m.waited()
		}
		changed := p.changed
		// While its own start is under way, that start's timeout (the
		// same) bounds the wait, and its error is the one to report.
		timedOut := wctx.Done()
		if w.spawning {
			timedOut = ctx.Done()
		}
		p.mu.Unlock()
		select {
		case <-changed:
			p.mu.Lock()
		case <-timedOut:
			if ctx.Err() == nil {
				return nil, fault.New(fault.Exhausted,
					"all %d processes of the MCP server %q are busy; raise its max_processes or wait", p.cfg.MaxProcesses, p.name).
					WithInfo("MCP_POOL_EXHAUSTED", map[string]string{"server": p.name})
			}
			return nil, ctx.Err()
		}
	}
}

// takeLocked hands out a process if one is ready: the shared process, or
// the most recently readied spare. Dead or expired spares found on the way
// are retired. p.mu is held.
func (p *Pool[C]) takeLocked() *proc[C] {
	if p.cfg.Shared {
		for pr := range p.busy {
			if !pr.exited() {
				pr.users++
				return pr
			}
			p.dropHeldLocked(pr)
		}
	}
	for len(p.idle) > 0 {
		pr := p.idle[len(p.idle)-1]
		p.idle = p.idle[:len(p.idle)-1]
		if pr.exited() {
			p.retireAsyncLocked(pr, crash)
			continue
		}
		if p.cfg.MaxLifetime > 0 && time.Since(pr.born) >= p.cfg.MaxLifetime {
			p.retireAsyncLocked(pr, lifetime)
			continue
		}
		pr.users = 1
		p.busy[pr] = struct{}{}
		p.failures = 0 // a spare served
		p.signal()     // the filler may replace the spare
		return pr
	}
	return nil
}

// dropHeldLocked retires a shared process that exited while sessions hold
// it, so that it stops counting against MaxProcesses and a new one can
// start; its holders' releases then only let go of it. p.mu is held.
func (p *Pool[C]) dropHeldLocked(pr *proc[C]) {
	delete(p.busy, pr)
	pr.gone = true
	p.retireAsyncLocked(pr, crash)
}

// spawnFor starts a process for w, an Acquire that waits (p.starting and
// p.wg were counted), and makes it ready for whoever is first in line; if
// it fails while w still waits, w gets the error. It keeps ctx's values
// (the session's trace), not its end: a process started for a session that
// stopped waiting serves the next. Close cancels the start and waits for
// it.
func (p *Pool[C]) spawnFor(ctx context.Context, timeout time.Duration, w *waiting) {
	defer p.wg.Done()
	dctx, cancel := context.WithCancel(context.WithoutCancel(ctx))
	stop := context.AfterFunc(p.ctx, cancel)
	conn, err := p.dial(dctx, timeout)
	stop()
	cancel()
	p.mu.Lock()
	defer p.mu.Unlock()
	p.starting--
	w.spawning = false
	defer p.signal()
	if err != nil {
		if p.ctx.Err() != nil {
			return // Acquire reports the shutdown
		}
		if slices.Contains(p.queue, w) {
			w.err = err
		} else {
			p.log.Warn("starting an mcp server process for a session that no longer waits failed", "err", err)
		}
		return
	}
	p.readyLocked(conn)
}

// readyLocked counts a process started and makes it a spare, or, if the
// pool closed while it started, stops it. p.mu is held, and released
// while a process stops.
func (p *Pool[C]) readyLocked(conn C) {
	p.spawnedLocked()
	if p.closed {
		p.retiringLocked(shutdown)
		p.mu.Unlock()
		_ = conn.Close()
		p.mu.Lock()
		return
	}
	pr := &proc[C]{conn: conn, born: time.Now(), idleSince: time.Now()}
	p.idle = append(p.idle, pr)
	p.watch(pr)
}

// watch wakes the filler when pr's process exits, so a crashed spare is
// replaced (and a crashed shared process retired) at once. p.mu is held.
func (p *Pool[C]) watch(pr *proc[C]) {
	p.wg.Go(func() {
		select {
		case <-pr.conn.Exited():
		case <-p.ctx.Done():
			return
		}
		p.mu.Lock()
		if _, held := p.busy[pr]; held && p.cfg.Shared && !p.closed {
			p.dropHeldLocked(pr)
		}
		p.signal()
		p.mu.Unlock()
	})
}

func (p *Pool[C]) release(pr *proc[C], broken bool) {
	p.mu.Lock()
	pr.users--
	if pr.gone { // already retired (a shared process that crashed, or the pool closed)
		p.mu.Unlock()
		return
	}
	if broken || pr.exited() {
		delete(p.busy, pr)
		pr.gone = true
		p.retireLocked(pr, crash)
		p.mu.Unlock()
		return
	}
	if pr.users > 0 {
		p.mu.Unlock()
		return
	}
	delete(p.busy, pr)
	if p.cfg.Shared && !p.closed && (p.cfg.MaxLifetime <= 0 || time.Since(pr.born) < p.cfg.MaxLifetime) {
		pr.idleSince = time.Now()
		p.idle = append(p.idle, pr)
		p.signal()
		p.mu.Unlock()
		return
	}
	why := oneSession
	switch {
	case p.closed:
		why = shutdown
	case p.cfg.Shared:
		why = lifetime
	}
	p.retireLocked(pr, why)
	p.mu.Unlock()
}

// retireLocked stops pr, which the caller has already removed from idle
// and busy. p.mu is held on entry and exit but released while the process
// stops, so callers re-read the pool's state afterwards.
func (p *Pool[C]) retireLocked(pr *proc[C], why reason) {
	p.retiringLocked(why)
	p.stopping++
	p.mu.Unlock()
	p.stop(pr)
	p.mu.Lock()
}

// retireAsyncLocked stops pr, which the caller has already removed from
// idle and busy, in a goroutine of the pool's: p.mu stays held, and the
// process counts as stopping until it has. A spare that crashed young
// counts as a failed start. p.mu is held and the pool is not closed.
func (p *Pool[C]) retireAsyncLocked(pr *proc[C], why reason) {
	if why == crash && time.Since(pr.born) < healthyAge {
		p.spareFailedLocked()
	}
	p.retiringLocked(why)
	p.stopping++
	p.wg.Go(func() { p.stop(pr) })
}

// crash is why a process that exited on its own, or broke, goes: it is
// counted as crashed, not retired.
const crash reason = -1

// retiringLocked counts a process as retired for why, or as crashed.
// p.mu is held.
func (p *Pool[C]) retiringLocked(why reason) {
	if why == crash {
		p.stats.Crashed++
		p.m.crashed()
		return
	}
	p.stats.Retired++
	p.m.retired(why)
}

// spawnedLocked counts a process started. p.mu is held.
func (p *Pool[C]) spawnedLocked() {
	p.stats.Spawned++
	p.m.spawned()
}

// stop stops pr's process and returns once its Close has. The process
// stops counting against MaxProcesses as soon as it has exited (been
// reaped), not once Close has drained its pipes and ended its MCP session:
// a spare can start in its place that much sooner. p.mu is not held.
func (p *Pool[C]) stop(pr *proc[C]) {
	closed := make(chan error, 1)
	go func() { closed <- pr.conn.Close() }()
	var err error
	select {
	case <-pr.conn.Exited():
	case err = <-closed: // Close ends with the exit; a fake's may not
		closed <- err
	}
	p.mu.Lock()
	p.stopping--
	p.signal()
	p.mu.Unlock()
	if err := <-closed; err != nil {
		p.log.Debug("retired mcp server process", "pid", pr.conn.Pid(), "err", err)
	}
}

// fill keeps Warm spares ready and reaps idle and aged processes, until the
// pool closes.
func (p *Pool[C]) fill() {
	tick := time.NewTicker(p.reapInterval())
	defer tick.Stop()
	retry := time.NewTimer(0)
	defer retry.Stop()
	for {
		p.mu.Lock()
		if p.closed {
			p.mu.Unlock()
			return
		}
		p.reapLocked()
		wait := time.Until(p.retryAt)
		for wait <= 0 && len(p.idle)+p.starting < p.cfg.Warm && p.live() < p.cfg.MaxProcesses && !(p.cfg.Shared && len(p.busy) > 0) {
			p.starting++
			p.wg.Go(p.spawnSpare)
		}
		changed := p.changed
		p.mu.Unlock()
		var retryC <-chan time.Time
		if wait > 0 {
			retry.Reset(wait)
			retryC = retry.C
		}
		select {
		case <-changed:
		case <-tick.C:
		case <-retryC:
		case <-p.ctx.Done():
			return
		}
	}
}

func (p *Pool[C]) reapInterval() time.Duration {
	d := time.Minute
	for _, c := range []time.Duration{p.cfg.IdleTimeout, p.cfg.MaxLifetime} {
		if c > 0 {
			d = min(d, c/2)
		}
	}
	return max(d, 10*time.Millisecond)
}

// reapLocked retires dead spares, spares past MaxLifetime, and spares
// beyond Warm idle for IdleTimeout. p.mu is held.
func (p *Pool[C]) reapLocked() {
	now := time.Now()
	keep := p.idle[:0]
	var aged, idled, crashed []*proc[C]
	for i, pr := range p.idle {
		switch {
		case pr.exited():
			crashed = append(crashed, pr)
			continue
		case p.failures > 0 && now.Sub(pr.born) >= healthyAge:
			p.failures = 0 // a spare that lives
		}
		switch {
		case p.cfg.MaxLifetime > 0 && now.Sub(pr.born) >= p.cfg.MaxLifetime:
			aged = append(aged, pr)
		case p.cfg.IdleTimeout > 0 && now.Sub(pr.idleSince) >= p.cfg.IdleTimeout && len(p.idle)-i+len(keep) > p.cfg.Warm:
			idled = append(idled, pr)
		default:
			keep = append(keep, pr)
		}
	}
	p.idle = keep
	for _, pr := range crashed {
		p.retireAsyncLocked(pr, crash)
	}
	for _, pr := range aged {
		p.retireAsyncLocked(pr, lifetime)
	}
	for _, pr := range idled {
		p.retireAsyncLocked(pr, idle)
	}
}

// spawnSpare starts one spare (p.starting was counted).
func (p *Pool[C]) spawnSpare() {
	ctx, cancel := context.WithCancel(p.ctx)
	defer cancel()
	conn, err := p.dial(ctx, p.cfg.StartTimeout)
	p.mu.Lock()
	defer p.mu.Unlock()
	p.starting--
	defer p.signal()
	if err != nil {
		if p.ctx.Err() == nil {
			p.spareFailedLocked()
			p.log.Warn("starting a warm mcp server process failed", "err", err, "failures", p.failures, "retry_in", time.Until(p.retryAt).Round(time.Millisecond).String())
		}
		return
	}
	p.readyLocked(conn)
}

// Stats reports the pool.
func (p *Pool[C]) Stats() Stats {
	p.mu.Lock()
	defer p.mu.Unlock()
	s := p.stats
	s.Warm, s.Busy, s.Starting, s.Stopping = len(p.idle), len(p.busy), p.starting, p.stopping
	s.MaxProcesses, s.Shared = p.cfg.MaxProcesses, p.cfg.Shared
	return s
}

// observe reports the pool's processes by state, and its limit.
func (p *Pool[C]) observe(o metric.Observer, processes, limit metric.Int64Observable) {
	s := p.Stats()
	p.m.observe(o, processes, [len(states)]int{s.Warm, s.Busy, s.Starting, s.Stopping})
	o.ObserveInt64(limit, int64(s.MaxProcesses), p.m.attrs)
}

// Idle reports whether the pool holds and starts no process at all.
func (p *Pool[C]) Idle() bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.live() == 0
}

// Close stops every process, busy ones included, and waits for them and
// for the pool's goroutines. Leases released afterwards are no-ops beyond
// their bookkeeping. Idempotent.
func (p *Pool[C]) Close() {
	p.mu.Lock()
	if p.closed {
		p.mu.Unlock()
		p.wg.Wait()
		return
	}
	p.closed = true
	procs := slices.Clone(p.idle)
	for pr := range p.busy {
		// Stopped here: its holders' releases only let go of it.
		pr.gone = true
		procs = append(procs, pr)
	}
	for range procs {
		p.retiringLocked(shutdown)
	}
	p.idle = nil
	clear(p.busy)
	p.signal()
	p.mu.Unlock()
	p.m.m.remove(p)
	p.cancel()
	var wg sync.WaitGroup
	for _, pr := range procs {
		wg.Go(func() { _ = pr.conn.Close() })
	}
	wg.Wait()
	p.wg.Wait()
}
