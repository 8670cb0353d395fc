package main

import (
	"fmt"
	"io"
	"math"
	"os"
	"runtime"
	"slices"
	"strings"
	"time"
)

// percentile is the nearest-rank percentile p (0..1] of ds.
func percentile(ds []time.Duration, p float64) time.Duration {
	if len(ds) == 0 {
		return 0
	}
	s := slices.Clone(ds)
	slices.Sort(s)
	return s[max(int(math.Ceil(p*float64(len(s))))-1, 0)]
}

func (w window) perGen(d time.Duration) time.Duration { return d / time.Duration(max(w.gens, 1)) }

func (w window) rate() float64 { return float64(w.gens) / w.elapsed.Seconds() }

// ms formats a duration in milliseconds with three significant digits or
// so.
func ms(d time.Duration) string {
	v := float64(d) / float64(time.Millisecond)
	switch {
	case v < 10:
		return fmt.Sprintf("%.2f ms", v)
	case v < 100:
		return fmt.Sprintf("%.1f ms", v)
	}
	return fmt.Sprintf("%.0f ms", v)
}

func mib(b int64) string { return fmt.Sprintf("%.1f MiB", float64(b)/(1<<20)) }

// ratio formats a/b with about three significant digits.
func ratio(a, b float64) string {
	if b == 0 {
		return "–"
	}
	switch r := a / b; {
	case r < 0.1:
		return fmt.Sprintf("%.3f×", r)
	case r < 10:
		return fmt.Sprintf("%.2f×", r)
	case r < 100:
		return fmt.Sprintf("%.1f×", r)
	default:
		return fmt.Sprintf("%.0f×", r)
	}
}

