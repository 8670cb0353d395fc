package bridgeclient

import (
	"context"
	"errors"
	"io"
	"sync"
	"time"

	"go.opentelemetry.io/otel/propagation"
	spb "google.golang.org/genproto/googleapis/rpc/status"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/durationpb"

	bridgev1 "github.com/agentd/agentd/gen/go/agentd/bridge/v1"
	"github.com/agentd/agentd/internal/fault"
	"github.com/agentd/agentd/internal/telemetry"
)

// maxCallBytes is the largest call a CallTools stream carries: the default
// receive limit of a gRPC server, the bridge's included. A larger one would
// end the whole stream, so it fails alone, as an over-large CallTool
// request does.
const maxCallBytes = 4 << 20

// errNoCallStream means the bridge does not serve CallTools (an older
// bridge): calls go one RPC each instead.
var errNoCallStream = errors.New("the bridge does not serve CallTools")

// errParked means the stream was closed as idle before the call joined
// it: the call goes on the session's next stream.
var errParked = errors.New("the tool-call stream was closed while idle")

// callStream carries a session's tool calls over one CallTools stream:
// callers register a call and hand it to the sender goroutine, which owns
// Send; the receiver goroutine, which owns Recv, hands each answer to its
// caller. Both end with the stream (its context is the session's), and
// wait joins them.
type callStream struct {
	stream     grpc.BidiStreamingClient[bridgev1.CallToolsRequest, bridgev1.CallToolsResponse]
	propagator propagation.TextMapPropagator
	reqs       chan *bridgev1.CallToolsRequest // calls, to the sender
	wake       chan struct{}                   // cancels are pending
	done       chan struct{}                   // closed when the receiver ends
	sendDone   chan struct{}                   // closed when the sender ends
	joined     sync.WaitGroup

	mu      sync.Mutex
	nextID  uint64
	waiting map[uint64]*pendingCall
	cancels []uint64 // calls whose callers gave up, for the sender
	closing bool     // closeIdle asked the sender to half-close: no call may join
	err     error    // why the stream ended, set before done closes
	unsent  uint64   // the call whose Send failed, set before sendDone closes
}

// openCallStream opens the CallTools stream of session id; ctx is the
// session's lifetime. Its call ids go on after lastID, the last of the
// session's earlier streams.
func openCallStream(ctx context.Context, client bridgev1.BridgeServiceClient, id string, lastID uint64) (*callStream, error) {
	stream, err := client.CallTools(ctx)
	if err != nil {
		return nil, err
	}
	open := &bridgev1.CallToolsRequest{Kind: &bridgev1.CallToolsRequest_Open{Open: &bridgev1.CallToolsOpen{SessionId: id}}}
	if err := stream.Send(open); err != nil && !errors.Is(err, io.EOF) {
		return nil, err
	}
	// A failed open shows on Recv, as the stream's end.
	c := &callStream{
		stream:     stream,
		propagator: telemetry.Propagator(),
		reqs:       make(chan *bridgev1.CallToolsRequest),
		wake:       make(chan struct{}, 1),
		done:       make(chan struct{}),
		sendDone:   make(chan struct{}),
		waiting:    make(map[uint64]*pendingCall),
		nextID:     lastID,
	}
	c.joined.Go(c.receive)
	c.joined.Go(c.send)
	return c, nil
}

// wait returns once both goroutines have ended; the stream's context must
// be over.
func (c *callStream) wait() { c.joined.Wait() }

// endedWithin waits until the stream has ended or ctx does.
func (c *callStream) endedWithin(ctx context.Context) {
	select {
	case <-c.done:
	case <-ctx.Done():
	}
}

func (c *callStream) receive() {
	defer close(c.done)
	for {
		res, err := c.stream.Recv()
		if err != nil {
			c.mu.Lock()
			c.err = err
			c.mu.Unlock()
			return
		}
		progress := res.GetProgress()
		c.mu.Lock()
		p := c.waiting[res.GetId()]
		if progress == nil {
			delete(c.waiting, res.GetId())
		}
		c.mu.Unlock()
		switch {
		case p == nil:
		case progress != nil:
			p.progressed(progress) // never blocks
		default:
			p.answer <- res // buffered: never blocks
		}
	}
}

func (c *callStream) send() {
	defer close(c.sendDone)
	for {
		select {
		case req := <-c.reqs:
			if c.stream.Send(req) != nil {
				// Not sent: a failed Send queues nothing. The receiver
				// learns why.
				c.mu.Lock()
				c.unsent = req.GetCall().GetId()
				c.mu.Unlock()
				return
			}
		case <-c.wake:
			c.mu.Lock()
			ids, closing := c.cancels, c.closing
			c.cancels = nil
			c.mu.Unlock()
			if closing {
				// Idle (closeIdle): half-close; the bridge ends the
				// stream with OK, and the receiver with it.
				_ = c.stream.CloseSend()
				return
			}
			for _, id := range ids {
				if c.stream.Send(&bridgev1.CallToolsRequest{Kind: &bridgev1.CallToolsRequest_Cancel{Cancel: id}}) != nil {
					return
				}
			}
		case <-c.done:
			return
		}
	}
}

