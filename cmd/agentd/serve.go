package main

import (
	"context"
	"flag"
	"io"
	"os"
	"time"

	"github.com/agentd/agentd/internal/app"
	"github.com/agentd/agentd/internal/config"
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
		fs.StringVar(&f.bridgeAddr, "bridge-addr", "", "address of a remote `agentd bridge` (default: embedded bridge)")
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

// setup loads the configuration and starts logging and tracing.
func setup(ctx context.Context, name string, args []string, stderr io.Writer, bridge bool) (app.Options, func(context.Context) error, error) {
	fs := flag.NewFlagSet("agentd "+name, flag.ContinueOnError)
	fs.SetOutput(stderr)
	var f commonFlags
	f.register(fs, !bridge)
	if err := fs.Parse(args); err != nil {
		return app.Options{}, nil, err
	}
	cfg, err := f.load(bridge)
	if err != nil {
		return app.Options{}, nil, err
	}
	level, _ := cfg.Log.SlogLevel()
	log := telemetry.NewLogger(stderr, level, cfg.Log.Format)
	tp, shutdown, err := telemetry.Setup(ctx, os.Getenv)
	if err != nil {
		return app.Options{}, nil, err
	}
	return app.Options{Config: cfg, Logger: log, Telemetry: grpcserver.Telemetry{TracerProvider: tp}}, shutdown, nil
}

func serve(ctx context.Context, args []string, stderr io.Writer) error {
	o, shutdown, err := setup(ctx, "serve", args, stderr, false)
	if err != nil {
		return err
	}
	defer flush(shutdown)
	return app.ServeAgent(ctx, o)
}

func serveBridge(ctx context.Context, args []string, stderr io.Writer) error {
	o, shutdown, err := setup(ctx, "bridge", args, stderr, true)
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
