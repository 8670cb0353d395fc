package app_test

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"connectrpc.com/connect"
	jose "github.com/go-jose/go-jose/v4"
	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.opentelemetry.io/otel/trace"
	errdetails "google.golang.org/genproto/googleapis/rpc/errdetails"
	statuspb "google.golang.org/genproto/googleapis/rpc/status"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/proto"

	agentdv1 "github.com/agentd/agentd/gen/go/agentd/v1"
	"github.com/agentd/agentd/internal/app"
	"github.com/agentd/agentd/internal/auth"
	"github.com/agentd/agentd/internal/auth/oidctest"
	"github.com/agentd/agentd/internal/config"
	"github.com/agentd/agentd/internal/grpcserver"
	"github.com/agentd/agentd/internal/logtest"
	"github.com/agentd/agentd/internal/telemetry"
	"github.com/agentd/agentd/internal/testwait"
)

// The protocols agentd serves on its one port, each as its clients speak
// it: gRPC, Connect and gRPC-Web with connect-go's generic clients, and
// HTTP/JSON with net/http.
const (
	protoGRPC    = "gRPC"
	protoConnect = "Connect"
	protoGRPCWeb = "gRPC-Web"
	protoJSON    = "HTTP/JSON"
)

var protocols = []string{protoGRPC, protoConnect, protoGRPCWeb, protoJSON}

// httpStatus is the HTTP status each code is answered with over
// HTTP/JSON.
var httpStatus = map[connect.Code]int{
	0:                             http.StatusOK,
	connect.CodeInvalidArgument:   http.StatusBadRequest,
	connect.CodeUnauthenticated:   http.StatusUnauthorized,
	connect.CodePermissionDenied:  http.StatusForbidden,
	connect.CodeNotFound:          http.StatusNotFound,
	connect.CodeResourceExhausted: http.StatusTooManyRequests,
	connect.CodeUnavailable:       http.StatusServiceUnavailable,
}

// webStack is an agentd serving every protocol on one TCP port, with a
// client of its own for each protocol, its log, spans and metrics.
type webStack struct {
	addr    string
	clients map[string]*http.Client
	conn    *grpc.ClientConn            // native, for what the tests set up
	grpc    agentdv1.AgentServiceClient // on conn
	logs    *logtest.Logs
	spans   *tracetest.SpanRecorder
	metrics *sdkmetric.ManualReader
}

func startWeb(t testing.TB, cfg config.Config) *webStack {
	t.Helper()
	s := &webStack{logs: &logtest.Logs{}, spans: tracetest.NewSpanRecorder(), metrics: sdkmetric.NewManualReader()}
	o := app.Options{
		Config: cfg,
		Logger: slog.New(slog.NewTextHandler(s.logs, nil)),
		Telemetry: grpcserver.Telemetry{
			TracerProvider: sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(s.spans)),
			MeterProvider:  sdkmetric.NewMeterProvider(sdkmetric.WithReader(s.metrics)),
			Propagator:     telemetry.Propagator(),
		},
	}
	s.serve(t, o)
	return s
}

// serve serves the agentd of o on a TCP port of its own until t ends,
// and makes s's clients of it.
func (s *webStack) serve(t testing.TB, o app.Options) {
	a, err := app.NewAgent(o)
	if err != nil {
		t.Fatal(err)
	}
	s.addr, _ = startTCP(t, func(ctx context.Context, lis net.Listener) error { return a.Serve(ctx, lis, o) })
	s.dial(t)
}

// dial makes s's clients of the agentd at s.addr.
func (s *webStack) dial(t testing.TB) {
	// One client per protocol, so that each one's first request opens its
	// connection: a gRPC client's goes to the gRPC server's own transport.
	s.clients = map[string]*http.Client{protoJSON: {Transport: &http.Transport{}}}
	for _, p := range []string{protoGRPC, protoConnect, protoGRPCWeb} {
		s.clients[p] = h2cClient()
	}
	conn, err := grpc.NewClient(s.addr, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		conn.Close()
		for _, c := range s.clients {
			c.CloseIdleConnections()
		}
	})
	s.conn, s.grpc = conn, agentdv1.NewAgentServiceClient(conn)
}

// h2cClient speaks HTTP/2 without TLS, as gRPC and streams need.
func h2cClient() *http.Client {
	var protocols http.Protocols
	protocols.SetUnencryptedHTTP2(true)
	return &http.Client{Transport: &http.Transport{Protocols: &protocols}}
}

