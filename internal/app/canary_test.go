package app_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"maps"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/agentd/agentd/internal/logtest"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/durationpb"

	bridgev1 "github.com/agentd/agentd/gen/go/agentd/bridge/v1"
	agentdv1 "github.com/agentd/agentd/gen/go/agentd/v1"
	"github.com/agentd/agentd/internal/app"
	"github.com/agentd/agentd/internal/app/apptest"
	"github.com/agentd/agentd/internal/config"
	"github.com/agentd/agentd/internal/grpcserver"
	"github.com/agentd/agentd/internal/mcpdemo"
	"github.com/agentd/agentd/internal/telemetry"
)

// The canaries: distinctive secrets, each put in one place where agentd
// must carry it without ever showing it.
const (
	cnryAuth      = "cnry-auth-7f3a"      // the HTTP MCP server's bearer token
	cnryWrongAuth = "cnry-wrongauth-3c3c" // a token the server refuses
	cnryPath      = "cnry-path-91bc"      // in the server URL's path
	cnryQuery     = "cnry-query-2d4e"     // in the server URL's query
	cnryHeader    = "cnry-header-e1f0"    // a header value for the server
	cnryEnv       = "cnry-env-5a6b"       // env of a request's command server
	cnryRegEnv    = "cnry-regenv-0b7d"    // env of a registered server
	cnryKey       = "cnry-key-c8d9"       // the openai provider's API key
	cnryAKey      = "cnry-akey-4e21"      // the anthropic provider's API key
	cnryRKey      = "cnry-rkey-9a5f"      // the openai-responses provider's API key
)

var canarySecrets = []string{cnryAuth, cnryWrongAuth, cnryPath, cnryQuery, cnryHeader, cnryEnv, cnryRegEnv, cnryKey, cnryAKey, cnryRKey}

// MCP server behaviours of canaryMCP.
const (
	mcpModeOK    int32 = iota
	mcpMode500         // every POST fails with a plain 500
	mcpModeQuote       // every POST is refused (403) with a JSON-RPC error quoting the request, as a gateway might
	mcpModeHang        // every POST waits for the client to give up
)

// canaryMCP is an HTTP MCP server (the demo tools over stateful
// Streamable HTTP) reachable only at the canary path, for the canary
// bearer token; it records which canaries reached it.
type canaryMCP struct {
	srv     *httptest.Server
	handler http.Handler
	mode    int32

	sawToken, sawWrongToken, sawHeader, sawPath, sawQuery atomic.Bool

	mu      sync.Mutex
	servers []*mcp.Server // one per session
}

func newCanaryMCP(t *testing.T, mode int32) *canaryMCP {
	t.Helper()
	m := &canaryMCP{mode: mode}
	m.handler = mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server {
		s := mcpdemo.NewServer()
		m.mu.Lock()
		m.servers = append(m.servers, s)
		m.mu.Unlock()
		return s
	}, nil)
	m.srv = httptest.NewServer(m)
	t.Cleanup(m.close)
	return m
}

// close stops the server and ends the sessions that their clients could
// not end (a DELETE that never arrived).
func (m *canaryMCP) close() {
	m.srv.Close()
	m.mu.Lock()
	defer m.mu.Unlock()
	for _, s := range m.servers {
		for _, ss := range slices.Collect(s.Sessions()) {
			_ = ss.Close()
		}
	}
}

// url is the server's endpoint, canaries in its path and query.
func (m *canaryMCP) url() string {
	return m.srv.URL + "/" + cnryPath + "/mcp?k=" + cnryQuery
}

// decl declares the server to agentd as "web", with auth as its bearer
// token and the canary header.
func (m *canaryMCP) decl(auth string) *agentdv1.MCPServer {
	return &agentdv1.MCPServer{Name: "web", Transport: &agentdv1.MCPServer_Url{Url: m.url()}, Authorization: auth,
		Headers: map[string]string{"X-Canary": cnryHeader}}
}

// spec is decl (with the canary token) as the bridge's admin API names
// the server.
func (m *canaryMCP) spec() *bridgev1.ServerSpec {
	return &bridgev1.ServerSpec{Name: "web",
		Transport: &bridgev1.ServerSpec_Http{Http: &bridgev1.HTTPTarget{Url: m.url(), Authorization: cnryAuth, Headers: map[string]string{"X-Canary": cnryHeader}}}}
}

func (m *canaryMCP) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if r.URL.Path != "/"+cnryPath+"/mcp" {
		http.NotFound(w, r)
		return
	}
	m.sawPath.Store(true)
	if r.URL.Query().Get("k") == cnryQuery {
		m.sawQuery.Store(true)
	}
	if r.Header.Get("X-Canary") == cnryHeader {
		m.sawHeader.Store(true)
	}
	switch r.Header.Get("Authorization") {
	case "Bearer " + cnryAuth:
		m.sawToken.Store(true)
	case "Bearer " + cnryWrongAuth:
		m.sawWrongToken.Store(true)
		fallthrough
	default:
		w.Header().Set("WWW-Authenticate", `Bearer realm="mcp", resource_metadata="https://mcp.example.com/.well-known/oauth-protected-resource/`+cnryPath+`"`)
		http.Error(w, "invalid token", http.StatusUnauthorized)
		return
	}
	if r.Method != http.MethodPost {
		m.handler.ServeHTTP(w, r)
		return
	}
	switch m.mode {
	case mcpMode500:
		http.Error(w, "internal error", http.StatusInternalServerError)
	case mcpModeQuote:
		body, _ := io.ReadAll(r.Body)
		var req struct {
			ID json.RawMessage `json:"id"`
		}
		_ = json.Unmarshal(body, &req)
		if len(req.ID) == 0 {
			req.ID = json.RawMessage("0")
		}
		resp, _ := json.Marshal(map[string]any{"jsonrpc": "2.0", "id": req.ID, "error": map[string]any{
			"code": -32603, "message": "gateway refused the request: " + canaryQuote(r, body),
		}})
		// Not a 5xx: the go-sdk takes those for transient and drops the body.
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusForbidden)
		_, _ = w.Write(resp)
	case mcpModeHang:
		// Reading the body lets the server notice the client hanging up.
		_, _ = io.Copy(io.Discard, r.Body)
		<-r.Context().Done()
	default:
		m.handler.ServeHTTP(w, r)
	}
}

