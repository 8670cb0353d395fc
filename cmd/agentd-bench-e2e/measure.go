package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"math"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"sync"
	"sync/atomic"
	"time"

	bridgev1 "github.com/agentd/agentd/gen/go/agentd/bridge/v1"
)

// genFunc runs one generation and returns when its completed event arrived
// (0 where there is none); err is nil only if it ran as the fake scripts
// it. One worker calls its own genFunc, one generation at a time.
type genFunc func(ctx context.Context) (toCompleted time.Duration, err error)

// subject is the process whose cost a window measures.
type subject struct {
	pid int
	// self: this process (the floor), whose allocations runtime.MemStats
	// counts and whose children are not sampled (the floor's one server
	// needs no census, and the census would cost the floor's CPU).
	self bool
	// skip: children that are not MCP servers (the floor's: the fake and
	// agentd).
	skip []int
	// seen collects the MCP server processes the sampler saw (agentd's).
	seen map[int]bool
	// debug is agentd's profiling endpoint (debug.listen), whose
	// runtime/metrics give its allocations.
	debug string
}

// window is what one measured window recorded.
type window struct {
	gens        int
	concurrency int
	elapsed     time.Duration
	latencies   []time.Duration // stream open to stream end
	toCompleted []time.Duration // stream open to the completed event; agentd only
	// afterCompleted is, per generation, from the completed event to the
	// stream's end; agentd only.
	afterCompleted []time.Duration
	cpu            time.Duration // the subject's
	serversCPU     time.Duration // its MCP servers'
	fakeCPU        time.Duration
	fakeConns      int64  // connections the fake accepted
	allocBytes     uint64 // the floor's from runtime.MemStats, agentd's from its debug endpoint
	allocObjs      uint64
	peakRSS        int64 // the subject's VmRSS, sampled
	peakServers    int   // live MCP server processes, sampled; agentd only
	// The default registration's pool over the window (agentd's
	// GetPoolStats): sessions that waited for a process, processes spawned.
	poolWaits, poolSpawned int64
}

// sampleEvery is how often a window samples RSS and the server processes.
const sampleEvery = 100 * time.Millisecond

// measure runs n generations, concurrency at a time, each worker with the
// genFunc newGen gives it, and what they cost the subject. With until
// non-nil, n is ignored: the workers start generations until it is closed,
// and the window counts those that ran. The first failed generation stops
// the window and is returned.
func measure(ctx context.Context, s subject, fake *fakeProcess, n, concurrency int, newGen func() genFunc, until <-chan struct{}) (window, error) {
	if until != nil {
		n = math.MaxInt
	}
	w := window{gens: n, concurrency: concurrency}
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()

	stopSampling := make(chan struct{})
	var sampling sync.WaitGroup
	sample := func() {
		if r, err := rss(s.pid); err == nil {
			w.peakRSS = max(w.peakRSS, r)
		}
		if s.self {
			return
		}
		kids := children(s.pid)
		w.peakServers = max(w.peakServers, len(kids))
		for _, k := range kids {
			s.seen[k] = true
		}
	}
	sample()
	sampling.Go(func() {
		t := time.NewTicker(sampleEvery)
		defer t.Stop()
		for {
			select {
			case <-stopSampling:
				return
			case <-t.C:
				sample()
			}
		}
	})

	st0, err := readStat(s.pid)
	if err != nil {
		return w, err
	}
	servers0, _, err := childrenCPU(s.pid, s.skip...)
	if err != nil {
		return w, err
	}
	fake0, err := fake.cpu()
	if err != nil {
		return w, err
	}
	conns0, err := fake.conns()
	if err != nil {
		return w, err
	}
	var ms0 runtime.MemStats
	if s.self {
		runtime.ReadMemStats(&ms0)
	}
	var bytes0, objs0 uint64
	if s.debug != "" {
		if bytes0, objs0, err = allocs(ctx, s.debug); err != nil {
			return w, err
		}
	}

	began := time.Now()
	var next atomic.Int64
	lat := make([][]time.Duration, concurrency)
	toc := make([][]time.Duration, concurrency)
	after := make([][]time.Duration, concurrency)
	var failed error
	var failOnce sync.Once
	var workers sync.WaitGroup
	for i := range concurrency {
		gen := newGen()
		workers.Go(func() {
			for next.Add(1) <= int64(n) && ctx.Err() == nil && !closed(until) {
				t0 := time.Now()
				completed, err := gen(ctx)
				if err != nil {
					failOnce.Do(func() { failed = err; cancel() })
					return
				}
				d := time.Since(t0)
				lat[i] = append(lat[i], d)
				if completed > 0 {
					toc[i] = append(toc[i], completed)
					after[i] = append(after[i], d-completed)
				}
			}
		})
	}
	workers.Wait()
	w.elapsed = time.Since(began)

	if s.self {
		var ms1 runtime.MemStats
		runtime.ReadMemStats(&ms1)
		w.allocBytes, w.allocObjs = ms1.TotalAlloc-ms0.TotalAlloc, ms1.Mallocs-ms0.Mallocs
	}
	if s.debug != "" {
		bytes1, objs1, err := allocs(ctx, s.debug)
		if err != nil && failed == nil {
			return w, err
		}
		w.allocBytes, w.allocObjs = bytes1-bytes0, objs1-objs0
	}
	st1, err := readStat(s.pid)
	if err != nil {
		return w, err
	}
	servers1, _, err := childrenCPU(s.pid, s.skip...)
	if err != nil {
		return w, err
	}
	fake1, err := fake.cpu()
	if err != nil {
		return w, err
	}
	conns1, err := fake.conns()
	if err != nil {
		return w, err
	}
	w.fakeConns = conns1 - conns0
	close(stopSampling)
	sampling.Wait()
	w.cpu, w.serversCPU, w.fakeCPU = st1.self-st0.self, servers1-servers0, fake1-fake0

	if failed != nil {
		return w, failed
	}
	if err := ctx.Err(); err != nil {
		return w, err // interrupted
	}
	for i := range lat {
		w.latencies = append(w.latencies, lat[i]...)
		w.toCompleted = append(w.toCompleted, toc[i]...)
		w.afterCompleted = append(w.afterCompleted, after[i]...)
	}
	w.gens = len(w.latencies)
	return w, nil
}

