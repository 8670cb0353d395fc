package sessionpin_test

import (
	"context"
	"net"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/google/go-cmp/cmp"
	"go.uber.org/goleak"
	"google.golang.org/grpc"
	"google.golang.org/grpc/balancer"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/health"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/grpc/peer"
	"google.golang.org/grpc/resolver"
	"google.golang.org/grpc/resolver/manual"
	"google.golang.org/grpc/status"

	"github.com/agentd/agentd/internal/sessionpin"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// backend is a gRPC server on loopback serving health, which the tests
// call to learn which backend answered (by the call's peer).
type backend struct {
	addr   string
	srv    *grpc.Server
	health *health.Server
}

func startBackend(t *testing.T) *backend {
	t.Helper()
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	b := &backend{addr: lis.Addr().String(), srv: grpc.NewServer(), health: health.NewServer()}
	healthpb.RegisterHealthServer(b.srv, b.health)
	done := make(chan struct{})
	go func() {
		defer close(done)
		_ = b.srv.Serve(lis)
	}()
	t.Cleanup(func() {
		b.srv.Stop()
		<-done
	})
	return b
}

func addresses(bs ...*backend) resolver.State {
	var s resolver.State
	for _, b := range bs {
		s.Addresses = append(s.Addresses, resolver.Address{Addr: b.addr})
	}
	return s
}

// dial connects to the backends that r resolves, balanced by sessionpin.
func dial(t *testing.T, r *manual.Resolver) healthpb.HealthClient {
	t.Helper()
	conn, err := grpc.NewClient(r.Scheme()+":///backends", grpc.WithResolvers(r),
		grpc.WithTransportCredentials(insecure.NewCredentials()),
		grpc.WithDefaultServiceConfig(sessionpin.ServiceConfig))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	return healthpb.NewHealthClient(conn)
}

func newResolver(t *testing.T, bs ...*backend) *manual.Resolver {
	t.Helper()
	r := manual.NewBuilderWithScheme("sessionpin-test")
	r.InitialState(addresses(bs...))
	return r
}

// who makes one call with ctx and returns the backend that answered it.
func who(ctx context.Context, c healthpb.HealthClient) (string, error) {
	var p peer.Peer
	if _, err := c.Check(ctx, &healthpb.HealthCheckRequest{}, grpc.Peer(&p)); err != nil {
		return "", err
	}
	return p.Addr.String(), nil
}

// waitReady calls without a pin until every backend in want has answered:
// then all are connected.
func waitReady(t *testing.T, c healthpb.HealthClient, want ...*backend) {
	t.Helper()
	seen := make(map[string]bool)
	deadline := time.Now().Add(30 * time.Second)
	for {
		addr, err := who(t.Context(), c)
		if err != nil {
			t.Fatal(err)
		}
		seen[addr] = true
		all := true
		for _, b := range want {
			all = all && seen[b.addr]
		}
		if all {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("backends answering: %v; want all of %d", seen, len(want))
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// open opens a session: one call with a new pin (avoiding avoid), then
// Fix. It returns the pin and its backend.
func open(t *testing.T, c healthpb.HealthClient, avoid string) (*sessionpin.Pin, string) {
	t.Helper()
	pin := sessionpin.New(avoid)
	answered, err := who(pin.Context(t.Context()), c)
	if err != nil {
		t.Fatal(err)
	}
	if fixed := pin.Fix(); fixed != answered {
		t.Fatalf("the pin fixed %s; the open call reached %s", fixed, answered)
	}
	return pin, answered
}

// X-G6: new sessions spread round-robin across every ready backend, and
// each session's later calls reach the backend that opened it.
func TestSpreadAndPin(t *testing.T) {
	t.Parallel()
	bs := []*backend{startBackend(t), startBackend(t), startBackend(t)}
	c := dial(t, newResolver(t, bs...))
	waitReady(t, c, bs...)

	perBackend := make(map[string]int)
	pins := make(map[*sessionpin.Pin]string)
	for range 6 {
		pin, addr := open(t, c, "")
		perBackend[addr]++
		pins[pin] = addr
	}
	want := map[string]int{bs[0].addr: 2, bs[1].addr: 2, bs[2].addr: 2}
	if diff := cmp.Diff(want, perBackend); diff != "" {
		t.Errorf("sessions per backend (-want +got):\n%s", diff)
	}
	for pin, addr := range pins {
		for range 3 {
			got, err := who(pin.Context(t.Context()), c)
			if err != nil {
				t.Fatal(err)
			}
			if got != addr {
				t.Errorf("a call of the session opened on %s reached %s", addr, got)
			}
		}
		if pin.Addr() != addr {
			t.Errorf("Addr() = %s; want %s", pin.Addr(), addr)
		}
	}
}

// X-G6: a session that replaces one lost on a backend opens on another
// one, unless no other is ready.
func TestAvoid(t *testing.T) {
	t.Parallel()
	a, b := startBackend(t), startBackend(t)
	c := dial(t, newResolver(t, a, b))
	waitReady(t, c, a, b)
	for range 4 {
		if _, addr := open(t, c, a.addr); addr != b.addr {
			t.Errorf("a session avoiding %s opened on %s; want %s", a.addr, addr, b.addr)
		}
	}

	alone := startBackend(t)
	c = dial(t, newResolver(t, alone))
	waitReady(t, c, alone)
	if _, addr := open(t, c, alone.addr); addr != alone.addr {
		t.Errorf("with one backend, a session avoiding it opened on %s; want it anyway", addr)
	}
}

// X-G6: the calls of a session whose backend went away fail Unavailable at
// once (they do not wait, and do not go elsewhere); new sessions open on
// the backends left.
func TestPinnedBackendGone(t *testing.T) {
	t.Parallel()
	a, b := startBackend(t), startBackend(t)
	c := dial(t, newResolver(t, a, b))
	waitReady(t, c, a, b)
	pin, addr := open(t, c, "")
	gone, left := a, b
	if addr == b.addr {
		gone, left = b, a
	}
	gone.srv.Stop()

	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	defer cancel()
	if _, err := who(pin.Context(ctx), c); status.Code(err) != codes.Unavailable {
		t.Errorf("a call of the session on the stopped backend: %v; want Unavailable", err)
	}
	for range 3 {
		if _, addr := open(t, c, ""); addr != left.addr {
			t.Errorf("a new session opened on %s; want %s, the backend left", addr, left.addr)
		}
	}
}

// X-G6: the resolver's updates apply: a backend added gets sessions, a
// backend removed gets none and its sessions' new calls fail Unavailable,
// while their open streams go on.
func TestResolverUpdates(t *testing.T) {
	t.Parallel()
	a, b := startBackend(t), startBackend(t)
	r := newResolver(t, a)
	c := dial(t, r)
	waitReady(t, c, a)
	pinA, _ := open(t, c, "")
	watch, err := c.Watch(pinA.Context(t.Context()), &healthpb.HealthCheckRequest{})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := watch.Recv(); err != nil {
		t.Fatal(err)
	}

	r.UpdateState(addresses(a, b))
	waitReady(t, c, a, b)

	r.UpdateState(addresses(b))
	deadline := time.Now().Add(30 * time.Second)
	for {
		_, err := who(pinA.Context(t.Context()), c)
		if status.Code(err) == codes.Unavailable {
			break
		}
		if err != nil || time.Now().After(deadline) {
			t.Fatalf("a call of a session on the removed backend: %v; want Unavailable", err)
		}
		time.Sleep(5 * time.Millisecond)
	}
	for range 3 {
		if _, addr := open(t, c, ""); addr != b.addr {
			t.Errorf("a new session opened on %s after its removal; want %s", addr, b.addr)
		}
	}
	// The session's stream on the removed backend still delivers.
	a.health.SetServingStatus("", healthpb.HealthCheckResponse_NOT_SERVING)
	res, err := watch.Recv()
	if err != nil || res.GetStatus() != healthpb.HealthCheckResponse_NOT_SERVING {
		t.Errorf("the open stream on the removed backend: %v, %v; want NOT_SERVING", res, err)
	}
}

// countingCC is the balancer's ClientConn: it counts the re-resolutions
// asked for, and does nothing else.
type countingCC struct {
	balancer.ClientConn
	resolves atomic.Int32
}

func (c *countingCC) ResolveNow(resolver.ResolveNowOptions) { c.resolves.Add(1) }

// The balancer asks for a resolution every RefreshEvery, and no more once
// closed.
func TestRefresh(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		cc := &countingCC{}
		b := balancer.Get(sessionpin.Name).Build(cc, balancer.BuildOptions{})
		time.Sleep(3*sessionpin.RefreshEvery + time.Second)
		if got := cc.resolves.Load(); got != 3 {
			t.Errorf("%d re-resolutions in 3 periods; want 3", got)
		}
		b.Close()
		time.Sleep(3 * sessionpin.RefreshEvery)
		if got := cc.resolves.Load(); got != 3 {
			t.Errorf("%d re-resolutions after Close; want still 3", got)
		}
	})
}
