package providers

import (
	"context"
	"time"
)

// Observer hears what one model turn does on the wire, for telemetry:
// which provider a delegating provider chose, where the request went, and
// every retry. The tool loop puts one in the context of each turn
// (WithObserver); adapters and their HTTP client report to it through
// Observe. Any function may be nil. The functions are called on the
// goroutine that runs the request, while the turn's stream is consumed;
// they must not block, and they receive no credential, URL path or query.
type Observer struct {
	// Routed: a delegating provider (the router) hands the turn to the
	// provider registered under name.
	Routed func(name string)
	// Endpoint: the turn's request goes to the API at address (a host
	// name or IP address) and port, before its first attempt.
	Endpoint func(address string, port int)
	// Retry: an attempt failed and the request is sent again after
	// r.Delay.
	Retry func(r Retry)
}

// Retry describes an attempt that failed and is retried.
type Retry struct {
	// Attempt is the number of the failed attempt, from 1; the next
	// attempt is Attempt+1.
	Attempt int
	// Status is the failed attempt's HTTP status; 0 when no response came.
	Status int
	// Failure classifies an attempt without a response: "timeout" (it
	// took too long) or "connection" (the API could not be reached); ""
	// when a status came.
	Failure string
	// Delay is the wait before the next attempt.
	Delay time.Duration
}

type observerKey struct{}

// WithObserver returns ctx carrying o, for the providers called with it.
func WithObserver(ctx context.Context, o *Observer) context.Context {
	return context.WithValue(ctx, observerKey{}, o)
}

// Observe returns the Observer ctx carries; a nil *Observer (whose
// methods do nothing) when none.
func Observe(ctx context.Context) *Observer {
	o, _ := ctx.Value(observerKey{}).(*Observer)
	return o
}

// Route reports the provider a delegating provider chose.
func (o *Observer) Route(name string) {
	if o != nil && o.Routed != nil {
		o.Routed(name)
	}
}

// Sending reports the address and port a request goes to.
func (o *Observer) Sending(address string, port int) {
	if o != nil && o.Endpoint != nil {
		o.Endpoint(address, port)
	}
}

// Retrying reports a retry.
func (o *Observer) Retrying(r Retry) {
	if o != nil && o.Retry != nil {
		o.Retry(r)
	}
}

// GenAIName is the OpenTelemetry GenAI conventions' gen_ai.provider.name
// for the provider registered as name: the conventions' well-known value
// where one applies (openai, anthropic, azure.ai.openai, gcp.gemini,
// deepseek), else agentd's own name (ollama, openrouter, requesty, mock,
// script, router), which is as bounded as the registry.
func GenAIName(name string) string {
	switch name {
	case "openai", "openai-responses":
		return "openai"
	case "azure":
		return "azure.ai.openai"
	case "gemini":
		return "gcp.gemini"
	}
	return name
}
