// Command agentd-bench-e2e measures a whole generation end to end, and
// beside it, in the same run, the floors: the same work done directly,
// without agentd, with and without the durable steps any durable runtime
// takes.
//
//	go run ./cmd/agentd-bench-e2e -agentd bin/agentd [-gens 300] [-conc-gens 1500] [-default-gens 30] [-default-conc-gens 48] [-concurrency 8] [-warm N] [-cpuprofile FILE [-cpuprofile-seconds 15]] [-postgres DSN]
//
// `make bench-e2e` builds bin/agentd and runs it.
//
// # The workload
//
// A generation is four model turns: the first three each ask for one call of
// server-everything's echo tool ({"message": "turn N"}), the fourth answers
// text. The model is a fake OpenAI-compatible Chat Completions server of our
// own, streaming its answers as server-sent events, run as a separate process
// (this executable started as `agentd-bench-e2e fake-model`; it stops when its
// stdin closes). Its answers depend only on how many tool results a request
// holds, so a replayed request gets the same answer.
//
// agentd is the real binary (-agentd), started as `agentd serve` over loopback
// TCP with its default configuration but for a state directory of its own, an
// ephemeral port, no shutdown drain, the openai provider pointed at the fake
// (OPENAI_BASE_URL, OPENAI_API_KEY) and two registered servers, both
// @modelcontextprotocol/server-everything over stdio: "everything-shared" with
// shared: true (one process serves every session) and "everything" with the
// defaults (a warm-pooled process per generation, retired after it). The
// client is agentd's generated Go client on one gRPC connection; each
// generation is a Generate stream, checked to complete with three successful
// tool calls and the fake's final text.
//
// The floor is the same work in this process with nothing between: the very
// request bodies agentd sent the fake (recorded by the fake during the
// warm-up, replayed byte for byte with the same headers), each streamed answer
// read to its end and parsed, and each echo call made with the go-sdk client,
// on one session to a server-everything process of its own, with the arguments
// the stream carried. Its HTTP transport keeps as many idle connections as
// there are concurrent generations, so the floor dials no connection once
// warm.
//
// The durable floor is the floor plus the durable steps that any correct
// durable runtime must take for this workload, taken as the smallest
// program would take them: the start (the generation's request, as agentd
// receives it), a write-ahead before each tool call (the call, and the
// previous call's result), the end (the last result and the final text),
// each one INSERT into one append-only table without an index, committed
// in a transaction of its own before the generation goes on. The table is
// in an SQLite file beside agentd's state directory, opened with agentd's
// SQLite store's driver, pragmas (WAL, synchronous=NORMAL) and locking
// (BEGIN IMMEDIATE, one connection); with -postgres DSN, agentd's store
// and the durable floor's table are both in that PostgreSQL database
// (pgxpool with agentd's defaults, each INSERT alone, one round trip). The
// floor writes nothing; agentd keeps its durable record of every
// generation, which the durable floor's steps are the least of.
//
// The spawn floor is the floor's work with a server-everything process spawned
// and initialised for each generation and stopped after it, in the background
// as agentd stops a generation's process after its stream has ended: how many
// processes per second this machine can spawn and initialise, the bound on
// agentd's default mode (the spawn bound). -warm sets the default
// registration's warm spares (warm: max_processes, 8, is the case where
// sessions wait for processes that are still stopping); the agentd windows of
// the default mode report how many sessions waited for a process
// (GetPoolStats).
//
// # Figures
//
// For the floors, the shared and the default mode: latency of sequential
// generations (median, p90; a generation runs from opening its stream to the
// stream's end, and agentd's also to its completed event), and generations/s
// with -concurrency (8) generations at a time. CPU comes from /proc/<pid>/stat
// (utime+stime, in the kernel's 10 ms ticks) over each measured window,
// divided by the window's generations: agentd's own, the floors' (this
// process's, which does nothing else meanwhile, SQLite's work included, and
// PostgreSQL's server not), and the MCP servers' (live
// children's time plus the reaped children's, so a process per generation
// counts too). Allocations per generation (bytes and objects) are the floor's
// from runtime.MemStats and agentd's from runtime/metrics' /gc/heap/allocs,
// read over each window from its profiling endpoint (debug.listen, on
// loopback); agentd's peak RSS is /proc/<pid>/status VmRSS sampled every 100
// ms, and the floor's RSS is this process's, which also holds the gRPC client.
// Ratios are agentd's to each floor's from the same run. Timings on a shared machine move
// by a third from run to run: compare figures of one run.
//
// With -cpuprofile FILE, agentd's CPU profile of the shared mode's concurrent
// window is written to FILE (go tool pprof bin/agentd FILE); that window then
// runs for -cpuprofile-seconds instead of a count.
//
// Any failed generation, floor or agentd, fails the run (exit 1) with the path
// of agentd's log. On exit, also on failure or interrupt, agentd is stopped
// (SIGTERM, then SIGKILL to its process group), then the fake and the floor's
// server; every MCP server process agentd was seen running is checked to be
// gone.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"path/filepath"
	"syscall"
	"time"
)

