package main

import (
	"bytes"
	"encoding/json"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/agentd/agentd/internal/config"
	"github.com/agentd/agentd/internal/proctest"
	"github.com/agentd/agentd/internal/store/pgtest"
)

func TestMain(m *testing.M) {
	// The in-process agentd starts this test binary as its demo server,
	// and an idle run as its clients.
	serveDemoIfAsked()
	idleClientsIfAsked()
	proctest.VerifyTestMain(m)
}

// TestLoad runs the generator for two seconds with eight streams against
// an in-process agentd: every generation completes as scripted, the
// counters agree with each other, and agentd comes back to rest and leaves
// no process behind.
//
// Not parallel: it counts this process's goroutines and children.
func TestLoad(t *testing.T) {
	const streams, turns = 8, 2
	var out, progress bytes.Buffer
	err := run(t.Context(), []string{"-streams", "8", "-duration", "2s", "-turns", "2", "-settle", "500ms", "-json"}, &out, &progress)
	if err != nil {
		t.Fatalf("run: %v\nreport:\n%s\nprogress:\n%s", err, out.String(), progress.String())
	}
	var rep report
	if err := json.Unmarshal(out.Bytes(), &rep); err != nil {
		t.Fatalf("the -json report does not parse: %v\n%s", err, out.String())
	}
	if !rep.OK || len(rep.Problems) > 0 || rep.Failed != 0 || len(rep.Errors) != 0 {
		t.Errorf("ok %v, problems %q, %d failed, errors %v", rep.OK, rep.Problems, rep.Failed, rep.Errors)
	}
	if rep.Generations < streams {
		t.Errorf("%d generations completed, want at least one per stream (%d)", rep.Generations, streams)
	}
	if rep.ToolCalls != rep.Generations*turns {
		t.Errorf("%d tool calls for %d generations of %d turns", rep.ToolCalls, rep.Generations, turns)
	}
	if rep.ElapsedS < 2 || rep.GenerationsPerSec <= 0 || rep.ToolCallsPerSec != rep.GenerationsPerSec*turns {
		t.Errorf("elapsed %gs, %g generations/s, %g tool calls/s", rep.ElapsedS, rep.GenerationsPerSec, rep.ToolCallsPerSec)
	}
	l := rep.LatencyMS
	if !(0 < l.P50 && l.P50 <= l.P90 && l.P90 <= l.P99 && l.P99 <= l.Max && l.Mean <= l.Max) {
		t.Errorf("latency percentiles out of order: %+v", l)
	}
	p := rep.Process
	if p == nil {
		t.Fatal("no process figures for an in-process agentd")
	}
	// VmHWM and VmRSS come from the kernel's approximate (per-CPU) counters,
	// so the high-water mark may read a little below a sampled RSS.
	if p.HWM < p.Baseline.RSS || p.Peak.RSS < p.Baseline.RSS || p.Baseline.LiveHeap == 0 {
		t.Errorf("VmHWM %d, peak RSS %d, baseline RSS %d, baseline live heap %d", p.HWM, p.Peak.RSS, p.Baseline.RSS, p.Baseline.LiveHeap)
	}
	// The shared demo server: one process from the baseline on, none after
	// shutdown.
	if p.Baseline.Children != 1 || p.Peak.Children != 1 || p.Settled.Children != 1 || p.Shutdown.Children != 0 {
		t.Errorf("children: baseline %d, peak %d, settled %d, after shutdown %d; want 1, 1, 1, 0",
			p.Baseline.Children, p.Peak.Children, p.Settled.Children, p.Shutdown.Children)
	}
	if p.Peak.Goroutines <= p.Baseline.Goroutines {
		t.Errorf("peak goroutines %d, baseline %d: the monitor saw no load", p.Peak.Goroutines, p.Baseline.Goroutines)
	}
	if len(rep.Pools) != 1 || rep.Pools[0].Server != "demo" || !rep.Pools[0].Shared || rep.Pools[0].Spawned != 0 {
		t.Errorf("pools %+v, want demo, shared, nothing spawned during the load", rep.Pools)
	}

	var text bytes.Buffer
	if err := rep.writeText(&text); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"generations  ", "latency      p50 ", "errors       none", "peak RSS (VmHWM)", "pool demo (shared", "PASS"} {
		if !strings.Contains(text.String(), want) {
			t.Errorf("the text report lacks %q:\n%s", want, text.String())
		}
	}
}

