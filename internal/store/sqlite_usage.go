package store

import (
	"context"
	"strings"
	"time"
)

// qSQLiteUsage reads a tenant's usage in one statement, one snapshot:
// ?1 is the tenant, ?2 the creation time counted from, ?3 now. A queued
// generation is stored running, with its place in the queue.
var qSQLiteUsage = `
	SELECT
		(SELECT count(*) FROM generations WHERE tenant = ?1 AND state IN ('running', 'waiting') AND queue_pos IS NULL),
		(SELECT count(*) FROM generations WHERE tenant = ?1 AND queue_pos IS NOT NULL),
		(SELECT count(*) FROM paused_generations WHERE tenant = ?1 AND expires_at > ?3),
		(SELECT count(*) FROM generations WHERE tenant = ?1 AND created_at >= ?2),
		(SELECT count(*) FROM threads t WHERE t.tenant = ?1 AND ` + sqliteThreadLiveAt3 + `),
		(SELECT coalesce(max(t.item_count), 0) FROM threads t WHERE t.tenant = ?1 AND ` + sqliteThreadLiveAt3 + `)`

// sqliteThreadLiveAt3 is sqliteThreadLive with its time bound to ?3, for
// a statement whose parameters are numbered.
var sqliteThreadLiveAt3 = strings.ReplaceAll(sqliteThreadLive, "?", "?3")

func (s *SQLite) Usage(ctx context.Context, tenant string, since, now time.Time) (TenantUsage, error) {
	var u TenantUsage
	err := s.db.QueryRowContext(ctx, qSQLiteUsage, tenant, since.UnixMilli(), now.UnixMilli()).
		Scan(&u.Running, &u.Queued, &u.Paused, &u.CreatedSince, &u.Threads, &u.LargestThread)
	if err != nil {
		return TenantUsage{}, unavailable(err)
	}
	return u, nil
}
