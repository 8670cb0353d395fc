package store

import (
	"context"
	"errors"
	"io"
	"sync"
	"time"

	"github.com/jackc/pgx/v5"
)

// livenessClass is the first key of the advisory locks that hold replicas'
// liveness, the second being hashtext of the replica id: a class of
// agentd's own, in the two-key space, apart from migrations' one-key lock.
// Two ids of one hash share a lock, which only ever makes a dead replica
// look alive while the other lives.
const livenessClass int32 = 0x61676474

// The liveness keeper's pace: how long it waits on its idle connection
// before it pings it (a connection that breaks wakes it at once; one cut
// off silently answers no ping), and how long it waits between attempts
// to take the liveness again once it is lost.
const (
	livenessPing  = 10 * time.Second
	livenessRetry = 100 * time.Millisecond
)

// pgAttendance is a replica's liveness on PostgreSQL: a connection of its
// own, holding the replica's advisory lock, kept by a goroutine that takes
// it again when it breaks.
type pgAttendance struct {
	g     pgGenerations
	owner string
	at    *attendance
	conn  *pgx.Conn // the keeper's while it runs; nil while lost
	// sessions counts the times the liveness was taken (the keeper's).
	sessions uint64
	cancel   context.CancelFunc
	done     chan struct{}
	once     sync.Once
	err      error
}

func (p pgGenerations) Attend(ctx context.Context, owner string) (io.Closer, error) {
	at, err := p.live.add(owner)
	if err != nil {
		return nil, err
	}
	conn, err := p.holdLiveness(ctx, owner)
	if err != nil {
		p.live.remove(owner)
		return nil, err
	}
	at.session.Store(1)
	keep, cancel := context.WithCancel(context.Background())
	a := &pgAttendance{g: p, owner: owner, at: at, conn: conn, sessions: 1, cancel: cancel, done: make(chan struct{})}
	go a.keep(keep)
	return a, nil
}

// holdLiveness connects, takes owner's lock, waiting while an adopter
// holds it (briefly) or until ctx ends while another process does, and
// lists owner among the replicas.
func (p pgGenerations) holdLiveness(ctx context.Context, owner string) (*pgx.Conn, error) {
	conn, err := pgx.ConnectConfig(ctx, p.pool.Config().ConnConfig.Copy())
	if err != nil {
		return nil, classify(err)
	}
	err = p.lockLiveness(ctx, conn, owner)
	if err == nil {
		_, err = conn.Exec(ctx, `INSERT INTO replicas (id) VALUES ($1) ON CONFLICT (id) DO NOTHING`, owner)
		err = classifyNil(err)
	}
	if err != nil {
		_ = conn.Close(context.WithoutCancel(ctx))
		return nil, err
	}
	return conn, nil
}

func (p pgGenerations) lockLiveness(ctx context.Context, conn *pgx.Conn, owner string) error {
	for {
		var held bool
		if err := conn.QueryRow(ctx, `SELECT pg_try_advisory_lock($1, hashtext($2))`, livenessClass, owner).Scan(&held); err != nil {
			if ctx.Err() != nil {
				return attendsAlready(owner)
			}
			return classify(err)
		}
		if held {
			return nil
		}
		select {
		case <-ctx.Done():
			return attendsAlready(owner)
		case <-time.After(livenessRetry):
		}
	}
}

func classifyNil(err error) error {
	if err == nil {
		return nil
	}
	return classify(err)
}

// keep waits on the connection until it breaks, then takes the liveness
// again, until Close.
func (a *pgAttendance) keep(ctx context.Context) {
	defer close(a.done)
	for {
		a.watch(ctx)
		if ctx.Err() != nil {
			return
		}
		a.at.session.Store(0)
		_ = a.conn.Close(ctx)
		a.conn = a.retake(ctx)
		if a.conn == nil {
			return
		}
	}
}

// watch returns when the connection breaks, or ctx ends.
func (a *pgAttendance) watch(ctx context.Context) {
	for {
		wait, cancel := context.WithTimeout(ctx, livenessPing)
		err := a.conn.PgConn().WaitForNotification(wait)
		cancel()
		switch {
		case ctx.Err() != nil:
			return
		case err == nil: // a notification, which nothing sends: wait on
		case wait.Err() != nil:
			ping, cancel := context.WithTimeout(ctx, livenessPing)
			err = a.conn.Ping(ping)
			cancel()
			if err != nil {
				return
			}
		default:
			return
		}
	}
}

// retake connects and takes the liveness again, trying until it does
// (nil once ctx ends). The session count grows, for the adopter's own
// Adopt to wait one more (attendances.trusts).
func (a *pgAttendance) retake(ctx context.Context) *pgx.Conn {
	for {
		hold, cancel := context.WithTimeout(ctx, Timeout)
		conn, err := a.g.holdLiveness(hold, a.owner)
		cancel()
		if err == nil {
			a.sessions++
			a.at.session.Store(a.sessions)
			return conn
		}
		select {
		case <-ctx.Done():
			return nil
		case <-time.After(livenessRetry):
		}
	}
}

// Close stops the keeper, takes owner off the replicas and ends its
// liveness, in that order: no adopter finds it listed without its lock.
func (a *pgAttendance) Close() error {
	a.once.Do(func() {
		a.cancel()
		<-a.done
		ctx, cancel := context.WithTimeout(context.Background(), Timeout)
		defer cancel()
		_, err := a.g.pool.Exec(ctx, `DELETE FROM replicas WHERE id = $1`, a.owner)
		a.err = classifyNil(err)
		if a.conn != nil {
			a.err = errors.Join(a.err, a.conn.Close(ctx))
		}
		a.g.live.remove(a.owner)
	})
	return a.err
}

// deadOwners returns the replicas, other than owner, that attended and
// whose liveness is gone now, if owner's Adopt may take their
// generations (attendances.trusts).
func (p pgGenerations) deadOwners(ctx context.Context, owner string) ([]string, error) {
	if !p.live.trusts(owner) {
		return nil, nil
	}
	// A shared try takes the lock of a replica that holds none, until the
	// statement ends, and leaves that of one that lives; adopters asking
	// at once do not stand in each other's way.
	rows, err := p.pool.Query(ctx, `SELECT id FROM replicas WHERE id <> $1 AND pg_try_advisory_xact_lock_shared($2, hashtext(id))`,
		owner, livenessClass)
	if err != nil {
		return nil, classify(err)
	}
	dead, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil {
		return nil, classify(err)
	}
	return dead, nil
}

// forgetDead takes off the replicas the dead that no running or waiting
// generation names any more. A replica attending under one of their ids
// again meanwhile holds its lock, and stays. It may fail: the next Adopt
// tries again, and meanwhile the adopted generations are the adopter's.
func (p pgGenerations) forgetDead(ctx context.Context, dead []string) {
	_, _ = p.pool.Exec(ctx, `
		DELETE FROM replicas r WHERE r.id = ANY($1)
			AND NOT EXISTS (SELECT 1 FROM generations g WHERE g.owner = r.id AND g.state IN ('running', 'waiting'))
			AND pg_try_advisory_xact_lock($2, hashtext(r.id))`,
		dead, livenessClass)
}
