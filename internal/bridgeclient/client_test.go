package bridgeclient_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"go.opentelemetry.io/otel/trace"
	"go.uber.org/goleak"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	bridgev1 "github.com/agentd/agentd/gen/go/agentd/bridge/v1"
	"github.com/agentd/agentd/internal/bridgeclient"
	"github.com/agentd/agentd/internal/bridgetest"
	"github.com/agentd/agentd/internal/fault"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// openFake opens a session of New on fake.
func openFake(t *testing.T, fake *bridgetest.Service) bridgeclient.Session {
	t.Helper()
	sess, err := bridgeclient.New(bridgetest.Dial(t, fake)).OpenSession(t.Context(), &bridgev1.OpenSessionRequest{}, nil)
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
	fake := &bridgetest.Service{
		Cancels:    make(chan uint64, 1),
		OnStreamed: func(c *bridgev1.StreamedToolCall) { started <- c.GetId() },
		OnCall: func(req *bridgev1.CallToolRequest) (*bridgev1.CallToolResponse, error) {
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
	if got := <-fake.Cancels; got != id {
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
	sess := openFake(t, &bridgetest.Service{OnStreamed: func(c *bridgev1.StreamedToolCall) { got <- c }})
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
	conn := bridgetest.Dial(t, endingBridge{&bridgetest.Service{}})
	sess, err := bridgeclient.New(conn).OpenSession(t.Context(), &bridgev1.OpenSessionRequest{}, nil)
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
type endingBridge struct{ *bridgetest.Service }

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
	sess := openFake(t, &bridgetest.Service{})
	big := `{"text":"` + strings.Repeat("x", 5<<20) + `"}`
	_, err := sess.CallTool(t.Context(), "files", "write", big)
	if fault.KindOf(err) != fault.Exhausted || !strings.Contains(err.Error(), `"write"`) {
		t.Errorf("CallTool with 5 MiB of arguments = %v; want Exhausted naming the tool", err)
	}
	if res, err := sess.CallTool(t.Context(), "files", "read", "{}"); err != nil || res.GetOutput() != "ok" {
		t.Errorf("the next CallTool = %v, %v; want ok", res, err)
	}
}
