package main

import (
	"encoding/json"
	"fmt"
	"io"
	"maps"
	"math"
	"slices"
	"strings"
	"text/tabwriter"
	"time"

	bridgev1 "github.com/agentd/agentd/gen/go/agentd/bridge/v1"
)

// report is what a load run measured, and whether it passed. It is the
// -json output as it is.
type report struct {
	Target  string `json:"target"`  // "in-process" or "remote" (-addr)
	Address string `json:"address"` // the agentds' addresses, ", " between them
	// Store is the in-process agentds' store: "sqlite" or "postgres".
	Store string `json:"store,omitempty"`
	// MetricsScrapes counts the scrapes of the agentds' metrics endpoints
	// in a run with -metrics (0 without).
	MetricsScrapes int `json:"metrics_scrapes,omitempty"`
	// Replicas are the in-process agentds, with more than one: where each
	// served and how many generations completed there.
	Replicas  []replicaReport `json:"replicas,omitempty"`
	Streams   int             `json:"streams"`
	DurationS float64         `json:"duration_s"`
	Turns     int             `json:"turns"`

	// ElapsedS runs from the start of the load to the end of its last
	// generation.
	ElapsedS          float64 `json:"elapsed_s"`
	Generations       int64   `json:"generations"` // completed as scripted
	GenerationsPerSec float64 `json:"generations_per_s"`
	ToolCalls         int64   `json:"tool_calls"`
	ToolCallsPerSec   float64 `json:"tool_calls_per_s"`
	LatencyMS         latency `json:"latency_ms"` // of completed generations
	Failed            int64   `json:"failed"`
	// Errors counts failed generations by gRPC code ("BadResult": the
	// stream ended OK, not as scripted); ErrorSamples holds the first
	// error of each kind.
	Errors       map[string]int64  `json:"errors"`
	ErrorSamples map[string]string `json:"error_samples,omitempty"`

	SettleS float64        `json:"settle_s"`
	Process *processReport `json:"process,omitempty"` // in-process only
	Pools   []poolReport   `json:"pools,omitempty"`   // when agentd serves the bridge's admin API

	OK       bool     `json:"ok"`
	Problems []string `json:"problems"` // why it did not pass
	Log      string   `json:"log,omitempty"`
}

type replicaReport struct {
	Address     string `json:"address"`
	Generations int64  `json:"generations"`
}

type latency struct {
	P50  float64 `json:"p50"`
	P90  float64 `json:"p90"`
	P99  float64 `json:"p99"`
	Max  float64 `json:"max"`
	Mean float64 `json:"mean"`
}

// processReport is the in-process agentd's process (which also runs the
// clients) at each point of the run.
type processReport struct {
	HWM      int64    `json:"vm_hwm_bytes"` // peak resident set, over the whole run
	Before   snapshot `json:"before_start"` // before agentd started
	Baseline snapshot `json:"baseline"`     // idle, after the warm-up generation
	Peak     snapshot `json:"peak"`         // each figure's highest, sampled every second during the load
	End      snapshot `json:"end_of_load"`  // when the last generation ended
	Settled  snapshot `json:"settled"`      // settle_s later
	Shutdown snapshot `json:"shutdown"`     // after agentd's Serve returned
}

// poolReport is one bridge pool: its counters over the load (from the
// baseline to the settled point) and its state once settled.
type poolReport struct {
	// Replica numbers the in-process agentd whose bridge runs the pool,
	// from 1, with more than one; 0 otherwise.
	Replica      int    `json:"replica,omitempty"`
	Server       string `json:"server"`
	Shared       bool   `json:"shared"`
	MaxProcesses int32  `json:"max_processes"`
	Spawned      int64  `json:"spawned"`
	Retired      int64  `json:"retired"`
	Crashed      int64  `json:"crashed"`
	Waits        int64  `json:"waits"`
	Warm         int32  `json:"warm"`
	Busy         int32  `json:"busy"`
	Starting     int32  `json:"starting"`
}

// name is the pool's server, and its replica's number with several.
func (p poolReport) name() string {
	if p.Replica > 0 {
		return fmt.Sprintf("%s of replica %d", p.Server, p.Replica)
	}
	return p.Server
}

func poolReports(before, after []*bridgev1.PoolStats) []poolReport {
	var out []poolReport
	for _, a := range after {
		b := &bridgev1.PoolStats{}
		for _, p := range before {
			if p.GetKey() == a.GetKey() {
				b = p
			}
		}
		out = append(out, poolReport{
			Server: a.GetServerName(), Shared: a.GetShared(), MaxProcesses: a.GetMaxProcesses(),
			Spawned: a.GetSpawned() - b.GetSpawned(), Retired: a.GetRetired() - b.GetRetired(),
			Crashed: a.GetCrashed() - b.GetCrashed(), Waits: a.GetWaits() - b.GetWaits(),
			Warm: a.GetWarm(), Busy: a.GetBusy(), Starting: a.GetStarting(),
		})
	}
	return out
}

