package app_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/protobuf/types/known/structpb"

	agentdv1 "github.com/agentd/agentd/gen/go/agentd/v1"
	"github.com/agentd/agentd/internal/app"
	"github.com/agentd/agentd/internal/app/apptest"
	"github.com/agentd/agentd/internal/config"
	"github.com/agentd/agentd/internal/mcptest"
	"github.com/agentd/agentd/internal/store"
	"github.com/agentd/agentd/internal/store/pgtest"
)

// The stores the durability benchmarks run on; "postgres" skips without
// a server (pgtest), as `make bench-store` provides one.
var benchStores = []string{config.StoreSQLite, config.StorePostgres}

// benchStoreConfig is testConfig on driver: its own SQLite file in a new
// state_dir, or a new PostgreSQL database.
func benchStoreConfig(b *testing.B, driver string) config.Config {
	b.Helper()
	cfg := testConfig(b)
	if driver == config.StorePostgres {
		cfg.Store.Driver, cfg.Store.DSN = config.StorePostgres, pgtest.DSN(b)
	}
	return cfg
}

// BenchmarkDurability measures what the durable record of generations
// (X-G2, X-G3) costs the tool loop, on each store: two agentds served as
// `agentd serve` serves them (in-memory listener, interceptors, embedded
// bridge), one with the record and one without (server.Options.Generations
// nil, through app.WithGenerations), each bridging a Go stdio MCP server
// (mcptest.Tools, registered shared: one process serves every session).
// Each generation is a Generate stream with the script provider: three
// model turns each calling echo through the bridge, then a text turn (4
// model turns, 3 tool calls). Rounds of durabilityRound generations go to
// each agentd in turn, the order swapping from round to round, and it
// reports the median over rounds of the ratio record/off (target: 1.15×
// on SQLite, 1.25× on PostgreSQL) and of each arm's time per generation.
// With the record on, the store's write calls are timed as the server
// makes them: the p50 and p99 of Checkpoint and Append, Create's and
// Finish's p50, and how many of each a generation makes.
func BenchmarkDurability(b *testing.B) {
	exe, env := mcptest.Command(b, mcptest.Tools)
	start := toolLoopRequest(b)
	for _, driver := range benchStores {
		b.Run(driver, func(b *testing.B) {
			serve := func(wrap func(store.Generations) store.Generations) func() {
				cfg := benchStoreConfig(b, driver)
				cfg.Bridge.TerminateGrace = benchGrace
				cfg.Bridge.Servers = map[string]config.Server{"tools": {Command: exe, Env: env, Shared: config.SharedGlobal}}
				o := app.WithGenerations(app.Options{Config: cfg, Logger: slog.New(slog.DiscardHandler)}, wrap)
				conn, _ := apptest.Serve(b, o)
				gen := toolLoop(b, conn, start)
				gen() // connect, start the server's process, fill the schema cache
				return gen
			}
			timed := &timedGenerations{}
			record := serve(func(g store.Generations) store.Generations { timed.Generations = g; return timed })
			off := serve(func(store.Generations) store.Generations { return nil })
			timed.reset()

			perGen, ratios := alternateRounds(b, durabilityRound, off, record)
			b.ReportMetric(median(ratios), "record/off")
			b.ReportMetric(median(perGen[0]), "µs/gen-off")
			b.ReportMetric(median(perGen[1]), "µs/gen-record")
			timed.report(b, len(ratios)*durabilityRound)
		})
	}
}

// durabilityRound is how many generations a round of BenchmarkDurability
// runs on one agentd.
const durabilityRound = 20

// alternateRounds runs b's rounds: in each, gens calls of base, then gens
// of other, the order swapping from round to round so that a drift of the
// machine's load falls on both. It returns each arm's µs per call by
// round (base first) and each round's ratio other/base.
func alternateRounds(b *testing.B, gens int, base, other func()) (perGen [2][]float64, ratios []float64) {
	arms := [2]func(){base, other}
	rounds := 0
	for b.Loop() {
		for i := range arms {
			arm := (i + rounds) % len(arms)
			t0 := time.Now()
			for range gens {
				arms[arm]()
			}
			perGen[arm] = append(perGen[arm], float64(time.Since(t0).Microseconds())/float64(gens))
		}
		rounds++
	}
	ratios = make([]float64, rounds)
	for r := range rounds {
		ratios[r] = perGen[1][r] / perGen[0][r]
	}
	return perGen, ratios
}

