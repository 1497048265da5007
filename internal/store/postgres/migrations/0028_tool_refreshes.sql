-- Tool drift (SPEC §4 "Change safety"): each refresh of a tool's
-- description that differed from the operations indexed, numbered n per
-- tool. status is applied, pending (a breaking diff waiting for its apply)
-- or superseded (a pending one a later refresh replaced); diff is the
-- structural diff; operations is the new description's operations (a JSON
-- array of tool.Operation) while pending, '[]' otherwise; the spec columns
-- are what the tool takes from the description on apply.
CREATE TABLE tool_refreshes (
	tenant         text        NOT NULL,
	tool_id        text        NOT NULL,
	n              integer     NOT NULL,
	status         text        NOT NULL,
	base_revision  integer     NOT NULL,
	tool_revision  integer     NOT NULL DEFAULT 0,
	diff           jsonb       NOT NULL,
	spec_sha256    text        NOT NULL,
	base_url       text        NOT NULL,
	spec_token_url text        NOT NULL,
	operations     jsonb       NOT NULL,
	created_at     timestamptz NOT NULL,
	applied_at     timestamptz,
	PRIMARY KEY (tenant, tool_id, n)
);
