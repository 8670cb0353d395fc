package oauthclient

import (
	"context"
	"sync"

	"github.com/agentd/agentd/internal/oauthtokens"
)

// keyLocks serialize the resolutions of one key in this process:
// concurrent refusals (parallel calls, or generations of one end user)
// ask the user, or refresh, once.
type keyLocks struct {
	mu    sync.Mutex
	locks map[oauthtokens.Key]*keyLock
}

type keyLock struct {
	turn  chan struct{} // held by the resolution under way
	users int           // holders and waiters: the lock is dropped with the last
}

// tryLock takes k's lock if it is free.
func (ls *keyLocks) tryLock(k oauthtokens.Key) (func(), bool) {
	ctx, cancel := context.WithCancel(context.Background())
	cancel() // lock then takes a free lock only
	unlock, err := ls.lock(ctx, k)
	return unlock, err == nil
}

// lock takes k's lock, waiting at most as long as ctx lasts (a person
// may be answering under it), and returns its release.
func (ls *keyLocks) lock(ctx context.Context, k oauthtokens.Key) (func(), error) {
	l := ls.enter(k)
	release := func() { <-l.turn; ls.leave(k, l) }
	select {
	case l.turn <- struct{}{}: // a free lock is taken even when ctx has ended
		return release, nil
	default:
	}
	select {
	case l.turn <- struct{}{}:
		return release, nil
	case <-ctx.Done():
		ls.leave(k, l)
		return nil, context.Cause(ctx)
	}
}

// enter counts one more user of k's lock, made if there is none.
func (ls *keyLocks) enter(k oauthtokens.Key) *keyLock {
	ls.mu.Lock()
	defer ls.mu.Unlock()
	l := ls.locks[k]
	if l == nil {
		if ls.locks == nil {
			ls.locks = make(map[oauthtokens.Key]*keyLock)
		}
		l = &keyLock{turn: make(chan struct{}, 1)}
		ls.locks[k] = l
	}
	l.users++
	return l
}

// leave counts one user of k's lock fewer, and drops it with the last.
func (ls *keyLocks) leave(k oauthtokens.Key, l *keyLock) {
	ls.mu.Lock()
	defer ls.mu.Unlock()
	if l.users--; l.users == 0 {
		delete(ls.locks, k)
	}
}
