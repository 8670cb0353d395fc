package server

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"regexp"
	"strconv"
	"sync"

	"google.golang.org/genproto/googleapis/rpc/errdetails"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/grpc/status"

	bridgev1 "github.com/agentd/agentd/gen/go/agentd/bridge/v1"
	"github.com/agentd/agentd/internal/fault"
	"github.com/agentd/agentd/internal/policy"
	"github.com/agentd/agentd/internal/sessionpin"
)

// Bridge opens bridge sessions. NewBridgeClient implements it over gRPC;
// tests may use any fake.
type Bridge interface {
	// OpenSession opens a session for one generation. The session lives
	// until its Close, or until ctx ends, whichever comes first. Safe for
	// concurrent use.
	// asks answers what the session's servers ask of agentd while it is
	// open (ServerRequests); nil refuses every such request.
	OpenSession(ctx context.Context, req *bridgev1.OpenSessionRequest, asks ServerRequests) (BridgeSession, error)
}

// ServerRequests answers what a bridge session's MCP servers ask of
// agentd: authorization they refused (X-M1), the user's input (X-M4).
type ServerRequests interface {
	// ServerRequest returns the answer to r, which the bridge hands to
	// the server's request. ctx is the context of the tool call during
	// which the server asks (its values name the call), or the session's;
	// it ends when the request no longer waits.
	ServerRequest(ctx context.Context, r *bridgev1.ServerRequest) *bridgev1.AnswerServerRequestRequest
}

// BridgeSession is one open bridge session. ListTools and CallTool may be
// called concurrently. Close is idempotent, and returns once the bridge has
// closed every connection and process of the session; it works even when
// ctx is already cancelled (it only keeps ctx's values, for tracing). A
// session on replicated bridges moves to another replica when its own is
// lost (NewReplicatedBridgeClient).
type BridgeSession interface {
	ListTools(ctx context.Context) ([]*bridgev1.ServerTools, error)
	CallTool(ctx context.Context, server, tool, arguments string) (*bridgev1.CallToolResponse, error)
	Close(ctx context.Context)
}

// NewBridgeClient returns a Bridge that talks to one BridgeService over
// conn: the embedded bridge.
func NewBridgeClient(conn grpc.ClientConnInterface) Bridge {
	return &bridgeClient{client: bridgev1.NewBridgeServiceClient(conn)}
}

type bridgeClient struct {
	client bridgev1.BridgeServiceClient
	// replicated is set for bridges balanced by sessionpin
	// (NewReplicatedBridgeClient).
	replicated bool
	health     healthpb.HealthClient // replicated: probes a session's bridge
	log        *slog.Logger          // replicated: sessions moving
}

func (b *bridgeClient) OpenSession(ctx context.Context, req *bridgev1.OpenSessionRequest, asks ServerRequests) (BridgeSession, error) {
	if b.replicated {
		return b.openReplicated(ctx, req, asks)
	}
	s, err := b.open(ctx, req, nil, asks)
	if err != nil {
		return nil, err
	}
	if s.resumable {
		// Closed while the generation waits for a person, and opened
		// again for its next call (replicaSession.park).
		return &replicaSession{b: b, req: req, life: ctx, asks: asks, cur: s, opens: 1}, nil
	}
	return s, nil
}

// open opens a session. With pin (replicated bridges), every RPC of the
// session goes where pin says: to the replica that opened it.
func (b *bridgeClient) open(ctx context.Context, req *bridgev1.OpenSessionRequest, pin *sessionpin.Pin, asks ServerRequests) (*bridgeSession, error) {
	// The stream's context is the session's lifetime: cancelling it, or the
	// caller vanishing, makes the bridge close everything.
	sctx, cancel := context.WithCancel(ctx)
	if pin != nil {
		sctx = pin.Context(sctx)
	}
	stream, err := b.client.OpenSession(sctx, req)
	if err != nil {
		cancel()
		return nil, translateBridgeError(err)
	}
	first, err := stream.Recv()
	if err != nil {
		cancel()
		return nil, translateBridgeError(err)
	}
	id := first.GetOpened().GetSessionId()
	if id == "" {
		cancel()
		return nil, fault.New(fault.Internal, "the bridge opened a session without an id")
	}
	s := &bridgeSession{client: b.client, health: b.health, id: id, resumable: first.GetOpened().GetResumable(), pin: pin, cancel: cancel, done: make(chan struct{}), life: sctx, asks: asks}
	s.listed = first.GetOpened().GetTools()
	if pin != nil {
		s.addr = pin.Fix()
	}
	go s.watch(stream)
	return s, nil
}

