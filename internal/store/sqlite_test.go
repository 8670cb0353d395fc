package store

import (
	"os"
	"path/filepath"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"go.uber.org/goleak"

	"github.com/agentd/agentd/internal/fault"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

func open(t *testing.T, path string) *SQLite {
	t.Helper()
	s, err := OpenSQLite(path, 10*time.Millisecond)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = s.Close() })
	return s
}

// TestFencedWrites: a resume's writes (Renew, Save and Delete with its
// claim's version) work while it holds its claim, and fail or do nothing
// once another resume has taken the generation over.
func TestFencedWrites(t *testing.T) {
	t.Parallel()
	s := open(t, filepath.Join(t.TempDir(), "agentd.db"))
	ctx := t.Context()
	later := time.Now().Add(time.Hour)
	if err := s.Save(ctx, "", "g", []byte("paused"), later, 0); err != nil {
		t.Fatal(err)
	}
	r, _ := s.Get(ctx, "", "g")
	now := time.Now()
	if err := s.Claim(ctx, "", "g", r.Version, []byte("claim A"), now, now.Add(-time.Minute)); err != nil {
		t.Fatal(err)
	}
	a := r.Version + 1
	if err := s.Renew(ctx, "", "g", a, nil, now.Add(time.Second)); err != nil {
		t.Fatalf("Renew by the holder: %v", err)
	}
	if err := s.Renew(ctx, "", "g", a, []byte("claim A, progressed"), now.Add(2*time.Second)); err != nil {
		t.Fatalf("Renew with data: %v", err)
	}
	got, _ := s.Get(ctx, "", "g")
	if string(got.Data) != "claim A, progressed" || got.Version != a || !got.Claimed || !got.ClaimedAt.Equal(time.UnixMilli(now.Add(2*time.Second).UnixMilli())) {
		t.Fatalf("after Renew: %+v", got)
	}
	// B takes the claim over (A looked stale).
	if err := s.Claim(ctx, "", "g", a, []byte("claim B"), now, now.Add(time.Hour)); err != nil {
		t.Fatal(err)
	}
	if err := s.Renew(ctx, "", "g", a, nil, now); fault.KindOf(err) != fault.Conflict {
		t.Errorf("Renew by the old holder: %v; want Conflict", err)
	}
	if err := s.Save(ctx, "", "g", []byte("A pauses"), later, a); fault.KindOf(err) != fault.Conflict {
		t.Errorf("Save by the old holder: %v; want Conflict", err)
	}
	if err := s.Delete(ctx, "", "g", a); err != nil {
		t.Errorf("Delete by the old holder: %v", err)
	}
	if got, _ := s.Get(ctx, "", "g"); string(got.Data) != "claim B" {
		t.Errorf("the old holder's writes changed the record: %+v", got)
	}
	// B's own writes work; its Save unclaims.
	if err := s.Save(ctx, "", "g", []byte("B pauses"), later, a+1); err != nil {
		t.Fatalf("Save by the holder: %v", err)
	}
	if got, _ := s.Get(ctx, "", "g"); got.Claimed || string(got.Data) != "B pauses" {
		t.Errorf("after the holder's Save: %+v", got)
	}
	if err := s.Renew(ctx, "", "g", a+2, nil, now); fault.KindOf(err) != fault.Conflict {
		t.Errorf("Renew of an unclaimed record: %v; want Conflict", err)
	}
}

