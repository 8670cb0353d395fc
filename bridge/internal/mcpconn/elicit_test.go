package mcpconn

import (
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"
)

// TestReadTimersHold: X-M4. A held read timer does not fire, however long
// the hold; released, it waits its whole duration again, and a timer
// started during a hold is held too.
func TestReadTimersHold(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var rs readTimers
		var fired atomic.Int32
		rt := rs.start(time.Second, func() { fired.Add(1) })
		time.Sleep(900 * time.Millisecond)
		release := rs.hold()
		later := rs.start(time.Second, func() { fired.Add(10) })
		time.Sleep(time.Hour)
		synctest.Wait()
		if n := fired.Load(); n != 0 {
			t.Fatalf("fired = %d during the hold", n)
		}
		release()
		release() // once
		time.Sleep(999 * time.Millisecond)
		synctest.Wait()
		if n := fired.Load(); n != 0 {
			t.Fatalf("fired = %d before a whole read timeout after the release", n)
		}
		time.Sleep(2 * time.Millisecond)
		synctest.Wait()
		if n := fired.Load(); n != 11 {
			t.Fatalf("fired = %d a read timeout after the release, want both timers", n)
		}
		if !rt.stop() || !later.stop() {
			t.Error("stop after firing reports no fire")
		}

		stopped := rs.start(time.Second, func() { fired.Add(100) })
		if stopped.stop() {
			t.Error("stop before firing reports a fire")
		}
		release = rs.hold()
		release()
		time.Sleep(time.Hour)
		synctest.Wait()
		if n := fired.Load(); n != 11 {
			t.Errorf("fired = %d: a stopped timer fired after a release", n)
		}
	})
}
