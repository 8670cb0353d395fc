-- The replicas whose liveness the others can ask (Generations.Attend),
-- one row per replica id, from its Attend until its attendance closes or,
-- once it has died, until an adopter has taken its generations. The row
-- says only that the replica holds a liveness lock (a session-level
-- advisory lock, which ends with its session); a replica of an agentd
-- from before this table is never listed, and its generations are adopted
-- once their leases lapse.
CREATE TABLE replicas (
	id text PRIMARY KEY
);
