package server_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"go.opentelemetry.io/otel/trace"
	"google.golang.org/genproto/googleapis/rpc/errdetails"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/protoadapt"
	"google.golang.org/protobuf/testing/protocmp"

	bridgev1 "github.com/agentd/agentd/gen/go/agentd/bridge/v1"
	agentdv1 "github.com/agentd/agentd/gen/go/agentd/v1"
	"github.com/agentd/agentd/internal/fault"
	"github.com/agentd/agentd/server"
)

// fakeBridgeService is a BridgeService whose answers come from its on*
// fields, for testing NewBridgeClient's translation of the bridge's
// statuses. Calls come by CallTools (each answered by onCall), or, with
// unaryOnly, by CallTool as from a bridge that has no CallTools.
type fakeBridgeService struct {
	bridgev1.UnimplementedBridgeServiceServer

	onOpen    func(*bridgev1.OpenSessionRequest) error
	onList    func(*bridgev1.ListToolsRequest) (*bridgev1.ListToolsResponse, error)
	onCall    func(*bridgev1.CallToolRequest) (*bridgev1.CallToolResponse, error)
	unaryOnly bool
	// resumable is what every session's SessionOpened says.
	resumable bool
	// bringTools: a session opened with list_cached_tools brings onList's
	// answer, as the bridge does when its cache holds every list.
	bringTools bool
	// listCalls counts the ListTools calls.
	listCalls atomic.Int32
	// onStreamed, if set, sees each streamed call before onCall runs.
	onStreamed func(*bridgev1.StreamedToolCall)
	// cancels receives the ids of the calls the client cancels.
	cancels chan uint64
	// onStream, if set, runs as a CallTools stream opens; the function it
	// returns, as the stream ends.
	onStream func() (ended func())

	mu       sync.Mutex
	closes   int
	opened   int
	sessions map[string]chan struct{} // open sessions, each closed by CloseSession
}

// session returns the channel that CloseSession closes for session id: as
// the bridge does, a closed session ends its streams.
func (b *fakeBridgeService) session(id string) <-chan struct{} {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.sessions[id]
}

func (b *fakeBridgeService) CallTools(s grpc.BidiStreamingServer[bridgev1.CallToolsRequest, bridgev1.CallToolsResponse]) error {
	if b.unaryOnly {
		return b.UnimplementedBridgeServiceServer.CallTools(s)
	}
	first, err := s.Recv()
	if err != nil {
		return err
	}
	id := first.GetOpen().GetSessionId()
	if b.onStream != nil {
		defer b.onStream()()
	}
	closed := b.session(id)
	if closed == nil {
		return nil // closed already: a stream opened late ends at once
	}
	var (
		sendMu sync.Mutex
		calls  sync.WaitGroup
	)
	defer calls.Wait()
	reqs := make(chan *bridgev1.CallToolsRequest)
	go func() { // ends with the stream
		defer close(reqs)
		for {
			req, err := s.Recv()
			if err != nil {
				return
			}
			select {
			case reqs <- req:
			case <-s.Context().Done():
				return
			}
		}
	}()
	for {
		var req *bridgev1.CallToolsRequest
		select {
		case r, ok := <-reqs:
			if !ok {
				return nil
			}
			req = r
		case <-closed:
			return nil
		}
		if c := req.GetCall(); c != nil {
			calls.Go(func() {
				if b.onStreamed != nil {
					b.onStreamed(c)
				}
				res, err := b.CallTool(s.Context(), &bridgev1.CallToolRequest{SessionId: id, ServerName: c.GetServerName(), ToolName: c.GetToolName(), Arguments: c.GetArguments()})
				answer := &bridgev1.CallToolsResponse{Id: c.GetId(), Outcome: &bridgev1.CallToolsResponse_Result{Result: res}}
				if err != nil {
					p := status.Convert(err).Proto()
					answer.Outcome = &bridgev1.CallToolsResponse_Error{Error: &bridgev1.CallError{Code: p.GetCode(), Message: p.GetMessage(), Details: p.GetDetails()}}
				}
				sendMu.Lock()
				defer sendMu.Unlock()
				_ = s.Send(answer)
			})
		} else if b.cancels != nil {
			b.cancels <- req.GetCancel()
		}
	}
}

