package server_test

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/google/go-cmp/cmp"
	"go.opentelemetry.io/otel/codes"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.opentelemetry.io/otel/trace"
	grpccodes "google.golang.org/grpc/codes"

	agentdv1 "github.com/agentd/agentd/gen/go/agentd/v1"
	"github.com/agentd/agentd/providers"
	"github.com/agentd/agentd/providers/anthropic"
	"github.com/agentd/agentd/providers/router"
	"github.com/agentd/agentd/server"
)

// anthropicAnswer is a streamed Messages API answer that names its id and
// model, reads and writes the prompt cache, and ends its turn.
const anthropicAnswer = `event: message_start
data: {"type":"message_start","message":{"id":"msg_01Span","type":"message","role":"assistant","model":"claude-sonnet-4-5-20250929","content":[],"stop_reason":null,"usage":{"input_tokens":35,"cache_creation_input_tokens":310,"cache_read_input_tokens":2100,"output_tokens":1}}}

event: content_block_start
data: {"type":"content_block_start","index":0,"content_block":{"type":"text","text":""}}

event: content_block_delta
data: {"type":"content_block_delta","index":0,"delta":{"type":"text_delta","text":"Hello."}}

event: content_block_stop
data: {"type":"content_block_stop","index":0}

event: message_delta
data: {"type":"message_delta","delta":{"stop_reason":"end_turn","stop_sequence":null},"usage":{"input_tokens":35,"cache_creation_input_tokens":310,"cache_read_input_tokens":2100,"output_tokens":25}}

event: message_stop
data: {"type":"message_stop"}

`

// The canaries: the API key and the base URL's path, which no span, log
// line or metric may carry.
const (
	canaryKey  = "sk-ant-canary-0123456789"
	canaryPath = "/secret-gateway-path"
)

// anthropicBehind serves the Anthropic adapter, behind the router, from a
// fake API that answers each request with the next status (200: the
// answer above), at a base URL with a path.
func anthropicBehind(t *testing.T, statuses ...int) (ps []providers.Provider, srv *httptest.Server) {
	t.Helper()
	var n atomic.Int32
	srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		status := statuses[min(int(n.Add(1))-1, len(statuses)-1)]
		if status != http.StatusOK {
			w.Header().Set("retry-after-ms", "0")
			w.Header().Set("content-type", "application/json")
			w.WriteHeader(status)
			typ := "overloaded_error"
			if status == http.StatusTooManyRequests {
				typ = "rate_limit_error"
			}
			fmt.Fprintf(w, `{"type":"error","error":{"type":%q,"message":"slow down (key %s)"}}`, typ, canaryKey)
			return
		}
		w.Header().Set("content-type", "text/event-stream")
		fmt.Fprint(w, anthropicAnswer)
	}))
	a := anthropic.New(providers.Settings{APIKey: canaryKey, BaseURL: srv.URL + canaryPath})
	t.Cleanup(func() {
		srv.Close()
		a.(interface{ CloseIdleConnections() }).CloseIdleConnections()
	})
	r := router.New(func(name string) (providers.Provider, bool) { return a, name == a.Name() })
	return []providers.Provider{a, r}, srv
}

