package app

import (
	"testing"
	"time"
)

// X-G4: finished generations are swept every tenth of the retention,
// between every 10 ms and every 10 minutes.
func TestSweepEvery(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct{ retention, want time.Duration }{
		{24 * time.Hour, 10 * time.Minute},
		{time.Hour, 6 * time.Minute},
		{300 * time.Millisecond, 30 * time.Millisecond},
		{time.Nanosecond, 10 * time.Millisecond},
	} {
		if got := sweepEvery(tc.retention); got != tc.want {
			t.Errorf("sweepEvery(%v) = %v; want %v", tc.retention, got, tc.want)
		}
	}
}