// closeIdle asks the sender to half-close the stream if no call waits on
// it, and reports whether it did; no call joins the stream afterwards.
func (c *callStream) closeIdle() bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.closing || len(c.waiting) > 0 || len(c.cancels) > 0 {
		return false
	}
	select {
	case <-c.done:
		return false // over already: the session's Close joins it
	default:
	}
	c.closing = true
	c.wakeSender()
	return true
}

// lastID is the id of the stream's last call.
func (c *callStream) lastID() uint64 {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.nextID
}

// over reports whether both of the stream's goroutines have ended.
func (c *callStream) over() bool {
	select {
	case <-c.done:
	default:
		return false
	}
	select {
	case <-c.sendDone:
		return true
	default:
		return false
	}
}

// context returns the context of the call id while it waits.
func (c *callStream) context(id uint64) (context.Context, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	p := c.waiting[id]
	if p == nil {
		return nil, false
	}
	return p.ctx, true
}

// call runs one call and waits for its answer. A caller that gives up
// returns at once; the bridge is told to cancel the call.
func (c *callStream) call(ctx context.Context, server, tool, arguments string) (*bridgev1.CallToolResponse, error) {
	p := &pendingCall{ctx: ctx, answer: make(chan *bridgev1.CallToolsResponse, 1), wake: make(chan struct{}, 1)}
	id, ok := c.join(p)
	if !ok {
		// Parked meanwhile: the session opens another stream for the
		// next call; this one takes none.
		return nil, errParked
	}
	req := c.request(ctx, id, server, tool, arguments)
	if n := proto.Size(req); n > maxCallBytes {
		c.forget(id)
		return nil, fault.New(fault.Exhausted, "the arguments of the tool %q are %d bytes, more than the %d the bridge takes", tool, n, maxCallBytes)
	}
	select {
	case c.reqs <- req:
	case <-c.done:
		c.forget(id)
		return nil, c.ended(id, false)
	case <-ctx.Done():
		c.forget(id)
		return nil, contextError(ctx)
	}
	return c.await(ctx, id, p)
}

// join makes p a call of the stream, under the next id; false if the
// stream is closing as idle, when no call joins it.
func (c *callStream) join(p *pendingCall) (uint64, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.closing {
		return 0, false
	}
	c.nextID++
	c.waiting[c.nextID] = p
	return c.nextID, true
}

// request is the stream's request for call id, carrying ctx's input retry,
// and its trace context and deadline as a gRPC call would.
func (c *callStream) request(ctx context.Context, id uint64, server, tool, arguments string) *bridgev1.CallToolsRequest {
	call := &bridgev1.StreamedToolCall{Id: id, ServerName: server, ToolName: tool, Arguments: arguments, TraceContext: map[string]string{}}
	if rt := inputRetryOf(ctx); rt != nil {
		call.InputResponses, call.RequestState = rt.responses, rt.state
	}
	c.propagator.Inject(ctx, propagation.MapCarrier(call.TraceContext))
	if deadline, ok := ctx.Deadline(); ok {
		call.Timeout = durationpb.New(time.Until(deadline))
	}
	return &bridgev1.CallToolsRequest{Kind: &bridgev1.CallToolsRequest_Call{Call: call}}
}

// await waits for the answer to call id, which the sender has, handing
// its progress reports to ctx's WithProgress function meanwhile.
func (c *callStream) await(ctx context.Context, id uint64, p *pendingCall) (*bridgev1.CallToolResponse, error) {
	onProgress, _ := ctx.Value(progressKey{}).(func(*bridgev1.ToolProgress))
	for {
		select {
		case res := <-p.answer:
			p.report(onProgress) // the last report comes before the end
			return outcome(res)
		case <-p.wake:
			p.report(onProgress)
		case <-c.done:
			select {
			case res := <-p.answer: // answered just before the end
				p.report(onProgress)
				return outcome(res)
			default:
			}
			return nil, c.ended(id, true)
		case <-ctx.Done():
			c.giveUp(id)
			return nil, contextError(ctx)
		}
	}
}

// giveUp forgets call id, whose caller gave up, and has the sender tell
// the bridge to cancel it.
func (c *callStream) giveUp(id uint64) {
	c.mu.Lock()
	delete(c.waiting, id)
	c.cancels = append(c.cancels, id)
	c.mu.Unlock()
	c.wakeSender()
}

