package docstest

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/agentd/agentd/internal/fakemodel"
	"github.com/agentd/agentd/providers/registry"
)

// blockTimeout bounds one block: what the documents run takes seconds;
// the bound is for a block that hangs, on a busy machine.
const blockTimeout = 3 * time.Minute

// root is the repository's top level, from this package's directory.
const root = "../.."

// documents are the files whose runnable blocks run: README.md, then
// docs/*.md in name order.
func documents(t *testing.T) []string {
	t.Helper()
	docs, err := filepath.Glob(filepath.Join(root, "docs", "*.md"))
	if err != nil {
		t.Fatal(err)
	}
	return append([]string{filepath.Join(root, "README.md")}, docs...)
}

// TestDocs runs every runnable block of the documents against one agentd
// (see the package's doc), each document's blocks in order, each block a
// subtest named by its file and line.
func TestDocs(t *testing.T) {
	type doc struct {
		name   string
		blocks []Block
	}
	var docs []doc
	total := 0
	for _, path := range documents(t) {
		data, err := os.ReadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		blocks, err := Blocks(data)
		if err != nil {
			t.Fatalf("%s: %v", path, err)
		}
		var run []Block
		for _, b := range blocks {
			if !b.Runnable() {
				continue
			}
			if _, err := b.Fake(); err != nil {
				t.Errorf("%s: %v", path, err)
			}
			run = append(run, b)
		}
		rel, _ := filepath.Rel(root, path)
		docs = append(docs, doc{name: rel, blocks: run})
		total += len(run)
	}
	if total == 0 {
		t.Fatal("no runnable block in README.md or docs/: the documents' commands are not checked")
	}
	env := startStack(t)
	for _, d := range docs {
		for _, b := range d.blocks {
			t.Run(fmt.Sprintf("%s:%d", d.name, b.Line), func(t *testing.T) { runBlock(t, env, b) })
		}
	}
}

// stack is where the blocks run: the copy of the repository and the
// environment that names the started agentd.
type stack struct {
	dir string
	env []string
}

// startStack builds agentd (or takes AGENTD_TEST_BIN, which make test sets to
// the binary it built), makes the copy of the repository with it, starts
// the fake model and an agentd pointed at it, and returns where blocks
// run. The test's cleanup stops them.
func startStack(t *testing.T) stack {
	t.Helper()
	tmp := t.TempDir()
	dir := mirror(t, filepath.Join(tmp, "repo"), agentdBinary(t, tmp))
	fake := fakemodel.Start()
	t.Cleanup(fake.Close)
	serverEnv := append(append(cleanEnv(), fake.Env()...),
		"AGENTD_LISTEN=127.0.0.1:0", "AGENTD_STATE_DIR="+filepath.Join(tmp, "state"), "AGENTD_SHUTDOWN_DRAIN=0",
		"AGENTD_BRIDGE_ALLOWED_COMMANDS=npx,node", "AGENTD_CONFIG=")
	addr := serve(t, dir, serverEnv)
	return stack{dir: dir, env: append(cleanEnv(), "AGENTD_ADDR="+addr)}
}

// cleanEnv is the test's environment without what would make the blocks
// read as they should not: agentd's own variables (a developer's
// AGENTD_TOKEN, say) and the providers' keys and addresses, so that no
// block reaches a real provider with a real key.
func cleanEnv() []string {
	drop := map[string]bool{}
	for _, a := range registry.Declared {
		drop[a.Key], drop[a.KeyFallback], drop[a.BaseURL] = true, true, true
	}
	var out []string
	for _, kv := range os.Environ() {
		name, _, _ := strings.Cut(kv, "=")
		if !drop[name] && (!strings.HasPrefix(name, "AGENTD_") || strings.HasPrefix(name, "AGENTD_TEST_")) {
			out = append(out, kv)
		}
	}
	return out
}

// agentdBinary is the agentd the blocks run: $AGENTD_TEST_BIN (relative to the
// top level), else one built into tmp.
func agentdBinary(t *testing.T, tmp string) string {
	t.Helper()
	if bin := os.Getenv("AGENTD_TEST_BIN"); bin != "" {
		if !filepath.IsAbs(bin) {
			bin = filepath.Join(root, bin) // as make test names it, from the top level
		}
		abs, err := filepath.Abs(bin)
		if err != nil {
			t.Fatal(err)
		}
		return abs
	}
	bin := filepath.Join(tmp, "agentd")
	build := exec.CommandContext(t.Context(), "go", "build", "-o", bin, "./cmd/agentd")
	build.Dir = root
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("building agentd: %v\n%s", err, out)
	}
	return bin
}

