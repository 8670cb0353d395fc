package server

import (
	agentdv1 "github.com/agentd/agentd/gen/go/agentd/v1"

	"context"
	"errors"
	"sync"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/trace"

	"github.com/agentd/agentd/internal/fault"
	"github.com/agentd/agentd/internal/telemetry"
	"github.com/agentd/agentd/providers"
)

// chatCall is the telemetry of one model turn: its
// `chat {model}` span, what the provider's adapter reported on the way
// (through the providers.Observer it puts in the turn's context: the
// provider a router chose, the endpoint, each retry), the first chunk's
// time and the answer's description, and at its end the GenAI metrics.
// Nothing it records holds a URL path, a query, a header or a key: the
// adapters report the host and port alone.
type chatCall struct {
	g     *generation
	span  trace.Span
	began time.Time

	// The observer's reports, which may come from the goroutine running
	// the provider's request.
	mu       sync.Mutex
	provider string // agentd's name of the provider serving the turn
	address  string // server.address; "" when the provider is in process
	port     int

	firstChunk time.Duration // 0 until the stream yields its first event
	response   providers.Response
	failed     error // the provider's stream failed
}

// startChat starts the turn's chat span and returns ctx carrying it and
// the observer that completes it.
func (g *generation) startChat(ctx context.Context, model string) (context.Context, *chatCall) {
	return g.startModelCall(ctx, chatSpanName(model), model)
}

// startModelCall starts a model call's span, named name, with the GenAI
// attributes of a chat and attrs, and returns ctx carrying it and the
// observer that completes it: a turn's (startChat) or a server's sample.
func (g *generation) startModelCall(ctx context.Context, name, model string, attrs ...attribute.KeyValue) (context.Context, *chatCall) {
	provider := g.plan.agent.GetProvider()
	ctx, span := g.s.tracer.Start(ctx, name, trace.WithSpanKind(trace.SpanKindClient), trace.WithAttributes(
		attribute.String("gen_ai.operation.name", "chat"),
		attribute.String("gen_ai.provider.name", providers.GenAIName(provider)),
		attribute.String("gen_ai.request.model", model),
		attribute.Bool("gen_ai.request.stream", true),
		// Conditionally required by the GenAI conventions when known: the
		// generation is the conversation every model call belongs to.
		attribute.String("gen_ai.conversation.id", g.id),
	), trace.WithAttributes(attrs...))
	c := &chatCall{g: g, span: span, began: time.Now(), provider: provider}
	return providers.WithObserver(ctx, &providers.Observer{Routed: c.routed, Endpoint: c.endpoint, Retry: c.retry(ctx)}), c
}

// chatSpanName is "chat {model}", or "chat" for a provider that needs no
// model.
func chatSpanName(model string) string {
	if model == "" {
		return "chat"
	}
	return "chat " + model
}

func (c *chatCall) routed(name string) {
	c.mu.Lock()
	c.provider = name
	c.mu.Unlock()
	c.span.SetAttributes(attribute.String("gen_ai.provider.name", providers.GenAIName(name)))
}

func (c *chatCall) endpoint(address string, port int) {
	c.mu.Lock()
	c.address, c.port = address, port
	c.mu.Unlock()
	c.span.SetAttributes(endpointAttrs(address, port)...)
}

// retry records a retry of the turn's request: an event on the
// chat span, a warn line and agentd.provider.retries.
func (c *chatCall) retry(ctx context.Context) func(providers.Retry) {
	return func(r providers.Retry) {
		c.mu.Lock()
		provider := c.provider
		c.mu.Unlock()
		attrs := []attribute.KeyValue{
			attribute.Int("http.request.resend_count", r.Attempt),
			attribute.Float64("agentd.retry.delay", r.Delay.Seconds()),
		}
		logArgs := []any{"generation", c.g.id, "tenant", c.g.tenant, "provider", provider, "model", c.g.plan.agent.GetModel()}
		if r.Status != 0 {
			attrs = append(attrs, attribute.Int("http.response.status_code", r.Status))
			logArgs = append(logArgs, "status", r.Status)
		} else {
			attrs = append(attrs, attribute.String("error.type", r.Failure))
			logArgs = append(logArgs, "failure", r.Failure)
		}
		c.span.AddEvent("retry", trace.WithAttributes(attrs...))
		logArgs = append(logArgs, "attempt", r.Attempt, "delay_ms", r.Delay.Milliseconds())
		c.g.s.log.WarnContext(ctx, "provider call retried", logArgs...)
		c.g.s.meters.providerRetry(ctx, c.g.tenant, providers.GenAIName(provider), r)
	}
}