// X-O2, X-O1, X-O4: a model turn served through the router by the
// Anthropic adapter, whose first request gets a 429. Its chat span
// (CLIENT) names the adapter the router chose in the conventions' words,
// the endpoint's host and port, the answer's id, model and finish reason,
// the time to its first chunk and its tokens, input counted with the
// cached ones; the retry is an event on it, a warn line and a count of
// agentd.provider.retries; the turn's metrics carry the response model
// and the endpoint; and no API key or URL path is anywhere.
func TestChatSpanOfARetriedTurn(t *testing.T) {
	t.Parallel()
	rec := tracetest.NewSpanRecorder()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(rec))
	reader := sdkmetric.NewManualReader()
	mp := sdkmetric.NewMeterProvider(sdkmetric.WithReader(reader))
	t.Cleanup(func() { _ = mp.Shutdown(context.Background()) })
	var log logLines
	ps, srv := anthropicBehind(t, http.StatusTooManyRequests, http.StatusOK)
	u, _ := url.Parse(srv.URL)
	client := newClientWith(t, server.Options{Bridge: &fakeBridge{}, TracerProvider: tp, MeterProvider: mp, Logger: log.logger()}, ps...)
	agent := &agentdv1.Agent{Provider: router.Name, Model: "claude-sonnet-4-5"}
	events, st := generate(t, client, &agentdv1.StartGeneration{Agent: agent, Messages: userSays("hi")}, nil)
	wantCode(t, st, grpccodes.OK)
	id := started(t, events).GetGenerationId()

	chat := endedSpan(t, rec, "chat claude-sonnet-4-5")
	if chat.SpanKind() != trace.SpanKindClient || chat.Status().Code == codes.Error {
		t.Errorf("chat span kind %v, status %v; want CLIENT, not an error", chat.SpanKind(), chat.Status())
	}
	got := spanAttrs(chat)
	if ttfc := got["gen_ai.response.time_to_first_chunk"]; ttfc == "" || ttfc == "0" {
		t.Errorf("gen_ai.response.time_to_first_chunk = %q; want a positive time", ttfc)
	}
	delete(got, "gen_ai.response.time_to_first_chunk")
	want := map[string]string{
		"gen_ai.operation.name":                    "chat",
		"gen_ai.provider.name":                     "anthropic",
		"gen_ai.request.model":                     "claude-sonnet-4-5",
		"gen_ai.request.stream":                    "true",
		"gen_ai.conversation.id":                   id,
		"gen_ai.response.id":                       "msg_01Span",
		"gen_ai.response.model":                    "claude-sonnet-4-5-20250929",
		"gen_ai.response.finish_reasons":           `["end_turn"]`,
		"server.address":                           u.Hostname(),
		"server.port":                              u.Port(),
		"gen_ai.usage.input_tokens":                "2445",
		"gen_ai.usage.cache_read.input_tokens":     "2100",
		"gen_ai.usage.cache_creation.input_tokens": "310",
		"gen_ai.usage.output_tokens":               "25",
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("chat span attributes (-want +got):\n%s", diff)
	}
	var retries []map[string]string
	for _, ev := range chat.Events() {
		if ev.Name == "retry" {
			m := map[string]string{}
			for _, kv := range ev.Attributes {
				m[string(kv.Key)] = kv.Value.String()
			}
			retries = append(retries, m)
		}
	}
	wantRetries := []map[string]string{{"http.response.status_code": "429", "http.request.resend_count": "1", "agentd.retry.delay": "0"}}
	if diff := cmp.Diff(wantRetries, retries); diff != "" {
		t.Errorf("retry events (-want +got):\n%s", diff)
	}

	lines := log.named(t, "provider call retried")
	if len(lines) != 1 {
		t.Fatalf("%d retry lines; want 1:\n%s", len(lines), log.String())
	}
	line := lines[0]
	for k, v := range map[string]any{"level": "WARN", "generation": id, "tenant": "", "provider": "anthropic", "model": "claude-sonnet-4-5", "status": float64(429), "attempt": float64(1), "delay_ms": float64(0)} {
		if line[k] != v {
			t.Errorf("retry line %s = %v; want %v", k, line[k], v)
		}
	}

	metrics := collect(t, reader)
	const turnModels = "gen_ai.operation.name=chat,gen_ai.provider.name=anthropic,gen_ai.request.model=claude-sonnet-4-5,gen_ai.response.model=claude-sonnet-4-5-20250929"
	endpoint := fmt.Sprintf("server.address=%s,server.port=%s,tenant=", u.Hostname(), u.Port())
	for k, v := range map[string]float64{
		"agentd.provider.retries{gen_ai.provider.name=anthropic,http.response.status_code=429,tenant=}":                            1,
		"gen_ai.client.token.usage{" + turnModels + ",gen_ai.token.type=input," + endpoint + "}":                                   2445,
		"gen_ai.client.token.usage{" + turnModels + ",gen_ai.token.type=output," + endpoint + "}":                                  25,
		"agentd.provider.cached_tokens{cache=read,gen_ai.provider.name=anthropic,gen_ai.request.model=claude-sonnet-4-5,tenant=}":  2100,
		"agentd.provider.cached_tokens{cache=write,gen_ai.provider.name=anthropic,gen_ai.request.model=claude-sonnet-4-5,tenant=}": 310,
		"gen_ai.client.operation.time_to_first_chunk{" + turnModels + "," + endpoint + "}#count":                                   1,
		"gen_ai.client.operation.duration{" + turnModels + "," + endpoint + "}#count":                                              1,
	} {
		if metrics[k] != v {
			t.Errorf("metric %s = %v; want %v (all: %v)", k, metrics[k], v, metrics)
		}
	}

	canary(t, rec, &log, metrics)
}