func TestSaveGetClaimDelete(t *testing.T) {
	t.Parallel()
	s := open(t, filepath.Join(t.TempDir(), "state", "agentd.db"))
	ctx := t.Context()
	later := time.Now().Add(time.Hour)
	if _, err := s.Get(ctx, "acme", "g1"); fault.KindOf(err) != fault.NotFound {
		t.Fatalf("Get of nothing: %v", err)
	}
	if err := s.Save(ctx, "acme", "g1", []byte("v1"), later, 0); err != nil {
		t.Fatal(err)
	}
	r, err := s.Get(ctx, "acme", "g1")
	if err != nil || string(r.Data) != "v1" || r.Claimed {
		t.Fatalf("Get = %+v, %v", r, err)
	}
	// Tenants are isolated.
	if _, err := s.Get(ctx, "globex", "g1"); fault.KindOf(err) != fault.NotFound {
		t.Errorf("another tenant read the record: %v", err)
	}
	now := time.Now()
	if err := s.Claim(ctx, "acme", "g1", r.Version, []byte("claimed"), now, now.Add(-time.Minute)); err != nil {
		t.Fatalf("Claim: %v", err)
	}
	// The same version cannot be claimed twice, and a fresh claim is not stale.
	if err := s.Claim(ctx, "acme", "g1", r.Version, []byte("again"), now, now.Add(-time.Minute)); fault.KindOf(err) != fault.Conflict {
		t.Errorf("second claim: %v, want Conflict", err)
	}
	r2, _ := s.Get(ctx, "acme", "g1")
	if err := s.Claim(ctx, "acme", "g1", r2.Version, []byte("again"), now, now.Add(-time.Minute)); fault.KindOf(err) != fault.Conflict {
		t.Errorf("claim of a fresh claim: %v, want Conflict", err)
	}
	// A claim older than staleBefore can be taken over.
	if err := s.Claim(ctx, "acme", "g1", r2.Version, []byte("takeover"), now, now.Add(time.Minute)); err != nil {
		t.Errorf("takeover of a stale claim: %v", err)
	}
	// Saving again (the generation paused again) unclaims it.
	if err := s.Save(ctx, "acme", "g1", []byte("v2"), later, 0); err != nil {
		t.Fatal(err)
	}
	if r, _ := s.Get(ctx, "acme", "g1"); r.Claimed || string(r.Data) != "v2" {
		t.Errorf("after Save: %+v", r)
	}
	if err := s.Delete(ctx, "acme", "g1", 0); err != nil {
		t.Fatal(err)
	}
	if err := s.Delete(ctx, "acme", "g1", 0); err != nil {
		t.Errorf("second Delete: %v", err)
	}
	if _, err := s.Get(ctx, "acme", "g1"); fault.KindOf(err) != fault.NotFound {
		t.Errorf("after Delete: %v", err)
	}
}

// Of concurrent claims on one version exactly one wins: a resume sent
// twice runs once.
func TestConcurrentClaims(t *testing.T) {
	t.Parallel()
	path := filepath.Join(t.TempDir(), "agentd.db")
	a, b := open(t, path), open(t, path) // two replicas sharing the file
	ctx := t.Context()
	if err := a.Save(ctx, "", "g", []byte("x"), time.Now().Add(time.Hour), 0); err != nil {
		t.Fatal(err)
	}
	r, _ := a.Get(ctx, "", "g")
	var won atomic.Int32
	var wg sync.WaitGroup
	for i := range 8 {
		s := a
		if i%2 == 1 {
			s = b
		}
		wg.Go(func() {
			now := time.Now()
			if err := s.Claim(ctx, "", "g", r.Version, []byte("c"), now, now.Add(-time.Hour)); err == nil {
				won.Add(1)
			} else if fault.KindOf(err) != fault.Conflict {
				t.Errorf("claim: %v", err)
			}
		})
	}
	wg.Wait()
	if won.Load() != 1 {
		t.Errorf("%d claims won, want 1", won.Load())
	}
}

// Get ignores an expired record at once; the sweeper removes it on its
// next tick, but keeps a claimed record a day past its last claim or
// renewal, whatever its expiry (its resume may still run); a record
// survives a reopen. X-H6: the store reads synctest's clock, so every time
// here is exact, not a guess at how long a loaded machine takes.
func TestExpiryAndDurability(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		const sweepEvery = time.Hour
		path := filepath.Join(t.TempDir(), "agentd.db")
		s, err := OpenSQLite(path, sweepEvery)
		if err != nil {
			t.Fatal(err)
		}
		defer s.Close()
		ctx := t.Context()
		t0 := time.Now()
		stored := func(id string) bool {
			t.Helper()
			var n int
			if err := s.db.QueryRow(`SELECT count(*) FROM paused_generations WHERE id = ?`, id).Scan(&n); err != nil {
				t.Fatal(err)
			}
			return n == 1
		}
		// sleep lets the clock run d, and the sweeper finish any tick due.
		sleep := func(d time.Duration) {
			time.Sleep(d)
			synctest.Wait()
		}

		if err := s.Save(ctx, "", "short", []byte("x"), t0, 0); err != nil {
			t.Fatal(err)
		}
		if _, err := s.Get(ctx, "", "short"); fault.KindOf(err) != fault.NotFound {
			t.Errorf("a record was returned at its expiry: %v", err)
		}
		if err := s.Save(ctx, "", "long", []byte("kept"), t0.Add(48*time.Hour), 0); err != nil {
			t.Fatal(err)
		}
		// A record claimed before it expires: its resume still runs.
		if err := s.Save(ctx, "", "resuming", []byte("x"), t0.Add(time.Minute), 0); err != nil {
			t.Fatal(err)
		}
		r, err := s.Get(ctx, "", "resuming")
		if err != nil {
			t.Fatal(err)
		}
		if err := s.Claim(ctx, "", "resuming", r.Version, []byte("claimed"), t0, t0); err != nil {
			t.Fatal(err)
		}

		sleep(sweepEvery - time.Millisecond)
		if !stored("short") {
			t.Fatal("the expired record was swept before the sweeper's first tick")
		}
		sleep(time.Millisecond)
		if stored("short") {
			t.Fatal("the sweeper's tick at 1h left the record that expired at 0h")
		}
		if !stored("resuming") {
			t.Fatal("the sweeper removed a record claimed an hour ago")
		}
		renewed := time.Now() // t0+1h, past the record's expiry at t0+1m
		if err := s.Renew(ctx, "", "resuming", r.Version+1, nil, renewed); err != nil {
			t.Fatalf("the resume of a claimed record past its expiry lost it: %v", err)
		}
		sleep(24 * time.Hour) // the tick at exactly a day after the renewal
		if !stored("resuming") {
			t.Fatal("the sweeper removed a claimed record a day after its renewal; it keeps it that long")
		}
		sleep(sweepEvery)
		if stored("resuming") {
			t.Fatalf("the claimed record outlived the tick after %v (a day past its renewal at %v)", time.Since(t0), renewed.Sub(t0))
		}

		if err := s.Close(); err != nil {
			t.Fatal(err)
		}
		reopened, err := OpenSQLite(path, 0)
		if err != nil {
			t.Fatal(err)
		}
		defer reopened.Close()
		r, err = reopened.Get(ctx, "", "long")
		if err != nil || string(r.Data) != "kept" {
			t.Errorf("after reopening: %+v, %v", r, err)
		}
	})
}