func (b *fakeBridgeService) OpenSession(req *bridgev1.OpenSessionRequest, s grpc.ServerStreamingServer[bridgev1.OpenSessionResponse]) error {
	if b.onOpen != nil {
		if err := b.onOpen(req); err != nil {
			return err
		}
	}
	b.mu.Lock()
	b.opened++
	id := fmt.Sprintf("sess-%d", b.opened)
	closed := make(chan struct{})
	if b.sessions == nil {
		b.sessions = make(map[string]chan struct{})
	}
	b.sessions[id] = closed
	b.mu.Unlock()
	opened := &bridgev1.SessionOpened{SessionId: id, Resumable: b.resumable}
	if b.bringTools && req.GetListCachedTools() && b.onList != nil {
		tools, err := b.onList(&bridgev1.ListToolsRequest{SessionId: id})
		if err != nil {
			return err
		}
		opened.Tools = tools
	}
	if err := s.Send(&bridgev1.OpenSessionResponse{Event: &bridgev1.OpenSessionResponse_Opened{Opened: opened}}); err != nil {
		return err
	}
	select {
	case <-s.Context().Done():
	case <-closed:
	}
	return nil
}

func (b *fakeBridgeService) CloseSession(_ context.Context, req *bridgev1.CloseSessionRequest) (*bridgev1.CloseSessionResponse, error) {
	b.mu.Lock()
	b.closes++
	if ch := b.sessions[req.GetSessionId()]; ch != nil {
		close(ch)
		delete(b.sessions, req.GetSessionId())
	}
	b.mu.Unlock()
	return &bridgev1.CloseSessionResponse{}, nil
}

func (b *fakeBridgeService) ListTools(_ context.Context, req *bridgev1.ListToolsRequest) (*bridgev1.ListToolsResponse, error) {
	b.listCalls.Add(1)
	if b.onList == nil {
		return &bridgev1.ListToolsResponse{}, nil
	}
	return b.onList(req)
}

func (b *fakeBridgeService) CallTool(_ context.Context, req *bridgev1.CallToolRequest) (*bridgev1.CallToolResponse, error) {
	if b.onCall == nil {
		return &bridgev1.CallToolResponse{Output: "ok"}, nil
	}
	return b.onCall(req)
}

func (b *fakeBridgeService) closed() int {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.closes
}

// statusWith builds a bridge status with details.
func statusWith(t *testing.T, code codes.Code, msg string, details ...protoadapt.MessageV1) error {
	t.Helper()
	st, err := status.New(code, msg).WithDetails(details...)
	if err != nil {
		t.Fatal(err)
	}
	return st.Err()
}

