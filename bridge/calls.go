package bridge

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"sync"

	"go.opentelemetry.io/otel/propagation"
	"google.golang.org/grpc"
	"google.golang.org/protobuf/proto"

	"github.com/agentd/agentd/bridge/internal/mcpconn"
	bridgev1 "github.com/agentd/agentd/gen/go/agentd/bridge/v1"
	"github.com/agentd/agentd/internal/fault"
)

// maxAnswerBytes is the largest answer a CallTools stream sends: the
// default receive limit of a gRPC client, agentd's included. A larger one
// would end the client's whole stream, so it becomes an error for its
// call alone, as an over-large CallTool response fails only that call.
const maxAnswerBytes = 4 << 20

// errSessionClosed is the answer of a call that its session's close cut
// short: the call was not cancelled by its caller.
var errSessionClosed = fault.New(fault.FailedPrecondition, "the bridge session is closed")

// CallTools serves the tool calls of one session over one stream (see the
// proto). The handler's goroutine owns Send; a receiver goroutine owns
// Recv and starts a goroutine per call; the handler joins the calls before
// it returns, and Close joins the receivers, which end as soon as their
// handlers have returned.
func (s *Service) CallTools(stream grpc.BidiStreamingServer[bridgev1.CallToolsRequest, bridgev1.CallToolsResponse]) error {
	first, err := stream.Recv()
	if err != nil {
		if errors.Is(err, io.EOF) {
			return nil
		}
		return err
	}
	if first.GetOpen() == nil {
		return fault.GRPC(fault.New(fault.Invalid, "the first message of a CallTools stream must be open"))
	}
	sess, err := s.session(first.GetOpen().GetSessionId())
	if err != nil {
		return fault.GRPC(err)
	}
	cs := &callStream{
		svc:     s,
		sess:    sess,
		answers: make(chan *bridgev1.CallToolsResponse),
		running: make(map[uint64]context.CancelCauseFunc),
		ended:   make(chan error, 1),
	}
	ctx, cancel := context.WithCancel(stream.Context())
	defer cancel()
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		return fault.GRPC(fault.New(fault.Unavailable, "the bridge is shutting down"))
	}
	s.receivers.Add(1) // under mu: Close waits only once closed is set
	s.mu.Unlock()
	go func() {
		defer s.receivers.Done()
		cs.receive(ctx, stream)
	}()
	return cs.send(stream, cancel)
}

// callStream is one CallTools stream of a session.
type callStream struct {
	svc     *Service
	sess    *session
	answers chan *bridgev1.CallToolsResponse // from the calls to the sender
	calls   sync.WaitGroup
	ended   chan error // the receiver's end: nil for a half-close

	mu      sync.Mutex
	running map[uint64]context.CancelCauseFunc
	stopped bool // no more calls start; set before calls.Wait begins
}

// send sends the answers until the stream is over: the client half-closed
// it or went away, it broke the protocol, the session closed, or a send
// failed. Then it sends the answers of the calls still running (if it
// still can) and returns: after a half-close they finish; otherwise they
// are cancelled first.
func (cs *callStream) send(stream grpc.BidiStreamingServer[bridgev1.CallToolsRequest, bridgev1.CallToolsResponse], cancel context.CancelFunc) error {
	for {
		select {
		case a := <-cs.answers:
			if err := stream.Send(a); err != nil {
				cancel()
				cs.stop(context.Canceled)
				cs.discard()
				return err
			}
		case err := <-cs.ended:
			if err == nil { // half-closed: the running calls finish
				cs.stop(nil)
				return cs.drain(stream, cs.sess.done)
			}
			cs.stop(context.Canceled)
			cs.discard() // the client is gone or broke the protocol
			return err
		case <-cs.sess.done:
			// The session's normal end (agentd closes it after its
			// generation): the stream ends with it, without an error.
			cs.stop(errSessionClosed)
			return cs.drain(stream, nil)
		}
	}
}

// stop lets no more calls start, and cancels the running ones with cause
// unless it is nil.
func (cs *callStream) stop(cause error) {
	cs.mu.Lock()
	defer cs.mu.Unlock()
	cs.stopped = true
	if cause != nil {
		for _, c := range cs.running {
			c(cause)
		}
	}
}

// drain sends the answers of the calls still running until they are all
// answered, cancelling them if the session closes meanwhile (sessionDone,
// nil once closed).
func (cs *callStream) drain(stream grpc.BidiStreamingServer[bridgev1.CallToolsRequest, bridgev1.CallToolsResponse], sessionDone <-chan struct{}) error {
	done := cs.callsDone()
	for {
		select {
		case a := <-cs.answers:
			if err := stream.Send(a); err != nil {
				cs.stop(context.Canceled)
				cs.discardUntil(done)
				return err
			}
		case <-sessionDone:
			sessionDone = nil
			cs.stop(errSessionClosed)
		case <-done:
			return nil
		}
	}
}

