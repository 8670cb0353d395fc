package quota

import (
	"fmt"
	"maps"
	"slices"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
	"google.golang.org/genproto/googleapis/rpc/errdetails"
	"google.golang.org/grpc/codes"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/testing/protocmp"
	"google.golang.org/protobuf/types/known/durationpb"

	"github.com/agentd/agentd/internal/config"
	"github.com/agentd/agentd/internal/fault"
)

func perMinute(n int) Limits {
	return Limits{PerMinute: Limit{N: n, Setting: "tenants.acme.limits.generations_per_minute"}}
}

// retryOf is the retry delay of an error over a limit, or fails.
func retryOf(t *testing.T, err error) time.Duration {
	t.Helper()
	for _, d := range fault.Status(err).Details() {
		if ri, ok := d.(*errdetails.RetryInfo); ok {
			return ri.GetRetryDelay().AsDuration()
		}
	}
	t.Fatalf("%v: no RetryInfo", err)
	return 0
}

// X-I7: generations_per_minute is a token bucket holding a minute's
// worth: that many start at once, then one more each 60s/N, and a long
// pause refills it only to its size.
func TestRate(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		l := New()
		lim := perMinute(6) // a token every 10s
		start := func() error {
			release, err := l.Start("acme", lim)
			if err == nil {
				release() // the rate holds whether or not they still run
			}
			return err
		}
		for i := range 6 {
			if err := start(); err != nil {
				t.Fatalf("start %d of a full bucket: %v", i+1, err)
			}
		}
		err := start()
		if got := retryOf(t, err); got != 10*time.Second {
			t.Errorf("an empty bucket's retry delay = %s; want 10s, when the next token comes", got)
		}
		time.Sleep(4 * time.Second)
		if got := retryOf(t, start()); got != 6*time.Second {
			t.Errorf("retry delay 4s later = %s; want 6s", got)
		}
		time.Sleep(6 * time.Second)
		if err := start(); err != nil {
			t.Fatalf("start once the retry delay passed: %v", err)
		}
		if err := start(); err == nil {
			t.Fatal("two starts on one token")
		}
		time.Sleep(time.Hour)
		for i := range 6 {
			if err := start(); err != nil {
				t.Fatalf("start %d after an hour: %v", i+1, err)
			}
		}
		if err := start(); err == nil {
			t.Error("an hour filled the bucket beyond its size")
		}
	})
}

// X-I7: max_concurrent_generations counts the generations running; a
// release gives the slot back, once however often it is called, and a
// generation refused for concurrency takes no token of the rate.
func TestConcurrency(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		l := New()
		lim := Limits{Concurrent: Limit{N: 2, Setting: "limits.max_concurrent_generations"}, PerMinute: Limit{N: 3, Setting: "limits.generations_per_minute"}}
		first, err := l.Start("acme", lim)
		if err != nil {
			t.Fatal(err)
		}
		second, err := l.Start("acme", lim)
		if err != nil {
			t.Fatal(err)
		}
		for range 5 {
			err = func() error { _, err := l.Start("acme", lim); return err }()
			if got := retryOf(t, err); got != ConcurrencyRetry {
				t.Fatalf("retry delay at the concurrency limit = %s; want %s", got, ConcurrencyRetry)
			}
		}
		wantFacts(t, err.Error(), `the tenant "acme" runs 2 generations`, "limits.max_concurrent_generations")
		first()
		first()
		third, err := l.Start("acme", lim)
		if err != nil {
			t.Fatalf("start after a release: %v (the refused starts took tokens?)", err)
		}
		if _, err := l.Start("acme", lim); err == nil {
			t.Fatal("a second release of one generation freed a second slot")
		}
		second()
		third()
		if _, err := l.Start("acme", lim); err == nil || !strings.Contains(err.Error(), "limits.generations_per_minute") {
			t.Errorf("the fourth start in a minute of 3: %v; want the rate's error", err)
		}
	})
}

// X-I7: a resume takes a concurrency slot but no token: it continues a
// generation the rate admitted. Tenants are held to their own limits.
func TestResumeAndTenants(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		l := New()
		lim := Limits{Concurrent: Limit{N: 1, Setting: "limits.max_concurrent_generations"}, PerMinute: Limit{N: 1, Setting: "limits.generations_per_minute"}}
		release, err := l.Start("acme", lim)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := l.Resume("acme", lim); err == nil {
			t.Fatal("a resume beyond the concurrency limit")
		}
		other, err := l.Start("globex", lim)
		if err != nil {
			t.Fatalf("another tenant's start: %v; one tenant's limit held it", err)
		}
		other()
		release()
		for range 3 {
			resumed, err := l.Resume("acme", lim)
			if err != nil {
				t.Fatalf("a resume with no token left: %v", err)
			}
			resumed()
		}
		if _, err := l.Start("acme", lim); err == nil {
			t.Error("a start with no token left")
		}
	})
}

