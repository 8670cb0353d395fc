package server

import (
	"context"
	"sync"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/trace"

	agentdv1 "github.com/agentd/agentd/gen/go/agentd/v1"
	"github.com/agentd/agentd/internal/telemetry"
	"github.com/agentd/agentd/providers"
)

// chatCall is the telemetry of one model turn (X-O1, X-O2, X-O4): its
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
}

// startChat starts the turn's chat span and returns ctx carrying it and
// the observer that completes it.
func (g *generation) startChat(ctx context.Context, model string) (context.Context, *chatCall) {
	return g.startModelCall(ctx, chatSpanName(model), model)
}

// startModelCall starts a model call's span, named name, with the GenAI
// attributes of a chat and attrs, and returns ctx carrying it and the
// observer that completes it: a turn's (startChat) or a server's sample
// (X-M5).
func (g *generation) startModelCall(ctx context.Context, name, model string, attrs ...attribute.KeyValue) (context.Context, *chatCall) {
	provider := g.plan.agent.GetProvider()
	ctx, span := g.s.tracer.Start(ctx, name, trace.WithSpanKind(trace.SpanKindClient), trace.WithAttributes(
		attribute.String("gen_ai.operation.name", "chat"),
		attribute.String("gen_ai.provider.name", providers.GenAIName(provider)),
		attribute.String("gen_ai.request.model", model),
		attribute.Bool("gen_ai.request.stream", true),
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
	c.span.SetAttributes(serverAttrs(address, port)...)
}

// serverAttrs are server.address and server.port; none without an
// address, and no port when it is unknown.
func serverAttrs(address string, port int) []attribute.KeyValue {
	if address == "" {
		return nil
	}
	attrs := []attribute.KeyValue{attribute.String("server.address", address)}
	if port > 0 {
		attrs = append(attrs, attribute.Int("server.port", port))
	}
	return attrs
}

// retry records a retry of the turn's request (X-O4): an event on the
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

// chunk notes an event of the provider's stream: the first one's time is
// the turn's time to first chunk.
func (c *chatCall) chunk() {
	if c.firstChunk == 0 {
		c.firstChunk = max(time.Since(c.began), time.Nanosecond)
	}
}

// end ends the span with what the turn used and how it ended, and
// records the turn's metrics. usage is the provider's report (nil when
// its stream ended without one); providerErr the stream's failure, which
// marks the span an error; err the turn's, for the metrics.
func (c *chatCall) end(ctx context.Context, usage *agentdv1.Usage, providerErr, err error) {
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
	if providerErr != nil {
		kind := telemetry.ErrorType(providerErr)
		attrs = append(attrs, attribute.String("error.type", kind))
		c.span.SetStatus(codes.Error, kind)
	}
	c.span.SetAttributes(attrs...)
	c.g.s.meters.modelTurn(ctx, c.g.tenant, t)
}

// allInput is every input token of u: those at the full rate and those
// read from or written to the provider's cache.
func allInput(u *agentdv1.Usage) int64 {
	return u.GetInputTokens() + u.GetCacheReadInputTokens() + u.GetCacheWriteInputTokens()
}
