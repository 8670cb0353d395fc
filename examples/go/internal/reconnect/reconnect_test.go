package reconnect

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"go.uber.org/goleak"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/status"
	"google.golang.org/grpc/test/bufconn"
	"google.golang.org/protobuf/testing/protocmp"

	agentdv1 "github.com/agentd/agentd/gen/go/agentd/v1"
)

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}

// leg is one Generate stream of the fake: the events it sends, then how
// it ends.
type leg struct {
	events []*agentdv1.GenerateResponse
	end    error // the stream's status; nil: OK
	drop   bool  // drop the connection instead of sending anything
	hold   bool  // after the events, wait for the client to go
}

// fake is an AgentService whose Generate streams play its legs in turn
// and record the first message of each.
type fake struct {
	agentdv1.UnimplementedAgentServiceServer
	legs  []leg
	conns *conns
	gone  chan struct{} // closed when a holding leg's client has gone

	mu     sync.Mutex
	firsts []*agentdv1.GenerateRequest
}

func (f *fake) Generate(stream grpc.BidiStreamingServer[agentdv1.GenerateRequest, agentdv1.GenerateResponse]) error {
	first, err := stream.Recv()
	if err != nil {
		return err
	}
	if _, err := stream.Recv(); !errors.Is(err, io.EOF) {
		return status.Errorf(codes.InvalidArgument, "the stream was not half-closed after its first message: %v", err)
	}
	f.mu.Lock()
	n := len(f.firsts)
	f.firsts = append(f.firsts, first)
	f.mu.Unlock()
	if n >= len(f.legs) {
		return status.Error(codes.Internal, "the test has no more streams")
	}
	l := f.legs[n]
	if l.drop {
		f.conns.drop()
		<-stream.Context().Done()
		return nil
	}
	if l.hold {
		// The client may go before every event is sent: the stream's
		// context ends either way.
		defer close(f.gone)
		for _, ev := range l.events {
			_ = stream.Send(ev)
		}
		<-stream.Context().Done()
		return nil
	}
	for _, ev := range l.events {
		if err := stream.Send(ev); err != nil {
			return err
		}
	}
	return l.end
}

// conns is a listener that can drop every connection it accepted.
type conns struct {
	*bufconn.Listener
	mu   sync.Mutex
	open []net.Conn
}

func (l *conns) Accept() (net.Conn, error) {
	c, err := l.Listener.Accept()
	if err == nil {
		l.mu.Lock()
		l.open = append(l.open, c)
		l.mu.Unlock()
	}
	return c, err
}

func (l *conns) drop() {
	l.mu.Lock()
	defer l.mu.Unlock()
	for _, c := range l.open {
		_ = c.Close()
	}
	l.open = nil
}

// serve serves f on an in-memory listener and returns a client of it;
// both close when the test ends.
func serve(t *testing.T, f *fake) agentdv1.AgentServiceClient {
	t.Helper()
	f.conns = &conns{Listener: bufconn.Listen(1 << 20)}
	f.gone = make(chan struct{})
	srv := grpc.NewServer()
	agentdv1.RegisterAgentServiceServer(srv, f)
	served := make(chan struct{})
	go func() {
		defer close(served)
		_ = srv.Serve(f.conns)
	}()
	conn, err := grpc.NewClient("passthrough:///bufconn",
		grpc.WithContextDialer(func(ctx context.Context, _ string) (net.Conn, error) { return f.conns.DialContext(ctx) }),
		grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatalf("grpc.NewClient: %v", err)
	}
	t.Cleanup(func() {
		_ = conn.Close()
		srv.Stop()
		<-served
	})
	return agentdv1.NewAgentServiceClient(conn)
}

func started(seq int64) *agentdv1.GenerateResponse {
	return &agentdv1.GenerateResponse{Sequence: seq, Event: &agentdv1.GenerateResponse_Started{Started: &agentdv1.GenerationStarted{GenerationId: "g1"}}}
}

func textDelta(seq int64, text string) *agentdv1.GenerateResponse {
	return &agentdv1.GenerateResponse{Sequence: seq, Event: &agentdv1.GenerateResponse_TextDelta{TextDelta: &agentdv1.TextDelta{Text: text}}}
}

func withdrawn(seq int64, turn int32, from int64) *agentdv1.GenerateResponse {
	return &agentdv1.GenerateResponse{Sequence: seq, Event: &agentdv1.GenerateResponse_TurnWithdrawn{TurnWithdrawn: &agentdv1.TurnWithdrawn{Turn: turn, FromSequence: from, Reason: "its replica died"}}}
}

func usage(seq int64, repeated bool) *agentdv1.GenerateResponse {
	return &agentdv1.GenerateResponse{Sequence: seq, Event: &agentdv1.GenerateResponse_Usage{Usage: &agentdv1.Usage{Turn: 1, Repeated: repeated}}}
}

func completed(seq int64) *agentdv1.GenerateResponse {
	return &agentdv1.GenerateResponse{Sequence: seq, Event: &agentdv1.GenerateResponse_Completed{Completed: &agentdv1.GenerationCompleted{}}}
}

