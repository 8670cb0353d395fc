package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"runtime"
	"runtime/pprof"
	"strconv"
	"strings"
	"sync"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/protobuf/types/known/durationpb"

	agentdv1 "github.com/agentd/agentd/gen/go/agentd/v1"
	"github.com/agentd/agentd/internal/app"
)

// The idle mode (-idle) measures what generations that wait for people
// cost (the target: 5,000 streams each waiting on an approval in at
// most 500 MiB of agentd's memory and 10 of its goroutines each). It
// starts one agentd in this process under a pprof label, so that the
// goroutines agentd starts (and those they start) are told from the
// clients'; has a child process of its own (this executable with
// -idle-clients) open the streams, each a generation whose one echo call
// needs an approval, so that this process's memory is agentd's alone;
// measures once every stream waits; then has the child approve them all
// and checks that every generation completed.

// Targets of the idle mode.
const (
	idleMaxGoroutinesPerStream = 10
	idleMaxRSS                 = 500 << 20
	// idleStreamsPerConn spreads the streams over connections as many
	// clients would.
	idleStreamsPerConn = 500
)

// agentdLabel marks the goroutines of the in-process agentd.
var agentdLabel = pprof.Labels("agentd-load", "agentd")

// idleReport is what an idle run found.
type idleReport struct {
	Streams             int     `json:"streams"`
	Waiting             int     `json:"waiting"`
	Completed           int     `json:"completed"`
	GoroutinesBaseline  int     `json:"agentd_goroutines_baseline"`
	GoroutinesWaiting   int     `json:"agentd_goroutines_waiting"`
	GoroutinesPerStream float64 `json:"agentd_goroutines_per_stream"`
	RSSBaseline         int64   `json:"rss_baseline_bytes"`
	RSSWaiting          int64   `json:"rss_waiting_bytes"`
	LiveHeapWaiting     int64   `json:"live_heap_waiting_bytes"`
	StacksWaiting       int64   `json:"stacks_waiting_bytes"`
	// BridgeSessionsWaiting: the embedded bridge's open sessions while
	// the streams wait; none, the demo server being shared (a waiting
	// generation of shared servers holds no bridge session).
	BridgeSessionsWaiting int      `json:"bridge_sessions_waiting"`
	OpenS                 float64  `json:"open_seconds"`
	AnswerS               float64  `json:"answer_seconds"`
	Errors                []string `json:"errors,omitempty"`
	OK                    bool     `json:"ok"`
}

// idleStart is the generation of every idle stream: one echo call of the
// shared demo server, which needs an approval, then a final text.
func idleStart() (*agentdv1.StartGeneration, error) {
	start, err := startRequest(1)
	if err != nil {
		return nil, err
	}
	start.Agent.RequiresApproval = []string{"echo"}
	// The streams wait while thousands more open: no answer timeout may
	// pause them meanwhile.
	start.AnswerTimeout = durationpb.New(time.Hour)
	return start, nil
}

// idleClientsIfAsked runs an idle run's client process and exits, when
// this process was started as one.
func idleClientsIfAsked() {
	if len(os.Args) < 2 || os.Args[1] != "-"+idleClientsFlag {
		return
	}
	if err := run(context.Background(), os.Args[1:], os.Stdout, os.Stderr); err != nil {
		fmt.Fprintln(os.Stderr, "agentd-load clients:", err)
		os.Exit(1)
	}
	os.Exit(0)
}

func runIdle(ctx context.Context, o options, stdout, stderr io.Writer) error {
	// The child's stderr, which os/exec copies in a goroutine of its own,
	// and this process's progress lines share stderr.
	stderr = &lockedWriter{w: stderr}
	start, err := idleStart()
	if err != nil {
		return err
	}
	exe, err := os.Executable()
	if err != nil {
		return err
	}
	var srv *fleet
	pprof.Do(ctx, agentdLabel, func(context.Context) {
		srv, err = startAgentds(exe, 1, o.store, false)
	})
	if err != nil {
		return fmt.Errorf("starting agentd: %w", err)
	}
	defer func() {
		srv.Close()
		_ = srv.removeState()
	}()
	addr := srv.addrs()[0]
	conns := &idleConns{addr: addr}
	defer conns.close()
	if err := warmUpIdle(ctx, conns, start, srv); err != nil {
		return err
	}
	rep := &idleReport{Streams: o.streams}
	base := take(true)
	rep.RSSBaseline = base.RSS
	if rep.GoroutinesBaseline, err = labelledGoroutines(); err != nil {
		return err
	}

	fmt.Fprintf(stderr, "agentd-load: opening %d streams that each wait on an approval, from a child process\n", o.streams)
	child, err := startIdleClients(ctx, exe, addr, o.streams, stderr)
	if err != nil {
		return err
	}
	defer child.close()
	var opened idleClientReport
	if err := readClientReport(child.lines, &opened); err != nil {
		return fmt.Errorf("the clients: %w", err)
	}
	rep.OpenS, rep.Waiting, rep.Errors = opened.Seconds, opened.Done, opened.Errors
	if err := measureWaiting(ctx, o, srv, rep); err != nil {
		return err
	}
	fmt.Fprintf(stderr, "agentd-load: %d streams wait; answering them all\n", rep.Waiting)
	if _, err := io.WriteString(child.stdin, "approve\n"); err != nil {
		return err
	}
	var answered idleClientReport
	if err := readClientReport(child.lines, &answered); err != nil {
		return fmt.Errorf("the clients: %w", err)
	}
	rep.AnswerS, rep.Completed = answered.Seconds, answered.Done
	rep.Errors = append(rep.Errors, answered.Errors...)
	rep.OK = rep.Waiting == o.streams && rep.Completed == o.streams &&
		rep.GoroutinesPerStream <= idleMaxGoroutinesPerStream && rep.RSSWaiting <= idleMaxRSS
	return writeIdleReport(rep, o.json, stdout)
}

