-- ListGenerations' filters, and what a generation records for the
-- console: the W3C trace id of the call that created it ('' when it was
-- not traced, or was created before this column), and a cancel asked of
-- it (CancelGeneration) that its owner is to carry out, with the reason
-- given (NULL: none asked).
ALTER TABLE generations ADD COLUMN trace_id      TEXT NOT NULL DEFAULT '';
ALTER TABLE generations ADD COLUMN cancel_reason TEXT;

-- List narrowed by one of its filters: the newest first page of a tenant
-- seeks its start in the filter's index, rather than scanning the
-- tenant's generations newest first until a page of them matches (all of
-- them, for a filter that few match). A time range alone, or with the
-- states alone, is a range of generations_by_creation.
CREATE INDEX generations_by_provider ON generations (tenant, provider, created_at, id);
CREATE INDEX generations_by_model    ON generations (tenant, model, created_at, id);
CREATE INDEX generations_by_end_user ON generations (tenant, end_user, created_at, id);
CREATE INDEX generations_by_thread_created ON generations (tenant, thread_id, created_at, id) WHERE thread_id <> '';

-- Interrupted: the live ones whose owners should cancel them, interrupted
-- by a start on their thread or asked to cancel, few.
DROP INDEX generations_interrupted;
CREATE INDEX generations_interrupted ON generations (tenant, id)
	WHERE (interrupted = 1 OR cancel_reason IS NOT NULL) AND finished_at IS NULL;
