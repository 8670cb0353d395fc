-- Paused generations, one record per tenant and generation id. IF NOT
-- EXISTS: an agentd.db written before migrations existed has this table
-- already, in exactly this shape, and keeps its records.
CREATE TABLE IF NOT EXISTS paused_generations (
	tenant     TEXT    NOT NULL,
	id         TEXT    NOT NULL,
	version    INTEGER NOT NULL,
	data       BLOB    NOT NULL,
	expires_at INTEGER NOT NULL, -- unix milliseconds
	claimed_at INTEGER,          -- unix milliseconds; NULL while unclaimed
	PRIMARY KEY (tenant, id)
);
CREATE INDEX IF NOT EXISTS paused_generations_expiry ON paused_generations (expires_at);
