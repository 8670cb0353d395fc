package server

import (
	agentdv1 "github.com/agentd/agentd/gen/go/agentd/v1"

	"context"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/metric"
	"go.opentelemetry.io/otel/metric/noop"

	"github.com/agentd/agentd/internal/telemetry"
	"github.com/agentd/agentd/providers"
)

// meters are the Service's instruments: the OTel GenAI client
// metrics of its model turns, and agentd's own of generations, tool
// calls, provider retries and prompt-cache tokens. Every measurement carries
// the generation's tenant ("" when none); no attribute holds a generation id,
// a URL, the conversation or a secret.
type meters struct {
	tokens    metric.Int64Histogram   // gen_ai.client.token.usage
	duration  metric.Float64Histogram // gen_ai.client.operation.duration
	started   metric.Int64Counter     // agentd.generations.started
	active    metric.Int64UpDownCounter
	ended     metric.Int64Counter   // agentd.generations.ended
	toolCalls metric.Int64Counter   // agentd.tool.calls
	cost      metric.Float64Counter // agentd.cost
	// budgetWarnings counts agentd.budget.warnings, budgetRefusals
	// agentd.budget.refusals.
	budgetWarnings, budgetRefusals metric.Int64Counter

	// The provider calls' own.
	firstChunk metric.Float64Histogram // gen_ai.client.operation.time_to_first_chunk
	cached     metric.Int64Counter     // agentd.provider.cached_tokens
	retries    metric.Int64Counter     // agentd.provider.retries

	turns *telemetry.MeasurementOptions[turnSeries]
	tools *telemetry.MeasurementOptions[toolCallLabels]
}

// turnSeries is one series of a model turn's instruments: what a turn's
// series have in common, and tokens, "input" or "output" for the token
// usage's ("" for the durations of a turn that succeeded). Its values are
// bounded (tenants, providers, models, endpoints).
type turnSeries struct {
	tenant, provider, model, responseModel, address string
	port                                            int
	tokens                                          string
}

// attrs are the attributes of s; the durations of a failed turn add
// error.type to them.
func (s turnSeries) attrs() []attribute.KeyValue {
	attrs := []attribute.KeyValue{
		attribute.String("gen_ai.operation.name", "chat"),
		attribute.String("gen_ai.provider.name", s.provider),
		attribute.String("gen_ai.request.model", s.model),
		tenantAttr(s.tenant),
	}
	if s.responseModel != "" {
		attrs = append(attrs, attribute.String("gen_ai.response.model", s.responseModel))
	}
	attrs = append(attrs, endpointAttrs(s.address, s.port)...)
	if s.tokens != "" {
		attrs = append(attrs, attribute.String("gen_ai.token.type", s.tokens))
	}
	return attrs
}

// The bucket boundaries the GenAI semantic conventions advise.
var (
	tokenBuckets    = []float64{1, 4, 16, 64, 256, 1024, 4096, 16384, 65536, 262144, 1048576, 4194304, 16777216, 67108864}
	durationBuckets = []float64{0.01, 0.02, 0.04, 0.08, 0.16, 0.32, 0.64, 1.28, 2.56, 5.12, 10.24, 20.48, 40.96, 81.92}
)

