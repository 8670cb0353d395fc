package server

import (
	agentdv1 "github.com/agentd/agentd/gen/go/agentd/v1"

	"context"
	"errors"
	"io"

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
// out up to its started event, and returns the status to end the call
// with: OK once out has the started event.
func (s *Service) startDetached(ctx context.Context, g *generation, out func(*agentdv1.GenerateResponse) error) error {
	g.detached = true
	gctx, gcancel := s.clientless(g)
	j, err := s.openJournal(gctx, g)
	if err != nil {
		gcancel(nil)
		g.release()
		return fault.GRPC(err)
	}
	g.journal = j
	if !s.goRun(g, gctx, gcancel) {
		j.Settle(gctx, store.Running, nil) // stopping: another replica runs it
		gcancel(nil)
		g.release()
		return status.Error(codes.Unavailable, "agentd is stopping; the detached generation runs on another replica")
	}
	s.log.Info("generation detached", "audit", true, "principal", g.caller, "tenant", g.tenant, "generation", g.id)
	err = s.events.Follow(ctx, g.tenant, g.id, 0, func(ev *agentdv1.GenerateResponse) error {
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
