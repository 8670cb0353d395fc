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

	smp := startSampler(s)
	defer smp.stop()
	c0, err := readCosts(s, fake)
	if err != nil {
		return w, err
	}
	a0, err := readAllocs(ctx, s)
	if err != nil {
		return w, err
	}

	began := time.Now()
	r := runWorkers(ctx, cancel, n, concurrency, newGen, until)
	w.elapsed = time.Since(began)

	a1, err := readAllocs(ctx, s)
	if err != nil && r.failed == nil {
		return w, err
	}
	w.allocBytes, w.allocObjs = a1.bytes-a0.bytes, a1.objs-a0.objs
	c1, err := readCosts(s, fake)
	if err != nil {
		return w, err
	}
	smp.stop()
	w.peakRSS, w.peakServers = smp.peakRSS, smp.peakServers
	w.fakeConns = c1.fakeConns - c0.fakeConns
	w.cpu, w.serversCPU, w.fakeCPU = c1.cpu-c0.cpu, c1.serversCPU-c0.serversCPU, c1.fakeCPU-c0.fakeCPU

	if r.failed != nil {
		return w, r.failed
	}
	if err := ctx.Err(); err != nil {
		return w, err // interrupted
	}
	r.into(&w)
	return w, nil
}

// sampler samples the subject's RSS and, unless it is this process, its
// MCP server processes every sampleEvery, keeping the peaks.
type sampler struct {
	s           subject
	peakRSS     int64 // written by the sampler's goroutine until stop
	peakServers int
	quit        chan struct{}
	wg          sync.WaitGroup
	once        sync.Once
}

// startSampler takes a first sample and starts sampling.
func startSampler(s subject) *sampler {
	sm := &sampler{s: s, quit: make(chan struct{})}
	sm.sample()
	sm.wg.Go(func() {
		t := time.NewTicker(sampleEvery)
		defer t.Stop()
		for {
			select {
			case <-sm.quit:
				return
			case <-t.C:
				sm.sample()
			}
		}
	})
	return sm
}

func (sm *sampler) sample() {
	if r, err := rss(sm.s.pid); err == nil {
		sm.peakRSS = max(sm.peakRSS, r)
	}
	if sm.s.self {
		return
	}
	kids := children(sm.s.pid)
	sm.peakServers = max(sm.peakServers, len(kids))
	for _, k := range kids {
		sm.s.seen[k] = true
	}
}

// stop stops sampling and waits for the sampler; it may be called again.
func (sm *sampler) stop() {
	sm.once.Do(func() { close(sm.quit) })
	sm.wg.Wait()
}

// costs are the CPU the subject, its MCP servers and the fake have used
// so far, and the connections the fake has accepted.
type costs struct {
	cpu, serversCPU, fakeCPU time.Duration
	fakeConns                int64
}

func readCosts(s subject, fake *fakeProcess) (costs, error) {
	var c costs
	st, err := readStat(s.pid)
	if err != nil {
		return c, err
	}
	c.cpu = st.self
	if c.serversCPU, _, err = childrenCPU(s.pid, s.skip...); err != nil {
		return c, err
	}
	if c.fakeCPU, err = fake.cpu(); err != nil {
		return c, err
	}
	c.fakeConns, err = fake.conns()
	return c, err
}

// allocCount is what the subject has allocated so far: this process's
// from runtime.MemStats, agentd's from its debug endpoint.
type allocCount struct{ bytes, objs uint64 }

func readAllocs(ctx context.Context, s subject) (allocCount, error) {
	switch {
	case s.debug != "":
		bytes, objs, err := allocs(ctx, s.debug)
		return allocCount{bytes, objs}, err
	case s.self:
		var ms runtime.MemStats
		runtime.ReadMemStats(&ms)
		return allocCount{ms.TotalAlloc, ms.Mallocs}, nil
	}
	return allocCount{}, nil
}

// runs are what a window's workers recorded, each its own: latencies,
// times to the completed event and after it; and the first failure.
type runs struct {
	lat, toc, after [][]time.Duration
	failed          error
}

