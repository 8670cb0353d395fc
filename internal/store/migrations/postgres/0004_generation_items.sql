-- The conversation of a durable generation, one row per message, each
-- written once when the generation adds it: the checkpoint says how many
-- of them the conversation has, instead of copying it. Numbered by the
-- writer from 0; an item is never rewritten.
CREATE TABLE generation_items (
	tenant        text   NOT NULL,
	generation_id text   NOT NULL,
	n             bigint NOT NULL,
	data          bytea  NOT NULL,
	PRIMARY KEY (tenant, generation_id, n),
	FOREIGN KEY (tenant, generation_id) REFERENCES generations (tenant, id) ON DELETE CASCADE
);

-- The agent a live generation runs, as the caller encodes it (sealed):
-- written when the generation is created and when the caller seals it
-- again, not with every checkpoint (each rewrites its row of generations,
-- and the agent may run to kilobytes), and dropped when it finishes.
CREATE TABLE generation_agents (
	tenant        text  NOT NULL,
	generation_id text  NOT NULL,
	data          bytea NOT NULL,
	PRIMARY KEY (tenant, generation_id),
	FOREIGN KEY (tenant, generation_id) REFERENCES generations (tenant, id) ON DELETE CASCADE
);
