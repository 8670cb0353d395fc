package server

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"

	agentdv1 "github.com/agentd/agentd/gen/go/agentd/v1"
	"github.com/agentd/agentd/internal/fault"
	"github.com/agentd/agentd/internal/store"
)

// attachPoll is how often an attached stream reads the generation's log
// for events it has not sent yet.
const attachPoll = 50 * time.Millisecond

// attach follows a generation from its stored log (X-G2): every event
// after a.after_sequence, in order, each once, then the later ones as its
// owner, on this replica or another, appends them, until the generation
// has paused or finished. The stream is read-only.
func (s *Service) attach(stream generateStream, a *agentdv1.AttachGeneration) error {
	return followStatus(s.attachStream(stream, a))
}

// followStatus is how a followed stream ends after err: nil, or a status
// already (the generation's, or the stream's), as it is; a fault as its
// status.
func followStatus(err error) error {
	var fe *fault.Error
	if _, ok := status.FromError(err); ok && !errors.As(err, &fe) {
		return err
	}
	return fault.GRPC(err)
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

func (s *Service) attachStream(stream generateStream, a *agentdv1.AttachGeneration) error {
	var v violations
	if a.GetGenerationId() == "" {
		v.add("attach.generation_id", "is required")
	}
	if a.GetAfterSequence() < 0 {
		v.add("attach.after_sequence", "must not be negative, got %d", a.GetAfterSequence())
	}
	if len(v) > 0 {
		return fault.InvalidRequest(v)
	}
	tenant, _, err := s.tenant(stream.Context())
	if err != nil {
		return err
	}
	if s.generations == nil {
		return fault.New(fault.FailedPrecondition, "this agentd keeps no record of its generations, so there is nothing to attach to")
	}
	ctx, cancel := readOnly(stream, "an attached stream is read-only: answer on the generation's own stream, or resume it once it has paused")
	defer cancel(nil)
	id, after := a.GetGenerationId(), a.GetAfterSequence()
	if _, err := s.generations.Get(ctx, tenant, id); err != nil {
		return orCause(ctx, err) // another tenant's is not found either
	}
	return s.follow(ctx, tenant, id, after, func(ev *agentdv1.GenerateResponse) error { return stream.Send(ev) })
}

// follow sends the events of tenant's generation id after sequence number
// after, each once and in order, as long as the generation runs (here, or
// on another replica), and returns how it ended: nil once it has completed
// or paused, its status if it failed or was cancelled. A generation whose
// owner's lease has lapsed (its replica died) is adopted here, at once.
func (s *Service) follow(ctx context.Context, tenant, id string, after int64, out func(*agentdv1.GenerateResponse) error) error {
	send := func(ev *agentdv1.GenerateResponse) error {
		if ev.GetSequence() <= after {
			return nil // sent already
		}
		if err := out(ev); err != nil {
			return err
		}
		after = ev.GetSequence()
		return nil
	}
	followHere := func() error {
		if j, ok := s.running.Load(liveKey(tenant, id)); ok {
			return s.followLive(ctx, j.(*journal), tenant, id, after, send)
		}
		return nil
	}
	if err := followHere(); err != nil {
		return err
	}
	// Not running here (or no longer, or this stream fell behind): the
	// store has the rest.
	tick := time.NewTicker(attachPoll)
	defer tick.Stop()
	for {
		rec, err := s.generations.Get(ctx, tenant, id)
		if err != nil {
			return orCause(ctx, err)
		}
		for after < rec.LastSeq {
			evs, err := s.generations.Read(ctx, tenant, id, after, 0)
			if err != nil {
				return orCause(ctx, err)
			}
			if len(evs) == 0 {
				break
			}
			if err := sendStored(evs, send); err != nil {
				return err
			}
		}
		if after >= rec.LastSeq && (rec.State.Finished() || rec.State == store.Paused) {
			return endStatus(rec)
		}
		// Running with a lease that lapsed or was released: its replica
		// died or stopped. This one takes it over now (X-G3), unless
		// another does first.
		if !rec.State.Finished() && rec.State != store.Paused && (rec.Lease.Owner == "" || time.Now().After(rec.Lease.Expires)) {
			if s.adoptOne(ctx, tenant, id) {
				if err := followHere(); err != nil {
					return err
				}
				continue
			}
			if s.stopping.Load() {
				return status.Errorf(codes.Unavailable, "generation %q is not running on any replica and this agentd is stopping; attach to another", id)
			}
		}
		select {
		case <-ctx.Done():
			return context.Cause(ctx)
		case <-tick.C:
		}
	}
}

// followLive follows a generation that this replica runs: the stored
// events up to what the store has, then each new one as it is stored,
// until the generation ends here or the stream falls too far behind; then
// the caller reads the rest from the store. send skips what was sent
// already.
func (s *Service) followLive(ctx context.Context, j *journal, tenant, id string, after int64, send func(*agentdv1.GenerateResponse) error) error {
	f, confirmed, ok := j.follow()
	if !ok {
		return nil
	}
	defer j.unfollow(f)
	for after < confirmed {
		evs, err := s.generations.Read(ctx, tenant, id, after, 0)
		if err != nil {
			return orCause(ctx, err)
		}
		if len(evs) == 0 {
			break
		}
		if err := sendStored(evs, send); err != nil {
			return err
		}
		after = evs[len(evs)-1].Seq
	}
	for {
		select {
		case <-ctx.Done():
			return context.Cause(ctx)
		case ev, open := <-f.ch:
			if !open {
				return nil
			}
			if err := send(ev); err != nil {
				return err
			}
		}
	}
}

// sendStored decodes stored events and sends them.
func sendStored(evs []store.Event, send func(*agentdv1.GenerateResponse) error) error {
	for _, e := range evs {
		ev := &agentdv1.GenerateResponse{}
		if err := proto.Unmarshal(e.Data, ev); err != nil {
			return fault.Wrap(fault.Internal, err, "decoding a stored event")
		}
		ev.Sequence = e.Seq
		if err := send(ev); err != nil {
			return err
		}
	}
	return nil
}

// orCause is err, or why ctx ended if it did.
func orCause(ctx context.Context, err error) error {
	if ctx.Err() != nil {
		return context.Cause(ctx)
	}
	return err
}

// endStatus is how an attached stream ends: OK for a generation that
// completed or paused, its own status for one that failed or was
// cancelled.
func endStatus(rec store.Generation) error {
	if rec.State != store.Failed && rec.State != store.Cancelled {
		return nil
	}
	var r result
	_ = json.Unmarshal(rec.Result, &r)
	code := r.Code
	if code == codes.OK {
		code = codes.Unknown
		if rec.State == store.Cancelled {
			code = codes.Canceled
		}
	}
	return status.Error(code, r.Error)
}
