// Package bridgeclient is agentd's client of the bridge
// (agentd.bridge.v1.BridgeService): a session per generation, tool calls
// over the session's CallTools stream, replicated bridges with each
// session pinned to its replica (internal/sessionpin) and moved when its
// replica is lost, and the translation of the bridge's errors into faults.
package bridgeclient

import (
	"context"
	"errors"
	"log/slog"
	"sync"
	"time"

	"google.golang.org/grpc"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"

	bridgev1 "github.com/agentd/agentd/gen/go/agentd/bridge/v1"
	"github.com/agentd/agentd/internal/fault"
	"github.com/agentd/agentd/internal/sessionpin"
)

// closeTimeout bounds what a session sends the bridge after its caller may
// have gone: its close, which a generation makes as it ends, and the answer
// to one of its servers' requests.
const closeTimeout = 30 * time.Second

// Answerer answers what a bridge session's MCP servers ask of agentd:
// authorization they refused, the user's input, a sample of the model.
type Answerer interface {
	// Answer returns the answer to r, which the bridge hands to the
	// server's request; nil, or one without an answer, refuses it. ctx is
	// the context of the tool call during which the server asks (its
	// values name the call), or the session's; it ends when the request
	// no longer waits. Called concurrently, one goroutine per request.
	Answer(ctx context.Context, r *bridgev1.ServerRequest) *bridgev1.AnswerServerRequestRequest
}

// Session is one open bridge session. ListTools and CallTool may be
// called concurrently. Close is idempotent, and returns once the bridge has
// closed every connection and process of the session; it works even when
// ctx is already cancelled (it only keeps ctx's values, for tracing). A
// session on replicated bridges moves to another replica when its own is
// lost (NewReplicated).
type Session interface {
	ListTools(ctx context.Context) ([]*bridgev1.ServerTools, error)
	CallTool(ctx context.Context, server, tool, arguments string) (*bridgev1.CallToolResponse, error)
	Close(ctx context.Context)
}

// Client opens bridge sessions.
type Client struct {
	client bridgev1.BridgeServiceClient
	// replicated is set for bridges balanced by sessionpin (NewReplicated).
	replicated bool
	health     healthpb.HealthClient // replicated: probes a session's bridge
	log        *slog.Logger          // replicated: sessions moving
}

// New returns a Client that talks to one BridgeService over conn: the
// embedded bridge.
func New(conn grpc.ClientConnInterface) *Client {
	return &Client{client: bridgev1.NewBridgeServiceClient(conn)}
}

// OpenSession opens a session for one generation. The session lives until
// its Close, or until ctx ends, whichever comes first. Safe for concurrent
// use. answers answers what the session's servers ask of agentd while it is
// open; nil refuses every such request.
//
// The session also has Park (interface{ Park() }), for a generation about
// to wait for a person, maybe for hours: it closes what the session holds
// idle meanwhile, and the next call opens it again. Park may be called
// concurrently with the session's other methods.
func (c *Client) OpenSession(ctx context.Context, req *bridgev1.OpenSessionRequest, answers Answerer) (Session, error) {
	if c.replicated {
		return c.openReplicated(ctx, req, answers)
	}
	s, err := c.open(ctx, req, nil, answers)
	if err != nil {
		return nil, err
	}
	if s.resumable {
		// Closed while the generation waits for a person, and opened
		// again for its next call (replicaSession.Park).
		return &replicaSession{c: c, req: req, life: ctx, answers: answers, cur: s, opens: 1}, nil
	}
	return s, nil
}

// open opens a session. With pin (replicated bridges), every RPC of the
// session goes where pin says: to the replica that opened it.
func (c *Client) open(ctx context.Context, req *bridgev1.OpenSessionRequest, pin *sessionpin.Pin, answers Answerer) (*session, error) {
	// The stream's context is the session's lifetime: cancelling it, or the
	// caller vanishing, makes the bridge close everything.
	sctx, cancel := context.WithCancel(ctx)
	if pin != nil {
		sctx = pin.Context(sctx)
	}
	stream, err := c.client.OpenSession(sctx, req)
	if err != nil {
		cancel()
		return nil, translateError(err)
	}
	first, err := stream.Recv()
	if err != nil {
		cancel()
		return nil, translateError(err)
	}
	id := first.GetOpened().GetSessionId()
	if id == "" {
		cancel()
		return nil, fault.New(fault.Internal, "the bridge opened a session without an id")
	}
	s := &session{client: c.client, health: c.health, id: id, resumable: first.GetOpened().GetResumable(), pin: pin, cancel: cancel, done: make(chan struct{}), life: sctx, answers: answers}
	s.listed = first.GetOpened().GetTools()
	if pin != nil {
		s.addr = pin.Fix()
	}
	go s.watch(stream)
	return s, nil
}

