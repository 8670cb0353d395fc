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
		var id string
		var last int64
		var done bool // the generation completed or paused
		req, failures, wait := first, 0, p.Backoff
		for {
			// An attach waits for the connection (within ctx) instead of
			// failing at once while it reconnects.
			stream, err := open(ctx, client, req, grpc.WaitForReady(id != ""))
			for err == nil {
				var ev *agentdv1.GenerateResponse
				if ev, err = stream.Recv(); err != nil {
					break
				}
				if seq := ev.GetSequence(); seq > 0 && seq <= last {
					continue // yielded already (the server does not replay these; this is defence)
				}
				last, failures, wait = max(last, ev.GetSequence()), 0, p.Backoff
				if s := ev.GetStarted(); s != nil {
					id = s.GetGenerationId()
				}
				if !yield(ev, nil) {
					return
				}
				done = done || ev.GetCompleted() != nil || ev.GetPaused() != nil
			}
			if done {
				return // and however its stream ended, nothing is missing
			}
			ended := errors.Is(err, io.EOF) // without a status, as a detached start's stream does
			switch {
			case id == "" && ended:
				yield(nil, errors.New("the stream ended before the generation started"))
				return
			case id == "" || !ended && status.Code(err) != codes.Unavailable:
				yield(nil, err)
				return
			case failures >= p.Attempts:
				yield(nil, fmt.Errorf("generation %s: gave up after %d attempts to attach: %w", id, failures, err))
				return
			}
			if ended {
				err = nil // and attach at once
			} else {
				select {
				case <-ctx.Done():
					yield(nil, ctx.Err())
					return
				case <-time.After(wait/2 + rand.N(wait/2+1)):
				}
				wait = min(2*wait, p.MaxBackoff)
			}
			if p.OnAttach != nil {
				p.OnAttach(id, last, err)
			}
			failures++
			req = &agentdv1.GenerateRequest{Kind: &agentdv1.GenerateRequest_Attach{Attach: &agentdv1.AttachGeneration{GenerationId: id, AfterSequence: last}}}
		}
	}
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
	w := ev.GetTurnWithdrawn()
	if w == nil {
		return ""
	}
	var b strings.Builder
	kept := t.deltas[:0]
	for _, d := range t.deltas {
		if d.seq >= w.GetFromSequence() {
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
