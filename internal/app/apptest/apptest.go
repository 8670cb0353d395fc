// Package apptest serves a whole agentd for tests: app.NewAgent (the
// AgentService, its embedded bridge and the bridge's admin API) on
// in-memory listeners, and a log sink that tests can read while agentd
// writes to it.
package apptest

import (
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
	_, conn, _, stop := serve(t, o, false)
	return conn, stop
}

// ServeAgent is Serve that also returns the Agent, to reload it.
func ServeAgent(t testing.TB, o app.Options) (*app.Agent, *grpc.ClientConn, func()) {
	t.Helper()
	a, conn, _, stop := serve(t, o, false)
	return a, conn, stop
}

// ServeWithAdmin is Serve for a configuration that sets admin.listen
// (whose address it does not use): it serves the admin service on an
// in-memory listener of its own and returns a connection to each.
func ServeWithAdmin(t testing.TB, o app.Options) (conn, admin *grpc.ClientConn, stop func()) {
	t.Helper()
	_, conn, admin, stop = serve(t, o, true)
	return conn, admin, stop
}

func serve(t testing.TB, o app.Options, withAdmin bool) (a *app.Agent, conn, admin *grpc.ClientConn, stop func()) {
	t.Helper()
	// Stopped by the test, with no load balancer to tell: stop at once
	// rather than after shutdown_drain.
	o.Config.ShutdownDrain = 0
	a, err := app.NewAgent(o)
	if err != nil {
		t.Fatal(err)
	}
	lis := bufconn.Listen(1 << 20)
	var adminLis *bufconn.Listener
	var adminNet net.Listener // nil unless withAdmin: not a typed nil
	if withAdmin {
		adminLis = bufconn.Listen(1 << 20)
		adminNet = adminLis
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- a.ServeWithAdmin(ctx, lis, adminNet, o) }()
	var conns []*grpc.ClientConn
	var once sync.Once
	stop = func() {
		once.Do(func() {
			for _, c := range conns {
				c.Close()
			}
			cancel()
			if err := <-done; err != nil {
				t.Errorf("Serve: %v", err)
			}
		})
	}
	t.Cleanup(stop)
	dial := func(lis *bufconn.Listener) *grpc.ClientConn {
		t.Helper()
		c, err := grpc.NewClient("passthrough:///agentd", grpc.WithTransportCredentials(insecure.NewCredentials()),
			grpc.WithContextDialer(func(ctx context.Context, _ string) (net.Conn, error) { return lis.DialContext(ctx) }))
		if err != nil {
			stop()
			t.Fatal(err)
		}
		conns = append(conns, c)
		return c
	}
	conn = dial(lis)
	if withAdmin {
		admin = dial(adminLis)
	}
	return a, conn, admin, stop
}
