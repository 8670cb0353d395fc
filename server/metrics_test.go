package server_test

import (
	"context"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	"google.golang.org/grpc/codes"

	bridgev1 "github.com/agentd/agentd/gen/go/agentd/bridge/v1"
	agentdv1 "github.com/agentd/agentd/gen/go/agentd/v1"
	"github.com/agentd/agentd/internal/telemetry/metrictest"
	"github.com/agentd/agentd/server"
)

// TestMetrics (X-O1): a generation's model turns, tool calls and ending
// are recorded by the Service's instruments, under the GenAI semantic
// conventions' names and attributes and agentd's own, each with the
// tenant, and with no generation id, argument or output among the
// attributes.
func TestMetrics(t *testing.T) {
	t.Parallel()
	const gen = "gen_ai.operation.name=chat,gen_ai.provider.name=script,gen_ai.request.model=m-1"
	// The script answers as the model asked for: gen_ai.response.model.
	const answered = gen + ",gen_ai.response.model=m-1"
	tests := []struct {
		name   string
		script string
		code   codes.Code
		want   map[string]float64 // "metric{attributes}" → sum (histograms: also #count)
	}{
		{
			name: "completed, with an ok, a failing and an unknown tool call",
			script: `{"turns": [
				{"tool_calls": [{"name": "echo", "arguments": {"text": "secret-arg"}}, {"name": "boom", "arguments": {}}, {"name": "made-up", "arguments": {}}], "usage": {"input_tokens": 10, "output_tokens": 3}},
				{"text": "done", "usage": {"input_tokens": 20, "output_tokens": 4}}
			]}`,
			code: codes.OK,
			want: map[string]float64{
				"gen_ai.client.token.usage{" + answered + ",gen_ai.token.type=input,tenant=}":                                                    30,
				"gen_ai.client.token.usage{" + answered + ",gen_ai.token.type=input,tenant=}#count":                                              2,
				"gen_ai.client.token.usage{" + answered + ",gen_ai.token.type=output,tenant=}":                                                   7,
				"gen_ai.client.token.usage{" + answered + ",gen_ai.token.type=output,tenant=}#count":                                             2,
				"gen_ai.client.operation.duration{" + answered + ",tenant=}#count":                                                               2,
				"gen_ai.client.operation.time_to_first_chunk{" + answered + ",tenant=}#count":                                                    2,
				"agentd.generations.started{tenant=}":                                                                                            1,
				"agentd.generations.active{tenant=}":                                                                                             0,
				"agentd.generations.ended{outcome=completed,tenant=}":                                                                            1,
				"agentd.tool.calls{outcome=ok,server=demo,tenant=,tool=echo}":                                                                    1,
				"agentd.tool.calls{outcome=error,server=demo,tenant=,tool=boom}":                                                                 1,
				"agentd.tool.calls{outcome=unknown,server=,tenant=,tool=}":                                                                       1,
				"gen_ai.execute_tool.duration{error.type=tool_error,gen_ai.tool.name=boom,gen_ai.tool.type=extension,server=demo,tenant=}#count": 1,
				"gen_ai.execute_tool.duration{gen_ai.tool.name=echo,gen_ai.tool.type=extension,server=demo,tenant=}#count":                       1,
			},
		},
		{
			name:   "failed model turn",
			script: `{"turns": [{"error": {"kind": "unavailable", "message": "overloaded https://secret.example/x"}}]}`,
			code:   codes.Unavailable,
			want: map[string]float64{
				"gen_ai.client.operation.duration{error.type=Unavailable," + gen + ",tenant=}#count": 1,
				"agentd.generations.started{tenant=}":                                                1,
				"agentd.generations.active{tenant=}":                                                 0,
				"agentd.generations.ended{outcome=failed,tenant=}":                                   1,
			},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			reader := sdkmetric.NewManualReader()
			mp := sdkmetric.NewMeterProvider(sdkmetric.WithReader(reader))
			t.Cleanup(func() { _ = mp.Shutdown(context.Background()) })
			bridge := &fakeBridge{
				onList: offering(serverTools("demo", "echo", "boom")),
				onCall: func(_ context.Context, _, tool, _ string) (*bridgev1.CallToolResponse, error) {
					return &bridgev1.CallToolResponse{Output: "out", IsError: tool == "boom"}, nil
				},
			}
			client := newClientWith(t, server.Options{Bridge: bridge, MeterProvider: mp}, recordingScript())
			agent := &agentdv1.Agent{
				Provider: "script", Model: "m-1",
				Mcps:            []*agentdv1.MCPServer{refServer("", "demo")},
				ProviderOptions: script(t, tt.script),
			}
			events, st := generate(t, client, &agentdv1.StartGeneration{Agent: agent, Messages: userSays("hi")}, nil)
			wantCode(t, st, tt.code)
			id := started(t, events).GetGenerationId()

			got := collect(t, reader)
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("metrics (-want +got):\n%s", diff)
			}
			// Bounded labels: no generation or call id, argument or
			// error message.
			for k := range got {
				for _, bad := range []string{"secret", "call_", "overloaded", id} {
					if strings.Contains(k, bad) {
						t.Errorf("metric %s has a label carrying %q", k, bad)
					}
				}
			}
		})
	}
}

// collect reads the instruments of reader (metrictest.Collect): the token
// usage's sums, and the durations only by count, since their sums vary.
func collect(t *testing.T, reader sdkmetric.Reader) map[string]float64 {
	return metrictest.Collect(t, reader, metrictest.SumsOf("gen_ai.client.token.usage"))
}
