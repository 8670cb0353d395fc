package main

import (
	"context"
	"errors"
	"flag"
	"io"
	"log/slog"
	"os"
	"os/signal"
	"sync"
	"syscall"
	"time"

	"github.com/agentd/agentd/internal/app"
	"github.com/agentd/agentd/internal/config"
	"github.com/agentd/agentd/internal/gctune"
	"github.com/agentd/agentd/internal/grpcserver"
	"github.com/agentd/agentd/internal/mcpdemo"
	"github.com/agentd/agentd/internal/telemetry"
	"github.com/agentd/agentd/providers/registry"
)

// commonFlags are the flags of serve and bridge; flags win over the file
// and the environment.
type commonFlags struct {
	config, listen, adminListen, bridgeAddr, logLevel, logFormat string
	insecure                                                     bool
}

func (f *commonFlags) register(fs *flag.FlagSet, withBridgeAddr bool) {
	fs.StringVar(&f.config, "config", os.Getenv("AGENTD_CONFIG"), "YAML configuration file (env AGENTD_CONFIG); none: built-in defaults")
	fs.StringVar(&f.listen, "listen", "", "address to serve on (default from config: 127.0.0.1:7070 for serve, 127.0.0.1:7071 for bridge)")
	fs.StringVar(&f.adminListen, "admin-listen", "", "serve the bridge's admin service on this address of its own, not beside the main service (env AGENTD_ADMIN_LISTEN)")
	if withBridgeAddr {
		fs.StringVar(&f.bridgeAddr, "bridge-addr", "", "the `address` of a remote agentd bridge: host:port, dns:///name:port, or a comma-separated list of host:port replicas (default: embedded bridge)")
	}
	fs.BoolVar(&f.insecure, "insecure", false, "serve on an address other than loopback although no caller is authenticated (env AGENTD_INSECURE); warns at every start")
	fs.StringVar(&f.logLevel, "log-level", "", "debug, info, warn or error (default info)")
	fs.StringVar(&f.logFormat, "log-format", "", "text or json (default text)")
}

// load builds the configuration: defaults, file, environment, flags.
func (f *commonFlags) load(bridge bool) (config.Config, error) {
	exe, err := os.Executable()
	if err != nil {
		return config.Config{}, err
	}
	cfg, err := config.Load(f.config, os.Getenv, exe)
	if err != nil {
		return config.Config{}, err
	}
	if !bridge {
		if cfg.Providers, err = registry.Configure(cfg.Providers, os.Getenv); err != nil {
			return config.Config{}, err
		}
	}
	switch {
	case f.listen != "" && bridge:
		cfg.Bridge.Listen = f.listen
	case f.listen != "":
		cfg.Listen = f.listen
	}
	if f.adminListen != "" {
		cfg.Admin.Listen = f.adminListen
	}
	if f.bridgeAddr != "" {
		cfg.Bridge.Address = f.bridgeAddr
	}
	if f.insecure {
		cfg.Insecure = true
	}
	if f.logLevel != "" {
		cfg.Log.Level = f.logLevel
	}
	if f.logFormat != "" {
		cfg.Log.Format = f.logFormat
	}
	return cfg, cfg.Validate()
}

