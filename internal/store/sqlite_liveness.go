package store

import (
	"context"
	"crypto/sha256"
	"database/sql"
	"encoding/hex"
	"encoding/json"
	"errors"
	"io"
	"os"
	"path/filepath"
	"sync"
	"syscall"
	"time"
)

// On SQLite, a replica's liveness is an exclusive flock on a file of its
// own in the directory beside the database (replicaFile): the kernel
// releases it when the process ends, however it ends. flock locks belong
// to an open file, not to a process, so two attendances in one process
// exclude each other as two processes do. A file is removed only by the
// holder of its exclusive lock, and a replica that takes one checks that
// its file is still the one at its path, so that no two files ever stand
// for one replica.

// sqliteAttendance is a replica's liveness on SQLite: its locked file.
type sqliteAttendance struct {
	g     sqliteGenerations
	owner string
	f     *os.File
	once  sync.Once
	err   error
}

// replicasDir is the directory of the replicas' liveness files of the
// database at path.
func replicasDir(path string) string { return path + ".replicas" }

// replicaFile is owner's liveness file: named by a digest of its id,
// which may hold any character.
func (s sqliteGenerations) replicaFile(owner string) string {
	sum := sha256.Sum256([]byte(owner))
	return filepath.Join(s.replicas, hex.EncodeToString(sum[:16])+".lock")
}

func (s sqliteGenerations) Attend(ctx context.Context, owner string) (io.Closer, error) {
	at, err := s.live.add(owner)
	if err != nil {
		return nil, err
	}
	f, err := s.lockLiveness(ctx, owner)
	if err == nil {
		_, err = s.db.ExecContext(ctx, `INSERT INTO replicas (id) VALUES (?) ON CONFLICT (id) DO NOTHING`, owner)
		if err != nil {
			_ = f.Close()
			err = unavailable(err)
		}
	}
	if err != nil {
		s.live.remove(owner)
		return nil, err
	}
	at.session.Store(1)
	return &sqliteAttendance{g: s, owner: owner, f: f}, nil
}

// lockLiveness opens owner's file and locks it exclusively, waiting while
// an adopter holds it (briefly), or until ctx ends while another process
// does.
func (s sqliteGenerations) lockLiveness(ctx context.Context, owner string) (*os.File, error) {
	if err := os.MkdirAll(s.replicas, 0o700); err != nil {
		return nil, unavailable(err)
	}
	path := s.replicaFile(owner)
	for {
		f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE, 0o600)
		if err != nil {
			return nil, unavailable(err)
		}
		err = syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB)
		switch {
		case err == nil && stillAt(f, path):
			return f, nil
		case err == nil: // removed by an adopter as it was locked: take the new one
			_ = f.Close()
			continue
		}
		_ = f.Close()
		if !errors.Is(err, syscall.EWOULDBLOCK) {
			return nil, unavailable(err)
		}
		select {
		case <-ctx.Done():
			return nil, attendsAlready(owner)
		case <-time.After(livenessRetry):
		}
	}
}

// stillAt reports whether f is the file at path.
func stillAt(f *os.File, path string) bool {
	held, err := f.Stat()
	if err != nil {
		return false
	}
	now, err := os.Stat(path)
	return err == nil && os.SameFile(held, now)
}

// Close takes owner off the replicas, then removes its file and ends its
// liveness, in that order: no adopter finds it listed without its lock.
func (a *sqliteAttendance) Close() error {
	a.once.Do(func() {
		ctx, cancel := context.WithTimeout(context.Background(), Timeout)
		defer cancel()
		if _, err := a.g.db.ExecContext(ctx, `DELETE FROM replicas WHERE id = ?`, a.owner); err != nil {
			a.err = unavailable(err)
		}
		if err := os.Remove(a.f.Name()); err != nil && !errors.Is(err, os.ErrNotExist) {
			a.err = errors.Join(a.err, err)
		}
		a.err = errors.Join(a.err, a.f.Close())
		a.g.live.remove(a.owner)
	})
	return a.err
}

// deadReplicas are the replicas that an Adopt found dead, each with its
// file locked shared until release: a replica attending again under one
// of their ids waits for the adoption.
type deadReplicas map[string]*os.File