func newMeters(mp metric.MeterProvider) *meters {
	if mp == nil {
		mp = noop.NewMeterProvider()
	}
	m := mp.Meter("github.com/agentd/agentd/server")
	// Creating an instrument fails only for an invalid name or unit, which
	// these are not; the SDK still returns a working instrument then.
	tokens, _ := m.Int64Histogram("gen_ai.client.token.usage", metric.WithUnit("{token}"),
		metric.WithDescription("Number of input (cached ones included) and output tokens used, per model turn."),
		metric.WithExplicitBucketBoundaries(tokenBuckets...))
	duration, _ := m.Float64Histogram("gen_ai.client.operation.duration", metric.WithUnit("s"),
		metric.WithDescription("Duration of one model turn, from the request to the end of the provider's stream."),
		metric.WithExplicitBucketBoundaries(durationBuckets...))
	firstChunk, _ := m.Float64Histogram("gen_ai.client.operation.time_to_first_chunk", metric.WithUnit("s"),
		metric.WithDescription("Time from a model turn's request to the first chunk of the provider's stream."),
		metric.WithExplicitBucketBoundaries(durationBuckets...))
	cached, _ := m.Int64Counter("agentd.provider.cached_tokens", metric.WithUnit("{token}"),
		metric.WithDescription("Input tokens read from (cache=read) or written to (cache=write) the provider's prompt cache; gen_ai.client.token.usage's input tokens include them."))
	retries, _ := m.Int64Counter("agentd.provider.retries", metric.WithUnit("{retry}"),
		metric.WithDescription("Provider requests sent again after a retryable status or a failed connection."))
	started, _ := m.Int64Counter("agentd.generations.started", metric.WithUnit("{generation}"),
		metric.WithDescription("Generations this replica started running: new, resumed or adopted."))
	active, _ := m.Int64UpDownCounter("agentd.generations.active", metric.WithUnit("{generation}"),
		metric.WithDescription("Generations this replica is running."))
	ended, _ := m.Int64Counter("agentd.generations.ended", metric.WithUnit("{generation}"),
		metric.WithDescription("Generations this replica stopped running, by outcome."))
	toolCalls, _ := m.Int64Counter("agentd.tool.calls", metric.WithUnit("{call}"),
		metric.WithDescription("Tool calls answered, by server, tool and outcome."))
	cost, _ := m.Float64Counter("agentd.cost", metric.WithUnit("{currency}"),
		metric.WithDescription("What model calls cost at the price table's prices, in the unit of the currency its attribute names; calls of a model without a price are not counted."))
	warnings, _ := m.Int64Counter("agentd.budget.warnings", metric.WithUnit("{warning}"),
		metric.WithDescription("Budgets found past their soft threshold, once per generation run, budget and period."))
	refusals, _ := m.Int64Counter("agentd.budget.refusals", metric.WithUnit("{call}"),
		metric.WithDescription("Model calls a spent budget refused."))
	return &meters{tokens: tokens, duration: duration, firstChunk: firstChunk, cached: cached, retries: retries, started: started, active: active, ended: ended, toolCalls: toolCalls, cost: cost,
		budgetWarnings: warnings, budgetRefusals: refusals,
		turns: telemetry.NewMeasurementOptions(turnSeries.attrs), tools: telemetry.NewMeasurementOptions(toolCallLabels.attrs)}
}

// The outcomes of agentd.generations.ended.
const (
	outcomeCompleted = "completed"
	outcomePaused    = "paused"
	outcomeFailed    = "failed"
	outcomeCancelled = "cancelled"
	// outcomeReleased: this replica let it go, for another to continue
	// (agentd stopping, or its lease lost).
	outcomeReleased = "released"
)

func tenantAttr(tenant string) attribute.KeyValue { return attribute.String("tenant", tenant) }

// runStarted counts a generation this replica starts running.
func (m *meters) runStarted(ctx context.Context, tenant string) {
	set := metric.WithAttributes(tenantAttr(tenant))
	m.started.Add(ctx, 1, set)
	m.active.Add(ctx, 1, set)
}

// runEnded counts a generation this replica stops running.
func (m *meters) runEnded(ctx context.Context, tenant, outcome string) {
	m.active.Add(ctx, -1, metric.WithAttributes(tenantAttr(tenant)))
	m.ended.Add(ctx, 1, metric.WithAttributes(tenantAttr(tenant), attribute.String("outcome", outcome)))
}

// turnTelemetry is what a model turn's metrics record.
type turnTelemetry struct {
	provider      string // gen_ai.provider.name: the conventions' name of the provider that served it
	model         string // gen_ai.request.model
	responseModel string // gen_ai.response.model; "" when the provider did not say
	address       string // server.address; "" for a provider in process
	port          int
	duration      time.Duration
	firstChunk    time.Duration // 0: the stream yielded nothing
	usage         *agentdv1.Usage
	err           error
}