// canaryQuote renders a request as an API gateway quoting it back would:
// method, URI, every header, the body.
func canaryQuote(r *http.Request, body []byte) string {
	var b strings.Builder
	fmt.Fprintf(&b, "%s %s;", r.Method, r.URL.RequestURI())
	for _, k := range slices.Sorted(maps.Keys(r.Header)) {
		fmt.Fprintf(&b, " %s: %s;", k, strings.Join(r.Header[k], ", "))
	}
	b.WriteString(" body: ")
	b.Write(body)
	return b.String()
}

// canaryAPI is the provider APIs (OpenAI Chat Completions, Anthropic
// Messages, OpenAI Responses) on one server; script answers each request
// of the current scenario (n counts them from 1).
type canaryAPI struct {
	mu     sync.Mutex
	n      int
	script func(w http.ResponseWriter, r *http.Request, body []byte, n int)
	sawKey map[string]bool
	bodies map[string][]string // by path
}

func newCanaryAPI() *canaryAPI {
	return &canaryAPI{sawKey: map[string]bool{}, bodies: map[string][]string{}}
}

func (a *canaryAPI) set(script func(w http.ResponseWriter, r *http.Request, body []byte, n int)) {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.n, a.script = 0, script
}

func (a *canaryAPI) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	body, _ := io.ReadAll(r.Body)
	a.mu.Lock()
	a.n++
	n, script := a.n, a.script
	for _, vs := range r.Header {
		for _, v := range vs {
			for _, k := range []string{cnryKey, cnryAKey, cnryRKey} {
				if strings.Contains(v, k) {
					a.sawKey[k] = true
				}
			}
		}
	}
	a.bodies[r.URL.Path] = append(a.bodies[r.URL.Path], string(body))
	a.mu.Unlock()
	script(w, r, body, n)
}

func (a *canaryAPI) saw(key string) bool {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.sawKey[key]
}

func (a *canaryAPI) bodiesOf(path string) []string {
	a.mu.Lock()
	defer a.mu.Unlock()
	return slices.Clone(a.bodies[path])
}

func canaryJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(v)
}

func canaryChunk(v any) string {
	b, _ := json.Marshal(v)
	return "data: " + string(b) + "\n\n"
}

func canaryChoice(delta map[string]any, finish any) map[string]any {
	return map[string]any{"choices": []any{map[string]any{"index": 0, "delta": delta, "finish_reason": finish}}}
}

// canaryToolCalls answers a Chat Completions request with tool calls, each a
// name and its arguments.
func canaryToolCalls(w http.ResponseWriter, turn int, calls ...[2]string) {
	var tcs []any
	for i, c := range calls {
		tcs = append(tcs, map[string]any{"index": i, "id": fmt.Sprintf("call_%d_%d", turn, i+1), "type": "function",
			"function": map[string]any{"name": c[0], "arguments": c[1]}})
	}
	sseWrite(w,
		canaryChunk(canaryChoice(map[string]any{"role": "assistant", "tool_calls": tcs}, nil)),
		canaryChunk(canaryChoice(map[string]any{}, "tool_calls")),
		canaryChunk(map[string]any{"choices": []any{}, "usage": map[string]any{"prompt_tokens": 10, "completion_tokens": 5}}),
		"data: [DONE]\n\n")
}

// canaryText answers a Chat Completions request with text.
func canaryText(w http.ResponseWriter, text string) {
	sseWrite(w,
		canaryChunk(canaryChoice(map[string]any{"role": "assistant", "content": text}, nil)),
		canaryChunk(canaryChoice(map[string]any{}, "stop")),
		"data: [DONE]\n\n")
}

// canaryOutputs captures what agentd produces: its spans, its logs at
// debug level as JSON and as text, through logger and tel, and its
// metrics (X-O1), as its Prometheus endpoint shows them.
type canaryOutputs struct {
	spans              *tracetest.SpanRecorder
	jsonLogs, textLogs *logtest.Logs
	logger             *slog.Logger
	tel                grpcserver.Telemetry
	metrics            *telemetry.Metrics
	scraped            string // what GET /metrics on metrics.listen answered, when the test scraped it
}

func newCanaryOutputs(t *testing.T) *canaryOutputs {
	t.Helper()
	o := &canaryOutputs{spans: tracetest.NewSpanRecorder(), jsonLogs: &logtest.Logs{}, textLogs: &logtest.Logs{}}
	tp := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(o.spans))
	t.Cleanup(func() { _ = tp.Shutdown(context.Background()) })
	o.logger = slog.New(slog.NewMultiHandler(
		telemetry.NewLogger(o.jsonLogs, slog.LevelDebug, "json").Handler(),
		telemetry.NewLogger(o.textLogs, slog.LevelDebug, "text").Handler(),
	))
	var err error
	if o.metrics, err = telemetry.SetupMetrics(t.Context(), telemetry.ServiceAgent, func(string) string { return "" }, true); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = o.metrics.Shutdown(context.Background()) })
	o.tel = grpcserver.Telemetry{TracerProvider: tp, MeterProvider: o.metrics.MeterProvider(), Propagator: telemetry.Propagator()}
	return o
}

// options are app.Options for cfg, logging, tracing and metering into o.
func (o *canaryOutputs) options(cfg config.Config) app.Options {
	return app.Options{Config: cfg, Logger: o.logger, Telemetry: o.tel, Metrics: o.metrics.Handler()}
}

