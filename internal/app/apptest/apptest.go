// Package apptest serves a whole agentd for tests: app.NewAgent (the
// AgentService, its embedded bridge and the bridge's admin API) on an
// in-memory listener, and a log sink that tests can read while agentd
// writes to it.
package apptest

import (
	"bytes"
	"context"
	"net"
	"sync"
	"testing"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/test/bufconn"

	"github.com/agentd/agentd/internal/app"
)

// Serve starts agentd with o and returns a connection to it and stop,
// which closes the connection, stops agentd (its bridge and every MCP
// server process with it) and waits for it, reporting Serve's error.
// stop is idempotent and also runs when the test ends.
func Serve(t testing.TB, o app.Options) (*grpc.ClientConn, func()) {
	t.Helper()
	a, err := app.NewAgent(o)
	if err != nil {
		t.Fatal(err)
	}
	lis := bufconn.Listen(1 << 20)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- a.Serve(ctx, lis, o) }()
	conn, err := grpc.NewClient("passthrough:///agentd", grpc.WithTransportCredentials(insecure.NewCredentials()),
		grpc.WithContextDialer(func(ctx context.Context, _ string) (net.Conn, error) { return lis.DialContext(ctx) }))
	if err != nil {
		cancel()
		<-done
		t.Fatal(err)
	}
	var once sync.Once
	stop := func() {
		once.Do(func() {
			conn.Close()
			cancel()
			if err := <-done; err != nil {
				t.Errorf("Serve: %v", err)
			}
		})
	}
	t.Cleanup(stop)
	return conn, stop
}

// Logs is a log sink safe for concurrent writes and reads.
type Logs struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

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
