package app

import (
	"encoding/json"
	"net"
	"net/http"
	"net/http/pprof"
	"runtime/metrics"
	"time"
)

// debugServer serves the profiling endpoint of debug.listen: plain HTTP
// on a loopback listener of its own (config.Debug), never on a gRPC
// listener or beside /metrics.
type debugServer struct {
	lis  net.Listener
	srv  *http.Server
	done chan struct{}
}

// serveDebug listens on debug.listen and serves net/http/pprof and
// /debug/runtime there until stop; nil (and a no-op stop) when
// debug.listen is not set. The handlers are mounted on a mux of their own:
// net/http/pprof also registers on http.DefaultServeMux, which agentd never
// serves.
func serveDebug(o Options) (*debugServer, error) {
	if o.Config.Debug.Listen == "" {
		return nil, nil
	}
	lis, err := listenTCP(o.Config.Debug.Listen, "debug.listen")
	if err != nil {
		return nil, err
	}
	mux := http.NewServeMux()
	mux.HandleFunc("/debug/pprof/", pprof.Index)
	mux.HandleFunc("/debug/pprof/cmdline", pprof.Cmdline)
	mux.HandleFunc("/debug/pprof/profile", pprof.Profile)
	mux.HandleFunc("/debug/pprof/symbol", pprof.Symbol)
	mux.HandleFunc("/debug/pprof/trace", pprof.Trace)
	mux.HandleFunc("GET /debug/runtime", runtimeMetrics)
	// No WriteTimeout: a CPU profile or a trace answers after the seconds
	// it was asked for.
	d := &debugServer{lis: lis, srv: &http.Server{Handler: mux, ReadHeaderTimeout: 10 * time.Second}, done: make(chan struct{})}
	go func() {
		defer close(d.done)
		_ = d.srv.Serve(lis) // ErrServerClosed once stopped
	}()
	return d, nil
}

// runtimeMetrics answers GET /debug/runtime: every scalar metric of
// runtime/metrics, by its name ("/gc/heap/allocs:bytes",
// "/gc/heap/allocs:objects", "/sched/goroutines:goroutines", ...), as one
// JSON object. Cumulative ones are totals since the process started, so a
// benchmark reads them before and after a window and divides the
// difference by the window's work. Histograms are left out.
func runtimeMetrics(w http.ResponseWriter, _ *http.Request) {
	descs := metrics.All()
	samples := make([]metrics.Sample, len(descs))
	for i, d := range descs {
		samples[i].Name = d.Name
	}
	metrics.Read(samples)
	out := make(map[string]any, len(samples))
	for _, s := range samples {
		switch s.Value.Kind() {
		case metrics.KindUint64:
			out[s.Name] = s.Value.Uint64()
		case metrics.KindFloat64:
			out[s.Name] = s.Value.Float64()
		}
	}
	w.Header().Set("Content-Type", "application/json")
	_ = json.NewEncoder(w).Encode(out)
}

// addr is the endpoint's address; "" when there is none.
func (d *debugServer) addr() string {
	if d == nil {
		return ""
	}
	return d.lis.Addr().String()
}

// stop closes the endpoint and waits for it: a profile under way is cut
// short. Idempotent; nil-safe.
func (d *debugServer) stop() {
	if d == nil {
		return
	}
	_ = d.srv.Close()
	<-d.done
}
