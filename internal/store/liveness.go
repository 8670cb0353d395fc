package store

import (
	"sync"
	"sync/atomic"

	"github.com/agentd/agentd/internal/fault"
)

// A replica's liveness is a lock that its process holds for as long as it
// lives and that ends with it, whatever kills it: on PostgreSQL a
// session-level advisory lock in a connection of its own (the server
// releases it when the session ends: the process died, and the kernel
// closed its socket), on SQLite a file lock beside the database (the
// kernel releases it when the process ends). The replicas table lists
// the replicas that hold one, so that a replica of an older agentd, which
// holds none, is never taken for dead. A stopped process (SIGSTOP) keeps
// its locks: it is alive, and its generations wait for their leases.
//
// Asking is racy unless the asker holds what it asked: an adopter holds
// the dead replica's lock, shared, while it takes its generations, and a
// replica attending under the same id again takes it exclusively before
// it writes anything, so that it never loses a generation it created to
// an adopter that found its predecessor dead.

// attendances are the replicas attending through one store (Attend), by
// id: Adopt asks whether its adopter is one of them.
type attendances struct {
	mu sync.Mutex
	m  map[string]*attendance
}

// attendance is one replica's liveness, as its own Adopt sees it.
type attendance struct {
	// session counts the times the liveness was taken (1 at Attend, one
	// more at each reconnection); 0 while it is lost.
	session atomic.Uint64
	// adopted is session as the previous Adopt saw it.
	adopted atomic.Uint64
}

func newAttendances() *attendances { return &attendances{m: make(map[string]*attendance)} }

// add registers owner's attendance, refusing a second.
func (a *attendances) add(owner string) (*attendance, error) {
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.m[owner] != nil {
		return nil, attendsAlready(owner)
	}
	at := &attendance{}
	a.m[owner] = at
	return at, nil
}

func (a *attendances) remove(owner string) {
	a.mu.Lock()
	defer a.mu.Unlock()
	delete(a.m, owner)
}

// trusts reports whether owner's Adopt may take the generations of
// replicas whose liveness is gone: owner attends, and its own liveness
// has held since its previous Adopt. An outage of the store ends every
// replica's liveness at once (PostgreSQL's sessions); the adopter's own,
// taken up again, makes it wait one Adopt more, which gives the others
// the time between two Adopts to take theirs up again before they count
// as dead.
func (a *attendances) trusts(owner string) bool {
	a.mu.Lock()
	at := a.m[owner]
	a.mu.Unlock()
	if at == nil {
		return false
	}
	s := at.session.Load()
	return at.adopted.Swap(s) == s && s != 0
}

func attendsAlready(owner string) error {
	return fault.New(fault.Conflict, "the replica %q attends already: its liveness is held by another attendance, in this process or another", owner).
		WithInfo("REPLICA_ATTENDS", map[string]string{"replica": owner})
}
