package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"github.com/agentd/agentd/internal/app"
	"github.com/agentd/agentd/internal/config"
	"github.com/agentd/agentd/internal/grpcserver"
	"github.com/agentd/agentd/internal/telemetry"
)

// storeChoice is the store the in-process agentds share: SQLite (agentd.db
// in their state directory) or the PostgreSQL database of dsn.
type storeChoice struct {
	driver string // config.StoreSQLite or config.StorePostgres
	dsn    string // with postgres; never printed
}

// fleet is the agentds served by this process: replicas of one another,
// each built as `agentd serve` builds it (see the package comment for what
// differs), on a loopback TCP port of its own, with a replica id, an
// embedded bridge and a demo server process of its own, all on one store.
// Close stops them; Close is idempotent and not safe for concurrent use.
type fleet struct {
	dir      string // state directory, with the logs
	replicas []*inProcess

	telemetry func(context.Context) error
	metrics   *telemetry.Metrics // with -metrics
	scraper   scraper
	closeErr  error
	closed    bool
}

// scrapeEvery is how often a run with -metrics scrapes each agentd's
// Prometheus endpoint, as a Prometheus server would (its default interval
// is 15s: this is three times as often).
const scrapeEvery = 5 * time.Second

// scraper GETs the agentds' metrics endpoints every scrapeEvery until
// stopped, counting what it read.
type scraper struct {
	stop    chan struct{}
	done    sync.WaitGroup
	scrapes int
	bytes   int64
	err     error
}

func (s *scraper) start(addrs []string) {
	s.stop = make(chan struct{})
	s.done.Go(func() {
		tick := time.NewTicker(scrapeEvery)
		defer tick.Stop()
		for {
			select {
			case <-s.stop:
				return
			case <-tick.C:
			}
			for _, addr := range addrs {
				n, err := scrapeOnce(addr)
				if err != nil && s.err == nil {
					s.err = err
				}
				s.scrapes++
				s.bytes += n
			}
		}
	})
}

// halt stops the scraper and waits for it; a scraper never started is
// halted already.
func (s *scraper) halt() error {
	if s.stop == nil {
		return nil
	}
	close(s.stop)
	s.done.Wait()
	s.stop = nil
	return s.err
}

func scrapeOnce(addr string) (int64, error) {
	resp, err := http.Get("http://" + addr + "/metrics")
	if err != nil {
		return 0, fmt.Errorf("scraping metrics: %w", err)
	}
	defer resp.Body.Close()
	n, err := io.Copy(io.Discard, resp.Body)
	if err == nil && resp.StatusCode != http.StatusOK {
		err = fmt.Errorf("scraping metrics: %s", resp.Status)
	}
	return n, err
}

// inProcess is one agentd of a fleet.
type inProcess struct {
	addr    string // where it serves
	logPath string

	log     *os.File
	cancel  context.CancelFunc
	served  chan error // Serve's result
	metrics string     // metrics.listen's address, with -metrics
	agent   *app.Agent
}

// loadConfig is agentd's default configuration with the changes the load
// run makes: a state directory, an ephemeral loopback port, the demo
// server (this executable) shared by every session, and the store.
func loadConfig(dir, exe string, st storeChoice) (config.Config, error) {
	cfg := config.Default()
	cfg.Listen = "127.0.0.1:0"
	cfg.StateDir = dir
	cfg.ShutdownDrain = 0 // no load balancer to tell when the run ends
	if st.driver == config.StorePostgres {
		cfg.Store.Driver, cfg.Store.DSN = config.StorePostgres, st.dsn
	}
	demo := cfg.Bridge.Servers["demo"]
	if demo.Command == config.Self {
		demo.Command = exe
	}
	demo.Shared = config.SharedGlobal
	cfg.Bridge.Servers["demo"] = demo
	return cfg, cfg.Validate()
}