// toolLoopRequest is the tool-loop workload: three model turns that each
// call the "tools" server's echo, then a text turn.
func toolLoopRequest(b testing.TB) *agentdv1.GenerateRequest {
	b.Helper()
	var turns []any
	for i := range 3 {
		turns = append(turns, map[string]any{"tool_calls": []any{
			map[string]any{"name": "echo", "arguments": map[string]any{"text": fmt.Sprintf("turn %d", i+1)}},
		}})
	}
	turns = append(turns, map[string]any{"text": "done: {{tool_outputs}}"})
	opts, err := structpb.NewStruct(map[string]any{"script": map[string]any{"turns": turns}})
	if err != nil {
		b.Fatal(err)
	}
	maxTurns := int32(3)
	return &agentdv1.GenerateRequest{Kind: &agentdv1.GenerateRequest_Start{Start: &agentdv1.StartGeneration{
		Agent: &agentdv1.Agent{
			Provider:        "script",
			Mcps:            []*agentdv1.MCPServer{{Transport: &agentdv1.MCPServer_Ref{Ref: "tools"}}},
			MaxToolTurns:    &maxTurns,
			ProviderOptions: opts,
		},
		Messages: []*agentdv1.Message{{Role: agentdv1.Role_ROLE_USER, Parts: []*agentdv1.Part{{Kind: &agentdv1.Part_Text{Text: "Call echo three times."}}}}},
	}}}
}

// toolLoop returns a function that runs one generation of start on conn
// to its end and fails b unless it completed with three tool calls that
// succeeded.
func toolLoop(b testing.TB, conn *grpc.ClientConn, start *agentdv1.GenerateRequest) func() {
	client := agentdv1.NewAgentServiceClient(conn)
	return func() { toolGeneration(b, client, start, 3) }
}

// BenchmarkAttachReplay measures an attach that replays 1,000 events
// (X-G2), on each store: two agentds on one store (one SQLite file, or one
// PostgreSQL database); a generation of exactly 1,000 events (the script
// provider's text turn, one text delta per word) runs on the first and
// completes; each operation is a client attaching to it on the second,
// which does not run it and reads every event from the store, with
// after_sequence 0, and receiving all 1,000 to the stream's end. It
// reports the time per replay (ns/op) and its p50 and p99.
func BenchmarkAttachReplay(b *testing.B) {
	const want = 1000
	for _, driver := range benchStores {
		b.Run(driver, func(b *testing.B) {
			cfg := benchStoreConfig(b, driver)
			var clients [2]agentdv1.AgentServiceClient
			for i := range clients {
				conn, _ := apptest.Serve(b, app.Options{Config: cfg, Logger: slog.New(slog.DiscardHandler)})
				clients[i] = agentdv1.NewAgentServiceClient(conn)
			}
			// A one-word generation gives the events besides the words.
			id, n := textGeneration(b, clients[0], 1)
			if n >= want {
				b.Fatalf("a one-word generation has %d events", n)
			}
			id, n = textGeneration(b, clients[0], want-(n-1))
			if n != want {
				b.Fatalf("the generation has %d events; want %d", n, want)
			}
			replay := func() {
				if got := attachCount(b, clients[1], id); got != want {
					b.Fatalf("the attach received %d events; want %d", got, want)
				}
			}
			replay() // connect outside the measurement
			var took []time.Duration
			for b.Loop() {
				t0 := time.Now()
				replay()
				took = append(took, time.Since(t0))
			}
			slices.Sort(took)
			at := func(q float64) float64 {
				return float64(took[int(q*float64(len(took)-1))]) / float64(time.Millisecond)
			}
			b.ReportMetric(at(0.50), "p50-ms")
			b.ReportMetric(at(0.99), "p99-ms")
		})
	}
}

// textGeneration runs a generation whose one model turn says words words
// and returns its id and how many events its stream carried.
func textGeneration(b *testing.B, client agentdv1.AgentServiceClient, words int) (string, int) {
	b.Helper()
	text := strings.TrimSpace(strings.Repeat("w ", words))
	opts, err := structpb.NewStruct(map[string]any{"script": map[string]any{"turns": []any{map[string]any{"text": text}}}})
	if err != nil {
		b.Fatal(err)
	}
	stream, err := client.Generate(b.Context())
	if err != nil {
		b.Fatal(err)
	}
	if err := stream.Send(&agentdv1.GenerateRequest{Kind: &agentdv1.GenerateRequest_Start{Start: &agentdv1.StartGeneration{
		Agent:    &agentdv1.Agent{Provider: "script", ProviderOptions: opts},
		Messages: []*agentdv1.Message{{Role: agentdv1.Role_ROLE_USER, Parts: []*agentdv1.Part{{Kind: &agentdv1.Part_Text{Text: "talk"}}}}},
	}}}); err != nil {
		b.Fatal(err)
	}
	if err := stream.CloseSend(); err != nil {
		b.Fatal(err)
	}
	var id string
	n := 0
	for {
		ev, err := stream.Recv()
		if errors.Is(err, io.EOF) {
			return id, n
		}
		if err != nil {
			b.Fatal(err)
		}
		n++
		if s := ev.GetStarted(); s != nil {
			id = s.GetGenerationId()
		}
	}
}

