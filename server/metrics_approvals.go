package server

import (
	"context"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/metric"
	"go.opentelemetry.io/otel/metric/noop"

	"github.com/agentd/agentd/internal/telemetry"
)

// approvalMeters are the Service's instruments of approvals and tool
// executions (X-O1). Like meters, every measurement carries the
// generation's tenant, and none an approval request id, a call id, the
// arguments or an error message.
type approvalMeters struct {
	requested metric.Int64Counter       // agentd.approvals.requested
	decided   metric.Int64Counter       // agentd.approvals.decided
	pending   metric.Int64UpDownCounter // agentd.approvals.pending
	toolTime  metric.Float64Histogram   // gen_ai.execute_tool.duration

	toolTimes *telemetry.MeasurementOptions[toolTimeLabels]
}

// toolTimeLabels are the labels of gen_ai.execute_tool.duration.
type toolTimeLabels struct{ tenant, server, tool, toolType, errType string }

func (l toolTimeLabels) attrs() []attribute.KeyValue {
	attrs := []attribute.KeyValue{
		attribute.String("gen_ai.tool.name", l.tool),
		attribute.String("gen_ai.tool.type", l.toolType),
		attribute.String("server", l.server),
		tenantAttr(l.tenant),
	}
	if l.errType != "" {
		attrs = append(attrs, attribute.String("error.type", l.errType))
	}
	return attrs
}

func newApprovalMeters(mp metric.MeterProvider) *approvalMeters {
	if mp == nil {
		mp = noop.NewMeterProvider()
	}
	m := mp.Meter("github.com/agentd/agentd/server")
	// As in newMeters: these names and units are valid, so creating them
	// does not fail.
	requested, _ := m.Int64Counter("agentd.approvals.requested", metric.WithUnit("{request}"),
		metric.WithDescription("Approval requests sent to clients, by server and tool."))
	decided, _ := m.Int64Counter("agentd.approvals.decided", metric.WithUnit("{request}"),
		metric.WithDescription("Approval decisions applied, on the stream or with a resume, by server, tool and decision (approved, denied)."))
	pending, _ := m.Int64UpDownCounter("agentd.approvals.pending", metric.WithUnit("{request}"),
		metric.WithDescription("Approval requests this replica waits on a client to decide, on open streams (a paused generation's are in agentd.generations.paused)."))
	toolTime, _ := m.Float64Histogram("gen_ai.execute_tool.duration", metric.WithUnit("s"),
		metric.WithDescription("The duration of a single tool execution: an MCP call through the bridge, or a function call from the request to the client until its result."),
		metric.WithExplicitBucketBoundaries(durationBuckets...))
	return &approvalMeters{requested: requested, decided: decided, pending: pending, toolTime: toolTime,
		toolTimes: telemetry.NewMeasurementOptions(toolTimeLabels.attrs)}
}

// The decisions of agentd.approvals.decided and of the
// agentd.approval.decision span attribute.
const (
	decisionApproved = "approved"
	decisionDenied   = "denied"
)

func approvalAttrs(tenant, server, tool string) []attribute.KeyValue {
	return []attribute.KeyValue{tenantAttr(tenant), attribute.String("server", server), attribute.String("tool", tool)}
}

// asked counts an approval request sent to the client, now pending.
func (m *approvalMeters) asked(ctx context.Context, tenant, server, tool string) {
	set := metric.WithAttributes(approvalAttrs(tenant, server, tool)...)
	m.requested.Add(ctx, 1, set)
	m.pending.Add(ctx, 1, metric.WithAttributes(tenantAttr(tenant)))
}

// settled counts a pending approval request that no longer waits on this
// replica: decided, or left to a pause, a failure or a cancellation.
func (m *approvalMeters) settled(ctx context.Context, tenant string) {
	m.pending.Add(ctx, -1, metric.WithAttributes(tenantAttr(tenant)))
}

// decision counts one approval decision applied: decisionApproved or
// decisionDenied.
func (m *approvalMeters) decision(ctx context.Context, tenant, server, tool, d string) {
	m.decided.Add(ctx, 1, metric.WithAttributes(append(approvalAttrs(tenant, server, tool), attribute.String("decision", d))...))
}

// toolExecuted records one tool execution that ended, as long as its
// execute_tool span: toolType is "extension" or "function", server "" for
// a function tool, errType "" when it succeeded ("tool_error" for a
// result flagged as an error, the fault's kind for a call that failed).
func (m *approvalMeters) toolExecuted(ctx context.Context, tenant, server, tool, toolType, errType string, d time.Duration) {
	m.toolTime.Record(ctx, d.Seconds(), m.toolTimes.For(toolTimeLabels{tenant, server, tool, toolType, errType}))
}
