package server

import (
	agentdv1 "github.com/agentd/agentd/gen/go/agentd/v1"

	"context"
	"errors"
	"io"
	"strings"
	"sync"
	"time"

	"google.golang.org/grpc"

	"github.com/agentd/agentd/internal/fault"
	"github.com/agentd/agentd/internal/record"
)

type generateStream = grpc.BidiStreamingServer[agentdv1.GenerateRequest, agentdv1.GenerateResponse]

// errClientCancelled is the cause of a generation the client cancelled.
var errClientCancelled = fault.New(fault.Canceled, "the client cancelled the generation")

// link is a generation's connection to its client: the events going out,
// the answers coming in, and what losing the client means.
type link struct {
	out    *sender
	mail   *mailbox
	cancel context.CancelCauseFunc // ends the generation
	// holder names the stream's authenticated principal, who decides what
	// it answers; "" without authentication (or without a stream).
	holder string
	// late handles the holder's answer to a request that waited once and
	// no longer does (generation.lateAnswer); set before receive starts.
	late func(ctx context.Context, d *decision) error

	mu       sync.Mutex
	lostWith error // why the client went away; nil while it is there
	// awaiting counts what waits for the client's answers (a tool turn's
	// approvals, a call's authorization): while one does, losing the
	// client pauses the generation rather than stop it.
	awaiting int
	// clientless: no client is there (a detached or adopted generation).
	clientless bool
}

func newLink(stream generateStream, cancel context.CancelCauseFunc) *link {
	l := &link{mail: newMailbox(), cancel: cancel, holder: principalName(stream.Context()), late: func(context.Context, *decision) error { return nil }}
	l.out = newSender(stream, l.lost)
	return l
}

// newClientlessLink is the link of a generation that runs without a
// client (detached, or adopted): its events go only to its record, and it
// pauses as soon as it needs answers.
func newClientlessLink(cancel context.CancelCauseFunc) *link {
	l := &link{mail: newMailbox(), cancel: cancel, clientless: true}
	l.mail.ended = true
	l.out = &sender{}
	return l
}

// lost records that the client went away (its stream broke). While the
// generation waits for answers it pauses; otherwise it stops.
func (l *link) lost(cause error) {
	l.mu.Lock()
	if l.lostWith != nil {
		l.mu.Unlock()
		return
	}
	l.lostWith = cause
	awaiting := l.awaiting
	l.mu.Unlock()
	l.mail.update(func() { l.mail.ended = true })
	if awaiting == 0 {
		l.cancel(cause)
	}
}

func (l *link) gone() error {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.lostWith
}

// waiting marks that one more (on) or one less wait for the client's
// answers; it reports whether the client has already gone.
func (l *link) waiting(on bool) (gone bool) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if on {
		l.awaiting++
	} else if l.awaiting > 0 {
		l.awaiting--
	}
	return l.lostWith != nil || l.clientless
}

// receive reads the client's messages after the first until the stream
// ends. It returns when Recv fails, which grpc guarantees once the handler
// has returned.
func (l *link) receive(stream generateStream) {
	for {
		msg, err := stream.Recv()
		if errors.Is(err, io.EOF) {
			// Half-closed: the client answers nothing more, but still reads.
			l.mail.update(func() { l.mail.ended = true })
			return
		}
		if err != nil {
			l.lost(err)
			return
		}
		switch k := msg.GetKind().(type) {
		case *agentdv1.GenerateRequest_Cancel:
			l.cancel(errClientCancelled)
			l.mail.update(func() { l.mail.ended = true })
			return
		case *agentdv1.GenerateRequest_ApprovalDecision:
			d := approvalDecision(k.ApprovalDecision, l.holder)
			switch {
			case isKeyedApproval(d.requestID):
				// A server's sampling request, or a limit, waits for it,
				// not a tool turn.
				l.keep(stream.Context(), d)
			case l.mail.finished(d.requestID):
				// Taken already: the loop may wait no more to say so.
				_ = l.late(stream.Context(), d)
			default:
				l.mail.update(func() { l.mail.approvals = append(l.mail.approvals, d) })
			}
		case *agentdv1.GenerateRequest_FunctionResult:
			l.mail.update(func() { l.mail.results = append(l.mail.results, k.FunctionResult) })
		case *agentdv1.GenerateRequest_AuthorizationResponse:
			l.keep(stream.Context(), authorizationDecision(k.AuthorizationResponse, l.holder))
		case *agentdv1.GenerateRequest_InputResponse:
			l.keep(stream.Context(), inputDecision(k.InputResponse, l.holder))
		default:
			l.mail.update(func() {
				l.mail.err = fault.InvalidRequest([]fault.Violation{{Field: "kind", Description: "start, resume and attach are only valid as the first message"}})
			})
		}
	}
}