// runWorkers runs n generations, concurrency at a time (or, with until,
// until it is closed); the first failure cancels the rest.
func runWorkers(ctx context.Context, cancel context.CancelFunc, n, concurrency int, newGen func() genFunc, until <-chan struct{}) *runs {
	r := &runs{lat: make([][]time.Duration, concurrency), toc: make([][]time.Duration, concurrency), after: make([][]time.Duration, concurrency)}
	var next atomic.Int64
	var failOnce sync.Once
	var workers sync.WaitGroup
	for i := range concurrency {
		gen := newGen()
		workers.Go(func() {
			for next.Add(1) <= int64(n) && ctx.Err() == nil && !closed(until) {
				t0 := time.Now()
				completed, err := gen(ctx)
				if err != nil {
					failOnce.Do(func() { r.failed = err; cancel() })
					return
				}
				r.record(i, time.Since(t0), completed)
			}
		})
	}
	workers.Wait()
	return r
}

// record records worker i's generation, which took d, its completed
// event after completed (0: none).
func (r *runs) record(i int, d, completed time.Duration) {
	r.lat[i] = append(r.lat[i], d)
	if completed > 0 {
		r.toc[i] = append(r.toc[i], completed)
		r.after[i] = append(r.after[i], d-completed)
	}
}

// into puts the workers' records into w, and counts its generations.
func (r *runs) into(w *window) {
	for i := range r.lat {
		w.latencies = append(w.latencies, r.lat[i]...)
		w.toCompleted = append(w.toCompleted, r.toc[i]...)
		w.afterCompleted = append(w.afterCompleted, r.after[i]...)
	}
	w.gens = len(w.latencies)
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
	// durableFloor is the floor's work with the durable steps any durable
	// runtime takes.
	durableFloor mode
	// spawnFloor is the floor's work with a process spawned for each
	// generation: the machine's spawn bound on the default mode.
	spawnFloor mode
}

