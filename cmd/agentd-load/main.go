// Command agentd-load is agentd's load generator. It drives many
// concurrent Generate streams, each running scripted generations that call
// the demo MCP server through the bridge, one after another, and reports
// throughput, latency, errors, and whether the agentd process came back to
// rest afterwards.
//
//	go run ./cmd/agentd-load [-streams 500] [-duration 60s] [-turns 3] [-metrics] [-cpuprofile FILE] [-addr HOST:PORT] [-json]
//	AGENTD_STORE_DSN=postgres://... go run ./cmd/agentd-load -replicas 2 -store postgres [...]
//
// # The agentd under load
//
// Without -addr, agentd runs in this process, built as `agentd serve`
// builds it: config.Default(), telemetry.Setup, the info-level text log,
// app.NewAgent with its embedded bridge, served on a loopback TCP port (an
// ephemeral one) so that the client side is real gRPC over TCP. What
// differs from `agentd serve`:
//
//   - state_dir is a fresh temporary directory, and the log goes to
//     agentd.log there instead of stderr; both are removed after a run that
//     passed and kept, with their path printed, after one that failed;
//   - "@self" is this executable, which serves the demo MCP server when
//     started as `agentd-load mcp-demo`, as agentd does;
//   - the demo server is registered with shared: true.
//
// With -replicas N (default 1), N such agentds run in this process,
// replicas of one another as several `agentd serve` processes would be:
// each on a loopback port of its own, with its own replica id, embedded
// bridge and demo server process, all on one store, and stream i sends its
// generations to replica i mod N. The store is -store: sqlite (the
// default: agentd.db in the state directory they share, as replicas on one
// host share it), or postgres, the database that AGENTD_STORE_DSN names,
// as for agentd (an environment variable, not a flag: a command line is
// visible to every user of the machine; the DSN is never printed). `make
// load-replicas` runs two replicas on a throwaway PostgreSQL.
//
// The pool setting is the one choice that matters. By default a registered
// server's process serves one session and is then retired, and a pool runs
// at most max_processes (8) processes. Under 500 concurrent generations
// every generation then pays for a process start (fork, exec, the Go
// runtime, the MCP handshake) and a stop, eight at a time, while the
// others wait for a process, up to their read_timeout (30 s), after which
// they fail. Measured on two cores, that gives five to eight times fewer
// generations per second than a shared process, a p99 of 18 s, and
// generations that fail after waiting 30 s; raising max_processes to 500
// would run 500 processes on two cores instead. The demo server keeps no
// state between calls, which is what shared: true is for: one process,
// started warm before the first generation, serves every session at once
// over its one stdio pipe, so no generation waits for a process and none
// is started or stopped under load. The pool keeps its other defaults.
//
// With -metrics, the in-process agentds record their metrics as `agentd
// serve` does with metrics.listen set, each serving them on a loopback
// port of its own, and the generator scrapes every endpoint every 5 s
// (three times as often as Prometheus's default) for the whole run: `make
// bench-metrics` runs the load with and without, in alternating rounds,
// and reports what metrics cost in generations/s.
//
// With -addr, the generator drives an agentd that is already running
// (-replicas, -store and -metrics do not apply); only
// the client-side figures and, when the bridge is embedded (its admin API
// is then served on agentd's address), the pool statistics are reported.
//
// # A generation
//
// Each stream runs generations back to back until -duration has passed,
// then finishes the one it is in. A generation is one Generate stream whose
// agent uses the "script" provider: -turns turns that each call the demo
// server's echo tool with {"text": "turn i"}, then a final text turn,
// "done: {{tool_outputs}}". It counts as completed only if the stream ends
// with status OK after a completed event with the scripted tool turns and
// final text, and every tool call finished without error; anything else is
// an error, counted by gRPC code ("BadResult" for an OK stream whose
// content is wrong). One warm-up generation runs before the load, so that
// connections, the schema cache and the baseline are in place.
//
// # Figures
//
// Throughput is over the time from the start of the load to the end of its
// last generation. Latency is a completed generation's time from opening
// its stream to the stream's end; percentiles are exact (nearest rank over
// every recorded latency). For an in-process agentd the generator also
// reports this process's VmHWM, the peak resident set as the kernel counts
// it (its counters are per-CPU and approximate, so it may read slightly
// below a sampled VmRSS), and its VmRSS, goroutines and live (not zombie)
// child processes: before agentd starts, at the baseline (idle, after the
// warm-up), at their peak (sampled every second during the load), when the
// load ends, -settle (5 s) later, and after agentd has shut down. They are
// the figures of the process that also runs the clients, whose goroutines
// and memory they include. The live heap, after forced collections, is
// shown at the baseline and settled points: RSS alone cannot tell growth
// from memory the Go runtime has not yet given back.
//
// # Verdict
//
// The command exits 1, after the report, if any generation failed; if,
// after the settle period, the goroutines exceed the baseline by more than
// a few, the children exceed the baseline, or a pool still holds a busy or
// starting process; if a pool's process crashed or missed a deadline
// during the load; or if, after shutdown, a child process survives or the
// goroutines exceed those before agentd started by more than a few. It
// exits 2 for bad flags.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"runtime/pprof"
	"slices"
	"syscall"
	"time"

	"github.com/agentd/agentd/internal/config"
	"github.com/agentd/agentd/internal/mcpdemo"
)

