// Package pgtest gives tests a PostgreSQL database of their own, on
// the server that AGENTD_TEST_POSTGRES_DSN names: `make test` starts a
// throwaway one (scripts/postgres.sh) and sets it, with
// AGENTD_REQUIRE_POSTGRES=1 so that these tests fail rather than skip
// without it. Under a plain `go test` without a server they skip, saying
// how to run them.
//
// Proxy stands between a test and the server, to cut the store off and
// bring it back.
package pgtest

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"net"
	"net/url"
	"os"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
)

// The environment that points the tests at a server.
const (
	// EnvDSN names the server: the DSN of a role that may create
	// databases (e.g. postgres://postgres@127.0.0.1:5432/postgres).
	EnvDSN = "AGENTD_TEST_POSTGRES_DSN"
	// EnvRequire, set to 1, makes a test that finds no server fail
	// instead of skipping.
	EnvRequire = "AGENTD_REQUIRE_POSTGRES"
)

// ServerDSN returns the server's DSN from EnvDSN, or skips t (fails it
// under EnvRequire) when there is none.
func ServerDSN(t testing.TB) string {
	t.Helper()
	dsn := os.Getenv(EnvDSN)
	if dsn != "" {
		return dsn
	}
	const how = "run `make test`, or `scripts/postgres.sh run go test ./internal/store/...` (which starts a throwaway server), or set " + EnvDSN + " to a server's DSN"
	if os.Getenv(EnvRequire) == "1" {
		t.Fatalf("%s=1 but %s is not set: the PostgreSQL tests need a server; %s", EnvRequire, EnvDSN, how)
	}
	t.Skipf("no PostgreSQL server for this test (%s is not set): %s", EnvDSN, how)
	return ""
}

// DSN returns the DSN of a new, empty database on the server, dropped
// (with whatever still connects to it) when t ends.
func DSN(t testing.TB) string {
	t.Helper()
	server := ServerDSN(t)
	var b [6]byte
	_, _ = rand.Read(b[:])
	name := "agentd_test_" + hex.EncodeToString(b[:])
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := admin(ctx, server, "CREATE DATABASE "+name); err != nil {
		t.Fatalf("pgtest: creating a database on the server of %s: %v", EnvDSN, err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		if err := admin(ctx, server, "DROP DATABASE IF EXISTS "+name+" WITH (FORCE)"); err != nil {
			t.Errorf("pgtest: dropping the test's database: %v", err)
		}
	})
	dsn, err := WithDatabase(server, name)
	if err != nil {
		t.Fatal(err)
	}
	return dsn
}

// admin runs one statement on the server, on a connection of its own.
func admin(ctx context.Context, server, stmt string) error {
	conn, err := pgx.Connect(ctx, server)
	if err != nil {
		return err
	}
	defer conn.Close(context.WithoutCancel(ctx))
	_, err = conn.Exec(ctx, stmt)
	return err
}

// WithDatabase returns dsn naming the database name instead of its own.
func WithDatabase(dsn, name string) (string, error) {
	return edit(dsn, func(u *url.URL) { u.Path = "/" + name }, "dbname="+name)
}

// WithUser returns dsn connecting as the role user.
func WithUser(dsn, user string) (string, error) {
	return edit(dsn, func(u *url.URL) { u.User = url.User(user) }, "user="+user)
}

// withAddress returns dsn connecting to 127.0.0.1:port instead.
func withAddress(dsn string, port int) (string, error) {
	return edit(dsn, func(u *url.URL) { u.Host = net.JoinHostPort("127.0.0.1", strconv.Itoa(port)) },
		"host=127.0.0.1 port="+strconv.Itoa(port))
}

// edit changes a URL DSN with urlEdit, or appends kv to a key=value one
// (where a later key wins).
func edit(dsn string, urlEdit func(*url.URL), kv string) (string, error) {
	if strings.HasPrefix(dsn, "postgres://") || strings.HasPrefix(dsn, "postgresql://") {
		u, err := url.Parse(dsn)
		if err != nil {
			return "", errors.New("pgtest: the DSN is not a URL") // its text would show the DSN
		}
		urlEdit(u)
		return u.String(), nil
	}
	return dsn + " " + kv, nil
}