// mirror makes dir a copy of the repository's top level in links: the
// entries git tracks, and node_modules and build, which the tree's
// commands use; bin/ holds bin/agentd alone. What a block writes at the
// top level (work/, say) stays out of the repository.
func mirror(t *testing.T, dir, agentd string) string {
	t.Helper()
	abs, err := filepath.Abs(root)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.MkdirAll(filepath.Join(dir, "bin"), 0o755); err != nil {
		t.Fatal(err)
	}
	for _, name := range append(trackedTop(t), "node_modules", "build") {
		if _, err := os.Lstat(filepath.Join(abs, name)); err != nil || name == "bin" {
			continue
		}
		if err := os.Symlink(filepath.Join(abs, name), filepath.Join(dir, name)); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.Symlink(agentd, filepath.Join(dir, "bin", "agentd")); err != nil {
		t.Fatal(err)
	}
	return dir
}

// servingLine is agentd's word that it serves, with the address bound.
var servingLine = regexp.MustCompile(`msg="agentd serving" address=(\S+)`)

// serve starts `bin/agentd serve` in dir with env and returns the address
// it says it bound; its log goes to the test's log. Cleanup stops it.
func serve(t *testing.T, dir string, env []string) string {
	t.Helper()
	cmd := exec.Command(filepath.Join(dir, "bin", "agentd"), "serve")
	cmd.Dir, cmd.Env = dir, env
	stderr, err := cmd.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	addr := make(chan string, 1)
	logged := make(chan struct{})
	go func() {
		defer close(logged)
		sc := bufio.NewScanner(stderr)
		sc.Buffer(make([]byte, 64<<10), 1<<20)
		for sc.Scan() {
			if m := servingLine.FindStringSubmatch(sc.Text()); m != nil {
				select {
				case addr <- m[1]:
				default:
				}
			}
			t.Log("agentd: " + sc.Text())
		}
	}()
	exited := make(chan error, 1)
	go func() { <-logged; exited <- cmd.Wait() }()
	t.Cleanup(func() {
		_ = cmd.Process.Signal(syscall.SIGTERM)
		<-exited
	})
	select {
	case a := <-addr:
		return a
	case err := <-exited:
		exited <- err
		t.Fatalf("agentd exited before it served: %v", err)
	}
	return ""
}

// runBlock runs b in the stack, in a process group of its own: the block
// fails when it exits non-zero, runs past blockTimeout, or leaves a
// process of its group behind (which is then killed).
func runBlock(t *testing.T, s stack, b Block) {
	ctx, cancel := context.WithTimeout(t.Context(), blockTimeout)
	defer cancel()
	cmd := exec.CommandContext(ctx, "bash", "-euo", "pipefail", "-c", b.Text)
	cmd.Dir, cmd.Env = s.dir, s.env
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	cmd.Cancel = func() error { return syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL) }
	// A process the block left behind may hold its output open: Wait
	// gives up on it, and the group's check below names it.
	cmd.WaitDelay = 5 * time.Second
	stdin, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	var out strings.Builder
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go answerYes(stdin)
	err = cmd.Wait()
	if syscall.Kill(-cmd.Process.Pid, 0) == nil {
		_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
		t.Errorf("the block left a process behind")
	}
	switch {
	case ctx.Err() != nil:
		t.Errorf("the block ran past %s:\n%s\n--- its output:\n%s", blockTimeout, b.Text, out.String())
	case err != nil:
		t.Errorf("the block failed (%v):\n%s\n--- its output:\n%s", err, b.Text, out.String())
	case isFake(b) && !strings.Contains(out.String(), "completed"):
		t.Errorf("the block, written for a real provider, did not complete a generation:\n%s\n--- its output:\n%s", b.Text, out.String())
	default:
		t.Logf("output:\n%s", out.String())
	}
}

// answerYes writes "y" lines to w until nobody reads them.
func answerYes(w io.WriteCloser) {
	defer w.Close()
	for {
		if _, err := io.WriteString(w, "y\n"); err != nil {
			return // the block ended, or closed its input
		}
	}
}

// isFake reports whether b was written for a real provider (fake=).
func isFake(b Block) bool {
	name, _ := b.Fake()
	return name != ""
}
