package server_test

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"iter"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"runtime/debug"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	agentdv1 "github.com/agentd/agentd/gen/go/agentd/v1"
	"github.com/agentd/agentd/internal/config"
	"github.com/agentd/agentd/internal/grpcserver"
	"github.com/agentd/agentd/internal/httpapi"
	"github.com/agentd/agentd/internal/store"
	"github.com/agentd/agentd/providers"
	"github.com/agentd/agentd/server"
)

// What BenchmarkSSEFollowers follows: a generation whose model says
// benchWords words, one every benchEvery, once benchFollowers followers
// are all there.
const (
	benchFollowers = 1000
	benchWords     = 400
	benchEvery     = 5 * time.Millisecond
)

// BenchmarkSSEFollowers measures benchFollowers event streams of one
// running generation on one replica, over HTTP/1.1 on loopback TCP, as
// agentd serves them (internal/httpapi: its event-stream route beside
// vanguard's transcoder of a gRPC server built as agentd builds its own,
// with grpcserver's interceptors and stats handler, not the store gate
// and authentication that internal/app adds), each read by an SSE parser in
// a process of their own (this test binary again, TestSSEFollowers): how
// much this process's resident memory grows while they follow, and how
// late each event reaches the last of them, from the moment its write to
// the store returned (stamped by a wrapper of the store). It reports the
// growth in MiB at its peak, the p50, p99 and maximum over events of that
// delay (targets: at most 100 MiB and a p99 of at most 50 ms), and how
// often the log was read once the words came: followers that fell behind
// the journal's fan-out read the rest from the store; and this process's
// CPU time from then to the end, what the fan-out costs, which the
// machine's load moves less than the delays. Where the memory goes, once
// every stream has its first event: the goroutines per stream, the live
// heap and the goroutines' stacks, in MiB.
func BenchmarkSSEFollowers(b *testing.B) {
	st, err := store.OpenSQLite(filepath.Join(b.TempDir(), "agentd.db"), 0)
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { _ = st.Close() })
	log := &stampedLog{Generations: st.Generations()}
	release := make(chan struct{})
	reg, err := providers.NewRegistry(pacedTurns(release))
	if err != nil {
		b.Fatal(err)
	}
	svc := server.New(server.Options{Providers: reg, Bridge: &fakeBridge{}, Config: config.Default().Generation,
		Checkpoints: st, Generations: log, Replica: "replica-a"})
	b.Cleanup(svc.Close)
	srv, _ := grpcserver.New(grpcserver.Options{Logger: slog.New(slog.DiscardHandler)})
	svc.Register(srv)
	b.Cleanup(srv.Stop)
	handler, err := httpapi.New(srv, httpapi.Options{})
	if err != nil {
		b.Fatal(err)
	}
	web := httptest.NewServer(handler)
	b.Cleanup(web.Close)

	var f followFigures
	for b.Loop() {
		f.add(followOnce(b, svc, web.URL, log, release))
	}
	slices.Sort(f.delays)
	b.ReportMetric(f.growth, "rss-growth-MiB")
	b.ReportMetric(ms(f.delays[len(f.delays)/2]), "delay-p50-ms")
	b.ReportMetric(ms(f.delays[len(f.delays)*99/100]), "delay-p99-ms")
	b.ReportMetric(ms(f.delays[len(f.delays)-1]), "delay-max-ms")
	b.ReportMetric(float64(f.reads)/float64(b.N), "store-reads/op")
	b.ReportMetric(ms(f.cpu)/float64(b.N), "cpu-ms/op")
	b.ReportMetric(f.goroutines, "goroutines/stream")
	b.ReportMetric(f.heap, "heap-MiB")
	b.ReportMetric(f.stacks, "stacks-MiB")
}

// followFigures are what followOnce measured, over every run: each stored
// word's delay to its last follower, the resident memory's growth at its
// peak, the reads of the log and this process's CPU time once the words
// came; and, with every stream following, the goroutines per stream, the
// live heap and the stacks (the largest of any run).
type followFigures struct {
	delays                   []time.Duration
	growth                   float64
	reads                    int64
	cpu                      time.Duration
	goroutines, heap, stacks float64
}

func (f *followFigures) add(g followFigures) {
	f.delays = append(f.delays, g.delays...)
	f.reads += g.reads
	f.cpu += g.cpu
	f.growth, f.goroutines = max(f.growth, g.growth), max(f.goroutines, g.goroutines)
	f.heap, f.stacks = max(f.heap, g.heap), max(f.stacks, g.stacks)
}

