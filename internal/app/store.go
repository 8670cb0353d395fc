package app

import (
	"context"
	"path/filepath"
	"time"

	"github.com/agentd/agentd/internal/config"
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