// idleConns are the client connections to agentd, idleStreamsPerConn
// streams to each.
type idleConns struct {
	addr  string
	conns []*grpc.ClientConn
}

// client is the client of stream i, on a connection made when first
// needed.
func (c *idleConns) client(i int) (agentdv1.AgentServiceClient, error) {
	for len(c.conns) <= i/idleStreamsPerConn {
		conn, err := grpc.NewClient(c.addr, grpc.WithTransportCredentials(insecure.NewCredentials()))
		if err != nil {
			return nil, err
		}
		c.conns = append(c.conns, conn)
	}
	return agentdv1.NewAgentServiceClient(c.conns[i/idleStreamsPerConn]), nil
}

func (c *idleConns) close() {
	for _, conn := range c.conns {
		conn.Close()
	}
}

// warmUpIdle runs one generation approved at once, so that the demo
// server runs and agentd's lazily made parts exist before the baseline.
func warmUpIdle(ctx context.Context, conns *idleConns, start *agentdv1.StartGeneration, srv *fleet) error {
	c0, err := conns.client(0)
	if err != nil {
		return err
	}
	w, err := openWaiting(ctx, c0, start)
	if err != nil {
		return fmt.Errorf("the warm-up generation: %w (agentd's log: %s)", err, srv.logs())
	}
	if err := w.approve(); err != nil {
		return fmt.Errorf("the warm-up generation: %w", err)
	}
	return nil
}

// idleChild is the child process that opens the waiting streams: its
// reports come as lines on its stdout, its orders go to its stdin.
type idleChild struct {
	cmd   *exec.Cmd
	stdin io.WriteCloser
	lines *bufio.Scanner
}

// startIdleClients starts exe as the child that opens streams streams to
// addr.
func startIdleClients(ctx context.Context, exe, addr string, streams int, stderr io.Writer) (*idleChild, error) {
	cmd := exec.CommandContext(ctx, exe, "-"+idleClientsFlag, addr, "-streams", strconv.Itoa(streams))
	cmd.Stderr = stderr
	toChild, err := cmd.StdinPipe()
	if err != nil {
		return nil, err
	}
	fromChild, err := cmd.StdoutPipe()
	if err != nil {
		return nil, err
	}
	if err := cmd.Start(); err != nil {
		return nil, err
	}
	return &idleChild{cmd: cmd, stdin: toChild, lines: bufio.NewScanner(fromChild)}, nil
}

// close ends the child's input and waits for it.
func (c *idleChild) close() {
	c.stdin.Close()
	_ = c.cmd.Wait()
}

// measureWaiting measures agentd while the streams wait: its bridge
// sessions, memory, stacks and goroutines, writing the profiles o asks
// for.
func measureWaiting(ctx context.Context, o options, srv *fleet, rep *idleReport) error {
	// A waiting generation closes its bridge session in the background:
	// the measurement waits for the closes (for at most settleSessions).
	rep.BridgeSessionsWaiting = settledSessions(ctx, srv.replicas[0].agent)
	waiting := take(true)
	rep.RSSWaiting, rep.LiveHeapWaiting = waiting.RSS, waiting.LiveHeap
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	rep.StacksWaiting = int64(ms.StackInuse)
	for _, prof := range []struct{ name, path string }{{"heap", o.heapProfile}, {"goroutine", o.goroutineProfile}} {
		if prof.path != "" {
			if err := writeProfile(prof.name, prof.path); err != nil {
				return err
			}
		}
	}
	var err error
	if rep.GoroutinesWaiting, err = labelledGoroutines(); err != nil {
		return err
	}
	if rep.Waiting > 0 {
		rep.GoroutinesPerStream = float64(rep.GoroutinesWaiting-rep.GoroutinesBaseline) / float64(rep.Waiting)
	}
	return nil
}