// metricsNow is what the Prometheus handler shows now: every instrument,
// of every agentd and bridge that used o.
func (o *canaryOutputs) metricsNow() string {
	rec := httptest.NewRecorder()
	o.metrics.Handler().ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "/metrics", nil))
	return rec.Body.String()
}

// canaryStack is agentd (embedded bridge) with every output captured.
type canaryStack struct {
	*canaryOutputs
	client      agentdv1.AgentServiceClient
	admin       bridgev1.BridgeAdminServiceClient
	tokenAdmin  agentdv1.AdminServiceClient
	stateDir    string
	metricsAddr string // metrics.listen's
	stop        func()
}

// scrapeMetrics keeps what agentd's metrics endpoint answers now (X-O1).
func (s *canaryStack) scrapeMetrics(t *testing.T) {
	t.Helper()
	resp, err := http.Get("http://" + s.metricsAddr + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil || resp.StatusCode != http.StatusOK {
		t.Fatalf("GET /metrics: %d, %v", resp.StatusCode, err)
	}
	s.scraped = string(body)
}

func newCanaryStack(t *testing.T, cfg config.Config) *canaryStack {
	t.Helper()
	s := &canaryStack{canaryOutputs: newCanaryOutputs(t), stateDir: cfg.StateDir}
	cfg.Metrics.Listen = "127.0.0.1:0"
	a, conn, stop := apptest.ServeAgent(t, s.options(cfg))
	s.metricsAddr = a.MetricsAddr()
	s.client = agentdv1.NewAgentServiceClient(conn)
	s.admin = bridgev1.NewBridgeAdminServiceClient(conn)
	s.tokenAdmin = agentdv1.NewAdminServiceClient(conn)
	s.stop = stop
	return s
}

// canaryCapture holds what the client saw, by kind.
type canaryCapture struct {
	events, errors, responses strings.Builder
}

func (c *canaryCapture) event(scenario string, ev *agentdv1.GenerateResponse) {
	b, _ := protojson.Marshal(ev)
	fmt.Fprintf(&c.events, "[%s] %s\n", scenario, b)
}

// rpcError records an RPC's error: its status (message and every detail)
// and the trailer.
func (c *canaryCapture) rpcError(scenario string, err error, trailer metadata.MD) {
	if err == nil {
		return
	}
	st := status.Convert(err)
	b, _ := protojson.Marshal(st.Proto())
	fmt.Fprintf(&c.errors, "[%s] %s | %s | %v | details %v | trailer %v\n", scenario, err, st.Message(), st.Code(), st.Details(), trailer)
	fmt.Fprintf(&c.errors, "[%s] status %s\n", scenario, b)
}

func (c *canaryCapture) response(scenario string, m proto.Message) {
	b, _ := protojson.Marshal(m)
	fmt.Fprintf(&c.responses, "[%s] %s\n", scenario, b)
}

// scenario names the running scenario of TestSecretsCanary: its subtest's
// name, which labels everything captured in it.
func scenario(t *testing.T) string {
	_, name, _ := strings.Cut(t.Name(), "/")
	return name
}

// generate runs the scenario's generation to its end, sending each of
// headers as an authorization header, capturing every event and the
// error; answer, when not nil, may reply to an event on the stream. A
// refused call may end the stream before it takes the first message: its
// status is then what Recv returns. X-H6: the generation's deadline is a
// bound for a hung one, with the margin of a loaded machine, not an
// expectation of its speed.
func (c *canaryCapture) generate(t *testing.T, client agentdv1.AgentServiceClient, first *agentdv1.GenerateRequest,
	answer func(agentdv1.AgentService_GenerateClient, *agentdv1.GenerateResponse), headers ...string,
) ([]*agentdv1.GenerateResponse, error) {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), settle)
	defer cancel()
	for _, h := range headers {
		ctx = metadata.AppendToOutgoingContext(ctx, "authorization", h)
	}
	stream, err := client.Generate(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if err := stream.Send(first); err != nil && !errors.Is(err, io.EOF) {
		t.Fatal(err)
	}
	var events []*agentdv1.GenerateResponse
	for {
		ev, err := stream.Recv()
		if errors.Is(err, io.EOF) {
			return events, nil
		}
		if err != nil {
			c.rpcError(scenario(t), err, stream.Trailer())
			return events, err
		}
		c.event(scenario(t), ev)
		events = append(events, ev)
		if answer != nil {
			answer(stream, ev)
		}
	}
}

// pauseAtApproval runs first, sending headers, until its first approval
// request, then half-closes: the generation must pause, and the store's
// files in stateDir, read then, must hold it. It returns the request, the
// pause and those files' bytes.
func (c *canaryCapture) pauseAtApproval(t *testing.T, client agentdv1.AgentServiceClient, first *agentdv1.GenerateRequest, stateDir string, headers ...string,
) (*agentdv1.ApprovalRequest, *agentdv1.GenerationPaused, string) {
	t.Helper()
	var request *agentdv1.ApprovalRequest
	events, err := c.generate(t, client, first, func(stream agentdv1.AgentService_GenerateClient, ev *agentdv1.GenerateResponse) {
		if r := ev.GetApprovalRequest(); r != nil {
			request = r
			_ = stream.CloseSend()
		}
	}, headers...)
	var paused *agentdv1.GenerationPaused
	if len(events) > 0 {
		paused = events[len(events)-1].GetPaused()
	}
	if err != nil || paused == nil || request == nil {
		t.Fatalf("want an approval request, then paused; got err %v after %d events", err, len(events))
	}
	store := canaryStoreBytes(t, stateDir)
	if !strings.Contains(store, paused.GetGenerationId()) {
		t.Errorf("the store's files do not hold the paused generation %s: the check of the store proves nothing", paused.GetGenerationId())
	}
	return request, paused, store
}

