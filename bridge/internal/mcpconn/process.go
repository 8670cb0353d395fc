package mcpconn

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"
)

// maxLogLine bounds one forwarded stderr line (or dropped stdout line).
const maxLogLine = 4096

// inheritedEnv lists the variables a stdio server inherits from agentd.
// Nothing else of agentd's environment (provider API keys, for one) reaches
// a child; a registration or request adds what its server needs.
var inheritedEnv = []string{"PATH", "HOME", "USER", "LOGNAME", "LANG", "LC_ALL", "LC_CTYPE", "TZ", "TMPDIR", "SHELL", "TERM"}

// StdioSpec says how to start a stdio server.
type StdioSpec struct {
	// Name is the server's display name, for logs and errors.
	Name string
	// Command is the executable: a path, or a name looked up in PATH.
	Command string
	// Args are its arguments.
	Args []string
	// Env is added to the inherited environment; Unset removes variables.
	Env   map[string]string
	Unset []string
	// TerminateGrace is how long the process gets to exit after its stdin
	// closes, and again after SIGTERM, before SIGKILL. Zero means 2 s.
	TerminateGrace time.Duration
	// Logger receives the server's stderr, one record per line.
	Logger *slog.Logger
}

// process is one supervised child: its own process group, stderr forwarded
// to the log, and a shutdown that escalates from closing stdin to SIGTERM
// to SIGKILL of the whole group, so grandchildren (npx, uv) die too.
type process struct {
	name   string
	cmd    *exec.Cmd
	stdin  io.WriteCloser
	stdout *os.File // read end; closed by close
	stderr *os.File // read end; closed by close
	grace  time.Duration
	log    *slog.Logger
	lines  *lineLimiter          // rate of logged stderr and stray stdout lines
	owner  atomic.Pointer[Owner] // the session served now (Conn.Serve); nil: none, or many

	exited  chan struct{} // closed once Wait has returned
	waitErr error         // set before exited closes
	readers sync.WaitGroup

	closeOnce sync.Once
	closeErr  error
}

func childEnv(env map[string]string, unset []string) []string {
	vars := make(map[string]string)
	for _, k := range inheritedEnv {
		if v, ok := os.LookupEnv(k); ok {
			vars[k] = v
		}
	}
	for k, v := range env {
		vars[k] = v
	}
	for _, k := range unset {
		delete(vars, k)
	}
	out := make([]string, 0, len(vars))
	for k, v := range vars {
		out = append(out, k+"="+v)
	}
	return out
}

// startProcess starts spec's command with fresh pipes. Errors name the
// server and the executable's base name, never arguments or environment.
func startProcess(spec StdioSpec) (*process, error) {
	grace := spec.TerminateGrace
	if grace <= 0 {
		grace = 2 * time.Second
	}
	log := spec.Logger.With("server", spec.Name)
	cmd := exec.Command(spec.Command, spec.Args...)
	cmd.Env = childEnv(spec.Env, spec.Unset)
	cmd.SysProcAttr = &syscall.SysProcAttr{
		Setpgid:   true,            // our own group: shutdown signals reach grandchildren
		Pdeathsig: syscall.SIGKILL, // if agentd dies, its children do too
	}
	stdinR, stdinW, err := os.Pipe()
	if err != nil {
		return nil, err
	}
	stdoutR, stdoutW, err := os.Pipe()
	if err != nil {
		closeAll(stdinR, stdinW)
		return nil, err
	}
	stderrR, stderrW, err := os.Pipe()
	if err != nil {
		closeAll(stdinR, stdinW, stdoutR, stdoutW)
		return nil, err
	}
	cmd.Stdin, cmd.Stdout, cmd.Stderr = stdinR, stdoutW, stderrW
	if err := cmd.Start(); err != nil {
		closeAll(stdinR, stdinW, stdoutR, stdoutW, stderrR, stderrW)
		return nil, fmt.Errorf("MCP server %q: cannot start %s: %w", spec.Name, filepath.Base(spec.Command), unwrapPathError(err))
	}
	// The child holds its own copies; ours would keep the pipes open.
	closeAll(stdinR, stdoutW, stderrW)

	p := &process{
		name:   spec.Name,
		cmd:    cmd,
		stdin:  stdinW,
		stdout: stdoutR,
		stderr: stderrR,
		grace:  grace,
		log:    log.With("pid", cmd.Process.Pid),
		lines:  newLineLimiter(),
		exited: make(chan struct{}),
	}
	p.readers.Add(1)
	go p.forwardStderr()
	go func() {
		p.waitErr = cmd.Wait()
		// The leader is gone; whatever it left in its group goes too.
		_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
		close(p.exited)
	}()
	return p, nil
}

