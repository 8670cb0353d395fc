package pool

import (
	"context"
	"log/slog"
	"strconv"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/agentd/agentd/internal/proctest"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/agentd/agentd/bridge/internal/mcpconn"
	"github.com/agentd/agentd/internal/fault"
	"github.com/agentd/agentd/internal/mcptest"
)

func TestMain(m *testing.M) {
	mcptest.Main()
	proctest.VerifyTestMain(m)
}

const (
	grace        = 200 * time.Millisecond
	startTimeout = 20 * time.Second
)

// dialer starts the fake server, counting the spawns.
func dialer(t *testing.T, server string, spawns *atomic.Int32) Dialer {
	t.Helper()
	exe, env := mcptest.Command(t, server)
	spec := mcpconn.StdioSpec{Name: "fake", Command: exe, Env: env, TerminateGrace: grace}
	return func(ctx context.Context, timeout time.Duration) (*mcpconn.Conn, error) {
		spawns.Add(1)
		return mcpconn.DialStdio(ctx, spec, timeout, mcpconn.Options{})
	}
}

func newPool(t *testing.T, cfg Config, server string) (*Pool, *atomic.Int32) {
	t.Helper()
	var spawns atomic.Int32
	if cfg.StartTimeout == 0 {
		cfg.StartTimeout = startTimeout
	}
	p := New("fake", cfg, dialer(t, server, &spawns), slog.New(slog.DiscardHandler))
	t.Cleanup(p.Close)
	return p, &spawns
}

// waitFor polls cond until it holds or a generous deadline passes.
func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

func acquire(t *testing.T, p *Pool) *Lease {
	t.Helper()
	l, err := p.Acquire(t.Context(), startTimeout)
	if err != nil {
		t.Fatalf("Acquire: %v", err)
	}
	return l
}

func pidOf(t *testing.T, l *Lease) int {
	t.Helper()
	res, err := l.Conn().CallTool(t.Context(), "pid", nil)
	if err != nil {
		t.Fatal(err)
	}
	pid, err := strconv.Atoi(res.Content[0].(*mcp.TextContent).Text)
	if err != nil {
		t.Fatal(err)
	}
	if pid != l.Conn().Pid() {
		t.Fatalf("the server says pid %d, the connection %d", pid, l.Conn().Pid())
	}
	return pid
}

// X-L6: with a warm spare, acquiring starts nothing: the session gets the
// process that was spawned and initialized before it asked.
func TestWarmSpareServesFirstCall(t *testing.T) {
	t.Parallel()
	p, _ := newPool(t, Config{Warm: 1, MaxProcesses: 2}, mcptest.SlowStart)
	waitFor(t, "a warm spare", func() bool { return p.Stats().Warm == 1 })
	p.mu.Lock()
	spare := p.idle[0].conn.Pid()
	p.mu.Unlock()

	l := acquire(t, p)
	first := pidOf(t, l)
	if first != spare {
		t.Errorf("the session got process %d, not the warm spare %d", first, spare)
	}

	// One process serves one session: released, it is retired, and the
	// filler readies a replacement.
	l.Release(false)
	if !mcptest.Gone(first) {
		t.Errorf("process %d still runs after its session released it", first)
	}
	waitFor(t, "a replacement spare", func() bool { return p.Stats().Warm == 1 })
	l2 := acquire(t, p)
	defer l2.Release(false)
	if second := pidOf(t, l2); second == first {
		t.Errorf("the second session got the first session's process %d", first)
	}
	// The spares were spawned ahead: one for each session, and the filler
	// is now readying the next.
	if s := p.Stats(); s.Spawned < 2 || s.Retired != 1 || s.Busy != 1 {
		t.Errorf("stats = %+v, want 2 or more spawned, 1 retired, 1 busy", s)
	}
}