// canaryApprove is the resume of paused, with agent, approving request.
func canaryApprove(t *testing.T, paused *agentdv1.GenerationPaused, request *agentdv1.ApprovalRequest, agent *agentdv1.Agent) *agentdv1.GenerateRequest {
	t.Helper()
	if paused == nil {
		t.Fatal("no generation paused: nothing to resume")
	}
	return &agentdv1.GenerateRequest{Kind: &agentdv1.GenerateRequest_Resume{Resume: &agentdv1.ResumeGeneration{
		GenerationId:      paused.GetGenerationId(),
		Agent:             agent,
		ApprovalDecisions: []*agentdv1.ApprovalDecision{{RequestId: request.GetId(), Approved: true, Digest: request.GetDigest()}},
	}}}
}

// canaryCompleted requires a generation that completed, none of its tool
// calls failing.
func canaryCompleted(t *testing.T, events []*agentdv1.GenerateResponse, err error) {
	t.Helper()
	if err != nil || len(events) == 0 || events[len(events)-1].GetCompleted() == nil {
		t.Errorf("want a completed generation, got err %v after %d events", err, len(events))
	}
	for _, ev := range events {
		if f := ev.GetToolCallFinished(); f != nil && f.GetIsError() {
			t.Errorf("%s failed: %s", f.GetToolName(), f.GetOutput())
		}
	}
}

// canaryStatus requires err to have the code want.
func canaryStatus(t *testing.T, err error, want codes.Code) {
	t.Helper()
	if got := status.Code(err); got != want {
		t.Errorf("status %v (%v), want %v", got, err, want)
	}
}

func canaryStart(agent *agentdv1.Agent) *agentdv1.GenerateRequest {
	return &agentdv1.GenerateRequest{Kind: &agentdv1.GenerateRequest_Start{Start: &agentdv1.StartGeneration{
		Agent:    agent,
		Messages: []*agentdv1.Message{{Role: agentdv1.Role_ROLE_USER, Parts: []*agentdv1.Part{textPart("use the tools")}}},
	}}}
}

