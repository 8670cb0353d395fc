package mcpconn

import (
	"context"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os/exec"
	"slices"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.opentelemetry.io/otel/trace"

	"github.com/agentd/agentd/internal/mcptest"
)

// observed is a Telemetry whose spans and metrics a test reads.
type observed struct {
	tel    *Telemetry
	spans  *tracetest.SpanRecorder
	reader *sdkmetric.ManualReader
}

func newObserved(t *testing.T) *observed {
	t.Helper()
	spans := tracetest.NewSpanRecorder()
	reader := sdkmetric.NewManualReader()
	tel, err := NewTelemetry(sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(spans)), sdkmetric.NewMeterProvider(sdkmetric.WithReader(reader)))
	if err != nil {
		t.Fatal(err)
	}
	return &observed{tel: tel, spans: spans, reader: reader}
}

// spanView is what the tests check of a span.
type spanView struct {
	Name   string
	Kind   trace.SpanKind
	Status codes.Code
	// Says is the status description of a failed span whose request a
	// server answered with a JSON-RPC error: the error's message.
	Says  string
	Attrs map[string]string
}

// ended returns the ended spans in the order they ended, their request ids
// and session ids replaced by "set" (their values are the transport's).
func (o *observed) ended() []spanView {
	var out []spanView
	for _, sp := range o.spans.Ended() {
		v := spanView{Name: sp.Name(), Kind: sp.SpanKind(), Status: sp.Status().Code, Attrs: attrMap(sp.Attributes())}
		if v.Attrs["rpc.response.status_code"] != "" {
			v.Says = sp.Status().Description
		}
		for _, k := range []string{"jsonrpc.request.id", "mcp.session.id", "server.port"} {
			if v.Attrs[k] != "" {
				v.Attrs[k] = "set"
			}
		}
		out = append(out, v)
	}
	return out
}

func attrMap(kvs []attribute.KeyValue) map[string]string {
	m := make(map[string]string, len(kvs))
	for _, kv := range kvs {
		m[string(kv.Key)] = kv.Value.String()
	}
	return m
}

// durations returns the attribute sets of mcp.client.operation.duration's
// points, with their counts, and checks the conventions' buckets.
func (o *observed) durations(t *testing.T) map[string]uint64 {
	t.Helper()
	var rm metricdata.ResourceMetrics
	if err := o.reader.Collect(t.Context(), &rm); err != nil {
		t.Fatal(err)
	}
	out := make(map[string]uint64)
	for _, sm := range rm.ScopeMetrics {
		for _, m := range sm.Metrics {
			if m.Name != "mcp.client.operation.duration" {
				continue
			}
			if m.Unit != "s" {
				t.Errorf("unit %q; want s", m.Unit)
			}
			h, ok := m.Data.(metricdata.Histogram[float64])
			if !ok {
				t.Fatalf("%s is a %T; want a float64 histogram", m.Name, m.Data)
			}
			for _, dp := range h.DataPoints {
				if !slices.Equal(dp.Bounds, operationBuckets) {
					t.Errorf("bounds %v; want the conventions' %v", dp.Bounds, operationBuckets)
				}
				var parts []string
				for _, kv := range dp.Attributes.ToSlice() {
					parts = append(parts, string(kv.Key)+"="+kv.Value.String())
				}
				out[strings.Join(parts, " ")] += dp.Count
			}
		}
	}
	return out
}

// noSecret fails when a span name, attribute, status text or metric
// attribute holds any of secrets.
func (o *observed) noSecret(t *testing.T, secrets ...string) {
	t.Helper()
	var texts []string
	for _, sp := range o.spans.Ended() {
		texts = append(texts, sp.Name(), sp.Status().Description)
		for _, kv := range sp.Attributes() {
			texts = append(texts, kv.Value.String())
		}
	}
	for set := range o.durations(t) {
		texts = append(texts, set)
	}
	for _, text := range texts {
		for _, s := range secrets {
			if strings.Contains(text, s) {
				t.Errorf("telemetry holds a secret: %q contains %q", text, s)
			}
		}
	}
}