// X-O2, X-O4: a turn whose retries run out is an error on its chat span
// (error.type, the fault's kind), with an event for each retry and the
// adapter the router chose.
func TestChatSpanOfAFailedTurn(t *testing.T) {
	t.Parallel()
	rec := tracetest.NewSpanRecorder()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(rec))
	var log logLines
	ps, _ := anthropicBehind(t, http.StatusServiceUnavailable)
	client := newClientWith(t, server.Options{Bridge: &fakeBridge{}, TracerProvider: tp, Logger: log.logger()}, ps...)
	agent := &agentdv1.Agent{Provider: router.Name, Model: "claude-sonnet-4-5"}
	_, st := generate(t, client, &agentdv1.StartGeneration{Agent: agent, Messages: userSays("hi")}, nil)
	wantCode(t, st, grpccodes.Unavailable)

	chat := endedSpan(t, rec, "chat claude-sonnet-4-5")
	if chat.Status().Code != codes.Error {
		t.Errorf("chat span status %v; want an error", chat.Status())
	}
	got := spanAttrs(chat)
	for k, v := range map[string]string{"error.type": "Unavailable", "gen_ai.provider.name": "anthropic", "server.address": "127.0.0.1"} {
		if got[k] != v {
			t.Errorf("chat span %s = %q; want %q", k, got[k], v)
		}
	}
	var retries int
	for _, ev := range chat.Events() {
		if ev.Name == "retry" {
			retries++
		}
	}
	if retries != 2 || len(log.named(t, "provider call retried")) != 2 {
		t.Errorf("%d retry events, %d retry lines; want the 2 retries of the default", retries, len(log.named(t, "provider call retried")))
	}
	canary(t, rec, &log, nil)
}

// endedSpan is the one ended span named name.
func endedSpan(t *testing.T, rec *tracetest.SpanRecorder, name string) sdktrace.ReadOnlySpan {
	t.Helper()
	var found []sdktrace.ReadOnlySpan
	for _, s := range rec.Ended() {
		if s.Name() == name {
			found = append(found, s)
		}
	}
	if len(found) != 1 {
		t.Fatalf("%d spans named %q; want 1", len(found), name)
	}
	return found[0]
}

func spanAttrs(s sdktrace.ReadOnlySpan) map[string]string {
	m := map[string]string{}
	for _, kv := range s.Attributes() {
		m[string(kv.Key)] = kv.Value.String()
	}
	return m
}

// canary fails if the API key or the base URL's path shows in any span's
// name, attributes, events or status, in the log, or in a metric.
func canary(t *testing.T, rec *tracetest.SpanRecorder, log *logLines, metrics map[string]float64) {
	t.Helper()
	var b strings.Builder
	for _, s := range rec.Ended() {
		fmt.Fprintln(&b, s.Name(), s.Status().Description)
		for _, kv := range s.Attributes() {
			fmt.Fprintln(&b, kv.Key, kv.Value.String())
		}
		for _, ev := range s.Events() {
			fmt.Fprintln(&b, ev.Name)
			for _, kv := range ev.Attributes {
				fmt.Fprintln(&b, kv.Key, kv.Value.String())
			}
		}
	}
	b.WriteString(log.String())
	for k := range metrics {
		fmt.Fprintln(&b, k)
	}
	for _, secret := range []string{canaryKey, canaryPath, "secret-gateway"} {
		if strings.Contains(b.String(), secret) {
			t.Errorf("%q appears in the telemetry:\n%s", secret, b.String())
		}
	}
}