// wakeSender has the sender look at cancels and closing; it never blocks.
func (c *callStream) wakeSender() {
	select {
	case c.wake <- struct{}{}:
	default:
	}
}

// pendingCall is a call waiting for its answer, and the latest progress
// report the bridge sent for it that its caller has not taken yet: the
// receiver never waits on a caller, so a report that comes before the
// caller took the last replaces it.
type pendingCall struct {
	ctx    context.Context                  // the caller's: a server request during the call runs in it
	answer chan *bridgev1.CallToolsResponse // buffered: one answer
	wake   chan struct{}                    // a report is pending

	mu     sync.Mutex
	latest *bridgev1.ToolProgress
}

func (p *pendingCall) progressed(pr *bridgev1.ToolProgress) {
	p.mu.Lock()
	p.latest = pr
	p.mu.Unlock()
	select {
	case p.wake <- struct{}{}:
	default:
	}
}

// report hands the pending report, if any, to f (nil: drops it).
func (p *pendingCall) report(f func(*bridgev1.ToolProgress)) {
	p.mu.Lock()
	pr := p.latest
	p.latest = nil
	p.mu.Unlock()
	if pr != nil && f != nil {
		f(pr)
	}
}

func (c *callStream) forget(id uint64) {
	c.mu.Lock()
	delete(c.waiting, id)
	c.mu.Unlock()
}

// callCut is the error of a call that the end of its CallTools stream cut
// short.
type callCut struct {
	// sent says the call had gone to the stream: it may have run.
	sent bool
	// lost says the stream broke (Unavailable: the connection to the
	// bridge was lost) or the bridge ended it (the session is over
	// there): the session is gone with it. Otherwise the bridge refused
	// the stream, or the caller ended it.
	lost bool
	err  error // translated
}

func (e *callCut) Error() string { return e.err.Error() }
func (e *callCut) Unwrap() error { return e.err }

// ended is the error of call id, which the stream's end cut short;
// handed says the caller had handed it to the sender.
func (c *callStream) ended(id uint64, handed bool) error {
	c.mu.Lock()
	err := c.err
	c.mu.Unlock()
	if status.Code(err) == codes.Unimplemented {
		return errNoCallStream
	}
	sent := false
	if handed {
		<-c.sendDone // the stream is over: the sender is returning
		c.mu.Lock()
		sent = c.unsent != id
		c.mu.Unlock()
	}
	if err == nil || errors.Is(err, io.EOF) {
		return &callCut{sent: sent, lost: true, err: fault.New(fault.Unavailable, "the bridge ended the tool-call stream")}
	}
	return &callCut{sent: sent, lost: status.Code(err) == codes.Unavailable, err: translateError(err)}
}

// outcome is a call's answer as CallTool would have returned it.
func outcome(res *bridgev1.CallToolsResponse) (*bridgev1.CallToolResponse, error) {
	if e := res.GetError(); e != nil {
		return nil, translateError(status.FromProto(&spb.Status{Code: e.GetCode(), Message: e.GetMessage(), Details: e.GetDetails()}).Err())
	}
	if res.GetResult() == nil {
		return nil, fault.New(fault.Internal, "the bridge answered call %d with no outcome", res.GetId())
	}
	return res.GetResult(), nil
}

// contextError is the error of a call whose caller gave up, as a unary
// call's would be.
func contextError(ctx context.Context) error {
	return translateError(status.FromContextError(ctx.Err()).Err())
}

type progressKey struct{}

// WithProgress returns ctx for a CallTool whose progress reports (the
// notifications/progress the server sends while the tool runs) go to f, on
// the caller's goroutine, before its result: the stream relays them; one
// RPC per call (an older bridge) has none.
func WithProgress(ctx context.Context, f func(*bridgev1.ToolProgress)) context.Context {
	return context.WithValue(ctx, progressKey{}, f)
}

type inputRetryKey struct{}

// inputRetry is what a call that waited for the user's input carries when
// it runs again.
type inputRetry struct {
	responses map[string]*bridgev1.ElicitationResult
	state     string
}

// WithInputRetry marks ctx's CallTool as the retry of a call that waited
// for the user's input: the bridge sends it with the answers, by the
// server's ids of its input requests, and the request state the server
// gave with them.
func WithInputRetry(ctx context.Context, responses map[string]*bridgev1.ElicitationResult, state string) context.Context {
	return context.WithValue(ctx, inputRetryKey{}, &inputRetry{responses: responses, state: state})
}

func inputRetryOf(ctx context.Context) *inputRetry {
	rt, _ := ctx.Value(inputRetryKey{}).(*inputRetry)
	return rt
}