// closed reports whether ch is closed; never for a nil ch.
func closed(ch <-chan struct{}) bool {
	select {
	case <-ch:
		return true
	default:
		return false
	}
}

// mode is one side of the comparison: its sequential and concurrent
// windows.
type mode struct {
	name      string
	seq, conc window
}

// report is a run's figures.
type report struct {
	o                       options
	floor, shared, isolated mode
	// spawnFloor is the floor's work with a process spawned for each
	// generation: the machine's spawn bound on the default mode.
	spawnFloor mode
}

// bench runs the whole benchmark: the fake, agentd, warm-ups, then the
// sequential windows (floor, shared, default) and the concurrent ones in
// the same order. Progress goes to progress.
func bench(ctx context.Context, o options, progress io.Writer) (rep *report, err error) {
	bin, err := filepath.Abs(o.agentd)
	if err != nil {
		return nil, err
	}
	if _, err := os.Stat(bin); err != nil {
		return nil, fmt.Errorf("the agentd binary: %w (make build)", err)
	}
	node, err := exec.LookPath(o.node)
	if err != nil {
		return nil, err
	}
	if node, err = filepath.Abs(node); err != nil {
		return nil, err
	}
	everything, err := filepath.Abs(o.everything)
	if err != nil {
		return nil, err
	}
	if _, err := os.Stat(everything); err != nil {
		return nil, fmt.Errorf("server-everything: %w (npm ci installs it)", err)
	}
	dir, err := os.MkdirTemp("", "agentd-bench-e2e-")
	if err != nil {
		return nil, err
	}

	fake, err := startFake(ctx)
	if err != nil {
		os.RemoveAll(dir)
		return nil, err
	}
	defer fake.stop()
	a, err := startAgentd(ctx, bin, dir, node, everything, fake.baseURL, o.warm)
	if err != nil {
		return nil, err // the log is kept
	}
	defer func() {
		if stopErr := a.stop(); stopErr != nil {
			err = errors.Join(err, stopErr)
		}
		if err != nil {
			err = fmt.Errorf("%w (agentd's log: %s)", err, a.logPath)
		} else {
			os.RemoveAll(dir)
		}
	}()
	c, err := dialAgentd(a.addr, o.timeout)
	if err != nil {
		return nil, err
	}
	defer c.conn.Close()
	fmt.Fprintf(progress, "agentd %s serving on %s (pid %d, profiles at http://%s/debug/pprof/), the fake model on %s\n", bin, a.addr, a.pid(), a.debug, fake.baseURL)

	onAgentd := subject{pid: a.pid(), seen: a.seen, debug: a.debug}
	agentdGen := func(ref string) func() genFunc {
		return func() genFunc { return c.generator(ref) }
	}
	shared, isolated := agentdGen(sharedServer), agentdGen(defaultServer)
	for _, ref := range []string{sharedServer, defaultServer} {
		if _, err := measure(ctx, onAgentd, fake, o.warmup, 1, agentdGen(ref), nil); err != nil {
			return nil, fmt.Errorf("warm-up, %s: %w", ref, err)
		}
	}
	fl, err := newFloor(ctx, fake.baseURL, node, everything, o.concurrency, o.timeout)
	if err != nil {
		return nil, err
	}
	defer func() { err = errors.Join(err, fl.Close()) }()
	onSelf := subject{pid: os.Getpid(), self: true, skip: []int{fake.cmd.Process.Pid, a.pid()}}
	floorGen := func() genFunc { return fl.generate }
	if _, err := measure(ctx, onSelf, fake, o.warmup*o.concurrency, o.concurrency, floorGen, nil); err != nil {
		return nil, fmt.Errorf("warm-up, floor: %w", err)
	}

	spawnGen := func() genFunc { return fl.spawnGenerate }
	rep = &report{o: o, floor: mode{name: "floor"}, shared: mode{name: "shared"}, isolated: mode{name: "default"}, spawnFloor: mode{name: "spawn floor"}}
	windows := []struct {
		name string
		into *window
		on   subject
		n, c int
		gen  func() genFunc
		prof bool // the window -cpuprofile profiles
		pool bool // the default registration's pool is counted
	}{
		{"floor, sequential", &rep.floor.seq, onSelf, o.gens, 1, floorGen, false, false},
		{"agentd shared, sequential", &rep.shared.seq, onAgentd, o.gens, 1, shared, false, false},
		{"floor, a process per generation, sequential", &rep.spawnFloor.seq, onSelf, o.defaultGens, 1, spawnGen, false, false},
		{"agentd default, sequential", &rep.isolated.seq, onAgentd, o.defaultGens, 1, isolated, false, true},
		{"floor, concurrent", &rep.floor.conc, onSelf, o.concGens, o.concurrency, floorGen, false, false},
		{"agentd shared, concurrent", &rep.shared.conc, onAgentd, o.concGens, o.concurrency, shared, true, false},
		{"floor, a process per generation, concurrent", &rep.spawnFloor.conc, onSelf, o.defConcGens, o.concurrency, spawnGen, false, false},
		{"agentd default, concurrent", &rep.isolated.conc, onAgentd, o.defConcGens, o.concurrency, isolated, false, true},
	}
	for _, win := range windows {
		var until <-chan struct{}
		var profErr *error
		if win.prof && o.cpuProfile != "" {
			// The window lasts as long as the profile: the workers start
			// generations until it has arrived.
			fmt.Fprintf(progress, "%s: %d s (agentd's CPU profile to %s), %d at a time ... ", win.name, o.profileSeconds, o.cpuProfile, win.c)
			until, profErr = cpuProfile(ctx, a.debug, o.profileSeconds, o.cpuProfile)
		} else {
			fmt.Fprintf(progress, "%s: %d generations, %d at a time ... ", win.name, win.n, win.c)
		}
		var before *bridgev1.PoolStats
		if win.pool {
			if before, err = c.pool(ctx, defaultServer); err != nil {
				return nil, err
			}
		}
		*win.into, err = measure(ctx, win.on, fake, win.n, win.c, win.gen, until)
		if until != nil {
			<-until
			err = errors.Join(err, *profErr)
		}
		if err != nil {
			fmt.Fprintln(progress, "failed")
			return nil, fmt.Errorf("%s: %w", win.name, err)
		}
		if win.pool {
			after, err := c.pool(ctx, defaultServer)
			if err != nil {
				return nil, err
			}
			win.into.poolWaits, win.into.poolSpawned = after.GetWaits()-before.GetWaits(), after.GetSpawned()-before.GetSpawned()
		}
		fmt.Fprintf(progress, "%d generations in %.1fs\n", win.into.gens, win.into.elapsed.Seconds())
	}
	return rep, nil
}
