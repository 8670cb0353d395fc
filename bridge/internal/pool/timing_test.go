package pool

import (
	"context"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/agentd/agentd/internal/fault"
)

// The tests in this file are X-H6: the pool's timing (back-off, idle and
// lifetime reaping, processes that take time to stop) runs on fake
// processes inside a synctest bubble, whose clock moves only when every
// goroutine waits, so each test asserts exact times whatever the
// machine's load.

// fakeConn is a process in a bubble. It exits when it dies on its own
// (after its dialer's life) or when closed; closing it takes its dialer's
// stop time, as a process that uses its grace does.
type fakeConn struct {
	f      *fakes
	pid    int
	exited chan struct{}
	exit   sync.Once
}

func (c *fakeConn) Exited() <-chan struct{} { return c.exited }
func (c *fakeConn) Pid() int                { return c.pid }

func (c *fakeConn) Close() error {
	c.f.mu.Lock()
	c.f.closed = append(c.f.closed, event{c.pid, time.Since(c.f.start)})
	c.f.mu.Unlock()
	time.Sleep(c.f.stop)
	c.die()
	time.Sleep(c.f.linger)
	return nil
}

func (c *fakeConn) die() { c.exit.Do(func() { close(c.exited) }) }

// event is something that happened to a fake process, and when: the time
// since its fakes were made.
type event struct {
	pid int
	at  time.Duration
}

// fakes dials fakeConns, recording when each was dialled and closed. Make
// it inside the bubble.
type fakes struct {
	start time.Time
	err   error         // when set, every dial fails with it
	life  time.Duration // when positive, a process dies this long after its dial
	stop  time.Duration // how long Close takes
	// linger is how long Close goes on after the process has exited
	// (draining its pipes, ending its session).
	linger time.Duration

	mu     sync.Mutex
	dials  []event
	closed []event
}

func newFakes() *fakes { return &fakes{start: time.Now()} }

func (f *fakes) dial(context.Context, time.Duration) (*fakeConn, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	pid := len(f.dials) + 1
	f.dials = append(f.dials, event{pid, time.Since(f.start)})
	if f.err != nil {
		return nil, f.err
	}
	c := &fakeConn{f: f, pid: pid, exited: make(chan struct{})}
	if f.life > 0 {
		time.AfterFunc(f.life, c.die)
	}
	return c, nil
}

// dialTimes and closeTimes report when the processes were dialled and
// closed, in order.
func (f *fakes) dialTimes() []time.Duration  { return f.times(&f.dials) }
func (f *fakes) closeTimes() []time.Duration { return f.times(&f.closed) }

func (f *fakes) times(events *[]event) []time.Duration {
	f.mu.Lock()
	defer f.mu.Unlock()
	var out []time.Duration
	for _, e := range *events {
		out = append(out, e.at)
	}
	return out
}

// backoff lists the times of the starts of a server whose every start fails
// at once, up to until: 100 ms after the first, then twice as long each
// time, capped at 30 s.
func backoff(until time.Duration) []time.Duration {
	var out []time.Duration
	for at, d := time.Duration(0), 100*time.Millisecond; at <= until; at, d = at+d, min(2*d, 30*time.Second) {
		out = append(out, at)
	}
	return out
}

// X-H6: a server whose spares fail to start is retried with back-off,
// 100 ms doubling up to 30 s, and stays at 30 s however long it fails.
func TestFailingSparesBackOff(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		f := newFakes()
		f.err = fault.New(fault.Unavailable, "cannot start")
		p := New("broken", Config{Warm: 1, MaxProcesses: 2, StartTimeout: time.Second}, f.dial, discard)
		defer p.Close()
		const run = 30 * time.Minute // some 70 failures: the cap holds
		time.Sleep(run)
		synctest.Wait()
		if diff := cmp.Diff(backoff(run), f.dialTimes()); diff != "" {
			t.Errorf("X-H6 start times (-want +got):\n%s", diff)
		}
	})
}

