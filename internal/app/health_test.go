package app_test

import (
	"context"
	"log/slog"
	"net"
	"strings"
	"testing"
	"time"

	"github.com/agentd/agentd/internal/logtest"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"

	agentdv1 "github.com/agentd/agentd/gen/go/agentd/v1"
	"github.com/agentd/agentd/internal/app"
	"github.com/agentd/agentd/internal/app/apptest"
)

// serveBridgeAt serves `agentd bridge` on addr ("127.0.0.1:0": any port)
// and returns its address and stop.
func serveBridgeAt(t *testing.T, addr string) (string, func()) {
	t.Helper()
	lis, err := net.Listen("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	o := app.Options{Config: demoConfig(t, 0), Logger: slog.New(slog.DiscardHandler)}
	b, err := app.NewBridge(o)
	if err != nil {
		lis.Close()
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- b.Serve(ctx, lis, o) }()
	stopped := false
	stop := func() {
		if stopped {
			return
		}
		stopped = true
		cancel()
		if err := <-done; err != nil {
			t.Errorf("bridge Serve: %v", err)
		}
	}
	t.Cleanup(stop)
	return lis.Addr().String(), stop
}

// checkHealth is one Check of service on conn.
func checkHealth(t *testing.T, conn grpc.ClientConnInterface, service string) healthpb.HealthCheckResponse_ServingStatus {
	t.Helper()
	res, err := healthpb.NewHealthClient(conn).Check(t.Context(), &healthpb.HealthCheckRequest{Service: service})
	if err != nil {
		t.Fatalf("health of %q: %v", service, err)
	}
	return res.GetStatus()
}

// X-O5: with a remote bridge, the AgentService and readiness are
// NOT_SERVING while the bridge does not answer its health check, and
// SERVING again once it does; liveness stays SERVING throughout; each
// change is logged once. `agentd bridge` serves liveness and readiness
// too.
func TestRemoteBridgeOutageHealth(t *testing.T) {
	t.Parallel()
	addr, stopBridge := serveBridgeAt(t, "127.0.0.1:0")
	bridgeConn, err := grpc.NewClient(addr, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	for _, service := range []string{app.HealthLiveness, app.HealthReadiness} {
		if got := checkHealth(t, bridgeConn, service); got != healthpb.HealthCheckResponse_SERVING {
			t.Errorf("agentd bridge's %q is %v, want SERVING", service, got)
		}
	}
	bridgeConn.Close()

	cfg := demoConfig(t, 0)
	cfg.Bridge.Address = addr
	cfg.Store.PingInterval = 50 * time.Millisecond
	if err := cfg.Validate(); err != nil {
		t.Fatal(err)
	}
	var logs logtest.Logs
	conn, _ := apptest.Serve(t, app.Options{Config: cfg, Logger: slog.New(slog.NewTextHandler(&logs, nil))})
	health := healthpb.NewHealthClient(conn)
	service := watchHealth(t, health, agentdv1.AgentService_ServiceDesc.ServiceName)
	ready := watchHealth(t, health, app.HealthReadiness)
	service.until(healthpb.HealthCheckResponse_SERVING)
	ready.until(healthpb.HealthCheckResponse_SERVING)

	stopBridge()
	service.until(healthpb.HealthCheckResponse_NOT_SERVING)
	ready.until(healthpb.HealthCheckResponse_NOT_SERVING)
	if got := checkHealth(t, conn, app.HealthLiveness); got != healthpb.HealthCheckResponse_SERVING {
		t.Errorf("liveness while the bridge is down: %v, want SERVING", got)
	}

	serveBridgeAt(t, addr) // back, on the same address
	service.until(healthpb.HealthCheckResponse_SERVING)
	ready.until(healthpb.HealthCheckResponse_SERVING)
	for _, want := range []string{"the remote bridge does not answer its health check", "the remote bridge answers again"} {
		if n := strings.Count(logs.String(), want); n != 1 {
			t.Errorf("the log says %q %d times, want once:\n%s", want, n, logs.String())
		}
	}
}

// X-O5: when serving stops, readiness and the AgentService turn
// NOT_SERVING first, while agentd still accepts new connections and calls
// (liveness still SERVING) for shutdown_drain; only then does the
// graceful stop begin. The order is asserted, not the durations.
func TestShutdownDrain(t *testing.T) {
	t.Parallel()
	cfg := testConfig(t)
	// Long enough for a new connection and a call on a loaded machine;
	// the test waits for states, never for this.
	cfg.ShutdownDrain = time.Second
	var logs logtest.Logs
	o := app.Options{Config: cfg, Logger: slog.New(slog.NewTextHandler(&logs, nil))}
	a, err := app.NewAgent(o)
	if err != nil {
		t.Fatal(err)
	}
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	served := make(chan error, 1)
	go func() { served <- a.Serve(ctx, lis, o) }()

	conn := dial(t, lis.Addr().String(), grpc.WithTransportCredentials(insecure.NewCredentials()))
	health := healthpb.NewHealthClient(conn)
	service := watchHealth(t, health, agentdv1.AgentService_ServiceDesc.ServiceName)
	ready := watchHealth(t, health, app.HealthReadiness)
	service.until(healthpb.HealthCheckResponse_SERVING)
	ready.until(healthpb.HealthCheckResponse_SERVING)
	if got := checkHealth(t, conn, app.HealthLiveness); got != healthpb.HealthCheckResponse_SERVING {
		t.Fatalf("liveness while serving: %v, want SERVING", got)
	}

	cancel() // SIGTERM
	ready.until(healthpb.HealthCheckResponse_NOT_SERVING)
	service.until(healthpb.HealthCheckResponse_NOT_SERVING)
	// Draining: a new connection is accepted and served.
	fresh := dial(t, lis.Addr().String(), grpc.WithTransportCredentials(insecure.NewCredentials()))
	if got := checkHealth(t, fresh, app.HealthLiveness); got != healthpb.HealthCheckResponse_SERVING {
		t.Errorf("liveness while draining: %v, want SERVING", got)
	}
	if _, err := agentdv1.NewAgentServiceClient(fresh).ListGenerations(t.Context(), &agentdv1.ListGenerationsRequest{}); err != nil {
		t.Errorf("a new call while draining: %v, want it served", err)
	}
	select {
	case err := <-served:
		t.Fatalf("Serve returned (%v) before the drain's calls were served", err)
	default:
	}
	// The watches' streams would hold the graceful stop for
	// shutdown_grace: end them.
	conn.Close()
	fresh.Close()
	if err := <-served; err != nil {
		t.Errorf("Serve: %v", err)
	}
	if !strings.Contains(logs.String(), "stopping: readiness and the AgentService are NOT_SERVING") {
		t.Errorf("the log does not say the drain began:\n%s", logs.String())
	}
}