func TestSharedPool(t *testing.T) {
	t.Parallel()
	p, spawns := newPool(t, Config{Shared: true, MaxProcesses: 4}, mcptest.Tools)
	a := acquire(t, p)
	b := acquire(t, p)
	if pa, pb := pidOf(t, a), pidOf(t, b); pa != pb {
		t.Errorf("a shared pool gave two sessions processes %d and %d", pa, pb)
	}
	pid := a.Conn().Pid()
	a.Release(false)
	b.Release(false)
	a.Release(false) // idempotent
	if mcptest.Gone(pid) {
		t.Error("the shared process was retired between sessions")
	}
	c := acquire(t, p)
	if got := pidOf(t, c); got != pid {
		t.Errorf("the next session got process %d, want the shared %d", got, pid)
	}
	c.Release(true) // broken: retired
	if !mcptest.Gone(pid) {
		t.Error("a broken shared process was kept")
	}
	if spawns.Load() != 1 {
		t.Errorf("spawned %d processes, want 1", spawns.Load())
	}
	if s := p.Stats(); !s.Shared || s.MaxProcesses != 1 || s.Crashed != 1 {
		t.Errorf("stats = %+v", s)
	}
}

func TestMaxProcesses(t *testing.T) {
	t.Parallel()
	p, _ := newPool(t, Config{MaxProcesses: 1}, mcptest.Tools)
	l := acquire(t, p)

	// The pool is full: a short wait gives up with Exhausted.
	_, err := p.Acquire(t.Context(), 50*time.Millisecond)
	if fault.KindOf(err) != fault.Exhausted || !strings.Contains(err.Error(), `"fake"`) {
		t.Errorf("Acquire on a full pool: %v, want Exhausted naming the server", err)
	}
	// A waiter gets a process as soon as one is free.
	got := make(chan *Lease, 1)
	go func() {
		l, err := p.Acquire(context.Background(), startTimeout)
		if err != nil {
			t.Error(err)
		}
		got <- l
	}()
	waitFor(t, "the second waiter", func() bool { return p.Stats().Waits == 2 })
	l.Release(false)
	l2 := <-got
	if l2 == nil {
		t.Fatal("the waiter got nothing")
	}
	l2.Release(false)
	if s := p.Stats(); s.Busy != 0 || s.Spawned != 2 || s.Retired != 2 {
		t.Errorf("stats = %+v", s)
	}
}

// A spare that dies is counted as crashed and replaced.
func TestCrashedSpareIsReplaced(t *testing.T) {
	t.Parallel()
	p, _ := newPool(t, Config{Warm: 1, MaxProcesses: 2}, mcptest.Tools)
	waitFor(t, "a warm spare", func() bool { return p.Stats().Warm == 1 })
	p.mu.Lock()
	victim := p.idle[0].conn.Pid()
	p.mu.Unlock()
	if err := syscall.Kill(victim, syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "the crash to be counted and the spare replaced", func() bool {
		s := p.Stats()
		return s.Crashed == 1 && s.Warm == 1
	})
	l := acquire(t, p)
	defer l.Release(false)
	if pidOf(t, l) == victim {
		t.Error("the dead spare was handed out")
	}
}

// A process that crashes while a session holds it is retired on release.
func TestCrashWhileBusy(t *testing.T) {
	t.Parallel()
	p, _ := newPool(t, Config{MaxProcesses: 2}, mcptest.Tools)
	l := acquire(t, p)
	if _, err := l.Conn().CallTool(t.Context(), "crash", nil); err == nil {
		t.Fatal("a crashing call succeeded")
	}
	l.Release(true) // as a session does after a connection failure
	if s := p.Stats(); s.Crashed != 1 || s.Busy != 0 {
		t.Errorf("stats = %+v, want the crashed process counted and gone", s)
	}
}

func TestIdleAndLifetimeReaping(t *testing.T) {
	t.Parallel()
	t.Run("idle beyond warm", func(t *testing.T) {
		t.Parallel()
		p, _ := newPool(t, Config{Shared: true, IdleTimeout: 50 * time.Millisecond}, mcptest.Tools)
		l := acquire(t, p)
		pid := l.Conn().Pid()
		l.Release(false)
		waitFor(t, "the idle process to be reaped", func() bool { return mcptest.Gone(pid) })
		waitFor(t, "the pool to be empty", p.Idle)
	})
	t.Run("max lifetime", func(t *testing.T) {
		t.Parallel()
		p, _ := newPool(t, Config{Warm: 1, MaxProcesses: 2, MaxLifetime: 300 * time.Millisecond}, mcptest.Tools)
		waitFor(t, "a warm spare", func() bool { return p.Stats().Warm == 1 })
		p.mu.Lock()
		first := p.idle[0].conn.Pid()
		p.mu.Unlock()
		waitFor(t, "the aged spare to be replaced", func() bool { return mcptest.Gone(first) && p.Stats().Warm == 1 })
		if p.Stats().Retired < 1 {
			t.Errorf("stats = %+v", p.Stats())
		}
	})
}

