package store

import (
	"path/filepath"
	"testing"
	"time"
)

// TestCloseWaitsForConnections: Close returns only once SQLite has closed
// every connection, including one still in use when it was called
// (database/sql closes that one when it is given back).
func TestCloseWaitsForConnections(t *testing.T) {
	t.Parallel()
	s, err := OpenSQLite(filepath.Join(t.TempDir(), "agentd.db"), 0)
	if err != nil {
		t.Fatal(err)
	}
	conn, err := s.db.Conn(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	closed := make(chan error, 1)
	go func() { closed <- s.Close() }()
	for s.db.PingContext(t.Context()) == nil {
		time.Sleep(time.Millisecond) // until the database is closed to new work
	}
	select {
	case err := <-closed:
		t.Fatalf("Close returned (%v) while a connection was in use", err)
	default:
	}
	_ = conn.Close()
	if err := <-closed; err != nil {
		t.Errorf("Close: %v", err)
	}
	if !s.conns.wait(0) {
		t.Error("a connection is open after Close returned")
	}
}