// TestBridgeErrors proves that NewBridgeClient translates the bridge's
// statuses rather than passing them through: timeouts keep their code and
// ErrorInfo, invalid servers are relocated to the request's field paths,
// and anything unexpected becomes Internal without its text.
func TestBridgeErrors(t *testing.T) {
	t.Parallel()
	readsFiles := func(*bridgev1.ListToolsRequest) (*bridgev1.ListToolsResponse, error) {
		return &bridgev1.ListToolsResponse{Servers: []*bridgev1.ServerTools{serverTools("files", "read")}}, nil
	}
	tests := []struct {
		name       string
		bridge     func(t *testing.T) *fakeBridgeService
		provider   string
		mcps       []*agentdv1.MCPServer
		wantCode   codes.Code
		wantMsg    string
		wantInfo   *errdetails.ErrorInfo
		wantFields []*errdetails.BadRequest_FieldViolation
		hidden     string
		wantCloses int
	}{
		{
			name: "a DeadlineExceeded tool call keeps its code and ErrorInfo",
			bridge: func(t *testing.T) *fakeBridgeService {
				return &fakeBridgeService{onList: readsFiles, onCall: func(*bridgev1.CallToolRequest) (*bridgev1.CallToolResponse, error) {
					return nil, statusWith(t, codes.DeadlineExceeded, `MCP server "files" did not answer tools/call within 30s`,
						&errdetails.ErrorInfo{Reason: "MCP_READ_TIMEOUT", Domain: "bridge", Metadata: map[string]string{"server": "files", "request": "tools/call"}})
				}}
			},
			provider:   "script",
			mcps:       []*agentdv1.MCPServer{refServer("files", "files")},
			wantCode:   codes.DeadlineExceeded,
			wantMsg:    `MCP server "files" did not answer tools/call within 30s`,
			wantInfo:   &errdetails.ErrorInfo{Reason: "MCP_READ_TIMEOUT", Domain: "agentd", Metadata: map[string]string{"server": "files", "request": "tools/call"}},
			wantCloses: 1,
		},
		{
			name: "an invalid bridged server is reported at its place in the request",
			bridge: func(t *testing.T) *fakeBridgeService {
				return &fakeBridgeService{onOpen: func(*bridgev1.OpenSessionRequest) error {
					return statusWith(t, codes.InvalidArgument, "invalid session", &errdetails.BadRequest{FieldViolations: []*errdetails.BadRequest_FieldViolation{
						{Field: "servers[0].ref", Description: `no server is registered as "nope"`},
					}})
				}}
			},
			provider: "urlprov",
			mcps:     []*agentdv1.MCPServer{urlServer("docs", "https://docs.example.com/mcp"), refServer("", "nope")},
			wantCode: codes.InvalidArgument,
			wantFields: []*errdetails.BadRequest_FieldViolation{
				{Field: "start.agent.mcps[1].ref", Description: `no server is registered as "nope"`},
			},
		},
		{
			name: "X-D9 the bridge's policy refusals keep PermissionDenied and every violation, at its place in the request",
			bridge: func(t *testing.T) *fakeBridgeService {
				return &fakeBridgeService{onOpen: func(*bridgev1.OpenSessionRequest) error {
					return statusWith(t, codes.PermissionDenied, "request not allowed", &errdetails.BadRequest{FieldViolations: []*errdetails.BadRequest_FieldViolation{
						{Field: "servers[0].stdio.command", Description: `MCP server "sh": the command "sh" is not allowed by bridge.allowed_commands`},
						{Field: "servers[0].stdio.env", Description: `MCP server "sh": may not set LD_PRELOAD`},
						{Field: "servers[1].http.url", Description: `MCP server "lan": its URL names a private address`},
					}})
				}}
			},
			provider: "script",
			mcps:     []*agentdv1.MCPServer{commandServer("sh", "/bin/sh"), urlServer("lan", "https://10.1.2.3/mcp")},
			wantCode: codes.PermissionDenied,
			wantMsg:  "bridge.allowed_commands",
			wantFields: []*errdetails.BadRequest_FieldViolation{
				{Field: "start.agent.mcps[0].command", Description: `MCP server "sh": the command "sh" is not allowed by bridge.allowed_commands`},
				{Field: "start.agent.mcps[0].env", Description: `MCP server "sh": may not set LD_PRELOAD`},
				{Field: "start.agent.mcps[1].url", Description: `MCP server "lan": its URL names a private address`},
			},
		},
		{
			name: "a permission refusal keeps its code",
			bridge: func(t *testing.T) *fakeBridgeService {
				return &fakeBridgeService{onOpen: func(*bridgev1.OpenSessionRequest) error {
					return status.Error(codes.PermissionDenied, "command /bin/sh is not in bridge.allowed_commands")
				}}
			},
			provider: "script",
			mcps:     []*agentdv1.MCPServer{commandServer("", "/bin/sh")},
			wantCode: codes.PermissionDenied,
			wantMsg:  "bridge.allowed_commands",
		},
		{
			name: "a busy pool's ResourceExhausted keeps its code",
			bridge: func(*testing.T) *fakeBridgeService {
				return &fakeBridgeService{onList: readsFiles, onCall: func(*bridgev1.CallToolRequest) (*bridgev1.CallToolResponse, error) {
					return nil, status.Error(codes.ResourceExhausted, `all 8 processes of the MCP server "files" are busy`)
				}}
			},
			provider:   "script",
			mcps:       []*agentdv1.MCPServer{refServer("files", "files")},
			wantCode:   codes.ResourceExhausted,
			wantMsg:    "are busy",
			wantCloses: 1,
		},
		{
			name: "an unexpected status becomes Internal and hides its text",
			bridge: func(*testing.T) *fakeBridgeService {
				return &fakeBridgeService{onList: readsFiles, onCall: func(*bridgev1.CallToolRequest) (*bridgev1.CallToolResponse, error) {
					return nil, status.Error(codes.Unknown, "panic near token sk-SECRET-999")
				}}
			},
			provider:   "script",
			mcps:       []*agentdv1.MCPServer{refServer("files", "files")},
			wantCode:   codes.Internal,
			hidden:     "SECRET-999",
			wantCloses: 1,
		},
	}
	for _, tt := range tests {
		for _, unary := range []bool{false, true} {
			name := tt.name + "/CallTools"
			if unary {
				name = tt.name + "/CallTool (a bridge without CallTools)"
			}
			t.Run(name, func(t *testing.T) {
				t.Parallel()
				fake := tt.bridge(t)
				fake.unaryOnly = unary
				conn := dial(t, func(r grpc.ServiceRegistrar) { bridgev1.RegisterBridgeServiceServer(r, fake) })
				prov := urlProvider()
				client := newClient(t, server.NewBridgeClient(conn), prov, recordingScript())
				agent := &agentdv1.Agent{
					Provider:        tt.provider,
					Mcps:            tt.mcps,
					ProviderOptions: script(t, `{"turns": [{"tool_calls": [{"name": "read"}]}, {"text": "done"}]}`),
				}

				_, st := generate(t, client, &agentdv1.StartGeneration{Agent: agent, Messages: userSays("go")}, nil)

				wantCode(t, st, tt.wantCode)
				wantFacts(t, "status message", st.Message(), tt.wantMsg)
				if diff := cmp.Diff(tt.wantInfo, errorInfo(st), protocmp.Transform()); diff != "" {
					t.Errorf("ErrorInfo (-want +got):\n%s", diff)
				}
				if diff := cmp.Diff(tt.wantFields, fieldViolations(st), protocmp.Transform()); diff != "" {
					t.Errorf("field violations (-want +got):\n%s", diff)
				}
				if tt.hidden != "" && strings.Contains(statusText(st), tt.hidden) {
					t.Errorf("status carries the bridge's text %q: %v", tt.hidden, st.Proto())
				}
				// The session closes after the stream has ended.
				waitFor(t, func() bool { return fake.closed() >= tt.wantCloses })
				if got := fake.closed(); got != tt.wantCloses {
					t.Errorf("CloseSession called %d times; want %d", got, tt.wantCloses)
				}
				if n := len(prov.calls()); n != 0 {
					t.Errorf("provider called %d times; want 0", n)
				}
			})
		}
	}
}

