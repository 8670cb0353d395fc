package store

import (
	"context"
	"time"
)

// TenantUsage is what a tenant uses of its limits, as the store has it:
// counted over every replica that shares the store.
type TenantUsage struct {
	// Running counts its generations running or waiting on a client
	// (limits.max_concurrent_generations), Queued those queued behind
	// their threads.
	Running, Queued int64
	// Paused counts its pauses that have not expired (as Checkpoints.Count
	// does, for limits.max_paused_generations).
	Paused int64
	// CreatedSince counts its generations created at or after the time
	// asked for (beside limits.generations_per_minute).
	CreatedSince int64
	// Threads counts its threads that have not expired, or are held
	// (limits.max_threads), and LargestThread is the most items one of
	// them holds (beside limits.max_thread_items).
	Threads, LargestThread int64
}

// Usage reads tenants' usage. Safe for concurrent use.
type Usage interface {
	// Usage returns what tenant uses at now, counting the generations it
	// created at or after since. It only reads. A tenant the store knows
	// nothing of uses nothing.
	Usage(ctx context.Context, tenant string, since, now time.Time) (TenantUsage, error)
}
