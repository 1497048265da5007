-- Archived agents and versions (SPEC §4 "Data lifecycle and governance"):
-- archived_at is NULL while live. An archived version keeps its row for
-- history; its agent_version_tools and agent_version_models rows go, so it
-- no longer holds its tools and models.
ALTER TABLE agent_versions ADD COLUMN archived_at timestamptz;
ALTER TABLE agents ADD COLUMN archived_at timestamptz;

-- Revoked OAuth clients: the token endpoint refuses them and the token
-- verifier refuses their tokens (through a cache of at most 30 s).
CREATE TABLE revoked_clients (
	client_id  text        NOT NULL PRIMARY KEY,
	tenant     text        NOT NULL,
	revoked_at timestamptz NOT NULL
);
