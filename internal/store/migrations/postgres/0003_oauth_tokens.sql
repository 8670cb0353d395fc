-- The OAuth tokens agentd holds for MCP servers (X-M3), one per tenant,
-- end user and server. server is an opaque key (a hash of the server's
-- URL), never the URL; data is sealed by the caller, opaque to the store.
CREATE TABLE oauth_tokens (
	tenant     text        NOT NULL,
	end_user   text        NOT NULL,
	server     text        NOT NULL,
	data       bytea       NOT NULL,
	updated_at timestamptz NOT NULL,
	PRIMARY KEY (tenant, end_user, server)
);
-- DeleteTokens narrowed by server alone.
CREATE INDEX oauth_tokens_by_server ON oauth_tokens (tenant, server);
