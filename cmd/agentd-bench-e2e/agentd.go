package main

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"syscall"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/protobuf/proto"

	bridgev1 "github.com/agentd/agentd/gen/go/agentd/bridge/v1"
	agentdv1 "github.com/agentd/agentd/gen/go/agentd/v1"
)

// The two registrations of server-everything in agentd's configuration.
const (
	sharedServer  = "everything-shared" // shared: true
	defaultServer = "everything"        // the defaults: a process per generation
)

// agentdProcess is `agentd serve` running as a child of this process.
type agentdProcess struct {
	addr    string // where it serves, from its log
	debug   string // its debug.listen endpoint's address, from its log
	logPath string
	cmd     *exec.Cmd
	logged  chan struct{} // closed once its stderr is drained

	// seen is every MCP server process it was seen running (by the
	// samplers), checked to be gone after it stops.
	seen map[int]bool
}

// agentdConfig is the configuration file: defaults but for the state
// directory, the port, the drain, the profiling endpoint (which costs
// nothing until asked) and the servers; warm, unless negative, sets the
// default registration's warm spares; with postgres, the store is
// PostgreSQL (its DSN goes in the environment: see startAgentd).
func agentdConfig(stateDir, node, everything string, warm int, postgres bool) string {
	warmSetting, store := "", ""
	if warm >= 0 {
		warmSetting = fmt.Sprintf(", warm: %d", warm)
	}
	if postgres {
		store = "store: {driver: postgres}\n"
	}
	return fmt.Sprintf(`listen: 127.0.0.1:0
shutdown_drain: 0s
debug: {listen: 127.0.0.1:0}
state_dir: %s
%sbridge:
  servers:
    %s: {command: %s, args: [%s, stdio], shared: true}
    %s: {command: %s, args: [%s, stdio]%s}
`, strconv.Quote(stateDir), store, sharedServer, strconv.Quote(node), strconv.Quote(everything),
		defaultServer, strconv.Quote(node), strconv.Quote(everything), warmSetting)
}

// servingRE finds the address in agentd's "agentd serving" log line.
var servingRE = regexp.MustCompile(`msg="?agentd serving"? .*address=(127\.0\.0\.1:\d+)`)

// debugRE finds the profiling endpoint's address in agentd's "debug
// serving" log line, which follows "agentd serving".
var debugRE = regexp.MustCompile(`msg="?debug serving[^"]*"? .*address=http://(127\.0\.0\.1:\d+)/`)

// startAgentd writes the configuration into dir and starts bin, its
// openai provider pointed at baseURL and its store on the PostgreSQL
// database pgDSN names (in its environment, as a secret goes), if any,
// then waits for it to serve.
func startAgentd(ctx context.Context, bin, dir, node, everything, baseURL string, warm int, pgDSN string) (*agentdProcess, error) {
	cfgPath := filepath.Join(dir, "agentd.yaml")
	if err := os.WriteFile(cfgPath, []byte(agentdConfig(filepath.Join(dir, "state"), node, everything, warm, pgDSN != "")), 0o600); err != nil {
		return nil, err
	}
	a := &agentdProcess{logPath: filepath.Join(dir, "agentd.log"), logged: make(chan struct{}), seen: map[int]bool{}}
	log, err := os.Create(a.logPath)
	if err != nil {
		return nil, err
	}
	a.cmd = exec.Command(bin, "serve", "--config", cfgPath)
	a.cmd.Env = append(agentdEnv(os.Environ()), "OPENAI_API_KEY="+apiKey, "OPENAI_BASE_URL="+baseURL)
	if pgDSN != "" {
		a.cmd.Env = append(a.cmd.Env, "AGENTD_STORE_DSN="+pgDSN)
	}
	a.cmd.Stdout = log
	// Its own process group, stopped in order by this process; and told
	// to stop (and so to stop its servers) if this process dies.
	a.cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGTERM}
	stderr, err := a.cmd.StderrPipe()
	if err != nil {
		log.Close()
		return nil, err
	}
	if err := a.cmd.Start(); err != nil {
		log.Close()
		return nil, err
	}
	addr, debug := make(chan string, 1), make(chan string, 1)
	go a.follow(stderr, log, addr, debug)
	if err := a.waitServing(ctx, addr, debug); err != nil {
		_ = a.stop()
		return nil, fmt.Errorf("%w (log: %s)", err, a.logPath)
	}
	return a, nil
}

// follow copies agentd's stderr to log, sending the serving and debug
// addresses its lines announce to addr and debug; logged closes at the
// end of its stderr.
func (a *agentdProcess) follow(stderr io.Reader, log *os.File, addr, debug chan<- string) {
	defer close(a.logged)
	defer log.Close()
	sc := bufio.NewScanner(stderr)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	for sc.Scan() {
		line := sc.Text()
		fmt.Fprintln(log, line)
		for _, f := range []struct {
			re *regexp.Regexp
			to chan<- string
		}{{servingRE, addr}, {debugRE, debug}} {
			if m := f.re.FindStringSubmatch(line); m != nil {
				select {
				case f.to <- m[1]:
				default:
				}
			}
		}
	}
	_, _ = io.Copy(log, stderr)
}

