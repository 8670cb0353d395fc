package app_test

import (
	"context"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/agentd/agentd/internal/logtest"

	"google.golang.org/genproto/googleapis/rpc/errdetails"
	"google.golang.org/grpc/codes"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/grpc/status"

	agentdv1 "github.com/agentd/agentd/gen/go/agentd/v1"
	"github.com/agentd/agentd/internal/app"
	"github.com/agentd/agentd/internal/app/apptest"
	"github.com/agentd/agentd/internal/config"
	"github.com/agentd/agentd/internal/store/pgtest"
)

// storePassword is the DSN's password in these tests: the test server
// trusts its clients and never asks for it, so it must show nowhere.
const storePassword = "canary-store-p4ssw0rd"

// counterConfig is an agentd whose registered server "files" is the
// counting MCP server (its calls recorded in the file counter), on the
// PostgreSQL database dsn.
func counterConfig(t *testing.T, dsn, counter string) config.Config {
	t.Helper()
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	zero := 0
	cfg := config.Default()
	cfg.StateDir = t.TempDir()
	cfg.Store.Driver, cfg.Store.DSN = config.StorePostgres, dsn
	cfg.Bridge.TerminateGrace = 500 * time.Millisecond
	cfg.Bridge.Servers = map[string]config.Server{"files": {
		Command: exe, Warm: &zero,
		Env: map[string]string{counterEnv: counter, counterPidsEnv: filepath.Join(filepath.Dir(counter), "pids")},
	}}
	if err := cfg.Validate(); err != nil {
		t.Fatal(err)
	}
	return cfg
}

// storeDSN is a new database on the test server, with storePassword.
func storeDSN(t *testing.T) string {
	t.Helper()
	dsn, err := pgtest.WithPassword(pgtest.DSN(t), storePassword)
	if err != nil {
		t.Fatal(err)
	}
	return dsn
}

// X-G1: two agentd replicas on one PostgreSQL database: a generation
// paused on one is resumed on the other, exactly once (the counting
// server sees one call; the first replica then finds nothing to resume),
// and neither replica logs any part of the DSN.
func TestPostgresReplicas(t *testing.T) {
	t.Parallel()
	dsn := storeDSN(t)
	counter := filepath.Join(t.TempDir(), "calls")
	var logs [2]logtest.Logs
	var clients [2]agentdv1.AgentServiceClient
	for i := range clients {
		o := app.Options{Config: counterConfig(t, dsn, counter), Logger: slog.New(slog.NewTextHandler(&logs[i], &slog.HandlerOptions{Level: slog.LevelDebug}))}
		conn, _ := apptest.Serve(t, o)
		clients[i] = agentdv1.NewAgentServiceClient(conn)
	}
	agent := deleteAgent(t)

	paused := startAndPause(t, clients[0], agent)
	if final := resume(t, clients[1], paused, agent, true); final != "deleted draft.txt" {
		t.Errorf("the resume on the other replica ended with %q", final)
	}
	if code := resumeCode(t, clients[0], paused, agent); code != codes.FailedPrecondition {
		t.Errorf("resuming it again on the first replica: %v; want FailedPrecondition, it has completed", code)
	}
	if got := lines(t, counter); len(got) != 1 {
		t.Errorf("the MCP server saw %d calls (%v); want 1", len(got), got)
	}
	for i := range logs {
		for _, secret := range []string{storePassword, dsn} {
			if strings.Contains(logs[i].String(), secret) {
				t.Errorf("replica %d logged the store's DSN or password:\n%s", i, logs[i].String())
			}
		}
	}
}

// healthWatch follows one service's health.
type healthWatch struct {
	t      *testing.T
	stream healthpb.Health_WatchClient
}

func watchHealth(t *testing.T, client healthpb.HealthClient, service string) *healthWatch {
	t.Helper()
	stream, err := client.Watch(t.Context(), &healthpb.HealthCheckRequest{Service: service})
	if err != nil {
		t.Fatal(err)
	}
	return &healthWatch{t: t, stream: stream}
}

