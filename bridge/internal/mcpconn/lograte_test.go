package mcpconn

import (
	"testing"
	"time"
)

func TestLineLimiter(t *testing.T) {
	t.Parallel()
	clock := time.Unix(0, 0)
	l := newLineLimiter()
	l.now = func() time.Time { return clock }
	logged := 0
	for range 1000 {
		ok, _, first := l.allow()
		if ok {
			logged++
		}
		if first != (logged == logBurst && !ok && l.left() == 1) {
			t.Fatalf("first = %v at line %d", first, logged)
		}
	}
	if logged != logBurst {
		t.Fatalf("a burst of 1000 lines logged %d; want the burst of %d", logged, logBurst)
	}
	clock = clock.Add(time.Second)
	ok, suppressed, _ := l.allow()
	if !ok || suppressed != 1000-logBurst {
		t.Fatalf("a second later: allow = %v with %d suppressed; want true with %d", ok, suppressed, 1000-logBurst)
	}
	for range logRate - 1 {
		if ok, _, _ := l.allow(); !ok {
			t.Fatal("the refilled tokens ran out early")
		}
	}
	if ok, _, _ := l.allow(); ok {
		t.Error("more lines than the rate refilled were allowed")
	}
}
