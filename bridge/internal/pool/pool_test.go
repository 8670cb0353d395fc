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

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/agentd/agentd/bridge/internal/mcpconn"
	"github.com/agentd/agentd/internal/fault"
	"github.com/agentd/agentd/internal/mcptest"
	"github.com/agentd/agentd/internal/proctest"
	"github.com/agentd/agentd/internal/testwait"
)

func TestMain(m *testing.M) {
	mcptest.Main()
	proctest.VerifyTestMain(m)
}

const (
	grace = 200 * time.Millisecond
	// startTimeout bounds starts and waits that must not fail: plenty for
	// a loaded machine (X-H6).
	startTimeout = 2 * time.Minute
)

var discard = slog.New(slog.DiscardHandler)

// dialer starts the fake server, counting the spawns.
func dialer(t *testing.T, server string, spawns *atomic.Int32) Dialer[*mcpconn.Conn] {
	t.Helper()
	exe, env := mcptest.Command(t, server)
	spec := mcpconn.StdioSpec{Name: "fake", Command: exe, Env: env, TerminateGrace: grace}
	return func(ctx context.Context, timeout time.Duration) (*mcpconn.Conn, error) {
		spawns.Add(1)
		return mcpconn.DialStdio(ctx, spec, timeout, mcpconn.Options{})
	}
}

func newPool(t *testing.T, cfg Config, server string) (*Pool[*mcpconn.Conn], *atomic.Int32) {
	t.Helper()
	var spawns atomic.Int32
	if cfg.StartTimeout == 0 {
		cfg.StartTimeout = startTimeout
	}
	p := New("fake", cfg, dialer(t, server, &spawns), discard)
	t.Cleanup(p.Close)
	return p, &spawns
}

func acquire[C Conn](t *testing.T, p *Pool[C]) *Lease[C] {
	t.Helper()
	l, err := p.Acquire(t.Context(), startTimeout)
	if err != nil {
		t.Fatalf("Acquire: %v", err)
	}
	return l
}

func pidOf(t *testing.T, l *Lease[*mcpconn.Conn]) int {
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
	testwait.For(t, "a warm spare", func() bool { return p.Stats().Warm == 1 })
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
	testwait.For(t, "a replacement spare", func() bool { return p.Stats().Warm == 1 })
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
	got := make(chan *Lease[*mcpconn.Conn], 1)
	go func() {
		l, err := p.Acquire(context.Background(), startTimeout)
		if err != nil {
			t.Error(err)
		}
		got <- l
	}()
	testwait.For(t, "the second waiter", func() bool { return p.Stats().Waits == 2 })
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
	testwait.For(t, "a warm spare", func() bool { return p.Stats().Warm == 1 })
	p.mu.Lock()
	victim := p.idle[0].conn.Pid()
	p.mu.Unlock()
	if err := syscall.Kill(victim, syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	testwait.For(t, "the crash to be counted and the spare replaced", func() bool {
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

// Close stops every process, busy ones included.
func TestClose(t *testing.T) {
	t.Parallel()
	var spawns atomic.Int32
	p := New("fake", Config{Warm: 2, MaxProcesses: 3, StartTimeout: startTimeout}, dialer(t, mcptest.Stubborn, &spawns), discard)
	testwait.For(t, "two warm spares", func() bool { return p.Stats().Warm == 2 })
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
		testwait.For(t, "the session to queue", func() bool { return p.Stats().Waits > waits })
	}
	first.Release(false)
	for want := range 3 {
		if i := <-got; i != want {
			t.Fatalf("session %d got the process before session %d", i, want)
		}
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

// Releasing a process with a call in flight stops it at once: it does not
// wait for the call's read_timeout. X-H6: the test releases once the call
// runs on the server, not after a guess at how long that takes.
func TestReleaseDuringCall(t *testing.T) {
	t.Parallel()
	// stall pings agentd as soon as it runs and says so on stderr once
	// agentd answered.
	log, running := mcptest.WatchStderr("mcptest: ping answered")
	exe, env := mcptest.Command(t, mcptest.Tools)
	spec := mcpconn.StdioSpec{Name: "fake", Command: exe, Env: env, TerminateGrace: grace}
	p := New("fake", Config{MaxProcesses: 1, StartTimeout: startTimeout}, func(ctx context.Context, timeout time.Duration) (*mcpconn.Conn, error) {
		return mcpconn.DialStdio(ctx, spec, timeout, mcpconn.Options{Logger: log})
	}, discard)
	t.Cleanup(p.Close)
	l := acquire(t, p)
	pid := pidOf(t, l)
	done := make(chan error, 1)
	go func() {
		_, err := l.Conn().View("fake", time.Hour, mcpconn.Owner{}).CallTool(context.Background(), "stall", nil)
		done <- err
	}()
	testwait.Recv(t, running, "the call to run")
	l.Release(false)
	if !mcptest.Gone(pid) {
		t.Errorf("process %d runs after Release", pid)
	}
	if err := testwait.Recv(t, done, "the call in flight to end once Release stopped its process"); err == nil {
		t.Error("the call in flight succeeded after its process stopped")
	}
}

// The pool's spares are failed over real processes too: a server that
// exits at once is counted as failing, and retried (the timing of the
// retries is TestFailingSparesBackOff's).
func TestFailingRealSpares(t *testing.T) {
	t.Parallel()
	spec := mcpconn.StdioSpec{Name: "false", Command: "/bin/false", TerminateGrace: grace}
	var spawns atomic.Int32
	p := New("false", Config{Warm: 1, MaxProcesses: 2, StartTimeout: startTimeout}, func(ctx context.Context, timeout time.Duration) (*mcpconn.Conn, error) {
		spawns.Add(1)
		return mcpconn.DialStdio(ctx, spec, timeout, mcpconn.Options{})
	}, discard)
	t.Cleanup(p.Close)
	testwait.For(t, "a second failed start", func() bool {
		p.mu.Lock()
		defer p.mu.Unlock()
		return p.failures >= 2
	})
	if s := p.Stats(); s.Warm != 0 || s.Spawned != 0 {
		t.Errorf("stats = %+v; want no spare and nothing counted as spawned", s)
	}
}