// keep gives the holder's answer d to the call that waits for it; one to
// a request that no longer waits goes to late, which refuses it if
// another decided it.
func (l *link) keep(ctx context.Context, d *decision) {
	if late := l.mail.keep(d); late {
		_ = l.late(ctx, d) // a warning the client may not read: it goes on answering
	}
}

// sender owns stream.Send: every event of a generation passes through its
// queue, in order. After a failed send it drops the rest. With a durable
// record (journal), it sends an event only once the store has it:
// a client never sees an event numbered beyond the store's log, which a
// replica adopting the generation, should this one die, would number
// afresh. Its goroutine runs while events wait and ends when the queue is
// empty, so that a generation waiting for its client (maybe for hours)
// holds none; the next event starts another. One runs at a
// time, so events keep their order.
type sender struct {
	stream  generateStream // nil: no client, events go nowhere
	lost    func(error)
	journal *record.Journal // set before the first numbered event is queued

	mu      sync.Mutex
	queue   []*agentdv1.GenerateResponse
	running bool          // a drain goroutine runs
	failed  bool          // a send failed: the rest are dropped
	closed  bool          // close ran: what comes after is dropped
	space   chan struct{} // a queued event was taken
	drains  sync.WaitGroup
}

// senderQueue bounds the events queued for the client: an emitter waits
// beyond it, so a client that reads slowly slows the generation.
const senderQueue = 64

func newSender(stream generateStream, lost func(error)) *sender {
	return &sender{stream: stream, lost: lost, space: make(chan struct{}, 1)}
}

// emit queues ev, or gives up when ctx ends. Safe for concurrent use until
// close.
func (s *sender) emit(ctx context.Context, ev *agentdv1.GenerateResponse) error {
	if ctx.Err() != nil { // a cancelled generation sends nothing more
		return context.Cause(ctx)
	}
	if s.stream == nil { // no client
		return nil
	}
	s.mu.Lock()
	if s.closed {
		// The generation has ended: a warning for an answer that came
		// after it goes nowhere.
		s.mu.Unlock()
		return nil
	}
	for len(s.queue) >= senderQueue {
		s.mu.Unlock()
		select {
		case <-s.space:
		case <-ctx.Done():
			return context.Cause(ctx)
		}
		s.mu.Lock()
	}
	s.queue = append(s.queue, ev)
	if !s.running {
		s.running = true
		s.drains.Go(s.drain)
	}
	s.mu.Unlock()
	return nil
}

// drain sends the queued events until the queue is empty.
func (s *sender) drain() {
	for {
		s.mu.Lock()
		if len(s.queue) == 0 {
			s.running = false
			s.queue = nil // an idle sender keeps no buffer
			s.mu.Unlock()
			return
		}
		ev := s.queue[0]
		s.queue[0] = nil
		s.queue = s.queue[1:]
		failed := s.failed
		s.mu.Unlock()
		select {
		case s.space <- struct{}{}:
		default:
		}
		if failed {
			continue
		}
		if err := s.send(ev); err != nil {
			s.mu.Lock()
			s.failed = true
			s.mu.Unlock()
		}
	}
}

// send sends ev once the store has it (with a journal), but the model's
// text as it comes: a chat shows words as the model says them. A
// text_delta may reach the client before it is stored, within the
// journal's show window (record.Journal.ShowEarly); should this replica die
// before storing it, the replica that adopts the generation withdraws the
// turn (turn_withdrawn) and numbers its own events past the window.
func (s *sender) send(ev *agentdv1.GenerateResponse) error {
	if j := s.journal; j != nil && ev.GetSequence() > 0 && !(ev.GetTextDelta() != nil && j.ShowEarly(ev.GetSequence())) {
		switch err := j.AwaitSeq(s.stream.Context(), ev.GetSequence()); {
		case errors.Is(err, record.ErrUnstored):
			// The store was down as the generation ended: the client
			// has it at least.
		case err != nil:
			// The lease is lost (the generation stops, and its status
			// says so), or the client has gone.
			return err
		}
	}
	if err := s.stream.Send(ev); err != nil {
		s.lost(err)
		return err
	}
	return nil
}

// close flushes the queued events and waits for the sender to finish. Call
// it once, after the generation's emitters have returned; an event
// emitted after it (a late answer's warning, from the receiver) is
// dropped.
func (s *sender) close() {
	s.mu.Lock()
	s.closed = true
	s.mu.Unlock()
	s.drains.Wait()
}

