-- Tool drift (SPEC §4 "Change safety"): each refresh of a tool's
-- description that differed from the operations indexed, numbered n per
-- tool. status is applied, pending (a breaking diff waiting for its apply)
-- or superseded (a pending one a later refresh replaced); diff is the
-- structural diff as JSON; operations is the new description's operations
-- (a JSON array of tool.Operation) while pending, '[]' otherwise; the spec
-- columns are what the tool takes from the description on apply.
CREATE TABLE tool_refreshes (
	tenant         TEXT    NOT NULL,
	tool_id        TEXT    NOT NULL,
	n              INTEGER NOT NULL,
	status         TEXT    NOT NULL,
	base_revision  INTEGER NOT NULL,
	tool_revision  INTEGER NOT NULL DEFAULT 0,
	diff           TEXT    NOT NULL,
	spec_sha256    TEXT    NOT NULL,
	base_url       TEXT    NOT NULL,
	spec_token_url TEXT    NOT NULL,
	operations     TEXT    NOT NULL,
	created_at     TEXT    NOT NULL,
	applied_at     TEXT    NOT NULL DEFAULT '',
	PRIMARY KEY (tenant, tool_id, n)
);
