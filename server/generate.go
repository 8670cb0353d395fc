package server

import (
	agentdv1 "github.com/agentd/agentd/gen/go/agentd/v1"

	"context"
	"errors"
	"io"
	"sync"

	"go.opentelemetry.io/otel/trace"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/agentd/agentd/internal/auth"
	"github.com/agentd/agentd/internal/fault"
	"github.com/agentd/agentd/internal/store"
)

// Generate runs one generation on a bidirectional stream. The handler's
// goroutine runs the loop; one sender goroutine owns stream.Send; one
// receiver goroutine reads the client's later messages into a mailbox.
//
// The generation has a lifetime of its own: if the client goes away while
// the generation waits for its answers, the generation pauses (it is
// stored and can be resumed) rather than vanish; anywhere else, losing the
// client stops it.
func (s *Service) Generate(stream generateStream) error {
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
		g, err = s.newGeneration(stream.Context(), k.Start)
	case *agentdv1.GenerateRequest_Resume:
		g, err = s.resumeGeneration(stream.Context(), k.Resume)
	case *agentdv1.GenerateRequest_Attach:
		return s.attach(stream, k.Attach)
	default:
		err = fault.InvalidRequest([]fault.Violation{{Field: "kind", Description: "the first message must be start, resume or attach"}})
	}
	if err != nil {
		return fault.GRPC(err)
	}
	g.caller, _ = auth.Caller(stream.Context())
	if done, err := s.takeThread(stream, g); done {
		return err
	}
	if first.GetStart().GetDetach() {
		return s.detach(stream, g)
	}
	defer g.release() // however the generation ends: completed, failed, cancelled or paused
	if g.resume != nil {
		s.log.Info("generation resumed", "audit", true, "principal", g.caller, "tenant", g.tenant, "generation", g.id,
			"decisions", len(g.resume.decisions), "function_results", len(g.resume.results))
	}

	ctx, cancel := context.WithCancelCause(context.WithoutCancel(stream.Context()))
	defer cancel(nil)
	g.link = newLink(stream, cancel)
	g.link.late = g.lateAnswer
	// The stream's end (the client went away, or the server is stopping)
	// reaches the generation even after the client half-closed, when no
	// receive is pending to notice it: it pauses if it waits for answers,
	// and stops otherwise.
	stopWatching := context.AfterFunc(stream.Context(), func() { g.link.lost(context.Cause(stream.Context())) })
	defer stopWatching()
	go g.link.receive(stream)
	err = g.run(ctx)
	if err != nil {
		g.failed(ctx)
	}
	g.settleJournal(ctx, err)
	g.link.out.close()
	g.logEnd(ctx, err)
	if err == nil {
		return nil
	}
	if gone := g.link.gone(); gone != nil {
		// The client went away: nobody reads the status, and nothing went
		// wrong on our side.
		return status.FromContextError(context.Canceled).Err()
	}
	if ctx.Err() != nil {
		err = context.Cause(ctx)
	}
	return fault.GRPC(err)
}

// takeThread puts a new generation on its thread, if it has one
// (startOnThread). done says the stream ends here, with err: the start
// was refused, or queued (its stream's one event says so).
func (s *Service) takeThread(stream generateStream, g *generation) (done bool, err error) {
	if g.thread == nil || g.resume != nil {
		return false, nil
	}
	q, err := s.startOnThread(stream.Context(), g)
	if err == nil && q == nil {
		return false, nil
	}
	g.release()
	if err != nil {
		return true, fault.GRPC(err)
	}
	return true, stream.Send(&agentdv1.GenerateResponse{Event: &agentdv1.GenerateResponse_Queued{Queued: q}})
}

// detach runs a new generation without a client (startDetached). Its
// stream ends OK once it has sent the started event (the generation's id,
// its servers and tools); a client that wants the events attaches. A
// client that goes away before leaves the generation running too.
func (s *Service) detach(stream generateStream, g *generation) error {
	if s.generations == nil {
		g.release()
		return fault.GRPC(fault.New(fault.FailedPrecondition, "this agentd keeps no record of its generations, so it cannot run one detached"))
	}
	ctx, cancel := readOnly(stream, "the stream of a detached generation is read-only: it pauses when it needs answers; resume it then")
	defer cancel(nil)
	return s.startDetached(ctx, g, stream.Send)
}

