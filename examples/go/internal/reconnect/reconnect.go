// Package reconnect follows a generation across broken streams: the
// reconnect loop that the Go examples share, kept small enough to copy.
//
// A Generate stream breaks when agentd's replica dies or the network
// drops; the generation goes on (another replica adopts it), and the
// client attaches to it again with the last sequence number it saw. A
// detached start (StartGeneration.detach) ends its stream after started,
// and the loop attaches the same way.
package reconnect

import (
	"context"
	"errors"
	"fmt"
	"io"
	"iter"
	"math/rand/v2"
	"strings"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	agentdv1 "github.com/agentd/agentd/gen/go/agentd/v1"
)

// Policy bounds the reconnects: at most Attempts in a row without a new
// event, waiting between Backoff/2 and Backoff before the first, twice
// as long before each next, up to MaxBackoff.
type Policy struct {
	Attempts            int
	Backoff, MaxBackoff time.Duration
	// OnAttach, if set, is told of each attach before it is sent: the
	// generation, the last sequence number yielded, and the error that
	// ended the stream before (nil: the stream ended without one, as a
	// detached start's does).
	OnAttach func(generationID string, afterSequence int64, cause error)
}

// Default is the examples' policy: 8 attempts, 200 ms doubling to 2 s
// (at most 11 s of waiting in all before giving up).
var Default = Policy{Attempts: 8, Backoff: 200 * time.Millisecond, MaxBackoff: 2 * time.Second}

// Generate sends first (a start or a resume) on a Generate stream,
// half-closes it (the loop answers nothing: a generation that asks for
// approvals or function results pauses) and yields the generation's
// events, each once and in order of their sequence numbers, until its
// completed or paused event, or an error. When a stream ends before
// either, with UNAVAILABLE (the replica died, the connection dropped) or
// without a status (a detached start), it opens another whose only
// message is attach {generation_id, after_sequence: the last one yielded}.
// A stream that breaks before started is an error, not retried: the
// generation may or may not exist, and starting it again could run it
// twice. A generation that itself failed UNAVAILABLE is retried until the
// attempts run out, then reported with its status. Stopping the loop
// early ends the stream.
func (p Policy) Generate(ctx context.Context, client agentdv1.AgentServiceClient, first *agentdv1.GenerateRequest) iter.Seq2[*agentdv1.GenerateResponse, error] {
	return func(yield func(*agentdv1.GenerateResponse, error) bool) {
		ctx, cancel := context.WithCancel(ctx)
		defer cancel() // ends the last stream, however the loop ends
		f := follower{p: p, wait: p.Backoff}
		req := first
		for {
			stopped, err := f.follow(ctx, client, req, yield)
			if stopped || f.done {
				return // and however its stream ended, nothing is missing
			}
			cause, err := f.retry(ctx, err)
			if err != nil {
				yield(nil, err)
				return
			}
			if p.OnAttach != nil {
				p.OnAttach(f.id, f.last, cause)
			}
			f.failures++
			req = &agentdv1.GenerateRequest{Kind: &agentdv1.GenerateRequest_Attach{Attach: &agentdv1.AttachGeneration{GenerationId: f.id, AfterSequence: f.last}}}
		}
	}
}

// follower is where Generate's loop stands: the generation's id once
// started, the last sequence number yielded, whether it completed or
// paused, and the attempts to attach since the last new event with the
// back-off before the next.
type follower struct {
	p        Policy
	id       string
	last     int64
	done     bool
	failures int
	wait     time.Duration
}

// follow opens a stream with req and reads it to its end. An attach
// waits for the connection (within ctx) instead of failing at once while
// it reconnects.
func (f *follower) follow(ctx context.Context, client agentdv1.AgentServiceClient, req *agentdv1.GenerateRequest, yield func(*agentdv1.GenerateResponse, error) bool) (stopped bool, err error) {
	stream, err := open(ctx, client, req, grpc.WaitForReady(f.id != ""))
	if err != nil {
		return false, err
	}
	return f.read(stream, yield)
}

// read yields the stream's events that were not yielded yet, until it
// ends, and returns the error that ended it; stopped when the loop was
// stopped.
func (f *follower) read(stream grpc.BidiStreamingClient[agentdv1.GenerateRequest, agentdv1.GenerateResponse], yield func(*agentdv1.GenerateResponse, error) bool) (stopped bool, err error) {
	for {
		ev, err := stream.Recv()
		if err != nil {
			return false, err
		}
		if !f.record(ev) {
			continue // yielded already (the server does not replay these; this is defence)
		}
		if !yield(ev, nil) {
			return true, nil
		}
		f.done = f.done || ev.GetCompleted() != nil || ev.GetPaused() != nil
	}
}