// ids is the replicas' ids as a JSON array, for json_each.
func (d deadReplicas) ids() string {
	ids := make([]string, 0, len(d))
	for id := range d {
		ids = append(ids, id)
	}
	b, _ := json.Marshal(ids) // strings: it does not fail
	return string(b)
}

func (d deadReplicas) release() {
	for _, f := range d {
		_ = f.Close()
	}
}

// deadOwners returns the replicas, other than owner, that attended and
// whose liveness is gone now, if owner's Adopt may take their
// generations (attendances.trusts).
func (s sqliteGenerations) deadOwners(ctx context.Context, owner string) (deadReplicas, error) {
	if !s.live.trusts(owner) {
		return nil, nil
	}
	rows, err := s.db.QueryContext(ctx, `SELECT id FROM replicas WHERE id <> ?`, owner)
	if err != nil {
		return nil, unavailable(err)
	}
	var listed []string
	for rows.Next() {
		var id string
		if err := rows.Scan(&id); err != nil {
			rows.Close()
			return nil, unavailable(err)
		}
		listed = append(listed, id)
	}
	if err := errors.Join(rows.Err(), rows.Close()); err != nil {
		return nil, unavailable(err)
	}
	dead := deadReplicas{}
	for _, id := range listed {
		if f := s.lockDead(id); f != nil {
			dead[id] = f
		}
	}
	return dead, nil
}

// lockDead locks id's file shared if no replica holds it: id is dead, and
// the lock is kept until the adoption is done. A file gone (removed as its
// replica died) is made again, so that there is a lock to hold; nil: id
// lives, or its file cannot be read.
func (s sqliteGenerations) lockDead(id string) *os.File {
	f, err := os.OpenFile(s.replicaFile(id), os.O_RDONLY|os.O_CREATE, 0o600)
	if err != nil {
		return nil
	}
	if err := syscall.Flock(int(f.Fd()), syscall.LOCK_SH|syscall.LOCK_NB); err != nil {
		_ = f.Close()
		return nil
	}
	return f
}

// forgetDead takes off the replicas, and removes the files of, the dead
// that no running or waiting generation names any more, each only if it
// can lock the file exclusively (no adopter asks of it, no replica
// attends under its id again). What it cannot do now the next Adopt
// does: the adopted generations are the adopter's meanwhile.
func (s sqliteGenerations) forgetDead(ctx context.Context, dead deadReplicas) {
	for id, f := range dead {
		var named bool
		err := s.db.QueryRowContext(ctx, `SELECT EXISTS (SELECT 1 FROM generations WHERE owner = ? AND state IN ('running', 'waiting'))`, id).Scan(&named)
		if err != nil || named || syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB) != nil {
			continue
		}
		if err := os.Remove(f.Name()); err == nil || errors.Is(err, os.ErrNotExist) {
			_, _ = s.db.ExecContext(ctx, `DELETE FROM replicas WHERE id = ?`, id)
		}
	}
}

// sqliteAdopt runs Adopt's statement: of the generations whose leases
// lapsed, or also of those whose owners are dead.
func (s sqliteGenerations) sqliteAdopt(ctx context.Context, owner string, now, expires time.Time, limit int, dead deadReplicas) (*sql.Rows, error) {
	if len(dead) == 0 {
		return s.db.QueryContext(ctx, sqliteAdoptLapsed, owner, expires.UnixMilli(), now.UnixMilli(), limit)
	}
	return s.db.QueryContext(ctx, sqliteAdoptLapsedOrDead, owner, expires.UnixMilli(), now.UnixMilli(), dead.ids(), limit)
}

// Adopt's statements. One statement: it holds the write lock from its
// start, so of adopters on several processes one picks at a time.
var (
	sqliteAdoptLapsed       = sqliteAdoptWhere(`lease_expires <= ?`)
	sqliteAdoptLapsedOrDead = sqliteAdoptWhere(`(lease_expires <= ? OR owner IN (SELECT value FROM json_each(?)))`)
)

func sqliteAdoptWhere(due string) string {
	return `
		UPDATE generations SET owner = ?, epoch = epoch + 1, lease_expires = ?
		WHERE (tenant, id) IN (
			SELECT tenant, id FROM generations
			WHERE state IN ('running', 'waiting') AND ` + due + `
			ORDER BY lease_expires LIMIT ?)
		RETURNING ` + sqliteGenerationCols
}