// openFake opens a session of NewBridgeClient on fake.
func openFake(t *testing.T, fake *fakeBridgeService) server.BridgeSession {
	t.Helper()
	conn := dial(t, func(r grpc.ServiceRegistrar) { bridgev1.RegisterBridgeServiceServer(r, fake) })
	sess, err := server.NewBridgeClient(conn).OpenSession(t.Context(), &bridgev1.OpenSessionRequest{}, nil)
	if err != nil {
		t.Fatalf("OpenSession: %v", err)
	}
	t.Cleanup(func() { sess.Close(context.Background()) })
	return sess
}

// TestBridgeCallCancel: a caller that gives up gets its context's error at
// once, and the bridge is told to cancel that call.
func TestBridgeCallCancel(t *testing.T) {
	t.Parallel()
	started := make(chan uint64, 2)
	release := make(chan struct{})
	defer close(release)
	fake := &fakeBridgeService{
		cancels:    make(chan uint64, 1),
		onStreamed: func(c *bridgev1.StreamedToolCall) { started <- c.GetId() },
		onCall: func(req *bridgev1.CallToolRequest) (*bridgev1.CallToolResponse, error) {
			if req.GetArguments() == "{}" {
				<-release
				return &bridgev1.CallToolResponse{Output: "too late"}, nil
			}
			return &bridgev1.CallToolResponse{Output: "ok"}, nil
		},
	}
	sess := openFake(t, fake)
	ctx, cancel := context.WithCancel(t.Context())
	errc := make(chan error, 1)
	go func() {
		_, err := sess.CallTool(ctx, "files", "read", "{}")
		errc <- err
	}()
	id := <-started
	cancel()
	if err := <-errc; !errors.Is(err, context.Canceled) {
		t.Errorf("CallTool after cancel = %v; want context.Canceled", err)
	}
	if got := <-fake.cancels; got != id {
		t.Errorf("the bridge was told to cancel call %d; want %d", got, id)
	}
	// The session goes on; the late answer of the cancelled call is dropped.
	release <- struct{}{}
	if res, err := sess.CallTool(t.Context(), "files", "read", `{"n":2}`); err != nil || res.GetOutput() != "ok" {
		t.Errorf("the next CallTool = %v, %v; want ok", res, err)
	}
}

