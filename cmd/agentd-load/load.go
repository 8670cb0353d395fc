package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"sync"
	"sync/atomic"
	"time"

	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/structpb"

	agentdv1 "github.com/agentd/agentd/gen/go/agentd/v1"
)

// startRequest is the generation every stream runs: turns tool turns, each
// calling the demo server's echo tool, then a final text turn.
func startRequest(turns int) (*agentdv1.StartGeneration, error) {
	script := make([]any, 0, turns+1)
	for i := range turns {
		script = append(script, map[string]any{"tool_calls": []any{
			map[string]any{"name": "echo", "arguments": map[string]any{"text": fmt.Sprintf("turn %d", i+1)}},
		}})
	}
	script = append(script, map[string]any{"text": "done: {{tool_outputs}}"})
	opts, err := structpb.NewStruct(map[string]any{"script": map[string]any{"turns": script}})
	if err != nil {
		return nil, err
	}
	maxTurns := int32(max(turns, 1))
	return &agentdv1.StartGeneration{
		Agent: &agentdv1.Agent{
			Provider:        "script",
			Model:           "load",
			Instructions:    "You are a load-test agent.",
			Mcps:            []*agentdv1.MCPServer{{Transport: &agentdv1.MCPServer_Ref{Ref: "demo"}}},
			MaxToolTurns:    &maxTurns,
			ProviderOptions: opts,
		},
		Messages: []*agentdv1.Message{{
			Role:  agentdv1.Role_ROLE_USER,
			Parts: []*agentdv1.Part{{Kind: &agentdv1.Part_Text{Text: fmt.Sprintf("Call echo %d times.", turns)}}},
		}},
	}, nil
}

// wantText is the final text of a generation that ran as scripted.
func wantText(turns int) string {
	if turns == 0 {
		return "done: "
	}
	return fmt.Sprintf("done: turn %d", turns)
}

// badResult is a generation whose stream ended OK but not as scripted.
type badResult struct{ what string }

func (e *badResult) Error() string { return e.what }

// errorKind is how a failed generation is counted: its gRPC code, or
// BadResult.
func errorKind(err error) string {
	var bad *badResult
	if errors.As(err, &bad) {
		return "BadResult"
	}
	return status.Code(err).String()
}

// driver runs generations against one agentd. Its methods are safe for
// concurrent use.
type driver struct {
	clients []agentdv1.AgentServiceClient // stream i uses clients[i mod len]
	start   *agentdv1.StartGeneration
	turns   int
	timeout time.Duration

	// For progress reports while the load runs.
	completed, failed atomic.Int64
}

// generate runs one generation and returns how many tool calls finished in
// it; err is nil only if it completed as scripted.
func (d *driver) generate(ctx context.Context, client agentdv1.AgentServiceClient, start *agentdv1.StartGeneration) (toolCalls int, err error) {
	ctx, cancel := context.WithTimeout(ctx, d.timeout)
	defer cancel()
	stream, err := client.Generate(ctx)
	if err != nil {
		return 0, err
	}
	// A failed Send reports io.EOF; the stream's status comes from Recv.
	if err := stream.Send(&agentdv1.GenerateRequest{Kind: &agentdv1.GenerateRequest_Start{Start: start}}); err == nil {
		// Nothing is gated, so half-closing cannot pause the generation.
		_ = stream.CloseSend()
	}
	return d.check(receive(stream))
}

// received is what a generation's stream said: how many tool calls
// finished, the first failed call's output, and the completed event.
type received struct {
	toolCalls int
	toolErr   string
	completed *agentdv1.GenerationCompleted
}