// fill sets the load's figures from what the streams recorded.
func (r *report) fill(t *tally, elapsed time.Duration) {
	r.ElapsedS = elapsed.Seconds()
	r.Generations = int64(len(t.latencies))
	r.GenerationsPerSec = float64(r.Generations) / r.ElapsedS
	r.ToolCalls = t.toolCalls
	r.ToolCallsPerSec = float64(t.toolCalls) / r.ElapsedS
	r.Failed = t.failed()
	r.Errors = t.errors
	if r.Errors == nil {
		r.Errors = map[string]int64{}
	}
	r.ErrorSamples = t.samples
	slices.Sort(t.latencies)
	r.LatencyMS = latency{
		P50: ms(percentile(t.latencies, 50)), P90: ms(percentile(t.latencies, 90)), P99: ms(percentile(t.latencies, 99)),
		Max: ms(percentile(t.latencies, 100)), Mean: ms(mean(t.latencies)),
	}
}

// percentile is the nearest-rank p-th percentile of sorted: the smallest
// value that at least p percent of the values do not exceed.
func percentile(sorted []time.Duration, p float64) time.Duration {
	if len(sorted) == 0 {
		return 0
	}
	rank := int(math.Ceil(p / 100 * float64(len(sorted))))
	return sorted[min(max(rank, 1), len(sorted))-1]
}

func mean(ds []time.Duration) time.Duration {
	if len(ds) == 0 {
		return 0
	}
	var sum time.Duration
	for _, d := range ds {
		sum += d
	}
	return sum / time.Duration(len(ds))
}

// ms is d in milliseconds, to the microsecond.
func ms(d time.Duration) float64 { return math.Round(float64(d)/1e3) / 1e3 }

// judge decides whether the run passed (see the package comment).
func (r *report) judge() {
	bad := func(format string, args ...any) { r.Problems = append(r.Problems, fmt.Sprintf(format, args...)) }
	if r.Failed > 0 {
		bad("%d of %d generations failed", r.Failed, r.Failed+r.Generations)
	}
	if r.Generations == 0 {
		bad("no generation completed")
	}
	if p := r.Process; p != nil {
		p.judge(bad)
	}
	for _, p := range r.Pools {
		p.judge(bad)
	}
	r.OK = len(r.Problems) == 0
	if r.Problems == nil {
		r.Problems = []string{}
	}
}

// judge reports, through bad, the goroutines and child processes that did
// not come back after the load or survived agentd's shutdown.
func (p *processReport) judge(bad func(format string, args ...any)) {
	if p.Settled.Goroutines > p.Baseline.Goroutines+goroutineSlack {
		bad("goroutines did not come back: %d after settling, %d at the baseline (up to %d more allowed)",
			p.Settled.Goroutines, p.Baseline.Goroutines, goroutineSlack)
	}
	if p.Settled.Children > p.Baseline.Children {
		bad("child processes did not come back: %d after settling, %d at the baseline", p.Settled.Children, p.Baseline.Children)
	}
	if p.Shutdown.Children > 0 {
		bad("%d child processes survived agentd's shutdown", p.Shutdown.Children)
	}
	if p.Shutdown.Goroutines > p.Before.Goroutines+goroutineSlack {
		bad("goroutines survived agentd's shutdown: %d, %d before it started (up to %d more allowed)",
			p.Shutdown.Goroutines, p.Before.Goroutines, goroutineSlack)
	}
}

// judge reports, through bad, a pool's processes still busy or starting
// after the load settled, and those that crashed during it.
func (p poolReport) judge(bad func(format string, args ...any)) {
	if p.Busy > 0 || p.Starting > 0 {
		bad("pool %s: %d busy and %d starting processes after settling", p.name(), p.Busy, p.Starting)
	}
	if p.Crashed > 0 {
		bad("pool %s: %d processes crashed or missed a deadline during the load", p.name(), p.Crashed)
	}
}

func (r *report) writeJSON(w io.Writer) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(r)
}