// TestBridgeCallCarries: a streamed call carries its caller's deadline and
// trace context, as a gRPC call would.
func TestBridgeCallCarries(t *testing.T) {
	t.Parallel()
	got := make(chan *bridgev1.StreamedToolCall, 1)
	sess := openFake(t, &fakeBridgeService{onStreamed: func(c *bridgev1.StreamedToolCall) { got <- c }})
	traceID := trace.TraceID{1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16}
	sc := trace.NewSpanContext(trace.SpanContextConfig{TraceID: traceID, SpanID: trace.SpanID{1, 2, 3, 4, 5, 6, 7, 8}, TraceFlags: trace.FlagsSampled})
	ctx, cancel := context.WithTimeout(trace.ContextWithSpanContext(t.Context(), sc), time.Minute)
	defer cancel()
	res, err := sess.CallTool(ctx, "files", "read", `{"path":"a"}`)
	if err != nil || res.GetOutput() != "ok" {
		t.Fatalf("CallTool = %v, %v", res, err)
	}
	c := <-got
	if c.GetServerName() != "files" || c.GetToolName() != "read" || c.GetArguments() != `{"path":"a"}` {
		t.Errorf("call = %v", c)
	}
	if d := c.GetTimeout().AsDuration(); d <= 0 || d > time.Minute {
		t.Errorf("timeout = %v; want the caller's remaining minute", d)
	}
	if tp := c.GetTraceContext()["traceparent"]; !strings.Contains(tp, traceID.String()) {
		t.Errorf("traceparent = %q; want trace %s", tp, traceID)
	}
}

// TestBridgeCallStreamEnds: calls cut short by the stream's end fail with
// the bridge's status, translated.
func TestBridgeCallStreamEnds(t *testing.T) {
	t.Parallel()
	fake := &fakeBridgeService{}
	conn := dial(t, func(r grpc.ServiceRegistrar) {
		bridgev1.RegisterBridgeServiceServer(r, &endingBridge{fakeBridgeService: fake})
	})
	sess, err := server.NewBridgeClient(conn).OpenSession(t.Context(), &bridgev1.OpenSessionRequest{}, nil)
	if err != nil {
		t.Fatalf("OpenSession: %v", err)
	}
	defer sess.Close(context.Background())
	_, err = sess.CallTool(t.Context(), "files", "read", "{}")
	if fault.KindOf(err) != fault.Unavailable || !strings.Contains(err.Error(), "restarting") {
		t.Errorf("CallTool = %v; want the bridge's Unavailable", err)
	}
}

// endingBridge ends every CallTools stream with Unavailable at its first
// call.
type endingBridge struct{ *fakeBridgeService }

func (endingBridge) CallTools(s grpc.BidiStreamingServer[bridgev1.CallToolsRequest, bridgev1.CallToolsResponse]) error {
	for {
		req, err := s.Recv()
		if err != nil {
			return err
		}
		if req.GetCall() != nil {
			return status.Error(codes.Unavailable, "the bridge is restarting")
		}
	}
}

