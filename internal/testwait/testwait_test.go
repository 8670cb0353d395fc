package testwait_test

import (
	"errors"
	"testing"

	"github.com/agentd/agentd/internal/testwait"
)

// The waits return once their state is reached: a condition that comes to
// hold, a check that comes to pass, a value sent or a channel closed.
func TestWaits(t *testing.T) {
	t.Parallel()
	n := 0
	testwait.For(t, "the third look", func() bool { n++; return n == 3 })
	m := 0
	testwait.Until(t, func() error {
		if m++; m < 2 {
			return errors.New("not yet")
		}
		return nil
	})
	values := make(chan int, 1)
	values <- 7
	if got := testwait.Recv(t, values, "a value"); got != 7 {
		t.Errorf("Recv = %d, want 7", got)
	}
	closed := make(chan struct{})
	close(closed)
	testwait.Recv(t, closed, "the close")
}