// mailbox holds the answers until the loop takes them: the client's,
// and the decisions recorded elsewhere (DecideRequests).
type mailbox struct {
	mu        sync.Mutex
	approvals []*decision
	results   []*agentdv1.FunctionResult
	// keyed holds the answers to requests that a tool call waits for
	// while it runs (authorization requests, input requests, sampling
	// approval requests), by request id, until their waiters take them.
	keyed map[string]*decision
	// expected holds the ids of the requests that wait: an answer to any
	// other is dropped. done holds those that waited and no longer do:
	// an answer to one is late.
	expected map[string]bool
	done     map[string]bool
	ended    bool  // the client answers nothing more
	err      error // a message the client should not have sent
	notify   chan struct{}
	// changed is closed, and replaced, on every update: the authorization
	// waiters, which may be many at once, all wake.
	changed chan struct{}
}

func newMailbox() *mailbox {
	return &mailbox{notify: make(chan struct{}, 1), changed: make(chan struct{}), keyed: make(map[string]*decision), expected: make(map[string]bool), done: make(map[string]bool)}
}

func (m *mailbox) update(f func()) {
	m.mu.Lock()
	f()
	close(m.changed)
	m.changed = make(chan struct{})
	m.mu.Unlock()
	select {
	case m.notify <- struct{}{}:
	default:
	}
}

// take returns and clears what arrived.
func (m *mailbox) take() (approvals []*decision, results []*agentdv1.FunctionResult, ended bool, err error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	approvals, results = m.approvals, m.results
	m.approvals, m.results = nil, nil
	return approvals, results, m.ended, m.err
}

// The answers a running tool call waits for on the stream: to an
// authorization request, an input request or a sampling
// approval request. Unlike
// approval decisions and function results, which the loop takes between
// turns, they come while calls run, each to the call that asked, so the
// mailbox keeps them by request id and wakes every waiter.

var (
	errUnanswered    = errors.New("the client answers nothing more")
	errAnswerTimeout = errors.New("the client did not answer in time")
)

// expect registers request id as waiting for its answer; call it before
// the request goes to the client.
func (m *mailbox) expect(id string) {
	m.mu.Lock()
	m.expected[id] = true
	m.mu.Unlock()
}

// keep stores the answer d for the request's waiter. An answer that no
// request waits for (unknown, or its request ended meanwhile) is
// dropped, so a client cannot fill the mailbox; late says its request
// waited once.
func (m *mailbox) keep(d *decision) (late bool) {
	m.update(func() {
		if m.expected[d.requestID] {
			m.keyed[d.requestID] = d
			return
		}
		late = m.done[d.requestID]
	})
	return late
}

// finish records that request id no longer waits: the loop took a
// decision for it.
func (m *mailbox) finish(id string) {
	m.mu.Lock()
	m.done[id] = true
	m.mu.Unlock()
}

// finished reports whether request id waited and no longer does.
func (m *mailbox) finished(id string) bool {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.done[id]
}

// deliver gives the generation a decision recorded elsewhere: to the
// call that waits for it, or to the loop's approvals, which take only
// what their turn waits for.
func (m *mailbox) deliver(d *decision) {
	m.update(func() {
		switch {
		case m.expected[d.requestID]:
			m.keyed[d.requestID] = d
		case d.kind == agentdv1.PendingRequestKind_PENDING_REQUEST_KIND_APPROVAL:
			m.approvals = append(m.approvals, d)
		}
	})
}

// await waits for the client's answer to request id, which expect
// registered. It fails with errUnanswered once the client answers nothing
// more, errAnswerTimeout after timeout, or ctx's cause; the request then
// waits no more.
func (m *mailbox) await(ctx context.Context, id string, timeout time.Duration) (*decision, error) {
	timer := time.NewTimer(timeout)
	defer timer.Stop()
	defer func() {
		m.mu.Lock()
		delete(m.expected, id)
		delete(m.keyed, id)
		m.done[id] = true
		m.mu.Unlock()
	}()
	for {
		m.mu.Lock()
		answer, ok := m.keyed[id]
		delete(m.keyed, id)
		ended, changed := m.ended, m.changed
		m.mu.Unlock()
		switch {
		case ok:
			return answer, nil
		case ended:
			return nil, errUnanswered
		}
		select {
		case <-changed:
		case <-timer.C:
			return nil, errAnswerTimeout
		case <-ctx.Done():
			return nil, context.Cause(ctx)
		}
	}
}

// samplingPrefix begins the ids of sampling approval requests, so that
// their decisions go to the request waiting for them, not to the loop.
const samplingPrefix = "sampling_"

// isKeyedApproval reports whether approval request id waits by itself
// for its decision (a sample's or a limit's) rather than in a tool turn.
func isKeyedApproval(id string) bool {
	return strings.HasPrefix(id, samplingPrefix) || strings.HasPrefix(id, limitPrefix)
}
