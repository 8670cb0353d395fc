package server_test

import (
	"context"
	"errors"
	"io"
	"iter"
	"net"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/google/go-cmp/cmp"
	"go.uber.org/goleak"
	"google.golang.org/genproto/googleapis/rpc/errdetails"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/status"
	"google.golang.org/grpc/test/bufconn"
	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/encoding/prototext"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/testing/protocmp"
	"google.golang.org/protobuf/types/known/structpb"

	bridgev1 "github.com/agentd/agentd/gen/go/agentd/bridge/v1"
	agentdv1 "github.com/agentd/agentd/gen/go/agentd/v1"
	"github.com/agentd/agentd/internal/bridgeclient"
	"github.com/agentd/agentd/internal/config"
	"github.com/agentd/agentd/internal/testwait"
	"github.com/agentd/agentd/providers"
	"github.com/agentd/agentd/providers/scripted"
	"github.com/agentd/agentd/server"
)

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}

// dial serves register's services on an in-memory listener and returns a
// client connection to them; both close when the test ends, the server
// once every handler has returned: a generation's handler may still be
// writing to the store as its stream ends, and the store closes after.
func dial(t *testing.T, register func(grpc.ServiceRegistrar), opts ...grpc.ServerOption) *grpc.ClientConn {
	t.Helper()
	lis := bufconn.Listen(1 << 20)
	srv := grpc.NewServer(append([]grpc.ServerOption{grpc.WaitForHandlers(true)}, opts...)...)
	register(srv)
	served := make(chan struct{})
	go func() {
		defer close(served)
		_ = srv.Serve(lis)
	}()
	conn, err := grpc.NewClient("passthrough:///bufconn",
		grpc.WithContextDialer(func(ctx context.Context, _ string) (net.Conn, error) { return lis.DialContext(ctx) }),
		grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatalf("grpc.NewClient: %v", err)
	}
	t.Cleanup(func() {
		_ = conn.Close()
		srv.Stop()
		<-served
	})
	return conn
}

// newClient serves an AgentService backed by bridge and ps.
func newClient(t *testing.T, bridge server.Bridge, ps ...providers.Provider) agentdv1.AgentServiceClient {
	t.Helper()
	return newClientWith(t, server.Options{Bridge: bridge}, ps...)
}

// newClientWith serves an AgentService with opts, the providers ps and,
// unless opts sets one, the default configuration.
func newClientWith(t *testing.T, opts server.Options, ps ...providers.Provider) agentdv1.AgentServiceClient {
	t.Helper()
	reg, err := providers.NewRegistry(ps...)
	if err != nil {
		t.Fatalf("providers.NewRegistry: %v", err)
	}
	opts.Providers = reg
	if opts.Config == (config.Generation{}) {
		opts.Config = config.Default().Generation
	}
	svc := server.New(opts)
	return agentdv1.NewAgentServiceClient(dial(t, svc.Register))
}

// fakeProvider is a providers.Provider whose turns come from stream. It
// records every request.
type fakeProvider struct {
	name   string
	caps   providers.Capabilities
	stream func(ctx context.Context, req *providers.Request) iter.Seq2[providers.Event, error]

	mu       sync.Mutex
	requests []*providers.Request
}

func (p *fakeProvider) Name() string                         { return p.name }
func (p *fakeProvider) Capabilities() providers.Capabilities { return p.caps }

func (p *fakeProvider) Stream(ctx context.Context, req *providers.Request) iter.Seq2[providers.Event, error] {
	// The loop keeps appending to its conversation; keep what this turn saw.
	rec := *req
	rec.Messages = slices.Clone(req.Messages)
	p.mu.Lock()
	p.requests = append(p.requests, &rec)
	p.mu.Unlock()
	if p.stream == nil {
		return turnOf(&providers.TextDelta{Text: "ok"})
	}
	return p.stream(ctx, req)
}

// calls returns the requests Stream received.
func (p *fakeProvider) calls() []*providers.Request {
	p.mu.Lock()
	defer p.mu.Unlock()
	return slices.Clone(p.requests)
}

// turnOf yields events then a Stop.
func turnOf(events ...providers.Event) iter.Seq2[providers.Event, error] {
	return func(yield func(providers.Event, error) bool) {
		for _, ev := range append(events, &providers.Stop{Reason: agentdv1.StopReason_STOP_REASON_END_TURN}) {
			if !yield(ev, nil) {
				return
			}
		}
	}
}