// followOnce starts a generation, has benchFollowers follow it from its
// start, releases its words once they all have its started event, and
// returns what it measured.
func followOnce(b *testing.B, svc *server.Service, base string, log *stampedLog, release chan<- struct{}) followFigures {
	runtime.GC()
	debug.FreeOSMemory()
	before, goroutines := rss(b), runtime.NumGoroutine()
	log.reset()
	res, err := createDirect(b.Context(), svc)
	if err != nil {
		b.Fatal(err)
	}
	exe, err := os.Executable()
	if err != nil {
		b.Fatal(err)
	}
	cmd := exec.CommandContext(b.Context(), exe, "-test.run=^TestSSEFollowers$", "-test.count=1")
	cmd.Env = append(os.Environ(), followersEnv+"="+base+"/v1/generations/"+res.GetGenerationId()+"/events")
	cmd.Stderr = os.Stderr
	out, err := cmd.StdoutPipe()
	if err != nil {
		b.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		b.Fatal(err)
	}
	lines := bufio.NewScanner(out)
	for lines.Scan() && lines.Text() != "sse-ready" {
	}
	peak := sampleRSS(b)
	f := followFigures{goroutines: float64(runtime.NumGoroutine()-goroutines) / benchFollowers}
	f.heap, f.stacks = memoryInUse()
	released, reads, cpu := time.Now(), log.reads.Load(), cpuTime(b)
	release <- struct{}{}
	arrivals := map[int64]time.Time{}
	for lines.Scan() {
		var seq, ns int64
		if _, err := fmt.Sscanf(lines.Text(), "sse-last %d %d", &seq, &ns); err == nil {
			arrivals[seq] = time.Unix(0, ns)
		}
	}
	if err := cmd.Wait(); err != nil {
		b.Fatalf("the followers' process: %v", err)
	}
	f.cpu = cpuTime(b) - cpu
	f.growth = float64(peak()-before) / (1 << 20)
	f.delays, f.reads = log.delays(released, arrivals), log.reads.Load()-reads
	return f
}

// memoryInUse returns the live heap and the goroutines' stacks, in MiB,
// after a collection (which also shrinks the stacks that may shrink).
func memoryInUse() (heap, stacks float64) {
	runtime.GC()
	var m runtime.MemStats
	runtime.ReadMemStats(&m)
	return float64(m.HeapAlloc) / (1 << 20), float64(m.StackInuse) / (1 << 20)
}

// followersEnv names the event stream that TestSSEFollowers follows, as
// BenchmarkSSEFollowers's process of followers; unset, it skips.
const followersEnv = "AGENTD_BENCH_SSE_FOLLOW"

// TestSSEFollowers is BenchmarkSSEFollowers's process of followers: it
// follows the event stream that followersEnv names with benchFollowers
// parsers, prints "sse-ready" once each has its first event, and at the
// end "sse-last SEQ UNIXNANO" for each event: when the last of them had
// it.
func TestSSEFollowers(t *testing.T) {
	url := os.Getenv(followersEnv)
	if url == "" {
		t.Skip("the followers of BenchmarkSSEFollowers, in a process of their own")
	}
	client := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: benchFollowers}}
	defer client.CloseIdleConnections()
	arrivals := make([][]time.Time, benchFollowers)
	var ready, done sync.WaitGroup
	ready.Add(benchFollowers)
	for i := range arrivals {
		arrivals[i] = make([]time.Time, benchWords+16)
		done.Go(func() {
			if err := followSSE(t.Context(), client, url, arrivals[i], ready.Done); err != nil {
				t.Error(err)
			}
		})
	}
	ready.Wait()
	fmt.Println("sse-ready")
	done.Wait()
	for seq := range benchWords + 16 {
		var last time.Time
		for _, a := range arrivals {
			last = latest(last, a[seq])
		}
		if !last.IsZero() {
			fmt.Printf("sse-last %d %d\n", seq, last.UnixNano())
		}
	}
}

// followSSE reads the event stream at url to its end, noting when each
// event arrived by its id; ready is called once the first event is in.
func followSSE(ctx context.Context, client *http.Client, url string, arrived []time.Time, ready func()) error {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return err
	}
	res, err := client.Do(req)
	if err != nil {
		return err
	}
	defer func() { _ = res.Body.Close() }()
	r := bufio.NewReader(res.Body)
	for first := true; ; {
		ev, err := readSSE(r)
		if errors.Is(err, io.EOF) {
			return nil
		}
		if err != nil {
			return err
		}
		if ev.ID == "" {
			continue
		}
		seq, err := strconv.Atoi(ev.ID)
		if err != nil || seq >= len(arrived) {
			return errors.New("unexpected event id " + ev.ID)
		}
		arrived[seq] = time.Now()
		if first {
			ready()
			first = false
		}
	}
}

// createDirect starts a detached generation of the paced provider.
func createDirect(ctx context.Context, svc *server.Service) (*agentdv1.CreateGenerationResponse, error) {
	return svc.CreateGeneration(ctx, &agentdv1.CreateGenerationRequest{Start: &agentdv1.StartGeneration{Agent: &agentdv1.Agent{Provider: "paced"}, Messages: userSays("hi")}})
}