// stream streams req from p, giving take each event, and notes what the
// stream tells the call's telemetry: the first chunk's time, and its
// failure, which marks the span an error. It returns the stream's error
// or take's.
func (c *chatCall) stream(ctx context.Context, p providers.Provider, req *providers.Request, take func(providers.Event) error) error {
	for ev, err := range p.Stream(ctx, req) {
		if err != nil {
			c.failed = err
			return err
		}
		if c.firstChunk == 0 {
			c.firstChunk = max(time.Since(c.began), time.Nanosecond)
		}
		if err := take(ev); err != nil {
			return err
		}
	}
	return nil
}

// end ends the span with what the turn used and how it ended, and
// records the turn's metrics. usage is the provider's report (nil when
// its stream ended without one); err the turn's, for the metrics.
func (c *chatCall) end(ctx context.Context, usage *agentdv1.Usage, err error) {
	defer c.span.End()
	c.mu.Lock()
	t := turnTelemetry{
		provider: providers.GenAIName(c.provider), model: c.g.plan.agent.GetModel(),
		responseModel: c.response.Model, address: c.address, port: c.port,
		duration: time.Since(c.began), firstChunk: c.firstChunk, usage: usage, err: err,
	}
	c.mu.Unlock()
	var attrs []attribute.KeyValue
	if r := c.response; r.ID != "" {
		attrs = append(attrs, attribute.String("gen_ai.response.id", r.ID))
	}
	if r := c.response; r.Model != "" {
		attrs = append(attrs, attribute.String("gen_ai.response.model", r.Model))
	}
	if r := c.response; r.FinishReason != "" {
		attrs = append(attrs, attribute.StringSlice("gen_ai.response.finish_reasons", []string{r.FinishReason}))
	}
	if t.firstChunk > 0 {
		attrs = append(attrs, attribute.Float64("gen_ai.response.time_to_first_chunk", t.firstChunk.Seconds()))
	}
	if usage != nil {
		// The conventions' input tokens include the cached ones, which
		// agentd's Usage counts apart.
		attrs = append(attrs,
			attribute.Int64("gen_ai.usage.input_tokens", allInput(usage)),
			attribute.Int64("gen_ai.usage.output_tokens", usage.GetOutputTokens()))
		if n := usage.GetCacheReadInputTokens(); n > 0 {
			attrs = append(attrs, attribute.Int64("gen_ai.usage.cache_read.input_tokens", n))
		}
		if n := usage.GetCacheWriteInputTokens(); n > 0 {
			attrs = append(attrs, attribute.Int64("gen_ai.usage.cache_creation.input_tokens", n))
		}
	}
	if c.failed != nil {
		kind := telemetry.ErrorType(c.failed)
		attrs = append(attrs, attribute.String("error.type", kind))
		c.span.SetStatus(codes.Error, kind)
	}
	c.span.SetAttributes(attrs...)
	c.g.s.meters.modelTurn(ctx, c.g.tenant, t)
}

// invokeSpanOptions are the options of a run's invoke_agent span:
// a run that continues the generation (a resume, an adoption) links to
// its start, whose trace it is not in.
func (g *generation) invokeSpanOptions() []trace.SpanStartOption {
	opts := []trace.SpanStartOption{trace.WithSpanKind(trace.SpanKindInternal), trace.WithAttributes(
		attribute.String("gen_ai.operation.name", "invoke_agent"),
		attribute.String("gen_ai.provider.name", providers.GenAIName(g.plan.agent.GetProvider())),
		attribute.String("gen_ai.request.model", g.plan.agent.GetModel()),
		attribute.String("gen_ai.conversation.id", g.id),
	)}
	run := "start"
	switch {
	case g.resume != nil:
		run = "resume"
	case g.adopted != nil:
		run = "adoption"
	}
	opts = append(opts, trace.WithAttributes(attribute.String("agentd.run", run)))
	if run != "start" && g.origin.IsValid() {
		opts = append(opts, trace.WithLinks(trace.Link{SpanContext: g.origin, Attributes: []attribute.KeyValue{
			attribute.String("agentd.link", "generation start"),
		}}))
	}
	return opts
}