func paused(seq int64) *agentdv1.GenerateResponse {
	return &agentdv1.GenerateResponse{Sequence: seq, Event: &agentdv1.GenerateResponse_Paused{Paused: &agentdv1.GenerationPaused{GenerationId: "g1"}}}
}

func start(detach bool) *agentdv1.GenerateRequest {
	return &agentdv1.GenerateRequest{Kind: &agentdv1.GenerateRequest_Start{Start: &agentdv1.StartGeneration{Detach: detach}}}
}

func attach(after int64) *agentdv1.GenerateRequest {
	return &agentdv1.GenerateRequest{Kind: &agentdv1.GenerateRequest_Attach{Attach: &agentdv1.AttachGeneration{GenerationId: "g1", AfterSequence: after}}}
}

var unavailable = status.Error(codes.Unavailable, "the replica died")

// X-G2, the client's half: a client whose stream breaks attaches with the
// last sequence number it saw and gets every event once and in order; the
// text of a withdrawn turn is discarded. A detached start's stream ends
// after started, and the loop attaches at once.
func TestGenerate(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name    string
		first   *agentdv1.GenerateRequest
		legs    []leg
		firsts  []*agentdv1.GenerateRequest // the first message of each stream
		attach  []string                    // what OnAttach was told
		seqs    []int64                     // the sequence numbers yielded
		text    string                      // Text after every event
		errCode codes.Code                  // the loop's error; OK: none
		errText string
	}{{
		name:   "a stream that does not break",
		first:  start(false),
		legs:   []leg{{events: []*agentdv1.GenerateResponse{started(1), textDelta(2, "Hello"), completed(3)}}},
		firsts: []*agentdv1.GenerateRequest{start(false)},
		seqs:   []int64{1, 2, 3},
		text:   "Hello",
	}, {
		name:  "UNAVAILABLE mid-turn, and the turn is withdrawn",
		first: start(false),
		legs: []leg{
			{events: []*agentdv1.GenerateResponse{started(1), textDelta(2, "Let me "), textDelta(3, "as")}, end: unavailable},
			// 3 again: a replay the loop must not yield twice.
			{events: []*agentdv1.GenerateResponse{textDelta(3, "as"), withdrawn(4, 1, 2), textDelta(5, "Let me ask."), usage(6, true), completed(7)}},
		},
		firsts: []*agentdv1.GenerateRequest{start(false), attach(3)},
		attach: []string{"g1 after 3, Unavailable"},
		seqs:   []int64{1, 2, 3, 4, 5, 6, 7},
		text:   "Let me ask.",
	}, {
		name:  "the connection drops",
		first: start(false),
		legs: []leg{
			{events: []*agentdv1.GenerateResponse{started(1), textDelta(2, "Hi")}, end: unavailable},
			{drop: true},
			{events: []*agentdv1.GenerateResponse{textDelta(3, " there"), completed(4)}},
		},
		firsts: []*agentdv1.GenerateRequest{start(false), attach(2), attach(2)},
		attach: []string{"g1 after 2, Unavailable", "g1 after 2, Unavailable"},
		seqs:   []int64{1, 2, 3, 4},
		text:   "Hi there",
	}, {
		name:   "a detached start: its stream ends after started",
		first:  start(true),
		legs:   []leg{{events: []*agentdv1.GenerateResponse{started(1)}}, {events: []*agentdv1.GenerateResponse{textDelta(2, "Hi"), completed(3)}}},
		firsts: []*agentdv1.GenerateRequest{start(true), attach(1)},
		attach: []string{"g1 after 1, OK"},
		seqs:   []int64{1, 2, 3},
		text:   "Hi",
	}, {
		name:   "a detached start whose stream goes on",
		first:  start(true),
		legs:   []leg{{events: []*agentdv1.GenerateResponse{started(1), textDelta(2, "Hi"), completed(3)}}},
		firsts: []*agentdv1.GenerateRequest{start(true)},
		seqs:   []int64{1, 2, 3},
		text:   "Hi",
	}, {
		name:   "paused ends the loop",
		first:  start(false),
		legs:   []leg{{events: []*agentdv1.GenerateResponse{started(1), paused(2)}}},
		firsts: []*agentdv1.GenerateRequest{start(false)},
		seqs:   []int64{1, 2},
	}, {
		name:    "another status is the generation's end",
		first:   start(false),
		legs:    []leg{{events: []*agentdv1.GenerateResponse{started(1)}, end: status.Error(codes.Internal, "the model failed")}},
		firsts:  []*agentdv1.GenerateRequest{start(false)},
		seqs:    []int64{1},
		errCode: codes.Internal,
		errText: "the model failed",
	}, {
		name:    "broken before started: never started twice",
		first:   start(false),
		legs:    []leg{{end: unavailable}},
		firsts:  []*agentdv1.GenerateRequest{start(false)},
		errCode: codes.Unavailable,
		errText: "the replica died",
	}, {
		name:    "ended before started",
		first:   start(true),
		legs:    []leg{{}},
		firsts:  []*agentdv1.GenerateRequest{start(true)},
		errCode: codes.Unknown,
		errText: "the stream ended before the generation started",
	}, {
		name:  "gives up after the attempts",
		first: start(false),
		legs: []leg{
			{events: []*agentdv1.GenerateResponse{started(1)}, end: unavailable},
			{end: unavailable}, {end: unavailable}, {end: unavailable},
		},
		firsts:  []*agentdv1.GenerateRequest{start(false), attach(1), attach(1), attach(1)},
		attach:  []string{"g1 after 1, Unavailable", "g1 after 1, Unavailable", "g1 after 1, Unavailable"},
		seqs:    []int64{1},
		errCode: codes.Unavailable,
		errText: "gave up after 3 attempts",
	}, {
		name:  "a new event resets the attempts",
		first: start(false),
		legs: []leg{
			{events: []*agentdv1.GenerateResponse{started(1)}, end: unavailable},
			{end: unavailable},
			{events: []*agentdv1.GenerateResponse{textDelta(2, "a")}, end: unavailable},
			{end: unavailable},
			{events: []*agentdv1.GenerateResponse{textDelta(3, "b")}, end: unavailable},
			{end: unavailable},
			{events: []*agentdv1.GenerateResponse{completed(4)}},
		},
		firsts: []*agentdv1.GenerateRequest{start(false), attach(1), attach(1), attach(2), attach(2), attach(3), attach(3)},
		attach: []string{"g1 after 1, Unavailable", "g1 after 1, Unavailable", "g1 after 2, Unavailable",
			"g1 after 2, Unavailable", "g1 after 3, Unavailable", "g1 after 3, Unavailable"},
		seqs: []int64{1, 2, 3, 4},
		text: "ab",
	}} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			f := &fake{legs: tc.legs}
			client := serve(t, f)
			var attached []string
			p := Policy{Attempts: 3, Backoff: time.Millisecond, MaxBackoff: 4 * time.Millisecond,
				OnAttach: func(id string, after int64, cause error) {
					attached = append(attached, fmt.Sprintf("%s after %d, %v", id, after, status.Code(cause)))
				}}
			var seqs []int64
			var text Text
			var err error
			for ev, e := range p.Generate(t.Context(), client, tc.first) {
				if e != nil {
					err = e
					break
				}
				seqs = append(seqs, ev.GetSequence())
				text.Apply(ev)
			}
			if got := status.Code(err); got != tc.errCode || err != nil && !strings.Contains(err.Error(), tc.errText) {
				t.Errorf("error: %v; want %v saying %q", err, tc.errCode, tc.errText)
			}
			if diff := cmp.Diff(tc.seqs, seqs); diff != "" {
				t.Errorf("sequence numbers yielded (-want +got):\n%s", diff)
			}
			if got := text.String(); got != tc.text {
				t.Errorf("text: %q; want %q", got, tc.text)
			}
			if diff := cmp.Diff(tc.firsts, f.firsts, protocmp.Transform()); diff != "" {
				t.Errorf("each stream's first message (-want +got):\n%s", diff)
			}
			if diff := cmp.Diff(tc.attach, attached); diff != "" {
				t.Errorf("OnAttach (-want +got):\n%s", diff)
			}
		})
	}
}