// TestLoadReplicas runs the generator with -replicas 2 on each store, one
// second with six streams: the streams are spread over both agentds, each
// with its own demo server process, every generation completes, and
// nothing is left behind. On PostgreSQL the DSN (with a password) comes
// from AGENTD_STORE_DSN and appears in neither the report nor the
// progress lines.
//
// Not parallel: it counts this process's goroutines and children.
func TestLoadReplicas(t *testing.T) {
	for _, driver := range []string{config.StoreSQLite, config.StorePostgres} {
		t.Run(driver, func(t *testing.T) {
			const secret = "canary-load-p4ssw0rd"
			args := []string{"-replicas", "2", "-streams", "6", "-duration", "1s", "-turns", "1", "-settle", "500ms"}
			if driver == config.StorePostgres {
				dsn, err := pgtest.WithPassword(pgtest.DSN(t), secret)
				if err != nil {
					t.Fatal(err)
				}
				t.Setenv("AGENTD_STORE_DSN", dsn)
				args = append(args, "-store", "postgres")
			}
			var out, text, progress bytes.Buffer
			if err := run(t.Context(), append(args, "-json"), &out, &progress); err != nil {
				t.Fatalf("run: %v\nreport:\n%s\nprogress:\n%s", err, out.String(), progress.String())
			}
			var rep report
			if err := json.Unmarshal(out.Bytes(), &rep); err != nil {
				t.Fatalf("the -json report does not parse: %v\n%s", err, out.String())
			}
			if err := rep.writeText(&text); err != nil {
				t.Fatal(err)
			}
			if !rep.OK || rep.Store != driver || len(rep.Replicas) != 2 {
				t.Fatalf("ok %v (problems %q), store %q, replicas %+v; want ok, %s, two", rep.OK, rep.Problems, rep.Store, rep.Replicas, driver)
			}
			if got := rep.Replicas[0].Generations + rep.Replicas[1].Generations; got != rep.Generations || rep.Replicas[0].Generations == 0 || rep.Replicas[1].Generations == 0 {
				t.Errorf("replicas completed %d and %d generations of %d; want both some, adding up",
					rep.Replicas[0].Generations, rep.Replicas[1].Generations, rep.Generations)
			}
			if p := rep.Process; p.Baseline.Children != 2 || p.Shutdown.Children != 0 {
				t.Errorf("children: baseline %d, after shutdown %d; want 2 (a demo server per replica), 0", p.Baseline.Children, p.Shutdown.Children)
			}
			if len(rep.Pools) != 2 || rep.Pools[0].Replica != 1 || rep.Pools[1].Replica != 2 {
				t.Errorf("pools %+v; want one of each replica", rep.Pools)
			}
			for _, want := range []string{"2 in-process agentd replicas (store " + driver + ")", "  replica 2  ", "pool demo of replica 2 (shared"} {
				if !strings.Contains(text.String(), want) {
					t.Errorf("the text report lacks %q:\n%s", want, text.String())
				}
			}
			for name, b := range map[string]string{"report": out.String() + text.String(), "progress": progress.String()} {
				if strings.Contains(b, secret) {
					t.Errorf("the %s shows the DSN's password", name)
				}
			}
		})
	}
}

// TestWarmUpFails: a run that cannot be measured (here, no generation can
// finish within -timeout) returns an error naming agentd's log, which it
// keeps, and stops agentd: TestMain finds no child process or goroutine
// left.
func TestWarmUpFails(t *testing.T) {
	t.Setenv("TMPDIR", t.TempDir()) // where the kept state goes
	err := run(t.Context(), []string{"-streams", "1", "-duration", "1s", "-timeout", "1ns"}, &bytes.Buffer{}, &bytes.Buffer{})
	if err == nil || !strings.Contains(err.Error(), "warm-up generation failed") || !strings.Contains(err.Error(), "agentd.log") {
		t.Fatalf("run = %v, want the warm-up's failure and agentd's log", err)
	}
	if kids := proctest.Children(); len(kids) != 0 {
		t.Errorf("child processes left after a failed run: %v", kids)
	}
}