// Proxy forwards TCP connections to a PostgreSQL server, and can cut them
// off: a store behind it that is Down has lost its server (the connections
// it had are broken, new ones are closed as soon as they open), and is
// back when Up.
type Proxy struct {
	lis    net.Listener
	target func(context.Context) (net.Conn, error)

	mu    sync.Mutex
	down  bool
	conns map[net.Conn]bool
	wg    sync.WaitGroup
}

// NewProxy starts a proxy in front of the server that dsn names and
// returns it with dsn changed to connect through it. It stops when t ends.
func NewProxy(t testing.TB, dsn string) (*Proxy, string) {
	t.Helper()
	cfg, err := pgconn.ParseConfig(dsn)
	if err != nil {
		t.Fatal("pgtest: the DSN does not parse")
	}
	network, addr := "tcp", net.JoinHostPort(cfg.Host, strconv.Itoa(int(cfg.Port)))
	if strings.HasPrefix(cfg.Host, "/") {
		network, addr = "unix", fmt.Sprintf("%s/.s.PGSQL.%d", cfg.Host, cfg.Port)
	}
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	p := &Proxy{lis: lis, conns: make(map[net.Conn]bool)}
	p.target = func(ctx context.Context) (net.Conn, error) {
		var d net.Dialer
		return d.DialContext(ctx, network, addr)
	}
	proxied, err := withAddress(dsn, lis.Addr().(*net.TCPAddr).Port)
	if err != nil {
		lis.Close()
		t.Fatal(err)
	}
	p.wg.Add(1)
	go p.accept()
	t.Cleanup(p.close)
	return p, proxied
}

func (p *Proxy) accept() {
	defer p.wg.Done()
	for {
		c, err := p.lis.Accept()
		if err != nil {
			return
		}
		p.mu.Lock()
		if p.down {
			p.mu.Unlock()
			c.Close()
			continue
		}
		p.conns[c] = true
		p.wg.Add(1)
		p.mu.Unlock()
		go p.serve(c)
	}
}

// serve forwards between c and a new connection to the server until
// either side closes or Down closes c.
func (p *Proxy) serve(c net.Conn) {
	defer p.wg.Done()
	defer func() {
		p.mu.Lock()
		delete(p.conns, c)
		p.mu.Unlock()
		c.Close()
	}()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	s, err := p.target(ctx)
	cancel()
	if err != nil {
		return
	}
	defer s.Close()
	done := make(chan struct{}, 2)
	go func() { _, _ = io.Copy(s, c); s.Close(); done <- struct{}{} }()
	go func() { _, _ = io.Copy(c, s); c.Close(); done <- struct{}{} }()
	<-done
	c.Close()
	s.Close()
	<-done
}

// Down cuts the server off: every connection through the proxy breaks,
// and new ones are closed at once.
func (p *Proxy) Down() {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.down = true
	for c := range p.conns {
		c.Close()
	}
}

// Up lets connections through again.
func (p *Proxy) Up() {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.down = false
}

func (p *Proxy) close() {
	p.lis.Close()
	p.Down()
	p.wg.Wait()
}

// WithPassword returns dsn with password as its password. A server that
// trusts its clients (as scripts/postgres.sh's does) never asks for it,
// so tests can make it a canary that must show nowhere.
func WithPassword(dsn, password string) (string, error) {
	if strings.HasPrefix(dsn, "postgres://") || strings.HasPrefix(dsn, "postgresql://") {
		u, err := url.Parse(dsn)
		if err != nil {
			return "", errors.New("pgtest: the DSN is not a URL")
		}
		name := "postgres"
		if u.User != nil {
			name = u.User.Username()
		}
		u.User = url.UserPassword(name, password)
		return u.String(), nil
	}
	return dsn + " password=" + password, nil
}
