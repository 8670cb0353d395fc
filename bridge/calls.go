package bridge

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"sync"

	"go.opentelemetry.io/otel/propagation"
	"google.golang.org/grpc"

	bridgev1 "github.com/agentd/agentd/gen/go/agentd/bridge/v1"
	"github.com/agentd/agentd/internal/fault"
)

// CallTools serves the tool calls of one session over one stream (see the
// proto). The handler's goroutine owns Send; a receiver goroutine owns
// Recv and starts a goroutine per call; the handler joins the calls before
// it returns, and Close joins the receivers, which end as soon as the
// handler has returned.
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
		running: make(map[uint64]context.CancelFunc),
		ended:   make(chan error, 1),
	}
	ctx, cancel := context.WithCancel(stream.Context())
	defer cancel()
	s.receivers.Go(func() { cs.receive(ctx, stream) })
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
	running map[uint64]context.CancelFunc
	stopped bool // no more calls start; set before calls.Wait begins
}

// send sends the answers until the stream is over: the client half-closed
// it or went away, the session closed, or a send failed. Then it cancels
// the running calls (unless the client half-closed: they finish) and sends
// their answers before it returns.
func (cs *callStream) send(stream grpc.BidiStreamingServer[bridgev1.CallToolsRequest, bridgev1.CallToolsResponse], cancel context.CancelFunc) error {
	var result, sendErr error
	for result == nil && sendErr == nil {
		select {
		case a := <-cs.answers:
			sendErr = stream.Send(a)
			continue
		case err := <-cs.ended:
			if err == nil { // half-closed: the running calls finish
				cs.stop(false)
				return cs.drain(stream)
			}
			result = err
		case <-cs.sess.done:
			result = fault.GRPC(fault.New(fault.NotFound, "the bridge session %q closed", cs.sess.id))
		}
	}
	if sendErr != nil {
		result = sendErr
		cancel()
	}
	cs.stop(true)
	if sendErr == nil {
		_ = cs.drain(stream)
	} else {
		cs.discard()
	}
	return result
}

// stop lets no more calls start, and cancels the running ones if asked.
func (cs *callStream) stop(cancelCalls bool) {
	cs.mu.Lock()
	defer cs.mu.Unlock()
	cs.stopped = true
	if cancelCalls {
		for _, c := range cs.running {
			c()
		}
	}
}

// drain sends the answers of the calls still running, until they are all
// answered or a send fails.
func (cs *callStream) drain(stream grpc.BidiStreamingServer[bridgev1.CallToolsRequest, bridgev1.CallToolsResponse]) error {
	done := make(chan struct{})
	go func() { cs.calls.Wait(); close(done) }()
	for {
		select {
		case a := <-cs.answers:
			if err := stream.Send(a); err != nil {
				cs.stop(true)
				cs.discardUntil(done)
				return err
			}
		case <-done:
			return nil
		}
	}
}

// discard drops the answers of the calls still running until they end.
func (cs *callStream) discard() {
	done := make(chan struct{})
	go func() { cs.calls.Wait(); close(done) }()
	cs.discardUntil(done)
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

// receive reads the client's messages until the stream ends, starting and
// cancelling calls.
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
			cs.start(ctx, k.Call)
		case *bridgev1.CallToolsRequest_Cancel:
			cs.mu.Lock()
			if c := cs.running[k.Cancel]; c != nil {
				c()
			}
			cs.mu.Unlock()
		default:
			cs.ended <- fault.GRPC(fault.New(fault.Invalid, "a CallTools stream takes open only as its first message"))
			return
		}
	}
}

// start runs one call in a goroutine of its own, unless the stream is
// ending (its client then learns the stream's end, not the call's).
func (cs *callStream) start(ctx context.Context, call *bridgev1.StreamedToolCall) {
	ctx = cs.svc.propagator.Extract(ctx, propagation.MapCarrier(call.GetTraceContext()))
	var cancel context.CancelFunc
	if t := call.GetTimeout(); t != nil {
		ctx, cancel = context.WithTimeout(ctx, t.AsDuration())
	} else {
		ctx, cancel = context.WithCancel(ctx)
	}
	id := call.GetId()
	cs.mu.Lock()
	if cs.stopped {
		cs.mu.Unlock()
		cancel()
		return
	}
	duplicate := cs.running[id] != nil
	if !duplicate {
		cs.running[id] = cancel
	}
	cs.calls.Add(1)
	cs.mu.Unlock()
	if duplicate {
		cancel()
		go func() {
			defer cs.calls.Done()
			cs.answers <- &bridgev1.CallToolsResponse{Id: id, Outcome: callError(fault.New(fault.Invalid, "call id %d is already running on this stream", id))}
		}()
		return
	}
	go func() {
		defer cs.calls.Done()
		res, err := cs.sess.callTool(ctx, call.GetServerName(), call.GetToolName(), call.GetArguments())
		cs.mu.Lock()
		delete(cs.running, id)
		cs.mu.Unlock()
		cancel()
		answer := &bridgev1.CallToolsResponse{Id: id}
		if err != nil {
			cs.sess.log.Log(ctx, levelOf(err), "tool call failed", "server", call.GetServerName(), "tool", call.GetToolName(), "code", fault.Status(err).Code().String(), "err", err)
			answer.Outcome = callError(err)
		} else {
			answer.Outcome = &bridgev1.CallToolsResponse_Result{Result: res}
		}
		cs.answers <- answer
	}()
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
