// Package config holds agentd's configuration: one struct, loaded from
// built-in defaults (Default), then an optional YAML file, then AGENTD_*
// environment variables; the command line applies its flags last. The
// struct's tags say which variable sets each key and which values an
// enumerated key takes, and docs/configuration.md is generated from its
// doc comments, tags and defaults. Every problem a configuration has is
// reported at once, in the user's terms: the file and line or the
// variable, the key, and what to write instead.
package config

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"time"
)

// Self, as a registered server's command, means the running agentd
// executable. The default configuration registers the demo MCP server as
// {command: "@self", args: ["mcp-demo"]}.
const Self = "@self"

// DemoServer is the name under bridge.servers of the demo MCP server
// built into agentd (bridge.demo).
const DemoServer = "demo"

// builtinDemo is the registration of the demo MCP server built into
// agentd.
func builtinDemo() Server { return Server{Command: Self, Args: []string{"mcp-demo"}} }

// placeDemo registers the built-in demo server as demo says: beside the
// servers a file registers (whose map replaces the default's, demo
// included), unless the file registers a demo of its own (fileDemo), which
// stays; with demo false, the built-in one is left out.
func (b *Bridge) placeDemo(fileDemo bool) {
	switch {
	case fileDemo:
	case b.Demo:
		if b.Servers == nil {
			b.Servers = make(map[string]Server)
		}
		b.Servers[DemoServer] = builtinDemo()
	default:
		delete(b.Servers, DemoServer)
	}
}

// Config is the whole configuration of agentd.
type Config struct {
	// Listen is where `agentd serve` serves the AgentService, with health
	// and reflection.
	Listen string `yaml:"listen" env:"AGENTD_LISTEN"`

	// ShutdownGrace is how long running calls get to finish on SIGINT or
	// SIGTERM before they are cut.
	ShutdownGrace time.Duration `yaml:"shutdown_grace" env:"AGENTD_SHUTDOWN_GRACE"`

	// ShutdownDrain is how long `agentd serve` reports NOT_SERVING on
	// SIGINT or SIGTERM while it still accepts calls, before
	// shutdown_grace begins (0: not at all). Its health ("readiness" and
	// the AgentService) says so, so that load balancers stop sending new
	// calls.
	ShutdownDrain time.Duration `yaml:"shutdown_drain" env:"AGENTD_SHUTDOWN_DRAIN"`

	// GCHeapFloorMiB keeps the Go garbage collector from starting a
	// collection before the heap reaches this many MiB while the live
	// heap is under half of it (0: Go's default pace). agentd keeps little
	// alive and allocates fast, so at Go's default pace it collects many
	// times a second under load. It costs up to this much memory. Read at
	// start, by `agentd serve` and `agentd bridge`. A GOGC in the
	// environment overrides it.
	GCHeapFloorMiB int `yaml:"gc_heap_floor_mib" env:"AGENTD_GC_HEAP_FLOOR_MIB"`

	// Metrics configures the Prometheus endpoint of the metrics agentd and
	// its bridge record.
	Metrics Metrics `yaml:"metrics"`

	// Debug serves Go's profiling endpoints, for operators and benchmarks.
	Debug Debug `yaml:"debug"`

	// Insecure lets `agentd serve` and `agentd bridge` listen on an
	// address other than loopback although agentd authenticates no
	// caller. Anyone who can reach the port can then run generations on
	// the configured provider keys. Without it, such an address refuses
	// to start; with it, every start logs a warning.
	Insecure bool `yaml:"insecure" env:"AGENTD_INSECURE"`

	// TLS serves `agentd serve`'s listener over TLS when it names a
	// certificate.
	TLS TLS `yaml:"tls" env:"AGENTD_TLS_"`

	// HTTP configures what listen serves to HTTP clients beside gRPC:
	// Connect, gRPC-Web and HTTP/JSON.
	HTTP HTTP `yaml:"http"`

	// Console configures the web console served at /console/ on listen.
	Console Console `yaml:"console"`

	// Auth authenticates agentd's callers. With no method configured,
	// every caller is served unauthenticated, and agentd listens only on
	// loopback unless insecure.
	Auth Auth `yaml:"auth"`

	// Admin places the bridge's admin service (BridgeAdminService).
	Admin Admin `yaml:"admin"`

	// Reflection serves gRPC server reflection beside every service, open
	// to all callers like health.
	Reflection bool `yaml:"reflection" env:"AGENTD_REFLECTION"`

	// Limits are every tenant's limits unless tenants.<name>.limits sets
	// its own.
	Limits Limits `yaml:"limits"`

	// GenerationLimits bound every tenant's generations unless
	// tenants.<name>.generation_limits sets its own: tool turns, tool
	// calls, tokens, cost and time (docs/limits.md).
	GenerationLimits GenerationLimits `yaml:"generation_limits"`

	// Budgets cap what each tenant (unless tenants.<name>.budgets sets its
	// own), its API keys or its end users spend on model calls in a
	// period.
	Budgets []Budget `yaml:"budgets" default:"none"`

	// Tenants configures tenants by name. With none configured, every
	// tenant an authenticated caller names is served with the global
	// settings. With any configured, a caller whose tenant is not among
	// them is PermissionDenied, unless "default" is: then it gets the
	// default's settings.
	Tenants map[string]Tenant `yaml:"tenants"`

	// Log configures the structured log on stderr.
	Log Log `yaml:"log"`

	// StateDir is the directory of agentd's durable state on this
	// machine: agentd.db, the SQLite store of generations (with
	// store.driver sqlite). A leading "~/" is the home directory.
	StateDir string `yaml:"state_dir" env:"AGENTD_STATE_DIR" default:"$XDG_STATE_HOME/agentd, else ~/.local/state/agentd"`

	// Store says where agentd keeps its durable state: its generations,
	// paused and running, and their records.
	Store Store `yaml:"store"`

	// Bridge configures the BridgeService, embedded or remote.
	Bridge Bridge `yaml:"bridge"`

	// Generation configures the tool loop.
	Generation Generation `yaml:"generation"`

	// Threads configures the conversations agentd remembers.
	Threads Threads `yaml:"threads"`

	// OAuth is how agentd presents itself to the authorization servers of
	// the MCP servers it is the OAuth client of.
	OAuth OAuth `yaml:"oauth"`

	// Providers configures the LLM provider adapters by name: those
	// providers/registry declares. Where the file leaves an API key or a
	// base URL empty, the provider's own environment variable gives it
	// (OPENAI_API_KEY, ...); a name no provider has is refused.
	Providers map[string]Provider `yaml:"providers"`

	// Pricing changes the price table agentd prices model calls with.
	Pricing Pricing `yaml:"pricing"`
}