// connectOptions select protocol p of connect-go's clients.
func connectOptions(p string) []connect.ClientOption {
	switch p {
	case protoGRPC:
		return []connect.ClientOption{connect.WithGRPC()}
	case protoGRPCWeb:
		return []connect.ClientOption{connect.WithGRPCWeb()}
	}
	return nil
}

// outcome is what a call came to, alike over every protocol.
type outcome struct {
	code       connect.Code // 0: OK
	status     int          // the HTTP status, over HTTP/JSON
	msg        string
	retryAfter string
	fields     []string // the field violations of a google.rpc.BadRequest
	res        proto.Message
	events     []*agentdv1.GenerateResponse // what a follow received
}

// outcomeOf is a connect-go call's error as an outcome.
func outcomeOf(err error) outcome {
	var cerr *connect.Error
	if !errors.As(err, &cerr) {
		return outcome{code: connect.CodeUnknown, msg: err.Error()}
	}
	o := outcome{code: cerr.Code(), msg: cerr.Message(), retryAfter: cerr.Meta().Get("Retry-After")}
	for _, d := range cerr.Details() {
		if v, err := d.Value(); err == nil {
			o.fields = append(o.fields, badRequestFields(v)...)
		}
	}
	return o
}

func badRequestFields(m proto.Message) []string {
	var fields []string
	if br, ok := m.(*errdetails.BadRequest); ok {
		for _, v := range br.GetFieldViolations() {
			fields = append(fields, v.GetField())
		}
	}
	return fields
}

// A caller makes one call over protocol p, with key as its bearer ("":
// none) and hdr's headers.
type caller func(t testing.TB, s *webStack, p, key string, hdr http.Header, req proto.Message) outcome

// A jsonRoute is a unary RPC's google.api.http annotation for one request:
// its method, its path, and the body it sends (nil: none).
type jsonRoute[Req any] func(*Req) (method, path string, body proto.Message)

// unary is the caller of a unary RPC: procedure over connect-go, or its
// route over HTTP/JSON.
func unary[Req, Res any](procedure string, route jsonRoute[Req]) caller {
	return func(t testing.TB, s *webStack, p, key string, hdr http.Header, msg proto.Message) outcome {
		req := any(msg).(*Req)
		if p == protoJSON {
			method, path, body := route(req)
			return s.callJSON(t, method, path, key, hdr, body, any(new(Res)).(proto.Message))
		}
		client := connect.NewClient[Req, Res](s.clients[p], "http://"+s.addr+procedure, connectOptions(p)...)
		creq := connect.NewRequest(req)
		setHeaders(creq.Header(), key, hdr)
		res, err := client.CallUnary(t.Context(), creq)
		if err != nil {
			return outcomeOf(err)
		}
		return outcome{res: any(res.Msg).(proto.Message)}
	}
}

func setHeaders(h http.Header, key string, hdr http.Header) {
	if key != "" {
		h.Set("Authorization", "Bearer "+key)
	}
	for k, v := range hdr {
		h[k] = v
	}
}

// requestJSON makes an HTTP/JSON request, whose body is body's JSON (nil:
// none).
func (s *webStack) requestJSON(t testing.TB, method, path, key string, hdr http.Header, body proto.Message) *http.Response {
	t.Helper()
	var r io.Reader
	if body != nil {
		data, err := protojson.Marshal(body)
		if err != nil {
			t.Fatal(err)
		}
		r = bytes.NewReader(data)
	}
	req, err := http.NewRequestWithContext(t.Context(), method, "http://"+s.addr+path, r)
	if err != nil {
		t.Fatal(err)
	}
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	setHeaders(req.Header, key, hdr)
	resp, err := s.clients[protoJSON].Do(req)
	if err != nil {
		t.Fatal(err)
	}
	return resp
}

// callJSON makes an HTTP/JSON request and reads its answer into res, or
// its error.
func (s *webStack) callJSON(t testing.TB, method, path, key string, hdr http.Header, body, res proto.Message) outcome {
	t.Helper()
	resp := s.requestJSON(t, method, path, key, hdr, body)
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return errorJSON(t, resp)
	}
	data, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	if err := protojson.Unmarshal(data, res); err != nil {
		t.Fatalf("%s %s: %v in %s", method, path, err, data)
	}
	return outcome{status: resp.StatusCode, res: res}
}