type bridgeSession struct {
	client bridgev1.BridgeServiceClient
	health healthpb.HealthClient
	id     string
	// resumable: the session holds nothing of its own, so another opened
	// with the same request may take its place (SessionOpened.resumable).
	resumable bool
	// listed is the tool lists that came with the session (the request's
	// list_cached_tools), which the first ListTools returns instead of
	// calling; nil once taken, or if none came.
	listedMu sync.Mutex
	listed   *bridgev1.ListToolsResponse
	// pin sends the session's RPCs to its replica, addr; nil, and "",
	// for the embedded bridge.
	pin  *sessionpin.Pin
	addr string
	// calls is the CallTools stream the session's calls go on, opened by
	// the first call and closed when the generation parks (it waits for
	// its client with no call in flight), so that a waiting generation
	// holds no stream's goroutines (issue 15); the next call opens
	// another. parked are the streams closed so, joined by Close.
	callsMu sync.Mutex
	calls   *bridgeCallStream
	parked  []*bridgeCallStream
	nextID  uint64 // the last call id of the closed streams: ids go on across them
	cancel  context.CancelFunc
	done    chan struct{} // closed when watch returns: the bridge's session is over

	closeOnce sync.Once

	// life is the session's lifetime; asks answers its servers' requests,
	// each in a goroutine of asking, joined by Close.
	life   context.Context
	asks   ServerRequests
	asking sync.WaitGroup
}

// watch reads the session's events until the stream ends.
func (s *bridgeSession) watch(stream grpc.ServerStreamingClient[bridgev1.OpenSessionResponse]) {
	defer close(s.done)
	for {
		ev, err := stream.Recv()
		if err != nil {
			return
		}
		if r := ev.GetRequest(); r != nil {
			s.asking.Go(func() { s.answer(r) })
		}
	}
}

// answer answers a server request of the session: in the context of the
// call it came during, while that call waits, or else the session's.
func (s *bridgeSession) answer(r *bridgev1.ServerRequest) {
	ctx := s.life
	var a *bridgev1.AnswerServerRequestRequest
	if calls := s.currentCalls(); r.GetCallId() != 0 && calls != nil {
		cctx, ok := calls.context(r.GetCallId())
		if !ok {
			// The call that asked no longer waits: nobody is asked for it.
			a = refusal(fault.New(fault.Canceled, "the tool call that asked is over"))
		} else {
			// The call's values, and its end, or the session's.
			var cancel context.CancelFunc
			ctx, cancel = context.WithCancel(cctx)
			defer cancel()
			defer context.AfterFunc(s.life, cancel)()
		}
	}
	if a == nil && s.asks != nil {
		a = s.asks.ServerRequest(ctx, r)
	}
	if a == nil || a.GetAnswer() == nil {
		a = refusal(fault.New(fault.FailedPrecondition, "agentd does not answer this request of the MCP server %q", r.GetServerName()))
	}
	a.SessionId, a.Id = s.id, r.GetId()
	// The answer goes even if the caller has given up: the bridge drops
	// an answer nobody waits for.
	actx, cancel := context.WithTimeout(context.WithoutCancel(s.life), closeTimeout)
	defer cancel()
	_, _ = s.client.AnswerServerRequest(s.pinned(actx), a)
}

// pinned returns ctx for an RPC of the session: one that reaches the
// session's replica.
func (s *bridgeSession) pinned(ctx context.Context) context.Context {
	if s.pin == nil {
		return ctx
	}
	return s.pin.Context(ctx)
}

func (s *bridgeSession) ListTools(ctx context.Context) ([]*bridgev1.ServerTools, error) {
	s.listedMu.Lock()
	listed := s.listed
	s.listed = nil
	s.listedMu.Unlock()
	if listed != nil {
		return listed.GetServers(), nil
	}
	res, err := s.client.ListTools(s.pinned(ctx), &bridgev1.ListToolsRequest{SessionId: s.id})
	if err != nil {
		err = translateBridgeError(err)
		if s.gone(ctx, err) {
			return nil, &errSessionLost{addr: s.addr, err: err}
		}
		return nil, err
	}
	return res.GetServers(), nil
}

// CallTool calls over the session's CallTools stream, or with one RPC per
// call if the bridge does not serve the stream.
func (s *bridgeSession) CallTool(ctx context.Context, server, tool, arguments string) (*bridgev1.CallToolResponse, error) {
	for {
		calls, err := s.callStream()
		if err != nil {
			return nil, s.lost(translateBridgeError(err))
		}
		res, err := calls.call(ctx, server, tool, arguments)
		if errors.Is(err, errParked) {
			continue // parked as the call came: on a new stream
		}
		if !errors.Is(err, errNoCallStream) {
			return res, s.lost(err)
		}
		break
	}
	req := &bridgev1.CallToolRequest{SessionId: s.id, ServerName: server, ToolName: tool, Arguments: arguments}
	if rt := inputRetryOf(ctx); rt != nil {
		req.InputResponses, req.RequestState = rt.responses, rt.state
	}
	res, err := s.client.CallTool(s.pinned(ctx), req)
	if err != nil {
		err = translateBridgeError(err)
		if s.gone(ctx, err) {
			return nil, &errSessionLost{addr: s.addr, sent: true, err: err}
		}
		return nil, err
	}
	return res, nil
}