// TestSecretsCanary runs generations that succeed, pause and fail in many
// ways, with canary secrets in every place a secret can be declared (an
// HTTP MCP server's token, header, URL path and query; the env of a
// request's command server and of a registered one; the providers' API
// keys), then requires that none of them appears in anything agentd
// produced: its logs (JSON and text, debug level), its spans, the errors
// and events its clients got, its admin API's answers and its state store.
// It also checks that the canaries did reach their destinations, so that
// their absence means something. Each scenario is a subtest, run in turn
// on the one agentd; everything captured is labelled with its name. With
// -artifacts, everything captured is kept in the test's artifact
// directory.
//
// Not parallel: it runs MCP server processes, which TestDemoGeneration's
// count of child processes must not see.
func TestSecretsCanary(t *testing.T) {
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	regEnvFile := filepath.Join(dir, cnryRegEnv) // the counter servers write where their env says
	cmdEnvFile := filepath.Join(dir, cnryEnv)

	api := newCanaryAPI()
	apiSrv := httptest.NewServer(api)
	t.Cleanup(apiSrv.Close)
	web := newCanaryMCP(t, mcpModeOK)

	zero := 0
	cfg := config.Default()
	cfg.StateDir = filepath.Join(dir, "state")
	cfg.Bridge.Servers = map[string]config.Server{"counter": {Command: exe, Warm: &zero, Env: map[string]string{
		counterEnv: regEnvFile, counterPidsEnv: filepath.Join(dir, "reg.pids"), "CANARY_TOKEN": cnryRegEnv,
	}}}
	cfg.Bridge.AllowedCommands = []string{exe}
	cfg.Bridge.AllowPrivateNetworks = true
	cfg.Bridge.TerminateGrace = 500 * time.Millisecond
	cfg.Providers = map[string]config.Provider{
		"openai":           {APIKey: cnryKey, BaseURL: apiSrv.URL + "/v1", MaxRetries: 3},
		"anthropic":        {APIKey: cnryAKey, BaseURL: apiSrv.URL},
		"openai-responses": {APIKey: cnryRKey, BaseURL: apiSrv.URL + "/v1"},
	}
	s := newCanaryStack(t, cfg)
	var c canaryCapture

	regDecl := &agentdv1.MCPServer{Name: "reg", Transport: &agentdv1.MCPServer_Ref{Ref: "counter"}}
	cmdDecl := func(pids string) *agentdv1.MCPServer {
		return &agentdv1.MCPServer{Name: "cmd", Transport: &agentdv1.MCPServer_Command{Command: exe}, Env: map[string]string{
			counterEnv: cmdEnvFile, counterPidsEnv: filepath.Join(dir, pids), "CANARY_TOKEN": cnryEnv,
		}}
	}
	openai := func(mcps ...*agentdv1.MCPServer) *agentdv1.Agent {
		return &agentdv1.Agent{Provider: "openai", Model: "gpt-4o-mini", Mcps: mcps, ToolNameConflict: agentdv1.ToolNameConflict_TOOL_NAME_CONFLICT_PREFIX}
	}
	noCache := func(a *agentdv1.Agent) *agentdv1.Agent { a.McpCache = proto.Bool(false); return a }

	t.Run("tools on all three servers succeed", func(t *testing.T) {
		// They run in parallel, then the model answers with text.
		api.set(func(w http.ResponseWriter, _ *http.Request, _ []byte, n int) {
			if n == 1 {
				canaryToolCalls(w, n, [2]string{"web__echo", `{"text":"hello"}`}, [2]string{"reg__delete", `{"path":"a.txt"}`}, [2]string{"cmd__delete", `{"path":"b.txt"}`})
				return
			}
			canaryText(w, "all done")
		})
		events, err := c.generate(t, s.client, canaryStart(openai(web.decl(cnryAuth), regDecl, cmdDecl("cmd.pids"))), nil)
		canaryCompleted(t, events, err)
	})

	t.Run("preview", func(t *testing.T) {
		preview, err := s.client.Preview(t.Context(), &agentdv1.PreviewRequest{Agent: openai(web.decl(cnryAuth), regDecl, cmdDecl("cmd.pids")),
			Messages: canaryStart(nil).GetStart().GetMessages()})
		c.rpcError(scenario(t), err, nil)
		c.response(scenario(t), preview)
	})

	t.Run("preview of an invalid agent", func(t *testing.T) {
		bad := web.decl(cnryAuth)
		bad.Env = map[string]string{"TOKEN": cnryEnv}
		_, err := s.client.Preview(t.Context(), &agentdv1.PreviewRequest{Agent: openai(bad), Messages: canaryStart(nil).GetStart().GetMessages()})
		c.rpcError(scenario(t), err, nil)
		canaryStatus(t, err, codes.InvalidArgument)
	})

	// The web call waits for an approval, the client half-closes, the
	// generation is stored; the store's files are read then; a resume
	// approves the call and the generation completes.
	gated := func() *agentdv1.Agent {
		w := web.decl(cnryAuth)
		w.RequireApproval = &agentdv1.ApprovalPolicy{Mode: agentdv1.ApprovalMode_APPROVAL_MODE_ALWAYS}
		return openai(w, cmdDecl("cmd.pids"))
	}
	var (
		request          *agentdv1.ApprovalRequest
		paused           *agentdv1.GenerationPaused
		storeWhilePaused string
	)
	t.Run("pause at an approval request", func(t *testing.T) {
		api.set(func(w http.ResponseWriter, _ *http.Request, _ []byte, n int) {
			if n == 1 {
				canaryToolCalls(w, n, [2]string{"web__echo", `{"text":"approved"}`}, [2]string{"cmd__delete", `{"path":"c.txt"}`})
				return
			}
			canaryText(w, "resumed and done")
		})
		request, paused, storeWhilePaused = c.pauseAtApproval(t, s.client, canaryStart(gated()), s.stateDir)
	})

	t.Run("resume with the approval", func(t *testing.T) {
		events, err := c.generate(t, s.client, canaryApprove(t, paused, request, gated()), nil)
		canaryCompleted(t, events, err)
	})

	t.Run("MCP server refuses a wrong token with 401", func(t *testing.T) {
		// X-M3: Unauthenticated, naming the server; its challenge's
		// resource metadata URL, whose path holds the canary, is named by
		// its host alone.
		_, err := c.generate(t, s.client, canaryStart(openai(web.decl(cnryWrongAuth))), nil)
		canaryStatus(t, err, codes.Unauthenticated)
		if !web.sawWrongToken.Load() {
			t.Error("the server never saw the wrong token")
		}
	})

	t.Run("MCP server fails every request with a plain 500", func(t *testing.T) {
		broken := newCanaryMCP(t, mcpMode500)
		_, err := c.generate(t, s.client, canaryStart(openai(broken.decl(cnryAuth))), nil)
		canaryStatus(t, err, codes.Unavailable)
	})

	t.Run("MCP gateway refuses with a JSON-RPC error quoting the request", func(t *testing.T) {
		// The quote holds the URL, the headers and the body.
		// Its 403 is PermissionDenied (X-M3); the quote stays out.
		echo := newCanaryMCP(t, mcpModeQuote)
		_, err := c.generate(t, s.client, canaryStart(openai(echo.decl(cnryAuth))), nil)
		canaryStatus(t, err, codes.PermissionDenied)
	})

	t.Run("MCP server unreachable", func(t *testing.T) {
		gone := newCanaryMCP(t, mcpModeOK)
		gone.srv.Close()
		_, err := c.generate(t, s.client, canaryStart(openai(gone.decl(cnryAuth))), nil)
		canaryStatus(t, err, codes.Unavailable)
	})

	t.Run("MCP server goes away between listing its tools and the call", func(t *testing.T) {
		// The bridge's session to it breaks and it cannot be reached again.
		vanishing := newCanaryMCP(t, mcpModeOK)
		api.set(func(w http.ResponseWriter, _ *http.Request, _ []byte, n int) {
			if n == 1 {
				vanishing.srv.CloseClientConnections()
				vanishing.srv.Close()
				canaryToolCalls(w, n, [2]string{"web__echo", `{"text":"anyone?"}`})
				return
			}
			canaryText(w, "it went away")
		})
		_, err := c.generate(t, s.client, canaryStart(noCache(openai(vanishing.decl(cnryAuth)))), nil)
		canaryStatus(t, err, codes.Unavailable)
	})

	t.Run("MCP server does not answer within read_timeout", func(t *testing.T) {
		hanging := newCanaryMCP(t, mcpModeHang)
		slow := hanging.decl(cnryAuth)
		slow.ReadTimeout = durationpb.New(300 * time.Millisecond)
		_, err := c.generate(t, s.client, canaryStart(openai(slow)), nil)
		canaryStatus(t, err, codes.DeadlineExceeded)
	})

	// The call goes to a fresh process and the generation completes (X-L8).
	t.Run("command server killed between listing its tools and the call", func(t *testing.T) {
		crashPids := filepath.Join(dir, "crash.pids")
		api.set(func(w http.ResponseWriter, _ *http.Request, _ []byte, n int) {
			if n == 1 {
				data, _ := os.ReadFile(crashPids)
				lines := strings.Fields(string(data))
				if len(lines) == 0 {
					t.Error("the command server wrote no pid")
				} else if pid, err := strconv.Atoi(lines[len(lines)-1]); err == nil {
					_ = syscall.Kill(pid, syscall.SIGKILL)
					if !waitExit(pid) {
						t.Errorf("the command server %d outlived SIGKILL by %v", pid, settle)
					}
				}
				canaryToolCalls(w, n, [2]string{"cmd__delete", `{"path":"d.txt"}`})
				return
			}
			canaryText(w, "it crashed")
		})
		_, err := c.generate(t, s.client, canaryStart(noCache(openai(cmdDecl("crash.pids")))), nil)
		canaryStatus(t, err, codes.OK)
	})

	t.Run("provider refuses the key with 401 quoting the request", func(t *testing.T) {
		api.set(func(w http.ResponseWriter, r *http.Request, body []byte, _ int) {
			canaryJSON(w, http.StatusUnauthorized, map[string]any{"error": map[string]any{
				"message": "Incorrect API key provided: " + strings.TrimPrefix(r.Header.Get("Authorization"), "Bearer ") + ". Request: " + canaryQuote(r, body),
				"type":    "invalid_request_error", "code": "invalid_api_key",
			}})
		})
		_, err := c.generate(t, s.client, canaryStart(openai(web.decl(cnryAuth), cmdDecl("cmd.pids"))), nil)
		canaryStatus(t, err, codes.Unauthenticated)
	})

	t.Run("provider answers 400 quoting the request's headers and body", func(t *testing.T) {
		api.set(func(w http.ResponseWriter, r *http.Request, body []byte, _ int) {
			canaryJSON(w, http.StatusBadRequest, map[string]any{"error": map[string]any{
				"message": "gateway: bad request: " + canaryQuote(r, body), "type": "invalid_request_error",
			}})
		})
		_, err := c.generate(t, s.client, canaryStart(openai(web.decl(cnryAuth), cmdDecl("cmd.pids"))), nil)
		canaryStatus(t, err, codes.InvalidArgument)
	})

	t.Run("provider 429 storm outlasts the retries", func(t *testing.T) {
		// Each 429 asks for a 1 ms wait.
		api.set(func(w http.ResponseWriter, r *http.Request, body []byte, _ int) {
			w.Header().Set("retry-after-ms", "1")
			canaryJSON(w, http.StatusTooManyRequests, map[string]any{"error": map[string]any{
				"message": "rate limited: " + canaryQuote(r, body), "type": "rate_limit_exceeded",
			}})
		})
		_, err := c.generate(t, s.client, canaryStart(openai(web.decl(cnryAuth))), nil)
		canaryStatus(t, err, codes.ResourceExhausted)
	})

	t.Run("provider fails inside a 200 stream quoting the request", func(t *testing.T) {
		api.set(func(w http.ResponseWriter, r *http.Request, body []byte, _ int) {
			sseWrite(w, canaryChunk(map[string]any{"error": map[string]any{"message": "upstream failed: " + canaryQuote(r, body), "type": "server_error"}}))
		})
		_, err := c.generate(t, s.client, canaryStart(openai(web.decl(cnryAuth))), nil)
		if status.Code(err) == codes.OK {
			t.Error("the generation did not fail")
		}
	})

	// Providers that run url servers themselves get the server's URL and
	// token (their job); their errors quoting the request must not bring
	// them back.
	remote := &agentdv1.MCPServer{Name: "remote", Transport: &agentdv1.MCPServer_Url{Url: "https://mcp.example.com/" + cnryPath + "/mcp?k=" + cnryQuery}, Authorization: cnryAuth}
	anthropic := &agentdv1.Agent{Provider: "anthropic", Model: "claude-sonnet-4-5", Mcps: []*agentdv1.MCPServer{remote}}
	t.Run("Anthropic preview of a url server it runs", func(t *testing.T) {
		preview, err := s.client.Preview(t.Context(), &agentdv1.PreviewRequest{Agent: anthropic, Messages: canaryStart(nil).GetStart().GetMessages()})
		c.rpcError(scenario(t), err, nil)
		c.response(scenario(t), preview)
	})

	t.Run("Anthropic runs the url server itself", func(t *testing.T) {
		api.set(func(w http.ResponseWriter, _ *http.Request, _ []byte, _ int) {
			anthropicMessage(w, "end_turn",
				sseEvent("content_block_start", map[string]any{"type": "content_block_start", "index": 0, "content_block": map[string]any{"type": "text", "text": "served"}}),
				sseEvent("content_block_stop", map[string]any{"type": "content_block_stop", "index": 0}))
		})
		events, err := c.generate(t, s.client, canaryStart(anthropic), nil)
		canaryCompleted(t, events, err)
		if len(events) == 0 || len(events[0].GetStarted().GetServers()) != 1 || events[0].GetStarted().GetServers()[0].GetPlacement() != agentdv1.Placement_PLACEMENT_PROVIDER {
			t.Errorf("the server was not placed at the provider")
		}
	})

	t.Run("Anthropic answers 400 quoting the request", func(t *testing.T) {
		api.set(func(w http.ResponseWriter, r *http.Request, body []byte, _ int) {
			canaryJSON(w, http.StatusBadRequest, map[string]any{"type": "error", "error": map[string]any{
				"type": "invalid_request_error", "message": "gateway: bad request: " + canaryQuote(r, body),
			}})
		})
		_, err := c.generate(t, s.client, canaryStart(anthropic), nil)
		canaryStatus(t, err, codes.InvalidArgument)
	})

	t.Run("OpenAI Responses answers 400 quoting the request", func(t *testing.T) {
		api.set(func(w http.ResponseWriter, r *http.Request, body []byte, _ int) {
			canaryJSON(w, http.StatusBadRequest, map[string]any{"error": map[string]any{
				"message": "gateway: bad request: " + canaryQuote(r, body), "type": "invalid_request_error",
			}})
		})
		_, err := c.generate(t, s.client, canaryStart(&agentdv1.Agent{Provider: "openai-responses", Model: "gpt-5-mini", Mcps: []*agentdv1.MCPServer{remote}}), nil)
		canaryStatus(t, err, codes.InvalidArgument)
	})

	t.Run("invalid requests refused before anything connects", func(t *testing.T) {
		api.set(func(w http.ResponseWriter, _ *http.Request, _ []byte, _ int) {
			t.Error("an invalid request reached the provider")
			w.WriteHeader(http.StatusInternalServerError)
		})
		urlWithEnv := web.decl(cnryAuth)
		urlWithEnv.Env = map[string]string{"TOKEN": cnryEnv}
		urlWithEnv.ReadTimeout = durationpb.New(-time.Second)
		cmdWithAuth := cmdDecl("cmd.pids")
		cmdWithAuth.Name = "cmd2"
		cmdWithAuth.Authorization, cmdWithAuth.Headers = cnryAuth, map[string]string{"X-Canary": cnryHeader}
		refWithEnv := &agentdv1.MCPServer{Name: "reg", Transport: &agentdv1.MCPServer_Ref{Ref: "counter"}, Env: map[string]string{"TOKEN": cnryRegEnv}}
		for _, tc := range []struct {
			name  string
			agent *agentdv1.Agent
			want  codes.Code
		}{
			{"invalid declarations", openai(urlWithEnv, cmdWithAuth, refWithEnv,
				&agentdv1.MCPServer{Name: "ftp", Transport: &agentdv1.MCPServer_Url{Url: "ftp://mcp.example.com/" + cnryPath + "?k=" + cnryQuery}, Authorization: cnryAuth},
				&agentdv1.MCPServer{Transport: &agentdv1.MCPServer_Url{Url: "http://mcp example.com/" + cnryPath + "?k=" + cnryQuery}, Headers: map[string]string{"X-Canary": cnryHeader}},
				&agentdv1.MCPServer{Name: "none", Authorization: cnryAuth, Headers: map[string]string{"X-Canary": cnryHeader}, Env: map[string]string{"TOKEN": cnryEnv}},
			), codes.InvalidArgument},
			{"unknown provider", &agentdv1.Agent{Provider: "nope", Mcps: []*agentdv1.MCPServer{web.decl(cnryAuth), cmdDecl("cmd.pids")}}, codes.InvalidArgument},
			{"unknown connector", &agentdv1.Agent{Provider: "openai-responses", Model: "gpt-5-mini", Mcps: []*agentdv1.MCPServer{
				{Name: "conn", Transport: &agentdv1.MCPServer_Url{Url: "mcp://unknownconnector/" + cnryPath + "?k=" + cnryQuery}, Authorization: cnryAuth},
			}}, codes.InvalidArgument},
			{"SERVER with headers anthropic cannot send", &agentdv1.Agent{Provider: "anthropic", Model: "claude-sonnet-4-5", McpStrategy: agentdv1.MCPStrategy_MCP_STRATEGY_SERVER,
				Mcps: []*agentdv1.MCPServer{{Name: "remote", Transport: &agentdv1.MCPServer_Url{Url: remote.GetUrl()}, Authorization: cnryAuth, Headers: map[string]string{"X-Canary": cnryHeader}}},
			}, codes.InvalidArgument},
			{"command not allowed", openai(&agentdv1.MCPServer{Name: "env", Transport: &agentdv1.MCPServer_Command{Command: "/usr/bin/env"}, Env: map[string]string{"TOKEN": cnryEnv}}), codes.PermissionDenied},
			{"steering env", openai(&agentdv1.MCPServer{Name: "cmd", Transport: &agentdv1.MCPServer_Command{Command: exe}, Env: map[string]string{"LD_PRELOAD": "/tmp/" + cnryEnv + ".so", "TOKEN": cnryEnv}}), codes.PermissionDenied},
		} {
			t.Run(tc.name, func(t *testing.T) {
				_, err := c.generate(t, s.client, canaryStart(tc.agent), nil)
				canaryStatus(t, err, tc.want)
			})
		}
	})

	t.Run("resume of an unknown generation", func(t *testing.T) {
		_, err := c.generate(t, s.client, &agentdv1.GenerateRequest{Kind: &agentdv1.GenerateRequest_Resume{Resume: &agentdv1.ResumeGeneration{
			GenerationId: "gen_0123", Agent: gated(),
		}}}, nil)
		canaryStatus(t, err, codes.NotFound)
	})

	t.Run("admin API", func(t *testing.T) {
		// Cache statistics and the pools (whose keys identify command
		// configurations).
		cache, err := s.admin.GetCacheStats(t.Context(), &bridgev1.GetCacheStatsRequest{})
		c.rpcError(scenario(t), err, nil)
		c.response(scenario(t), cache)
		if cache.GetSize() == 0 {
			t.Error("the schema cache is empty: its keys were not exercised")
		}
		inv, err := s.admin.InvalidateCache(t.Context(), &bridgev1.InvalidateCacheRequest{Server: web.spec()})
		c.rpcError(scenario(t), err, nil)
		c.response(scenario(t), inv)
		if !inv.GetRemoved() {
			t.Error("InvalidateCache: the web server's entry was not found")
		}
		pools, err := s.admin.GetPoolStats(t.Context(), &bridgev1.GetPoolStatsRequest{})
		c.rpcError(scenario(t), err, nil)
		c.response(scenario(t), pools)
	})

	s.scrapeMetrics(t)
	if !strings.Contains(s.scraped, "gen_ai_client_operation_duration") {
		t.Errorf("the metrics endpoint shows no model turn:\n%s", s.scraped)
	}
	s.stop() // every span ended, every log written, the store closed

	t.Run("canaries reached their destinations", func(t *testing.T) {
		canaryReached(t, map[string]bool{
			"the HTTP MCP server got the token":                  web.sawToken.Load(),
			"the HTTP MCP server got the header":                 web.sawHeader.Load(),
			"the HTTP MCP server got the URL path":               web.sawPath.Load(),
			"the HTTP MCP server got the URL query":              web.sawQuery.Load(),
			"OpenAI got its API key":                             api.saw(cnryKey),
			"Anthropic got its API key":                          api.saw(cnryAKey),
			"OpenAI Responses got its API key":                   api.saw(cnryRKey),
			"the request's command server got its env":           canaryFileExists(cmdEnvFile),
			"the registered server got its env":                  canaryFileExists(regEnvFile),
			"Anthropic got the provider-side server's URL/token": slices.ContainsFunc(api.bodiesOf("/v1/messages"), canaryHasAll(cnryPath, cnryQuery, cnryAuth)),
		})
	})

	canaryNoLeaks(t, canarySecrets, s.canaryOutputs, &c, storeWhilePaused, s.stateDir)
}