// startDetached runs a new generation without a client: it is recorded
// first (a store that cannot record it refuses it), then runs in the
// background, owned by the Service. It passes the generation's events to
// out up to its started event, each once it is stored, and returns the
// status to end the call with: OK once out has the started event.
func (s *Service) startDetached(ctx context.Context, g *generation, out func(*agentdv1.GenerateResponse) error) error {
	g.detached = true
	gctx, gcancel := s.clientless(g)
	// Its run is in the trace of the call that started it, as an attached
	// one's is: the trace id its record keeps finds its spans.
	gctx = trace.ContextWithSpanContext(gctx, trace.SpanContextFromContext(ctx))
	if g.journal == nil { // a start on a thread has its journal already
		j, err := s.openJournal(gctx, g)
		if err != nil {
			gcancel(nil)
			g.release()
			return fault.GRPC(err)
		}
		g.journal = j
	}
	j := g.journal
	first := &firstEvents{recorded: make(chan struct{}, 1)}
	g.first = first
	if !s.goRun(g, gctx, gcancel) {
		j.Settle(gctx, store.Running, nil) // stopping: another replica runs it
		gcancel(nil)
		g.release()
		return status.Error(codes.Unavailable, "agentd is stopping; the detached generation runs on another replica")
	}
	s.log.Info("generation detached", "audit", true, "principal", g.caller, "tenant", g.tenant, "generation", g.id)
	return s.passFirst(ctx, gctx, g, first, out)
}

// firstEvents are a detached generation's events up to its started
// event, which its start passes on (passFirst) as the run records them:
// the start has them without following the generation's log. Safe for
// concurrent use.
type firstEvents struct {
	mu       sync.Mutex
	events   []*agentdv1.GenerateResponse
	recorded chan struct{} // signalled, without waiting, as an event is added
}

// add adds ev; the run's emitMu is held.
func (f *firstEvents) add(ev *agentdv1.GenerateResponse) {
	f.mu.Lock()
	f.events = append(f.events, ev)
	f.mu.Unlock()
	select {
	case f.recorded <- struct{}{}:
	default:
	}
}

// take returns the events added since the last take.
func (f *firstEvents) take() []*agentdv1.GenerateResponse {
	f.mu.Lock()
	defer f.mu.Unlock()
	evs := f.events
	f.events = nil
	return evs
}

// recordedFirst gives a detached start ev, which the journal has just
// numbered, until the started event; emitMu is held.
func (g *generation) recordedFirst(ev *agentdv1.GenerateResponse) {
	if g.first == nil {
		return
	}
	g.first.add(ev)
	if ev.GetStarted() != nil {
		g.first = nil
	}
}

// passFirst passes out g's first events, up to its started event, each
// once its journal has stored it, as a follow of the generation's log
// would. Should the run end (run is its context) before it records a
// started event, the log has the rest and the status to end with: the
// start follows it from there.
func (s *Service) passFirst(ctx, run context.Context, g *generation, first *firstEvents, out func(*agentdv1.GenerateResponse) error) error {
	var sent int64
	for {
		ended := run.Err() != nil // before take: every event the run recorded is then taken
		if done, err := s.passStored(ctx, g, first.take(), &sent, out); done {
			return err
		}
		if ended {
			return s.followFirst(ctx, g, sent, out)
		}
		select {
		case <-first.recorded:
		case <-run.Done():
		case <-ctx.Done():
			return followStatus(context.Cause(ctx))
		}
	}
}

