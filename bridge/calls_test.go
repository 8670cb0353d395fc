package bridge

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"go.opentelemetry.io/otel/propagation"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.opentelemetry.io/otel/trace"
	"google.golang.org/genproto/googleapis/rpc/errdetails"
	spb "google.golang.org/genproto/googleapis/rpc/status"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/durationpb"

	bridgev1 "github.com/agentd/agentd/gen/go/agentd/bridge/v1"
	"github.com/agentd/agentd/internal/config"
	"github.com/agentd/agentd/internal/mcptest"
	"github.com/agentd/agentd/internal/telemetry"
	"github.com/agentd/agentd/internal/testwait"
)

type callsStream = grpc.BidiStreamingClient[bridgev1.CallToolsRequest, bridgev1.CallToolsResponse]

// openCalls opens a CallTools stream on session id.
func openCalls(t *testing.T, ctx context.Context, client bridgev1.BridgeServiceClient, id string) callsStream {
	t.Helper()
	stream, err := client.CallTools(ctx)
	if err != nil {
		t.Fatalf("CallTools: %v", err)
	}
	send(t, stream, &bridgev1.CallToolsRequest{Kind: &bridgev1.CallToolsRequest_Open{Open: &bridgev1.CallToolsOpen{SessionId: id}}})
	return stream
}

func send(t *testing.T, stream callsStream, req *bridgev1.CallToolsRequest) {
	t.Helper()
	if err := stream.Send(req); err != nil {
		t.Fatalf("Send: %v", err)
	}
}

func startCall(t *testing.T, stream callsStream, id uint64, server, tool, args string) {
	t.Helper()
	send(t, stream, &bridgev1.CallToolsRequest{Kind: &bridgev1.CallToolsRequest_Call{Call: &bridgev1.StreamedToolCall{Id: id, ServerName: server, ToolName: tool, Arguments: args}}})
}

func cancelCall(t *testing.T, stream callsStream, id uint64) {
	t.Helper()
	send(t, stream, &bridgev1.CallToolsRequest{Kind: &bridgev1.CallToolsRequest_Cancel{Cancel: id}})
}

func recvAnswer(t *testing.T, stream callsStream) *bridgev1.CallToolsResponse {
	t.Helper()
	res, err := stream.Recv()
	if err != nil {
		t.Fatalf("Recv: %v", err)
	}
	return res
}

// answerCode is the gRPC code of an answer: OK for a result.
func answerCode(res *bridgev1.CallToolsResponse) codes.Code {
	if e := res.GetError(); e != nil {
		return codes.Code(e.GetCode())
	}
	return codes.OK
}

// TestCallTools runs calls over one stream: they run concurrently and are
// answered by id as they finish; a cancelled call is answered Canceled; a
// tool's own failure is a result; a failure of the call is the status
// CallTool would have returned; after a half-close the running calls still
// answer, then the stream ends.
func TestCallTools(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	id, _ := open(t, t.Context(), f.client, refSpec("t", "tools"))
	stream := openCalls(t, t.Context(), f.client, id)

	startCall(t, stream, 1, "t", "hang", "")
	startCall(t, stream, 2, "t", "echo", `{"text":"hi"}`)
	if res := recvAnswer(t, stream); res.GetId() != 2 || res.GetResult().GetOutput() != "hi" {
		t.Fatalf("first answer = %v; want call 2's echo while call 1 hangs", res)
	}
	cancelCall(t, stream, 1)
	if res := recvAnswer(t, stream); res.GetId() != 1 || answerCode(res) != codes.Canceled {
		t.Fatalf("answer to the cancelled call = %v; want Canceled", res)
	}
	cancelCall(t, stream, 99) // unknown: ignored

	startCall(t, stream, 3, "t", "fail", `{"text":"no such file"}`)
	if res := recvAnswer(t, stream); res.GetId() != 3 || !res.GetResult().GetIsError() {
		t.Fatalf("answer to a failing tool = %v; want a result with is_error", res)
	}
	startCall(t, stream, 4, "nope", "echo", "")
	if res := recvAnswer(t, stream); res.GetId() != 4 || answerCode(res) != codes.NotFound {
		t.Fatalf("answer to a call of an unknown server = %v; want NotFound", res)
	}

	startCall(t, stream, 5, "t", "echo", `{"text":"last"}`)
	if err := stream.CloseSend(); err != nil {
		t.Fatal(err)
	}
	if res := recvAnswer(t, stream); res.GetId() != 5 || res.GetResult().GetOutput() != "last" {
		t.Fatalf("answer after the half-close = %v; want call 5's echo", res)
	}
	if _, err := stream.Recv(); !errors.Is(err, io.EOF) {
		t.Errorf("stream after the half-close and the last answer: %v; want EOF", err)
	}
}