// demoArg, as the only argument, makes this executable the demo MCP server
// on stdio: the in-process agentd registers it as {command: <this
// executable>, args: [mcp-demo]}, as agentd registers "@self mcp-demo".
const demoArg = "mcp-demo"

// errFailed is returned, after the report, by a run that did not pass.
var errFailed = errors.New("the load run failed")

func main() {
	serveDemoIfAsked()
	idleClientsIfAsked()
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	err := run(ctx, os.Args[1:], os.Stdout, os.Stderr)
	stop()
	switch {
	case err == nil:
	case errors.Is(err, flag.ErrHelp):
		os.Exit(2)
	case errors.Is(err, errUsage):
		fmt.Fprintln(os.Stderr, "agentd-load:", err)
		os.Exit(2)
	default:
		fmt.Fprintln(os.Stderr, "agentd-load:", err)
		os.Exit(1)
	}
}

// serveDemoIfAsked serves the demo MCP server and exits when this process
// was started as the in-process agentd's demo server.
func serveDemoIfAsked() {
	if len(os.Args) != 2 || os.Args[1] != demoArg {
		return
	}
	if err := mcpdemo.Run(context.Background(), os.Stdin, os.Stdout); err != nil {
		os.Exit(1)
	}
	os.Exit(0)
}

// errUsage marks a bad flag value.
var errUsage = errors.New("usage")

// options are the command line.
type options struct {
	streams     int
	duration    time.Duration
	turns       int
	addr        string
	replicas    int
	store       storeChoice
	metrics     bool
	cpuProfile  string
	json        bool
	settle      time.Duration
	timeout     time.Duration
	idle        bool
	heapProfile string
	// goroutineProfile, with idle, is where agentd's goroutines go while
	// the streams wait.
	goroutineProfile string
	// idleClients is set in the child process that runs an idle run's
	// clients: agentd's address.
	idleClients string
}

