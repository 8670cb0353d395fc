// Package bridgetest serves a fake agentd.bridge.v1.BridgeService, alone
// on an in-memory listener or as replicas on loopback ports behind one
// balanced connection, for tests of agentd's client of the bridge and of
// the generations that use it.
package bridgetest

import (
	"context"
	"fmt"
	"net"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/health"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/grpc/peer"
	"google.golang.org/grpc/resolver"
	"google.golang.org/grpc/resolver/manual"
	"google.golang.org/grpc/status"
	"google.golang.org/grpc/test/bufconn"

	bridgev1 "github.com/agentd/agentd/gen/go/agentd/bridge/v1"
	"github.com/agentd/agentd/internal/sessionpin"
)

// Service is a BridgeService whose answers come from its On* fields.
// Calls come by CallTools (each answered by OnCall), or, with UnaryOnly,
// by CallTool as from a bridge that has no CallTools. Set its fields
// before it serves.
type Service struct {
	bridgev1.UnimplementedBridgeServiceServer

	OnOpen    func(*bridgev1.OpenSessionRequest) error
	OnList    func(*bridgev1.ListToolsRequest) (*bridgev1.ListToolsResponse, error)
	OnCall    func(*bridgev1.CallToolRequest) (*bridgev1.CallToolResponse, error)
	UnaryOnly bool
	// Resumable is what every session's SessionOpened says.
	Resumable bool
	// BringTools: a session opened with list_cached_tools brings OnList's
	// answer, as the bridge does when its cache holds every list.
	BringTools bool
	// ListCalls counts the ListTools calls.
	ListCalls atomic.Int32
	// OnStreamed, if set, sees each streamed call before OnCall runs.
	OnStreamed func(*bridgev1.StreamedToolCall)
	// Cancels receives the ids of the calls the client cancels.
	Cancels chan uint64
	// OnStream, if set, runs as a CallTools stream opens; the function it
	// returns, as the stream ends.
	OnStream func() (ended func())

	mu       sync.Mutex
	closes   int
	opened   int
	sessions map[string]chan struct{} // open sessions, each closed by CloseSession
}

// session returns the channel that CloseSession closes for session id: as
// the bridge does, a closed session ends its streams.
func (b *Service) session(id string) <-chan struct{} {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.sessions[id]
}

func (b *Service) CallTools(s grpc.BidiStreamingServer[bridgev1.CallToolsRequest, bridgev1.CallToolsResponse]) error {
	if b.UnaryOnly {
		return b.UnimplementedBridgeServiceServer.CallTools(s)
	}
	first, err := s.Recv()
	if err != nil {
		return err
	}
	id := first.GetOpen().GetSessionId()
	if b.OnStream != nil {
		defer b.OnStream()()
	}
	closed := b.session(id)
	if closed == nil {
		return nil // closed already: a stream opened late ends at once
	}
	var (
		sendMu sync.Mutex
		calls  sync.WaitGroup
	)
	defer calls.Wait()
	reqs := received(s)
	for {
		var req *bridgev1.CallToolsRequest
		select {
		case r, ok := <-reqs:
			if !ok {
				return nil
			}
			req = r
		case <-closed:
			return nil
		}
		if c := req.GetCall(); c != nil {
			calls.Go(func() { b.answer(s, &sendMu, id, c) })
		} else if b.Cancels != nil {
			b.Cancels <- req.GetCancel()
		}
	}
}

// received relays the requests of s until it ends.
func received(s grpc.BidiStreamingServer[bridgev1.CallToolsRequest, bridgev1.CallToolsResponse]) <-chan *bridgev1.CallToolsRequest {
	reqs := make(chan *bridgev1.CallToolsRequest)
	go func() { // ends with the stream
		defer close(reqs)
		for {
			req, err := s.Recv()
			if err != nil {
				return
			}
			select {
			case reqs <- req:
			case <-s.Context().Done():
				return
			}
		}
	}()
	return reqs
}

