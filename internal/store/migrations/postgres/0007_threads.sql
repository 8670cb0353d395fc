-- Threads: the conversations agentd remembers, per tenant, each an
-- ordered list of items that the generations started on it append to as
-- they end. Times are kept to the millisecond, as in SQLite.
CREATE TABLE threads (
	tenant     text        NOT NULL,
	id         text        NOT NULL,
	created_at timestamptz NOT NULL,
	updated_at timestamptz NOT NULL, -- the last append, update, or change of the active generation
	expires_at timestamptz,          -- NULL: kept while it changes (SweepThreads' idleBefore)
	item_count bigint      NOT NULL, -- the next item's n
	active     text        NOT NULL, -- the generation that holds it; '' for none
	PRIMARY KEY (tenant, id)
);
-- ListThreads: a tenant's, newest first.
CREATE INDEX threads_by_creation ON threads (tenant, created_at, id);
-- SweepThreads: those that expire, and those without an expiry by their last change.
CREATE INDEX threads_expiry ON threads (expires_at) WHERE expires_at IS NOT NULL;
CREATE INDEX threads_idle ON threads (updated_at) WHERE expires_at IS NULL;

-- A thread's metadata, one row per entry. ListThreads keeps the threads
-- that have every entry asked for, each found by its key and value.
CREATE TABLE thread_metadata (
	tenant    text NOT NULL,
	thread_id text NOT NULL,
	key       text NOT NULL,
	value     text NOT NULL,
	PRIMARY KEY (tenant, thread_id, key),
	FOREIGN KEY (tenant, thread_id) REFERENCES threads (tenant, id) ON DELETE CASCADE
);
CREATE INDEX thread_metadata_by_entry ON thread_metadata (tenant, key, value, thread_id);

-- A thread's items, one row per message, numbered from 0, written once
-- (by CreateThread, a fork, or the Finish of the generation that holds
-- the thread) and never rewritten. data is the message as the caller
-- encodes it (sealed), opaque to the store; generation_id is the
-- generation that appended it, '' for none.
CREATE TABLE thread_items (
	tenant        text        NOT NULL,
	thread_id     text        NOT NULL,
	n             bigint      NOT NULL,
	item_id       text        NOT NULL,
	generation_id text        NOT NULL,
	created_at    timestamptz NOT NULL,
	data          bytea       NOT NULL,
	PRIMARY KEY (tenant, thread_id, n),
	FOREIGN KEY (tenant, thread_id) REFERENCES threads (tenant, id) ON DELETE CASCADE
);

-- The thread a generation runs on ('' for none) and the number of its
-- items the generation's conversation starts with; its place in the
-- thread's queue while it waits for the thread (NULL when it does not),
-- and whether a start on the thread interrupted it. A queued generation
-- is stored running, as in SQLite (whose state's CHECK cannot change),
-- but with its place in the queue, no owner, epoch 0, and a lease that
-- expires at the end of time: neither Acquire nor Adopt takes it until
-- the store promotes it, releasing its lease at the promotion's time.
ALTER TABLE generations
	ADD COLUMN thread_id   text    NOT NULL DEFAULT '',
	ADD COLUMN thread_base bigint  NOT NULL DEFAULT 0,
	ADD COLUMN queue_pos   bigint,
	ADD COLUMN interrupted boolean NOT NULL DEFAULT false;
-- A thread's generations (DeleteThread), and its queue in order.
CREATE INDEX generations_by_thread ON generations (tenant, thread_id, queue_pos) WHERE thread_id <> '';
-- Interrupted: the live ones whose owners should cancel them, few.
CREATE INDEX generations_interrupted ON generations (tenant, id) WHERE interrupted AND finished_at IS NULL;

-- The input of a generation started on a thread with on_failure
-- KEEP_INPUT (its request's messages, as the thread items the caller
-- sealed), in order from 0: what ExpirePaused appends to the thread for
-- it when its pause runs out while it holds the thread (its Finish
-- appends what its caller gives). Removed with the generation.
CREATE TABLE thread_inputs (
	tenant        text   NOT NULL,
	generation_id text   NOT NULL,
	n             bigint NOT NULL,
	item_id       text   NOT NULL,
	data          bytea  NOT NULL,
	PRIMARY KEY (tenant, generation_id, n),
	FOREIGN KEY (tenant, generation_id) REFERENCES generations (tenant, id) ON DELETE CASCADE
);