// Without limits nothing is counted or kept.
func TestNoLimits(t *testing.T) {
	t.Parallel()
	l := New()
	for i := range 1000 {
		release, err := l.Start(fmt.Sprint("t", i), Limits{})
		if err != nil {
			t.Fatal(err)
		}
		release()
	}
	if n := len(l.tenants); n != 0 {
		t.Errorf("%d tenants kept without limits", n)
	}
}

// Idle tenants with full buckets are forgotten, so the tenants kept do not
// grow with every tenant ever seen; a tenant that runs or whose bucket is
// not full is kept.
func TestSweep(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		l := New()
		lim := perMinute(2)
		busy, err := l.Start("busy", Limits{Concurrent: Limit{N: 5}})
		if err != nil {
			t.Fatal(err)
		}
		defer busy()
		for i := range 10 * minSweep {
			release, err := l.Start(fmt.Sprint("t", i), lim)
			if err != nil {
				t.Fatal(err)
			}
			release()
			time.Sleep(time.Second)
		}
		if n := len(l.tenants); n > 2*minSweep {
			t.Errorf("%d tenants kept; want at most %d", n, 2*minSweep)
		}
		l.mu.Lock()
		l.sweepAt = 0
		l.sweep(time.Now())
		l.mu.Unlock()
		// Tenant i took one token of two at second i; it is full again
		// 30s later. Now is second 10*minSweep.
		want := []string{"busy"}
		for i := 10*minSweep - 29; i < 10*minSweep; i++ {
			want = append(want, fmt.Sprint("t", i))
		}
		if diff := cmp.Diff(want, slices.Sorted(maps.Keys(l.tenants)), cmpopts.SortSlices(func(a, b string) bool { return a < b })); diff != "" {
			t.Errorf("tenants kept (-want +got):\n%s", diff)
		}
	})
}

// X-I7: over a limit, a caller gets RESOURCE_EXHAUSTED with RetryInfo and
// a QuotaFailure naming the tenant and the limit's setting.
func TestExceededStatus(t *testing.T) {
	t.Parallel()
	err := Exceeded("acme", Limit{N: 3, Setting: "tenants.acme.limits.max_paused_generations"}, 2*time.Second, "over")
	st := fault.Status(err)
	if st.Code() != codes.ResourceExhausted || st.Message() != "over" {
		t.Errorf("status %v %q", st.Code(), st.Message())
	}
	var got []proto.Message
	for _, d := range st.Details() {
		got = append(got, d.(proto.Message))
	}
	want := []proto.Message{
		&errdetails.RetryInfo{RetryDelay: durationpb.New(2 * time.Second)},
		&errdetails.QuotaFailure{Violations: []*errdetails.QuotaFailure_Violation{{Subject: "tenant:acme", Description: "tenants.acme.limits.max_paused_generations"}}},
	}
	if diff := cmp.Diff(want, got, protocmp.Transform()); diff != "" {
		t.Errorf("details (-want +got):\n%s", diff)
	}
}

// X-I7: a tenant's limit is its own where tenants.<name>.limits sets it,
// else the global one, each named by the setting that sets it.
func TestConfigured(t *testing.T) {
	t.Parallel()
	global := config.Limits{MaxConcurrentGenerations: 4, GenerationsPerMinute: 60}
	for _, tc := range []struct {
		name   string
		tenant string
		own    *config.Limits
		want   Limits
	}{
		{"X-I7 global only", "", nil, Limits{
			Concurrent: Limit{4, "limits.max_concurrent_generations"},
			PerMinute:  Limit{60, "limits.generations_per_minute"},
		}},
		{"X-I7 a tenant without limits of its own", "acme", nil, Limits{
			Concurrent: Limit{4, "limits.max_concurrent_generations"},
			PerMinute:  Limit{60, "limits.generations_per_minute"},
		}},
		{"X-I7 a tenant's own limits, field by field", "acme", &config.Limits{GenerationsPerMinute: 10, MaxPausedGenerations: 2}, Limits{
			Concurrent: Limit{4, "limits.max_concurrent_generations"},
			PerMinute:  Limit{10, "tenants.acme.limits.generations_per_minute"},
			Paused:     Limit{2, "tenants.acme.limits.max_paused_generations"},
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			if diff := cmp.Diff(tc.want, Configured(global, tc.tenant, tc.own)); diff != "" {
				t.Errorf("limits (-want +got):\n%s", diff)
			}
		})
	}
}

func wantFacts(t *testing.T, text string, facts ...string) {
	t.Helper()
	for _, f := range facts {
		if !strings.Contains(text, f) {
			t.Errorf("%q does not mention %q", text, f)
		}
	}
}
