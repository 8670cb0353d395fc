package server

import (
	"context"
	"errors"
	"fmt"
	"iter"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/protobuf/types/known/durationpb"

	bridgev1 "github.com/agentd/agentd/gen/go/agentd/bridge/v1"
	agentdv1 "github.com/agentd/agentd/gen/go/agentd/v1"
	"github.com/agentd/agentd/internal/config"
	"github.com/agentd/agentd/providers"
)

// reuseProv asks for the function "ask" as call_1 in each of its first two
// turns, then answers.
type reuseProv struct{ turns atomic.Int32 }

func (p *reuseProv) Name() string { return "reuse" }
func (p *reuseProv) Capabilities() providers.Capabilities {
	return providers.Capabilities{ModelOptional: true}
}
func (p *reuseProv) Stream(ctx context.Context, req *providers.Request) iter.Seq2[providers.Event, error] {
	n := p.turns.Add(1)
	return func(yield func(providers.Event, error) bool) {
		if n <= 2 { // a provider numbering its calls per response: "call_1" every turn
			yield(&providers.ToolCall{Call: &agentdv1.ToolCall{Id: "call_1", Name: "ask", Arguments: "{}"}}, nil)
		} else {
			yield(&providers.TextDelta{Text: "done"}, nil)
		}
		yield(&providers.Stop{Reason: agentdv1.StopReason_STOP_REASON_END_TURN}, nil)
	}
}

// answeringStream is a Generate stream whose client answers every function
// call at once.
type answeringStream struct {
	grpc.ServerStream
	ctx   context.Context
	first *agentdv1.GenerateRequest
	once  sync.Once
	calls chan string
	mu    sync.Mutex
	kinds []string
}

func (s *answeringStream) Context() context.Context { return s.ctx }
func (s *answeringStream) Recv() (*agentdv1.GenerateRequest, error) {
	var f *agentdv1.GenerateRequest
	s.once.Do(func() { f = s.first })
	if f != nil {
		return f, nil
	}
	select {
	case id := <-s.calls:
		return &agentdv1.GenerateRequest{Kind: &agentdv1.GenerateRequest_FunctionResult{FunctionResult: &agentdv1.FunctionResult{CallId: id, Output: "42"}}}, nil
	case <-s.ctx.Done():
		return nil, s.ctx.Err()
	}
}
func (s *answeringStream) Send(ev *agentdv1.GenerateResponse) error {
	s.mu.Lock()
	s.kinds = append(s.kinds, fmt.Sprintf("%T", ev.GetEvent()))
	s.mu.Unlock()
	if fc := ev.GetFunctionCall(); fc != nil {
		s.calls <- fc.GetCallId()
	}
	return nil
}

// A provider that numbers its calls per response ("call_1" every turn):
// the answer to a later turn's call_1 is taken, not ignored as a repeat of
// the earlier one's. X-H6: in a synctest bubble the answer timeout runs on
// the fake clock, so a loaded machine cannot make it expire; the client
// answers at once, so the generation never waits at all.
func TestReusedCallIDAcrossTurns(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		reg, _ := providers.NewRegistry(&reuseProv{})
		s := New(Options{Providers: reg, Bridge: fuzzBridge{tools: []*bridgev1.ServerTools{}}, Config: config.Default().Generation})
		start := &agentdv1.StartGeneration{
			Agent:         &agentdv1.Agent{Provider: "reuse", Tools: []*agentdv1.FunctionTool{{Name: "ask"}}},
			Messages:      []*agentdv1.Message{userMessage("hi")},
			AnswerTimeout: durationpb.New(time.Second),
		}
		ctx, cancel := context.WithCancel(t.Context())
		defer cancel()
		stream := &answeringStream{ctx: ctx, calls: make(chan string, 4), first: &agentdv1.GenerateRequest{Kind: &agentdv1.GenerateRequest_Start{Start: start}}}
		began := time.Now()
		if err := s.Generate(stream); err != nil {
			t.Errorf("the client answered every function call, yet: %v (events %v)", err, stream.kinds)
		}
		if waited := time.Since(began); waited != 0 {
			t.Errorf("the generation waited %v for answers the client gave at once", waited)
		}
	})
}

