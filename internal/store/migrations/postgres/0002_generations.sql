-- Durable generations (X-G3), one record per tenant and generation id
-- from its start, with the lease of the replica that runs it; and their
-- event logs (X-G2). Times are kept to the millisecond, as in SQLite.
CREATE TABLE generations (
	tenant         text        NOT NULL,
	id             text        NOT NULL,
	state          text        NOT NULL CHECK (state IN ('running', 'waiting', 'paused', 'completed', 'failed', 'cancelled')),
	owner          text        NOT NULL, -- the lease holder's replica id; '' once released
	epoch          bigint      NOT NULL, -- grows by one on every acquisition; fences every write
	lease_expires  timestamptz NOT NULL, -- for a released lease, when it was released
	version        bigint      NOT NULL, -- checkpoints written
	checkpoint     bytea       NOT NULL,
	checkpoint_seq bigint      NOT NULL, -- the log's last seq when the checkpoint was written
	last_seq       bigint      NOT NULL, -- the log's last seq (0: empty)
	result         bytea,                -- NULL while live
	created_at     timestamptz NOT NULL,
	updated_at     timestamptz NOT NULL,
	finished_at    timestamptz,          -- NULL while live
	PRIMARY KEY (tenant, id)
);
-- List: a tenant's, newest first.
CREATE INDEX generations_by_creation ON generations (tenant, created_at, id);
-- Adopt: the leases that lapse first, of generations someone should run.
CREATE INDEX generations_adoptable ON generations (lease_expires) WHERE state IN ('running', 'waiting');
-- ExpirePaused: the paused ones, few among the rest.
CREATE INDEX generations_paused ON generations (tenant, id) WHERE state = 'paused';
-- Sweep.
CREATE INDEX generations_finished ON generations (finished_at) WHERE finished_at IS NOT NULL;

CREATE TABLE generation_events (
	tenant        text   NOT NULL,
	generation_id text   NOT NULL,
	seq           bigint NOT NULL,
	kind          text   NOT NULL,
	data          bytea  NOT NULL,
	PRIMARY KEY (tenant, generation_id, seq),
	FOREIGN KEY (tenant, generation_id) REFERENCES generations (tenant, id) ON DELETE CASCADE
);