// Close stops every process, busy ones included.
func TestClose(t *testing.T) {
	t.Parallel()
	var spawns atomic.Int32
	p := New("fake", Config{Warm: 2, MaxProcesses: 3, StartTimeout: startTimeout}, dialer(t, mcptest.Stubborn, &spawns), slog.New(slog.DiscardHandler))
	waitFor(t, "two warm spares", func() bool { return p.Stats().Warm == 2 })
	l := acquire(t, p)
	var pids []int
	p.mu.Lock()
	for _, pr := range p.idle {
		pids = append(pids, pr.conn.Pid())
	}
	p.mu.Unlock()
	pids = append(pids, l.Conn().Pid())
	p.Close()
	p.Close() // idempotent
	for _, pid := range pids {
		if !mcptest.Gone(pid) {
			t.Errorf("process %d survived Close", pid)
		}
	}
	l.Release(false) // after Close: harmless
	if _, err := p.Acquire(t.Context(), time.Second); fault.KindOf(err) != fault.Unavailable {
		t.Errorf("Acquire after Close: %v", err)
	}
}

// Sessions waiting for a process are served in the order they came: a
// newcomer does not overtake them.
func TestWaitersServedInOrder(t *testing.T) {
	t.Parallel()
	p, _ := newPool(t, Config{MaxProcesses: 1, Warm: 0}, mcptest.Tools)
	first := acquire(t, p)
	got := make(chan int, 3)
	for i := range 3 {
		// Each joins the queue before the next starts.
		waits := p.Stats().Waits
		go func() {
			l := acquire(t, p)
			got <- i
			l.Release(false)
		}()
		waitFor(t, "the session to queue", func() bool { return p.Stats().Waits > waits })
	}
	first.Release(false)
	for want := range 3 {
		if i := <-got; i != want {
			t.Fatalf("session %d got the process before session %d", i, want)
		}
	}
}

// A retired process counts against MaxProcesses until it has exited, so
// the pool never runs more than MaxProcesses at once.
func TestStoppingProcessesCount(t *testing.T) {
	t.Parallel()
	p, _ := newPool(t, Config{MaxProcesses: 1, Warm: 0}, mcptest.Stubborn) // takes 2×grace to stop
	l := acquire(t, p)
	released := make(chan struct{})
	go func() { l.Release(false); close(released) }()
	waitFor(t, "the retirement to start", func() bool {
		p.mu.Lock()
		defer p.mu.Unlock()
		return p.stopping == 1
	})
	if _, err := p.Acquire(t.Context(), grace/2); fault.KindOf(err) != fault.Exhausted {
		t.Errorf("Acquire while the only process stops: %v; want Exhausted", err)
	}
	<-released
	acquire(t, p).Release(false)
}

// A server whose spares fail to start (or die at once) is retried with
// back-off, not in a tight loop. The bound is loose on purpose: a slow
// machine makes fewer attempts, never more.
func TestFailingSparesBackOff(t *testing.T) {
	t.Parallel()
	var dials atomic.Int32
	p := New("broken", Config{Warm: 1, MaxProcesses: 2, StartTimeout: time.Second}, func(context.Context, time.Duration) (*mcpconn.Conn, error) {
		dials.Add(1)
		return nil, fault.New(fault.Unavailable, "cannot start")
	}, slog.New(slog.DiscardHandler))
	defer p.Close()
	waitFor(t, "the first failed start", func() bool { return dials.Load() >= 1 })
	time.Sleep(300 * time.Millisecond) // 100 ms, then 200 ms of back-off: at most 3 starts
	if n := dials.Load(); n > 3 {
		t.Errorf("%d starts in 300 ms; want back-off between failed spares", n)
	}
	p.mu.Lock()
	failures, later := p.failures, p.retryAt.After(p.now())
	p.mu.Unlock()
	if failures < 1 || !later {
		t.Errorf("failures = %d, retry later = %v", failures, later)
	}

	// Same with a real process that exits at once.
	spec := mcpconn.StdioSpec{Name: "false", Command: "/bin/false", TerminateGrace: grace}
	var spawns atomic.Int32
	q := New("false", Config{Warm: 1, MaxProcesses: 2, StartTimeout: startTimeout}, func(ctx context.Context, timeout time.Duration) (*mcpconn.Conn, error) {
		spawns.Add(1)
		return mcpconn.DialStdio(ctx, spec, timeout, mcpconn.Options{})
	}, slog.New(slog.DiscardHandler))
	defer q.Close()
	waitFor(t, "the first failed start", func() bool { return spawns.Load() >= 1 })
	time.Sleep(300 * time.Millisecond)
	if n := spawns.Load(); n > 3 {
		t.Errorf("%d processes spawned in 300 ms; want back-off", n)
	}
}