// errorJSON is the outcome of an HTTP/JSON answer that is an error: its
// status, and the google.rpc.Status its body holds.
func errorJSON(t testing.TB, resp *http.Response) outcome {
	t.Helper()
	data, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	var st statuspb.Status
	if err := protojson.Unmarshal(data, &st); err != nil {
		t.Fatalf("%s %s: %d with %q, not a JSON error: %v", resp.Request.Method, resp.Request.URL.Path, resp.StatusCode, data, err)
	}
	o := outcome{status: resp.StatusCode, retryAfter: resp.Header.Get("Retry-After"), code: connect.Code(st.GetCode()), msg: st.GetMessage()}
	for _, d := range st.GetDetails() {
		if v, err := d.UnmarshalNew(); err == nil {
			o.fields = append(o.fields, badRequestFields(v)...)
		}
	}
	return o
}

var (
	preview = unary[agentdv1.PreviewRequest, agentdv1.PreviewResponse](agentdv1.AgentService_Preview_FullMethodName,
		func(r *agentdv1.PreviewRequest) (string, string, proto.Message) {
			return http.MethodPost, "/v1/preview", r
		})
	getGeneration = unary[agentdv1.GetGenerationRequest, agentdv1.GetGenerationResponse](agentdv1.AgentService_GetGeneration_FullMethodName,
		func(r *agentdv1.GetGenerationRequest) (string, string, proto.Message) {
			return http.MethodGet, "/v1/generations/" + r.GetGenerationId(), nil
		})
	listGenerations = unary[agentdv1.ListGenerationsRequest, agentdv1.ListGenerationsResponse](agentdv1.AgentService_ListGenerations_FullMethodName,
		func(*agentdv1.ListGenerationsRequest) (string, string, proto.Message) {
			return http.MethodGet, "/v1/generations", nil
		})
	createGeneration = unary[agentdv1.CreateGenerationRequest, agentdv1.CreateGenerationResponse](agentdv1.AgentService_CreateGeneration_FullMethodName,
		func(r *agentdv1.CreateGenerationRequest) (string, string, proto.Message) {
			return http.MethodPost, "/v1/generations", r.GetStart()
		})
	revokeTokens = unary[agentdv1.RevokeTokensRequest, agentdv1.RevokeTokensResponse](agentdv1.AdminService_RevokeTokens_FullMethodName,
		func(r *agentdv1.RevokeTokensRequest) (string, string, proto.Message) {
			return http.MethodPost, "/v1/tokens:revoke", r
		})
)

// follow follows a generation (a FollowGenerationRequest) to its end:
// with FollowGeneration over connect-go, or over HTTP/JSON with its event
// stream, StreamGenerationEvents' route.
func follow(t testing.TB, s *webStack, p, key string, hdr http.Header, msg proto.Message) outcome {
	req := msg.(*agentdv1.FollowGenerationRequest)
	if p == protoJSON {
		return s.eventStream(t, req, key, hdr)
	}
	client := connect.NewClient[agentdv1.FollowGenerationRequest, agentdv1.FollowGenerationResponse](s.clients[p],
		"http://"+s.addr+agentdv1.AgentService_FollowGeneration_FullMethodName, connectOptions(p)...)
	creq := connect.NewRequest(req)
	setHeaders(creq.Header(), key, hdr)
	stream, err := client.CallServerStream(t.Context(), creq)
	if err != nil {
		return outcomeOf(err)
	}
	defer stream.Close()
	var events []*agentdv1.GenerateResponse
	for stream.Receive() {
		events = append(events, stream.Msg().GetEvent())
	}
	var o outcome
	if err := stream.Err(); err != nil {
		o = outcomeOf(err)
	}
	o.events = events
	return o
}

// eventStream reads GET /v1/generations/{id}/events?after= to its end, as
// an EventSource would: each event's data decoded, its id the sequence
// and its type the kind; an error event is the outcome's status.
func (s *webStack) eventStream(t testing.TB, req *agentdv1.FollowGenerationRequest, key string, hdr http.Header) outcome {
	t.Helper()
	path := fmt.Sprintf("/v1/generations/%s/events?after=%d", req.GetGenerationId(), req.GetAfterSequence())
	resp := s.requestJSON(t, http.MethodGet, path, key, hdr, nil)
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return errorJSON(t, resp)
	}
	o := outcome{status: resp.StatusCode}
	r := bufio.NewReader(resp.Body)
	for {
		id, typ, data, err := readEvent(r)
		if errors.Is(err, io.EOF) {
			return o
		}
		if err != nil {
			t.Fatalf("reading %s: %v", path, err)
		}
		o.add(t, id, typ, data)
	}
}