// X-H6: a spare that dies within a second of its start counts as a failed
// start: the next one waits out the back-off from its death.
func TestYoungDeathsBackOff(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		f := newFakes()
		f.life = 10 * time.Millisecond
		p := New("fragile", Config{Warm: 1, MaxProcesses: 2, StartTimeout: time.Second}, f.dial, discard)
		defer p.Close()
		time.Sleep(2 * time.Second)
		synctest.Wait()
		// Born at d, dead at d+10ms, the next after 100 ms, 200 ms, ...
		want := []time.Duration{0, 110 * time.Millisecond, 320 * time.Millisecond, 730 * time.Millisecond, 1540 * time.Millisecond}
		if diff := cmp.Diff(want, f.dialTimes()); diff != "" {
			t.Errorf("X-H6 start times (-want +got):\n%s", diff)
		}
		if s := p.Stats(); s.Crashed != int64(len(want)) {
			t.Errorf("stats = %+v; want %d crashes", s, len(want))
		}
	})
}

// X-H6: a spare beyond the warm count is retired once it has been idle for
// IdleTimeout, at the first reaping after (the reaper runs every
// IdleTimeout/2); one within the warm count is kept.
func TestIdleReaping(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		f := newFakes()
		p := New("shared", Config{Shared: true, IdleTimeout: time.Minute}, f.dial, discard)
		defer p.Close()
		time.Sleep(10 * time.Second)
		l := acquire(t, p)
		time.Sleep(5 * time.Second)
		l.Release(false) // idle from 15 s to 75 s; the first reaping after (every 30 s) is at 90 s
		time.Sleep(time.Minute + 15*time.Second - time.Nanosecond)
		synctest.Wait()
		if got := f.closeTimes(); len(got) != 0 {
			t.Fatalf("X-H6 the idle process was retired at %v, before the reaping after its idle_timeout", got)
		}
		time.Sleep(time.Nanosecond)
		synctest.Wait()
		if diff := cmp.Diff([]time.Duration{90 * time.Second}, f.closeTimes()); diff != "" {
			t.Errorf("X-H6 retirement times (-want +got):\n%s", diff)
		}
		if !p.Idle() {
			t.Errorf("stats = %+v; want an empty pool", p.Stats())
		}

		q := New("warm", Config{Warm: 1, MaxProcesses: 2, IdleTimeout: time.Minute}, newFakes().dial, discard)
		defer q.Close()
		time.Sleep(time.Hour)
		synctest.Wait()
		if s := q.Stats(); s.Warm != 1 || s.Spawned != 1 || s.Retired != 0 {
			t.Errorf("stats after an hour = %+v; want the warm spare kept", s)
		}
	})
}

// X-H6: a spare is retired at the first reaping once it is MaxLifetime old
// (the reaper runs every minute here), and replaced at once; a busy shared
// process past its lifetime is retired when its last session lets go.
func TestLifetimeReaping(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		f := newFakes()
		p := New("aging", Config{Warm: 1, MaxProcesses: 2, MaxLifetime: time.Hour}, f.dial, discard)
		defer p.Close()
		time.Sleep(90 * time.Minute)
		synctest.Wait()
		if diff := cmp.Diff([]time.Duration{time.Hour}, f.closeTimes()); diff != "" {
			t.Errorf("X-H6 retirement times (-want +got):\n%s", diff)
		}
		if diff := cmp.Diff([]time.Duration{0, time.Hour}, f.dialTimes()); diff != "" {
			t.Errorf("X-H6 start times (-want +got):\n%s", diff)
		}

		g := newFakes()
		q := New("shared", Config{Shared: true, MaxLifetime: time.Hour}, g.dial, discard)
		defer q.Close()
		l := acquire(t, q)
		time.Sleep(2 * time.Hour)
		synctest.Wait()
		if got := g.closeTimes(); len(got) != 0 {
			t.Fatalf("a busy process was retired at %v", got)
		}
		l.Release(false)
		if diff := cmp.Diff([]time.Duration{2 * time.Hour}, g.closeTimes()); diff != "" {
			t.Errorf("X-H6 retirement times (-want +got):\n%s", diff)
		}
	})
}

