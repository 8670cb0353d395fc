// Package proctest checks, for tests, that a test binary leaves no child
// process behind: VerifyTestMain runs a package's tests, then fails the
// run if a goroutine leaked (goleak) or a child process still runs.
package proctest

import (
	"fmt"
	"os"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/agentd/agentd/internal/proctable"
)

// Children lists the live (not zombie) child processes of this process.
func Children() []int { return proctable.Children() }

// VerifyTestMain runs m and exits: with m's failure, or with a failure if
// goroutines leaked or child processes are still running (after a few
// seconds' grace for processes being stopped).
func VerifyTestMain(m *testing.M, opts ...goleak.Option) {
	code := m.Run()
	if code == 0 {
		if err := goleak.Find(opts...); err != nil {
			fmt.Fprintf(os.Stderr, "goleak: errors on successful test run: %v\n", err)
			code = 1
		}
		deadline := time.Now().Add(5 * time.Second)
		for len(Children()) > 0 && time.Now().Before(deadline) {
			time.Sleep(20 * time.Millisecond)
		}
		if kids := Children(); len(kids) > 0 {
			fmt.Fprintf(os.Stderr, "proctest: child processes left after the tests: %v\n", kids)
			code = 1
		}
	}
	os.Exit(code)
}
