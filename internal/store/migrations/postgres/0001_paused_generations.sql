-- Paused generations, one record per tenant and generation id. Times are
-- kept to the millisecond, as in SQLite.
CREATE TABLE paused_generations (
	tenant     text        NOT NULL,
	id         text        NOT NULL,
	version    bigint      NOT NULL,
	data       bytea       NOT NULL,
	expires_at timestamptz NOT NULL,
	claimed_at timestamptz,          -- NULL while unclaimed
	PRIMARY KEY (tenant, id)
);
CREATE INDEX paused_generations_expiry ON paused_generations (expires_at);