// writeIdleReport writes rep, as JSON or as text; errFailed when the run
// missed its targets.
func writeIdleReport(rep *idleReport, asJSON bool, stdout io.Writer) error {
	if asJSON {
		enc := json.NewEncoder(stdout)
		enc.SetIndent("", "  ")
		if err := enc.Encode(rep); err != nil {
			return err
		}
	} else {
		rep.writeText(stdout)
	}
	if !rep.OK {
		return errFailed
	}
	return nil
}

// lockedWriter serializes the writes to w.
type lockedWriter struct {
	mu sync.Mutex
	w  io.Writer
}

func (l *lockedWriter) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.w.Write(p)
}

// settleSessions bounds how long settledSessions waits.
const settleSessions = 10 * time.Second

// settledSessions is how many sessions agent's embedded bridge holds once
// none closes any more: when it holds none, or after settleSessions.
func settledSessions(ctx context.Context, agent *app.Agent) int {
	ctx, cancel := context.WithTimeout(ctx, settleSessions)
	defer cancel()
	tick := time.NewTicker(10 * time.Millisecond)
	defer tick.Stop()
	for {
		n := agent.BridgeSessions()
		if n <= 0 {
			return n
		}
		select {
		case <-ctx.Done():
			return n
		case <-tick.C:
		}
	}
}

func (r *idleReport) writeText(w io.Writer) {
	fmt.Fprintf(w, "idle streams: %d opened in %.1fs, %d waiting on an approval, %d completed after the answers (%.1fs)\n",
		r.Streams, r.OpenS, r.Waiting, r.Completed, r.AnswerS)
	fmt.Fprintf(w, "agentd's goroutines: %d at rest, %d while they wait: %.2f per waiting stream (target <= %d)\n",
		r.GoroutinesBaseline, r.GoroutinesWaiting, r.GoroutinesPerStream, idleMaxGoroutinesPerStream)
	fmt.Fprintf(w, "agentd's memory (this process; the clients run in another): RSS %s at rest, %s while they wait (target <= %s); while they wait, live heap %s, goroutine stacks %s\n",
		mib(r.RSSBaseline), mib(r.RSSWaiting), mib(idleMaxRSS), mib(r.LiveHeapWaiting), mib(r.StacksWaiting))
	fmt.Fprintf(w, "the bridge's open sessions while they wait: %d (the demo server is shared: a waiting generation's session closes)\n", r.BridgeSessionsWaiting)
	if r.Waiting > 0 {
		fmt.Fprintf(w, "per waiting stream: %.1f KiB of RSS above rest\n", float64(r.RSSWaiting-r.RSSBaseline)/1024/float64(r.Waiting))
	}
	for _, e := range r.Errors {
		fmt.Fprintf(w, "error: %s\n", e)
	}
	verdict := "PASS"
	if !r.OK {
		verdict = "FAIL"
	}
	fmt.Fprintln(w, verdict)
}

// waitingStream is a generation waiting on its approval request.
type waitingStream struct {
	stream  agentdv1.AgentService_GenerateClient
	cancel  context.CancelFunc
	request *agentdv1.ApprovalRequest
}

// openWaiting starts a generation and reads its stream until it waits on
// an approval.
func openWaiting(ctx context.Context, client agentdv1.AgentServiceClient, start *agentdv1.StartGeneration) (*waitingStream, error) {
	ctx, cancel := context.WithCancel(ctx)
	stream, err := client.Generate(ctx)
	if err != nil {
		cancel()
		return nil, err
	}
	if err := stream.Send(&agentdv1.GenerateRequest{Kind: &agentdv1.GenerateRequest_Start{Start: start}}); err != nil && !errors.Is(err, io.EOF) {
		cancel()
		return nil, err
	}
	for {
		ev, err := stream.Recv()
		if err != nil {
			cancel()
			if errors.Is(err, io.EOF) {
				err = errors.New("the stream ended before the approval request")
			}
			return nil, err
		}
		if r := ev.GetApprovalRequest(); r != nil {
			return &waitingStream{stream: stream, cancel: cancel, request: r}, nil
		}
	}
}

// approve answers the approval and reads the stream to its end, which must
// be completed.
func (s *waitingStream) approve() error {
	defer s.cancel()
	if err := s.stream.Send(&agentdv1.GenerateRequest{Kind: &agentdv1.GenerateRequest_ApprovalDecision{ApprovalDecision: &agentdv1.ApprovalDecision{
		RequestId: s.request.GetId(), Approved: true}}}); err != nil {
		return err
	}
	_ = s.stream.CloseSend()
	completed := false
	for {
		ev, err := s.stream.Recv()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return err
		}
		if ev.GetCompleted() != nil {
			completed = true
		}
	}
	if !completed {
		return errors.New("the stream ended without completed")
	}
	return nil
}