// urlProvider serves url MCP servers itself, like Anthropic, except those
// with headers.
func urlProvider() *fakeProvider {
	return &fakeProvider{name: "urlprov", caps: providers.Capabilities{ServesURLServers: true, ModelOptional: true, ServerProblem: func(s *agentdv1.MCPServer) string {
		if len(s.GetHeaders()) > 0 {
			return "it has headers, which urlprov cannot send"
		}
		return ""
	}}}
}

// plainProvider serves no MCP server itself.
func plainProvider() *fakeProvider {
	return &fakeProvider{name: "plain", caps: providers.Capabilities{ModelOptional: true}}
}

// recordingScript is the real script provider, recording its requests.
func recordingScript() *fakeProvider {
	inner := scripted.Script()
	return &fakeProvider{name: inner.Name(), caps: inner.Capabilities(), stream: inner.Stream}
}

// fakeBridge is a server.Bridge whose sessions are itself. Each on* field
// may be nil for a default; every call is recorded.
type fakeBridge struct {
	onOpen  func(ctx context.Context, req *bridgev1.OpenSessionRequest) error
	onList  func(ctx context.Context) ([]*bridgev1.ServerTools, error)
	onCall  func(ctx context.Context, server, tool, arguments string) (*bridgev1.CallToolResponse, error)
	onClose func(ctx context.Context)

	mu        sync.Mutex
	opens     []*bridgev1.OpenSessionRequest
	lists     int
	toolCalls []bridgeCall
	closes    int
}

type bridgeCall struct{ Server, Tool, Arguments string }

// bridgeCounts is how often each bridge method ran.
type bridgeCounts struct{ Open, List, Call, Close int }

func (b *fakeBridge) OpenSession(ctx context.Context, req *bridgev1.OpenSessionRequest, _ bridgeclient.Answerer) (bridgeclient.Session, error) {
	b.mu.Lock()
	b.opens = append(b.opens, req)
	b.mu.Unlock()
	if b.onOpen != nil {
		if err := b.onOpen(ctx, req); err != nil {
			return nil, err
		}
	}
	return b, nil
}

func (b *fakeBridge) ListTools(ctx context.Context) ([]*bridgev1.ServerTools, error) {
	b.mu.Lock()
	b.lists++
	b.mu.Unlock()
	if b.onList == nil {
		return nil, nil
	}
	return b.onList(ctx)
}

func (b *fakeBridge) CallTool(ctx context.Context, server, tool, arguments string) (*bridgev1.CallToolResponse, error) {
	b.mu.Lock()
	b.toolCalls = append(b.toolCalls, bridgeCall{server, tool, arguments})
	b.mu.Unlock()
	if b.onCall == nil {
		return &bridgev1.CallToolResponse{Output: tool + " ok"}, nil
	}
	return b.onCall(ctx, server, tool, arguments)
}

func (b *fakeBridge) Close(ctx context.Context) {
	b.mu.Lock()
	b.closes++
	b.mu.Unlock()
	if b.onClose != nil {
		b.onClose(ctx)
	}
}

func (b *fakeBridge) counts() bridgeCounts {
	b.mu.Lock()
	defer b.mu.Unlock()
	return bridgeCounts{Open: len(b.opens), List: b.lists, Call: len(b.toolCalls), Close: b.closes}
}

func (b *fakeBridge) openRequests() []*bridgev1.OpenSessionRequest {
	b.mu.Lock()
	defer b.mu.Unlock()
	return slices.Clone(b.opens)
}

func (b *fakeBridge) calls() []bridgeCall {
	b.mu.Lock()
	defer b.mu.Unlock()
	return slices.Clone(b.toolCalls)
}

// callsTo counts the calls of one tool.
func (b *fakeBridge) callsTo(tool string) int {
	n := 0
	for _, c := range b.calls() {
		if c.Tool == tool {
			n++
		}
	}
	return n
}

// offering makes the bridge list these tools, by server name.
func offering(servers ...*bridgev1.ServerTools) func(context.Context) ([]*bridgev1.ServerTools, error) {
	return func(context.Context) ([]*bridgev1.ServerTools, error) { return servers, nil }
}

