-- A tool's limits and per-operation limits (SPEC §4 "Protecting the
-- backing APIs"), as one JSON object {limits, operation_limits}; kept in
-- snapshots too, so a workflow on an earlier revision calls under its limits.
ALTER TABLE tools ADD COLUMN limits jsonb NOT NULL DEFAULT '{}'::jsonb;
ALTER TABLE tool_snapshots ADD COLUMN limits jsonb NOT NULL DEFAULT '{}'::jsonb;
