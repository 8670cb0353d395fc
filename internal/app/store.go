package app

import (
	"context"
	"log/slog"
	"path/filepath"
	"time"

	"go.opentelemetry.io/otel/metric"
	"google.golang.org/grpc"

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

// openStore opens the store that store.driver names: agentd.db in
// state_dir, or the PostgreSQL database of store.dsn; its operations are
// measured through mp.
func openStore(cfg config.Config, mp metric.MeterProvider) (store.Store, error) {
	ctx, cancel := context.WithTimeout(context.Background(), storeOpenTimeout)
	defer cancel()
	s, err := store.Open(ctx, store.Options{
		Driver:     cfg.Store.Driver,
		Path:       filepath.Join(cfg.StateDir, "agentd.db"),
		DSN:        cfg.Store.DSN,
		SweepEvery: storeSweepEvery,
	})
	if err != nil {
		return nil, err
	}
	return store.Instrument(s, mp), nil
}

// storeName says in logs which store agentd uses, never its DSN.
func storeName(cfg config.Config) string {
	if cfg.Store.Driver == config.StorePostgres {
		return "postgres"
	}
	return "sqlite " + filepath.Join(cfg.StateDir, "agentd.db")
}

// watchStore pings the store every interval until ctx ends, keeping the
// AgentService's health (and readiness) and storeGate in step with it:
// NOT_SERVING from the first ping that fails, SERVING again (unless a remote
// bridge is down, or agentd drains) from the first that passes. Each change is
// logged once.
func (a *Agent) watchStore(ctx context.Context, every time.Duration, name string, log *slog.Logger) {
	a.watches.Go(func() {
		watch(ctx, every, a.store.Ping, func(err error) {
			switch down := err != nil; {
			// The line first, as for the bridge (watchBridge).
			case down && !a.storeDown.Swap(true):
				log.Warn("the state store cannot be reached: the AgentService is NOT_SERVING and refuses generations until it answers",
					"store", name, "error", err)
				a.ready.setStoreDown(true)
			case !down && a.storeDown.Swap(false):
				log.Info("the state store answers again: the AgentService is SERVING, unless another dependency is down", "store", name)
				a.ready.setStoreDown(false)
			}
		})
	})
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
