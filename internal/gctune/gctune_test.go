package gctune

import (
	"os"
	"runtime"
	"runtime/metrics"
	"testing"
)

const mib = 1 << 20

func TestPercent(t *testing.T) {
	for _, tt := range []struct {
		live, floor uint64
		want        int
	}{
		{0, 64 * mib, 100},         // nothing measured yet
		{4 * mib, 64 * mib, 1500},  // 4 MiB × 16 = 64 MiB
		{8 * mib, 64 * mib, 700},   // 8 MiB × 8
		{20 * mib, 64 * mib, 220},  // 20 MiB × 3.2
		{32 * mib, 64 * mib, 100},  // half the floor: Go's default
		{100 * mib, 64 * mib, 100}, // above the floor
		{1, 1 << 62, 1 << 20},      // bounded
	} {
		if got := Percent(tt.live, tt.floor); got != tt.want {
			t.Errorf("Percent(%d, %d) = %d; want %d", tt.live, tt.floor, got, tt.want)
		}
	}
}

// gogc is the GOGC in force.
func gogc() int {
	s := []metrics.Sample{{Name: "/gc/gogc:percent"}}
	metrics.Read(s)
	return int(s[0].Value.Uint64())
}

// A Tuner raises GOGC after collections while the live heap is far below
// the floor, keeps tuning collection after collection, and restores Go's
// default on Stop; with GOGC set in the environment it does nothing.
func TestTuner(t *testing.T) {
	t.Setenv("GOGC", "") // restored after the test
	if gogc() != DefaultPercent {
		t.Skipf("GOGC is %d here; the test needs Go's default", gogc())
	}
	if Start(1<<30) != nil {
		t.Fatal("Start with GOGC set in the environment: want nil")
	}
	if Start(0) != nil {
		t.Fatal("Start with no floor: want nil")
	}

	if err := os.Unsetenv("GOGC"); err != nil {
		t.Fatal(err)
	}
	tuner := Start(1 << 30) // far above this test's live heap
	defer tuner.Stop()
	// Each collection runs the cleanup that tunes and arms the next: the
	// floor is taken after a collection, then a lower one after another,
	// and another.
	for _, floor := range []uint64{1 << 30, 512 * mib, 256 * mib} {
		tuner.mu.Lock()
		tuner.floor = floor
		tuner.mu.Unlock()
		for {
			runtime.GC()
			tuner.mu.Lock()
			p, live := tuner.percent, tuner.live
			tuner.mu.Unlock()
			if live > 0 && p == Percent(live, floor) && p == gogc() { // tuned after a collection
				break
			}
			runtime.Gosched()
		}
		if p := gogc(); p <= DefaultPercent {
			t.Fatalf("GOGC with a floor of %d MiB: %d; want more than %d", floor/mib, p, DefaultPercent)
		}
	}
	tuner.Stop()
	if p := gogc(); p != DefaultPercent {
		t.Errorf("GOGC after Stop: %d; want %d", p, DefaultPercent)
	}
	runtime.GC()
	runtime.GC()
	if p := gogc(); p != DefaultPercent {
		t.Errorf("GOGC after Stop and collections: %d; want %d", p, DefaultPercent)
	}
}
