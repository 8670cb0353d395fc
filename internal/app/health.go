package app

import (
	"context"
	"errors"
	"log/slog"
	"sync"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/health"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"

	bridgev1 "github.com/agentd/agentd/gen/go/agentd/bridge/v1"
	agentdv1 "github.com/agentd/agentd/gen/go/agentd/v1"
)

// Health service names with Kubernetes' meanings, beside the
// services' own names in the gRPC health service:
//
//   - HealthLiveness is SERVING while the process runs, until its
//     graceful shutdown begins: a liveness probe restarts a process that
//     stopped answering, never one waiting for a dependency.
//   - HealthReadiness is SERVING while the AgentService can take work: not
//     while the store or a remote bridge is unreachable, nor while agentd
//     drains before stopping (shutdown_drain). For `agentd bridge`, it is
//     SERVING until its shutdown.
const (
	HealthLiveness  = "liveness"
	HealthReadiness = "readiness"
)

// readiness is the one place that decides the AgentService's health and
// readiness: SERVING only while the store answers, the remote bridge (if
// any) answers, and agentd is not draining; NOT_SERVING when any of them
// is not so. The watches of the store and the bridge each report their
// own cause, and neither undoes the other's.
type readiness struct {
	hs *health.Server

	mu                              sync.Mutex
	storeDown, bridgeDown, draining bool
}

func newReadiness(hs *health.Server) *readiness {
	r := &readiness{hs: hs}
	hs.SetServingStatus(HealthLiveness, healthpb.HealthCheckResponse_SERVING)
	r.publish()
	return r
}

// publish sets the statuses from the causes; r.mu held (or r unshared).
func (r *readiness) publish() {
	status := healthpb.HealthCheckResponse_SERVING
	if r.storeDown || r.bridgeDown || r.draining {
		status = healthpb.HealthCheckResponse_NOT_SERVING
	}
	r.hs.SetServingStatus(agentdv1.AgentService_ServiceDesc.ServiceName, status)
	r.hs.SetServingStatus(HealthReadiness, status)
}

func (r *readiness) update(f func()) {
	r.mu.Lock()
	defer r.mu.Unlock()
	f()
	r.publish()
}

func (r *readiness) setStoreDown(down bool)  { r.update(func() { r.storeDown = down }) }
func (r *readiness) setBridgeDown(down bool) { r.update(func() { r.bridgeDown = down }) }
func (r *readiness) drain()                  { r.update(func() { r.draining = true }) }

// watch probes a dependency every interval until ctx ends, calling report
// with each probe's result. A probe slower than a short interval is a
// busy machine, not a dependency that is gone: it gets at least a second.
func watch(ctx context.Context, every time.Duration, probe func(context.Context) error, report func(error)) {
	t := time.NewTicker(every)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		pctx, cancel := context.WithTimeout(ctx, max(every, time.Second))
		err := probe(pctx)
		cancel()
		if ctx.Err() != nil {
			return
		}
		report(err)
	}
}

// errBridgeNotServing is a remote bridge that answers its health check,
// but not SERVING.
var errBridgeNotServing = errors.New("the bridge's health is not SERVING")

// probeBridge asks the remote bridge's health service, over the bridge
// connection, whether the BridgeService serves: a cheap call that needs
// no session.
func probeBridge(conn *grpc.ClientConn) func(context.Context) error {
	client := healthpb.NewHealthClient(conn)
	return func(ctx context.Context) error {
		resp, err := client.Check(ctx, &healthpb.HealthCheckRequest{Service: bridgev1.BridgeService_ServiceDesc.ServiceName})
		if err != nil {
			return err
		}
		if resp.GetStatus() != healthpb.HealthCheckResponse_SERVING {
			return errBridgeNotServing
		}
		return nil
	}
}

// watchBridge keeps the AgentService's health and readiness in step with
// the remote bridge: NOT_SERVING from the first health check that
// fails, SERVING again (unless the store is down, or agentd drains) from
// the first that passes. Each change is logged once.
func (a *Agent) watchBridge(ctx context.Context, every time.Duration, address string, log *slog.Logger) {
	var down bool
	a.watches.Go(func() {
		watch(ctx, every, probeBridge(a.bridgeConn), func(err error) {
			switch {
			// Each line is written before the status it announces, so
			// that whoever sees the status can find the line.
			case err != nil && !down:
				down = true
				log.Warn("the remote bridge does not answer its health check: the AgentService is NOT_SERVING (and readiness) until it does",
					"bridge", address, "error", err)
				a.ready.setBridgeDown(true)
			case err == nil && down:
				down = false
				log.Info("the remote bridge answers again: the AgentService is SERVING, unless another dependency is down", "bridge", address)
				a.ready.setBridgeDown(false)
			}
		})
	})
}

// drainThenStop returns a context that ends drain after ctx does (at
// once when drain is 0), and stop, which ends it and waits for what it
// started. At ctx's end, readiness and the AgentService turn NOT_SERVING
// first, while the listeners still accept calls, so that load balancers
// and Kubernetes stop sending new ones before the graceful stop begins.
func (a *Agent) drainThenStop(ctx context.Context, drain time.Duration, log *slog.Logger) (context.Context, func()) {
	if drain <= 0 {
		return ctx, func() {}
	}
	serving, cancel := context.WithCancel(context.WithoutCancel(ctx))
	done := make(chan struct{})
	go func() {
		defer close(done)
		defer cancel()
		select {
		case <-serving.Done():
			return
		case <-ctx.Done():
		}
		a.ready.drain()
		log.Info("stopping: readiness and the AgentService are NOT_SERVING; still accepting calls while load balancers catch up", "shutdown_drain", drain)
		t := time.NewTimer(drain)
		defer t.Stop()
		select {
		case <-t.C:
		case <-serving.Done():
		}
	}()
	return serving, func() {
		cancel()
		<-done
	}
}