func (s *bridgeSession) Close(ctx context.Context) {
	s.closeOnce.Do(func() {
		select {
		case <-s.done:
			// The bridge has closed the session already, or is gone.
		default:
			// CloseSession returns once the bridge has stopped everything;
			// the generation may already be cancelled, so it gets its own
			// deadline.
			ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), closeTimeout)
			if _, err := s.client.CloseSession(s.pinned(ctx), &bridgev1.CloseSessionRequest{SessionId: s.id}); err == nil {
				// The bridge ends the session's streams itself, with OK:
				// cancelling them first would end their client spans as
				// errors ("context canceled"), yet a session that closes
				// after its generation paused or ended is no failure (X-O2).
				if calls := s.currentCalls(); calls != nil {
					calls.endedWithin(ctx)
				}
				select {
				case <-s.done:
				case <-ctx.Done():
				}
			}
			cancel()
		}
		s.cancel()
		<-s.done
		s.callsMu.Lock()
		streams := append(s.parked, s.calls)
		s.callsMu.Unlock()
		for _, c := range streams {
			if c != nil {
				c.wait()
			}
		}
		s.asking.Wait()
	})
}

// currentCalls is the session's open CallTools stream; nil if none.
func (s *bridgeSession) currentCalls() *bridgeCallStream {
	s.callsMu.Lock()
	defer s.callsMu.Unlock()
	return s.calls
}

// callStream returns the session's CallTools stream, opening one if the
// session has none (its first call, or the first since it parked).
func (s *bridgeSession) callStream() (*bridgeCallStream, error) {
	s.callsMu.Lock()
	defer s.callsMu.Unlock()
	if s.calls != nil {
		return s.calls, nil
	}
	c, err := openBridgeCallStream(s.life, s.client, s.id, s.nextID)
	if err != nil {
		return nil, err
	}
	s.calls = c
	return c, nil
}

// park closes the session's CallTools stream if no call is in flight on
// it: the generation waits for its client, maybe for hours, and a
// stream costs goroutines on both of its ends meanwhile. The bridge ends
// a half-closed stream with OK; Close joins it.
func (s *bridgeSession) park() {
	s.callsMu.Lock()
	defer s.callsMu.Unlock()
	if s.calls == nil || !s.calls.closeIdle() {
		return
	}
	s.nextID = s.calls.lastID()
	kept := s.parked[:0]
	for _, c := range s.parked {
		if !c.over() {
			kept = append(kept, c)
		}
	}
	s.parked, s.calls = append(kept, s.calls), nil
}

// translateBridgeError maps a bridge status to a fault: every classified
// kind keeps its meaning and details across the hop (the
// bridge's messages carry no secrets); a bridge that finds a request
// invalid keeps its field violations; Internal, Unknown and the like are
// our bug and hide their text.
func translateBridgeError(err error) error {
	if errors.Is(err, io.EOF) {
		return fault.New(fault.Unavailable, "the bridge closed the session stream")
	}
	st, ok := status.FromError(err)
	if !ok {
		return fault.Hide(fault.Internal, err, "bridge call failed")
	}
	if st.Code() == codes.Canceled {
		return context.Canceled
	}
	kind, ok := fault.KindOfCode(st.Code())
	if !ok {
		return fault.Hide(fault.Internal, err, "bridge call failed")
	}
	fe := &fault.Error{Kind: kind, Msg: st.Message(), Err: err}
	for _, d := range st.Details() {
		switch d := d.(type) {
		case *errdetails.ErrorInfo:
			fe.Reason, fe.Metadata = d.GetReason(), d.GetMetadata()
		case *errdetails.BadRequest:
			for _, fv := range d.GetFieldViolations() {
				fe.Violations = append(fe.Violations, fault.Violation{Field: fv.GetField(), Description: fv.GetDescription()})
			}
		}
	}
	return fe
}

// bridgeServerField matches the start of a bridge field path: the server,
// and the transport whose fields an agentd declaration holds directly.
var bridgeServerField = regexp.MustCompile(`^servers\[(\d+)\](?:\.(?:http|stdio)\b)?`)

// relocateViolations rewrites the bridge's field paths ("servers[1].ref",
// "servers[1].stdio.env") to the request's ("start.agent.mcps[3].ref",
// "start.agent.mcps[3].env"), given each bridged server's path. The code
// stays the bridge's: PermissionDenied when its configuration's rules are
// all that refuse the servers (policy.Refusal).
func relocateViolations(err error, fields []string) error {
	var fe *fault.Error
	if !errors.As(err, &fe) || len(fe.Violations) == 0 {
		return err
	}
	vs := make([]fault.Violation, len(fe.Violations))
	for i, v := range fe.Violations {
		if m := bridgeServerField.FindStringSubmatch(v.Field); m != nil {
			if n, _ := strconv.Atoi(m[1]); n < len(fields) {
				v.Field = fields[n] + v.Field[len(m[0]):]
			}
		}
		vs[i] = v
	}
	if fe.Kind == fault.Permission {
		return policy.Refusal(nil, vs)
	}
	out := fault.InvalidRequest(vs)
	out.Kind = fe.Kind
	return out
}