// add adds an event stream's event to o: one of the generation's, or its
// error.
func (o *outcome) add(t testing.TB, id, typ string, data []byte) {
	t.Helper()
	switch typ {
	case "": // a comment
	case "error":
		var e struct {
			Code    connect.Code `json:"code"`
			Message string       `json:"message"`
		}
		if err := json.Unmarshal(data, &e); err != nil {
			t.Fatalf("an error event of %q: %v", data, err)
		}
		o.code, o.msg = e.Code, e.Message
	default:
		ev := &agentdv1.GenerateResponse{}
		if err := protojson.Unmarshal(data, ev); err != nil {
			t.Fatalf("an event of %q: %v", data, err)
		}
		if id != strconv.FormatInt(ev.GetSequence(), 10) || typ != kind(ev) {
			t.Errorf("event %s of type %s holds %v", id, typ, ev)
		}
		o.events = append(o.events, ev)
	}
}

// readEvent reads one event of an event stream up to its blank line, as
// much of it as agentd's streams use (a comment alone has none of the
// three); io.EOF at the stream's end.
func readEvent(r *bufio.Reader) (id, typ string, data []byte, err error) {
	for {
		line, err := r.ReadBytes('\n')
		if err != nil {
			if errors.Is(err, io.EOF) && len(line) > 0 {
				err = io.ErrUnexpectedEOF
			}
			return "", "", nil, err
		}
		line = bytes.TrimSuffix(line, []byte("\n"))
		if len(line) == 0 {
			return id, typ, data, nil
		}
		field, value, _ := bytes.Cut(line, []byte(": "))
		switch string(field) {
		case "id":
			id = string(value)
		case "event":
			typ = string(value)
		case "data":
			data = append(data, value...)
		}
	}
}