// attachCount attaches to generation id with after_sequence 0 and returns
// how many events it received, failing b unless they are numbered 1, 2, …
func attachCount(b *testing.B, client agentdv1.AgentServiceClient, id string) int {
	stream, err := client.Generate(context.Background())
	if err != nil {
		b.Fatal(err)
	}
	if err := stream.Send(&agentdv1.GenerateRequest{Kind: &agentdv1.GenerateRequest_Attach{Attach: &agentdv1.AttachGeneration{GenerationId: id}}}); err != nil {
		b.Fatal(err)
	}
	if err := stream.CloseSend(); err != nil {
		b.Fatal(err)
	}
	n := 0
	for {
		ev, err := stream.Recv()
		if errors.Is(err, io.EOF) {
			return n
		}
		if err != nil {
			b.Fatal(err)
		}
		n++
		if ev.GetSequence() != int64(n) {
			b.Fatalf("event %d has sequence %d", n, ev.GetSequence())
		}
	}
}

// timedGenerations is a store's record of generations whose writes are
// timed: the latency of each call, by method.
type timedGenerations struct {
	store.Generations

	mu    sync.Mutex
	calls map[string][]time.Duration
	given int64 // the bytes of the checkpoints, events and items written
}

// add counts the bytes of a write's checkpoint, events and items.
func (t *timedGenerations) add(checkpoint []byte, events []store.Event, items []store.Item) {
	n := len(checkpoint)
	for _, e := range events {
		n += len(e.Kind) + len(e.Data)
	}
	for _, it := range items {
		n += len(it.Data)
	}
	t.mu.Lock()
	t.given += int64(n)
	t.mu.Unlock()
}

// written is how many bytes of checkpoints, events and items the store
// was given.
func (t *timedGenerations) written() int64 {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.given
}

func (t *timedGenerations) note(method string, start time.Time) {
	d := time.Since(start)
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.calls == nil {
		t.calls = make(map[string][]time.Duration)
	}
	t.calls[method] = append(t.calls[method], d)
}

func (t *timedGenerations) reset() {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.calls, t.given = nil, 0
}

func (t *timedGenerations) Create(ctx context.Context, g store.NewGeneration) (store.Created, error) {
	defer t.note("create", time.Now())
	t.add(g.Checkpoint, g.Events, g.Items)
	return t.Generations.Create(ctx, g)
}

func (t *timedGenerations) Checkpoint(ctx context.Context, tenant, id string, epoch int64, c store.Checkpoint) (int64, error) {
	defer t.note("checkpoint", time.Now())
	t.add(c.Data, append(slices.Clip(c.Events), c.After...), c.Items)
	return t.Generations.Checkpoint(ctx, tenant, id, epoch, c)
}

func (t *timedGenerations) Append(ctx context.Context, tenant, id string, epoch int64, events []store.Event) (int64, error) {
	defer t.note("append", time.Now())
	t.add(nil, events, nil)
	return t.Generations.Append(ctx, tenant, id, epoch, events)
}

func (t *timedGenerations) Finish(ctx context.Context, tenant, id string, epoch int64, o store.Outcome) (int64, error) {
	defer t.note("finish", time.Now())
	t.add(o.Result, o.Events, o.Items)
	return t.Generations.Finish(ctx, tenant, id, epoch, o)
}

// report reports, for gens generations, each timed method's calls per
// generation, and the p50 (and for checkpoint and append the p99) of its
// latency in microseconds.
func (t *timedGenerations) report(b *testing.B, gens int) {
	t.mu.Lock()
	defer t.mu.Unlock()
	for _, m := range []struct{ method, calls string }{
		{"create", "creates"}, {"checkpoint", "checkpoints"}, {"append", "appends"}, {"finish", "finishes"},
	} {
		method := m.method
		took := slices.Sorted(slices.Values(t.calls[method]))
		b.ReportMetric(float64(len(took))/float64(gens), m.calls+"/gen")
		if len(took) == 0 {
			continue
		}
		at := func(q float64) float64 {
			return float64(took[int(q*float64(len(took)-1))]) / float64(time.Microsecond)
		}
		b.ReportMetric(at(0.50), method+"-p50-µs")
		if method == "checkpoint" || method == "append" {
			b.ReportMetric(at(0.99), method+"-p99-µs")
		}
	}
}

// median is the median of xs (the upper one of an even count).
func median(xs []float64) float64 {
	xs = slices.Clone(xs)
	slices.Sort(xs)
	return xs[len(xs)/2]
}
