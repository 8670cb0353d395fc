package oauthclient

import (
	"context"
	"errors"
	"runtime"
	"testing"

	"github.com/agentd/agentd/internal/oauthtokens"
)

var (
	keyA = oauthtokens.Key{Tenant: "t", EndUser: "alice", Server: "s"}
	keyB = oauthtokens.Key{Tenant: "t", EndUser: "bob", Server: "s"}
)

// users is how many hold or wait for k's lock.
func (ls *keyLocks) users(k oauthtokens.Key) int {
	ls.mu.Lock()
	defer ls.mu.Unlock()
	if l := ls.locks[k]; l != nil {
		return l.users
	}
	return 0
}

// waitUsers waits until n hold or wait for k's lock.
func waitUsers(t *testing.T, ls *keyLocks, k oauthtokens.Key, n int) {
	t.Helper()
	for ls.users(k) != n {
		if t.Context().Err() != nil {
			t.Fatalf("%d users of the lock, want %d", ls.users(k), n)
		}
		runtime.Gosched()
	}
}

// checkNoLocks checks that every lock went with its last user.
func checkNoLocks(t *testing.T, ls *keyLocks) {
	t.Helper()
	ls.mu.Lock()
	defer ls.mu.Unlock()
	if len(ls.locks) != 0 {
		t.Errorf("%d locks left after every release, want none", len(ls.locks))
	}
}

// One resolution at a time runs per key: a second waits for the first's
// release, while another key's is not held up.
func TestLockOnePerKey(t *testing.T) {
	t.Parallel()
	var ls keyLocks
	unlock, err := ls.lock(t.Context(), keyA)
	if err != nil {
		t.Fatal(err)
	}
	if other, err := ls.lock(t.Context(), keyB); err != nil {
		t.Fatalf("another key's lock: %v", err)
	} else {
		other()
	}
	got := make(chan func())
	go func() {
		second, err := ls.lock(context.Background(), keyA)
		if err != nil {
			t.Error(err)
		}
		got <- second
	}()
	waitUsers(t, &ls, keyA, 2)
	select {
	case <-got:
		t.Fatal("a second resolution took the key's lock while the first held it")
	default:
	}
	unlock()
	second := <-got
	if _, ok := ls.tryLock(keyA); ok {
		t.Fatal("tryLock took the lock the second resolution holds")
	}
	second()
	checkNoLocks(t, &ls)
}

// A free lock is taken even with a context that has ended; a held one is
// waited for only as long as the context lasts.
func TestLockContext(t *testing.T) {
	t.Parallel()
	var ls keyLocks
	ended, cancel := context.WithCancel(t.Context())
	cancel()
	unlock, err := ls.lock(ended, keyA)
	if err != nil {
		t.Fatalf("a free lock with an ended context: %v", err)
	}
	if _, err := ls.lock(ended, keyA); !errors.Is(err, context.Canceled) {
		t.Fatalf("a held lock with an ended context: %v, want context.Canceled", err)
	}

	cause := errors.New("the generation ended")
	waiting, stop := context.WithCancelCause(t.Context())
	failed := make(chan error)
	go func() {
		_, err := ls.lock(waiting, keyA)
		failed <- err
	}()
	waitUsers(t, &ls, keyA, 2)
	stop(cause)
	if err := <-failed; err != cause {
		t.Errorf("a wait whose context ended: %v, want its cause", err)
	}
	if n := ls.users(keyA); n != 1 {
		t.Errorf("%d users after the waiter gave up, want the holder only", n)
	}
	unlock()
	checkNoLocks(t, &ls)
}

// tryLock takes a free lock and does not wait for a held one.
func TestTryLock(t *testing.T) {
	t.Parallel()
	var ls keyLocks
	unlock, ok := ls.tryLock(keyA)
	if !ok {
		t.Fatal("tryLock did not take a free lock")
	}
	if _, ok := ls.tryLock(keyA); ok {
		t.Fatal("tryLock took a held lock")
	}
	unlock()
	again, ok := ls.tryLock(keyA)
	if !ok {
		t.Fatal("tryLock did not take the lock once released")
	}
	again()
	checkNoLocks(t, &ls)
}