// Every protocol on the one port keeps the same rules, from the
// same gRPC server's interceptors: authentication, roles, tenants,
// validation, limits and the store's answers come out alike over gRPC,
// Connect, gRPC-Web and HTTP/JSON (there with the HTTP status of the code),
// each call leaving the same audit line. Each starts a generation with
// CreateGeneration and follows one to its end, with FollowGeneration or,
// over HTTP/JSON, its event stream: the same events, in the same order.
func TestProtocolsKeepTheRules(t *testing.T) {
	t.Parallel()
	is := oidctest.New(t)
	is.SetDown(true) // its keys cannot be fetched: its tokens cannot be checked now
	cfg := demoConfig(t, 0)
	cfg.Auth.APIKeys = []config.APIKey{
		{Name: "acme-app", SHA256: auth.HashKey("sk-acme"), Tenant: "acme", Roles: []string{auth.RoleGenerate}},
		{Name: "acme-watch", SHA256: auth.HashKey("sk-watch"), Tenant: "acme", Roles: []string{auth.RoleObserver}},
		{Name: "acme-ops", SHA256: auth.HashKey("sk-ops"), Tenant: "acme", Roles: []string{auth.RoleAdmin}},
		{Name: "globex-app", SHA256: auth.HashKey("sk-globex"), Tenant: "globex", Roles: []string{auth.RoleGenerate}},
	}
	cfg.Auth.OIDC = []config.OIDCIssuer{{Issuer: is.URL, Audience: oidctest.Audience}}
	cfg.Tenants = map[string]config.Tenant{"acme": {Limits: &config.Limits{MaxConcurrentGenerations: 1}}, "globex": {}}
	s := startWeb(t, cfg)
	acme := bearer(t.Context(), "sk-acme")
	events := generate(t, withCredentials(s.grpc, acme), demoStart(t))
	done := events[len(events)-1].GetCompleted()
	if done == nil {
		t.Fatalf("the demo generation ended with %v", events[len(events)-1])
	}
	id := done.GetGenerationId()
	var logged []*agentdv1.GenerateResponse // its events that a follow replays: those in its log
	for _, ev := range events {
		if ev.GetSequence() != 0 {
			logged = append(logged, ev)
		}
	}
	// acme's one generation at a time is taken, by one that waits for an
	// approval.
	holdCtx, release := context.WithCancel(acme)
	defer release()
	hold, err := s.grpc.Generate(holdCtx)
	if err != nil {
		t.Fatal(err)
	}
	if err := hold.Send(&agentdv1.GenerateRequest{Kind: &agentdv1.GenerateRequest_Start{Start: exampleStart(t, "approval-start.json")}}); err != nil {
		t.Fatal(err)
	}
	var running string // its id
	for ev, err := hold.Recv(); ev.GetApprovalRequest() == nil; ev, err = hold.Recv() {
		if err != nil {
			t.Fatal(err)
		}
		if ev.GetStarted() != nil {
			running = ev.GetStarted().GetGenerationId()
		}
	}
	token := oidctest.Sign(t, oidctest.NewKey(t, "k1", jose.ES256), is.Claims(time.Now().Unix(), "alice", "acme", []string{"generate"}, nil))
	good := &agentdv1.PreviewRequest{
		Agent:    &agentdv1.Agent{Provider: "mock"},
		Messages: []*agentdv1.Message{{Role: agentdv1.Role_ROLE_USER, Parts: []*agentdv1.Part{textPart("hi")}}},
	}
	start := &agentdv1.CreateGenerationRequest{Start: demoStart(t)}
	for _, tc := range []struct {
		name   string
		call   caller
		key    string
		req    proto.Message
		want   connect.Code
		says   string
		field  string // a field violation the error names
		retry  string // Retry-After
		check  func(proto.Message) bool
		events []string // what a follow receives, as kinds has them
	}{
		{name: "no credential", call: preview, req: good, want: connect.CodeUnauthenticated, says: "authentication required"},
		{name: "an unknown key", call: preview, key: "sk-guess", req: good, want: connect.CodeUnauthenticated, says: "authentication required"},
		{name: "a key without the role", call: preview, key: "sk-watch", req: good, want: connect.CodePermissionDenied, says: `needs the role "generate"`},
		{name: "another tenant's generation", call: getGeneration, key: "sk-globex", req: &agentdv1.GetGenerationRequest{GenerationId: id}, want: connect.CodeNotFound},
		{name: "an invalid request", call: preview, key: "sk-acme", req: &agentdv1.PreviewRequest{}, want: connect.CodeInvalidArgument, says: "agent", field: "agent"},
		{name: "a tenant over its limit", call: createGeneration, key: "sk-acme", req: start, want: connect.CodeResourceExhausted, says: "max_concurrent_generations", retry: "1"},
		{name: "a token whose issuer is down", call: preview, key: token, req: good, want: connect.CodeUnavailable, says: "try again later"},
		{name: "Preview", call: preview, key: "sk-acme", req: good, check: func(m proto.Message) bool {
			return m.(*agentdv1.PreviewResponse).GetProvider() == "mock"
		}},
		{name: "GetGeneration", call: getGeneration, key: "sk-acme", req: &agentdv1.GetGenerationRequest{GenerationId: id}, check: func(m proto.Message) bool {
			return m.(*agentdv1.GetGenerationResponse).GetGeneration().GetState() == agentdv1.GenerationState_GENERATION_STATE_COMPLETED
		}},
		{name: "ListGenerations", call: listGenerations, key: "sk-acme", req: &agentdv1.ListGenerationsRequest{}, check: func(m proto.Message) bool {
			return slices.ContainsFunc(m.(*agentdv1.ListGenerationsResponse).GetGenerations(), func(g *agentdv1.Generation) bool { return g.GetGenerationId() == id })
		}},
		{name: "CreateGeneration", call: createGeneration, key: "sk-globex", req: start, check: func(m proto.Message) bool {
			res := m.(*agentdv1.CreateGenerationResponse)
			return res.GetGenerationId() != "" && res.GetFirstSequence() == 1
		}},
		{name: "CreateGeneration of an invalid start", call: createGeneration, key: "sk-globex", req: &agentdv1.CreateGenerationRequest{Start: &agentdv1.StartGeneration{Agent: &agentdv1.Agent{Provider: "mock"}}},
			want: connect.CodeInvalidArgument, says: "messages", field: "start.messages"},
		{name: "CreateGeneration without a credential", call: createGeneration, req: start, want: connect.CodeUnauthenticated, says: "authentication required"},
		{name: "following a generation", call: follow, key: "sk-acme", req: &agentdv1.FollowGenerationRequest{GenerationId: id}, events: kinds(logged)},
		{name: "following another tenant's generation", call: follow, key: "sk-globex", req: &agentdv1.FollowGenerationRequest{GenerationId: id}, want: connect.CodeNotFound},
		{name: "following another tenant's running generation", call: follow, key: "sk-globex", req: &agentdv1.FollowGenerationRequest{GenerationId: running}, want: connect.CodeNotFound},
		{name: "RevokeTokens", call: revokeTokens, key: "sk-ops", req: &agentdv1.RevokeTokensRequest{}},
	} {
		for _, p := range protocols {
			got := tc.call(t, s, p, tc.key, nil, tc.req)
			name := fmt.Sprintf("%s over %s", tc.name, p)
			if got.code != tc.want || !strings.Contains(got.msg, tc.says) {
				t.Errorf("%s: %v %q; want %v saying %q", name, got.code, got.msg, tc.want, tc.says)
			}
			if p == protoJSON && got.status != httpStatus[tc.want] {
				t.Errorf("%s: HTTP %d; want %d", name, got.status, httpStatus[tc.want])
			}
			if tc.field != "" && !slices.Contains(got.fields, tc.field) {
				t.Errorf("%s: field violations %q; want %q among them", name, got.fields, tc.field)
			}
			if got.retryAfter != tc.retry {
				t.Errorf("%s: Retry-After %q; want %q", name, got.retryAfter, tc.retry)
			}
			if tc.check != nil && (got.res == nil || !tc.check(got.res)) {
				t.Errorf("%s: answered %v", name, got.res)
			}
			if diff := cmp.Diff(tc.events, kinds(got.events), cmpopts.EquateEmpty()); diff != "" {
				t.Errorf("%s: events differ from the log's (-log +followed):\n%s", name, diff)
			}
		}
	}
	audits := 0
	for line := range strings.SplitSeq(s.logs.String(), "\n") {
		if strings.Contains(line, `msg="admin change"`) && strings.Contains(line, "audit=true principal=acme-ops tenant=acme method=RevokeTokens") {
			audits++
		}
	}
	if audits != len(protocols) {
		t.Errorf("%d audit lines of RevokeTokens; want one per protocol, %d:\n%s", audits, len(protocols), s.logs.String())
	}
}