// describeRunEnd records on a run's invoke_agent span what the run used
// and how it ended: an error status (and error.type) only for a failure;
// a pause, a cancellation by the client and a hand-over to another
// replica are not errors.
func describeRunEnd(span trace.Span, g *generation, outcome string, err error) {
	span.SetAttributes(
		attribute.Int64("gen_ai.usage.input_tokens", g.ran.input),
		attribute.Int64("gen_ai.usage.output_tokens", g.ran.output),
		attribute.String("agentd.outcome", outcome),
	)
	if outcome == outcomeFailed && err != nil {
		kind := fault.KindOf(err).String()
		span.SetAttributes(attribute.String("error.type", kind))
		span.SetStatus(codes.Error, kind)
	}
}

// toolSpan starts the execute_tool span of call c, of the tool
// type given ("extension": an MCP server's; "function": the client's).
func (g *generation) toolSpan(ctx context.Context, c *agentdv1.ToolCall, toolType string) (context.Context, trace.Span) {
	return g.s.tracer.Start(ctx, "execute_tool "+c.GetName(), trace.WithSpanKind(trace.SpanKindInternal), trace.WithAttributes(
		attribute.String("gen_ai.operation.name", "execute_tool"),
		attribute.String("gen_ai.tool.name", c.GetName()),
		attribute.String("gen_ai.tool.call.id", c.GetId()),
		attribute.String("gen_ai.tool.type", toolType),
	))
}

// toolErrored marks a tool span whose result is flagged as an error.
func toolErrored(span trace.Span) {
	span.SetAttributes(attribute.String("error.type", "tool_error"))
	span.SetStatus(codes.Error, "tool_error")
}

// The attributes of the await_approval span.
const (
	attrApprovalRequestIDs = attribute.Key("agentd.approval.request_ids")
	attrFunctionCallIDs    = attribute.Key("agentd.function.call_ids")
	attrApprovalRequestID  = attribute.Key("agentd.approval.request_id")
	attrApprovalDecision   = attribute.Key("agentd.approval.decision")
)

// The outcomes of a wait for answers, as its span's
// agentd.approval.decision, beyond decisionApproved and decisionDenied.
const (
	waitMixed     = "mixed"     // some requests approved, some denied
	waitAnswered  = "answered"  // function results only: nothing to decide
	waitPaused    = "paused"    // the client went, half-closed or is not attached
	waitExpired   = "expired"   // the answer timeout ran out: the generation paused
	waitCancelled = "cancelled" // the generation was cancelled, or lost its client
	waitFailed    = "failed"    // an invalid answer, or a call that failed the generation
)

// endAwaitSpan ends a wait's span with how it ended, given the approvals
// and denials decided during it: an error only when the wait failed the
// generation; a pause, an expiry and a cancellation are not errors.
func endAwaitSpan(span trace.Span, approved, denied int, err error) {
	var pause *errPause
	outcome := ""
	switch {
	case errors.As(err, &pause) && pause.expired:
		outcome = waitExpired
	case errors.As(err, &pause):
		outcome = waitPaused
	case errors.Is(err, context.Canceled) || fault.KindOf(err) == fault.Canceled:
		outcome = waitCancelled
	case err != nil:
		outcome = waitFailed
		span.SetAttributes(attribute.String("error.type", telemetry.ErrorType(err)))
		span.SetStatus(codes.Error, telemetry.ErrorType(err))
	case approved > 0 && denied > 0:
		outcome = waitMixed
	case approved > 0:
		outcome = decisionApproved
	case denied > 0:
		outcome = decisionDenied
	default:
		outcome = waitAnswered
	}
	span.SetAttributes(attrApprovalDecision.String(outcome))
	span.End()
}

// traceID is the W3C trace id of the span in ctx, in hex; "" when there
// is none (tracing is off, or the call was not traced).
func traceID(ctx context.Context) string {
	if sc := trace.SpanContextFromContext(ctx); sc.IsValid() {
		return sc.TraceID().String()
	}
	return ""
}