// A caller that stops reading ends the stream: the server sees the
// client go.
func TestGenerateStopped(t *testing.T) {
	t.Parallel()
	f := &fake{legs: []leg{{events: []*agentdv1.GenerateResponse{started(1), textDelta(2, "Hi")}, hold: true}}}
	client := serve(t, f)
	for ev, err := range Default.Generate(t.Context(), client, start(false)) {
		if err != nil {
			t.Fatal(err)
		}
		if ev.GetStarted() == nil {
			t.Fatalf("first event: %v; want started", ev)
		}
		break
	}
	select {
	case <-f.gone:
	case <-t.Context().Done():
		t.Fatal("the stream is still open after the loop stopped")
	}
}

// Text takes back exactly the withdrawn turn's deltas, from its
// from_sequence on.
func TestText(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name      string
		events    []*agentdv1.GenerateResponse
		withdrawn string // what the last event took back
		text      string
	}{
		{"deltas add up", []*agentdv1.GenerateResponse{started(1), textDelta(2, "a"), textDelta(3, "b")}, "", "ab"},
		{"the second turn withdrawn", []*agentdv1.GenerateResponse{textDelta(2, "first. "), usage(3, false), textDelta(4, "sec"), textDelta(5, "ond"), withdrawn(6, 2, 4)}, "second", "first. "},
		{"a withdrawal with no text to take back", []*agentdv1.GenerateResponse{textDelta(2, "first."), withdrawn(3, 2, 3)}, "", "first."},
		{"the turn again, after its withdrawal", []*agentdv1.GenerateResponse{textDelta(2, "par"), withdrawn(3, 1, 2), textDelta(4, "whole"), usage(5, true)}, "", "whole"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			var text Text
			var withdrawn string
			for _, ev := range tc.events {
				withdrawn = text.Apply(ev)
			}
			if withdrawn != tc.withdrawn || text.String() != tc.text {
				t.Errorf("withdrawn %q, text %q; want %q, %q", withdrawn, text.String(), tc.withdrawn, tc.text)
			}
		})
	}
}