// Default returns the configuration agentd runs with when nothing is set.
func Default() Config {
	return Config{
		Listen:         "127.0.0.1:7070",
		ShutdownGrace:  10 * time.Second,
		ShutdownDrain:  5 * time.Second,
		GCHeapFloorMiB: 64,
		TLS:            TLS{MinVersion: "1.2"},
		Admin:          Admin{TLS: TLS{MinVersion: "1.2"}},
		Reflection:     true,
		Log:            Log{Level: "info", Format: "text"},
		GenerationLimits: GenerationLimits{
			Defaults: LimitValues{MaxDuration: time.Hour},
			Ceilings: LimitValues{MaxToolTurns: MaxToolTurnsLimit},
		},
		Store: Store{Driver: StoreSQLite, PingInterval: 5 * time.Second},
		OAuth: OAuth{RedirectURL: DefaultOAuthRedirectURL, ClientName: "agentd"},
		Bridge: Bridge{
			Listen:         "127.0.0.1:7071",
			TLS:            TLS{MinVersion: "1.2"},
			Servers:        map[string]Server{DemoServer: builtinDemo()},
			Demo:           true,
			TerminateGrace: 2 * time.Second,
			MaxResultBytes: DefaultMaxResultBytes,
			Pool:           DefaultPool(),
			Cache:          DefaultCache(),
		},
		Generation: Generation{
			MaxToolTurns:     25,
			AnswerTimeout:    2 * time.Minute,
			MaxAnswerTimeout: time.Hour,
			PauseTTL:         24 * time.Hour,
			ResumeStaleAfter: 10 * time.Minute,
			LeaseTTL:         15 * time.Second,
			AdoptInterval:    2 * time.Second,
			Retention:        24 * time.Hour,
		},
	}
}

