-- What a live generation waits for from a person, and who decided it.
--
-- The generation's start, for the inbox's filters and its lines: who
-- started it (the principal's name), for whom (its end user), and on
-- which provider and model. Set when it is created; '' for one created
-- before these columns.
ALTER TABLE generations ADD COLUMN started_by TEXT NOT NULL DEFAULT '';
ALTER TABLE generations ADD COLUMN end_user   TEXT NOT NULL DEFAULT '';
ALTER TABLE generations ADD COLUMN provider   TEXT NOT NULL DEFAULT '';
ALTER TABLE generations ADD COLUMN model      TEXT NOT NULL DEFAULT '';

-- The requests a live generation waits for (approvals, authorizations,
-- inputs, function calls), one row per request, replaced by the
-- generation's owner with the write that changes them (a checkpoint
-- under its lease) and dropped when it finishes. data is the request as
-- the caller encodes it (sealed), opaque to the store. Times are unix
-- milliseconds.
CREATE TABLE pending_requests (
	tenant        TEXT    NOT NULL,
	generation_id TEXT    NOT NULL,
	request_id    TEXT    NOT NULL,
	kind          TEXT    NOT NULL,
	state         TEXT    NOT NULL CHECK (state IN ('waiting', 'paused')),
	server_name   TEXT    NOT NULL,
	tool_name     TEXT    NOT NULL,
	requested_at  INTEGER NOT NULL,
	expires_at    INTEGER NOT NULL,
	data          BLOB    NOT NULL,
	PRIMARY KEY (tenant, generation_id, request_id),
	FOREIGN KEY (tenant, generation_id) REFERENCES generations (tenant, id) ON DELETE CASCADE
) WITHOUT ROWID;
-- ListPending: a tenant's, newest first.
CREATE INDEX pending_requests_by_time ON pending_requests (tenant, requested_at, generation_id, request_id);

-- The decision of a pending request, written once: the first writer of
-- (tenant, generation_id, request_id) wins, on any replica, and the row
-- stays, naming who decided, until the generation is swept. data is the
-- answer as the caller encodes it (sealed), opaque to the store.
CREATE TABLE generation_decisions (
	tenant        TEXT    NOT NULL,
	generation_id TEXT    NOT NULL,
	request_id    TEXT    NOT NULL,
	kind          TEXT    NOT NULL,
	decided_by    TEXT    NOT NULL,
	decided_at    INTEGER NOT NULL,
	data          BLOB    NOT NULL,
	PRIMARY KEY (tenant, generation_id, request_id),
	FOREIGN KEY (tenant, generation_id) REFERENCES generations (tenant, id) ON DELETE CASCADE
) WITHOUT ROWID;