func (r *report) writeText(w io.Writer) error {
	var b strings.Builder
	fmt.Fprintf(&b, "agentd-load: %d streams for %gs, %d tool turns per generation, %s on %s\n\n",
		r.Streams, r.DurationS, r.Turns, r.targetText(), r.Address)
	fmt.Fprintf(&b, "generations  %d completed in %.1fs: %.1f/s\n", r.Generations, r.ElapsedS, r.GenerationsPerSec)
	for i, rr := range r.Replicas {
		fmt.Fprintf(&b, "  replica %d  %d on %s\n", i+1, rr.Generations, rr.Address)
	}
	fmt.Fprintf(&b, "tool calls   %d: %.1f/s\n", r.ToolCalls, r.ToolCallsPerSec)
	l := r.LatencyMS
	fmt.Fprintf(&b, "latency      p50 %s, p90 %s, p99 %s, max %s (mean %s)\n", msText(l.P50), msText(l.P90), msText(l.P99), msText(l.Max), msText(l.Mean))
	if r.Failed == 0 {
		fmt.Fprintln(&b, "errors       none")
	}
	for _, kind := range slices.Sorted(maps.Keys(r.Errors)) {
		fmt.Fprintf(&b, "errors       %s: %d (the first: %s)\n", kind, r.Errors[kind], r.ErrorSamples[kind])
	}

	if p := r.Process; p != nil {
		p.writeText(&b, r.Streams, r.SettleS)
	}
	r.writePools(&b)
	r.writeVerdict(&b)
	_, err := io.WriteString(w, b.String())
	return err
}

// targetText names the agentd the load ran against: remote or in this
// process, its replicas, store and metrics.
func (r *report) targetText() string {
	target := r.Target + " agentd"
	if len(r.Replicas) > 0 {
		target = fmt.Sprintf("%d %s agentd replicas", len(r.Replicas), r.Target)
	}
	if r.Store != "" {
		target += " (store " + r.Store + ")"
	}
	if r.MetricsScrapes > 0 {
		target += fmt.Sprintf(", metrics on (scraped %d times)", r.MetricsScrapes)
	}
	return target
}

// writeText writes the process's table: its memory, goroutines and
// children at each point of the run.
func (p *processReport) writeText(b *strings.Builder, streams int, settleS float64) {
	fmt.Fprintf(b, "\nthis process (agentd and the %d clients); peak RSS (VmHWM) %s\n", streams, mib(p.HWM))
	tw := tabwriter.NewWriter(b, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintf(tw, "\tbefore start\tbaseline\tpeak\tend of load\tsettled (+%gs)\tafter shutdown\t\n", settleS)
	points := []snapshot{p.Before, p.Baseline, p.Peak, p.End, p.Settled, p.Shutdown}
	row := func(name string, f func(snapshot) string) {
		fmt.Fprintf(tw, "%s\t", name)
		for _, s := range points {
			fmt.Fprintf(tw, "%s\t", f(s))
		}
		fmt.Fprintln(tw)
	}
	row("RSS", func(s snapshot) string { return mib(s.RSS) })
	row("live heap", func(s snapshot) string {
		if s.LiveHeap == 0 {
			return "-"
		}
		return mib(s.LiveHeap)
	})
	row("goroutines", func(s snapshot) string { return fmt.Sprint(s.Goroutines) })
	row("children", func(s snapshot) string { return fmt.Sprint(s.Children) })
	tw.Flush()
}

// writePools writes a line for each pool: its counts during the load and
// once settled.
func (r *report) writePools(b *strings.Builder) {
	if len(r.Pools) > 0 {
		fmt.Fprintln(b)
	}
	for _, p := range r.Pools {
		mode := "one session per process"
		if p.Shared {
			mode = "shared"
		}
		fmt.Fprintf(b, "pool %s (%s, max %d): during the load %d spawned, %d retired, %d crashed, %d waits; settled: %d warm, %d busy, %d starting\n",
			p.name(), mode, p.MaxProcesses, p.Spawned, p.Retired, p.Crashed, p.Waits, p.Warm, p.Busy, p.Starting)
	}
}

// writeVerdict writes PASS, or FAIL with the problems and agentd's log.
func (r *report) writeVerdict(b *strings.Builder) {
	if r.OK {
		fmt.Fprintln(b, "\nPASS")
		return
	}
	fmt.Fprintln(b, "\nFAIL")
	for _, p := range r.Problems {
		fmt.Fprintf(b, "  %s\n", p)
	}
	if r.Log != "" {
		fmt.Fprintf(b, "  agentd's log: %s\n", r.Log)
	}
}

func mib(n int64) string { return fmt.Sprintf("%.1f MiB", float64(n)/(1<<20)) }

func msText(v float64) string {
	if v >= 1000 {
		return fmt.Sprintf("%.3fs", v/1000)
	}
	return fmt.Sprintf("%.1fms", v)
}