// X-O2, X-O1: over stdio, the handshake, tools/list and each tools/call are
// CLIENT spans named {mcp.method.name} [{tool}] with the conventions'
// attributes (network.transport pipe, no session id, the request's id), a
// tool's flagged result is error.type tool_error, a JSON-RPC error its
// code; each is one mcp.client.operation.duration point with the
// connection's server and tenant.
func TestTelemetryStdio(t *testing.T) {
	t.Parallel()
	o := newObserved(t)
	spec := stdioSpec(t, mcptest.Tools)
	conn, err := DialStdio(t.Context(), spec, roomyTimeout, Options{Telemetry: o.tel, Tenant: "pool-tenant"})
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	view := conn.View("mine", roomyTimeout, Owner{Tenant: "acme"})
	if _, err := view.ListTools(t.Context()); err != nil {
		t.Fatal(err)
	}
	for _, tool := range []string{"echo", "fail"} {
		if _, err := view.CallTool(t.Context(), tool, map[string]any{"text": "x"}); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := view.CallTool(t.Context(), "rpc_error", map[string]any{"text": "x"}); err == nil {
		t.Fatal("rpc_error succeeded")
	}

	base := map[string]string{"network.transport": "pipe", "mcp.protocol.version": ModernVersion, "jsonrpc.request.id": "set"}
	with := func(kv ...string) map[string]string {
		m := make(map[string]string, len(base)+len(kv)/2)
		for k, v := range base {
			m[k] = v
		}
		for i := 0; i < len(kv); i += 2 {
			m[kv[i]] = kv[i+1]
		}
		return m
	}
	call := func(tool string, kv ...string) map[string]string {
		return with(append([]string{"mcp.method.name", "tools/call", "gen_ai.tool.name", tool, "gen_ai.operation.name", "execute_tool"}, kv...)...)
	}
	client := trace.SpanKindClient
	want := []spanView{
		// The go-sdk fake speaks 2026-07-28: its handshake is the
		// server/discover probe (X-M8).
		{Name: "server/discover", Kind: client, Attrs: with("mcp.method.name", "server/discover")},
		// The fake pages its tool list two tools at a time: one span a page.
		{Name: "tools/list", Kind: client, Attrs: with("mcp.method.name", "tools/list")},
	}
	got := o.ended()
	for len(got) > len(want) && got[len(want)].Name == "tools/list" {
		want = append(want, want[1])
	}
	want = append(want,
		spanView{Name: "tools/call echo", Kind: client, Attrs: call("echo")},
		spanView{Name: "tools/call fail", Kind: client, Status: codes.Error, Attrs: call("fail", "error.type", "tool_error")},
		spanView{Name: "tools/call rpc_error", Kind: client, Status: codes.Error, Says: "x" /* the error's message: the text */, Attrs: call("rpc_error", "error.type", "-32000", "rpc.response.status_code", "-32000")},
	)
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("spans (-want +got):\n%s", diff)
	}
	var ids []string
	for _, sp := range o.spans.Ended() {
		ids = append(ids, attrMap(sp.Attributes())["jsonrpc.request.id"])
	}
	if slices.Contains(ids, "") || len(slices.Compact(slices.Sorted(slices.Values(ids)))) != len(ids) {
		t.Errorf("request ids %v; want one of its own for each request", ids)
	}

	const common = "mcp.protocol.version=" + ModernVersion + " network.transport=pipe"
	wantPoints := map[string]uint64{
		"mcp.method.name=server/discover " + common + " server=fake tools tenant=pool-tenant":                                                                                               1,
		"mcp.method.name=tools/list " + common + " server=mine tenant=acme":                                                                                                                 uint64(len(got) - 4),
		"gen_ai.operation.name=execute_tool gen_ai.tool.name=echo mcp.method.name=tools/call " + common + " server=mine tenant=acme":                                                        1,
		"error.type=tool_error gen_ai.operation.name=execute_tool gen_ai.tool.name=fail mcp.method.name=tools/call " + common + " server=mine tenant=acme":                                  1,
		"error.type=-32000 gen_ai.operation.name=execute_tool gen_ai.tool.name=rpc_error mcp.method.name=tools/call " + common + " rpc.response.status_code=-32000 server=mine tenant=acme": 1,
	}
	if diff := cmp.Diff(wantPoints, o.durations(t)); diff != "" {
		t.Errorf("mcp.client.operation.duration points (-want +got):\n%s", diff)
	}
}