// labelledGoroutines counts the goroutines that carry agentdLabel: the
// in-process agentd's.
func labelledGoroutines() (int, error) {
	var b bytes.Buffer
	if err := pprof.Lookup("goroutine").WriteTo(&b, 1); err != nil {
		return 0, err
	}
	return countLabelled(b.String()), nil
}

// countLabelled counts the goroutines of a goroutine profile in its debug=1
// text that carry agentdLabel. Each group of goroutines opens with a line
// "N @ pc pc ...", followed by its "# labels: {...}" line if it has any;
// the profile's first line is its total.
func countLabelled(profile string) int {
	n, group := 0, 0
	for line := range strings.Lines(profile) {
		if count, _, ok := strings.Cut(line, " @ "); ok {
			group, _ = strconv.Atoi(count) // 0 for a line that is no group's
			continue
		}
		if strings.HasPrefix(line, "# labels: ") && strings.Contains(line, `"agentd-load":"agentd"`) {
			n += group
			group = 0
		}
	}
	return n
}

// idleClientsFlag starts an idle run's client process.
const idleClientsFlag = "idle-clients"

// idleClientReport is what the client process reports, a JSON line per
// phase: the streams it opened (and that wait), then those that completed.
type idleClientReport struct {
	Done    int      `json:"done"`
	Seconds float64  `json:"seconds"`
	Errors  []string `json:"errors,omitempty"`
}

func readClientReport(lines *bufio.Scanner, r *idleClientReport) error {
	if !lines.Scan() {
		if err := lines.Err(); err != nil {
			return err
		}
		return errors.New("the client process ended without a report")
	}
	return json.Unmarshal(lines.Bytes(), r)
}

// runIdleClients is the client process of an idle run: it opens
// o.streams streams to o.idleClients that each wait on an approval,
// reports, waits for a line on in, approves them all, and reports again.
func runIdleClients(ctx context.Context, o options, in io.Reader, out io.Writer) error {
	start, err := idleStart()
	if err != nil {
		return err
	}
	conns := &idleConns{addr: o.idleClients}
	defer conns.close()
	// Every connection made before the streams open, concurrently.
	if _, err := conns.client(o.streams - 1); err != nil {
		return err
	}
	enc := json.NewEncoder(out)
	began := time.Now()
	streams, errs := openAll(ctx, conns, start, o.streams)
	if err := enc.Encode(phaseReport(errs, time.Since(began), "opening")); err != nil {
		return err
	}
	if _, err := bufio.NewReader(in).ReadString('\n'); err != nil {
		return err
	}
	began = time.Now()
	approveAll(streams, errs)
	return enc.Encode(phaseReport(errs, time.Since(began), "answering"))
}

// idleAtOnce bounds the streams opening, or answered, at once.
const idleAtOnce = 64

// openAll opens n streams that each wait on an approval, on conns made
// for them all; errs[i] is why stream i did not open.
func openAll(ctx context.Context, conns *idleConns, start *agentdv1.StartGeneration, n int) ([]*waitingStream, []error) {
	streams := make([]*waitingStream, n)
	errs := make([]error, n)
	var wg sync.WaitGroup
	sem := make(chan struct{}, idleAtOnce)
	for i := range n {
		sem <- struct{}{}
		wg.Go(func() {
			defer func() { <-sem }()
			client, _ := conns.client(i) // made already
			streams[i], errs[i] = openWaiting(ctx, client, start)
		})
	}
	wg.Wait()
	return streams, errs
}

// approveAll answers every stream opened; errs[i] becomes why stream i's
// generation did not complete.
func approveAll(streams []*waitingStream, errs []error) {
	var wg sync.WaitGroup
	sem := make(chan struct{}, idleAtOnce)
	for i, s := range streams {
		if s == nil {
			errs[i] = errors.New("not opened")
			continue
		}
		sem <- struct{}{}
		wg.Go(func() {
			defer func() { <-sem }()
			errs[i] = s.approve()
		})
	}
	wg.Wait()
}

// phaseReport sums up one phase's errors (at most five shown).
func phaseReport(errs []error, took time.Duration, phase string) idleClientReport {
	r := idleClientReport{Seconds: took.Seconds()}
	for _, e := range errs {
		switch {
		case e == nil:
			r.Done++
		case len(r.Errors) < 5:
			r.Errors = append(r.Errors, phase+": "+e.Error())
		}
	}
	return r
}

// writeProfile writes the named runtime/pprof profile (heap: as of the
// last GC) to path.
func writeProfile(name, path string) error {
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	if err := pprof.Lookup(name).WriteTo(f, 0); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}
