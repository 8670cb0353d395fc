package server_test

import (
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/google/go-cmp/cmp"
	"google.golang.org/genproto/googleapis/rpc/errdetails"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/protoadapt"
	"google.golang.org/protobuf/testing/protocmp"

	bridgev1 "github.com/agentd/agentd/gen/go/agentd/bridge/v1"
	agentdv1 "github.com/agentd/agentd/gen/go/agentd/v1"
	"github.com/agentd/agentd/internal/bridgeclient"
	"github.com/agentd/agentd/internal/bridgetest"
	"github.com/agentd/agentd/internal/testwait"
	"github.com/agentd/agentd/server"
)

// statusWith builds a bridge status with details.
func statusWith(t *testing.T, code codes.Code, msg string, details ...protoadapt.MessageV1) error {
	t.Helper()
	st, err := status.New(code, msg).WithDetails(details...)
	if err != nil {
		t.Fatal(err)
	}
	return st.Err()
}

// TestBridgeErrors proves that bridgeclient translates the bridge's
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
		bridge     func(t *testing.T) *bridgetest.Service
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
			bridge: func(t *testing.T) *bridgetest.Service {
				return &bridgetest.Service{OnList: readsFiles, OnCall: func(*bridgev1.CallToolRequest) (*bridgev1.CallToolResponse, error) {
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
			bridge: func(t *testing.T) *bridgetest.Service {
				return &bridgetest.Service{OnOpen: func(*bridgev1.OpenSessionRequest) error {
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
			bridge: func(t *testing.T) *bridgetest.Service {
				return &bridgetest.Service{OnOpen: func(*bridgev1.OpenSessionRequest) error {
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
			bridge: func(t *testing.T) *bridgetest.Service {
				return &bridgetest.Service{OnOpen: func(*bridgev1.OpenSessionRequest) error {
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
			bridge: func(*testing.T) *bridgetest.Service {
				return &bridgetest.Service{OnList: readsFiles, OnCall: func(*bridgev1.CallToolRequest) (*bridgev1.CallToolResponse, error) {
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
			bridge: func(*testing.T) *bridgetest.Service {
				return &bridgetest.Service{OnList: readsFiles, OnCall: func(*bridgev1.CallToolRequest) (*bridgev1.CallToolResponse, error) {
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
				fake.UnaryOnly = unary
				conn := dial(t, func(r grpc.ServiceRegistrar) { bridgev1.RegisterBridgeServiceServer(r, fake) })
				prov := urlProvider()
				client := newClient(t, bridgeclient.New(conn), prov, recordingScript())
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
				testwait.For(t, "the sessions closed", func() bool { return fake.Closed() >= tt.wantCloses })
				if got := fake.Closed(); got != tt.wantCloses {
					t.Errorf("CloseSession called %d times; want %d", got, tt.wantCloses)
				}
				if n := len(prov.calls()); n != 0 {
					t.Errorf("provider called %d times; want 0", n)
				}
			})
		}
	}
}

// TestBridgeCallStreamParks: a generation that waits for its client's
// approval, with no call in flight, closes its session's idle CallTools
// stream (a waiting generation holds none of a stream's goroutines, on
// either end); the approved call opens another, and the generation
// completes. A call that starts while the stream is open uses it: only
// the wait parks.
func TestBridgeCallStreamParks(t *testing.T) {
	t.Parallel()
	var opened atomic.Int32
	ended := make(chan struct{}, 4)
	fake := &bridgetest.Service{
		OnList: listFiles,
		OnCall: func(req *bridgev1.CallToolRequest) (*bridgev1.CallToolResponse, error) {
			return &bridgev1.CallToolResponse{Output: req.GetToolName() + " ok"}, nil
		},
		OnStream: func() func() {
			opened.Add(1)
			return func() { ended <- struct{}{} }
		},
	}
	conn := dial(t, func(r grpc.ServiceRegistrar) { bridgev1.RegisterBridgeServiceServer(r, fake) })
	client := newClient(t, bridgeclient.New(conn), recordingScript())
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
	embedded := func(t *testing.T, fake *bridgetest.Service) server.Bridge {
		return bridgeclient.New(dial(t, func(r grpc.ServiceRegistrar) { bridgev1.RegisterBridgeServiceServer(r, fake) }))
	}
	replicated := func(t *testing.T, fake *bridgetest.Service) server.Bridge {
		return bridgeclient.NewReplicated(bridgetest.DialReplicas(t, bridgetest.StartReplica(t, "only", fake)), slog.New(slog.DiscardHandler))
	}
	for _, tc := range []struct {
		name      string
		resumable bool
		bridge    func(*testing.T, *bridgetest.Service) server.Bridge
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
			fake := &bridgetest.Service{
				Resumable: tc.resumable,
				OnList:    listFiles,
				OnCall: func(req *bridgev1.CallToolRequest) (*bridgev1.CallToolResponse, error) {
					mu.Lock()
					sessions = append(sessions, req.GetSessionId())
					mu.Unlock()
					return &bridgev1.CallToolResponse{Output: req.GetToolName() + " ok"}, nil
				},
			}
			client := newClient(t, tc.bridge(t, fake), recordingScript())
			agent := writeGated(t, `{"turns": [{"tool_calls": [{"name": "read"}]}, {"tool_calls": [{"name": "write"}]}, {"text": "done"}]}`)
			open := fake.Open
			events, st := generate(t, client, &agentdv1.StartGeneration{Agent: agent, Messages: userSays("go")}, func(ev *agentdv1.GenerateResponse, s stream) {
				if r := ev.GetApprovalRequest(); r != nil {
					if tc.openDuringWait == 0 {
						testwait.For(t, "every session closed", func() bool { return open() == 0 }) // closed in the background
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
			testwait.For(t, "every session closed", func() bool { return open() == 0 })
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
			fake := &bridgetest.Service{
				Resumable:  true,
				BringTools: bring,
				OnOpen: func(req *bridgev1.OpenSessionRequest) error {
					mu.Lock()
					asked = append(asked, req.GetListCachedTools())
					mu.Unlock()
					return nil
				},
				OnList: listFiles,
				OnCall: func(req *bridgev1.CallToolRequest) (*bridgev1.CallToolResponse, error) {
					return &bridgev1.CallToolResponse{Output: req.GetToolName() + " ok"}, nil
				},
			}
			conn := dial(t, func(r grpc.ServiceRegistrar) { bridgev1.RegisterBridgeServiceServer(r, fake) })
			client := newClient(t, bridgeclient.New(conn), recordingScript())
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
			if n := fake.ListCalls.Load(); n != wantLists {
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
	fake := &bridgetest.Service{
		Resumable: true,
		OnList:    listFiles,
		OnCall: func(req *bridgev1.CallToolRequest) (*bridgev1.CallToolResponse, error) {
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
	client := newClient(t, bridgeclient.New(conn), recordingScript())
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
	if n := fake.Opened(); n != 1 {
		t.Errorf("%d sessions opened, want 1", n)
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
