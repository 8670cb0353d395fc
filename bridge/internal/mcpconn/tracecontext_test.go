package mcpconn

import (
	"context"
	"encoding/json"
	"testing"

	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/trace"

	"github.com/agentd/agentd/internal/mcptest"
)

// traced is a context holding a sampled span context, and its traceparent
// as W3C Trace Context writes it.
func traced() (context.Context, string) {
	sc := trace.NewSpanContext(trace.SpanContextConfig{
		TraceID:    trace.TraceID{0x4b, 0xf9, 0x2f, 0x35, 0x77, 0xb3, 0x4d, 0xa6, 0xa3, 0xce, 0x92, 0x9d, 0x0e, 0x0e, 0x47, 0x36},
		SpanID:     trace.SpanID{0x00, 0xf0, 0x67, 0xaa, 0x0b, 0xa9, 0x02, 0xb7},
		TraceFlags: trace.FlagsSampled,
	})
	return trace.ContextWithSpanContext(context.Background(), sc), "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"
}

// metaOf calls the fake servers' meta tool, which answers with the
// request's _meta.
func metaOf(t *testing.T, ctx context.Context, conn *Conn) map[string]any {
	t.Helper()
	res, err := conn.CallTool(ctx, "meta", nil)
	if err != nil {
		t.Fatal(err)
	}
	var meta map[string]any
	if err := json.Unmarshal([]byte(textOf(res)), &meta); err != nil {
		t.Fatalf("the meta tool said %q: %v", textOf(res), err)
	}
	return meta
}

// X-O3: the trace context of a call reaches the MCP server, in the
// request's params._meta (traceparent) on stdio and on HTTP, as the
// handshake's initialize does, and as the traceparent header of HTTP
// requests; without a propagator, nothing is added beside the call's
// progress token.
func TestTraceContextReachesTheServer(t *testing.T) {
	t.Parallel()
	ctx, want := traced()
	prop := propagation.TraceContext{}

	t.Run("stdio", func(t *testing.T) {
		t.Parallel()
		conn, err := DialStdio(t.Context(), stdioSpec(t, "tools"), roomyTimeout, Options{Propagator: prop})
		if err != nil {
			t.Fatal(err)
		}
		defer conn.Close()
		if got := metaOf(t, ctx, conn)["traceparent"]; got != want {
			t.Errorf("_meta.traceparent %v; want %s", got, want)
		}
	})
	t.Run("http", func(t *testing.T) {
		t.Parallel()
		srv := mcptest.NewHTTP(t, mcptest.HTTPOptions{})
		conn, err := DialHTTP(ctx, HTTPSpec{Name: "fake", URL: srv.URL, Transport: privateTransport(t)}, roomyTimeout, Options{Propagator: prop})
		if err != nil {
			t.Fatal(err)
		}
		defer conn.Close()
		if got := metaOf(t, ctx, conn)["traceparent"]; got != want {
			t.Errorf("_meta.traceparent %v; want %s", got, want)
		}
		var headed bool
		handshake := map[string]bool{}
		for _, r := range srv.Requests() {
			switch r.RPCMethod {
			case "tools/call":
				headed = r.Traceparent == want
			case "server/discover", "initialize":
				handshake[r.RPCMethod] = r.MetaTraceparent == want
			}
		}
		if !handshake["server/discover"] || !handshake["initialize"] {
			t.Errorf("the handshake's requests had no _meta.traceparent %s: %+v", want, srv.Requests())
		}
		if !headed {
			t.Errorf("the tools/call POST had no traceparent header %s: %+v", want, srv.Requests())
		}
	})
	t.Run("no propagator", func(t *testing.T) {
		t.Parallel()
		srv := mcptest.NewHTTP(t, mcptest.HTTPOptions{})
		conn := dialFake(t, srv, roomyTimeout)
		got := metaOf(t, ctx, conn)
		if _, ok := got["progressToken"]; !ok || len(got) != 1 {
			t.Errorf("_meta %v; want the progress token alone (X-M6)", got)
		}
	})
}