func parseFlags(args []string, stderr io.Writer) (options, error) {
	var o options
	fs := flag.NewFlagSet("agentd-load", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.IntVar(&o.streams, "streams", 500, "concurrent Generate streams")
	fs.DurationVar(&o.duration, "duration", 60*time.Second, "how long streams start new generations")
	fs.IntVar(&o.turns, "turns", 3, fmt.Sprintf("tool turns per generation, each calling the demo server's echo tool (0..%d, the request's max_tool_turns)", config.MaxToolTurnsLimit))
	fs.StringVar(&o.addr, "addr", "", "address of a running agentd (default: start one in this process)")
	fs.IntVar(&o.replicas, "replicas", 1, "agentd replicas to start in this process, on one store; the streams are spread across them")
	fs.StringVar(&o.store.driver, "store", config.StoreSQLite, "the in-process agentds' store: sqlite, or postgres (the database that AGENTD_STORE_DSN names)")
	fs.BoolVar(&o.metrics, "metrics", false, "the in-process agentds record metrics and serve them on metrics.listen, scraped every 5s (to measure what metrics cost)")
	fs.StringVar(&o.cpuProfile, "cpuprofile", "", "write a CPU profile of the whole run (clients and in-process agentds) to this file")
	fs.BoolVar(&o.json, "json", false, "print the report as JSON")
	fs.DurationVar(&o.settle, "settle", 5*time.Second, "wait after the load before measuring again")
	fs.DurationVar(&o.timeout, "timeout", time.Minute, "bound on one generation")
	fs.StringVar(&o.idleClients, idleClientsFlag, "", "internal: run an idle run's clients against this address (the -idle run starts this process itself)")
	fs.StringVar(&o.heapProfile, "heapprofile", "", "with -idle: write a heap profile of agentd while the streams wait to this file")
	fs.StringVar(&o.goroutineProfile, "goroutineprofile", "", "with -idle: write a profile of agentd's goroutines while the streams wait to this file")
	fs.BoolVar(&o.idle, "idle", false, "idle streams: open -streams Generate streams that each wait on an approval, measure agentd's goroutines and memory while they wait, then answer them all")
	if err := fs.Parse(args); err != nil {
		return o, err
	}
	var bad []error
	if fs.NArg() > 0 {
		bad = append(bad, fmt.Errorf("unexpected arguments %q", fs.Args()))
	}
	set := map[string]bool{}
	fs.Visit(func(f *flag.Flag) { set[f.Name] = true })
	bad = append(bad, o.rangeProblems()...)
	if err := o.modeProblem(set); err != nil {
		bad = append(bad, err)
	}
	if o.turns < 0 || o.turns > config.MaxToolTurnsLimit {
		bad = append(bad, fmt.Errorf("-turns must be 0..%d, got %d", config.MaxToolTurnsLimit, o.turns))
	}
	if len(bad) > 0 {
		return o, fmt.Errorf("%w: %w", errUsage, errors.Join(bad...))
	}
	return o, nil
}

// rangeProblems are the numeric flags out of their range.
func (o *options) rangeProblems() []error {
	var bad []error
	if o.streams < 1 {
		bad = append(bad, fmt.Errorf("-streams must be at least 1, got %d", o.streams))
	}
	if o.duration <= 0 || o.timeout <= 0 || o.settle < 0 {
		bad = append(bad, errors.New("-duration and -timeout must be positive, -settle not negative"))
	}
	if o.replicas < 1 {
		bad = append(bad, fmt.Errorf("-replicas must be at least 1, got %d", o.replicas))
	}
	return bad
}

// modeProblem is what is wrong with the flags set together, and the store
// (set are the flags given): -idle and -addr each go without the flags of
// the other modes, and -store postgres needs AGENTD_STORE_DSN, which it
// reads.
func (o *options) modeProblem(set map[string]bool) error {
	switch {
	case o.idle && (o.addr != "" || anySet(set, "replicas", "metrics", "duration", "turns")):
		return errors.New("-idle starts one agentd in this process and runs one approval-gated turn per stream: it does not go with -addr, -replicas, -metrics, -duration or -turns")
	case o.addr != "" && anySet(set, "replicas", "store", "metrics"):
		return errors.New("-replicas, -store and -metrics start agentds in this process: they do not go with -addr")
	case o.store.driver == config.StorePostgres:
		if o.store.dsn = os.Getenv("AGENTD_STORE_DSN"); o.store.dsn == "" {
			return errors.New("-store postgres: set AGENTD_STORE_DSN to the database's DSN")
		}
	case o.store.driver != config.StoreSQLite:
		return fmt.Errorf("-store must be sqlite or postgres, got %q", o.store.driver)
	}
	return nil
}

// anySet reports whether any of the flags is in set.
func anySet(set map[string]bool, flags ...string) bool {
	return slices.ContainsFunc(flags, func(f string) bool { return set[f] })
}

// run parses args, runs the load and writes the report to stdout; progress
// goes to stderr. It returns errFailed when the run did not pass.
func run(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	o, err := parseFlags(args, stderr)
	if err != nil {
		return err
	}
	if o.cpuProfile != "" {
		stop, err := startCPUProfile(o.cpuProfile)
		if err != nil {
			return err
		}
		defer stop()
	}
	if o.idleClients != "" {
		return runIdleClients(ctx, o, os.Stdin, stdout)
	}
	if o.idle {
		return runIdle(ctx, o, stdout, stderr)
	}
	rep, err := measure(ctx, o, stderr)
	if err != nil {
		return err
	}
	return rep.write(stdout, o.json)
}

// startCPUProfile starts profiling the process's CPU to path; stop ends
// it and closes the file.
func startCPUProfile(path string) (stop func(), err error) {
	f, err := os.Create(path)
	if err != nil {
		return nil, err
	}
	if err := pprof.StartCPUProfile(f); err != nil {
		f.Close()
		return nil, err
	}
	return func() {
		pprof.StopCPUProfile()
		f.Close()
	}, nil
}

// write writes rep, as JSON or as text; errFailed when the run did not
// pass.
func (rep *report) write(stdout io.Writer, asJSON bool) error {
	var err error
	if asJSON {
		err = rep.writeJSON(stdout)
	} else {
		err = rep.writeText(stdout)
	}
	if err != nil {
		return err
	}
	if !rep.OK {
		return errFailed
	}
	return nil
}