// answer runs the streamed call c of session id as CallTool would, and
// sends its outcome on s; sendMu keeps one Send at a time.
func (b *Service) answer(s grpc.BidiStreamingServer[bridgev1.CallToolsRequest, bridgev1.CallToolsResponse], sendMu *sync.Mutex, id string, c *bridgev1.StreamedToolCall) {
	if b.OnStreamed != nil {
		b.OnStreamed(c)
	}
	res, err := b.CallTool(s.Context(), &bridgev1.CallToolRequest{SessionId: id, ServerName: c.GetServerName(), ToolName: c.GetToolName(), Arguments: c.GetArguments()})
	answer := &bridgev1.CallToolsResponse{Id: c.GetId(), Outcome: &bridgev1.CallToolsResponse_Result{Result: res}}
	if err != nil {
		p := status.Convert(err).Proto()
		answer.Outcome = &bridgev1.CallToolsResponse_Error{Error: &bridgev1.CallError{Code: p.GetCode(), Message: p.GetMessage(), Details: p.GetDetails()}}
	}
	sendMu.Lock()
	defer sendMu.Unlock()
	_ = s.Send(answer)
}

func (b *Service) OpenSession(req *bridgev1.OpenSessionRequest, s grpc.ServerStreamingServer[bridgev1.OpenSessionResponse]) error {
	if b.OnOpen != nil {
		if err := b.OnOpen(req); err != nil {
			return err
		}
	}
	id, closed := b.register()
	opened := &bridgev1.SessionOpened{SessionId: id, Resumable: b.Resumable}
	if b.BringTools && req.GetListCachedTools() && b.OnList != nil {
		tools, err := b.OnList(&bridgev1.ListToolsRequest{SessionId: id})
		if err != nil {
			return err
		}
		opened.Tools = tools
	}
	if err := s.Send(&bridgev1.OpenSessionResponse{Event: &bridgev1.OpenSessionResponse_Opened{Opened: opened}}); err != nil {
		return err
	}
	select {
	case <-s.Context().Done():
	case <-closed:
	}
	return nil
}

// register counts a session opened and returns its id, and the channel
// that CloseSession closes for it.
func (b *Service) register() (string, chan struct{}) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.opened++
	id := fmt.Sprintf("sess-%d", b.opened)
	closed := make(chan struct{})
	if b.sessions == nil {
		b.sessions = make(map[string]chan struct{})
	}
	b.sessions[id] = closed
	return id, closed
}

func (b *Service) CloseSession(_ context.Context, req *bridgev1.CloseSessionRequest) (*bridgev1.CloseSessionResponse, error) {
	b.mu.Lock()
	b.closes++
	if ch := b.sessions[req.GetSessionId()]; ch != nil {
		close(ch)
		delete(b.sessions, req.GetSessionId())
	}
	b.mu.Unlock()
	return &bridgev1.CloseSessionResponse{}, nil
}

func (b *Service) ListTools(_ context.Context, req *bridgev1.ListToolsRequest) (*bridgev1.ListToolsResponse, error) {
	b.ListCalls.Add(1)
	if b.OnList == nil {
		return &bridgev1.ListToolsResponse{}, nil
	}
	return b.OnList(req)
}

func (b *Service) CallTool(_ context.Context, req *bridgev1.CallToolRequest) (*bridgev1.CallToolResponse, error) {
	if b.OnCall == nil {
		return &bridgev1.CallToolResponse{Output: "ok"}, nil
	}
	return b.OnCall(req)
}

// Closed returns how many CloseSession calls came.
func (b *Service) Closed() int {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.closes
}

// Opened returns how many sessions opened.
func (b *Service) Opened() int {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.opened
}

// Open returns how many sessions are open: opened, and not closed by
// CloseSession.
func (b *Service) Open() int {
	b.mu.Lock()
	defer b.mu.Unlock()
	return len(b.sessions)
}

