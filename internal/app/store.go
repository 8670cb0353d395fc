package app

import (
	"context"
	"log/slog"
	"path/filepath"
	"time"

	"google.golang.org/grpc"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"

	agentdv1 "github.com/agentd/agentd/gen/go/agentd/v1"
	"github.com/agentd/agentd/internal/config"
	"github.com/agentd/agentd/internal/fault"
	"github.com/agentd/agentd/internal/store"
)

// storeOpenTimeout bounds connecting to the store and migrating it at
// start; a replica that finds another migrating waits that long at most.
const storeOpenTimeout = time.Minute

// storeSweepEvery is how often the store sweeps expired paused
// generations.
const storeSweepEvery = time.Minute

// openStore opens the store that store.driver names (X-G1): agentd.db in
// state_dir, or the PostgreSQL database of store.dsn.
func openStore(cfg config.Config) (store.Store, error) {
	ctx, cancel := context.WithTimeout(context.Background(), storeOpenTimeout)
	defer cancel()
	return store.Open(ctx, store.Options{
		Driver:     cfg.Store.Driver,
		Path:       filepath.Join(cfg.StateDir, "agentd.db"),
		DSN:        cfg.Store.DSN,
		SweepEvery: storeSweepEvery,
	})
}

// storeName says in logs which store agentd uses, never its DSN.
func storeName(cfg config.Config) string {
	if cfg.Store.Driver == config.StorePostgres {
		return "postgres"
	}
	return "sqlite " + filepath.Join(cfg.StateDir, "agentd.db")
}

// watchStore pings the store every interval until Close, keeping the
// AgentService's health and storeGate in step with it (X-G1): NOT_SERVING
// from the first ping that fails, SERVING again from the first that
// passes. Each change is logged once.
func (a *Agent) watchStore(every time.Duration, name string, log *slog.Logger) {
	ctx, cancel := context.WithCancel(context.Background())
	a.stopWatch = cancel
	a.watchDone = make(chan struct{})
	go func() {
		defer close(a.watchDone)
		t := time.NewTicker(every)
		defer t.Stop()
		for {
			select {
			case <-ctx.Done():
				return
			case <-t.C:
			}
			// A ping slower than a short interval is a busy machine, not
			// a store that is gone: it gets at least a second.
			pctx, pcancel := context.WithTimeout(ctx, max(every, time.Second))
			err := a.store.Ping(pctx)
			pcancel()
			if ctx.Err() != nil {
				return
			}
			switch down := err != nil; {
			case down && !a.storeDown.Swap(true):
				a.Health.SetServingStatus(agentdv1.AgentService_ServiceDesc.ServiceName, healthpb.HealthCheckResponse_NOT_SERVING)
				log.Warn("the state store cannot be reached: the AgentService is NOT_SERVING and refuses generations until it answers",
					"store", name, "error", err)
			case !down && a.storeDown.Swap(false):
				a.Health.SetServingStatus(agentdv1.AgentService_ServiceDesc.ServiceName, healthpb.HealthCheckResponse_SERVING)
				log.Info("the state store answers again: the AgentService is SERVING", "store", name)
			}
		}
	}()
}

// storeGate refuses Generate streams, UNAVAILABLE, while the last ping of
// the store failed: a new generation could not be kept, nor a paused one
// resumed. The retry delay is the ping interval, after which the next
// ping may have found the store back.
func (a *Agent) storeGate(every time.Duration) grpc.StreamServerInterceptor {
	return func(srv any, ss grpc.ServerStream, info *grpc.StreamServerInfo, handler grpc.StreamHandler) error {
		if info.FullMethod == agentdv1.AgentService_Generate_FullMethodName && a.storeDown.Load() {
			e := fault.New(fault.Unavailable, "the state store cannot be reached, so no generation starts or resumes until it is back; retry later").
				WithInfo("STORE_UNAVAILABLE", nil)
			e.RetryDelay = every
			return fault.GRPC(e)
		}
		return handler(srv, ss)
	}
}