// modelTurn records one model turn: its duration, with error.type when it
// failed (the fault kind, never the message); its time to first chunk,
// when the stream yielded one; and the tokens it used, when the
// provider's stream ended with its usage (nil otherwise): the input
// tokens, as the conventions count them, include the cached ones, which
// agentd.provider.cached_tokens counts apart as well. Each carries
// gen_ai.response.model and server.address and server.port when known:
// the models a provider answers with and the configured endpoints are
// few.
func (m *meters) modelTurn(ctx context.Context, tenant string, t turnTelemetry) {
	series := turnSeries{tenant: tenant, provider: t.provider, model: t.model,
		responseModel: t.responseModel, address: t.address, port: t.port}
	if u := t.usage; u != nil {
		// The provider reported them: they were spent, even if sending
		// the turn on failed.
		input, output := series, series
		input.tokens, output.tokens = "input", "output"
		m.tokens.Record(ctx, allInput(u), m.turns.For(input))
		m.tokens.Record(ctx, u.GetOutputTokens(), m.turns.For(output))
		cacheAttrs := []attribute.KeyValue{
			attribute.String("gen_ai.provider.name", t.provider), attribute.String("gen_ai.request.model", t.model), tenantAttr(tenant),
		}
		if n := u.GetCacheReadInputTokens(); n > 0 {
			m.cached.Add(ctx, n, metric.WithAttributes(append(cacheAttrs, attribute.String("cache", "read"))...))
		}
		if n := u.GetCacheWriteInputTokens(); n > 0 {
			m.cached.Add(ctx, n, metric.WithAttributes(append(cacheAttrs, attribute.String("cache", "write"))...))
		}
	}
	if t.firstChunk > 0 {
		m.firstChunk.Record(ctx, t.firstChunk.Seconds(), m.turns.For(series))
	}
	if t.err != nil {
		// A failure's series: rarer, made as it happens.
		attrs := append(series.attrs(), attribute.String("error.type", telemetry.ErrorType(t.err)))
		m.duration.Record(ctx, t.duration.Seconds(), metric.WithAttributes(attrs...))
		return
	}
	m.duration.Record(ctx, t.duration.Seconds(), m.turns.For(series))
}

// providerRetry counts a retry of a provider request, by provider
// and status, or error.type for an attempt without a response.
func (m *meters) providerRetry(ctx context.Context, tenant, provider string, r providers.Retry) {
	attrs := []attribute.KeyValue{attribute.String("gen_ai.provider.name", provider), tenantAttr(tenant)}
	if r.Status != 0 {
		attrs = append(attrs, attribute.Int("http.response.status_code", r.Status))
	} else {
		attrs = append(attrs, attribute.String("error.type", r.Failure))
	}
	m.retries.Add(ctx, 1, metric.WithAttributes(attrs...))
}

// The outcomes of agentd.tool.calls.
const (
	toolOK      = "ok"
	toolError   = "error"
	toolUnknown = "unknown" // the model called a tool nobody offers
)

// toolCall counts one answered tool call. server is "" for a function
// (client) tool; tool is "" for an unknown one, whose name the model
// made up.
func (m *meters) toolCall(ctx context.Context, tenant, server, tool, outcome string) {
	m.toolCalls.Add(ctx, 1, m.tools.For(toolCallLabels{tenant, server, tool, outcome}))
}

// toolCallLabels are the labels of agentd.tool.calls.
type toolCallLabels struct{ tenant, server, tool, outcome string }

func (l toolCallLabels) attrs() []attribute.KeyValue {
	return []attribute.KeyValue{tenantAttr(l.tenant),
		attribute.String("server", l.server), attribute.String("tool", l.tool), attribute.String("outcome", l.outcome)}
}

// approvalMeters are the Service's instruments of approvals and tool
// executions. Like meters, every measurement carries the
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

// endpointAttrs are the provider endpoint's server.address and
// server.port (the semantic conventions' names); none without an address,
// and no port when it is unknown.
func endpointAttrs(address string, port int) []attribute.KeyValue {
	if address == "" {
		return nil
	}
	attrs := []attribute.KeyValue{attribute.String("server.address", address)}
	if port > 0 {
		attrs = append(attrs, attribute.Int("server.port", port))
	}
	return attrs
}

// allInput is every input token of u: those at the full rate and those
// read from or written to the provider's cache.
func allInput(u *agentdv1.Usage) int64 {
	return u.GetInputTokens() + u.GetCacheReadInputTokens() + u.GetCacheWriteInputTokens()
}

// budgetWarned counts a budget of tenant found past its soft threshold.
func (m *meters) budgetWarned(ctx context.Context, tenant, name string) {
	m.budgetWarnings.Add(ctx, 1, metric.WithAttributes(tenantAttr(tenant), attribute.String("budget", name)))
}

// budgetRefused counts a model call a budget of tenant refused.
func (m *meters) budgetRefused(ctx context.Context, tenant, name string) {
	m.budgetRefusals.Add(ctx, 1, metric.WithAttributes(tenantAttr(tenant), attribute.String("budget", name)))
}