// passStored passes out evs, each once g's journal has stored it, up to
// the started event, sent being the last one passed. done says the start
// is over, with err its status. An event the journal will not store (the
// lease lost, the store down as the generation ended) leaves the rest to
// the log.
func (s *Service) passStored(ctx context.Context, g *generation, evs []*agentdv1.GenerateResponse, sent *int64, out func(*agentdv1.GenerateResponse) error) (done bool, err error) {
	for _, ev := range evs {
		if err := g.journal.AwaitSeq(ctx, ev.GetSequence()); err != nil {
			if ctx.Err() != nil {
				return true, followStatus(context.Cause(ctx))
			}
			return true, s.followFirst(ctx, g, *sent, out)
		}
		if err := out(ev); err != nil {
			return true, followStatus(err)
		}
		if ev.GetStarted() != nil {
			return true, nil
		}
		*sent = ev.GetSequence()
	}
	return false, nil
}

// followFirst follows g's log after sequence number after, passing out
// its events up to its started event.
func (s *Service) followFirst(ctx context.Context, g *generation, after int64, out func(*agentdv1.GenerateResponse) error) error {
	err := s.events.Follow(ctx, g.tenant, g.id, after, func(ev *agentdv1.GenerateResponse) error {
		if err := out(ev); err != nil {
			return err
		}
		if ev.GetStarted() != nil {
			return errFollowed
		}
		return nil
	})
	if errors.Is(err, errFollowed) {
		return nil
	}
	return followStatus(err)
}

// errFollowed ends the stream of a detached generation once its client
// has its started event.
var errFollowed = errors.New("the detached generation's client has what it waited for")

// attach follows a generation from its stored log: every event
// after a.after_sequence, in order, each once, then the later ones as its
// owner, on this replica or another, appends them, until the generation
// has paused or finished. The stream is read-only.
func (s *Service) attach(stream generateStream, a *agentdv1.AttachGeneration) error {
	return followStatus(s.attachStream(stream, a))
}

func (s *Service) attachStream(stream generateStream, a *agentdv1.AttachGeneration) error {
	ctx, cancel := readOnly(stream, "an attached stream is read-only: answer on the generation's own stream, or resume it once it has paused")
	defer cancel(nil)
	id, after := a.GetGenerationId(), a.GetAfterSequence()
	tenant, err := s.followed(ctx, followFields{"attach.generation_id", "attach.after_sequence"}, id, after)
	if err != nil {
		return err
	}
	return s.events.Follow(ctx, tenant, id, after, func(ev *agentdv1.GenerateResponse) error { return stream.Send(ev) })
}

// readOnly watches the client's side of a stream that only follows a
// generation: its context ends when the client goes away, or, with
// INVALID_ARGUMENT (misuse), when it sends anything; a half-close is no
// end (the client still reads).
func readOnly(stream generateStream, misuse string) (context.Context, context.CancelCauseFunc) {
	ctx, cancel := context.WithCancelCause(stream.Context())
	go func() { // returns when the handler has returned, at the latest
		_, err := stream.Recv()
		switch {
		case errors.Is(err, io.EOF): // half-closed: the client still reads
		case err != nil:
			cancel(err)
		default:
			cancel(fault.InvalidRequest([]fault.Violation{{Field: "kind", Description: misuse}}))
		}
	}()
	return ctx, cancel
}

// clientless gives a generation that runs without a client (detached, or
// adopted) its context, owned by the Service, and a link to nobody.
func (s *Service) clientless(g *generation) (context.Context, context.CancelCauseFunc) {
	ctx, cancel := context.WithCancelCause(s.bg)
	g.link = newClientlessLink(cancel)
	return ctx, cancel
}

// goRun runs a clientless generation in the background, owned by the
// Service; false if the Service is closing (nothing ran).
func (s *Service) goRun(g *generation, ctx context.Context, cancel context.CancelCauseFunc) bool {
	return s.goBackground(func() {
		s.bgRuns.Add(1)
		defer s.bgRuns.Add(-1)
		defer cancel(nil)
		defer g.release()
		err := g.run(ctx)
		if err != nil {
			g.failed(ctx)
		}
		g.settleJournal(ctx, err)
		g.link.out.close()
		g.logEnd(ctx, err)
	})
}