// X-O2, X-O1: over Streamable HTTP, spans carry network.transport tcp, the
// server's host and port (never the URL's path or query), the session id,
// and no credential anywhere, in spans or metric points (the canary: a
// secret path, query, token and header value).
func TestTelemetryHTTP(t *testing.T) {
	t.Parallel()
	o := newObserved(t)
	const token = "canary-token-5f1d"
	srv := mcptest.NewHTTP(t, mcptest.HTTPOptions{Token: token})
	spec := HTTPSpec{
		Name: "remote", URL: srv.Base + "/canary-path-9a7c/mcp?key=canary-query-3b2e", Authorization: token,
		Headers: map[string]string{"X-Api-Key": "canary-header-77d0"}, Transport: privateTransport(t),
	}
	conn, err := DialHTTP(t.Context(), spec, roomyTimeout, Options{Telemetry: o.tel, Tenant: "acme"})
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	if _, err := conn.CallTool(t.Context(), "fail", map[string]any{"text": "x"}); err != nil {
		t.Fatal(err)
	}
	want := map[string]string{
		"mcp.method.name": "tools/call", "gen_ai.tool.name": "fail", "gen_ai.operation.name": "execute_tool",
		"network.transport": "tcp", "network.protocol.name": "http", "network.protocol.version": "1.1", "server.address": "127.0.0.1", "server.port": "set",
		"mcp.protocol.version": ClassicVersion, "jsonrpc.request.id": "set", "mcp.session.id": "set",
		"error.type": "tool_error",
	}
	got := o.ended()
	// The stateful fake speaks 2025-11-25: the probe, then initialize (X-M8).
	if len(got) != 3 || got[0].Name != "server/discover" || got[1].Name != "initialize" || got[1].Attrs["server.address"] != "127.0.0.1" {
		t.Fatalf("spans %+v; want server/discover, initialize, then the call", got)
	}
	if diff := cmp.Diff(want, got[2].Attrs); diff != "" {
		t.Errorf("tools/call span attributes (-want +got):\n%s", diff)
	}
	const common = "mcp.protocol.version=" + ClassicVersion + " network.transport=tcp server=remote tenant=acme"
	wantPoints := map[string]uint64{
		"mcp.method.name=initialize " + common: 1,
		"mcp.method.name=server/discover mcp.protocol.version=" + ModernVersion + " network.transport=tcp server=remote tenant=acme": 1,
		"error.type=tool_error gen_ai.operation.name=execute_tool gen_ai.tool.name=fail mcp.method.name=tools/call " + common:        1,
	}
	if diff := cmp.Diff(wantPoints, o.durations(t)); diff != "" {
		t.Errorf("mcp.client.operation.duration points (-want +got):\n%s", diff)
	}
	o.noSecret(t, token, "canary-path-9a7c", "canary-query-3b2e", "canary-header-77d0")
}

// X-O2: a failed handshake is an initialize span too, marked an error: a
// stdio server that exits at once (connection_closed), an HTTP server that
// answers 500 (error.type the status).
func TestTelemetryHandshakeFailure(t *testing.T) {
	t.Parallel()
	t.Run("stdio", func(t *testing.T) {
		t.Parallel()
		exe, err := exec.LookPath("false")
		if err != nil {
			t.Skip("no false command")
		}
		o := newObserved(t)
		if _, err := DialStdio(t.Context(), StdioSpec{Name: "gone", Command: exe, TerminateGrace: grace}, roomyTimeout, Options{Telemetry: o.tel}); err == nil {
			t.Fatal("the handshake with false succeeded")
		}
		// The probe, the go-sdk's fallback initialize, and the classic
		// handshake of a fresh process: a server that ends on the probe
		// may be one that exits on a request it does not know (X-M8).
		got := o.ended()
		var names []string
		for _, sp := range got {
			names = append(names, sp.Name)
			if sp.Status != codes.Error || sp.Attrs["error.type"] != "connection_closed" {
				t.Errorf("span %+v; want an error of type connection_closed", sp)
			}
		}
		if want := []string{"server/discover", "initialize", "initialize"}; !slices.Equal(names, want) {
			t.Errorf("spans %v; want %v", names, want)
		}
	})
	t.Run("http 500", func(t *testing.T) {
		t.Parallel()
		ts := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
			http.Error(w, "down", http.StatusInternalServerError)
		}))
		defer ts.Close()
		o := newObserved(t)
		spec := HTTPSpec{Name: "down", URL: ts.URL + "/canary-path-1e4f", Transport: privateTransport(t)}
		if _, err := DialHTTP(t.Context(), spec, roomyTimeout, Options{Telemetry: o.tel}); err == nil {
			t.Fatal("the handshake with a failing server succeeded")
		}
		got := o.ended()
		// The probe, then the go-sdk's fallback initialize (X-M8).
		if len(got) != 2 || got[0].Name != "server/discover" || got[1].Name != "initialize" {
			t.Errorf("spans %+v; want server/discover and initialize", got)
		}
		for _, sp := range got {
			if sp.Status != codes.Error || sp.Attrs["error.type"] != "500" {
				t.Errorf("span %+v; want an error of type 500", sp)
			}
		}
		o.noSecret(t, "canary-path-1e4f")
	})
}