// bench runs the whole benchmark: the fake, agentd, warm-ups, then the
// sequential windows (the floor, the durable floor, shared, the spawn
// floor, default) and the concurrent ones in the same order. Progress
// goes to progress.
func bench(ctx context.Context, o options, progress io.Writer) (rep *report, err error) {
	bin, node, everything, err := programs(o)
	if err != nil {
		return nil, err
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
	a, err := startAgentd(ctx, bin, dir, node, everything, fake.baseURL, o.warm, o.postgres)
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
	if err := warmUp(ctx, onAgentd, fake, o.warmup, agentdGen); err != nil {
		return nil, err
	}
	fl, err := newFloor(ctx, o, fake.baseURL, node, everything, filepath.Join(dir, "floor.db"))
	if err != nil {
		return nil, err
	}
	defer func() { err = errors.Join(err, fl.Close()) }()
	onSelf := subject{pid: os.Getpid(), self: true, skip: []int{fake.cmd.Process.Pid, a.pid()}}
	floorGen := func() genFunc { return fl.generate }
	durableGen := func() genFunc { return fl.durableGenerate }
	if err := warmUpFloors(ctx, onSelf, fake, o, floorGen, durableGen); err != nil {
		return nil, err
	}

	spawnGen := func() genFunc { return fl.spawnGenerate }
	rep = &report{o: o, floor: mode{name: "floor"}, durableFloor: mode{name: "durable floor"}, shared: mode{name: "shared"}, isolated: mode{name: "default"}, spawnFloor: mode{name: "spawn floor"}}
	r := windowRunner{fake: fake, c: c, debug: a.debug, o: o, progress: progress}
	for _, win := range []benchWindow{
		{"floor, sequential", &rep.floor.seq, onSelf, o.gens, 1, floorGen, false, false},
		{"durable floor, sequential", &rep.durableFloor.seq, onSelf, o.gens, 1, durableGen, false, false},
		{"agentd shared, sequential", &rep.shared.seq, onAgentd, o.gens, 1, shared, false, false},
		{"floor, a process per generation, sequential", &rep.spawnFloor.seq, onSelf, o.defaultGens, 1, spawnGen, false, false},
		{"agentd default, sequential", &rep.isolated.seq, onAgentd, o.defaultGens, 1, isolated, false, true},
		{"floor, concurrent", &rep.floor.conc, onSelf, o.concGens, o.concurrency, floorGen, false, false},
		{"durable floor, concurrent", &rep.durableFloor.conc, onSelf, o.concGens, o.concurrency, durableGen, false, false},
		{"agentd shared, concurrent", &rep.shared.conc, onAgentd, o.concGens, o.concurrency, shared, true, false},
		{"floor, a process per generation, concurrent", &rep.spawnFloor.conc, onSelf, o.defConcGens, o.concurrency, spawnGen, false, false},
		{"agentd default, concurrent", &rep.isolated.conc, onAgentd, o.defConcGens, o.concurrency, isolated, false, true},
	} {
		if err := r.run(ctx, win); err != nil {
			return nil, err
		}
	}
	return rep, nil
}

// begin says what window win measures and, when it is the profiled one,
// starts agentd's CPU profile: the window then lasts as long as the
// profile, until it has arrived (until), with its error in profErr.
func (r *windowRunner) begin(ctx context.Context, win benchWindow) (until <-chan struct{}, profErr *error) {
	if !win.prof || r.o.cpuProfile == "" {
		fmt.Fprintf(r.progress, "%s: %d generations, %d at a time ... ", win.name, win.n, win.c)
		return nil, nil
	}
	fmt.Fprintf(r.progress, "%s: %d s (agentd's CPU profile to %s), %d at a time ... ", win.name, r.o.profileSeconds, r.o.cpuProfile, win.c)
	return cpuProfile(ctx, r.debug, r.o.profileSeconds, r.o.cpuProfile)
}

// warmUp runs n generations on agentd with each registration, shared and
// default, one at a time.
func warmUp(ctx context.Context, onAgentd subject, fake *fakeProcess, n int, agentdGen func(ref string) func() genFunc) error {
	for _, ref := range []string{sharedServer, defaultServer} {
		if _, err := measure(ctx, onAgentd, fake, n, 1, agentdGen(ref), nil); err != nil {
			return fmt.Errorf("warm-up, %s: %w", ref, err)
		}
	}
	return nil
}

// warmUpFloors runs warm-up generations of each floor, o.concurrency at a
// time.
func warmUpFloors(ctx context.Context, onSelf subject, fake *fakeProcess, o options, gens ...func() genFunc) error {
	for _, gen := range gens {
		if _, err := measure(ctx, onSelf, fake, o.warmup*o.concurrency, o.concurrency, gen, nil); err != nil {
			return fmt.Errorf("warm-up, floors: %w", err)
		}
	}
	return nil
}

// programs are the absolute paths of the agentd binary, node and
// server-everything that o names, each of which must exist.
func programs(o options) (bin, node, everything string, err error) {
	if bin, err = filepath.Abs(o.agentd); err != nil {
		return "", "", "", err
	}
	if _, err := os.Stat(bin); err != nil {
		return "", "", "", fmt.Errorf("the agentd binary: %w (make build)", err)
	}
	if node, err = exec.LookPath(o.node); err != nil {
		return "", "", "", err
	}
	if node, err = filepath.Abs(node); err != nil {
		return "", "", "", err
	}
	if everything, err = filepath.Abs(o.everything); err != nil {
		return "", "", "", err
	}
	if _, err := os.Stat(everything); err != nil {
		return "", "", "", fmt.Errorf("server-everything: %w (npm ci installs it)", err)
	}
	return bin, node, everything, nil
}

// benchWindow is one measured window of the benchmark.
type benchWindow struct {
	name string
	into *window
	on   subject
	n, c int
	gen  func() genFunc
	prof bool // the window -cpuprofile profiles
	pool bool // the default registration's pool is counted
}

// windowRunner measures the benchmark's windows against one fake and one
// agentd (its client c and its debug endpoint).
type windowRunner struct {
	fake     *fakeProcess
	c        *agentdClient
	debug    string
	o        options
	progress io.Writer
}

// run measures win into win.into: as long as agentd's CPU profile when it
// is the profiled window, and with the default pool's waits and spawns
// when it counts them.
func (r *windowRunner) run(ctx context.Context, win benchWindow) error {
	until, profErr := r.begin(ctx, win)
	var before *bridgev1.PoolStats
	var err error
	if win.pool {
		if before, err = r.c.pool(ctx, defaultServer); err != nil {
			return err
		}
	}
	*win.into, err = measure(ctx, win.on, r.fake, win.n, win.c, win.gen, until)
	if until != nil {
		<-until
		err = errors.Join(err, *profErr)
	}
	if err != nil {
		fmt.Fprintln(r.progress, "failed")
		return fmt.Errorf("%s: %w", win.name, err)
	}
	if win.pool {
		after, err := r.c.pool(ctx, defaultServer)
		if err != nil {
			return err
		}
		win.into.poolWaits, win.into.poolSpawned = after.GetWaits()-before.GetWaits(), after.GetSpawned()-before.GetSpawned()
	}
	fmt.Fprintf(r.progress, "%d generations in %.1fs\n", win.into.gens, win.into.elapsed.Seconds())
	return nil
}