// TestCallToolsErrors: a call's failure carries what CallTool's status
// would (here the timeout's ErrorInfo); a call's own timeout is
// DeadlineExceeded. X-H6: the hanging call runs on a warm spare, so its
// short read_timeout bounds it alone, never a handshake.
func TestCallToolsErrors(t *testing.T) {
	t.Parallel()
	f, spec := slowFixture(t)
	id, _ := open(t, t.Context(), f.client, spec, refSpec("t", "tools"))
	stream := openCalls(t, t.Context(), f.client, id)

	startCall(t, stream, 1, "slow", "hang", "")
	res := recvAnswer(t, stream)
	st := status.FromProto(&spb.Status{Code: res.GetError().GetCode(), Message: res.GetError().GetMessage(), Details: res.GetError().GetDetails()})
	if st.Code() != codes.DeadlineExceeded {
		t.Fatalf("answer = %v; want DeadlineExceeded", res)
	}
	var info *errdetails.ErrorInfo
	for _, d := range st.Details() {
		if i, ok := d.(*errdetails.ErrorInfo); ok {
			info = i
		}
	}
	if info.GetReason() != "MCP_TIMEOUT" || info.GetMetadata()["server"] != "slow" {
		t.Errorf("ErrorInfo = %v; want MCP_TIMEOUT naming the server", info)
	}

	send(t, stream, &bridgev1.CallToolsRequest{Kind: &bridgev1.CallToolsRequest_Call{Call: &bridgev1.StreamedToolCall{
		Id: 2, ServerName: "t", ToolName: "hang", Timeout: durationpb.New(100 * time.Millisecond),
	}}})
	if res := recvAnswer(t, stream); res.GetId() != 2 || answerCode(res) != codes.DeadlineExceeded {
		t.Errorf("answer to a call past its timeout = %v; want DeadlineExceeded", res)
	}
}

// TestCallToolsOpen: a stream must open first, once, on an open session,
// and its running calls' ids must differ.
func TestCallToolsOpen(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	id, _ := open(t, t.Context(), f.client, refSpec("t", "tools"))
	openMsg := &bridgev1.CallToolsRequest{Kind: &bridgev1.CallToolsRequest_Open{Open: &bridgev1.CallToolsOpen{SessionId: id}}}
	hang := &bridgev1.CallToolsRequest{Kind: &bridgev1.CallToolsRequest_Call{Call: &bridgev1.StreamedToolCall{Id: 7, ServerName: "t", ToolName: "hang"}}}
	tests := []struct {
		name  string
		first *bridgev1.CallToolsRequest
		then  []*bridgev1.CallToolsRequest
		want  codes.Code
	}{
		{
			name:  "a call before open",
			first: &bridgev1.CallToolsRequest{Kind: &bridgev1.CallToolsRequest_Call{Call: &bridgev1.StreamedToolCall{Id: 1, ServerName: "t", ToolName: "echo"}}},
			want:  codes.InvalidArgument,
		},
		{
			name:  "an unknown session",
			first: &bridgev1.CallToolsRequest{Kind: &bridgev1.CallToolsRequest_Open{Open: &bridgev1.CallToolsOpen{SessionId: "unknown"}}},
			want:  codes.NotFound,
		},
		{
			name:  "open twice",
			first: openMsg,
			then:  []*bridgev1.CallToolsRequest{openMsg},
			want:  codes.InvalidArgument,
		},
		{
			name:  "an id that a running call has",
			first: openMsg,
			then:  []*bridgev1.CallToolsRequest{hang, hang},
			want:  codes.InvalidArgument,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			stream, err := f.client.CallTools(t.Context())
			if err != nil {
				t.Fatal(err)
			}
			send(t, stream, tt.first)
			for _, m := range tt.then {
				send(t, stream, m)
			}
			for { // the running call's answer (Canceled) may come first
				if _, err = stream.Recv(); err != nil {
					break
				}
			}
			wantCode(t, err, tt.want)
		})
	}
}

// TestCallToolsSessionCloses: closing the session answers the running
// calls FailedPrecondition (nobody cancelled them; and their server was
// stopped by the close, not on its own: X-L8 does not apply), then ends the
// stream, without an error. X-H6: the session closes once the call runs on
// the server, not after a guess at how long that takes.
func TestCallToolsSessionCloses(t *testing.T) {
	t.Parallel()
	// stall pings agentd as soon as it runs, and says so on stderr once
	// agentd answered.
	logger, running := mcptest.WatchStderr("mcptest: ping answered")
	f := newFixtureOptions(t, nil, func(o *Options) { o.Logger = logger })
	id, _ := open(t, t.Context(), f.client, refSpec("t", "tools"))
	stream := openCalls(t, t.Context(), f.client, id)
	startCall(t, stream, 1, "t", "stall", "")
	testwait.Recv(t, running, "the call to run")

	if _, err := f.client.CloseSession(t.Context(), &bridgev1.CloseSessionRequest{SessionId: id}); err != nil {
		t.Fatal(err)
	}
	if res := recvAnswer(t, stream); res.GetId() != 1 || answerCode(res) != codes.FailedPrecondition {
		t.Fatalf("answer to the call the close cut short = %v; want FailedPrecondition", res)
	}
	if res, err := stream.Recv(); !errors.Is(err, io.EOF) {
		t.Fatalf("stream after the session closed: %v, %v; want EOF", res, err)
	}
}