// discard drops the answers of the calls still running until they end.
func (cs *callStream) discard() { cs.discardUntil(cs.callsDone()) }

// callsDone is closed once every call has answered (stop was called, so
// no call starts after).
func (cs *callStream) callsDone() <-chan struct{} {
	done := make(chan struct{})
	go func() { cs.calls.Wait(); close(done) }()
	return done
}

func (cs *callStream) discardUntil(done <-chan struct{}) {
	for {
		select {
		case <-cs.answers:
		case <-done:
			return
		}
	}
}

// receive reads the client's messages until the stream ends or the client
// breaks the protocol, starting and cancelling calls.
func (cs *callStream) receive(ctx context.Context, stream grpc.BidiStreamingServer[bridgev1.CallToolsRequest, bridgev1.CallToolsResponse]) {
	for {
		req, err := stream.Recv()
		if err != nil {
			if errors.Is(err, io.EOF) {
				err = nil
			}
			cs.ended <- err
			return
		}
		switch k := req.GetKind().(type) {
		case *bridgev1.CallToolsRequest_Call:
			if err := cs.start(ctx, k.Call); err != nil {
				cs.ended <- fault.GRPC(err)
				return
			}
		case *bridgev1.CallToolsRequest_Cancel:
			cs.mu.Lock()
			if c := cs.running[k.Cancel]; c != nil {
				c(context.Canceled)
			}
			cs.mu.Unlock()
		default:
			cs.ended <- fault.GRPC(fault.New(fault.Invalid, "a CallTools stream takes open only as its first message"))
			return
		}
	}
}

// start runs one call in a goroutine of its own, unless the stream is
// ending (its client then learns the stream's end, not the call's). An id
// that a running call already has breaks the protocol.
func (cs *callStream) start(ctx context.Context, call *bridgev1.StreamedToolCall) error {
	id := call.GetId()
	ctx = cs.svc.propagator.Extract(ctx, propagation.MapCarrier(call.GetTraceContext()))
	ctx, cancel := context.WithCancelCause(ctx)
	stopTimer := context.CancelFunc(func() {})
	if t := call.GetTimeout(); t != nil {
		ctx, stopTimer = context.WithTimeout(ctx, t.AsDuration())
	}
	cs.mu.Lock()
	switch {
	case cs.stopped:
		cs.mu.Unlock()
		cancel(nil)
		stopTimer()
		return nil
	case cs.running[id] != nil:
		cs.mu.Unlock()
		cancel(nil)
		stopTimer()
		return fault.New(fault.Invalid, "call id %d is already running on this CallTools stream", id)
	}
	cs.running[id] = cancel
	cs.calls.Add(1)
	cs.mu.Unlock()
	go func() {
		defer cs.calls.Done()
		// The server's progress reports go ahead of the answer.
		relay := newProgressRelay(func(p *bridgev1.ToolProgress) {
			cs.answers <- &bridgev1.CallToolsResponse{Id: id, Outcome: &bridgev1.CallToolsResponse_Progress{Progress: p}}
		})
		callCtx := withRetry(withCallID(mcpconn.WithProgress(ctx, relay.note), id), call.GetInputResponses(), call.GetRequestState())
		res, err := cs.sess.callTool(callCtx, call.GetServerName(), call.GetToolName(), call.GetArguments())
		relay.close()
		if err != nil && errors.Is(context.Cause(ctx), errSessionClosed) {
			err = errSessionClosed
		}
		cs.mu.Lock()
		delete(cs.running, id)
		cs.mu.Unlock()
		cancel(nil)
		stopTimer()
		answer := &bridgev1.CallToolsResponse{Id: id, Outcome: &bridgev1.CallToolsResponse_Result{Result: res}}
		if err == nil && proto.Size(answer) > maxAnswerBytes {
			err = fault.New(fault.Exhausted, "the result of the tool %q is %d bytes, more than the %d a CallTools answer carries", call.GetToolName(), proto.Size(answer), maxAnswerBytes)
		}
		if err != nil {
			cs.sess.log.Log(ctx, levelOf(err), "tool call failed", "server", call.GetServerName(), "tool", call.GetToolName(), "code", fault.Status(err).Code().String(), "err", err)
			answer.Outcome = callError(err)
		}
		cs.answers <- answer
	}()
	return nil
}

// callError is err as CallTool's status would carry it.
func callError(err error) *bridgev1.CallToolsResponse_Error {
	p := fault.Status(err).Proto()
	return &bridgev1.CallToolsResponse_Error{Error: &bridgev1.CallError{Code: p.GetCode(), Message: p.GetMessage(), Details: p.GetDetails()}}
}

// levelOf is how loudly a failed call is logged: the caller's own
// cancellation is routine.
func levelOf(err error) slog.Level {
	switch fault.KindOf(err) {
	case fault.Canceled:
		return slog.LevelDebug
	case fault.Internal:
		return slog.LevelError
	}
	return slog.LevelWarn
}
