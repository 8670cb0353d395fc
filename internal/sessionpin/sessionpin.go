// Package sessionpin is the gRPC load balancer of agentd's hop to
// replicated bridges: it spreads new sessions round-robin across the
// backends a target resolves to, and sends every later RPC of a session to
// the backend that opened it.
//
// A bridge session lives in one bridge process (its stdio servers, its
// HTTP MCP sessions), so every RPC of it (the OpenSession stream that
// bounds it, its CallTools stream, ListTools, CloseSession) must reach
// that process. gRPC's round_robin picks a backend per RPC and would
// scatter them, and grpc-go lets no caller choose a subchannel. The
// alternatives were a ClientConn per backend, resolved and re-resolved by
// hand, or a balancer that reads a key from the RPC's context; the second
// keeps resolution (dns:///, a fixed list), connection management and
// backoff gRPC's, and is this package: round_robin over the ready
// backends, except that an RPC whose context carries a fixed Pin goes to
// the Pin's backend or fails Unavailable at once when that backend is not
// connected (its session died with the connection; no other backend knows
// it).
//
// The balancer asks the resolver to resolve again every RefreshEvery, so
// backends added behind a DNS name get sessions, and removed ones none;
// gRPC's DNS resolver re-resolves only when asked, at most every 30 s.
// A backend removed from the resolution keeps its open sessions: its
// connection closes gracefully, after their streams end.
package sessionpin

import (
	"cmp"
	"context"
	"math/rand/v2"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"google.golang.org/grpc/balancer"
	"google.golang.org/grpc/balancer/base"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/resolver"
	"google.golang.org/grpc/status"
)

// Name is the balancer's name in a service config.
const Name = "agentd_session_pin"

// ServiceConfig selects the balancer: give it to grpc.WithDefaultServiceConfig.
const ServiceConfig = `{"loadBalancingConfig":[{"` + Name + `":{}}]}`

// RefreshEvery is how often the balancer asks its resolver to resolve the
// target again.
const RefreshEvery = 30 * time.Second

func init() {
	balancer.Register(builder{})
}

// Pin says where the RPCs of one session go. A new Pin lets each RPC made
// with its context pick a backend round-robin, and remembers the last
// pick; Fix then sends every later RPC to that backend. Safe for
// concurrent use.
type Pin struct {
	avoid string

	mu    sync.Mutex
	addr  string
	fixed bool
}

// New returns a Pin whose round-robin picks choose any ready backend but
// the one at avoid (the backend a session was just lost on), unless it is
// the only one ready. avoid may be empty.
func New(avoid string) *Pin { return &Pin{avoid: avoid} }

type pinKey struct{}

// Context returns ctx carrying p: the RPCs made with it pick their backend
// as p says.
func (p *Pin) Context(ctx context.Context) context.Context {
	return context.WithValue(ctx, pinKey{}, p)
}

// Fix pins p to the backend of its last pick, and returns that backend's
// address ("" when no RPC picked one through p: then every RPC made with
// p fails). Call it once the session is open: the RPC that opened it may
// have been picked more than once (gRPC retries a pick whose connection
// closed before the RPC reached it). Idempotent.
func (p *Pin) Fix() string {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.fixed = true
	return p.addr
}

// Addr is the address of the backend p last picked or is fixed to, or ""
// before any pick.
func (p *Pin) Addr() string {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.addr
}

// target returns the backend p is fixed to; ok is false before Fix.
func (p *Pin) target() (addr string, ok bool) {
	if p == nil {
		return "", false
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.addr, p.fixed
}

func (p *Pin) record(addr string) {
	if p == nil {
		return
	}
	p.mu.Lock()
	p.addr = addr
	p.mu.Unlock()
}

func (p *Pin) avoiding() string {
	if p == nil {
		return ""
	}
	return p.avoid
}

type builder struct{}

func (builder) Name() string { return Name }

func (builder) Build(cc balancer.ClientConn, opts balancer.BuildOptions) balancer.Balancer {
	b := &pinBalancer{Balancer: base.NewBalancerBuilder(Name, pickerBuilder{}, base.Config{}).Build(cc, opts)}
	// A timer, not a goroutine: nothing to join when gRPC closes the
	// balancer, which it may do while holding locks ResolveNow takes.
	b.mu.Lock()
	b.refresh = time.AfterFunc(RefreshEvery, func() { b.resolveNow(cc) })
	b.mu.Unlock()
	return b
}

// pinBalancer is base's balancer, which keeps a subchannel per resolved
// address and builds a picker of the ready ones, plus the periodic
// re-resolution.
type pinBalancer struct {
	balancer.Balancer

	closed  atomic.Bool
	mu      sync.Mutex // orders Reset after Stop; never held across a call into gRPC
	refresh *time.Timer
}

func (b *pinBalancer) resolveNow(cc balancer.ClientConn) {
	if b.closed.Load() {
		return
	}
	// After Close, gRPC ignores it.
	cc.ResolveNow(resolver.ResolveNowOptions{})
	b.mu.Lock()
	defer b.mu.Unlock()
	if !b.closed.Load() {
		b.refresh.Reset(RefreshEvery)
	}
}

func (b *pinBalancer) Close() {
	b.closed.Store(true)
	b.mu.Lock()
	b.refresh.Stop()
	b.mu.Unlock()
	b.Balancer.Close()
}

type pickerBuilder struct{}

func (pickerBuilder) Build(info base.PickerBuildInfo) balancer.Picker {
	p := &picker{byAddr: make(map[string]balancer.SubConn, len(info.ReadySCs))}
	for sc, sci := range info.ReadySCs {
		p.ready = append(p.ready, backend{addr: sci.Address.Addr, sc: sc})
		p.byAddr[sci.Address.Addr] = sc
	}
	slices.SortFunc(p.ready, func(a, b backend) int { return cmp.Compare(a.addr, b.addr) })
	if n := len(p.ready); n > 0 {
		// As round_robin does: each new picker starts at a random backend,
		// so that picker rebuilds do not favour the first one.
		p.next.Store(uint32(rand.IntN(n)))
	}
	return p
}

type backend struct {
	addr string
	sc   balancer.SubConn
}

// picker picks among the backends that were ready when it was built.
type picker struct {
	ready  []backend // sorted by address
	byAddr map[string]balancer.SubConn
	next   atomic.Uint32
}

func (p *picker) Pick(info balancer.PickInfo) (balancer.PickResult, error) {
	pin, _ := info.Ctx.Value(pinKey{}).(*Pin)
	if addr, fixed := pin.target(); fixed {
		if sc := p.byAddr[addr]; sc != nil {
			return balancer.PickResult{SubConn: sc}, nil
		}
		// A status error fails the RPC at once, wait-for-ready or not:
		// waiting would not bring the session back.
		return balancer.PickResult{}, status.Errorf(codes.Unavailable, "the backend %s that holds this session is not connected", addr)
	}
	n := uint32(len(p.ready))
	if n == 0 {
		return balancer.PickResult{}, balancer.ErrNoSubConnAvailable
	}
	i := p.next.Add(1)
	chosen := p.ready[i%n]
	if avoid := pin.avoiding(); chosen.addr == avoid && n > 1 {
		chosen = p.ready[(i+1)%n]
	}
	pin.record(chosen.addr)
	return balancer.PickResult{SubConn: chosen.sc}, nil
}