// writeMarkdown writes the run's table, its settings and its method.
func (r *report) writeMarkdown(out io.Writer) error {
	var b strings.Builder
	c := r.o.concurrency
	fmt.Fprintf(&b, "| | sequential: median | p90 | median to `completed` | CPU/gen, sequential | CPU/gen, %d concurrent | MCP servers' CPU/gen, %d concurrent | allocated/gen | %d concurrent: generations/s | peak RSS |\n", c, c, c)
	b.WriteString("| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |\n")
	row := func(label string, m mode) {
		toc := "–"
		if len(m.seq.toCompleted) > 0 {
			toc = ms(percentile(m.seq.toCompleted, 0.5))
		}
		alloc := "–"
		if m.conc.allocObjs > 0 {
			alloc = fmt.Sprintf("%.1f KiB, %d objects", float64(m.conc.allocBytes)/float64(m.conc.gens)/1024, m.conc.allocObjs/uint64(m.conc.gens))
		}
		peak := mib(max(m.seq.peakRSS, m.conc.peakRSS))
		if servers := max(m.seq.peakServers, m.conc.peakServers); servers > 0 {
			peak += fmt.Sprintf(" + %d servers", servers)
		}
		fmt.Fprintf(&b, "| %s | %s | %s | %s | %s | %s | %s | %s | %.1f | %s |\n", label,
			ms(percentile(m.seq.latencies, 0.5)), ms(percentile(m.seq.latencies, 0.9)), toc,
			ms(m.seq.perGen(m.seq.cpu)), ms(m.conc.perGen(m.conc.cpu)), ms(m.conc.perGen(m.conc.serversCPU)),
			alloc, m.conc.rate(), peak)
	}
	ratioRow := func(label string, m, f mode) {
		d := func(a, b time.Duration) string { return ratio(float64(a), float64(b)) }
		fmt.Fprintf(&b, "| %s | %s | %s | | %s | %s | %s | | %s | %s |\n", label,
			d(percentile(m.seq.latencies, 0.5), percentile(f.seq.latencies, 0.5)),
			d(percentile(m.seq.latencies, 0.9), percentile(f.seq.latencies, 0.9)),
			d(m.seq.perGen(m.seq.cpu), f.seq.perGen(f.seq.cpu)),
			d(m.conc.perGen(m.conc.cpu), f.conc.perGen(f.conc.cpu)),
			d(m.conc.perGen(m.conc.serversCPU), f.conc.perGen(f.conc.serversCPU)),
			ratio(m.conc.rate(), f.conc.rate()),
			ratio(float64(max(m.seq.peakRSS, m.conc.peakRSS)), float64(max(f.seq.peakRSS, f.conc.peakRSS))))
	}
	row("floor: the same requests and go-sdk calls, direct", r.floor)
	row(fmt.Sprintf("durable floor: the floor and its %d steps, each an INSERT committed alone (%s)", toolTurns+2, r.storeName()), r.durableFloor)
	row(fmt.Sprintf("agentd, `shared: true` (%s)", r.storeName()), r.shared)
	row("agentd, default (a warm-pooled process per generation)", r.isolated)
	row("floor with a process per generation: spawned, initialised, stopped after", r.spawnFloor)
	ratioRow("shared / floor", r.shared, r.floor)
	ratioRow("shared / durable floor", r.shared, r.durableFloor)
	ratioRow("default / floor", r.isolated, r.floor)
	fmt.Fprintf(&b, "| default / floor with a process per generation | %s | %s | | | | %s | | %s | |\n",
		ratio(float64(percentile(r.isolated.seq.latencies, 0.5)), float64(percentile(r.spawnFloor.seq.latencies, 0.5))),
		ratio(float64(percentile(r.isolated.seq.latencies, 0.9)), float64(percentile(r.spawnFloor.seq.latencies, 0.9))),
		ratio(float64(r.isolated.conc.perGen(r.isolated.conc.serversCPU)), float64(r.spawnFloor.conc.perGen(r.spawnFloor.conc.serversCPU))),
		ratio(r.isolated.conc.rate(), r.spawnFloor.conc.rate()))

	// The spawn bound: how many server-everything
	// processes per second this machine spawns, initialises and stops, at
	// the concurrency of the windows, and what one costs in CPU.
	spawnCPU := r.spawnFloor.conc.perGen(r.spawnFloor.conc.serversCPU)
	fmt.Fprintf(&b, "\nSpawn bound: %.1f server-everything processes/s spawned and initialised at %d concurrent (one per generation, with the generation's work), %s of the servers' CPU each, so at most %.1f/s on %d CPUs if nothing else ran. ",
		r.spawnFloor.conc.rate(), c, ms(spawnCPU), float64(runtime.NumCPU())/max(spawnCPU.Seconds(), 1e-9), runtime.NumCPU())
	warm := "agentd's default (bridge.pool.warm)"
	if r.o.warm >= 0 {
		warm = fmt.Sprint(r.o.warm)
	}
	fmt.Fprintf(&b, "The stream's end after `completed`, median and p90 per generation: shared, sequential %s, %s, concurrent %s, %s; default, sequential %s, %s, concurrent %s, %s. ",
		ms(percentile(r.shared.seq.afterCompleted, 0.5)), ms(percentile(r.shared.seq.afterCompleted, 0.9)),
		ms(percentile(r.shared.conc.afterCompleted, 0.5)), ms(percentile(r.shared.conc.afterCompleted, 0.9)),
		ms(percentile(r.isolated.seq.afterCompleted, 0.5)), ms(percentile(r.isolated.seq.afterCompleted, 0.9)),
		ms(percentile(r.isolated.conc.afterCompleted, 0.5)), ms(percentile(r.isolated.conc.afterCompleted, 0.9)))
	fmt.Fprintf(&b, "The default registration's pool (max_processes 8, warm %s): sessions that waited for a process, sequential and concurrent: %d in %d generations, %d in %d; processes spawned: %d, %d.\n",
		warm, r.isolated.seq.poolWaits, r.isolated.seq.gens, r.isolated.conc.poolWaits, r.isolated.conc.gens, r.isolated.seq.poolSpawned, r.isolated.conc.poolSpawned)

	fmt.Fprintf(&b, "\nGenerations measured: %d sequential and %d concurrent (the floors, shared), %d and %d (default), %d at a time; %d warm-up each. ",
		r.o.gens, r.o.concGens, r.o.defaultGens, r.o.defConcGens, c, r.o.warmup)
	fmt.Fprintf(&b, "The fake model's CPU/gen, sequential and concurrent: floor %s, %s; shared %s, %s; default %s, %s. ",
		ms(r.floor.seq.perGen(r.floor.seq.fakeCPU)), ms(r.floor.conc.perGen(r.floor.conc.fakeCPU)),
		ms(r.shared.seq.perGen(r.shared.seq.fakeCPU)), ms(r.shared.conc.perGen(r.shared.conc.fakeCPU)),
		ms(r.isolated.seq.perGen(r.isolated.seq.fakeCPU)), ms(r.isolated.conc.perGen(r.isolated.conc.fakeCPU)))
	fmt.Fprintf(&b, "Connections the fake accepted per 100 generations, sequential and concurrent: floor %s, %s; shared %s, %s; default %s, %s. ",
		per100(r.floor.seq), per100(r.floor.conc), per100(r.shared.seq), per100(r.shared.conc), per100(r.isolated.seq), per100(r.isolated.conc))
	perGen := func(w window) string {
		n := uint64(max(w.gens, 1))
		return fmt.Sprintf("%.1f KiB, %d objects", float64(w.allocBytes)/float64(n)/1024, w.allocObjs/n)
	}
	fmt.Fprintf(&b, "Allocated/gen, sequential: floor %s; shared %s; default %s. ", perGen(r.floor.seq), perGen(r.shared.seq), perGen(r.isolated.seq))
	fmt.Fprintf(&b, "%d CPUs, %s, load average %s at the end.\n", runtime.NumCPU(), runtime.Version(), loadAverage())
	b.WriteString("\nCPU from /proc/<pid>/stat (10 ms ticks) over each window: agentd's process, or for the floors this process (nothing else runs in it meanwhile; a PostgreSQL server's CPU is in neither); " +
		"MCP servers: their processes' time, reaped ones included. Allocations over the concurrent window (the table) and the sequential one (above), per generation: " +
		"the floors' from runtime.MemStats, agentd's from /gc/heap/allocs of runtime/metrics on its debug endpoint (debug.listen). " +
		"Peak RSS: VmRSS sampled every 100 ms; the floors' is this process's, gRPC client included.\n")
	_, err := io.WriteString(out, b.String())
	return err
}

// storeName names the store that agentd and the durable floor write.
func (r *report) storeName() string {
	if r.o.postgres != "" {
		return "PostgreSQL"
	}
	return "SQLite"
}

// per100 is how many connections w's generations opened to the fake per
// 100 generations.
func per100(w window) string {
	return fmt.Sprintf("%.0f", 100*float64(w.fakeConns)/float64(max(w.gens, 1)))
}

// loadAverage is the 1-minute load average, or "?".
func loadAverage() string {
	data, err := os.ReadFile("/proc/loadavg")
	if err != nil {
		return "?"
	}
	f := strings.Fields(string(data))
	if len(f) == 0 {
		return "?"
	}
	return f[0]
}
