package bridgeclient_test

import (
	"strings"
	"testing"

	"go.opentelemetry.io/contrib/instrumentation/google.golang.org/grpc/otelgrpc"
	"go.opentelemetry.io/otel/codes"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.opentelemetry.io/otel/trace"
	"google.golang.org/grpc"

	bridgev1 "github.com/agentd/agentd/gen/go/agentd/bridge/v1"
	"github.com/agentd/agentd/internal/bridgeclient"
	"github.com/agentd/agentd/internal/bridgetest"
)

// X-O2: a bridge session that closes as its generation pauses or ends is
// no failure: the bridge ends its OpenSession and CallTools streams, so
// their client spans (otelgrpc's, on agentd's side of the hop) end without
// an error, where cancelling the streams first marked them ERROR "context
// canceled".
func TestBridgeSessionCloseIsNotAnError(t *testing.T) {
	t.Parallel()
	rec := tracetest.NewSpanRecorder()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(rec))
	conn := bridgetest.Dial(t, &bridgetest.Service{}, grpc.WithStatsHandler(otelgrpc.NewClientHandler(otelgrpc.WithTracerProvider(tp))))

	sess, err := bridgeclient.New(conn).OpenSession(t.Context(), &bridgev1.OpenSessionRequest{}, nil)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := sess.CallTool(t.Context(), "files", "read", "{}"); err != nil {
		t.Fatal(err)
	}
	sess.Close(t.Context())

	seen := map[string]bool{}
	for _, sp := range rec.Ended() {
		if sp.SpanKind() != trace.SpanKindClient {
			continue
		}
		method := sp.Name()[strings.LastIndex(sp.Name(), "/")+1:]
		seen[method] = true
		if sp.Status().Code == codes.Error {
			t.Errorf("client span %s ended as an error: %v", sp.Name(), sp.Status())
		}
	}
	for _, m := range []string{"OpenSession", "CallTools", "CloseSession"} {
		if !seen[m] {
			t.Errorf("no client span of %s among %v", m, seen)
		}
	}
}