// startAgentds starts n agentds in this process on the store st, sharing
// one state directory. Their demo MCP server is exe (this executable, or
// the test binary). One agentd logs to agentd.log there; several to
// agentd-1.log, agentd-2.log, and so on. With withMetrics, each records
// its metrics and serves them on a metrics.listen port of its own, as
// `agentd serve` does with metrics.listen set (OTLP export too, if the
// OTEL_* variables ask for it), and the fleet scrapes them every
// scrapeEvery.
func startAgentds(exe string, n int, st storeChoice, withMetrics bool) (f *fleet, err error) {
	dir, err := os.MkdirTemp("", "agentd-load-")
	if err != nil {
		return nil, err
	}
	f = &fleet{dir: dir}
	defer func() {
		if err != nil {
			f.Close()
			_ = f.removeState()
		}
	}()
	cfg, err := loadConfig(dir, exe, st)
	if err != nil {
		return f, err
	}
	tp, shutdown, err := telemetry.Setup(context.Background(), telemetry.ServiceAgent, os.Getenv)
	if err != nil {
		return f, err
	}
	f.telemetry = shutdown
	tel := grpcserver.Telemetry{TracerProvider: tp}
	if withMetrics {
		if f.metrics, err = telemetry.SetupMetrics(context.Background(), telemetry.ServiceAgent, os.Getenv, true); err != nil {
			return f, err
		}
		tel.MeterProvider = f.metrics.MeterProvider()
		cfg.Metrics.Listen = "127.0.0.1:0"
	}
	if err := f.startReplicas(n, cfg, tel); err != nil {
		return f, err
	}
	if withMetrics {
		var addrs []string
		for _, a := range f.replicas {
			addrs = append(addrs, a.metrics)
		}
		f.scraper.start(addrs)
	}
	return f, nil
}

// startReplicas starts n agentds of cfg, each logging to a file of its
// own in the fleet's directory.
func (f *fleet) startReplicas(n int, cfg config.Config, tel grpcserver.Telemetry) error {
	for i := range n {
		name := "agentd.log"
		if n > 1 {
			name = fmt.Sprintf("agentd-%d.log", i+1)
		}
		a := &inProcess{logPath: filepath.Join(f.dir, name), served: make(chan error, 1)}
		f.replicas = append(f.replicas, a)
		if err := a.start(cfg, tel, f.metrics); err != nil {
			return err
		}
	}
	return nil
}

// start starts a with cfg; metrics, when not nil, is what it serves on
// cfg's metrics.listen.
func (a *inProcess) start(cfg config.Config, tel grpcserver.Telemetry, metrics *telemetry.Metrics) error {
	var err error
	if a.log, err = os.Create(a.logPath); err != nil {
		return err
	}
	level, _ := cfg.Log.SlogLevel()
	logger := telemetry.NewLogger(a.log, level, cfg.Log.Format)
	o := app.Options{Config: cfg, Logger: logger, Telemetry: tel}
	if metrics != nil {
		o.Metrics = metrics.Handler()
	}
	lis, err := net.Listen("tcp", cfg.Listen)
	if err != nil {
		return err
	}
	agent, err := app.NewAgent(o)
	if err != nil {
		lis.Close()
		return err
	}
	a.addr, a.agent = lis.Addr().String(), agent
	a.metrics = agent.MetricsAddr()
	logger.Info("agentd serving", "address", a.addr, "bridge", "embedded", "store", cfg.Store.Driver, "state", cfg.StateDir)
	ctx, cancel := context.WithCancel(context.Background())
	a.cancel = cancel
	go func() { a.served <- agent.Serve(ctx, lis, o) }()
	return nil
}

// addrs are where the agentds serve, in order.
func (f *fleet) addrs() []string {
	var out []string
	for _, a := range f.replicas {
		out = append(out, a.addr)
	}
	return out
}

// logs names the agentds' logs.
func (f *fleet) logs() string {
	var out []string
	for _, a := range f.replicas {
		out = append(out, a.logPath)
	}
	return strings.Join(out, ", ")
}

// Close stops every agentd as SIGTERM stops `agentd serve`: running calls
// get shutdown_grace, then the bridge stops every MCP server process. It
// returns once every Serve has returned.
func (f *fleet) Close() error {
	if f.closed {
		return f.closeErr
	}
	f.closed = true
	f.closeErr = errors.Join(f.scraper.halt(), f.stopReplicas())
	if f.telemetry != nil {
		f.closeErr = errors.Join(f.closeErr, f.telemetry(context.Background()))
	}
	if f.metrics != nil {
		f.closeErr = errors.Join(f.closeErr, f.metrics.Shutdown(context.Background()))
	}
	return f.closeErr
}

// removeState deletes the state directory and the logs.
// stopReplicas stops every replica that started, all at once, and waits
// for each, closing its log.
func (f *fleet) stopReplicas() error {
	for _, a := range f.replicas {
		if a.cancel != nil {
			a.cancel()
		}
	}
	var err error
	for _, a := range f.replicas {
		if a.cancel != nil {
			err = errors.Join(err, <-a.served)
		}
		if a.log != nil {
			err = errors.Join(err, a.log.Close())
		}
	}
	return err
}

func (f *fleet) removeState() error { return os.RemoveAll(f.dir) }