func serverTools(server string, tools ...string) *bridgev1.ServerTools {
	st := &bridgev1.ServerTools{ServerName: server}
	for _, name := range tools {
		st.Tools = append(st.Tools, &bridgev1.Tool{Name: name, Description: "the " + name + " tool"})
	}
	return st
}

// stream is what a test's respond function may do on the open stream.
type stream interface {
	Send(*agentdv1.GenerateRequest) error
	CloseSend() error
}

// generate sends start and collects events until the stream ends. With a
// nil respond, it half-closes right after start; otherwise respond sees
// every event and may answer on the open stream.
func generate(t *testing.T, client agentdv1.AgentServiceClient, start *agentdv1.StartGeneration, respond func(*agentdv1.GenerateResponse, stream)) ([]*agentdv1.GenerateResponse, *status.Status) {
	t.Helper()
	return run(t, client, &agentdv1.GenerateRequest{Kind: &agentdv1.GenerateRequest_Start{Start: start}}, respond)
}

func run(t *testing.T, client agentdv1.AgentServiceClient, first *agentdv1.GenerateRequest, respond func(*agentdv1.GenerateResponse, stream)) ([]*agentdv1.GenerateResponse, *status.Status) {
	t.Helper()
	s, err := client.Generate(t.Context())
	if err != nil {
		t.Fatalf("Generate: %v", err)
	}
	if err := s.Send(first); err != nil {
		t.Fatalf("Send(first): %v", err)
	}
	if respond == nil {
		if err := s.CloseSend(); err != nil {
			t.Fatalf("CloseSend: %v", err)
		}
	}
	var events []*agentdv1.GenerateResponse
	for {
		ev, err := s.Recv()
		if errors.Is(err, io.EOF) {
			return events, status.New(codes.OK, "")
		}
		if err != nil {
			return events, status.Convert(err)
		}
		events = append(events, ev)
		if respond != nil {
			respond(ev, tolerantStream{t, s})
		}
	}
}

// tolerantStream ignores io.EOF from Send: the server may end the stream
// before it reads an answer, and Recv then reports why.
type tolerantStream struct {
	t *testing.T
	s grpc.BidiStreamingClient[agentdv1.GenerateRequest, agentdv1.GenerateResponse]
}

func (s tolerantStream) Send(m *agentdv1.GenerateRequest) error {
	err := s.s.Send(m)
	if err != nil && !errors.Is(err, io.EOF) {
		s.t.Errorf("Send: %v", err)
	}
	return err
}

func (s tolerantStream) CloseSend() error { return s.s.CloseSend() }

func approve(requestID, digest string, approved bool) *agentdv1.GenerateRequest {
	return &agentdv1.GenerateRequest{Kind: &agentdv1.GenerateRequest_ApprovalDecision{ApprovalDecision: &agentdv1.ApprovalDecision{
		RequestId: requestID, Approved: approved, Digest: digest,
	}}}
}

func functionResult(callID, output string) *agentdv1.GenerateRequest {
	return &agentdv1.GenerateRequest{Kind: &agentdv1.GenerateRequest_FunctionResult{FunctionResult: &agentdv1.FunctionResult{CallId: callID, Output: output}}}
}

func cancelRequest() *agentdv1.GenerateRequest {
	return &agentdv1.GenerateRequest{Kind: &agentdv1.GenerateRequest_Cancel{Cancel: &agentdv1.CancelGeneration{Reason: "user pressed stop"}}}
}

// kinds names each event's kind: "started", "text_delta", ...
func kinds(events []*agentdv1.GenerateResponse) []string {
	out := make([]string, len(events))
	for i, ev := range events {
		m := ev.ProtoReflect()
		out[i] = string(m.WhichOneof(m.Descriptor().Oneofs().ByName("event")).Name())
	}
	return out
}

// started returns the generation's started event.
func started(t *testing.T, events []*agentdv1.GenerateResponse) *agentdv1.GenerationStarted {
	t.Helper()
	for _, ev := range events {
		if s := ev.GetStarted(); s != nil {
			return s
		}
	}
	t.Fatalf("no started event among %v", kinds(events))
	return nil
}

// userSays is a one-message conversation.
func userSays(text string) []*agentdv1.Message {
	return []*agentdv1.Message{{Role: agentdv1.Role_ROLE_USER, Parts: []*agentdv1.Part{{Kind: &agentdv1.Part_Text{Text: text}}}}}
}

