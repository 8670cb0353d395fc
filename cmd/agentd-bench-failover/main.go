// Command agentd-bench-failover measures failover: how soon after an agentd
// replica dies another adopts the generation it was running.
//
//	go run ./cmd/agentd-bench-failover -agentd bin/agentd [-kills 10] [-stores sqlite,postgres]
//
// `make bench-failover` builds bin/agentd and runs it on SQLite and on a
// throwaway PostgreSQL (scripts/postgres.sh), whose database AGENTD_STORE_DSN
// names (it is never printed).
//
// For each store, two replicas of the real binary share it, each `agentd
// serve` with the default configuration (generation.lease_ttl 15 s,
// generation.adopt_interval 2 s) but for the store, a state directory of its
// own, an ephemeral port and no shutdown drain: B, which stays, and A,
// started afresh for each kill. On A, a client starts a generation whose
// model (the script provider) calls a function tool, and stays attached
// without answering: the generation waits for it, under A's lease. A is
// SIGKILLed; the time runs from just before the kill to the moment B logs
// "generation adopted" for that generation (B's stderr is read as it is
// written). B's adopted run then finds no client and pauses it. Each kill
// comes after a random pause, up to an adopt interval, once the generation
// waits: a crash falls anywhere in the survivor's interval.
//
// It prints, per store, the median and the worst of -kills kills and every
// kill's time, as a markdown table. Any step that fails or takes more than a
// minute fails the run (exit 1), naming the log of the replica at fault.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"math/rand/v2"
	"os"
	"os/signal"
	"slices"
	"strings"
	"syscall"
	"time"

	"github.com/agentd/agentd/internal/config"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	err := run(ctx, os.Args[1:], os.Stdout, os.Stderr)
	stop()
	switch {
	case err == nil:
	case errors.Is(err, flag.ErrHelp):
		os.Exit(2)
	default:
		fmt.Fprintln(os.Stderr, "agentd-bench-failover:", err)
		os.Exit(1)
	}
}

// options are the command line.
type options struct {
	agentd string
	kills  int
	stores []string
	dsn    string // AGENTD_STORE_DSN, for postgres; never printed
}

func parseFlags(args []string, stderr io.Writer) (options, error) {
	var o options
	var stores string
	fs := flag.NewFlagSet("agentd-bench-failover", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.StringVar(&o.agentd, "agentd", "bin/agentd", "the agentd binary to measure (make build)")
	fs.IntVar(&o.kills, "kills", 10, "replicas killed on each store")
	fs.StringVar(&stores, "stores", "sqlite,postgres", "the stores, comma-separated: sqlite (one file both replicas share), postgres (the database AGENTD_STORE_DSN names)")
	if err := fs.Parse(args); err != nil {
		return o, err
	}
	o.stores = strings.Split(stores, ",")
	o.dsn = os.Getenv("AGENTD_STORE_DSN")
	switch {
	case o.kills < 1:
		return o, errors.New("-kills: at least 1")
	case slices.Contains(o.stores, config.StorePostgres) && o.dsn == "":
		return o, errors.New("-stores postgres: set AGENTD_STORE_DSN to the database's DSN")
	}
	for _, s := range o.stores {
		if s != config.StoreSQLite && s != config.StorePostgres {
			return o, fmt.Errorf("-stores: unknown store %q", s)
		}
	}
	return o, nil
}

func run(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	o, err := parseFlags(args, stderr)
	if err != nil {
		return err
	}
	var rows []result
	for _, s := range o.stores {
		fmt.Fprintf(stderr, "%s: %d kills\n", s, o.kills)
		took, err := measure(ctx, o, s, stderr)
		if err != nil {
			return fmt.Errorf("%s: %w", s, err)
		}
		rows = append(rows, result{store: s, took: took})
	}
	report(stdout, rows)
	return nil
}

// measure kills o.kills replicas on store, each running a generation, and
// returns each kill's time to the adoption.
func measure(ctx context.Context, o options, store string, progress io.Writer) ([]time.Duration, error) {
	dir, err := os.MkdirTemp("", "agentd-bench-failover-")
	if err != nil {
		return nil, err
	}
	c := cluster{bin: o.agentd, dir: dir, store: store, dsn: o.dsn}
	took, err := c.kills(ctx, o.kills, progress)
	if err == nil {
		err = os.RemoveAll(dir) // kept on failure, for the logs
	}
	return took, err
}

// kills starts the replica that stays, then kills n others.
func (c cluster) kills(ctx context.Context, n int, progress io.Writer) ([]time.Duration, error) {
	b, err := c.start(ctx, "b")
	if err != nil {
		return nil, err
	}
	defer b.stop()
	var took []time.Duration
	for i := range n {
		d, err := c.killOne(ctx, b, fmt.Sprintf("a%d", i))
		if err != nil {
			return nil, err
		}
		fmt.Fprintf(progress, "  kill %d: adopted %v after\n", i+1, d.Round(time.Millisecond))
		took = append(took, d)
	}
	return took, nil
}

// killOne starts a replica, a waiting generation on it, kills it, and
// returns how long b took to adopt the generation.
func (c cluster) killOne(ctx context.Context, b *replica, name string) (time.Duration, error) {
	a, err := c.start(ctx, name)
	if err != nil {
		return 0, err
	}
	defer a.stop()
	id, done, err := startWaiting(ctx, a.addr)
	if err != nil {
		return 0, fmt.Errorf("%w (log: %s)", err, a.logPath)
	}
	defer done()
	// A kill comes at any moment of the survivor's adopt interval, as a
	// crash would: without the pause, every kill would fall at the same
	// moment of it, this loop being in step with the adoptions.
	time.Sleep(rand.N(config.Default().Generation.AdoptInterval))
	killed := time.Now()
	a.kill()
	at, err := b.adopted(ctx, id)
	if err != nil {
		return 0, fmt.Errorf("%w (log: %s)", err, b.logPath)
	}
	return at.Sub(killed), nil
}

// result is one store's kills.
type result struct {
	store string
	took  []time.Duration
}

// report writes the results as a markdown table.
func report(w io.Writer, rows []result) {
	fmt.Fprintln(w, "| store | kills | median | worst | each (ms) |")
	fmt.Fprintln(w, "| --- | ---: | ---: | ---: | --- |")
	for _, r := range rows {
		sorted := slices.Sorted(slices.Values(r.took))
		each := make([]string, len(r.took))
		for i, d := range r.took {
			each[i] = fmt.Sprint(d.Milliseconds())
		}
		fmt.Fprintf(w, "| %s | %d | %v | %v | %s |\n", r.store, len(r.took),
			median(sorted).Round(time.Millisecond), sorted[len(sorted)-1].Round(time.Millisecond), strings.Join(each, ", "))
	}
}

// median of sorted durations.
func median(sorted []time.Duration) time.Duration {
	n := len(sorted)
	if n%2 == 1 {
		return sorted[n/2]
	}
	return (sorted[n/2-1] + sorted[n/2]) / 2
}
