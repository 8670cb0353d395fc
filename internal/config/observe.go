package config

import (
	"log/slog"

	"github.com/agentd/agentd/internal/netaddr"
)

// Log configures the structured log on stderr.
type Log struct {
	// Level is the least severity logged. slog's other spellings of it
	// (DEBUG, info+2) are admitted too.
	Level string `yaml:"level" env:"AGENTD_LOG_LEVEL" enum:"debug,info,warn,error"`
	// Format is how each line is written: text (key=value) or json.
	Format string `yaml:"format" env:"AGENTD_LOG_FORMAT" enum:"text,json"`
}

// admits lets log.level be anything slog reads.
func (l Log) admits(field, value string) bool {
	_, err := Log{Level: value}.SlogLevel()
	return field == "Level" && err == nil
}

// SlogLevel parses Level.
func (l Log) SlogLevel() (slog.Level, error) {
	var lvl slog.Level
	err := lvl.UnmarshalText([]byte(l.Level))
	return lvl, err
}

// Metrics configures the Prometheus endpoint of the metrics agentd and
// its bridge record. The same instruments are exported by OTLP when the
// standard OTEL_* variables ask for it (OTEL_METRICS_EXPORTER=otlp,
// OTEL_EXPORTER_OTLP_ENDPOINT, ...).
type Metrics struct {
	// Listen is the address of a Prometheus scrape endpoint (GET /metrics,
	// plain HTTP); empty serves none.
	Listen string `yaml:"listen" env:"AGENTD_METRICS_LISTEN"`
}

// Debug serves Go's profiling endpoints, for operators and benchmarks.
// They are net/http/pprof and the Go runtime's metrics, on a listener of
// their own.
type Debug struct {
	// Listen is the loopback address of an HTTP endpoint serving
	// /debug/pprof/ and GET /debug/runtime; empty serves none.
	// /debug/pprof/ is net/http/pprof: CPU, heap, allocation, goroutine
	// profiles and execution traces. /debug/runtime is runtime/metrics as
	// JSON: bytes and objects allocated, GC cycles, goroutines. It must be
	// a loopback address, whatever insecure says: the endpoint has no
	// authentication, a profile costs CPU while it runs, and heap profiles
	// and goroutine dumps may reveal memory contents (prompts, arguments,
	// keys); reach it from elsewhere by an SSH tunnel or `kubectl
	// port-forward`. Never served on listen, admin.listen or
	// metrics.listen.
	Listen string `yaml:"listen" env:"AGENTD_DEBUG_LISTEN"`
}

// validateDebug checks that the profiling endpoint stays on loopback.
func (c *Config) validateDebug(bad func(string, ...any)) {
	if l := c.Debug.Listen; l != "" && !isPort(l) && !netaddr.LoopbackListen(l) {
		bad("debug.listen: must be a loopback address (127.0.0.1:port, [::1]:port or localhost:port): the profiling endpoint has no authentication and may reveal memory contents")
	}
}
