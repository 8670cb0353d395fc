package store_test

import (
	"bufio"
	"io"
	"os"
	"os/exec"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/agentd/agentd/internal/store"
	"github.com/agentd/agentd/internal/store/storetest"
)

// attendElsewhere is the conformance suite's DB.AttendElsewhere on the
// database that options open: this test binary started again as a
// replica (storetest.Main, from TestMain), attending until it is killed
// or its stdin closes.
func attendElsewhere(options store.Options) func(t *testing.T, owner string) *os.Process {
	return func(t *testing.T, owner string) *os.Process {
		t.Helper()
		exe, err := os.Executable()
		if err != nil {
			t.Fatal(err)
		}
		cmd := exec.Command(exe)
		cmd.Env = append(os.Environ(), storetest.ReplicaEnv(options, owner))
		cmd.Stderr = os.Stderr
		stdin, err := cmd.StdinPipe()
		if err != nil {
			t.Fatal(err)
		}
		stdout, err := cmd.StdoutPipe()
		if err != nil {
			t.Fatal(err)
		}
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		said, exited := make(chan string, 1), make(chan struct{})
		go func() {
			line, _ := bufio.NewReader(stdout).ReadString('\n')
			said <- line
			_, _ = io.Copy(io.Discard, stdout)
			_ = cmd.Wait()
			close(exited)
		}()
		t.Cleanup(func() {
			_ = stdin.Close()
			_ = cmd.Process.Kill() // stopped or not
			<-exited
		})
		select {
		case line := <-said:
			if strings.TrimSpace(line) != "attending" {
				t.Fatalf("the replica %s did not attend: it said %q", owner, line)
			}
		case <-time.After(time.Minute):
			_ = cmd.Process.Signal(syscall.SIGKILL)
			t.Fatalf("the replica %s did not attend within a minute", owner)
		}
		return cmd.Process
	}
}