type session struct {
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
	// holds no stream's goroutines; the next call opens another. parked
	// are the streams closed so, joined by Close.
	callsMu sync.Mutex
	calls   *callStream
	parked  []*callStream
	nextID  uint64 // the last call id of the closed streams: ids go on across them
	cancel  context.CancelFunc
	done    chan struct{} // closed when watch returns: the bridge's session is over

	closeOnce sync.Once

	// life is the session's lifetime; answers answers its servers'
	// requests, each in a goroutine of asking, joined by Close.
	life    context.Context
	answers Answerer
	asking  sync.WaitGroup
}

// watch reads the session's events until the stream ends.
func (s *session) watch(stream grpc.ServerStreamingClient[bridgev1.OpenSessionResponse]) {
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
func (s *session) answer(r *bridgev1.ServerRequest) {
	ctx := s.life
	var a *bridgev1.AnswerServerRequestRequest
	if calls := s.currentCalls(); r.GetCallId() != 0 && calls != nil {
		cctx, ok := calls.context(r.GetCallId())
		if !ok {
			// The call that asked no longer waits: nobody is asked for it.
			a = Refusal(fault.New(fault.Canceled, "the tool call that asked is over"))
		} else {
			// The call's values, and its end, or the session's.
			var cancel context.CancelFunc
			ctx, cancel = context.WithCancel(cctx)
			defer cancel()
			defer context.AfterFunc(s.life, cancel)()
		}
	}
	if a == nil && s.answers != nil {
		a = s.answers.Answer(ctx, r)
	}
	if a == nil || a.GetAnswer() == nil {
		a = Refusal(fault.New(fault.FailedPrecondition, "agentd does not answer this request of the MCP server %q", r.GetServerName()))
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
func (s *session) pinned(ctx context.Context) context.Context {
	if s.pin == nil {
		return ctx
	}
	return s.pin.Context(ctx)
}

func (s *session) ListTools(ctx context.Context) ([]*bridgev1.ServerTools, error) {
	s.listedMu.Lock()
	listed := s.listed
	s.listed = nil
	s.listedMu.Unlock()
	if listed != nil {
		return listed.GetServers(), nil
	}
	res, err := s.client.ListTools(s.pinned(ctx), &bridgev1.ListToolsRequest{SessionId: s.id})
	if err != nil {
		err = translateError(err)
		if s.gone(ctx, err) {
			return nil, &errSessionLost{addr: s.addr, err: err}
		}
		return nil, err
	}
	return res.GetServers(), nil
}

// CallTool calls over the session's CallTools stream, or with one RPC per
// call if the bridge does not serve the stream.
func (s *session) CallTool(ctx context.Context, server, tool, arguments string) (*bridgev1.CallToolResponse, error) {
	for {
		calls, err := s.callStream()
		if err != nil {
			return nil, s.lost(translateError(err))
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
		err = translateError(err)
		if s.gone(ctx, err) {
			return nil, &errSessionLost{addr: s.addr, sent: true, err: err}
		}
		return nil, err
	}
	return res, nil
}

func (s *session) Close(ctx context.Context) {
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
				// after its generation paused or ended is no failure, and
				// its trace must not say it is.
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
func (s *session) currentCalls() *callStream {
	s.callsMu.Lock()
	defer s.callsMu.Unlock()
	return s.calls
}

// callStream returns the session's CallTools stream, opening one if the
// session has none (its first call, or the first since it parked).
func (s *session) callStream() (*callStream, error) {
	s.callsMu.Lock()
	defer s.callsMu.Unlock()
	if s.calls != nil {
		return s.calls, nil
	}
	c, err := openCallStream(s.life, s.client, s.id, s.nextID)
	if err != nil {
		return nil, err
	}
	s.calls = c
	return c, nil
}

// Park closes the session's CallTools stream if no call is in flight on
// it: the generation waits for its client, maybe for hours, and a
// stream costs goroutines on both of its ends meanwhile. The bridge ends
// a half-closed stream with OK; Close joins it.
func (s *session) Park() {
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