// TestBridgeCallLargeArguments: a call over the bridge's receive limit
// fails alone, before it is sent; the session goes on.
func TestBridgeCallLargeArguments(t *testing.T) {
	t.Parallel()
	sess := openFake(t, &fakeBridgeService{})
	big := `{"text":"` + strings.Repeat("x", 5<<20) + `"}`
	_, err := sess.CallTool(t.Context(), "files", "write", big)
	if fault.KindOf(err) != fault.Exhausted || !strings.Contains(err.Error(), `"write"`) {
		t.Errorf("CallTool with 5 MiB of arguments = %v; want Exhausted naming the tool", err)
	}
	if res, err := sess.CallTool(t.Context(), "files", "read", "{}"); err != nil || res.GetOutput() != "ok" {
		t.Errorf("the next CallTool = %v, %v; want ok", res, err)
	}
}

// TestBridgeCallStreamParks: a generation that waits for its client's
// approval, with no call in flight, closes its session's idle CallTools
// stream (issue 15: a waiting generation holds none of a stream's
// goroutines, on either end); the approved call opens another, and the
// generation completes. A call that starts while the stream is open uses
// it: only the wait parks.
func TestBridgeCallStreamParks(t *testing.T) {
	t.Parallel()
	var opened atomic.Int32
	ended := make(chan struct{}, 4)
	fake := &fakeBridgeService{
		onList: listFiles,
		onCall: func(req *bridgev1.CallToolRequest) (*bridgev1.CallToolResponse, error) {
			return &bridgev1.CallToolResponse{Output: req.GetToolName() + " ok"}, nil
		},
		onStream: func() func() {
			opened.Add(1)
			return func() { ended <- struct{}{} }
		},
	}
	conn := dial(t, func(r grpc.ServiceRegistrar) { bridgev1.RegisterBridgeServiceServer(r, fake) })
	client := newClient(t, server.NewBridgeClient(conn), recordingScript())
	agent := writeGated(t, `{"turns": [{"tool_calls": [{"name": "read"}, {"name": "read"}]}, {"tool_calls": [{"name": "write"}]}, {"text": "done"}]}`)
	events, st := generate(t, client, &agentdv1.StartGeneration{Agent: agent, Messages: userSays("go")}, func(ev *agentdv1.GenerateResponse, s stream) {
		if r := ev.GetApprovalRequest(); r != nil {
			<-ended // the stream the reads used, parked
			if opened.Load() != 1 {
				t.Errorf("%d CallTools streams before the approval, want 1", opened.Load())
			}
			_ = s.Send(approve(r.GetId(), "", true))
		}
	})
	wantCode(t, st, codes.OK)
	outputs := toolOutputs(events)
	if diff := cmp.Diff([]string{"read ok", "read ok", "write ok"}, outputs); diff != "" {
		t.Errorf("tool outputs (-want +got):\n%s", diff)
	}
	if n := opened.Load(); n != 2 {
		t.Errorf("%d CallTools streams, want 2 (one before the wait, one after)", n)
	}
}