// record notes a new event: its sequence number, the generation's id
// when it is started, and that the attempts start over. It returns false
// for an event yielded already.
func (f *follower) record(ev *agentdv1.GenerateResponse) bool {
	if seq := ev.GetSequence(); seq > 0 && seq <= f.last {
		return false
	}
	f.last, f.failures, f.wait = max(f.last, ev.GetSequence()), 0, f.p.Backoff
	if s := ev.GetStarted(); s != nil {
		f.id = s.GetGenerationId()
	}
	return true
}

// retry decides whether to attach again after a stream ended with err
// before the generation completed or paused: a stream that broke
// (UNAVAILABLE) waits out the back-off first, one that ended without a
// status attaches at once, and anything else, or too many attempts,
// ends the loop with final. cause is what OnAttach is told.
func (f *follower) retry(ctx context.Context, err error) (cause, final error) {
	ended := errors.Is(err, io.EOF) // without a status, as a detached start's stream does
	if final := f.giveUp(err, ended); final != nil {
		return nil, final
	}
	if ended {
		return nil, nil
	}
	return err, f.backOff(ctx)
}

// giveUp is the error that ends the loop after a stream ended with err
// (ended: without a status): one before the generation started, one
// other than UNAVAILABLE, or the last attempt's; nil to attach again.
func (f *follower) giveUp(err error, ended bool) error {
	switch {
	case f.id == "" && ended:
		return errors.New("the stream ended before the generation started")
	case f.id == "" || !ended && status.Code(err) != codes.Unavailable:
		return err
	case f.failures >= f.p.Attempts:
		return fmt.Errorf("generation %s: gave up after %d attempts to attach: %w", f.id, f.failures, err)
	}
	return nil
}

// backOff waits between half the back-off and all of it, and doubles it
// up to MaxBackoff.
func (f *follower) backOff(ctx context.Context) error {
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-time.After(f.wait/2 + rand.N(f.wait/2+1)):
	}
	f.wait = min(2*f.wait, f.p.MaxBackoff)
	return nil
}

// open opens a Generate stream, sends req and half-closes.
func open(ctx context.Context, client agentdv1.AgentServiceClient, req *agentdv1.GenerateRequest, opts ...grpc.CallOption) (grpc.BidiStreamingClient[agentdv1.GenerateRequest, agentdv1.GenerateResponse], error) {
	stream, err := client.Generate(ctx, opts...)
	if err != nil {
		return nil, err
	}
	// io.EOF from Send: the stream has ended, and Recv says how.
	if err := stream.Send(req); err != nil && !errors.Is(err, io.EOF) {
		return nil, err
	}
	return stream, stream.CloseSend()
}

// Text is the model's text as a generation's events tell it: text_delta
// adds to it, and turn_withdrawn takes back what the withdrawn turn said
// (the deltas from its from_sequence on), since the turn is asked again.
// The zero Text is empty.
type Text struct {
	deltas []delta
}

type delta struct {
	seq  int64
	text string
}

// Apply adds ev's text to t, or takes a withdrawn turn's text back and
// returns it; other events change nothing.
func (t *Text) Apply(ev *agentdv1.GenerateResponse) (withdrawn string) {
	if d := ev.GetTextDelta(); d != nil {
		t.deltas = append(t.deltas, delta{ev.GetSequence(), d.GetText()})
	}
	if w := ev.GetTurnWithdrawn(); w != nil {
		return t.withdraw(w.GetFromSequence())
	}
	return ""
}

// withdraw takes back the deltas from sequence number from on, and
// returns their text.
func (t *Text) withdraw(from int64) string {
	var b strings.Builder
	kept := t.deltas[:0]
	for _, d := range t.deltas {
		if d.seq >= from {
			b.WriteString(d.text)
		} else {
			kept = append(kept, d)
		}
	}
	t.deltas = kept
	return b.String()
}

// String is the text so far.
func (t *Text) String() string {
	var b strings.Builder
	for _, d := range t.deltas {
		b.WriteString(d.text)
	}
	return b.String()
}