// X-O2: a call its caller cancels (a pause, the generation's end) is no
// error: its span's status stays unset and says agentd.cancelled; its
// duration has error.type cancelled.
func TestTelemetryCancelledCall(t *testing.T) {
	t.Parallel()
	o := newObserved(t)
	log := newRecorder()
	spec := stdioSpec(t, mcptest.Tools)
	conn, err := DialStdio(t.Context(), spec, roomyTimeout, Options{Telemetry: o.tel, Logger: slog.New(log)})
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	ctx, cancel := context.WithCancel(t.Context())
	done := make(chan error, 1)
	go func() {
		_, err := conn.CallTool(ctx, "stall", nil)
		done <- err
	}()
	log.waitFor(t, "the stall tool running", func(r record) bool { return r.attrs["line"] == "mcptest: ping answered" })
	cancel()
	if err := <-done; err == nil {
		t.Fatal("the cancelled call succeeded")
	}
	var call *spanView
	for _, v := range o.ended() {
		if v.Name == "tools/call stall" {
			call = &v
		}
	}
	if call == nil {
		t.Fatalf("no tools/call stall span in %+v", o.ended())
	}
	if call.Status != codes.Unset || call.Attrs["agentd.cancelled"] != "true" || call.Attrs["error.type"] != "" {
		t.Errorf("cancelled call's span: status %v, attributes %v; want unset, agentd.cancelled, no error.type", call.Status, call.Attrs)
	}
	const want = "error.type=cancelled gen_ai.operation.name=execute_tool gen_ai.tool.name=stall mcp.method.name=tools/call mcp.protocol.version=" + ModernVersion + " network.transport=pipe server=fake tools tenant="
	if n := o.durations(t)[want]; n != 1 {
		t.Errorf("durations %v; want one point %q", o.durations(t), want)
	}
}

// X-O4: a stdio server's stderr lines carry the tenant, generation and
// trace id of the session its process serves at that moment, and none
// once the session gave it back.
func TestStderrOwner(t *testing.T) {
	t.Parallel()
	log := newRecorder()
	spec := stdioSpec(t, mcptest.Tools)
	conn := dial(t, spec, roomyTimeout, log)
	isLine := func(line string) func(record) bool {
		return func(r record) bool { return r.msg == "mcp server stderr" && r.attrs["line"] == line }
	}
	owner := &Owner{Tenant: "acme", Generation: "gen-42", TraceID: "4bf92f3577b34da6a3ce929d0e0e4736"}
	conn.Serve(owner)
	callText(t, conn, "stderr", map[string]any{"text": "served"})
	rec := log.waitFor(t, "the served line", isLine("served"))
	for k, v := range map[string]string{"server": spec.Name, "tenant": "acme", "generation": "gen-42", "trace_id": owner.TraceID} {
		if rec.attrs[k] != v {
			t.Errorf("the served line's %s is %q; want %q (attributes %v)", k, rec.attrs[k], v, rec.attrs)
		}
	}
	conn.Serve(nil)
	callText(t, conn, "stderr", map[string]any{"text": "idle"})
	rec = log.waitFor(t, "the idle line", isLine("idle"))
	for _, k := range []string{"tenant", "generation", "trace_id"} {
		if _, ok := rec.attrs[k]; ok {
			t.Errorf("the line of no session has %s: %v", k, rec.attrs)
		}
	}
}

// X-O2: a server that speaks only the legacy HTTP+SSE transport shows the
// refused Streamable HTTP handshake as failed server/discover and
// initialize spans (its HTTP status), then the one that succeeded; its requests carry their ids too.
func TestTelemetrySSE(t *testing.T) {
	t.Parallel()
	o := newObserved(t)
	srv := mcptest.NewHTTP(t, mcptest.HTTPOptions{Mode: mcptest.SSE})
	conn, err := DialHTTP(t.Context(), HTTPSpec{Name: "legacy", URL: srv.URL, Transport: privateTransport(t)}, roomyTimeout, Options{Telemetry: o.tel})
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	if _, err := conn.CallTool(t.Context(), "echo", map[string]any{"text": "x"}); err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, v := range o.ended() {
		got = append(got, v.Name+" "+v.Attrs["error.type"]+" "+v.Attrs["jsonrpc.request.id"]+" "+v.Attrs["mcp.session.id"])
	}
	// Streamable HTTP's probe and initialize are refused (X-M8), then the
	// legacy transport's initialize.
	if len(got) != 4 || !strings.HasPrefix(got[0], "server/discover 4") || !strings.HasPrefix(got[1], "initialize 4") || got[2] != "initialize  set " || got[3] != "tools/call echo  set " {
		t.Errorf("spans (name, error.type, request id, session id) %q; want a refused probe and initialize, an initialize and the call", got)
	}
}