func main() {
	serveFakeIfAsked()
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	err := run(ctx, os.Args[1:], os.Stdout, os.Stderr)
	stop()
	switch {
	case err == nil:
	case errors.Is(err, flag.ErrHelp):
		os.Exit(2)
	case errors.Is(err, errUsage):
		fmt.Fprintln(os.Stderr, "agentd-bench-e2e:", err)
		os.Exit(2)
	default:
		fmt.Fprintln(os.Stderr, "agentd-bench-e2e:", err)
		os.Exit(1)
	}
}

// errUsage marks a bad flag value.
var errUsage = errors.New("usage")

// options are the command line.
type options struct {
	agentd      string // the agentd binary
	node        string
	everything  string // server-everything's entry point
	gens        int    // sequential generations, floor and shared mode
	concGens    int    // concurrent generations, floor and shared mode
	defaultGens int    // sequential generations, default mode
	defConcGens int    // concurrent generations, default mode
	concurrency int
	warmup      int
	warm        int // the default registration's warm spares; negative: agentd's default
	timeout     time.Duration
	// cpuProfile, when set, is where agentd's CPU profile of the shared
	// mode's concurrent window goes; that window then lasts
	// profileSeconds instead of concGens generations.
	cpuProfile     string
	profileSeconds int
	// postgres, when set, is the DSN of a PostgreSQL database that holds
	// agentd's store and the durable floor's record, instead of SQLite
	// files.
	postgres string
}

func parseFlags(args []string, stderr io.Writer) (options, error) {
	var o options
	fs := flag.NewFlagSet("agentd-bench-e2e", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.StringVar(&o.agentd, "agentd", "bin/agentd", "the agentd binary to measure (make build)")
	fs.StringVar(&o.node, "node", "node", "the node executable that runs server-everything")
	fs.StringVar(&o.everything, "everything", filepath.Join("node_modules", "@modelcontextprotocol", "server-everything", "dist", "index.js"), "server-everything's entry point (npm ci installs it)")
	fs.IntVar(&o.gens, "gens", 300, "sequential generations measured for the floor and the shared mode")
	fs.IntVar(&o.concGens, "conc-gens", 1500, "concurrent generations measured for the floor and the shared mode")
	fs.IntVar(&o.defaultGens, "default-gens", 30, "sequential generations measured for the default mode (a process each)")
	fs.IntVar(&o.defConcGens, "default-conc-gens", 48, "concurrent generations measured for the default mode")
	fs.IntVar(&o.concurrency, "concurrency", 8, "generations at a time in the concurrent windows")
	fs.IntVar(&o.warmup, "warmup", 5, "unmeasured generations before each mode's windows")
	fs.IntVar(&o.warm, "warm", -1, "warm spares of the default registration (bridge.servers.everything.warm); negative keeps agentd's default (bridge.pool.warm)")
	fs.DurationVar(&o.timeout, "timeout", time.Minute, "bound on one generation")
	fs.StringVar(&o.cpuProfile, "cpuprofile", "", "write agentd's CPU profile of the shared mode's concurrent window to this file (go tool pprof); that window then lasts -cpuprofile-seconds")
	fs.IntVar(&o.profileSeconds, "cpuprofile-seconds", 15, "how long the profiled window lasts, with -cpuprofile")
	fs.StringVar(&o.postgres, "postgres", "", "the DSN of a PostgreSQL database for agentd's store and the durable floor's record (default: SQLite files of their own)")
	if err := fs.Parse(args); err != nil {
		return o, err
	}
	var bad []error
	if fs.NArg() > 0 {
		bad = append(bad, fmt.Errorf("unexpected arguments %q", fs.Args()))
	}
	if bad = append(bad, o.problems()...); len(bad) > 0 {
		return o, fmt.Errorf("%w: %w", errUsage, errors.Join(bad...))
	}
	return o, nil
}

// problems are the flags out of their range: every count at least 1, the
// timeout positive.
func (o options) problems() []error {
	var bad []error
	for _, n := range []struct {
		name string
		v    int
	}{{"gens", o.gens}, {"conc-gens", o.concGens}, {"default-gens", o.defaultGens}, {"default-conc-gens", o.defConcGens}, {"concurrency", o.concurrency}, {"warmup", o.warmup}, {"cpuprofile-seconds", o.profileSeconds}} {
		if n.v < 1 {
			bad = append(bad, fmt.Errorf("-%s must be at least 1, got %d", n.name, n.v))
		}
	}
	if o.timeout <= 0 {
		bad = append(bad, errors.New("-timeout must be positive"))
	}
	return bad
}

// run parses args, runs the benchmark and writes the table to stdout;
// progress goes to stderr.
func run(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	o, err := parseFlags(args, stderr)
	if err != nil {
		return err
	}
	rep, err := bench(ctx, o, stderr)
	if err != nil {
		return err
	}
	return rep.writeMarkdown(stdout)
}
