package app_test

import (
	"testing"

	agentdv1 "github.com/agentd/agentd/gen/go/agentd/v1"
	"github.com/agentd/agentd/internal/config"
	"github.com/agentd/agentd/internal/mcptest"
)

// protocolsRound is how many generations a round of
// BenchmarkProtocolsCPU runs for each protocol.
const protocolsRound = 10

// BenchmarkProtocolsCPU is what a generation costs in CPU when its client
// speaks Connect or HTTP/JSON rather than gRPC (target: at most 1.2×). One
// agentd serves every protocol on one TCP port, on SQLite, with
// BenchmarkDurability's tool loop (4 model turns, 3 tool calls through the
// bridge). Generate is a bidirectional stream, which HTTP/JSON cannot
// carry, and CreateGeneration and FollowGeneration are not served yet: so
// each generation runs over gRPC in every arm, and what the protocol under
// test carries is the unary calls a client makes about it, a Preview of
// its request and a GetGeneration. Rounds of protocolsRound generations
// go to each protocol in turn, the order rotating from round to round;
// the process's CPU (client and server) is read around each. It reports
// each protocol's CPU per generation, with its two calls, and per pair of
// calls alone, and the medians over rounds of their ratios to gRPC's.
func BenchmarkProtocolsCPU(b *testing.B) {
	exe, env := mcptest.Command(b, mcptest.Tools)
	start := toolLoopRequest(b)
	cfg := benchStoreConfig(b, config.StoreSQLite)
	cfg.Bridge.TerminateGrace = benchGrace
	cfg.Bridge.Servers = map[string]config.Server{"tools": {Command: exe, Env: env, Shared: config.SharedGlobal}}
	s := startWeb(b, cfg)
	gen := toolLoop(b, s.conn, start)
	gen() // connect, start the server's process, fill the schema cache
	list, err := s.grpc.ListGenerations(b.Context(), &agentdv1.ListGenerationsRequest{})
	if err != nil || len(list.GetGenerations()) == 0 {
		b.Fatalf("ListGenerations: %v, %v", list, err)
	}
	get := &agentdv1.GetGenerationRequest{GenerationId: list.GetGenerations()[0].GetGenerationId()}
	previewReq := &agentdv1.PreviewRequest{Agent: start.GetStart().GetAgent(), Messages: start.GetStart().GetMessages()}
	arms := []string{protoGRPC, protoConnect, protoJSON}
	label := map[string]string{protoGRPC: "grpc", protoConnect: "connect", protoJSON: "json"}
	// calls makes the protocol's two calls and returns the CPU they took.
	calls := func(p string) float64 {
		t0 := cpuTime(b)
		for _, o := range []outcome{preview(b, s, p, "", nil, previewReq), getGeneration(b, s, p, "", nil, get)} {
			if o.code != 0 {
				b.Fatalf("over %s: %v %s", p, o.code, o.msg)
			}
		}
		return float64(cpuTime(b) - t0)
	}
	for _, p := range arms {
		calls(p) // each protocol's connection opened
	}
	perGen, perCalls := make([][]float64, len(arms)), make([][]float64, len(arms))
	rounds := 0
	for b.Loop() {
		for i := range arms {
			arm := (i + rounds) % len(arms)
			var spent float64
			t0 := cpuTime(b)
			for range protocolsRound {
				gen()
				spent += calls(arms[arm])
			}
			perGen[arm] = append(perGen[arm], float64(cpuTime(b)-t0)/protocolsRound/1e3)
			perCalls[arm] = append(perCalls[arm], spent/protocolsRound/1e3)
		}
		rounds++
	}
	for i, p := range arms {
		b.ReportMetric(median(perGen[i]), "cpu-µs/gen-"+label[p])
		b.ReportMetric(median(perCalls[i]), "cpu-µs/calls-"+label[p])
		if i == 0 {
			continue
		}
		genRatio, callRatio := make([]float64, rounds), make([]float64, rounds)
		for r := range rounds {
			genRatio[r], callRatio[r] = perGen[i][r]/perGen[0][r], perCalls[i][r]/perCalls[0][r]
		}
		b.ReportMetric(median(genRatio), "gen-"+label[p]+"/grpc")
		b.ReportMetric(median(callRatio), "calls-"+label[p]+"/grpc")
	}
}