// withCredentials is client, whose Generate streams carry ctx's
// credentials whatever context they are opened with.
func withCredentials(client agentdv1.AgentServiceClient, ctx context.Context) agentdv1.AgentServiceClient {
	return withContext{client, ctx}
}

type withContext struct {
	agentdv1.AgentServiceClient
	ctx context.Context
}

func (c withContext) Generate(_ context.Context, opts ...grpc.CallOption) (grpc.BidiStreamingClient[agentdv1.GenerateRequest, agentdv1.GenerateResponse], error) {
	return c.AgentServiceClient.Generate(c.ctx, opts...)
}

// A call over any protocol is one trace, continuing the caller's
// traceparent, and one call in agentd's RPC metrics.
func TestProtocolsTraceAndCount(t *testing.T) {
	t.Parallel()
	s := startWeb(t, testConfig(t))
	good := &agentdv1.PreviewRequest{
		Agent:    &agentdv1.Agent{Provider: "mock"},
		Messages: []*agentdv1.Message{{Role: agentdv1.Role_ROLE_USER, Parts: []*agentdv1.Part{textPart("hi")}}},
	}
	for i, p := range protocols {
		traceID := trace.TraceID{0xa6, byte(i + 1)}
		hdr := http.Header{"Traceparent": {fmt.Sprintf("00-%s-00f067aa0ba902b7-01", traceID)}}
		before := s.calls(t, "Preview")
		if got := preview(t, s, p, "", hdr, good); got.code != 0 {
			t.Fatalf("Preview over %s: %v %s", p, got.code, got.msg)
		}
		testwait.For(t, "the server's span of the call over "+p, func() bool {
			return slices.ContainsFunc(s.spans.Ended(), func(sp sdktrace.ReadOnlySpan) bool {
				return sp.SpanKind() == trace.SpanKindServer && sp.SpanContext().TraceID() == traceID && sp.Parent().IsRemote() &&
					strings.HasSuffix(sp.Name(), "AgentService/Preview")
			})
		})
		testwait.For(t, "the call over "+p+" counted", func() bool { return s.calls(t, "Preview") == before+1 })
	}
}

// calls is how many calls of method the RPC metrics have recorded.
func (s *webStack) calls(t *testing.T, method string) uint64 {
	t.Helper()
	var rm metricdata.ResourceMetrics
	if err := s.metrics.Collect(t.Context(), &rm); err != nil {
		t.Fatal(err)
	}
	var n uint64
	for _, sm := range rm.ScopeMetrics {
		for _, m := range sm.Metrics {
			h, ok := m.Data.(metricdata.Histogram[float64])
			if m.Name != "rpc.server.call.duration" || !ok {
				continue
			}
			for _, dp := range h.DataPoints {
				if v, ok := dp.Attributes.Value("rpc.method"); ok && strings.HasSuffix(v.AsString(), method) {
					n += dp.Count
				}
			}
		}
	}
	return n
}
