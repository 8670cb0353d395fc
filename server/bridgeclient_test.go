package server_test

import (
	"context"
	"strings"
	"sync"
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
	"github.com/agentd/agentd/server"
)

// fakeBridgeService is a BridgeService whose answers come from its on*
// fields, for testing NewBridgeClient's translation of the bridge's
// statuses.
type fakeBridgeService struct {
	bridgev1.UnimplementedBridgeServiceServer

	onOpen func(*bridgev1.OpenSessionRequest) error
	onList func(*bridgev1.ListToolsRequest) (*bridgev1.ListToolsResponse, error)
	onCall func(*bridgev1.CallToolRequest) (*bridgev1.CallToolResponse, error)

	mu     sync.Mutex
	closes int
}

func (b *fakeBridgeService) OpenSession(req *bridgev1.OpenSessionRequest, s grpc.ServerStreamingServer[bridgev1.OpenSessionResponse]) error {
	if b.onOpen != nil {
		if err := b.onOpen(req); err != nil {
			return err
		}
	}
	if err := s.Send(&bridgev1.OpenSessionResponse{Event: &bridgev1.OpenSessionResponse_Opened{Opened: &bridgev1.SessionOpened{SessionId: "sess-1"}}}); err != nil {
		return err
	}
	<-s.Context().Done()
	return nil
}

func (b *fakeBridgeService) CloseSession(context.Context, *bridgev1.CloseSessionRequest) (*bridgev1.CloseSessionResponse, error) {
	b.mu.Lock()
	b.closes++
	b.mu.Unlock()
	return &bridgev1.CloseSessionResponse{}, nil
}

func (b *fakeBridgeService) ListTools(_ context.Context, req *bridgev1.ListToolsRequest) (*bridgev1.ListToolsResponse, error) {
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
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			fake := tt.bridge(t)
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
			if got := fake.closed(); got != tt.wantCloses {
				t.Errorf("CloseSession called %d times; want %d", got, tt.wantCloses)
			}
			if n := len(prov.calls()); n != 0 {
				t.Errorf("provider called %d times; want 0", n)
			}
		})
	}
}
