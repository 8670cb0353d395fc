// Package testwait holds the waits of agentd's tests for a state to be
// reached: a condition that comes to hold, a value or the close of a
// channel. Each fails its test after Deadline, a bound so generous that a
// wait proves the state is reached, never how fast: tests never depend on
// the machine's speed.
package testwait

import (
	"errors"
	"testing"
	"time"
)

// Deadline bounds every wait: plenty for a loaded machine.
const Deadline = 2 * time.Minute

// pollInterval is how often For and Until look again.
const pollInterval = 10 * time.Millisecond

// For polls cond until it holds, failing the test if it does not within
// Deadline; what names the awaited state in the failure.
func For(t testing.TB, what string, cond func() bool) {
	t.Helper()
	Until(t, func() error {
		if cond() {
			return nil
		}
		return errors.New("timed out waiting for " + what)
	})
}

// Until polls check until it returns nil, failing the test with its last
// error if it does not within Deadline: the error says what was awaited
// and what was found instead.
func Until(t testing.TB, check func() error) {
	t.Helper()
	deadline := time.Now().Add(Deadline)
	for {
		err := check()
		if err == nil {
			return
		}
		if time.Now().After(deadline) {
			t.Fatal(err)
		}
		time.Sleep(pollInterval)
	}
}

// Recv returns the next value of ch (the zero value once ch is closed),
// failing the test if none comes within Deadline; what names the awaited
// event in the failure.
func Recv[T any](t testing.TB, ch <-chan T, what string) (v T) {
	t.Helper()
	timer := time.NewTimer(Deadline)
	defer timer.Stop()
	select {
	case v = <-ch:
	case <-timer.C:
		t.Fatalf("timed out waiting for %s", what)
	}
	return v
}