// lostProv asks for a function call after enough text to fill the
// event queue, then, in its second turn, reports whether its context is
// still live.
type lostProv struct {
	turn2Live atomic.Bool
	turns     atomic.Int32
}

func (p *lostProv) Name() string { return "lostprov" }
func (p *lostProv) Capabilities() providers.Capabilities {
	return providers.Capabilities{ModelOptional: true}
}
func (p *lostProv) Stream(ctx context.Context, req *providers.Request) iter.Seq2[providers.Event, error] {
	n := p.turns.Add(1)
	return func(yield func(providers.Event, error) bool) {
		if n == 1 {
			for i := 0; i < 61; i++ {
				if !yield(&providers.TextDelta{Text: "x"}, nil) {
					return
				}
			}
			yield(&providers.ToolCall{Call: &agentdv1.ToolCall{Id: "f1", Name: "ask", Arguments: "{}"}}, nil)
			yield(&providers.Stop{Reason: agentdv1.StopReason_STOP_REASON_END_TURN}, nil)
			return
		}
		// turn 2: the client is long gone; is the generation still live?
		// (On the test bubble's clock, the wait ends only once nothing
		// else can happen: a cancellation on its way comes first.)
		select {
		case <-ctx.Done():
			yield(nil, context.Cause(ctx))
			return
		case <-time.After(300 * time.Millisecond):
		}
		p.turn2Live.Store(true)
		yield(&providers.TextDelta{Text: "done"}, nil)
		yield(&providers.Stop{Reason: agentdv1.StopReason_STOP_REASON_END_TURN}, nil)
	}
}

// lostStream is a client that sends the last answer and then crashes,
// slow to read until it does.
type lostStream struct {
	grpc.ServerStream
	ctx      context.Context
	mu       sync.Mutex
	first    *agentdv1.GenerateRequest
	recvs    int
	sendGate chan struct{}
	gone     atomic.Bool
}

func (s *lostStream) Context() context.Context { return s.ctx }
func (s *lostStream) Recv() (*agentdv1.GenerateRequest, error) {
	s.mu.Lock()
	s.recvs++
	n := s.recvs
	s.mu.Unlock()
	switch n {
	case 1:
		return s.first, nil
	case 2:
		// Once every other goroutine of the bubble is blocked, the loop
		// waits in awaitAnswers (the sender is stuck on sendGate, and the
		// queue holds every event before the wait).
		synctest.Wait()
		return &agentdv1.GenerateRequest{Kind: &agentdv1.GenerateRequest_FunctionResult{FunctionResult: &agentdv1.FunctionResult{CallId: "f1", Output: "42"}}}, nil
	default:
		s.gone.Store(true)
		go func() { time.Sleep(100 * time.Millisecond); close(s.sendGate) }() // fake time: once the loop blocks on the full queue
		return nil, errors.New("connection reset: client crashed")
	}
}
func (s *lostStream) Send(ev *agentdv1.GenerateResponse) error {
	<-s.sendGate // the client is slow to read until it crashes
	if s.gone.Load() {
		return errors.New("connection reset")
	}
	return nil
}

// A client that vanishes right after its last answer stops the
// generation, as anywhere outside a wait for answers. X-H6: the test runs
// in a synctest bubble, where the client's slowness and the model's second
// turn take fake time, and states are reached by synctest.Wait, not by
// sleeping.
func TestClientLostAfterLastAnswer(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		prov := &lostProv{}
		reg, err := providers.NewRegistry(prov)
		if err != nil {
			t.Fatal(err)
		}
		s := New(Options{Providers: reg, Bridge: fuzzBridge{tools: []*bridgev1.ServerTools{}}, Config: config.Default().Generation})
		start := &agentdv1.StartGeneration{
			Agent:    &agentdv1.Agent{Provider: "lostprov", Tools: []*agentdv1.FunctionTool{{Name: "ask"}}},
			Messages: []*agentdv1.Message{userMessage("hi")},
		}
		stream := &lostStream{ctx: t.Context(), sendGate: make(chan struct{}),
			first: &agentdv1.GenerateRequest{Kind: &agentdv1.GenerateRequest_Start{Start: start}}}
		_ = s.Generate(stream)
		if prov.turn2Live.Load() {
			t.Errorf("the client vanished (Recv failed) but the generation kept running: model turn 2 ran to completion with a live context")
		}
	})
}