// waitServing waits for agentd to announce its address and its debug
// endpoint's, for at most a minute.
func (a *agentdProcess) waitServing(ctx context.Context, addr, debug <-chan string) error {
	timeout := time.After(time.Minute)
	for a.addr == "" || a.debug == "" {
		select {
		case a.addr = <-addr:
		case a.debug = <-debug:
		case <-a.logged:
			return errors.New("agentd stopped before serving")
		case <-ctx.Done():
			return ctx.Err()
		case <-timeout:
			return errors.New("agentd did not serve (and its debug endpoint) within a minute")
		}
	}
	return nil
}

// agentdEnv is this process's environment without what could change the
// agentd under test: its own settings and the providers' variables.
func agentdEnv(env []string) []string {
	var out []string
	for _, kv := range env {
		name, _, _ := strings.Cut(kv, "=")
		if strings.HasPrefix(name, "AGENTD_") || strings.HasPrefix(name, "OPENAI_") || strings.HasPrefix(name, "OTEL_") {
			continue
		}
		out = append(out, kv)
	}
	return out
}

func (a *agentdProcess) pid() int { return a.cmd.Process.Pid }

// stop stops agentd as an operator would (SIGTERM: it ends its sessions
// and stops its servers), SIGKILLs its process group if it has not exited
// within 30 s (shutdown_grace and terminate_grace included), and then
// checks that no MCP server process it ran is left. It may be called once.
func (a *agentdProcess) stop() error {
	_ = a.cmd.Process.Signal(syscall.SIGTERM)
	done := make(chan error, 1)
	go func() { <-a.logged; done <- a.cmd.Wait() }()
	var err error
	select {
	case err = <-done:
	case <-time.After(30 * time.Second):
		_ = syscall.Kill(-a.pid(), syscall.SIGKILL)
		<-done
		err = errors.New("agentd did not stop within 30s of SIGTERM: killed")
	}
	var exit *exec.ExitError
	if errors.As(err, &exit) {
		err = fmt.Errorf("agentd exited: %w", err)
	}
	return errors.Join(err, a.killSurvivors())
}