// canaryReached requires each destination to have got its canary.
func canaryReached(t *testing.T, got map[string]bool) {
	t.Helper()
	for what, ok := range got {
		if !ok {
			t.Errorf("not sent: %s", what)
		}
	}
}

// canaryNoLeaks requires, in a subtest "no canary in what agentd
// produced", that none of secrets is in anything captured: o's logs and
// spans, c's errors, events and responses, the store's files while a
// generation was paused and, now, in stateDir, and the metrics (X-O1);
// and extra; and that each captured something. With -artifacts, each is
// kept in t's artifact directory.
func canaryNoLeaks(t *testing.T, secrets []string, o *canaryOutputs, c *canaryCapture, storeWhilePaused, stateDir string, extra ...canarySource) {
	t.Helper()
	artifacts := t.ArtifactDir()
	t.Run("no canary in what agentd produced", func(t *testing.T) {
		for _, src := range append([]canarySource{
			{"log (json)", "log.json", o.jsonLogs.String()},
			{"log (text)", "log.txt", o.textLogs.String()},
			{"spans", "spans.txt", canarySpanDump(o.spans.Ended())},
			{"gRPC and start errors", "errors.txt", c.errors.String()},
			{"events", "events.txt", c.events.String()},
			{"RPC responses (Preview, admin)", "responses.txt", c.responses.String()},
			{"store files while paused", "store-paused.bin", storeWhilePaused},
			{"store files at the end", "store-end.bin", canaryStoreBytes(t, stateDir)},
			// X-O1: the metrics endpoint, as scraped over HTTP (by
			// TestSecretsCanary) and as its handler shows it at the end.
			{"metrics", "metrics.txt", o.scraped + o.metricsNow()},
		}, extra...) {
			t.Run(src.name, func(t *testing.T) {
				if src.text == "" {
					t.Error("nothing captured")
				}
				if err := os.WriteFile(filepath.Join(artifacts, src.file), []byte(src.text), 0o600); err != nil {
					t.Error(err)
				}
				for _, canary := range secrets {
					if n := strings.Count(src.text, canary); n > 0 {
						t.Errorf("LEAK: %q appears %d times in the %s:%s", canary, n, src.name, canaryLeaks(src.text, canary))
					}
				}
			})
		}
	})
}

