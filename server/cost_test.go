package server_test

import (
	"context"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	"google.golang.org/grpc/codes"
	"google.golang.org/protobuf/testing/protocmp"

	agentdv1 "github.com/agentd/agentd/gen/go/agentd/v1"
	"github.com/agentd/agentd/internal/telemetry/metrictest"
	"github.com/agentd/agentd/providers"
	"github.com/agentd/agentd/providers/router"
	"github.com/agentd/agentd/server"
)

// perToken is a Pricer: a thousand billionths of a euro an input token,
// two thousand an output token, for every model but "unpriced", whose
// cost is unknown.
type perToken struct{}

func (perToken) Cost(_, model string, u *agentdv1.Usage) *agentdv1.Cost {
	if model == "unpriced" {
		return &agentdv1.Cost{Unknown: true}
	}
	return &agentdv1.Cost{Currency: "EUR", Nanos: 1000*u.GetInputTokens() + 2000*u.GetOutputTokens(), PricedOn: "2026-12-01"}
}

// Every usage event carries its turn's cost, the completed event and the
// generation's record (GetGeneration) the sum, agentd.cost counts it, and the end line
// says it; a model without a price reports its cost unknown, in the
// events and in the end line, and agentd.cost counts nothing of it.
func TestCostOfTurns(t *testing.T) {
	t.Parallel()
	const turns = `{"turns": [
		{"tool_calls": [{"name": "echo", "arguments": {}}], "usage": {"input_tokens": 10, "output_tokens": 3}},
		{"text": "done", "usage": {"input_tokens": 20, "output_tokens": 4}}
	]}`
	for _, tc := range []struct {
		model      string
		turns, all []*agentdv1.Cost
		line       map[string]any
		metric     string
	}{
		{
			model:  "m-1",
			turns:  []*agentdv1.Cost{{Currency: "EUR", Nanos: 16000, PricedOn: "2026-12-01"}, {Currency: "EUR", Nanos: 28000, PricedOn: "2026-12-01"}},
			all:    []*agentdv1.Cost{{Currency: "EUR", Nanos: 44000, PricedOn: "2026-12-01"}},
			line:   map[string]any{"cost": "0.000044000", "currency": "EUR"},
			metric: "agentd.cost{currency=EUR,gen_ai.provider.name=script,gen_ai.request.model=m-1,tenant=}",
		},
		{
			model: "unpriced",
			turns: []*agentdv1.Cost{{Unknown: true}, {Unknown: true}},
			all:   []*agentdv1.Cost{{Unknown: true}},
			line:  map[string]any{"cost": "unknown"},
		},
	} {
		t.Run(tc.model, func(t *testing.T) {
			t.Parallel()
			reader := sdkmetric.NewManualReader()
			mp := sdkmetric.NewMeterProvider(sdkmetric.WithReader(reader))
			t.Cleanup(func() { _ = mp.Shutdown(context.Background()) })
			var logs logLines
			bridge := &fakeBridge{onList: offering(serverTools("demo", "echo"))}
			st := newStore(t, 0)
			client := newClientWith(t, server.Options{Bridge: bridge, MeterProvider: mp, Prices: perToken{},
				Checkpoints: st, Generations: st.Generations(), Replica: "replica-a",
				Logger: logs.logger()}, recordingScript())
			agent := &agentdv1.Agent{Provider: "script", Model: tc.model, Mcps: []*agentdv1.MCPServer{refServer("", "demo")}, ProviderOptions: script(t, turns)}
			events, end := generate(t, client, &agentdv1.StartGeneration{Agent: agent, Messages: userSays("hi")}, nil)
			wantCode(t, end, codes.OK)
			var turns, all []*agentdv1.Cost
			for _, ev := range events {
				if u := ev.GetUsage(); u != nil {
					turns = append(turns, u.GetCost())
				}
				if c := ev.GetCompleted(); c != nil {
					all = append(all, c.GetUsage().GetCost())
				}
			}
			if diff := cmp.Diff(tc.turns, turns, protocmp.Transform()); diff != "" {
				t.Errorf("the usage events' costs (-want +got):\n%s", diff)
			}
			if diff := cmp.Diff(tc.all, all, protocmp.Transform()); diff != "" {
				t.Errorf("the completed event's cost (-want +got):\n%s", diff)
			}
			id := started(t, events).GetGenerationId()
			rec, err := client.GetGeneration(t.Context(), &agentdv1.GetGenerationRequest{GenerationId: id})
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(tc.all[0], rec.GetGeneration().GetUsage().GetCost(), protocmp.Transform()); diff != "" {
				t.Errorf("the generation's record's cost (-want +got):\n%s", diff)
			}
			line := endLine(t, &logs, id)
			for k, v := range tc.line {
				if line[k] != v {
					t.Errorf("the end line's %s = %v; want %v (%v)", k, line[k], v, line)
				}
			}
			if _, ok := line["currency"]; ok != (tc.line["currency"] != nil) {
				t.Errorf("the end line's currency: %v", line)
			}
			got := metrictest.Collect(t, reader, metrictest.SumsOf("agentd.cost"))
			var want map[string]float64
			if tc.metric != "" {
				want = map[string]float64{tc.metric: 0.000044}
			}
			for k := range got {
				if !strings.HasPrefix(k, "agentd.cost") {
					delete(got, k)
				}
			}
			if diff := cmp.Diff(want, got, cmpopts.EquateApprox(0, 1e-12), cmpopts.EquateEmpty()); diff != "" {
				t.Errorf("agentd.cost (-want +got):\n%s", diff)
			}
		})
	}
}

// pricedAs is a Pricer that notes the provider and model it is asked
// about.
type pricedAs struct {
	mu    sync.Mutex
	asked []string
}

func (p *pricedAs) Cost(provider, model string, _ *agentdv1.Usage) *agentdv1.Cost {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.asked = append(p.asked, provider+" "+model)
	return &agentdv1.Cost{Unknown: true}
}

// A model called through the router is priced as the provider it hands
// the model to, under the name that provider knows it by.
func TestCostThroughTheRouter(t *testing.T) {
	t.Parallel()
	s := recordingScript()
	r := router.New(func(name string) (providers.Provider, bool) { return s, name == s.Name() })
	prices := &pricedAs{}
	client := newClientWith(t, server.Options{Bridge: &fakeBridge{}, Prices: prices}, s, r)
	agent := &agentdv1.Agent{Provider: router.Name, Model: "script/m-1", ProviderOptions: script(t, `{"turns": [{"text": "hi", "usage": {"input_tokens": 1}}]}`)}
	_, st := generate(t, client, &agentdv1.StartGeneration{Agent: agent, Messages: userSays("hi")}, nil)
	wantCode(t, st, codes.OK)
	prices.mu.Lock()
	defer prices.mu.Unlock()
	if want := []string{"script m-1"}; !slices.Equal(prices.asked, want) {
		t.Errorf("priced as %q; want %q", prices.asked, want)
	}
}