// killSurvivors kills the MCP server processes agentd ran that outlived
// it, and says which. Its servers are stopped before it exits; the kernel
// gets a moment to reap any that was reparented.
func (a *agentdProcess) killSurvivors() error {
	deadline := time.Now().Add(2 * time.Second)
	for {
		left := a.alive()
		if len(left) == 0 {
			return nil
		}
		if time.Now().After(deadline) {
			for _, pid := range left {
				_ = syscall.Kill(pid, syscall.SIGKILL)
			}
			return fmt.Errorf("MCP server processes %v outlived agentd: killed", left)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// alive lists the MCP server processes agentd ran that are alive.
func (a *agentdProcess) alive() []int {
	var left []int
	for pid := range a.seen {
		if alive(pid) {
			left = append(left, pid)
		}
	}
	return left
}

// agentdClient runs generations on one gRPC connection to agentd.
type agentdClient struct {
	conn    *grpc.ClientConn
	client  agentdv1.AgentServiceClient
	admin   bridgev1.BridgeAdminServiceClient
	timeout time.Duration
}

func dialAgentd(addr string, timeout time.Duration) (*agentdClient, error) {
	conn, err := grpc.NewClient(addr, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		return nil, err
	}
	return &agentdClient{conn: conn, client: agentdv1.NewAgentServiceClient(conn), admin: bridgev1.NewBridgeAdminServiceClient(conn), timeout: timeout}, nil
}

// pool returns the stats of the pool of the registered server name.
func (c *agentdClient) pool(ctx context.Context, name string) (*bridgev1.PoolStats, error) {
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	res, err := c.admin.GetPoolStats(ctx, &bridgev1.GetPoolStatsRequest{})
	if err != nil {
		return nil, fmt.Errorf("GetPoolStats: %w", err)
	}
	for _, p := range res.GetPools() {
		if p.GetKey() == "ref:"+name {
			return p, nil
		}
	}
	return nil, fmt.Errorf("GetPoolStats: no pool of %q", name)
}

// startRequest is the generation of the workload against the server
// registered as ref.
func startRequest(ref string) *agentdv1.StartGeneration {
	maxTurns := int32(toolTurns + 1)
	return &agentdv1.StartGeneration{
		Agent: &agentdv1.Agent{
			Provider:     "openai",
			Model:        model,
			Instructions: "You are a benchmark agent. Call echo when asked to.",
			Mcps:         []*agentdv1.MCPServer{{Transport: &agentdv1.MCPServer_Ref{Ref: ref}}},
			MaxToolTurns: &maxTurns,
		},
		Messages: []*agentdv1.Message{{
			Role:  agentdv1.Role_ROLE_USER,
			Parts: []*agentdv1.Part{{Kind: &agentdv1.Part_Text{Text: "Call echo three times, then say how it went."}}},
		}},
	}
}

// generator returns a generation function for one worker: each worker
// sends its own copy of the request.
func (c *agentdClient) generator(ref string) genFunc {
	start := startRequest(ref)
	return func(ctx context.Context) (time.Duration, error) {
		return c.generate(ctx, proto.CloneOf(start))
	}
}

// generate runs one generation and returns how long its completed event
// took to arrive; err is nil only if it completed as the fake scripts it.
func (c *agentdClient) generate(ctx context.Context, start *agentdv1.StartGeneration) (time.Duration, error) {
	t0 := time.Now()
	ctx, cancel := context.WithTimeout(ctx, c.timeout)
	defer cancel()
	stream, err := c.client.Generate(ctx)
	if err != nil {
		return 0, err
	}
	// A failed Send reports io.EOF; the stream's status comes from Recv.
	if err := stream.Send(&agentdv1.GenerateRequest{Kind: &agentdv1.GenerateRequest_Start{Start: start}}); err == nil {
		// Nothing is gated, so half-closing cannot pause the generation.
		_ = stream.CloseSend()
	}
	r, err := receive(stream, t0)
	if err == nil {
		err = r.check()
	}
	if err != nil {
		return 0, err
	}
	return r.toCompleted, nil
}

// received is what a generation's stream said: how many tool calls
// finished, and its completed event and when it arrived.
type received struct {
	calls       int
	completed   *agentdv1.GenerationCompleted
	toCompleted time.Duration
}

// receive reads stream to its end (t0: when it opened); a failed tool
// call is an error.
func receive(stream agentdv1.AgentService_GenerateClient, t0 time.Time) (received, error) {
	var r received
	for {
		ev, err := stream.Recv()
		if errors.Is(err, io.EOF) {
			return r, nil
		}
		if err != nil {
			return r, err
		}
		switch k := ev.GetEvent().(type) {
		case *agentdv1.GenerateResponse_ToolCallFinished:
			r.calls++
			if k.ToolCallFinished.GetIsError() {
				return r, fmt.Errorf("tool call %s failed: %s", k.ToolCallFinished.GetToolName(), k.ToolCallFinished.GetOutput())
			}
		case *agentdv1.GenerateResponse_Completed:
			r.completed, r.toCompleted = k.Completed, time.Since(t0)
		}
	}
}

// check checks that the generation ran as the fake scripts it: it
// completed, after its tool turns, with the final text.
func (r received) check() error {
	var text string
	for _, p := range r.completed.GetMessage().GetParts() {
		text += p.GetText()
	}
	switch {
	case r.completed == nil:
		return errors.New("the stream ended OK without a completed event")
	case r.calls != toolTurns || int(r.completed.GetToolTurns()) != toolTurns:
		return fmt.Errorf("%d tool calls in %d tool turns, want %d", r.calls, r.completed.GetToolTurns(), toolTurns)
	case text != finalText:
		return fmt.Errorf("final text %q, want %q", text, finalText)
	}
	return nil
}

// allocs reads agentd's bytes and objects allocated since it started, from
// its debug endpoint's runtime/metrics.
func allocs(ctx context.Context, debugAddr string) (bytes, objects uint64, err error) {
	m, err := runtimeMetrics(ctx, debugAddr)
	if err != nil {
		return 0, 0, err
	}
	b, okB := m["/gc/heap/allocs:bytes"]
	o, okO := m["/gc/heap/allocs:objects"]
	if !okB || !okO {
		return 0, 0, errors.New("GET /debug/runtime: no /gc/heap/allocs metrics")
	}
	return uint64(b), uint64(o), nil
}

// runtimeMetrics reads agentd's /debug/runtime: its runtime/metrics by
// name.
func runtimeMetrics(ctx context.Context, debugAddr string) (map[string]float64, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, "http://"+debugAddr+"/debug/runtime", nil)
	if err != nil {
		return nil, err
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("GET /debug/runtime: %s", resp.Status)
	}
	var m map[string]float64
	if err := json.NewDecoder(resp.Body).Decode(&m); err != nil {
		return nil, fmt.Errorf("GET /debug/runtime: %w", err)
	}
	return m, nil
}

// cpuProfile asks agentd's debug endpoint for a CPU profile of the next
// seconds and writes it to path; done is closed when it has arrived (or
// failed), with the error in *err.
func cpuProfile(ctx context.Context, debugAddr string, seconds int, path string) (done <-chan struct{}, err *error) {
	ch, e := make(chan struct{}), new(error)
	go func() {
		defer close(ch)
		*e = func() error {
			req, err := http.NewRequestWithContext(ctx, http.MethodGet, fmt.Sprintf("http://%s/debug/pprof/profile?seconds=%d", debugAddr, seconds), nil)
			if err != nil {
				return err
			}
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				return err
			}
			defer resp.Body.Close()
			if resp.StatusCode != http.StatusOK {
				msg, _ := io.ReadAll(io.LimitReader(resp.Body, 1<<10))
				return fmt.Errorf("GET /debug/pprof/profile: %s: %s", resp.Status, msg)
			}
			f, err := os.Create(path)
			if err != nil {
				return err
			}
			if _, err := io.Copy(f, resp.Body); err != nil {
				f.Close()
				return err
			}
			return f.Close()
		}()
	}()
	return ch, e
}