// Load builds the configuration: defaults, then the YAML file at path (if
// path is not empty), then AGENTD_* environment variables read through
// getenv. "@self" commands become executable. The result is validated;
// every problem is reported at once, each with the file and line or the
// variable it comes from. Provider keys and base URLs from the
// environment are providers/registry's (Configure), applied by agentd
// serve. EnvWarnings reports the AGENTD_* variables that none of this
// reads.
func Load(path string, getenv func(string) string, executable string) (Config, error) {
	cfg := Default()
	src := newSources(path)
	var errs []error
	if path != "" {
		data, err := os.ReadFile(path)
		if err != nil {
			return Config{}, fmt.Errorf("config: %w", err)
		}
		errs = decodeFile(data, &cfg, src)
	}
	errs = append(errs, cfg.applyEnv(getenv, src)...)
	if len(errs) > 0 {
		return Config{}, errors.Join(errs...)
	}
	_, fileDemo := src.lines["bridge.servers."+DemoServer]
	cfg.Bridge.placeDemo(fileDemo)
	cfg.complete(getenv, executable)
	p := problems{src: src}
	cfg.validate(&p)
	if err := p.err(); err != nil {
		return Config{}, err
	}
	return cfg, nil
}

// complete fills in what the configuration leaves to the machine it runs
// on: the state directory, the OIDC issuers' defaults, and the
// executable "@self" names.
func (c *Config) complete(getenv func(string) string, executable string) {
	c.StateDir = stateDir(c.StateDir, getenv)
	for i, o := range c.Auth.OIDC {
		c.Auth.OIDC[i] = o.WithDefaults()
	}
	for name, s := range c.Bridge.Servers {
		if s.Command == Self {
			s.Command = executable
			c.Bridge.Servers[name] = s
		}
	}
}

// stateDir is the state directory configured as dir: its default when
// dir is empty, and under $HOME when dir begins "~/", as a shell would
// read it.
func stateDir(dir string, getenv func(string) string) string {
	if dir == "" {
		return defaultStateDir(getenv)
	}
	if rest, ok := strings.CutPrefix(dir, "~/"); ok && getenv("HOME") != "" {
		return filepath.Join(getenv("HOME"), rest)
	}
	return dir
}

// defaultStateDir is $XDG_STATE_HOME/agentd, else ~/.local/state/agentd,
// else .agentd-state in the working directory.
func defaultStateDir(getenv func(string) string) string {
	if d := getenv("XDG_STATE_HOME"); d != "" {
		return filepath.Join(d, "agentd")
	}
	if home := getenv("HOME"); home != "" {
		return filepath.Join(home, ".local", "state", "agentd")
	}
	return ".agentd-state"
}

// Validate reports every problem of the configuration at once, each
// naming its key.
func (c *Config) Validate() error {
	var p problems
	c.validate(&p)
	return p.err()
}

// validate records every problem of the configuration in p.
func (c *Config) validate(p *problems) {
	p.enums(reflect.ValueOf(c).Elem(), "")
	c.validateListeners(p.bad)
	c.HTTP.CORS.validate(p.bad)
	c.Console.validate(p.bad)
	c.validateConsoleSignIn(p.bad)
	c.validateDebug(p.bad)
	c.validateTenants(p.bad)
	c.validateBudgets(p.bad)
	c.validateAuth(p.bad)
	c.OAuth.validate(p.bad)
	c.validateEnterpriseServers(p.bad)
	c.Store.validate(p.bad)
	c.Bridge.validate(p.bad)
	c.Generation.validate(p.bad)
	if c.Threads.Retention < 0 {
		p.bad("threads.retention: must not be negative, got %s", c.Threads.Retention)
	}
	c.validateProcess(p.bad)
	c.validateProviders(p.bad)
	c.Pricing.validate(p)
}

// validateProcess checks the settings of the process itself: its
// collector's pace and its shutdown.
func (c *Config) validateProcess(bad func(string, ...any)) {
	if c.GCHeapFloorMiB < 0 || c.GCHeapFloorMiB > 1<<20 {
		bad("gc_heap_floor_mib: must be from 0 to 1048576 (1 TiB), got %d", c.GCHeapFloorMiB)
	}
	if c.ShutdownDrain < 0 {
		bad("shutdown_drain: must not be negative, got %s", c.ShutdownDrain)
	}
	positive(bad, "shutdown_grace", c.ShutdownGrace)
}