// A shared process that dies while sessions hold it is retired at once
// and counted once: new sessions get a new process without waiting for
// the holders to let go, and the holders' releases change nothing.
func TestSharedCrashWhileHeld(t *testing.T) {
	t.Parallel()
	p, _ := newPool(t, Config{Shared: true}, mcptest.Tools)
	a := acquire(t, p)
	b := acquire(t, p)
	victim := pidOf(t, a)
	if err := syscall.Kill(victim, syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	<-a.Conn().Exited()
	c, err := p.Acquire(t.Context(), startTimeout)
	if err != nil {
		t.Fatalf("a new session after the shared process died: %v (stats %+v)", err, p.Stats())
	}
	if pidOf(t, c) == victim {
		t.Error("the dead process was handed out")
	}
	a.Release(true)
	b.Release(false)
	if s := p.Stats(); s.Crashed != 1 || s.Busy != 1 {
		t.Errorf("stats = %+v; want one crash and the new process busy", s)
	}
	c.Release(false)
}

// Close waits for a process that a session's Acquire is starting, and
// stops it.
func TestCloseJoinsSpawns(t *testing.T) {
	t.Parallel()
	exe, env := mcptest.Command(t, mcptest.Tools)
	spec := mcpconn.StdioSpec{Name: "fake", Command: exe, Env: env, TerminateGrace: grace}
	gate := make(chan struct{})
	var pid atomic.Int64
	p := New("fake", Config{MaxProcesses: 1, StartTimeout: startTimeout}, func(ctx context.Context, timeout time.Duration) (*mcpconn.Conn, error) {
		<-gate
		c, err := mcpconn.DialStdio(context.WithoutCancel(ctx), spec, timeout, mcpconn.Options{})
		if c != nil {
			pid.Store(int64(c.Pid()))
		}
		return c, err
	}, slog.New(slog.DiscardHandler))
	errc := make(chan error, 1)
	go func() {
		_, err := p.Acquire(context.Background(), startTimeout)
		errc <- err
	}()
	waitFor(t, "the spawn", func() bool { return p.Stats().Starting == 1 })
	closed := make(chan struct{})
	go func() { p.Close(); close(closed) }()
	select {
	case <-closed:
		t.Fatal("Close returned while a spawn was under way")
	case <-time.After(100 * time.Millisecond):
	}
	close(gate)
	<-closed
	if err := <-errc; fault.KindOf(err) != fault.Unavailable {
		t.Errorf("Acquire during Close = %v; want Unavailable", err)
	}
	if n := pid.Load(); n != 0 && !mcptest.Gone(int(n)) {
		t.Errorf("process %d, spawned during Close, outlived it", n)
	}
}

// Releasing a process with a call in flight stops it at once: it does not
// wait for the call's read_timeout.
func TestReleaseDuringCall(t *testing.T) {
	t.Parallel()
	p, _ := newPool(t, Config{MaxProcesses: 1}, mcptest.Tools)
	l := acquire(t, p)
	pid := pidOf(t, l)
	const readTimeout = 30 * time.Second
	done := make(chan error, 1)
	go func() {
		_, err := l.Conn().View("fake", readTimeout).CallTool(context.Background(), "hang", nil)
		done <- err
	}()
	// Give the call time to reach the server (it never answers). Were it not
	// yet sent, Release would pass without proving anything, never fail.
	time.Sleep(100 * time.Millisecond)
	start := time.Now()
	l.Release(false)
	if took := time.Since(start); took >= readTimeout {
		t.Errorf("Release took %v: it waited for the call's read_timeout", took)
	}
	if err := <-done; err == nil {
		t.Error("the call in flight succeeded after its process stopped")
	}
	if !mcptest.Gone(pid) {
		t.Errorf("process %d runs after Release", pid)
	}
}