// X-H6: a retired process counts against MaxProcesses until it has
// exited, so the pool never runs more than MaxProcesses at once: a
// session waits for the stop, and one that cannot wait that long is
// refused.
func TestStoppingProcessesCount(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		f := newFakes()
		f.stop = 2 * time.Second // it ignores EOF and SIGTERM, say
		p := New("stubborn", Config{MaxProcesses: 1}, f.dial, discard)
		defer p.Close()
		l := acquire(t, p)
		go l.Release(false)
		synctest.Wait()
		if _, err := p.Acquire(t.Context(), time.Second); fault.KindOf(err) != fault.Exhausted {
			t.Errorf("Acquire while the only process stops: %v; want Exhausted", err)
		}
		acquire(t, p).Release(false) // waits for the stop: at 2 s
		if diff := cmp.Diff([]time.Duration{0, 2 * time.Second}, f.dialTimes()); diff != "" {
			t.Errorf("X-H6 start times (-want +got):\n%s", diff)
		}
	})
}

// A stopping process gives its place back as soon as it has exited, not
// once its Close has finished draining what it left: the next process
// starts then, and a session waiting for it waits no longer than the
// exit.
func TestExitedProcessFreesItsPlace(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		f := newFakes()
		f.stop, f.linger = time.Second, time.Minute
		p := New("lingering", Config{MaxProcesses: 1}, f.dial, discard)
		defer p.Close()
		l := acquire(t, p)
		released := make(chan time.Duration)
		go func() { l.Release(false); released <- time.Since(f.start) }()
		next := acquire(t, p)
		if diff := cmp.Diff([]time.Duration{0, time.Second}, f.dialTimes()); diff != "" {
			t.Errorf("start times (-want +got):\n%s", diff)
		}
		// Release still returns once Close has.
		if d := <-released; d != time.Second+time.Minute {
			t.Errorf("the first Release returned at %v; want once its Close had, at 1m1s", d)
		}
		next.Release(false)
	})
}

// A session that starts a process does not wait for that one alone: the
// filler's replacement spare, started earlier, serves it when it is ready
// first, and the session's own process becomes the next spare.
func TestSpareReadiedFirstServes(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		f := newFakes()
		p := New("slow", Config{Warm: 1, MaxProcesses: 3}, func(ctx context.Context, timeout time.Duration) (*fakeConn, error) {
			time.Sleep(time.Second) // Node's start-up, say
			return f.dial(ctx, timeout)
		}, discard)
		defer p.Close()
		time.Sleep(time.Second)
		synctest.Wait()
		a := acquire(t, p) // the first spare, at 1 s; its replacement starts
		defer a.Release(false)
		time.Sleep(time.Second / 2)
		b := acquire(t, p) // starts a process, ready at 2.5 s
		defer b.Release(false)
		if got := time.Since(f.start); got != 2*time.Second {
			t.Errorf("the second session got a process at %v; want 2s, when the replacement spare was ready", got)
		}
		time.Sleep(time.Second)
		synctest.Wait()
		if s := p.Stats(); s.Warm != 1 || s.Busy != 2 || s.Starting != 0 {
			t.Errorf("stats = %+v; want the session's own process ready as the spare", s)
		}
	})
}

// Close waits for a process that a session's Acquire is starting, and
// stops it.
func TestCloseJoinsSpawns(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		f := newFakes()
		gate := make(chan struct{})
		p := New("fake", Config{MaxProcesses: 1}, func(ctx context.Context, timeout time.Duration) (*fakeConn, error) {
			<-gate // a start that does not heed the pool's close
			return f.dial(ctx, timeout)
		}, discard)
		errc := make(chan error, 1)
		go func() {
			_, err := p.Acquire(context.Background(), time.Minute)
			errc <- err
		}()
		synctest.Wait()
		if s := p.Stats(); s.Starting != 1 {
			t.Fatalf("stats = %+v; want the spawn under way", s)
		}
		closed := make(chan struct{})
		go func() { p.Close(); close(closed) }()
		synctest.Wait()
		select {
		case <-closed:
			t.Fatal("Close returned while a spawn was under way")
		default:
		}
		close(gate)
		<-closed
		if err := <-errc; fault.KindOf(err) != fault.Unavailable {
			t.Errorf("Acquire during Close = %v; want Unavailable", err)
		}
		if got := f.closeTimes(); len(got) != 1 {
			t.Errorf("the process spawned during Close was closed %d times; want once", len(got))
		}
	})
}