// receive reads stream to its end.
func receive(stream agentdv1.AgentService_GenerateClient) (received, error) {
	var r received
	for {
		ev, err := stream.Recv()
		if errors.Is(err, io.EOF) {
			return r, nil
		}
		if err != nil {
			return r, err
		}
		switch k := ev.GetEvent().(type) {
		case *agentdv1.GenerateResponse_ToolCallFinished:
			r.toolCalls++
			if k.ToolCallFinished.GetIsError() && r.toolErr == "" {
				r.toolErr = k.ToolCallFinished.GetOutput()
			}
		case *agentdv1.GenerateResponse_Completed:
			r.completed = k.Completed
		}
	}
}

// check returns how many tool calls finished, and an error unless the
// generation completed as scripted: every turn's call ran and the final
// text is the script's.
func (d *driver) check(r received, err error) (int, error) {
	if err != nil {
		return r.toolCalls, err
	}
	var text string
	for _, p := range r.completed.GetMessage().GetParts() {
		text += p.GetText()
	}
	switch {
	case r.completed == nil:
		return r.toolCalls, &badResult{"the stream ended OK without a completed event"}
	case r.toolErr != "":
		return r.toolCalls, &badResult{"a tool call failed: " + r.toolErr}
	case r.toolCalls != d.turns || int(r.completed.GetToolTurns()) != d.turns:
		return r.toolCalls, &badResult{fmt.Sprintf("%d tool calls in %d tool turns, want %d", r.toolCalls, r.completed.GetToolTurns(), d.turns)}
	case text != wantText(d.turns):
		return r.toolCalls, &badResult{fmt.Sprintf("final text %q, want %q", text, wantText(d.turns))}
	}
	return r.toolCalls, nil
}

// tally is what the streams recorded.
type tally struct {
	latencies []time.Duration // of completed generations
	toolCalls int64
	errors    map[string]int64  // by errorKind
	samples   map[string]string // the first error of each kind
}

func (t *tally) record(latency time.Duration, toolCalls int, err error) {
	t.toolCalls += int64(toolCalls)
	if err == nil {
		t.latencies = append(t.latencies, latency)
		return
	}
	kind := errorKind(err)
	if t.errors == nil {
		t.errors, t.samples = make(map[string]int64), make(map[string]string)
	}
	if t.errors[kind] == 0 {
		t.samples[kind] = err.Error()
	}
	t.errors[kind]++
}

func (t *tally) merge(o *tally) {
	t.latencies = append(t.latencies, o.latencies...)
	t.toolCalls += o.toolCalls
	for kind, n := range o.errors {
		if t.errors == nil {
			t.errors, t.samples = make(map[string]int64), make(map[string]string)
		}
		if t.errors[kind] == 0 {
			t.samples[kind] = o.samples[kind]
		}
		t.errors[kind] += n
	}
}

func (t *tally) failed() int64 {
	var n int64
	for _, c := range t.errors {
		n += c
	}
	return n
}

// load runs streams concurrent streams, each starting generations back to
// back until the duration has passed, stream i on client i mod
// len(d.clients), and returns what they recorded, how many generations
// completed on each client, and how long it took from the first start to
// the last end.
func (d *driver) load(ctx context.Context, streams int, duration time.Duration) (*tally, []int64, time.Duration) {
	began := time.Now()
	until := began.Add(duration)
	tallies := make([]tally, streams)
	var wg sync.WaitGroup
	for i := range tallies {
		// Each stream sends its own copy of the request.
		start := proto.CloneOf(d.start)
		client := d.clients[i%len(d.clients)]
		wg.Go(func() {
			for ctx.Err() == nil && time.Now().Before(until) {
				t0 := time.Now()
				calls, err := d.generate(ctx, client, start)
				tallies[i].record(time.Since(t0), calls, err)
				if err != nil {
					d.failed.Add(1)
				} else {
					d.completed.Add(1)
				}
			}
		})
	}
	wg.Wait()
	elapsed := time.Since(began)
	total := &tally{}
	perClient := make([]int64, len(d.clients))
	for i := range tallies {
		total.merge(&tallies[i])
		perClient[i%len(d.clients)] += int64(len(tallies[i].latencies))
	}
	return total, perClient, elapsed
}