// until waits for the status want (the watch sends every change).
func (w *healthWatch) until(want healthpb.HealthCheckResponse_ServingStatus) {
	w.t.Helper()
	for {
		res, err := w.stream.Recv()
		if err != nil {
			w.t.Fatalf("waiting for %v: %v", want, err)
		}
		if res.GetStatus() == want {
			return
		}
	}
}

// X-G1: while the store cannot be reached, the AgentService's health is
// NOT_SERVING (the overall status stays SERVING) and a new generation
// fails UNAVAILABLE with a RetryInfo; a generation that pauses meanwhile
// cannot be kept and ends UNAVAILABLE too, and so do GetGeneration and
// ListGenerations (X-G4). Once the store answers again,
// the service is SERVING and generations pause and resume as before.
func TestStoreOutage(t *testing.T) {
	t.Parallel()
	proxy, dsn := pgtest.NewProxy(t, storeDSN(t))
	counter := filepath.Join(t.TempDir(), "calls")
	cfg := counterConfig(t, dsn, counter)
	cfg.Store.PingInterval = 50 * time.Millisecond
	var logs logtest.Logs
	conn, _ := apptest.Serve(t, app.Options{Config: cfg, Logger: slog.New(slog.NewTextHandler(&logs, nil))})
	client, health := agentdv1.NewAgentServiceClient(conn), healthpb.NewHealthClient(conn)
	agent := deleteAgent(t)
	service := watchHealth(t, health, agentdv1.AgentService_ServiceDesc.ServiceName)
	service.until(healthpb.HealthCheckResponse_SERVING)

	waiting, waitingID := startAndWait(t, client, agent) // at its approval request
	proxy.Down()
	service.until(healthpb.HealthCheckResponse_NOT_SERVING)
	if res, err := health.Check(t.Context(), &healthpb.HealthCheckRequest{}); err != nil || res.GetStatus() != healthpb.HealthCheckResponse_SERVING {
		t.Errorf("the overall health during the outage: %v, %v; want SERVING", res.GetStatus(), err)
	}

	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	defer cancel()
	_, err := runGeneration(ctx, client, agent)
	st := status.Convert(err)
	var retry *errdetails.RetryInfo
	for _, d := range st.Details() {
		if r, ok := d.(*errdetails.RetryInfo); ok {
			retry = r
		}
	}
	if st.Code() != codes.Unavailable || retry == nil || retry.GetRetryDelay().AsDuration() != cfg.Store.PingInterval {
		t.Errorf("a new generation during the outage: %v (retry %v); want UNAVAILABLE, retry after %v", err, retry, cfg.Store.PingInterval)
	}
	// X-G4: reading the record fails UNAVAILABLE too, not INTERNAL.
	if _, err := client.GetGeneration(ctx, &agentdv1.GetGenerationRequest{GenerationId: waitingID}); status.Code(err) != codes.Unavailable {
		t.Errorf("GetGeneration during the outage: %v; want UNAVAILABLE", err)
	}
	if _, err := client.ListGenerations(ctx, &agentdv1.ListGenerationsRequest{}); status.Code(err) != codes.Unavailable {
		t.Errorf("ListGenerations during the outage: %v; want UNAVAILABLE", err)
	}
	waiting.CloseSend() // it pauses, and cannot be stored
	if _, err := finish(waiting); status.Code(err) != codes.Unavailable {
		t.Errorf("the generation that paused during the outage: %v; want UNAVAILABLE", err)
	}

	proxy.Up()
	service.until(healthpb.HealthCheckResponse_SERVING)
	paused := startAndPause(t, client, agent)
	if final := resume(t, client, paused, agent, true); final != "deleted draft.txt" {
		t.Errorf("after the outage, the resume ended with %q", final)
	}
	if got := lines(t, counter); len(got) != 1 {
		t.Errorf("the MCP server saw %d calls (%v); want 1 (the one resumed after the outage)", len(got), got)
	}
	for _, want := range []string{"the state store cannot be reached", "the state store answers again"} {
		if !strings.Contains(logs.String(), want) {
			t.Errorf("the log does not say %q:\n%s", want, logs.String())
		}
	}
	if strings.Contains(logs.String(), storePassword) || strings.Contains(logs.String(), dsn) {
		t.Errorf("the log has the store's DSN:\n%s", logs.String())
	}
}
