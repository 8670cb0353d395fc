package main

import (
	"context"
	"errors"
	"net"
	"os"
	"path/filepath"

	"github.com/agentd/agentd/internal/app"
	"github.com/agentd/agentd/internal/config"
	"github.com/agentd/agentd/internal/grpcserver"
	"github.com/agentd/agentd/internal/telemetry"
)

// inProcess is an agentd served by this process on a loopback TCP port,
// built as `agentd serve` builds it (see the package comment for what
// differs). Close stops it; Close is idempotent and not safe for
// concurrent use.
type inProcess struct {
	addr string // where it serves
	dir  string // state directory, with agentd.log

	log       *os.File
	cancel    context.CancelFunc
	served    chan error // Serve's result
	telemetry func(context.Context) error
	closeErr  error
	closed    bool
}

// loadConfig is agentd's default configuration with the changes the load
// run makes: a state directory of its own, an ephemeral loopback port, and
// the demo server (this executable) shared by every session.
func loadConfig(dir, exe string) (config.Config, error) {
	cfg := config.Default()
	cfg.Listen = "127.0.0.1:0"
	cfg.StateDir = dir
	demo := cfg.Bridge.Servers["demo"]
	if demo.Command == config.Self {
		demo.Command = exe
	}
	demo.Shared = config.SharedGlobal
	cfg.Bridge.Servers["demo"] = demo
	return cfg, cfg.Validate()
}

// startAgentd starts an agentd in this process. Its demo MCP server is exe
// (this executable, or the test binary).
func startAgentd(exe string) (a *inProcess, err error) {
	dir, err := os.MkdirTemp("", "agentd-load-")
	if err != nil {
		return nil, err
	}
	a = &inProcess{dir: dir, served: make(chan error, 1)}
	defer func() {
		if err != nil {
			a.Close()
			_ = a.removeState()
		}
	}()
	cfg, err := loadConfig(dir, exe)
	if err != nil {
		return a, err
	}
	if a.log, err = os.Create(filepath.Join(dir, "agentd.log")); err != nil {
		return a, err
	}
	level, _ := cfg.Log.SlogLevel()
	logger := telemetry.NewLogger(a.log, level, cfg.Log.Format)
	tp, shutdown, err := telemetry.Setup(context.Background(), os.Getenv)
	if err != nil {
		return a, err
	}
	a.telemetry = shutdown
	o := app.Options{Config: cfg, Logger: logger, Telemetry: grpcserver.Telemetry{TracerProvider: tp}}
	lis, err := net.Listen("tcp", cfg.Listen)
	if err != nil {
		return a, err
	}
	agent, err := app.NewAgent(o)
	if err != nil {
		lis.Close()
		return a, err
	}
	a.addr = lis.Addr().String()
	logger.Info("agentd serving", "address", a.addr, "bridge", "embedded", "state", dir)
	ctx, cancel := context.WithCancel(context.Background())
	a.cancel = cancel
	go func() { a.served <- agent.Serve(ctx, lis, o) }()
	return a, nil
}

// Close stops agentd as SIGTERM stops `agentd serve`: running calls get
// shutdown_grace, then the bridge stops every MCP server process. It
// returns once Serve has returned.
func (a *inProcess) Close() error {
	if a.closed {
		return a.closeErr
	}
	a.closed = true
	if a.cancel != nil {
		a.cancel()
		a.closeErr = <-a.served
	}
	if a.telemetry != nil {
		a.closeErr = errors.Join(a.closeErr, a.telemetry(context.Background()))
	}
	if a.log != nil {
		a.closeErr = errors.Join(a.closeErr, a.log.Close())
	}
	return a.closeErr
}

// removeState deletes the state directory and the log.
func (a *inProcess) removeState() error { return os.RemoveAll(a.dir) }