// TestBridgeSessionResumes: a generation that waits for its client's
// approval, with no call in flight, closes its bridge session altogether
// if the embedded bridge said it is resumable (its servers are shared
// processes: it holds nothing of its own), and the approved call runs on
// a session opened for it; the generation completes and closes that one.
// A session that is not resumable stays open through the wait (only its
// idle tool-call stream parks: TestBridgeCallStreamParks), and so does one
// on replicated bridges, whose next session could open on another replica
// with another shared process.
func TestBridgeSessionResumes(t *testing.T) {
	t.Parallel()
	embedded := func(t *testing.T, fake *fakeBridgeService) server.Bridge {
		return server.NewBridgeClient(dial(t, func(r grpc.ServiceRegistrar) { bridgev1.RegisterBridgeServiceServer(r, fake) }))
	}
	replicated := func(t *testing.T, fake *fakeBridgeService) server.Bridge {
		return replicatedClient(t, startReplica(t, "only", fake))
	}
	for _, tc := range []struct {
		name      string
		resumable bool
		bridge    func(*testing.T, *fakeBridgeService) server.Bridge
		// openDuringWait: the sessions open while the approval waits;
		// sessions: those the calls ran on.
		openDuringWait int
		sessions       []string
	}{
		{"resumable", true, embedded, 0, []string{"sess-1", "sess-2"}},
		{"not resumable", false, embedded, 1, []string{"sess-1", "sess-1"}},
		{"resumable on replicated bridges", true, replicated, 1, []string{"sess-1", "sess-1"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			var mu sync.Mutex
			var sessions []string
			fake := &fakeBridgeService{
				resumable: tc.resumable,
				onList:    listFiles,
				onCall: func(req *bridgev1.CallToolRequest) (*bridgev1.CallToolResponse, error) {
					mu.Lock()
					sessions = append(sessions, req.GetSessionId())
					mu.Unlock()
					return &bridgev1.CallToolResponse{Output: req.GetToolName() + " ok"}, nil
				},
			}
			client := newClient(t, tc.bridge(t, fake), recordingScript())
			agent := writeGated(t, `{"turns": [{"tool_calls": [{"name": "read"}]}, {"tool_calls": [{"name": "write"}]}, {"text": "done"}]}`)
			open := func() int {
				fake.mu.Lock()
				defer fake.mu.Unlock()
				return len(fake.sessions)
			}
			events, st := generate(t, client, &agentdv1.StartGeneration{Agent: agent, Messages: userSays("go")}, func(ev *agentdv1.GenerateResponse, s stream) {
				if r := ev.GetApprovalRequest(); r != nil {
					if tc.openDuringWait == 0 {
						waitFor(t, func() bool { return open() == 0 }) // closed in the background
					}
					if n := open(); n != tc.openDuringWait {
						t.Errorf("%d bridge sessions open while the approval waits, want %d", n, tc.openDuringWait)
					}
					_ = s.Send(approve(r.GetId(), "", true))
				}
			})
			wantCode(t, st, codes.OK)
			outputs := toolOutputs(events)
			if diff := cmp.Diff([]string{"read ok", "write ok"}, outputs); diff != "" {
				t.Errorf("tool outputs (-want +got):\n%s", diff)
			}
			mu.Lock()
			defer mu.Unlock()
			if diff := cmp.Diff(tc.sessions, sessions); diff != "" {
				t.Errorf("the sessions the calls ran on (-want +got):\n%s", diff)
			}
			// The generation closes its session once its stream has ended.
			waitFor(t, func() bool { return open() == 0 })
		})
	}
}

// TestBridgeSessionBringsTools: agentd opens a generation's bridge session
// asking for the cached tool lists (list_cached_tools); when the session
// brings them, the generation offers them without a ListTools call, and
// when it does not, ListTools lists them as before. A session the
// generation opens after its first (after a wait, on a resumable bridge)
// does not ask again.
func TestBridgeSessionBringsTools(t *testing.T) {
	t.Parallel()
	for _, bring := range []bool{true, false} {
		t.Run(fmt.Sprintf("brings=%v", bring), func(t *testing.T) {
			t.Parallel()
			var mu sync.Mutex
			var asked []bool
			fake := &fakeBridgeService{
				resumable:  true,
				bringTools: bring,
				onOpen: func(req *bridgev1.OpenSessionRequest) error {
					mu.Lock()
					asked = append(asked, req.GetListCachedTools())
					mu.Unlock()
					return nil
				},
				onList: listFiles,
				onCall: func(req *bridgev1.CallToolRequest) (*bridgev1.CallToolResponse, error) {
					return &bridgev1.CallToolResponse{Output: req.GetToolName() + " ok"}, nil
				},
			}
			conn := dial(t, func(r grpc.ServiceRegistrar) { bridgev1.RegisterBridgeServiceServer(r, fake) })
			client := newClient(t, server.NewBridgeClient(conn), recordingScript())
			agent := writeGated(t, `{"turns": [{"tool_calls": [{"name": "write"}]}, {"text": "done"}]}`)
			events, st := generate(t, client, &agentdv1.StartGeneration{Agent: agent, Messages: userSays("go")}, func(ev *agentdv1.GenerateResponse, s stream) {
				if r := ev.GetApprovalRequest(); r != nil {
					_ = s.Send(approve(r.GetId(), "", true))
				}
			})
			wantCode(t, st, codes.OK)
			var offered []string
			var outputs []string
			for _, ev := range events {
				for _, tool := range ev.GetStarted().GetTools() {
					offered = append(offered, tool.GetName())
				}
				if f := ev.GetToolCallFinished(); f != nil {
					outputs = append(outputs, f.GetOutput())
				}
			}
			if diff := cmp.Diff([]string{"read", "write"}, offered); diff != "" {
				t.Errorf("the tools offered (-want +got):\n%s", diff)
			}
			if diff := cmp.Diff([]string{"write ok"}, outputs); diff != "" {
				t.Errorf("tool outputs (-want +got):\n%s", diff)
			}
			wantLists := int32(1)
			if bring {
				wantLists = 0
			}
			if n := fake.listCalls.Load(); n != wantLists {
				t.Errorf("%d ListTools calls, want %d", n, wantLists)
			}
			mu.Lock()
			defer mu.Unlock()
			if diff := cmp.Diff([]bool{true, false}, asked); diff != "" {
				t.Errorf("list_cached_tools of the sessions opened, the first and the one after the wait (-want +got):\n%s", diff)
			}
		})
	}
}