// A state directory may hold the characters that SQLite URIs give a
// meaning ("?", "#", "%"): the database is still the file at that path.
func TestPathWithURICharacters(t *testing.T) {
	t.Parallel()
	path := filepath.Join(t.TempDir(), "a#b?c%20d", "agentd.db")
	s := open(t, path)
	if err := s.Save(t.Context(), "", "g", []byte("x"), time.Now().Add(time.Hour), 0); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(path); err != nil {
		t.Errorf("the database is not at its path: %v", err)
	}
}

// X-I7: Count is a tenant's paused generations that have not expired,
// claimed ones included, and the earliest expiry among them: what
// limits.max_paused_generations is held to, and when a place frees.
func TestCount(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		s, err := OpenSQLite(filepath.Join(t.TempDir(), "agentd.db"), 0)
		if err != nil {
			t.Fatal(err)
		}
		defer s.Close()
		ctx := t.Context()
		t0 := time.Now()
		count := func(tenant string) (int, time.Duration) {
			t.Helper()
			n, next, err := s.Count(ctx, tenant)
			if err != nil {
				t.Fatal(err)
			}
			if n == 0 {
				if !next.IsZero() {
					t.Errorf("Count(%q) = 0 with an expiry %v", tenant, next)
				}
				return 0, 0
			}
			return n, next.Sub(t0)
		}
		if n, _ := count("acme"); n != 0 {
			t.Fatalf("an empty store counts %d", n)
		}
		for id, expires := range map[string]time.Duration{"a": time.Hour, "b": 2 * time.Hour, "gone": 0} {
			if err := s.Save(ctx, "acme", id, []byte("x"), t0.Add(expires), 0); err != nil {
				t.Fatal(err)
			}
		}
		if err := s.Save(ctx, "globex", "c", []byte("x"), t0.Add(time.Minute), 0); err != nil {
			t.Fatal(err)
		}
		if n, next := count("acme"); n != 2 || next != time.Hour {
			t.Errorf("acme: %d, next expiry in %s; want 2 (the expired one not counted), in 1h", n, next)
		}
		r, _ := s.Get(ctx, "acme", "a")
		if err := s.Claim(ctx, "acme", "a", r.Version, []byte("claimed"), t0, t0); err != nil {
			t.Fatal(err)
		}
		if n, _ := count("acme"); n != 2 {
			t.Errorf("acme with one claimed: %d; want 2", n)
		}
		if n, next := count("globex"); n != 1 || next != time.Minute {
			t.Errorf("globex: %d, in %s; want 1, in 1m", n, next)
		}
		if err := s.Delete(ctx, "acme", "b", 0); err != nil {
			t.Fatal(err)
		}
		time.Sleep(time.Hour)
		if n, _ := count("acme"); n != 0 {
			t.Errorf("acme after its records expired or went: %d", n)
		}
	})
}
