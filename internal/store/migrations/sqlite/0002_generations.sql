-- Durable generations (X-G3), one record per tenant and generation id
-- from its start, with the lease of the replica that runs it; and their
-- event logs (X-G2). Times are unix milliseconds.
CREATE TABLE generations (
	tenant         TEXT    NOT NULL,
	id             TEXT    NOT NULL,
	state          TEXT    NOT NULL CHECK (state IN ('running', 'waiting', 'paused', 'completed', 'failed', 'cancelled')),
	owner          TEXT    NOT NULL, -- the lease holder's replica id; '' once released
	epoch          INTEGER NOT NULL, -- grows by one on every acquisition; fences every write
	lease_expires  INTEGER NOT NULL, -- for a released lease, when it was released
	version        INTEGER NOT NULL, -- checkpoints written
	checkpoint     BLOB    NOT NULL,
	checkpoint_seq INTEGER NOT NULL, -- the log's last seq when the checkpoint was written
	last_seq       INTEGER NOT NULL, -- the log's last seq (0: empty)
	result         BLOB,             -- NULL while live
	created_at     INTEGER NOT NULL,
	updated_at     INTEGER NOT NULL,
	finished_at    INTEGER,          -- NULL while live
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
	tenant        TEXT    NOT NULL,
	generation_id TEXT    NOT NULL,
	seq           INTEGER NOT NULL,
	kind          TEXT    NOT NULL,
	data          BLOB    NOT NULL,
	PRIMARY KEY (tenant, generation_id, seq),
	FOREIGN KEY (tenant, generation_id) REFERENCES generations (tenant, id) ON DELETE CASCADE
);
