// Package metrictest reads what an OpenTelemetry manual reader collected,
// for the tests of agentd's instruments: every data point as
// "name{k=v,...}" (its attributes sorted) → its value.
package metrictest

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"

	"go.opentelemetry.io/otel/attribute"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"
)

// Sums says of a histogram, by its name, whether Collect reports its sum:
// a duration measured in real time varies from run to run, its count
// does not.
type Sums func(name string) bool

// The common choices of Sums.
var (
	AllSums Sums = func(string) bool { return true }
	NoSums  Sums = func(string) bool { return false }
)

// SumsOf reports the sums of the histograms names, and of no other.
func SumsOf(names ...string) Sums {
	return func(name string) bool { return slices.Contains(names, name) }
}

// Collect reads reader: a sum's or a gauge's value under its point's key,
// a histogram's count under the key and "#count", and its sum under the
// key when sums says so. Any other kind of data fails t.
func Collect(t testing.TB, reader sdkmetric.Reader, sums Sums) map[string]float64 {
	t.Helper()
	var rm metricdata.ResourceMetrics
	if err := reader.Collect(context.Background(), &rm); err != nil {
		t.Fatal(err)
	}
	out := make(map[string]float64)
	for _, sm := range rm.ScopeMetrics {
		for _, m := range sm.Metrics {
			if !put(out, sums, m) {
				t.Errorf("metric %s: unexpected data %T", m.Name, m.Data)
			}
		}
	}
	return out
}

// put puts m's points into out; false for a kind of data it does not
// read.
func put(out map[string]float64, sums Sums, m metricdata.Metrics) bool {
	switch d := m.Data.(type) {
	case metricdata.Sum[int64]:
		putPoints(out, m.Name, d.DataPoints)
	case metricdata.Sum[float64]:
		putPoints(out, m.Name, d.DataPoints)
	case metricdata.Gauge[int64]:
		putPoints(out, m.Name, d.DataPoints)
	case metricdata.Gauge[float64]:
		putPoints(out, m.Name, d.DataPoints)
	case metricdata.Histogram[int64]:
		putHistograms(out, sums, m.Name, d.DataPoints)
	case metricdata.Histogram[float64]:
		putHistograms(out, sums, m.Name, d.DataPoints)
	default:
		return false
	}
	return true
}

// putPoints puts each point's value under its key.
func putPoints[N int64 | float64](out map[string]float64, name string, points []metricdata.DataPoint[N]) {
	for _, p := range points {
		out[Key(name, p.Attributes)] = float64(p.Value)
	}
}

// putHistograms puts each histogram's count and, when sums says so, its
// sum.
func putHistograms[N int64 | float64](out map[string]float64, sums Sums, name string, points []metricdata.HistogramDataPoint[N]) {
	for _, p := range points {
		histogram(out, sums, name, p.Attributes, float64(p.Sum), p.Count)
	}
}

func histogram(out map[string]float64, sums Sums, name string, attrs attribute.Set, sum float64, count uint64) {
	key := Key(name, attrs)
	out[key+"#count"] = float64(count)
	if sums(name) {
		out[key] = sum
	}
}

// Key is a point's key: "name{k=v,...}", its attributes sorted.
func Key(name string, attrs attribute.Set) string {
	kv := make([]string, 0, attrs.Len())
	for _, a := range attrs.ToSlice() {
		kv = append(kv, fmt.Sprintf("%s=%s", a.Key, a.Value.String()))
	}
	slices.Sort(kv)
	return name + "{" + strings.Join(kv, ",") + "}"
}