// Dial serves srv on an in-memory listener and returns a client
// connection to it, made with opts too; both close when the test ends, the
// server once every handler has returned.
func Dial(t testing.TB, srv bridgev1.BridgeServiceServer, opts ...grpc.DialOption) *grpc.ClientConn {
	t.Helper()
	lis := bufconn.Listen(1 << 20)
	gs := grpc.NewServer(grpc.WaitForHandlers(true))
	bridgev1.RegisterBridgeServiceServer(gs, srv)
	served := make(chan struct{})
	go func() {
		defer close(served)
		_ = gs.Serve(lis)
	}()
	opts = append([]grpc.DialOption{
		grpc.WithContextDialer(func(ctx context.Context, _ string) (net.Conn, error) { return lis.DialContext(ctx) }),
		grpc.WithTransportCredentials(insecure.NewCredentials()),
	}, opts...)
	conn, err := grpc.NewClient("passthrough:///bufconn", opts...)
	if err != nil {
		t.Fatalf("grpc.NewClient: %v", err)
	}
	t.Cleanup(func() {
		_ = conn.Close()
		gs.Stop()
		<-served
	})
	return conn
}

// Replica is a fake bridge replica on a loopback port, with health as a
// real bridge has.
type Replica struct {
	Name   string
	Fake   *Service
	Server *grpc.Server // Stop it to lose the replica
	Addr   string
	// Opens counts the sessions asked of the replica, opened or refused.
	Opens atomic.Int32
}

// StartReplica serves fake as the replica name until the test ends. Its
// OpenSession counts opens before fake's own OnOpen runs.
func StartReplica(t testing.TB, name string, fake *Service) *Replica {
	t.Helper()
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	r := &Replica{Name: name, Fake: fake, Server: grpc.NewServer(), Addr: lis.Addr().String()}
	onOpen := fake.OnOpen
	fake.OnOpen = func(req *bridgev1.OpenSessionRequest) error {
		r.Opens.Add(1)
		if onOpen != nil {
			return onOpen(req)
		}
		return nil
	}
	bridgev1.RegisterBridgeServiceServer(r.Server, fake)
	healthpb.RegisterHealthServer(r.Server, health.NewServer())
	served := make(chan struct{})
	go func() {
		defer close(served)
		_ = r.Server.Serve(lis)
	}()
	t.Cleanup(func() {
		r.Server.Stop()
		<-served
	})
	return r
}

// DialReplicas returns a connection that resolves to the replicas,
// balanced as agentd balances them (sessionpin), once every replica is
// connected; it closes when the test ends.
func DialReplicas(t testing.TB, rs ...*Replica) *grpc.ClientConn {
	t.Helper()
	res := manual.NewBuilderWithScheme("replicas")
	var state resolver.State
	for _, r := range rs {
		state.Addresses = append(state.Addresses, resolver.Address{Addr: r.Addr})
	}
	res.InitialState(state)
	conn, err := grpc.NewClient(res.Scheme()+":///bridges", grpc.WithResolvers(res),
		grpc.WithTransportCredentials(insecure.NewCredentials()),
		grpc.WithDefaultServiceConfig(sessionpin.ServiceConfig))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	// Every replica connected, as in a bridge deployment that has been up
	// for a while: unpinned health checks go round the ready ones.
	seen := make(map[string]bool)
	for deadline := time.Now().Add(30 * time.Second); len(seen) < len(rs); {
		var p peer.Peer
		if _, err := healthpb.NewHealthClient(conn).Check(t.Context(), &healthpb.HealthCheckRequest{}, grpc.Peer(&p)); err != nil {
			t.Fatal(err)
		}
		seen[p.Addr.String()] = true
		if time.Now().After(deadline) {
			t.Fatalf("replicas connected: %v; want %d", seen, len(rs))
		}
	}
	return conn
}