// script renders provider_options for the script provider from the JSON
// text of provider_options.script.
func script(t *testing.T, scriptJSON string) *structpb.Struct {
	t.Helper()
	s := &structpb.Struct{}
	if err := protojson.Unmarshal([]byte(`{"script": `+scriptJSON+`}`), s); err != nil {
		t.Fatalf("script %s: %v", scriptJSON, err)
	}
	return s
}

func urlServer(name, url string) *agentdv1.MCPServer {
	return &agentdv1.MCPServer{Name: name, Transport: &agentdv1.MCPServer_Url{Url: url}}
}

func commandServer(name, command string) *agentdv1.MCPServer {
	return &agentdv1.MCPServer{Name: name, Transport: &agentdv1.MCPServer_Command{Command: command}}
}

func refServer(name, ref string) *agentdv1.MCPServer {
	return &agentdv1.MCPServer{Name: name, Transport: &agentdv1.MCPServer_Ref{Ref: ref}}
}

// fieldViolations returns a status's BadRequest field violations.
func fieldViolations(st *status.Status) []*errdetails.BadRequest_FieldViolation {
	var out []*errdetails.BadRequest_FieldViolation
	for _, d := range st.Details() {
		if br, ok := d.(*errdetails.BadRequest); ok {
			out = append(out, br.GetFieldViolations()...)
		}
	}
	return out
}

// violationFields lists the fields of a status's violations, in order.
func violationFields(st *status.Status) []string {
	var out []string
	for _, v := range fieldViolations(st) {
		out = append(out, v.GetField())
	}
	return out
}

// description returns the violation of field, or fails.
func description(t *testing.T, st *status.Status, field string) string {
	t.Helper()
	for _, v := range fieldViolations(st) {
		if v.GetField() == field {
			return v.GetDescription()
		}
	}
	t.Fatalf("no violation of %s in %v", field, st.Proto())
	return ""
}

func errorInfo(st *status.Status) *errdetails.ErrorInfo {
	for _, d := range st.Details() {
		if info, ok := d.(*errdetails.ErrorInfo); ok {
			return info
		}
	}
	return nil
}

// statusText is everything a client can read from a status: its message
// and every detail.
func statusText(st *status.Status) string {
	var b strings.Builder
	b.WriteString(st.Message())
	for _, d := range st.Details() {
		if m, ok := d.(proto.Message); ok {
			b.WriteString("\n" + prototext.Format(m))
		}
	}
	return b.String()
}

// wantCode fails unless st has the code.
func wantCode(t *testing.T, st *status.Status, code codes.Code) {
	t.Helper()
	if st.Code() != code {
		t.Fatalf("status = %v %q; want %v", st.Code(), st.Message(), code)
	}
}

// wantFacts fails unless text contains every fact.
func wantFacts(t *testing.T, what, text string, facts ...string) {
	t.Helper()
	for _, f := range facts {
		if !strings.Contains(text, f) {
			t.Errorf("%s = %q; want it to mention %q", what, text, f)
		}
	}
}

// wantCounts compares how often each bridge method ran. A session closes
// after its generation's stream has ended, so the closes are waited for.
func wantCounts(t *testing.T, b *fakeBridge, want bridgeCounts) {
	t.Helper()
	testwait.For(t, "the bridge sessions closed", func() bool { return b.counts().Close >= want.Close })
	if diff := cmp.Diff(want, b.counts()); diff != "" {
		t.Errorf("bridge calls (-want +got):\n%s", diff)
	}
}

// protoDiff compares protos, ignoring what varies between runs.
func protoDiff(want, got any) string {
	return cmp.Diff(want, got, protocmp.Transform(),
		protocmp.IgnoreFields(&agentdv1.GenerationStarted{}, "generation_id"),
		protocmp.IgnoreFields(&agentdv1.GenerationCompleted{}, "generation_id"),
		protocmp.IgnoreFields(&agentdv1.ToolCallFinished{}, "duration"),
		protocmp.IgnoreFields(&agentdv1.Usage{}, "tool_schema_bytes"),
		protocmp.IgnoreFields(&bridgev1.OpenSessionRequest{}, "generation_id"),
	)
}