// TestBridgeSessionKeptWhileCallsRun: a wait that begins while a call of
// the same turn is under way (started, even if it has not reached the
// bridge yet) keeps a resumable session: the call is using it, and closing
// it would only make the call open another.
func TestBridgeSessionKeptWhileCallsRun(t *testing.T) {
	t.Parallel()
	release := make(chan struct{})
	var mu sync.Mutex
	var sessions []string
	fake := &fakeBridgeService{
		resumable: true,
		onList:    listFiles,
		onCall: func(req *bridgev1.CallToolRequest) (*bridgev1.CallToolResponse, error) {
			if req.GetToolName() == "read" {
				<-release
			}
			mu.Lock()
			sessions = append(sessions, req.GetSessionId())
			mu.Unlock()
			return &bridgev1.CallToolResponse{Output: req.GetToolName() + " ok"}, nil
		},
	}
	conn := dial(t, func(r grpc.ServiceRegistrar) { bridgev1.RegisterBridgeServiceServer(r, fake) })
	client := newClient(t, server.NewBridgeClient(conn), recordingScript())
	agent := writeGated(t, `{"turns": [{"tool_calls": [{"name": "read"}, {"name": "write"}]}, {"text": "done"}]}`)
	_, st := generate(t, client, &agentdv1.StartGeneration{Agent: agent, Messages: userSays("go")}, func(ev *agentdv1.GenerateResponse, s stream) {
		if r := ev.GetApprovalRequest(); r != nil {
			close(release)
			_ = s.Send(approve(r.GetId(), "", true))
		}
	})
	wantCode(t, st, codes.OK)
	mu.Lock()
	defer mu.Unlock()
	if diff := cmp.Diff([]string{"sess-1", "sess-1"}, sessions); diff != "" {
		t.Errorf("the sessions the calls ran on (-want +got):\n%s", diff)
	}
	fake.mu.Lock()
	defer fake.mu.Unlock()
	if fake.opened != 1 {
		t.Errorf("%d sessions opened, want 1", fake.opened)
	}
}

// listFiles answers ListTools with the files server's read and write.
func listFiles(*bridgev1.ListToolsRequest) (*bridgev1.ListToolsResponse, error) {
	return &bridgev1.ListToolsResponse{Servers: []*bridgev1.ServerTools{serverTools("files", "read", "write")}}, nil
}

// writeGated is an agent of the script provider playing turns, whose one
// server, files (listFiles), offers read and write, write needing an
// approval.
func writeGated(t *testing.T, turns string) *agentdv1.Agent {
	t.Helper()
	return &agentdv1.Agent{
		Provider:         "script",
		Mcps:             []*agentdv1.MCPServer{refServer("files", "files")},
		RequiresApproval: []string{"write"},
		ProviderOptions:  script(t, turns),
	}
}

// toolOutputs are the outputs of the tool_call_finished events, in order.
func toolOutputs(events []*agentdv1.GenerateResponse) []string {
	var out []string
	for _, ev := range events {
		if f := ev.GetToolCallFinished(); f != nil {
			out = append(out, f.GetOutput())
		}
	}
	return out
}
