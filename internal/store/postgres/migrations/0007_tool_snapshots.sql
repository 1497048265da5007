-- A workflow resumes against the tool revisions it started with, so a tool
-- updated between a crash and the resume does not change what the
-- workflow's recorded steps mean. tool_revisions is the revision of each
-- tool the workflow's program was compiled with, by tool name; workflows
-- started before it was recorded have none and resume against the current
-- revisions.
ALTER TABLE workflows ADD COLUMN tool_revisions jsonb NOT NULL DEFAULT '{}';

-- The revision a tool update replaces, as it was: the tool's columns and
-- its operations (a JSON array of tool.Operation). Written by the update,
-- never on the invoke path; an update drops the older snapshots of the tool
-- that no running or waiting workflow started with, and a delete drops all.
CREATE TABLE tool_snapshots (
	id                  text        NOT NULL,
	tenant              text        NOT NULL,
	name                text        NOT NULL,
	type                text        NOT NULL,
	spec_url            text        NOT NULL,
	endpoint_url        text        NOT NULL,
	auth                jsonb       NOT NULL,
	policy_class        text        NOT NULL,
	side_effects        jsonb       NOT NULL,
	idempotency_support boolean     NOT NULL,
	spec_sha256         text        NOT NULL,
	revision            integer     NOT NULL,
	operation_count     integer     NOT NULL,
	base_url            text        NOT NULL,
	spec_token_url      text        NOT NULL,
	indexed_at          timestamptz NOT NULL,
	created_at          timestamptz NOT NULL,
	updated_at          timestamptz NOT NULL,
	operations          json        NOT NULL,
	PRIMARY KEY (tenant, id, revision)
);
CREATE INDEX tool_snapshots_name ON tool_snapshots (tenant, name, revision);
