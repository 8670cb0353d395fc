package main

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/agentd/agentd/internal/config"
)

// wait bounds each step: a replica's start, a generation's, an adoption.
const wait = time.Minute

// cluster is where the replicas of one store run.
type cluster struct {
	bin, dir string
	store    string
	dsn      string // with postgres
}

// replica is `agentd serve` running as a child of this process.
type replica struct {
	addr    string // where it serves, from its log
	logPath string
	cmd     *exec.Cmd
	logged  chan struct{} // closed once its stderr is drained

	mu      sync.Mutex
	adopts  map[string]time.Time // when it logged each generation adopted
	arrived chan struct{}        // closed (and replaced) as adopts grows
}

// config is a replica's configuration: the defaults but for the port, the
// drain, the state directory (SQLite's database is the cluster's, shared)
// and the store.
func (c cluster) config(name string) string {
	stateDir := filepath.Join(c.dir, "state")
	if c.store == config.StorePostgres {
		stateDir = filepath.Join(c.dir, "state-"+name)
	}
	return fmt.Sprintf("listen: 127.0.0.1:0\nshutdown_drain: 0s\nstate_dir: %s\nstore: {driver: %s}\n", strconv.Quote(stateDir), c.store)
}

// servingRE finds the address in agentd's "agentd serving" line, and
// adoptedRE the generation in a "generation adopted" line.
var (
	servingRE = regexp.MustCompile(`msg="?agentd serving"? .*address=(127\.0\.0\.1:\d+)`)
	adoptedRE = regexp.MustCompile(`msg="?generation adopted"? .*generation=(\S+)`)
)

// start starts replica name and waits for it to serve.
func (c cluster) start(ctx context.Context, name string) (*replica, error) {
	cfg := filepath.Join(c.dir, name+".yaml")
	if err := os.WriteFile(cfg, []byte(c.config(name)), 0o600); err != nil {
		return nil, err
	}
	r := &replica{logPath: filepath.Join(c.dir, name+".log"), logged: make(chan struct{}), adopts: map[string]time.Time{}, arrived: make(chan struct{})}
	log, err := os.Create(r.logPath)
	if err != nil {
		return nil, err
	}
	r.cmd = exec.Command(c.bin, "serve", "--config", cfg, "--log-level", "info")
	r.cmd.Env = replicaEnv(os.Environ())
	if c.store == config.StorePostgres {
		r.cmd.Env = append(r.cmd.Env, "AGENTD_STORE_DSN="+c.dsn)
	}
	// Its own process group; told to stop if this process dies.
	r.cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGTERM}
	stderr, err := r.cmd.StderrPipe()
	if err == nil {
		err = r.cmd.Start()
	}
	if err != nil {
		log.Close()
		return nil, err
	}
	addr := make(chan string, 1)
	go r.follow(stderr, log, addr)
	if err := r.waitServing(ctx, addr); err != nil {
		r.stop()
		return nil, fmt.Errorf("replica %s: %w (log: %s)", name, err, r.logPath)
	}
	return r, nil
}

// replicaEnv is this process's environment without agentd's own settings,
// which would change the replicas' configuration.
func replicaEnv(env []string) []string {
	var out []string
	for _, kv := range env {
		if !strings.HasPrefix(kv, "AGENTD_") {
			out = append(out, kv)
		}
	}
	return out
}

// follow copies the replica's stderr to log as it comes, sending the
// address it serves on to addr and noting each adoption's time.
func (r *replica) follow(stderr io.Reader, log *os.File, addr chan<- string) {
	defer close(r.logged)
	defer log.Close()
	sc := bufio.NewScanner(stderr)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	for sc.Scan() {
		now := time.Now()
		line := sc.Text()
		fmt.Fprintln(log, line)
		if m := servingRE.FindStringSubmatch(line); m != nil {
			select {
			case addr <- m[1]:
			default:
			}
		}
		if m := adoptedRE.FindStringSubmatch(line); m != nil {
			r.noteAdopted(m[1], now)
		}
	}
	_, _ = io.Copy(log, stderr)
}

func (r *replica) noteAdopted(id string, at time.Time) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.adopts[id] = at
	close(r.arrived)
	r.arrived = make(chan struct{})
}

func (r *replica) waitServing(ctx context.Context, addr <-chan string) error {
	select {
	case r.addr = <-addr:
		return nil
	case <-r.logged:
		return errors.New("it stopped before serving")
	case <-ctx.Done():
		return ctx.Err()
	case <-time.After(wait):
		return fmt.Errorf("it did not serve within %v", wait)
	}
}

// adopted returns when the replica logged generation id adopted.
func (r *replica) adopted(ctx context.Context, id string) (time.Time, error) {
	timeout := time.After(wait)
	for {
		r.mu.Lock()
		at, ok := r.adopts[id]
		arrived := r.arrived
		r.mu.Unlock()
		if ok {
			return at, nil
		}
		select {
		case <-arrived:
		case <-r.logged:
			return time.Time{}, fmt.Errorf("the surviving replica stopped before adopting %s", id)
		case <-ctx.Done():
			return time.Time{}, ctx.Err()
		case <-timeout:
			return time.Time{}, fmt.Errorf("the surviving replica did not adopt %s within %v", id, wait)
		}
	}
}

// kill SIGKILLs the replica and waits for it.
func (r *replica) kill() {
	_ = r.cmd.Process.Kill()
	<-r.logged
	_ = r.cmd.Wait()
}

// stop stops the replica (SIGTERM; SIGKILL to its group after 30 s) and
// waits for it; a no-op once it has exited.
func (r *replica) stop() {
	if r.cmd.ProcessState != nil {
		return
	}
	_ = r.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-r.logged:
	case <-time.After(30 * time.Second):
		_ = syscall.Kill(-r.cmd.Process.Pid, syscall.SIGKILL)
		<-r.logged
	}
	_ = r.cmd.Wait()
}