// setup loads the configuration and starts logging, tracing and metrics. It
// returns the flags too, to load the configuration again as it did.
func setup(ctx context.Context, name string, args []string, stderr io.Writer, bridge bool) (app.Options, *commonFlags, func(context.Context) error, error) {
	fs := flag.NewFlagSet("agentd "+name, flag.ContinueOnError)
	fs.SetOutput(stderr)
	var f commonFlags
	f.register(fs, !bridge)
	if err := fs.Parse(args); err != nil {
		return app.Options{}, nil, nil, err
	}
	cfg, err := f.load(bridge)
	if err != nil {
		return app.Options{}, nil, nil, err
	}
	level, _ := cfg.Log.SlogLevel()
	log := telemetry.NewLogger(stderr, level, cfg.Log.Format)
	telemetry.LogErrors(log)
	for _, w := range config.EnvWarnings(os.Environ()) {
		log.Warn(w)
	}
	service := telemetry.ServiceAgent
	if bridge {
		service = telemetry.ServiceBridge
	}
	tp, shutdownTraces, err := telemetry.Setup(ctx, service, os.Getenv)
	if err != nil {
		return app.Options{}, nil, nil, err
	}
	metrics, err := telemetry.SetupMetrics(ctx, service, os.Getenv, cfg.Metrics.Listen != "")
	if err != nil {
		_ = shutdownTraces(ctx)
		return app.Options{}, nil, nil, err
	}
	gc := gctune.Start(uint64(cfg.GCHeapFloorMiB) << 20)
	switch {
	case gc != nil:
		log.Info("the garbage collector's pace keeps a heap floor", "gc_heap_floor_mib", cfg.GCHeapFloorMiB)
	case cfg.GCHeapFloorMiB > 0:
		log.Info("GOGC is set in the environment: the garbage collector keeps its pace, gc_heap_floor_mib is not applied", "GOGC", os.Getenv("GOGC"))
	}
	shutdown := func(ctx context.Context) error {
		gc.Stop()
		return errors.Join(metrics.Shutdown(ctx), shutdownTraces(ctx))
	}
	tel := grpcserver.Telemetry{TracerProvider: tp, MeterProvider: metrics.MeterProvider()}
	return app.Options{Config: cfg, Logger: log, Telemetry: tel, Metrics: metrics.Handler()}, &f, shutdown, nil
}

// serve runs `agentd serve`, which loads its configuration again at every
// SIGHUP and applies its auth (app.Agent.Reload).
func serve(ctx context.Context, args []string, stderr io.Writer) error {
	hup := make(chan os.Signal, 1)
	signal.Notify(hup, syscall.SIGHUP)
	defer signal.Stop(hup)
	return serveReloading(ctx, args, stderr, hup)
}

// serveReloading is serve, reloading at every value hup delivers.
func serveReloading(ctx context.Context, args []string, stderr io.Writer, hup <-chan os.Signal) error {
	o, f, shutdown, err := setup(ctx, "serve", args, stderr, false)
	if err != nil {
		return err
	}
	defer flush(shutdown)
	ctx, cancel := context.WithCancel(ctx)
	reloads := make(chan config.Config)
	var wg sync.WaitGroup
	wg.Go(func() { reloadOn(ctx, hup, func() (config.Config, error) { return f.load(false) }, o.Logger, reloads) })
	defer wg.Wait()
	defer cancel()
	o.Reloads = reloads
	return app.ServeAgent(ctx, o)
}

// reloadOn loads the configuration at every value of hup until ctx ends,
// and sends each one that loads to out; one that does not is logged, and
// the running configuration stays.
func reloadOn(ctx context.Context, hup <-chan os.Signal, load func() (config.Config, error), log *slog.Logger, out chan<- config.Config) {
	for {
		select {
		case <-ctx.Done():
			return
		case <-hup:
		}
		log.Info("SIGHUP: reloading the configuration")
		cfg, err := load()
		if err != nil {
			log.Error("configuration not reloaded; the running one stays", "error", err)
			continue
		}
		select {
		case out <- cfg:
		case <-ctx.Done():
			return
		}
	}
}

func serveBridge(ctx context.Context, args []string, stderr io.Writer) error {
	o, _, shutdown, err := setup(ctx, "bridge", args, stderr, true)
	if err != nil {
		return err
	}
	defer flush(shutdown)
	return app.ServeBridge(ctx, o)
}

func mcpDemo(ctx context.Context) error {
	return mcpdemo.Run(ctx, os.Stdin, os.Stdout)
}

// flush stops telemetry, sending what is left to the exporter, within a
// few seconds: an exporter that does not answer must not hold the exit.
func flush(shutdown func(context.Context) error) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	_ = shutdown(ctx)
}
