package grpcserver

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"log/slog"
	"net"
	"strings"
	"testing"
	"time"

	"github.com/agentd/agentd/internal/logtest"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
	"go.uber.org/goleak"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	reflectionpb "google.golang.org/grpc/reflection/grpc_reflection_v1"
	"google.golang.org/grpc/status"
	"google.golang.org/grpc/test/bufconn"

	"google.golang.org/protobuf/types/known/emptypb"

	"github.com/agentd/agentd/internal/telemetry"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// panicDesc is a service with one method, whose handler panics.
var panicDesc = grpc.ServiceDesc{
	ServiceName: "test.Panic",
	HandlerType: (*any)(nil),
	Methods: []grpc.MethodDesc{{
		MethodName: "Boom",
		Handler: func(_ any, ctx context.Context, dec func(any) error, interceptor grpc.UnaryServerInterceptor) (any, error) {
			in := new(emptypb.Empty)
			if err := dec(in); err != nil {
				return nil, err
			}
			handler := func(context.Context, any) (any, error) { panic("boom") }
			return interceptor(ctx, in, &grpc.UnaryServerInfo{FullMethod: "/test.Panic/Boom"}, handler)
		},
	}},
}

func TestServerRecoversAndLogs(t *testing.T) {
	t.Parallel()
	var logs logtest.Logs
	srv, hs := New(Options{Logger: telemetry.NewLogger(&logs, slog.LevelDebug, "text")})
	lis := bufconn.Listen(1 << 16)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- Serve(ctx, srv, hs, lis, time.Second) }()

	conn, err := Dial("passthrough:///x", Telemetry{}, nil, grpc.WithContextDialer(func(ctx context.Context, _ string) (net.Conn, error) { return lis.DialContext(ctx) }))
	if err != nil {
		t.Fatal(err)
	}
	res, err := healthpb.NewHealthClient(conn).Check(t.Context(), &healthpb.HealthCheckRequest{})
	if err != nil || res.GetStatus() != healthpb.HealthCheckResponse_SERVING {
		t.Fatalf("Check = %v, %v; want SERVING", res, err)
	}
	conn.Close()
	cancel()
	if err := <-done; err != nil {
		t.Fatalf("Serve: %v", err)
	}
	if !strings.Contains(logs.String(), "grpc.method=Check") {
		t.Errorf("no call log line: %s", logs.String())
	}
}

func TestRecovery(t *testing.T) {
	t.Parallel()
	var logs logtest.Logs
	srv, hs := New(Options{Logger: telemetry.NewLogger(&logs, slog.LevelInfo, "text")})
	srv.RegisterService(&panicDesc, struct{}{})
	lis := bufconn.Listen(1 << 16)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- Serve(ctx, srv, hs, lis, time.Second) }()
	conn, err := Dial("passthrough:///x", Telemetry{}, nil, grpc.WithContextDialer(func(ctx context.Context, _ string) (net.Conn, error) { return lis.DialContext(ctx) }))
	if err != nil {
		t.Fatal(err)
	}
	err = conn.Invoke(t.Context(), "/test.Panic/Boom", &emptypb.Empty{}, &emptypb.Empty{})
	if status.Code(err) != codes.Internal {
		t.Errorf("panicking handler: %v, want Internal", err)
	}
	conn.Close()
	cancel()
	<-done
	if !strings.Contains(logs.String(), "panic recovered") {
		t.Errorf("panic not logged: %s", logs.String())
	}
}

// X-I5: reflection is served unless NoReflection; health is served either
// way.
func TestReflection(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name         string
		noReflection bool
		want         codes.Code
	}{
		{"X-I5 reflection by default", false, codes.OK},
		{"X-I5 reflection turned off", true, codes.Unimplemented},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			srv, hs := New(Options{Logger: slog.New(slog.DiscardHandler), NoReflection: tc.noReflection})
			lis := bufconn.Listen(1 << 16)
			ctx, cancel := context.WithCancel(context.Background())
			done := make(chan error, 1)
			go func() { done <- Serve(ctx, srv, hs, lis, time.Second) }()
			defer func() {
				cancel()
				if err := <-done; err != nil {
					t.Errorf("Serve: %v", err)
				}
			}()
			conn, err := Dial("passthrough:///x", Telemetry{}, nil, grpc.WithContextDialer(func(ctx context.Context, _ string) (net.Conn, error) { return lis.DialContext(ctx) }))
			if err != nil {
				t.Fatal(err)
			}
			defer conn.Close()
			if _, err := healthpb.NewHealthClient(conn).Check(t.Context(), &healthpb.HealthCheckRequest{}); err != nil {
				t.Errorf("health: %v", err)
			}
			if got := status.Code(listServices(t.Context(), conn)); got != tc.want {
				t.Errorf("reflection: %v, want %v", got, tc.want)
			}
		})
	}
}