func TestPercentile(t *testing.T) {
	t.Parallel()
	ms := func(ns ...int) []time.Duration {
		var out []time.Duration
		for _, n := range ns {
			out = append(out, time.Duration(n)*time.Millisecond)
		}
		return out
	}
	hundred := make([]int, 100)
	for i := range hundred {
		hundred[i] = i + 1
	}
	for _, tc := range []struct {
		name   string
		sorted []time.Duration
		p      float64
		want   time.Duration
	}{
		{"empty", nil, 50, 0},
		{"one value", ms(7), 99, 7 * time.Millisecond},
		{"median of four is the second", ms(1, 2, 3, 4), 50, 2 * time.Millisecond},
		{"p90 of four is the fourth", ms(1, 2, 3, 4), 90, 4 * time.Millisecond},
		{"p99 of 1..100", ms(hundred...), 99, 99 * time.Millisecond},
		{"p90 of 1..100", ms(hundred...), 90, 90 * time.Millisecond},
		{"max", ms(hundred...), 100, 100 * time.Millisecond},
	} {
		if got := percentile(tc.sorted, tc.p); got != tc.want {
			t.Errorf("%s: percentile(p%g) = %v, want %v", tc.name, tc.p, got, tc.want)
		}
	}
}

func TestBadFlags(t *testing.T) {
	t.Parallel()
	for _, args := range [][]string{
		{"-streams", "0"},
		{"-turns", "-1"},
		{"-turns", "1001"},
		{"-duration", "0s"},
		{"extra"},
		{"-replicas", "0"},
		{"-store", "mysql"},
		{"-addr", "127.0.0.1:1", "-replicas", "2"},
		{"-addr", "127.0.0.1:1", "-store", "sqlite"},
	} {
		var stderr bytes.Buffer
		if err := run(t.Context(), args, &bytes.Buffer{}, &stderr); !errors.Is(err, errUsage) {
			t.Errorf("run(%q) = %v, want a usage error", args, err)
		}
	}
}

// -store postgres without AGENTD_STORE_DSN is a usage error that says so.
func TestPostgresWithoutDSN(t *testing.T) {
	t.Setenv("AGENTD_STORE_DSN", "")
	err := run(t.Context(), []string{"-store", "postgres"}, &bytes.Buffer{}, &bytes.Buffer{})
	if !errors.Is(err, errUsage) || !strings.Contains(err.Error(), "AGENTD_STORE_DSN") {
		t.Errorf("run = %v, want a usage error naming AGENTD_STORE_DSN", err)
	}
}

// TestIdle runs the idle mode with 20 streams: every stream waits on its
// approval, agentd's goroutines per waiting stream stay within the
// target, and every generation completes once answered.
//
// Not parallel: it counts this process's goroutines and children.
func TestIdle(t *testing.T) {
	var out, progress bytes.Buffer
	err := run(t.Context(), []string{"-idle", "-streams", "20", "-json"}, &out, &progress)
	var rep idleReport
	if jerr := json.Unmarshal(out.Bytes(), &rep); jerr != nil {
		t.Fatalf("run: %v; the -json report does not parse: %v\n%s\nprogress:\n%s", err, jerr, out.String(), progress.String())
	}
	if err != nil || !rep.OK || rep.Waiting != 20 || rep.Completed != 20 || len(rep.Errors) > 0 {
		t.Errorf("run: %v; report %+v\nprogress:\n%s", err, rep, progress.String())
	}
	if rep.BridgeSessionsWaiting != 0 {
		t.Errorf("the bridge holds %d sessions while the generations wait, want none (their server is shared)", rep.BridgeSessionsWaiting)
	}
	if rep.GoroutinesPerStream <= 0 || rep.GoroutinesPerStream > idleMaxGoroutinesPerStream {
		t.Errorf("%.2f goroutines per waiting stream, want (0, %d]", rep.GoroutinesPerStream, idleMaxGoroutinesPerStream)
	}
}

// TestCountLabelled: the idle run counts agentd's goroutines in every
// group of the profile that carries its label, the first group (the
// largest, right after the profile's total) included.
func TestCountLabelled(t *testing.T) {
	profile := `goroutine profile: total 13
5 @ 0x1 0x2
# labels: {"agentd-load":"agentd"}
#	0x1	a+0x1	a.go:1

4 @ 0x3
#	0x3	b+0x1	b.go:1

3 @ 0x4 0x5
# labels: {"agentd-load":"agentd"}
#	0x4	c+0x1	c.go:1

1 @ 0x6
# labels: {"other":"label"}
#	0x6	d+0x1	d.go:1
`
	if got := countLabelled(profile); got != 8 {
		t.Errorf("countLabelled = %d, want 8 (5 + 3)", got)
	}
}
