package telemetry

import (
	"context"
	"errors"
	"sync"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/metric"

	"github.com/agentd/agentd/internal/fault"
)

// MeasurementOptions keeps, for each label set K of an instrument's
// series, the measurement option of its attributes, made (sorted and
// hashed into an attribute.Set) the first time K is seen and reused after
// that, so that a measurement on a hot path allocates nothing for its
// attributes. K must be bounded, as every label of agentd's is:
// the options are never dropped. Safe for concurrent use.
type MeasurementOptions[K comparable] struct {
	attrs func(K) []attribute.KeyValue
	made  sync.Map // K → metric.MeasurementOption
}

// NewMeasurementOptions returns the options of the label sets whose
// attributes attrs makes.
func NewMeasurementOptions[K comparable](attrs func(K) []attribute.KeyValue) *MeasurementOptions[K] {
	return &MeasurementOptions[K]{attrs: attrs}
}

// For is the measurement option of k's attributes.
func (o *MeasurementOptions[K]) For(k K) metric.MeasurementOption {
	if opt, ok := o.made.Load(k); ok {
		return opt.(metric.MeasurementOption)
	}
	opt, _ := o.made.LoadOrStore(k, metric.WithAttributeSet(attribute.NewSet(o.attrs(k)...)))
	return opt.(metric.MeasurementOption)
}

// ErrorType is err's error.type on agentd's metrics: "cancelled" or
// "timeout" for a context's end, else the fault's kind (its gRPC code's
// name, such as Unavailable); never the error's message.
func ErrorType(err error) string {
	switch {
	case errors.Is(err, context.Canceled):
		return "cancelled"
	case errors.Is(err, context.DeadlineExceeded):
		return "timeout"
	}
	return fault.KindOf(err).String()
}
