// Package logtest captures what agentd's code logs, for its tests: a sink
// that the goroutines of a generation, a bridge or a server write to
// while the test reads it.
package logtest

import (
	"bytes"
	"sync"
)

// Logs is a log sink safe for concurrent writes and reads. The zero value
// is ready.
type Logs struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

// Write appends p.
func (l *Logs) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.buf.Write(p)
}

// String is everything written so far.
func (l *Logs) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.buf.String()
}
