-- A workflow resumes against the tool revisions it started with, so a tool
-- updated between a crash and the resume does not change what the
-- workflow's recorded steps mean. tool_revisions is the revision of each
-- tool the workflow's program was compiled with, by tool name; workflows
-- started before it was recorded have none and resume against the current
-- revisions.
ALTER TABLE workflows ADD COLUMN tool_revisions TEXT NOT NULL DEFAULT '{}';

-- The revision a tool update replaces, as it was: the tool's columns and
-- its operations (a JSON array of tool.Operation). Written by the update,
-- never on the invoke path; an update drops the older snapshots of the tool
-- that no running or waiting workflow started with, and a delete drops all.
CREATE TABLE tool_snapshots (
	id                  TEXT    NOT NULL,
	tenant              TEXT    NOT NULL,
	name                TEXT    NOT NULL,
	type                TEXT    NOT NULL,
	spec_url            TEXT    NOT NULL,
	endpoint_url        TEXT    NOT NULL,
	auth                TEXT    NOT NULL,
	policy_class        TEXT    NOT NULL,
	side_effects        TEXT    NOT NULL,
	idempotency_support INTEGER NOT NULL,
	spec_sha256         TEXT    NOT NULL,
	revision            INTEGER NOT NULL,
	operation_count     INTEGER NOT NULL,
	base_url            TEXT    NOT NULL,
	spec_token_url      TEXT    NOT NULL,
	indexed_at          TEXT    NOT NULL,
	created_at          TEXT    NOT NULL,
	updated_at          TEXT    NOT NULL,
	operations          TEXT    NOT NULL,
	PRIMARY KEY (tenant, id, revision)
);
CREATE INDEX tool_snapshots_name ON tool_snapshots (tenant, name, revision);
