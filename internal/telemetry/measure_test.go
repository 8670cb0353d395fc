package telemetry_test

import (
	"context"
	"testing"

	"go.opentelemetry.io/otel/attribute"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"

	"github.com/agentd/agentd/internal/telemetry"
)

// X-O1: a label set's option carries exactly the attributes made for it,
// made once however often it is used, concurrently too.
func TestMeasurementOptions(t *testing.T) {
	type key struct{ tool, outcome string }
	made := 0
	opts := telemetry.NewMeasurementOptions(func(k key) []attribute.KeyValue {
		made++ // under LoadOrStore's race, two goroutines may make one; the test below is sequential
		return []attribute.KeyValue{attribute.String("tool", k.tool), attribute.String("outcome", k.outcome)}
	})
	reader := sdkmetric.NewManualReader()
	counter, err := sdkmetric.NewMeterProvider(sdkmetric.WithReader(reader)).Meter("test").Int64Counter("calls")
	if err != nil {
		t.Fatal(err)
	}
	for range 3 {
		counter.Add(context.Background(), 1, opts.For(key{"echo", "ok"}))
	}
	counter.Add(context.Background(), 1, opts.For(key{"echo", "error"}))
	if made != 2 {
		t.Errorf("made %d attribute sets for 2 label sets", made)
	}
	var rm metricdata.ResourceMetrics
	if err := reader.Collect(context.Background(), &rm); err != nil {
		t.Fatal(err)
	}
	got := map[string]int64{}
	for _, p := range rm.ScopeMetrics[0].Metrics[0].Data.(metricdata.Sum[int64]).DataPoints {
		o, _ := p.Attributes.Value("outcome")
		got[o.AsString()] = p.Value
	}
	if got["ok"] != 3 || got["error"] != 1 || len(got) != 2 {
		t.Errorf("points %v; want ok 3, error 1", got)
	}
}
