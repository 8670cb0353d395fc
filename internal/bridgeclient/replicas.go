package bridgeclient

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"

	bridgev1 "github.com/agentd/agentd/gen/go/agentd/bridge/v1"
	"github.com/agentd/agentd/internal/fault"
	"github.com/agentd/agentd/internal/sessionpin"
	"github.com/agentd/agentd/internal/toolerror"
)

// Replicated remote bridges. `agentd bridge` may run as several
// replicas behind one address. A bridge session holds state in one of
// them (its stdio servers' processes, its HTTP MCP sessions), so each
// session is pinned to the replica that opened it (sessionpin), and when
// that replica is lost the session cannot be saved: its generation moves
// to a new session on another replica. A call that had gone to the lost
// replica may or may not have run there; it is reported to the model as
// such and never sent again. A call that had not gone yet runs on the new
// session. The new session starts its servers afresh: whatever a stdio
// server kept in memory is gone, as it is after a pause.

// maxSessionOpens bounds how many sessions one generation opens (the first
// and its replacements): a bridge that loses every session it opens must
// not keep a generation going round.
const maxSessionOpens = 4

// NewReplicated returns a Client that talks to the BridgeService replicas
// that conn balances with sessionpin (sessionpin.ServiceConfig).
// Each session's RPCs reach the replica that opened it. A session lost
// with its replica (the connection to it broke, or the replica ended the
// session) is replaced by one on another replica: the calls it had sent
// are answered as of unknown outcome (a tool error for the model; they
// may or may not have run, and are not sent again), and its later calls
// go to the new session. log records the moves.
func NewReplicated(conn grpc.ClientConnInterface, log *slog.Logger) *Client {
	return &Client{
		client:     bridgev1.NewBridgeServiceClient(conn),
		replicated: true,
		health:     healthpb.NewHealthClient(conn),
		log:        log,
	}
}

// errSessionLost says a bridge session is gone with its replica, at addr.
type errSessionLost struct {
	addr string
	// sent says the failed call had gone to the replica: it may or may
	// not have run there.
	sent bool
	err  error // why, translated: Unavailable
}

func (e *errSessionLost) Error() string { return e.err.Error() }
func (e *errSessionLost) Unwrap() error { return e.err }

// lost turns the error of a call that the loss of a replicated session
// cut short into *errSessionLost; any other error is returned as it is.
func (s *session) lost(err error) error {
	var cut *callCut
	if s.pin == nil || !errors.As(err, &cut) || !cut.lost {
		return err
	}
	return &errSessionLost{addr: s.addr, sent: cut.sent, err: cut.err}
}

// gone reports whether err, the Unavailable error of a unary RPC of a
// replicated session, came of losing the session's replica rather than
// from the bridge (which says Unavailable too when an MCP server cannot
// be reached). The connection's end ends the session's OpenSession
// stream, on the same connection, at once; a health check pinned to the
// replica settles a race with that: it fails Unavailable when the replica
// is not connected.
func (s *session) gone(ctx context.Context, err error) bool {
	if s.pin == nil || fault.KindOf(err) != fault.Unavailable {
		return false
	}
	select {
	case <-s.done:
		return true
	default:
	}
	_, err = s.health.Check(s.pinned(ctx), &healthpb.HealthCheckRequest{})
	if status.Code(err) == codes.Unavailable {
		return true
	}
	select {
	case <-s.done:
		return true
	default:
		return false
	}
}

// replicaSession is a generation's session on replicated bridges, or a
// resumable session on the embedded bridge: the current bridge session,
// replaced when it is lost (replicated bridges), or, if resumable and
// embedded, closed while the generation waits for a person and replaced
// by another for the generation's next call (Park), so that a waiting
// generation holds no bridge stream at all. (On replicated bridges the
// next session may open on another replica, with another shared process,
// so a waiting generation keeps its session there.)
type replicaSession struct {
	c *Client
	// req opens the generation's first session and never changes; reopen
	// opens every later one, which need not bring the tool lists
	// (laterOpen), made under mu when first needed.
	req, reopen *bridgev1.OpenSessionRequest
	first       bool // no session opened yet: the next opens with req
	// life is the context OpenSession was given: the lifetime of every
	// session this one opens, as Client.OpenSession says.
	life    context.Context
	answers Answerer

	// mu is held while a session opens, so that the calls that find the
	// session lost wait for one replacement.
	mu      sync.Mutex
	cur     *session // nil once lost or parked, until a call opens the next
	avoid   string   // the replica of the last loss: the next opens elsewhere
	opens   int      // sessions opened but for those that followed a park
	lastErr error    // why the last session was lost, for when no more may open
	closed  bool
	// parked: cur was closed as the generation waited; the session that
	// the next call opens replaces no lost one. busy counts the calls
	// (ListTools, CallTool) using cur: a session in use is not parked.
	parked bool
	busy   int
	// closing joins the closes of parked sessions.
	closing sync.WaitGroup
}

func (c *Client) openReplicated(ctx context.Context, req *bridgev1.OpenSessionRequest, answers Answerer) (Session, error) {
	r := &replicaSession{c: c, req: req, first: true, life: ctx, answers: answers}
	if _, err := r.session(); err != nil {
		return nil, err
	}
	r.release()
	return r, nil
}