// tracedCall calls the tools server's tool with args on a session of f,
// in a trace of its own: it returns the call's remote parent span and
// the answer.
func tracedCall(t *testing.T, f *fixture, tool, args string) (trace.SpanContext, *bridgev1.CallToolsResponse) {
	t.Helper()
	id, _ := open(t, t.Context(), f.client, refSpec("t", "tools"))
	stream := openCalls(t, t.Context(), f.client, id)
	parent := trace.NewSpanContext(trace.SpanContextConfig{
		TraceID: trace.TraceID{0xa, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15},
		SpanID:  trace.SpanID{0xb, 1, 2, 3, 4, 5, 6, 7}, TraceFlags: trace.FlagsSampled,
	})
	carrier := propagation.MapCarrier{}
	telemetry.Propagator().Inject(trace.ContextWithSpanContext(t.Context(), parent), carrier)
	send(t, stream, &bridgev1.CallToolsRequest{Kind: &bridgev1.CallToolsRequest_Call{Call: &bridgev1.StreamedToolCall{
		Id: 1, ServerName: "t", ToolName: tool, Arguments: args, TraceContext: carrier,
	}}})
	return parent, recvAnswer(t, stream)
}

// TestCallToolsTrace: a call's span joins the trace its call carries.
func TestCallToolsTrace(t *testing.T) {
	t.Parallel()
	spans := tracetest.NewSpanRecorder()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(spans))
	f := newFixtureOptions(t, nil, func(o *Options) { o.TracerProvider = tp })
	parent, _ := tracedCall(t, f, "echo", `{"text":"traced"}`)

	var got []string
	for _, sp := range spans.Ended() {
		if sp.Name() != "tools/call echo" {
			continue
		}
		got = append(got, sp.Name())
		if sp.SpanContext().TraceID() != parent.TraceID() || sp.Parent().SpanID() != parent.SpanID() || !sp.Parent().IsRemote() {
			t.Errorf("span %s: trace %s parent %s; want a child of the call's remote parent %s/%s",
				sp.Name(), sp.SpanContext().TraceID(), sp.Parent().SpanID(), parent.TraceID(), parent.SpanID())
		}
	}
	if diff := cmp.Diff([]string{"tools/call echo"}, got); diff != "" {
		t.Errorf("tool call spans (-want +got):\n%s", diff)
	}
}

// X-O3: a bridged call's trace context reaches the MCP server, in the
// request's params._meta: the trace of the call, under the bridge's own
// tools/call span.
func TestCallToolsTraceReachesTheServer(t *testing.T) {
	t.Parallel()
	spans := tracetest.NewSpanRecorder()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(spans))
	f := newFixtureOptions(t, nil, func(o *Options) { o.TracerProvider = tp })
	parent, res := tracedCall(t, f, "meta", `{}`)
	var meta struct {
		Traceparent string `json:"traceparent"`
	}
	if err := json.Unmarshal([]byte(res.GetResult().GetOutput()), &meta); err != nil {
		t.Fatalf("the meta tool answered %v: %v", res, err)
	}
	var callSpan trace.SpanContext
	for _, sp := range spans.Ended() {
		if sp.Name() == "tools/call meta" {
			callSpan = sp.SpanContext()
		}
	}
	if want := "00-" + parent.TraceID().String() + "-" + callSpan.SpanID().String() + "-01"; meta.Traceparent != want {
		t.Errorf("the server saw traceparent %q; want %q (the call's trace, the bridge's tools/call span)", meta.Traceparent, want)
	}
}

// TestCallToolsLargeAnswer: an answer over gRPC's default receive limit
// fails its call alone; the stream goes on.
func TestCallToolsLargeAnswer(t *testing.T) {
	t.Parallel()
	f := newFixtureWith(t, func(c *config.Bridge) { c.MaxResultBytes = 8 << 20 })
	id, _ := open(t, t.Context(), f.client, refSpec("t", "tools"))
	stream := openCalls(t, t.Context(), f.client, id)
	startCall(t, stream, 1, "t", "big", fmt.Sprintf(`{"size":%d}`, 5<<20))
	if res := recvAnswer(t, stream); answerCode(res) != codes.ResourceExhausted || !strings.Contains(res.GetError().GetMessage(), `"big"`) {
		t.Fatalf("answer to a 5 MiB result = %v; want ResourceExhausted naming the tool", res)
	}
	startCall(t, stream, 2, "t", "echo", `{"text":"still here"}`)
	if res := recvAnswer(t, stream); res.GetResult().GetOutput() != "still here" {
		t.Fatalf("answer after it = %v", res)
	}
}
