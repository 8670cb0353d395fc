package app_test

import (
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc/codes"

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
	cfg.Store = config.Store{Driver: config.StorePostgres, DSN: dsn}
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
	var logs [2]apptest.Logs
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
	if code := resumeCode(t, clients[0], paused, agent); code != codes.NotFound {
		t.Errorf("resuming it again on the first replica: %v; want NotFound", code)
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