// listServices asks conn's server reflection for its services.
func listServices(ctx context.Context, conn *grpc.ClientConn) error {
	stream, err := reflectionpb.NewServerReflectionClient(conn).ServerReflectionInfo(ctx)
	if err != nil {
		return err
	}
	// A Send the server already refused is io.EOF: Recv has the status.
	if err := stream.Send(&reflectionpb.ServerReflectionRequest{MessageRequest: &reflectionpb.ServerReflectionRequest_ListServices{}}); err != nil && !errors.Is(err, io.EOF) {
		return err
	}
	_, err = stream.Recv()
	return err
}

// X-O4: health probes (Check and Watch, whatever their code) are logged
// at debug, so that at info they do not drown the calls that matter;
// other calls keep their level. grpc.time_ms is a JSON number.
func TestCallLogLevels(t *testing.T) {
	t.Parallel()
	var logs logtest.Logs
	srv, hs := New(Options{Logger: telemetry.NewLogger(&logs, slog.LevelDebug, "json")})
	srv.RegisterService(&panicDesc, struct{}{})
	lis := bufconn.Listen(1 << 16)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- Serve(ctx, srv, hs, lis, time.Second) }()
	conn, err := Dial("passthrough:///x", Telemetry{}, nil, grpc.WithContextDialer(func(ctx context.Context, _ string) (net.Conn, error) { return lis.DialContext(ctx) }))
	if err != nil {
		t.Fatal(err)
	}
	health := healthpb.NewHealthClient(conn)
	if _, err := health.Check(t.Context(), &healthpb.HealthCheckRequest{}); err != nil {
		t.Fatalf("Check: %v", err)
	}
	if _, err := health.Check(t.Context(), &healthpb.HealthCheckRequest{Service: "unknown"}); status.Code(err) != codes.NotFound {
		t.Fatalf("Check(unknown): %v; want NotFound", err)
	}
	wctx, stopWatching := context.WithCancel(t.Context())
	watch, err := health.Watch(wctx, &healthpb.HealthCheckRequest{})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := watch.Recv(); err != nil {
		t.Fatalf("Watch: %v", err)
	}
	stopWatching()
	_ = conn.Invoke(t.Context(), "/test.Panic/Boom", &emptypb.Empty{}, &emptypb.Empty{})
	conn.Close()
	cancel()
	if err := <-done; err != nil { // every handler has returned, and logged
		t.Fatalf("Serve: %v", err)
	}

	type call struct{ Method, Code, Level string }
	var got []call
	for line := range strings.Lines(logs.String()) {
		var m map[string]any
		if err := json.Unmarshal([]byte(line), &m); err != nil {
			t.Fatalf("not JSON: %q: %v", line, err)
		}
		if m["msg"] != "finished call" {
			continue
		}
		if _, ok := m["grpc.time_ms"].(float64); !ok {
			t.Errorf("grpc.time_ms = %#v; want a JSON number", m["grpc.time_ms"])
		}
		got = append(got, call{m["grpc.method"].(string), m["grpc.code"].(string), m["level"].(string)})
	}
	want := []call{
		{"Check", "OK", "DEBUG"},
		{"Check", "NotFound", "DEBUG"},
		{"Watch", "Canceled", "DEBUG"},
		{"Boom", "Internal", "ERROR"},
	}
	sortCalls := cmpopts.SortSlices(func(a, b call) bool { return a.Method+a.Code < b.Method+b.Code })
	if diff := cmp.Diff(want, got, sortCalls); diff != "" {
		t.Errorf("call lines (-want +got):\n%s", diff)
	}
}
