-- What a live generation waits for from a person, and who decided it.
--
-- The generation's start, for the inbox's filters and its lines: who
-- started it (the principal's name), for whom (its end user), and on
-- which provider and model. Set when it is created; '' for one created
-- before these columns.
ALTER TABLE generations
	ADD COLUMN started_by text NOT NULL DEFAULT '',
	ADD COLUMN end_user   text NOT NULL DEFAULT '',
	ADD COLUMN provider   text NOT NULL DEFAULT '',
	ADD COLUMN model      text NOT NULL DEFAULT '';

-- The requests a live generation waits for (approvals, authorizations,
-- inputs, function calls), one row per request, replaced by the
-- generation's owner with the write that changes them (a checkpoint
-- under its lease) and dropped when it finishes. data is the request as
-- the caller encodes it (sealed), opaque to the store.
CREATE TABLE pending_requests (
	tenant        text        NOT NULL,
	generation_id text        NOT NULL,
	request_id    text        NOT NULL,
	kind          text        NOT NULL,
	state         text        NOT NULL CHECK (state IN ('waiting', 'paused')),
	server_name   text        NOT NULL,
	tool_name     text        NOT NULL,
	requested_at  timestamptz NOT NULL,
	expires_at    timestamptz NOT NULL,
	data          bytea       NOT NULL,
	PRIMARY KEY (tenant, generation_id, request_id),
	FOREIGN KEY (tenant, generation_id) REFERENCES generations (tenant, id) ON DELETE CASCADE
);
-- ListPending: a tenant's, newest first.
CREATE INDEX pending_requests_by_time ON pending_requests (tenant, requested_at, generation_id, request_id);

-- The decision of a pending request, written once: the first writer of
-- (tenant, generation_id, request_id) wins, on any replica, and the row
-- stays, naming who decided, until the generation is swept. data is the
-- answer as the caller encodes it (sealed), opaque to the store.
CREATE TABLE generation_decisions (
	tenant        text        NOT NULL,
	generation_id text        NOT NULL,
	request_id    text        NOT NULL,
	kind          text        NOT NULL,
	decided_by    text        NOT NULL,
	decided_at    timestamptz NOT NULL,
	data          bytea       NOT NULL,
	PRIMARY KEY (tenant, generation_id, request_id),
	FOREIGN KEY (tenant, generation_id) REFERENCES generations (tenant, id) ON DELETE CASCADE
);
