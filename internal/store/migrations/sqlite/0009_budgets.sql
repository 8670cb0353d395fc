-- Budgets: what a tenant's generations, API keys and end users may
-- spend, and what they have spent, shared by every replica. Times are
-- unix milliseconds.

-- The budgets set through the admin API. spec is the server's encoding of
-- the budget, opaque to the store.
CREATE TABLE budgets (
	tenant     TEXT    NOT NULL,
	name       TEXT    NOT NULL,
	spec       BLOB    NOT NULL,
	updated_at INTEGER NOT NULL,
	PRIMARY KEY (tenant, name)
);

-- A budget subject's spending (subject: an API key, an end user; '' for
-- the tenant's whole) per bucket: the period's start for a calendar
-- period, the hour for a rolling window, whose span sums several. The
-- primary key serves a span's sum (a subject's buckets) and DeleteBudget.
CREATE TABLE budget_counters (
	tenant  TEXT    NOT NULL,
	budget  TEXT    NOT NULL,
	subject TEXT    NOT NULL,
	bucket  INTEGER NOT NULL,
	tokens  INTEGER NOT NULL,
	nanos   INTEGER NOT NULL,
	PRIMARY KEY (tenant, budget, subject, bucket)
) WITHOUT ROWID;
-- SweepSpending: the buckets before its time.
CREATE INDEX budget_counters_by_bucket ON budget_counters (bucket);

-- The reservations of model calls under way: a row per charge (n, its
-- index in the reservation), counted in the spending of its subject's
-- spans that hold its bucket until the call settles or it expires.
-- Settle ends a reservation by its id (the primary key). They are few
-- (the calls under way, and those that died until the sweep), so
-- SweepSpending reads them all rather than keep an index of expiries.
CREATE TABLE budget_reservations (
	id         TEXT    NOT NULL,
	n          INTEGER NOT NULL,
	tenant     TEXT    NOT NULL,
	budget     TEXT    NOT NULL,
	subject    TEXT    NOT NULL,
	bucket     INTEGER NOT NULL,
	tokens     INTEGER NOT NULL,
	nanos      INTEGER NOT NULL,
	expires_at INTEGER NOT NULL,
	PRIMARY KEY (id, n)
) WITHOUT ROWID;
-- Reserve's and Settle's sums of a subject's span, DeleteBudget.
CREATE INDEX budget_reservations_by_subject ON budget_reservations (tenant, budget, subject, bucket);

-- The usage ledger: what the model calls of a tenant's API key and end
-- user used in an hour (its start), priced in one currency ('' where
-- none was priced). unpriced counts the calls whose cost was not wholly
-- known. The primary key leads with the key and the hour, for SumUsage
-- of one key.
CREATE TABLE usage_ledger (
	tenant      TEXT    NOT NULL,
	api_key     TEXT    NOT NULL,
	hour        INTEGER NOT NULL,
	end_user    TEXT    NOT NULL,
	currency    TEXT    NOT NULL,
	calls       INTEGER NOT NULL,
	input       INTEGER NOT NULL,
	output      INTEGER NOT NULL,
	cache_read  INTEGER NOT NULL,
	cache_write INTEGER NOT NULL,
	nanos       INTEGER NOT NULL,
	unpriced    INTEGER NOT NULL,
	PRIMARY KEY (tenant, api_key, hour, end_user, currency)
) WITHOUT ROWID;
-- SumUsage of a tenant's whole, and of one end user.
CREATE INDEX usage_ledger_by_hour     ON usage_ledger (tenant, hour);
CREATE INDEX usage_ledger_by_end_user ON usage_ledger (tenant, end_user, hour);
-- SweepSpending: the hours before its time.
CREATE INDEX usage_ledger_sweep ON usage_ledger (hour);
