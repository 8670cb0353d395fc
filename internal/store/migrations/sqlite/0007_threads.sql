-- Threads: the conversations agentd remembers, per tenant, each an
-- ordered list of items that the generations started on it append to as
-- they end. Times are unix milliseconds.
CREATE TABLE threads (
	tenant     TEXT    NOT NULL,
	id         TEXT    NOT NULL,
	created_at INTEGER NOT NULL,
	updated_at INTEGER NOT NULL, -- the last append, update, or change of the active generation
	expires_at INTEGER,          -- NULL: kept while it changes (SweepThreads' idleBefore)
	item_count INTEGER NOT NULL, -- the next item's n
	active     TEXT    NOT NULL, -- the generation that holds it; '' for none
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
	tenant    TEXT NOT NULL,
	thread_id TEXT NOT NULL,
	key       TEXT NOT NULL,
	value     TEXT NOT NULL,
	PRIMARY KEY (tenant, thread_id, key),
	FOREIGN KEY (tenant, thread_id) REFERENCES threads (tenant, id) ON DELETE CASCADE
) WITHOUT ROWID;
CREATE INDEX thread_metadata_by_entry ON thread_metadata (tenant, key, value, thread_id);

-- A thread's items, one row per message, numbered from 0, written once
-- (by CreateThread, a fork, or the Finish of the generation that holds
-- the thread) and never rewritten. data is the message as the caller
-- encodes it (sealed), opaque to the store; generation_id is the
-- generation that appended it, '' for none. A rowid table, unlike
-- generation_items: an item of 2 KiB fits in a table's leaf page, where
-- a WITHOUT ROWID table keeps under 500 bytes of it in its leaf and the
-- rest in an overflow page of its own, twice the pages to store and read
-- (for the same time to read a thread, measured).
CREATE TABLE thread_items (
	tenant        TEXT    NOT NULL,
	thread_id     TEXT    NOT NULL,
	n             INTEGER NOT NULL,
	item_id       TEXT    NOT NULL,
	generation_id TEXT    NOT NULL,
	created_at    INTEGER NOT NULL,
	data          BLOB    NOT NULL,
	PRIMARY KEY (tenant, thread_id, n),
	FOREIGN KEY (tenant, thread_id) REFERENCES threads (tenant, id) ON DELETE CASCADE
);

-- The thread a generation runs on ('' for none) and the number of its
-- items the generation's conversation starts with; its place in the
-- thread's queue while it waits for the thread (NULL when it does not),
-- and whether a start on the thread interrupted it. A queued generation
-- is stored running (the state's CHECK cannot change) but with its place
-- in the queue, no owner, epoch 0, and a lease that expires at the end
-- of time: neither Acquire nor Adopt takes it until the store promotes
-- it, releasing its lease at the promotion's time.
ALTER TABLE generations ADD COLUMN thread_id   TEXT    NOT NULL DEFAULT '';
ALTER TABLE generations ADD COLUMN thread_base INTEGER NOT NULL DEFAULT 0;
ALTER TABLE generations ADD COLUMN queue_pos   INTEGER;
ALTER TABLE generations ADD COLUMN interrupted INTEGER NOT NULL DEFAULT 0;
-- A thread's generations (DeleteThread), and its queue in order.
CREATE INDEX generations_by_thread ON generations (tenant, thread_id, queue_pos) WHERE thread_id <> '';
-- Interrupted: the live ones whose owners should cancel them, few.
CREATE INDEX generations_interrupted ON generations (tenant, id) WHERE interrupted = 1 AND finished_at IS NULL;

-- The input of a generation started on a thread with on_failure
-- KEEP_INPUT (its request's messages, as the thread items the caller
-- sealed), in order from 0: what ExpirePaused appends to the thread for
-- it when its pause runs out while it holds the thread (its Finish
-- appends what its caller gives). Removed with the generation.
CREATE TABLE thread_inputs (
	tenant        TEXT    NOT NULL,
	generation_id TEXT    NOT NULL,
	n             INTEGER NOT NULL,
	item_id       TEXT    NOT NULL,
	data          BLOB    NOT NULL,
	PRIMARY KEY (tenant, generation_id, n),
	FOREIGN KEY (tenant, generation_id) REFERENCES generations (tenant, id) ON DELETE CASCADE
);