// unwrapPathError drops the path from exec's errors: a command's full path
// may name a user's home directory or a secret-bearing location.
func unwrapPathError(err error) error {
	var pe *os.PathError
	if errors.As(err, &pe) {
		return pe.Err
	}
	var ee *exec.Error
	if errors.As(err, &ee) {
		return ee.Err
	}
	return err
}

func closeAll(files ...*os.File) {
	for _, f := range files {
		_ = f.Close()
	}
}

// forwardStderr logs the server's stderr line by line, each line bounded.
func (p *process) forwardStderr() {
	defer p.readers.Done()
	br := bufio.NewReaderSize(p.stderr, maxLogLine)
	for {
		line, err := readBoundedLine(br)
		if line != "" {
			log := p.log
			if o := p.owner.Load(); o != nil {
				// The line names the session it was written for.
				log = log.With("tenant", o.Tenant, "generation", o.Generation, "trace_id", o.TraceID)
			}
			p.lines.logLine(log, slog.LevelInfo, "mcp server stderr", line)
		}
		if err != nil {
			return
		}
	}
}

// readBoundedLine reads one line, keeping at most maxLogLine bytes of it.
func readBoundedLine(br *bufio.Reader) (string, error) {
	var b strings.Builder
	for {
		chunk, err := br.ReadSlice('\n')
		if room := maxLogLine - b.Len(); room > 0 {
			b.Write(chunk[:min(len(chunk), room)])
		}
		if errors.Is(err, bufio.ErrBufferFull) {
			continue
		}
		return strings.TrimRight(b.String(), "\r\n"), err
	}
}

// pid is the child's process id (and process group id).
func (p *process) pid() int { return p.cmd.Process.Pid }

// kill stops the whole group at once, without grace: for a server that
// missed its deadline. It does not wait; close does.
func (p *process) kill() {
	_ = syscall.Kill(-p.pid(), syscall.SIGKILL)
}

// close shuts the process down: close stdin, wait grace; SIGTERM the group,
// wait grace; SIGKILL the group; then wait for exit and for the stderr
// reader to drain. Idempotent; safe for concurrent use. It returns the
// exit error only when the process had to be signalled, since a server that
// exits on its own after stdin closes did nothing wrong.
func (p *process) close() error {
	p.closeOnce.Do(func() {
		_ = p.stdin.Close()
		if !p.waitExit(p.grace) {
			_ = syscall.Kill(-p.pid(), syscall.SIGTERM)
			if !p.waitExit(p.grace) {
				_ = syscall.Kill(-p.pid(), syscall.SIGKILL)
				<-p.exited
				p.closeErr = fmt.Errorf("MCP server %q ignored SIGTERM and was killed", p.name)
			}
		}
		_ = p.stdout.Close()
		// Drain what the server wrote to stderr; a descendant that left the
		// group may hold the pipe open, so the wait is bounded.
		drained := make(chan struct{})
		go func() { p.readers.Wait(); close(drained) }()
		select {
		case <-drained:
		case <-time.After(p.grace):
		}
		_ = p.stderr.Close()
		<-drained
		if n := p.lines.left(); n > 0 {
			p.log.Info("mcp server output left out of the log", "suppressed_lines", n)
		}
	})
	return p.closeErr
}

func (p *process) waitExit(d time.Duration) bool {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-p.exited:
		return true
	case <-t.C:
		return false
	}
}
