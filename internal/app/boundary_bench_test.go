package app_test

import (
	"context"
	"net"
	"testing"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/test/bufconn"

	bridgev1 "github.com/agentd/agentd/gen/go/agentd/bridge/v1"
	"github.com/agentd/agentd/internal/grpcserver"
)

// relayCalls is a BridgeService whose CallTools makes each call with call,
// on the handler's goroutine, and sends a canned result: a gRPC boundary
// with nothing of the bridge's behind it.
type relayCalls struct {
	bridgev1.UnimplementedBridgeServiceServer
	call func()
}

func (r relayCalls) CallTools(stream grpc.BidiStreamingServer[bridgev1.CallToolsRequest, bridgev1.CallToolsResponse]) error {
	result := &bridgev1.CallToolResponse{Output: "Echo: hello"}
	for {
		req, err := stream.Recv()
		if err != nil {
			return nil
		}
		if c := req.GetCall(); c != nil {
			r.call()
			if err := stream.Send(&bridgev1.CallToolsResponse{Id: c.GetId(), Outcome: &bridgev1.CallToolsResponse_Result{Result: result}}); err != nil {
				return err
			}
		}
	}
}

// bareBoundary returns a function that makes call behind the least a
// gRPC boundary costs: one round trip of a tool call's messages on a
// CallTools stream to relayCalls, over an in-memory listener, with
// grpc-go's defaults and agentd's in-memory dial options, no interceptors
// or stats handlers, and Send and Recv on the caller's goroutine.
func bareBoundary(b *testing.B, call func()) func() {
	b.Helper()
	lis := bufconn.Listen(1 << 20)
	srv := grpc.NewServer()
	bridgev1.RegisterBridgeServiceServer(srv, relayCalls{call: call})
	go func() { _ = srv.Serve(lis) }()
	conn, err := grpc.NewClient("passthrough:///boundary", append(grpcserver.InMemoryDialOptions(),
		grpc.WithTransportCredentials(insecure.NewCredentials()),
		grpc.WithContextDialer(func(ctx context.Context, _ string) (net.Conn, error) { return lis.DialContext(ctx) }))...)
	if err != nil {
		b.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	stream, err := bridgev1.NewBridgeServiceClient(conn).CallTools(ctx)
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() {
		cancel()
		conn.Close()
		srv.Stop()
	})
	var id uint64
	round := func() {
		id++
		req := &bridgev1.CallToolsRequest{Kind: &bridgev1.CallToolsRequest_Call{Call: &bridgev1.StreamedToolCall{
			Id: id, ServerName: "tools", ToolName: "echo", Arguments: `{"text":"hello"}`,
		}}}
		if err := stream.Send(req); err != nil {
			b.Fatal(err)
		}
		if _, err := stream.Recv(); err != nil {
			b.Fatal(err)
		}
	}
	round()
	return round
}
