package record

import (
	"testing"
	"time"
)

// X-G4: generations are swept every tenth of the shorter of the
// retention and the pause TTL, between every 10 ms and every 10 minutes.
func TestSweepEvery(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct{ retention, pauseTTL, want time.Duration }{
		{24 * time.Hour, 24 * time.Hour, 10 * time.Minute},
		{time.Hour, 24 * time.Hour, 6 * time.Minute},
		{24 * time.Hour, time.Hour, 6 * time.Minute},
		{300 * time.Millisecond, 24 * time.Hour, 30 * time.Millisecond},
		{24 * time.Hour, 300 * time.Millisecond, 30 * time.Millisecond},
		{time.Nanosecond, time.Hour, 10 * time.Millisecond},
	} {
		if got := sweepEvery(tc.retention, tc.pauseTTL); got != tc.want {
			t.Errorf("sweepEvery(%v, %v) = %v; want %v", tc.retention, tc.pauseTTL, got, tc.want)
		}
	}
}