// canarySource is something agentd produced, searched for canaries: its
// name, the artifact file that keeps it, and its text.
type canarySource struct{ name, file, text string }

// canaryStoreBytes returns the bytes of agentd's SQLite store: the database, its
// write-ahead log and its shared-memory index.
func canaryStoreBytes(t *testing.T, stateDir string) string {
	t.Helper()
	var b strings.Builder
	for _, name := range []string{"agentd.db", "agentd.db-wal", "agentd.db-shm"} {
		data, err := os.ReadFile(filepath.Join(stateDir, name))
		if err != nil && !errors.Is(err, os.ErrNotExist) {
			t.Fatal(err)
		}
		b.Write(data)
	}
	return b.String()
}

// canarySpanDump renders every span: name, kind, status, attributes, events,
// links and resource.
func canarySpanDump(spans []sdktrace.ReadOnlySpan) string {
	var b strings.Builder
	for _, sp := range spans {
		fmt.Fprintf(&b, "span %q kind=%s status=%s %q scope=%s\n", sp.Name(), sp.SpanKind(), sp.Status().Code, sp.Status().Description, sp.InstrumentationScope().Name)
		for _, kv := range sp.Attributes() {
			fmt.Fprintf(&b, "  attr %s=%s\n", kv.Key, kv.Value.String())
		}
		for _, ev := range sp.Events() {
			fmt.Fprintf(&b, "  event %q\n", ev.Name)
			for _, kv := range ev.Attributes {
				fmt.Fprintf(&b, "    attr %s=%s\n", kv.Key, kv.Value.String())
			}
		}
		for _, l := range sp.Links() {
			for _, kv := range l.Attributes {
				fmt.Fprintf(&b, "  link attr %s=%s\n", kv.Key, kv.Value.String())
			}
		}
		for _, kv := range sp.Resource().Attributes() {
			fmt.Fprintf(&b, "  resource %s=%s\n", kv.Key, kv.Value.String())
		}
	}
	return b.String()
}

// canaryLeaks shows where canary occurs in text: for each line holding it
// (at most 5), the line's start (a scenario's label, a log record's time
// and message) and the text around the canary.
func canaryLeaks(text, canary string) string {
	var b strings.Builder
	shown := 0
	for line := range strings.Lines(text) {
		i := strings.Index(line, canary)
		if i < 0 {
			continue
		}
		if shown == 5 {
			b.WriteString("\n\t…")
			break
		}
		shown++
		head := line[:min(len(line), 120)]
		from, to := max(0, i-200), min(len(line), i+len(canary)+80)
		fmt.Fprintf(&b, "\n\t%s\n\t\t…%s…", strings.ToValidUTF8(strings.TrimSpace(head), "?"), strings.ToValidUTF8(line[from:to], "?"))
	}
	return b.String()
}

func canaryHasAll(subs ...string) func(string) bool {
	return func(s string) bool {
		for _, sub := range subs {
			if !strings.Contains(s, sub) {
				return false
			}
		}
		return true
	}
}

func canaryFileExists(path string) bool {
	_, err := os.Stat(path)
	return err == nil
}
