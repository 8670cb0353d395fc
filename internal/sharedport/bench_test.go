package sharedport_test

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"net"
	"net/http"
	"slices"
	"syscall"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/health"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	testpb "google.golang.org/grpc/interop/grpc_testing"

	"github.com/agentd/agentd/internal/sharedport"
)

// echo answers each message of a FullDuplexCall with its payload.
type echo struct {
	testpb.UnimplementedTestServiceServer
}

func (echo) FullDuplexCall(stream grpc.BidiStreamingServer[testpb.StreamingOutputCallRequest, testpb.StreamingOutputCallResponse]) error {
	for {
		req, err := stream.Recv()
		if errors.Is(err, io.EOF) {
			return nil
		}
		if err != nil {
			return err
		}
		if err := stream.Send(&testpb.StreamingOutputCallResponse{Payload: req.GetPayload()}); err != nil {
			return err
		}
	}
}

// benchServer serves health and echo over TCP on loopback, on the gRPC
// server's own listener (shared false) or on a shared port, and returns a
// connection to it.
func benchServer(b *testing.B, shared bool) *grpc.ClientConn {
	b.Helper()
	srv := grpc.NewServer()
	hs := health.NewServer()
	healthpb.RegisterHealthServer(srv, hs)
	testpb.RegisterTestServiceServer(srv, echo{})
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		b.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() {
		if !shared {
			done <- srv.Serve(lis)
			return
		}
		done <- sharedport.Serve(ctx, lis, sharedport.Options{
			GRPC: srv, Health: hs, HTTP: http.NotFoundHandler(), Grace: time.Second, Logger: slog.New(slog.DiscardHandler),
		})
	}()
	conn, err := grpc.NewClient(lis.Addr().String(), grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() {
		conn.Close()
		cancel()
		if !shared {
			srv.Stop()
		}
		<-done
	})
	return conn
}

// cpu is the CPU time this process has used.
func cpu(b *testing.B) time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		b.Fatal(err)
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// BenchmarkNativeGRPC is what sharing the port costs native gRPC: the same
// calls, in paired rounds, to a grpc.Server serving its own listener
// ("plain") and to one behind Serve ("shared"), both over TCP on loopback.
// "unary" is a health Check per call; "stream" a 1 KiB message and its echo
// on one bidirectional stream. Each round makes 200 calls to each; the
// rounds' medians are reported per call (wall and process CPU, client
// included), with the ratios shared/plain (wall) and cpu-shared/plain.
func BenchmarkNativeGRPC(b *testing.B) {
	payload := &testpb.Payload{Body: make([]byte, 1024)}
	for _, w := range []struct {
		name string
		call func(b *testing.B, conn *grpc.ClientConn) func()
	}{
		{"unary", func(b *testing.B, conn *grpc.ClientConn) func() {
			client := healthpb.NewHealthClient(conn)
			return func() {
				if _, err := client.Check(b.Context(), &healthpb.HealthCheckRequest{}); err != nil {
					b.Fatal(err)
				}
			}
		}},
		{"stream", func(b *testing.B, conn *grpc.ClientConn) func() {
			stream, err := testpb.NewTestServiceClient(conn).FullDuplexCall(b.Context())
			if err != nil {
				b.Fatal(err)
			}
			return func() {
				if err := stream.Send(&testpb.StreamingOutputCallRequest{Payload: payload}); err != nil {
					b.Fatal(err)
				}
				if _, err := stream.Recv(); err != nil {
					b.Fatal(err)
				}
			}
		}},
	} {
		b.Run(w.name, func(b *testing.B) {
			plain, shared := w.call(b, benchServer(b, false)), w.call(b, benchServer(b, true))
			const calls = 200
			// round makes the calls and returns their wall and CPU time
			// per call.
			round := func(call func()) (wall, used float64) {
				start, startCPU := time.Now(), cpu(b)
				for range calls {
					call()
				}
				return float64(time.Since(start)) / calls, float64(cpu(b)-startCPU) / calls
			}
			var pw, pc, sw, sc, ratio, cpuRatio []float64
			for b.Loop() {
				w1, c1 := round(plain)
				w2, c2 := round(shared)
				pw, pc, sw, sc = append(pw, w1), append(pc, c1), append(sw, w2), append(sc, c2)
				ratio, cpuRatio = append(ratio, w2/w1), append(cpuRatio, c2/c1)
			}
			b.ReportMetric(median(pw), "plain-ns/call")
			b.ReportMetric(median(sw), "shared-ns/call")
			b.ReportMetric(median(pc), "plain-cpu-ns/call")
			b.ReportMetric(median(sc), "shared-cpu-ns/call")
			b.ReportMetric(median(ratio), "shared/plain")
			b.ReportMetric(median(cpuRatio), "cpu-shared/plain")
		})
	}
}

func median(xs []float64) float64 {
	xs = slices.Clone(xs)
	slices.Sort(xs)
	if n := len(xs); n%2 == 0 {
		return (xs[n/2-1] + xs[n/2]) / 2
	}
	return xs[len(xs)/2]
}
