-- The conversation of a durable generation, one row per message, each
-- written once when the generation adds it: the checkpoint says how many
-- of them the conversation has, instead of copying it. Numbered by the
-- writer from 0; an item is never rewritten. WITHOUT ROWID: the rows are
-- found by their key alone, and a write touches one b-tree, not two.
CREATE TABLE generation_items (
	tenant        TEXT    NOT NULL,
	generation_id TEXT    NOT NULL,
	n             INTEGER NOT NULL,
	data          BLOB    NOT NULL,
	PRIMARY KEY (tenant, generation_id, n),
	FOREIGN KEY (tenant, generation_id) REFERENCES generations (tenant, id) ON DELETE CASCADE
) WITHOUT ROWID;

-- The agent a live generation runs, as the caller encodes it (sealed):
-- written when the generation is created and when the caller seals it
-- again, not with every checkpoint (a row of generations is rewritten
-- whole by every checkpoint, and the agent may run to kilobytes), and
-- dropped when it finishes.
CREATE TABLE generation_agents (
	tenant        TEXT    NOT NULL,
	generation_id TEXT    NOT NULL,
	data          BLOB    NOT NULL,
	PRIMARY KEY (tenant, generation_id),
	FOREIGN KEY (tenant, generation_id) REFERENCES generations (tenant, id) ON DELETE CASCADE
) WITHOUT ROWID;
