package server

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"io"
	"sync"

	"google.golang.org/grpc"
	"google.golang.org/grpc/status"

	agentdv1 "github.com/agentd/agentd/gen/go/agentd/v1"
	"github.com/agentd/agentd/internal/fault"
)

// errClientCancelled is the cause of a generation the client cancelled.
var errClientCancelled = fault.New(fault.Canceled, "the client cancelled the generation")

// Generate runs one generation on a bidirectional stream. The handler's
// goroutine runs the loop; one sender goroutine owns stream.Send; one
// receiver goroutine reads the client's later messages into a mailbox.
func (s *Service) Generate(stream grpc.BidiStreamingServer[agentdv1.GenerateRequest, agentdv1.GenerateResponse]) error {
	ctx, cancel := context.WithCancelCause(stream.Context())
	defer cancel(nil)

	first, err := stream.Recv()
	if errors.Is(err, io.EOF) {
		return fault.GRPC(fault.InvalidRequest([]fault.Violation{{Field: "start", Description: "the stream ended before a start or resume message"}}))
	}
	if err != nil {
		return err
	}
	var g *generation
	switch k := first.GetKind().(type) {
	case *agentdv1.GenerateRequest_Start:
		g, err = s.newGeneration(k.Start)
	case *agentdv1.GenerateRequest_Resume:
		err = s.resume(k.Resume)
	default:
		err = fault.InvalidRequest([]fault.Violation{{Field: "kind", Description: "the first message must be start or resume"}})
	}
	if err != nil {
		return fault.GRPC(err)
	}

	out := newSender(stream, cancel)
	g.emitter = out
	go receive(stream, g.mail, cancel)
	err = g.run(ctx)
	out.close()
	if err == nil {
		return nil
	}
	if stream.Context().Err() != nil {
		// The client went away (or its deadline passed): nobody reads the
		// status, and nothing went wrong on our side.
		s.log.DebugContext(ctx, "generation ended with its client", "generation", g.id, "err", err)
		return status.FromContextError(stream.Context().Err()).Err()
	}
	if ctx.Err() != nil {
		err = context.Cause(ctx)
	}
	if fault.KindOf(err) == fault.Internal {
		s.log.ErrorContext(ctx, "generation failed", "generation", g.id, "err", err)
	}
	return fault.GRPC(err)
}

// resume continues a paused generation. This agentd never pauses (it keeps
// no state store), so no generation id can be known.
func (s *Service) resume(r *agentdv1.ResumeGeneration) error {
	if r.GetGenerationId() == "" {
		return fault.InvalidRequest([]fault.Violation{{Field: "resume.generation_id", Description: "is required"}})
	}
	return fault.New(fault.NotFound, "no paused generation %q", r.GetGenerationId())
}

// sender owns stream.Send: every event of a generation passes through its
// channel, in order.
type sender struct {
	ch   chan *agentdv1.GenerateResponse
	done chan struct{}
}

func newSender(stream grpc.BidiStreamingServer[agentdv1.GenerateRequest, agentdv1.GenerateResponse], cancel context.CancelCauseFunc) *sender {
	s := &sender{ch: make(chan *agentdv1.GenerateResponse, 64), done: make(chan struct{})}
	go func() {
		defer close(s.done)
		failed := false
		for ev := range s.ch {
			if failed {
				continue
			}
			if err := stream.Send(ev); err != nil {
				failed = true
				cancel(err)
			}
		}
	}()
	return s
}

// emit queues ev, or gives up when ctx ends. Safe for concurrent use until
// close.
func (s *sender) emit(ctx context.Context, ev *agentdv1.GenerateResponse) error {
	select {
	case s.ch <- ev:
		return nil
	case <-ctx.Done():
		return context.Cause(ctx)
	}
}

// close flushes the queued events and waits for the sender to finish. Call
// it once, after every emitter has returned.
func (s *sender) close() {
	close(s.ch)
	<-s.done
}

// mailbox holds the client's answers until the loop takes them.
type mailbox struct {
	mu        sync.Mutex
	approvals []*agentdv1.ApprovalDecision
	results   []*agentdv1.FunctionResult
	ended     bool  // the client half-closed or the stream broke
	err       error // a message the client should not have sent
	notify    chan struct{}
}

func newMailbox() *mailbox { return &mailbox{notify: make(chan struct{}, 1)} }

func (m *mailbox) update(f func()) {
	m.mu.Lock()
	f()
	m.mu.Unlock()
	select {
	case m.notify <- struct{}{}:
	default:
	}
}

// take returns and clears what arrived.
func (m *mailbox) take() (approvals []*agentdv1.ApprovalDecision, results []*agentdv1.FunctionResult, ended bool, err error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	approvals, results = m.approvals, m.results
	m.approvals, m.results = nil, nil
	return approvals, results, m.ended, m.err
}

// receive reads the client's messages after the first until the stream
// ends. It returns when Recv fails, which grpc guarantees once the handler
// has returned.
func receive(stream grpc.BidiStreamingServer[agentdv1.GenerateRequest, agentdv1.GenerateResponse], m *mailbox, cancel context.CancelCauseFunc) {
	for {
		msg, err := stream.Recv()
		if err != nil {
			m.update(func() { m.ended = true })
			return
		}
		switch k := msg.GetKind().(type) {
		case *agentdv1.GenerateRequest_Cancel:
			cancel(errClientCancelled)
			m.update(func() { m.ended = true })
			return
		case *agentdv1.GenerateRequest_ApprovalDecision:
			m.update(func() { m.approvals = append(m.approvals, k.ApprovalDecision) })
		case *agentdv1.GenerateRequest_FunctionResult:
			m.update(func() { m.results = append(m.results, k.FunctionResult) })
		default:
			m.update(func() {
				m.err = fault.InvalidRequest([]fault.Violation{{Field: "kind", Description: "start and resume are only valid as the first message"}})
			})
		}
	}
}

func newGenerationID() string {
	var b [16]byte
	_, _ = rand.Read(b[:])
	return "gen_" + hex.EncodeToString(b[:])
}