// session returns the current session, opening one if there is none,
// and counts one more call using it, which release ends. A session that
// fails to open Unavailable on replicated bridges (its replica died
// meanwhile, or is shutting down) is tried again on another replica:
// nothing ran.
func (r *replicaSession) session() (*session, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.closed {
		return nil, fault.New(fault.FailedPrecondition, "the bridge session is closed")
	}
	for r.cur == nil {
		resume := r.parked
		r.parked = false
		if !resume {
			if r.opens >= maxSessionOpens {
				return nil, fault.Wrap(fault.Unavailable, r.lastErr, "the generation lost %d bridge sessions; it stops", r.opens)
			}
			r.opens++
		}
		var pin *sessionpin.Pin
		if r.c.replicated {
			pin = sessionpin.New(r.avoid)
		}
		s, err := r.c.open(r.life, r.openRequest(), pin, r.answers)
		if err != nil {
			if pin == nil || fault.KindOf(err) != fault.Unavailable || r.opens >= maxSessionOpens {
				r.parked = resume // a resume that failed is still one: the next call tries again
				return nil, err
			}
			r.avoid = pin.Addr()
			continue
		}
		r.first = false
		if r.opens > 1 && !resume && r.c.log != nil {
			r.c.log.InfoContext(r.life, "generation continues on a new bridge session", "generation", r.req.GetGenerationId(), "bridge", s.addr, "opens", r.opens)
		}
		r.cur = s
	}
	r.busy++
	return r.cur, nil
}

// openRequest is the request that opens the next session: req for the
// generation's first, and reopen for every later one. mu is held.
func (r *replicaSession) openRequest() *bridgev1.OpenSessionRequest {
	if r.first {
		return r.req
	}
	if r.reopen == nil {
		r.reopen = laterOpen(r.req)
	}
	return r.reopen
}

// laterOpen is req for the sessions a generation opens after its first,
// which need not bring the tool lists (list_cached_tools): the generation
// has listed its tools already, and a cache lookup counts as a hit.
func laterOpen(req *bridgev1.OpenSessionRequest) *bridgev1.OpenSessionRequest {
	if !req.GetListCachedTools() {
		return req
	}
	later := proto.Clone(req).(*bridgev1.OpenSessionRequest)
	later.ListCachedTools = false
	return later
}

// release ends a use of the session that session counted.
func (r *replicaSession) release() {
	r.mu.Lock()
	r.busy--
	r.mu.Unlock()
}

// lose replaces s, lost with its replica, by nothing: the next call opens a
// session on another replica. Calls that find s lost after another has
// replaced it change nothing.
func (r *replicaSession) lose(s *session, why *errSessionLost) {
	r.mu.Lock()
	if r.cur != s {
		r.mu.Unlock()
		return
	}
	r.cur, r.avoid, r.lastErr = nil, why.addr, why.err
	r.mu.Unlock()
	r.c.log.WarnContext(r.life, "bridge session lost with its bridge; calls in flight there may or may not have run, and the generation continues on another bridge",
		"generation", r.req.GetGenerationId(), "bridge", why.addr, "err", why.err)
	s.Close(r.life)
}

func (r *replicaSession) ListTools(ctx context.Context) ([]*bridgev1.ServerTools, error) {
	for {
		s, err := r.session()
		if err != nil {
			return nil, err
		}
		tools, err := s.ListTools(ctx)
		var lost *errSessionLost
		if !errors.As(err, &lost) {
			r.release()
			return tools, err
		}
		r.lose(s, lost) // before the release: a park meanwhile must not take the lost session for idle
		r.release()
	}
}

func (r *replicaSession) CallTool(ctx context.Context, server, tool, arguments string) (*bridgev1.CallToolResponse, error) {
	for {
		s, err := r.session()
		if err != nil {
			return nil, err
		}
		res, err := s.CallTool(ctx, server, tool, arguments)
		var lost *errSessionLost
		if !errors.As(err, &lost) {
			r.release()
			return res, err
		}
		r.lose(s, lost) // before the release, as in ListTools
		r.release()
		if lost.sent {
			return &bridgev1.CallToolResponse{IsError: true, Output: lostCallOutput(server)}, nil
		}
	}
}

// Park readies the session for a wait that may last hours. A resumable
// session on the embedded bridge that no call uses closes, in the
// background (Close joins it), and the generation's next call opens
// another: the generation then holds no stream of the bridge's, on either
// end, while it waits. Any other session parks its tool-call stream
// (session.Park).
func (r *replicaSession) Park() {
	r.mu.Lock()
	s := r.cur
	closes := s != nil && s.resumable && !r.c.replicated && r.busy == 0
	if closes {
		r.cur, r.parked = nil, true
	}
	r.mu.Unlock()
	switch {
	case closes:
		r.closing.Go(func() { s.Close(r.life) })
	case s != nil:
		s.Park()
	}
}

// lostCallOutput is what the model reads of a call whose bridge was lost
// while it ran.
func lostCallOutput(server string) string {
	return toolerror.JSON(fmt.Sprintf(
		"the bridge running the MCP server %q went away during the call, so it may or may not have run; it is not run again, and the server's next call starts afresh on another bridge", server))
}

func (r *replicaSession) Close(ctx context.Context) {
	r.mu.Lock()
	s := r.cur
	r.cur, r.closed = nil, true
	r.mu.Unlock()
	if s != nil {
		s.Close(ctx)
	}
	r.closing.Wait()
}
