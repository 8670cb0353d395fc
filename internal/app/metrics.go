package app

import (
	"errors"
	"net"
	"net/http"
	"time"
)

// metricsServer serves the Prometheus endpoint of metrics.listen:
// plain HTTP, GET /metrics, on a listener of its own.
type metricsServer struct {
	lis  net.Listener
	srv  *http.Server
	done chan struct{}
}

// errNoMetricsHandler: metrics.listen is set, but nothing serves it.
var errNoMetricsHandler = errors.New("metrics.listen is set, but no metrics handler was given (app.Options.Metrics: telemetry.SetupMetrics with Prometheus)")

// serveMetrics listens on metrics.listen and serves o.Metrics there until
// stop; nil (and a no-op stop) when metrics.listen is not set. The
// endpoint shows counts and durations under bounded labels (tenant,
// provider, model, server and tool names, outcomes), never a secret; it
// is not authenticated, so it may listen beyond loopback for a scraper.
func serveMetrics(o Options) (*metricsServer, error) {
	if o.Config.Metrics.Listen == "" {
		return nil, nil
	}
	if o.Metrics == nil {
		return nil, errNoMetricsHandler
	}
	lis, err := listenTCP(o.Config.Metrics.Listen, "metrics.listen")
	if err != nil {
		return nil, err
	}
	m := &metricsServer{lis: lis, srv: &http.Server{Handler: o.Metrics, ReadHeaderTimeout: 10 * time.Second}, done: make(chan struct{})}
	go func() {
		defer close(m.done)
		_ = m.srv.Serve(lis) // ErrServerClosed once stopped
	}()
	return m, nil
}

// addr is the endpoint's address; "" when there is none.
func (m *metricsServer) addr() string {
	if m == nil {
		return ""
	}
	return m.lis.Addr().String()
}

// stop closes the endpoint and waits for it. Idempotent; nil-safe.
func (m *metricsServer) stop() {
	if m == nil {
		return
	}
	_ = m.srv.Close()
	<-m.done
}