// pacedTurns is a provider named "paced" whose one turn waits for
// release, then says benchWords words, one every benchEvery.
func pacedTurns(release <-chan struct{}) *fakeProvider {
	return &fakeProvider{name: "paced", caps: providers.Capabilities{ModelOptional: true}, stream: func(ctx context.Context, _ *providers.Request) iter.Seq2[providers.Event, error] {
		return func(yield func(providers.Event, error) bool) {
			select {
			case <-release:
			case <-ctx.Done():
				yield(nil, context.Cause(ctx))
				return
			}
			tick := time.NewTicker(benchEvery)
			defer tick.Stop()
			for i := range benchWords {
				if !yield(&providers.TextDelta{Text: "word" + strconv.Itoa(i) + " "}, nil) {
					return
				}
				<-tick.C
			}
			yield(&providers.Stop{Reason: agentdv1.StopReason_STOP_REASON_END_TURN}, nil)
		}
	}}
}

// stampedLog notes when the store took each event of the generation
// being followed: when the write that appended it returned.
type stampedLog struct {
	store.Generations
	mu     sync.Mutex
	stored map[int64]time.Time
	reads  atomic.Int64 // reads of the log: followers that fell behind read it
}

func (s *stampedLog) Read(ctx context.Context, tenant, id string, after int64, limit int) ([]store.Event, error) {
	s.reads.Add(1)
	return s.Generations.Read(ctx, tenant, id, after, limit)
}

func (s *stampedLog) reset() {
	s.mu.Lock()
	s.stored = make(map[int64]time.Time)
	s.mu.Unlock()
}

// stamp notes that the n events up to last are stored now.
func (s *stampedLog) stamp(last int64, n int, err error) {
	if err != nil {
		return
	}
	now := time.Now()
	s.mu.Lock()
	defer s.mu.Unlock()
	for i := range int64(n) {
		s.stored[last-i] = now
	}
}

func (s *stampedLog) Append(ctx context.Context, tenant, id string, epoch int64, events []store.Event) (int64, error) {
	last, err := s.Generations.Append(ctx, tenant, id, epoch, events)
	s.stamp(last, len(events), err)
	return last, err
}

func (s *stampedLog) Checkpoint(ctx context.Context, tenant, id string, epoch int64, c store.Checkpoint) (int64, error) {
	last, err := s.Generations.Checkpoint(ctx, tenant, id, epoch, c)
	s.stamp(last, len(c.Events)+len(c.After), err)
	return last, err
}

func (s *stampedLog) Finish(ctx context.Context, tenant, id string, epoch int64, o store.Outcome) (int64, error) {
	last, err := s.Generations.Finish(ctx, tenant, id, epoch, o)
	s.stamp(last, len(o.Events), err)
	return last, err
}

// delays returns, for each event stored after since, how long after it
// was stored its last follower had it (arrivals, by sequence number).
func (s *stampedLog) delays(since time.Time, arrivals map[int64]time.Time) []time.Duration {
	s.mu.Lock()
	defer s.mu.Unlock()
	var out []time.Duration
	for seq, at := range s.stored {
		if !at.Before(since) {
			out = append(out, arrivals[seq].Sub(at))
		}
	}
	return out
}

func latest(a, b time.Time) time.Time {
	if b.After(a) {
		return b
	}
	return a
}

// sampleRSS samples the resident memory until the returned function is
// called, and then returns its peak.
func sampleRSS(b *testing.B) func() int64 {
	stop := make(chan struct{})
	var peak atomic.Int64
	var wg sync.WaitGroup
	wg.Go(func() {
		tick := time.NewTicker(10 * time.Millisecond)
		defer tick.Stop()
		for {
			peak.Store(max(peak.Load(), rss(b)))
			select {
			case <-stop:
				return
			case <-tick.C:
			}
		}
	})
	return func() int64 {
		close(stop)
		wg.Wait()
		return peak.Load()
	}
}

// cpuTime is the CPU time this process has used, in user and system mode.
func cpuTime(b *testing.B) time.Duration {
	var u syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &u); err != nil {
		b.Fatal(err)
	}
	return time.Duration(u.Utime.Nano() + u.Stime.Nano())
}

// rss is the process's resident memory in bytes (VmRSS).
func rss(b *testing.B) int64 {
	data, err := os.ReadFile("/proc/self/status")
	if err != nil {
		b.Fatal(err)
	}
	for line := range strings.Lines(string(data)) {
		if kb, ok := strings.CutPrefix(line, "VmRSS:"); ok {
			n, err := strconv.ParseInt(strings.TrimSuffix(strings.TrimSpace(kb), " kB"), 10, 64)
			if err != nil {
				b.Fatal(err)
			}
			return n << 10
		}
	}
	b.Fatal("no VmRSS in /proc/self/status")
	return 0
}

func ms(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }
